"""SQLModel async: SQLModel on SQLModel's AsyncSession (sqlmodel.ext.asyncio) and aiosqlite.

Upstream's sqlmodel/ paths (sa_common.AsyncSQLModel): async_sessionmaker(engine,
class_=AsyncSession, expire_on_commit=False), a session per operation inside the
timer; D/E (await session.exec(select(...))).all(); F session.get(); G
obj.model_dump(); H session.execute(sqlalchemy select(*columns)).all(); I/J/K
session.merge() each object loaded before the timer, one commit; C
bulk_save_objects() through run_sync() (the seed's choice; upstream: add_all()).
Sequential awaits in one event loop (upstream ran 10 concurrent coroutines). Models:
sqlmodel_models.py (upstream's: no Relationship() attributes in Test 2).
"""

from bench.orm.backends import sqlmodel_models
from bench.orm.backends.base import AsyncBackend, pkg_versions
from bench.orm.backends.sa_common import NOTES_COMMON, AsyncSQLModel


class Backend(AsyncSQLModel, AsyncBackend):
    models = sqlmodel_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["aiosqlite; sequential awaits (upstream: 10 concurrent coroutines)",
             "upstream's sqlmodel/ paths: a session per operation, I/J/K merge() each object"] + NOTES_COMMON

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    async def versions(self):
        return pkg_versions("sqlmodel", "SQLAlchemy", "pydantic", "aiosqlite")
