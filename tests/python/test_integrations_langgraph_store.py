"""motedb.integrations.langgraph_store: MoteStore, LangGraph's BaseStore on MoteDB.

The same random batches of puts, deletes, gets, searches with filters and namespace
listings run against MoteStore and LangGraph's SqliteStore, and give the same results
(synthetic items drawn by hypothesis; each field keeps one JSON type, as the filters'
numeric and text comparisons assume). SqliteStore's update times have a resolution of
a second, so searches are compared as sets, whole; MoteStore's newest-first order is
checked on its own.
"""

import asyncio
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.sqlite import SqliteStore
from motedb.integrations.langgraph_store import MoteStore

NAMESPACES = [("users", "ada"), ("users", "ada", "notes"), ("users", "grace"), ("users", "adam"),
              ("docs",), ("docs", "v1"), ("a-b",), ("a", "b")]
KEYS = ["k1", "k2", "k3", "prefs"]
VALUE = st.fixed_dictionaries(
    {},
    optional={"n": st.integers(-3, 3), "s": st.sampled_from(["tea", "coffee", "", "é"]), "flag": st.booleans(),
              "x": st.floats(-2, 2, allow_nan=False), "nested": st.fixed_dictionaries({"k": st.integers(0, 2)}),
              "maybe": st.none()})
# Conditions of one type per field: numbers (bools are 0 and 1) with numbers, text with text
# (how SqliteStore compares a text field with a number, CAST('tea' AS REAL) = 0.0, is not
# its documented behaviour, and MoteStore does not copy it: such a pair never orders).
NUMERIC = st.one_of(st.sampled_from([{"$ne": 1}, {"$ne": None}, {"$eq": None}, {"$eq": 0}, {"$gt": 0},
                                     {"$gte": -1, "$lt": 2}, {"$lte": 1}, {"$lt": -1}]),
                    st.integers(-3, 3), st.none(), st.booleans())
TEXT = st.one_of(st.sampled_from([{"$gte": "coffee"}, {"$gt": "tea"}, {"$ne": "tea"}, {"$lt": "tea"},
                                  {"$eq": None}, {"$ne": None}]),
                 st.sampled_from(["tea", "coffee", ""]), st.none())
FILTER = st.one_of(
    st.dictionaries(st.sampled_from(["n", "x", "nested.k", "flag", "maybe", "absent"]), NUMERIC,
                    min_size=1, max_size=2),
    st.dictionaries(st.sampled_from(["s", "maybe", "absent"]), TEXT, min_size=1, max_size=2))
OP = st.one_of(
    st.builds(lambda ns, k, v: PutOp(ns, k, v), st.sampled_from(NAMESPACES), st.sampled_from(KEYS),
              VALUE | st.none()),  # None: a delete
    st.builds(lambda ns, k: GetOp(ns, k), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.builds(lambda ns, n, f: SearchOp(ns[:n], f, limit=1000),
              st.sampled_from(NAMESPACES), st.integers(0, 3), st.none() | FILTER),
    st.builds(lambda conds, depth, lim, off: ListNamespacesOp(conds, depth, lim, off),
              st.none() | st.lists(st.builds(
                  MatchCondition, st.sampled_from(["prefix", "suffix"]),
                  st.sampled_from([("users",), ("users", "*"), ("*", "ada"), ("notes",), ("docs",), ("a",),
                                   ("*",), ()])), max_size=2).map(tuple),
              st.none() | st.integers(1, 3), st.integers(1, 10), st.integers(0, 3)))


def comparable(result):
    """A result as both stores should give it (searches as sets: see the module's doc)."""
    if result is None:
        return None
    if isinstance(result, list):
        if result and isinstance(result[0], tuple):
            return result  # namespaces, in their order
        return sorted((tuple(i.namespace), i.key, repr(sorted(i.value.items()))) for i in result)
    return (tuple(result.namespace), result.key, result.value)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=st.lists(st.lists(OP, min_size=1, max_size=6), min_size=2, max_size=12))
def test_batches_equal_sqlite_store(tmp_path_factory, batches):
    d = tmp_path_factory.mktemp("st")
    conn = sqlite3.connect(d / "ref.sqlite", check_same_thread=False, isolation_level=None)
    ref = SqliteStore(conn)
    ref.setup()
    with MoteStore.from_path(d / "m.mote", sync=False) as mote:
        for ops in batches:
            want = [comparable(r) for r in ref.batch(ops)]
            got = [comparable(r) for r in mote.batch(ops)]
            assert got == want, ops
    conn.close()


