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
    # scores with chosen properties instead of objects, in the same order
    near = box.query(Memory.embedding.nearest(q, k=5) & (Memory.topic < 40))
    want = [((o.id, o.topic), d) for o, d in near.find_with_scores()]
    assert near.find_with_scores("id", Memory.topic) == want and len(want) == 5
    with pytest.raises(ValueError, match="is not a property"):
        near.find_with_scores("nope")
    with pytest.raises(TypeError, match="no nearest"):
        box.query(Memory.topic == 1).find_with_scores("id")
    # puts: a float32 buffer is read in place, a strided one (not contiguous) and a
    # float64 one element by element, a buffer of the wrong length refused
    wide = array.array("f", [float(i) for i in range(2 * DIM)])
    doubles = array.array("d", [float(i) for i in range(DIM)])
    ids = box.put_many([Memory(embedding=array.array("f", q)), Memory(embedding=memoryview(wide)[::2]),
                        Memory(embedding=doubles)])
    assert box.get(ids[0]).embedding == q
    assert box.get(ids[1]).embedding == [float(i) for i in range(0, 2 * DIM, 2)]
    assert box.get(ids[2]).embedding == [float(i) for i in range(DIM)]
    with pytest.raises(ValueError, match=f"vector of {2 * DIM} floats, expected {DIM}"):
        box.put(Memory(embedding=wide))


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
    with pytest.raises(TypeError, match="with & only"):
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


# ---- vector indexes (motedb.Hnsw) ------------------------------------------------------

class Indexed(motedb.Entity):
    id: int = 0
    topic: Annotated[int, motedb.Index] = 0
    embedding: Annotated[Optional[list[float]], motedb.Vector(DIM, index=motedb.Hnsw())] = None


def clustered(rng, n):
    """Synthetic clustered vectors (40 centres, Gaussian spread): the shape of embeddings."""
    centres = [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(40)]
    return [[c + rng.gauss(0, 0.3) for c in rng.choice(centres)] for _ in range(n)]


@pytest.fixture()
def indexed(tmp_path):
    rng = random.Random(11)
    vecs = clustered(rng, 6000)
    store = motedb.open(tmp_path / "hnsw.mote")
    box = store.box(Indexed)
    objs = [Indexed(topic=rng.randrange(100), embedding=v) for v in vecs]
    box.put_many(objs)
    yield store, box, objs, rng
    store.close()


def test_index_recall_and_distances(indexed):
    """recall@10 >= 0.95 at the default parameters; every distance is the exact one."""
    store, box, objs, rng = indexed
    found = total = 0
    for _ in range(40):
        q = [rng.gauss(0, 1) for _ in range(DIM)]
        got = box.query(Indexed.embedding.nearest(q, k=10, exact=False)).find_with_scores()
        want = reference(objs, q, "cosine", 10)
        found += len({o.id for o, _ in got} & {i for _, i in want})
        total += 10
        assert len(got) == 10
        for o, d in got:
            assert d == pytest.approx(distance(o.embedding, q, "cosine"), abs=1e-5)
        assert [d for _, d in got] == sorted(d for _, d in got)
    assert found / total >= 0.95


@pytest.mark.parametrize("share", [1, 10, 50])
def test_index_filtered_gives_exactly_k(indexed, share):
    """A filter of 1, 10 and 50 % through the index: exactly k results, all matching."""
    store, box, objs, rng = indexed
    for _ in range(10):
        q = [rng.gauss(0, 1) for _ in range(DIM)]
        got = box.query(Indexed.embedding.nearest(q, k=10, exact=False)
                        & (Indexed.topic < share)).find()
        assert len(got) == 10
        assert all(o.topic < share for o in got)
        want = {i for _, i in reference(objs, q, "cosine", 10, keep=lambda o: o.topic < share)}
        assert len({o.id for o in got} & want) >= 8


def test_index_follows_updates_removes_and_reopen(indexed, tmp_path):
    store, box, objs, rng = indexed
    q = objs[100].embedding
    assert box.query(Indexed.embedding.nearest(q, k=1, exact=False)).first().id == objs[100].id
    box.remove(objs[100].id)
    assert box.query(Indexed.embedding.nearest(q, k=1, exact=False)).first().id != objs[100].id
    o = objs[200]
    o.embedding = [-x for x in q]  # now the farthest from q
    box.put(o)
    far = box.query(Indexed.embedding.nearest([-x for x in q], k=1, exact=False)).first()
    assert far.id == o.id
    with pytest.raises(RuntimeError):
        with store.write():
            box.put(Indexed(embedding=q))
            assert box.query(Indexed.embedding.nearest(q, k=1, exact=False)).first().embedding \
                == pytest.approx(q)
            raise RuntimeError("roll back")
    assert box.query(Indexed.embedding.nearest(q, k=1, exact=False)).first().embedding \
        != pytest.approx(q)
    store.close()
    store2 = motedb.open(tmp_path / "hnsw.mote")
    box2 = store2.box(Indexed)
    assert box2.query(Indexed.embedding.nearest([-x for x in q], k=1, exact=False)).first().id \
        == o.id
    store2.close()


