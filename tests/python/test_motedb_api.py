"""The motedb Python API: entities, values, store, boxes, transactions, queries, errors."""

import datetime as dt
import math
import os
import subprocess
import sys
from decimal import Decimal
from typing import Annotated, Optional

import pytest

import motedb

UTC = dt.timezone.utc


class Note(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.Index]
    level: Annotated[int, motedb.Int16, motedb.Index] = 0
    score: float = 0.0
    note: str | None = None


class AllTypes(motedb.Entity):
    id: int = 0
    b: bool = False
    i8: Annotated[int, motedb.Int8] = 0
    i16: Annotated[int, motedb.Int16] = 0
    i32: Annotated[int, motedb.Int32] = 0
    i64: int = 0
    f32: Annotated[float, motedb.Float32] = 0.0
    f64: float = 0.0
    s: str = ""
    raw: bytes = b""
    ts: dt.datetime = dt.datetime(1970, 1, 1, tzinfo=UTC)
    day: dt.date = dt.date(1970, 1, 1)
    amount: Decimal = Decimal("0")
    meta: dict = motedb.field(default_factory=dict)
    items: list = motedb.field(default_factory=list)
    emb: Annotated[list[float], motedb.Vector(3)] = motedb.field(default_factory=lambda: [0.0] * 3)
    opt_i: Optional[int] = None
    opt_s: str | None = None
    opt_ts: dt.datetime | None = None
    opt_dec: Decimal | None = None


CIRCULAR: dict = {}
CIRCULAR["self"] = CIRCULAR


class Person(motedb.Entity):
    id: int = 0
    email: Annotated[str, motedb.Unique]
    name: str = ""


@pytest.fixture
def store(tmp_path):
    s = motedb.open(tmp_path / "test.mote", sync=False)
    yield s
    s.close()


# ---- entity classes ------------------------------------------------------------------------


def test_entity_class_basics():
    n = Note(text="hi", level=3)
    assert n.id == 0 and n.text == "hi" and n.level == 3 and n.score == 0.0 and n.note is None
    assert Note.__slots__ == ("id", "text", "level", "score", "note")
    assert isinstance(Note.level, motedb.Property)
    assert Note.level.name == "level" and Note.level.entity is Note
    assert repr(n) == "Note(id=0, text='hi', level=3, score=0.0, note=None)"
    assert n == Note(text="hi", level=3)
    assert n != Note(text="hi", level=4)
    assert n != "Note"
    with pytest.raises(TypeError):
        hash(n)
    with pytest.raises(AttributeError):
        n.unknown = 1  # slots: no other attributes
    n.level = 5
    assert n.level == 5


def test_constructor_errors():
    with pytest.raises(TypeError, match="missing required keyword argument 'text'"):
        Note()
    with pytest.raises(TypeError, match="unexpected keyword argument 'txt'"):
        Note(text="a", txt="b")
    with pytest.raises(TypeError, match="keyword arguments only"):
        Note("a")
    with pytest.raises(TypeError, match="cannot be instantiated|not an entity class"):
        motedb.Entity()


def test_defaults_and_factories():
    a, b = AllTypes(), AllTypes()
    assert a.meta == {} and a.meta is not b.meta
    assert a.emb == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="default_factory"):
        class Bad(motedb.Entity):
            id: int = 0
            tags: list = []


@pytest.mark.parametrize("body, match", [
    ("x: int", "declare the object id"),
    ("id: str = ''", "id must be declared"),
    ("id: int = 0\n    x: set", "not supported"),
    ("id: int = 0\n    x: int | str", "unions are not supported"),
    ("id: int = 0\n    x: Annotated[str, motedb.Int16]", "needs an int"),
    ("id: int = 0\n    x: Annotated[dict, motedb.Index]", "cannot be indexed"),
])
def test_bad_entity_definitions(body, match):
    src = f"class Bad(motedb.Entity):\n    {body}\n"
    with pytest.raises((TypeError, ValueError), match=match):
        exec(src, {"motedb": motedb, "Annotated": Annotated})


def test_no_entity_subclassing():
    with pytest.raises(TypeError, match="subclassing"):
        class Sub(Note):
            extra: int = 0


def test_string_annotations():
    ns = {}
    exec("from __future__ import annotations\nimport motedb, datetime\n"
         "from typing import Annotated\n"
         "class Fwd(motedb.Entity):\n"
         "    id: int = 0\n"
         "    when: datetime.datetime | None = None\n"
         "    n: Annotated[int, motedb.Int8] = 1\n", ns)
    Fwd = ns["Fwd"]
    assert Fwd().n == 1 and Fwd().when is None


# ---- store ---------------------------------------------------------------------------------


def test_open_close_and_context_manager(tmp_path):
    path = tmp_path / "a.mote"
    with motedb.open(path) as s:
        assert not s.closed and s.path == str(path)
        s.box(Note).put(Note(text="x"))
    assert s.closed
    s.close()  # idempotent
    with pytest.raises(motedb.ClosedError):
        s.box(Note)
    with motedb.Store(str(path), readonly=True) as s:
        assert s.readonly
        assert s.box(Note).count() == 1
        with pytest.raises(motedb.ReadOnlyError):
            s.box(Note).put(Note(text="y"))
    with pytest.raises(motedb.Error):
        motedb.open(tmp_path / "missing.mote", create=False)


