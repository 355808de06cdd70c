"""motedb.integrations.langgraph: MoteSaver, the LangGraph checkpointer.

- LangGraph's own conformance suite (langgraph-checkpoint-conformance): every base and
  extended capability, sync store per capability.
- The same checkpoints put into MoteSaver and SqliteSaver: list() with random configs,
  filters, before and limit gives the same checkpoints in the same order (synthetic
  metadata, drawn by hypothesis).
- Real graphs (langgraph's StateGraph): state and history survive a reopen; prune
  keeps what a DeltaChannel is rebuilt from; several threads of the process at once.
"""

import asyncio
import json
import sqlite3
import threading
import uuid
from typing import Annotated, TypedDict

import motedb
import motedb.aio
import motedb.integrations.langgraph
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from motedb.integrations.langgraph import LangGraphCheckpoint, MoteSaver


def test_conformance_every_capability(tmp_path):
    stores = iter(range(1000))

    @checkpointer_test(name="MoteSaver")
    async def saver():
        with MoteSaver.from_path(tmp_path / f"c{next(stores)}.mote") as s:
            yield s

    report = asyncio.run(validate(saver))
    caps = {"put", "put_writes", "get_tuple", "list", "delete_thread",
            "delete_for_runs", "copy_thread", "prune"}
    assert set(report.results) >= caps
    for cap in caps:
        r = report.results[cap]
        assert r.detected and r.passed, (cap, r.failures)
        assert r.tests_passed >= 5 and r.tests_failed == 0, cap
    assert report.passed_all_base() and report.passed_all()


def checkpoint(cid, step):
    return {"v": 1, "id": cid, "ts": "2026-12-03T00:00:00+00:00",
            "channel_values": {"step": step}, "channel_versions": {"step": step},
            "versions_seen": {}, "pending_sends": [], "updated_channels": None}


METADATA = st.fixed_dictionaries(
    {"source": st.sampled_from(["input", "loop", "update"]), "step": st.integers(-1, 3)},
    optional={"score": st.one_of(st.none(), st.integers(0, 2), st.booleans(), st.floats(0, 2)),
              "tag": st.sampled_from(["a", "b", "é"]),
              "nested": st.fixed_dictionaries({"k": st.integers(0, 2)})})
