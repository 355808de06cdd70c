"""sqlite3: the standard library driver with hand-written SQL (the floor of SQL overhead).

Fastest idiomatic path:
- One connection (Python 3.11 legacy transaction control: an INSERT/UPDATE/DELETE
  opens a transaction, commit() ends it); statements are cached by the driver, so
  repeated execute() of one SQL string reuses its prepared statement.
- A/B: execute() per object, lastrowid sets the id; C: executemany() (prepared
  once; does not set ids). I/J/K: executemany() of UPDATE/DELETE by id.
- Objects are instances of a small __slots__ class built from each row, with the
  types converted (timestamp -> datetime; Test 3: decimal -> Decimal, json -> dict),
  as an ORM returns them. G returns dicts, H the driver's tuples, values unconverted.
- Rollback journal (SQLite's default), synchronous=FULL.
- Test 2: parent_id REFERENCES journal ON DELETE SET NULL (indexed) and the link
  table journal_related with ON DELETE CASCADE, with PRAGMA foreign_keys=ON, so
  SQLite does the relation work on delete.
- Test 3: inserts write timestamp, level and text; the DDL's DEFAULTs fill groups
  1 and 3 (the objects get the same defaults in Python). Decimals are DECIMAL(12,8)
  (NUMERIC affinity, as the ORMs' DDL), JSON is TEXT.
"""

import datetime
import json
import os
import sqlite3
from decimal import Decimal

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))

SQL_TYPES = {"float": "REAL", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT",
             "char": "VARCHAR(255)", "text": "TEXT", "decimal": "DECIMAL(12, 8)", "json": "TEXT"}
WIDE = spec.wide_columns() if TEST == 3 else []
BASE_COLS = ["id", "timestamp", "level", "text"] + (["parent_id"] if TEST == 2 else [])
COLS = BASE_COLS + [c for c, _, _ in WIDE]
SELECT = f"SELECT {', '.join(COLS)} FROM journal"


