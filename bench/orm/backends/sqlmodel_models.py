"""SQLModel models of Tests 1-3 (shared by SQLModel and SQLModel async)."""

import os
import types
import warnings
from datetime import datetime
from decimal import Decimal
from typing import List, Optional

from pydantic import NaiveDatetime

from sqlalchemy import JSON, BigInteger, Column, SmallInteger, Text
from sqlalchemy import exc as sa_exc
from sqlmodel import Field, Relationship, Session, SQLModel, select  # noqa: F401 (Session, select used by sa_common)
from sqlmodel.ext.asyncio.session import AsyncSession  # noqa: F401

from bench.orm import spec

warnings.filterwarnings("ignore", category=sa_exc.SAWarning, message=".*Decimal.*")

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

if TEST == 1:
    class Journal(SQLModel, table=True):
        __tablename__ = "journal"
        id: Optional[int] = Field(default=None, primary_key=True)
        timestamp: NaiveDatetime = Field(default_factory=datetime.now)
        level: int = Field(index=True, sa_type=SmallInteger)
        text: str = Field(max_length=255, index=True)

elif TEST == 2:
    class JournalRelated(SQLModel, table=True):
        __tablename__ = "journal_related"
        journal_id: Optional[int] = Field(default=None, foreign_key="journal.id", primary_key=True)
        related_id: Optional[int] = Field(default=None, foreign_key="journal.id", primary_key=True)

    class Journal(SQLModel, table=True):
        __tablename__ = "journal"
        id: Optional[int] = Field(default=None, primary_key=True)
        timestamp: NaiveDatetime = Field(default_factory=datetime.now)
        level: int = Field(index=True, sa_type=SmallInteger)
        text: str = Field(max_length=255, index=True)
        # as upstream: the self-referencing FK has no index
        parent_id: Optional[int] = Field(default=None, foreign_key="journal.id")
        parent: Optional["Journal"] = Relationship(
            back_populates="children", sa_relationship_kwargs={"remote_side": "Journal.id"})
        children: List["Journal"] = Relationship(back_populates="parent")
        related: List["Journal"] = Relationship(
            back_populates="related_from", link_model=JournalRelated,
            sa_relationship_kwargs={"primaryjoin": "Journal.id == JournalRelated.journal_id",
                                    "secondaryjoin": "Journal.id == JournalRelated.related_id"})
        related_from: List["Journal"] = Relationship(
            back_populates="related", link_model=JournalRelated,
            sa_relationship_kwargs={"primaryjoin": "Journal.id == JournalRelated.related_id",
                                    "secondaryjoin": "Journal.id == JournalRelated.journal_id"})

else:
    PY = {"float": float, "smallint": int, "int": int, "bigint": int, "char": str, "text": str,
          "decimal": Decimal, "json": dict}

    def _field(t, nullable):
        kw = {}
        if t == "smallint":
            kw["sa_type"] = SmallInteger
        elif t == "bigint":
            kw["sa_type"] = BigInteger
        elif t == "char":
            kw["max_length"] = 255
        elif t == "text":
            kw["sa_type"] = Text
        elif t == "decimal":
            kw.update(max_digits=12, decimal_places=8)
        if t == "json":  # the column default too, for ORM bulk inserts (which skip pydantic defaults)
            kw = {"sa_column": Column(JSON, nullable=nullable,
                                      default=None if nullable else (lambda: dict(spec.WIDE_JSON_DEFAULT)))}
        if nullable:
            return Field(default=None, **kw)
        if t == "json":
            return Field(default_factory=lambda: dict(spec.WIDE_JSON_DEFAULT), **kw)
        return Field(default=spec.WIDE_DEFAULTS[t], **kw)

    def _body(ns):
        ann = {"id": Optional[int], "timestamp": NaiveDatetime, "level": int, "text": str}
        ns.update(__tablename__="journal", id=Field(default=None, primary_key=True),
                  timestamp=Field(default_factory=datetime.now),
                  level=Field(index=True, sa_type=SmallInteger), text=Field(max_length=255, index=True))
        for name, t, nullable in spec.wide_columns():
            ann[name] = Optional[PY[t]] if nullable else PY[t]
            ns[name] = _field(t, nullable)
        ns["__annotations__"] = ann
        ns["__module__"] = __name__

    Journal = types.new_class("Journal", (SQLModel,), {"table": True}, _body)

METADATA = SQLModel.metadata
COLUMNS = list(Journal.__table__.columns)
