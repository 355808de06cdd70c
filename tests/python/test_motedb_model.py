"""Differential test: random objects and random queries against a pure-Python model.

The model states the query semantics of MoteDB: a comparison with NULL is false
(NE and NOT IN too) except IS [NOT] NULL; floats compare with NaN equal to NaN
and above every number, -0.0 == 0.0; strings compare by code point; case-folding
covers ASCII and Latin-1; ordering puts NULLs first (or last with nulls_last(),
in either direction) and breaks ties by id.
"""

import functools
import math
import os
import tempfile
from typing import Annotated

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import motedb


class Rec(motedb.Entity):
    id: int = 0
    level: Annotated[int | None, motedb.Index] = None
    small: Annotated[int, motedb.Int16] = 0
    score: float | None = None
    text: Annotated[str | None, motedb.Index] = None
    flag: bool = False


PROPS = ("level", "small", "score", "text", "flag")

INT64 = st.one_of(st.integers(-2**63, 2**63 - 1),
                  st.sampled_from([0, 1, -1, 5, 2**63 - 1, -2**63]))
SMALL = st.integers(-2**15, 2**15 - 1)
FLOATS = st.one_of(st.floats(width=64), st.sampled_from([0.0, -0.0, 1.5, math.nan, -math.inf]))
TEXT = st.text(alphabet="aAbBzZ äÄöÖ×\x00é✓🎉", max_size=6)

VALUES = {"level": INT64, "small": SMALL, "score": FLOATS, "text": TEXT, "flag": st.booleans(),
          "id": st.integers(0, 2**64 - 1) | st.integers(0, 40)}
NULLABLE = {"level", "score", "text"}


def obj_strategy():
    return st.builds(Rec, level=st.none() | INT64, small=SMALL, score=st.none() | FLOATS,
                     text=st.none() | TEXT, flag=st.booleans())


# ---- the model -------------------------------------------------------------------------------


def vkey(prop, v):
    """Total order of non-NULL values of a property."""
    if prop == "score":
        return (1, 0.0) if math.isnan(v) else (0, v + 0.0)
    return v


def fold(s):
    return "".join(chr(ord(c) + 32) if ("A" <= c <= "Z" or (0xC0 <= ord(c) <= 0xDE and ord(c) != 0xD7))
                   else c for c in s)


def m_eval(cond, o):
    kind = cond[0]
    if kind == "and":
        return all(m_eval(c, o) for c in cond[1])
    if kind == "or":
        return any(m_eval(c, o) for c in cond[1])
    _, prop, op, vals, cs = cond
    x = getattr(o, prop)
    if op == "is_null":
        return x is None
    if op == "not_null":
        return x is not None
    if x is None:
        return False
    if op in ("startswith", "endswith", "contains"):
        h, n = (x, vals[0]) if cs else (fold(x), fold(vals[0]))
        return getattr(h, op)(n) if op != "contains" else n in h
    if op in ("eq", "ne") and not cs:  # text.equals / not_equals(case_sensitive=False)
        return (fold(x) == fold(vals[0])) == (op == "eq")
    k = vkey(prop, x)
    ks = [vkey(prop, v) for v in vals]
    return {"eq": lambda: k == ks[0], "ne": lambda: k != ks[0], "lt": lambda: k < ks[0],
            "le": lambda: k <= ks[0], "gt": lambda: k > ks[0], "ge": lambda: k >= ks[0],
            "between": lambda: ks[0] <= k <= ks[1], "in": lambda: k in ks,
            "not_in": lambda: k not in ks}[op]()


def m_negate(cond):
    kind = cond[0]
    if kind in ("and", "or"):
        return ("or" if kind == "and" else "and", [m_negate(c) for c in cond[1]])
    _, prop, op, vals, cs = cond
    if op == "between":
        return ("or", [("leaf", prop, "lt", vals[:1], True), ("leaf", prop, "gt", vals[1:], True)])
    neg = {"eq": "ne", "ne": "eq", "lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "in": "not_in",
           "not_in": "in", "is_null": "not_null", "not_null": "is_null"}[op]
    return ("leaf", prop, neg, vals, cs)


