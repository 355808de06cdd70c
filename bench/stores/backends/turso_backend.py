"""Turso Database (PyPI pyturso, module turso): SQLite-compatible engine in Rust, WAL only. Its DB-API driver in
autocommit mode (isolation_level=None) with an explicit BEGIN/COMMIT around the writes; its defaults otherwise."""

from .sql_common import SqlBackend


def availability():
    try:
        import turso  # noqa: F401
    except Exception as e:
        return f"pyturso does not import: {type(e).__name__}: {e}"
    return None


class Turso(SqlBackend):
    label = "Turso Database"

    def __init__(self, work_dir):
        import turso
        self.turso = turso
        self.work_dir = work_dir

    def connect(self, path):
        return self.turso.connect(path, isolation_level=None)

    def driver_info(self):
        from importlib import metadata
        return {"pyturso": metadata.version("pyturso"), "sqlite_version (reported)": self.turso.sqlite_version}


def create_backend(workload, work_dir, **options):
    return Turso(work_dir)
