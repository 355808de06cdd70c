"""Smoke test of the LangGraph checkpointer benchmark (bench/agents): 4 threads × 5 steps, one rep; its async
API configuration (motedb.aio against aiosqlite): 100 coroutines × 5 operations; and its store search (MoteStore
against SqliteStore): 4 users × 30 memories, 20 searches of each kind it can run here.

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
CONFIGS = {  # beside the two compared, the disk's limit ("limit": InMemorySaver + a 4 KB fdatasync per commit)
    "sync per-thread": {"MoteSaver", "SqliteSaver", "limit"},
    "sync shared": {"MoteSaver", "SqliteSaver", "limit"},
    "async shared": {"MoteSaver", "AsyncSqliteSaver", "limit"},
}
AIO_CONFIG, AIO_ENGINES, AIO_KINDS = "async API", {"motedb.aio", "aiosqlite"}, {"get", "write"}
SEARCH_CONFIG, SEARCH_ENGINES = "store search", {"MoteStore", "SqliteStore"}


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
    assert set(res["results"]) == set(CONFIGS) | {AIO_CONFIG, SEARCH_CONFIG} == set(res["ratios"])
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
        assert ra["steps_per_s_vs_limit"] == pytest.approx(
            res["results"][cfg]["MoteSaver"]["steps_per_s"] / res["results"][cfg]["limit"]["steps_per_s"])
    a = p["async_api"]
    assert a["coroutines"] == 100 and a["ops_per_run"] == a["coroutines"] * a["ops_per_coroutine"]
    assert a["ops_per_run"] == a["gets_per_run"] + a["inserts_per_run"] + a["updates_per_run"]
    assert a["inserts_per_run"] > 0 and a["updates_per_run"] > 0
    assert a["gets_per_run"] == round(0.9 * a["ops_per_run"])
    assert set(res["results"][AIO_CONFIG]) == AIO_ENGINES
    for e in AIO_ENGINES:
        recs = res["measurements"][AIO_CONFIG][e]
        assert len(recs) == p["reps"] and all(r["ops"] == a["ops_per_run"] for r in recs)
        r = res["results"][AIO_CONFIG][e]
        assert r["ops_per_s"] > 0
        for k in AIO_KINDS:
            assert 0 < r["latency_p50_us"][k] <= r["latency_p99_us"][k]
    assert res["results"][AIO_CONFIG]["motedb.aio"]["open_options"]["sync"] is True
    assert res["results"][AIO_CONFIG]["aiosqlite"]["sqlite"]["synchronous"] == "FULL"
    assert res["results"][AIO_CONFIG]["aiosqlite"]["sqlite"]["journal_mode"] == "wal"
    ra = res["ratios"][AIO_CONFIG]
    assert ra["against"] == "aiosqlite" and ra["ops_per_s"] > 0 and set(ra["latency_p50"]) == AIO_KINDS
    s = p["store_search"]
    assert s["kinds"][0] == "filter" and set(s["kinds"]) <= {"filter", "semantic"}
    assert (len(s["kinds"]) == 2) == (s["semantic_not_measured"] is None)
    for e in SEARCH_ENGINES:
        for k in s["kinds"]:
            r = res["results"][SEARCH_CONFIG][e][k]
            assert r["searches_per_s"] > 0 and 0 < r["latency_p50_us"] <= r["latency_p99_us"]
            assert all(m["kinds"][k]["searches"] == s["searches_per_kind"]
                       for m in res["measurements"][SEARCH_CONFIG][e])
    assert all(res["ratios"][SEARCH_CONFIG][k]["searches_per_s"] > 0 for k in s["kinds"])
    md = (out / "results.md").read_text()
    assert "| store search, filter (4 users × 30 memories; SqliteStore) | searches/s |" in md
    assert md.startswith("## bench/agents")
    assert "| async API: 100 coroutines (motedb.aio vs aiosqlite) | ops/s |" in md
    assert {f.name for f in out.glob("*.png")} == set(res["environment"]["charts"]) != set()
