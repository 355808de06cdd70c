"""The orchestrator (runs inside .bench-venvs/vectors/): makes or reads the data sets, runs one worker process per
engine and phase, then writes results.json, results.md and the charts."""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, envinfo
from bench.common.venvs import package_versions, python_env

from . import AGENT_EF, AGENT_VECTORS, HNSW_PARAMS, K, PROFILES, RECALL_TARGET, SEED, VENV, backends, report
from .datasets import SELECTIVITIES, Spec, prepare
from .worker import MAX_PASSES

REPO_ROOT = Path(REPO)
KINDS = ("real", "synthetic")
# Environment of every worker: one thread wherever a library would start more (OpenMP, BLAS, Lance's pool).
WORKER_THREADS_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                      "LANCE_CPU_THREADS": "1"}
WORKER_TIMEOUT_S = {"smoke": 600, "quick": 1800, "full": 6 * 3600}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="python3 -m bench.vectors",
        description="Vector search: recall@10 vs queries per second, build time, bytes on disk and in memory, "
                    "filtered search and one small store per agent; MoteDB beside hnswlib, USearch, FAISS, "
                    "sqlite-vec, ObjectBox and LanceDB.")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the default: 20,000 synthetic + 20,000 real-text "
                                                           "vectors at 128 dimensions, 200 queries (a few minutes)")
    mode.add_argument("--full", action="store_true", help="100,000 real-text passages at 128 and 384 dimensions and "
                                                          "100,000 synthetic vectors at 128 and 384, 1,000 queries")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes; checks that every engine measured "
                                                           "plausible numbers and exits non-zero otherwise")
    ap.add_argument("--engines", default=",".join(backends.KEYS),
                    help=f"comma-separated, of {','.join(backends.KEYS)} (default: all)")
    ap.add_argument("--datasets", help="comma-separated data sets <real|synthetic>-<dim>, e.g. real-384 "
                                       "(default: the profile's)")
    ap.add_argument("--n", type=int, help="indexed vectors per data set (overrides the profile)")
    ap.add_argument("--queries", type=int, help="held-out queries per data set (overrides the profile)")
    ap.add_argument("--efs", help="the ef_search sweep, comma-separated (overrides the profile)")
    ap.add_argument("--build-reps", type=int, help="builds per engine and data set, the build time is their median "
                                                   "(overrides the profile: smoke 1, quick and full 3)")
    ap.add_argument("--rounds", type=int, help="rounds of search phases, the engines taking turns in each; a "
                                               "point's QPS is the median over the rounds (overrides the "
                                               "profile: smoke 1, quick and full 3)")
    ap.add_argument("--agents-stores", type=int, help="stores of the per-agent case (overrides the profile; 0: skip)")
    ap.add_argument("--out", help="output directory (default results/vectors/<timestamp>/)")
    ap.add_argument("--tmp", help="where indexes and the data set cache go (default .bench-tmp/vectors/)")
    ap.add_argument("--load-max", type=float, default=1.5,
                    help="load gate: 1-minute load average below this before each timed phase (1.5: the run's own "
                         "worker keeps one of the 2 cores busy)")
    ap.add_argument("--load-timeout", type=float, help="load gate: wait at most this many seconds per worker "
                                                       "(default: quick 30, full 300, smoke 0)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--keep", action="store_true", help="keep the indexes after each engine ran")
    ap.add_argument("--no-charts", action="store_true")
    args = ap.parse_args(argv)
    args.profile = "smoke" if args.smoke else ("full" if args.full else "quick")
    prof = dict(PROFILES[args.profile])
    keys = [k.strip().lower() for k in args.engines.split(",") if k.strip()]
    bad = [k for k in keys if k not in backends.KEYS]
    if bad:
        ap.error(f"unknown engine(s) {', '.join(bad)}; choose from {','.join(backends.KEYS)}")
    args.engine_keys = keys
    if args.datasets:
        sizes = {kind: n for kind, _dim, n in prof["datasets"]}
        chosen = []
        for name in (x.strip() for x in args.datasets.split(",") if x.strip()):
            kind, _, dim = name.partition("-")
            if kind not in KINDS or not dim.isdigit() or int(dim) < 2:
                ap.error(f"bad data set {name!r}: <real|synthetic>-<dimensions>, e.g. real-128")
            chosen.append((kind, int(dim), sizes.get(kind, prof["datasets"][0][2])))
        prof["datasets"] = chosen
    if args.n is not None:
        if args.n < 100:
            ap.error("--n must be at least 100")
        prof["datasets"] = [(kind, dim, args.n) for kind, dim, _n in prof["datasets"]]
    if args.queries is not None:
        prof["queries"] = max(1, args.queries)
    if args.efs:
        prof["efs"] = sorted({int(x) for x in args.efs.split(",") if x.strip()})
    if args.build_reps is not None:
        prof["build_reps"] = max(1, args.build_reps)
    if args.rounds is not None:
        prof["rounds"] = max(1, args.rounds)
    if args.agents_stores is not None:
        prof["agents_stores"] = max(0, args.agents_stores)
    if args.load_timeout is None:
        args.load_timeout = prof["load_timeout"]
    args.prof = prof
    return args


