"""What the benchmark measures: operations, sizes, labels, the seeded workload.

Pure standard library: imported by the orchestrator (system python3) and by the
workers (inside each backend group's virtual environment).
The definitions (models, operations, what is timed) are in README.md.
"""

import datetime
import random
from decimal import Decimal

LEVELS = (10, 20, 30, 40, 50)

# Full-size parameters of the seed (ITERATIONS, BATCH_SIZE).
ITERATIONS = 100
BATCH_SIZE = 10_000
# --smoke: tiny sizes, so the harness is exercised, not timed.
SMOKE_ITERATIONS = 4
SMOKE_BATCH_SIZE = 50

OPS = ("A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K")
OP_NAMES = {
    "A": "Insert: Single",
    "B": "Insert: Batch",
    "C": "Insert: Bulk",
    "D": "Filter: Large",
    "E": "Filter: Small",
    "F": "Get",
    "G": "Filter: dict",
    "H": "Filter: tuple",
    "I": "Update: Whole",
    "J": "Update: Partial",
    "K": "Delete",
}
# The object operations: the geometric mean covers these (G and H are projections).
GEOMEAN_OPS = ("A", "B", "C", "D", "E", "F", "I", "J", "K")
TESTS = {1: "Test 1: Simple Model (4 fields)",
         2: "Test 2: FK Relations",
         3: "Test 3: Wide Model (32+ fields)"}

# mode id -> (warm-up before each timed op, large table)
MODES = {
    "cold": (False, False),
    "warm": (True, False),
    "large": (False, True),
    "large-warm": (True, True),
}

# Test 3: the four groups of eight columns. Groups 1 and 3 NOT NULL with these
# defaults, groups 2 and 4 nullable (left NULL).
WIDE_TYPES = ("float", "smallint", "int", "bigint", "char", "text", "decimal", "json")
WIDE_TEXT_DEFAULT = ",".join(["Moo", "Foo", "Baa", "Waa"] * 3)
WIDE_JSON_DEFAULT = {"a": 1, "b": "b", "c": [2], "d": {"e": 3}, "f": True}
WIDE_DEFAULTS = {
    "float": 2.2,
    "smallint": 2,
    "int": 2000000,
    "bigint": 99999999,
    "char": "value1",
    "text": WIDE_TEXT_DEFAULT,
    "decimal": Decimal("2.2"),
    "json": WIDE_JSON_DEFAULT,
}
WIDE_DEFAULT_GROUPS = (1, 3)
WIDE_NULL_GROUPS = (2, 4)


def wide_columns():
    """[(column name, type, nullable)] for Test 3, in table order."""
    cols = []
    for g in (1, 2, 3, 4):
        for t in WIDE_TYPES:
            cols.append((f"col_{t}{g}", t, g in WIDE_NULL_GROUPS))
    return cols


def now():
    return datetime.datetime.now()


class Workload:
    """The random choices of one operation, drawn from a seed before the timer,
    identical for every backend of a run."""

    def __init__(self, seed, op, n, batch):
        self.rng = random.Random(f"{seed}:{op}")
        self.op = op
        self.n = n
        self.batch = batch

    def insert_values(self, count):
        """[(level, text)] for `count` new objects."""
        r = self.rng
        return [(r.choice(LEVELS), f"Insert from {self.op}, item {i}") for i in range(count)]

    def filter_large_levels(self):
        """10 rounds x 5 levels."""
        return [lvl for _ in range(10) for lvl in LEVELS]

    def filter_small_queries(self):
        """N/2 queries: (level, offset) with LIMIT 20 (offset drawn as upstream:
        below ITERATIONS - 20)."""
        hi = max(1, self.n - 20)
        return [(lvl, self.rng.randrange(hi)) for _ in range(max(1, self.n // 10)) for lvl in LEVELS]

    def get_ids(self, existing_ids):
        """2N ids drawn from the existing ones; distinct while there are enough rows
        (~300 >= 200), so no ORM's identity map or object cache can answer a repeated
        id without a query (upstream: SA's identity map did)."""
        existing = sorted(existing_ids)
        k = 2 * self.n
        if len(existing) >= k:
            return self.rng.sample(existing, k)
        return [self.rng.choice(existing) for _ in range(k)]

    def update_levels(self, count):
        return [self.rng.choice(LEVELS) for _ in range(count)]
