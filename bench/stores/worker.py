"""One engine, one workload, one process: runs the phases and writes what it measured as JSON.

    python -m bench.stores.worker --label SQLite --workload small --stores 10000 --root DIR --mode main --result F

mode main:   create/write/close every store (timed), space per store, warm page cache, open/query/close every
             store (timed; large: the query is the count query, also timed alone), verify what is read back.
mode memory: a fresh process opens (and queries) min(--memory-stores, --stores) existing stores and keeps them
             open: growth of Rss and Anonymous in /proc/self/smaps_rollup divided by the number held.

Progress goes as JSON lines to the original stdout (the engines' own output is sent to stderr).
"""

import argparse
import gc
import json
import os
import random
import resource
import shutil
import sys
import time
import traceback

from bench.common.loadgate import wait_until_quiet
from bench.common.stats import median, percentile

from . import backends
from .probes import probe_once, read_files, smaps_rollup
from .workload import Workload

PROBE_EVERY = 10  # create phase: one disk probe sample after every 10th store


class Progress:
    def __init__(self, fd):
        self.out = os.fdopen(fd, "w", buffering=1)
        self.last = 0.0

    def send(self, **msg):
        self.out.write(json.dumps(msg) + "\n")

    def step(self, phase, done, total):
        now = time.monotonic()
        if done == total or now - self.last >= 0.2:
            self.last = now
            self.send(type="progress", phase=phase, done=done, total=total)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def gate(args, progress, phase, gates):
    progress.send(type="phase", phase=phase + " (load gate)")
    w = wait_until_quiet(args.load_max, args.load_timeout, poll_s=2.0)
    g = {"max_load": w.max_load, "load_1m_before": round(w.before[0], 2), "load_1m_after": round(w.after[0], 2),
         "waited_s": round(w.waited_s, 1), "timed_out": w.timed_out}
    gates[phase] = g
    progress.send(type="gate", phase=phase, gate=g)


def query(engine, handle, large):
    """The query of open/query/close: read all objects (small) or count them (large). Returns (n, count_ns)."""
    if large:
        t = time.perf_counter_ns()
        n = engine.count(handle)
        return n, time.perf_counter_ns() - t
    objs = engine.read_all(handle)
    return len(objs), 0


