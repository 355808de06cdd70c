"""motedb.aio: MoteDB for asyncio. The same stores, boxes, queries and transactions,
with every operation that reads or writes the store awaited, run on a worker thread so
that the event loop never waits for a disk sync or a long query.

    import motedb.aio

    async def main():
        async with await motedb.aio.open("notes.mote") as store:
            box = await store.box(Note)
            await box.put(Note(text="hello"))
            async with store.write():                  # one transaction, one commit
                await box.put(Note(text="a"))
                await box.put(Note(text="b"))
            found = await box.query(Note.text.startswith("a")).find()

Semantics and errors are the sync API's (docs/python.md): each operation outside a
transaction is its own transaction; ``store.write()`` / ``store.read()`` are ``async
with`` blocks that commit at the end or roll back if the block raises, nested blocks
join the outer one. A transaction belongs to the task that entered it (and to the tasks
it starts, which inherit its context): its operations run in order on a thread of its
own, since a MoteDB transaction is bound to the thread that began it; operations of
other tasks run beside it: writes (puts, updates, removes) on the store's writer
thread, which takes every write queued at once, commits each as its own transaction
and makes them durable with one sync before any of their tasks resumes (a hundred
tasks' writes cost a few syncs, not a hundred); reads (gets, counts, queries) on the
store's two reader threads, which take every read queued at once, so that a hundred
tasks' gets cost a trip to a thread and a wakeup of the loop per batch rather than per
get. A get outside a transaction first tries the loop's own thread, reading only what
the store's cache holds (``MOTE_TXN_CACHED``, a few microseconds); only a get that
would read the file goes to a reader thread. Write transactions take turns as in
threads: a task whose write transaction waits for another's waits on its thread, not
in the loop. The extension releases the GIL while it syncs and while
queries run.

Building a query (conditions, ``order_by``, ``offset``, ``limit``, ``set_parameter``)
does no I/O and is not awaited; running it is. As with the sync API, a query runs on one
thread at a time: give each task its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Generic, Iterable, Sequence, TypeVar

from . import _core

E = TypeVar("E")
T = TypeVar("T")

__all__ = ["AsyncBox", "AsyncQuery", "AsyncStore", "AsyncTransaction", "open"]

# The transaction of the running task, per store: {id(sync store): AsyncTransaction}.
_current: contextvars.ContextVar[dict[int, AsyncTransaction]] = contextvars.ContextVar(
    "motedb_aio_transactions", default={})


async def open(path: str | os.PathLike, **options: Any) -> AsyncStore:
    """Open a store (``motedb.open``'s options) on a worker thread: an ``AsyncStore``."""
    from . import open as sync_open
    return AsyncStore(await asyncio.to_thread(sync_open, path, **options))


class _Workers:
    """Threads that run the operations tasks queue outside transactions. A thread takes
    every operation queued when it wakes, runs them, and hands their results to each loop
    in one call: one trip and one wakeup per batch (``asyncio.to_thread`` costs both per
    call, which was nearly all of a get's time with a hundred tasks: a get itself is
    ~0.5 us).

    The readers: two threads, so that a long query does not hold up every get behind it.
    The writer (``sync`` given: the store): one thread, whose writes each commit as their
    own transaction without waiting for their sync (``Store._defer_sync``), and then wait
    once for all of them (one fdatasync makes the batch durable: group commit from one
    thread, where threads that each sync wake up together and commit alone again) before
    any of them is answered: a write's task resumes once its write is durable, as
    always."""

    def __init__(self, threads: int, sync: Any = None) -> None:
        self._n = threads
        self._sync = sync
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], args: tuple, kwargs: dict) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if len(self._threads) < self._n:
            with self._lock:
                while len(self._threads) < self._n:
                    name = "motedb-writer" if self._sync is not None else "motedb-reader"
                    t = threading.Thread(target=self._work, name=name, daemon=True)
                    t.start()
                    self._threads.append(t)
        self._q.put((loop, fut, fn, args, kwargs))
        return fut

    def stop(self) -> list[threading.Thread]:
        """Stop the threads once they ran what is queued; the threads, to join."""
        with self._lock:
            threads, self._threads = self._threads, []
            for _ in threads:
                self._q.put(None)
        return threads

    def _work(self) -> None:
        deferring = False
        if self._sync is not None:
            try:  # another thread may defer this store's syncs (an AsyncStore's writer
                self._sync._defer_sync(True)  # beside a MoteSaver): each commit syncs
                deferring = True
            except _core.BusyError:
                pass
        while True:
            batch = [self._q.get()]
            while batch[-1] is not None:  # (a stop mark ends the batch: the others' are theirs)
                try:
                    batch.append(self._q.get_nowait())
                except queue.Empty:
                    break
            settled: dict[asyncio.AbstractEventLoop, list] = {}
            stop = False
            for item in batch:
                if item is None:
                    stop = True
                    continue
                loop, fut, fn, args, kwargs = item
                try:
                    out = (True, fn(*args, **kwargs))
                except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                    out = (False, e)
                settled.setdefault(loop, []).append((fut, *out))
            if deferring:
                try:
                    self._sync._wait_synced()
                except BaseException as e:  # noqa: BLE001 - the sync failed: no write of
                    for done in settled.values():  # the batch is durable
                        done[:] = [(f, False, e) if ok else (f, ok, v) for f, ok, v in done]
            for loop, done in settled.items():
                try:
                    loop.call_soon_threadsafe(_settle, done)
                except RuntimeError:  # that loop is closed: nobody waits
                    pass
            if stop:
                if deferring:  # (a later thread may get this one's ident)
                    self._sync._defer_sync(False)
                return


