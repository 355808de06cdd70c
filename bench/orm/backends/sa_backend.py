"""SA ORM: SQLAlchemy ORM, sync (pysqlite), on upstream's sqlalchemy/ code paths.

Models: sa_models.py (upstream's); paths: sa_common.SyncSA. In short:
- create_engine("sqlite:///...") (the connection opens at the first statement, inside
  the timer in cold mode: info() reads the pragmas through a throwaway engine);
  PRAGMA synchronous=FULL on connect; rollback journal.
- One Session from sessionmaker(bind=engine) with its defaults (expire_on_commit=True,
  autoflush=True), as upstream.
- A add() + commit() per object; B add() each, one commit: one INSERT ... RETURNING
  per object, ids set (the ORM needs the RETURNING rows in parameter order and SA 2.1
  finds no sentinel column for this table on SQLite, so its "insertmanyvalues" runs
  row at a time; measured: 100 statements for 100 objects, upstream likewise);
  C bulk_save_objects() + commit (the seed's choice): one executemany without
  RETURNING, no ids.
- D/E list(session.query(Journal).filter(...)) (E: .limit(20).offset(o)); F
  session.query(Journal).get(id) (legacy API, as upstream; the returned objects are not
  kept, so the weak identity map holds none of them); G dicts from the objects'
  __dict__ without the _sa_ keys; H query.with_entities(*columns) (Row tuples).
- I/J set the attributes and session.add() each, one commit (the unit of work writes
  the changed columns only: J is really partial); K session.delete() each, one commit
  (Test 2: SA loads children, related and related_from of each deleted object to null
  their foreign keys). As upstream, the self-referencing parent_id has no index.
"""

from bench.orm.backends import sa_models
from bench.orm.backends.base import SyncBackend, pkg_versions
from bench.orm.backends.sa_common import NOTES_COMMON, SyncSA


class Backend(SyncSA, SyncBackend):
    models = sa_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = ["upstream's sqlalchemy/ paths: session.query(), Query.get(), sessionmaker defaults "
             "(expire_on_commit=True)"] + NOTES_COMMON

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    def versions(self):
        return pkg_versions("SQLAlchemy")
