"""The interface every backend of bench.vectors implements (the suite's options and results call them engines).

A backend module (bench/vectors/backends/<name>_backend.py, listed in __init__.py) defines

    def availability() -> Optional[str]
        None if the engine can run in this interpreter, else why not (e.g. "faiss does not import: ...").
    def create_backend(dim: int, metric: str, work_dir: str, params: dict) -> Backend
        One instance per worker process. metric is "cosine" or "euclidean"; params holds the HNSW parameters
        (m, ef_construction); work_dir is a directory the backend may use for its own files (not the index's).

Rows: the indexed vectors are rows 0..n-1 of the data set; every search returns the rows it found (the engine's
ids mapped back), nearest first, at most k of them.

Optional: plan() says how a search will be answered (recorded, untimed).

Timed by the worker: build() (the build row), open() (+ searcher() + one search + close() for the per-agent row),
and each call of the function searcher() returns (the QPS rows). searcher() itself is untimed in the QPS rows: it
sets the search parameters (ef) and prepares what the filter needs.
"""

import os
from typing import Any, Callable, List, Optional, Sequence

import numpy as np


class Backend:
    label = "?"            # exactly the label of its line in BACKENDS
    exact = False          # True: exact search (every candidate compared): no ef to sweep, recall 1.0 expected
    # How a filter (tag < s) is applied: "in-search" (the engine's own filtered search, from a condition or an
    # id selector), "callback" (the search calls a Python predicate per candidate), or None: no filter support.
    filter_mode: Optional[str] = None
    filter_how = ""        # one line for the tables: what exactly is done

    def __init__(self, dim: int, metric: str, work_dir: str, params: dict):
        self.dim = dim
        self.metric = metric
        self.work_dir = work_dir
        self.m = int(params.get("m", 16))
        self.ef_construction = int(params.get("ef_construction", 200))

    def describe(self) -> dict:
        """Versions and settings to record."""
        return {}

    def build(self, path: str, vectors: np.ndarray, tags: np.ndarray) -> dict:
        """Timed: from the float32 vectors (n x dim, rows 0..n-1) and their integer tags in memory to an index or
        store in the directory path (created empty by the worker) that answers queries, persisted there (one
        transaction or one save), and closed. Returns details to record (e.g. the time spent making objects)."""
        raise NotImplementedError

    def files(self, path: str) -> List[str]:
        """Every file the index or store consists of (for the bytes on disk); default: all files below path."""
        out = []
        for d, _dirs, fs in os.walk(path):
            out.extend(os.path.join(d, f) for f in fs)
        return sorted(out)

    def open(self, path: str, n: int) -> Any:
        """Timed (per-agent row; also recorded for the main data sets): open what build() left in path."""
        raise NotImplementedError

    def searcher(self, handle: Any, k: int, ef: Optional[int], threshold: Optional[int] = None,
                 tags: Optional[np.ndarray] = None) -> Callable[[np.ndarray], Sequence[int]]:
        """A function query (float32 vector) -> rows of the k nearest, with ef as the search's candidate list
        size (None for exact engines); with threshold, only rows whose tag < threshold (tags: the data set's tag
        of every row, for engines that keep no attributes)."""
        raise NotImplementedError

    def close(self, handle: Any) -> None:
        """Timed (per-agent row): release what open() took."""

    def plan(self, handle: Any, k: int, ef: Optional[int], threshold: Optional[int] = None,
             query: Optional[np.ndarray] = None) -> Optional[str]:
        """Untimed, optional: how the engine answers the search searcher() makes with these arguments (e.g. a
        query planner's choice between its index and exact search), recorded with the point; None if the engine
        has no such choice."""
        return None


def unit_length(vectors: np.ndarray) -> bool:
    """Whether every vector has length 1 (within float32 rounding): cosine is then the inner product."""
    n = np.linalg.norm(vectors, axis=1)
    return bool(np.all(np.abs(n - 1.0) < 1e-4))
