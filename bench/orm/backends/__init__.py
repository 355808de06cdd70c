"""The backends of bench.orm: id, label (as in the seed), module, virtual-environment group; the profiles.

Pure data, importable by the orchestrator without any ORM installed (the workers import
the modules, each in its group's environment). Adding a backend is adding its module here,
<id>_backend.py (see base.py for the interface), plus its line in BACKENDS (and its
requirements in a group's ../requirements-<group>.txt).
"""

import os
from dataclasses import dataclass
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class BackendInfo:
    id: str
    label: str
    module: str          # bench.orm.backends.<module>
    group: str           # virtual environment: .bench-venvs/<group>, requirements-<group>.txt
    kind: str            # "sync" or "async"
    family: str          # backends of one family share most code paths (smoke runs one per family)
    sql: bool            # an ORM/driver on SQLite (counts for "best SQL ORM")
    unavailable_reason: str = ""  # shown when the module is missing

    @property
    def module_path(self):
        return os.path.join(HERE, self.module + ".py")

    def availability(self) -> Optional[str]:
        """None, or why the backend cannot run: a backend whose module is not there is reported, not run.
        (Whether its packages import is found out in its environment, by the worker.)"""
        if not os.path.exists(self.module_path):
            return self.unavailable_reason or f"module backends/{self.module}.py missing"
        return None


BACKENDS = [
    BackendInfo("motedb", "MoteDB", "motedb_backend", "motedb", "sync", "motedb", False),
    BackendInfo("objectbox", "ObjectBox", "objectbox_backend", "core", "sync", "objectbox", False),
    BackendInfo("sqlite3", "sqlite3", "sqlite3_backend", "core", "sync", "sqlite3", True),
    BackendInfo("django", "Django", "django_backend", "core", "sync", "django", True),
    BackendInfo("peewee", "peewee", "peewee_backend", "core", "sync", "peewee", True),
    BackendInfo("sa", "SA ORM", "sa_backend", "core", "sync", "sa", True),
    BackendInfo("sa-async", "SA ORM async", "sa_async_backend", "core", "async", "sa-async", True),
    BackendInfo("sqlmodel", "SQLModel", "sqlmodel_backend", "sqlmodel", "sync", "sa", True),
    BackendInfo("sqlmodel-async", "SQLModel async", "sqlmodel_async_backend", "sqlmodel", "async",
                "sa-async", True),
    BackendInfo("tortoise", "Tortoise ORM", "tortoise_backend", "misc", "async", "tortoise", True),
    BackendInfo("piccolo", "Piccolo", "piccolo_backend", "misc", "async", "piccolo", True),
    BackendInfo("ormar", "ormar", "ormar_backend", "ormar", "async", "ormar", True),
    BackendInfo("sqlobject", "SQLObject", "sqlobject_backend", "misc", "sync", "sqlobject", True),
    BackendInfo("pony", "Pony ORM", "pony_backend", "misc", "sync", "pony", True),
]
BY_ID = {b.id: b for b in BACKENDS}
BY_LABEL = {b.label: b for b in BACKENDS}
BASELINE_ID = "motedb-base"


def add_baseline(commit):
    """Register MoteDB built from another commit (`--baseline REF`): the same backend module, run in its own
    environment (.bench-venvs/motedb-base) whose motedb package is built from that commit's sources; it
    reports as "MoteDB <commit>", after MoteDB. Returns its BackendInfo."""
    b = BackendInfo(BASELINE_ID, f"MoteDB {commit[:9]}", "motedb_backend", BASELINE_ID, "sync", "motedb", False)
    old = BY_ID.pop(BASELINE_ID, None)
    if old:
        BACKENDS.remove(old)
        BY_LABEL.pop(old.label, None)
    BACKENDS.insert(1, b)
    BY_ID[b.id] = b
    BY_LABEL[b.label] = b
    return b

PROFILES = {
    "quick": dict(tests=[1, 2, 3], modes=["cold"], runs=1,
                  backends=["motedb", "objectbox", "sqlite3", "peewee", "sa", "django"]),
    "full": dict(tests=[1, 2, 3], modes=["cold", "warm", "large"], runs=5,
                 backends=[b.id for b in BACKENDS]),
}
# --smoke: one backend per family that the quick profile and the async SA path cover;
# `--smoke --backends all` smokes every backend.
SMOKE_BACKENDS = ["motedb", "sqlite3", "objectbox", "peewee", "sa", "sa-async", "django"]
