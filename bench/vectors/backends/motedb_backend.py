"""MoteDB through its Python API (the motedb package of this repository, built from the checkout).

One store is one file (vectors.mote). Entity `Doc`: id, `tag` (an indexed int), `embedding`
(motedb.Vector(dim, index=motedb.Hnsw(distance, m=M, ef_construction)): an HNSW index with the M and
ef_construction every HNSW engine of the suite gets, distance "cosine" or "euclidean" as the data set's metric).
build(): motedb.open() (default durability), box.put_many() of all objects (one write transaction, one commit: the
graph is built at the commit), close(). Page size: the default 4,096 bytes unless an object (the vector plus a few
bytes) is more than a quarter of that, then the smallest power of two it fits a quarter of, as docs/python.md
advises for objects of 1-2 KB (a vector of 384 floats: 8,192); recorded in describe(). The objects carry the numpy
float32 rows themselves (a float32 buffer is accepted as the vector).

Search: box.query(Doc.embedding.nearest(q, k=k, ef=ef, distance=metric) [& (Doc.tag < s)]).ids(), the same ef
for the filtered searches (the operating ef). `exact` is left to MoteDB's planner (as an application leaves it):
it searches the graph when the index holds 2,048 vectors or more, and answers exactly (every candidate compared)
below that, and for a filter whose value index selects few objects (at most max(2,048, n/16)); a filtered graph
search applies the filter while it walks the graph and falls back to exact search when it finds fewer than k while
k match. Which path a query took (Query.plan(), untimed) is recorded with every point. A query is built for every
search: set_parameter() does not reach the nearest() condition (it raises "the query has no condition on
Doc.embedding"), so the query cannot be built once and reused as ObjectBox's is.

"MoteDB exact" (--engines motedb-exact) is the reference without a vector index: the same entity with a plain
motedb.Vector(dim), searched exactly (every vector, or every object the filter's index selects, compared): what
MoteDB measured before its HNSW index, and what the index costs in build time and bytes.
"""

from typing import Annotated

import numpy as np

from .base import Backend

_classes = {}
RECORD_OVERHEAD = 64  # bytes of an object besides its vector (id, tag, record header), rounded up


def page_size_for(dim):
    """The page size docs/python.md advises: an object of more than a quarter of a page is kept in pages of its
    own, so the smallest power of two from 4,096 whose quarter holds the object."""
    page = 4096
    while dim * 4 + RECORD_OVERHEAD > page // 4 and page < 65536:
        page *= 2
    return page


def availability():
    try:
        import motedb  # noqa: F401
    except Exception as e:  # not built or not installed in this environment
        return f"motedb does not import: {type(e).__name__}: {e}"
    if not hasattr(motedb, "Hnsw"):
        return "this motedb has no motedb.Hnsw (vector index)"
    return None


def _doc(dim, hnsw):
    """The entity class; hnsw: (distance, m, ef_construction) of its vector index, or None for no index."""
    key = (dim, hnsw)
    if key not in _classes:
        import motedb

        vector = motedb.Vector(dim) if hnsw is None else motedb.Vector(
            dim, index=motedb.Hnsw(distance=hnsw[0], m=hnsw[1], ef_construction=hnsw[2]))

        class Doc(motedb.Entity):
            id: int = 0
            tag: Annotated[int, motedb.Index] = 0
            embedding: Annotated[list[float], vector] = motedb.field(default_factory=lambda: [0.0] * dim)

        _classes[key] = Doc
    return _classes[key]


