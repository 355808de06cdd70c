"""Smoke test of the ORM benchmark harness (bench/orm): tiny sizes, one backend per
family, cold + warm + large table; the harness checks that every operation processed
the expected rows (numbers are not looked at). Creates .bench-venvs/{harness,core,motedb}
on first use (about a minute), then reuses them.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environments: not under ASan

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED_BACKENDS = {"MoteDB", "sqlite3", "ObjectBox", "peewee", "SA ORM", "SA ORM async", "Django"}


def test_bench_orm_smoke(tmp_path):
    out = tmp_path / "results"
    python = getattr(sys, "_base_executable", None) or sys.executable
    proc = subprocess.run([python, "-m", "bench.orm", "--smoke", "--out", str(out)],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "SMOKE OK" in proc.stdout
    doc = json.loads((out / "results.json").read_text())
    assert set(doc) >= {"environment", "config", "cells", "geomean"}
    assert not doc["errors"] and not doc["check_failures"]
    backends = {c["backend"] for c in doc["cells"]}
    assert backends == EXPECTED_BACKENDS
    # every (test, mode) of the plan has all object operations for every backend
    for mode, test in doc["config"]["plan"]:
        for b in EXPECTED_BACKENDS:
            ops = {c["op"] for c in doc["cells"] if c["backend"] == b and c["test"] == test and c["mode"] == mode}
            assert ops >= set("ABCDEFIJK"), (b, test, mode, ops)
    for c in doc["cells"]:
        assert c["median"] and c["median"] > 0 and len(c["runs"]) == 1
    for g in doc["geomean"]:
        assert g["ops"] == 9 and g["value"] > 0
    assert (out / "results.md").exists()
    assert (out / "summary.png").exists() and (out / "test1-cold.png").exists()
    assert doc["config"]["timing"] == "seed" and doc["config"]["fidelity"]["timing"] == "seed"


def _bench(out, *args):
    python = getattr(sys, "_base_executable", None) or sys.executable
    return subprocess.run([python, "-m", "bench.orm", "--smoke", "--backends", "sqlite3", "--tests", "1",
                           "--no-charts", "--out", str(out), *args],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=REPO))


def _cold_runs(doc):
    return {c["op"]: c["runs"] for c in doc["cells"] if c["mode"] == "cold"}


def test_bench_orm_resume(tmp_path):
    """--resume keeps the blocks an interrupted run measured and runs the others;
    --redo measures a mode again; other settings are refused."""
    out = tmp_path / "results"
    first = _bench(out, "--mode", "cold")
    assert first.returncode == 0, first.stdout[-4000:]
    doc1 = json.loads((out / "results.json").read_text())

    second = _bench(out, "--mode", "cold", "warm", "--resume")
    assert second.returncode == 0, second.stdout[-4000:]
    doc2 = json.loads((out / "results.json").read_text())
    assert _cold_runs(doc2) == _cold_runs(doc1)  # kept, not measured again
    assert {c["op"] for c in doc2["cells"] if c["mode"] == "warm"} >= set("ABCDEFIJK")
    assert [b["mode"] for b in doc2["environment"]["blocks"]] == ["cold", "warm"]
    assert len(doc2["environment"]["sessions"]) == 2 and doc2["config"]["complete"]

    third = _bench(out, "--mode", "cold", "warm", "--resume", "--redo", "cold")
    assert third.returncode == 0, third.stdout[-4000:]
    doc3 = json.loads((out / "results.json").read_text())
    assert [b["mode"] for b in doc3["environment"]["blocks"]] == ["warm", "cold"]  # cold measured anew
    assert {c["op"] for c in doc3["cells"] if c["mode"] == "cold"} >= set("ABCDEFIJK")

    other = _bench(out, "--mode", "cold", "--resume", "--runs", "2")
    assert other.returncode != 0 and "other settings" in other.stdout
    other = _bench(out, "--mode", "cold", "--resume", "--timing", "upstream")
    assert other.returncode != 0 and "timing" in other.stdout


def test_bench_orm_baseline(tmp_path):
    """--baseline REF runs MoteDB built from that commit beside this checkout's, in one run,
    and results.md gives one over the other per operation; an unknown revision is refused."""
    out = tmp_path / "results"
    proc = _bench(out, "--mode", "cold", "--backends", "motedb", "--baseline", "HEAD")
    assert proc.returncode == 0, proc.stdout[-4000:]
    doc = json.loads((out / "results.json").read_text())
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], stdout=subprocess.PIPE, text=True,
                            check=True).stdout.strip()
    label = f"MoteDB {commit[:9]}"
    assert doc["config"]["baseline"]["commit"] == commit
    assert doc["config"]["backends"] == ["motedb", "motedb-base"]
    for b in ("MoteDB", label):
        assert {c["op"] for c in doc["cells"] if c["backend"] == b} >= set("ABCDEFIJK"), b
    assert not doc["errors"] and not doc["check_failures"]
    md = (out / "results.md").read_text()
    assert f"### MoteDB / {label} (--baseline HEAD) per operation" in md
    assert "| T1 cold |" in md.split(f"### MoteDB / {label}")[1]
    bad = _bench(out, "--mode", "cold", "--baseline", "no-such-revision")
    assert bad.returncode != 0 and "--baseline: git cannot resolve" in bad.stdout


def test_bench_orm_upstream_timing(tmp_path):
    """--timing upstream: A-C build their objects inside the timer (the insert paths take
    the objects built there); every operation still processes the expected rows."""
    out = tmp_path / "results"
    proc = _bench(out, "--mode", "cold", "warm", "--timing", "upstream")
    assert proc.returncode == 0, proc.stdout[-4000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["timing"] == "upstream" and "inside the timer" in doc["config"]["fidelity"]["timed"]
    assert not doc["errors"] and not doc["check_failures"]
    for mode in ("cold", "warm"):
        assert {c["op"] for c in doc["cells"] if c["mode"] == mode} >= set("ABCDEFIJK")


@pytest.mark.parametrize("op", ["D", "K"])
def test_bench_orm_profile_repeats_one_operation(tmp_path, op):
    """bench.orm.profile (one operation again and again in one process, for perf) runs on
    this environment's motedb, reaches the operation through the harness's Runner and
    puts the rows back after an operation that changes them (K deletes every row)."""
    proc = subprocess.run([sys.executable, "-m", "bench.orm.profile", "--op", op, "--test", "2",
                           "--iterations", "4", "--batch", "50", "--seconds", "0.3",
                           "--db-dir", str(tmp_path / "db")],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stdout[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("setup: ")
    name, rest = lines[-1].rsplit(": ", 1)
    runs, rows = int(rest.split(" runs of ")[0]), int(rest.split(" runs of ")[1].split()[0])
    assert name.startswith(op) and runs >= 2 and rows == (12 if op == "K" else 120), lines[-1]


def test_bench_orm_profile_copies_file_and_directory_snapshots(tmp_path):
    """ObjectBox's snapshot is a directory, the others' a file: the profile's restore copy
    takes either (it copied files only, and failed on ObjectBox with IsADirectoryError)."""
    from bench.orm.profile import copy_snapshot
    f = tmp_path / "rows.mote"
    f.write_bytes(b"rows")
    d = tmp_path / "objectbox"
    (d / "sub").mkdir(parents=True)
    (d / "data.mdb").write_bytes(b"pages")
    (d / "sub" / "lock").write_bytes(b"x")
    assert open(copy_snapshot(str(f)), "rb").read() == b"rows"
    c = copy_snapshot(str(d))
    assert open(os.path.join(c, "data.mdb"), "rb").read() == b"pages"
    assert os.path.exists(os.path.join(c, "sub", "lock"))


def test_bench_orm_backends_take_turns(monkeypatch):
    """--order ops (the default): in a mode, the backends take turns at every step (create,
    then each operation) of every run, the first of them rotated by run; a backend alone
    runs its steps in order. Checked on the orchestrator with the workers left out."""
    from types import SimpleNamespace

    from bench.orm import cli, spec

    calls = []
    monkeypatch.setattr(cli, "load_gate", lambda threshold, timeout: {"timed_out": False, "load1": 0.0})
    orch = cli.Orchestrator({"runs": 2, "load_timeout_s": 0, "load_threshold": 1.0}, console=None)
    orch.run_backend = lambda b, mode, run, test, py, progress, task, steps: calls.append(
        (run, test, steps, b.label))
    progress = SimpleNamespace(update=lambda *a, **k: None)
    one, two = SimpleNamespace(label="one"), SimpleNamespace(label="two")
    orch.run_block("cold", [1, 3], [(one, "py1"), (two, "py2")], progress, None)
    steps = ["create"] + list(spec.OPS)
    expected = [(run, test, [step], b)
                for run, order in ((0, ("one", "two")), (1, ("two", "one")))
                for test in (1, 3) for step in steps for b in order]
    assert calls == expected
    assert [(b["backend"], b["in_turns"]) for b in orch.blocks] == [("one", True), ("two", True)]

    calls.clear()
    orch.run_block("warm", [2], [(one, "py1")], progress, None)
    assert calls == [(run, 2, [step], "one") for run in (0, 1) for step in steps]
    assert orch.blocks[-1]["in_turns"] is False


def test_bench_orm_refuses_a_database_directory_in_use(tmp_path):
    """A second run on a --db-dir that a run is using exits at once instead of recreating
    and deleting the other's databases (two runs started four seconds apart once emptied
    each other's tables)."""
    import fcntl
    db = tmp_path / "db"
    db.mkdir()
    with open(db / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = _bench(tmp_path / "results", "--mode", "cold", "--db-dir", str(db))
    assert proc.returncode != 0 and "in use by another bench.orm run" in proc.stdout
    assert not (tmp_path / "results").exists()
    proc = _bench(tmp_path / "results", "--mode", "cold", "--db-dir", str(db))  # free again
    assert proc.returncode == 0, proc.stdout[-4000:]
