"""What the three SQL engines share: one table, hand-written SQL through a DB-API 2 driver."""

import os

from .base import Backend

SCHEMA = ("CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL, "
          "value INTEGER NOT NULL, created INTEGER NOT NULL)")
INSERT = "INSERT INTO note (text, value, created) VALUES (?, ?, ?)"
SELECT_ALL = "SELECT id, text, value, created FROM note"
COUNT = "SELECT count(*) FROM note"


class SqlBackend(Backend):
    """connect(path) must return a DB-API connection in autocommit mode (isolation_level=None), so the
    transaction is exactly the explicit BEGIN ... COMMIT below."""

    def connect(self, path):
        raise NotImplementedError

    def driver_info(self) -> dict:
        return {}

    def describe(self) -> dict:
        # The settings a new database gets by default (the benchmark keeps them): read from a scratch database
        probe = os.path.join(self.work_dir, "settings-probe.db")
        con = self.connect(probe)
        try:
            info = {
                "journal_mode": con.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": con.execute("PRAGMA synchronous").fetchone()[0],
                "page_size": con.execute("PRAGMA page_size").fetchone()[0],
            }
        finally:
            con.close()
            for suffix in ("", "-wal", "-shm", "-journal"):
                if os.path.exists(probe + suffix):
                    os.unlink(probe + suffix)
        info.update(self.driver_info())
        info["schema"] = SCHEMA
        info["write"] = "BEGIN; CREATE TABLE; executemany(INSERT); COMMIT (one transaction, driver in autocommit mode)"
        return info

    def create(self, path, prepared):
        con = self.connect(path)
        con.execute("BEGIN")
        con.execute(SCHEMA)
        con.executemany(INSERT, prepared)
        con.execute("COMMIT")
        con.close()

    def open(self, path):
        return self.connect(path)

    def read_all(self, con):
        return con.execute(SELECT_ALL).fetchall()

    def count(self, con):
        return con.execute(COUNT).fetchone()[0]

    def close(self, con):
        con.close()

    def as_row(self, obj):
        row = tuple(obj)
        return row[1], row[2], row[3]
