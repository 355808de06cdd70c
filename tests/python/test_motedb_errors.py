"""Errors of the operating system: motedb.FileSystemError, an OSError and a motedb.Error,
with errno, strerror (the message, naming the file) and filename; zero-byte files."""

import errno
import json
import os
import stat
import subprocess
import sys
import time

import pytest

import motedb


class Doc(motedb.Entity):
    id: int = 0
    body: str = ""


def test_exception_class():
    assert issubclass(motedb.FileSystemError, motedb.Error)
    assert issubclass(motedb.FileSystemError, OSError)
    assert "FileSystemError" in motedb.__all__
    e = motedb.FileSystemError(errno.EIO, "read of a.mote failed: Input/output error", "a.mote")
    assert (e.errno, e.filename) == (errno.EIO, "a.mote")
    assert str(e) == "[Errno 5] read of a.mote failed: Input/output error"
    assert str(motedb.FileSystemError("no errno")) == "no errno"


def test_missing_directory(tmp_path):
    path = tmp_path / "nope" / "dir" / "x.mote"
    with pytest.raises(OSError) as ei:
        motedb.open(path)
    e = ei.value
    assert isinstance(e, motedb.FileSystemError) and isinstance(e, motedb.Error)
    assert not isinstance(e, motedb.NotFoundError)  # that one is about objects
    assert e.errno == errno.ENOENT and e.filename == str(path) and e.code == 5
    msg = f"cannot create store {path}: directory {tmp_path / 'nope' / 'dir'} does not exist"
    assert e.strerror == msg
    assert str(e) == f"[Errno 2] {msg}"
    assert not (tmp_path / "nope").exists()


def test_missing_file_not_created(tmp_path):
    path = tmp_path / "missing.mote"
    for kw in ({"create": False}, {"readonly": True}):
        with pytest.raises(motedb.Error) as ei:
            motedb.open(path, **kw)
        e = ei.value
        assert isinstance(e, OSError) and e.errno == errno.ENOENT
        assert e.filename == str(path) and e.strerror == f"store {path} does not exist"
    assert not path.exists()


def test_directory(tmp_path):
    for kw in ({}, {"readonly": True}):
        with pytest.raises(motedb.FileSystemError) as ei:
            motedb.open(tmp_path, **kw)
        assert ei.value.errno == errno.EISDIR and ei.value.filename == str(tmp_path)
        assert str(tmp_path) in str(ei.value)


def test_disk_full_dev_full():
    """/dev/full: every write fails with ENOSPC. Creating a store writes nothing (its
    first commit writes its first pages), so the open succeeds and the first write says
    that the disk is full."""
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode) \
            or not os.access("/dev/full", os.W_OK):
        pytest.skip("no writable /dev/full")
    for _ in range(50):  # the exclusive lock on the device node is shared machine-wide:
        try:             # another process opening /dev/full this very moment holds it
            s = motedb.open("/dev/full")
        except motedb.StoreLockedError:
            time.sleep(0.01)
            continue
        try:
            with pytest.raises(OSError) as ei:
                s.box(Doc).put(Doc(body="hello"))
        finally:
            s.close()
        e = ei.value
        assert isinstance(e, motedb.Error)
        assert e.errno == errno.ENOSPC and e.filename == "/dev/full"
        assert str(e).startswith("[Errno 28] write of /dev/full failed: "
                                 + os.strerror(errno.ENOSPC))
        return
    pytest.fail("/dev/full stayed locked")


# A commit fails: the file size limit (RLIMIT_FSIZE, in a child process) makes writes past
# it fail with EFBIG, as a full disk makes them fail with ENOSPC.
CHILD = """
import json, resource, signal, sys
import motedb

class Doc(motedb.Entity):
    id: int = 0
    body: str = ""

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
out = {"puts": 0}
with motedb.open(sys.argv[1]) as s:
    box = s.box(Doc)
    try:
        for i in range(100):
            box.put(Doc(body="x" * 20000))
            out["puts"] += 1
    except OSError as e:
        out.update(cls=type(e).__name__, motedb=isinstance(e, motedb.Error), errno=e.errno,
                   filename=e.filename, code=e.code, text=str(e))
    out["count"] = box.count()  # the store goes on
print(json.dumps(out))
"""


def test_commit_failure_is_oserror(tmp_path):
    path = tmp_path / "big.mote"
    r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert 0 < out["puts"] < 100
    assert out["cls"] == "FileSystemError" and out["motedb"]
    assert out["errno"] == errno.EFBIG and out["code"] == 5  # MOTE_IO
    assert out["filename"] == str(path)
    assert out["text"] == f"[Errno {errno.EFBIG}] write of {path} failed: " \
        + os.strerror(errno.EFBIG)
    assert out["count"] == out["puts"]
    with motedb.open(path) as s:  # without the limit: every acknowledged put is there
        assert s.box(Doc).count() == out["puts"]


def test_other_errors_are_not_oserrors(tmp_path):
    """After an OS failure, the next failures that are not the OS's are not OSErrors."""
    with pytest.raises(OSError):
        motedb.open(tmp_path / "nope" / "x.mote")
    junk = tmp_path / "junk.mote"
    junk.write_bytes(b"not a store" * 1000)
    with pytest.raises(motedb.CorruptError) as ei:
        motedb.open(junk)
    assert not isinstance(ei.value, OSError)
    with pytest.raises(OSError):
        motedb.open(tmp_path / "nope" / "x.mote")
    with motedb.open(tmp_path / "a.mote") as s:
        with pytest.raises(motedb.NotFoundError) as ei:
            s.box(Doc).put(Doc(id=77), mode="update")
        assert not isinstance(ei.value, OSError)


def test_zero_byte_file(tmp_path):
    """A zero-byte file is a store that was never committed (creating a store writes
    nothing until its first commit): it opens empty, read-only too (and stays zero
    bytes), and a writable open uses it (create=False too)."""
    path = tmp_path / "empty.mote"
    path.write_bytes(b"")
    with motedb.open(path, readonly=True) as s:  # empty: no entity
        with pytest.raises(motedb.SchemaError, match="entity Doc does not exist"):
            s.box(Doc)
    assert path.stat().st_size == 0
    with motedb.open(path, create=False) as s:
        s.box(Doc).put(Doc(body="hello"))
    with motedb.open(path, readonly=True) as s:
        assert [d.body for d in s.box(Doc).all()] == ["hello"]
