"""The orchestrator (runs inside .bench-venvs/stores/): one worker process per engine and phase group, a progress
bar, then results.json, results.md and the charts."""

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

from . import FULL_STORES, QUICK_STORES, SMOKE_STORES, VENV, WORKLOAD_METRICS, WORKLOADS, backends, report
from .probes import sync_probe

REPO_ROOT = Path(REPO)

ENGINE_KEYS = backends.KEYS


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="python3 -m bench.stores",
        description="Many small stores (one per agent): open/query/close, memory per open store, "
                    "create/write/close and space per store, per engine.")
    ap.add_argument("--workload", default="both", choices=("small", "large", "both"),
                    help="small: 10 objects per store; large: 1,000 objects with 300-character texts (default: both)")
    ap.add_argument("--stores", type=int, help="stores per engine (overrides the quick/full default)")
    ap.add_argument("--full", action="store_true",
                    help=f"the seed's sizes: {FULL_STORES['small']:,} small / {FULL_STORES['large']:,} large stores "
                         f"(default quick: {QUICK_STORES['small']:,} / {QUICK_STORES['large']:,})")
    ap.add_argument("--engines", default=",".join(ENGINE_KEYS),
                    help=f"comma-separated, of {','.join(ENGINE_KEYS)} (default: all)")
    ap.add_argument("--out", help="output directory (default results/stores/<timestamp>/)")
    ap.add_argument("--smoke", action="store_true",
                    help=f"a handful of stores per engine ({SMOKE_STORES['small']} small, {SMOKE_STORES['large']} "
                         f"large), no load gate wait; checks every phase measured something plausible")
    ap.add_argument("--tmp", help="where the stores are created (default .bench-tmp/stores/ at the repository "
                                  "root); must be a disk, not tmpfs")
    ap.add_argument("--allow-tmpfs", action="store_true", help="allow --tmp on tmpfs (the numbers then mean little)")
    ap.add_argument("--memory-stores", type=int, default=1000, help="stores held open for the memory row (1000)")
    ap.add_argument("--load-max", type=float, default=1.0, help="load gate: 1-minute load average below this (1.0)")
    ap.add_argument("--load-timeout", type=float,
                    help="load gate: wait at most this many seconds per phase (default 120, --full 600, --smoke 0)")
    ap.add_argument("--objectbox-builder", default="generic", choices=("generic", "fast", "codegen"),
                    help="how ObjectBox marshals objects: the generic flatbuffers.Builder (default) or one of "
                         "objectbox 5.0's experimental builders")
    ap.add_argument("--mmap-threshold", type=int,
                    help="set glibc's M_MMAP_THRESHOLD (MALLOC_MMAP_THRESHOLD_) in the workers, e.g. 131072")
    ap.add_argument("--keep-stores", action="store_true", help="keep the stores after each engine ran")
    ap.add_argument("--no-charts", action="store_true")
    args = ap.parse_args(argv)
    keys = [k.strip().lower() for k in args.engines.split(",") if k.strip()]
    bad = [k for k in keys if k not in ENGINE_KEYS]
    if bad:
        ap.error(f"unknown engine(s) {', '.join(bad)}; choose from {','.join(ENGINE_KEYS)}")
    args.engine_keys = keys
    args.workloads = list(WORKLOADS) if args.workload == "both" else [args.workload]
    if args.load_timeout is None:
        args.load_timeout = 0.0 if args.smoke else (600.0 if args.full else 120.0)
    if args.stores is not None and args.stores < 1:
        ap.error("--stores must be at least 1")
    return args


def stores_for(args, workload):
    if args.stores is not None:
        return args.stores
    if args.smoke:
        return SMOKE_STORES[workload]
    return (FULL_STORES if args.full else QUICK_STORES)[workload]


def slug(label):
    return "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-").replace("--", "-")


def git_revision():
    """The checkout's commit, and whether the harness (bench/stores, bench/common) differs from it."""
    commit = envinfo.git(REPO, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None}
    dirty = envinfo.git(REPO, "status", "--porcelain", "--", "bench/stores", "bench/common")
    return {"commit": commit or None, "bench_stores_modified": bool(dirty)}


