"""peewee: sync ORM, upstream's code paths (tortoise/orm-benchmarks, benchmarks/peewee).

- SqliteDatabase with journal_mode=WAL (upstream's pragma) and synchronous=FULL (the
  seed's setting, SQLite's compiled-in default anyway); rank_functions=True: upstream
  used playhouse's SqliteExtDatabase, which peewee 4 no longer has (its rank functions,
  registered on connect by default, are now an option of SqliteDatabase). Autocommit
  outside db.atomic().
- A: obj.save() (its own transaction); B: obj.save() each inside db.atomic().
- C: Model.insert_many() of (level, text) row tuples with fields=[level, text], as
  upstream: peewee adds the other fields' defaults (timestamp, Test 3's defaults) while
  inserting and sets no ids (there are no objects). Unlike upstream (100-row statements,
  50 on Test 3, each in autocommit), all 10,000 rows go in one db.atomic() (the seed's
  batch of 10,000 in one transaction) and each statement takes as many rows as SQLite's
  variable limit allows (the seed's "fastest bulk path"; see MAX_VARIABLES): 10,000 rows
  in one statement on Tests 1 and 2 (3 parameters a row), 1,724 on Test 3 (19).
- D/E: list(select().where(level == L)) [.limit(20).offset(X)]; F: get(id == X);
  G: .dicts(); H: .tuples().
- I: save() each (writes every field) in db.atomic(); J: save(only=["level"]) (really
  partial); K: delete_instance() each in db.atomic().
- Models as upstream's models.py (its JSONField: json.dumps() even of None, so save()
  writes 'null' into a nullable JSON column; insert_many() leaves it NULL; the JSON
  default is one shared dict). Test 2: parent = ForeignKeyField('self', null=True,
  backref='children'); the M2M through JournalRelated(journal_id, journal_from_id) as
  upstream, but bound to the database and created (upstream's link model has no
  database and its table is never created); peewee does not enable SQLite's foreign
  keys and delete_instance() (recursive=False) issues no related queries, so no timed
  operation touches it either way.
"""

import json
import os
from datetime import datetime

from peewee import (BigIntegerField, CharField, DateTimeField, DecimalField, FloatField, ForeignKeyField,
                    IntegerField, Model, SmallIntegerField, SqliteDatabase, TextField, chunked)

from bench.orm import spec
from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions, sqlite_max_variables

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

db = SqliteDatabase(DB_FILE, pragmas=[("journal_mode", "wal"), ("synchronous", "full")],
                    rank_functions=True)


class JSONField(TextField):
    def db_value(self, value):
        return json.dumps(value)

    def python_value(self, value):
        if value is not None:
            return json.loads(value)


FIELD_TYPES = {
    "float": FloatField,
    "smallint": SmallIntegerField,
    "int": IntegerField,
    "bigint": BigIntegerField,
    "char": lambda **kw: CharField(max_length=255, **kw),
    "text": TextField,
    "decimal": lambda **kw: DecimalField(12, 8, **kw),
    "json": JSONField,
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
                # upstream's literal defaults: one shared dict for the JSON columns
                ns[name] = FIELD_TYPES[t](default=spec.WIDE_DEFAULTS[t])
    ns["Meta"] = type("Meta", (), {"database": db, "table_name": "journal"})
    return type("Journal", (Model,), ns)


Journal = _journal_class()
MODELS = [Journal]
if TEST == 2:
    class JournalRelated(Model):
        journal_id = ForeignKeyField(Journal, backref="related")
        journal_from_id = ForeignKeyField(Journal, backref="related_from")

        class Meta:
            database = db
            table_name = "journal_related"
    MODELS.append(JournalRelated)

BULK_FIELDS = [Journal.level, Journal.text]


MAX_VARIABLES = sqlite_max_variables()
PARAMS_PER_ROW = len(Journal.insert_many([(10, "")], fields=BULK_FIELDS).sql()[1])
ROWS_PER_STATEMENT = MAX_VARIABLES // PARAMS_PER_ROW


class Backend(SyncBackend):
    BULK_SETS_IDS = False
    PARTIAL_UPDATE = "partial (save(only=['level']))"
    NOTES = ["WAL journal (as upstream), synchronous=FULL",
             "C: insert_many() of (level, text) tuples, defaults added by peewee, no ids set; "
             f"one transaction, {ROWS_PER_STATEMENT} rows a statement ({PARAMS_PER_ROW} parameters a row, "
             f"at most {MAX_VARIABLES} a statement); upstream: 100-row statements (Test 3: 50) in autocommit",
             "J: save(only=['level']) writes only level"]

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
        return [(lvl, txt) for lvl, txt in values]

    def insert_bulk(self, rows):
        with db.atomic():
            for chunk in chunked(rows, ROWS_PER_STATEMENT):
                Journal.insert_many(chunk, BULK_FIELDS).execute()
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
            n += Journal.get(Journal.id == i).id == i
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
        with db.atomic():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                o.save(only=["level"])
        return len(objs)

    def delete(self, objs):
        with db.atomic():
            for o in objs:
                o.delete_instance()
        return len(objs)


