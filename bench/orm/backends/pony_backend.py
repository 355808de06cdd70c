"""Pony ORM (sync).

Fastest idiomatic path:
- db.bind(provider="sqlite", filename=...): rollback journal, synchronous FULL
  (SQLite's defaults; recorded). Work happens in a db_session; commit() ends a
  transaction. Pony writes pending objects at flush/commit.
- A: the object is created and committed inside the timer, one per transaction
  (objects created before the timer would all be written by the first commit):
  only the values are prepared. B: the objects are created (pending, in the
  db_session) before the timer; timed: commit() (one INSERT per object, one
  transaction). C: Pony has no bulk insert: not run (geometric mean over 8).
- D/E: Journal.select(lambda j: j.level == L)[:] / .limit(20, offset=X); F:
  Journal[id] (distinct ids: the session cache cannot answer without SQL); G/H:
  no dict/tuple query API used: not run.
- I/J: set attributes, one commit(): Pony writes only the changed columns (J really
  partial) and adds the old values to the WHERE clause (optimistic checks, its
  default). K: delete() each, one commit() (Test 2: Pony clears the `children` and
  M2M collections of each deleted object).
- Test 2: parent = Optional("Journal") / children = Set, related / related_from =
  Set over table journal_related.
"""

import os
from datetime import datetime
from decimal import Decimal

from pony.orm import Database, Json, Optional, PrimaryKey, Required, Set, commit, db_session, rollback

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
db = Database()


def _attr(t, nullable):
    kind = Optional if nullable else Required
    d = None if nullable else spec.WIDE_DEFAULTS[t]
    kw = {} if nullable else {"default": (lambda: dict(spec.WIDE_JSON_DEFAULT)) if t == "json" else d}
    if t == "float":
        return kind(float, **kw)
    if t in ("smallint", "int", "bigint"):
        return kind(int, size={"smallint": 16, "int": 32, "bigint": 64}[t], **kw)
    if t == "char":
        return kind(str, 255, **kw)
    if t == "text":
        return kind(str, **kw) if not nullable else Optional(str, nullable=True)
    if t == "decimal":
        return kind(Decimal, 12, 8, **kw)
    return kind(Json, **kw)


def _journal():
    ns = {"_table_": "journal",
          "id": PrimaryKey(int, auto=True),
          "timestamp": Required(datetime, default=datetime.now),
          "level": Required(int, size=16, index=True),
          "text": Required(str, 255, index=True)}
    if TEST == 2:
        ns["parent"] = Optional("Journal", reverse="children")
        ns["children"] = Set("Journal", reverse="parent")
        ns["related"] = Set("Journal", reverse="related_from", table="journal_related")
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
             "A: objects created inside the timer (Pony writes pending objects at commit)",
             "G/H not run", "updates carry optimistic-check WHERE clauses (Pony's default)"]
    insert_bulk = None
    filter_dict = None
    filter_tuple = None

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.sess = None
        self.bound = False

    def _bind(self, create):
        if not self.bound:
            db.bind(provider="sqlite", filename=os.path.abspath(DB_FILE), create_db=create)
            db.generate_mapping(create_tables=create, check_tables=create)
            self.bound = True

    def versions(self):
        return pkg_versions("pony")

    def info(self):
        self._bind(False)
        with db_session:
            jm = db.execute("PRAGMA journal_mode").fetchone()[0]
            sy = db.execute("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy)}

    def create(self):
        fresh_dir(self.directory)
        self._bind(True)

    def open(self):
        self._bind(False)
        if self.sess is None:
            self.sess = db_session()
            self.sess.__enter__()

    def after_restore(self):
        if self.sess is not None:
            rollback()
            self.sess.__exit__(None, None, None)
            self.sess = None
            self.open()

    def close(self):
        if self.sess is not None:
            rollback()
            self.sess.__exit__(None, None, None)
            self.sess = None

    def new_objects(self, values):
        return list(values)  # A: Pony writes pending objects at commit, so only values are prepared

    def new_batch_objects(self, values):
        """B: pending objects in the open db_session (written by the timed commit)."""
        self.open()
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, values):
        for lvl, txt in values:
            Journal(level=lvl, text=txt)
            commit()
        return len(values)

    def insert_batch(self, objs):
        commit()
        return len(objs)

    def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(Journal.select(lambda j: j.level == lvl)[:])
        return n

    def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(Journal.select(lambda j: j.level == lvl).limit(20, offset=off))
        return n

    def get(self, ids):
        n = 0
        for i in ids:
            n += Journal[i].id == i
        return n

    def load_all(self):
        return Journal.select()[:]

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