def environment(args, tmp_root, mount):
    import sqlite3
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python3 -m bench.stores " + " ".join(sys.argv[1:]),
        "mode": "smoke" if args.smoke else ("full" if args.full else "quick"),
        "stores_per_engine": {w: stores_for(args, w) for w in args.workloads},
        "memory_stores_held_open": args.memory_stores,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "sqlite_version (stdlib sqlite3)": sqlite3.sqlite_version,
        "packages": package_versions(),
        "venv": {"path": os.path.relpath(VENV.dir, REPO), "install_failures":
                 VENV.stamp().get("install_failures", {})},
        "platform": platform.platform(),
        "kernel": platform.release(),
        "cpu": envinfo.cpu_model() or "unknown",
        "cpus": os.cpu_count(),
        "memory_total_bytes": envinfo.mem_total_bytes() or 0,
        "stores_directory": str(tmp_root),
        "file_system": mount,
        "load_1m_at_start": round(envinfo.loadavg()[0], 2),
        "load_gate": {"max_load_1m": args.load_max, "timeout_s": args.load_timeout},
        "page_cache": "warm (every file of the stores read once before open/query/close; stores just written)",
        "malloc": {"MALLOC_MMAP_THRESHOLD_": str(args.mmap_threshold) if args.mmap_threshold else None,
                   "note": "glibc default allocator settings unless set"},
        "objectbox_builder": args.objectbox_builder,
        "git": git_revision(),
    }


class Runner:
    """Runs the worker processes and feeds their progress to a rich progress bar."""

    def __init__(self, args, out_dir, progress):
        self.args = args
        self.out_dir = out_dir
        self.progress = progress

    def worker(self, label, workload, n, root, mode, task, offset, log):
        result_file = self.out_dir / "raw" / f"{workload}-{slug(label)}-{mode}.json"
        cmd = [sys.executable, "-m", "bench.stores.worker", "--label", label, "--workload", workload,
               "--stores", str(n), "--root", str(root), "--mode", mode, "--result", str(result_file),
               "--memory-stores", str(self.args.memory_stores), "--load-max", str(self.args.load_max),
               "--load-timeout", str(self.args.load_timeout),
               "--warmup", "2" if self.args.smoke else "20"]
        if self.args.smoke:
            cmd.append("--smoke")
        if label.startswith("ObjectBox"):
            cmd += ["--engine-option", f"builder={self.args.objectbox_builder}"]
        env = python_env()
        if self.args.mmap_threshold:
            env["MALLOC_MMAP_THRESHOLD_"] = str(self.args.mmap_threshold)
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO_ROOT, env=env)
        gates = {}
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                log.write(line)
                continue
            kind = msg.get("type")
            if kind == "progress":
                phase_offset = offset + (n if msg["phase"] == "open_query_close" else 0)
                self.progress.update(task, completed=phase_offset + msg["done"],
                                     description=f"{workload:5} {label:28} {msg['phase']}")
            elif kind == "phase":
                self.progress.update(task, description=f"{workload:5} {label:28} {msg['phase']}")
            elif kind == "gate":
                gates[msg["phase"]] = msg["gate"]
                g = msg["gate"]
                if g["timed_out"] and self.args.load_timeout > 0:
                    self.progress.console.print(
                        f"[yellow]load gate timed out before {workload}/{label}/{msg['phase']}: "
                        f"1-minute load {g['load_1m_after']} after {g['waited_s']} s")
        rc = proc.wait()
        try:
            result = json.loads(result_file.read_text())
        except (OSError, ValueError):
            result = {"ok": False, "errors": [f"worker exited with {rc} and wrote no result"]}
        if rc != 0:
            result["ok"] = False
        result["raw_file"] = str(result_file.relative_to(self.out_dir))
        return result


