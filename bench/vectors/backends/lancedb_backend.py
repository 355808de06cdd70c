"""LanceDB (PyPI lancedb): a Lance table with an IVF_HNSW_FLAT index of one partition (one HNSW graph over raw
float32 vectors, no quantization) and a BTree index on the tag.

build(): lancedb.connect(dir), create_table() from an Arrow table (id, tag, vector), create_index("vector",
HnswFlat(distance_type, num_partitions=1, m=M, ef_construction)), create_index("tag", BTree()). LanceDB runs its
work on its own thread pool; the worker sets LANCE_CPU_THREADS=1 for it (recorded). open(): connect() +
open_table(). Search: table.search(q).distance_type(metric).limit(k).ef(ef).select(["id", "_distance"])
.to_arrow(). Filter: .where("tag < s", prefilter=True): LanceDB filters before the vector search.
"""

import os

import numpy as np

from .base import Backend

METRICS = {"cosine": "cosine", "euclidean": "l2"}


def availability():
    try:
        import lancedb  # noqa: F401
        import pyarrow  # noqa: F401
        from lancedb.index import BTree, HnswFlat  # noqa: F401
    except Exception as e:
        return f"lancedb does not import: {type(e).__name__}: {e}"
    return None


class LanceDBBackend(Backend):
    label = "LanceDB"
    filter_mode = "in-search"
    filter_how = "search(q).where('tag < s', prefilter=True) (BTree index on tag)"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import lancedb
        import pyarrow
        self.lancedb = lancedb
        self.pa = pyarrow
        self.lance_metric = METRICS[metric]

    def describe(self):
        from importlib import metadata
        return {"lancedb": metadata.version("lancedb"), "pyarrow": metadata.version("pyarrow"),
                "index": f"IVF_HNSW_FLAT: HnswFlat(num_partitions=1, m={self.m}, "
                         f"ef_construction={self.ef_construction}, distance_type={self.lance_metric!r})",
                "tag_index": "BTree", "LANCE_CPU_THREADS": os.environ.get("LANCE_CPU_THREADS"),
                "filter": self.filter_how}

    def build(self, path, vectors, tags):
        from lancedb.index import BTree, HnswFlat
        pa = self.pa
        table = pa.table({
            "id": pa.array(np.arange(len(vectors)), pa.int64()),
            "tag": pa.array(tags, pa.int32()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), self.dim),
        })
        db = self.lancedb.connect(path)
        tbl = db.create_table("docs", table)
        tbl.create_index("vector", config=HnswFlat(distance_type=self.lance_metric, num_partitions=1, m=self.m,
                                                   ef_construction=self.ef_construction))
        tbl.create_index("tag", config=BTree())
        return {}

    def open(self, path, n):
        return self.lancedb.connect(path).open_table("docs")

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        tbl = handle
        metric = self.lance_metric
        ef = max(ef, k)
        if threshold is None:
            def search(q):
                r = (tbl.search(q, vector_column_name="vector").distance_type(metric).limit(k).ef(ef)
                     .select(["id", "_distance"]).to_arrow())
                return r.column("id").to_pylist()
            return search
        where = f"tag < {int(threshold)}"

        def search_filtered(q):
            r = (tbl.search(q, vector_column_name="vector").distance_type(metric).limit(k).ef(ef)
                 .where(where, prefilter=True).select(["id", "_distance"]).to_arrow())
            return r.column("id").to_pylist()
        return search_filtered

    def close(self, handle):
        pass  # LanceDB's table has nothing to close; it is dropped with the handle


def create_backend(dim, metric, work_dir, params):
    return LanceDBBackend(dim, metric, work_dir, params)
