"""The backends of bench.stores (the suite's options and results call them engines: --engines, "engine"):
which --engines key selects which, their labels, their modules.

Adding a backend is adding its module here (see base.py for the interface) and its line in BACKENDS (and its
package, pinned, in ../requirements.txt). Pure data plus loading: the orchestrator and the workers import it.
"""

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class BackendInfo:
    key: str      # the --engines key that selects it (the three ObjectBox variants share one)
    label: str    # its name in results.json ("engine"), the tables and the charts
    module: str   # bench.stores.backends.<module>
    options: dict = field(default_factory=dict)  # passed to the module's create_backend()

    @property
    def module_name(self):
        return f"{__name__}.{self.module}"

    def availability(self) -> Optional[str]:
        """None if the backend's module imports and says it can run in this interpreter; else why not."""
        if importlib.util.find_spec(self.module_name) is None:
            return f"module backends/{self.module}.py missing"
        try:
            module = importlib.import_module(self.module_name)
        except Exception as e:  # a backend whose package does not import is unavailable, not a crash
            return f"{type(e).__name__}: {e}"
        check = getattr(module, "availability", None)
        return check() if check else None

    def load(self, workload, work_dir: str, extra_options: Optional[dict] = None):
        """The backend instance of this worker process (create_backend() of its module)."""
        module = importlib.import_module(self.module_name)
        backend = module.create_backend(workload, work_dir, **dict(self.options, **(extra_options or {})))
        if backend.label != self.label:
            raise RuntimeError(f"{self.module_name} made a backend labelled {backend.label!r}, "
                               f"expected {self.label!r}")
        return backend


# In the order the tables and charts show them.
BACKENDS = [
    BackendInfo("motedb", "MoteDB", "motedb_backend"),
    BackendInfo("objectbox", "ObjectBox (sync every open)", "objectbox_backend", {"variant": "sync"}),
    BackendInfo("objectbox", "ObjectBox (cached model)", "objectbox_backend", {"variant": "cached"}),
    BackendInfo("objectbox", "ObjectBox (skip model sync)", "objectbox_backend", {"variant": "skip"}),
    BackendInfo("sqlite", "SQLite", "sqlite_backend"),
    BackendInfo("turso", "Turso Database", "turso_backend"),
    BackendInfo("libsql", "libSQL", "libsql_backend"),
]
BY_LABEL = {b.label: b for b in BACKENDS}
LABELS = [b.label for b in BACKENDS]
KEYS = list(dict.fromkeys(b.key for b in BACKENDS))  # the --engines keys