def test_repack_at_close(tmp_path):
    """open(repack=True): the close rewrites a store that many small commits left a
    quarter free pages or more (leaves part full) into about half the file, objects as
    they were; the default keeps the file as it is."""
    files = {}
    for repack in (False, True):
        path = tmp_path / f"r{int(repack)}.mote"
        with motedb.open(path, repack=repack) as s:  # (a store opened sync=False is left as is)
            box = s.box(Note)
            ids = [box.put(Note(text=f"note {i:04} " + "x" * 150, level=i % 7)) for i in range(300)]
            for i in ids[::3]:
                box.remove(i)  # one commit each, as ids[::3] go
        files[repack] = os.path.getsize(path)
        with motedb.open(path) as s:
            box = s.box(Note)
            assert box.count() == 200
            assert sorted(n.id for n in box.all()) == sorted(set(ids) - set(ids[::3]))
            assert box.query(Note.level == 3).count() == sum(1 for i in range(300) if i % 3 and i % 7 == 3)
    assert files[True] * 10 <= files[False] * 6, files


def test_use_after_close(tmp_path):
    s = motedb.open(tmp_path / "a.mote")
    box = s.box(Note)
    box.put(Note(text="x"))
    q = box.query(Note.level == 0)
    s.close()
    for fn in (lambda: box.put(Note(text="y")), lambda: box.get(1), box.count, box.all,
               q.find, q.count, s.write, s.read):
        with pytest.raises(motedb.ClosedError):
            fn()


def test_open_twice_in_process(tmp_path):
    with motedb.open(tmp_path / "a.mote"):
        with pytest.raises(motedb.BusyError):
            motedb.open(tmp_path / "a.mote")


def test_store_locked_by_other_process(tmp_path):
    """exclusive=True keeps other processes out (shared opens: test_motedb_processes.py)."""
    path = str(tmp_path / "locked.mote")
    code = ("import motedb, sys\n"
            "s = motedb.open(sys.argv[1], exclusive=True)\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "s.close()\n")
    p = subprocess.Popen([sys.executable, "-c", code, path], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "open"
        with pytest.raises(motedb.StoreLockedError) as ei:
            motedb.open(path)
        assert "another process" in str(ei.value)
        assert ei.value.code == 8
    finally:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(timeout=30)
    with motedb.open(path):  # free again
        pass


def test_corrupt_file(tmp_path):
    path = tmp_path / "junk.mote"
    path.write_bytes(b"this is not a motedb file" * 500)
    with pytest.raises(motedb.CorruptError):
        motedb.open(path)


# ---- box -----------------------------------------------------------------------------------


def test_put_get_update(store):
    box = store.box(Note)
    assert store.box(Note) is box  # cached per class
    n = Note(text="hello", level=3)
    assert box.put(n) == 1 and n.id == 1
    got = box.get(1)
    assert got == n and got is not n
    n.level = 4
    assert box.put(n) == 1
    assert box.get(1).level == 4
    assert box.get(2) is None
    assert box.count() == 1 and box.contains(1) and not box.contains(2)


def test_put_many_and_get_many(store):
    box = store.box(Note)
    objs = [Note(text=f"t{i}", level=i) for i in range(100)]
    ids = box.put_many(objs)
    assert ids == list(range(1, 101)) and [o.id for o in objs] == ids
    assert box.put_many([]) == []
    more = [Note(text="a"), Note(text="b")]
    assert box.put_many(iter(more)) == [101, 102]
    got = box.get_many([1, 50, 999, 102])
    assert got[0] == objs[0] and got[1] == objs[49] and got[2] is None and got[3] == more[1]
    assert [o.id for o in box.all()] == list(range(1, 103))
    assert box.count() == 102


def test_remove(store):
    box = store.box(Note)
    objs = [Note(text=str(i)) for i in range(10)]
    box.put_many(objs)
    assert box.remove(1) is True and box.remove(1) is False
    assert box.remove(objs[1]) is True
    assert box.remove_many([3, 4, 4, 99]) == 2
    assert box.remove_many(objs[4:6]) == 2
    assert box.count() == 4
    assert box.remove_all() == 4 and box.count() == 0 and box.remove_all() == 0
    # ids are not reused
    assert box.put(Note(text="new")) == 11


def test_put_modes(store):
    box = store.box(Note)
    n = Note(text="a")
    box.put(n, mode="insert")
    with pytest.raises(motedb.ExistsError):
        box.put(n, mode="insert")
    with pytest.raises(motedb.NotFoundError, match="no object with id 77"):
        box.put(Note(id=77, text="x"), mode="update")
    with pytest.raises(motedb.NotFoundError):
        box.put(Note(text="x"), mode="update")
    with pytest.raises(motedb.NotFoundError):
        box.put_many([Note(id=1, text="ok"), Note(id=78, text="x")], mode="update")
    assert box.get(1).text == "a"  # the failed put_many wrote nothing
    with pytest.raises(ValueError, match="mode"):
        box.put(n, mode="replace")
    # upsert with an explicit unknown id inserts with that id
    assert box.put(Note(id=500, text="z")) == 500 and box.get(500).text == "z"
    assert box.put(Note(text="next")) == 501


def test_all_value_types_round_trip(store):
    box = store.box(AllTypes)
    o = AllTypes(b=True, i8=-128, i16=32767, i32=-2**31, i64=2**63 - 1, f32=1.5, f64=-0.1,
                 s="héllo \x00 wörld ✓ 🎉", raw=b"\x00\xff bytes", day=dt.date(2024, 2, 29),
                 ts=dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
                 amount=Decimal("-12.50"), meta={"a": [1, 2.5, None], "ü": {"x": True}},
                 items=[1, "two", [3]], emb=[0.5, -1.25, 3.0], opt_i=-5, opt_s="",
                 opt_ts=dt.datetime(1900, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))),
                 opt_dec=Decimal("1E+3"))
    box.put(o)
    g = box.get(o.id)
    assert g == o
    assert g.opt_ts == o.opt_ts and g.opt_ts.tzinfo is UTC  # returned as aware UTC
    assert g.amount.as_tuple() == Decimal("-12.50").as_tuple()  # exact, with its exponent
    assert str(g.opt_dec) == "1E+3"
    e = AllTypes(opt_i=None)
    box.put(e)
    assert box.get(e.id) == e and box.get(e.id).opt_i is None