FILTER = st.dictionaries(
    st.sampled_from(["source", "step", "score", "tag", "nested.k", "missing"]),
    st.one_of(st.none(), st.integers(-1, 3), st.sampled_from(["input", "loop", "a", "é"]),
              st.booleans()), max_size=2)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_list_equals_sqlite_saver(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("list")
    conn = sqlite3.connect(d / "ref.sqlite", check_same_thread=False)
    ref = SqliteSaver(conn)
    with MoteSaver.from_path(d / "m.mote", sync=False) as mote:
        ids = []
        parents = {}
        for i in range(data.draw(st.integers(1, 14), label="checkpoints")):
            thread = data.draw(st.sampled_from(["t1", "t2", "t:3"]))
            ns = data.draw(st.sampled_from(["", "", "child:1"]))
            cid = str(uuid6(clock_seq=i))
            md = data.draw(METADATA)
            conf = {"thread_id": thread, "checkpoint_ns": ns}
            if (thread, ns) in parents:
                conf["checkpoint_id"] = parents[(thread, ns)]
            writes = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 9)),
                                        max_size=2), label="writes")
            task = data.draw(st.sampled_from(["task-1", "task-2"]), label="task")
            for saver in (ref, mote):
                saver.put({"configurable": dict(conf)}, checkpoint(cid, i), md, {})
                if writes:  # (list reads the writes of adjacent checkpoints in one query)
                    saver.put_writes({"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                                       "checkpoint_id": cid}}, writes, task)
            parents[(thread, ns)] = cid
            ids.append(cid)
        for _ in range(6):
            config = data.draw(st.one_of(
                st.none(),
                st.builds(lambda t, ns: {"configurable": {"thread_id": t, "checkpoint_ns": ns}},
                          st.sampled_from(["t1", "t2", "t:3", "none"]),
                          st.sampled_from(["", "child:1"])),
                st.builds(lambda t: {"configurable": {"thread_id": t}}, st.sampled_from(["t1", "t2"])),
                st.builds(lambda t, c: {"configurable": {"thread_id": t, "checkpoint_ns": "",
                                                         "checkpoint_id": c}},
                          st.sampled_from(["t1", "t2"]), st.sampled_from(ids))))
            flt = data.draw(st.none() | FILTER)
            before = data.draw(st.none() | st.just({"configurable": {}}) | st.sampled_from(ids).map(
                lambda c: {"configurable": {"checkpoint_id": c}}))
            limit = data.draw(st.none() | st.integers(0, 4))
            want = [(t.config, t.metadata, t.parent_config, t.pending_writes)
                    for t in ref.list(config, filter=flt, before=before, limit=limit)]
            got = [(t.config, t.metadata, t.parent_config, t.pending_writes)
                   for t in mote.list(config, filter=flt, before=before, limit=limit)]
            assert got == want, (config, flt, before, limit)
    conn.close()


def adder(state, writes):
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class Counter(TypedDict):
    log: Annotated[list, DeltaChannel(adder, snapshot_frequency=3)]
    n: int
    stop: int


def counter_graph():
    b = StateGraph(Counter)
    b.add_node("step", lambda s: {"log": [s["n"]], "n": s["n"] + 1})
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: END if s["n"] >= s["stop"] else "step")
    return b


def test_graph_state_survives_reopen_and_equals_sqlite(tmp_path):
    cfg = {"configurable": {"thread_id": "user-1"}}
    with MoteSaver.from_path(tmp_path / "g.mote") as saver:
        g = counter_graph().compile(checkpointer=saver)
        g.invoke({"n": 0, "log": [], "stop": 3}, cfg)
        g.invoke({"n": 10, "log": [], "stop": 12}, cfg)
    with sqlite3.connect(tmp_path / "g.sqlite", check_same_thread=False) as conn:
        ref = counter_graph().compile(checkpointer=SqliteSaver(conn))
        ref.invoke({"n": 0, "log": [], "stop": 3}, cfg)
        ref.invoke({"n": 10, "log": [], "stop": 12}, cfg)
        want = [(h.values, h.next, h.metadata["step"], h.metadata["source"])
                for h in ref.get_state_history(cfg)]
    with MoteSaver.from_path(tmp_path / "g.mote") as saver:  # reopened
        g = counter_graph().compile(checkpointer=saver)
        assert g.get_state(cfg).values == {"log": [0, 1, 2, 10, 11], "n": 12, "stop": 12}
        got = [(h.values, h.next, h.metadata["step"], h.metadata["source"])
               for h in g.get_state_history(cfg)]
    assert got == want and len(got) == 9  # the same checkpoints as SqliteSaver


@pytest.mark.parametrize("steps", range(1, 9))
def test_prune_keeps_what_a_delta_channel_is_rebuilt_from(tmp_path, steps):
    cfg = {"configurable": {"thread_id": "t"}}
    with MoteSaver.from_path(tmp_path / "p.mote") as saver:
        g = counter_graph().compile(checkpointer=saver)
        g.invoke({"n": 0, "log": [], "stop": steps}, cfg)
        g.invoke({"n": 0, "log": [], "stop": steps}, {"configurable": {"thread_id": "other"}})
        before = g.get_state(cfg).values
        assert before["log"] == list(range(steps))
        n_before = len(list(saver.list(cfg)))
        saver.prune(["t"])
        kept = list(saver.list(cfg))
        assert g.get_state(cfg).values == before
        assert 1 <= len(kept) <= n_before
        # what was kept: the newest and a chain of its parents
        ids = [t.config["configurable"]["checkpoint_id"] for t in kept]
        for newer, older in zip(kept, kept[1:]):
            assert newer.parent_config["configurable"]["checkpoint_id"] == older.checkpoint["id"]
        assert ids[0] == max(ids)
        if not kept[0].metadata.get("counters_since_delta_snapshot"):
            assert len(kept) == 1  # nothing to rebuild: only the newest
        assert len(list(saver.list({"configurable": {"thread_id": "other"}}))) == n_before
        saver.prune(["t"], strategy="delete")
        assert list(saver.list(cfg)) == [] and g.get_state(cfg).values == {}


def test_threads_of_a_process_share_one_saver(tmp_path):
    with MoteSaver.from_path(tmp_path / "t.mote") as saver:
        g = counter_graph().compile(checkpointer=saver)
        errors = []

        def run(i):
            try:
                for k in range(3):
                    g.invoke({"n": k * 10, "log": [], "stop": k * 10 + 2},
                             {"configurable": {"thread_id": f"w{i}"}})
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for i in range(4):
            assert g.get_state({"configurable": {"thread_id": f"w{i}"}}).values["log"] == [
                0, 1, 10, 11, 20, 21]


def test_async_methods_run_concurrently(tmp_path):
    async def main():
        with MoteSaver.from_path(tmp_path / "a.mote") as saver:
            g = counter_graph().compile(checkpointer=saver)
            await asyncio.gather(*(g.ainvoke({"n": 0, "log": [], "stop": 4},
                                             {"configurable": {"thread_id": f"a{i}"}})
                                   for i in range(8)))
            states = [await g.aget_state({"configurable": {"thread_id": f"a{i}"}})
                      for i in range(8)]
            assert all(s.values["log"] == [0, 1, 2, 3] for s in states)
            await saver.adelete_thread("a0")
            assert await saver.aget_tuple({"configurable": {"thread_id": "a0"}}) is None
            await saver.acopy_thread("a1", "a0")
            tups = [t async for t in saver.alist({"configurable": {"thread_id": "a0"}})]
            assert [t.checkpoint["id"] for t in tups] == [
                t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "a1"}})]
    asyncio.run(main())


