"""Stores copied continuously to S3-compatible object storage, and restored from it.

A replicator ships each store's durable commits as *deltas* (``Store.delta``: the pages a
copy lacks, a few for a small commit), at most one per store and interval when the store
changed, none while it is idle. A store's delta goes in an object of its own, or, within
a minute (_PACK_SPAN) of its last object of its own, in the pass's *pack* with the other
stores' (one PUT for all; ``<prefix>/.packs/<time>-<random>.pack``); its next object of
its own, from that object's commit, takes in what went in packs, so a restore finds a
store's packed deltas among the packs of one span. A store's first object is a full
delta (its base); a new base starts a new *generation* once the base and the deltas
since weigh twice what the store now takes (and a megabyte more), or the deltas number
``full_every``. A restore downloads a generation's base and its deltas and applies them
in order (``motedb.apply_delta``) up to the commit asked for. A day of history
(``retention``) stays restorable commit by commit; ``prune()`` deletes older generations
and packs that no restore within it needs (a running replicator prunes on its own).

Objects: ``<prefix>/<name>/<generation>-<ident>/<to>.<since>.delta.zst``, the numbers
zero-padded (a generation is the base's creation time in milliseconds, so generations
and deltas list in order; ident is the store's identity, ``Store.ident``, in hex;
``.zst``: compressed, as frames of zstd streams, ``.z`` of zlib streams (a replicator
without zstandard, or before 2026-12), ``.zd`` by zlib against the delta before it, see
_FRAME).
A replicator that restarts lists what is there and goes on from the newest commit
shipped; an object appears whole or not at all (S3 PUT), so a crash mid-upload ships it
again.

Needs boto3 and zstandard (``pip install motedb[s3]``); the S3 endpoint comes from the client you pass,
or boto3's own configuration (``AWS_ENDPOINT_URL``, credentials, region).

    python -m motedb.replicate replicate FILE|DIR... s3://bucket/prefix [--interval 1]
    python -m motedb.replicate restore s3://bucket/prefix/NAME FILE [--txn N | --time T]
    python -m motedb.replicate list s3://bucket/prefix [NAME]
    python -m motedb.replicate prune s3://bucket/prefix [--retention SECONDS]
"""

from __future__ import annotations

import argparse
import bisect
import concurrent.futures
import datetime
import fnmatch
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import zlib

from . import _core

__all__ = ["Replicator", "restore", "prune", "points", "parse_url", "parse_key", "RETENTION"]

_PACK_SPAN = 60.0  # seconds after a store's own object during which its deltas go in packs
_PACK_SKEW_MS = 60_000  # clocks of replicator and server may differ this much (restore)
_PACK_ENTRY = 4 << 10  # a delta larger than this, compressed, goes as an object of its own
RETENTION = 24 * 3600.0  # seconds of history kept restorable commit by commit (prune)
_IN_MEMORY = 8 << 20  # a delta up to this size is uploaded from memory (Replicator._upload)
_SETTLED_NS = 5 * 10**9  # a store file last written this long ago has settled (Replicator)
_KEY = re.compile(r"(?:^|/)([^/]+)/(\d{13})(?:-([0-9a-f]{16}))?/(\d{20})\.(\d{20})\.delta"
                  r"(\.(?:zst|zd|z))?$")
_COMPS = ("", "z", "zd", "zst")


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


def parse_key(key: str) -> dict | None:
    """An object's key (all of it, or from the store's name on) as a dict of name,
    generation, ident, to, since and comp ("" plain; "zst" compressed by zstd, "z" by
    zlib, "zd" by zlib against the delta before it); None if it is not a delta's."""
    m = _KEY.search(key)
    if not m:
        return None
    return {"name": m.group(1), "generation": int(m.group(2)),
            "ident": int(m.group(3) or "0", 16), "to": int(m.group(4)),
            "since": int(m.group(5)), "comp": (m.group(6) or ".")[1:]}


def points(url: str, name: str, *, client=None, packs: bool = True) -> list[dict]:
    """What can be restored of store `name`: each delta shipped, oldest first, as a dict
    of key (its object's, or its pack's), generation, ident (the store's identity,
    Store.ident), since, to (commit ids), size (bytes), time (upload, UTC datetime) and
    comp (see parse_key). The deltas in packs are those after the store's newest object
    of its own (packs=False: none); those before it are in what it took in (a restore to
    a commit between finds them too)."""
    bucket, prefix = parse_url(url)
    c = _client(client)
    base = _join(prefix, name) + "/"
    out = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base):
        for o in page.get("Contents", []):
            k = parse_key(o["Key"])
            if k and k["name"] == name:
                out.append({"key": o["Key"], "generation": k["generation"],
                            "ident": k["ident"], "to": k["to"], "since": k["since"],
                            "size": o["Size"], "time": o["LastModified"], "comp": k["comp"]})
    out.sort(key=lambda p: (p["generation"], p["to"], p["since"]))
    if out and packs:
        last = max(out, key=lambda p: (p["generation"], p["to"]))
        out += _packed(c, bucket, prefix, name, last)
        out.sort(key=lambda p: (p["generation"], p["to"], p["since"]))
    return out


