"""SQLAlchemy declarative models of Tests 1-3 (shared by SA ORM and SA ORM async).

The models of upstream's sqlalchemy/ and sqlalchemy_async/ suites (Column() on a
declarative_base()):
- Test 1: id, timestamp (Python default datetime.now), level (SmallInteger, indexed),
  text (String(255), indexed).
- Test 2: plus parent_id, a self-referencing FK without an index, with the
  relationship `parent` (backref `children`), and an association class
  JournalRelated (journal_related: journal_id, journal_from_id, both part of the
  primary key) reached through the one-to-many relationships `related` and
  `related_from` (backrefs `to`, `from_journal`). Deleting a Journal makes the unit
  of work load `children`, `related` and `related_from` to null their foreign keys.
- Test 3: plus 4 groups of 8 typed columns; groups 1 and 3 NOT NULL with scalar
  Python defaults (the JSON default is one shared dict, as upstream), 2 and 4 nullable.
"""

import os
import warnings
from datetime import datetime

from sqlalchemy import Column, DateTime, ForeignKey, Integer, SmallInteger, String
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import declarative_base, relationship

from bench.orm import spec
from bench.orm.backends.sa_common import SA_TYPES

# Numeric on SQLite: SA warns once that decimals go through floats (as every SQLite ORM does).
warnings.filterwarnings("ignore", category=sa_exc.SAWarning, message=".*Decimal.*")

TEST = int(os.environ.get("BENCH_ORM_TEST", "1"))
DB_FILE = os.path.join(os.environ.get("BENCH_ORM_DIR", "."), "db.sqlite3")

Base = declarative_base()


def _journal_columns():
    return {"__tablename__": "journal",
            "id": Column(Integer, primary_key=True),
            "timestamp": Column(DateTime, default=datetime.now, nullable=False),
            "level": Column(SmallInteger, index=True, nullable=False),
            "text": Column(String(255), index=True, nullable=False)}


if TEST == 2:
    class JournalRelated(Base):
        __tablename__ = "journal_related"
        journal_id = Column(Integer, ForeignKey("journal.id"), primary_key=True)
        journal_from_id = Column(Integer, ForeignKey("journal.id"), primary_key=True)

    ns = _journal_columns()
    ns.update(
        parent_id=Column(Integer, ForeignKey("journal.id")),  # no index (as upstream)
        parent=relationship("Journal", remote_side="Journal.id", backref="children"),
        related=relationship("JournalRelated", backref="to",
                             primaryjoin="Journal.id == JournalRelated.journal_id"),
        related_from=relationship("JournalRelated", backref="from_journal",
                                  primaryjoin="Journal.id == JournalRelated.journal_from_id"))
    Journal = type("Journal", (Base,), ns)
else:
    ns = _journal_columns()
    if TEST == 3:
        for name, t, nullable in spec.wide_columns():
            if nullable:
                ns[name] = Column(SA_TYPES[t]())
            else:
                ns[name] = Column(SA_TYPES[t](), default=spec.WIDE_DEFAULTS[t], nullable=False)
    Journal = type("Journal", (Base,), ns)

METADATA = Base.metadata
