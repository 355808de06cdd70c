"""ormar (async): pydantic models on SQLAlchemy's async engine (aiosqlite): upstream's
code paths (benchmarks/ormar).

- uvloop's event loop, as upstream's bench.sh runs it (the worker's, for every async
  backend; BENCH_ORM_UVLOOP=0 keeps asyncio's own loop).
- ormar.DatabaseConnection("sqlite+aiosqlite:///..."): standalone queries in
  autocommit, explicit transactions via database.transaction(); it sets
  foreign_keys=ON; synchronous=FULL added on connect (the seed's); rollback journal.
- A: await obj.save() (what upstream's objects.create() does after building the
  object, which the seed prepares before the timer); B: save() each inside
  database.transaction(); C: Journal.objects.bulk_create() (one multi-row INSERT a
  call; upstream: one call for its 100 rows) split into chunks in one transaction, as
  the seed: each statement takes as many rows as SQLite's variable limit allows
  (min(32,766, this build's) // parameters a row: Test 1 all 10,000 rows, Test 2 8,191,
  Test 3 936); does not set ids.
- D/E: objects.filter(level=L).all() / .limit(20).offset(X).all(); F: objects.get(id=);
  G: .values(); H: .values_list().
- I: set attributes, update() each (every column) in a transaction; J:
  update(_columns=["level"]) - really partial; K: delete() each in a transaction.
- Models as upstream's models.py (literal defaults: one shared dict for the JSON
  columns). Test 2: parent = ForeignKey(self, nullable, related_name="children") as
  upstream, plus the self M2M of the seed's Test 2: related = ManyToMany(self,
  related_name="related_from") through JournalRelated (upstream's ormar model has no
  M2M).
- Pydantic validation on construction and load (ormar's cost, as upstream notes).
"""

import asyncio
import os
from datetime import datetime
from decimal import Decimal
from typing import ForwardRef, Optional

import ormar
import sqlalchemy
from sqlalchemy import event

from bench.orm import spec
from bench.orm.backends.base import AsyncBackend, fresh_dir, pkg_versions, sqlite_max_variables

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")
database = ormar.DatabaseConnection(f"sqlite+aiosqlite:///{DB_FILE}")
metadata = sqlalchemy.MetaData()
base_config = ormar.OrmarConfig(metadata=metadata, database=database)

FIELDS = {"float": ormar.Float, "smallint": ormar.SmallInteger, "int": ormar.Integer,
          "bigint": ormar.BigInteger, "char": lambda **kw: ormar.String(max_length=255, **kw),
          "text": ormar.Text, "decimal": lambda **kw: ormar.Decimal(max_digits=12, decimal_places=8, **kw),
          "json": ormar.JSON}

if TEST == 2:
    JournalRef = ForwardRef("Journal")

    class JournalRelated(ormar.Model):
        ormar_config = base_config.copy(tablename="journal_related")
        id: int = ormar.Integer(primary_key=True)

    class Journal(ormar.Model):
        ormar_config = base_config.copy(tablename="journal")
        id: int = ormar.Integer(primary_key=True)
        timestamp: datetime = ormar.DateTime(default=datetime.now)
        level: int = ormar.SmallInteger(index=True)
        text: str = ormar.String(max_length=255, index=True)
        parent: Optional[JournalRef] = ormar.ForeignKey(JournalRef, nullable=True, related_name="children")
        related: Optional[list[JournalRef]] = ormar.ManyToMany(JournalRef, through=JournalRelated,
                                                               related_name="related_from")

    Journal.update_forward_refs()
