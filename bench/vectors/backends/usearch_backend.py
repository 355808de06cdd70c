"""USearch (PyPI usearch): an HNSW index saved to one file.

build(): Index(ndim, metric "cos" | "l2sq", dtype "f32" (no quantization, as the others), connectivity=M,
expansion_add=ef_construction), add(rows, vectors, threads=1), save(). open(): Index.restore() (read into memory).
Search: expansion_search = ef, search(q, k, threads=1).keys.

Filter: the Python API of usearch 2.x has no filtered search and no predicate callback (the C++ API has one), so
the filtered rows say "no filter support" rather than post-filtering.
"""

import numpy as np

from .base import Backend

METRICS = {"cosine": "cos", "euclidean": "l2sq"}


def availability():
    try:
        from usearch.index import Index  # noqa: F401
    except Exception as e:
        return f"usearch does not import: {type(e).__name__}: {e}"
    return None


class USearchBackend(Backend):
    label = "USearch"
    filter_mode = None
    filter_how = "no filter support in the Python API (no predicate callback)"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        from usearch.index import Index
        self.Index = Index
        self.usearch_metric = METRICS[metric]

    def describe(self):
        import usearch
        return {"usearch": usearch.__version__, "metric": self.usearch_metric, "dtype": "f32",
                "connectivity": self.m, "expansion_add": self.ef_construction, "threads": 1,
                "filter": self.filter_how}

    def build(self, path, vectors, tags):
        index = self.Index(ndim=self.dim, metric=self.usearch_metric, dtype="f32", connectivity=self.m,
                           expansion_add=self.ef_construction)
        index.add(np.arange(len(vectors)), vectors, threads=1)
        index.save(f"{path}/index.usearch")
        return {"hardware_acceleration": str(index.hardware_acceleration)}

    def open(self, path, n):
        return self.Index.restore(f"{path}/index.usearch")

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        if threshold is not None:
            raise NotImplementedError("usearch: no filter support")
        index = handle
        index.expansion_search = max(ef, k)

        def search(q):
            return index.search(q, k, threads=1).keys
        return search


def create_backend(dim, metric, work_dir, params):
    return USearchBackend(dim, metric, work_dir, params)
