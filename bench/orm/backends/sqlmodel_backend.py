"""SQLModel (sync): SQLModel table models on SQLAlchemy 2.x (pysqlite).

The paths are SA ORM's (sa_common.py), through SQLModel's Session and select():
session.exec(select(Journal)...). A add()+commit() each; B add() each + one commit
(ids set); C session.execute(insert(Journal), dicts) (no ids); F session.get(),
objects not kept; G mappings(), H tuples(); I/J one commit, changed columns only
(J really partial); K delete() each + one commit. Rollback journal,
synchronous=FULL. Test 2: Relationship() parent/children and a link model for the
M2M; parent_id has no index (as upstream). Test 3: JSON through sa_column=JSON,
decimals Numeric(12, 8).
"""

from bench.orm.backends import sqlmodel_models
from bench.orm.backends.base import SyncBackend, pkg_versions
from bench.orm.backends.sa_common import SyncSA


class Backend(SyncSA, SyncBackend):
    models = sqlmodel_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = SyncSA.NOTES_SA

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    def versions(self):
        return pkg_versions("sqlmodel", "SQLAlchemy", "pydantic")