else:
    ns = {"ormar_config": base_config.copy(tablename="journal"),
          "id": ormar.Integer(primary_key=True),
          "timestamp": ormar.DateTime(default=datetime.now),
          "level": ormar.SmallInteger(index=True),
          "text": ormar.String(max_length=255, index=True)}
    ann = {"id": int, "timestamp": datetime, "level": int, "text": str}
    PY = {"float": float, "smallint": int, "int": int, "bigint": int, "char": str, "text": str,
          "decimal": Decimal, "json": dict}
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = FIELDS[t](nullable=True)
                ann[name] = Optional[PY[t]]
            else:
                ns[name] = FIELDS[t](default=spec.WIDE_DEFAULTS[t])
                ann[name] = PY[t]
    ns["__annotations__"] = ann
    ns["__module__"] = __name__
    Journal = type(ormar.Model)("Journal", (ormar.Model,), ns)


def _params_per_row():
    """Values a row of bulk_create()'s INSERT carries (what it sends: prepare_model_to_save();
    the unset id is left out)."""
    o = Journal(level=10, text="")
    return len(o.prepare_model_to_save(o.model_dump()))


MAX_VARIABLES = sqlite_max_variables()
PARAMS_PER_ROW = _params_per_row()
CHUNK = MAX_VARIABLES // PARAMS_PER_ROW


class Backend(AsyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (update(_columns=['level']))"
    NOTES = ["aiosqlite via SQLAlchemy async; foreign_keys=ON (ormar), synchronous=FULL",
             f"C: bulk_create() in chunks of {CHUNK} rows ({PARAMS_PER_ROW} parameters a row, at most "
             f"{MAX_VARIABLES} a statement) in one transaction, no ids"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.connected = False

    async def versions(self):
        return pkg_versions("ormar", "pydantic", "SQLAlchemy", "aiosqlite", "uvloop")

    async def open(self):
        if not self.connected:
            await database.connect()

            @event.listens_for(database.engine.sync_engine, "connect")
            def _sync_full(dbapi_conn, _rec):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA synchronous = FULL")
                cur.close()
            self.connected = True

    async def info(self):
        await self.open()
        async with database.engine.connect() as c:
            jm = (await c.exec_driver_sql("PRAGMA journal_mode")).scalar()
            sy = (await c.exec_driver_sql("PRAGMA synchronous")).scalar()
        loop = type(asyncio.get_running_loop())
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy), "foreign_keys": "ON",
                "event_loop": f"{loop.__module__}.{loop.__qualname__}"}

    async def create(self):
        fresh_dir(self.directory)
        await self.open()
        async with database.engine.begin() as c:
            await c.run_sync(metadata.create_all)

    async def close(self):
        if self.connected:
            await database.disconnect()
            self.connected = False

    async def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    async def insert_single(self, objs):
        for o in objs:
            await o.save()
        return len(objs)

    async def insert_batch(self, objs):
        async with database.transaction():
            for o in objs:
                await o.save()
        return len(objs)

    async def new_bulk(self, values):
        return await self.new_objects(values)

    async def insert_bulk(self, objs):
        async with database.transaction():
            for i in range(0, len(objs), CHUNK):
                await Journal.objects.bulk_create(objs[i:i + CHUNK])
        return len(objs)

    async def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.objects.filter(level=lvl).all())
        return n

    async def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(await Journal.objects.filter(level=lvl).limit(20).offset(off).all())
        return n

    async def get(self, ids):
        n = 0
        for i in ids:
            n += (await Journal.objects.get(id=i)).id == i
        return n

    async def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.objects.filter(level=lvl).values())
        return n

    async def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(await Journal.objects.filter(level=lvl).values_list())
        return n

    async def load_all(self):
        return await Journal.objects.all()

    async def update_whole(self, objs, levels, texts):
        async with database.transaction():
            for o, lvl, txt in zip(objs, levels, texts):
                o.level = lvl
                o.text = txt
                await o.update()
        return len(objs)

    async def update_partial(self, objs, levels):
        async with database.transaction():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                await o.update(_columns=["level"])
        return len(objs)

    async def delete(self, objs):
        async with database.transaction():
            for o in objs:
                await o.delete()
        return len(objs)
