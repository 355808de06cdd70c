"""Smoke test of the vector search benchmark (bench/vectors): small data sets (5,000 vectors of 128 dimensions, real
text and synthetic), MoteDB with its HNSW index, MoteDB without it (exact) and hnswlib.

Runs `python3 -m bench.vectors --smoke --engines motedb,motedb-exact,hnswlib` as a subprocess (it creates or
reuses .bench-venvs/vectors/ and checks by itself that every engine measured plausible numbers, exiting non-zero
otherwise), then checks the output's shape and what must hold: MoteDB's graph search finds recall@10 >= 0.9 at
the largest ef of the smoke's sweep, and a filtered search returns exactly 10 matching results for every query.

The smoke profile indexes 5,000 vectors per data set (not 2,000, and without forcing exact=False) so that MoteDB's
planner really searches the graph, as it does for an application: it answers exactly below 2,048 indexed vectors,
and for a filter whose tag index selects at most max(2,048, n/16) objects. At 5,000 the unfiltered searches and
the 50 % filter (about 2,500 matches) go through the graph (the test checks these plans: Query.plan(), recorded
with each point), the 1 % and 10 % filters are answered exactly. The per-agent stores (1,000 vectors) are answered
exactly by the planner.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environment: not under ASan

REPO_ROOT = Path(__file__).resolve().parents[2]
LABELS = {"MoteDB", "MoteDB exact", "hnswlib"}


def test_bench_vectors_smoke(tmp_path):
    out = tmp_path / "out"
    # The first run creates .bench-venvs/vectors/ (about 1.5 minutes) and extracts the corpus (about 20 s, then
    # cached in .bench-tmp/vectors/); afterwards the run takes about 30 s.
    proc = subprocess.run(
        [sys.executable, "-m", "bench.vectors", "--smoke", "--engines", "motedb,motedb-exact,hnswlib", "--out",
         str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert "smoke: every engine measured plausible numbers" in proc.stderr

    results = json.loads((out / "results.json").read_text())
    assert {"environment", "parameters", "datasets", "runs", "agents", "sweep", "filtered", "summary"} <= set(results)
    env, par = results["environment"], results["parameters"]
    assert env["mode"] == "smoke"
    assert env["packages"].get("numpy")

    datasets = results["datasets"]
    assert set(datasets) == {"synthetic-128", "real-128"}
    real = datasets["real-128"]
    assert real["kind"] == "real" and real["metric"] == "cosine" and real["n"] == 5000
    assert real["corpus"]["passages"] > 10_000 and set(real["corpus"]["passages_per_source"]) == {"man", "pydoc"}
    assert datasets["synthetic-128"]["kind"] == "synthetic"

    for ds, runs in results["runs"].items():
        assert set(runs) == LABELS
        assert runs["MoteDB"]["status"] == "ok", runs["MoteDB"]
        assert runs["MoteDB exact"]["status"] == "ok", runs["MoteDB exact"]
        for label, run in runs.items():
            if run["status"] == "unavailable":
                assert run["reason"]
                continue
            assert run["status"] == "ok", (ds, label, run)
            assert run["build"]["build_s"] > 0 and run["build"]["disk_bytes"] > 0
            for p in run["sweep"]:
                assert 0.0 <= p["recall"] <= 1.0 and p["qps"] > 0
        mote = runs["MoteDB"]
        assert not mote["exact"] and mote["describe"]["index"].startswith("motedb.Hnsw(")
        assert [p["ef"] for p in mote["sweep"]] == par["ef_search_sweep"]
        for p in mote["sweep"]:
            assert p["plan"].startswith("vector index"), (ds, p)  # the graph, not exact search
        largest = max(mote["sweep"], key=lambda p: p["ef"])
        assert largest["recall"] >= 0.9, (ds, largest)
        assert mote["operating_ef"] in par["ef_search_sweep"]
        assert sorted(f["selectivity_pct"] for f in mote["filtered"]) == par["selectivities_pct"]
        for f in mote["filtered"]:
            assert f["ef"] == mote["operating_ef"]
            assert f["short_queries"] == 0 and f["wrong_filter_rows"] == 0, (ds, f)  # exactly 10 results
            assert f["recall"] >= 0.9, (ds, f)
        plans = {f["selectivity_pct"]: f["plan"] for f in mote["filtered"]}
        assert plans[50].startswith("vector index"), plans  # ~2,500 of 5,000 match: the graph, filtered
        exact = runs["MoteDB exact"]
        assert exact["exact"] and [p["ef"] for p in exact["sweep"]] == [None]  # exact: one point
        assert exact["sweep"][0]["recall"] == 1.0
        for f in exact["filtered"]:
            assert f["recall"] == 1.0 and f["short_queries"] == 0 and f["wrong_filter_rows"] == 0
        if runs["hnswlib"]["status"] == "ok":
            assert [p["ef"] for p in runs["hnswlib"]["sweep"]] == par["ef_search_sweep"]

    for row in results["sweep"]:
        assert {"dataset", "engine", "ef", "recall", "qps"} <= set(row)
    agents = results["agents"]
    assert agents["runs"]["MoteDB"]["status"] == "ok"
    assert 0 < agents["runs"]["MoteDB"]["open_query_close_median_ms"] <= agents["runs"]["MoteDB"][
        "open_query_close_p99_ms"]
    assert agents["runs"]["MoteDB"]["recall"] >= 0.9
    assert agents["runs"]["MoteDB exact"]["recall"] == 1.0

    md = (out / "results.md").read_text()
    assert "Target (MoteDB)" in md and "QPS at recall@10 ≥ 0.95" in md and "One store per agent" in md
    for chart in ("chart-synthetic-128.png", "chart-real-128.png", "chart-agents.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
