"""The SQLAlchemy-based backends' code paths: upstream's, per suite.

A backend subclasses one of SyncSA (upstream's sqlalchemy/), SyncSQLModel (the sync
form of upstream's sqlmodel/), AsyncSA (sqlalchemy_async/) or AsyncSQLModel
(sqlmodel/) and sets `models`: a module with Journal (the mapped class), METADATA
and DB_FILE.

Common to all four:
- create_engine / create_async_engine on the file with the defaults (the pool opens
  the connection lazily, at the first statement); PRAGMA synchronous=FULL on connect
  (SQLite's compiled-in default, set explicitly); rollback journal (SQLite's default).
- info() reads journal_mode and synchronous through a throwaway engine configured
  the same way, so the measured engine has not connected yet when an operation
  starts: in cold mode the sync backends' connection open and SQLAlchemy's
  first-connect initialization are timed, as in upstream's sync A-H (the async
  backends connect in create(), untimed, as upstream's create_tables()).
- The harness builds the unsaved objects (and the new values of I/J) before the
  timer; the seed's choices: C is bulk_save_objects() (sync and async: no ids), F
  draws distinct ids, awaits are sequential.

SyncSA (upstream's sqlalchemy/test_*.py): one Session from sessionmaker(bind=engine)
with its defaults (expire_on_commit=True, autoflush=True), created at open(); A add()
+ commit() each; B add() each + one commit; C bulk_save_objects(objects) + commit;
D list(session.query(Journal).filter(Journal.level == L)); E the same with
.limit(20).offset(o); F session.query(Journal).get(id) (legacy API, LegacyAPIWarning
each call); G {k: v for k, v in obj.__dict__.items() if k[:4] != "_sa_"} per object
of D's query; H list(query.with_entities(*columns)) (Row tuples); I/J set the
attributes and session.add(obj) each, one commit (the unit of work writes the changed
columns only); K session.delete(obj) each, one commit. I/J/K use the objects loaded
by session.query(Journal).all() in the same session.

SyncSQLModel (no upstream sync suite; the sync form of upstream's sqlmodel/): SA's
sessionmaker defaults with SQLModel's Session; D/E session.exec(select(...)).all();
F session.get(); G obj.model_dump(); H session.execute(sqlalchemy select(*columns)).all();
the rest as SyncSA.

AsyncSA / AsyncSQLModel (upstream's sqlalchemy_async/ and sqlmodel/):
async_sessionmaker(engine, expire_on_commit=False) (SQLModel: class_=AsyncSession); each
operation opens its own session (async with) inside the timer and closes it there;
D/E execute(select()).scalars().all() (SQLModel: exec(select()).all()); F
session.get(); G the __dict__ comprehension (SQLModel: model_dump()); H
execute(select(*columns)).all(); load_all reads every row in a session of its own
that is closed again (detached objects, as upstream); I/J/K session.merge(obj) each
(one SELECT per object) and set the attributes / delete the merged object, one commit.
"""

from sqlalchemy import (JSON, BigInteger, Float, Integer, Numeric, SmallInteger, String, Text, create_engine, event,
                        select)

SYNC_NAMES = {2: "FULL", 1: "NORMAL", 0: "OFF", 3: "EXTRA"}

# Test 3's column types by spec.WIDE_TYPES name (both models modules).
SA_TYPES = {"float": Float, "smallint": SmallInteger, "int": Integer, "bigint": BigInteger,
            "char": lambda: String(255), "text": Text, "decimal": lambda: Numeric(12, 8), "json": JSON}

NOTES_COMMON = ["rollback journal (default), synchronous=FULL",
                "C: bulk_save_objects() (the seed's choice), no ids",
                "Test 2: parent_id without index (as upstream)"]


def _on_connect(engine):
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA synchronous = FULL")
        cur.close()


def _url(models, driver=""):
    return f"sqlite{driver}:///{models.DB_FILE}"


def _dict_of(obj):
    """A row as a dict, as upstream's SA suites build it (G)."""
    return {k: v for k, v in obj.__dict__.items() if k[:4] != "_sa_"}


class _Common:
    models = None

    def new_objects(self, values):
        J = self.models.Journal
        return [J(level=lvl, text=txt) for lvl, txt in values]

    def _by_level(self, lvl):
        J = self.models.Journal
        return self._select(J).where(J.level == lvl)

    def _columns_by_level(self, lvl):
        t = self.models.Journal.__table__
        return select(*t.columns).where(t.c.level == lvl)

    _select = staticmethod(select)  # SQLModel's backends: sqlmodel.select


