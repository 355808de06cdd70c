"""bench.vectors: vector search, MoteDB beside hnswlib, usearch, FAISS, sqlite-vec, ObjectBox and LanceDB.

Run from the repository root with ``python3 -m bench.vectors``; see bench/vectors/README.md.
"""

import os

from bench.common.venvs import Venv

# The orchestrator and the workers run in .bench-venvs/vectors/ (requirements.txt, pinned).
VENV = Venv("vectors", os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt"))

SEED = 42
K = 10                 # top-k of every search (recall@10)
RECALL_TARGET = 0.95   # the operating point: the smallest swept ef reaching this recall@10 (unfiltered)
HNSW_PARAMS = {"m": 16, "ef_construction": 200}  # the same for every engine that has them
AGENT_VECTORS = 1_000  # vectors per store in the one-store-per-agent case
AGENT_EF = 64          # ef of the HNSW engines' searches there

# The profiles. datasets: (kind, dim, indexed vectors); queries: held-out queries per data set; efs: the ef_search
# sweep of the HNSW engines; passes and min_point_s: timed passes over all queries per point (the QPS is their
# median): at least `passes` and at least min_point_s seconds of searching, no more once the passes took budget_s;
# warmup: untimed queries before each point; build_reps: builds from scratch per engine and data set (the build
# time is their median); agents_stores x
# agents_passes: open + top-10 + close cycles per engine; load_timeout: the load gate's wait per worker.
PROFILES = {
    "smoke": {
        # 5,000 vectors: MoteDB's planner searches its graph from 2,048 indexed vectors on, and a filter whose
        # index selects more than 2,048 objects (50 % here) through the graph too, so the smoke exercises both
        "datasets": [("synthetic", 128, 5_000), ("real", 128, 5_000)],
        "queries": 20, "efs": [10, 20, 40, 80], "passes": 2, "min_point_s": 0.05, "budget_s": 5.0, "warmup": 5,
        "build_reps": 1, "rounds": 1,
        "agents_stores": 4, "agents_passes": 2, "load_timeout": 0.0,
    },
    "quick": {
        "datasets": [("synthetic", 128, 20_000), ("real", 128, 20_000)],
        "queries": 200, "efs": [10, 16, 24, 32, 48, 64, 96, 128, 256], "passes": 3, "min_point_s": 0.4,
        "budget_s": 4.0, "warmup": 20, "build_reps": 3, "rounds": 3,
        "agents_stores": 100, "agents_passes": 3, "load_timeout": 30.0,
    },
    "full": {
        "datasets": [("real", 128, 100_000), ("real", 384, 100_000), ("synthetic", 128, 100_000),
                     ("synthetic", 384, 100_000)],
        "queries": 1_000, "efs": [10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512], "passes": 3,
        "min_point_s": 2.0, "budget_s": 60.0, "warmup": 50, "build_reps": 3, "rounds": 3, "agents_stores": 1_000,
        "agents_passes": 2,
        "load_timeout": 300.0,
    },
}