class _ThreadNames:
    """A serializer that notes the thread each value is serialized on (put and
    put_writes serialize on the thread that runs them)."""

    def __init__(self, inner):
        self.inner, self.threads = inner, set()

    def dumps_typed(self, obj):
        self.threads.add(threading.current_thread().name)
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data):
        return self.inner.loads_typed(data)


def test_async_writes_go_to_one_writer_thread_durable_when_awaited(tmp_path):
    """aput and aput_writes of many tasks run on the saver's writer thread (each its own
    commit, one sync for those queued together); each is durable, so seen by a new
    read, once awaited; a failing one fails alone; close() waits for what is queued."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = _ThreadNames(JsonPlusSerializer())

    async def main():
        saver = MoteSaver(tmp_path / "w.mote", serde=serde)

        async def step(i):
            cfg = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
            cid = str(uuid6(clock_seq=i))
            got = await saver.aput(cfg, checkpoint(cid, i), {"source": "loop", "step": i}, {})
            await saver.aput_writes(got, [("step", i), ("log", [i])], task_id=f"task{i}")
            tup = saver.get_tuple(got)  # a sync read on this thread: durable already
            assert tup.checkpoint["id"] == cid and len(tup.pending_writes) == 2
            return got

        configs = await asyncio.gather(*(step(i) for i in range(40)))
        with pytest.raises(KeyError):  # no checkpoint_id: fails on the writer, alone
            await saver.aput_writes({"configurable": {"thread_id": "t0"}}, [("x", 1)], "t")
        queued = [asyncio.ensure_future(saver.aput(c, checkpoint(str(uuid6(clock_seq=99)), 9),
                                                   {}, {})) for c in configs[:5]]
        await asyncio.sleep(0)  # queued on the writer; close() waits for them
        saver.close()
        await asyncio.gather(*queued)
        return configs

    configs = asyncio.run(main())
    assert serde.threads == {"motedb-writer"}
    with MoteSaver.from_path(tmp_path / "w.mote") as again:
        assert again.checkpoints.count() == 45
        assert all(again.get_tuple(c) is not None for c in configs)


def test_async_reads_stay_on_the_loop_when_cached(tmp_path, monkeypatch):
    """aget_tuple and alist run on the loop's thread when the store's cache holds what
    they read, on a worker thread when it does not (a store just opened) or when the
    loop's thread is inside a transaction of the store: the same answers either way."""
    path = tmp_path / "r.mote"
    with MoteSaver.from_path(path) as saver:
        for t in range(30):  # enough that a fresh open has most of it uncached
            cfg = {"configurable": {"thread_id": f"t{t}", "checkpoint_ns": ""}}
            for i in range(3):
                cfg = saver.put(cfg, checkpoint(str(uuid6(clock_seq=i)), i), {"step": i}, {})
                saver.put_writes(cfg, [("log", ["x" * 300])], task_id=f"k{i}")
        want_tuple = saver.get_tuple({"configurable": {"thread_id": "t7"}})
        want_list = list(saver.list({"configurable": {"thread_id": "t7"}}))
    hops = []
    to_thread = asyncio.to_thread

    async def counted(fn, *a, **k):
        hops.append(fn)
        return await to_thread(fn, *a, **k)
    monkeypatch.setattr(asyncio, "to_thread", counted)
    cfg7 = {"configurable": {"thread_id": "t7"}}

    async def main():
        with MoteSaver.from_path(path) as saver:
            assert await saver.aget_tuple(cfg7) == want_tuple
            assert len(hops) == 1  # the pages were not cached: a worker thread read them
            assert [t async for t in saver.alist(cfg7)] == want_list
            assert await saver.aget_tuple(cfg7) == want_tuple
            n = len(hops)  # (alist may have needed a page more)
            for _ in range(5):
                assert await saver.aget_tuple(cfg7) == want_tuple
                assert [t async for t in saver.alist(cfg7)] == want_list
            assert len(hops) == n  # cached now: on the loop, no hop
            with saver.store.read():  # a transaction of the loop's thread: a worker reads
                assert await saver.aget_tuple(cfg7) == want_tuple
            assert len(hops) == n + 1
            assert await saver.aget_tuple({"configurable": {"thread_id": "none"}}) is None

    asyncio.run(main())