# --- sync ------------------------------------------------------------------------

class SyncSA(_Common):
    """Mixin for a SyncBackend subclass: upstream's sqlalchemy/ suite."""

    def _session_class(self):
        from sqlalchemy.orm import Session
        return Session

    def _init_sa(self):
        from sqlalchemy.orm import sessionmaker
        self.db_file = self.models.DB_FILE
        self.engine = create_engine(_url(self.models))
        _on_connect(self.engine)
        self.Session = sessionmaker(bind=self.engine, class_=self._session_class())
        self.session = None

    def info(self):
        e = create_engine(_url(self.models))
        _on_connect(e)
        try:
            with e.connect() as c:
                jm = c.exec_driver_sql("PRAGMA journal_mode").scalar()
                sy = c.exec_driver_sql("PRAGMA synchronous").scalar()
        finally:
            e.dispose()
        return {"journal_mode": jm, "synchronous": SYNC_NAMES.get(sy, sy)}

    def create(self):
        from bench.orm.backends.base import fresh_dir
        fresh_dir(self.directory)
        self.models.METADATA.create_all(self.engine)

    def open(self):
        if self.session is None:
            self.session = self.Session()

    def after_restore(self):
        if self.session is not None:
            self.session.close()
            self.session = self.Session()

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
        return self.new_objects(values)

    def insert_bulk(self, objs):
        s = self.session
        s.bulk_save_objects(objs)
        s.commit()
        return len(objs)

    def filter_large(self, levels):
        q, J = self.session.query, self.models.Journal
        n = 0
        for lvl in levels:
            n += len(list(q(J).filter(J.level == lvl)))
        return n

    def filter_small(self, queries):
        q, J = self.session.query, self.models.Journal
        n = 0
        for lvl, off in queries:
            n += len(list(q(J).filter(J.level == lvl).limit(20).offset(off)))
        return n

    def get(self, ids):
        q, J = self.session.query, self.models.Journal
        n = 0
        for i in ids:
            n += q(J).get(i) is not None
        return n

    def filter_dict(self, levels):
        q, J = self.session.query, self.models.Journal
        n = 0
        for lvl in levels:
            n += len([_dict_of(o) for o in q(J).filter(J.level == lvl)])
        return n

    def filter_tuple(self, levels):
        q, J = self.session.query, self.models.Journal
        cols = J.__table__.columns
        n = 0
        for lvl in levels:
            n += len(list(q(J).filter(J.level == lvl).with_entities(*cols)))
        return n

    def load_all(self):
        return list(self.session.query(self.models.Journal).all())

    def update_whole(self, objs, levels, texts):
        s = self.session
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
            s.add(o)
        s.commit()
        return len(objs)

    def update_partial(self, objs, levels):
        s = self.session
        for o, lvl in zip(objs, levels):
            o.level = lvl
            s.add(o)
        s.commit()
        return len(objs)

    def delete(self, objs):
        s = self.session
        for o in objs:
            s.delete(o)
        s.commit()
        return len(objs)


class SyncSQLModel(SyncSA):
    """Mixin for a SyncBackend subclass: upstream's sqlmodel/ suite, sync."""

    def _session_class(self):
        from sqlmodel import Session
        return Session

    def _init_sa(self):
        from sqlmodel import select as sm_select
        super()._init_sa()
        self._select = sm_select

    def filter_large(self, levels):
        s = self.session
        n = 0
        for lvl in levels:
            n += len(s.exec(self._by_level(lvl)).all())
        return n

    def filter_small(self, queries):
        s = self.session
        n = 0
        for lvl, off in queries:
            n += len(s.exec(self._by_level(lvl).limit(20).offset(off)).all())
        return n

    def get(self, ids):
        s, J = self.session, self.models.Journal
        n = 0
        for i in ids:
            n += s.get(J, i) is not None
        return n

    def filter_dict(self, levels):
        s = self.session
        n = 0
        for lvl in levels:
            n += len([o.model_dump() for o in s.exec(self._by_level(lvl)).all()])
        return n

    def filter_tuple(self, levels):
        s = self.session
        n = 0
        for lvl in levels:
            n += len(s.execute(self._columns_by_level(lvl)).all())
        return n

    def load_all(self):
        return self.session.exec(self._select(self.models.Journal)).all()


# --- async -----------------------------------------------------------------------

