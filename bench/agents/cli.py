"""bench.agents: MoteDB's LangGraph checkpointer (MoteSaver) against LangGraph's SQLite checkpointers in one run
(bench/agents/README.md).

A LangGraph-like workload drives each checkpointer's API with the same calls: N threads (chats) of M steps. A
step adds a human message and an AI reply whose contents are passages of real text (bench/vectors/corpus.py:
manual pages and Python docstrings of this machine, drawn with a fixed seed, the same for every engine), and
makes the calls LangGraph makes for it:

  get_tuple   the thread's latest checkpoint (its messages are the state the step starts from)
  put_writes  the step's task writes: the two new messages on channel "messages", with a task id and path
  put         the new checkpoint: parent the previous one, channel_values {"messages": every message so far},
              channel versions from the saver's get_next_version, ids from uuid6, metadata source/step/parents/run_id
  list        the thread's newest 10 checkpoints

A thread starts with LangGraph's input checkpoint (empty_checkpoint(), metadata source "input", step -1). Each
saver serializes with its own serde (the default JsonPlusSerializer). Configurations, each run --reps times with
the engines' order rotating (each engine first, second, ... in turn):

  sync, per-thread   one store / database file per thread, opened at the thread's start and closed at its end
                     (MoteSaver.from_path against SqliteSaver.from_conn_string); threads one after another
  sync, shared       one store / database for every thread
  async, shared      MoteSaver's async methods against AsyncSqliteSaver (aiosqlite), the threads as coroutines,
                     --concurrency of them at a time

and in each of these, third, the disk's limit ("limit"): LangGraph's InMemorySaver, the same serializer and calls,
making each put and put_writes durable with one 4 KB write and one fdatasync: no durable checkpointer with this
serializer can be much faster, so MoteDB is measured against it too (>= 0.9x);

and one more, of MoteDB's own async API rather than the checkpointer (bench/agents/asyncapi.py):

  async API          motedb.aio against aiosqlite: --aio-coroutines (100) coroutines at once on one store of
                     "memories" (id, a short text, an indexed int importance), each doing --aio-ops operations: 90 %
                     gets by id, 10 % small writes (an insert or an update of one importance), each its own durable
                     commit. Measured: operations per second, p50/p99 latency of gets and of writes.

and LangGraph's long-term memory store (bench/agents/storesearch.py):

  store search       MoteStore against SqliteStore: users' memories (passages of real text with a kind and stars) in
                     a namespace per user; searches with a filter on two fields, and semantic searches (a query text
                     and a filter) when both stores can index (SqliteStore needs sqlite-vec, loadable only by a Python
                     whose sqlite3 loads extensions). Measured: searches per second, p50/p99 latency of each kind.

Measured (checkpointer configurations): steps per second (N*M over the wall time, opening and closing included), the p50 (and p99) latency of
each call kind, bytes on disk per checkpoint (every file left after close, SQLite's -wal/-shm included if any
remain, over the N*(M+1) checkpoints), and the share of the wall time spent in the savers' serializer (their own,
timed by a wrapper that forwards each call). Both engines commit durably: MoteDB's default sync=True (one fdatasync
per commit) and SQLite in WAL mode with the synchronous setting it runs with, which is recorded.
"""

import asyncio
import os
import platform
import random
import shutil
import sqlite3
import sys
import time
import uuid
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timezone

from bench.agents import asyncapi, storesearch
from bench.common import REPO, envinfo, loadgate
from bench.common import output
from bench.common.args import profile_parser
from bench.common.stats import median, percentile
from bench.common.venvs import package_versions

PROFILES = {  # threads, steps per thread, reps, load gate timeout (s)
    "smoke": (4, 5, 1, 0),
    "quick": (20, 20, 3, 30),
    "full": (100, 50, 5, 120),
}
AIO_PROFILES = {  # async API: coroutines, operations per coroutine, memories pre-filled
    "smoke": (100, 5, 1000),
    "quick": (100, 200, 10000),
    "full": (100, 1000, 10000),
}
SEARCH_PROFILES = {  # store search: users, memories per user, searches of each kind
    "smoke": (4, 30, 20),
    "quick": (20, 200, 1000),
    "full": (100, 500, 1000),
}
CALLS = ("get_tuple", "put_writes", "put", "list")
# (mode, layout): the two engines compared, MoteDB's first
# (the checkpointer's configurations also measure the disk's limit, LimitEngine, third)
CONFIGS = {
    "sync per-thread": ("sync", "per-thread", ("MoteSaver", "SqliteSaver", "limit")),
    "sync shared": ("sync", "shared", ("MoteSaver", "SqliteSaver", "limit")),
    "async shared": ("async", "shared", ("MoteSaver", "AsyncSqliteSaver", "limit")),
    "async API": ("aio", "shared", ("motedb.aio", "aiosqlite")),
    "store search": ("search", "shared", ("MoteStore", "SqliteStore")),
}
SAVER_CONFIGS = [c for c, (mode, _l, _e) in CONFIGS.items() if mode in ("sync", "async")]  # the checkpointer's
AIO_KINDS = asyncapi.KINDS
# MoteDB / SQLite: at least 3x, at most 0.5x
TARGETS = {"steps_per_s": 3.0, "bytes_per_checkpoint": 0.5, "ops_per_s": 3.0, "searches_per_s": 3.0,
           "steps_per_s_vs_limit": 0.9}  # MoteDB / the disk's limit (LimitEngine): at least 0.9x
TASK_PATH = "~__pregel_pull, chatbot"  # the path LangGraph gives the task of a node named "chatbot"
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def log(msg):
    print(f"bench.agents: {msg}", file=sys.stderr, flush=True)


# ---- the workload -------------------------------------------------------------------------------------------------

class Chat:
    """One thread: its id and, per step, the two messages, the task id and the run id (drawn in advance, so every
    engine gets the same)."""

    def __init__(self, thread_id, turns, task_ids, run_ids):
        self.thread_id, self.turns, self.task_ids, self.run_ids = thread_id, turns, task_ids, run_ids


