"""The SQLAlchemy 2.x ORM paths, shared by SA ORM, SA ORM async, SQLModel and SQLModel async.

A backend subclasses SyncSA or AsyncSA and sets `models`: a module with Journal
(the mapped class), METADATA, COLUMNS (the table's columns) and DB_FILE.

Fastest idiomatic path (see sa_backend.py for the reasoning):
- engine on the file (the connection opens lazily, at the first statement);
  PRAGMA synchronous=FULL on connect; rollback journal (SQLite's default).
- One session per operation, expire_on_commit=False.
- A: add() + commit() each; B: add() each + one commit (insertmanyvalues: batched
  INSERT ... RETURNING, ids set); C: session.execute(insert(Journal), [dicts]) -
  the 2.x ORM bulk INSERT (applies Python defaults; no objects, so no ids).
- D/E: select(Journal) objects; F: session.get() with the results not kept (the
  weak identity map cannot answer a repeated id without SQL); G: .mappings()
  (dict-like rows), H: .tuples().
- I/J: set attributes, one commit: the unit of work writes the changed columns
  only (J is really partial); K: session.delete() each, one commit.
"""

from sqlalchemy import (JSON, BigInteger, Float, Integer, Numeric, SmallInteger, String, Text, create_engine, event,
                        insert, select)

SYNC_NAMES = {2: "FULL", 1: "NORMAL", 0: "OFF", 3: "EXTRA"}

# Test 3's column types by spec.WIDE_TYPES name (both models modules).
SA_TYPES = {"float": Float, "smallint": SmallInteger, "int": Integer, "bigint": BigInteger,
            "char": lambda: String(255), "text": Text, "decimal": lambda: Numeric(12, 8), "json": JSON}


def _on_connect(engine):
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA synchronous = FULL")
        cur.close()


class _Common:
    models = None
    NOTES_SA = ["rollback journal (default), synchronous=FULL",
                "C: session.execute(insert(Journal), dicts) (2.x ORM bulk insert), no ids",
                "F: objects not kept, so every get runs SQL (upstream: identity map answered repeats)",
                "Test 2: parent_id without index (as upstream)"]

    def new_objects(self, values):
        J = self.models.Journal
        return [J(level=lvl, text=txt) for lvl, txt in values]

    def _bulk_rows(self, values):
        return [{"level": lvl, "text": txt} for lvl, txt in values]

    def _select(self, *what):
        """models.select if the models module has one (SQLModel's), else SQLAlchemy's."""
        return getattr(self.models, "select", select)(*what)

    def _q_level(self, lvl):
        J = self.models.Journal
        return self._select(J).where(J.level == lvl)

    def _q_cols(self, lvl):
        J = self.models.Journal
        return select(*self.models.COLUMNS).where(J.level == lvl)


class SyncSA(_Common):
    """Mixin for a SyncBackend subclass."""

    def _init_sa(self):
        from sqlalchemy.orm import Session
        self._Session = getattr(self.models, "Session", Session)
        self.db_file = self.models.DB_FILE
        self.engine = create_engine(f"sqlite:///{self.models.DB_FILE}")
        _on_connect(self.engine)
        self.session = None

    def _objs(self, stmt):
        if hasattr(self.session, "exec"):  # SQLModel's session
            return self.session.exec(stmt).all()
        return self.session.scalars(stmt).all()

    def info(self):
        with self.engine.connect() as c:
            jm = c.exec_driver_sql("PRAGMA journal_mode").scalar()
            sy = c.exec_driver_sql("PRAGMA synchronous").scalar()
        return {"journal_mode": jm, "synchronous": SYNC_NAMES.get(sy, sy)}

    def create(self):
        from bench.orm.backends.base import fresh_dir
        fresh_dir(self.directory)
        self.models.METADATA.create_all(self.engine)

    def open(self):
        if self.session is None:
            self.session = self._Session(self.engine, expire_on_commit=False)

    def after_restore(self):
        if self.session is not None:
            self.session.close()
            self.session = self._Session(self.engine, expire_on_commit=False)

    def close(self):
        if self.session is not None:
            self.session.close()
            self.session = None
        self.engine.dispose()

    def insert_single(self, objs):
        s = self.session
        for o in objs:
            s.add(o)
            s.commit()
        return len(objs)

    def insert_batch(self, objs):
        s = self.session
        for o in objs:
            s.add(o)
        s.commit()
        return len(objs)

    def new_bulk(self, values):
        return self._bulk_rows(values)

    def insert_bulk(self, rows):
        self.session.execute(insert(self.models.Journal), rows)
        self.session.commit()
        return len(rows)

    def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(self._objs(self._q_level(lvl)))
        return n

    def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(self._objs(self._q_level(lvl).limit(20).offset(off)))
        return n

    def get(self, ids):
        s, J = self.session, self.models.Journal
        n = 0
        for i in ids:
            n += s.get(J, i).id == i
        return n

    def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(self.session.execute(self._q_cols(lvl)).mappings().all())
        return n

    def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(self.session.execute(self._q_cols(lvl)).tuples().all())
        return n

    def load_all(self):
        return self._objs(self._select(self.models.Journal))

    def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        self.session.commit()
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self.session.commit()
        return len(objs)

    def delete(self, objs):
        s = self.session
        for o in objs:
            s.delete(o)
        s.commit()
        return len(objs)


