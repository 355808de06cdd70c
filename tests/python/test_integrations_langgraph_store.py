"""motedb.integrations.langgraph_store: MoteStore, LangGraph's BaseStore on MoteDB.

The same random batches of puts, deletes, gets, searches with filters and namespace
listings run against MoteStore and LangGraph's SqliteStore, and give the same results
(synthetic items drawn by hypothesis; each field keeps one JSON type, as the filters'
numeric and text comparisons assume). SqliteStore's update times have a resolution of
a second, so searches are compared as sets, whole; MoteStore's newest-first order is
checked on its own.

Semantic search runs with a deterministic fake embedding (words hashed into 16
components): scores and rankings against ones computed here for each distance, filters
and namespaces at 2,500 vectors, best fields, replaced and removed vectors, TTL, async,
one embed call per batch; and random batches against InMemoryStore (always) and
SqliteStore with sqlite-vec (where this Python's sqlite3 can load extensions).
"""

import asyncio
import functools
import math
import os
import random
import re
import sqlite3
import time
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
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


# ---- semantic search ------------------------------------------------------------------

DIMS = 16
EPS = 1e-5  # MoteDB keeps float32 vectors


def word_vector(text, normalise=True):
    """The fake embedding: each word counted at crc32(word) % (DIMS - 1), and 1 in the last
    component (no text gives a zero vector); normalised unless asked otherwise."""
    v = [0.0] * DIMS
    v[-1] = 1.0
    for w in re.findall(r"\w+", text.lower()):
        v[zlib.crc32(w.encode()) % (DIMS - 1)] += 1.0
    n = math.sqrt(sum(x * x for x in v)) if normalise else 1.0
    return [x / n for x in v]


class FakeEmbed:
    """A deterministic embedding function that records each call's texts."""

    def __init__(self, normalise=True):
        self.normalise = normalise
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return [word_vector(t, self.normalise) for t in texts]


def score(kind, query, text, normalise=True):
    """The score MoteStore should give a text's vector for a query."""
    a, b = word_vector(query, normalise), word_vector(text, normalise)
    dot = sum(x * y for x, y in zip(a, b))
    if kind == "cosine":
        return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    if kind == "l2":
        return -math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    return dot  # inner_product


def ident(i):
    return (tuple(i.namespace), i.key)


def assert_ranked(got, scores, offset=0, limit=10):
    """Search results against every candidate's true score ((namespace, key): score): the
    page of the best scores, best first, each item once with its own score (items of
    equal score may come in either order)."""
    want = sorted(scores.values(), reverse=True)[offset:offset + limit]
    assert [i.score for i in got] == pytest.approx(want, abs=EPS)
    assert len({ident(i) for i in got}) == len(got)
    for i in got:
        assert i.score == pytest.approx(scores[ident(i)], abs=EPS), ident(i)


def index(embed, **kw):
    return {"dims": DIMS, "embed": embed, "fields": ["text"], **kw}


TEXTS = {"tea": "green tea with lemon", "milk": "tea with milk and sugar",
         "coffee": "black coffee, no sugar", "lyon": "lives in Lyon near the river",
         "cat": "a cat named Zaza", "much": "tea tea tea and more tea at noon"}


@pytest.mark.parametrize("kind", ["cosine", "l2", "inner_product"])
def test_query_ranks_by_score(tmp_path, kind):
    """Vectors of different lengths (not normalised), so that the three distances rank
    differently; the scores are SearchItem.score as computed here."""
    ns = ("mem", "ada")
    with MoteStore.from_path(tmp_path / "s.mote",
                             index=index(FakeEmbed(normalise=False), distance_type=kind)) as store:
        for key, text in TEXTS.items():
            store.put(ns, key, {"text": text})
    with MoteStore.from_path(tmp_path / "s.mote",
                             index=index(FakeEmbed(normalise=False), distance_type=kind)) as store:
        for q in ["tea with sugar", "a cat in Lyon", "coffee", "a cat named Zaza"]:
            scores = {(ns, k): score(kind, q, t, normalise=False) for k, t in TEXTS.items()}
            assert_ranked(store.search(("mem",), query=q, limit=100), scores, limit=100)
            assert_ranked(store.search(ns, query=q, limit=2, offset=1), scores, offset=1, limit=2)
        assert store.search(("mem",), query="a cat named Zaza", limit=1)[0].key == "cat"
        assert store.search(("other",), query="tea") == []


