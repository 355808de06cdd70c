"""Django ORM (sync), SQLite backend: upstream's code paths (benchmarks/django/simple).

- settings.configure() as upstream's settings.py: sqlite3 engine, USE_TZ=True,
  TIME_ZONE="UTC"; plus OPTIONS init_command "PRAGMA synchronous = FULL" (the seed's
  setting, SQLite's compiled-in default anyway); rollback journal (Django's default);
  autocommit outside transaction.atomic(). Tables created with the schema editor
  (upstream: its migration; the same tables, untimed).
- A: obj.save(force_insert=True) (autocommit) - what upstream's objects.create() does
  after building the object, which the seed prepares before the timer; B: the same,
  each in transaction.atomic(); C: bulk_create(objs) (one transaction, batches of
  999 // columns rows, Django's own SQLite limit; sets the ids through RETURNING).
  timestamp is auto_now_add: set while inserting (timed, as upstream).
- D/E: list(filter(level=L).all()) [offset:offset+20]; F: objects.get(id=);
  G: .all().values(); H: .all().values_list().
- I: save() each in atomic() (every field); J: save(update_fields=["level"]) (really
  partial); K: obj.delete() each in atomic() (Test 2: Django's collector queries the
  children and the M2M links of each object - its relation machinery).
- Models: django_app/models.py (upstream's; Test 2's M2M symmetrical as upstream).
"""

import os

import django
from django.conf import settings

from bench.orm.backends.base import SyncBackend, fresh_dir, pkg_versions

DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

settings.configure(
    DEBUG=False,
    USE_TZ=True,
    TIME_ZONE="UTC",
    INSTALLED_APPS=["bench.orm.backends.django_app"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DB_FILE,
                           "OPTIONS": {"init_command": "PRAGMA synchronous = FULL"}}},
    DEFAULT_AUTO_FIELD="django.db.models.AutoField",
)
django.setup()

from django.db import connection, transaction  # noqa: E402

from bench.orm.backends.django_app.models import Journal  # noqa: E402


class Backend(SyncBackend):
    BULK_SETS_IDS = True
    PARTIAL_UPDATE = "partial (save(update_fields=['level']))"
    NOTES = ["rollback journal (default), synchronous=FULL via init_command; USE_TZ=True, TIME_ZONE=UTC (upstream)",
             "timestamp auto_now_add (set while inserting, as upstream); A/B save(force_insert=True)",
             "C: bulk_create() sets ids (RETURNING)",
             "Test 2: symmetrical self M2M (upstream); delete() runs the collector (children, M2M links) per object"]

    def __init__(self, test, directory):
        super().__init__(test, directory)
        self.db_file = DB_FILE

    def versions(self):
        return pkg_versions("Django")

    def info(self):
        with connection.cursor() as c:
            jm = c.execute("PRAGMA journal_mode").fetchone()[0]
            sy = c.execute("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": jm, "synchronous": {2: "FULL"}.get(sy, sy)}

    def create(self):
        fresh_dir(self.directory)
        with connection.schema_editor() as ed:
            ed.create_model(Journal)

    def open(self):
        connection.ensure_connection()

    def close(self):
        connection.close()

    def new_objects(self, values):
        return [Journal(level=lvl, text=txt) for lvl, txt in values]

    def insert_single(self, objs):
        for o in objs:
            o.save(force_insert=True)
        return len(objs)

    def insert_batch(self, objs):
        with transaction.atomic():
            for o in objs:
                o.save(force_insert=True)
        return len(objs)

    def new_bulk(self, values):
        return self.new_objects(values)

    def insert_bulk(self, objs):
        Journal.objects.bulk_create(objs)
        return len(objs)

    def filter_large(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.objects.filter(level=lvl).all()))
        return n

    def filter_small(self, queries):
        n = 0
        for lvl, off in queries:
            n += len(list(Journal.objects.filter(level=lvl).all()[off:off + 20]))
        return n

    def get(self, ids):
        n = 0
        for i in ids:
            n += Journal.objects.get(id=i).id == i
        return n

    def filter_dict(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.objects.filter(level=lvl).all().values()))
        return n

    def filter_tuple(self, levels):
        n = 0
        for lvl in levels:
            n += len(list(Journal.objects.filter(level=lvl).all().values_list()))
        return n

    def load_all(self):
        return list(Journal.objects.all())

    def update_whole(self, objs, levels, texts):
        with transaction.atomic():
            for o, lvl, txt in zip(objs, levels, texts):
                o.level = lvl
                o.text = txt
                o.save()
        return len(objs)

    def update_partial(self, objs, levels):
        with transaction.atomic():
            for o, lvl in zip(objs, levels):
                o.level = lvl
                o.save(update_fields=["level"])
        return len(objs)

    def delete(self, objs):
        with transaction.atomic():
            for o in objs:
                o.delete()
        return len(objs)
