"""One engine, one phase, one process: runs it and writes what it measured as JSON.

    python -m bench.vectors.worker --engine hnswlib --phase build --data X.npz --dir DIR --work DIR --result F

phase build:  build the index/store from the data set's vectors and tags (timed; --build-reps times from scratch,
              the median kept), then the bytes on disk of the last build (left for the search phase).
phase search: a fresh process: read the index files once (warm page cache), then open it (timed), one search
              (timed: what an engine that loads its index lazily spends on the first search) and, per ef of
              the sweep (one point for exact engines): warm-up queries, then timed passes over all held-out queries,
              one query at a time; recall@10 of the first pass; the engine's plan() of each point, if it has
              one. Resident memory: growth of the process' Rss from before the open to after the sweep, per
              vector. Then the filtered searches at the operating ef.
phase agents: build --agents-stores stores of --agent-vectors vectors each (rows drawn with the seed), read their
              files once, then time open + one top-10 search + close, store after store in shuffled order, for
              --agents-passes passes.

Everything the engine prints goes to stderr (the orchestrator's workers.log).
"""

import argparse
import gc
import json
import os
import random
import shutil
import sys
import time
import traceback

import numpy as np

from bench.common.loadgate import wait_until_quiet
from bench.common.stats import median, percentile
from bench.stores.probes import read_files, smaps_rollup

from . import K, RECALL_TARGET, backends
from .datasets import Loaded, exact_topk, recall_hits


def disk_usage(files):
    allocated = apparent = 0
    for f in files:
        st = os.stat(f)
        allocated += st.st_blocks * 512
        apparent += st.st_size
    return allocated, apparent


def gate(args, where, gates):
    w = wait_until_quiet(args.load_max, args.load_timeout, poll_s=2.0)
    gates[where] = {"max_load": w.max_load, "load_1m_before": round(w.before[0], 2),
                    "load_1m_after": round(w.after[0], 2), "waited_s": round(w.waited_s, 1),
                    "timed_out": w.timed_out}


def score(data, results, selectivity=None):
    """recall@K (ties within the tolerance count), recall by ids alone, queries with fewer than the expected
    results, rows returned that do not match the filter."""
    rows_gt, d_gt = data.truth(selectivity)
    mask = None if selectivity is None else (data.tags < selectivity)
    hits = id_hits = expected = short = wrong = 0
    for i, (q, res) in enumerate(zip(data.queries, results)):
        rows = []
        for x in res:
            x = int(x)
            if 0 <= x < data.n and x not in rows:
                rows.append(x)
        rows = rows[:K]
        want = int(np.isfinite(d_gt[i]).sum())
        expected += want
        kth = float(d_gt[i, want - 1]) if want else 0.0
        if want:
            hits += recall_hits(data.base, q, rows, kth, data.metric, k=K, mask=mask)
        valid = rows if mask is None else [r for r in rows if mask[r]]
        wrong += len(rows) - len(valid)
        if len(valid) < want:
            short += 1
        id_hits += len(set(valid) & set(int(r) for r in rows_gt[i][:want]))
    return {"recall": hits / expected if expected else None, "recall_ids": id_hits / expected if expected else None,
            "short_queries": short, "wrong_filter_rows": wrong}


MAX_PASSES = 200


def timed_point(fn, queries, passes, budget_s, warmup, min_s):
    """Warm-up, then timed passes over all queries: at least `passes` (always, so the QPS is a median of that
    many passes however slow the engine is) and at least min_s seconds of searching; more passes only while the
    passes took less than budget_s in all, at most MAX_PASSES. Returns the first pass' results and the timings."""
    for q in queries[:warmup]:
        fn(q)
    gc.collect()
    gc.disable()
    first = []
    pass_ns = []
    latencies = []
    started = time.monotonic()
    try:
        while True:
            total = 0
            keep = not pass_ns
            for q in queries:
                t0 = time.perf_counter_ns()
                r = fn(q)
                t1 = time.perf_counter_ns()
                total += t1 - t0
                latencies.append(t1 - t0)
                if keep:
                    first.append(r)
            pass_ns.append(total)
            if len(pass_ns) < passes:
                continue
            if len(pass_ns) >= MAX_PASSES or time.monotonic() - started > budget_s:
                break
            if sum(pass_ns) / 1e9 >= min_s:
                break
    finally:
        gc.enable()
    qps_passes = [len(queries) / (ns / 1e9) for ns in pass_ns]
    return first, {
        "qps": median(qps_passes), "qps_passes": [round(x, 2) for x in qps_passes], "passes": len(pass_ns),
        "latency_median_us": median(latencies) / 1e3, "latency_p99_us": percentile(latencies, 99) / 1e3,
        "latency_mean_us": sum(latencies) / len(latencies) / 1e3,
    }


