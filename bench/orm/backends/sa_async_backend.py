"""SA ORM async: SQLAlchemy ORM with AsyncSession on aiosqlite, on upstream's sqlalchemy_async/ paths.

Models: sa_models.py (upstream's); paths: sa_common.AsyncSA. async_sessionmaker(engine,
expire_on_commit=False); each operation opens its own session inside the timer. A
add() + commit() each; B add() each + one commit; C bulk_save_objects() through
run_sync() (the seed's choice; upstream async: add_all()); D/E
execute(select()).scalars().all(); F session.get(); G dicts from __dict__; H
execute(select(*columns)).all(); I/J/K on objects loaded (and detached) before the
timer: session.merge() each (one SELECT per object), then set the attributes /
delete, one commit. Sequential awaits in one event loop (upstream ran 10 concurrent
coroutines with a session each, so its "batch" was 10 transactions, and I/J/K
skipped the rows beyond a multiple of 10). Rollback journal, synchronous=FULL.
"""

from bench.orm.backends import sa_models
from bench.orm.backends.base import AsyncBackend, pkg_versions
from bench.orm.backends.sa_common import NOTES_COMMON, AsyncSA


class Backend(AsyncSA, AsyncBackend):
    models = sa_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["aiosqlite; sequential awaits (upstream: 10 concurrent coroutines)",
             "upstream's sqlalchemy_async/ paths: a session per operation, I/J/K merge() each object"] + NOTES_COMMON

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    async def versions(self):
        return pkg_versions("SQLAlchemy", "aiosqlite", "greenlet")
