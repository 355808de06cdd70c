"""Conditions on values inside JSON properties (Property[key]..., mote_query_json):
random documents and random conditions (hypothesis), each query's ids compared with
a reference evaluator written here from mote.h's rules (SQL's NULL, numbers with
numbers, strings with strings, structural equality for objects and arrays). Test data:
synthetic."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import motedb


class Doc(motedb.Entity):
    id: int = 0
    meta: dict | None = None
    tags: list = motedb.field(default_factory=list)
    rank: int = 0


class IxDoc(motedb.Entity):
    """Doc with an index on the path "a" of its JSON."""
    id: int = 0
    meta: Annotated[dict | None, motedb.Index(path="a")] = None
    tags: list = motedb.field(default_factory=list)


ABSENT = object()
KEYS = ["a", "b", "k.dot", "é", 'q"t']
SCALAR = st.one_of(
    st.none(), st.booleans(),
    st.integers(-3, 3), st.sampled_from([2**53, 2**53 + 1, 2**63 - 1, -2**63]),
    st.floats(-4, 4, allow_nan=False).map(lambda f: round(f, 1)),
    st.sampled_from(["", "a", "ab", "b", "é", "x\ny", '"q"']))
JSON = st.recursive(SCALAR, lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.sampled_from(KEYS), kids, max_size=3), max_leaves=8)
DOC = st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4)
PATH = st.lists(st.sampled_from(KEYS) | st.integers(0, 2), min_size=1, max_size=2)
VALUE = SCALAR.filter(lambda v: v is not None) | st.lists(SCALAR, max_size=2) \
    | st.dictionaries(st.sampled_from(KEYS), SCALAR, max_size=2)
OPS = ["==", "!=", "<", "<=", ">", ">=", "in_", "not_in", "between", "is_null",
       "is_not_null", "exists", "contains", "startswith"]


def at(doc, path):
    v = doc
    if v is None:
        return ABSENT
    for step in path:
        if isinstance(step, str):
            if not isinstance(v, dict) or step not in v:
                return ABSENT
        elif not isinstance(v, list) or step >= len(v):
            return ABSENT
        v = v[step]
    return v


def is_num(x):
    return isinstance(x, (bool, int, float))


def jeq(a, b):
    """Structural equality of JSON values, kinds kept (true is not 1 inside a JSON value)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if is_num(a) and is_num(b) or isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(jeq, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(jeq(a[k], b[k]) for k in a)
    return False


def eq(v, x):
    """A value found (not NULL) equal to a condition's value: bool/int/float as numbers
    (true is 1), str as text, dict/list structurally."""
    if is_num(x):
        return is_num(v) and v == x
    if isinstance(x, str):
        return isinstance(v, str) and v == x
    return jeq(v, x)


ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def order(v, op, x):
    if is_num(v) and is_num(x) or isinstance(v, str) and isinstance(x, str):
        return ORDER[op](v, x)
    return False


def holds(doc, path, op, x):
    v = at(doc, path)
    null = v is ABSENT or v is None
    if op == "is_null":
        return null
    if op == "is_not_null":
        return not null
    if op == "exists":
        return v is not ABSENT
    if null:
        return False
    if op == "==":
        return eq(v, x)
    if op == "!=":
        return not eq(v, x)
    if op in ORDER:
        return order(v, op, x)
    if op == "in_":
        return any(eq(v, y) for y in x if y is not None)
    if op == "not_in":
        return not any(eq(v, y) for y in x if y is not None)
    if op == "between":
        return order(v, ">=", x[0]) and order(v, "<=", x[1])
    if op == "contains":
        return isinstance(v, list) and any(eq(e, x) for e in v)
    if op == "startswith":
        return isinstance(v, str) and v.startswith(x)
    raise AssertionError(op)


def condition(path, op, x, cls=Doc):
    p = cls.meta
    for step in path:
        p = p[step]
    if op in ("is_null", "is_not_null", "exists"):
        return getattr(p, op)()
    if op in ("in_", "not_in", "contains", "startswith"):
        return getattr(p, op)(x)
    if op == "between":
        return p.between(*x)
    return {"==": operator.eq, "!=": operator.ne, **ORDER}[op](p, x)


def op_value(op):
    if op in ("in_", "not_in"):
        return st.lists(VALUE | st.none(), max_size=3)
    if op == "between":
        return st.tuples(VALUE, VALUE)
    if op == "startswith":
        return st.sampled_from(["", "a", "é", "x"])
    return VALUE


QUERY = st.tuples(PATH, st.sampled_from(OPS)).flatmap(
    lambda po: st.tuples(st.just(po[0]), st.just(po[1]), op_value(po[1])))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with motedb.open(tmp_path_factory.mktemp("jp") / "j.mote", sync=False) as s:
        yield s


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(docs=st.lists(DOC | st.none(), min_size=1, max_size=12),
       queries=st.lists(QUERY, min_size=1, max_size=8))
def test_queries_equal_the_reference(store, docs, queries):
    box = store.box(Doc)
    box.remove_all()
    ids = box.put_many([Doc(meta=d) for d in docs])
    for path, op, x in queries:
        got = box.query(condition(path, op, x)).ids()
        want = [i for i, d in zip(ids, docs) if holds(d, path, op, x)]
        assert got == want, (path, op, x)
        if op in ("==", "<", "in_", "is_null"):  # ~ is the negated operator
            inv = box.query(~condition(path, op, x)).ids()
            neg = {"==": "!=", "<": ">=", "in_": "not_in", "is_null": "is_not_null"}[op]
            assert inv == [i for i, d in zip(ids, docs) if holds(d, path, neg, x)]


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(docs=st.lists(st.tuples(DOC | st.none(), st.integers(0, 3)), min_size=1, max_size=15),
       queries=st.lists(st.tuples(QUERY, st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=6))
def test_sorted_pages_equal_the_reference(store, docs, queries):
    """Ordered by another property with offset and limit: the JSON conditions are
    checked after the sort, on the candidates in order, until the page is full."""
    box = store.box(Doc)
    box.remove_all()
    ids = box.put_many([Doc(meta=d, rank=r) for d, r in docs])
    for (path, op, x), off, lim in queries:
        got = box.query(condition(path, op, x)).order_by(Doc.rank.desc()).offset(off).limit(lim).ids()
        ranked = sorted(((-r, i) for i, (d, r) in zip(ids, docs) if holds(d, path, op, x)))
        assert got == [i for _, i in ranked][off:off + lim], (path, op, x, off, lim)


SERVED = ["==", "<", "<=", ">", ">=", "in_", "between", "is_null", "startswith"]
INDEXED_QUERY = st.sampled_from(SERVED + ["!=", "exists"]).flatmap(
    lambda op: st.tuples(st.just(["a"]), st.just(op), op_value(op)))


def index_serves(op, x):
    """Does the plan read the index for op x? For the operators it serves, when the values
    have keys (not a dict or list: those compare as JSON), one type of them (in_() of
    several types is an OR of one condition per type; between() of two compares as JSON)."""
    if op not in SERVED:
        return False
    vals = [] if op == "is_null" else [y for y in x if y is not None] if op == "in_" \
        else list(x) if op == "between" else [x]
    if any(isinstance(v, (dict, list)) for v in vals):
        return False
    return len({type(v) for v in vals}) <= 1


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(docs=st.lists(DOC | st.none(), min_size=1, max_size=15),
       queries=st.lists(INDEXED_QUERY, min_size=1, max_size=8))
def test_an_index_on_the_path_gives_the_same_results(store, docs, queries):
    """The same queries on the indexed path "a": the same ids with the index (which the
    plan uses for the operators it serves) as the reference gives."""
    box = store.box(IxDoc)
    box.remove_all()
    ids = box.put_many([IxDoc(meta=d) for d in docs])
    for path, op, x in queries:
        q = box.query(condition(path, op, x, IxDoc))
        assert q.ids() == [i for i, d in zip(ids, docs) if holds(d, path, op, x)], (op, x)
        assert (q.plan() == "index") == index_serves(op, x), (op, x, q.plan())


def test_paths_values_and_errors(tmp_path):
    with motedb.open(tmp_path / "e.mote") as store:
        box = store.box(Doc)
        box.put_many([Doc(meta={"u": {"age": i, "name": f"n{i}"}, "k.dot": [i, "x"]}) for i in range(10)])
        assert box.query(Doc.meta["u"]["age"] >= 7).count() == 3
        assert box.query(Doc.meta["k.dot"][0] == 4).count() == 1  # a key with a dot
        assert box.query(Doc.meta["k.dot"].contains("x")).count() == 10
        box.put_many([Doc(tags=["a", 1, {"b": 2}]), Doc(tags=[]), Doc(tags=["a"])])
        assert box.query(Doc.tags.contains("a")).count() == 2  # a list property itself
        assert box.query(Doc.tags.contains({"b": 2.0})).count() == 1
        assert repr(Doc.tags.contains(1)) == "Doc.tags.contains(1)"
        assert repr(Doc.meta["u"].in_([1, 2])) == "Doc.meta['u'].in_((1, 2))"
        assert box.query(Doc.meta["u"]["age"].in_([1, 2.0, "3", None])).count() == 2
        q = box.query((Doc.meta["u"]["age"] < 3) & Doc.meta["u"]["name"].startswith("n"))
        assert q.count() == 3
        assert repr(Doc.meta["u"][0] > 1) == "Doc.meta['u'][0] > 1"
        with pytest.raises(TypeError, match="JSON path step"):
            Doc.meta[1.5]
        with pytest.raises(IndexError):
            Doc.meta[-1]
        with pytest.raises(TypeError, match="a JSON value is"):
            Doc.meta["a"] == b"bytes"
        with pytest.raises(TypeError, match=r"\[\] makes a JSON path"):
            Doc.id["a"]
        with pytest.raises(TypeError, match="no truth value"):
            bool(Doc.meta["a"])
        with pytest.raises(TypeError, match="takes a str"):
            Doc.meta["a"].startswith(1)
        with pytest.raises(motedb.Error, match="Doc.meta: a value: .* at byte 1"):
            box.query(Doc.meta["a"] == [float("nan")]).count()  # NaN is not JSON