def test_special_values(store):
    box = store.box(AllTypes)
    o = AllTypes(f64=float("nan"), f32=float("inf"), amount=Decimal("NaN"), i64=-2**63)
    box.put(o)
    g = box.get(o.id)
    assert math.isnan(g.f64) and g.f32 == math.inf and g.amount.is_nan() and g.i64 == -2**63
    # a float32 property stores float32 precision
    o2 = AllTypes(f32=0.1)
    box.put(o2)
    assert box.get(o2.id).f32 == pytest.approx(0.1, rel=1e-7) and box.get(o2.id).f32 != 0.1
    # vectors from tuples and array('f')
    import array
    o3 = AllTypes(emb=(1, 2, 3))
    o4 = AllTypes(emb=array.array("f", [4, 5, 6]))
    box.put_many([o3, o4])
    assert box.get(o3.id).emb == [1.0, 2.0, 3.0] and box.get(o4.id).emb == [4.0, 5.0, 6.0]
    # bytearray / memoryview are stored as bytes
    o5 = AllTypes(raw=bytearray(b"ab"))
    box.put(o5)
    assert box.get(o5.id).raw == b"ab"


def test_datetime_rules(store):
    box = store.box(AllTypes)
    with pytest.raises(TypeError, match="naive datetime"):
        box.put(AllTypes(ts=dt.datetime(2024, 1, 1)))
    with pytest.raises(TypeError, match="expected aware datetime, got date"):
        box.put(AllTypes(ts=dt.date(2024, 1, 1)))
    with pytest.raises(TypeError, match="expected date, got datetime"):
        box.put(AllTypes(day=dt.datetime(2024, 1, 1, tzinfo=UTC)))
    with pytest.raises(OverflowError, match="nanosecond"):
        box.put(AllTypes(ts=dt.datetime(2300, 1, 1, tzinfo=UTC)))
    cet = dt.timezone(dt.timedelta(hours=1))
    o = AllTypes(ts=dt.datetime(2024, 1, 1, 12, 0, tzinfo=cet))
    box.put(o)
    assert box.get(o.id).ts == dt.datetime(2024, 1, 1, 11, 0, tzinfo=UTC)
    old = AllTypes(ts=dt.datetime(1677, 9, 22, tzinfo=UTC))
    box.put(old)
    assert box.get(old.id).ts == old.ts
    assert box.count() == 2


@pytest.mark.parametrize("kw, exc, match", [
    ({"i8": 128}, OverflowError, r"AllTypes.i8: 128 is out of range for Int8 \(-128..127\)"),
    ({"i16": 40000}, OverflowError, r"AllTypes.i16: 40000 is out of range for Int16"),
    ({"i16": -32769}, OverflowError, "Int16"),
    ({"i32": 2**31}, OverflowError, "Int32"),
    ({"i64": 2**63}, OverflowError, "int64"),
    ({"f32": 1e39}, OverflowError, "Float32"),
    ({"i64": 1.5}, TypeError, "AllTypes.i64: expected int, got float"),
    ({"i64": "1"}, TypeError, "expected int, got str"),
    ({"b": 1}, TypeError, "expected bool"),
    ({"f64": "x"}, TypeError, "expected float"),
    ({"s": b"x"}, TypeError, "expected str"),
    ({"raw": "x"}, TypeError, "expected bytes"),
    ({"amount": 1.5}, TypeError, "expected Decimal or int"),
    ({"meta": [1]}, TypeError, "expected dict"),
    ({"items": {}}, TypeError, "expected list"),
    ({"meta": {"x": {1, 2}}}, ValueError, "not JSON serialisable"),
    ({"meta": CIRCULAR}, ValueError, "not JSON serialisable"),
    ({"emb": [1.0, 2.0]}, ValueError, "vector of 2 floats, expected 3"),
    ({"emb": [1.0, "a", 2.0]}, TypeError, "vector element 1"),
    ({"s": None}, TypeError, r"None is not allowed"),
    ({"s": "\ud800"}, UnicodeEncodeError, "surrogate"),
])
def test_bad_values(store, kw, exc, match):
    box = store.box(AllTypes)
    with pytest.raises(exc, match=match):
        box.put(AllTypes(**kw))
    with pytest.raises(exc, match=match):
        box.put_many([AllTypes(), AllTypes(**kw)])
    assert box.count() == 0  # nothing written


