"""Smoke test of the ORM benchmark harness (bench/orm): tiny sizes, one backend per
family, cold + warm + large table; the harness checks that every operation processed
the expected rows (numbers are not looked at). Creates .bench-venvs/{harness,core}
on first use (about a minute), then reuses them.
"""

import json
import os
import subprocess
import sys

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
