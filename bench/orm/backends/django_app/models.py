"""Django models of Tests 1-3 (the test is chosen by BENCH_ORM_TEST, as the worker sets it)."""

import os
from datetime import datetime

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
          "timestamp": models.DateTimeField(default=datetime.now),
          "level": models.SmallIntegerField(db_index=True),
          "text": models.CharField(max_length=255, db_index=True)}
    if TEST == 2:
        ns["parent"] = models.ForeignKey("self", null=True, on_delete=models.CASCADE, related_name="children")
        ns["related"] = models.ManyToManyField("self", symmetrical=False, related_name="related_from")
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = FIELDS[t](null=True)
            else:
                d = spec.WIDE_DEFAULTS[t]
                ns[name] = FIELDS[t](default=(lambda: dict(spec.WIDE_JSON_DEFAULT)) if t == "json" else d)
    ns["Meta"] = type("Meta", (), {"app_label": "django_app", "db_table": "journal"})
    return type("Journal", (models.Model,), ns)


Journal = _journal_class()
