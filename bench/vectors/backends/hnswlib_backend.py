"""hnswlib (PyPI hnswlib, built from its source distribution): an in-memory HNSW index saved to one file.

build(): Index(space, dim).init_index(n, M, ef_construction, random_seed=100), add_items(vectors, rows,
num_threads=1), save_index(). hnswlib keeps no attributes: the application keeps the tags itself (saved beside the
index as tags.npy, counted in the bytes on disk, 4 bytes per vector). open(): load_index() (the whole index read
into memory) and the tags. Search: set_ef(max(ef, k)); knn_query(q, k, num_threads=1).

Filter: knn_query's filter callback, called by the search with each candidate's label: here the bound
__getitem__ of a Python list of booleans (tag < s per row): the cheapest Python callable. knn_query raises a
RuntimeError when it finds fewer than k results; such a search counts as returning nothing (a short result).
"""

import numpy as np

from .base import Backend

SPACES = {"cosine": "cosine", "euclidean": "l2"}


def availability():
    try:
        import hnswlib  # noqa: F401
    except Exception as e:
        return f"hnswlib does not import: {type(e).__name__}: {e}"
    return None


class HnswlibBackend(Backend):
    label = "hnswlib"
    filter_mode = "callback"
    filter_how = "knn_query(filter=callback): a Python predicate (list lookup) per candidate label"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import hnswlib
        self.hnswlib = hnswlib
        self.space = SPACES[metric]

    def describe(self):
        from importlib import metadata
        return {"hnswlib": metadata.version("hnswlib"), "space": self.space, "M": self.m,
                "ef_construction": self.ef_construction, "threads": 1,
                "attributes": "tags kept by the application (tags.npy beside the index)",
                "filter": self.filter_how}

    def build(self, path, vectors, tags):
        index = self.hnswlib.Index(space=self.space, dim=self.dim)
        index.init_index(max_elements=len(vectors), ef_construction=self.ef_construction, M=self.m, random_seed=100)
        index.add_items(vectors, np.arange(len(vectors)), num_threads=1)
        index.save_index(f"{path}/index.bin")
        np.save(f"{path}/tags.npy", tags)
        return {}

    def open(self, path, n):
        index = self.hnswlib.Index(space=self.space, dim=self.dim)
        index.load_index(f"{path}/index.bin", max_elements=n)
        return index, np.load(f"{path}/tags.npy")

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        index, stored_tags = handle
        index.set_ef(max(ef, k))
        if threshold is None:
            def search(q):
                return index.knn_query(q, k=k, num_threads=1)[0][0]
            return search
        allowed = (stored_tags < threshold).tolist().__getitem__

        def search_filtered(q):
            try:
                return index.knn_query(q, k=k, num_threads=1, filter=allowed)[0][0]
            except RuntimeError:  # fewer than k found
                return []
        return search_filtered

    def close(self, handle):
        pass  # the index is freed with the handle


def create_backend(dim, metric, work_dir, params):
    return HnswlibBackend(dim, metric, work_dir, params)
