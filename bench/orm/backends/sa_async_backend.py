"""SA ORM async: SQLAlchemy 2.x ORM with AsyncSession on aiosqlite (as upstream).

Same models (sa_models.py) and paths (sa_common.py) as SA ORM, awaited: A
add()+commit() each; B add() each + one commit (ids set); C
session.execute(insert(Journal), dicts) (no ids); D/E scalars(select()); F
session.get() (objects not kept: every get runs SQL); G mappings(), H tuples();
I/J set attributes + one commit (changed columns only: J really partial); K
session.delete() each + one commit (Test 2: loads the relation collections).
Sequential awaits in one event loop (upstream ran 10 concurrent coroutines, so
its "batch" was 10 transactions). Rollback journal, synchronous=FULL.
"""

from bench.orm.backends import sa_models
from bench.orm.backends.base import AsyncBackend, pkg_versions
from bench.orm.backends.sa_common import AsyncSA


class Backend(AsyncSA, AsyncBackend):
    models = sa_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["aiosqlite; sequential awaits (upstream: 10 concurrent coroutines)"] + AsyncSA.NOTES_SA

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    async def versions(self):
        return pkg_versions("SQLAlchemy", "aiosqlite", "greenlet")