def _settle(done: list) -> None:
    for fut, ok, value in done:
        if not fut.cancelled():
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


class AsyncStore:
    """An open store for asyncio; ``store.sync`` is the ``motedb.Store`` underneath (for
    code that runs in threads of its own)."""

    def __init__(self, store: _core.Store) -> None:
        self.sync = store
        self._boxes: dict[type, AsyncBox] = {}
        self._readers = _Workers(2)
        self._writer = _Workers(1, store)

    @property
    def path(self) -> str:
        return self.sync.path

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def readonly(self) -> bool:
        return self.sync.readonly

    def _txn(self) -> AsyncTransaction | None:
        """The transaction the running task is in on this store, if any."""
        return _current.get().get(id(self.sync))

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args) on the thread of the task's transaction, else on a worker thread."""
        txn = self._txn()
        if txn is not None:
            return await txn._run(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _queue(self, workers: _Workers, fn: Callable[..., T], *args: Any,
                     **kwargs: Any) -> T:
        """fn(*args) on the thread of the task's transaction, else by workers."""
        txn = self._txn()
        if txn is not None:
            return await txn._run(fn, *args, **kwargs)
        if self.sync.closed:  # raises ClosedError at once, without a thread
            return fn(*args, **kwargs)
        return await workers.submit(fn, args, kwargs)

    async def _write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A single write: its transaction's thread, else the writer thread (its sync
        shared with the writes queued beside it)."""
        return await self._queue(self._writer, fn, *args, **kwargs)

    async def _read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A read: its transaction's thread, else a reader thread."""
        return await self._queue(self._readers, fn, *args, **kwargs)

    async def box(self, cls: type[E]) -> AsyncBox[E]:
        """The box of an entity class (registering or evolving its schema, as
        ``Store.box``: awaited, since that may write or build an index)."""
        sync = await self._run(self.sync.box, cls)
        box = self._boxes.get(cls)
        if box is None or box.sync is not sync:
            box = self._boxes[cls] = AsyncBox(self, sync)
        return box

    async def drop_property(self, entity: type | str, prop: str) -> None:
        await self._run(self.sync.drop_property, entity, prop)

    def write(self) -> AsyncTransaction:
        """``async with store.write():`` one write transaction (one commit)."""
        return AsyncTransaction(self, write=True)

    def read(self) -> AsyncTransaction:
        """``async with store.read():`` one read snapshot."""
        return AsyncTransaction(self, write=False)

    async def close(self) -> None:
        """Close the store (closing twice is fine), once the writes queued are done; its
        threads have ended when this returns."""
        for t in self._writer.stop():
            await asyncio.to_thread(t.join)
        await asyncio.to_thread(self.sync.close)
        for t in self._readers.stop():
            await asyncio.to_thread(t.join)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncTransaction:
    """A write transaction or read snapshot for asyncio (``store.write()`` /
    ``store.read()``), used once as ``async with``. Its operations run, in order, on a
    thread of its own."""

    def __init__(self, store: AsyncStore, *, write: bool) -> None:
        self.store, self.write = store, write
        self._pool: ThreadPoolExecutor | None = None
        self._outer: AsyncTransaction | None = None
        self._sync: Any = None
        self._token: contextvars.Token | None = None

    @property
    def _thread(self) -> ThreadPoolExecutor | None:
        """The one-thread executor of the outermost transaction, which this one runs on."""
        return self._pool if self._outer is None else self._outer._pool

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread,
                                                                lambda: fn(*args, **kwargs))

    async def __aenter__(self) -> AsyncTransaction:
        if self._token is not None or self._pool is not None:
            raise _core.TransactionError("a transaction is entered once")
        held = _current.get()
        self._outer = held.get(id(self.store.sync))
        if self._outer is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="motedb-txn")
        begin = self.store.sync.write if self.write else self.store.sync.read

        def enter() -> None:
            txn = begin()
            txn.__enter__()
            self._sync = txn
        try:
            await self._run(enter)
        except asyncio.CancelledError:
            # enter() may still run (it waits on the thread, for the writer lock):
            # end what it begins there, next on the same thread, so that nothing
            # stays open
            def undo() -> None:
                if self._sync is not None:
                    self._sync.__exit__(asyncio.CancelledError, None, None)
            self._thread.submit(undo)
            self._close_pool()
            raise
        except BaseException:
            self._close_pool()
            raise
        if self._outer is None:
            self._token = _current.set({**held, id(self.store.sync): self})
        else:  # joins the outer one (its thread)
            self._token = _current.set(held)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            sync = self._sync
            return await self._run(sync.__exit__, exc_type, exc, tb)
        finally:
            if self._token is not None:
                _current.reset(self._token)
            self._close_pool()

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)