def make_chats(texts, threads, steps, seed):
    """threads chats of steps turns: a human message of one passage, an AI reply of 1-3 passages."""
    from langchain_core.messages import AIMessage, HumanMessage

    rng = random.Random(seed)

    def uid():
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    chats = []
    for _ in range(threads):
        tid = uid()
        turns = []
        for _ in range(steps):
            human = HumanMessage(content=rng.choice(texts), id=uid())
            reply = "\n\n".join(rng.choice(texts) for _ in range(rng.randint(1, 3)))
            turns.append((human, AIMessage(content=reply, id=uid())))
        chats.append(Chat(tid, turns, [uid() for _ in range(steps)], [uid() for _ in range(steps)]))
    return chats


def input_checkpoint():
    from langgraph.checkpoint.base import empty_checkpoint
    return empty_checkpoint()


def next_checkpoint(saver, prev, messages, step):
    """The checkpoint after a step, as LangGraph's loop makes it for a one-node chat graph (START -> chatbot):
    the channels __start__, messages and branch:to:chatbot get new versions (from the saver), the node has seen
    its trigger. Returns (checkpoint, new_versions)."""
    from langgraph.checkpoint.base import LATEST_VERSION
    from langgraph.checkpoint.base.id import uuid6

    versions = dict(prev["channel_versions"])
    new_versions = {ch: saver.get_next_version(versions.get(ch), None)
                    for ch in ("__start__", "messages", "branch:to:chatbot")}
    versions.update(new_versions)
    checkpoint = {
        "v": LATEST_VERSION,
        "id": str(uuid6(clock_seq=step)),
        "ts": datetime.now(timezone.utc).isoformat(),
        "channel_values": {"messages": messages},
        "channel_versions": versions,
        "versions_seen": {"__input__": {}, "__start__": {"__start__": versions["__start__"]},
                          "chatbot": {"branch:to:chatbot": versions["branch:to:chatbot"]}},
        "updated_channels": ["messages"],
    }
    return checkpoint, new_versions


def _check(cond, what):
    if not cond:
        raise RuntimeError(f"unexpected result: {what}")


def chat_sync(saver, chat, lat):
    """One thread's steps through the sync API; the latency of each call appended to lat[call]."""
    pc = time.perf_counter
    config = {"configurable": {"thread_id": chat.thread_id, "checkpoint_ns": ""}}
    saver.put(config, input_checkpoint(),
              {"source": "input", "step": -1, "parents": {}, "run_id": chat.run_ids[0]}, {})
    for s, (human, ai) in enumerate(chat.turns):
        t0 = pc()
        tup = saver.get_tuple(config)
        t1 = pc()
        messages = tup.checkpoint["channel_values"].get("messages", [])
        _check(len(messages) == 2 * s, f"{len(messages)} messages at step {s}")
        saver.put_writes(tup.config, [("messages", [human, ai])], chat.task_ids[s], TASK_PATH)
        t2 = pc()
        checkpoint, new_versions = next_checkpoint(saver, tup.checkpoint, messages + [human, ai], s)
        t3 = pc()
        saver.put(tup.config, checkpoint,
                  {"source": "loop", "step": s, "parents": {}, "run_id": chat.run_ids[s]}, new_versions)
        t4 = pc()
        history = list(saver.list(config, limit=10))
        t5 = pc()
        _check(len(history) == min(10, s + 2), f"list returned {len(history)} at step {s}")
        lat["get_tuple"].append(t1 - t0)
        lat["put_writes"].append(t2 - t1)
        lat["put"].append(t4 - t3)
        lat["list"].append(t5 - t4)


async def chat_async(saver, chat, lat):
    """chat_sync through the async API."""
    pc = time.perf_counter
    config = {"configurable": {"thread_id": chat.thread_id, "checkpoint_ns": ""}}
    await saver.aput(config, input_checkpoint(),
                     {"source": "input", "step": -1, "parents": {}, "run_id": chat.run_ids[0]}, {})
    for s, (human, ai) in enumerate(chat.turns):
        t0 = pc()
        tup = await saver.aget_tuple(config)
        t1 = pc()
        messages = tup.checkpoint["channel_values"].get("messages", [])
        _check(len(messages) == 2 * s, f"{len(messages)} messages at step {s}")
        await saver.aput_writes(tup.config, [("messages", [human, ai])], chat.task_ids[s], TASK_PATH)
        t2 = pc()
        checkpoint, new_versions = next_checkpoint(saver, tup.checkpoint, messages + [human, ai], s)
        t3 = pc()
        await saver.aput(tup.config, checkpoint,
                         {"source": "loop", "step": s, "parents": {}, "run_id": chat.run_ids[s]}, new_versions)
        t4 = pc()
        history = [t async for t in saver.alist(config, limit=10)]
        t5 = pc()
        _check(len(history) == min(10, s + 2), f"alist returned {len(history)} at step {s}")
        lat["get_tuple"].append(t1 - t0)
        lat["put_writes"].append(t2 - t1)
        lat["put"].append(t4 - t3)
        lat["list"].append(t5 - t4)


# ---- the engines --------------------------------------------------------------------------------------------------

class SyncOpened:
    """An engine whose saver serves its async methods itself: the async session opens it as the sync one does."""

    @asynccontextmanager
    async def asession(self, path, info):
        with self.session(path, info) as saver:
            yield saver


class MoteEngine(SyncOpened):
    """MoteSaver on MoteDB stores opened with motedb.open's defaults (sync=True: one fdatasync per commit)."""
    ext = ".mote"

    @contextmanager
    def session(self, path, info):
        from motedb.integrations.langgraph import MoteSaver
        info["open_options"] = {"sync": True}
        with MoteSaver.from_path(path, sync=True) as saver:
            yield saver


def _sqlite_settings(row_sync, row_journal):
    return {"synchronous": SYNCHRONOUS.get(row_sync, str(row_sync)), "journal_mode": row_journal}


class SqliteEngine:
    """SqliteSaver.from_conn_string (sqlite3.connect(path, check_same_thread=False)), as it sets itself up: WAL,
    the connection's default synchronous (read back after the run)."""
    ext = ".sqlite"

    @contextmanager
    def session(self, path, info):
        from langgraph.checkpoint.sqlite import SqliteSaver
        with SqliteSaver.from_conn_string(path) as saver:
            yield saver
            sync = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
            journal = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
            info["sqlite"] = _sqlite_settings(sync, journal)


