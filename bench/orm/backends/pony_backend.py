"""Pony ORM (sync): upstream's code paths (benchmarks/pony; upstream's bench.sh does not
run it, but the directory has its tests).

- db.bind(provider="sqlite", filename=...) and db.generate_mapping() when the backend
  is made (upstream: at import; model setup is never timed), the tables by
  db.create_tables() in create(); rollback journal, synchronous FULL (SQLite's
  defaults; recorded). The connection opens at the first query of a db_session (so in
  cold mode inside the timer). Pony writes pending objects at flush/commit.
- A: per object `with db_session: Journal(...); commit()`, as upstream: object and
  session inside the timer (objects made before it would all be written by the first
  commit), only the values are prepared. B: the objects are created (pending) in a
  db_session before the timer; timed: commit() (one INSERT per object, one
  transaction) and the end of that db_session, as in upstream's `with` block. C: Pony
  has no bulk insert: not run (geometric mean over 8).
- D/E/F/G each in one db_session, as upstream: D list(select(j for j in Journal if
  j.level == L)); E the same .limit(20, X); F select(j for j in Journal if j.id == X)
  .get() (distinct ids: the session cache cannot answer without SQL); G obj.to_dict()
  of each object of D's query (Pony has no dict query API; as upstream). H: not run
  (Pony has no tuple query API for whole rows; upstream's H loaded the objects, the
  same as D).
- I/J: set attributes of objects loaded in a db_session before the timer, one
  commit(): Pony writes only the changed columns (J really partial) and adds the old
  values to the WHERE clause (optimistic checks, its default). K: delete() each, one
  commit() (Test 2: Pony clears the `children` and M2M collections of each deleted
  object).
- Models as upstream's models.py: Required/Optional with sizes, LongUnicode for the
  text columns (a nullable str column stores '' rather than NULL, Pony's rule),
  literal defaults. Test 2: parent = Optional("Journal") / children = Set, related /
  related_from = Set (Pony's own link table).
"""

import os
from datetime import datetime
from decimal import Decimal

from pony.orm import Database, Json, LongUnicode, Optional, Required, Set, commit, db_session, rollback, select

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
db = Database()


def _attr(t, nullable):
    kind = Optional if nullable else Required
    kw = {} if nullable else {"default": spec.WIDE_DEFAULTS[t]}
    if t == "float":
        return kind(float, **kw)
    if t in ("smallint", "int", "bigint"):
        return kind(int, size={"smallint": 16, "int": 32, "bigint": 64}[t], **kw)
    if t == "char":
        return kind(str, max_len=255, **kw)
    if t == "text":
        return kind(LongUnicode, **kw)
    if t == "decimal":
        return kind(Decimal, 12, 8, **kw)
    return kind(Json, **kw)


def _journal():
    ns = {"_table_": "journal",
          "timestamp": Required(datetime, default=datetime.now),
          "level": Required(int, size=16, index=True),
          "text": Required(str, max_len=255, index=True)}
    if TEST == 2:
        ns["parent"] = Optional("Journal", reverse="children")
        ns["children"] = Set("Journal", reverse="parent")
        ns["related"] = Set("Journal", reverse="related_from")
        ns["related_from"] = Set("Journal", reverse="related")
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            ns[name] = _attr(t, nullable)
    return type("Journal", (db.Entity,), ns)


Journal = _journal()


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (changed columns only, with optimistic checks)"
    NOTES = ["no bulk insert: C not run, geometric mean over 8 operations",
             "A: objects created inside the timer, a db_session each (Pony writes pending objects at commit)",
             "G: to_dict() of each object (as upstream); H not run (upstream's H loaded objects)",
             "updates carry optimistic-check WHERE clauses (Pony's default)"]
    insert_bulk = None
    filter_tuple = None

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.sess = None
        # model setup, untimed (upstream: at import); no connection stays open
        os.makedirs(directory, exist_ok=True)
        db.bind(provider="sqlite", filename=os.path.abspath(DB_FILE), create_db=True)
        db.generate_mapping(create_tables=False, check_tables=False)
        db.disconnect()

    def versions(self):
        return pkg_versions("pony")

    def info(self):
        with db_session:
            jm = db.execute("PRAGMA journal_mode").fetchone()[0]
            sy = db.execute("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy)}

    def create(self):
        db.disconnect()
        fresh_dir(self.directory)
        db.create_tables()
        db.disconnect()

    def open(self):
        pass  # the connection opens at the first query of a db_session

    def _begin(self):
        self._end()
        self.sess = db_session()
        self.sess.__enter__()

    def _end(self):
        if self.sess is not None:
            rollback()
            self.sess.__exit__(None, None, None)
            self.sess = None

    def after_restore(self):
        self._end()

    def close(self):
        self._end()
        db.disconnect()

    def new_objects(self, values):
        return list(values)  # A: Pony writes pending objects at commit, so only values are prepared

    def new_batch_objects(self, values):
        """B: pending objects in a db_session (written by the timed commit)."""
        self._begin()
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, values):
        for lvl, txt in values:
            with db_session:
                Journal(level=lvl, text=txt)
                commit()
        return len(values)

    def insert_batch(self, objs):
        commit()
        sess, self.sess = self.sess, None
        sess.__exit__(None, None, None)
        return len(objs)

    def filter_large(self, levels):
        n = 0
        with db_session:
            for lvl in levels:
                n += len(list(select(j for j in Journal if j.level == lvl)))
        return n

    def filter_small(self, queries):
        n = 0
        with db_session:
            for lvl, off in queries:
                n += len(list(select(j for j in Journal if j.level == lvl).limit(20, off)))
        return n

    def get(self, ids):
        n = 0
        with db_session:
            for i in ids:
                n += select(j for j in Journal if j.id == i).get().id == i
        return n

    def filter_dict(self, levels):
        n = 0
        with db_session:
            for lvl in levels:
                n += len([obj.to_dict() for obj in select(j for j in Journal if j.level == lvl)])
        return n

    def load_all(self):
        self._begin()
        return list(select(j for j in Journal))

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        commit()
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        commit()
        return len(objs)

    def delete(self, objs):
        for o in objs:
            o.delete()
        commit()
        return len(objs)