def test_query_with_namespace_and_filter_gives_k_whenever_k_match(tmp_path):
    """2,500 vectors (past 2,048, the HNSW graph's size for searching it): a namespace of
    500 and a filter leave 50 items, and every page of them is full."""
    rng = random.Random(7)
    words = ["tea", "coffee", "milk", "sugar", "lyon", "paris", "cat", "dog", "river", "green"]
    embed = FakeEmbed()
    with MoteStore.from_path(tmp_path / "big.mote", index=index(embed)) as store:
        texts, ops = {}, []
        for i in range(2500):
            ns, text = ("users", f"u{i % 5}"), " ".join(rng.choices(words, k=4))
            ops.append(PutOp(ns, f"k{i}", {"text": text, "n": i % 50}))
            texts[(ns, f"k{i}")] = (text, i % 50)
        store.batch(ops)
        assert len(embed.calls) == 1 and store.vectors.count() == 2500
        q = "green tea with sugar"
        scores = {key: score("cosine", q, t) for key, (t, n) in texts.items()
                  if key[0] == ("users", "u1") and n < 3}
        assert len(scores) == 50
        search = functools.partial(store.search, ("users", "u1"), query=q, filter={"n": {"$lt": 3}})
        assert_ranked(search(limit=60), scores, limit=60)          # all 50
        assert_ranked(search(limit=10, offset=45), scores, offset=45, limit=10)  # the last 5
        top = search(limit=10)
        assert len(top) == 10 and all(i.value["n"] < 3 and i.namespace == ("users", "u1") for i in top)
        for i in top:
            assert i.score == pytest.approx(scores[ident(i)], abs=EPS)
        best = sorted(scores.values(), reverse=True)
        assert [i.score for i in top] == sorted((i.score for i in top), reverse=True)
        assert sum(i.score >= best[9] - EPS for i in top) >= 8  # the graph's recall
        assert len(store.search(("users",), query=q, limit=25)) == 25


def test_items_come_once_with_their_best_field(tmp_path):
    embed = FakeEmbed()
    fields = {"a": ["green tea", "lyon", "river", "coffee"], "b": ["black coffee", "tea"], "c": ["tea"]}
    with MoteStore.from_path(tmp_path / "f.mote", index=index(embed, fields=["title", "tags[*]"])) as store:
        store.put(("docs",), "a", {"title": "green tea", "tags": ["lyon", "river", "coffee"]})
        store.put(("docs",), "b", {"title": "black coffee", "tags": ["tea"]})
        store.put(("docs",), "c", {"title": "a cat", "body": "tea"}, index=["body"])  # the put's field
        paths = sorted(store.vectors.query().tuples("path"))
        assert paths == sorted([("title",), ("tags[*].0",), ("tags[*].1",), ("tags[*].2",),
                                ("title",), ("tags[*]",), ("body",)])  # one text: the path alone
        for q in ["coffee", "tea", "lyon river", "green"]:
            scores = {(("docs",), k): max(score("cosine", q, t) for t in ts) for k, ts in fields.items()}
            assert_ranked(store.search(("docs",), query=q), scores)
        # many vectors per item: the search asks for more until it has limit distinct items
        for i in range(20):
            store.put(("many",), f"m{i}", {"title": "tea", "tags": ["tea"] * 6})
        got = store.search(("many",), query="tea", limit=5, offset=2)
        assert len(got) == 5 and len({i.key for i in got}) == 5
        assert [i.score for i in got] == pytest.approx([1.0] * 5, abs=EPS)


