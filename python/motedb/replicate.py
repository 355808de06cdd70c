"""Stores copied continuously to S3-compatible object storage, and restored from it.

A replicator ships each store's durable commits as *deltas* (``Store.delta``: the pages a
copy lacks, a few for a small commit), one object per store and interval when the store
changed, none while it is idle. The first object of a store is a full delta (its base); a
new base starts a new *generation* once the deltas since the last one outweigh it or
number ``full_every``. A restore downloads a generation's base and its deltas in order
and applies them (``motedb.apply_delta``) up to the commit asked for.

Objects: ``<prefix>/<name>/<generation>/<to>.<since>.delta``, the numbers zero-padded
(a generation is the base's creation time in milliseconds, so generations and deltas
list in order). A replicator that restarts lists what is there and goes on from the
newest commit shipped; an object appears whole or not at all (S3 PUT), so a crash
mid-upload ships it again.

Needs boto3 (``pip install motedb[s3]``); the S3 endpoint comes from the client you pass,
or boto3's own configuration (``AWS_ENDPOINT_URL``, credentials, region).

    python -m motedb.replicate replicate FILE... s3://bucket/prefix [--interval 1]
    python -m motedb.replicate restore s3://bucket/prefix/NAME FILE [--txn N | --time T]
    python -m motedb.replicate list s3://bucket/prefix [NAME]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import tempfile
import threading
import time

from . import _core

__all__ = ["Replicator", "restore", "points", "parse_url"]

_KEY = re.compile(r"^(\d{13})/(\d{20})\.(\d{20})\.delta$")


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix without slashes at its ends)."""
    m = re.match(r"^s3://([^/]+)/?(.*)$", url)
    if not m:
        raise ValueError(f"not an s3:// URL: {url!r} (s3://bucket/prefix)")
    return m.group(1), m.group(2).strip("/")


def _client(client):
    if client is not None:
        return client
    try:
        import boto3
    except ImportError as e:  # the extra is not installed
        raise ImportError("motedb.replicate needs boto3: pip install motedb[s3]") from e
    return boto3.client("s3")


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def points(url: str, name: str, *, client=None) -> list[dict]:
    """What can be restored of store `name`: each object, oldest first, as a dict of
    generation, since, to (commit ids), size (bytes) and time (upload, UTC datetime)."""
    bucket, prefix = parse_url(url)
    c = _client(client)
    base = _join(prefix, name) + "/"
    out = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base):
        for o in page.get("Contents", []):
            m = _KEY.match(o["Key"][len(base):])
            if m:
                out.append({"key": o["Key"], "generation": int(m.group(1)), "to": int(m.group(2)),
                            "since": int(m.group(3)), "size": o["Size"], "time": o["LastModified"]})
    out.sort(key=lambda p: (p["generation"], p["to"], p["since"]))
    return out


def _chain(objs: list[dict], txnid: int | None) -> list[dict]:
    """The base and the deltas that restore the newest generation that has `txnid` (its
    newest commit if None), in order, ending at `txnid` or the last commit before it."""
    gens = sorted({o["generation"] for o in objs}, reverse=True)
    for g in gens:
        mine = [o for o in objs if o["generation"] == g]
        base = [o for o in mine if o["since"] == 0]
        if not base or (txnid is not None and base[0]["to"] > txnid):
            continue
        chain, at = [base[0]], base[0]["to"]
        by_since = {o["since"]: o for o in mine if o["since"]}
        while at in by_since and (txnid is None or by_since[at]["to"] <= txnid):
            chain.append(by_since[at])
            at = by_since[at]["to"]
        return chain
    return []