def _sql_default(t):
    v = spec.WIDE_DEFAULTS[t]
    if t == "json":
        v = json.dumps(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def ddl():
    cols = ["id INTEGER PRIMARY KEY", "timestamp DATETIME NOT NULL", "level SMALLINT NOT NULL",
            "text VARCHAR(255) NOT NULL"]
    if TEST == 2:
        cols.append("parent_id INTEGER NULL REFERENCES journal (id) ON DELETE SET NULL")
    for name, t, nullable in WIDE:
        cols.append(f"{name} {SQL_TYPES[t]} NULL" if nullable
                    else f"{name} {SQL_TYPES[t]} NOT NULL DEFAULT {_sql_default(t)}")
    stmts = [f"CREATE TABLE journal ({', '.join(cols)})",
             "CREATE INDEX journal_level ON journal (level)",
             "CREATE INDEX journal_text ON journal (text)"]
    if TEST == 2:
        stmts += ["CREATE INDEX journal_parent ON journal (parent_id)",
                  "CREATE TABLE journal_related (id INTEGER PRIMARY KEY, "
                  "journal_id INTEGER NOT NULL REFERENCES journal (id) ON DELETE CASCADE, "
                  "related_id INTEGER NOT NULL REFERENCES journal (id) ON DELETE CASCADE, "
                  "UNIQUE (journal_id, related_id))",
                  "CREATE INDEX journal_related_related ON journal_related (related_id)"]
    return stmts


class Journal:
    __slots__ = tuple(COLS)

    def __init__(self, level, text):
        self.id = None
        self.timestamp = spec.now()
        self.level = level
        self.text = text
        if TEST == 2:
            self.parent_id = None
        for name, t, nullable in WIDE:
            setattr(self, name, None if nullable else spec.WIDE_DEFAULTS[t])


def _make_from_row():
    """A function row -> Journal, generated for the test's columns (no per-field loop)."""
    lines = ["def from_row(r):", "    o = new(Journal)"]
    for i, c in enumerate(COLS):
        t = None
        if c == "timestamp":
            lines.append(f"    o.timestamp = fromiso(r[{i}])")
            continue
        for name, tt, nullable in WIDE:
            if name == c:
                t = (tt, nullable)
        if t and t[0] == "decimal":
            lines.append(f"    v = r[{i}]; o.{c} = None if v is None else Decimal(str(v))")
        elif t and t[0] == "json":
            lines.append(f"    v = r[{i}]; o.{c} = None if v is None else loads(v)")
        else:
            lines.append(f"    o.{c} = r[{i}]")
    lines.append("    return o")
    ns = {"new": object.__new__, "Journal": Journal, "fromiso": datetime.datetime.fromisoformat,
          "Decimal": Decimal, "loads": json.loads}
    exec("\n".join(lines), ns)
    return ns["from_row"]


from_row = _make_from_row()
INSERT = "INSERT INTO journal (timestamp, level, text) VALUES (?, ?, ?)"
UPD_COLS = [c for c in COLS if c != "id"]
UPDATE_WHOLE = f"UPDATE journal SET {', '.join(c + ' = ?' for c in UPD_COLS)} WHERE id = ?"


def _db_value(name, v):
    if v is None:
        return None
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat(" ")
    return v


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial"
    NOTES = ["hand-written SQL; executemany() for C, I, J, K",
             "rows become __slots__ objects with converted types (D, E, F); G dicts and H tuples unconverted"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = os.path.join(directory, "db.sqlite3")
        self.conn = None

    def versions(self):
        return {"sqlite3 (module)": sqlite3.sqlite_version}

    def create(self):
        fresh_dir(self.directory)
        c = sqlite3.connect(self.db_file)
        for s in ddl():
            c.execute(s)
        c.commit()
        c.close()

    def open(self):
        if self.conn is None:
            self.conn = sqlite3.connect(self.db_file)
            self.conn.execute("PRAGMA synchronous = FULL")
            if TEST == 2:
                self.conn.execute("PRAGMA foreign_keys = ON")

    def info(self):
        c = sqlite3.connect(self.db_file)
        jm = c.execute("PRAGMA journal_mode").fetchone()[0]
        c.close()
        return {"journal_mode": jm, "synchronous": "FULL (set per connection)",
                "foreign_keys": "ON" if TEST == 2 else "default (OFF)"}

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # --- inserts ---
    def new_objects(self, values):
        return [Journal(lvl, txt) for lvl, txt in values]

    def insert_single(self, objs):
        c = self.conn
        for o in objs:
            o.id = c.execute(INSERT, (o.timestamp.isoformat(" "), o.level, o.text)).lastrowid
            c.commit()
        return len(objs)

    def insert_batch(self, objs):
        c = self.conn
        for o in objs:
            o.id = c.execute(INSERT, (o.timestamp.isoformat(" "), o.level, o.text)).lastrowid
        c.commit()
        return len(objs)

    def new_bulk(self, values):
        return self.new_objects(values)

    def insert_bulk(self, objs):
        c = self.conn
        c.executemany(INSERT, [(o.timestamp.isoformat(" "), o.level, o.text) for o in objs])
        c.commit()
        return len(objs)

    # --- reads ---
    def filter_large(self, levels):
        n = 0
        q = SELECT + " WHERE level = ?"
        for lvl in levels:
            n += len([from_row(r) for r in self.conn.execute(q, (lvl,))])
        return n

    def filter_small(self, queries):
        n = 0
        q = SELECT + " WHERE level = ? LIMIT 20 OFFSET ?"
        for lvl, off in queries:
            n += len([from_row(r) for r in self.conn.execute(q, (lvl, off))])
        return n

    def get(self, ids):
        q = SELECT + " WHERE id = ?"
        n = 0
        for i in ids:
            o = from_row(self.conn.execute(q, (i,)).fetchone())
            n += o.id == i
        return n

    def filter_dict(self, levels):
        n = 0
        q = SELECT + " WHERE level = ?"
        for lvl in levels:
            n += len([dict(zip(COLS, r)) for r in self.conn.execute(q, (lvl,))])
        return n

    def filter_tuple(self, levels):
        n = 0
        q = SELECT + " WHERE level = ?"
        for lvl in levels:
            n += len(self.conn.execute(q, (lvl,)).fetchall())
        return n

    # --- updates, delete ---
    def load_all(self):
        return [from_row(r) for r in self.conn.execute(SELECT)]

    def update_whole(self, objs, levels, texts):
        params = []
        for o, lvl, txt in zip(objs, levels, texts):
            o.level = lvl
            o.text = txt
            params.append([_db_value(c, getattr(o, c)) for c in UPD_COLS] + [o.id])
        self.conn.executemany(UPDATE_WHOLE, params)
        self.conn.commit()
        return len(objs)

    def update_partial(self, objs, levels):
        for o, lvl in zip(objs, levels):
            o.level = lvl
        self.conn.executemany("UPDATE journal SET level = ? WHERE id = ?", [(o.level, o.id) for o in objs])
        self.conn.commit()
        return len(objs)

    def delete(self, objs):
        self.conn.executemany("DELETE FROM journal WHERE id = ?", [(o.id,) for o in objs])
        self.conn.commit()
        return len(objs)