def vector_class(index_src):
    """class Memory (the fixture's entity name) with `embedding`'s index given by index_src."""
    ns = {"motedb": motedb, "Annotated": Annotated, "Optional": Optional, "DIM": DIM}
    exec("class Memory(motedb.Entity):\n id: int = 0\n topic: Annotated[int, motedb.Index] = 0\n"
         " level: int = 0\n embedding: Annotated[Optional[list[float]], motedb.Vector(DIM"
         f"{index_src})] = None\n", ns)
    return ns["Memory"]


def test_index_declared_on_existing_data_and_changed(tmp_path):
    """A class that gains the index builds it from the stored objects; other parameters
    rebuild it; a class without the marker drops the index, never the vectors."""
    rng = random.Random(3)
    with motedb.open(tmp_path / "a.mote") as store:
        store.box(Memory).put_many([Memory(embedding=v) for v in clustered(rng, 3000)])
    q = [rng.gauss(0, 1) for _ in range(DIM)]
    for src, dist in [(", index=motedb.Hnsw()", "cosine"),
                      (", index=motedb.Hnsw(distance='euclidean', m=8)", "euclidean"),
                      ("", None)]:
        cls = vector_class(src)
        with motedb.open(tmp_path / "a.mote") as store:
            box = store.box(cls)
            assert box.count() == 3000
            want = box.query(cls.embedding.nearest(q, k=10, distance=dist, exact=True)).ids()
            if dist is None:
                with pytest.raises(ValueError, match="no vector index"):
                    cls.embedding.nearest(q, exact=False)
                continue
            got = box.query(cls.embedding.nearest(q, k=10, exact=False)).ids()
            assert len(got) == 10 and len(set(got) & set(want)) >= 9


def test_index_parameters_and_errors():
    assert repr(motedb.Hnsw()) == "motedb.Hnsw(distance='cosine', m=16, ef_construction=200)"
    assert repr(motedb.Vector(4, index=motedb.Hnsw)) == \
        "motedb.Vector(4, index=motedb.Hnsw(distance='cosine', m=16, ef_construction=200))"
    for bad in [dict(distance="manhattan"), dict(m=1), dict(m=101), dict(m=True),
                dict(m=16, ef_construction=8), dict(ef_construction=5000)]:
        with pytest.raises(ValueError, match="motedb.Hnsw"):
            motedb.Hnsw(**bad)
    with pytest.raises(TypeError, match="index is motedb.Hnsw"):
        motedb.Vector(4, index="hnsw")
    q = [0.5] * DIM
    with pytest.raises(ValueError, match="ef must be"):
        Indexed.embedding.nearest(q, ef=0)
    with pytest.raises(TypeError, match="ef is an int"):
        Indexed.embedding.nearest(q, ef=1.5)
    with pytest.raises(TypeError, match="exact is True, False or None"):
        Indexed.embedding.nearest(q, exact=1)
    with pytest.raises(ValueError, match="another distance"):
        Indexed.embedding.nearest(q, distance="dot", exact=False)
    with pytest.raises(ValueError, match="no vector index"):
        Memory.embedding.nearest(q, exact=False)
    assert "ef=50, exact=False" in repr(Indexed.embedding.nearest(q, ef=50, exact=False))


def test_index_refuses_nan_and_writes_nothing(tmp_path):
    with motedb.open(tmp_path / "n.mote") as store:
        box = store.box(Indexed)
        box.put(Indexed(embedding=[1.0] * DIM))
        bad = [1.0] * DIM
        bad[3] = float("nan")
        with pytest.raises(ValueError, match="component 3"):
            box.put_many([Indexed(embedding=[2.0] * DIM), Indexed(embedding=bad)])
        assert box.count() == 1


def test_page_size_at_creation(tmp_path):
    """A 384-float vector (1,536 bytes) is more than a third of a 4 KB page, so each one
    takes an overflow page of its own; with 8 KB pages it stays in the tree's leaves."""
    sizes = {}
    for ps in (None, 8192):
        path = tmp_path / f"p{ps}.mote"
        with motedb.open(path, page_size=ps) as store:
            box = store.box(Big)
            box.put_many([Big(embedding=[float(i % 7)] * 384) for i in range(300)])
        with motedb.open(path, page_size=16384) as store:  # kept by the file: ignored
            assert store.box(Big).count() == 300
        sizes[ps] = path.stat().st_size
    raw = 300 * 384 * 4
    assert sizes[None] > 2 * raw and sizes[8192] < 1.5 * raw, sizes
    for bad in (0, 1000, 4097, 131072, True, "8192"):
        with pytest.raises(ValueError, match="page_size must be a power of two"):
            motedb.open(tmp_path / "bad.mote", page_size=bad)


class Big(motedb.Entity):
    id: int = 0
    embedding: Annotated[list[float], motedb.Vector(384)] = motedb.field(
        default_factory=lambda: [0.0] * 384)