class AsyncSqliteEngine:
    """AsyncSqliteSaver.from_conn_string (aiosqlite.connect(path)), as it sets itself up."""
    ext = ".sqlite"

    @asynccontextmanager
    async def asession(self, path, info):
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            yield saver
            async with saver.conn.execute("PRAGMA synchronous") as cur:
                sync = (await cur.fetchone())[0]
            async with saver.conn.execute("PRAGMA journal_mode") as cur:
                journal = (await cur.fetchone())[0]
            info["sqlite"] = _sqlite_settings(sync, journal)


class LimitEngine(SyncOpened):
    """The disk's limit for this workload: LangGraph's InMemorySaver (the same serializer and calls, its state in
    dicts) that makes every put and put_writes durable as the cheapest store could, with one 4 KB pwrite and one
    fdatasync of its file, and fsyncs the file's directory once, at its first commit (a new file's name is durable
    only then). The async methods do the in-memory part on the loop and the write and sync on a worker thread
    (asyncio.to_thread: concurrent tasks' syncs in flight at once). No checkpointer that keeps its checkpoints on
    disk, one sync per commit, with this serializer, can be much faster (bench/agents/README.md)."""
    ext = ".limit"

    @staticmethod
    def saver_class():
        import threading

        from langgraph.checkpoint.memory import InMemorySaver

        class LimitSaver(InMemorySaver):
            def __init__(self, path):
                super().__init__()
                self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                self.dir = os.path.dirname(os.path.abspath(path))
                self.page, self.commits, self.lock = bytes(4096), 0, threading.Lock()

            def durable(self):
                with self.lock:
                    n = self.commits
                    self.commits += 1
                os.pwrite(self.fd, self.page, (n % 16) * 4096)
                os.fdatasync(self.fd)
                if n == 0:
                    d = os.open(self.dir, os.O_RDONLY)
                    try:
                        os.fsync(d)
                    finally:
                        os.close(d)

            def put(self, *a, **k):
                out = InMemorySaver.put(self, *a, **k)
                self.durable()
                return out

            def put_writes(self, *a, **k):
                InMemorySaver.put_writes(self, *a, **k)
                self.durable()

            async def aput(self, *a, **k):
                out = InMemorySaver.put(self, *a, **k)
                await asyncio.to_thread(self.durable)
                return out

            async def aput_writes(self, *a, **k):
                InMemorySaver.put_writes(self, *a, **k)
                await asyncio.to_thread(self.durable)

            def close(self):
                os.close(self.fd)

        return LimitSaver

    @contextmanager
    def session(self, path, info):
        saver = self.saver_class()(path)
        try:
            yield saver
        finally:
            saver.close()


LIMIT = "limit"  # the reference engine of every checkpointer configuration, beside the two compared
LIMIT_SETUP = ("LangGraph's InMemorySaver (the same serializer and calls, its state in dicts) making each put and "
               "put_writes durable with one 4 KB pwrite and one fdatasync of its file (the directory fsynced at the "
               "file's first commit); async: the in-memory part on the loop, the write and sync through "
               "asyncio.to_thread")
ENGINES = {"MoteSaver": MoteEngine(), "SqliteSaver": SqliteEngine(), "AsyncSqliteSaver": AsyncSqliteEngine(),
           LIMIT: LimitEngine()}


# ---- one measurement ----------------------------------------------------------------------------------------------

class TimedSerde:
    """The saver's own serializer, unchanged, with the time of each dumps_typed / loads_typed call appended to
    `spent` (list.append: safe from the worker threads of MoteSaver's async methods)."""

    def __init__(self, inner, spent):
        self.inner, self.spent = inner, spent

    def dumps_typed(self, obj):
        t0 = time.perf_counter()
        try:
            return self.inner.dumps_typed(obj)
        finally:
            self.spent.append(time.perf_counter() - t0)

    def loads_typed(self, data):
        t0 = time.perf_counter()
        try:
            return self.inner.loads_typed(data)
        finally:
            self.spent.append(time.perf_counter() - t0)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def timed(saver, spent):
    saver.serde = TimedSerde(saver.serde, spent)
    return saver


def dir_bytes(path):
    """(total bytes, number of files, sorted list of the file name suffixes seen) of the files below path."""
    total, n, kinds = 0, 0, set()
    for d, _dirs, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(d, f))
            n += 1
            kinds.add(f.split(".", 1)[1] if "." in f else f)
    return total, n, sorted(kinds)


def measure(config, engine_name, chats, work, concurrency):
    """One run of a configuration with one engine in a fresh directory; returns its record."""
    mode, layout, _ = CONFIGS[config]
    engine = ENGINES[engine_name]
    lat = {c: [] for c in CALLS}
    serde = []
    info = {}
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    pc = time.perf_counter
    if mode == "sync":
        t0 = pc()
        if layout == "per-thread":
            for i, chat in enumerate(chats):
                with engine.session(os.path.join(work, f"thread-{i:05d}{engine.ext}"), info) as saver:
                    chat_sync(timed(saver, serde), chat, lat)
        else:
            with engine.session(os.path.join(work, "shared" + engine.ext), info) as saver:
                timed(saver, serde)
                for chat in chats:
                    chat_sync(saver, chat, lat)
        wall = pc() - t0
    else:
        async def main():
            sem = asyncio.Semaphore(concurrency)

            async def one(saver, chat):
                async with sem:
                    await chat_async(saver, chat, lat)

            t0 = pc()
            async with engine.asession(os.path.join(work, "shared" + engine.ext), info) as saver:
                timed(saver, serde)
                await asyncio.gather(*(one(saver, c) for c in chats))
            return pc() - t0
        wall = asyncio.run(main())
    steps = sum(len(c.turns) for c in chats)
    checkpoints = steps + len(chats)
    total, files, kinds = dir_bytes(work)
    shutil.rmtree(work)
    rec = {
        "wall_s": wall, "serde_s": sum(serde), "serde_calls": len(serde),
        "steps": steps, "steps_per_s": steps / wall, "checkpoints": checkpoints,
        "bytes": total, "files": files, "file_kinds": kinds, "bytes_per_checkpoint": total / checkpoints,
        "latency_us": {c: {"p50": percentile(v, 50) * 1e6, "p90": percentile(v, 90) * 1e6,
                           "p99": percentile(v, 99) * 1e6, "n": len(v)} for c, v in lat.items()},
    }
    rec.update(info)
    return rec


