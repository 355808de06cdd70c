"""The interface every backend implements, and helpers for the SQLite-based ones.

A backend module (bench/orm/backends/<id>_backend.py) defines `Backend`, a subclass
of SyncBackend or AsyncBackend. The worker imports it inside the backend group's
virtual environment after setting BENCH_ORM_TEST (1, 2 or 3) and BENCH_ORM_DIR (a
directory for the database files), so modules can define their models at import
time as upstream does (imports are never timed). Then, per process:

    b = Backend(test, directory)
    b.create()            # untimed; only in the first process of a sequence: fresh, empty database
    ...
    b.open()              # connection / store open: inside the timer in cold mode
    n = b.<operation>(...)  # timed; returns the number of rows processed

For an AsyncBackend every method below is a coroutine (run in one event loop).

Objects: the backend's own objects (ORM instances). The harness only reads
`obj.id`, `obj.level` and `obj.text` from them (untimed) and passes them back.

Operations (see spec.OPS and ../README.md, "Models and operations"):
  new_objects(values) -> objs     untimed: unsaved objects from [(level, text)]
  insert_single(objs) -> int      A: one durable transaction per object
  insert_batch(objs) -> int       B: added one by one in one transaction
  new_bulk(values) -> payload     untimed: what insert_bulk takes (objects or rows)
  insert_bulk(payload) -> int     C: fastest bulk path, one transaction
  filter_large(levels) -> int     D: for each level, all rows with level == L as objects; rows returned
  filter_small(queries) -> int    E: [(level, offset)]: LIMIT 20 OFFSET offset; rows returned
  get(ids) -> int                 F: one get per id; objects returned (must all exist)
  filter_dict(levels) -> int      G: as D, rows as dicts
  filter_tuple(levels) -> int     H: as D, rows as tuples
  load_all() -> objs              untimed: every row as an object, for I, J, K
  update_whole(objs, levels, texts) -> int   I: one transaction, each object saved
  update_partial(objs, levels) -> int        J: one transaction, only level written
  delete(objs) -> int             K: one transaction, each object deleted
Untimed helpers:
  delete_newest(count)            after B and C unless large table: delete the newest rows
  all_ids() -> list[int]          existing ids (may use a side connection)
  level_counts() -> {level: n}    for the smoke checks
  check_rows() -> [(id, level, text)]  as stored, for the smoke checks
  snapshot() / restore(snap)      warm mode: restore rows and id sequences after the warm-up
  info() -> dict                  journal mode, synchronous, what the backend does (recorded)
  close()

Class attributes (recorded in results.json and README):
  BULK_SETS_IDS (bool), PARTIAL_UPDATE ("partial" or "whole object"),
  NOTES (list of deviations / the fastest idiomatic path used).
"""

import os
import shutil
import sqlite3


class SyncBackend:
    KIND = "sync"
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial"
    NOTES = []
    # Rows of the database the backend writes to, for snapshot/restore; SQL backends set a path.
    db_file = None

    def __init__(self, test, directory):
        self.test = test
        self.directory = directory

    def versions(self):
        return {}

    def info(self):
        return {}

    # --- warm mode: restore via SQLite's backup API (SQL backends) -------------------
    def snapshot(self):
        return sqlite_snapshot(self.db_file)

    def restore(self, snap):
        sqlite_restore(snap, self.db_file)
        self.after_restore()

    def after_restore(self):
        """Drop caches that could be stale after the database was restored."""

    def all_ids(self):
        return sqlite_all_ids(self.db_file)

    def level_counts(self):
        return sqlite_level_counts(self.db_file)

    def delete_newest(self, count):
        sqlite_delete_newest(self.db_file, count)
        self.after_restore()

    def check_rows(self):
        """[(id, level, text)] as stored (smoke checks; a side connection, so no ORM cache answers)."""
        return sqlite_check_rows(self.db_file)

    def close(self):
        pass


class AsyncBackend(SyncBackend):
    KIND = "async"

    async def versions(self):
        return {}

    async def info(self):
        return {}

    async def snapshot(self):
        return sqlite_snapshot(self.db_file)

    async def restore(self, snap):
        sqlite_restore(snap, self.db_file)
        await self.after_restore()

    async def after_restore(self):
        pass

    async def all_ids(self):
        return sqlite_all_ids(self.db_file)

    async def level_counts(self):
        return sqlite_level_counts(self.db_file)

    async def check_rows(self):
        return sqlite_check_rows(self.db_file)

    async def delete_newest(self, count):
        sqlite_delete_newest(self.db_file, count)
        await self.after_restore()

    async def close(self):
        pass


# --- helpers for SQLite files -------------------------------------------------------

def fresh_dir(directory):
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)


def _side(db_file):
    return sqlite3.connect(db_file, timeout=30)


def sqlite_snapshot(db_file):
    """A copy of the whole database (rows, sqlite_sequence) in memory."""
    src = _side(db_file)
    mem = sqlite3.connect(":memory:")
    src.backup(mem)
    src.close()
    return mem


def sqlite_restore(mem, db_file):
    """Writes the snapshot back into the live file through SQLite (safe while the
    ORM keeps its connection open, as long as it holds no transaction)."""
    dst = _side(db_file)
    mem.backup(dst)
    dst.close()


def sqlite_max_variables():
    """SQLite's default limit on variables per statement (SQLITE_MAX_VARIABLE_NUMBER:
    32,766 since 3.32, so also in the seed's 3.53.1), or this build's if lower. Debian's
    SQLite allows 250,000, but the statements stay those of the seed's build, and bigger
    ones gained nothing here (peewee, 10,000 rows: 100 to 5,000 rows a statement within
    noise). Bulk inserts that split by it: peewee, Piccolo, ormar."""
    c = sqlite3.connect(":memory:")
    try:
        return min(32766, c.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    finally:
        c.close()


def sqlite_all_ids(db_file, table="journal"):
    c = _side(db_file)
    ids = [r[0] for r in c.execute(f"SELECT id FROM {table}")]
    c.close()
    return ids


def sqlite_check_rows(db_file, table="journal"):
    c = _side(db_file)
    rows = list(c.execute(f"SELECT id, level, text FROM {table}"))
    c.close()
    return rows


def sqlite_level_counts(db_file, table="journal"):
    c = _side(db_file)
    res = dict(c.execute(f"SELECT level, COUNT(*) FROM {table} GROUP BY level"))
    c.close()
    return res


def sqlite_newest_ids(db_file, count, table="journal"):
    c = _side(db_file)
    ids = [r[0] for r in c.execute(f"SELECT id FROM {table} ORDER BY id DESC LIMIT ?", (count,))]
    c.close()
    return ids


def sqlite_delete_newest(db_file, count, table="journal"):
    """Untimed step after B and C: delete the newest `count` rows (Test 2: the
    operations never set relations, so there is nothing to cascade)."""
    c = _side(db_file)
    with c:
        c.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} ORDER BY id DESC LIMIT ?)",
                  (count,))
    c.close()


def pkg_versions(*names):
    import importlib.metadata as md
    out = {}
    for n in names:
        try:
            out[n] = md.version(n)
        except md.PackageNotFoundError:
            pass
    return out