def test_wrong_objects_and_ids(store):
    box = store.box(Note)
    with pytest.raises(TypeError, match="expected a Note object, got Person"):
        box.put(Person(email="a"))
    with pytest.raises(TypeError, match="expected a Note object"):
        box.put_many([Note(text="a"), Person(email="a")])
    with pytest.raises(TypeError):
        box.put("Note")
    with pytest.raises(TypeError, match="id is an int"):
        box.get("1")
    with pytest.raises(ValueError, match="invalid object id"):
        box.get(-1)
    with pytest.raises(TypeError):
        box.remove(Person(email="x"))
    with pytest.raises(TypeError, match="entity class"):
        store.box(int)
    n = Note(text="x")
    n.id = -3
    with pytest.raises(ValueError):
        box.put(n)
    assert box.count() == 0


def test_unique(store):
    box = store.box(Person)
    box.put(Person(email="a@x", name="A"))
    with pytest.raises(motedb.UniqueViolationError, match=r"Person.email.*id 1"):
        box.put(Person(email="a@x", name="B"))
    with pytest.raises(motedb.UniqueViolationError):
        box.put_many([Person(email="b@x"), Person(email="b@x")])
    assert box.count() == 1
    p = box.get(1)
    p.name = "A2"
    box.put(p)  # same object keeps its value
    assert box.query(Person.email == "a@x").find()[0].name == "A2"


# ---- transactions ---------------------------------------------------------------------------


def test_write_transaction_commit_and_rollback(store):
    box = store.box(Note)
    with store.write() as txn:
        assert txn.active and txn.write and store.in_transaction
        box.put(Note(text="a"))
        box.put_many([Note(text="b"), Note(text="c")])
        assert box.count() == 3  # sees its own writes
    assert not txn.active and not store.in_transaction
    assert box.count() == 3
    with pytest.raises(RuntimeError):
        with store.write():
            box.put(Note(text="d"))
            raise RuntimeError("boom")
    assert box.count() == 3


def test_nested_transactions_join(store):
    box = store.box(Note)
    with store.write():
        box.put(Note(text="a"))
        with store.write():
            box.put(Note(text="b"))
        with store.read():
            assert box.count() == 2
    assert box.count() == 2
    # a failing nested block dooms the outer transaction
    with pytest.raises(motedb.TransactionError, match="rolled back"):
        with store.write():
            box.put(Note(text="c"))
            try:
                with store.write():
                    box.put(Note(text="d"))
                    raise KeyError
            except KeyError:
                pass
    assert box.count() == 2
    # a failed put (unique / type error) inside a transaction writes nothing; it goes on
    pbox = store.box(Person)
    with store.write():
        pbox.put(Person(email="u"))
        with pytest.raises(motedb.UniqueViolationError):
            pbox.put(Person(email="u"))
        pbox.put(Person(email="v"))
    assert pbox.count() == 2


def test_read_transaction_is_a_snapshot(store):
    box = store.box(Note)
    box.put(Note(text="a"))
    import threading
    with store.read():
        t = threading.Thread(target=lambda: box.put(Note(text="b")))
        t.start()
        t.join()
        assert box.count() == 1  # snapshot
        with pytest.raises(motedb.TransactionError, match="inside store.read"):
            box.put(Note(text="c"))
        with pytest.raises(motedb.TransactionError):
            with store.write():
                pass
    assert box.count() == 2


def test_a_cached_read_never_reads_the_file(tmp_path):
    """store.read(cached=True): an operation that needs a page the cache does not hold
    raises WouldBlockError and the transaction goes on; once an ordinary read brought
    the pages in, the same operations answer alike. Not inside another transaction."""
    path = tmp_path / "c.mote"
    with motedb.open(path) as s:
        s.box(Note).put_many([Note(text="x" * 200 + str(i), level=i % 7) for i in range(3000)])
    with motedb.open(path) as store:
        box = store.box(Note)
        box.get(1)  # (the entity opened: its schema read)
        q = box.query(Note.level == 3).order_by(Note.text.desc()).limit(5)
        with store.read(cached=True):
            with pytest.raises(motedb.WouldBlockError, match="cache"):
                box.get(2500)
            for op in (q.find, q.count, lambda: q.tuples(Note.text), lambda: list(q),
                       lambda: box.get_many([1, 2500]), box.count, lambda: q.sum(Note.level)):
                with pytest.raises(motedb.WouldBlockError):
                    op()
            assert box.get(1).text.endswith("x0")  # what is cached reads as ever
        with store.read():
            want, obj = [o.text for o in q.find()], box.get(2500)
        with store.read(cached=True):
            assert [o.text for o in q.find()] == want and box.get(2500) == obj
        with store.read():
            with pytest.raises(motedb.WouldBlockError, match="inside another transaction"):
                with store.read(cached=True):
                    pass
        with pytest.raises(TypeError):
            store.read(True)
        assert issubclass(motedb.WouldBlockError, motedb.Error)


def test_transaction_used_after_exit(store):
    box = store.box(Note)
    txn = store.write()
    with txn:
        box.put(Note(text="a"))
    with pytest.raises(motedb.TransactionError, match="already used"):
        with txn:
            pass
    with pytest.raises(motedb.TransactionError, match="already ended"):
        txn.__exit__(None, None, None)
    with pytest.raises(motedb.TransactionError, match="not entered"):
        store.write().__exit__(None, None, None)
    with pytest.raises(motedb.TransactionError):
        with store.write():
            store.close()
    assert not store.closed


