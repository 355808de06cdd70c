"""Repeats one operation of one backend in this process, for a profiler.

    .bench-venvs/motedb/bin/python -m bench.orm.profile --test 3 --op D --seconds 10
    perf record -g -D 3000 -- .venv/bin/python -m bench.orm.profile --test 3 --op F --seconds 20

A run of the harness starts a process per operation (cold mode) or per backend, so a
profiler attached to it mostly sees interpreter start-up and setup. This brings one
store to the state the harness's warm mode times an operation in (the backend's
create(), then the operations before it, run by the harness's own Runner), then runs the
operation again and again for --seconds, each time as the harness does (prepared
untimed, a warm-up, the store restored, then timed), putting the rows back from a
snapshot after operations that change them. It prints how long the setup took (perf's
-D, in ms, skips it) and the median time per row of the timed runs.

Runs in an environment where the backend's packages import: the harness's
(.bench-venvs/<group>/bin/python) or, for MoteDB, the repository's .venv after `make
build`. The database goes to --db-dir (default .bench-tmp/orm-profile/<backend>).
"""

import argparse
import os
import shutil
import statistics
import sys
import time

from bench.orm import spec, worker

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHANGES_ROWS = set("ABCIJK")


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m bench.orm.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="motedb", help="a backend module id (default motedb)")
    p.add_argument("--test", type=int, choices=(1, 2, 3), default=3)
    p.add_argument("--op", choices=spec.OPS, required=True)
    p.add_argument("--large", action="store_true", help="on the large table (the harness's large-warm)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to repeat the operation")
    p.add_argument("--iterations", type=int, default=spec.ITERATIONS, help="N")
    p.add_argument("--batch", type=int, default=spec.BATCH_SIZE, help="BATCH_SIZE")
    p.add_argument("--db-dir", default=None)
    return p.parse_args(argv)


def copy_snapshot(path):
    """A copy of a backend's snapshot beside it (a file, or a directory: ObjectBox's)."""
    copy = path + ".copy"
    if os.path.isdir(path):
        shutil.copytree(path, copy)
    else:
        shutil.copyfile(path, copy)
    return copy


def main(argv=None):
    a = parse(argv)
    module = f"{a.backend}_backend"
    directory = a.db_dir or os.path.join(REPO, ".bench-tmp", "orm-profile", a.backend)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    job = {"backend": a.backend, "module": module, "test": a.test, "mode": "profile", "dir": directory,
           "n": a.iterations, "batch": a.batch, "seed": "profile-0", "large": a.large, "warm": True,
           "smoke": False, "run": 0, "timing": "seed", "ops": []}
    t0 = time.perf_counter()
    r = worker.Runner(job)
    b = r.b
    r.call(b.create)
    for op in spec.OPS[:spec.OPS.index(a.op)]:
        res = r.run_op(op, 0)
        if res.get("error"):
            sys.exit(f"setup: operation {op} failed: {res['error']}")
    r.call(b.open)
    keep = None
    if a.op in CHANGES_ROWS:  # (the harness's warm-up uses the backend's snapshot name)
        keep = os.path.join(directory, "profile-rows")
        os.replace(r.call(b.snapshot), keep)
    print(f"setup: {(time.perf_counter() - t0) * 1e3:.0f} ms "
          f"(test {a.test}{', large table' if a.large else ''}; {b.__class__.__module__})", flush=True)
    per_row, rows = [], None
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end or not per_row:
        res = r.run_op(a.op, 0)
        if res.get("error"):
            sys.exit(f"operation {a.op} failed: {res['error']}")
        rows = res["rows"]
        per_row.append(res["seconds"] / rows if rows else float("nan"))
        if keep:  # the rows as before (restore consumes the copy it is given)
            r.call(b.restore, copy_snapshot(keep))
    print(f"{a.op} {spec.OP_NAMES[a.op]}: {len(per_row)} runs of {rows} rows, "
          f"median {statistics.median(per_row) * 1e6:.2f} us per row", flush=True)
    r.call(b.close)
    shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
