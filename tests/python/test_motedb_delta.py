"""Store.delta / motedb.apply_delta: a copy kept level with a store by deltas.

The data is synthetic (random objects from hypothesis and a fixed seed): what is tested is
that the copy equals the store at each delta's commit, whatever the objects hold.
"""

import io
import os
import subprocess
import sys
from typing import Annotated

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import motedb


class Memo(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.FullText] = ""
    level: Annotated[int, motedb.Index] = 0
    blob: bytes = b""


def rows(store):
    """Every object of a store (an open one, or the file at a path, opened read-only) as
    plain tuples, and its full-text matches for one word: what a copy must equal."""
    if not isinstance(store, motedb.Store):
        with motedb.open(store, readonly=True) as s:
            return rows(s)
    box = store.box(Memo)
    objs = [(m.id, m.text, m.level, m.blob) for m in box.all()]
    hits = sorted(m.id for m in box.query(Memo.text.matches("alpha")).find())
    return objs, hits


def test_copy_follows_the_store(tmp_path):
    src, copy = str(tmp_path / "src.mote"), str(tmp_path / "copy.mote")
    s = motedb.open(src)
    box = s.box(Memo)
    box.put_many([Memo(text=f"alpha note {i}", level=i % 7, blob=bytes([i % 251]) * (i * 37 % 9000))
                  for i in range(300)])
    since = s.delta(str(tmp_path / "0.delta"))
    motedb.apply_delta(copy, str(tmp_path / "0.delta"))
    assert rows(copy) == rows(s)
    for k in range(1, 6):
        with s.write():
            for m in box.query(Memo.level == k).find():
                m.text = f"beta {m.id} after {k}"
                box.put(m)
            box.remove_many([m.id for m in box.query(Memo.level == (k + 3) % 7).limit(5).find()])
            box.put(Memo(text="alpha new", level=k, blob=os.urandom(5000)))
        to = s.delta(tmp_path / f"{k}.delta", since=since)
        assert to > since
        motedb.apply_delta(copy, tmp_path / f"{k}.delta")
        assert rows(copy) == rows(s)
        since = to
    s.close()


def test_refused_deltas_leave_the_copy(tmp_path):
    src, copy = str(tmp_path / "src.mote"), str(tmp_path / "copy.mote")
    with motedb.open(src) as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i}", level=i) for i in range(50)])
        t1 = s.delta(tmp_path / "1.delta")
        box.put(Memo(text="two"))
        t2 = s.delta(tmp_path / "2.delta", since=t1)
        box.put(Memo(text="three"))
        s.delta(tmp_path / "3.delta", since=t2)
        with pytest.raises(motedb.ExistsError):
            s.delta(tmp_path / "3.delta", since=t2)
        with s.write(), pytest.raises(motedb.TransactionError):
            s.delta(tmp_path / "x.delta")
        with pytest.raises(motedb.Error, match="after the store's latest commit"):
            s.delta(tmp_path / "y.delta", since=10**9)
    motedb.apply_delta(copy, tmp_path / "1.delta")
    at_1 = rows(copy)
    with pytest.raises(motedb.Error, match="is at commit"):
        motedb.apply_delta(copy, tmp_path / "3.delta")
    with pytest.raises(motedb.ExistsError):
        motedb.apply_delta(copy, tmp_path / "1.delta")
    data = (tmp_path / "2.delta").read_bytes()
    damaged = bytearray(data)
    damaged[64 + 8 + 200] ^= 0x40
    (tmp_path / "bad.delta").write_bytes(bytes(damaged))
    with pytest.raises(motedb.CorruptError, match="damaged"):
        motedb.apply_delta(copy, tmp_path / "bad.delta")
    (tmp_path / "cut.delta").write_bytes(data[:-100])
    with pytest.raises(motedb.CorruptError):
        motedb.apply_delta(copy, tmp_path / "cut.delta")
    with pytest.raises(motedb.NotFoundError):
        motedb.apply_delta(copy, tmp_path / "missing.delta")
    assert rows(copy) == at_1
    motedb.apply_delta(copy, tmp_path / "2.delta")
    motedb.apply_delta(copy, tmp_path / "3.delta")
    assert rows(copy) == rows(src)
    with motedb.open(tmp_path / "new.mote") as fresh, pytest.raises(motedb.NotFoundError):
        fresh.delta(tmp_path / "new.delta")


class Pieces:
    """A binary stream of `data` that gives at most `most` bytes a read, and raises
    `fail` once `fail_at` bytes are read (if given)."""

    def __init__(self, data, most=1000, fail_at=None, fail=None, answer=None):
        self.data, self.at, self.most = data, 0, most
        self.fail_at, self.fail, self.answer = fail_at, fail, answer

    def readinto(self, b):
        if self.answer is not None:
            return self.answer(b)
        if self.fail_at is not None and self.at >= self.fail_at:
            raise self.fail
        n = min(len(b), self.most, len(self.data) - self.at)
        b[:n] = self.data[self.at:self.at + n]
        self.at += n
        return n