def test_entity_created_in_rolled_back_transaction(store):
    class Fresh(motedb.Entity):
        id: int = 0
        x: int = 0
    with pytest.raises(KeyError):
        with store.write():
            box = store.box(Fresh)
            box.put(Fresh(x=1))
            raise KeyError
    # the box opens its entity again on next use
    box.put(Fresh(x=2))
    assert [o.x for o in box.all()] == [2]


# ---- schema evolution ----------------------------------------------------------------------------


def _define(src):
    ns = {"motedb": motedb, "Annotated": Annotated, "dt": dt}
    exec(src, ns)
    return ns["Evo"]


def test_schema_evolution(tmp_path):
    path = tmp_path / "evo.mote"
    V1 = _define("class Evo(motedb.Entity):\n id: int = 0\n name: str\n old: int = 0\n")
    with motedb.open(path) as s:
        s.box(V1).put_many([V1(name="a", old=1), V1(name="b", old=2)])
    V2 = _define("class Evo(motedb.Entity):\n id: int = 0\n"
                 " title: str = motedb.field(default='', renamed_from='name')\n"
                 " added: int = 42\n maybe: str | None = None\n"
                 " listed: list = motedb.field(default_factory=lambda: [1])\n"
                 " level: Annotated[int, motedb.Index] = 0\n")
    with motedb.open(path) as s:
        box = s.box(V2)
        objs = box.all()
        assert [(o.title, o.added, o.maybe, o.listed) for o in objs] == [
            ("a", 42, None, [1]), ("b", 42, None, [1])]
        objs[0].level = 5
        box.put(objs[0])
        assert box.query(V2.level == 5).ids() == [1]  # index built for existing objects
    V3 = _define("class Evo(motedb.Entity):\n id: int = 0\n title: str = ''\n added: str = ''\n")
    with motedb.open(path) as s:
        with pytest.raises(motedb.SchemaError, match="added"):
            s.box(V3)


# ---- queries --------------------------------------------------------------------------------------


@pytest.fixture
def notes(store):
    box = store.box(Note)
    data = [("apple", 1, 0.5, None), ("Banana", 2, 1.5, "x"), ("cherry", 3, -1.0, "y"),
            ("apricot", 1, 2.0, None), ("avocado", 5, 0.0, "z"), ("Äpfel", 2, 3.0, None)]
    box.put_many([Note(text=t, level=lv, score=s, note=nt) for t, lv, s, nt in data])
    return box


def texts(objs):
    return [o.text for o in objs]


def test_query_comparisons(notes):
    q = notes.query
    assert q(Note.level == 1).ids() == [1, 4]
    assert q(Note.level != 1).ids() == [2, 3, 5, 6]
    assert q(Note.level < 2).ids() == [1, 4]
    assert q(Note.level <= 2).ids() == [1, 2, 4, 6]
    assert q(Note.level > 2).ids() == [3, 5]
    assert q(Note.level >= 3).ids() == [3, 5]
    assert q(Note.score.between(0, 1.5)).ids() == [1, 2, 5]
    assert q(Note.level.in_([2, 5])).ids() == [2, 5, 6]
    assert q(Note.level.in_([])).ids() == []
    assert q(Note.level.not_in([1, 2])).ids() == [3, 5]
    assert q(Note.note.is_null()).ids() == [1, 4, 6]
    assert q(Note.note == None).ids() == [1, 4, 6]  # noqa: E711
    assert q(Note.note.is_not_null()).ids() == [2, 3, 5]
    assert q(Note.note != "x").ids() == [3, 5]  # NULL matches no comparison
    assert q(2 < Note.level).ids() == [3, 5]  # reflected


def test_query_strings(notes):
    q = notes.query
    assert q(Note.text.startswith("ap")).ids() == [1, 4]
    assert q(Note.text.startswith("A")).ids() == []
    assert q(Note.text.startswith("a", case_sensitive=False)).ids() == [1, 4, 5]
    assert q(Note.text.startswith("äp", case_sensitive=False)).ids() == [6]
    assert q(Note.text.endswith("e")).ids() == [1]
    assert q(Note.text.contains("an")).ids() == [2]
    assert q(Note.text.contains("AN", case_sensitive=False)).ids() == [2]
    with pytest.raises(TypeError, match="needs a str or bytes"):
        Note.level.startswith("a")


def test_query_and_or_not(notes):
    q = notes.query
    assert q(Note.level == 1, Note.text.startswith("apr")).ids() == [4]
    assert q((Note.level == 1) & Note.text.startswith("apr")).ids() == [4]
    assert q((Note.level == 5) | (Note.text == "cherry")).ids() == [3, 5]
    assert q(~(Note.level == 1)).ids() == [2, 3, 5, 6]
    assert q(~Note.level.between(2, 3)).ids() == [1, 4, 5]
    assert q(~((Note.level == 1) | (Note.level == 2))).ids() == [3, 5]
    assert q(~Note.note.is_null()).ids() == [2, 3, 5]
    with pytest.raises(TypeError, match="truth value"):
        bool(Note.level == 1)
    with pytest.raises(TypeError, match="truth value"):
        1 < Note.level < 3
    with pytest.raises(TypeError):
        ~Note.text.contains("a")


