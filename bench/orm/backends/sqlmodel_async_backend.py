"""SQLModel async: SQLModel on SQLAlchemy's AsyncSession (sqlmodel.ext.asyncio) and aiosqlite.

The paths are SA ORM async's (sa_common.py): await session.exec(select(...));
sequential awaits in one event loop (upstream ran 10 concurrent coroutines). See
sqlmodel_backend.py for the models.
"""

from bench.orm.backends import sqlmodel_models
from bench.orm.backends.base import AsyncBackend, pkg_versions
from bench.orm.backends.sa_common import AsyncSA


class Backend(AsyncSA, AsyncBackend):
    models = sqlmodel_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["aiosqlite; sequential awaits (upstream: 10 concurrent coroutines)"] + AsyncSA.NOTES_SA

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    async def versions(self):
        return pkg_versions("sqlmodel", "SQLAlchemy", "pydantic", "aiosqlite")