def test_full_delta_applied_as_it_comes(tmp_path):
    """A full delta read from a stream (no delta file) makes the same file as the delta
    file does; a damaged or cut stream leaves no copy; the stream's own error is raised
    as it is; a delta from a commit needs a file."""
    src = str(tmp_path / "src.mote")
    with motedb.open(src) as s:
        s.box(Memo).put_many([Memo(text=f"alpha {i}", level=i, blob=os.urandom(i * 13 % 5000))
                              for i in range(400)])
        t1 = s.delta(tmp_path / "1.delta")
        want = rows(s)
        s.box(Memo).put(Memo(text="two"))
        s.delta(tmp_path / "2.delta", since=t1)
    data = (tmp_path / "1.delta").read_bytes()
    assert len(data) > 1 << 20  # (more than one of the apply's reads)
    motedb.apply_delta(tmp_path / "byfile.mote", tmp_path / "1.delta")
    for i, stream in enumerate((io.BytesIO(data), Pieces(data, 999), Pieces(data, 1 << 20))):
        copy = tmp_path / f"c{i}.mote"
        motedb.apply_delta(copy, stream)
        assert copy.read_bytes() == (tmp_path / "byfile.mote").read_bytes()
    assert rows(copy) == want
    copy = tmp_path / "x.mote"
    damaged = bytearray(data)
    damaged[64 + 8 + 300] ^= 1
    for bad in (bytes(damaged), data[:-1], data[:len(data) // 2], data + b"!"):
        with pytest.raises(motedb.CorruptError):
            motedb.apply_delta(copy, io.BytesIO(bad))
        assert not copy.exists()
    with pytest.raises(ConnectionResetError):
        motedb.apply_delta(copy, Pieces(data, 5000, fail_at=len(data) // 2,
                                        fail=ConnectionResetError("the download dropped")))
    assert not copy.exists()
    for answer in (lambda b: None, lambda b: len(b) + 1):
        with pytest.raises(ValueError, match="readinto"):
            motedb.apply_delta(copy, Pieces(data, answer=answer))
        assert not copy.exists()
    with pytest.raises(motedb.Error, match="from a file"):
        motedb.apply_delta(copy, io.BytesIO((tmp_path / "2.delta").read_bytes()))
    assert not copy.exists()
    with pytest.raises(motedb.ExistsError):
        motedb.apply_delta(tmp_path / "byfile.mote", io.BytesIO(data))


def test_delta_of_a_store_open_read_only_while_another_process_writes(tmp_path):
    """A delta reads a snapshot: a read-only handle makes them, beside a writer."""
    src, copy = str(tmp_path / "src.mote"), str(tmp_path / "copy.mote")
    with motedb.open(src) as s:
        s.box(Memo).put_many([Memo(text=f"alpha {i}", level=i) for i in range(100)])
    writer = subprocess.Popen([sys.executable, "-c", (
        "import motedb, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_motedb_delta import Memo\n"
        "with motedb.open(sys.argv[1]) as s:\n"
        "    b = s.box(Memo)\n"
        "    for i in range(300):\n"
        "        b.put(Memo(text=f'alpha w{i}', level=i))\n"), src, os.path.dirname(__file__)])
    since = 0
    with motedb.open(src, readonly=True) as r:
        for k in range(20):
            since = r.delta(tmp_path / f"{k}.delta", since=since)
            motedb.apply_delta(copy, tmp_path / f"{k}.delta")
        assert writer.wait(60) == 0
        since = r.delta(tmp_path / "last.delta", since=since)
        motedb.apply_delta(copy, tmp_path / "last.delta")
        assert rows(copy) == rows(r)


ops = st.lists(st.tuples(st.sampled_from(["put", "update", "remove", "delta"]),
                         st.integers(0, 10**6), st.binary(max_size=3000)), max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_copy_equals_store_after_any_ops(tmp_path_factory, script):
    d = tmp_path_factory.mktemp("d")
    src, copy = str(d / "src.mote"), str(d / "copy.mote")
    with motedb.open(src) as s:
        box = s.box(Memo)
        box.put_many([Memo(text=f"alpha {i}", level=i) for i in range(20)])
        since = s.delta(d / "full.delta")
        motedb.apply_delta(copy, d / "full.delta")
        for n, (op, x, blob) in enumerate(script):
            ids = [m.id for m in box.all()]
            if op == "put" or not ids:
                box.put(Memo(text=f"alpha {x}" if x % 2 else "beta", level=x % 100, blob=blob))
            elif op == "update":
                m = box.get(ids[x % len(ids)])
                m.level, m.blob = x % 100, blob
                box.put(m)
            elif op == "remove":
                box.remove(ids[x % len(ids)])
            else:
                since = s.delta(d / f"{n}.delta", since=since)
                motedb.apply_delta(copy, d / f"{n}.delta")
                assert rows(copy) == rows(s)
        since = s.delta(d / "last.delta", since=since)
        motedb.apply_delta(copy, d / "last.delta")
        assert rows(copy) == rows(s)


def test_cli_keeps_a_copy(tmp_path):
    """`mote delta` and `mote apply`, when the build has the CLI."""
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "build", "mote")
    if not os.path.exists(tool):
        pytest.skip("no build/mote (make build makes it)")
    src = str(tmp_path / "src.mote")
    with motedb.open(src) as s:
        s.box(Memo).put_many([Memo(text=f"alpha {i}") for i in range(10)])
    out = subprocess.run([tool, "delta", src, "0", str(tmp_path / "f.delta")], check=True,
                         capture_output=True, text=True).stdout
    assert " -> " in out
    subprocess.run([tool, "apply", str(tmp_path / "copy.mote"), str(tmp_path / "f.delta")],
                   check=True, capture_output=True)
    assert rows(str(tmp_path / "copy.mote")) == rows(src)
