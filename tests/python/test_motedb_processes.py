"""Stores and processes: several processes on one store (reads alongside writes, writes in
turn with a timeout), a store object used in a forked child fails loudly (ForkedError) and
writes nothing; the child opens the store itself."""

import json
import multiprocessing
import os
import subprocess
import sys
import time

import pytest

import motedb


class Note(motedb.Entity):
    id: int = 0
    text: str = ""
    level: int = 0


def in_child(fn):
    """Run fn() in a child made by os.fork(); returns what it returned (JSON), or raises
    with the child's error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            out = json.dumps({"ok": fn()})
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out, code = json.dumps({"error": f"{type(e).__name__}: {e}"}), 1
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or '{"error": "no answer"}')
    os.waitpid(pid, 0)
    if "error" in got:
        raise AssertionError("child: " + got["error"])
    return got["ok"]


def raised(fn):
    try:
        fn()
    except motedb.Error as e:
        return type(e).__name__, str(e)
    return None, None


def test_forked_child_cannot_use_parents_store(tmp_path):
    """Before: the child's put was acknowledged, then lost when the parent committed."""
    path = tmp_path / "f.mote"
    store = motedb.open(path)
    box = store.box(Note)
    box.put_many([Note(text=f"n{i}", level=i % 5) for i in range(100)])
    query = box.query(Note.level == 1)

    def child():
        out = {
            "put": raised(lambda: box.put(Note(text="child"))),
            "get": raised(lambda: box.get(1)),
            "count": raised(lambda: query.count()),
            "write": raised(lambda: store.write().__enter__()),
            "close": raised(store.close),
        }
        try:  # the child's own open is not refused as "already open in this process"
            motedb.open(path).close()
            out["own_open"] = "ok"
        except motedb.Error as e:
            out["own_open"] = type(e).__name__
        return out

    got = in_child(child)
    for op in ("put", "get", "count", "write", "close"):
        name, msg = got[op]
        assert name == "ForkedError", (op, got[op])
        assert f"opened in process {os.getpid()}" in msg
    assert got["own_open"] == "ok"  # alongside the parent, which has it open
    box.put(Note(text="parent"))
    assert box.count() == 101
    store.close()
    assert motedb.ForkedError.__mro__[1] is motedb.Error


def _child_counts(path, q):
    with motedb.open(path, readonly=True) as s:
        q.put(s.box(Note).count())


def _child_writes(path, n):
    with motedb.open(path) as s:
        box = s.box(Note)
        for i in range(n):
            box.put(Note(text=f"child {os.getpid()} {i}", level=9))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_child_opens_the_store(tmp_path, method):
    """The parent keeps the store open (and writing) while its children open it."""
    path = str(tmp_path / "m.mote")
    ctx = multiprocessing.get_context(method)
    with motedb.open(path) as store:
        box = store.box(Note)
        box.put_many([Note(text=str(i)) for i in range(7)])
        q = ctx.Queue()
        p = ctx.Process(target=_child_counts, args=(path, q))
        p.start()
        assert q.get(timeout=60) == 7
        p.join(timeout=60)
        assert p.exitcode == 0
        writers = [ctx.Process(target=_child_writes, args=(path, 50)) for _ in range(3)]
        for w in writers:
            w.start()
        for i in range(50):
            box.put(Note(text=f"parent {i}", level=1))
        for w in writers:
            w.join(timeout=120)
            assert w.exitcode == 0
        assert box.count() == 7 + 50 + 3 * 50
        assert box.query(Note.level == 9).count() == 150


HOLDER = """
import sys, motedb
class Note(motedb.Entity):
    id: int = 0
    text: str = ""
    level: int = 0
store = motedb.open(sys.argv[1])
with store.write():
    store.box(Note).put(Note(text="held"))
    print("writing", flush=True)
    sys.stdin.readline()
print("done", flush=True)
store.close()
"""


def test_write_waits_for_another_process_then_busy(tmp_path):
    path = str(tmp_path / "w.mote")
    with motedb.open(path) as s:
        s.box(Note).put(Note(text="first"))
    p = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "writing"
        with motedb.open(path, timeout=0.2) as s:
            box = s.box(Note)
            assert box.count() == 1  # reads go on while the other process writes
            t0 = time.monotonic()
            with pytest.raises(motedb.BusyError) as ei:
                box.put(Note(text="mine"))
            assert time.monotonic() - t0 >= 0.15
            assert f"process {p.pid}" in str(ei.value)
            p.stdin.write("\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "done"
            box.put(Note(text="mine"))  # its turn now; the other's commit is there
            assert sorted(n.text for n in box.query().find()) == ["first", "held", "mine"]
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    with motedb.open(path, timeout=None), motedb.open(str(tmp_path / "x.mote"), timeout=0):
        pass
    for bad in (-1, "soon", float("nan")):
        with pytest.raises((ValueError, TypeError)):
            motedb.open(str(tmp_path / "y.mote"), timeout=bad)


def test_exclusive_keeps_other_processes_out(tmp_path):
    path = str(tmp_path / "e.mote")
    code = ("import motedb, sys\n"
            "try:\n"
            "    motedb.open(sys.argv[1])\n"
            "except motedb.StoreLockedError as e:\n"
            "    print('locked', e)\n")
    with motedb.open(path, exclusive=True):
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                             timeout=60).stdout
        assert out.startswith("locked") and "exclusively" in out
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                         timeout=60).stdout
    assert out == ""  # free again