class AsyncSA(_Common):
    """Mixin for an AsyncBackend subclass (aiosqlite): upstream's sqlalchemy_async/ suite."""

    def _session_class(self):
        from sqlalchemy.ext.asyncio import AsyncSession
        return AsyncSession

    def _init_sa(self):
        from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
        self.db_file = self.models.DB_FILE
        self.engine = create_async_engine(_url(self.models, "+aiosqlite"))
        _on_connect(self.engine.sync_engine)
        self.Session = async_sessionmaker(self.engine, class_=self._session_class(), expire_on_commit=False)

    async def _objs(self, session, stmt):
        return (await session.execute(stmt)).scalars().all()

    async def info(self):
        from sqlalchemy.ext.asyncio import create_async_engine
        e = create_async_engine(_url(self.models, "+aiosqlite"))
        _on_connect(e.sync_engine)
        try:
            async with e.connect() as c:
                jm = (await c.exec_driver_sql("PRAGMA journal_mode")).scalar()
                sy = (await c.exec_driver_sql("PRAGMA synchronous")).scalar()
        finally:
            await e.dispose()
        return {"journal_mode": jm, "synchronous": SYNC_NAMES.get(sy, sy)}

    async def create(self):
        from bench.orm.backends.base import fresh_dir
        fresh_dir(self.directory)
        async with self.engine.begin() as c:
            await c.run_sync(self.models.METADATA.create_all)

    async def open(self):
        """Each operation opens its own session (upstream: one per coroutine, inside the timer)."""

    async def close(self):
        await self.engine.dispose()

    async def new_objects(self, values):
        return _Common.new_objects(self, values)

    async def insert_single(self, objs):
        async with self.Session() as s:
            for o in objs:
                s.add(o)
                await s.commit()
        return len(objs)

    async def insert_batch(self, objs):
        async with self.Session() as s:
            for o in objs:
                s.add(o)
            await s.commit()
        return len(objs)

    async def new_bulk(self, values):
        return _Common.new_objects(self, values)

    async def insert_bulk(self, objs):
        async with self.Session() as s:
            await s.run_sync(lambda sync_session: sync_session.bulk_save_objects(objs))
            await s.commit()
        return len(objs)

    async def filter_large(self, levels):
        n = 0
        async with self.Session() as s:
            for lvl in levels:
                n += len(await self._objs(s, self._by_level(lvl)))
        return n

    async def filter_small(self, queries):
        n = 0
        async with self.Session() as s:
            for lvl, off in queries:
                n += len(await self._objs(s, self._by_level(lvl).limit(20).offset(off)))
        return n

    async def get(self, ids):
        J = self.models.Journal
        n = 0
        async with self.Session() as s:
            for i in ids:
                n += (await s.get(J, i)) is not None
        return n

    async def filter_dict(self, levels):
        n = 0
        async with self.Session() as s:
            for lvl in levels:
                n += len([_dict_of(o) for o in await self._objs(s, self._by_level(lvl))])
        return n

    async def filter_tuple(self, levels):
        n = 0
        async with self.Session() as s:
            for lvl in levels:
                n += len((await s.execute(self._columns_by_level(lvl))).all())
        return n

    async def load_all(self):
        async with self.Session() as s:
            return await self._objs(s, self._select(self.models.Journal))

    async def update_whole(self, objs, levels, texts):
        async with self.Session() as s:
            for o, lvl, txt in zip(objs, levels, texts):
                merged = await s.merge(o)
                merged.level = lvl
                merged.text = txt
            await s.commit()
        return len(objs)

    async def update_partial(self, objs, levels):
        async with self.Session() as s:
            for o, lvl in zip(objs, levels):
                merged = await s.merge(o)
                merged.level = lvl
            await s.commit()
        return len(objs)

    async def delete(self, objs):
        async with self.Session() as s:
            for o in objs:
                merged = await s.merge(o)
                await s.delete(merged)
            await s.commit()
        return len(objs)


class AsyncSQLModel(AsyncSA):
    """Mixin for an AsyncBackend subclass: upstream's sqlmodel/ suite."""

    def _session_class(self):
        from sqlmodel.ext.asyncio.session import AsyncSession
        return AsyncSession

    def _init_sa(self):
        from sqlmodel import select as sm_select
        super()._init_sa()
        self._select = sm_select

    async def _objs(self, session, stmt):
        return (await session.exec(stmt)).all()

    async def filter_dict(self, levels):
        n = 0
        async with self.Session() as s:
            for lvl in levels:
                n += len([o.model_dump() for o in await self._objs(s, self._by_level(lvl))])
        return n
