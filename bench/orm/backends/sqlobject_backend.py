"""SQLObject (sync): upstream's code paths (benchmarks/sqlobject).

- connectionForURI("sqlite:<file>") as sqlhub.processConnection: rollback journal,
  synchronous FULL (SQLite's defaults; recorded). Objects are bound to a connection:
  the writes of B and I-K go through a transaction connection (conn.transaction()),
  committed with commit(close=True), as upstream.
- SQLObject inserts the row when the object is created: for A and B only the field
  values are prepared before the timer (the seed's), the objects are created inside
  it. A: Journal(level=, text=) (autocommit); B: trans = conn.transaction(), the same
  with connection=trans, trans.commit(close=True), all timed as upstream. C: SQLObject
  has no bulk insert: not run (its geometric mean covers 8 operations; the rows of C
  are missing, so D-K run on ~200 rows, as upstream).
- D: list(Journal.select(Journal.q.level == L)); E: the same sliced [X:X + 20] ->
  LIMIT 20 OFFSET X (upstream's .limit(20) had no offset); F:
  Journal.select(Journal.q.id == X).getOne() as upstream (distinct ids); G/H: no
  dict/tuple projection: not run (as upstream).
- Objects of I-K are loaded through the transaction connection before the timer (as
  upstream). I: o.level = L; o.text = T (one UPDATE per attribute, as upstream); J:
  o.level = L (an UPDATE of that column - really partial); then trans.commit(close=True).
  K: o.destroySelf() each through the transaction, one commit (Test 2: it also deletes
  the object's RelatedJoin rows). Upstream's K called o.delete(o.id), the classmethod:
  it fetches the row again through the process connection, not the transaction, so
  every row was deleted in its own autocommit transaction (one durable commit per row)
  while the transaction committed nothing; the seed's SQLObject Delete figures (up to
  ~100,000 rows/s on the large table) are those of one transaction.
- Models as upstream's models.py: UnicodeCol for text columns, IntCol for all integer
  columns, DateTimeCol(default=datetime.now), notNone=True on the non-nullable columns,
  DatabaseIndex on level and text, literal defaults. Test 2: parent =
  ForeignKey("Journal", default=None), children = MultipleJoin (joinColumn "parent_id";
  upstream's default "journal_id" names no column, but nothing reads children),
  related / related_from = RelatedJoin(joinColumn "journal_id", otherColumn
  "journal_from_id") over SQLObject's default intermediate table as upstream. Test 3:
  all four column groups of the seed's Test 3 (upstream's SQLObject model has only
  groups 1 and 2: 16 of the 32 columns).
"""

import os
from datetime import datetime

from sqlobject import (DatabaseIndex, DateTimeCol, DecimalCol, FloatCol, ForeignKey, IntCol, JSONCol, MultipleJoin,
                       RelatedJoin, SQLObject, UnicodeCol, connectionForURI, sqlhub)

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
conn = connectionForURI("sqlite:" + os.path.abspath(DB_FILE))
sqlhub.processConnection = conn

COLS = {"float": FloatCol, "smallint": IntCol, "int": IntCol, "bigint": IntCol,
        "char": lambda **kw: UnicodeCol(length=255, **kw), "text": UnicodeCol,
        "decimal": lambda **kw: DecimalCol(size=12, precision=8, **kw), "json": JSONCol}


def _journal():
    ns = {"__module__": __name__,
          "sqlmeta": type("sqlmeta", (), {"table": "journal"}),
          "timestamp": DateTimeCol(default=datetime.now, notNone=True),
          "level": IntCol(notNone=True),
          "level_index": DatabaseIndex("level"),
          "text": UnicodeCol(length=255, notNone=True),
          "text_index": DatabaseIndex("text")}
    if TEST == 2:
        ns["parent"] = ForeignKey("Journal", default=None)
        ns["children"] = MultipleJoin("Journal", joinColumn="parent_id")
        ns["related"] = RelatedJoin("Journal", joinColumn="journal_id", otherColumn="journal_from_id")
        ns["related_from"] = RelatedJoin("Journal", joinColumn="journal_from_id", otherColumn="journal_id",
                                         createRelatedTable=False)
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = COLS[t](default=None)
            else:
                ns[name] = COLS[t](default=spec.WIDE_DEFAULTS[t], notNone=True)
    return type("Journal", (SQLObject,), ns)


Journal = _journal()


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (attribute assignment updates that column)"
    NOTES = ["no bulk insert: C not run, geometric mean over 8 operations",
             "objects are inserted on creation: A/B prepare only the values",
             "E with OFFSET (upstream had none); F select(id == X).getOne() with distinct ids",
             "K: destroySelf() in the transaction (upstream's delete(id) deleted each row in autocommit)",
             "Test 3: all 32 columns (upstream's SQLObject model had 16)",
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
        trans = conn.transaction()
        for lvl, txt in values:
            Journal(level=lvl, text=txt, connection=trans)
        trans.commit(close=True)
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
            n += Journal.select(Journal.q.id == i).getOne().id == i
        return n

    def load_all(self):
        return list(Journal.select(connection=self._tx()))

    def _commit(self):
        trans, self.trans = self.trans, None
        trans.commit(close=True)

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        self._commit()
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self._commit()
        return len(objs)

    def delete(self, objs):
        for o in objs:
            o.destroySelf()
        self._commit()
        return len(objs)
