"""Expiry times (motedb.Expires, Box.sweep): expired objects are gone for every
read, writes that meet them remove them and go on as if they were not there, and
the sweep removes exactly them. A model test
(hypothesis) runs random puts, updates, removes and sweeps with times an hour in
the past or future or none, and compares every read with the model's live
objects. Test data: synthetic."""

from __future__ import annotations

import datetime as dt
import time
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import motedb

UTC = dt.timezone.utc
HOUR = dt.timedelta(hours=1)


class Memo(motedb.Entity):
    id: int = 0
    tag: Annotated[int, motedb.Index] = 0
    text: Annotated[str, motedb.FullText] = ""
    vec: Annotated[list[float] | None, motedb.Vector(2)] = None
    expires: Annotated[dt.datetime | None, motedb.Expires] = None


def now() -> dt.datetime:
    return dt.datetime.now(UTC)


def test_markers_are_checked(tmp_path):
    with pytest.raises(TypeError, match="expiry time .* is a datetime"):
        class BadType(motedb.Entity):
            id: int = 0
            when: Annotated[int, motedb.Expires] = 0
    with pytest.raises(TypeError, match="cannot be unique"):
        class BadUnique(motedb.Entity):
            id: int = 0
            when: Annotated[dt.datetime, motedb.Expires, motedb.Unique] = dt.datetime(2000, 1, 1)

    class Two(motedb.Entity):
        id: int = 0
        a: Annotated[dt.datetime | None, motedb.Expires] = None
        b: Annotated[dt.datetime | None, motedb.Expires] = None
    with motedb.open(tmp_path / "t.mote") as store, pytest.raises(motedb.Error,
                                                                   match="two expiry times"):
        store.box(Two)


def test_every_read_leaves_expired_objects_out(tmp_path):
    with motedb.open(tmp_path / "m.mote") as store:
        box = store.box(Memo)
        t = now()
        box.put_many([Memo(tag=i % 3, text="past" if i % 2 else "future", vec=[i, 1],
                           expires=t - HOUR if i % 2 else (t + HOUR if i % 4 else None))
                      for i in range(1, 41)])
        live = [i for i in range(1, 41) if i % 2 == 0]
        assert box.count() == len(live) and [o.id for o in box.all()] == live
        assert box.get(1) is None and box.get(2) is not None and not box.contains(3)
        assert [o and o.id for o in box.get_many([1, 2])] == [None, 2]
        q = box.query(Memo.tag == 1)
        assert q.count() == len([i for i in live if i % 3 == 1])
        assert [o.id for o in q.find()] == [i for i in live if i % 3 == 1]
        assert [o.id for o in box.query().order_by(Memo.tag.desc()).limit(3).find()] \
            == sorted(live, key=lambda i: (-(i % 3), i))[:3]
        assert box.query(Memo.text.matches("past")).count() == 0
        assert box.query(Memo.text.matches("future", k=100)).count() == len(live)
        near = box.query(Memo.vec.nearest([1, 1], k=5)).find()
        assert [o.id for o in near] == live[:5]
        assert box.query().group_count(Memo.tag) == {
            k: len([i for i in live if i % 3 == k]) for k in range(3)}


class Account(motedb.Entity):
    id: int = 0
    name: Annotated[str, motedb.Unique] = ""
    expires: Annotated[dt.datetime | None, motedb.Expires] = None


def test_a_transaction_keeps_its_clock_and_writes_meet_expired_as_gone(tmp_path):
    with motedb.open(tmp_path / "c.mote") as store:
        box = store.box(Memo)
        box.put(Memo(id=1, text="old", expires=now() + dt.timedelta(milliseconds=300)))
        with store.read():
            assert box.count() == 1
            time.sleep(0.4)
            assert box.count() == 1 and box.get(1) is not None  # the clock of its start
        assert box.count() == 0 and box.get(1) is None
        box.put(Memo(id=1, text="new"), mode="insert")  # a new object, not the old one
        assert box.get(1).text == "new" and box.query(Memo.text.matches("old")).count() == 0
        box.update(1, expires=now() - HOUR)
        with pytest.raises(motedb.NotFoundError):
            box.update(1, text="again")
        assert box.remove(1) is False and box.sweep() == 1  # gone for both
        accounts = store.box(Account)
        accounts.put_many([Account(name="ada", expires=now() - HOUR), Account(name="bob")])
        accounts.put(Account(name="ada"))  # the expired one's name is free
        accounts.update(2, name="ada2")
        assert sorted(a.name for a in accounts.all()) == ["ada", "ada2"]
        with pytest.raises(motedb.UniqueViolationError):
            accounts.put(Account(name="ada"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "update", "remove", "sweep"]),
                          st.integers(1, 30), st.sampled_from(["past", "future", None])),
                max_size=60))
def test_model(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("model") / "m.mote"
    model: dict[int, str | None] = {}  # id -> fate of its expiry time
    t = now()
    at = {"past": t - HOUR, "future": t + HOUR, None: None}
    with motedb.open(path) as store:
        box = store.box(Memo)
        for op, i, fate in ops:
            if op == "put":
                box.put(Memo(id=i, tag=i % 4, expires=at[fate]))
                model[i] = fate
            elif op == "update" and model.get(i, "past") == "past":
                with pytest.raises(motedb.NotFoundError):  # absent, or expired: gone
                    box.update(i, expires=at[fate])
            elif op == "update":
                box.update(i, expires=at[fate])
                model[i] = fate
            elif op == "remove" and model.get(i, "past") == "past":
                assert box.remove(i) is False  # its failed transaction keeps it for the sweep
            elif op == "remove":
                assert box.remove(i) is True
                del model[i]
            elif op == "sweep":
                gone = [k for k, f in model.items() if f == "past"]
                assert box.sweep() == len(gone)
                for k in gone:
                    del model[k]
            live = sorted(k for k, f in model.items() if f != "past")
            assert box.count() == len(live)
            assert [o.id for o in box.all()] == live
            assert [o.id for o in box.query(Memo.tag == 1).find()] == [k for k in live if k % 4 == 1]
            assert box.query(Memo.tag == 2).count() == len([k for k in live if k % 4 == 2])
    with motedb.open(path) as store:  # the same after a reopen
        box = store.box(Memo)
        assert [o.id for o in box.all()] == sorted(k for k, f in model.items() if f != "past")
