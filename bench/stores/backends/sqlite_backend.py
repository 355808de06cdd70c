"""SQLite through Python's standard library (sqlite3), with its defaults: rollback journal (DELETE),
synchronous=FULL; autocommit mode with an explicit BEGIN/COMMIT around the writes."""

import sqlite3

from .sql_common import SqlBackend


def availability():
    return None


class SQLite(SqlBackend):
    label = "SQLite"

    def __init__(self, work_dir):
        self.work_dir = work_dir

    def connect(self, path):
        return sqlite3.connect(path, isolation_level=None)

    def driver_info(self):
        return {"sqlite_version": sqlite3.sqlite_version, "driver": "sqlite3 (standard library)"}


def create_backend(workload, work_dir, **options):
    return SQLite(work_dir)