class MoteDBBackend(Backend):
    label = "MoteDB"
    exact = False
    indexed = True
    filter_mode = "in-search"
    filter_how = ("nearest(q, k, ef) & (Doc.tag < s) in one query (tag indexed): the graph search skips "
                  "non-matching objects; the planner answers exactly when the tag index selects few")

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import motedb
        self.motedb = motedb
        self.distance = {"cosine": "cosine", "euclidean": "euclidean"}[metric]
        self.Doc = _doc(dim, (self.distance, self.m, self.ef_construction) if self.indexed else None)
        self.page_size = page_size_for(dim)

    def describe(self):
        out = {
            "motedb": self.motedb.__version__,
            "build": "motedb.open(path) (sync=True, the default), box.put_many(all objects): one transaction, "
                     "one durable commit; close()",
            "page_size": self.page_size,
            "filter": self.filter_how,
        }
        if self.indexed:
            out["index"] = (f"motedb.Hnsw(distance={self.distance!r}, m={self.m}, "
                            f"ef_construction={self.ef_construction})")
            out["search"] = (f"Doc.embedding.nearest(q, k, ef=ef, distance={self.distance!r}), query.ids(); "
                             f"exact= left to the planner (graph from 2,048 indexed vectors on)")
        else:
            out["index"] = "none (motedb.Vector(dim) without index=)"
            out["search"] = f"exact: Doc.embedding.nearest(q, k, distance={self.distance!r}), query.ids()"
        return out

    def _path(self, path):
        return f"{path}/vectors.mote"

    def build(self, path, vectors, tags):
        Doc = self.Doc
        kw = {} if self.page_size == 4096 else {"page_size": self.page_size}  # 4,096: the default, left to it
        store = self.motedb.open(self._path(path), **kw)
        try:
            objs = [Doc(tag=t, embedding=v) for v, t in zip(vectors, tags.tolist())]
            ids = store.box(Doc).put_many(objs)
        finally:
            store.close()
        if len(ids) != len(vectors) or ids[0] != 1 or ids[-1] != len(vectors):
            raise RuntimeError(f"MoteDB assigned ids {ids[0]}..{ids[-1]} to {len(vectors)} objects, expected 1..n")
        return {}

    def open(self, path, n):
        store = self.motedb.open(self._path(path))
        return store, store.box(self.Doc)

    def _condition(self, q, k, ef, threshold):
        """The query's condition (for plan(); searcher() inlines the same)."""
        near = self.Doc.embedding.nearest
        if self.indexed and ef is not None:
            cond = near(q, k=k, ef=max(ef, k), distance=self.distance)
        else:
            cond = near(q, k=k, distance=self.distance)
        return cond if threshold is None else cond & (self.Doc.tag < threshold)

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        box = handle[1]
        near = self.Doc.embedding.nearest
        distance = self.distance
        if self.indexed and ef is not None:
            ef = max(ef, k)
            if threshold is None:
                def search(q):
                    return [i - 1 for i in box.query(near(q, k=k, ef=ef, distance=distance)).ids()]
            else:
                cond = self.Doc.tag < threshold

                def search(q):
                    return [i - 1 for i in box.query(near(q, k=k, ef=ef, distance=distance) & cond).ids()]
            return search
        if threshold is None:
            def search_default(q):
                return [i - 1 for i in box.query(near(q, k=k, distance=distance)).ids()]
        else:
            cond = self.Doc.tag < threshold

            def search_default(q):
                return [i - 1 for i in box.query(near(q, k=k, distance=distance) & cond).ids()]
        return search_default

    def plan(self, handle, k, ef, threshold=None, query=None):
        q = np.zeros(self.dim, dtype=np.float32) if query is None else query
        return handle[1].query(self._condition(q, k, ef, threshold)).plan()

    def close(self, handle):
        handle[0].close()


class MoteDBExactBackend(MoteDBBackend):
    label = "MoteDB exact"
    exact = True
    indexed = False
    filter_how = "nearest(q, k) & (Doc.tag < s) in one query (tag indexed, no vector index): exact"


def create_backend(dim, metric, work_dir, params):
    return MoteDBBackend(dim, metric, work_dir, params)


def create_exact_backend(dim, metric, work_dir, params):
    return MoteDBExactBackend(dim, metric, work_dir, params)
