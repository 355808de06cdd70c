"""FAISS (PyPI faiss-cpu): IndexHNSWFlat, saved with write_index().

build(): IndexHNSWFlat(dim, M, METRIC_L2 or METRIC_INNER_PRODUCT), hnsw.efConstruction = ef_construction, add()
with one OpenMP thread, write_index(). Cosine is the inner product here: the real-text vectors and their queries
are unit length (checked). FAISS keeps no attributes: the tags are saved beside the index (tags.npy, counted in
the bytes on disk). open(): read_index() (read into memory). Search: hnsw.efSearch = ef, search(q[None], k).

Filter: SearchParametersHNSW(sel=IDSelectorBitmap(...), efSearch=ef): the search skips non-matching ids itself.
The bitmap of the rows whose tag < s is made before the timed searches (FAISS stores no attributes; an application
would keep it per filter value). Missing results come back as -1 and count as short.
"""

import numpy as np

from .base import Backend, unit_length


def availability():
    try:
        import faiss  # noqa: F401
    except Exception as e:
        return f"faiss does not import: {type(e).__name__}: {e}"
    return None


class FaissBackend(Backend):
    label = "FAISS"
    filter_mode = "in-search"
    filter_how = "SearchParametersHNSW(sel=IDSelectorBitmap): the rows' bitmap made before timing"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import faiss
        self.faiss = faiss
        faiss.omp_set_num_threads(1)
        self.faiss_metric = faiss.METRIC_INNER_PRODUCT if metric == "cosine" else faiss.METRIC_L2
        self._keep = []

    def describe(self):
        return {"faiss": self.faiss.__version__, "index": f"IndexHNSWFlat(d, M={self.m})",
                "metric": "METRIC_INNER_PRODUCT (unit vectors: cosine)" if self.metric == "cosine" else "METRIC_L2",
                "efConstruction": self.ef_construction, "omp_threads": 1,
                "attributes": "tags kept by the application (tags.npy beside the index)", "filter": self.filter_how}

    def build(self, path, vectors, tags):
        if self.metric == "cosine" and not unit_length(vectors):
            raise RuntimeError("cosine through the inner product needs unit vectors")
        index = self.faiss.IndexHNSWFlat(self.dim, self.m, self.faiss_metric)
        index.hnsw.efConstruction = self.ef_construction
        index.add(vectors)
        self.faiss.write_index(index, f"{path}/index.faiss")
        np.save(f"{path}/tags.npy", tags)
        return {}

    def open(self, path, n):
        return self.faiss.read_index(f"{path}/index.faiss"), np.load(f"{path}/tags.npy")

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        index, stored_tags = handle
        if threshold is None:
            index.hnsw.efSearch = max(ef, k)

            def search(q):
                return index.search(q.reshape(1, -1), k)[1][0]
            return search
        bits = np.packbits(stored_tags < threshold, bitorder="little")
        sel = self.faiss.IDSelectorBitmap(len(stored_tags), self.faiss.swig_ptr(bits))
        params = self.faiss.SearchParametersHNSW(sel=sel, efSearch=max(ef, k))
        self._keep = [bits, sel, params]  # the selector points into bits

        def search_filtered(q):
            return index.search(q.reshape(1, -1), k, params=params)[1][0]
        return search_filtered

    def close(self, handle):
        self._keep = []


def create_backend(dim, metric, work_dir, params):
    return FaissBackend(dim, metric, work_dir, params)