def test_puts_replace_vectors_and_deletes_remove_them(tmp_path):
    ns = ("mem",)
    with MoteStore.from_path(tmp_path / "r.mote", index=index(FakeEmbed())) as store:
        store.put(ns, "a", {"text": "green tea"})
        store.put(ns, "b", {"text": "black coffee"})
        store.put(ns, "hidden", {"text": "green tea"}, index=False)  # kept, never embedded
        assert [i.key for i in store.search(ns, query="green tea")] == ["a", "b"]
        assert store.get(ns, "hidden") and {i.key for i in store.search(ns)} == {"a", "b", "hidden"}
        store.put(ns, "a", {"text": "black coffee with milk"})  # "green tea" no longer in it
        assert_ranked(store.search(ns, query="green tea"),
                      {(ns, "a"): score("cosine", "green tea", "black coffee with milk"),
                       (ns, "b"): score("cosine", "green tea", "black coffee")})
        assert store.vectors.count() == 2
        store.put(ns, "b", {"text": "black coffee"}, index=False)  # its vector goes
        assert [i.key for i in store.search(ns, query="coffee")] == ["a"]
        store.delete(ns, "a")
        assert store.search(ns, query="coffee") == [] and store.vectors.count() == 0
        assert {i.key for i in store.search(ns)} == {"b", "hidden"}


def test_expired_items_leave_query_searches(tmp_path):
    short = 300 / MINUTE_MS  # 300 ms, in minutes
    with MoteStore.from_path(tmp_path / "t.mote", index=index(FakeEmbed()),
                             ttl={"refresh_on_read": True}) as store:
        store.put(("mem",), "kept", {"text": "green tea"})
        store.put(("mem",), "got", {"text": "green tea with milk"}, ttl=short)
        store.put(("mem",), "found", {"text": "tea with lemon"}, ttl=short)
        store.put(("mem",), "unread", {"text": "tea"}, ttl=short)
        keys = lambda: sorted(i.key for i in store.search(("mem",), query="tea", refresh_ttl=False))  # noqa: E731
        for _ in range(4):  # every 150 ms: a get refreshes "got", a query search "found"
            time.sleep(0.15)
            assert store.get(("mem",), "got")
            assert [i.key for i in store.search(("mem",), query="lemon", filter={"text": "tea with lemon"})] \
                == ["found"]
        assert keys() == ["found", "got", "kept"]  # their vectors' expiry moved with theirs
        time.sleep(0.35)
        assert keys() == ["kept"]
        assert store.sweep_ttl() == 3 and store.vectors.sweep() == 0  # the vectors went too
        assert store.vectors.count() == 1


def test_async_search_and_an_async_embedder(tmp_path):
    seen = []

    async def aembed(texts):
        seen.append(list(texts))
        return [word_vector(t) for t in texts]

    with MoteStore.from_path(tmp_path / "a.mote", index=index(aembed)) as store:
        async def main():
            await store.aput(("mem",), "a", {"text": "green tea"})
            await store.aput(("mem",), "b", {"text": "black coffee"})
            return await store.asearch(("mem",), query="coffee")
        assert [i.key for i in asyncio.run(main())] == ["b", "a"] and len(seen) == 3
        with pytest.raises(ValueError, match="async function"):  # the sync API needs a sync one
            store.search(("mem",), query="tea")
    with MoteStore.from_path(tmp_path / "s.mote", index=index(FakeEmbed())) as store:
        store.put(("mem",), "a", {"text": "green tea"})
        got = asyncio.run(store.asearch(("mem",), query="green tea"))
        assert [(i.key, round(i.score, 5)) for i in got] == [("a", 1.0)]


def test_one_embed_call_per_batch(tmp_path):
    embed = FakeEmbed()
    ns = ("mem",)
    with MoteStore.from_path(tmp_path / "e.mote", index=index(embed, fields=["text", "tags[*]"])) as store:
        results = store.batch([
            PutOp(ns, "a", {"text": "green tea", "tags": ["cup", "tea"]}),
            PutOp(ns, "b", {"text": "coffee"}),
            PutOp(ns, "c", {"text": "hidden"}, index=False),
            PutOp(ns, "a", {"text": "green tea", "tags": ["tea"]}),  # the last put of a key wins
            SearchOp(ns, query="tea"),
            SearchOp(ns, query="milk"),
            GetOp(ns, "a"),
        ])
        assert results[4:] == [[], [], None]  # the reads ran before the puts
        assert embed.calls == [["tea", "milk", "green tea", "coffee"]]  # queries, then texts, once each
        store.batch([GetOp(ns, "a"), SearchOp(ns), PutOp(ns, "d", {"text": "x"}, index=False),
                     PutOp(ns, "b", None)])
        assert len(embed.calls) == 1  # nothing to embed: no call