class AsyncBox(Generic[E]):
    """A box for asyncio: ``await box.put(obj)``, ``await box.get(id)``, ...;
    ``box.sync`` is the ``motedb.Box``."""

    def __init__(self, store: AsyncStore, box: _core.Box) -> None:
        self.store, self.sync = store, box

    @property
    def entity(self) -> type[E]:
        return self.sync.entity

    async def put(self, obj: E, *, mode: str = "upsert") -> int:
        return await self.store._write(self.sync.put, obj, mode=mode)

    async def put_many(self, objs: Iterable[E], *, mode: str = "upsert") -> list[int]:
        objs = objs if isinstance(objs, (list, tuple)) else list(objs)
        return await self.store._write(self.sync.put_many, objs, mode=mode)

    async def update(self, id_or_obj: int | E, /, **changes: Any) -> None:
        await self.store._write(self.sync.update, id_or_obj, **changes)

    async def get(self, id: int) -> E | None:
        if self.store._txn() is None:  # on the loop's thread, if it needs no disk read
            got = self.sync._get_cached(id)
            if got is not ...:
                return got
        return await self.store._read(self.sync.get, id)

    async def get_many(self, ids: Sequence[int]) -> list[E | None]:
        return await self.store._read(self.sync.get_many, ids)

    async def all(self) -> list[E]:
        return await self.store._read(self.sync.all)

    async def count(self) -> int:
        return await self.store._read(self.sync.count)

    async def contains(self, id: int) -> bool:
        return await self.store._read(self.sync.contains, id)

    async def remove(self, id_or_obj: int | E) -> bool:
        return await self.store._write(self.sync.remove, id_or_obj)

    async def remove_many(self, ids_or_objs: Sequence[int | E]) -> int:
        return await self.store._write(self.sync.remove_many, ids_or_objs)

    async def remove_all(self) -> int:
        return await self.store._write(self.sync.remove_all)

    async def sweep(self) -> int:
        return await self.store._write(self.sync.sweep)

    async def backlinks(self, prop: Any, obj_or_id: Any) -> list[E]:
        return await self.store._read(self.sync.backlinks, prop, obj_or_id)

    def query(self, *conditions: Any) -> AsyncQuery[E]:
        """A query (built now, in C; run by awaiting its terminal operations)."""
        return AsyncQuery(self.store, self.sync.query(*conditions))