# ---- the run -------------------------------------------------------------------------------------------------------

def git_revision():
    commit = envinfo.git(REPO, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None}
    dirty = envinfo.git(REPO, "status", "--porcelain", "--", "bench/agents", "bench/common")
    src_dirty = envinfo.git(REPO, "status", "--porcelain", "--", "src", "include", "python")
    return {"commit": commit or None, "bench_agents_modified": bool(dirty),
            "motedb_sources_modified": bool(src_dirty)}


def sqlite_compile_defaults():
    con = sqlite3.connect(":memory:")
    opts = [r[0] for r in con.execute("PRAGMA compile_options")]
    con.close()
    return [o for o in opts if "SYNCHRONOUS" in o or "WAL" in o]


def environment(args, tmp, corpus):
    from bench.agents import VENV
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python3 -m bench.agents " + " ".join(args.argv),
        "python": platform.python_version(),
        "packages": package_versions(),
        "venv": {"path": os.path.relpath(VENV.dir, REPO), "install_failures": VENV.stamp().get("install_failures", {})},
        "platform": platform.platform(),
        "cpu": envinfo.cpu_model() or "unknown",
        "cpus": os.cpu_count(),
        "memory_total_bytes": envinfo.mem_total_bytes() or 0,
        "scratch_directory": os.path.relpath(tmp, REPO),
        "file_system": envinfo.filesystem(tmp),
        "load_1m_at_start": round(envinfo.loadavg()[0], 2),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_compile_options": sqlite_compile_defaults(),
        "git": git_revision(),
        "corpus": corpus,
    }