def m_sort(objs, orders):
    def cmp(a, b):
        for prop, desc, nulls_last in orders:
            x, y = getattr(a, prop), getattr(b, prop)
            if x is None or y is None:
                if x is None and y is None:
                    continue
                r = -1 if x is None else 1
                return -r if nulls_last else r
            kx, ky = vkey(prop, x), vkey(prop, y)
            if kx != ky:
                r = -1 if kx < ky else 1
                return -r if desc else r
        return (a.id > b.id) - (a.id < b.id)
    return sorted(objs, key=functools.cmp_to_key(cmp))


# ---- building motedb conditions from the same description --------------------------------------


def build(cond):
    kind = cond[0]
    if kind in ("and", "or"):
        parts = [build(c) for c in cond[1]]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if kind == "and" else (out | p)
        return out
    _, prop, op, vals, cs = cond
    p = getattr(Rec, prop)
    if op in ("startswith", "endswith", "contains"):
        return getattr(p, op)(vals[0], case_sensitive=cs)
    if op in ("eq", "ne") and not cs:
        return (p.equals if op == "eq" else p.not_equals)(vals[0], case_sensitive=False)
    return {"eq": lambda: p == vals[0], "ne": lambda: p != vals[0], "lt": lambda: p < vals[0],
            "le": lambda: p <= vals[0], "gt": lambda: p > vals[0], "ge": lambda: p >= vals[0],
            "between": lambda: p.between(vals[0], vals[1]), "in": lambda: p.in_(vals),
            "not_in": lambda: p.not_in(vals), "is_null": p.is_null,
            "not_null": p.is_not_null}[op]()


@st.composite
def leaf(draw, pool):
    prop = draw(st.sampled_from(PROPS + ("id",)))
    ops = ["eq", "ne", "lt", "le", "gt", "ge", "between", "in", "not_in", "is_null", "not_null"]
    if prop == "id":  # the object id: no NULL
        ops = ops[:-2]
    if prop == "text":
        ops += ["startswith", "endswith", "contains"] * 2
    op = draw(st.sampled_from(ops))
    existing = [getattr(o, prop) for o in pool if getattr(o, prop) is not None]
    value = st.sampled_from(existing) | VALUES[prop] if existing else VALUES[prop]
    if op in ("is_null", "not_null"):
        vals = []
    elif op == "between":
        vals = [draw(value), draw(value)]
    elif op in ("in", "not_in"):
        vals = draw(st.lists(value, max_size=4))
    elif op in ("startswith", "endswith", "contains"):
        s = draw(value)
        vals = [s[:draw(st.integers(0, len(s)))] if draw(st.booleans()) else s]
    else:
        vals = [draw(value)]
    # case_sensitive=False: string operators, and equality of text
    cs = draw(st.booleans()) if prop == "text" and op in ("eq", "ne", "startswith", "endswith",
                                                           "contains") else True
    return ("leaf", prop, op, vals, cs)


@st.composite
def condition(draw, pool, depth=0):
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        c = draw(leaf(pool))
    else:
        kids = draw(st.lists(condition(pool, depth + 1), min_size=1, max_size=3))
        c = (draw(st.sampled_from(["and", "or"])), kids)
    if draw(st.integers(0, 5)) == 0 and not (c[0] == "leaf" and c[2] in ("startswith", "endswith", "contains")) \
            and not any(k[0] == "leaf" and k[2] in ("startswith", "endswith", "contains")
                        for k in _leaves(c)):
        c = ("not", c)
    return c


def _leaves(c):
    if c[0] == "leaf":
        return [c]
    if c[0] == "not":
        return _leaves(c[1])
    return [x for k in c[1] for x in _leaves(k)]