def test_query_order_offset_limit(notes):
    q = notes.query
    assert texts(q().order_by(Note.text).find()) == ["Banana", "apple", "apricot", "avocado",
                                                    "cherry", "Äpfel"]
    assert q().order_by(Note.level.desc(), Note.text).ids() == [5, 3, 2, 6, 1, 4]
    assert q().order_by(Note.level, Note.score.desc()).ids() == [4, 1, 6, 2, 3, 5]
    assert q().order_by(Note.note).ids()[:3] == [1, 4, 6]  # NULLs first by default
    assert q().order_by(Note.note.nulls_last()).ids() == [2, 3, 5, 1, 4, 6]
    assert q().order_by(Note.note.desc().nulls_last()).ids() == [5, 3, 2, 1, 4, 6]
    assert q().order_by(Note.level).offset(2).limit(3).ids() == [2, 6, 3]
    assert q(Note.level == 1).offset(1).ids() == [4]
    assert q().limit(0).find() == [] and q().limit(0).count() == 0
    assert q().offset(100).find() == []
    assert q().order_by(Note.level).offset(1).limit(2).count() == 2
    with pytest.raises(ValueError):
        q().limit(-1)
    with pytest.raises(TypeError):
        q().order_by("level")


def test_query_terminals(notes):
    q = notes.query(Note.level <= 2).order_by(Note.score)
    assert [o.id for o in q.find()] == [1, 2, 4, 6]
    assert q.first().id == 1 and q.count() == 4
    assert notes.query(Note.level == 99).first() is None
    assert q.tuples(Note.text, "level") == [("apple", 1), ("Banana", 2), ("apricot", 1),
                                            ("Äpfel", 2)]
    assert q.dicts(Note.id, Note.note)[1] == {"id": 2, "note": "x"}
    assert q.tuples()[0] == (1, "apple", 1, 0.5, None)
    with pytest.raises(ValueError, match="not a property"):
        q.tuples("nope")
    # reuse: run again after the data changed, and with new values
    notes.put(Note(text="late", level=0, score=-5.0))
    assert q.first().text == "late"
    q2 = notes.query(Note.level == 1)
    assert q2.set_parameter(Note.level, 2).ids() == [2, 6]
    with pytest.raises(ValueError, match="no condition"):
        q2.set_parameter(Note.text, "x")
    assert notes.query(Note.level == 2).remove() == 2
    assert notes.count() == 5


def test_query_ids(notes):
    q = notes.query
    assert q(Note.id == 3).ids() == [3]
    assert q(Note.id == 3).plan() == "id range"
    assert q(Note.id > 4).ids() == [5, 6]
    assert q(Note.id.between(2, 4), Note.level >= 2).ids() == [2, 3]
    assert q(Note.id.in_([6, 1, 99])).ids() == [1, 6]
    assert q(Note.id.not_in([1, 2]), Note.level == 2).ids() == [6]
    assert q(~(Note.id <= 5)).ids() == [6]
    assert q((Note.id == 1) | (Note.text == "cherry")).ids() == [1, 3]
    assert q(Note.id >= 2**64 - 1).ids() == []
    assert q(Note.id < 4).order_by(Note.level.desc()).ids() == [3, 2, 1]
    assert q(Note.id < 3).remove() == 2 and notes.count() == 4


def test_query_case_insensitive_equality(notes):
    q = notes.query
    assert q(Note.text.equals("BANANA", case_sensitive=False)).ids() == [2]
    assert q(Note.text.equals("BANANA")).ids() == []
    assert q(Note.text.equals("äpfel", case_sensitive=False)).ids() == [6]
    assert q(Note.text.not_equals("APPLE", case_sensitive=False)).count() == 5
    assert q(~Note.text.equals("apple", case_sensitive=False)).count() == 5
    assert q(Note.text.equals("Banana", case_sensitive=False)).plan() == "scan"


def test_query_plan_uses_index(notes):
    assert notes.query(Note.level == 1).plan().startswith("index")
    assert notes.query(Note.score == 1.0).plan() == "scan"


def test_query_errors(notes, store):
    with pytest.raises(TypeError, match="Note.level: expected int, got str"):
        Note.level == "x"
    with pytest.raises(TypeError, match="cannot compare with None"):
        Note.level < None
    with pytest.raises(TypeError, match="ids take"):
        Note.id.is_null()
    with pytest.raises(TypeError, match="ids are ints"):
        Note.id == "1"
    with pytest.raises(OverflowError, match="not an id"):
        Note.id == -1
    with pytest.raises(TypeError, match="needs a str or bytes"):
        Note.level.equals(1, case_sensitive=False)
    with pytest.raises(TypeError, match="only is_null"):
        AllTypes.meta == {}
    with pytest.raises(TypeError, match="cannot order"):
        AllTypes.amount.desc()
    with pytest.raises(TypeError, match="is on Person, not on Note"):
        notes.query(Person.email == "a")
    with pytest.raises(TypeError, match="cannot combine"):
        (Note.level == 1) & (Person.email == "a")
    with pytest.raises(TypeError, match="takes conditions"):
        notes.query("level == 1")
    assert AllTypes.opt_dec.is_null() is not None  # allowed on any property
    # queries on datetime / date values
    tbox = store.box(AllTypes)
    tbox.put_many([AllTypes(ts=dt.datetime(2024, 1, d, tzinfo=UTC)) for d in (1, 2, 3)])
    assert tbox.query(AllTypes.ts > dt.datetime(2024, 1, 1, 12, tzinfo=UTC)).ids() == [2, 3]
    with pytest.raises(TypeError, match="naive"):
        AllTypes.ts > dt.datetime(2024, 1, 1)


