"""ObjectBox (PyPI `objectbox`): an object database with its own storage engine (LMDB based).

Fastest idiomatic path:
- The experimental FlatBuffers code generation for writes and reads
  (objectbox.experimental.enable_flatbuffers_codegen) is enabled when the installed
  version offers it; OBX_CODEGEN=0 disables it. No code cache directory is set, so in
  cold mode each process compiles the code on its first put / read (inside the
  timer, as in the seed). Whether it was enabled is recorded in results.json.
- A: box.put(obj) (one transaction each); B: put() one by one inside
  store.write_tx(); C: box.put(list) (one transaction; sets the ids).
- D/E: one query built per operation, its level parameter set per round
  (set_parameter), E with offset()/limit(). F: box.get(id).
- G/H: ObjectBox has no dict/tuple projections: not run.
- I/J: box.put(list) in one transaction; there is no partial update, so J writes
  whole objects. K: box.remove_many(list) (one transaction).
- Durability: every write transaction is synced (LMDB-style commit with fdatasync).
Deviations (its Python binding's limits; the seed's choices):
- Test 2: `parent_id = Relation("Journal")` (the to-one relation this version
  offers; removing a parent resets it). No to-many relations exist in the Python
  binding: `related` is a link entity JournalRelated with two relations.
- Test 3: decimals stored as strings, JSON as JSON strings; nullable columns
  unset (ObjectBox has no NULL: they read back as 0 / "").
- Warm mode restores the store by closing it and copying the database directory
  back (the store reopened before the timed run).
"""

import datetime
import json
import os
import shutil

import objectbox
from objectbox import Entity, Id, Int16, Int32, Int64, Float64, String, Date, Index, Store

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))

CODEGEN_REQUESTED = os.environ.get("OBX_CODEGEN", "1") != "0"
CODEGEN_AVAILABLE = False
try:
    from objectbox import experimental as _obx_exp
    CODEGEN_AVAILABLE = hasattr(_obx_exp, "enable_flatbuffers_codegen")
except ImportError:
    _obx_exp = None
CODEGEN = CODEGEN_REQUESTED and CODEGEN_AVAILABLE
if CODEGEN:
    _obx_exp.enable_flatbuffers_codegen(True)

OBX_TYPES = {"float": Float64, "smallint": Int16, "int": Int32, "bigint": Int64,
             "char": String, "text": String, "decimal": String, "json": String}


def _obx_default(t):
    v = spec.WIDE_DEFAULTS[t]
    if t == "decimal":
        return str(v)
    if t == "json":
        return json.dumps(v)
    return v


WIDE = spec.wide_columns() if TEST == 3 else []
WIDE_DEFAULTS = {name: _obx_default(t) for name, t, nullable in WIDE if not nullable}


def _journal_class():
    ns = {"id": Id, "timestamp": Date(datetime.datetime), "level": Int16(index=Index()),
          "text": String(index=Index())}
    if TEST == 2:
        ns["parent_id"] = objectbox.Relation("Journal")
    for name, t, _ in WIDE:
        ns[name] = OBX_TYPES[t]()

    def __init__(self):
        self.timestamp = spec.now()
        for k, v in WIDE_DEFAULTS.items():
            setattr(self, k, v)

    ns["__init__"] = __init__
    return Entity()(type("Journal", (), ns))


Journal = _journal_class()
if TEST == 2:
    @Entity()
    class JournalRelated:
        id = Id
        journal_id = objectbox.Relation("Journal")
        related_id = objectbox.Relation("Journal")


