"""Findings of a user trial: wrong results, misleading errors and the small
features the trial missed (partial update, counts per value, lazy iteration,
optional filters, int properties compared with floats)."""

from __future__ import annotations

import gc
import math
from typing import Annotated

import pytest

import motedb


class Person(motedb.Entity):
    id: int = 0
    name: str = ""


class Order(motedb.Entity):
    id: int = 0
    status: Annotated[str, motedb.Index] = "new"
    note: str = ""
    importance: Annotated[int, motedb.Index] = 0
    rank: int = 0
    customer: motedb.ToOne["Person"]
    helpers: motedb.ToMany["Person"]


class Vec(motedb.Entity):
    id: int = 0
    v: Annotated[list[float], motedb.Vector(2)] = motedb.field(default_factory=lambda: [0.0, 0.0])
    text: str = ""
    data: dict = motedb.field(default_factory=dict)


@pytest.fixture
def store(tmp_path):
    with motedb.open(tmp_path / "trial.mote") as s:
        yield s


# ---- wrong results ----------------------------------------------------------------------------


def test_projections_give_to_many_ids(store):
    people = store.box(Person)
    ann, bob = Person(name="Ann"), Person(name="Bob")
    people.put_many([ann, bob])
    orders = store.box(Order)
    o = Order(customer=ann, helpers=[bob, ann])
    orders.put(o)
    orders.put(Order())
    assert orders.query().dicts(Order.customer, Order.helpers) == [
        {"customer": ann.id, "helpers": [ann.id, bob.id]}, {"customer": None, "helpers": []}]
    assert orders.query(Order.id == o.id).tuples("helpers") == [([ann.id, bob.id],)]
    assert orders.query().dicts()[0]["helpers"] == [ann.id, bob.id]


def test_raw_id_of_a_to_one_cannot_be_declared_again():
    with pytest.raises(TypeError, match="Bad.customer_id: the to-one relation Bad.customer "
                                        "provides customer_id"):
        class Bad(motedb.Entity):
            id: int = 0
            customer: motedb.ToOne["Person"]
            customer_id: int = 0


def test_ids_anywhere_and_automatic_ids_below_two_to_the_63(store):
    box = store.box(Person)
    top = Person(id=2**64 - 1, name="top")
    assert box.put(top, mode="insert") == 2**64 - 1
    assert box.put(Person(name="auto")) == 1  # the huge id does not move the sequence
    box.put(Person(id=2**63 - 2, name="near"))
    assert box.put(Person(name="last")) == 2**63 - 1
    with pytest.raises(motedb.Error, match="automatic ids are used up"):
        box.put(Person(name="one more"))
    assert box.put(Person(id=2**63, name="explicit")) == 2**63
    assert box.get(2**64 - 1).name == "top"


def test_the_same_instance_twice_in_put_many_is_one_object(store):
    box = store.box(Person)
    p, q = Person(name="p"), Person(name="q")
    ids = box.put_many([p, q, p, p])
    assert ids == [1, 2, 1, 1] and p.id == 1 and q.id == 2
    assert box.count() == 2
    p.name = "p2"
    assert box.put_many([p, p]) == [1, 1]
    assert box.get(1).name == "p2" and box.count() == 2
    a = Person(name="a")
    with pytest.raises(motedb.ExistsError, match="put_many: object 2 of 3"):
        box.put_many([a, a, p], mode="insert")  # errors name the place in the given list


def test_a_to_many_list_is_a_set(store):
    people, orders = store.box(Person), store.box(Order)
    ann = Person(name="Ann")
    people.put(ann)
    o = Order(helpers=[ann, ann])
    orders.put(o)
    assert [h.name for h in orders.get(o.id).helpers] == ["Ann"]


# ---- misleading errors ---------------------------------------------------------------------


def test_vector_overflow_message_has_the_number(store):
    with pytest.raises(OverflowError, match=r"Vec.v: vector element 1 \(1e\+300\) is out of "
                                            r"range for float32"):
        store.box(Vec).put(Vec(v=[0.0, 1e300]))


def test_lone_surrogate_names_entity_and_property(store):
    with pytest.raises(UnicodeEncodeError, match="Vec.text: a str with a lone surrogate"):
        store.box(Vec).put(Vec(text="ab\udcffc"))
    with pytest.raises(UnicodeEncodeError, match="Vec.data: a str with a lone surrogate"):
        store.box(Vec).put(Vec(data={"k": "\ud800"}))


# ---- small features -------------------------------------------------------------------------


