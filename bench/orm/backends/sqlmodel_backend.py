"""SQLModel (sync): SQLModel table models on SQLAlchemy (pysqlite).

Upstream has SQLModel only as an async suite (sqlmodel/); this is its sync form, as
the seed's fork added one. Models: sqlmodel_models.py (upstream's: no Relationship()
attributes in Test 2). Paths: sa_common.SyncSQLModel: SQLModel's Session from
sessionmaker(bind=engine) with SA's defaults (expire_on_commit=True, as SA ORM's sync
suite); A add()+commit() each; B add() each + one commit (ids set); C
bulk_save_objects() (the seed's choice; no ids); D/E session.exec(select(...)).all();
F session.get() (objects not kept); G obj.model_dump(); H
session.execute(select(*columns)).all(); I/J set the attributes and session.add()
each, one commit (changed columns only: J really partial); K delete() each + one
commit. Rollback journal, synchronous=FULL.
"""

from bench.orm.backends import sqlmodel_models
from bench.orm.backends.base import SyncBackend, pkg_versions
from bench.orm.backends.sa_common import NOTES_COMMON, SyncSQLModel


class Backend(SyncSQLModel, SyncBackend):
    models = sqlmodel_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["sync form of upstream's sqlmodel/ paths (session.exec(select()), model_dump()), "
             "SA's sync session defaults (expire_on_commit=True)"] + NOTES_COMMON

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    def versions(self):
        return pkg_versions("sqlmodel", "SQLAlchemy", "pydantic")
