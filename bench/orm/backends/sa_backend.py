"""SA ORM: SQLAlchemy 2.x ORM, sync (pysqlite). Models: sa_models.py; paths: sa_common.py.

Fastest idiomatic path:
- create_engine("sqlite:///...") (lazy: the connection opens at the first
  statement); PRAGMA synchronous=FULL on connect; rollback journal (default).
- One Session per operation, expire_on_commit=False (committed objects are not
  reloaded on their next access).
- A: add() + commit() per object; B: add() each, one commit (SA 2's
  "insertmanyvalues" batches the INSERTs with RETURNING and sets the ids);
  C: session.execute(insert(Journal), [dicts of level, text]) - the 2.x ORM bulk
  INSERT (faster than the legacy bulk_save_objects() upstream used; applies Python
  defaults; there are no objects, so no ids).
- D/E: session.scalars(select(...)); F: session.get() - the returned objects are
  not kept, so the (weak) identity map cannot serve a repeated id without SQL
  (upstream kept them: its repeated gets ran no SQL).
- G: execute(select(columns)).mappings() (dict-like rows); H: .tuples().
- I/J: set attributes, one commit: the unit of work writes only changed columns
  (I: level and text; J: level - really partial). K: session.delete() each, one
  commit; Test 2: SA loads `children` and both M2M collections of each deleted
  object to null / delete them (the relation machinery's cost). As upstream, the
  self-referencing parent_id has no index.
"""

from bench.orm.backends import sa_models
from bench.orm.backends.base import SyncBackend, pkg_versions
from bench.orm.backends.sa_common import SyncSA


class Backend(SyncSA, SyncBackend):
    models = sa_models
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (unit of work writes changed columns only)"
    NOTES = SyncSA.NOTES_SA

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self._init_sa()

    def versions(self):
        return pkg_versions("SQLAlchemy")
