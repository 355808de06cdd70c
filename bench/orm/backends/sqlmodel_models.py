"""SQLModel models of Tests 1-3 (shared by SQLModel and SQLModel async).

The models of upstream's sqlmodel/ suite: each column's SQL side given as
sa_column=Column(...) (the same types, indexes and Python defaults as SA ORM's),
the pydantic side as a plain annotation with its default:
- Test 1: id, timestamp (default_factory and column default datetime.now), level
  (SmallInteger, indexed), text (String(255), indexed).
- Test 2: plus parent_id, a self-referencing FK without an index, and the link table
  journal_related (journal_id, journal_from_id). As upstream, SQLModel's models
  declare no Relationship() attributes, so deleting a Journal loads nothing.
- Test 3: plus 4 groups of 8 typed columns; groups 1 and 3 NOT NULL with the
  default both on the field and on the column (the JSON default is one shared dict,
  as upstream), 2 and 4 nullable.
"""

import os
import types
import warnings
from datetime import datetime
from decimal import Decimal
from typing import Optional

from sqlalchemy import Column, DateTime, ForeignKey, Integer, SmallInteger, String
from sqlalchemy import exc as sa_exc
from sqlmodel import Field, SQLModel

from bench.orm import spec
from bench.orm.backends.sa_common import SA_TYPES

warnings.filterwarnings("ignore", category=sa_exc.SAWarning, message=".*Decimal.*")

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

PY = {"float": float, "smallint": int, "int": int, "bigint": int, "char": str, "text": str,
      "decimal": Decimal, "json": dict}


def _body(ns):
    ann = {"id": Optional[int], "timestamp": datetime, "level": int, "text": str}
    ns.update(
        __tablename__="journal",
        id=Field(default=None, primary_key=True),
        timestamp=Field(default_factory=datetime.now,
                        sa_column=Column(DateTime, nullable=False, default=datetime.now)),
        level=Field(sa_column=Column(SmallInteger, index=True, nullable=False)),
        text=Field(sa_column=Column(String(255), index=True, nullable=False)))
    if TEST == 2:
        ann["parent_id"] = Optional[int]
        ns["parent_id"] = Field(default=None, foreign_key="journal.id")  # no index (as upstream)
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ann[name] = Optional[PY[t]]
                ns[name] = Field(default=None, sa_column=Column(SA_TYPES[t]()))
            else:
                d = spec.WIDE_DEFAULTS[t]
                ann[name] = PY[t]
                ns[name] = Field(default=d, sa_column=Column(SA_TYPES[t](), default=d, nullable=False))
    ns["__annotations__"] = ann
    ns["__module__"] = __name__


if TEST == 2:
    class JournalRelated(SQLModel, table=True):
        __tablename__ = "journal_related"
        journal_id: int = Field(sa_column=Column(Integer, ForeignKey("journal.id"), primary_key=True))
        journal_from_id: int = Field(sa_column=Column(Integer, ForeignKey("journal.id"), primary_key=True))

Journal = types.new_class("Journal", (SQLModel,), {"table": True}, _body)

METADATA = SQLModel.metadata
