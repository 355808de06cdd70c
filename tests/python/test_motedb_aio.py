"""motedb.aio: the async API (pytest-asyncio). Same results and errors as the sync API,
transactions that commit, roll back and isolate across awaits, tasks that write side by
side, and an event loop that goes on running while an operation works."""

import asyncio
from typing import Annotated

import motedb
import motedb.aio
import pytest


class Note(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.Index]
    level: Annotated[int, motedb.Index] = 0


pytestmark = pytest.mark.asyncio


async def test_operations_equal_the_sync_api(tmp_path):
    async with await motedb.aio.open(tmp_path / "a.mote") as store:
        box = await store.box(Note)
        assert await box.put(Note(text="first", level=1)) == 1
        assert await box.put_many([Note(text=f"n{i}", level=i % 3) for i in range(9)]) == list(
            range(2, 11))
        await box.update(1, level=7)
        assert (await box.get(1)).level == 7 and await box.get(99) is None
        assert [o.id if o else None for o in await box.get_many([1, 99, 3])] == [1, None, 3]
        assert await box.count() == 10 and await box.contains(10)
        q = box.query(Note.level >= 1).order_by(Note.level.desc(), Note.text).limit(4)
        sync_q = store.sync.box(Note).query(Note.level >= 1).order_by(Note.level.desc(), Note.text).limit(4)
        assert await q.ids() == sync_q.ids() and len(await q.find()) == 4
        assert (await q.first()).id == 1 and await q.count() == 4
        assert await box.query(Note.level == 2).tuples(Note.text) == [("n2",), ("n5",), ("n8",)]
        assert await box.query().group_count(Note.level) == {0: 3, 1: 3, 2: 3, 7: 1}
        assert (await box.query().min(Note.level), await box.query().max(Note.level)) == (0, 7)
        assert await box.query().sum(Note.level) == 16
        assert [n.id async for n in box.query(Note.level == 0)] == [2, 5, 8]
        assert await box.query(Note.level == 0).remove() == 3
        assert await box.remove(1) and not await box.remove(1)
        assert await box.remove_many([3, 4, 100]) == 2 and await box.count() == 4
        with pytest.raises(motedb.NotFoundError, match="no object with id 1000"):
            await box.put(Note(id=1000, text="x"), mode="update")
        with pytest.raises(TypeError):
            await box.put(Note(text=5))
    assert store.closed
    with pytest.raises(motedb.ClosedError):
        await box.count()


async def test_iteration_reads_one_snapshot_in_batches(tmp_path):
    async with await motedb.aio.open(tmp_path / "i.mote") as store:
        box = await store.box(Note)
        await box.put_many([Note(text=f"t{i}", level=i) for i in range(1000)])
        seen = []
        async for n in box.query(Note.level >= 0):
            if len(seen) == 10:  # written after the iteration began: not seen
                await box.put(Note(text="late", level=5000))
            seen.append(n.level)
        assert seen == list(range(1000))


async def test_transactions_commit_roll_back_and_isolate(tmp_path):
    async with await motedb.aio.open(tmp_path / "t.mote") as store:
        box = await store.box(Note)
        async with store.write():
            await box.put(Note(text="one"))
            async with store.write():  # nested: joins
                await box.put(Note(text="two"))
            await asyncio.sleep(0)  # other tasks run while it is open
            assert await box.count() == 2  # its own writes
        assert await box.count() == 2
        with pytest.raises(ValueError, match="changed my mind"):
            async with store.write():
                await box.put(Note(text="three"))
                raise ValueError("changed my mind")
        assert await box.count() == 2

        # a snapshot does not see what another task commits meanwhile
        started, committed = asyncio.Event(), asyncio.Event()

        async def writer():
            await started.wait()
            await box.put(Note(text="meanwhile"))
            committed.set()

        task = asyncio.create_task(writer())
        async with store.read():
            before = await box.count()
            started.set()
            await committed.wait()
            assert await box.count() == before == 2
        await task
        assert await box.count() == 3
        with pytest.raises(motedb.TransactionError):
            async with store.read():
                await box.put(Note(text="in a read"))
        txn = store.write()
        async with txn:
            pass
        with pytest.raises(motedb.TransactionError, match="entered once"):
            async with txn:
                pass


