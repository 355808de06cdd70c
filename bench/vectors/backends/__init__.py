"""The backends of bench.vectors (the suite's options and results call them engines: --engines, "engine"):
which --engines key selects which, their labels, their modules.

Adding a backend is adding its module here (see base.py for the interface) and its line in BACKENDS (and its
package, pinned, in ../requirements.txt). One module may make two engines (MoteDB with its HNSW index and the
exact reference without one): the second line names its factory function. Pure data plus loading: the
orchestrator and the workers import it.
"""

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class BackendInfo:
    key: str     # the --engines key that selects it
    label: str   # its name in results.json ("engine"), the tables and the charts
    module: str  # bench.vectors.backends.<module>
    factory: str = "create_backend"  # the module's function that makes the instance (one module may make two)

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

    def load(self, dim: int, metric: str, work_dir: str, params: dict):
        """The backend instance of this worker process (create_backend(), or the factory named, of its module)."""
        module = importlib.import_module(self.module_name)
        backend = getattr(module, self.factory)(dim, metric, work_dir, params)
        if backend.label != self.label:
            raise RuntimeError(f"{self.module_name} made a backend labelled {backend.label!r}, "
                               f"expected {self.label!r}")
        return backend


# In the order the tables and charts show them.
BACKENDS = [
    BackendInfo("motedb", "MoteDB", "motedb_backend"),
    BackendInfo("motedb-exact", "MoteDB exact", "motedb_backend", "create_exact_backend"),
    BackendInfo("hnswlib", "hnswlib", "hnswlib_backend"),
    BackendInfo("usearch", "USearch", "usearch_backend"),
    BackendInfo("faiss", "FAISS", "faiss_backend"),
    BackendInfo("sqlite-vec", "sqlite-vec", "sqlitevec_backend"),
    BackendInfo("objectbox", "ObjectBox", "objectbox_backend"),
    BackendInfo("lancedb", "LanceDB", "lancedb_backend"),
]
BY_KEY = {b.key: b for b in BACKENDS}
BY_LABEL = {b.label: b for b in BACKENDS}
LABELS = [b.label for b in BACKENDS]
KEYS = [b.key for b in BACKENDS]
