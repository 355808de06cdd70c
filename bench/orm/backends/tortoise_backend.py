"""Tortoise ORM (async), its SQLite client on aiosqlite: upstream's code paths
(benchmarks/tortoise).

- uvloop's event loop, as upstream's bench.sh runs it (the worker's, for every async
  backend; BENCH_ORM_UVLOOP=0 keeps asyncio's own loop).
- Tortoise.init() with the sqlite engine; the client's own pragmas: WAL journal and
  foreign_keys=ON (its defaults, as upstream), synchronous=FULL added (the seed's).
- A: await obj.save(force_create=True) (autocommit): what upstream's Journal.create()
  does after building the object, which the seed prepares before the timer; B: the
  same, each inside in_transaction(); C: Journal.bulk_create(objs) as upstream: one
  executemany() in its own BEGIN/COMMIT (one transaction; no ids on SQLite).
  timestamp is auto_now_add: set while inserting (timed, as upstream).
- D/E: await filter(level=L).all() / .limit(20).offset(X); F: await get(id=);
  G: filter().all().values(); H: filter().all().values_list().
- I: save() each in in_transaction() (all fields); J: save(update_fields=["level"])
  (really partial); K: await obj.delete() each in in_transaction() (Test 2: the FK
  and M2M rows cascade in SQLite: ON DELETE CASCADE with foreign_keys=ON). The
  queries find the transaction's connection through its context, as upstream's do.
- All operations sequentially in one event loop (upstream: 10 concurrent
  coroutines, and its chunked I/J/K skipped a row per chunk; not here).
"""

import asyncio
import os

from tortoise import Tortoise
from tortoise.transactions import in_transaction

from bench.orm.backends import tortoise_models as tm
from bench.orm.backends.base import AsyncBackend, fresh_dir, pkg_versions

Journal = tm.Journal


DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
CONFIG = {
    "connections": {"default": {"engine": "tortoise.backends.sqlite",
                                "credentials": {"file_path": DB_FILE, "synchronous": "FULL"}}},
    "apps": {"models": {"models": [tm.__name__], "default_connection": "default"}},
}


class Backend(AsyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (save(update_fields=['level']))"
    NOTES = ["WAL journal and foreign_keys=ON (Tortoise's defaults), synchronous=FULL",
             "A/B save(force_create=True) as create(); timestamp auto_now_add (set while inserting)",
             "C: bulk_create(): one executemany in its own transaction, no ids",
             "sequential awaits (upstream: 10 concurrent coroutines; its chunked I/J/K skipped rows)"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.ready = False

    async def versions(self):
        return pkg_versions("tortoise-orm", "pypika-tortoise", "aiosqlite", "uvloop")

    async def info(self):
        await self.open()
        conn = Tortoise.get_connection("default")
        jm = (await conn.execute_query_dict("PRAGMA journal_mode"))[0]["journal_mode"]
        sy = (await conn.execute_query_dict("PRAGMA synchronous"))[0]["synchronous"]
        loop = type(asyncio.get_running_loop())
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy), "foreign_keys": "ON",
                "event_loop": f"{loop.__module__}.{loop.__qualname__}"}

    async def create(self):
        fresh_dir(self.directory)
        await self.open()
        await Tortoise.generate_schemas()

    async def open(self):
        if not self.ready:
            await Tortoise.init(config=CONFIG)
            self.ready = True

    async def close(self):
        if self.ready:
            await Tortoise.close_connections()
            self.ready = False

    async def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    async def insert_single(self, objs):
        for o in objs:
            await o.save(force_create=True)
        return len(objs)

    async def insert_batch(self, objs):
        async with in_transaction():
            for o in objs:
                await o.save(force_create=True)
        return len(objs)

    async def new_bulk(self, values):
        return await self.new_objects(values)

    async def insert_bulk(self, objs):
        await Journal.bulk_create(objs)
        return len(objs)

    async def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.filter(level=lvl).all())
        return n

    async def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(await Journal.filter(level=lvl).limit(20).offset(off))
        return n

    async def get(self, ids):
        n = 0
        for i in ids:
            n += (await Journal.get(id=i)).id == i
        return n

    async def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.filter(level=lvl).all().values())
        return n

    async def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.filter(level=lvl).all().values_list())
        return n

    async def load_all(self):
        return await Journal.all()

    async def update_whole(self, objs, levels, texts):
        async with in_transaction():
            for o, lvl, txt in zip(objs, levels, texts):
                o.level = lvl
                o.text = txt
                await o.save()
        return len(objs)

    async def update_partial(self, objs, levels):
        async with in_transaction():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                await o.save(update_fields=["level"])
        return len(objs)

    async def delete(self, objs):
        async with in_transaction():
            for o in objs:
                await o.delete()
        return len(objs)