def test_condition_repr():
    assert repr(Note.level == 1) == "Note.level == 1"
    assert repr(Note.text.startswith("a", case_sensitive=False)) == \
        "Note.text.startswith('a', case_sensitive=False)"
    assert repr((Note.level == 1) | (Note.level > 2)) == "((Note.level == 1) | (Note.level > 2))"
    assert repr(Note.level.desc()) == "Note.level.desc()"


def test_error_hierarchy():
    for cls in (motedb.StoreLockedError, motedb.CorruptError, motedb.SchemaError,
                motedb.UniqueViolationError, motedb.ClosedError, motedb.NotFoundError,
                motedb.ExistsError, motedb.ReadOnlyError, motedb.BusyError,
                motedb.TransactionError, motedb.ForkedError):
        assert issubclass(cls, motedb.Error)


def test_store_in_other_thread_transaction_blocks_writer(store):
    """A writer waits for another thread's write transaction; readers do not."""
    import threading
    import time
    box = store.box(Note)
    box.put(Note(text="a"))
    done = []

    def writer():
        box.put(Note(text="b"))
        done.append(time.monotonic())

    with store.write():
        box.put(Note(text="in txn"))
        t = threading.Thread(target=writer)
        t.start()
        time.sleep(0.2)
        assert not done  # blocked behind our transaction
        r = []
        rt = threading.Thread(target=lambda: r.append(box.count()))
        rt.start()
        rt.join(5)
        assert r == [1]  # a reader sees the last commit
        end = time.monotonic()
    t.join(5)
    assert done and done[0] >= end and box.count() == 3


def test_closing_with_open_transaction_in_other_thread(store):
    import threading
    box = store.box(Note)
    entered, release = threading.Event(), threading.Event()

    def run():
        with store.write():
            box.put(Note(text="x"))
            entered.set()
            release.wait(5)

    t = threading.Thread(target=run)
    t.start()
    entered.wait(5)
    with pytest.raises(motedb.BusyError):
        store.close()
    release.set()
    t.join(5)
    store.close()
    assert store.closed


def test_unicode_and_large_values(store):
    box = store.box(Note)
    big = "x" * 100_000 + "ü"
    n = Note(text=big)
    box.put(n)
    assert box.get(n.id).text == big
    assert box.query(Note.text == big).ids() == [n.id]  # longer than index keys: re-checked
    assert box.query(Note.text.startswith("x" * 500)).ids() == [n.id]


def test_pickle_and_copy():
    import copy
    import pickle
    n = Note(text="x", level=2, note="n")
    n.id = 7
    assert pickle.loads(pickle.dumps(n)) == n
    assert copy.copy(n) == n and copy.deepcopy(n) == n


def test_the_collector_frees_cycles_through_any_attribute(store):
    """An instance shows the cyclic collector only its dict, list, vector and relation
    slots, until another slot is given something the collector tracks (entity.c,
    ent_traverse): a cycle through either kind of slot, however the value got there,
    is freed."""
    import gc
    import weakref

    class Marker:
        pass

    def freed(make):
        m = Marker()
        r = weakref.ref(m)
        make(m)  # leaves a cycle holding m, unreachable once make returns
        del m
        gc.collect()
        return r() is None

    box = store.box(AllTypes)
    stored = box.put(AllTypes())

    def set_meta(m):
        o = AllTypes()
        o.meta = {"m": m, "o": o}

    def set_items_loaded(m):
        o = box.get(stored)
        o.items.append([m, o])

    def set_int(m):
        o = AllTypes()
        o.i64 = [m, o]

    def set_str_loaded(m):
        o = box.get(stored)
        o.s = {"m": m, "o": o}

    def in_constructor(m):
        cell = [m]
        o = AllTypes(amount=cell)
        cell.append(o)

    def id_attribute(m):
        o = AllTypes()
        o.id = [m, o]

    for make in (set_meta, set_items_loaded, set_int, set_str_loaded, in_constructor, id_attribute):
        assert freed(make), make.__name__
    o = AllTypes(meta={"k": 1})
    seen = gc.get_referents(o)
    assert any(x is o.meta for x in seen) and any(x is o.emb for x in seen)
    assert not any(x is o.s for x in seen)  # an atomic slot: not handed to the collector


class Repeats(motedb.Entity):
    id: int = 0
    s: str = ""
    d: Decimal = Decimal("0")
    meta: dict = motedb.field(default_factory=dict)