def _packed(c, bucket: str, prefix: str, name: str, after: dict) -> list[dict]:
    """The deltas of store `name` in packs written while it was in the pack span of
    its object `after`: the packs whose key time is within that span (and the skew
    between clocks) of the object's upload. Each as points() gives them, with the pack's
    key and the delta's bytes (``body``, compressed as ``comp`` says)."""
    lo = int(after["time"].timestamp() * 1000) - _PACK_SKEW_MS
    hi = lo + 2 * _PACK_SKEW_MS + int(_PACK_SPAN * 1000)
    top = _join(prefix, ".packs") + "/"
    keys = []
    for page in c.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=top, StartAfter=f"{top}{lo:013d}"):
        for o in page.get("Contents", []):
            t = o["Key"][len(top):len(top) + 13]
            if not t.isdigit() or int(t) > hi:
                break
            keys.append((o["Key"], o["LastModified"]))
        else:
            continue
        break

    get = _ranged(c, bucket)

    def read(item):
        """This store's deltas in one pack: its head (the index, most often within the
        first 16 KB), then the ranges of this store's deltas not in it."""
        key, when = item
        try:
            index, start, head = _pack_index(get, key)
        except c.exceptions.NoSuchKey:  # pruned since the listing: nothing needed there
            return []
        found = []
        for e in index:
            if e["name"] == name and e["generation"] == after["generation"]:
                at = start + e["off"]
                body = (head[at:at + e["len"]] if at + e["len"] <= len(head)
                        else get(key, at, at + e["len"]))
                if len(body) != e["len"]:
                    raise _core.CorruptError(f"{key}: cut short")
                found.append({"key": key, "generation": e["generation"], "ident": e["ident"],
                              "to": e["to"], "since": e["since"], "size": e["len"],
                              "time": when, "comp": e["comp"], "packed": True, "body": body})
        return found

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return [e for found in pool.map(read, keys) for e in found]


# A pack: magic, the index's length (4 bytes, little-endian), the index (JSON: one entry
# per delta, its store's name, generation, ident, to, since, comp, and where its bytes
# lie after the index: off, len), the deltas' bytes. A restore reads the index and its
# store's ranges only.
_PACK_MAGIC = b"MOTEPAK1"


def _ranged(c, bucket: str, before=None):
    """get(key, start, end): bytes start..end-1 of an object, by a ranged GET (`before()`
    called before each)."""
    def get(key: str, start: int, end: int) -> bytes:
        if before:
            before()
        return c.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}")[
            "Body"].read()
    return get


def _pack_index(get, key: str) -> tuple[list[dict], int, bytes]:
    """A pack's index, where its deltas' bytes start, and the bytes read of it from its
    start (the first 16 KB, or up to the index's end): `get(key, start, end)` reads."""
    head = get(key, 0, 16 << 10)
    n = int.from_bytes(head[8:12], "little") if head[:8] == _PACK_MAGIC else -1
    if n < 0:
        raise _core.CorruptError(f"{key}: not a pack of deltas")
    if 12 + n > len(head):
        head += get(key, len(head), 12 + n)
    try:
        index = json.loads(head[12:12 + n])
        ok = isinstance(index, list) and all(
            isinstance(e, dict) and isinstance(e.get("name"), str)
            and e.get("comp") in _COMPS
            and all(type(e.get(f)) is int and e[f] >= 0
                    for f in ("generation", "ident", "to", "since", "off", "len"))
            for e in index)
    except ValueError:  # (not JSON, or not UTF-8)
        ok = False
    if not ok or len(head) < 12 + n:
        raise _core.CorruptError(f"{key}: the pack's index is damaged or cut short")
    return index, 12 + n, head


