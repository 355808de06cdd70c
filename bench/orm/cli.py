"""python3 -m bench.orm: the orchestrator.

Runs under the system python3; re-executes itself in .bench-venvs/harness (rich,
matplotlib) and starts workers (bench/orm/worker.py) in each backend group's
environment. See README.md.
"""

import argparse
import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time

from bench.common import REPO, envinfo, loadgate
from bench.common.venvs import Venv
from bench.orm import spec
from bench.orm.backends import BACKENDS, BASELINE_ID, BY_ID, BY_LABEL, PROFILES, SMOKE_BACKENDS, add_baseline

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS_FLAG = "BENCH_ORM_IN_HARNESS"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m bench.orm", description=__doc__.split("\n")[0])
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                   help="quick: tests 1-3, cold, main backends, 1 run (default); full: every backend, "
                        "cold+warm+large, 5 runs")
    p.add_argument("--backends", help="comma-separated ids (or 'all'): " + ",".join(BY_ID))
    p.add_argument("--tests", help="comma-separated: 1,2,3")
    p.add_argument("--mode", nargs="+", action="extend", help="cold, warm, large, large-warm (several allowed)")
    p.add_argument("--runs", type=int, help="repetitions (the median is reported)")
    p.add_argument("--out", help="output directory (default results/orm/<timestamp>/)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny N; one backend per family; checks row counts (tests the harness, not timed)")
    p.add_argument("--iterations", type=int, help=f"N (default {spec.ITERATIONS})")
    p.add_argument("--batch", type=int, help=f"BATCH_SIZE (default {spec.BATCH_SIZE})")
    p.add_argument("--timing", choices=("seed", "upstream"), default="seed",
                   help="what the timer covers: seed (default: only persisting, objects built before it, "
                        "gc frozen) or upstream (tortoise/orm-benchmarks: A-C build their objects inside "
                        "it, gc left running), for side-by-side checks against upstream's harness")
    p.add_argument("--seed", default="42", help="seed of the random workload (same for every backend)")
    p.add_argument("--db-dir", help="where databases live (default .bench-tmp/orm; must not be tmpfs)")
    p.add_argument("--load-threshold", type=float, default=1.0, help="1-minute load to wait for (default 1.0)")
    p.add_argument("--load-timeout", type=float, help="seconds to wait for it (default: quick 60, full 300, "
                                                      "smoke 0)")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--baseline", metavar="REF",
                   help="also run MoteDB built from git revision REF (a commit, tag or branch of this "
                        "repository), beside MoteDB (--order), as \"MoteDB <commit>\": a before/after "
                        "comparison in one run (results.md gains MoteDB / MoteDB <commit> per operation)")
    p.add_argument("--order", choices=("ops", "blocks"), default="ops",
                   help="ops (default): the backends take turns at every operation of every run (each op "
                        "of each backend one after the other, the order rotated by run), so that a "
                        "machine whose speed drifts over seconds weighs on all of them alike; blocks: "
                        "each backend runs all its runs of a mode before the next (the only order until "
                        "2026-12-06)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run whose results are in --out (same options): keep its measured "
                        "backend x mode blocks and run the others")
    p.add_argument("--redo", nargs="+", action="extend", metavar="MODE[:BACKEND]", default=[],
                   help="with --resume: measure these modes again, or one backend's block of a mode "
                        "(large:motedb); the earlier blocks are dropped")
    return p.parse_args(argv)


def group_venv(group):
    """A backend group's environment: .bench-venvs/<group>/ from requirements-<group>.txt (pinned); the
    baseline's (--baseline) from MoteDB's."""
    req = "motedb" if group == BASELINE_ID else group
    return Venv(group, os.path.join(HERE, f"requirements-{req}.txt"))


def in_harness():
    try:
        import matplotlib  # noqa: F401
        import rich  # noqa: F401
        return True
    except ImportError:
        return False


def reexec_in_harness(argv):
    if os.environ.get(HARNESS_FLAG):
        sys.exit("bench.orm: the harness environment lacks rich/matplotlib")
    print("bench.orm: preparing .bench-venvs/harness (rich, matplotlib) ...", flush=True)
    harness = group_venv("harness")
    harness.ensure()
    os.chdir(REPO)
    harness.exec_module("bench.orm", argv, dict(os.environ, **{HARNESS_FLAG: "1"}))