async def test_tasks_write_side_by_side(tmp_path):
    """20 tasks, each a read-modify-write of one counter in its own transaction: none is
    lost (their transactions take turns) and the loop is free while they wait."""
    async with await motedb.aio.open(tmp_path / "c.mote") as store:
        box = await store.box(Note)
        await box.put(Note(text="counter", level=0))

        async def bump():
            for _ in range(5):
                async with store.write():
                    n = await box.get(1)
                    await asyncio.sleep(0)
                    n.level += 1
                    await box.put(n)

        await asyncio.gather(*(bump() for _ in range(20)))
        assert (await box.get(1)).level == 100


async def test_the_loop_runs_while_an_operation_works(tmp_path):
    async with await motedb.aio.open(tmp_path / "l.mote", sync=False) as store:
        box = await store.box(Note)
        ticks, running = 0, True

        async def ticker():
            nonlocal ticks
            while running:
                await asyncio.sleep(0.002)
                ticks += 1

        t = asyncio.create_task(ticker())
        await asyncio.sleep(0.01)
        before = ticks
        await box.put_many([Note(text=f"x{i}", level=i) for i in range(200_000)])
        during = ticks - before
        running = False
        await t
        assert during >= 5, during  # a loop blocked by put_many would not have ticked
        assert await box.count() == 200_000


async def test_a_task_cancelled_while_it_waits_to_write_leaves_nothing_open(tmp_path):
    async with await motedb.aio.open(tmp_path / "x.mote") as store:
        box = await store.box(Note)
        holding, release = asyncio.Event(), asyncio.Event()

        async def holder():
            async with store.write():
                await box.put(Note(text="held"))
                holding.set()
                await release.wait()

        kept = store.write()  # still referenced after the cancel (no rollback by collection)

        async def waiter():
            async with kept:  # waits for the holder's transaction, on its thread
                await box.put(Note(text="never"))

        a = asyncio.create_task(holder())
        await holding.wait()
        b = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)  # b is waiting for the writer lock
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        release.set()
        await a
        # b's transaction, begun on its thread once a's ended, was rolled back: others write
        await asyncio.wait_for(box.put(Note(text="after")), timeout=10)
        assert sorted(n.text for n in await box.all()) == ["after", "held"]
        assert kept is not None


async def test_many_reads_at_once_each_get_their_own_result(tmp_path):
    async with await motedb.aio.open(tmp_path / "r.mote") as store:
        box = await store.box(Note)
        await box.put_many([Note(text=f"n{i}", level=i % 7) for i in range(300)])
        calls = []
        for i in range(1, 400):  # gets, counts, queries and failing calls, all at once
            if i % 50 == 0:
                calls.append(box.get("not an id"))
            elif i % 3 == 0:
                calls.append(box.query(Note.level == i % 7).count())
            else:
                calls.append(box.get(i))
        out = await asyncio.gather(*calls, return_exceptions=True)
        for i, r in zip(range(1, 400), out):
            if i % 50 == 0:
                assert isinstance(r, TypeError)
            elif i % 3 == 0:
                assert r == len([k for k in range(300) if k % 7 == i % 7])
            elif i <= 300:
                assert r.id == i and r.text == f"n{i - 1}"
            else:
                assert r is None
    with pytest.raises(motedb.ClosedError):
        await box.get(1)


async def test_close_ends_every_worker_thread(tmp_path):
    """After close() no reader or writer thread of the store is left. (Each thread took
    every item queued when it woke, so one reader could take both stop marks and leave
    the other blocked forever: one thread leaked per store an application opened.)"""
    import threading

    def workers():
        return {t for t in threading.enumerate() if t.name.startswith("motedb-")}

    before = workers()
    for k in range(5):
        store = await motedb.aio.open(tmp_path / f"w{k}.mote")
        box = await store.box(Note)
        await box.put_many([Note(text=f"n{i}") for i in range(50)])
        counts = await asyncio.gather(*(box.query(Note.level == 0).count() for _ in range(50)))
        assert counts == [50] * 50
        if k == 0:  # (the test's premise: both readers ran)
            assert sum(t.name == "motedb-reader" for t in workers() - before) == 2
        await store.close()
    assert workers() == before