def test_api_newest_first_and_pages(tmp_path):
    with MoteStore.from_path(tmp_path / "s.mote") as store:
        for i in range(6):
            store.put(("mem", "ada"), f"k{i}", {"i": i, "topic": "tea" if i % 2 else "work"})
            time.sleep(0.001)
        store.put(("mem", "ada"), "k0", {"i": 10, "topic": "tea"})  # updated: newest now
        assert [i.key for i in store.search(("mem",))] == ["k0", "k5", "k4", "k3", "k2", "k1"]
        assert [i.key for i in store.search(("mem", "ada"), limit=2, offset=1)] == ["k5", "k4"]
        assert [i.key for i in store.search(("mem",), filter={"topic": "tea"}, limit=2)] == ["k0", "k5"]
        first = store.get(("mem", "ada"), "k0")
        assert first.value == {"i": 10, "topic": "tea"} and first.created_at < first.updated_at
        assert store.list_namespaces() == [("mem", "ada")]
        store.delete(("mem", "ada"), "k0")
        assert store.get(("mem", "ada"), "k0") is None
        with pytest.raises(InvalidNamespaceError):
            store.put(("a.b",), "k", {})
        with pytest.raises(ValueError, match="unsupported filter operator '\\$in'"):
            store.search(("mem",), filter={"i": {"$in": [1]}})

        async def main():
            await store.aput(("mem", "grace"), "a", {"v": 1})
            return await store.asearch(("mem", "grace"))
        assert [i.value for i in asyncio.run(main())] == [{"v": 1}]


MINUTE_MS = 60_000


def test_ttl_expires_refreshes_and_sweeps(tmp_path):
    short = 300 / MINUTE_MS  # 300 ms, in minutes
    ttl = {"default_ttl": short, "refresh_on_read": True, "sweep_interval_minutes": 50 / MINUTE_MS}
    with MoteStore.from_path(tmp_path / "t.mote", ttl=ttl) as store:
        assert store.supports_ttl
        store.put(("mem",), "default", {"v": 1})             # the configured default TTL
        store.put(("mem",), "kept", {"v": 2}, ttl=None)      # none
        store.put(("mem",), "read", {"v": 3})
        store.put(("other",), "unread", {"v": 4})
        for _ in range(4):  # read with refresh every 150 ms: "read" stays
            time.sleep(0.15)
            assert store.get(("mem",), "read").value == {"v": 3}
        # "default" and "unread" expired (no refresh: only reads refresh), even before a sweep
        assert store.get(("mem",), "default", refresh_ttl=False) is None
        assert sorted(i.key for i in store.search(("mem",), refresh_ttl=False)) == ["kept", "read"]
        assert store.list_namespaces() == [("mem",)]
        time.sleep(0.35)  # "read" too, once not read
        assert store.search(("mem",), filter={"v": 3}) == []
        assert store.sweep_ttl() == 3 and store.sweep_ttl() == 0

        store.put(("mem",), "swept", {"v": 5})  # expires in 300 ms
        swept = []
        sweep = store.sweep_ttl
        store.sweep_ttl = lambda: swept.append(sweep()) or swept[-1]  # what each sweep removed
        fut = store.start_ttl_sweeper()  # every 50 ms
        deadline = time.monotonic() + 5
        while sum(swept) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(swept) == 1 and len(swept) >= 4
        assert store.stop_ttl_sweeper(timeout=5) and fut.done() and not fut.exception()
        assert [i.key for i in store.search(("mem",))] == ["kept"]


def test_ttl_sweeps_what_sqlite_store_sweeps(tmp_path):
    """The same puts with TTLs of a second, an hour and none: two seconds later both stores
    sweep the same items (SqliteStore's sweep deletes expires_at < CURRENT_TIMESTAMP, whose
    resolution is a second)."""
    conn = sqlite3.connect(tmp_path / "ref.sqlite", check_same_thread=False, isolation_level=None)
    ref = SqliteStore(conn, ttl={"refresh_on_read": False})
    ref.setup()
    with MoteStore.from_path(tmp_path / "m.mote", ttl={"refresh_on_read": False}) as mote:
        for s in (ref, mote):
            for i in range(30):
                s.put(("ns", str(i % 3)), f"k{i}", {"i": i},
                      ttl=[1 / 60, 60.0, None][i % 3])
        time.sleep(2.1)
        assert mote.sweep_ttl() == ref.sweep_ttl() == 10
        keys = lambda s: sorted(i.key for i in s.search(("ns",), limit=100))  # noqa: E731
        assert keys(mote) == keys(ref) and len(keys(mote)) == 20
    conn.close()