def main(argv):
    args = parse_args(argv)
    started = time.monotonic()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    stamp = time.strftime("%Y-%m-%d_%H%M%S")
    out_dir = Path(args.out) if args.out else REPO_ROOT / "results" / "stores" / (stamp + ("-smoke" if args.smoke
                                                                                          else ""))
    out_dir = out_dir.resolve()
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)

    tmp_base = Path(args.tmp) if args.tmp else REPO_ROOT / ".bench-tmp" / "stores"
    tmp_base.mkdir(parents=True, exist_ok=True)
    mount = envinfo.filesystem(tmp_base)
    if mount["fstype"] in envinfo.MEMORY_FILESYSTEMS and not args.allow_tmpfs:
        console.print(f"[red]{tmp_base} is on {mount['fstype']} (memory, not a disk): pick a disk with --tmp, "
                      f"e.g. --tmp /var/tmp/bench-stores")
        return 2
    tmp_root = tmp_base / f"run-{stamp}-{os.getpid()}"
    tmp_root.mkdir(parents=True)

    env = environment(args, tmp_root, mount)
    console.print(f"bench.stores: {env['mode']} run, stores per engine "
                  + ", ".join(f"{w} {n:,}" for w, n in env["stores_per_engine"].items())
                  + f"; stores in {tmp_root} ({mount['fstype']}); output {out_dir}")
    env["sync_probe"] = sync_probe(str(tmp_root), 20 if args.smoke else 200)

    # Which engines run, and which are unavailable (and why)
    labels = [b.label for b in backends.BACKENDS if b.key in args.engine_keys]  # in the tables' order
    status = {}
    for label in labels:
        reason = backends.BY_LABEL[label].availability()
        status[label] = {"status": "unavailable", "reason": reason} if reason else {"status": "pending"}
        if reason:
            console.print(f"[yellow]{label}: {reason}")

    runs = {w: {} for w in args.workloads}
    rows = []
    log_path = out_dir / "workers.log"
    with open(log_path, "a") as log, Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                              TimeElapsedColumn(), console=console) as progress:
        tasks = {}
        for w in args.workloads:
            n = stores_for(args, w)
            m = min(args.memory_stores, n)
            for label in labels:
                if status[label]["status"] != "unavailable":
                    tasks[(w, label)] = progress.add_task(f"{w:5} {label:28} waiting", total=2 * n + m)
        runner = Runner(args, out_dir, progress)
        for w in args.workloads:
            n = stores_for(args, w)
            for label in labels:
                if status[label]["status"] == "unavailable":
                    runs[w][label] = dict(status[label])
                    continue
                root = tmp_root / w / slug(label)
                task = tasks[(w, label)]
                t0 = time.monotonic()
                main_res = runner.worker(label, w, n, root, "main", task, 0, log)
                mem_res = None
                if main_res.get("ok"):
                    mem_res = runner.worker(label, w, n, root, "memory", task, 2 * n, log)
                if not args.keep_stores:
                    shutil.rmtree(root, ignore_errors=True)
                ok = bool(main_res.get("ok")) and bool(mem_res and mem_res.get("ok"))
                run = {
                    "status": "ok" if ok else "failed",
                    "stores": n,
                    "seconds": round(time.monotonic() - t0, 1),
                    "engine": main_res.get("engine"),
                    "gates": dict(main_res.get("gates", {}), **(mem_res or {}).get("gates", {})),
                    "phase_seconds": main_res.get("phase_seconds"),
                    "space": main_res.get("space"),
                    "verified_stores": main_res.get("verified_stores"),
                    "memory": (mem_res or {}).get("memory"),
                    "details": {k: v for k, v in dict(main_res.get("summary", {}),
                                                       **(mem_res or {}).get("summary", {})).items()},
                    "raw": [r["raw_file"] for r in (main_res, mem_res) if r],
                }
                errors = main_res.get("errors", []) + ((mem_res or {}).get("errors", []))
                if errors:
                    run["errors"] = errors
                    console.print(f"[red]{w}/{label} failed: {errors[-1].strip().splitlines()[-1]} (see {log_path})")
                runs[w][label] = run
                summary = run["details"]
                for metric in WORKLOAD_METRICS[w]:
                    if metric in summary:
                        rows.append({"workload": w, "engine": label, "metric": metric, "value": summary[metric]})
                progress.update(task, completed=2 * n + min(args.memory_stores, n),
                                description=f"{w:5} {label:28} {'done' if ok else 'FAILED'}")
        if not args.keep_stores:
            shutil.rmtree(tmp_root, ignore_errors=True)

    env["runs"] = runs
    env["total_seconds"] = round(time.monotonic() - started, 1)
    results = {"environment": env, "rows": rows}
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    md = report.markdown(results)
    (out_dir / "results.md").write_text(md)
    charts = [] if args.no_charts else report.charts(results, out_dir)
    print(md)
    console.print(f"bench.stores: wrote {out_dir / 'results.json'}, results.md"
                  + "".join(f", {c.name}" for c in charts) + f" in {env['total_seconds']} s")

    failed = [f"{w}/{label}" for w in runs for label, r in runs[w].items() if r["status"] == "failed"]
    if args.smoke:
        problems = report.smoke_check(results, {w: stores_for(args, w) for w in args.workloads},
                                      {w: min(args.memory_stores, stores_for(args, w)) for w in args.workloads})
        checked = sum(1 for w in runs for r in runs[w].values() if r["status"] != "unavailable")
        if problems:
            for p in problems:
                console.print(f"[red]smoke: {p}")
            console.print(f"smoke: {len(problems)} problem(s) in {checked} engine runs")
            return 1
        console.print(f"smoke: all phases of {checked} engine runs measured plausible values")
    return 1 if failed else 0
