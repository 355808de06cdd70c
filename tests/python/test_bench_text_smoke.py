"""Smoke test of the full-text benchmark (bench/text): 2,000 passages, 20 queries per kind, the hybrid row.

Runs `python3 -m bench.text --smoke` as a subprocess (it creates or reuses .bench-venvs/text/ and checks by
itself that every measurement is plausible), then checks the output's shape.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_asan  # the benchmark harness in its own environment: not under ASan

REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = {"1 word", "2 words OR", "3 words OR", "2 words AND", "phrase of 2 words", "prefix of 3 letters"}


def test_bench_text_smoke(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.text", "--smoke", "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    assert "smoke: all measurements plausible" in proc.stderr
    res = json.loads((out / "results.json").read_text())
    assert set(res) == {"environment", "results"}
    r = res["results"]
    # tantivy when its package installed (requirements.txt), else a reason in "unavailable"
    engines = {"MoteDB", "SQLite FTS5"} | ({"tantivy"} if "tantivy" not in r["unavailable"] else set())
    assert set(r["build_s"]) == engines and set(r["index_bytes"]) == engines
    for e in engines:
        assert set(r["queries"][e]) == KINDS
        for kind in KINDS:
            q = r["queries"][e][kind]
            assert 0 < q["p50_us"] <= q["p99_us"]
    # the same ranking as FTS5 on words both tokenize alike
    assert all(r["overlap"][k] >= 0.9 for k in KINDS)
    hy = r["hybrid"]
    assert all(hy[k] > 0 for k in ("text_p50_us", "vector_p50_us", "hybrid_p50_us"))
    assert hy["empty_results"] == 0 and hy["queries"] == 20
    assert abs(hy["ratio"] - hy["hybrid_p50_us"] / (hy["text_p50_us"] + hy["vector_p50_us"])) < 1e-9
    assert (out / "results.md").read_text().startswith("## bench/text")
