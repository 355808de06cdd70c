"""bench.stores: the many-small-stores benchmark (one small store per AI agent).

Run from the repository root with ``python3 -m bench.stores``; see bench/stores/README.md.
"""

import os

from bench.common.venvs import Venv

# The orchestrator and the workers run in .bench-venvs/stores/ (requirements.txt, pinned).
VENV = Venv("stores", os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt"))

# The metric names of results.json (rows); exactly these.
METRICS = [
    "open_query_close_median_ms",
    "open_query_close_p99_ms",
    "count_query_median_ms",
    "memory_per_store_rss_bytes",
    "memory_per_store_anon_bytes",
    "create_write_close_median_ms",
    "space_per_store_bytes",
]

WORKLOADS = ("small", "large")

# Which metrics each workload has (rows of results.json)
WORKLOAD_METRICS = {
    "small": ["open_query_close_median_ms", "open_query_close_p99_ms", "memory_per_store_rss_bytes",
              "memory_per_store_anon_bytes", "create_write_close_median_ms", "space_per_store_bytes"],
    "large": ["open_query_close_median_ms", "open_query_close_p99_ms", "count_query_median_ms",
              "memory_per_store_rss_bytes", "memory_per_store_anon_bytes", "create_write_close_median_ms",
              "space_per_store_bytes"],
}

# Stores per engine: the seed's sizes (--full) and the quick defaults.
FULL_STORES = {"small": 100_000, "large": 10_000}
QUICK_STORES = {"small": 10_000, "large": 1_000}
SMOKE_STORES = {"small": 20, "large": 5}