def test_index_errors_and_a_query_without_index(tmp_path):
    with pytest.raises(ValueError, match="dims"):
        MoteStore(tmp_path / "e.mote", index={"embed": FakeEmbed()})
    with pytest.raises(ValueError, match="distance_type 'hamming'"):
        MoteStore(tmp_path / "e.mote", index=index(FakeEmbed(), distance_type="hamming"))
    with MoteStore.from_path(tmp_path / "e.mote", index=index(FakeEmbed(), dims=DIMS + 1)) as store:
        with pytest.raises(ValueError, match=f"has {DIMS} floats, but the store's index has dims={DIMS + 1}"):
            store.put(("mem",), "a", {"text": "tea"})
        assert store.get(("mem",), "a") is None  # nothing written
        with pytest.raises(ValueError, match="dims"):
            store.search(("mem",), query="tea")
    with MoteStore.from_path(tmp_path / "e.mote") as store:  # no index: a query is ignored
        store.put(("mem",), "a", {"text": "tea"}, index=["text"])
        assert [(i.key, i.score) for i in store.search(("mem",), query="coffee")] == [("a", None)]


WORDS = ["tea", "coffee", "milk", "sugar", "lyon", "cat", "green", "black"]


def text(words):
    return st.lists(st.sampled_from(words), min_size=1, max_size=4).map(" ".join)


def same_ranking(got, want):
    """Two stores' scored pages alike: the same scores in order, an item in both with the
    same score and value, and an item in one page only where ties at its edges allow."""
    assert [i.score for i in got] == pytest.approx([i.score for i in want], abs=EPS)
    g, w = {ident(i): i for i in got}, {ident(i): i for i in want}
    edges = [want[0].score, want[-1].score] if want else []
    for key in g.keys() | w.keys():
        if key in g and key in w:
            assert (g[key].score, g[key].value) == (pytest.approx(w[key].score, abs=EPS), w[key].value)
        else:
            s = (g.get(key) or w.get(key)).score
            assert any(abs(s - e) < EPS for e in edges), key


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=st.lists(st.lists(st.one_of(
    st.builds(lambda ns, k, v: PutOp(ns, k, v), st.sampled_from(NAMESPACES), st.sampled_from(KEYS),
              st.fixed_dictionaries({"text": text(WORDS[:4]), "note": text(WORDS[4:]),
                                     "kind": st.sampled_from("ab")}) | st.none()),
    st.builds(lambda ns, n, q, f, lim, off: SearchOp(ns[:n], f, lim, off, q),
              st.sampled_from(NAMESPACES), st.integers(0, 3), text(WORDS),
              st.none() | st.fixed_dictionaries({"kind": st.sampled_from("ab")}),
              st.integers(1, 6), st.integers(0, 4))), min_size=1, max_size=6), min_size=2, max_size=10))
def test_query_searches_equal_in_memory_store(tmp_path_factory, batches):
    """LangGraph's InMemoryStore as the reference (cosine similarity, two fields per item,
    the best per item, offset and limit after): same pages. (It keeps an item's old
    vectors when a put indexes other fields, and fills short pages with unindexed items:
    every put here indexes both fields. A text used twice in one of its batches fails
    there (one vector, two uses): it runs a batch as one, reads first, then each put on
    its own, and an item's two fields have words of their own.)"""
    ref = InMemoryStore(index=index(FakeEmbed(), fields=["text", "note"]))
    with MoteStore.from_path(tmp_path_factory.mktemp("sem") / "m.mote",
                             index=index(FakeEmbed(), fields=["text", "note"])) as mote:
        for ops in batches:
            want = [None if isinstance(op, PutOp) else ref.batch([op])[0] for op in ops]
            for op in ops:
                if isinstance(op, PutOp):
                    ref.batch([op])
            for op, got, w in zip(ops, mote.batch(ops), want):
                if isinstance(op, SearchOp):
                    same_ranking(got, w)


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "enable_load_extension"),
                    reason="SqliteStore's vector search needs the sqlite-vec extension, and this "
                           "Python's sqlite3 was built without extension loading")
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=st.lists(st.lists(st.one_of(
    OP,
    st.builds(lambda ns, n, q, f, lim, off: SearchOp(ns[:n], f, lim, min(off, lim), q),
              st.sampled_from(NAMESPACES), st.integers(0, 3),
              st.lists(st.sampled_from(["n", "s", "tea", "coffee", "1", "true", "nested", "k"]),
                       min_size=1, max_size=3).map(" ".join),
              st.none() | FILTER, st.integers(1, 6), st.integers(0, 6))),
    min_size=1, max_size=6), min_size=2, max_size=10))
