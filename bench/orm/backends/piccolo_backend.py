"""Piccolo (async), SQLiteEngine on aiosqlite.

Fastest idiomatic path:
- SQLiteEngine(path=...): it opens a connection per query outside transactions
  (its design) and sets foreign_keys=1; rollback journal and synchronous=FULL
  (SQLite's defaults; recorded).
- A: await obj.save(); B: save() each inside DB.transaction(); C:
  Journal.insert(*objs) inside DB.transaction(), split into chunks (at most 32,766
  variables per statement); Piccolo sets the new ids on the objects.
- D/E: Journal.objects().where(level == L)[.limit(20).offset(X)]; F:
  objects().get(id == X); G: Journal.select() (dicts); H: Piccolo has no tuple
  projection: not run.
- I: save() each (all columns) in a transaction; J: save([Journal.level]) -
  really partial (upstream's "partial" saved the whole row); K: remove() each in a
  transaction (Test 2: ForeignKey ON DELETE CASCADE in SQLite).
- Test 2: parent = ForeignKey("self", null=True); the M2M as a link table with two
  ForeignKeys (Piccolo's M2M needs a join table anyway).
"""

import os

from piccolo.columns import (JSON, BigInt, ForeignKey, Integer, Numeric, Real, SmallInt, Text, Timestamp,
                             Varchar)
from piccolo.engine.sqlite import SQLiteEngine
from piccolo.table import Table

from bench.orm import spec
from bench.orm.backends.base import AsyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
DB = SQLiteEngine(path=DB_FILE)

COLS = {"float": Real, "smallint": SmallInt, "int": Integer, "bigint": BigInt,
        "char": lambda **kw: Varchar(length=255, **kw), "text": Text,
        "decimal": lambda **kw: Numeric(digits=(12, 8), **kw), "json": JSON}


def _journal():
    ns = {"timestamp": Timestamp(), "level": SmallInt(index=True), "text": Varchar(length=255, index=True)}
    if TEST == 2:
        ns["parent"] = ForeignKey("self", null=True)
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = COLS[t](null=True, default=None)
            else:
                ns[name] = COLS[t](default=spec.WIDE_DEFAULTS[t])
    ns["__module__"] = __name__
    return type("Journal", (Table,), ns, tablename="journal", db=DB)


Journal = _journal()
TABLES = [Journal]
if TEST == 2:
    class JournalRelated(Table, tablename="journal_related", db=DB):
        journal = ForeignKey(Journal)
        related = ForeignKey(Journal)
    TABLES.append(JournalRelated)

N_COLS = len(Journal._meta.columns)
CHUNK = max(1, 32000 // N_COLS)


class Backend(AsyncBackend):
    BULK_SETS_IDS = True
    PARTIAL_UPDATE = "partial (save([Journal.level]))"
    NOTES = ["connection per query outside transactions (SQLiteEngine), foreign_keys=1",
             f"C: insert(*objs) in chunks of {CHUNK} rows in one transaction; sets ids",
             "H: no tuple projection (not run)"]
    filter_tuple = None

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE

    async def versions(self):
        return pkg_versions("piccolo", "aiosqlite")

    async def info(self):
        jm = (await Journal.raw("PRAGMA journal_mode"))[0]["journal_mode"]
        sy = (await Journal.raw("PRAGMA synchronous"))[0]["synchronous"]
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy), "foreign_keys": "ON"}

    async def create(self):
        fresh_dir(self.directory)
        for t in TABLES:
            await t.create_table()

    async def open(self):
        pass  # a connection per query

    async def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    async def insert_single(self, objs):
        for o in objs:
            await o.save()
        return len(objs)

    async def insert_batch(self, objs):
        async with DB.transaction():
            for o in objs:
                await o.save()
        return len(objs)

    async def new_bulk(self, values):
        return await self.new_objects(values)

    async def insert_bulk(self, objs):
        async with DB.transaction():
            for i in range(0, len(objs), CHUNK):
                await Journal.insert(*objs[i:i + CHUNK])
        return len(objs)

    async def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.objects().where(Journal.level == lvl))
        return n

    async def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(await Journal.objects().where(Journal.level == lvl).limit(20).offset(off))
        return n

    async def get(self, ids):
        n = 0
        for i in ids:
            n += (await Journal.objects().get(Journal.id == i)).id == i
        return n

    async def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.select().where(Journal.level == lvl))
        return n

    async def load_all(self):
        return await Journal.objects()

    async def update_whole(self, objs, levels, texts):
        async with DB.transaction():
            for o, lvl, txt in zip(objs, levels, texts):
                o.level = lvl
                o.text = txt
                await o.save()
        return len(objs)

    async def update_partial(self, objs, levels):
        cols = [Journal.level]
        async with DB.transaction():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                await o.save(cols)
        return len(objs)

    async def delete(self, objs):
        async with DB.transaction():
            for o in objs:
                await o.remove()
        return len(objs)
