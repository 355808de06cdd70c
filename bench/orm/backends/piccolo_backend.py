"""Piccolo (async), SQLiteEngine on aiosqlite: upstream's code paths (benchmarks/piccolo).

- uvloop's event loop, as upstream's bench.sh runs it (the worker's, for every async
  backend; BENCH_ORM_UVLOOP=0 keeps asyncio's own loop).
- SQLiteEngine(path=...): it opens a connection per query outside transactions
  (its design) and sets foreign_keys=1; rollback journal and synchronous=FULL
  (SQLite's defaults; recorded).
- A: await obj.save(); B: save() each inside DB.transaction(); C: Journal.insert(*objs)
  (upstream: one call for its 100 rows) split into chunks inside one DB.transaction(),
  as the seed: each statement takes as many rows as SQLite's variable limit allows
  (min(32,766, this build's) // parameters a row: Test 1 all 10,000 rows, Test 2 8,191,
  Test 3 936); Piccolo sets the new ids on the objects.
- D/E: Journal.objects().where(level == L)[.limit(20).offset(X)]; F:
  objects().where(id == X).first(); G: Journal.select().where() (dicts); H: the same,
  each row turned into tuple(row.values()) (Piccolo has no tuple output; as upstream).
- I: save() each (all columns) in a transaction; J: save([Journal.level]) - really
  partial (upstream's J called save(), which writes every column); K: remove() each
  in a transaction (Test 2: ForeignKey ON DELETE CASCADE in SQLite).
- Models as upstream's models.py: Timestamp(default=TimestampNow()), DoublePrecision,
  Numeric(digits=(12, 8)), JSONB, literal defaults. Test 2: parent =
  ForeignKey("self", null=True, default=None) as upstream, plus the self M2M of the
  seed's Test 2 as a link table with two ForeignKeys (upstream's Piccolo model has no
  M2M).
"""

import asyncio
import os

from piccolo.columns import (JSONB, BigInt, DoublePrecision, ForeignKey, Integer, Numeric, SmallInt, Text,
                             Timestamp, Varchar)
from piccolo.columns.defaults.timestamp import TimestampNow
from piccolo.engine.sqlite import SQLiteEngine
from piccolo.table import Table

from bench.orm import spec
from bench.orm.backends.base import AsyncBackend, fresh_dir, pkg_versions, sqlite_max_variables

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
DB = SQLiteEngine(path=DB_FILE)

COLS = {"float": DoublePrecision, "smallint": SmallInt, "int": Integer, "bigint": BigInt,
        "char": lambda **kw: Varchar(length=255, **kw), "text": Text,
        "decimal": lambda **kw: Numeric(digits=(12, 8), **kw), "json": JSONB}


def _journal():
    ns = {"timestamp": Timestamp(default=TimestampNow()), "level": SmallInt(index=True),
          "text": Varchar(length=255, index=True)}
    if TEST == 2:
        ns["parent"] = ForeignKey(references="self", null=True, default=None)
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


MAX_VARIABLES = sqlite_max_variables()
# parameters a row of Journal.insert() (the id is sent as DEFAULT, not as a parameter)
PARAMS_PER_ROW = len(Journal.insert(Journal(level=10, text="")).querystrings[0].compile_string(
    engine_type="sqlite")[1])
CHUNK = MAX_VARIABLES // PARAMS_PER_ROW


class Backend(AsyncBackend):
    BULK_SETS_IDS = True
    PARTIAL_UPDATE = "partial (save([Journal.level]))"
    NOTES = ["connection per query outside transactions (SQLiteEngine), foreign_keys=1",
             f"C: insert(*objs) in chunks of {CHUNK} rows ({PARAMS_PER_ROW} parameters a row, at most "
             f"{MAX_VARIABLES} a statement) in one transaction; sets ids",
             "H: select() dicts turned into tuples (no tuple output; as upstream)",
             "J: save([Journal.level]) (upstream: save(), every column)"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE

    async def versions(self):
        return pkg_versions("piccolo", "aiosqlite", "uvloop")

    async def info(self):
        jm = (await Journal.raw("PRAGMA journal_mode"))[0]["journal_mode"]
        sy = (await Journal.raw("PRAGMA synchronous"))[0]["synchronous"]
        loop = type(asyncio.get_running_loop())
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy), "foreign_keys": "ON",
                "event_loop": f"{loop.__module__}.{loop.__qualname__}"}

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
            n += (await Journal.objects().where(Journal.id == i).first()).id == i
        return n

    async def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.select().where(Journal.level == lvl))
        return n

    async def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            res = await Journal.select().where(Journal.level == lvl)
            n += len([tuple(row.values()) for row in res])
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