def resolve_config(a):
    prof = PROFILES[a.profile]
    if a.backends:
        ids = [b.id for b in BACKENDS] if a.backends == "all" else a.backends.split(",")
    elif a.smoke:
        ids = list(SMOKE_BACKENDS)
    else:
        ids = list(prof["backends"])
    if a.baseline:
        from bench.common.motedb_pkg import baseline_tree
        try:
            tree, commit = baseline_tree(a.baseline)
        except RuntimeError as e:
            sys.exit(f"--baseline: {e}")
        add_baseline(commit)
        ids = [i for i in ids if i != BASELINE_ID]
        ids.insert(ids.index("motedb") + 1 if "motedb" in ids else 0, BASELINE_ID)
    bad = [i for i in ids if i not in BY_ID]
    if bad:
        sys.exit(f"unknown backend(s): {', '.join(bad)}; known: {', '.join(BY_ID)}")
    tests = [int(t) for t in a.tests.split(",")] if a.tests else list(prof["tests"])
    modes = a.mode or (["cold", "warm", "large"] if a.smoke else list(prof["modes"]))
    for m in modes:
        if m not in spec.MODES:
            sys.exit(f"unknown mode {m}; known: {', '.join(spec.MODES)}")
    runs = a.runs or (1 if a.smoke else prof["runs"])
    n = a.iterations or (spec.SMOKE_ITERATIONS if a.smoke else spec.ITERATIONS)
    batch = a.batch or (spec.SMOKE_BATCH_SIZE if a.smoke else spec.BATCH_SIZE)
    if batch < n:
        sys.exit("--batch must be >= --iterations")
    # the plan: (mode, test) pairs. A smoke run covers warm and large on Test 1 only.
    plan = []
    for m in modes:
        for t in tests:
            if a.smoke and m != "cold" and not a.mode and t != 1:
                continue
            plan.append((m, t))
    timeout = a.load_timeout
    if timeout is None:
        timeout = 0 if a.smoke else (300 if a.profile == "full" else 60)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or os.path.join(REPO, "results", "orm", stamp + ("-smoke" if a.smoke else ""))
    db_dir = a.db_dir or os.path.join(REPO, ".bench-tmp", "orm")
    return {"profile": a.profile, "backends": ids, "tests": tests, "modes": modes, "plan": plan, "runs": runs,
            "iterations": n, "batch_size": batch, "seed": a.seed, "smoke": a.smoke, "timing": a.timing,
            "order": a.order,
            "fidelity": fidelity(a.timing),
            "load_threshold": a.load_threshold, "load_timeout_s": timeout, "out": os.path.abspath(out),
            "db_dir": os.path.abspath(db_dir), "charts": not a.no_charts,
            "baseline": {"ref": a.baseline, "commit": commit, "tree": tree} if a.baseline else None}


def fidelity(timing):
    """results.json's config.fidelity: which definitions this run measured."""
    return {
        "definitions": "the seed's suite (ObjectBox's fork of tortoise/orm-benchmarks): bench/orm/README.md",
        "timing": timing,
        "timed": ("only persisting: objects built and new values chosen before the timer, gc.collect() + "
                  "gc.freeze() before it" if timing == "seed" else
                  "as upstream: A-C build their objects inside the timer, the garbage collector runs"),
        "cold_open": "the connection/store open inside the timer for every backend; environment queries "
                     "after the operations",
        "deviations": "bench/orm/README.md, 'Deviations' and 'Per backend'",
    }


# settings that must be equal for a resumed run to continue the same measurement
RESUME_KEYS = ("tests", "runs", "iterations", "batch_size", "seed", "smoke", "timing")


def load_resume(cfg, redo):
    """The results.json of the run to continue (cfg["out"]); exits with a message if
    there is none or its settings differ from this invocation's."""
    path = os.path.join(cfg["out"], "results.json")
    if not os.path.exists(path):
        sys.exit(f"--resume: no {path} to continue (pass the --out of the earlier run)")
    with open(path) as f:
        prev = json.load(f)
    pc = prev.get("config", {})
    diff = [f"{k}: {pc.get(k)!r} there, {cfg[k]!r} here" for k in RESUME_KEYS if pc.get(k) != cfg[k]]
    if diff:
        sys.exit("--resume: the earlier run used other settings (" + "; ".join(diff) + ")")
    bad = [r for r in redo if r.partition(":")[0] not in cfg["modes"]]
    if bad:
        sys.exit(f"--redo: {', '.join(bad)} not among this run's modes {cfg['modes']}")
    bad = [r for r in redo if r.partition(":")[2] and r.partition(":")[2] not in cfg["backends"]]
    if bad:
        sys.exit(f"--redo: {', '.join(bad)}: backend not among this run's {','.join(cfg['backends'])}")
    return prev