def _chain(objs: list[dict], txnid: int | None) -> list[dict]:
    """The base and the deltas that restore the newest generation that has `txnid` (its
    newest commit if None), in order, ending at `txnid` or the last commit before it."""
    gens = sorted({o["generation"] for o in objs}, reverse=True)
    for g in gens:
        mine = [o for o in objs if o["generation"] == g]
        base = [o for o in mine if o["since"] == 0]
        if not base or (txnid is not None and base[0]["to"] > txnid):
            continue
        # from each commit, the delta that goes furthest (not past txnid): an upload
        # whose answer was lost left two from one commit, and an object of its own
        # takes in the packed deltas from its commit
        by_since: dict[int, dict] = {}
        for o in mine:
            if o["since"] and (txnid is None or o["to"] <= txnid):
                if o["since"] not in by_since or o["to"] >= by_since[o["since"]]["to"]:
                    by_since[o["since"]] = o
        chain, at = [base[0]], base[0]["to"]
        while at in by_since and by_since[at]["to"] > at:
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
    bucket, prefix = parse_url(url)
    c = _client(client)
    if at_time is not None and at_time.tzinfo is None:
        raise ValueError("restore(at_time=...) needs an aware datetime (UTC: timezone.utc)")

    def pick(objs: list[dict]) -> list[dict]:
        objs = sorted(objs, key=lambda p: (p["generation"], p["to"], p["since"]))
        if at_time is None:
            return _chain(objs, txnid)
        upto = [o for o in objs if o["time"] <= at_time]
        newest = max(upto, key=lambda o: (o["generation"], o["to"]), default=None)
        return _chain([o for o in upto if newest and o["generation"] == newest["generation"]],
                      None)

    objs = points(url, name, client=c)  # (with the packed deltas after the newest object)
    chain = pick(objs)
    own = [o for o in objs if "body" not in o]
    if chain and "body" not in chain[-1] and chain[-1] is not max(
            own, key=lambda o: (o["generation"], o["to"])):
        # an older object: the deltas packed in its span may go on from it
        chain = pick(objs + _packed(c, bucket, prefix, name, chain[-1]))
    if not chain:
        raise _core.NotFoundError(f"no copy of store {name!r} under {url}"
                                  + (f" at or before commit {txnid}" if txnid is not None else "")
                                  + (f" shipped by {at_time:%Y-%m-%d %H:%M:%S %Z}" if at_time else ""))
    if any(o["comp"] == "zst" for o in chain):
        _zstd()  # (ImportError before a byte is downloaded)
    path = os.fspath(path)
    if os.path.exists(path):
        raise _core.ExistsError(f"{path} already exists: a restore makes a new file")
    building = path + ".restoring"  # (renamed when whole: no half-made store at `path`)
    if os.path.exists(building):
        os.unlink(building)
    try:
        with tempfile.TemporaryDirectory(prefix="motedb-restore-") as tmp, \
                concurrent.futures.ThreadPoolExecutor(4) as pool:
            def arriving(o: dict):
                """The delta that object o holds, a piece at a time as it downloads
                (inflated as it arrives if compressed, by two threads)."""
                body = c.get_object(Bucket=bucket, Key=o["key"])["Body"]
                return (_inflated(body.read, o["key"], codec=o["comp"]) if o["comp"]
                        else iter(lambda: body.read(1 << 20), b""))

            def fetch(i: int) -> str:
                local = os.path.join(tmp, f"{i}.delta")
                o = chain[i]
                comp = o["comp"]

                def save(path: str) -> None:  # a packed delta's bytes, or its object's
                    if "body" in o:
                        with open(path, "wb") as f:
                            f.write(o["body"])
                    else:
                        c.download_file(bucket, o["key"], path)

                if not comp:
                    save(local)
                    return local
                if comp != "zd" and "body" not in o:
                    try:  # inflated as it arrives, not downloaded whole and then inflated
                        with open(local, "wb") as f:
                            for raw in arriving(o):
                                f.write(raw)
                        return local
                    except _core.Error:
                        raise
                    except Exception:  # the connection dropped: s3transfer retries parts
                        pass
                save(local + ".z")
                if comp == "zd":
                    return local + ".z"  # (inflated in order: it needs the one before)
                _inflate_file(local + ".z", local, codec=comp)
                os.unlink(local + ".z")
                return local
            def stream_base() -> bytes | None:
                """The base (a full delta, the chain's first) applied as it downloads
                and inflates: no delta file, and the apply beside the download. Its
                last _DICT bytes; None if the connection dropped (then fetched into a
                file as the deltas are: downloaded whole by s3transfer, which retries
                parts, if that drops too)."""
                o = chain[0]
                if "body" in o or o["comp"] == "zd":
                    return None
                try:
                    src = _Stream(arriving(o))
                    _core.apply_delta(building, src, sync=False)
                    return src.tail
                except _core.Error:
                    raise
                except Exception:
                    if os.path.exists(building):
                        os.unlink(building)
                    return None
            # The deltas downloaded a few ahead (at most 8 files on disk) while the
            # base streams in, applied in order, unsynced: the file is ours until
            # renamed.
            ahead = {i: pool.submit(fetch, i) for i in range(1, min(9, len(chain)))}
            tail = stream_base()  # the end of the delta applied last: a .zd's dictionary
            if tail is None:
                ahead[0] = pool.submit(fetch, 0)
            for i in range(0 if tail is None else 1, len(chain)):
                local = ahead.pop(i).result()
                if i + 8 < len(chain) and i + 8 not in ahead:
                    ahead[i + 8] = pool.submit(fetch, i + 8)
                if local.endswith(".z"):
                    if tail is None:
                        raise _core.CorruptError(f"{chain[i]['key']} is compressed against "
                                                 "the delta before it, which is not there")
                    _inflate_file(local, local[:-2], tail)
                    os.unlink(local)
                    local = local[:-2]
                _core.apply_delta(building, local, sync=False)
                with open(local, "rb") as f:
                    f.seek(max(0, os.path.getsize(local) - _DICT))
                    tail = f.read()
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