def run_build(args, engine, data, result):
    """--build-reps builds, each from scratch into an empty directory (the last one is kept for the search
    worker); the build time is their median."""
    times = []
    for rep in range(args.build_reps):
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)
        gc.collect()
        t0 = time.perf_counter()
        details = engine.build(args.dir, data.base, data.tags)
        times.append(time.perf_counter() - t0)
        print(f"{engine.label} build {rep + 1}/{args.build_reps}: {times[-1]:.2f} s", file=sys.stderr, flush=True)
    files = engine.files(args.dir)
    allocated, apparent = disk_usage(files)
    result["build"] = {"build_s": median(times), "build_s_reps": [round(t, 4) for t in times],
                       "details": details, "files": len(files),
                       "file_names": sorted({os.path.relpath(f, args.dir) for f in files})[:20],
                       "disk_bytes": allocated, "disk_bytes_apparent": apparent,
                       "disk_bytes_per_vector": allocated / data.n,
                       "disk_bytes_apparent_per_vector": apparent / data.n,
                       "raw_bytes_per_vector": data.dim * 4, "n": data.n}


def run_search(args, engine, data, result):
    gates = result["gates"]
    files = engine.files(args.dir)
    result["warm_cache_bytes_read"] = read_files(files)
    queries = data.queries
    efs = [None] if engine.exact else args.efs
    gc.collect()
    before = smaps_rollup()
    t0 = time.perf_counter()
    handle = engine.open(args.dir, data.n)
    result["open_s"] = time.perf_counter() - t0
    # The first search after the open, timed alone (an engine may load its index lazily, on the first search)
    fn = engine.searcher(handle, K, efs[0])
    t0 = time.perf_counter()
    fn(queries[0])
    result["first_search_s"] = time.perf_counter() - t0
    after_open = smaps_rollup()
    gate(args, "sweep", gates)
    sweep = []
    for ef in efs:
        fn = engine.searcher(handle, K, ef)
        first, timing = timed_point(fn, queries, args.passes, args.budget, args.warmup, args.min_time)
        point = dict({"ef": ef}, **timing, **score(data, first))
        plan = engine.plan(handle, K, ef, query=queries[0])
        if plan is not None:
            point["plan"] = plan
        sweep.append(point)
        print(f"{engine.label} ef={ef}: recall {point['recall']:.4f}, {point['qps']:,.0f} QPS", file=sys.stderr,
              flush=True)
    after = smaps_rollup()
    result["sweep"] = sweep
    result["memory"] = {
        "before_open": {k: before.get(k) for k in ("Rss", "Anonymous", "Pss")},
        "after_open_and_first_search": {k: after_open.get(k) for k in ("Rss", "Anonymous", "Pss")},
        "after_sweep": {k: after.get(k) for k in ("Rss", "Anonymous", "Pss")},
        "resident_bytes_per_vector": (after["Rss"] - before["Rss"]) / data.n,
        "anonymous_bytes_per_vector": (after["Anonymous"] - before["Anonymous"]) / data.n,
        "resident_after_first_search_bytes_per_vector": (after_open["Rss"] - before["Rss"]) / data.n,
    }

    # Filtered: at the operating point (the smallest ef reaching RECALL_TARGET unfiltered; else the largest)
    filtered = []
    if not engine.exact:
        good = [p["ef"] for p in sweep if p["recall"] is not None and p["recall"] >= RECALL_TARGET]
        op_ef = min(good) if good else max(efs)
    else:
        op_ef = None
    result["operating_ef"] = op_ef
    if engine.filter_mode is not None:
        gate(args, "filtered", gates)
        for s in args.selectivities:
            fn = engine.searcher(handle, K, op_ef, threshold=s, tags=data.tags)
            first, timing = timed_point(fn, queries, args.passes, args.budget, args.warmup, args.min_time)
            point = dict({"selectivity_pct": s, "ef": op_ef, "matches": int((data.tags < s).sum())},
                         **timing, **score(data, first, s))
            plan = engine.plan(handle, K, op_ef, threshold=s, query=queries[0])
            if plan is not None:
                point["plan"] = plan
            filtered.append(point)
            print(f"{engine.label} filter {s}%: recall {point['recall']:.4f}, {point['qps']:,.0f} QPS, "
                  f"{point['short_queries']} short", file=sys.stderr, flush=True)
    result["filtered"] = filtered
    engine.close(handle)