async def test_a_get_reads_on_the_loop_only_what_is_cached(tmp_path):
    """A get outside a transaction runs on the loop's thread when every page it reads is
    in the store's cache (MOTE_TXN_CACHED), else on a reader thread: the same answers."""
    path = tmp_path / "c.mote"
    with motedb.open(path) as s:
        s.box(Note).put_many([Note(text="x" * 200 + str(i), level=i) for i in range(2000)])
    async with await motedb.aio.open(path) as store:
        box = await store.box(Note)
        trips = []
        submit = store._readers.submit
        store._readers.submit = lambda *a: (trips.append(a), submit(*a))[1]
        await box.count()  # (opens the entity, on a reader thread)
        assert box.sync._get_cached(1500) is ...  # nothing of it cached: it would read the file
        trips.clear()
        assert (await box.get(1500)).level == 1499 and len(trips) == 1  # so: a reader thread
        assert box.sync._get_cached(1500).level == 1499  # cached now
        got = await asyncio.gather(*(box.get(1500) for _ in range(50)))
        assert all(o.level == 1499 for o in got) and len(trips) == 1  # on the loop, no trip
        assert await box.get(1) is not None and await box.get(99999) is None  # either way
        async with store.read():  # a transaction's reads stay on its thread
            assert (await box.get(1500)).level == 1499
        with pytest.raises(TypeError):
            await box.get("1")
    with pytest.raises(motedb.ClosedError):
        await box.get(1500)
    with pytest.raises(motedb.ClosedError):
        box.sync._get_cached(1500)


async def test_a_deferring_thread_defers_its_transactions_too(tmp_path):
    """On the thread that defers a store's syncs (motedb.aio's writer, MoteSaver's), a
    write transaction commits without its sync as a single write does: other threads
    see neither until _wait_synced, then both; a second thread cannot defer too."""
    import threading

    with motedb.open(tmp_path / "d.mote") as store:
        box = store.box(Note)
        # a store of ~100 pages: a commit is a record of its chain, not one of the
        # checkpoints a small store takes every few commits (those sync at once)
        box.put_many([Note(text=f"{i:04} " + "x" * 1000) for i in range(400)])
        written, synced, waited = threading.Event(), threading.Event(), threading.Event()
        errors = []

        def writer():
            try:
                store._defer_sync(True)
                with store.write():
                    box.put(Note(text="a"))
                    box.put(Note(text="b"))
                box.put(Note(text="c"))
                written.set()
                waited.wait(10)
                store._wait_synced()
                store._defer_sync(False)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                written.set()
            synced.set()

        t = threading.Thread(target=writer)
        t.start()
        assert written.wait(10)
        assert box.count() == 400  # written, not durable: not seen
        with pytest.raises(motedb.BusyError, match="another thread defers"):
            store._defer_sync(True)
        waited.set()
        assert synced.wait(10)
        t.join()
        assert errors == [] and box.count() == 403


async def test_writes_queued_together_share_a_sync_each_its_own_commit(tmp_path):
    """Single writes of many tasks run on the writer thread, each its own transaction
    (one that fails leaves the others), made durable together by one sync before any
    task resumes: a write awaited is seen by a new read (readers see only durable
    commits), and what a failing write did is not."""
    async with await motedb.aio.open(tmp_path / "w.mote") as store:
        box = await store.box(Note)

        async def writer(i):
            if i % 10 == 7:  # an update of an object that does not exist: fails alone
                with pytest.raises(motedb.NotFoundError):
                    await box.put(Note(id=10_000 + i, text="none"), mode="update")
                return None
            note = Note(text=f"w{i}", level=i)
            new = await box.put(note)
            assert note.id == new and box.sync.get(new).text == f"w{i}"  # durable: seen
            await box.update(new, level=i + 1000)
            assert box.sync.get(new).level == i + 1000
            return new

        ids = [i for i in await asyncio.gather(*(writer(i) for i in range(100))) if i]
        assert len(ids) == 90 and len(set(ids)) == 90
        assert await box.count() == 90
        assert await box.query(Note.level >= 1000).count() == 90
        removed = await asyncio.gather(*(box.remove(i) for i in ids[:30]), box.remove(99_999))
        assert removed == [True] * 30 + [False] and await box.count() == 60
        # left: the writers i = 33..99 (30 removed above); levels i + 1000
        assert await box.query(Note.level < 1040).remove() == 6  # 33-39 but 37
    with motedb.open(tmp_path / "w.mote") as again:
        assert again.box(Note).count() == 54
