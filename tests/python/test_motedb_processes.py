"""Stores and processes: a store object used in a forked child fails loudly (ForkedError)
and writes nothing; the child opens the store itself."""

import json
import multiprocessing
import os

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
    assert got["own_open"] in ("ok", "StoreLockedError")  # the parent holds it open for writing
    box.put(Note(text="parent"))
    assert box.count() == 101
    store.close()
    assert motedb.ForkedError.__mro__[1] is motedb.Error


def _child_counts(path, q):
    with motedb.open(path, readonly=True) as s:
        q.put(s.box(Note).count())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_child_opens_the_store(tmp_path, method):
    path = str(tmp_path / "m.mote")
    with motedb.open(path) as store:
        store.box(Note).put_many([Note(text=str(i)) for i in range(7)])
    ctx = multiprocessing.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=_child_counts, args=(path, q))
    p.start()
    assert q.get(timeout=60) == 7
    p.join(timeout=60)
    assert p.exitcode == 0
