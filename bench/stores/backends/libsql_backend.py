"""libSQL (PyPI libsql, the libSQL fork of SQLite embedded, local files only): its DB-API driver in autocommit mode
(isolation_level=None) with an explicit BEGIN/COMMIT around the writes; its defaults otherwise (rollback journal,
synchronous=FULL)."""

from .sql_common import SqlBackend


def availability():
    try:
        import libsql  # noqa: F401
    except Exception as e:
        return f"libsql does not import: {type(e).__name__}: {e}"
    return None


class LibSQL(SqlBackend):
    label = "libSQL"

    def __init__(self, work_dir):
        import libsql
        self.libsql = libsql
        self.work_dir = work_dir

    def connect(self, path):
        return self.libsql.connect(path, isolation_level=None)

    def driver_info(self):
        from importlib import metadata
        return {"libsql": metadata.version("libsql"),
                "sqlite_version (reported)": ".".join(map(str, self.libsql.sqlite_version_info))}


def create_backend(workload, work_dir, **options):
    return LibSQL(work_dir)
