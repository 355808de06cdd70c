"""Tortoise ORM models of Tests 1-3 (the test from BENCH_ORM_TEST), as upstream's
benchmarks/tortoise/models.py: the implicit id, timestamp auto_now_add, level and text
indexed (db_index: upstream's index= is its deprecated alias), Test 2 a nullable self FK
and a self M2M, Test 3 the literal defaults (one shared dict for the JSON columns).
"""

import os

from tortoise import fields
from tortoise.models import Model

from bench.orm import spec

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))

FIELDS = {
    "float": fields.FloatField, "smallint": fields.SmallIntField, "int": fields.IntField,
    "bigint": fields.BigIntField, "char": lambda **kw: fields.CharField(max_length=255, **kw),
    "text": fields.TextField, "decimal": lambda **kw: fields.DecimalField(max_digits=12, decimal_places=8, **kw),
    "json": fields.JSONField,
}


def _ns():
    ns = {"__module__": __name__,
          "timestamp": fields.DatetimeField(auto_now_add=True),
          "level": fields.SmallIntField(db_index=True),
          "text": fields.CharField(max_length=255, db_index=True)}
    if TEST == 2:
        ns["parent"] = fields.ForeignKeyField("models.Journal", related_name="children", null=True)
        ns["related"] = fields.ManyToManyField("models.Journal", related_name="related_from")
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = FIELDS[t](null=True)
            else:
                ns[name] = FIELDS[t](default=spec.WIDE_DEFAULTS[t])
    ns["Meta"] = type("Meta", (), {"table": "journal"})
    return ns


Journal = type("Journal", (Model,), _ns())
__models__ = [Journal]