def test_query_searches_equal_sqlite_store(tmp_path_factory, batches):
    """SqliteStore with sqlite-vec, cosine, each item's whole value embedded ("$", the
    default: SqliteStore reads its fields from "text_fields", not IndexConfig's "fields"),
    an offset at most the limit (SqliteStore ranks only 2 * limit vectors, before the
    offset): the same pages, and the same results for the other operations. (Its "l2"
    score is the distance, farthest first, and its "inner_product" the negated L1
    distance; MoteStore scores as PostgresStore does.)"""
    d = tmp_path_factory.mktemp("sq")
    conn = sqlite3.connect(d / "ref.sqlite", check_same_thread=False, isolation_level=None)
    ref = SqliteStore(conn, index={"dims": DIMS, "embed": FakeEmbed()})
    ref.setup()
    with MoteStore.from_path(d / "m.mote", index={"dims": DIMS, "embed": FakeEmbed()}, sync=False) as mote:
        for ops in batches:
            for op, got, want in zip(ops, mote.batch(ops), ref.batch(ops)):
                if isinstance(op, SearchOp) and op.query:
                    same_ranking(got, want)
                else:
                    assert comparable(got) == comparable(want), op
    conn.close()


def test_items_changed_without_index_keep_their_vectors(tmp_path):
    """A store opened without index does not know the vectors' entity: a delete there
    leaves the item's vectors, which a query search then skips; a put again re-embeds."""
    with MoteStore.from_path(tmp_path / "n.mote", index=index(FakeEmbed())) as store:
        store.put(("mem",), "a", {"text": "green tea"})
        store.put(("mem",), "b", {"text": "black coffee"})
    with MoteStore.from_path(tmp_path / "n.mote") as store:
        store.delete(("mem",), "a")
    with MoteStore.from_path(tmp_path / "n.mote", index=index(FakeEmbed())) as store:
        assert store.vectors.count() == 2
        assert [i.key for i in store.search(("mem",), query="green tea")] == ["b"]
        store.put(("mem",), "a", {"text": "milk"})
        assert store.vectors.count() == 2
        assert [i.key for i in store.search(("mem",), query="milk", limit=1)] == ["a"]


def test_a_new_store_with_an_index_keeps_its_vectors_inside_leaves(tmp_path):
    """A store MoteStore creates with an index of 320 floats gets 8 KB pages, so that a
    vector's record (1,280 bytes and its header: over a third of a 4 KB page) is not
    given a 4 KB page of its own: the file is about half, and the searches find the
    same. page_size= overrides the choice. (256 floats were the case until the inline
    limit went from a quarter to a third of a page: they now stay in 4 KB leaves too.)"""
    dims = 320

    def embed(texts):
        return [[math.cos(len(t) * (j + 1)) for j in range(dims)] for t in texts]

    cfg = {"dims": dims, "embed": embed, "fields": ["text"]}
    sizes, found = {}, {}
    for name, kw in (("default", {}), ("4k", {"page_size": 4096})):
        path = tmp_path / f"{name}.mote"
        with MoteStore.from_path(path, index=cfg, **kw) as store:
            store.batch([PutOp(("m",), f"k{i}", {"text": "x" * (i % 97)}) for i in range(300)])
            found[name] = [(i.key, round(i.score, 5)) for i in store.search(("m",), query="x" * 40, limit=5)]
        sizes[name] = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(16)
        assert int.from_bytes(head[12:16], "little") == (8192 if name == "default" else 4096)
    assert found["default"] == found["4k"] and len(found["default"]) == 5
    assert sizes["default"] * 10 < sizes["4k"] * 7, sizes  # 300 vectors: no page of their own each
