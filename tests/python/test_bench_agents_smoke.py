"""Smoke test of the LangGraph checkpointer benchmark (bench/agents): 4 threads × 5 steps, one rep.

Runs `python3 -m bench.agents --smoke` as a subprocess (it creates or reuses .bench-venvs/agents/ and checks by
itself that every measurement is plausible), then checks the output's shape.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environment: not under ASan

REPO_ROOT = Path(__file__).resolve().parents[2]
CALLS = {"get_tuple", "put_writes", "put", "list"}
CONFIGS = {
    "sync per-thread": {"MoteSaver", "SqliteSaver"},
    "sync shared": {"MoteSaver", "SqliteSaver"},
    "async shared": {"MoteSaver", "AsyncSqliteSaver"},
}


def test_bench_agents_smoke(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.agents", "--smoke", "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert "smoke: all measurements plausible" in proc.stderr
    res = json.loads((out / "results.json").read_text())
    assert set(res) == {"environment", "parameters", "measurements", "results", "ratios"}
    p = res["parameters"]
    assert p["profile"] == "smoke" and p["reps"] >= 1
    assert p["checkpoints_per_run"] == p["threads"] * (p["steps_per_thread"] + 1)
    assert p["sqlite_synchronous_seen"]  # recorded, whatever it is
    assert set(res["results"]) == set(CONFIGS) == set(res["ratios"])
    for cfg, engines in CONFIGS.items():
        assert set(res["results"][cfg]) == engines
        assert all(len(res["measurements"][cfg][e]) == p["reps"] for e in engines)
        for e in engines:
            r = res["results"][cfg][e]
            assert r["steps_per_s"] > 0 and r["bytes_per_checkpoint"] > 0
            assert set(r["latency_p50_us"]) == CALLS
            for c in CALLS:
                assert 0 < r["latency_p50_us"][c] <= r["latency_p99_us"][c]
        ra = res["ratios"][cfg]
        assert ra["steps_per_s"] > 0 and ra["bytes_per_checkpoint"] > 0 and set(ra["latency_p50"]) == CALLS
    assert (out / "results.md").read_text().startswith("## bench/agents")
    assert {f.name for f in out.glob("*.png")} == set(res["environment"]["charts"]) != set()
