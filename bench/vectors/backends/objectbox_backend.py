"""ObjectBox's HNSW index through its Python API (PyPI objectbox 5.0.0, as pinned in bench/stores).

Entity `Doc`: Id, `tag` (Int64), `embedding` (Float32Vector with HnswIndex(dimensions, distance_type COSINE or
EUCLIDEAN, neighbors_per_node=M, indexing_search_count=ef_construction)). One Model object per process (the
"cached model" variant of bench/stores); the model JSON lives in the worker's own directory, not in the store.
build(): Store(directory), the objects put in one write transaction (in puts of 10,000: ObjectBox refuses to
hand out more ids at once), synced on commit (ObjectBox's default); close(). The HNSW graph is built inside the
puts. open(): Store(directory) with the cached model.

Search: the query is built once per sweep point (box.query(Doc.embedding.nearest_neighbors(q, ef)).build(),
limit(k)) and every search sets the vector (set_parameter) and runs find_ids_with_scores(): ObjectBox's documented
way to search with a larger candidate list than k ("max_result_count ... can also be used as the ef HNSW
parameter ... with query.limit(10)"). So ef here is max_result_count.
Filter: nearest_neighbors(q, ef) & Doc.tag.less_than(s) in the same query: ObjectBox's own filtered search.
"""

from .base import Backend

MAX_PUT = 10_000  # ObjectBox: "Limit for getting IDs is 10,000"

_classes = {}


def availability():
    try:
        import objectbox  # noqa: F401
        from objectbox import HnswIndex  # noqa: F401
    except Exception as e:
        return f"objectbox does not import: {type(e).__name__}: {e}"
    return None


def _doc(dim, metric, m, ef_construction):
    key = (dim, metric, m, ef_construction)
    if key not in _classes:
        from objectbox import Entity, Float32Vector, HnswIndex, Id, Int64, VectorDistanceType
        distance = VectorDistanceType.COSINE if metric == "cosine" else VectorDistanceType.EUCLIDEAN

        @Entity()
        class Doc:
            id = Id
            tag = Int64
            embedding = Float32Vector(index=HnswIndex(dimensions=dim, distance_type=distance,
                                                      neighbors_per_node=m, indexing_search_count=ef_construction))

        _classes[key] = Doc
    return _classes[key]


class ObjectBoxBackend(Backend):
    label = "ObjectBox"
    filter_mode = "in-search"
    filter_how = "nearest_neighbors(q, ef) & Doc.tag.less_than(s) in one query, limit(k)"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import objectbox
        from objectbox import Model, Store
        self.objectbox = objectbox
        self.Store = Store
        self.Doc = _doc(dim, metric, self.m, self.ef_construction)
        self.model = Model()
        self.model.entity(self.Doc)
        self.model_json = f"{work_dir}/objectbox-model.json"
        self.max_kb = 64 * 1024 * 1024  # 64 GiB of address space: the default 1 GiB would bound the data set

    def describe(self):
        from importlib import metadata
        return {"objectbox": metadata.version("objectbox"), "objectbox_core": str(self.objectbox.version_core),
                "index": f"HnswIndex(neighbors_per_node={self.m}, indexing_search_count={self.ef_construction}, "
                         f"distance_type={'COSINE' if self.metric == 'cosine' else 'EUCLIDEAN'})",
                "ef": "nearest_neighbors(max_result_count=ef) with query.limit(k)",
                "model": "one Model object per process (cached), model JSON outside the store",
                "build": f"one write transaction, box.put() of {MAX_PUT:,} objects at a time, synced on commit",
                "filter": self.filter_how}

    def _store(self, path):
        return self.Store(model=self.model, model_json_file=self.model_json, directory=f"{path}/db",
                          max_db_size_in_kb=self.max_kb)

    def build(self, path, vectors, tags):
        Doc = self.Doc
        store = self._store(path)
        try:
            objs = [Doc(tag=t, embedding=v) for v, t in zip(vectors, tags.tolist())]
            box = store.box(Doc)
            with store.write_tx():
                for s in range(0, len(objs), MAX_PUT):
                    box.put(objs[s:s + MAX_PUT])
        finally:
            store.close()
        if objs[0].id != 1 or objs[-1].id != len(objs):
            raise RuntimeError(f"ObjectBox assigned ids {objs[0].id}..{objs[-1].id}, expected 1..n")
        return {}

    def open(self, path, n):
        store = self._store(path)
        return {"store": store, "box": store.box(self.Doc), "queries": []}

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        Doc = self.Doc
        cond = Doc.embedding.nearest_neighbors([0.0] * self.dim, max(ef, k))
        if threshold is not None:
            cond = cond & Doc.tag.less_than(threshold)
        query = handle["box"].query(cond).build()
        query.limit(k)
        handle["queries"].append(query)
        prop = Doc.embedding

        def search(q):
            query.set_parameter(prop, q)
            return [i - 1 for i, _score in query.find_ids_with_scores()]
        return search

    def close(self, handle):
        for q in handle["queries"]:
            q.close()
        handle["store"].close()


def create_backend(dim, metric, work_dir, params):
    return ObjectBoxBackend(dim, metric, work_dir, params)
