"""ormar (async): pydantic models on SQLAlchemy's async engine (aiosqlite).

Fastest idiomatic path:
- ormar.DatabaseConnection("sqlite+aiosqlite:///..."): standalone queries in
  autocommit, explicit transactions via database.transaction(); it sets
  foreign_keys=ON; synchronous=FULL added on connect; rollback journal.
- A: await obj.save(); B: save() each inside database.transaction(); C:
  Journal.objects.bulk_create() in chunks (one multi-row INSERT each; SQLite allows
  at most 32,766 variables) in one transaction; does not set ids.
- D/E: objects.filter(level=L)[.offset(X).limit(20)].all(); F: objects.get(id=);
  G: .values(); H: .values_list().
- I: set attributes, update() each (every column) in a transaction; J:
  update(_columns=["level"]) - really partial; K: delete() each in a transaction.
- Test 2: parent = ForeignKey(self, nullable, related_name="children"); related =
  ManyToMany(self, related_name="related_from") through JournalRelated.
- Pydantic validation on construction and load (ormar's cost, as upstream notes).
"""

import os
from datetime import datetime
from decimal import Decimal
from typing import ForwardRef, Optional

import ormar
import sqlalchemy
from sqlalchemy import event

from bench.orm import spec
from bench.orm.backends.base import AsyncBackend, fresh_dir, pkg_versions

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
                d = spec.WIDE_DEFAULTS[t]
                ns[name] = FIELDS[t](default=(lambda: dict(spec.WIDE_JSON_DEFAULT)) if t == "json" else d)
                ann[name] = PY[t]
    ns["__annotations__"] = ann
    ns["__module__"] = __name__
    Journal = type(ormar.Model)("Journal", (ormar.Model,), ns)

N_COLS = len(Journal.ormar_config.table.columns)
CHUNK = max(1, 32000 // N_COLS)


class Backend(AsyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (update(_columns=['level']))"
    NOTES = ["aiosqlite via SQLAlchemy async; foreign_keys=ON (ormar), synchronous=FULL",
             f"C: bulk_create() in chunks of {CHUNK} rows in one transaction, no ids"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE
        self.connected = False

    async def versions(self):
        return pkg_versions("ormar", "pydantic", "SQLAlchemy", "aiosqlite")

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
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy), "foreign_keys": "ON"}

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
            n += len(await Journal.objects.filter(level=lvl).offset(off).limit(20).all())
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