def run_agents(args, engine, data, result):
    gates = result["gates"]
    n_stores, nv = args.agents_stores, args.agent_vectors
    if nv > data.n:
        raise RuntimeError(f"{nv} vectors per agent store, the data set has {data.n}")
    root = args.dir
    os.makedirs(root, exist_ok=True)
    picks, create_ms = [], []
    for i in range(n_stores):
        rows = np.sort(np.random.default_rng([args.seed, 2, i]).choice(data.n, nv, replace=False))
        picks.append(rows)
        d = os.path.join(root, f"agent-{i:05d}")
        os.makedirs(d)
        t0 = time.perf_counter()
        engine.build(d, np.ascontiguousarray(data.base[rows]), data.tags[rows])
        create_ms.append((time.perf_counter() - t0) * 1e3)
    files = engine.files(root)
    allocated, _apparent = disk_usage(files)
    result["warm_cache_bytes_read"] = read_files(files)
    gate(args, "agents", gates)
    order = []
    rng = random.Random(args.seed)
    for _ in range(args.agents_passes):
        p = list(range(n_stores))
        rng.shuffle(p)
        order.extend(p)
    samples = []
    found = {}
    gc.collect()
    gc.disable()
    try:
        for i in order:
            q = data.queries[i % len(data.queries)]
            d = os.path.join(root, f"agent-{i:05d}")
            t0 = time.perf_counter_ns()
            h = engine.open(d, nv)
            rows = engine.searcher(h, K, args.agent_ef)(q)
            engine.close(h)
            t1 = time.perf_counter_ns()
            del h
            samples.append((t1 - t0) / 1e6)
            found.setdefault(i, rows)
    finally:
        gc.enable()
    h = engine.open(os.path.join(root, f"agent-{order[0]:05d}"), nv)
    plan = engine.plan(h, K, args.agent_ef, query=data.queries[order[0] % len(data.queries)])
    engine.close(h)
    del h
    # recall of each store's search against its own exact top 10 (untimed)
    hits = expected = short = 0
    for i, rows in found.items():
        sub = data.base[picks[i]]
        q = data.queries[i % len(data.queries)]
        _r, d_gt = exact_topk(sub, q[None, :], data.metric)
        local = []
        for x in rows:
            x = int(x)
            if 0 <= x < nv and x not in local:
                local.append(x)
        hits += recall_hits(sub, q, local[:K], float(d_gt[0, K - 1]), data.metric)
        expected += K
        short += len(local) < K
    result["agents"] = {
        "stores": n_stores, "vectors_per_store": nv, "passes": args.agents_passes, "ef": args.agent_ef,
        "open_query_close_median_ms": median(samples), "open_query_close_p99_ms": percentile(samples, 99),
        "open_query_close_mean_ms": sum(samples) / len(samples),
        "create_median_ms": median(create_ms), "create_p99_ms": percentile(create_ms, 99),
        "disk_bytes_per_store": allocated / n_stores,
        "recall": hits / expected, "short_queries": short, "samples_ms": [round(s, 4) for s in samples],
    }
    if plan is not None:
        result["agents"]["plan"] = plan
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.vectors.worker")
    ap.add_argument("--engine", required=True, help="the --engines key")
    ap.add_argument("--phase", choices=("build", "search", "agents"), required=True)
    ap.add_argument("--data", required=True, help="the data set's .npz (its .json beside it)")
    ap.add_argument("--dir", required=True, help="the index's directory (agents: the stores' directory)")
    ap.add_argument("--work", required=True, help="a directory of the engine's own (e.g. ObjectBox's model JSON)")
    ap.add_argument("--result", required=True)
    ap.add_argument("--efs", default="10,20,40,80,160")
    ap.add_argument("--selectivities", default="1,10,50")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--build-reps", type=int, default=1, help="builds per engine (the build time is their median)")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=200)
    ap.add_argument("--agents-stores", type=int, default=100)
    ap.add_argument("--agents-passes", type=int, default=3)
    ap.add_argument("--agent-vectors", type=int, default=1000)
    ap.add_argument("--agent-ef", type=int, default=64)
    ap.add_argument("--load-max", type=float, default=1.5)
    ap.add_argument("--load-timeout", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    args.efs = [int(x) for x in args.efs.split(",") if x]
    args.selectivities = [int(x) for x in args.selectivities.split(",") if x]

    result = {"engine": args.engine, "phase": args.phase, "pid": os.getpid(), "gates": {}, "errors": []}
    started = time.monotonic()
    try:
        with open(args.data[:-4] + ".json") as f:
            meta = json.load(f)
        data = Loaded(args.data, meta)
        os.makedirs(args.work, exist_ok=True)
        info = backends.BY_KEY[args.engine]
        engine = info.load(data.dim, data.metric, args.work, {"m": args.m, "ef_construction": args.ef_construction})
        result["label"] = engine.label
        result["describe"] = engine.describe()
        result["exact"] = engine.exact
        result["filter_mode"] = engine.filter_mode
        result["filter_how"] = engine.filter_how
        {"build": run_build, "search": run_search, "agents": run_agents}[args.phase](args, engine, data, result)
        result["ok"] = not result["errors"]
    except Exception:
        result["ok"] = False
        result["errors"].append(traceback.format_exc())
        traceback.print_exc()
    result["seconds"] = round(time.monotonic() - started, 2)
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