def test_async_writes_beside_an_async_store_writer(tmp_path):
    """A store the application also uses through motedb.aio: its writer thread defers
    the store's syncs, so the saver's writer syncs each commit itself (no hang, no
    error)."""
    async def main():
        astore = await motedb.aio.open(tmp_path / "s.mote")
        box = await astore.box(LangGraphCheckpoint)
        await box.count()
        # the aio writer thread starts with a first write and holds the deferral
        await box.put(LangGraphCheckpoint(key="x", thread_id="x", checkpoint_ns="",
                                          checkpoint_id="x", type="json", checkpoint=b""))
        saver = MoteSaver(astore.sync)
        cfg = {"configurable": {"thread_id": "u", "checkpoint_ns": ""}}
        got = await saver.aput(cfg, checkpoint(str(uuid6()), 1), {}, {})
        await saver.aput_writes(got, [("step", 1)], task_id="t")
        assert len(saver.get_tuple(got).pending_writes) == 1
        saver.close()
        await astore.close()

    asyncio.run(main())


def test_store_shared_with_the_application(tmp_path):
    class Memory(motedb.Entity):
        id: int = 0
        text: str

    with motedb.open(tmp_path / "app.mote") as store:
        store.box(Memory).put(Memory(text="likes tea"))
        saver = MoteSaver(store)
        g = counter_graph().compile(checkpointer=saver)
        g.invoke({"n": 0, "log": [], "stop": 2}, {"configurable": {"thread_id": "u"}})
        saver.close()  # the store is the caller's: still open
        assert store.box(Memory).count() == 1
        assert store.box(LangGraphCheckpoint).count() == 4
        with pytest.raises(TypeError, match="open options are for a path"):
            MoteSaver(store, sync=False)


def test_errors_and_edges(tmp_path):
    with MoteSaver.from_path(tmp_path / "e.mote") as saver:
        with pytest.raises(ValueError, match="unknown prune strategy 'oldest'"):
            saver.prune(["t"], strategy="oldest")
        saver.prune([]), saver.delete_for_runs([]), saver.copy_thread("none", "x")
        assert saver.get_tuple({"configurable": {"thread_id": "none"}}) is None
        # a thread id that is a number, as SqliteSaver takes it
        cid = str(uuid.uuid4())
        saver.put({"configurable": {"thread_id": 7, "checkpoint_ns": ""}}, checkpoint(cid, 0),
                  {"source": "input", "step": -1, "parents": {}}, {})
        assert saver.get_tuple({"configurable": {"thread_id": "7"}}).checkpoint["id"] == cid
        # the same checkpoint put again replaces it
        saver.put({"configurable": {"thread_id": 7, "checkpoint_ns": ""}}, checkpoint(cid, 5),
                  {"source": "update", "step": 0, "parents": {}}, {})
        (t,) = saver.list({"configurable": {"thread_id": 7}})
        assert t.checkpoint["channel_values"] == {"step": 5} and t.metadata["source"] == "update"
        assert list(saver.list(None, limit=0)) == [] and len(list(saver.list(None, limit=-1))) == 1
        v1 = saver.get_next_version(None, None)
        v2 = saver.get_next_version(v1, None)
        assert v1 < v2 and v2.startswith("0" * 31 + "2.")
        assert json.loads(json.dumps(t.metadata)) == t.metadata