def redo_filter(redo):
    """keep(mode, label): False for the blocks --redo names (a mode, or mode:backend-id)."""
    whole = {r for r in redo if ":" not in r}
    single = {(m, BY_ID[i].label) for m, _, i in (r.partition(":") for r in redo if ":" in r)}
    return lambda mode, label: mode not in whole and (mode, label) not in single


def check_db_dir(db_dir, log):
    """db_dir, or /var/tmp/bench-orm if db_dir is on a file system in memory (tmpfs): databases on disk."""
    os.makedirs(db_dir, exist_ok=True)
    fs = envinfo.filesystem(db_dir)["fstype"]
    if fs in envinfo.MEMORY_FILESYSTEMS:
        alt = "/var/tmp/bench-orm"
        os.makedirs(alt, exist_ok=True)
        if envinfo.filesystem(alt)["fstype"] in envinfo.MEMORY_FILESYSTEMS:
            sys.exit(f"{db_dir} and {alt} are on {fs}: pass --db-dir on a disk-backed file system")
        log(f"{db_dir} is on {fs}: using {alt} instead")
        return alt
    return db_dir


def hold_db_dir(db_dir):
    """An exclusive lock on db_dir/.lock for this run: a second run on the same directory
    would recreate and delete the other's databases under it (two runs started four seconds
    apart on 2026-12-06: one's deletes emptied the other's Test 1 tables). Exits if another
    run holds it; the open file is returned and must be kept."""
    import fcntl
    f = open(os.path.join(db_dir, ".lock"), "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"{db_dir} is in use by another bench.orm run (wait for it, or pass another --db-dir)")
    return f


def load_gate(threshold, timeout):
    """Wait until the 1-minute load average is below threshold (at most timeout s); returns the record."""
    g = loadgate.wait_until_quiet(threshold, timeout, poll_s=5.0)
    return {"load1": round(g.after[0], 2), "loadavg": [round(x, 2) for x in g.after],
            "waited_s": round(g.waited_s, 1), "timed_out": g.timed_out and timeout > 0, "threshold": threshold}


def environment(db_dir):
    """What the results were measured on (results.json's environment, before the run adds to it)."""
    fs = envinfo.filesystem(db_dir)
    memory = envinfo.mem_total_bytes()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "cpu": envinfo.cpu_model() or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory": f"{memory // 1024} kB" if memory else "n/a",
        "cpu_governor": envinfo.cpu_governor() or "n/a",
        "os": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "db_dir": db_dir,
        "filesystem": fs["fstype"],
        "filesystem_device": fs["source"] or "unknown",
        "loadavg_start": envinfo.loadavg(),
        "git_commit": envinfo.git(REPO, "rev-parse", "--short", "HEAD") or "none",
    }


class Orchestrator:
    def __init__(self, cfg, console):
        self.cfg = cfg
        self.console = console
        self.samples = {}        # (test, mode, label, op) -> [rows/s]
        self.skipped = {}        # (test, mode, label, op) -> reason
        self.errors = []         # dicts
        self.check_failures = []
        self.backend_info = {}   # label -> info
        self.gates = []
        self.unavailable = {}    # label -> reason
        self.group_versions = {}
        self.blocks = []         # {"mode", "backend", "started", "seconds"}: each measured block
        self.blocks_total = 0
        self.sessions = []       # with --resume: the earlier invocations' environments
        self.failed_creates = set()  # (label, mode, run, test) whose database was not made

    def resume_from(self, prev, redo):
        """Take over the measured blocks of an earlier (interrupted) run, except those
        redo names (redo_filter); run() then skips the blocks kept."""
        keep = redo_filter(redo)
        for c in prev.get("cells", []):
            if keep(c["mode"], c["backend"]):
                self.samples[(c["test"], c["mode"], c["backend"], c["op"])] = list(c["runs"])
        for s in prev.get("skipped", []):
            if keep(s["mode"], s["backend"]):
                self.skipped[(s["test"], s["mode"], s["backend"], s["op"])] = s["reason"]
        self.errors = [e for e in prev.get("errors", []) if keep(e["mode"], e["backend"])]
        self.check_failures = list(prev.get("check_failures", []))
        env = prev.get("environment", {})
        self.backend_info = dict(env.get("backends", {}))
        self.gates = [g for g in env.get("load_gate", []) if keep(g["mode"], g["backend"])]
        self.blocks = [b for b in env.get("blocks", []) if keep(b["mode"], b["backend"])]
        earlier = env.get("sessions") or [{k: env.get(k) for k in ("date", "git_commit", "kernel", "cpu")}]
        self.sessions = earlier

    def measured(self, mode, label):
        return any(b["mode"] == mode and b["backend"] == label for b in self.blocks)

    def log(self, msg):
        self.console.print(msg)

    def worker_cmd(self, py, job):
        return [py, "-m", "bench.orm.worker", json.dumps(job)]

    def run_worker(self, py, job, on_result):
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO
        env.pop(HARNESS_FLAG, None)
        proc = subprocess.Popen(self.worker_cmd(py, job), cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        info = None
        for line in proc.stdout:
            if line.startswith("@@INFO "):
                info = json.loads(line[7:])
            elif line.startswith("@@RESULT "):
                on_result(json.loads(line[9:]))
        err = proc.stderr.read()
        rc = proc.wait()
        return rc, info, err

    def run_backend(self, b, mode, run, test, py, progress, task, steps=None):
        """Run one backend's test of one run: its whole sequence (steps None), or some steps of it
        ("create" and operation ids; --order ops takes the steps one at a time). An async backend
        runs whole at its "create" step (one process for all its operations)."""
        warm, large = spec.MODES[mode]
        cfg = self.cfg
        base = {"backend": b.id, "module": b.module, "test": test, "mode": mode,
                "dir": os.path.join(cfg["db_dir"], b.id), "n": cfg["iterations"], "batch": cfg["batch_size"],
                "seed": f"{cfg['seed']}-{run}", "large": large, "warm": warm, "smoke": cfg["smoke"], "run": run,
                "timing": cfg["timing"]}
        ops = list(spec.OPS)

        def on_result(r):
            key = (test, mode, b.label, r["op"])
            if r.get("error"):
                self.errors.append({"backend": b.label, "test": test, "mode": mode, "op": r["op"],
                                    "run": run, "error": r["error"], "traceback": r.get("traceback")})
                self.log(f"[red]{b.label} test {test} {mode} {r['op']}: {r['error']}[/red]")
            elif r.get("skipped"):
                self.skipped[key] = r["skipped"]
            else:
                self.samples.setdefault(key, []).append(r["rows_per_s"])
                for e in r.get("check_errors") or []:
                    self.check_failures.append(f"{b.label} test {test} {mode}: {e}")
                    self.log(f"[red]check failed: {b.label} test {test} {mode}: {e}[/red]")
            progress.advance(task)

        def done(rc, info, err, ops_expected, label):
            if info:
                self.backend_info.setdefault(b.label, info)
            if rc != 0:
                tail = "\n".join(err.strip().splitlines()[-12:])
                self.errors.append({"backend": b.label, "test": test, "mode": mode, "op": label, "run": run,
                                    "error": f"worker exited {rc}", "traceback": tail})
                self.log(f"[red]{b.label} test {test} {mode} {label}: worker exited {rc}[/red]\n{tail}")
                return False
            return True

        steps = ["create"] + ops if steps is None else steps
        if b.kind == "async":
            if "create" in steps:
                rc, info, err = self.run_worker(py, dict(base, ops=ops, create=True), on_result)
                done(rc, info, err, ops, "all")
            return
        # sync: a fresh process to create the database, then one per operation
        for step in steps:
            if step == "create":
                rc, info, err = self.run_worker(py, dict(base, ops=[], create=True), on_result)
                if not done(rc, info, err, [], "create"):
                    self.failed_creates.add((b.label, mode, run, test))
                    progress.advance(task, len(ops))
            elif (b.label, mode, run, test) not in self.failed_creates:
                rc, info, err = self.run_worker(py, dict(base, ops=[step], create=False), on_result)
                if not done(rc, info, err, [step], step):
                    progress.advance(task, 1)

    def run(self, checkpoint=None):
        """Run the plan; checkpoint() is called after each mode (--order blocks: after each backend
        of each mode)."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        cfg = self.cfg
        runnable = []
        for b in [BY_ID[i] for i in cfg["backends"]]:
            reason = b.availability()
            if reason:
                self.unavailable[b.label] = reason
                self.log(f"[yellow]{b.label}: {reason}[/yellow]")
                continue
            venv = group_venv(b.group)
            try:
                with self.console.status(f"environment {b.group} for {b.label} ..."):
                    venv.ensure(log=self.log)
                    if b.group == "motedb":  # the package of this checkout, rebuilt when its sources changed
                        venv.install_motedb(log=self.log)
                    elif b.group == BASELINE_ID:  # the package of --baseline's commit
                        venv.install_motedb(log=self.log, repo=cfg["baseline"]["tree"])
            except Exception as e:  # noqa: BLE001 - reported, the run goes on
                self.unavailable[b.label] = f"environment '{b.group}' failed: {e}"
                self.log(f"[red]{b.label}: {self.unavailable[b.label]}[/red]")
                continue
            if b.group not in self.group_versions:
                self.group_versions[b.group] = venv.versions()
            runnable.append((b, venv.python))
        total = len(runnable) * cfg["runs"] * len(cfg["plan"]) * len(spec.OPS)
        cols = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        with Progress(*cols, console=self.console) as progress:
            task = progress.add_task("ORM benchmark", total=total)
            modes = []
            for m, _ in cfg["plan"]:
                if m not in modes:
                    modes.append(m)
            self.blocks_total = len(modes) * len(runnable)
            for mode in modes:
                tests = [t for m, t in cfg["plan"] if m == mode]
                todo = []
                for b, py in runnable:
                    if self.measured(mode, b.label):  # kept from the run resumed
                        progress.advance(task, cfg["runs"] * len(tests) * len(spec.OPS))
                    else:
                        todo.append((b, py))
                if not todo:
                    continue
                if cfg["order"] == "ops":  # one block: the backends take turns
                    self.run_block(mode, tests, todo, progress, task)
                    if checkpoint:
                        checkpoint()
                    continue
                for one in todo:  # a block per backend
                    self.run_block(mode, tests, [one], progress, task)
                    if checkpoint:
                        checkpoint()

    def run_block(self, mode, tests, todo, progress, task):
        """Measure the backends of todo in one mode: one backend's runs one after the other, or
        several backends taking turns at every step (create, then each operation) of every run,
        the order rotated by run."""
        cfg = self.cfg
        by_ops = len(todo) > 1
        labels = ", ".join(b.label for b, _ in todo)
        t_block = time.monotonic()
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if cfg["load_timeout_s"] > 0:
            progress.update(task, description=f"waiting for load < {cfg['load_threshold']}")
        gate = load_gate(cfg["load_threshold"], cfg["load_timeout_s"])
        gate.update(backend=labels, mode=mode)
        self.gates.append(gate)
        if gate["timed_out"]:
            self.log(f"[yellow]load gate timed out before {labels} ({mode}): load {gate['load1']}[/yellow]")
        for run in range(cfg["runs"]):
            turn = todo[run % len(todo):] + todo[:run % len(todo)]
            for test in tests:
                who = "in turns" if by_ops else turn[0][0].label
                progress.update(task, description=f"{who:<15} {mode:<5} T{test} run {run + 1}")
                for step in ["create"] + list(spec.OPS):
                    for b, py in turn:
                        self.run_backend(b, mode, run, test, py, progress, task, steps=[step])
        seconds = round(time.monotonic() - t_block, 1)
        for b, _ in todo:
            self.blocks.append({"mode": mode, "backend": b.label, "started": started, "seconds": seconds,
                                "in_turns": by_ops})

    def write(self, env, partial=False):
        """results.json and results.md (and the charts unless partial) in cfg["out"]. A
        partial write (a checkpoint during the run) says how far the run got, so that
        an interrupted run leaves what it measured."""
        from bench.orm import report
        cfg = self.cfg
        out = cfg["out"]
        os.makedirs(out, exist_ok=True)
        cells = report.build_cells(self.samples)
        gms = report.build_geomeans(cells)
        env = dict(env)
        env["load_gate"] = self.gates
        env["package_versions"] = self.group_versions
        env["backends"] = self.backend_info
        env["unavailable"] = self.unavailable
        env["blocks"] = self.blocks
        if self.sessions:  # a resumed run: every invocation that measured a part of it
            env["sessions"] = self.sessions + [{k: env.get(k) for k in ("date", "git_commit", "kernel", "cpu")}]
        config = {k: v for k, v in cfg.items() if k not in ("out",)}
        config["complete"] = not partial
        config["plan"] = [list(p) for p in cfg["plan"]]
        config["backend_labels"] = {i: BY_ID[i].label for i in cfg["backends"]}
        extra = {"skipped": [{"test": k[0], "mode": k[1], "backend": k[2], "op": k[3], "reason": v}
                             for k, v in sorted(self.skipped.items())],
                 "errors": self.errors, "check_failures": self.check_failures}
        report.write_json(os.path.join(out, "results.json"), env, config, cells, gms, extra)
        md = [f"# ORM benchmark results ({env['date']})\n",
              f"Machine: {env['cpu']}, {env['cores']} cores, {env['memory']}; kernel {env['kernel']}; "
              f"Python {env['python']}; SQLite {env['sqlite']}; databases on {env['filesystem']} "
              f"({env['db_dir']}).\n",
              f"Config: tests {cfg['tests']}, modes {cfg['modes']}, runs {cfg['runs']}, "
              f"N={cfg['iterations']}, BATCH_SIZE={cfg['batch_size']}, timing {cfg['timing']}"
              + (" (SMOKE: sizes tiny, numbers meaningless)" if cfg["smoke"] else "") + ".\n",
              (f"**PARTIAL**: {len(self.blocks)} of {self.blocks_total} backend x mode blocks "
               "measured (a checkpoint of a run in progress, or of an interrupted run).\n"
               if partial else ""),
              report.summary_markdown(gms, self.unavailable),
              report.markdown(cells, gms)]
        base = BY_ID.get(BASELINE_ID)
        if base and any(c["backend"] == base.label for c in cells):
            md.append(f"### MoteDB / {base.label} (--baseline {cfg['baseline']['ref']}) per operation\n\n"
                      "median over median; above 1.0: this checkout is faster\n\n"
                      + report.ops_table({"cells": cells, "geomean": gms}, "MoteDB", base.label))
        timeouts = [g for g in self.gates if g["timed_out"]]
        if timeouts:
            md.append("Load gate timed out before: " + ", ".join(
                f"{g['backend']} ({g['mode']}, load {g['load1']})" for g in timeouts) + "\n")
        if self.errors:
            md.append("Errors:\n" + "\n".join(f"- {e['backend']} test {e['test']} {e['mode']} {e['op']}: "
                                              f"{e['error']}" for e in self.errors) + "\n")
        text = "\n".join(md)
        with open(os.path.join(out, "results.md"), "w") as f:
            f.write(text)
        files = []
        if cfg["charts"] and cells and not partial:
            files = report.charts(cells, gms, out)
        return out, report.summary_markdown(gms, self.unavailable), files


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if not in_harness():
        reexec_in_harness(argv)
    from rich.console import Console
    console = Console()
    cfg = resolve_config(a)
    cfg["db_dir"] = check_db_dir(cfg["db_dir"], console.print)
    lock = hold_db_dir(cfg["db_dir"])  # noqa: F841 - held until the process exits
    env = environment(cfg["db_dir"])
    console.print(f"bench.orm: backends {','.join(cfg['backends'])}; plan {cfg['plan']}; runs {cfg['runs']}; "
                  f"N={cfg['iterations']} BATCH={cfg['batch_size']}; databases in {cfg['db_dir']} "
                  f"({env['filesystem']})")
    t0 = time.monotonic()
    orch = Orchestrator(cfg, console)
    if a.resume:
        orch.resume_from(load_resume(cfg, a.redo), a.redo)
        console.print(f"bench.orm: resuming {cfg['out']}: {len(orch.blocks)} backend x mode blocks kept"
                      + (f", measuring {', '.join(a.redo)} again" if a.redo else ""))
    elif a.redo:
        sys.exit("--redo needs --resume")
    orch.run(checkpoint=lambda: orch.write(env, partial=True))
    env["duration_s"] = round(time.monotonic() - t0)
    out, summary, files = orch.write(env)
    console.print(summary, markup=False, highlight=False)
    console.print(f"results: {out} (results.json, results.md{', ' + ', '.join(files) if files else ''}); "
                  f"{time.monotonic() - t0:.0f} s")
    if cfg["smoke"]:
        failed = orch.errors or orch.check_failures
        missing = [lb for lb in orch.unavailable if BY_LABEL[lb].id in cfg["backends"]
                   and BY_LABEL[lb].id != "motedb"]
        if failed or missing:
            console.print(f"[red]SMOKE FAILED: {len(orch.errors)} errors, {len(orch.check_failures)} failed "
                          f"checks, unavailable: {missing}[/red]")
            return 1
        console.print("[green]SMOKE OK: every operation processed the expected rows[/green]")
    return 0