def git_revision():
    commit = envinfo.git(REPO, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None}
    dirty = envinfo.git(REPO, "status", "--porcelain", "--", "bench/vectors", "bench/common")
    src_dirty = envinfo.git(REPO, "status", "--porcelain", "--", "src", "include", "python")
    return {"commit": commit or None, "bench_vectors_modified": bool(dirty), "motedb_sources_modified": bool(src_dirty)}


def environment(args, tmp_base, mount):
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python3 -m bench.vectors " + " ".join(sys.argv[1:]),
        "mode": args.profile,
        "python": platform.python_version(),
        "packages": package_versions(),
        "venv": {"path": os.path.relpath(VENV.dir, REPO), "install_failures": VENV.stamp().get("install_failures", {})},
        "platform": platform.platform(),
        "kernel": platform.release(),
        "cpu": envinfo.cpu_model() or "unknown",
        "cpu_governor": envinfo.cpu_governor(),
        "cpus": os.cpu_count(),
        "memory_total_bytes": envinfo.mem_total_bytes() or 0,
        "index_directory": str(tmp_base),
        "file_system": mount,
        "load_1m_at_start": round(envinfo.loadavg()[0], 2),
        "load_gate": {"max_load_1m": args.load_max, "timeout_s": args.load_timeout,
                      "where": "before each worker's timed searches (sweep, filtered, per-agent)"},
        "worker_environment": WORKER_THREADS_ENV,
        "page_cache": "warm: every file of an index read once before it is opened (just written anyway)",
        "git": git_revision(),
    }


def parameters(args):
    p = args.prof
    return {
        "profile": args.profile, "k": K, "seed": args.seed, "hnsw": HNSW_PARAMS, "ef_search_sweep": p["efs"],
        "queries": p["queries"], "selectivities_pct": list(SELECTIVITIES), "recall_target": RECALL_TARGET,
        "timed_passes": p["passes"], "point_min_search_s": p["min_point_s"], "point_budget_s": p["budget_s"],
        "max_passes": MAX_PASSES, "warmup_queries": p["warmup"], "build_reps": p["build_reps"],
        "rounds": p["rounds"],
        "agents": {"stores": p["agents_stores"], "passes": p["agents_passes"], "vectors_per_store": AGENT_VECTORS,
                   "ef": AGENT_EF},
        "threads": "one: every search is one call from one Python thread, one query at a time; builds with one "
                   "thread where the library has the setting (see each run's describe)",
    }


class Runner:
    def __init__(self, args, out_dir, log, console):
        self.args = args
        self.out_dir = out_dir
        self.log = log
        self.console = console

    def worker(self, key, phase, data_npz, index_dir, work_dir, tag, suffix=""):
        p = self.args.prof
        result_file = self.out_dir / "raw" / f"{tag}-{key}-{phase}{suffix}.json"
        cmd = [sys.executable, "-m", "bench.vectors.worker", "--engine", key, "--phase", phase, "--data", data_npz,
               "--dir", str(index_dir), "--work", str(work_dir), "--result", str(result_file),
               "--efs", ",".join(map(str, p["efs"])), "--selectivities", ",".join(map(str, SELECTIVITIES)),
               "--passes", str(p["passes"]), "--budget", str(p["budget_s"]), "--min-time", str(p["min_point_s"]),
               "--warmup", str(p["warmup"]), "--build-reps", str(p["build_reps"]),
               "--m", str(HNSW_PARAMS["m"]), "--ef-construction", str(HNSW_PARAMS["ef_construction"]),
               "--agents-stores", str(p["agents_stores"]), "--agents-passes", str(p["agents_passes"]),
               "--agent-vectors", str(AGENT_VECTORS), "--agent-ef", str(AGENT_EF),
               "--load-max", str(self.args.load_max), "--load-timeout", str(self.args.load_timeout),
               "--seed", str(self.args.seed)]
        if self.args.keep:
            cmd.append("--keep")
        env = python_env(dict(os.environ, **WORKER_THREADS_ENV))
        self.log.write(f"\n$ {' '.join(cmd)}\n")
        self.log.flush()
        try:
            rc = subprocess.run(cmd, stdout=self.log, stderr=self.log, cwd=REPO_ROOT, env=env,
                                timeout=WORKER_TIMEOUT_S[self.args.profile]).returncode
        except subprocess.TimeoutExpired:
            rc = None
        try:
            result = json.loads(result_file.read_text())
        except (OSError, ValueError):
            result = {"ok": False, "errors": [f"worker exited with {rc} and wrote no result" if rc is not None
                                              else f"worker timed out after {WORKER_TIMEOUT_S[self.args.profile]} s"]}
        if rc != 0:
            result["ok"] = False
        result["raw_file"] = str(result_file.relative_to(self.out_dir))
        return result