# ---- pieces: large checkpoints and writes kept as deduplicated pieces ------------------

DOC_WORDS = open(__file__.replace("tests/python/test_integrations_langgraph.py",
                                  "docs/python.md"), encoding="utf-8").read().split()


def chat_thread(saver, thread, steps, rnd, run=None):
    """A chat as LangGraph would checkpoint it: each step writes the new messages (real
    text: spans of docs/python.md) and a checkpoint holding every message so far.
    Returns (the raw bytes of its checkpoints, the states put)."""
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages, raw, states = [], 0, []
    for s in range(steps):
        new = []
        for _ in range(2):
            i = rnd.randrange(len(DOC_WORDS) - 150)
            new.append(" ".join(DOC_WORDS[i:i + rnd.randrange(20, 150)]))
        messages = messages + new
        cid = str(uuid6(clock_seq=s))
        if "checkpoint_id" in cfg["configurable"]:
            saver.put_writes(cfg, [("messages", new)], f"task-{s}", "agent")
        cp = checkpoint(cid, s)
        cp["channel_values"] = {"messages": messages, "step": s}
        raw += len(saver.serde.dumps_typed(cp)[1])
        cfg = saver.put(cfg, cp, {"source": "loop", "step": s, "parents": {}, "run_id": run or thread}, {})
        states.append((cid, messages))
    return raw, states


def piece_census(saver):
    """(stored piece ids, piece ids named by checkpoints and writes)."""
    from motedb.integrations.langgraph import LangGraphWrite, _unpack
    stored = set(saver.pieces.query().ids())
    named = set()
    for box, E in ((saver.checkpoints, LangGraphCheckpoint), (saver.writes, LangGraphWrite)):
        for (p,) in box.query().tuples(E.pieces):
            named.update(_unpack(p))
    return stored, named


def test_pieces_keep_a_thread_once_and_read_back_whole(tmp_path):
    import random
    rnd = random.Random(5)
    with MoteSaver.from_path(tmp_path / "c.mote", sync=False) as saver:
        raw, states = chat_thread(saver, "chat", 30, rnd)
        from motedb.integrations.langgraph import LangGraphPiece
        kept = sum(len(d) for (d,) in saver.pieces.query().tuples(LangGraphPiece.data))
        # each step adds two messages; its checkpoint repeats all the others, and holds
        # the writes that lead to it
        assert kept < 0.25 * raw, (kept, raw)
        for j, (cid, messages) in enumerate(states):  # every checkpoint reads back whole
            t = saver.get_tuple({"configurable": {"thread_id": "chat", "checkpoint_ns": "",
                                                  "checkpoint_id": cid}})
            assert t.checkpoint["channel_values"]["messages"] == messages
            # the next step's writes wait on it: its two new messages
            want = [(f"task-{j + 1}", "messages", states[j + 1][1][-2:])] if j + 1 < len(states) else []
            assert t.pending_writes == want
        stored, named = piece_census(saver)
        assert stored == named and len(stored) > 30
        # a saver that has not seen the thread finds what the parent has from the store:
        # the next step stores about what it adds, as this one would
        fresh = MoteSaver(saver.store)
        before = len(stored)
        cfg = {"configurable": {"thread_id": "chat", "checkpoint_ns": "", "checkpoint_id": states[-1][0]}}
        cp = checkpoint(str(uuid6(clock_seq=99)), 30)
        cp["channel_values"] = {"messages": states[-1][1] + ["one more message " * 20], "step": 30}
        fresh.put(cfg, cp, {"step": 30}, {})
        stored, named = piece_census(saver)
        assert stored == named and len(stored) - before <= 3
        # a write again under a stored task and index is kept as it was: its new value
        # leaves no piece behind
        first = {"configurable": {"thread_id": "chat", "checkpoint_ns": "", "checkpoint_id": states[0][0]}}
        saver.put_writes(first, [("messages", ["other " * 400]), ("messages", ["more " * 400])],
                         "task-1", "agent")
        assert saver.get_tuple(first).pending_writes == [("task-1", "messages", states[1][1][-2:]),
                                                         ("task-1", "messages", ["more " * 400])]
        stored, named = piece_census(saver)
        assert stored == named
        # a special write replaces the one stored: the pieces only it named go
        saver.put_writes(first, [("__error__", "boom " * 400)], "task-e", "agent")
        saver.put_writes(first, [("__error__", "bang " * 400)], "task-e", "agent")
        assert saver.get_tuple(first).pending_writes[-1] == ("task-e", "__error__", "bang " * 400)
        stored, named = piece_census(saver)
        assert stored == named


