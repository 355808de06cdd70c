"""Vector search: Property.nearest() and Query.find_with_scores() against a brute-force
reference in Python, with filters of every selectivity, offset/limit, buffers, and the errors.

The vectors are synthetic (small integers, so every sum is exact in float32 as in Python's
doubles: the reference's distances equal the library's bit for bit, and the order of ties,
by id, can be compared exactly)."""

import array
import math
import random
from typing import Annotated, Optional

import pytest

import motedb

DIM = 16


class Memory(motedb.Entity):
    id: int = 0
    topic: Annotated[int, motedb.Index] = 0
    level: int = 0
    embedding: Annotated[Optional[list[float]], motedb.Vector(DIM)] = None


def distance(a, q, kind):
    dot = sum(x * y for x, y in zip(a, q))
    if kind == "euclidean":
        return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, q)))
    if kind == "dot":
        return -dot
    aa, qq = sum(x * x for x in a), sum(y * y for y in q)
    c = dot / (math.sqrt(aa) * math.sqrt(qq)) if aa > 0 and qq > 0 else 0.0
    return 1.0 - max(-1.0, min(1.0, c))


@pytest.fixture()
def memories(tmp_path):
    rng = random.Random(7)
    objs = []
    for i in range(1, 1201):
        vec = None if i % 53 == 0 else [float(rng.randint(-3, 3)) for _ in range(DIM)]
        if i % 61 == 0:
            vec = [0.0] * DIM  # an all-zero vector
        objs.append(Memory(topic=rng.randrange(50), level=rng.randrange(10), embedding=vec))
    store = motedb.open(tmp_path / "vec.mote")
    box = store.box(Memory)
    box.put_many(objs)
    yield store, box, objs
    store.close()


def reference(objs, q, kind, k, keep=lambda o: True, offset=0, limit=0):
    scored = sorted((distance(o.embedding, q, kind), o.id) for o in objs
                    if o.embedding is not None and keep(o))
    top = scored[:k][offset:]
    return top[:limit] if limit else top


@pytest.mark.parametrize("kind", ["cosine", "euclidean", "dot"])
def test_nearest_equals_brute_force(memories, kind):
    store, box, objs = memories
    rng = random.Random(kind)
    for _ in range(25):
        q = [float(rng.randint(-3, 3)) for _ in range(DIM)]
        k = rng.choice([1, 5, 10, 100, 5000])
        which = rng.randrange(3)
        if which == 0:
            cond, keep = None, (lambda o: True)
        elif which == 1:  # 2 % selectivity: exactly k results whenever k match
            t = rng.randrange(50)
            cond, keep = Memory.topic == t, (lambda o, t=t: o.topic == t)
        else:  # 10 % to 90 %
            lv = rng.randrange(1, 10)
            cond, keep = Memory.level < lv, (lambda o, lv=lv: o.level < lv)
        near = Memory.embedding.nearest(q, k=k, distance=kind)
        query = box.query(near if cond is None else near & cond)
        got = [(d, o.id) for o, d in query.find_with_scores()]
        assert got == reference(objs, q, kind, k, keep)
        assert query.ids() == [i for _, i in got]
        assert [o.id for o in query.find()] == [i for _, i in got]
        assert query.count() == len(got)
        first = query.first()
        assert (first.id if first else None) == (got[0][1] if got else None)
        assert [o.id for o in query] == [i for _, i in got]
        off, lim = rng.randrange(4), rng.randrange(6)  # (limit(0): no results)
        sub = box.query(near if cond is None else cond & near).offset(off).limit(lim)
        want = reference(objs, q, kind, k, keep, off, lim) if lim else []
        assert [(d, o.id) for o, d in sub.find_with_scores()] == want


def test_float32_buffers_and_tuples(memories):
    store, box, objs = memories
    q = [1.0, -2.0] * (DIM // 2)
    as_list = box.query(Memory.embedding.nearest(q, k=7)).ids()
    as_buffer = box.query(Memory.embedding.nearest(array.array("f", q), k=7)).ids()
    as_tuple = box.query(Memory.embedding.nearest(tuple(q), k=7)).ids()
    assert as_list == as_buffer == as_tuple == [i for _, i in reference(objs, q, "cosine", 7)]
    rows = box.query(Memory.embedding.nearest(q, k=3)).tuples("id", "topic")
    assert [r[0] for r in rows] == as_list[:3]


def test_nearest_in_a_transaction_sees_its_writes(memories):
    store, box, objs = memories
    q = [3.0] * DIM
    with store.write():
        new = box.put(Memory(topic=1, embedding=[3.0] * DIM))
        top = box.query(Memory.embedding.nearest(q, k=1, distance="euclidean")).find_with_scores()
        assert top[0][0].id == new and top[0][1] == 0.0
    assert box.query(Memory.embedding.nearest(q, k=1)).ids() == [new]


def test_nearest_errors(memories):
    store, box, objs = memories
    q = [1.0] * DIM
    with pytest.raises(ValueError, match="vector of 3 floats, expected 16"):
        Memory.embedding.nearest([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="component 4 of the vector is NaN"):
        Memory.embedding.nearest([0.0] * 4 + [math.nan] + [0.0] * 11)
    with pytest.raises(ValueError, match="infinite"):
        Memory.embedding.nearest([math.inf] + [0.0] * 15)
    with pytest.raises(ValueError, match="k must be at least 1"):
        Memory.embedding.nearest(q, k=0)
    with pytest.raises(TypeError, match="k is an int"):
        Memory.embedding.nearest(q, k=2.5)
    with pytest.raises(ValueError, match="'cosine', 'euclidean' or 'dot'"):
        Memory.embedding.nearest(q, distance="manhattan")
    with pytest.raises(TypeError, match="not a vector property"):
        Memory.topic.nearest(q)
    near = Memory.embedding.nearest(q)
    with pytest.raises(TypeError, match="combine it with & only"):
        near | (Memory.topic == 1)
    with pytest.raises(TypeError, match="cannot be negated"):
        ~(near & (Memory.topic == 1))
    with pytest.raises(TypeError, match="one nearest"):
        near & Memory.embedding.nearest(q, k=3)
    with pytest.raises(TypeError, match="ordered by distance"):
        box.query(near).order_by(Memory.topic)
    with pytest.raises(TypeError, match="no nearest"):
        box.query(Memory.topic == 1).find_with_scores()
    assert "nearest" in repr(near) and "k=10" in repr(near)
    assert box.query(near).plan() == "exact nearest, scan"
    assert box.query(near & (Memory.topic == 3)).plan() == "exact nearest, index"
