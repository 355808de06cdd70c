"""Django models of Tests 1-3 (the test is chosen by BENCH_ORM_TEST, as the worker sets it).

As upstream's simple/models.py (Journal1-3): timestamp auto_now_add (set by save() and
bulk_create() while inserting, an aware UTC datetime as USE_TZ=True), level and text
indexed, Test 2 a nullable self FK and a self M2M (symmetrical, Django's default for
"self"; so the related_name has no effect and there is no reverse accessor), Test 3 the
literal defaults (one shared dict for the JSON columns). One model named Journal in
table "journal" (upstream: simple_journal1..3, all three created by its migration).
"""

import os

from django.db import models

from bench.orm import spec

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))

FIELDS = {
    "float": lambda **kw: models.FloatField(**kw),
    "smallint": lambda **kw: models.SmallIntegerField(**kw),
    "int": lambda **kw: models.IntegerField(**kw),
    "bigint": lambda **kw: models.BigIntegerField(**kw),
    "char": lambda **kw: models.CharField(max_length=255, **kw),
    "text": lambda **kw: models.TextField(**kw),
    "decimal": lambda **kw: models.DecimalField(max_digits=12, decimal_places=8, **kw),
    "json": lambda **kw: models.JSONField(**kw),
}


def _journal_class():
    ns = {"__module__": __name__,
          "timestamp": models.DateTimeField(auto_now_add=True),
          "level": models.SmallIntegerField(db_index=True),
          "text": models.CharField(max_length=255, db_index=True)}
    if TEST == 2:
        ns["parent"] = models.ForeignKey("self", null=True, on_delete=models.CASCADE, related_name="children")
        ns["related"] = models.ManyToManyField("self", related_name="related_from")
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = FIELDS[t](null=True)
            else:
                ns[name] = FIELDS[t](default=spec.WIDE_DEFAULTS[t])
    ns["Meta"] = type("Meta", (), {"app_label": "django_app", "db_table": "journal"})
    return type("Journal", (models.Model,), ns)


Journal = _journal_class()