def test_pieces_follow_deletes_prunes_and_copies(tmp_path):
    import random
    rnd = random.Random(6)
    with MoteSaver.from_path(tmp_path / "g.mote", sync=False) as saver:
        chat_thread(saver, "a", 12, rnd)
        _, b_states = chat_thread(saver, "b", 12, rnd, run="run-b")
        chat_thread(saver, "c", 12, rnd)
        stored, named = piece_census(saver)
        assert stored == named
        saver.prune(["a"])  # no DeltaChannel: the newest only
        stored, named = piece_census(saver)
        assert stored == named
        of_b = saver._named("b")
        saver.copy_thread("b", "b2")
        assert not of_b & saver._named("b2")  # copies: its own pieces
        saver.copy_thread("b", "b2")  # again: what it held is replaced, nothing left over
        stored, named = piece_census(saver)
        assert stored == named
        saver.delete_thread("b")
        stored, named = piece_census(saver)
        assert stored == named and not of_b & stored
        t = saver.get_tuple({"configurable": {"thread_id": "b2", "checkpoint_ns": ""}})
        assert t.checkpoint["channel_values"]["messages"] == b_states[-1][1]
        saver.delete_for_runs(["c"])
        stored, named = piece_census(saver)
        assert stored == named
        assert saver.get_tuple({"configurable": {"thread_id": "c", "checkpoint_ns": ""}}) is None
        # a piece gone from under a checkpoint is reported, not read as something else, by a
        # saver that has not joined that checkpoint's pieces already (this one remembers
        # them by their ids: the bytes it returns are still the ones written)
        b2 = {"configurable": {"thread_id": "b2"}}
        before = [t.checkpoint for t in saver.list(b2)]
        gone = min(saver._named("b2"))
        saver.pieces.remove(gone)
        assert [t.checkpoint for t in saver.list(b2)] == before
        fresh = MoteSaver(saver.store)
        with pytest.raises(motedb.CorruptError, match=f"names piece {gone},"):
            for t in fresh.list(b2):
                pass
        with pytest.raises(motedb.CorruptError, match=f"names piece {gone},"):
            fresh.copy_thread("b2", "b3")


