"""Runs operations of one backend and test inside the backend's environment.

Invoked by the orchestrator as
    <group venv python> -m bench.orm.worker '<job json>'
and prints one line per operation, `@@RESULT {json}`, plus `@@INFO {json}` once.
Cold mode (sync backends): the orchestrator starts one worker per operation.
Async backends: one worker for all operations (one process, one event loop).

What is timed (README.md, "How it works"), with the seed's definitions (job "timing":
"seed", the default): only the persisting; objects are built before the timer;
gc.collect() + gc.freeze() right before it; time.perf_counter(). With "upstream"
(tortoise/orm-benchmarks' definitions, for side-by-side checks against its harness): the
objects of A, B and C are built inside the timer and the collector is left alone. Either
way, in cold mode the backend's connection/store open is inside the timer unless preparing
the operation already needed it (F, I, J, K load rows first), and the environment queries
(info()) run after the operations.
"""

import asyncio
import contextvars
import gc
import importlib
import json
import os
import sys
import time
import traceback

from bench.orm import spec


def emit(tag, obj):
    sys.stdout.write(f"@@{tag} {json.dumps(obj, default=str)}\n")
    sys.stdout.flush()


def new_event_loop():
    """uvloop's event loop, as upstream's bench.sh runs every async ORM (UVLOOP=1);
    asyncio's own with BENCH_ORM_UVLOOP=0."""
    if os.environ.get("BENCH_ORM_UVLOOP", "1") != "0":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class Build:
    """Objects to build for an insert: before the timer (seed) or inside it (upstream)."""

    def __init__(self, fn, values):
        self.fn = fn
        self.values = values


