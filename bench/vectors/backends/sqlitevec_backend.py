"""sqlite-vec (PyPI sqlite-vec, the vec0 virtual table) in the SQLite that apsw ships (PyPI apsw): the pyenv
Python's sqlite3 module cannot load extensions.

build(): apsw.Connection(path), load the extension, CREATE VIRTUAL TABLE docs USING vec0(embedding float[dim]
distance_metric=cosine|l2, tag integer) (tag: a vec0 metadata column, usable in the KNN query's WHERE), one
transaction of INSERTs (rowid = row + 1, the vector as float32 bytes); close. SQLite's defaults (rollback journal,
synchronous=FULL). open(): apsw.Connection(path) and loading the extension (needed on every connection).
Search: SELECT rowid FROM docs WHERE embedding MATCH ? AND k = ? [AND tag < ?] (exact: vec0 compares every vector;
apsw caches the prepared statement). The filter is applied by vec0 itself while it scans.
"""

from .base import Backend

METRICS = {"cosine": "cosine", "euclidean": "l2"}


def availability():
    try:
        import apsw
        import sqlite_vec
        conn = apsw.Connection(":memory:")
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.close()
    except Exception as e:
        return f"apsw + sqlite-vec do not load: {type(e).__name__}: {e}"
    return None


class SqliteVecBackend(Backend):
    label = "sqlite-vec"
    exact = True
    filter_mode = "in-search"
    filter_how = "vec0 metadata column: ... AND k = 10 AND tag < s in the KNN query"

    def __init__(self, dim, metric, work_dir, params):
        super().__init__(dim, metric, work_dir, params)
        import apsw
        import sqlite_vec
        self.apsw = apsw
        self.extension = sqlite_vec.loadable_path()
        self.vec_metric = METRICS[metric]

    def _connect(self, path):
        conn = self.apsw.Connection(f"{path}/vectors.db")
        conn.enable_load_extension(True)
        conn.load_extension(self.extension)
        return conn

    def describe(self):
        import sqlite_vec
        from importlib import metadata
        conn = self.apsw.Connection(":memory:")
        conn.enable_load_extension(True)
        conn.load_extension(self.extension)
        vec_version = conn.execute("SELECT vec_version()").fetchall()[0][0]
        conn.close()
        return {"sqlite-vec": metadata.version("sqlite-vec"), "vec_version()": vec_version,
                "apsw": self.apsw.apsw_version(), "sqlite_version (apsw)": self.apsw.sqlite_lib_version(),
                "extension": sqlite_vec.loadable_path(),
                "table": f"vec0(embedding float[{self.dim}] distance_metric={self.vec_metric}, tag integer)",
                "search": "exact (vec0 KNN query)", "filter": self.filter_how,
                "journal": "SQLite defaults (rollback journal, synchronous=FULL)"}

    def build(self, path, vectors, tags):
        conn = self._connect(path)
        try:
            conn.execute(f"CREATE VIRTUAL TABLE docs USING vec0(embedding float[{self.dim}] "
                         f"distance_metric={self.vec_metric}, tag integer)")
            with conn:
                conn.executemany("INSERT INTO docs(rowid, embedding, tag) VALUES (?, ?, ?)",
                                 ((i + 1, v.tobytes(), t) for i, (v, t) in enumerate(zip(vectors, tags.tolist()))))
        finally:
            conn.close()
        return {}

    def open(self, path, n):
        return self._connect(path)

    def searcher(self, handle, k, ef, threshold=None, tags=None):
        conn = handle
        if threshold is None:
            sql = "SELECT rowid FROM docs WHERE embedding MATCH ? AND k = ?"

            def search(q):
                return [r - 1 for (r,) in conn.execute(sql, (q.tobytes(), k))]
            return search
        sql = "SELECT rowid FROM docs WHERE embedding MATCH ? AND k = ? AND tag < ?"

        def search_filtered(q):
            return [r - 1 for (r,) in conn.execute(sql, (q.tobytes(), k, threshold))]
        return search_filtered

    def close(self, handle):
        handle.close()


def create_backend(dim, metric, work_dir, params):
    return SqliteVecBackend(dim, metric, work_dir, params)
