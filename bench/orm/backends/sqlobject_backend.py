"""SQLObject (sync).

Fastest idiomatic path:
- connectionForURI("sqlite:///..."): rollback journal, synchronous FULL (SQLite's
  defaults; recorded). Objects are bound to a connection: the writes of B and I-K
  go through a transaction connection (conn.transaction()), committed once.
- SQLObject inserts the row when the object is created: for A and B only the
  field values are prepared before the timer, the objects are created inside it.
  A: Journal(level=, text=) (autocommit); B: the same with connection=trans, one
  commit. C: SQLObject has no bulk insert: not run (its geometric mean covers 8
  operations; the rows of C are missing, so D-K run on ~200 rows, as upstream).
- D/E: list(Journal.select(Journal.q.level == L)) [slice -> LIMIT 20 OFFSET X;
  upstream's small filter had no offset]; F: Journal.get(id) (ids are distinct and
  the process starts with an empty cache, so SQLObject's object cache cannot answer
  without a query); G/H: no dict/tuple projection: not run.
- I: o.set(level=, text=) (one UPDATE of both columns) in the transaction; J:
  o.level = L (UPDATE of that column - really partial); K: destroySelf() each
  (Test 2: it also deletes the object's RelatedJoin rows).
- Test 2: parent = ForeignKey("Journal", default=None) with children =
  MultipleJoin; related/related_from = RelatedJoin over journal_related.
"""

import os
from decimal import Decimal

from sqlobject import (BigIntCol, DatabaseIndex, DateTimeCol, DecimalCol, FloatCol, ForeignKey, IntCol, JSONCol,
                       MultipleJoin, RelatedJoin, SmallIntCol, SQLObject, StringCol, connectionForURI, sqlhub)

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
conn = connectionForURI("sqlite://" + os.path.abspath(DB_FILE))
sqlhub.processConnection = conn

COLS = {"float": FloatCol, "smallint": SmallIntCol, "int": IntCol, "bigint": BigIntCol,
        "char": lambda **kw: StringCol(length=255, **kw), "text": StringCol,
        "decimal": lambda **kw: DecimalCol(size=12, precision=8, **kw), "json": JSONCol}


def _journal():
    ns = {"__module__": __name__,
          "sqlmeta": type("sqlmeta", (), {"table": "journal"}),
          "timestamp": DateTimeCol(default=DateTimeCol.now),
          "level": SmallIntCol(),
          "text": StringCol(length=255),
          "level_index": DatabaseIndex("level"),
          "text_index": DatabaseIndex("text")}
    if TEST == 2:
        ns["parent"] = ForeignKey("Journal", default=None)
        ns["children"] = MultipleJoin("Journal", joinColumn="parent_id")
        ns["related"] = RelatedJoin("Journal", intermediateTable="journal_related", joinColumn="journal_id",
                                    otherColumn="related_id", createRelatedTable=True)
        ns["related_from"] = RelatedJoin("Journal", intermediateTable="journal_related",
                                         joinColumn="related_id", otherColumn="journal_id",
                                         createRelatedTable=False)
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            d = None if nullable else spec.WIDE_DEFAULTS[t]
            if t == "json" and d is not None:
                d = dict(d)
            ns[name] = COLS[t](default=Decimal(d) if t == "decimal" and d is not None else d)
    return type("Journal", (SQLObject,), ns)


Journal = _journal()


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (attribute assignment updates that column)"
    NOTES = ["no bulk insert: C not run, geometric mean over 8 operations",
             "objects are inserted on creation: A/B prepare only the values",
             "E with OFFSET (upstream had none); F with distinct ids, empty cache",
             "G/H: no dict/tuple projection (not run)"]
    insert_bulk = None
    filter_dict = None
    filter_tuple = None

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.trans = None

    def versions(self):
        return pkg_versions("SQLObject", "FormEncode")

    def info(self):
        jm = conn.queryOne("PRAGMA journal_mode")[0]
        sy = conn.queryOne("PRAGMA synchronous")[0]
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy)}

    def create(self):
        fresh_dir(self.directory)
        Journal.createTable()

    def open(self):
        pass  # the connection opens at the first query

    def _tx(self):
        if self.trans is None:
            self.trans = conn.transaction()
        return self.trans

    def after_restore(self):
        if self.trans is not None:
            self.trans.rollback()
            self.trans = None
        conn.cache.clear()

    def close(self):
        if self.trans is not None:
            self.trans.rollback()
            self.trans = None
        conn.close()

    def new_objects(self, values):
        return list(values)  # SQLObject inserts on creation: only the values are prepared

    def insert_single(self, values):
        for lvl, txt in values:
            Journal(level=lvl, text=txt)
        return len(values)

    def insert_batch(self, values):
        t = self._tx()
        for lvl, txt in values:
            Journal(level=lvl, text=txt, connection=t)
        t.commit(close=False)
        return len(values)

    def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.select(Journal.q.level == lvl)))
        return n

    def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(list(Journal.select(Journal.q.level == lvl)[off:off + 20]))
        return n

    def get(self, ids):
        n = 0
        for i in ids:
            n += Journal.get(i).id == i
        return n

    def load_all(self):
        return list(Journal.select(connection=self._tx()))

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.set(level=lvl, text=txt)
        self.trans.commit(close=False)
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self.trans.commit(close=False)
        return len(objs)

    def delete(self, objs):
        for o in objs:
            o.destroySelf()
        self.trans.commit(close=False)
        return len(objs)
