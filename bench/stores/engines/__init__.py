"""The engines of bench.stores: which labels each --engines key runs, and in which module.

Adding an engine is adding its module (see base.py for the interface); the registry below already names
bench.stores.engines.motedb for MoteDB. While that module does not exist, MoteDB is reported as not yet available.
"""

import importlib
import importlib.util
from typing import Dict, List, Optional, Tuple

# --engines key -> [(label, module, options for create_engine)]
REGISTRY: Dict[str, List[Tuple[str, str, dict]]] = {
    "motedb": [("MoteDB", "bench.stores.engines.motedb", {})],
    "objectbox": [
        ("ObjectBox (sync every open)", "bench.stores.engines.objectbox_engine", {"variant": "sync"}),
        ("ObjectBox (cached model)", "bench.stores.engines.objectbox_engine", {"variant": "cached"}),
        ("ObjectBox (skip model sync)", "bench.stores.engines.objectbox_engine", {"variant": "skip"}),
    ],
    "sqlite": [("SQLite", "bench.stores.engines.sqlite_engine", {})],
    "turso": [("Turso Database", "bench.stores.engines.turso_engine", {})],
    "libsql": [("libSQL", "bench.stores.engines.libsql_engine", {})],
}

# Why an engine is missing when its module does not exist at all
MISSING_MODULE_REASONS = {
    "bench.stores.engines.motedb": "not yet available: motedb package not built",
}


def by_label(label: str) -> Tuple[str, str, dict]:
    for key, entries in REGISTRY.items():
        for entry in entries:
            if entry[0] == label:
                return key, entry[1], entry[2]
    raise KeyError(label)


def availability(module_name: str) -> Optional[str]:
    """None if the engine module exists and says it can run here; else the reason."""
    if importlib.util.find_spec(module_name) is None:
        return MISSING_MODULE_REASONS.get(module_name, f"engine module {module_name} missing")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # an engine whose package does not import is unavailable, not a crash
        return f"{type(e).__name__}: {e}"
    check = getattr(module, "availability", None)
    return check() if check else None


def load(label: str, workload, work_dir: str, extra_options: Optional[dict] = None):
    _key, module_name, options = by_label(label)
    module = importlib.import_module(module_name)
    engine = module.create_engine(workload, work_dir, **dict(options, **(extra_options or {})))
    if engine.label != label:
        raise RuntimeError(f"{module_name} made an engine labelled {engine.label!r}, expected {label!r}")
    return engine