def test_stores_written_with_chunks_still_read(tmp_path):
    """A store whose checkpoints and writes keep their pieces as LangGraphChunk, under the
    thread and the hash (MoteSaver before 2026-12-07: written here as it did), reads back
    whole; new checkpoints on top of them are kept as pieces; prune, copy_thread and
    delete_thread remove the chunks nothing names any more."""
    import hashlib
    import random
    from motedb.integrations.langgraph import (LangGraphChunk, LangGraphWrite, _chunk_keys, _cut,
                                               _ns_key, _writes_key)
    rnd = random.Random(7)
    path = tmp_path / "old.mote"
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    serde = JsonPlusSerializer()
    with motedb.open(path) as store:
        cps, ws, ks = (store.box(E) for E in (LangGraphCheckpoint, LangGraphWrite, LangGraphChunk))
        messages, parent, states = [], None, []
        for s in range(6):
            new = [" ".join(DOC_WORDS[i:i + 120]) for i in (rnd.randrange(5000) for _ in range(2))]
            messages = messages + new
            cid = str(uuid6(clock_seq=s))
            cp = checkpoint(cid, s)
            cp["channel_values"] = {"messages": messages, "step": s}
            with store.write():
                for kind, obj in (("w", new), ("c", cp)):
                    if kind == "w" and parent is None:
                        continue
                    type_, blob = serde.dumps_typed(obj)
                    cut = [(hashlib.blake2b(d, digest_size=16).digest(), d) for d in _cut(blob)]
                    refs = b"".join(h for h, _ in cut)
                    keys = _chunk_keys("t", refs)
                    have = {k for (k,) in ks.query(LangGraphChunk.key.in_(keys)).tuples(LangGraphChunk.key)}
                    ks.put_many([LangGraphChunk(key=k, data=d) for k, (_h, d) in zip(keys, cut)
                                 if k not in have and not have.add(k)])
                    if kind == "w":
                        ws.put(LangGraphWrite(key=_writes_key("t", "", parent) + "1:x0", thread_id="t",
                                              checkpoint_id=parent, task_id="x", channel="messages",
                                              type=type_, chunks=refs))
                    else:
                        cps.put(LangGraphCheckpoint(key=_ns_key("t", "") + cid, thread_id="t",
                                                    checkpoint_id=cid, parent_checkpoint_id=parent,
                                                    type=type_, chunks=refs, metadata={"step": s}))
            parent = cid
            states.append((cid, messages))
    with MoteSaver.from_path(path) as saver:
        assert saver.chunks is not None
        for cid, msgs in states:
            t = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                                  "checkpoint_id": cid}})
            assert t.checkpoint["channel_values"]["messages"] == msgs
        listed = [t.checkpoint["channel_values"]["messages"] for t in saver.list(
            {"configurable": {"thread_id": "t"}})]
        assert listed == [m for _, m in reversed(states)]
        t = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                              "checkpoint_id": states[1][0]}})
        assert t.pending_writes == [("x", "messages", states[2][1][-2:])]
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": parent}}
        cp = checkpoint(str(uuid6(clock_seq=9)), 6)
        cp["channel_values"] = {"messages": messages + ["new " * 300], "step": 6}
        saver.put(cfg, cp, {"step": 6}, {})
        saver.copy_thread("t", "u")
        copied = saver.chunks.query(LangGraphChunk.key.startswith("1:u")).count()
        assert copied == saver.chunks.query(LangGraphChunk.key.startswith("1:t")).count() > 0
        saver.prune(["t"])  # the newest only, which is kept as pieces: no chunk of t is left
        assert saver.chunks.query(LangGraphChunk.key.startswith("1:t")).count() == 0
        t = saver.get_tuple({"configurable": {"thread_id": "u", "checkpoint_ns": "",
                                              "checkpoint_id": states[3][0]}})
        assert t.checkpoint["channel_values"]["messages"] == states[3][1]
        saver.delete_thread("u")
        assert saver.chunks.count() == 0
        stored, named = piece_census(saver)
        assert stored == named and stored


def test_joined_checkpoints_are_remembered_by_their_pieces(tmp_path, monkeypatch):
    """A saver keeps the bytes of the chunked checkpoints it cut or joined lately: the
    get_tuple after a put and a list that repeats the last one read no chunks; another
    saver reads them, once; the same answers. The memory is bounded (least recently used
    out first; a blob over an eighth of it is not kept), and a list whose joins push out
    a blob it found remembered still reads it (that was a CorruptError)."""
    from motedb.integrations.langgraph import _Recent

    b = _Recent(800)
    for k in b"abcdefgh":
        b.add(bytes([k]), bytes([k]) * 100)  # 800 bytes: all kept
    assert b.get(b"a") == b"a" * 100  # (now the most recent)
    b.add(b"i", b"i" * 100)  # over 800: b, the least recently used, goes
    assert b.get(b"b") is None and b.get(b"a") and b.get(b"i") and b._size == 800
    b.add(b"j", b"j" * 101)  # over an eighth of the budget: not kept
    assert b.get(b"j") is None and b.get(b"c")

    path = tmp_path / "b.mote"
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    reads = []
    with MoteSaver.from_path(path) as saver:
        monkeypatch.setattr(saver, "_piece_data", lambda ids: reads.append(set(ids)) or
                            MoteSaver._piece_data(saver, ids))
        for i in range(12):
            big = checkpoint(str(uuid6(clock_seq=i)), i)
            big["channel_values"] = {"log": [f"entry {k} " * 20 for k in range(i + 3)]}
            cfg = saver.put(cfg, big, {"step": i}, {})
            assert saver.get_tuple(cfg).checkpoint == big
        assert reads == []  # every blob was cut here
        first = [t.checkpoint for t in saver.list(cfg, limit=10)]
    with MoteSaver.from_path(path) as other:
        monkeypatch.setattr(other, "_piece_data", lambda ids: reads.append(set(ids)) or
                            MoteSaver._piece_data(other, ids))
        assert [t.checkpoint for t in other.list(cfg, limit=10)] == first
        assert len(reads) == 1 and reads[0]  # one query for all ten
        assert [t.checkpoint for t in other.list(cfg, limit=10)] == first
        assert len(reads) == 1  # remembered
    # a list whose newest checkpoint another saver wrote: joining it pushes out a
    # remembered one that the same list reads after it (room for 8 here)
    with MoteSaver.from_path(path) as a:
        b = MoteSaver(a.store)

        def same(i):  # checkpoints of one size
            c = checkpoint(str(uuid6(clock_seq=i)), 0)
            c["channel_values"] = {"log": [f"entry {i:02d} " * 20 for _ in range(14)]}
            return c
        size = len(a.serde.dumps_typed(same(0))[1])
        a._blobs = _Recent(8 * size + 8 * 64)
        cfg = {"configurable": {"thread_id": "u", "checkpoint_ns": ""}}
        for i in range(10):
            cfg = a.put(cfg, same(i), {"step": i}, {})
        assert len(a._blobs._by_key) == 8  # (the test's premise: full)
        b.put(cfg, same(10), {"step": 10}, {})
        got = [t.checkpoint["id"] for t in a.list(cfg | {"configurable": {
            "thread_id": "u", "checkpoint_ns": ""}}, limit=10)]
        assert len(got) == 10 and got == sorted(got, reverse=True)