class AsyncSA(_Common):
    """Mixin for an AsyncBackend subclass (aiosqlite)."""

    def _init_sa(self):
        from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
        self._Session = getattr(self.models, "AsyncSession", AsyncSession)
        self.db_file = self.models.DB_FILE
        self.engine = create_async_engine(f"sqlite+aiosqlite:///{self.models.DB_FILE}")
        _on_connect(self.engine.sync_engine)
        self.session = None

    async def _objs(self, stmt):
        if hasattr(self.session, "exec"):  # SQLModel's session
            return (await self.session.exec(stmt)).all()
        return (await self.session.scalars(stmt)).all()

    async def info(self):
        async with self.engine.connect() as c:
            jm = (await c.exec_driver_sql("PRAGMA journal_mode")).scalar()
            sy = (await c.exec_driver_sql("PRAGMA synchronous")).scalar()
        return {"journal_mode": jm, "synchronous": SYNC_NAMES.get(sy, sy)}

    async def create(self):
        from bench.orm.backends.base import fresh_dir
        fresh_dir(self.directory)
        async with self.engine.begin() as c:
            await c.run_sync(self.models.METADATA.create_all)

    async def open(self):
        if self.session is None:
            self.session = self._Session(self.engine, expire_on_commit=False)

    async def after_restore(self):
        if self.session is not None:
            await self.session.close()
            self.session = self._Session(self.engine, expire_on_commit=False)

    async def close(self):
        if self.session is not None:
            await self.session.close()
            self.session = None
        await self.engine.dispose()

    async def new_objects(self, values):
        return _Common.new_objects(self, values)

    async def insert_single(self, objs):
        s = self.session
        for o in objs:
            s.add(o)
            await s.commit()
        return len(objs)

    async def insert_batch(self, objs):
        s = self.session
        for o in objs:
            s.add(o)
        await s.commit()
        return len(objs)

    async def new_bulk(self, values):
        return self._bulk_rows(values)

    async def insert_bulk(self, rows):
        await self.session.execute(insert(self.models.Journal), rows)
        await self.session.commit()
        return len(rows)

    async def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(await self._objs(self._q_level(lvl)))
        return n

    async def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(await self._objs(self._q_level(lvl).limit(20).offset(off)))
        return n

    async def get(self, ids):
        s, J = self.session, self.models.Journal
        n = 0
        for i in ids:
            n += (await s.get(J, i)).id == i
        return n

    async def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len((await self.session.execute(self._q_cols(lvl))).mappings().all())
        return n

    async def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len((await self.session.execute(self._q_cols(lvl))).tuples().all())
        return n

    async def load_all(self):
        return await self._objs(self._select(self.models.Journal))

    async def update_whole(self, objs, levels, texts):
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
        await self.session.commit()
        return len(objs)

    async def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        await self.session.commit()
        return len(objs)

    async def delete(self, objs):
        s = self.session
        for o in objs:
            await s.delete(o)
        await s.commit()
        return len(objs)