def run(args):
    threads, steps, reps, load_timeout = PROFILES[args.profile]
    threads = args.threads or threads
    steps = args.steps or steps
    reps = args.reps or reps
    load_timeout = load_timeout if args.load_timeout is None else args.load_timeout
    coroutines, aio_ops, aio_rows = AIO_PROFILES[args.profile]
    coroutines = args.aio_coroutines or coroutines
    aio_ops = args.aio_ops or aio_ops
    aio_rows = args.aio_rows or aio_rows
    readers = (os.cpu_count() or 1) if args.sqlite_readers is None else args.sqlite_readers
    from bench.vectors.corpus import passages

    texts, corpus = passages(os.path.join(REPO, ".bench-tmp", "vectors", "cache"), log=log)
    chats = make_chats(texts, threads, steps, args.seed)
    aio_wl = asyncapi.make_workload(texts, aio_rows, coroutines, aio_ops, args.seed)
    s_users, s_per_user, s_queries = SEARCH_PROFILES[args.profile]
    search_wl = storesearch.make_workload(texts, s_users, s_per_user, s_queries, args.seed)
    no_semantic = storesearch.semantic_unavailable()
    search_kinds = ("filter",) if no_semantic else storesearch.SEARCH_KINDS
    if no_semantic:
        log(f"store search: semantic searches not measured: {no_semantic}")
    text_bytes = sum(len(m.content.encode()) for c in chats for t in c.turns for m in t)
    tmp = os.path.abspath(args.tmp)
    os.makedirs(tmp, exist_ok=True)
    env = environment(args, tmp, corpus)
    base = os.path.join(tmp, f"run-{os.getpid()}")
    measurements = {cfg: {e: [] for e in CONFIGS[cfg][2]} for cfg in CONFIGS}
    gates = []
    try:
        for rep in range(reps):
            g = loadgate.wait_until_quiet(args.load_max, load_timeout)
            gates.append({"rep": rep + 1, "load_1m": round(g.after[0], 2), "waited_s": round(g.waited_s, 1),
                          "timed_out": g.timed_out and load_timeout > 0})
            for cfg, (mode, _layout, engines) in CONFIGS.items():
                k = rep % len(engines)  # (two orders only, reversed, would keep a third engine in the middle)
                order = engines[k:] + engines[:k]
                for e in order:
                    work = os.path.join(base, "work")
                    if mode in ("aio", "search"):
                        shutil.rmtree(work, ignore_errors=True)
                        os.makedirs(work)
                        rec = (asyncapi.measure(e, aio_wl, work, readers) if mode == "aio"
                               else storesearch.measure(e, search_wl, work, search_kinds))
                        rec["bytes"], rec["files"], _kinds = dir_bytes(work)
                        shutil.rmtree(work)
                    else:
                        rec = measure(cfg, e, chats, work, args.concurrency)
                    rec["rep"] = rep + 1
                    rec["order"] = order.index(e) + 1
                    measurements[cfg][e].append(rec)
                    if mode == "search":
                        log(f"rep {rep + 1}/{reps} {cfg:<15} {e:<16} " + ", ".join(
                            f"{k} {v['searches_per_s']:,.0f}/s p50 {v['latency_us']['p50']:,.0f} µs"
                            for k, v in rec["kinds"].items()))
                    elif mode == "aio":
                        lat = rec["latency_us"]
                        log(f"rep {rep + 1}/{reps} {cfg:<15} {e:<16} {rec['ops_per_s']:>8,.0f} ops/s   "
                            f"get p50 {lat['get']['p50']:,.0f} µs, write p50 {lat['write']['p50']:,.0f} µs")
                    else:
                        log(f"rep {rep + 1}/{reps} {cfg:<15} {e:<16} {rec['steps_per_s']:>8,.0f} steps/s "
                            f"{rec['bytes_per_checkpoint']:>9,.0f} B/checkpoint")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results, ratios = {}, {}
    for cfg, (mode, _layout, engines) in CONFIGS.items():
        results[cfg] = {}
        if mode == "search":
            for e in engines:
                recs = measurements[cfg][e]
                results[cfg][e] = {k: {"searches_per_s": median(r["kinds"][k]["searches_per_s"] for r in recs),
                                       "latency_p50_us": median(r["kinds"][k]["latency_us"]["p50"] for r in recs),
                                       "latency_p99_us": median(r["kinds"][k]["latency_us"]["p99"] for r in recs)}
                                   for k in search_kinds}
                results[cfg][e]["fill_s"] = median(r["fill_s"] for r in recs)
                results[cfg][e]["bytes_after_close"] = median(r["bytes"] for r in recs)
            m, o = (results[cfg][e] for e in engines)
            ratios[cfg] = {"against": engines[1], **{
                k: {"searches_per_s": m[k]["searches_per_s"] / o[k]["searches_per_s"],
                    "latency_p50": m[k]["latency_p50_us"] / o[k]["latency_p50_us"],
                    "latency_p99": m[k]["latency_p99_us"] / o[k]["latency_p99_us"]} for k in search_kinds}}
            continue
        if mode == "aio":
            for e in engines:
                recs = measurements[cfg][e]
                results[cfg][e] = {
                    "ops_per_s": median(r["ops_per_s"] for r in recs),
                    "latency_p50_us": {k: median(r["latency_us"][k]["p50"] for r in recs) for k in AIO_KINDS},
                    "latency_p99_us": {k: median(r["latency_us"][k]["p99"] for r in recs) for k in AIO_KINDS},
                    "bytes_after_close": median(r["bytes"] for r in recs),
                    "threads": recs[-1]["threads"],
                }
                for key in ("sqlite", "open_options"):
                    if key in recs[-1]:
                        results[cfg][e][key] = recs[-1][key]
            m, o = (results[cfg][e] for e in engines)
            ratios[cfg] = {
                "against": engines[1],
                "ops_per_s": m["ops_per_s"] / o["ops_per_s"],
                "latency_p50": {k: m["latency_p50_us"][k] / o["latency_p50_us"][k] for k in AIO_KINDS},
                "latency_p99": {k: m["latency_p99_us"][k] / o["latency_p99_us"][k] for k in AIO_KINDS},
            }
            continue
        for e in engines:
            recs = measurements[cfg][e]
            results[cfg][e] = {
                "steps_per_s": median(r["steps_per_s"] for r in recs),
                "bytes_per_checkpoint": median(r["bytes_per_checkpoint"] for r in recs),
                "serde_share": median(r["serde_s"] / r["wall_s"] for r in recs),
                "latency_p50_us": {c: median(r["latency_us"][c]["p50"] for r in recs) for c in CALLS},
                "latency_p99_us": {c: median(r["latency_us"][c]["p99"] for r in recs) for c in CALLS},
            }
            if "sqlite" in recs[-1]:
                results[cfg][e]["sqlite"] = recs[-1]["sqlite"]
            if "open_options" in recs[-1]:
                results[cfg][e]["open_options"] = recs[-1]["open_options"]
        m, o, lim = (results[cfg][e] for e in engines)
        ratios[cfg] = {
            "against": engines[1],
            "steps_per_s": m["steps_per_s"] / o["steps_per_s"],
            "steps_per_s_vs_limit": m["steps_per_s"] / lim["steps_per_s"],
            "sqlite_steps_per_s_vs_limit": o["steps_per_s"] / lim["steps_per_s"],
            "limit_over_sqlite": lim["steps_per_s"] / o["steps_per_s"],
            "bytes_per_checkpoint": m["bytes_per_checkpoint"] / o["bytes_per_checkpoint"],
            "latency_p50": {c: m["latency_p50_us"][c] / o["latency_p50_us"][c] for c in CALLS},
        }
    sqlite_sync = sorted({rec["sqlite"]["synchronous"] for cfg in measurements for recs in measurements[cfg].values()
                          for rec in recs if "sqlite" in rec})
    parameters = {
        "profile": args.profile, "threads": threads, "steps_per_thread": steps, "reps": reps,
        "concurrency_async": args.concurrency, "seed": args.seed,
        "checkpoints_per_run": threads * (steps + 1),
        "message_text_bytes": text_bytes,
        "messages": "per step a human message (one passage) and an AI reply (1-3 passages, blank lines between)",
        "motedb_open": {"sync": True},
        "sqlite_synchronous_seen": sqlite_sync,
        "sqlite_durable_per_commit": all(s in ("FULL", "EXTRA") for s in sqlite_sync),
        "async_api": {
            "coroutines": coroutines, "ops_per_coroutine": aio_ops, "ops_per_run": aio_wl.ops,
            "rows_prefilled": aio_rows, "gets_per_run": aio_wl.count("get"),
            "inserts_per_run": aio_wl.count("insert"), "updates_per_run": aio_wl.count("update"),
            "write_share": asyncapi.WRITE_SHARE,
            "memory": f"id, text (a passage of <= {asyncapi.TEXT_MAX_CHARS} characters of the corpus), "
                      "importance (int, indexed)",
            "text_bytes_prefilled": sum(len(t.encode()) for t, _v in aio_wl.rows),
            "writes": "half inserts of a new memory, half updates of one memory's importance; each its own "
                      "durable commit",
            "motedb": "motedb.aio.open(path) (motedb.open's defaults: sync=True); box.get on the store's "
                      "reader threads (a batch of queued reads per trip; a get of cached pages on the loop's own "
                      "thread), box.put / box.update on the store's writer thread (each its own commit, one "
                      "fdatasync for the writes queued together)",
            "sqlite_readers": readers,
            "sqlite": (f"aiosqlite.connect(path, isolation_level=None) (autocommit: a write is one statement, one "
                       f"transaction), journal_mode=WAL, {', '.join(asyncapi.SQLITE_PRAGMAS)} on every connection; "
                       + (f"{readers} reader connection(s) taking the gets in turn and one writer connection "
                          "taking every write (each connection runs its calls one at a time on its own thread)"
                          if readers else "one connection shared by every call (its own thread runs them one at "
                                          "a time)")),
        },
        "store_search": {
            "users": s_users, "memories_per_user": s_per_user, "searches_per_kind": s_queries,
            "kinds": list(search_kinds), "semantic_not_measured": no_semantic, "limit": storesearch.LIMIT,
            "memory": f"value {{'text': a passage of <= {storesearch.TEXT_MAX_CHARS} characters of the corpus, "
                      f"'kind': one of {len(storesearch.KINDS_OF_ITEM)}, 'stars': 0..4}} in ('users', u, 'memories')",
            "filter": "search(('users', u), filter={'kind': k, 'stars': {'$gte': s}}, limit=10)",
            "semantic": f"search(('users', u), query=<a passage of u>, filter={{'kind': k}}, limit=10); embeddings "
                        f"of {storesearch.EMBED_DIMS} floats from the words (hashed), computed before the run",
            "fill": "one batch (one commit) per user, not timed",
            "motedb": "MoteStore.from_path(path) (sync=True)", "sqlite": "SqliteStore.from_conn_string(path), setup()",
        },
        "limit": LIMIT_SETUP,
        "targets": {"steps_per_s": f">= {TARGETS['steps_per_s']}x",
                    "steps_per_s_vs_limit": f">= {TARGETS['steps_per_s_vs_limit']}x",
                    "searches_per_s (store search)": f">= {TARGETS['searches_per_s']}x",
                    "bytes_per_checkpoint": f"<= {TARGETS['bytes_per_checkpoint']}x",
                    "ops_per_s (async API)": f">= {TARGETS['ops_per_s']}x"},
        "load_gate": {"max_load_1m": args.load_max, "timeout_s": load_timeout, "where": "before each rep",
                      "readings": gates},
    }
    return {"environment": env, "parameters": parameters, "measurements": measurements, "results": results,
            "ratios": ratios}


