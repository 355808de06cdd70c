"""Smoke test of the many-small-stores benchmark (bench/stores): a handful of stores per engine, both workloads.

Runs `python3 -m bench.stores --smoke` as a subprocess (it creates or reuses .bench-venvs/stores/ and checks by
itself that every phase of every engine measured something plausible), then checks the output's shape.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environments: not under ASan

REPO_ROOT = Path(__file__).resolve().parents[2]

METRICS = {
    "open_query_close_median_ms", "open_query_close_p99_ms", "memory_per_store_rss_bytes",
    "memory_per_store_anon_bytes", "create_write_close_median_ms", "space_per_store_bytes", "count_query_median_ms",
}
LABELS = {
    "MoteDB", "ObjectBox (sync every open)", "ObjectBox (cached model)", "ObjectBox (skip model sync)", "SQLite",
    "Turso Database", "libSQL",
}
SMALL_METRICS = METRICS - {"count_query_median_ms"}


def test_bench_stores_smoke(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.stores", "--smoke", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert "smoke: all phases" in proc.stderr

    results = json.loads((out / "results.json").read_text())
    assert set(results) == {"environment", "rows"}
    rows = results["rows"]
    assert rows
    for row in rows:
        assert set(row) == {"workload", "engine", "metric", "value"}
        assert row["workload"] in ("small", "large")
        assert row["engine"] in LABELS
        assert row["metric"] in METRICS
        if row["metric"].startswith("memory_per_store"):
            # a handful of small stores may grow the heap by less than a page
            assert row["value"] == row["value"]  # a number, not NaN
        else:
            assert row["value"] > 0

    env = results["environment"]
    assert env["mode"] == "smoke"
    assert env["file_system"]["fstype"] not in ("tmpfs", "ramfs")
    assert env["packages"].get("objectbox")
    runs = env["runs"]
    assert set(runs) == {"small", "large"}
    for workload, expected in (("small", SMALL_METRICS), ("large", METRICS)):
        assert set(runs[workload]) == LABELS  # every engine is either measured or says why not
        measured = {label for label, run in runs[workload].items() if run["status"] == "ok"}
        assert "SQLite" in measured  # the standard library's engine always runs
        for label, run in runs[workload].items():
            if run["status"] == "unavailable":
                assert run["reason"]
            else:
                assert run["status"] == "ok", run
                got = {r["metric"] for r in rows if r["workload"] == workload and r["engine"] == label}
                assert got == expected, (workload, label)

    md = (out / "results.md").read_text()
    assert "| Open, query (read 10 objects), close (median) |" in md
    assert "Target (MoteDB)" in md
    for chart in ("chart-small.png", "chart-large.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