def test_partial_update(store):
    box = store.box(Order)
    o = Order(status="new", note="gift")
    box.put(o)
    stale = box.get(o.id)
    box.update(o.id, status="paid")
    stale.note = "wrapped"
    box.update(stale, note=stale.note)  # only note: status stays "paid"
    got = box.get(o.id)
    assert (got.status, got.note) == ("paid", "wrapped")
    assert box.query(Order.status == "paid").ids() == [o.id]  # the index followed
    box.update(o, importance=3)
    assert o.importance == 3 and box.get(o.id).importance == 3
    with pytest.raises(motedb.NotFoundError, match="no object with id 99"):
        box.update(99, status="x")
    with pytest.raises(TypeError, match="Order has no property 'nope'"):
        box.update(o.id, nope=1)
    with pytest.raises(TypeError, match="ids do not change"):
        box.update(o.id, id=5)
    with pytest.raises(TypeError, match="to-many relation"):
        box.update(o.id, helpers=[])
    with pytest.raises(TypeError, match="Order.importance: expected int"):
        box.update(o.id, importance="high")
    assert box.get(o.id).importance == 3


def test_group_count(store):
    box = store.box(Order)
    box.put_many([Order(status=s, rank=r) for s, r in
                  [("new", 1), ("paid", 2), ("new", 2), ("sent", 1), ("new", 3)]])
    assert box.query().group_count(Order.status) == {"new": 3, "paid": 1, "sent": 1}
    assert list(box.query().group_count(Order.status)) == ["new", "paid", "sent"]
    assert box.query(Order.rank >= 2).group_count(Order.status) == {"new": 2, "paid": 1}
    assert box.query().group_count(Order.rank) == {1: 2, 2: 2, 3: 1}  # no index: a pass
    assert box.query().group_count(Order.customer) == {None: 5}
    assert box.query().limit(0).group_count(Order.status) == {}
    with pytest.raises(TypeError):
        box.query().group_count(Order.helpers)
    with pytest.raises(TypeError):
        box.query().group_count(Person.name)


def test_iterating_a_query_builds_objects_lazily_from_one_snapshot(store):
    box = store.box(Order)
    box.put_many([Order(rank=i) for i in range(10)])
    q = box.query(Order.rank >= 5)
    assert [o.rank for o in q] == [5, 6, 7, 8, 9]
    it = q.iter()
    first = next(it)
    box.remove_many(q.ids())  # another transaction: the iteration's snapshot holds
    box.put(Order(rank=100))
    assert [first.rank] + [o.rank for o in it] == [5, 6, 7, 8, 9]
    assert [o.rank for o in q] == [100]
    with store.write():  # inside a transaction: its view, objects it removes are skipped
        it = iter(box.query())
        assert next(it).rank == 0
        box.remove(2)
        assert [o.rank for o in it] == [2, 3, 4, 100]  # id 2 (rank 1) skipped
    it = iter(box.query())
    with store.write():
        pass
    assert next(it).rank == 0  # its own snapshot: not tied to that transaction
    with store.read():
        inside = iter(box.query())
    with pytest.raises(motedb.TransactionError, match="has ended"):
        next(inside)
    it.close()
    assert list(it) == []
    del it, inside
    gc.collect()


def test_store_close_ends_iterations(tmp_path):
    s = motedb.open(tmp_path / "close.mote")
    box = s.box(Order)
    box.put_many([Order(), Order()])
    it = iter(box.query())
    next(it)
    s.close()  # not refused: the iteration's snapshot is released
    with pytest.raises(motedb.ClosedError):
        next(it)


def test_query_of_none_is_no_condition(store):
    box = store.box(Order)
    box.put_many([Order(rank=1), Order(rank=2)])
    only = None
    assert box.query(only).count() == 2
    assert box.query(None, Order.rank > 1).ids() == [2]


@pytest.mark.parametrize("indexed", [True, False])
def test_int_property_compared_with_floats(store, indexed):
    box = store.box(Order)
    box.put_many([Order(importance=i, rank=i) for i in range(-3, 8)])
    p = Order.importance if indexed else Order.rank
    values = list(range(-3, 8))

    def ids(cond):
        return sorted(o.rank for o in box.query(cond).find())

    for f in [4.5, 4.0, -2.5, 1e300, -1e300, math.inf, -math.inf, math.nan, 0.1]:
        assert ids(p >= f) == [v for v in values if v >= f], f
        assert ids(p > f) == [v for v in values if v > f], f
        assert ids(p <= f) == [v for v in values if v <= f], f
        assert ids(p < f) == [v for v in values if v < f], f
        assert ids(p == f) == [v for v in values if v == f], f
        assert ids(p != f) == [v for v in values if v != f], f
    assert ids(p.between(-1.5, 2.5)) == [-1, 0, 1, 2]
    assert ids(p.between(-math.inf, 0.5)) == [-3, -2, -1, 0]
    assert ids(p.between(2.5, 2.7)) == []
    assert ids(p.in_([1.0, 2.5, 3])) == [1, 3]
    assert ids(p.not_in([1.0, 2.5])) == [v for v in values if v != 1]
    assert ids(~(p >= 4.5)) == [v for v in values if v < 4.5]