def prune(url: str, *, retention: float = RETENTION, client=None, now: float | None = None,
          wait=None, kept: dict | None = None) -> dict:
    """Delete from ``url`` what no restore to a time within the last `retention` seconds
    needs (S3's LastModified times; `now` is the current time, default the clock's):

    - a store's generation whose next generation's base was uploaded before then (a
      restore by time after it takes the newer one);
    - a pack uploaded before then whose every delta is of a generation that is gone or
      was taken in by an object of its own of its store uploaded before then.

    A store's newest generation stays whole, and so does a pack that holds the newest
    commits of a store idle since (they are nowhere else). Commits older than the
    retention stay restorable at the granularity of what is left: the objects of their
    own, not each packed commit. `wait()` is called before each request (a rate
    bound); `kept` (a dict kept between calls) remembers the packs kept and what they
    hold, so that the next prune does not read their indexes again. A pack whose index
    is damaged is left alone. Returns the counts: objects (deleted of generations),
    packs (deleted), packs_kept, packs_damaged, requests."""
    if retention < 0:
        raise ValueError("prune: retention >= 0 (seconds)")
    bucket, prefix = parse_url(url)
    c = _client(client)
    cutoff = (time.time() if now is None else now) - retention
    wait = wait or (lambda: None)
    kept = {} if kept is None else kept
    top = prefix + "/" if prefix else ""
    out = {"objects": 0, "packs": 0, "packs_kept": 0, "packs_damaged": 0, "requests": 0}

    def asked():
        wait()
        out["requests"] += 1

    doomed: list[str] = []

    def delete(keys: list[str]) -> None:  # (DeleteObjects: up to 1,000 keys a request)
        for i in range(0, len(keys), 1000):
            asked()
            r = c.delete_objects(Bucket=bucket, Delete={
                "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
            if r.get("Errors"):
                e = r["Errors"][0]
                raise OSError(f"prune: {len(r['Errors'])} object(s) not deleted, e.g. "
                              f"{e.get('Key')}: {e.get('Code')} {e.get('Message')}")

    taken: dict[tuple, int] = {}  # (name, generation) -> the newest commit its objects

    def settle(name: str, by_gen: dict) -> None:  # uploaded before the cutoff reach
        order = sorted(by_gen)
        for g, after in zip(order, order[1:] + [None]):  # (the newest: no generation after)
            bases = [t for _, _, since, t in by_gen[after] if since == 0] if after else []
            if bases and min(bases) < cutoff:
                doomed.extend(key for key, *_ in by_gen[g])
                out["objects"] += len(by_gen[g])
            else:
                taken[(name, g)] = max((to for _, to, _, t in by_gen[g] if t < cutoff),
                                       default=-1)
        if len(doomed) >= 1000:
            delete(doomed)
            doomed.clear()

    # One listing, in key order: each store's objects come together (they share
    # "name/"), settled as the next store's begin, the old generations deleted a
    # thousand at a time (memory: a store's keys at a time, the old packs' keys, a
    # number per generation); the packs once every store is settled.
    packs = []
    name, by_gen = None, {}
    token = None
    while True:
        asked()
        page = c.list_objects_v2(Bucket=bucket, Prefix=top,
                                 **({"ContinuationToken": token} if token else {}))
        for o in page.get("Contents", []):
            rest, when = o["Key"][len(top):], o["LastModified"].timestamp()
            if rest.startswith(".packs/"):
                if rest.endswith(".pack") and rest.count("/") == 1 and when < cutoff:
                    packs.append(o["Key"])
                continue
            k = parse_key(o["Key"])
            if not (k and rest.count("/") == 2 and rest.startswith(k["name"] + "/")):
                continue
            if k["name"] != name:
                if name is not None:
                    settle(name, by_gen)
                name, by_gen = k["name"], {}
            by_gen.setdefault(k["generation"], []).append((o["Key"], k["to"], k["since"], when))
        token = page.get("NextContinuationToken")
        if not token:
            break
    if name is not None:
        settle(name, by_gen)

    get = _ranged(c, bucket, asked)
    for key in packs:
        held = kept.get(key)
        if held is None:
            try:
                index = _pack_index(get, key)[0]
            except c.exceptions.NoSuchKey:
                continue
            except _core.CorruptError:  # kept, as it is: not ours to judge
                out["packs_damaged"] += 1
                continue
            held = [(e["name"], e["generation"], e["to"]) for e in index]
        # still needed: a delta whose generation is here and not taken in before the cutoff
        held = [h for h in held if taken.get(h[:2], h[2]) < h[2]]
        if held:
            kept[key] = held
            out["packs_kept"] += 1
        else:
            kept.pop(key, None)
            doomed.append(key)
            out["packs"] += 1
    listed = set(packs)
    for key in [k for k in kept if k not in listed]:
        del kept[key]
    delete(doomed)
    return out


class Replicator:
    """Ships the commits of the stores added to it to ``url`` (``s3://bucket/prefix``).

    ``ship()`` is one pass over the stores: a store whose latest durable commit was
    shipped already costs no request; one that changed ships a delta, compressed (zstd
    if zstandard is installed, else zlib; ``compress="zstd"`` or ``"zlib"`` to choose,
    ``False``: not compressed): in an object of its own (a new generation's base, or
    from its last object of its own), or in the pass's pack, one PUT for every store
    whose last object of its own is less than a minute old (``packs=False``: never).
    ``run()`` ships until ``stop`` is set: it looks every ``poll`` seconds (``interval /
    10`` by default) and ships a store that changed once its last delta is ``interval``
    seconds old, so a commit to a quiet store is shipped within ``poll`` and a busy store
    costs one delta per ``interval``.

    Many stores: a store added by path is looked at with one ``stat`` per pass and opened
    (read-only, then closed) only if its file changed, so an idle store costs neither a
    request nor an open; ``watch(directory)`` adds the stores that appear in a directory
    and forgets those deleted (their objects stay restorable). ``workers`` stores are
    shipped at once (each holds one open store and one temporary file at most), and
    ``rate`` bounds the requests per second (stores left over wait for the next pass,
    first in line). A store added as an open Store (a replicator thread in the app's own
    process) is used as is. Failures (the server down, a store that cannot be read) are
    counted in ``errors`` and retried at the next pass, from the last commit shipped. A
    store replaced by another at its path (another identity, ``Store.ident``, or a new
    file), or whose commits went back, starts a new generation.

    History: every commit shipped in the last ``retention`` seconds (a day by default)
    stays restorable; ``run()`` deletes what is older and no longer needed (see the
    module's ``prune()``; ``retention=None``: nothing is ever deleted)."""

    def __init__(self, url: str, *, interval: float = 1.0, poll: float | None = None,
                 full_every: int = 1000, workers: int = 8, rate: float | None = None,
                 compress: bool | str = True, packs: bool = True,
                 retention: float | None = RETENTION, client=None):
        if workers < 1 or (rate is not None and rate <= 0) or interval < 0 or (
                retention is not None and retention < 0):
            raise ValueError("Replicator: workers >= 1, rate > 0 (or None), interval >= 0, "
                             "retention >= 0 (or None)")
        self.bucket, self.prefix = parse_url(url)
        self.url = url
        self.interval = interval
        self.poll = poll if poll is not None else max(min(interval / 10, 1.0), 0.01)
        self.full_every = full_every
        self.workers = workers
        self.rate = rate
        if compress not in (True, False, "zstd", "zlib"):
            raise ValueError(f"Replicator: compress is True, False, 'zstd' or 'zlib', "
                             f"not {compress!r}")
        self.compress = bool(compress)
        # "zst", "z" or "" (as parse_key's comp): what an object without a dictionary is
        self.codec = ("" if not compress else "z" if compress == "zlib"
                      else "zst" if compress == "zstd" else _best_codec())
        if self.codec == "zst":
            _zstd()  # (compress="zstd" without zstandard: ImportError now, not at a pass)
        self.packs = packs
        self.client = _client(client)
        self.stores: dict[str, dict] = {}  # name -> state
        self.dirs: dict[str, str] = {}     # watched directory -> pattern
        self.errors: list[str] = []
        self.shipped_objects = self.shipped_bytes = 0
        self.opened = 0  # stores opened to look at them (an idle settled store: none)
        self.packed_deltas = 0  # deltas that went in packs
        self._lock = threading.Lock()
        self._tokens = float(rate or 0)
        self._filled = time.monotonic()
        self._next = ""  # a pass that ran out of requests stopped before this name
        self._scanned = 0.0  # when the watched directories were last listed
        self.retention = retention
        # run() prunes this often (seconds), in a thread of its own
        self.prune_every = (None if retention is None
                            else min(max(retention / 4, 60.0), 3600.0))
        self.pruned = {"objects": 0, "packs": 0, "packs_kept": 0, "packs_damaged": 0,
                       "requests": 0}
        self._kept: dict = {}  # packs kept by the last prune, and what they hold
        self._pruning: threading.Thread | None = None
        self._pruned_at = time.monotonic()

    def add(self, store: str | os.PathLike | _core.Store, name: str | None = None) -> str:
        """Replicate a store under `name` (its file name by default): a path (opened
        read-only when its file changed), or a Store this process has open (used as it
        is: a process cannot open a store twice). A path that does not exist yet is
        shipped once it does."""
        handle = store if isinstance(store, _core.Store) else None
        path = handle.path if handle else os.fspath(store)
        name = name or os.path.basename(path)
        if "/" in name or not name:
            raise ValueError(f"a store's name is one path part, not {name!r}")
        self.stores[name] = {"path": path, "store": handle, "known": False, "file": None,
                             "seen": None, "ident": 0, "shipped_at": -1e9, "dict": None,
                             "anchor": 0, "anchor_time": -1e18, "anchor_dict": None}
        return name

    def remove(self, name: str) -> None:
        self.stores.pop(name, None)

    def watch(self, directory: str | os.PathLike, pattern: str = "*.mote") -> None:
        """Replicate every store file in `directory` matching `pattern` (a glob), looked
        for at each pass: new stores are added under their file names, deleted ones
        forgotten (what was shipped of them stays restorable)."""
        directory = os.fspath(directory)
        if not os.path.isdir(directory):
            raise NotADirectoryError(f"{directory}: not a directory")
        self.dirs[directory] = pattern

    def _scan(self) -> None:
        for directory, pattern in self.dirs.items():
            here = {e.name: e.path for e in os.scandir(directory)
                    if fnmatch.fnmatchcase(e.name, pattern) and e.is_file()}
            for name, path in here.items():
                if name not in self.stores:
                    self.add(path, name)
                    self.stores[name]["watched"] = directory
            for name in [n for n, st in self.stores.items()
                         if st.get("watched") == directory and n not in here]:
                del self.stores[name]

    def _request(self) -> bool:
        """Take one request from the rate budget: False if none is left."""
        if self.rate is None:
            return True
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._filled) * self.rate)
            self._filled = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True

    def _request_wait(self) -> None:
        """Take one request from the rate budget, waiting for it (a prune's requests)."""
        while not self._request():
            time.sleep(1 / self.rate)

    def prune(self, now: float | None = None) -> dict:
        """Delete what no restore within ``retention`` needs (the module's prune(), with
        this replicator's client and rate bound); adds to the ``pruned`` counts and
        returns this prune's. run() calls it every ``prune_every`` seconds."""
        if self.retention is None:
            return {}
        got = prune(self.url, retention=self.retention, client=self.client, now=now,
                    wait=self._request_wait, kept=self._kept)
        with self._lock:
            for k, v in got.items():
                self.pruned[k] = v if k in ("packs_kept", "packs_damaged") else self.pruned[k] + v
        return got

    def _prune_quietly(self) -> None:
        try:
            self.prune()
        except Exception as e:  # (tried again at the next prune)
            self._failed("prune", e)

    def _resume(self, st: dict, name: str) -> None:
        """What the bucket holds of `name`: the newest generation's last commit."""
        objs = points(self.url, name, client=self.client, packs=False)
        chain = _chain(objs, None)
        st["gen"] = chain[0]["generation"] if chain else 0
        st["ident"] = chain[0]["ident"] if chain else 0
        st["to"] = chain[-1]["to"] if chain else 0
        st["deltas"] = len(chain) - 1 if chain else 0
        st["base_bytes"] = chain[0]["size"] if chain else 0
        st["since_bytes"] = sum(o["size"] for o in chain[1:])
        # (what went in packs after it is taken in by the next object of its own)
        st["anchor"], st["anchor_time"] = st["to"], -1e18
        st["known"] = True

    def _look(self, st: dict):
        """The store's file (its stat) if the store may have changed since the last pass,
        None if it cannot have: not there, or unchanged since a pass found nothing to
        ship. A store this process has open is always looked at (that costs nothing)."""
        try:
            f = os.stat(st["path"])
        except FileNotFoundError:
            if st["store"] is None:
                return None  # not there (yet, or any more)
            raise
        if st["store"] is None and (f.st_dev, f.st_ino, f.st_size, f.st_mtime_ns) == st["seen"]:
            return None
        return f

    def _ship_one(self, name: str, st: dict, tmp: str, f: os.stat_result):
        """Ship `name`, whose file is `f`, if it changed: 1 if an object of its own was
        written, 0 if idle, None if the rate budget ran out first, or a delta for this
        pass's pack (a dict: ship() writes the pack and then settles the store)."""
        handle = st["store"]
        seen = (f.st_dev, f.st_ino, f.st_size, f.st_mtime_ns)
        if not st["known"]:
            if not self._request():
                return None
            self._resume(st, name)
        s = handle or _core.Store(st["path"], readonly=True, create=False)
        if s is not handle:
            with self._lock:
                self.opened += 1
        try:
            latest, ident = s.commit, s.ident
            replaced = ((st["file"] is not None and st["file"] != seen[:2])
                        or (ident and st["ident"] and ident != st["ident"]))
            if (latest == st["to"] and not replaced) or latest <= 1:  # (1: never committed)
                # Idle. Its stat is trusted at the next passes only if the file was
                # last written a while ago: a write in the same clock tick as the last
                # one could leave size and time as they were, and a commit written
                # but not yet synced is not yet one a reader takes.
                st["seen"] = seen if time.time_ns() - f.st_mtime_ns > _SETTLED_NS else None
                return 0
            # A new base once the chain a restore downloads (base and deltas) is twice
            # what the store now takes, compressed, and a megabyte more: a store that
            # rewrites its objects gets one, a store that grows does not (its deltas
            # are its new data). Now's compressed size: the file's, at the base's ratio.
            now = (f.st_size * st["base_bytes"] / st["base_file"] if st.get("base_file")
                   else st["base_bytes"])
            full = (st["to"] == 0 or replaced or latest < st["to"]
                    or st["deltas"] >= self.full_every
                    or st["base_bytes"] + st["since_bytes"] >= 2 * now + (1 << 20))
            # In a pack while within the span of its last object of its own (so that a
            # restore finds it by that object's time); else an object of its own, from
            # that object's commit (it takes in what went in packs since).
            packed = self.packs and not full and time.time() - st["anchor_time"] < _PACK_SPAN
            local = os.path.join(tmp, f"{name}.delta")
            taken = time.monotonic()
            since, body = None, None
            if packed:  # a small delta goes in the pack; a larger one is worth its own PUT
                to = s.delta(local, since=st["to"], sync=False)
                since = st["to"]
                if os.path.getsize(local) <= _PACK_ENTRY * 16:
                    with open(local, "rb") as fh:
                        raw = fh.read()
                    zd = st["dict"] if self.compress else None
                    body = _encode(raw, "zd" if zd else self.codec, zd)
                if body is None or len(body) > _PACK_ENTRY:
                    packed = False
                    if since != st["anchor"]:  # (from the anchor: what went in packs too)
                        os.unlink(local)
                        since, body = None, None
                    # (else the object of its own is this very delta, encoded as it is)
            if not packed:
                if not self._request():
                    if os.path.exists(local):
                        os.unlink(local)
                    return None
                if since is None:
                    since = 0 if full else st["anchor"]
                    to = s.delta(local, since=since, sync=False)
        finally:
            if s is not handle:
                s.close()
        zdict = None if full or not self.compress else st["dict"] if packed else st["anchor_dict"]
        comp = "zd" if zdict else self.codec
        if packed:
            os.unlink(local)
            return {"name": name, "generation": st["gen"], "ident": st["ident"], "to": to,
                    "since": since, "comp": comp, "body": body, "tail": raw[-_DICT:],
                    "taken": taken, "file": seen[:2]}
        try:
            gen = max(int(time.time() * 1000), st["gen"] + 1) if full else st["gen"]
            gid = ident if full else st["ident"]  # (the generation's: 0 if unknown)
            gdir = f"{gen:013d}-{gid:016x}" if gid else f"{gen:013d}"
            key = _join(self.prefix, name, gdir,
                        f"{to:020d}.{since:020d}.delta" + (f".{comp}" if comp else ""))
            size, tail = self._upload(local, key, zdict, (raw, body) if body else None)
        finally:
            if os.path.exists(local):
                os.unlink(local)
        st["to"], st["file"], st["seen"], st["dict"] = to, seen[:2], None, tail
        st["anchor"], st["anchor_time"], st["anchor_dict"] = to, time.time(), tail
        st["shipped_at"] = taken  # (the next one is due `interval` after this snapshot)
        if full:
            st.update(gen=gen, ident=ident, deltas=0, base_bytes=size, since_bytes=0,
                      base_file=seen[2])
        else:
            st["deltas"] += 1
            st["since_bytes"] += size
        with self._lock:
            self.shipped_objects += 1
            self.shipped_bytes += size
        return 1

    def _ship_packs(self, entries: list[dict]) -> int:
        """Write this pass's packed deltas, as few packs as their size allows (8 MB
        each), and settle their stores. Returns the packs written."""
        n = 0
        while entries:
            part, size = [], 0
            while entries and (not part or size + len(entries[0]["body"]) <= _IN_MEMORY):
                part.append(entries.pop(0))
                size += len(part[-1]["body"])
            index, off = [], 0
            for e in part:
                index.append({k: e[k] for k in ("name", "generation", "ident", "to", "since",
                                                 "comp")} | {"off": off, "len": len(e["body"])})
                off += len(e["body"])
            head = json.dumps(index, separators=(",", ":")).encode()
            body = _PACK_MAGIC + len(head).to_bytes(4, "little") + head + b"".join(
                e["body"] for e in part)
            key = _join(self.prefix, ".packs",
                        f"{int(time.time() * 1000):013d}-{os.urandom(4).hex()}.pack")
            try:
                if not self._request():
                    return n  # (the rest: from the same commits at the next pass)
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
            except Exception as e:
                self._failed(",".join(x["name"] for x in part[:3]) + " (a pack)", e)
                continue
            for e in part:
                st = self.stores.get(e["name"])
                if st is not None:
                    st.update(to=e["to"], file=e["file"], seen=None, dict=e["tail"],
                              shipped_at=e["taken"])
            with self._lock:
                self.shipped_objects += 1
                self.shipped_bytes += len(body)
                self.packed_deltas += len(part)
            n += 1
        return n

    def _upload(self, local: str, key: str, zdict: bytes | None,
                have: tuple[bytes, bytes] | None = None) -> tuple[int, bytes | None]:
        """Upload the delta file `local` as object `key`: compressed if it ends in
        ``.zst`` or ``.z``, against `zdict` (the previous delta's end) if in ``.zd``; `have`: the
        delta and its object's bytes, already encoded so. Returns the object's bytes
        and the delta's end, the dictionary of the next one (None for a large one). A
        small one goes as one PUT from memory; a large one (a base) through a
        compressed file, in parts if need be."""
        if have or os.path.getsize(local) <= _IN_MEMORY:
            if have:
                data, body = have
            else:
                with open(local, "rb") as f:
                    data = f.read()
                body = _encode(data, key.rpartition(".delta")[2][1:], zdict)
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
            return len(body), data[-_DICT:]
        comp = key.rpartition(".delta")[2][1:]
        if comp:
            _deflate(local, local + ".z", comp, zdict)
            os.replace(local + ".z", local)
        self.client.upload_file(local, self.bucket, key)
        return os.path.getsize(local), None

    def _try(self, name: str, st: dict, tmp: str, f: os.stat_result) -> int | None:
        try:
            return self._ship_one(name, st, tmp, f)
        except Exception as e:  # retried at the next pass, from st["to"]
            self._failed(name, e)
            return 0

    def _failed(self, name: str, e: Exception) -> None:
        with self._lock:
            self.errors.append(f"{name}: {type(e).__name__}: {e}")
            del self.errors[:-100]

    def ship(self, *, due: bool = False) -> int:
        """One pass: ship what changed. Returns the number of objects written. With
        due=True (run's passes), a store shipped less than `interval` seconds ago waits
        (not even looked at)."""
        now = time.monotonic()
        if not due or now - self._scanned >= self.interval:
            self._scan()
            self._scanned = now
        names = sorted(self.stores)
        at = bisect.bisect_left(names, self._next)  # the first left over last time
        todo = []
        for name in names[at:] + names[:at]:
            st = self.stores[name]
            if due and now - st["shipped_at"] < self.interval:
                continue
            try:
                f = self._look(st)
            except OSError as e:
                self._failed(name, e)
                continue
            if f is not None:
                todo.append((name, st, f))
        self._next = ""
        if not todo:
            return 0
        n = 0
        with tempfile.TemporaryDirectory(prefix="motedb-ship-") as tmp, \
                concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            jobs = [(name, pool.submit(self._try, name, st, tmp, f)) for name, st, f in todo]
            packed = []
            for name, job in jobs:
                got = job.result()
                if got is None:
                    self._next = self._next or name
                elif isinstance(got, dict):
                    packed.append(got)
                else:
                    n += got
        return n + self._ship_packs(packed)

    def run(self, stop: threading.Event | None = None) -> None:
        """Ship until `stop` is set (forever if None): every `poll` seconds, each store
        that changed and whose last object is at least `interval` seconds old (so a
        commit to a quiet store goes out within `poll`, and a busy store costs one
        object per interval), and every ``prune_every`` seconds a prune (``prune()``)
        in a thread beside the passes."""
        stop = stop or threading.Event()
        while not stop.is_set():
            start = time.monotonic()
            self.ship(due=True)
            now = time.monotonic()
            if (self.prune_every is not None and now - self._pruned_at >= self.prune_every
                    and not (self._pruning and self._pruning.is_alive())):
                self._pruned_at = now  # (beside the passes: a prune lists the bucket)
                self._pruning = threading.Thread(target=self._prune_quietly, daemon=True,
                                                 name="motedb-prune")
                self._pruning.start()
            # the next pass: after `poll`, or sooner when a store shipped lately falls
            # due (a busy store then ships every `interval`, not a poll later)
            wake = start + self.poll
            for st in self.stores.values():
                if now < st["shipped_at"] + self.interval < wake:
                    wake = st["shipped_at"] + self.interval
            stop.wait(max(0.0, wake - now))


