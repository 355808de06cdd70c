"""Ctrl-C during a long write: an interrupt before the commit rolls the call
back and raises; a call that returns has committed. Never both.

The signal is a SIGALRM from an interval timer, 5 ms into calls that take
0.1 s or more (a Python thread could not send it while the call holds the
GIL); its handler raises, as SIGINT's raises KeyboardInterrupt."""

from __future__ import annotations

import signal
import time

import pytest

import motedb

pytestmark = pytest.mark.no_asan  # millions of objects: not under ASan

N = 1_000_000


class Interrupted(Exception):
    pass


class Row(motedb.Entity):
    id: int = 0
    n: int = 0
    s: str = ""


@pytest.fixture
def interrupts():
    def handler(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGALRM, handler)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def run_interrupted(call):
    """call() with SIGALRM 5 ms in: 'raised' or 'returned'."""
    signal.setitimer(signal.ITIMER_REAL, 0.005)
    try:
        call()
        outcome = "returned"
    except Interrupted:
        outcome = "raised"
    try:  # a signal that came at the very end is delivered here, not lost
        time.sleep(0.2)
    except Interrupted:
        pass
    return outcome


@pytest.fixture
def store(tmp_path):
    with motedb.open(tmp_path / "int.mote", sync=False) as s:
        yield s


def test_put_many_of_a_list_interrupted_commits_nothing(store, interrupts):
    box = store.box(Row)
    objs = [Row(n=i, s="x" * 20) for i in range(N)]
    assert run_interrupted(lambda: box.put_many(objs)) == "raised"
    assert box.count() == 0
    assert all(o.id == 0 for o in objs[:1000])  # no ids were set either


def test_remove_many_and_query_remove_interrupted_remove_nothing(store, interrupts):
    box = store.box(Row)
    ids = box.put_many([Row(n=i) for i in range(N)])
    assert run_interrupted(lambda: box.remove_many(ids)) == "raised"
    assert box.count() == N
    q = box.query(Row.n >= 0)
    assert run_interrupted(q.remove) == "raised"
    assert box.count() == N


def test_interrupt_inside_store_write_rolls_back(store, interrupts):
    box = store.box(Row)
    objs = [Row(n=i) for i in range(N)]

    def block():
        with store.write():
            box.put_many(objs)

    assert run_interrupted(block) == "raised"
    assert box.count() == 0
