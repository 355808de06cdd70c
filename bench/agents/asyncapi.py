"""bench.agents' "async API" configuration: motedb.aio against aiosqlite under many concurrent coroutines.

The issue's row: 100 concurrent coroutines doing gets and small durable writes on one store, throughput (total
operations over the wall time) MoteDB / SQLite >= 3x. The data is an agent's "memories": a table / entity Memory of
an id, a short text (a passage of at most TEXT_MAX_CHARS characters of the suite's corpus of real text) and an
int importance with an index.

  pre-fill   `rows` memories, the same for both engines, in one transaction; the store is closed and opened again
             (neither is timed)
  run        `coroutines` coroutines at once (asyncio.gather), each doing its `ops` operations one after another:
             WRITE_SHARE of all operations are writes, half of them inserts of a new memory, half updates of one
             memory's importance, each write its own durable commit; the rest get one memory by id. Which operation
             comes where and its arguments (the ids, the new rows, the new importances) are drawn in advance with a
             fixed seed: both engines run the same sequence. A get is checked to return the memory asked for; at
             the end the number of memories is checked.

The engines, each as its user would set it up for this:

  motedb.aio   `await motedb.aio.open(path)` with motedb.open's defaults (sync=True: one fdatasync per commit);
               a get is `await box.get(id)`, an insert `await box.put(Memory(...))`, an update
               `await box.update(id, importance=v)`, each its own transaction; gets run on the store's two reader
               threads (which take every read queued at once; a get whose pages are cached runs on the loop's
               thread), writes on the store's writer thread (each its own commit, one fdatasync for the writes
               queued together); the size of the loop's default executor (min(32, CPUs + 4)) is recorded.
  aiosqlite    `aiosqlite.connect(path, isolation_level=None)`: autocommit, so every write is one statement and one
               transaction, committed durably when the call returns (PRAGMA synchronous=FULL set on every
               connection and read back, journal_mode=WAL, busy_timeout=5000 ms so that a connection that finds the
               database locked waits instead of failing). An aiosqlite connection runs its calls one at a time on a
               thread of its own, so the coroutines share `sqlite_readers` reader connections (a get goes to the
               next one in turn: gets run side by side, never behind a write's sync, as WAL allows) and one writer
               connection (the writes queue on its thread: SQLite has one writer at a time anyway, and they wait
               there rather than in SQLite's busy handler, which sleeps). With sqlite_readers=0, one connection
               shared by every call (what AsyncSqliteSaver does). A get is one call (execute_fetchall, the row made
               into an object as motedb.aio returns one), an insert one call (execute_insert), an update one call.

Measured per run: operations per second (all operations over the wall time of the gather), the latency of each
get and each write (p50, p90, p99) from the coroutine around its await, so queueing for a thread is included.
"""

import asyncio
import itertools
import os
import random
import time

from bench.common.stats import percentile

WRITE_SHARE = 0.10
TEXT_MAX_CHARS = 200
KINDS = ("get", "write")
SQLITE_PRAGMAS = ("PRAGMA synchronous=FULL", "PRAGMA busy_timeout=5000")
SQLITE_SCHEMA = ("CREATE TABLE memory (id INTEGER PRIMARY KEY, text TEXT NOT NULL, importance INTEGER NOT NULL)",
                 "CREATE INDEX memory_importance ON memory (importance)")
SQLITE_GET = "SELECT id, text, importance FROM memory WHERE id = ?"
SQLITE_INSERT = "INSERT INTO memory (text, importance) VALUES (?, ?)"
SQLITE_UPDATE = "UPDATE memory SET importance = ? WHERE id = ?"
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class Workload:
    """The pre-fill rows [(text, importance)] and per coroutine its operations: ("get", row index),
    ("insert", text, importance) or ("update", row index, importance); row indexes are 0-based into the pre-fill
    (each engine maps them to the ids it gave)."""

    def __init__(self, rows, per_coroutine):
        self.rows, self.per_coroutine = rows, per_coroutine

    @property
    def ops(self):
        return sum(len(p) for p in self.per_coroutine)

    def count(self, kind):
        return sum(1 for p in self.per_coroutine for op in p if op[0] == kind)