class Runner:
    def __init__(self, job):
        self.job = job
        self.n = job["n"]
        self.batch = job["batch"]
        self.large = job["large"]
        self.warm = job["warm"]
        self.smoke = job["smoke"]
        self.upstream_timing = job.get("timing", "seed") == "upstream"
        os.environ["BENCH_ORM_TEST"] = str(job["test"])
        os.environ["BENCH_ORM_DIR"] = job["dir"]
        if job.get("codegen") is not None:
            os.environ.setdefault("OBX_CODEGEN", "1" if job["codegen"] else "0")
        mod = importlib.import_module(f"bench.orm.backends.{job['module']}")
        self.b = mod.Backend(job["test"], job["dir"])
        self.is_async = self.b.KIND == "async"
        self.loop = new_event_loop() if self.is_async else None
        # One context for every coroutine, so context variables an ORM sets (e.g.
        # Tortoise's connections) persist from one call to the next.
        self.ctx = contextvars.copy_context()

    def call(self, fn, *args):
        if self.is_async:
            return self.loop.run_until_complete(self.loop.create_task(fn(*args), context=self.ctx))
        return fn(*args)

    def build(self, fn, values):
        """The objects to insert, or (upstream timing) a Build that timed() runs inside the timer."""
        return Build(fn, values) if self.upstream_timing else self.call(fn, values)

    def built(self, args):
        """args with each Build replaced by the objects it builds."""
        return tuple(self.call(a.fn, a.values) if isinstance(a, Build) else a for a in args)

    # --- one operation ---------------------------------------------------------------
    def prepare(self, op, wl):
        """Untimed: returns (function, args)."""
        b = self.b
        if op == "A":
            return b.insert_single, (self.build(b.new_objects, wl.insert_values(self.n)),)
        if op == "B":
            make = getattr(b, "new_batch_objects", b.new_objects)
            return b.insert_batch, (self.build(make, wl.insert_values(self.batch)),)
        if op == "C":
            return b.insert_bulk, (self.build(b.new_bulk, wl.insert_values(self.batch)),)
        if op in ("D", "G", "H"):
            fn = {"D": b.filter_large, "G": b.filter_dict, "H": b.filter_tuple}[op]
            return fn, (wl.filter_large_levels(),)
        if op == "E":
            return b.filter_small, (wl.filter_small_queries(),)
        if op == "F":
            return b.get, (wl.get_ids(self.call(b.all_ids)),)
        if op in ("I", "J", "K"):
            self.call(b.open)
            objs = self.call(b.load_all)
            if op == "K":
                return b.delete, (objs,)
            levels = wl.update_levels(len(objs))
            if op == "I":
                texts = [o.text + " Update" for o in objs]
                self.expected = {o.id: (lvl, t) for o, lvl, t in zip(objs, levels, texts)}
                return b.update_whole, (objs, levels, texts)
            self.expected = {o.id: (lvl, o.text) for o, lvl in zip(objs, levels)}
            return b.update_partial, (objs, levels)
        raise ValueError(op)

    def timed(self, fn, args, open_in_timer):
        """(rows, seconds, args as passed: Builds replaced by their objects)."""
        if not self.upstream_timing:
            gc.collect()
            gc.freeze()
        t0 = time.perf_counter()
        if open_in_timer:
            self.call(self.b.open)
        args = self.built(args)
        rows = self.call(fn, *args)
        t1 = time.perf_counter()
        if not self.upstream_timing:
            gc.unfreeze()
        return rows, t1 - t0, args

    def run_op(self, op, run_index):
        b = self.b
        meth = {"C": "insert_bulk", "G": "filter_dict", "H": "filter_tuple"}.get(op)
        if meth and getattr(b, meth, None) is None:
            return {"op": op, "skipped": "no bulk insert" if op == "C" else "no dict/tuple projection API"}
        wl = spec.Workload(self.job["seed"], op, self.n, self.batch)
        before = self.state() if self.smoke else None
        if self.warm:
            self.call(b.open)
            snap = self.call(b.snapshot)
            fn, args = self.prepare(op, wl)
            self.call(fn, *self.built(args))          # warm-up, untimed
            self.call(b.restore, snap)                # rows and id sequences as before
            os.sync()  # the restore's copies reach the disk now, not in the timed first commit
            wl = spec.Workload(self.job["seed"], op, self.n, self.batch)
        fn, args = self.prepare(op, wl)
        rows, secs, args = self.timed(fn, args, open_in_timer=not self.warm)
        if op in ("B", "C") and not self.large:
            self.call(b.delete_newest, self.batch - self.n)
        res = {"op": op, "rows": rows, "seconds": secs,
               "rows_per_s": (rows / secs) if secs > 0 else None}
        if self.smoke:
            res["check_errors"] = self.check(op, rows, before, args)
        return res

    # --- smoke checks (untimed) --------------------------------------------------------
    def state(self):
        counts = self.call(self.b.level_counts)
        return {int(k): int(v) for k, v in counts.items()}

    def check(self, op, rows, before, args):
        errs = []
        after = self.state()
        nb, na = sum(before.values()), sum(after.values())

        def expect(what, got, want):
            if got != want:
                errs.append(f"{op}: {what} = {got}, expected {want}")

        if op == "A":
            expect("rows", rows, self.n)
            expect("row count after", na, nb + self.n)
        elif op in ("B", "C"):
            expect("rows", rows, self.batch)
            expect("row count after", na, nb + (self.batch if self.large else self.n))
        elif op in ("D", "G", "H"):
            expect("rows", rows, 10 * nb)
        elif op == "E":
            want = sum(min(20, max(0, before.get(lvl, 0) - off)) for lvl, off in args[0])
            expect("rows", rows, want)
        elif op == "F":
            expect("rows", rows, 2 * self.n)
        elif op in ("I", "J"):
            expect("rows", rows, nb)
            want = self.expected
            fresh = self.call(self.b.check_rows)
            expect("row count after", len(fresh), nb)
            bad = [r for r in fresh if want.get(r[0]) != (r[1], r[2])]
            expect("rows not as chosen (id, level, text)", bad[:3], [])
        elif op == "K":
            expect("rows", rows, nb)
            expect("row count after", na, 0)
        if op not in ("A", "B", "C", "K"):
            expect("row count after (unchanged)", na, nb)
        return errs

    def main(self):
        job = self.job
        if job.get("create"):
            self.call(self.b.create)
        for op in job["ops"]:
            try:
                emit("RESULT", self.run_op(op, job.get("run", 0)))
            except Exception as e:  # report and go on with the next operation
                emit("RESULT", {"op": op, "error": f"{type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-4000:]})
        # After the operations: info() may open the connection (PRAGMA queries), which a cold
        # operation must pay inside its timer. The first process of a sequence (create) reports.
        if job.get("create"):
            emit("INFO", {"versions": self.call(self.b.versions), "info": self.call(self.b.info),
                          "bulk_sets_ids": self.b.BULK_SETS_IDS, "partial_update": self.b.PARTIAL_UPDATE,
                          "notes": list(self.b.NOTES), "kind": self.b.KIND,
                          "event_loop": type(self.loop).__module__ + "." + type(self.loop).__name__
                          if self.loop else None})
        self.call(self.b.close)
        if self.loop is not None:
            self.loop.close()


def main():
    job = json.loads(sys.argv[1])
    Runner(job).main()


if __name__ == "__main__":
    main()