# ---- output -------------------------------------------------------------------------------------------------------

def _fmt_num(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def aio_label(p):
    return f"async API: {p['async_api']['coroutines']} coroutines"


def markdown(res):
    env, p, r, ratios = res["environment"], res["parameters"], res["results"], res["ratios"]
    sync = ", ".join(p["sqlite_synchronous_seen"]) or "?"
    a = p["async_api"]
    readers = a["sqlite_readers"]
    out = [f"## bench/agents — {env['started']} ({p['profile']})", "",
           f"- {p['threads']} threads × {p['steps_per_thread']} steps ({p['checkpoints_per_run']:,} checkpoints per "
           f"run), medians of {p['reps']} reps rotating the engines' order; messages of real text "
           f"({p['message_text_bytes'] / 1e6:.2f} MB); async: {p['concurrency_async']} threads at a time",
           f"- {aio_label(p)} at once, {a['ops_per_coroutine']} operations each ({a['ops_per_run']:,}: "
           f"{a['gets_per_run']:,} gets by id, {a['inserts_per_run']:,} inserts, {a['updates_per_run']:,} updates "
           f"of an indexed int, each write its own durable commit) on {a['rows_prefilled']:,} memories of real "
           f"text; motedb.aio (gets on the loop or its reader threads, writes on its writer thread) vs aiosqlite, "
           + (f"{readers} reader connection{'s' if readers != 1 else ''} taking the gets in turn + 1 writer "
              "connection taking the writes, autocommit" if readers else
              "one shared connection, autocommit"),
           f"- MoteDB sync=True (one fdatasync per commit); SQLite {env['sqlite']} WAL, synchronous={sync}"
           + ("" if p["sqlite_durable_per_commit"] else
              " — NOT durable per commit (a WAL commit is synced only at checkpoints)")
           + f"; {env['cpu']}, {env['cpus']} CPUs",
           "", "| configuration | metric | MoteDB | SQLite | MoteDB / SQLite | target |",
           "|:--|:--|--:|--:|--:|:--|"]
    labels = {"sync per-thread": "sync, a store per thread", "sync shared": "sync, one shared store",
              "async shared": "async, one shared store"}
    for cfg, (mode, _layout, engines) in CONFIGS.items():
        m, o = r[cfg][engines[0]], r[cfg][engines[1]]
        ra = ratios[cfg]
        if mode == "search":
            s = p["store_search"]
            for k in s["kinds"]:
                label = f"store search, {k} ({s['users']} users × {s['memories_per_user']} memories; {engines[1]})"
                ok = "✓" if ra[k]["searches_per_s"] >= TARGETS["searches_per_s"] else "✗"
                out.append(f"| {label} | searches/s | {m[k]['searches_per_s']:,.0f} | {o[k]['searches_per_s']:,.0f} | "
                           f"{ra[k]['searches_per_s']:.2f}x | ≥ {TARGETS['searches_per_s']}x {ok} |")
                for q in ("p50", "p99"):
                    out.append(f"| {label} | {q} µs | {_fmt_num(m[k][f'latency_{q}_us'])} | "
                               f"{_fmt_num(o[k][f'latency_{q}_us'])} | {ra[k][f'latency_{q}']:.2f}x | |")
            if s["semantic_not_measured"]:
                out.append(f"| store search, semantic | | | | | not measured: {s['semantic_not_measured']} |")
            continue
        if mode == "aio":
            label = f"{aio_label(p)} ({engines[0]} vs {engines[1]})"
            ok = "✓" if ra["ops_per_s"] >= TARGETS["ops_per_s"] else "✗"
            out.append(f"| {label} | ops/s | {m['ops_per_s']:,.0f} | {o['ops_per_s']:,.0f} | "
                       f"{ra['ops_per_s']:.2f}x | ≥ {TARGETS['ops_per_s']}x {ok} |")
            for k in AIO_KINDS:
                for q in ("p50", "p99"):
                    out.append(f"| {label} | {k} {q} µs | {_fmt_num(m[f'latency_{q}_us'][k])} | "
                               f"{_fmt_num(o[f'latency_{q}_us'][k])} | {ra[f'latency_{q}'][k]:.2f}x | |")
            continue
        label = f"{labels[cfg]} (vs {engines[1]})"
        ok = "✓" if ra["steps_per_s"] >= TARGETS["steps_per_s"] else "✗"
        out.append(f"| {label} | steps/s | {m['steps_per_s']:,.0f} | {o['steps_per_s']:,.0f} | "
                   f"{ra['steps_per_s']:.2f}x | ≥ {TARGETS['steps_per_s']}x {ok} |")
        ok = "✓" if ra["bytes_per_checkpoint"] <= TARGETS["bytes_per_checkpoint"] else "✗"
        out.append(f"| {label} | bytes/checkpoint | {m['bytes_per_checkpoint']:,.0f} | "
                   f"{o['bytes_per_checkpoint']:,.0f} | {ra['bytes_per_checkpoint']:.2f}x | "
                   f"≤ {TARGETS['bytes_per_checkpoint']}x {ok} |")
        out.append(f"| {label} | time in the serde (share of wall) | {m['serde_share']:.0%} | "
                   f"{o['serde_share']:.0%} | | |")
        for c in CALLS:
            out.append(f"| {label} | {c} p50 µs | {_fmt_num(m['latency_p50_us'][c])} | "
                       f"{_fmt_num(o['latency_p50_us'][c])} | {ra['latency_p50'][c]:.2f}x | |")
    out += ["", "### Against the disk's limit", "",
            f"The limit: LangGraph's InMemorySaver (the same serializer and calls) making each put and put_writes "
            f"durable with one 4 KB write and one fdatasync (`{LIMIT}`, measured in the same reps). Its steps/s over "
            f"SQLite's is the most any durable checkpointer with this serializer could gain here, whatever its "
            f"store; MoteDB's target against it is ≥ {TARGETS['steps_per_s_vs_limit']}x.", "",
            "| configuration | MoteDB steps/s | SQLite steps/s | limit steps/s | MoteDB / limit | target | "
            "SQLite / limit | limit / SQLite (the most to gain) |",
            "|:--|--:|--:|--:|--:|:--|--:|--:|"]
    for cfg in SAVER_CONFIGS:
        engines = CONFIGS[cfg][2]
        m, o, lim = (r[cfg][e]["steps_per_s"] for e in engines)
        ra = ratios[cfg]
        ok = "✓" if ra["steps_per_s_vs_limit"] >= TARGETS["steps_per_s_vs_limit"] else "✗"
        out.append(f"| {labels[cfg]} (vs {engines[1]}) | {m:,.0f} | {o:,.0f} | {lim:,.0f} | "
                   f"{ra['steps_per_s_vs_limit']:.2f}x | ≥ {TARGETS['steps_per_s_vs_limit']}x {ok} | "
                   f"{ra['sqlite_steps_per_s_vs_limit']:.2f}x | {ra['limit_over_sqlite']:.2f}x |")
    out += ["", "Ratios are MoteDB over SQLite: steps/s and ops/s higher is better, bytes and latencies lower is "
            "better. Async latencies include the wait for the connection (AsyncSqliteSaver: one, behind a lock; "
            "aiosqlite: the connection's thread) or a worker thread (MoteSaver: reads on the loop's thread when the "
            "store's cache holds their pages, else asyncio.to_thread; its writer thread for aput and aput_writes; "
            "motedb.aio: its two reader threads for gets, its writer thread for writes; the loop's default executor "
            "has "
            f"{r['async API']['motedb.aio']['threads'].get('default_executor_max_workers')} threads)."]
    return "\n".join(out) + "\n"


def charts(res, out_dir):
    """throughput.png, latency.png and bytes.png; [] if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no charts")
        return []
    r = res["results"]
    cfgs = SAVER_CONFIGS
    colors = ("#2b7bba", "#d9822b", "#9a9a9a")
    files = []

    def bars(ax, key, ylabel, title, cfgs=cfgs, sides=("MoteDB (MoteSaver)", "SQLite (Sqlite/AsyncSqliteSaver)"),
             ticks=None):
        x = range(len(cfgs))
        w = 0.76 / len(sides)
        for i, side in enumerate(sides):
            vals = [r[c][CONFIGS[c][2][i]][key] for c in cfgs]
            bs = ax.bar([xi + (i - (len(sides) - 1) / 2) * w for xi in x], vals, w, label=side, color=colors[i])
            ax.bar_label(bs, labels=[f"{v:,.0f}" for v in vals], fontsize=8)
        ax.set_xticks(list(x), ticks or cfgs)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)

    p = res["parameters"]
    a = p["async_api"]
    sub = f"{p['threads']} threads × {p['steps_per_thread']} steps, median of {p['reps']}"
    aio_sub = f"{a['coroutines']} coroutines × {a['ops_per_coroutine']} ops, median of {p['reps']}"
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1.3]})
    bars(ax, "steps_per_s", "steps per second", f"Checkpointer steps/s ({sub})",
         sides=("MoteDB (MoteSaver)", "SQLite (Sqlite/AsyncSqliteSaver)",
                "the disk's limit (InMemorySaver + a 4 KB write and fdatasync per put)"))
    bars(ax2, "ops_per_s", "operations per second", f"async API ops/s\n({aio_sub})", cfgs=["async API"],
         sides=("motedb.aio", "aiosqlite"), ticks=[aio_label(p)])
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "throughput.png"), dpi=110)
    plt.close(fig)
    files.append("throughput.png")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bars(ax, "bytes_per_checkpoint", "bytes on disk per checkpoint", f"Bytes per checkpoint ({sub})")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "bytes.png"), dpi=110)
    plt.close(fig)
    files.append("bytes.png")
    fig, axes = plt.subplots(1, len(cfgs) + 1, figsize=(16, 4.2), sharey=True)
    for ax, cfg in zip(axes, cfgs):
        engines = CONFIGS[cfg][2]
        x = range(len(CALLS))
        w = 0.8 / len(engines)
        for i, e in enumerate(engines):
            vals = [r[cfg][e]["latency_p50_us"][c] for c in CALLS]
            ax.bar([xi + (i - (len(engines) - 1) / 2) * w for xi in x], vals, w, label=e, color=colors[i])
        ax.set_xticks(list(x), CALLS, fontsize=8)
        ax.set_title(cfg, fontsize=10)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax = axes[-1]
    cols = [(k, q) for k in AIO_KINDS for q in ("p50", "p99")]
    for i, e in enumerate(CONFIGS["async API"][2]):
        vals = [r["async API"][e][f"latency_{q}_us"][k] for k, q in cols]
        ax.bar([xi + (i - 0.5) * 0.38 for xi in range(len(cols))], vals, 0.38, label=e, color=colors[i])
    ax.set_xticks(list(range(len(cols))), [f"{k} {q}" for k, q in cols], fontsize=8)
    ax.set_title(f"{aio_label(p)} (p50 and p99)", fontsize=10)
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    axes[0].set_ylabel("latency (µs, log scale)")
    fig.suptitle(f"p50 latency per call ({sub}); async API: p50 and p99 ({aio_sub})")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "latency.png"), dpi=110)
    plt.close(fig)
    files.append("latency.png")
    return files


def implausible(res):
    """What is missing or not plausible in a run's results (empty if all is well)."""
    bad = []
    p = res["parameters"]
    a = p["async_api"]
    for cfg, (mode, _layout, engines) in CONFIGS.items():
        for e in engines:
            recs = res["measurements"].get(cfg, {}).get(e, [])
            if len(recs) != p["reps"]:
                bad.append(f"{cfg}/{e}: {len(recs)} reps")
                continue
            if mode == "search":
                s = p["store_search"]
                for rec in recs:
                    for k in s["kinds"]:
                        rk = rec["kinds"].get(k)
                        if not rk or rk["searches"] != s["searches_per_kind"] or not rk["searches_per_s"] > 0 \
                                or not 0 < rk["latency_us"]["p50"] <= rk["latency_us"]["p99"]:
                            bad.append(f"{cfg}/{e}: {k} {rk}")
                continue
            if mode == "aio":
                for rec in recs:
                    if not rec["ops_per_s"] > 0 or rec["ops"] != a["ops_per_run"] or not rec["bytes"] > 0:
                        bad.append(f"{cfg}/{e}: ops/s {rec['ops_per_s']}, ops {rec['ops']}, bytes {rec['bytes']}")
                    want = {"get": a["gets_per_run"], "write": a["inserts_per_run"] + a["updates_per_run"]}
                    for k in AIO_KINDS:
                        lk = rec["latency_us"][k]
                        if lk["n"] != want[k] or not 0 < lk["p50"] <= lk["p99"]:
                            bad.append(f"{cfg}/{e}: {k} latency {lk}")
                if e == "aiosqlite" and recs[-1].get("sqlite", {}).get("synchronous") != "FULL":
                    bad.append(f"{cfg}/{e}: SQLite's settings {recs[-1].get('sqlite')} (synchronous=FULL set)")
                continue
            for rec in recs:
                if not rec["steps_per_s"] > 0 or not rec["bytes"] > 0 or not 0 < rec["serde_s"] < rec["wall_s"] * 4:
                    bad.append(f"{cfg}/{e}: steps/s {rec['steps_per_s']}, bytes {rec['bytes']}, "
                               f"serde {rec['serde_s']} s")
                if rec["checkpoints"] != p["checkpoints_per_run"]:
                    bad.append(f"{cfg}/{e}: {rec['checkpoints']} checkpoints")
                for c in CALLS:
                    lc = rec["latency_us"][c]
                    if lc["n"] != p["threads"] * p["steps_per_thread"] or not 0 < lc["p50"] <= lc["p99"]:
                        bad.append(f"{cfg}/{e}: {c} latency {lc}")
            if e not in ("MoteSaver", LIMIT) and "sqlite" not in recs[-1]:
                bad.append(f"{cfg}/{e}: SQLite's settings not read")
        ra = res["ratios"][cfg]
        if mode == "search":
            if not all(ra[k]["searches_per_s"] > 0 for k in p["store_search"]["kinds"]):
                bad.append(f"{cfg}: ratios {ra}")
        elif mode == "aio" and not ra["ops_per_s"] > 0:
            bad.append(f"{cfg}: ratios {ra}")
        elif mode != "aio" and not (ra["steps_per_s"] > 0 and ra["bytes_per_checkpoint"] > 0
                                    and ra["steps_per_s_vs_limit"] > 0):
            bad.append(f"{cfg}: ratios {ra}")
    return bad


def main(argv):
    ap = profile_parser("python3 -m bench.agents", __doc__, PROFILES)
    ap.add_argument("--threads", type=int, help="threads (chats) per run (default: the profile's)")
    ap.add_argument("--steps", type=int, help="steps per thread")
    ap.add_argument("--reps", type=int, help="repetitions of every configuration (medians are reported)")
    ap.add_argument("--concurrency", type=int, default=10, help="async: threads run at a time (default 10)")
    ap.add_argument("--seed", type=int, default=42, help="seed of the messages' draw and of the async API's "
                    "operations (default 42)")
    ap.add_argument("--aio-coroutines", type=int, help="async API: coroutines at once (default: the profile's, 100)")
    ap.add_argument("--aio-ops", type=int, help="async API: operations per coroutine (default: the profile's)")
    ap.add_argument("--aio-rows", type=int, help="async API: memories pre-filled (default: the profile's)")
    ap.add_argument("--sqlite-readers", type=int, help="async API: aiosqlite reader connections beside the writer "
                    "connection (default: one per CPU; 0: one connection for everything)")
    ap.add_argument("--load-max", type=float, default=1.5, help="wait before each rep while the 1-minute load "
                    "average is at or above this (default 1.5)")
    ap.add_argument("--load-timeout", type=float, help="longest wait, seconds (default: the profile's; 0: none)")
    ap.add_argument("--out", help="directory of the results (default results/agents/<time>-<profile>/)")
    ap.add_argument("--tmp", default=os.path.join(REPO, ".bench-tmp", "agents"), help="scratch directory")
    ap.set_defaults(profile="quick")
    args = ap.parse_args(argv)
    args.argv = argv
    res = run(args)
    out = args.out or os.path.join(REPO, "results", "agents", time.strftime("%Y-%m-%d_%H%M") + f"-{args.profile}")
    os.makedirs(out, exist_ok=True)
    res["environment"]["charts"] = charts(res, out)
    output.save(out, res, markdown(res))
    log(f"results in {os.path.relpath(out, REPO) if out.startswith(REPO) else out}")
    if args.profile == "smoke":
        bad = implausible(res)
        if bad:
            log(f"smoke: implausible results: {bad}")
            return 1
        log("smoke: all measurements plausible")
    return 0