def test_repeated_values_read_back_exactly(store):
    """Reads hand out a property's last str or Decimal again while the stored text
    repeats, JSON keys come from a memo (values.c memo_str / memo_decimal, json.c
    memo_key), and a put of the Decimal object put last reuses its text (decimal_of):
    every value read must still be the one written, to the digit and the character,
    through repeats, near-repeats, runs of unique values and memo slots shared by
    different keys."""
    strs = ["a", "b", "a", "a", "", "", "ab", "ba", "ab", "é", "é", "ea", "x" * 70, "x" * 70,
            "x" * 69 + "y", "tab\there", "tab\there", "naïve", "naïve"]
    strs += [f"unique {i}" for i in range(40)] + ["a", "a", "b"]
    decs = ["1.10", "1.1", "1.10", "0", "-0", "1E+2", "100", "100", "0.000", "0.00",
            "1" * 60, "1" * 60, "NaN", "-Infinity"] + [f"{i}.5" for i in range(40)] + ["2.2", "2.2"]
    metas = [{"ab": 1}, {"ba": 1}, {"ab": 2}, {"é": 1}, {"e": 1}]
    metas += [{f"k{i}": i, "n": {"k": [i]}} for i in range(600)] + [{"ab": 3}, {"ba": [1, -2]}]
    n = max(len(strs), len(decs), len(metas))
    shared = [Decimal(x) for x in decs]  # the same objects again: puts reuse their str()
    objs = [Repeats(s=strs[i % len(strs)],
                    d=shared[i % len(decs)] if i % 3 else Decimal(decs[i % len(decs)]),
                    meta=metas[i % len(metas)]) for i in range(n)]
    box = store.box(Repeats)
    box.put_many(objs)
    for _ in range(2):  # in order, then again with the memos as the first pass left them
        for o in objs:
            got = box.get(o.id)
            assert got.s == o.s and str(got.d) == str(o.d) and got.meta == o.meta, o.id
    got = {g.id: g for g in box.all()}
    assert all(str(got[o.id].d) == str(o.d) and got[o.id].s == o.s for o in objs)


def test_readonly_store_without_the_entity(tmp_path):
    path = tmp_path / "ro.mote"
    with motedb.open(path) as s:
        s.box(Note)
    with motedb.open(path, readonly=True) as s:
        with pytest.raises(motedb.SchemaError, match="Person"):
            s.box(Person)
        assert s.box(Note).count() == 0


def test_box_inside_read_transaction_needs_existing_entity(store):
    class Later(motedb.Entity):
        id: int = 0
    with store.read():
        with pytest.raises(motedb.SchemaError, match="Later"):
            store.box(Later)
    assert store.box(Later).count() == 0


def test_explicit_transaction_put_many_failure_dooms_transaction(store):
    pbox = store.box(Person)
    pbox.put(Person(email="taken"))
    with pytest.raises(motedb.TransactionError, match="rolled back"):
        with store.write():
            pbox.put(Person(email="a"))
            with pytest.raises(motedb.UniqueViolationError, match="put_many: object 1 of 2"):
                pbox.put_many([Person(email="b"), Person(email="taken")])
    assert [p.email for p in pbox.all()] == ["taken"]


def test_class_defined_again_retires_its_old_box(store):
    V1 = _define("class Evo(motedb.Entity):\n id: int = 0\n a: int = 0\n")
    V2 = _define("class Evo(motedb.Entity):\n id: int = 0\n a: int = 0\n b: str = 'x'\n")
    b1 = store.box(V1)
    b1.put(V1(a=1))
    b2 = store.box(V2)  # the same module and name: a new version of the class
    b2.put(V2(a=2, b="y"))
    assert [(o.a, o.b) for o in b2.all()] == [(1, "x"), (2, "y")]
    with pytest.raises(motedb.SchemaError, match="defined again"):
        b1.all()
    assert store.box(V2) is b2


def test_int_like_values(store):
    class Idx:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    box = store.box(AllTypes)
    o = AllTypes(i16=Idx(7), i64=True)
    box.put(o)
    assert box.get(o.id).i16 == 7 and box.get(o.id).i64 == 1
    with pytest.raises(OverflowError, match="Int16"):
        box.put(AllTypes(i16=Idx(40000)))


def test_aggregates(notes, store):
    q = notes.query(Note.level <= 2)
    assert (q.min(Note.level), q.max(Note.level), q.sum(Note.level)) == (1, 2, 6)
    assert q.avg(Note.score) == pytest.approx((0.5 + 1.5 + 2.0 + 3.0) / 4)
    assert q.min(Note.text) == "Banana" and q.max(Note.note) == "x"
    empty = notes.query(Note.level > 100)
    assert empty.min(Note.level) is None and empty.sum(Note.level) == 0 and empty.avg(Note.score) is None
    assert notes.query().limit(0).sum(Note.level) == 0
    with pytest.raises(TypeError, match="sum"):
        q.sum(Note.text)
    with pytest.raises(TypeError, match="property of Note"):
        q.min(Person.email)
    with pytest.raises(TypeError):
        q.max(Note.id)
    tbox = store.box(AllTypes)
    tbox.put_many([AllTypes(ts=dt.datetime(2024, 1, d, tzinfo=UTC), i64=2**62) for d in (3, 1, 2)])
    assert tbox.query().min(AllTypes.ts) == dt.datetime(2024, 1, 1, tzinfo=UTC)
    assert tbox.query().sum(AllTypes.i64) == 3 * 2**62  # exact beyond int64
    with pytest.raises(TypeError):
        tbox.query().min(AllTypes.amount)


def test_none_placeholder_default(store):
    """A non-nullable property may default to None as a placeholder; put() needs a value."""
    class Ph(motedb.Entity):
        id: int = 0
        when: dt.datetime = None
    box = store.box(Ph)
    with pytest.raises(TypeError, match=r"Ph.when: None is not allowed"):
        box.put(Ph())
    box.put(Ph(when=dt.datetime(2024, 1, 1, tzinfo=UTC)))
    assert box.count() == 1


def test_version_is_meson_builds():
    """One version number: meson.build's project version is the extension's
    (mote.h's, generated), the wheel's and motedb.__version__."""
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[2] / "meson.build").read_text()
    assert motedb.__version__ == re.search(r"version : '([^']+)'", text).group(1)