def last_error(res):
    errs = res.get("errors") or ["?"]
    lines = errs[-1].strip().splitlines()
    return lines[-1] if lines else "?"


def main(argv):
    args = parse_args(argv)
    started = time.monotonic()
    from rich.console import Console
    console = Console(stderr=True, highlight=False, soft_wrap=True)

    stamp = time.strftime("%Y-%m-%d_%H%M%S")
    out_dir = Path(args.out) if args.out else REPO_ROOT / "results" / "vectors" / (
        stamp + ("-smoke" if args.smoke else ("-full" if args.full else "")))
    out_dir = out_dir.resolve()
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    tmp_base = (Path(args.tmp) if args.tmp else REPO_ROOT / ".bench-tmp" / "vectors").resolve()
    cache_dir = tmp_base / "cache"
    run_root = tmp_base / f"run-{stamp}-{os.getpid()}"
    run_root.mkdir(parents=True)
    mount = envinfo.filesystem(tmp_base)
    env = environment(args, tmp_base, mount)
    prof = args.prof
    console.print(f"bench.vectors: {args.profile} run: " + ", ".join(f"{k}-{d} ({n:,} vectors)"
                                                                    for k, d, n in prof["datasets"])
                  + f", {prof['queries']:,} queries; indexes in {run_root} ({mount['fstype']}); output {out_dir}")

    def say(msg):
        console.print(f"bench.vectors: {msg}")

    # The data sets (cached in .bench-tmp/vectors/cache/)
    datasets = {}
    for kind, dim, n in prof["datasets"]:
        spec = Spec(kind, dim, n, prof["queries"], args.seed)
        t0 = time.monotonic()
        npz, meta = prepare(spec, str(cache_dir), log=say)
        say(f"{spec.name}: {meta['n']:,} vectors, {meta['queries']:,} queries ({meta['data']}), "
            f"{'from the cache' if meta['cache']['hit'] else 'made'} in {time.monotonic() - t0:.1f} s")
        datasets[spec.name] = (npz, meta)

    # Which engines run, and which are unavailable (and why)
    infos = [b for b in backends.BACKENDS if b.key in args.engine_keys]
    unavailable = {}
    failures = env["venv"]["install_failures"]
    for b in infos:
        reason = b.availability()
        if reason:
            pinned = [r for r in failures if any(part in r.lower() for part in b.key.split("-"))]
            if pinned:
                reason += f" (pip could not install {', '.join(pinned)}; see {env['venv']['path']}/install.log)"
            unavailable[b.label] = reason
            console.print(f"[yellow]{b.label}: unavailable: {reason}")

    runs = {}
    log_path = out_dir / "workers.log"
    with open(log_path, "a") as log:
        runner = Runner(args, out_dir, log, console)
        for name, (npz, meta) in datasets.items():
            runs[name] = {}
            # every engine builds, then the engines search in turns, round after round (the VM's slow spells
            # then fall on all of them), and each point's QPS is the median over the rounds
            builds, seconds, rounds = {}, {}, {}
            for b in infos:
                if b.label in unavailable:
                    continue
                base = run_root / name / b.key
                t0 = time.monotonic()
                builds[b.key] = runner.worker(b.key, "build", npz, base / "index", base / "work", name)
                seconds[b.key] = time.monotonic() - t0
                rounds[b.key] = []
            for r in range(prof["rounds"]):
                for key in builds:
                    if builds[key].get("ok") and all(x.get("ok") for x in rounds[key]):
                        base = run_root / name / key
                        t0 = time.monotonic()
                        suffix = f"-round{r + 1}" if prof["rounds"] > 1 else ""
                        rounds[key].append(runner.worker(key, "search", npz, base / "index", base / "work", name,
                                                         suffix=suffix))
                        seconds[key] += time.monotonic() - t0
            for b in infos:
                if b.label in unavailable:
                    runs[name][b.label] = {"status": "unavailable", "reason": unavailable[b.label]}
                    continue
                if not args.keep:
                    shutil.rmtree(run_root / name / b.key, ignore_errors=True)
                built = builds[b.key]
                searched = report.merge_rounds(rounds[b.key]) if rounds[b.key] else None
                ok = bool(built.get("ok")) and bool(searched and searched.get("ok"))
                run = {"status": "ok" if ok else "failed", "seconds": round(seconds[b.key], 1),
                       "describe": built.get("describe"), "exact": built.get("exact"),
                       "filter_mode": built.get("filter_mode"), "filter_how": built.get("filter_how"),
                       "build": built.get("build"), "rounds": len(rounds[b.key]),
                       "raw": [built["raw_file"]] + [x["raw_file"] for x in rounds[b.key]]}
                if searched:
                    for key in ("open_s", "first_search_s", "memory", "sweep", "filtered", "operating_ef", "gates",
                                "warm_cache_bytes_read"):
                        run[key] = searched.get(key)
                errors = built.get("errors", []) + ((searched or {}).get("errors", []))
                if errors:
                    run["errors"] = errors
                runs[name][b.label] = run
                if ok:
                    best = report.best_point(run)
                    where = (f"{best['qps']:,.0f} QPS at recall {best['recall']:.3f}"
                             + (f" (ef {best['ef']})" if best.get("ef") is not None else " (exact)")) if best \
                        else f"recall@10 stays below {RECALL_TARGET}"
                    console.print(f"{name:14} {b.label:11} build {run['build']['build_s']:7.2f} s, "
                                  f"{run['build']['disk_bytes_per_vector']:7,.0f} B/vector on disk; {where}")
                else:
                    console.print(f"[red]{name:14} {b.label:11} failed: {last_error(dict(errors=errors))} "
                                  f"(see {log_path})")

        # One store per agent: stores of AGENT_VECTORS vectors from the real-text data set of 128 dimensions if the
        # run has one, else the first data set.
        agents = {"runs": {}}
        if prof["agents_stores"] > 0 and datasets:
            name = "real-128" if "real-128" in datasets else next(iter(datasets))
            npz, meta = datasets[name]
            agents.update(dataset=name, stores=prof["agents_stores"], passes=prof["agents_passes"],
                          vectors_per_store=AGENT_VECTORS, ef=AGENT_EF)
            if meta["n"] < AGENT_VECTORS:
                agents["skipped"] = f"{name} has fewer than {AGENT_VECTORS} vectors"
            else:
                for b in infos:
                    if b.label in unavailable:
                        agents["runs"][b.label] = {"status": "unavailable", "reason": unavailable[b.label]}
                        continue
                    base = run_root / "agents" / b.key
                    res = runner.worker(b.key, "agents", npz, base / "stores", base / "work", "agents")
                    if not args.keep:
                        shutil.rmtree(base, ignore_errors=True)
                    run = {"status": "ok" if res.get("ok") else "failed", "gates": res.get("gates"),
                           "describe": res.get("describe"), "raw": res["raw_file"]}
                    if res.get("agents"):
                        run.update({k: v for k, v in res["agents"].items() if k != "samples_ms"})
                    if res.get("errors"):
                        run["errors"] = res["errors"]
                    agents["runs"][b.label] = run
                    if run["status"] == "ok":
                        console.print(f"{'agents':14} {b.label:11} open + top-10 + close: median "
                                      f"{run['open_query_close_median_ms']:.3f} ms, p99 "
                                      f"{run['open_query_close_p99_ms']:.3f} ms ({prof['agents_stores']} stores "
                                      f"of {AGENT_VECTORS:,})")
                    else:
                        console.print(f"[red]{'agents':14} {b.label:11} failed: {last_error(res)}")
    if not args.keep:
        shutil.rmtree(run_root, ignore_errors=True)

    env["total_seconds"] = round(time.monotonic() - started, 1)
    results = {
        "environment": env,
        "parameters": parameters(args),
        "datasets": {name: meta for name, (_npz, meta) in datasets.items()},
        "runs": runs,
        "agents": agents,
    }
    results.update(report.tables(results))
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    md = report.markdown(results)
    (out_dir / "results.md").write_text(md)
    charts = [] if args.no_charts else report.charts(results, out_dir)
    print(md)
    console.print(f"bench.vectors: wrote {out_dir / 'results.json'}, results.md"
                  + "".join(f", {c.name}" for c in charts) + f" in {env['total_seconds']} s")

    failed = [f"{d}/{label}" for d in runs for label, r in runs[d].items() if r["status"] == "failed"]
    failed += [f"agents/{label}" for label, r in agents["runs"].items() if r["status"] == "failed"]
    if args.smoke:
        problems = report.smoke_check(results)
        checked = sum(1 for d in runs for r in runs[d].values() if r["status"] != "unavailable")
        if problems:
            for p in problems:
                console.print(f"[red]smoke: {p}")
            console.print(f"smoke: {len(problems)} problem(s) in {checked} engine runs")
            return 1
        console.print(f"smoke: every engine measured plausible numbers ({checked} engine runs, "
                      f"{len(agents['runs'])} per-agent runs)")
    if failed:
        console.print(f"[red]failed: {', '.join(failed)}")
    return 1 if failed else 0