class AsyncQuery(Generic[E]):
    """A query for asyncio. Builders return the query; terminal operations are awaited;
    ``async for obj in query`` reads the matches in batches, from one snapshot as the
    sync iteration does. ``query.sync`` is the ``motedb.Query``."""

    BATCH = 256  # objects per trip to the worker thread when iterating

    def __init__(self, store: AsyncStore, query: _core.Query) -> None:
        self.store, self.sync = store, query

    def order_by(self, *orders: Any) -> AsyncQuery[E]:
        self.sync.order_by(*orders)
        return self

    def offset(self, n: int) -> AsyncQuery[E]:
        self.sync.offset(n)
        return self

    def limit(self, n: int) -> AsyncQuery[E]:
        self.sync.limit(n)
        return self

    def fusion(self, *, rrf_k: float | None = None,
               text_weight: float | None = None) -> AsyncQuery[E]:
        self.sync.fusion(rrf_k=rrf_k, text_weight=text_weight)
        return self

    def set_parameter(self, prop: Any, *values: Any) -> AsyncQuery[E]:
        self.sync.set_parameter(prop, *values)
        return self

    def plan(self) -> str:
        return self.sync.plan()

    async def find(self) -> list[E]:
        return await self.store._read(self.sync.find)

    async def find_with_scores(self, *props: Any) -> list[tuple[Any, float]]:
        return await self.store._read(self.sync.find_with_scores, *props)

    async def first(self) -> E | None:
        return await self.store._read(self.sync.first)

    async def count(self) -> int:
        return await self.store._read(self.sync.count)

    async def ids(self) -> list[int]:
        return await self.store._read(self.sync.ids)

    async def remove(self) -> int:
        return await self.store._write(self.sync.remove)

    async def tuples(self, *props: Any) -> list[tuple[Any, ...]]:
        return await self.store._read(self.sync.tuples, *props)

    async def dicts(self, *props: Any) -> list[dict[str, Any]]:
        return await self.store._read(self.sync.dicts, *props)

    async def group_count(self, prop: Any) -> dict[Any, int]:
        return await self.store._read(self.sync.group_count, prop)

    async def min(self, prop: Any) -> Any:
        return await self.store._read(self.sync.min, prop)

    async def max(self, prop: Any) -> Any:
        return await self.store._read(self.sync.max, prop)

    async def sum(self, prop: Any) -> int | float:
        return await self.store._read(self.sync.sum, prop)

    async def avg(self, prop: Any) -> float | None:
        return await self.store._read(self.sync.avg, prop)

    async def __aiter__(self) -> AsyncIterator[E]:
        # inside a transaction, on its thread; else on a thread of the iteration's own,
        # which holds its snapshot
        txn = self.store._txn()
        pool = None if txn is not None else ThreadPoolExecutor(1, thread_name_prefix="motedb-iter")

        async def run(fn: Callable[[], T]) -> T:
            if pool is None:
                return await self.store._run(fn)
            return await asyncio.get_running_loop().run_in_executor(pool, fn)

        it = await run(self.sync.iter)

        def batch() -> list[E]:
            out = []
            for obj in it:
                out.append(obj)
                if len(out) == self.BATCH:
                    break
            return out
        try:
            while True:
                objs = await run(batch)
                for obj in objs:
                    yield obj
                if len(objs) < self.BATCH:
                    return
        finally:
            await run(it.close)
            if pool is not None:
                pool.shutdown(wait=False)