class Backend(SyncBackend):
    BULK_SETS_IDS = True
    PARTIAL_UPDATE = "whole object (no partial update in ObjectBox)"
    NOTES = ["experimental FlatBuffers codegen " + ("enabled" if CODEGEN else
             ("available but disabled (OBX_CODEGEN=0)" if CODEGEN_AVAILABLE else "not offered by this version")),
             "C put(list) sets ids; I/J put(list), K remove_many(list), one transaction each",
             "G/H: no projection API (not run)",
             "Test 2: parent_id = Relation (to-one); M2M as link entity (no to-many in Python)",
             "Test 3: decimals as strings, JSON as strings, nullable columns unset (no NULL)"]
    filter_dict = None
    filter_tuple = None

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.store_dir = os.path.join(directory, "objectbox")
        self.model_json = os.path.join(directory, "objectbox-model.json")
        self.store = None
        self.box = None

    def versions(self):
        from bench.orm.backends.base import pkg_versions
        v = pkg_versions("objectbox", "objectbox-api", "objectbox-clib")
        v["objectbox core"] = str(objectbox.version_core)
        return v

    def info(self):
        return {"journal_mode": "n/a (ObjectBox)", "durability": "synced commit per write transaction",
                "codegen": CODEGEN, "codegen_available": CODEGEN_AVAILABLE}

    def create(self):
        fresh_dir(self.directory)
        self.open()
        self.close()

    def open(self):
        if self.store is None:
            self.store = Store(model="default", model_json_file=self.model_json, directory=self.store_dir)
            self.box = self.store.box(Journal)

    def close(self):
        if self.store is not None:
            self.store.close()
            self.store = None
            self.box = None

    # --- untimed helpers: open the store if needed, close it again if it was closed ---
    def _with_store(self, fn):
        was_open = self.store is not None
        self.open()
        try:
            return fn()
        finally:
            if not was_open:
                self.close()

    def all_ids(self):
        def f():
            with self.box.query().build() as q:
                return q.find_ids()
        return self._with_store(f)

    def level_counts(self):
        def f():
            out = {}
            for lvl in spec.LEVELS:
                with self.box.query(Journal.level.equals(lvl)).build() as q:
                    out[lvl] = q.count()
            return out
        return self._with_store(f)

    def check_rows(self):
        return self._with_store(lambda: [(o.id, o.level, o.text) for o in self.box.get_all()])

    def delete_newest(self, count):
        def f():
            with self.box.query().build() as q:
                ids = sorted(q.find_ids())
            self.box.remove_many(ids[len(ids) - count:] if count else [])
        self._with_store(f)

    def snapshot(self):
        was_open = self.store is not None
        self.close()
        snap = self.store_dir + ".snapshot"
        if os.path.exists(snap):
            shutil.rmtree(snap)
        shutil.copytree(self.store_dir, snap)
        if was_open:
            self.open()
        return snap

    def restore(self, snap):
        self.close()
        shutil.rmtree(self.store_dir)
        shutil.copytree(snap, self.store_dir)
        shutil.rmtree(snap)
        self.open()

    # --- inserts ---
    def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, objs):
        put = self.box.put
        for o in objs:
            put(o)
        return len(objs)

    def insert_batch(self, objs):
        put = self.box.put
        with self.store.write_tx():
            for o in objs:
                put(o)
        return len(objs)

    def new_bulk(self, values):
        return self.new_objects(values)

    def insert_bulk(self, objs):
        self.box.put(objs)
        return len(objs)

    # --- reads ---
    def filter_large(self, levels):
        n = 0
        with self.box.query(Journal.level.equals(0)).build() as q:
            for lvl in levels:
                q.set_parameter(Journal.level, lvl)
                n += len(q.find())
        return n

    def filter_small(self, queries):
        n = 0
        with self.box.query(Journal.level.equals(0)).build() as q:
            q.limit(20)
            for lvl, off in queries:
                q.set_parameter(Journal.level, lvl)
                q.offset(off)
                n += len(q.find())
        return n

    def get(self, ids):
        get = self.box.get
        n = 0
        for i in ids:
            n += get(i).id == i
        return n

    # --- updates, delete ---
    def load_all(self):
        return self.box.get_all()

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        self.box.put(objs)
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self.box.put(objs)
        return len(objs)

    def delete(self, objs):
        return self.box.remove_many(objs)
