"""peewee: sync ORM.

Fastest idiomatic path:
- SqliteDatabase with journal_mode=WAL (as upstream's peewee models set it) and
  synchronous=FULL; autocommit outside db.atomic().
- A: obj.save() (its own transaction); B: obj.save() each inside db.atomic();
  C: Model.insert_many() of row tuples (timestamp, level, text) inside db.atomic():
  peewee adds the other fields' defaults while inserting, and does not set ids on
  anything (there are no objects). Test 3 rows have 35 columns: the insert is
  split into chunks (SQLite allows at most 32,766 variables per statement).
- D/E: select().where(level == L) [limit 20 offset X], as objects; F: get_by_id();
  G: .dicts(); H: .tuples().
- I: save() each (writes every field) in db.atomic(); J: save(only=[level]) (really
  partial); K: delete_instance() each in db.atomic().
- Test 2: parent = ForeignKeyField('self', null=True, backref='children'), the M2M
  through an explicit link model (JournalRelated); peewee does not enable SQLite's
  foreign keys, and delete_instance() (recursive=False) issues no related queries.
"""

import json
import os
from datetime import datetime


from peewee import (BigIntegerField, CharField, DateTimeField, DecimalField, FloatField, ForeignKeyField,
                    IntegerField, Model, SmallIntegerField, SqliteDatabase, TextField, chunked)

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

db = SqliteDatabase(DB_FILE, pragmas=[("journal_mode", "wal"), ("synchronous", "full")])


class JSONField(TextField):
    def db_value(self, value):
        return None if value is None else json.dumps(value)

    def python_value(self, value):
        return None if value is None else json.loads(value)


FIELD_TYPES = {
    "float": lambda **kw: FloatField(**kw),
    "smallint": lambda **kw: SmallIntegerField(**kw),
    "int": lambda **kw: IntegerField(**kw),
    "bigint": lambda **kw: BigIntegerField(**kw),
    "char": lambda **kw: CharField(max_length=255, **kw),
    "text": lambda **kw: TextField(**kw),
    "decimal": lambda **kw: DecimalField(12, 8, **kw),
    "json": lambda **kw: JSONField(**kw),
}


def _journal_class():
    ns = {"timestamp": DateTimeField(default=datetime.now),
          "level": SmallIntegerField(index=True),
          "text": CharField(max_length=255, index=True)}
    if TEST == 2:
        ns["parent"] = ForeignKeyField("self", null=True, backref="children")
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = FIELD_TYPES[t](null=True)
            else:
                d = spec.WIDE_DEFAULTS[t]
                ns[name] = FIELD_TYPES[t](default=(lambda d=d: dict(d)) if isinstance(d, dict) else d)
    ns["Meta"] = type("Meta", (), {"database": db, "table_name": "journal"})
    return type("Journal", (Model,), ns)


Journal = _journal_class()
MODELS = [Journal]
if TEST == 2:
    class JournalRelated(Model):
        journal = ForeignKeyField(Journal, backref="related")
        related = ForeignKeyField(Journal, backref="related_from")

        class Meta:
            database = db
            table_name = "journal_related"
    MODELS.append(JournalRelated)

N_COLS = len(Journal._meta.sorted_fields)
CHUNK = max(1, 32000 // N_COLS)


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (save(only=[level]))"
    NOTES = ["WAL journal (as upstream), synchronous=FULL",
             "C: insert_many() of row tuples, defaults added by peewee, no ids set"
             + (f"; chunks of {CHUNK} rows (35 columns x rows <= 32,766 variables)" if TEST == 3 else ""),
             "J: save(only=[level]) writes only level"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE

    def versions(self):
        return pkg_versions("peewee")

    def info(self):
        jm = db.execute_sql("PRAGMA journal_mode").fetchone()[0]
        sy = db.execute_sql("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": jm, "synchronous": {2: "FULL", 1: "NORMAL", 0: "OFF", 3: "EXTRA"}.get(sy, sy)}

    def create(self):
        fresh_dir(self.directory)
        db.connect(reuse_if_open=True)
        db.create_tables(MODELS)

    def open(self):
        db.connect(reuse_if_open=True)

    def close(self):
        if not db.is_closed():
            db.close()

    def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, objs):
        for o in objs:
            o.save()
        return len(objs)

    def insert_batch(self, objs):
        with db.atomic():
            for o in objs:
                o.save()
        return len(objs)

    def new_bulk(self, values):
        now = datetime.now
        return [(now(), lvl, txt) for lvl, txt in values]

    def insert_bulk(self, rows):
        fields = [Journal.timestamp, Journal.level, Journal.text]
        with db.atomic():
            if len(rows) * N_COLS <= 32000:
                Journal.insert_many(rows, fields=fields).execute()
            else:
                for chunk in chunked(rows, CHUNK):
                    Journal.insert_many(chunk, fields=fields).execute()
        return len(rows)

    def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.select().where(Journal.level == lvl)))
        return n

    def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(list(Journal.select().where(Journal.level == lvl).limit(20).offset(off)))
        return n

    def get(self, ids):
        n = 0
        for i in ids:
            n += Journal.get_by_id(i).id == i
        return n

    def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.select().where(Journal.level == lvl).dicts()))
        return n

    def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.select().where(Journal.level == lvl).tuples()))
        return n

    def load_all(self):
        return list(Journal.select())

    def update_whole(self, objs, levels, texts):
        with db.atomic():
            for o, lvl, txt in zip(objs, levels, texts):
                o.level = lvl
                o.text = txt
                o.save()
        return len(objs)

    def update_partial(self, objs, levels):
        only = [Journal.level]
        with db.atomic():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                o.save(only=only)
        return len(objs)

    def delete(self, objs):
        with db.atomic():
            for o in objs:
                o.delete_instance()
        return len(objs)