def test_stores_the_integrations_open_are_repacked_at_close(tmp_path, monkeypatch):
    """A store MoteSaver opens from a path gets repack=True (checkpoints are written
    once and kept) unless the options say otherwise; one it is given is left as it is."""
    seen = []
    real = motedb.open

    def spy(path, **kw):
        seen.append(kw)
        return real(path, **kw)

    monkeypatch.setattr(motedb, "open", spy)
    with MoteSaver.from_path(tmp_path / "a.mote"):
        pass
    with MoteSaver.from_path(tmp_path / "b.mote", repack=False, sync=False):
        pass
    assert seen == [{"repack": True}, {"repack": False, "sync": False}]
    with real(tmp_path / "c.mote") as store:
        MoteSaver(store).close()
        assert not store.closed


def test_stores_with_the_run_id_index_lose_it_and_still_delete_runs(tmp_path):
    """MoteSaver indexed LangGraphCheckpoint.run_id until 2026-12-07 (a leaf at a random
    place in every put's commit); delete_for_runs now scans the checkpoints instead. A
    store written with the index opens (the saver's box() drops the index), and
    delete_for_runs removes the same checkpoints as before."""
    class LangGraphCheckpoint(motedb.Entity):  # (as MoteSaver declared it until then)
        id: int = 0
        key: Annotated[str, motedb.Unique]
        thread_id: str = ""
        checkpoint_ns: str = ""
        checkpoint_id: str = ""
        parent_checkpoint_id: str | None = None
        run_id: Annotated[str | None, motedb.Index] = None
        type: str = ""
        checkpoint: bytes = b""
        pieces: bytes = b""
        chunks: bytes = b""
        metadata: dict = motedb.field(default_factory=dict)

    Old, New = LangGraphCheckpoint, motedb.integrations.langgraph.LangGraphCheckpoint
    path = tmp_path / "indexed.mote"
    with motedb.open(path) as store:
        box = store.box(Old)
        box.put_many([Old(key=f"1:t1:{i:04}", thread_id="t", checkpoint_id=f"{i:04}",
                          run_id=f"run-{i % 3}", type="json", checkpoint=b"{}")
                      for i in range(30)])
    with motedb.open(path, readonly=True) as store:
        with pytest.raises(motedb.SchemaError, match="run_id loses its index"):
            store.box(New)
    with MoteSaver.from_path(path) as saver:
        saver.delete_for_runs(["run-1", "nothing"])
        left = sorted(cp.checkpoint_id for cp in saver.checkpoints.all())
        assert left == [f"{i:04}" for i in range(30) if i % 3 != 1]
    with motedb.open(path, readonly=True) as store:  # the stored schema has no index now
        assert store.box(New).count() == 20