def run_main(args, engine, workload, progress, result):
    n = args.stores
    large = workload.name == "large"
    expected = workload.objects
    stores_dir = os.path.join(args.root, "stores")
    os.makedirs(stores_dir, exist_ok=True)
    paths = [engine.store_path(stores_dir, i) for i in range(n)]
    errors = result["errors"]
    gates = result["gates"]

    # Warm-up (untimed, separate stores, deleted after): imports, lazy initialisation, first model sync.
    warm_dir = os.path.join(args.root, "warmup")
    os.makedirs(warm_dir, exist_ok=True)
    for i in range(args.warmup):
        p = engine.store_path(warm_dir, i)
        engine.create(p, engine.prepare(workload.rows(n + i)))
        h = engine.open(p)
        query(engine, h, large)
        engine.close(h)
    shutil.rmtree(warm_dir)

    # Phase 1: create, write all objects in one durable transaction, close. Every PROBE_EVERY-th store is
    # followed by one sample of the disk probe (create a file, write 4 KB, fsync it, fsync its directory) in a
    # directory beside the stores: the disk's speed moves from minute to minute on a shared machine, so the
    # create row is compared with the probe measured in the same minutes (environment.sync_probe, measured
    # once at the start of the run, is kept for reference).
    gate(args, progress, "create", gates)
    probe_dir = os.path.join(args.root, "probe")
    os.makedirs(probe_dir, exist_ok=True)
    probe_fd = os.open(probe_dir, os.O_RDONLY | os.O_DIRECTORY)
    block = os.urandom(4096)
    gc.collect()
    gc.freeze()
    create_ms, probe_ms = [], []
    t_phase = time.monotonic()
    for i, p in enumerate(paths):
        prepared = engine.prepare(workload.rows(i))
        t0 = time.perf_counter_ns()
        engine.create(p, prepared)
        t1 = time.perf_counter_ns()
        create_ms.append((t1 - t0) / 1e6)
        del prepared
        if i % PROBE_EVERY == PROBE_EVERY - 1:
            p0, _, p2 = probe_once(probe_fd, os.path.join(probe_dir, f"p{i}"), block)
            probe_ms.append((p2 - p0) / 1e6)
        progress.step("create", i + 1, n)
    result["phase_seconds"]["create"] = round(time.monotonic() - t_phase, 2)
    gc.unfreeze()
    os.close(probe_fd)
    shutil.rmtree(probe_dir)

    # Phase 2: space per store: all files of each store, apparent size and allocated blocks.
    progress.send(type="phase", phase="space")
    sizes, blocks, file_counts, dir_blocks = [], [], [], []
    all_files = []
    for p in paths:
        files = engine.store_files(p)
        all_files.extend(files)
        s = b = 0
        for f in files:
            st = os.stat(f)
            s += st.st_size
            b += st.st_blocks * 512
        sizes.append(s)
        blocks.append(b)
        file_counts.append(len(files))
        if engine.store_is_directory:
            dir_blocks.append(os.stat(p).st_blocks * 512)
    result["space"] = {
        "allocated_bytes_mean": sum(blocks) / n,
        "allocated_bytes_min": min(blocks),
        "allocated_bytes_max": max(blocks),
        "file_size_bytes_mean": sum(sizes) / n,
        "file_size_bytes_min": min(sizes),
        "file_size_bytes_max": max(sizes),
        "files_per_store": sorted(set(file_counts)),
        "file_names_example": sorted(os.path.relpath(f, os.path.dirname(paths[0]))
                                     for f in engine.store_files(paths[0])),
        "store_directory_blocks_bytes_mean": (sum(dir_blocks) / n) if dir_blocks else None,
    }

    # Warm page cache: read every file of every store once.
    progress.send(type="phase", phase="warm page cache")
    result["warm_cache_bytes_read"] = read_files(all_files)

    # Phase 3: open, query, close (in a shuffled order).
    gate(args, progress, "open_query_close", gates)
    order = list(range(n))
    random.Random(args.seed).shuffle(order)
    oqc_ms, count_ms = [], []
    gc.collect()
    gc.freeze()
    t_phase = time.monotonic()
    for k, i in enumerate(order):
        p = paths[i]
        t0 = time.perf_counter_ns()
        h = engine.open(p)
        got, count_ns = query(engine, h, large)
        engine.close(h)
        t1 = time.perf_counter_ns()
        del h
        oqc_ms.append((t1 - t0) / 1e6)
        if large:
            count_ms.append(count_ns / 1e6)
        if got != expected and len(errors) < 20:
            errors.append(f"store {i}: read {got} objects, expected {expected}")
        progress.step("open_query_close", k + 1, n)
    result["phase_seconds"]["open_query_close"] = round(time.monotonic() - t_phase, 2)
    gc.unfreeze()

    # Verify what is read back (untimed): all stores in smoke mode, else a sample.
    progress.send(type="phase", phase="verify")
    sample = range(n) if args.smoke else sorted(random.Random(args.seed + 1).sample(range(n), min(n, 20)))
    verified = 0
    for i in sample:
        h = engine.open(paths[i])
        rows = [tuple(engine.as_row(o)) for o in engine.read_all(h)]
        if large:
            c = engine.count(h)
            if c != expected and len(errors) < 20:
                errors.append(f"store {i}: count {c}, expected {expected}")
        engine.close(h)
        want = [tuple(r) for r in workload.rows(i)]
        if rows != want and len(errors) < 20:
            errors.append(f"store {i}: objects read back differ from those written ({len(rows)} read)")
        verified += 1
    result["verified_stores"] = verified

    result["samples"] = {"create_write_close_ms": create_ms, "open_query_close_ms": oqc_ms,
                         "create_probe_ms": probe_ms}
    summary = {
        "create_write_close_median_ms": median(create_ms),
        "open_query_close_median_ms": median(oqc_ms),
        "open_query_close_p99_ms": percentile(oqc_ms, 99),
        "space_per_store_bytes": result["space"]["allocated_bytes_mean"],
        # details (not rows of results.json)
        "create_write_close_p99_ms": percentile(create_ms, 99),
        "create_probe_median_ms": median(probe_ms) if probe_ms else None,
        "space_per_store_file_size_bytes": result["space"]["file_size_bytes_mean"],
    }
    if large:
        result["samples"]["count_query_ms"] = count_ms
        summary["count_query_median_ms"] = median(count_ms)
        summary["count_query_p99_ms"] = percentile(count_ms, 99)
    result["summary"] = summary


