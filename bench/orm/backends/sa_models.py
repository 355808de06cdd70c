"""SQLAlchemy 2.x declarative models of Tests 1-3 (shared by SA ORM and SA ORM async)."""

import os
import warnings
from datetime import datetime

from sqlalchemy import (JSON, BigInteger, Column, DateTime, Float, ForeignKey, Integer, Numeric, SmallInteger,
                        String, Table, Text)
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import DeclarativeBase, mapped_column, relationship

from bench.orm import spec

# Numeric on SQLite: SA warns once that decimals go through floats (as every SQLite ORM does).
warnings.filterwarnings("ignore", category=sa_exc.SAWarning, message=".*Decimal.*")

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

SA_TYPES = {"float": Float, "smallint": SmallInteger, "int": Integer, "bigint": BigInteger,
            "char": lambda: String(255), "text": Text, "decimal": lambda: Numeric(12, 8), "json": JSON}


class Base(DeclarativeBase):
    pass


def _journal_class():
    ns = {"__tablename__": "journal",
          "id": mapped_column(Integer, primary_key=True),
          "timestamp": mapped_column(DateTime, default=datetime.now, nullable=False),
          "level": mapped_column(SmallInteger, index=True, nullable=False),
          "text": mapped_column(String(255), index=True, nullable=False)}
    if TEST == 2:
        # As upstream: the self-referencing FK has no index (SA does not add one).
        ns["parent_id"] = mapped_column(Integer, ForeignKey("journal.id"), nullable=True)
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            typ = SA_TYPES[t]()
            if nullable:
                ns[name] = mapped_column(typ, nullable=True)
            else:
                d = spec.WIDE_DEFAULTS[t]
                ns[name] = mapped_column(typ, nullable=False,
                                         default=(lambda: dict(spec.WIDE_JSON_DEFAULT)) if t == "json" else d)
    return type("Journal", (Base,), ns)


Journal = _journal_class()
if TEST == 2:
    journal_related = Table(
        "journal_related", Base.metadata,
        Column("journal_id", Integer, ForeignKey("journal.id"), primary_key=True),
        Column("related_id", Integer, ForeignKey("journal.id"), primary_key=True))
    Journal.children = relationship(Journal, back_populates="parent")
    Journal.parent = relationship(Journal, remote_side=[Journal.id], back_populates="children")
    Journal.related = relationship(Journal, secondary=journal_related,
                                   primaryjoin=Journal.id == journal_related.c.journal_id,
                                   secondaryjoin=Journal.id == journal_related.c.related_id,
                                   back_populates="related_from")
    Journal.related_from = relationship(Journal, secondary=journal_related,
                                        primaryjoin=Journal.id == journal_related.c.related_id,
                                        secondaryjoin=Journal.id == journal_related.c.journal_id,
                                        back_populates="related")

COLUMNS = list(Journal.__table__.columns)
METADATA = Base.metadata
