"""MoteDB (this repository's motedb package): an embedded object database in C with a Python API.

Fastest idiomatic path:
- A: box.put(obj), one durable transaction (one fdatasync) each; B: put() one by one inside
  store.write(); C: box.put_many(list) (one transaction; sets the ids on the objects).
- D/E: box.query(Journal.level == L) per level, E with .offset(k).limit(20); the planner uses the
  level index, and the offset is an O(log n) jump. F: box.get(id).
- G/H: query(...).dicts() / .tuples() (projections are built in C).
- I: put_many(objs) in one transaction. J: put_many as well (whole objects, one sorted batch;
  box.update() changes named properties but one object per call). K: box.remove_many(objs)
  in one transaction.
- Durability: every write transaction is synced (exactly one fdatasync per commit).
Deviations:
- Test 2: real relations: `parent: ToOne["Journal"]` (an indexed id) and
  `related: ToMany["Journal"]` (link records with backlinks); the operations never set them,
  so K measures the cleanup of links on removal.
- Test 3: real Decimal, real JSON (dict) and real NULL for the nullable groups.
- The timestamp is an aware UTC datetime (MoteDB rejects naive datetimes).
- Warm mode restores the store by closing it and copying the file back.
"""

import datetime
import decimal
import os
import shutil
from typing import Annotated, Optional

import motedb

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))

_TYPES = {"float": float, "smallint": Annotated[int, motedb.Int16], "int": Annotated[int, motedb.Int32],
          "bigint": int, "char": str, "text": str, "decimal": decimal.Decimal, "json": dict}


def _default(t):
    v = spec.WIDE_DEFAULTS[t]
    return decimal.Decimal(str(v)) if t == "decimal" else v


WIDE = spec.wide_columns() if TEST == 3 else []


def _journal_class():
    ann = {"id": int, "timestamp": datetime.datetime,
           "level": Annotated[int, motedb.Index, motedb.Int16],
           "text": Annotated[str, motedb.Index]}
    ns = {"id": 0, "timestamp": None}
    if TEST == 2:
        ann["parent"] = motedb.ToOne["Journal"]
        ann["related"] = motedb.ToMany["Journal"]
    for name, t, nullable in WIDE:
        if nullable:
            ann[name] = Optional[_TYPES[t]]
            ns[name] = None
        elif t == "json":
            ann[name] = dict
            ns[name] = motedb.field(default_factory=lambda v=spec.WIDE_DEFAULTS[t]: dict(v))
        else:
            ann[name] = _TYPES[t]
            ns[name] = _default(t)
    ns["__annotations__"] = ann
    return type("Journal", (motedb.Entity,), ns)


Journal = _journal_class()


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


class Backend(SyncBackend):
    BULK_SETS_IDS = True
    PARTIAL_UPDATE = "whole object (no partial update in the Python API yet)"
    NOTES = ["C put_many(list) sets ids; I/J put_many(list), K remove_many(objs), one transaction each",
             "G/H: query(...).dicts() / .tuples()",
             "Test 2: real ToOne parent and ToMany related (link records with backlinks)",
             "Test 3: real Decimal, JSON (dict) and NULL"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.path = os.path.join(directory, "bench.mote")
        self.store = None
        self.box = None

    def versions(self):
        from bench.orm.backends.base import pkg_versions
        v = pkg_versions("motedb")
        v["motedb"] = motedb.__version__
        return v

    def info(self):
        return {"journal_mode": "n/a (MoteDB: copy-on-write B+tree, no journal)",
                "durability": "one fdatasync per write transaction"}

    def create(self):
        fresh_dir(self.directory)
        self.open()
        self.close()

    def open(self):
        if self.store is None:
            self.store = motedb.open(self.path)
            self.box = self.store.box(Journal)

    def close(self):
        if self.store is not None:
            self.store.close()
            self.store = None
            self.box = None

    def _with_store(self, fn):
        was_open = self.store is not None
        self.open()
        try:
            return fn()
        finally:
            if not was_open:
                self.close()

    def all_ids(self):
        return self._with_store(lambda: self.box.query().ids())

    def level_counts(self):
        return self._with_store(lambda: {lvl: self.box.query(Journal.level == lvl).count()
                                         for lvl in spec.LEVELS})

    def check_rows(self):
        return self._with_store(lambda: [(o.id, o.level, o.text) for o in self.box.all()])

    def delete_newest(self, count):
        def f():
            ids = sorted(self.box.query().ids())
            self.box.remove_many(ids[len(ids) - count:] if count else [])
        self._with_store(f)

    def snapshot(self):
        was_open = self.store is not None
        self.close()
        snap = self.path + ".snapshot"
        shutil.copyfile(self.path, snap)
        if was_open:
            self.open()
        return snap

    def restore(self, snap):
        self.close()
        shutil.copyfile(snap, self.path)
        os.remove(snap)
        self.open()

    # --- inserts ---
    def new_objects(self, values):
        return [Journal(timestamp=_now(), level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, objs):
        put = self.box.put
        for o in objs:
            put(o)
        return len(objs)

    def insert_batch(self, objs):
        put = self.box.put
        with self.store.write():
            for o in objs:
                put(o)
        return len(objs)

    def new_bulk(self, values):
        return self.new_objects(values)

    def insert_bulk(self, objs):
        self.box.put_many(objs)
        return len(objs)

    # --- reads ---
    def filter_large(self, levels):
        n = 0
        query = self.box.query
        for lvl in levels:
            n += len(query(Journal.level == lvl).find())
        return n

    def filter_small(self, queries):
        n = 0
        query = self.box.query
        for lvl, off in queries:
            n += len(query(Journal.level == lvl).offset(off).limit(20).find())
        return n

    def get(self, ids):
        get = self.box.get
        n = 0
        for i in ids:
            n += get(i).id == i
        return n

    def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(self.box.query(Journal.level == lvl).dicts())
        return n

    def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(self.box.query(Journal.level == lvl).tuples())
        return n

    # --- updates, delete ---
    def load_all(self):
        return self.box.all()

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        self.box.put_many(objs)
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self.box.put_many(objs)
        return len(objs)

    def delete(self, objs):
        return self.box.remove_many(objs)