# A compressed object (``.zst``, or ``.z`` from a replicator without zstandard): frames
# of a 4-byte little-endian length and a zstd frame (level 1; zlib level 1 in a ``.z``)
# of up to 4 MB of the delta, so that a large one is compressed and inflated by several
# threads (both let go of the GIL). zstd, not zlib, since 2026-12-07: a 134 MB base of
# text compresses to 47 MB, not 52, in 0.73 s, not 1.9, and inflates in 0.12 s, not
# 0.42, on two threads (scratch inf3.py): the restore's largest part. A ``.zd`` object is
# one zlib frame compressed against a dictionary, the last 32 KB of the delta before it
# in its chain: a small commit's pages are the previous delta's with a few bytes
# changed, so it costs 250-280 bytes instead of 1.5-2.2 KB (scratch zd.py, 2026-12-06).
_FRAME = 4 << 20
_DICT = 32 << 10  # (zlib's window)


def _zstd():
    """The zstandard module (the s3 extra's), or ImportError saying how to get it."""
    try:
        import zstandard
    except ImportError as e:
        raise ImportError("motedb.replicate needs zstandard for .zst objects: "
                          "pip install motedb[s3]") from e
    return zstandard


def _best_codec() -> str:
    """What a Replicator compresses with: zstd if zstandard is installed, else zlib."""
    try:
        _zstd()
        return "zst"
    except ImportError:
        return "z"