def make_workload(texts, rows, coroutines, ops, seed):
    rng = random.Random(seed)
    short = [t for t in texts if len(t) <= TEXT_MAX_CHARS]
    prefill = [(rng.choice(short), rng.randrange(100)) for _ in range(rows)]
    total = coroutines * ops
    writes = round(total * WRITE_SHARE)
    kinds = ["insert"] * (writes // 2) + ["update"] * (writes - writes // 2) + ["get"] * (total - writes)
    rng.shuffle(kinds)
    seq = []
    for k in kinds:
        if k == "get":
            seq.append(("get", rng.randrange(rows)))
        elif k == "insert":
            seq.append(("insert", rng.choice(short), rng.randrange(100)))
        else:
            seq.append(("update", rng.randrange(rows), rng.randrange(100)))
    return Workload(prefill, [seq[i * ops:(i + 1) * ops] for i in range(coroutines)])


def _check(cond, what):
    if not cond:
        raise RuntimeError(f"unexpected result: {what}")


async def drive(ops, get, insert, update, lat):
    """One coroutine's operations through the engine's get(i) / insert(text, importance) / update(i, v); the
    latency of each appended to lat["get"] or lat["write"]."""
    pc = time.perf_counter
    for op in ops:
        t0 = pc()
        if op[0] == "get":
            await get(op[1])
            lat["get"].append(pc() - t0)
        else:
            await (insert(op[1], op[2]) if op[0] == "insert" else update(op[1], op[2]))
            lat["write"].append(pc() - t0)


# ---- motedb.aio ----------------------------------------------------------------------------------------------------

_MEMORY = []


def memory_entity():
    """The entity class Memory (made once: motedb is imported in the benchmark's environment only)."""
    if not _MEMORY:
        from typing import Annotated

        import motedb

        class Memory(motedb.Entity):
            id: int = 0
            text: str
            importance: Annotated[int, motedb.Index] = 0

        _MEMORY.append(Memory)
    return _MEMORY[0]


async def run_motedb(work, wl, lat, info):
    import motedb.aio

    Memory = memory_entity()
    path = os.path.join(work, "memories.mote")
    info["open_options"] = {"sync": True, "how": "motedb.aio.open(path): motedb.open's defaults"}
    async with await motedb.aio.open(path) as store:
        box = await store.box(Memory)
        ids = await box.put_many([Memory(text=t, importance=v) for t, v in wl.rows])
    async with await motedb.aio.open(path) as store:
        box = await store.box(Memory)

        async def get(i):
            m = await box.get(ids[i])
            _check(m is not None and m.id == ids[i], f"get({ids[i]}) returned {m!r}")

        async def insert(text, importance):
            await box.put(Memory(text=text, importance=importance))

        async def update(i, importance):
            await box.update(ids[i], importance=importance)

        t0 = time.perf_counter()
        await asyncio.gather(*(drive(ops, get, insert, update, lat) for ops in wl.per_coroutine))
        wall = time.perf_counter() - t0
        executor = getattr(asyncio.get_running_loop(), "_default_executor", None)
        info["threads"] = {"default_executor_max_workers": getattr(executor, "_max_workers", None)}
        n = await box.count()
        _check(n == len(wl.rows) + wl.count("insert"), f"{n} memories at the end")
    return wall


# ---- aiosqlite -----------------------------------------------------------------------------------------------------

class MemoryRow:
    """A memory read from SQLite, as an object (motedb.aio's get returns a Memory)."""
    __slots__ = ("id", "text", "importance")

    def __init__(self, id, text, importance):
        self.id, self.text, self.importance = id, text, importance


async def _connect(path):
    import aiosqlite
    con = await aiosqlite.connect(path, isolation_level=None)
    for p in SQLITE_PRAGMAS:
        await con.execute_fetchall(p)
    return con


async def _settings(con):
    (sync,), = await con.execute_fetchall("PRAGMA synchronous")
    (journal,), = await con.execute_fetchall("PRAGMA journal_mode")
    (busy,), = await con.execute_fetchall("PRAGMA busy_timeout")
    return {"synchronous": SYNCHRONOUS.get(sync, str(sync)), "journal_mode": journal, "busy_timeout_ms": busy}


async def run_sqlite(work, wl, lat, info, readers):
    path = os.path.join(work, "memories.sqlite")
    con = await _connect(path)
    try:
        await con.execute_fetchall("PRAGMA journal_mode=WAL")
        for s in SQLITE_SCHEMA:
            await con.execute_fetchall(s)
        await con.execute_fetchall("BEGIN")
        await con.executemany("INSERT INTO memory (text, importance) VALUES (?, ?)", wl.rows)
        await con.execute_fetchall("COMMIT")
        ids = [r[0] for r in await con.execute_fetchall("SELECT id FROM memory ORDER BY id")]
    finally:
        await con.close()
    writer = await _connect(path)
    pool = [await _connect(path) for _ in range(readers)]
    try:
        turn = itertools.cycle(pool or [writer])

        async def get(i):
            rows = await next(turn).execute_fetchall(SQLITE_GET, (ids[i],))
            m = MemoryRow(*rows[0]) if rows else None
            _check(m is not None and m.id == ids[i], f"get({ids[i]}) returned {rows!r}")

        async def insert(text, importance):
            await writer.execute_insert(SQLITE_INSERT, (text, importance))

        async def update(i, importance):
            await writer.execute_fetchall(SQLITE_UPDATE, (importance, ids[i]))

        t0 = time.perf_counter()
        await asyncio.gather(*(drive(ops, get, insert, update, lat) for ops in wl.per_coroutine))
        wall = time.perf_counter() - t0
        settings = [await _settings(c) for c in [writer] + pool]
        _check(all(s == settings[0] for s in settings), f"connections with different settings: {settings}")
        info["sqlite"] = settings[0]
        info["threads"] = {"connections": 1 + readers, "writer": 1, "readers": readers}
        (n,), = await writer.execute_fetchall("SELECT count(*) FROM memory")
        _check(n == len(wl.rows) + wl.count("insert"), f"{n} memories at the end")
    finally:
        for c in pool + [writer]:
            await c.close()
    return wall


def measure(engine, wl, work, readers):
    """One run of the workload with engine "motedb.aio" or "aiosqlite" in the (fresh) directory work; its
    record: wall time, operations, ops/s, latencies per kind (µs), what the engine ran with."""
    lat = {k: [] for k in KINDS}
    info = {}
    if engine == "motedb.aio":
        wall = asyncio.run(run_motedb(work, wl, lat, info))
    else:
        wall = asyncio.run(run_sqlite(work, wl, lat, info, readers))
    rec = {"wall_s": wall, "ops": wl.ops, "ops_per_s": wl.ops / wall,
           "gets": wl.count("get"), "inserts": wl.count("insert"), "updates": wl.count("update"),
           "latency_us": {k: {"p50": percentile(v, 50) * 1e6, "p90": percentile(v, 90) * 1e6,
                              "p99": percentile(v, 99) * 1e6, "n": len(v)} for k, v in lat.items()}}
    rec.update(info)
    return rec
