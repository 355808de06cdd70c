"""The interface every backend of bench.stores implements (a backend is called an engine in the suite's
options and results: --engines, "engine").

A backend module (bench/stores/backends/<name>_backend.py, listed in __init__.py) defines

    def availability() -> Optional[str]
        None if the backend can run in this interpreter, else why not (e.g. "motedb does not import: ...").
    def create_backend(workload: Workload, work_dir: str, **options) -> Backend
        One instance per worker process; work_dir is a directory it may use for its own files
        (e.g. ObjectBox's model JSON); options come from the registry (e.g. the ObjectBox variant).

and a Backend subclass. The worker times these calls (marked "timed"); everything else is untimed.
"""

import glob
import os
from typing import Any, List, Sequence, Tuple

Row = Tuple[str, int, int]  # (text, value, created_ms); ids are assigned by the engine, 1..n in insert order


class Backend:
    label = "?"          # exactly the label its entry in __init__.py's BACKENDS gives
    store_is_directory = False  # True: a store is a directory (all files in it belong to it)

    def describe(self) -> dict:
        """Versions and settings to record (journal mode, synchronous, sync on commit, ...)."""
        return {}

    def store_path(self, root: str, index: int) -> str:
        """Where store number index lives (a file path, or a directory if store_is_directory)."""
        return os.path.join(root, f"store-{index:06d}.db")

    def store_files(self, path: str) -> List[str]:
        """All files of one store (for the space row). Default: the file and its siblings path-* (journal, WAL,
        shared memory) for file stores, every file below the directory for directory stores."""
        if self.store_is_directory:
            out = []
            for dirpath, _dirs, files in os.walk(path):
                out.extend(os.path.join(dirpath, f) for f in files)
            return out
        return [p for p in [path] + glob.glob(glob.escape(path) + "-*") if os.path.isfile(p)]

    def prepare(self, rows: Sequence[Row]) -> Any:
        """Untimed: turns the rows into what create() writes (e.g. entity objects)."""
        return rows

    def create(self, path: str, prepared: Any) -> None:
        """Timed: create a new store at path, write all objects in one durable transaction, close it."""
        raise NotImplementedError

    def open(self, path: str) -> Any:
        """Timed: open an existing store; returns a handle."""
        raise NotImplementedError

    def read_all(self, handle: Any) -> list:
        """Timed: read all objects of the store as the engine's natural objects/rows (small workload's query)."""
        raise NotImplementedError

    def count(self, handle: Any) -> int:
        """Timed: the number of objects (large workload's query)."""
        raise NotImplementedError

    def close(self, handle: Any) -> None:
        """Timed: close the store (release everything open() took)."""
        raise NotImplementedError

    def as_row(self, obj: Any) -> Row:
        """Untimed: one object returned by read_all() as (text, value, created_ms), to verify what was read back."""
        return tuple(obj[-3:])