def restore(url: str, name: str, path: str | os.PathLike, *, txnid: int | None = None,
            at_time: datetime.datetime | None = None, client=None) -> int:
    """Make the store file `path` (which must not exist) the copy of store `name` as of
    commit `txnid`, or as it was shipped at `at_time` (an aware datetime: the newest commit
    whose object was uploaded by then), or the newest commit shipped if neither; a
    commit between two shipped ones gives the earlier. Built beside it as
    ``path + ".restoring"`` and renamed when whole. Returns the commit restored;
    NotFoundError if none is there."""
    bucket, _ = parse_url(url)
    c = _client(client)
    objs = points(url, name, client=c)
    if at_time is not None:
        if at_time.tzinfo is None:
            raise ValueError("restore(at_time=...) needs an aware datetime (UTC: timezone.utc)")
        upto = [o for o in objs if o["time"] <= at_time]
        newest = max(upto, key=lambda o: (o["generation"], o["to"]), default=None)
        objs = [o for o in objs if newest and o["generation"] == newest["generation"]]
        txnid = newest["to"] if newest else None
    chain = _chain(objs, txnid)
    if not chain:
        raise _core.NotFoundError(f"no copy of store {name!r} under {url}"
                                  + (f" at or before commit {txnid}" if txnid is not None else "")
                                  + (f" shipped by {at_time:%Y-%m-%d %H:%M:%S %Z}" if at_time else ""))
    path = os.fspath(path)
    if os.path.exists(path):
        raise _core.ExistsError(f"{path} already exists: a restore makes a new file")
    building = path + ".restoring"  # (renamed when whole: no half-made store at `path`)
    if os.path.exists(building):
        os.unlink(building)
    try:
        with tempfile.TemporaryDirectory(prefix="motedb-restore-") as tmp:
            for i, o in enumerate(chain):  # (unsynced: the file is ours until renamed)
                local = os.path.join(tmp, f"{i}.delta")
                c.download_file(bucket, o["key"], local)
                _core.apply_delta(building, local, sync=False)
                os.unlink(local)
        fd = os.open(building, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(building, path)
        d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(d)  # the rename durable
        finally:
            os.close(d)
    except BaseException:
        if os.path.exists(building):
            os.unlink(building)
        raise
    return chain[-1]["to"]


class Replicator:
    """Ships the commits of the stores added to it to ``url`` (``s3://bucket/prefix``).

    ``ship()`` is one pass over the stores: a store whose latest durable commit was
    shipped already costs no request; one that changed costs one PUT (a delta since the
    last commit shipped, or a new generation's base). ``run()`` ships every ``interval``
    seconds until ``stop`` is set. A store added by path is opened read-only for each
    pass and closed after it, so a replicator holds no file open between passes; one
    added as an open Store (a replicator thread in the app's own process) is used as is. Failures (the server
    down, a store that cannot be read) are counted in ``errors`` and retried at the next
    pass, from the last commit shipped."""

    def __init__(self, url: str, *, interval: float = 1.0, full_every: int = 1000,
                 client=None):
        self.bucket, self.prefix = parse_url(url)
        self.url = url
        self.interval = interval
        self.full_every = full_every
        self.client = _client(client)
        self.stores: dict[str, dict] = {}  # name -> state
        self.errors: list[str] = []
        self.shipped_objects = self.shipped_bytes = 0

    def add(self, store: str | os.PathLike | _core.Store, name: str | None = None) -> str:
        """Replicate a store under `name` (its file name by default): a path (opened
        read-only at each pass), or a Store this process has open (used as it is: a
        process cannot open a store twice)."""
        handle = store if isinstance(store, _core.Store) else None
        path = handle.path if handle else os.fspath(store)
        name = name or os.path.basename(path)
        if "/" in name or not name:
            raise ValueError(f"a store's name is one path part, not {name!r}")
        self.stores[name] = {"path": path, "store": handle, "known": False}
        return name

    def remove(self, name: str) -> None:
        self.stores.pop(name, None)

    def _resume(self, st: dict, name: str) -> None:
        """What the bucket holds of `name`: the newest generation's last commit."""
        objs = points(self.url, name, client=self.client)
        chain = _chain(objs, None)
        st["gen"] = chain[0]["generation"] if chain else 0
        st["to"] = chain[-1]["to"] if chain else 0
        st["deltas"] = len(chain) - 1 if chain else 0
        st["base_bytes"] = chain[0]["size"] if chain else 0
        st["since_bytes"] = sum(o["size"] for o in chain[1:])
        st["known"] = True

    def _ship_one(self, name: str, st: dict, tmp: str) -> int:
        if not st["known"]:
            self._resume(st, name)
        s = st["store"] or _core.Store(st["path"], readonly=True, create=False)
        try:
            latest = s.commit
            if latest == st["to"]:
                return 0  # idle: nothing to ship, no request
            full = (st["to"] == 0 or latest < st["to"] or st["deltas"] >= self.full_every
                    or st["since_bytes"] >= max(st["base_bytes"], 1 << 20))
            since = 0 if full else st["to"]
            local = os.path.join(tmp, f"{name}.delta")
            to = s.delta(local, since=since)
        finally:
            if s is not st["store"]:
                s.close()
        try:
            gen = max(int(time.time() * 1000), st["gen"] + 1) if full else st["gen"]
            key = _join(self.prefix, name, f"{gen:013d}", f"{to:020d}.{since:020d}.delta")
            size = os.path.getsize(local)
            self.client.upload_file(local, self.bucket, key)
        finally:
            os.unlink(local)
        st["to"] = to
        if full:
            st.update(gen=gen, deltas=0, base_bytes=size, since_bytes=0)
        else:
            st["deltas"] += 1
            st["since_bytes"] += size
        self.shipped_objects += 1
        self.shipped_bytes += size
        return 1

    def ship(self) -> int:
        """One pass: ship what changed. Returns the number of objects written."""
        n = 0
        with tempfile.TemporaryDirectory(prefix="motedb-ship-") as tmp:
            for name, st in list(self.stores.items()):
                try:
                    n += self._ship_one(name, st, tmp)
                except Exception as e:  # retried at the next pass, from st["to"]
                    self.errors.append(f"{name}: {type(e).__name__}: {e}")
                    del self.errors[:-100]
        return n

    def run(self, stop: threading.Event | None = None) -> None:
        """Ship every `interval` seconds until `stop` is set (forever if None)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            start = time.monotonic()
            self.ship()
            stop.wait(max(0.0, self.interval - (time.monotonic() - start)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m motedb.replicate",
                                description="Copy MoteDB stores to S3-compatible storage.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replicate", help="ship the stores' commits until interrupted")
    r.add_argument("args", nargs="+", metavar="FILE... URL")
    r.add_argument("--interval", type=float, default=1.0)
    r.add_argument("--once", action="store_true", help="one pass, then exit")
    s = sub.add_parser("restore", help="make FILE the copy of a store: URL/STORE FILE, or "
                       "URL STORE FILE")
    s.add_argument("args", nargs="+", metavar="URL/STORE FILE")
    s.add_argument("--txn", type=int, default=None, help="as of this commit (default: newest)")
    s.add_argument("--time", default=None,
                   help="as shipped by this time (ISO 8601; UTC if no offset is given)")
    ls = sub.add_parser("list", help="what can be restored")
    ls.add_argument("url")
    ls.add_argument("name", nargs="?")
    a = p.parse_args(argv)
    if a.cmd == "replicate":
        if len(a.args) < 2:
            p.error("replicate needs FILE... and an s3:// URL")
        rep = Replicator(a.args[-1], interval=a.interval)
        for f in a.args[:-1]:
            rep.add(f)
        if a.once:
            n = rep.ship()
            print(f"{n} object(s) shipped")
            for e in rep.errors:
                print("error:", e, file=sys.stderr)
            return 1 if rep.errors else 0
        try:
            rep.run()
        except KeyboardInterrupt:
            return 0
    if a.cmd == "restore":
        if len(a.args) == 2:  # s3://bucket/prefix/STORE FILE
            url, _, name = a.args[0].rstrip("/").rpartition("/")
            file = a.args[1]
        elif len(a.args) == 3:
            url, name, file = a.args
        else:
            p.error("restore needs URL/STORE FILE (or URL STORE FILE)")
        when = None
        if a.time:
            when = datetime.datetime.fromisoformat(a.time.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.timezone.utc)
        try:
            at = restore(url, name, file, txnid=a.txn, at_time=when)
        except (_core.Error, ValueError) as e:
            print(f"restore: {e}", file=sys.stderr)
            return 1
        print(f"{file}: store {name} as of commit {at}")
        return 0
    if a.cmd == "list":
        bucket, prefix = parse_url(a.url)
        c = _client(None)
        top = prefix + "/" if prefix else ""
        names = [a.name] if a.name else sorted(
            cp["Prefix"][len(top):].strip("/")
            for page in c.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=top, Delimiter="/")
            for cp in page.get("CommonPrefixes", []))
        for n in names:
            pts = points(a.url, n, client=c)
            if pts:
                print(f"{n}: commits {pts[0]['to']}..{pts[-1]['to']}, {len(pts)} objects, "
                      f"{pts[0]['time']:%Y-%m-%d %H:%M:%S} .. {pts[-1]['time']:%Y-%m-%d %H:%M:%S} UTC")
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