def _in_order(fn, items, workers: int = 2):
    """fn over items in threads, results in order, a few in flight (bounded memory)."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        ahead: list = []
        for item in items:
            ahead.append(pool.submit(fn, item))
            if len(ahead) > workers:
                yield ahead.pop(0).result()
        for f in ahead:
            yield f.result()


def _frame(raw: bytes, zdict: bytes | None = None, codec: str = "z") -> bytes:
    """One frame: zstd (codec "zst") or zlib ("z") level 1 alone; zlib level 6 against
    a dictionary (a ``.zd`` object)."""
    if zdict is not None:
        c = zlib.compressobj(6, zdict=zdict)
        z = c.compress(raw) + c.flush()
    elif codec == "zst":  # (a compressor per frame: one is not to be shared by threads)
        z = _zstd().ZstdCompressor(level=1, write_checksum=True).compress(raw)
    else:
        z = zlib.compress(raw, 1)
    return len(z).to_bytes(4, "little") + z


def _encode(raw: bytes, comp: str, zdict: bytes | None) -> bytes:
    """A delta held in memory as an object's bytes: comp "zd" (against zdict), "zst" or
    "z" (frames) or "" (as it is)."""
    return (_frame(raw, zdict) if comp == "zd" else _pack(raw, comp) if comp
            else raw)


def _pack(data: bytes, codec: str) -> bytes:
    """A delta held in memory, compressed."""
    return b"".join(_frame(data[i:i + _FRAME], codec=codec)
                    for i in range(0, len(data), _FRAME))


def _deflate(src: str, dst: str, comp: str, zdict: bytes | None) -> None:
    """Compress the delta file src into dst as `comp` says: "zst" or "z" frames, or
    "zd" (a delta too large to hold in memory after a small one): each frame against
    `zdict`, as a restore inflates each."""
    with open(src, "rb") as i, open(dst, "wb") as o:
        for z in _in_order(lambda raw: _frame(raw, zdict if comp == "zd" else None, comp),
                           iter(lambda: i.read(_FRAME), b"")):
            o.write(z)


def _inflated(read, what: str, zdict: bytes | None = None, codec: str = "z"):
    """The delta a compressed object holds, whose bytes read(n) gives (a file's, or a
    download's as they arrive), a frame at a time (two threads inflate ahead): frames
    of `codec` ("zst" or "z"), or a ``.zd`` object against `zdict`, the end of the delta
    before it in its chain."""
    zstd = _zstd() if codec == "zst" and zdict is None else None

    def take(n: int) -> bytes:  # (a network stream may give fewer bytes than asked)
        b = read(n)
        while 0 < len(b) < n and (more := read(n - len(b))):
            b += more
        return b

    def frames():
        while head := take(4):
            n = int.from_bytes(head, "little")
            z = take(n)
            if len(head) < 4 or len(z) < n:
                raise _core.CorruptError(f"{what}: compressed delta cut short")
            yield z

    def one(z: bytes) -> bytes:
        try:
            if zstd is not None:
                # (a frame says its size: a damaged one that says more than a frame
                # holds is refused before anything is allocated for it, and one that
                # says 0 is not inflated at all by zstandard: no frame is empty)
                if not 1 <= zstd.frame_content_size(z) <= _FRAME:
                    raise zstd.ZstdError("a frame of an impossible size")
                return zstd.ZstdDecompressor().decompress(z, allow_extra_data=False)
            if zdict is None:
                return zlib.decompress(z)
            d = zlib.decompressobj(zdict=zdict)
            raw = d.decompress(z) + d.flush()
            if not d.eof:
                raise zlib.error("cut short")
            return raw
        except (zlib.error, *((zstd.ZstdError,) if zstd else ())) as e:
            raise _core.CorruptError(f"{what}: compressed delta damaged ({e})") from None

    return _in_order(one, frames())


class _Stream:
    """A binary stream (readinto) over chunks of bytes, for ``apply_delta`` to read a
    full delta from as it downloads and inflates; ``tail``: its last _DICT bytes."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._left = memoryview(b"")
        self.tail = b""

    def readinto(self, b) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = memoryview(chunk)
            self.tail = (self.tail + chunk if len(chunk) < _DICT else chunk)[-_DICT:]
        n = min(len(b), len(self._left))
        b[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


def _inflate_file(src: str, dst: str, zdict: bytes | None = None, codec: str = "z") -> None:
    """The compressed object in file src (see _inflated) inflated into the file dst."""
    with open(src, "rb") as f, open(dst, "wb") as o:
        for raw in _inflated(f.read, src, zdict, codec):
            o.write(raw)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m motedb.replicate",
                                description="Copy MoteDB stores to S3-compatible storage.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replicate", help="ship the stores' commits until interrupted")
    r.add_argument("args", nargs="+", metavar="FILE|DIR... URL",
                   help="store files, and directories whose *.mote stores are watched")
    r.add_argument("--interval", type=float, default=1.0,
                   help="at most one object per store this often (seconds)")
    r.add_argument("--poll", type=float, default=None,
                   help="look for changes this often (default: interval / 10)")
    r.add_argument("--rate", type=float, default=None, help="at most this many requests a "
                   "second (default: no bound)")
    r.add_argument("--workers", type=int, default=8, help="stores shipped at once")
    r.add_argument("--once", action="store_true", help="one pass, then exit")
    r.add_argument("--retention", type=float, default=RETENTION,
                   help="keep every commit of this many seconds restorable, delete what "
                   "is older and no longer needed (default: a day; -1: delete nothing)")
    pr = sub.add_parser("prune", help="delete what no restore within the retention needs")
    pr.add_argument("url")
    pr.add_argument("--retention", type=float, default=RETENTION,
                    help="seconds of history kept commit by commit (default: a day)")
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
        rep = Replicator(a.args[-1], interval=a.interval, poll=a.poll, rate=a.rate,
                         workers=a.workers, retention=None if a.retention < 0 else a.retention)
        for f in a.args[:-1]:  # a directory: the stores in it (*.mote), as they come and go
            rep.watch(f) if os.path.isdir(f) else rep.add(f)
        if a.once:
            n = rep.ship()
            print(f"{n} object(s) shipped")
            for e in rep.errors:
                print("error:", e, file=sys.stderr)
            return 1 if rep.errors else 0
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            rep.run(stop)
        except KeyboardInterrupt:
            pass
        print(f"{rep.shipped_objects} object(s), {rep.shipped_bytes} bytes shipped, "
              f"{rep.pruned['objects'] + rep.pruned['packs']} deleted, "
              f"{len(rep.errors)} error(s) kept", file=sys.stderr)
        for e in rep.errors[-5:]:
            print("error:", e, file=sys.stderr)
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
    if a.cmd == "prune":
        try:
            got = prune(a.url, retention=a.retention)
        except (_core.Error, ValueError, OSError) as e:
            print(f"prune: {e}", file=sys.stderr)
            return 1
        print(f"{got['objects']} object(s) of older generations and {got['packs']} pack(s) "
              f"deleted, {got['packs_kept']} old pack(s) kept (they hold commits found "
              f"nowhere else), {got['requests']} request(s)"
              + (f"; {got['packs_damaged']} damaged pack(s) left alone"
                 if got["packs_damaged"] else ""))
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
    rc = main()
    # Its work closed and synced, the command leaves without the interpreter's teardown:
    # freeing boto3's modules and service models took 80-90 ms of a restore's 0.9 s.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