def run_memory(args, engine, workload, progress, result):
    large = workload.name == "large"
    expected = workload.objects
    stores_dir = os.path.join(args.root, "stores")
    m = min(args.memory_stores, args.stores)
    paths = [engine.store_path(stores_dir, i) for i in range(m)]
    errors = result["errors"]

    gate(args, progress, "memory", result["gates"])
    # Warm-up: the first open/query/close loads libraries and caches that are not per store.
    for _ in range(3):
        h = engine.open(paths[0])
        query(engine, h, large)
        engine.close(h)
        del h
    gc.collect()
    before = smaps_rollup()
    handles = []
    for k, p in enumerate(paths):
        h = engine.open(p)
        got, _ = query(engine, h, large)
        if got != expected and len(errors) < 20:
            errors.append(f"store {k}: read {got} objects, expected {expected}")
        handles.append(h)
        progress.step("memory", k + 1, m)
    gc.collect()
    after = smaps_rollup()
    progress.send(type="phase", phase="closing held stores")
    for h in handles:
        engine.close(h)
    handles.clear()
    growth = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    result["memory"] = {"stores_held_open": m, "before": before, "after": after, "growth": growth}
    result["summary"] = {
        "memory_per_store_rss_bytes": growth["Rss"] / m,
        "memory_per_store_anon_bytes": growth["Anonymous"] / m,
        "memory_per_store_pss_bytes": growth.get("Pss", 0) / m,
        "memory_stores_held_open": m,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.stores.worker")
    ap.add_argument("--label", required=True)
    ap.add_argument("--workload", choices=("small", "large"), required=True)
    ap.add_argument("--stores", type=int, required=True)
    ap.add_argument("--root", required=True, help="this engine's directory (stores/ below it)")
    ap.add_argument("--mode", choices=("main", "memory"), required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--memory-stores", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--load-max", type=float, default=1.0)
    ap.add_argument("--load-timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    # Progress goes to the original stdout; whatever else writes to stdout goes to stderr.
    progress = Progress(os.dup(1))
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    result = {
        "label": args.label, "workload": args.workload, "mode": args.mode, "stores": args.stores,
        "pid": os.getpid(), "gates": {}, "errors": [], "phase_seconds": {},
        "fd_limit": raise_fd_limit(),
    }
    try:
        workload = Workload(args.workload, seed=args.seed)
        options = dict(kv.split("=", 1) for kv in args.engine_option)
        os.makedirs(args.root, exist_ok=True)
        engine = backends.BY_LABEL[args.label].load(workload, args.root, options)
        result["engine"] = engine.describe()
        if args.mode == "main":
            run_main(args, engine, workload, progress, result)
        else:
            run_memory(args, engine, workload, progress, result)
        result["ok"] = not result["errors"]
    except Exception:
        result["ok"] = False
        result["errors"].append(traceback.format_exc())
        traceback.print_exc()
    with open(args.result, "w") as f:
        json.dump(result, f)
    progress.send(type="done", ok=result["ok"])
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