def resolve(c):
    """-> (model condition without 'not', motedb condition)"""
    if c[0] == "not":
        mc, qc = resolve(c[1])
        return m_negate(mc), ~qc
    if c[0] in ("and", "or"):
        parts = [resolve(k) for k in c[1]]
        q = parts[0][1]
        for p in parts[1:]:
            q = (q & p[1]) if c[0] == "and" else (q | p[1])
        return (c[0], [p[0] for p in parts]), q
    return c, build(c)


@pytest.fixture(scope="module")
def box():
    d = tempfile.mkdtemp()
    s = motedb.open(os.path.join(d, "model.mote"), sync=False)
    yield s.box(Rec)
    s.close()


def same(a, b):
    return [(o.id, o.level, o.small, repr(o.score), o.text, o.flag) for o in a] == \
        [(o.id, o.level, o.small, repr(o.score), o.text, o.flag) for o in b]


@settings(max_examples=int(os.environ.get("MOTEDB_EXAMPLES", "200")), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_differential(box, data):
    box.remove_all()
    objs = data.draw(st.lists(obj_strategy(), max_size=30), label="objects")
    box.put_many(objs)
    model = {o.id: o for o in objs}
    # some updates and removals
    for o in data.draw(st.lists(st.sampled_from(objs), max_size=5, unique_by=id) if objs else st.just([])):
        if data.draw(st.booleans()):
            box.remove(o)
            del model[o.id]
        else:
            o.text = data.draw(st.none() | TEXT)
            o.level = data.draw(st.none() | INT64)
            box.put(o)
    assert same(box.all(), sorted(model.values(), key=lambda o: o.id))
    pool = list(model.values())
    for _ in range(4):
        raw = data.draw(st.none() | condition(pool), label="condition")
        mc, qc = resolve(raw) if raw is not None else (None, None)
        q = box.query(qc) if qc is not None else box.query()
        orders = data.draw(st.lists(st.tuples(st.sampled_from(PROPS), st.booleans(), st.booleans()),
                                    max_size=2, unique_by=lambda t: t[0]), label="orders")
        for prop, desc, nl in orders:
            o = getattr(Rec, prop)
            o = o.desc() if desc else o.asc()
            q.order_by(o.nulls_last() if nl else o)
        expected = [o for o in pool if mc is None or m_eval(mc, o)]
        expected = m_sort(expected, orders) if orders else sorted(expected, key=lambda o: o.id)
        off = data.draw(st.integers(0, 5))
        lim = data.draw(st.integers(0, 5))
        assert same(q.find(), expected), (raw, orders)
        assert q.count() == len(expected)
        assert q.ids() == [o.id for o in expected]
        for prop in ("level", "small", "score", "text"):
            vals = [getattr(o, prop) for o in expected if getattr(o, prop) is not None]
            p = getattr(Rec, prop)
            assert repr(q.min(p)) == repr(min(vals, key=lambda v: vkey(prop, v)) if vals else None)
            assert repr(q.max(p)) == repr(max(vals, key=lambda v: vkey(prop, v)) if vals else None)
            if prop != "text":
                total = sum(vals) if prop != "score" else sum(vals, 0.0)
                assert repr(q.sum(p)) == repr(total)
                if prop == "score":
                    avg = total / len(vals) if vals else None
                else:
                    avg = float(total) / len(vals) if vals else None
                if avg is not None and prop != "score":
                    assert q.avg(p) == pytest.approx(avg, rel=1e-12)
                else:
                    assert repr(q.avg(p)) == repr(avg)
        q.offset(off)
        if lim:
            q.limit(lim)
        want = expected[off:off + lim] if lim else expected[off:]
        assert q.ids() == [o.id for o in want], (raw, orders, off, lim)
        assert q.count() == len(want)
        first = q.first()
        assert (first.id if first else None) == (want[0].id if want else None)
