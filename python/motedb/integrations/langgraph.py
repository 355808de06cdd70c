"""A LangGraph checkpointer on a MoteDB store: ``MoteSaver``.

    from motedb.integrations.langgraph import MoteSaver

    with MoteSaver.from_path("agent.mote") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, {"configurable": {"thread_id": "user-42"}})

One store file holds any number of threads (or give each user or agent a store of
its own: a tiny store opens in tens of microseconds). Every ``put`` and
``put_writes`` is one durable commit; reads see one snapshot. The sync methods and
the async ones (``aput``, ``aget_tuple``, ``alist``, ...; ``aget_tuple`` and ``alist``
run on the event loop's thread when the store's cache holds what they read, else on a
worker thread, ``aput`` and ``aput_writes`` on one writer thread that makes every
write queued durable with one sync, the others on worker threads; MoteDB releases the
GIL while it syncs and queries) can be used together, from any number of threads, and
from several processes on one store.

How it is stored: ``LangGraphCheckpoint`` and ``LangGraphWrite``, in the same store as the
application's own entities (so a store can hold an agent's memories and its threads),
and the pieces they are made of, ``LangGraphPiece``. The first two are keyed by a string
that starts with the thread id and the namespace, length-prefixed (``"7:thread-13:sub"``),
so one thread, one namespace of a thread and one checkpoint's writes are each a key range
of a unique index: the newest checkpoint of a thread is the last key of its range, one
index entry. A checkpoint is the serializer's bytes, its metadata JSON. Nothing else is
indexed: an index on the run id (for ``delete_for_runs``, which scans the checkpoints
instead) put a leaf at a random place into every ``put``'s commit (2-8 % of a chat's
steps per second on a disk, alternated runs; stores written with it lose it at the
saver's first ``box()``).

Each checkpoint holds a thread's whole state, which mostly repeats the one before it (a
chat's messages so far, plus one). A checkpoint or a write value of more than
``INLINE_MAX`` bytes is cut into content-defined pieces (``mote_chunk``: the cuts follow
the bytes, so the history shared with the parent is cut the same way); a piece the
parent checkpoint or the writes between them already have is named again (found by its
bytes, a dict lookup: equal bytes, not a hash that two pieces could share), the others
are stored, and the checkpoint or write holds the ids of its pieces. A thread then grows
by what each step adds, not by its whole state each step, and no record is long enough
to need pages of its own (a record over a third of a page gets whole pages in MoteDB). A
piece is found by its id, not by a key: ids are never reused and a piece never changes,
so an id names the same bytes for good, and a commit adds its new pieces at the end of
one tree instead of entries all over a hash index (in one shared store, a commit wrote
11.7 pages in 3.6 write requests with a unique index of thread and hash, 8.7 in 2.9
without; a fifth fewer bytes per checkpoint). Pieces that nothing of their thread names
any more are removed by ``delete_thread``, ``prune`` and ``delete_for_runs``. A saver
remembers the bytes of the checkpoints and writes it cut or joined lately, by their
pieces' ids (``BLOBS_BUDGET``, 8 MB): the ``get_tuple`` after a ``put`` and a ``list``
that repeats most of the one before read no pieces; and the pieces it wrote or read, by
their ids (``FAMILIES_BUDGET``, 32 MB counted per checkpoint, mostly the same bytes), so
that a ``put`` finds what its parent has without reading the pieces (another saver reads
them once). (Stores written before 2026-12-07 keep their checkpoints' pieces as
``LangGraphChunk``, under the thread and the hash: those are read, copied and removed as
before; new checkpoints are written as above.)

Besides the base capabilities (``put``, ``put_writes``, ``get_tuple``, ``list``,
``delete_thread``) it has ``delete_for_runs``, ``copy_thread`` and ``prune``; the
``prune`` strategy ``"keep_latest"`` keeps, beside the newest checkpoint of each
namespace, the ancestors its ``DeltaChannel`` values are rebuilt from.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import motedb

from ..aio import _Workers
from ._store import StoreHolder, key_part

T = TypeVar("T")

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("motedb.integrations.langgraph needs LangGraph: "
                      "pip install 'motedb[langgraph]'") from e

__all__ = ["MoteSaver", "LangGraphCheckpoint", "LangGraphWrite", "LangGraphPiece", "LangGraphChunk"]

INLINE_MAX = 700  # a checkpoint or write value of more bytes than this is kept as pieces
CHUNK_MIN, CHUNK_MAX, CHUNK_BITS = 192, 768, 9  # about 530 bytes: records inside a leaf
DIGEST = 16  # bytes of a LangGraphChunk's hash (BLAKE2b; written before 2026-12-07)
BLOBS_BUDGET = 8 << 20  # bytes of joined checkpoints and writes a saver remembers (_Recent)
FAMILIES_BUDGET = 32 << 20  # bytes of pieces a saver remembers by their ids (_Recent; a
# family shares most of its pieces' bytes objects with its parent's, counted in each)


class LangGraphCheckpoint(motedb.Entity):
    """One checkpoint of a thread (a step of a graph)."""
    id: int = 0
    key: Annotated[str, motedb.Unique]  # _ns_key(thread, ns) + checkpoint_id
    thread_id: str = ""
    checkpoint_ns: str = ""
    checkpoint_id: str = ""
    parent_checkpoint_id: str | None = None
    run_id: str | None = None  # metadata["run_id"] (not indexed: see delete_for_runs)
    type: str = ""  # the serializer's type tag of `checkpoint`
    checkpoint: bytes = b""  # the serializer's bytes, or b"" when kept as pieces
    pieces: bytes = b""  # the ids of its pieces (LangGraphPiece), in order: _pack
    chunks: bytes = b""  # (written before 2026-12-07: its LangGraphChunk hashes, in order)
    metadata: dict = motedb.field(default_factory=dict)


class LangGraphWrite(motedb.Entity):
    """One pending write of a task, linked to a checkpoint."""
    id: int = 0
    key: Annotated[str, motedb.Unique]  # _writes_key(thread, ns, checkpoint_id) + task + idx
    thread_id: str = ""
    checkpoint_ns: str = ""
    checkpoint_id: str = ""
    task_id: str = ""
    task_path: str = ""
    idx: int = 0
    channel: str = ""
    type: str = ""
    value: bytes = b""  # the serializer's bytes, or b"" when kept as pieces
    pieces: bytes = b""  # the ids of its pieces (LangGraphPiece), in order: _pack
    chunks: bytes = b""  # (written before 2026-12-07: its LangGraphChunk hashes, in order)


class LangGraphPiece(motedb.Entity):
    """A piece of a thread's checkpoints and writes. Its id names its bytes for good: MoteDB
    never reuses an id, and a piece is never changed (only removed, once nothing of its
    thread names it)."""
    id: int = 0
    data: bytes = b""


class LangGraphChunk(motedb.Entity):
    """A piece of a thread's checkpoints as stores written before 2026-12-07 keep them, under
    the thread and the piece's hash (read, copied and removed; no longer written)."""
    id: int = 0
    key: Annotated[str, motedb.Unique]  # _thread_key(thread) + the hash in hex
    data: bytes = b""


def _thread_key(thread_id: str) -> str:
    return key_part(thread_id)


def _ns_key(thread_id: str, ns: str) -> str:
    return key_part(thread_id) + key_part(ns)


def _writes_key(thread_id: str, ns: str, checkpoint_id: str) -> str:
    return key_part(thread_id) + key_part(ns) + key_part(checkpoint_id)


def _chunk_keys(thread_id: str, refs: bytes) -> list[str]:
    """The LangGraphChunk keys a list of hashes names (stores written before 2026-12-07)."""
    tk, h = _thread_key(thread_id), refs.hex()
    return [tk + h[i:i + 2 * DIGEST] for i in range(0, len(h), 2 * DIGEST)]


_SWAP = sys.byteorder != "little"


def _pack(ids: Iterable[int]) -> bytes:
    """Piece ids as a record holds them: 8 bytes each, little-endian."""
    a = array("Q", ids)
    if _SWAP:
        a.byteswap()
    return a.tobytes()


def _unpack(pieces: bytes) -> array:
    a = array("Q")
    a.frombytes(pieces)
    if _SWAP:
        a.byteswap()
    return a


def _cut(blob: bytes) -> list[bytes]:
    """blob's content-defined pieces; none when it is short enough to be kept as it is
    (INLINE_MAX)."""
    if len(blob) <= INLINE_MAX:
        return []
    ends = motedb._core._chunk_ends(blob, CHUNK_MIN, CHUNK_MAX, CHUNK_BITS)
    return [blob[start:end] for start, end in zip([0, *ends], ends)]


def _blob_key(o: LangGraphCheckpoint | LangGraphWrite) -> bytes:
    """What names a checkpoint's or write's bytes when they are kept as pieces (b"" when
    inline): its piece ids; or, written before 2026-12-07, b"h" and its chunks' hashes (a
    length 1 more than a multiple of 16 is never a multiple of 8: never the same key)."""
    return o.pieces or (b"h" + o.chunks if o.chunks else b"")


class _Recent:
    """What a saver remembers of the checkpoints and writes kept as pieces that it cut,
    joined or looked into lately, by ``_blob_key`` (their pieces' ids), least recently
    used dropped first beyond ``budget``, counted by ``size``: their joined bytes
    (``len``: a thread's next reads join the same ones again, ``list``'s ten checkpoints
    are nine of the previous step's, ``get_tuple``'s is the one ``put`` just cut), or
    their pieces ({bytes: id}, counted by their bytes: what a ``put`` names again of its
    parent's pieces without reading them). A value of more than an eighth of the budget
    is not kept (one long thread does not push out the others). Ids name the bytes for
    good, so what is remembered is never stale: it is what those pieces hold in any
    snapshot that names them. (So only what a committed transaction wrote, or a snapshot
    read, is added: the ids of a transaction that did not commit may be handed out
    again.)"""

    def __init__(self, budget: int, size: Callable[[Any], int] = len) -> None:
        self._budget, self._size_of, self._size = budget, size, 0
        self._by_key: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()  # (the sync methods may be called from any thread)

    def get(self, key: bytes) -> Any:
        return self.get_many((key,)).get(key)

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, Any]:
        """{key: value} of the keys it holds."""
        out = {}
        with self._lock:
            by_key = self._by_key
            for key in keys:
                value = by_key.get(key)
                if value is not None:
                    by_key.move_to_end(key)
                    out[key] = value
        return out

    def add(self, key: bytes, value: Any) -> None:
        size = self._size_of(value)
        if size > self._budget // 8:
            return
        with self._lock:
            if key in self._by_key:
                self._by_key.move_to_end(key)
                return
            self._by_key[key] = value
            self._size += size
            while self._size > self._budget:
                self._size -= self._size_of(self._by_key.popitem(last=False)[1])


def _metadata_value(metadata: dict, dotted: str) -> Any:
    """metadata's value at a dotted key ("a.b" is metadata["a"]["b"]); None if absent."""
    v: Any = metadata
    for part in dotted.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


class MoteSaver(StoreHolder, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer (``BaseCheckpointSaver``) on a MoteDB store.

    ``store`` is an open ``motedb.Store`` (which stays the caller's to close) or a
    path, opened here with ``open_kwargs`` (``motedb.open``'s options) and closed
    by ``close()`` or the ``with`` block. ``serde`` is LangGraph's serializer
    (default ``JsonPlusSerializer``)."""

    def __init__(self, store: motedb.Store | str | os.PathLike, *,
                 serde: SerializerProtocol | None = None, **open_kwargs: Any) -> None:
        super().__init__(serde=serde)
        self._hold(store, open_kwargs)
        self._writer: _Workers | None = None  # aput and aput_writes' thread, from the first
        self._blobs = _Recent(BLOBS_BUDGET)  # joined bytes
        self._families = _Recent(FAMILIES_BUDGET, lambda family: sum(map(len, family)))
        self.checkpoints = self.store.box(LangGraphCheckpoint)
        self.writes = self.store.box(LangGraphWrite)
        self.pieces = self.store.box(LangGraphPiece)
        self.chunks: motedb.Box[LangGraphChunk] | None = None  # (see _old_chunks)
        self._old_chunks()

    def _old_chunks(self) -> motedb.Box[LangGraphChunk] | None:
        """The LangGraphChunk box of a store written before 2026-12-07; None if the store
        has none (looked for again while it has none: an earlier saver in another process
        may make one)."""
        if self.chunks is None:
            try:
                with self.store.read():  # (opens it only if it exists)
                    self.chunks = self.store.box(LangGraphChunk)
            except motedb.SchemaError:
                pass
        return self.chunks

    @classmethod
    @contextmanager
    def from_path(cls, path: str | os.PathLike, *, serde: SerializerProtocol | None = None,
                  **open_kwargs: Any) -> Iterator[MoteSaver]:
        """``with MoteSaver.from_path("agent.mote") as saver:`` opens the store, closes it after."""
        saver = cls(path, serde=serde, **open_kwargs)
        try:
            yield saver
        finally:
            saver.close()


    # ---- reading ------------------------------------------------------------------

    def _piece_data(self, ids: Iterable[int]) -> dict[int, bytes]:
        """{id: bytes} of the stored pieces among ids (one get_many)."""
        ids = list(dict.fromkeys(ids))
        return {i: o.data for i, o in zip(ids, self.pieces.get_many(ids)) if o is not None}

    def _chunk_data(self, keys: Iterable[str]) -> dict[str, bytes]:
        """{chunk key: bytes} of the stored LangGraphChunk chunks among keys (one query)."""
        K, box = LangGraphChunk, self._old_chunks()
        if box is None:
            return {}
        return dict(box.query(K.key.in_(list(keys))).tuples(K.key, K.data))

    def _parts(self, o: LangGraphCheckpoint | LangGraphWrite) -> list[int] | list[str]:
        """What o's bytes are joined from: piece ids, or (written before 2026-12-07) chunk keys."""
        return list(_unpack(o.pieces)) if o.pieces else _chunk_keys(o.thread_id, o.chunks)

    def _read_parts(self, parts: set) -> dict:
        """{part: bytes} of the stored ones among piece ids and chunk keys (a query each)."""
        ids = [p for p in parts if isinstance(p, int)]
        data: dict = self._piece_data(ids) if ids else {}
        if len(ids) < len(parts):
            data.update(self._chunk_data(p for p in parts if isinstance(p, str)))
        return data

    def _joined(self, o: LangGraphCheckpoint | LangGraphWrite, inline: bytes,
                data: dict | None = None) -> bytes:
        """The serializer's bytes of a checkpoint or write: inline, or its pieces joined
        (remembered by ``self._blobs``; else from data when given: pieces read
        beforehand)."""
        key = _blob_key(o)
        if not key:
            return inline
        blob = self._blobs.get(key)
        if blob is not None:
            return blob
        parts = self._parts(o)
        if data is None:
            data = self._read_parts(set(parts))
        try:
            blob = b"".join([data[k] for k in parts])
        except KeyError as e:
            raise motedb.CorruptError(f"{o.key!r} names piece {e.args[0]!r}, which is not "
                                      "stored") from None
        self._blobs.add(key, blob)
        return blob

    def _blob(self, cp: LangGraphCheckpoint) -> bytes:
        return self._joined(cp, cp.checkpoint)

    def _tuples(self, cps: list[LangGraphCheckpoint],
                dense: bool = False) -> list[CheckpointTuple]:
        """Checkpoint tuples with their pending writes (in writes_sort_key order: task_path,
        task_id, idx; dense: see _writes_of). The pieces of all of them that ``self._blobs``
        does not hold joined are read at once, each once: the checkpoints of a thread
        share most of theirs."""
        writes, parts = self._writes_of(cps, dense), set()
        pieced = {}  # _blob_key -> the checkpoint or write
        for cp, ws in zip(cps, writes):
            for o in (cp, *ws):
                key = _blob_key(o)
                if key:
                    pieced[key] = o
        # (taken now: joining the others may push them out)
        held: dict[bytes, bytes] = self._blobs.get_many(pieced)
        for key, o in pieced.items():
            if key not in held:
                parts.update(self._parts(o))
        data = self._read_parts(parts) if parts else {}

        def blob_of(o: LangGraphCheckpoint | LangGraphWrite, inline: bytes) -> bytes:
            got = held.get(_blob_key(o))
            return got if got is not None else self._joined(o, inline, data)
        out = []
        for cp, ws in zip(cps, writes):
            parent = None
            if cp.parent_checkpoint_id:
                parent = {"configurable": {"thread_id": cp.thread_id,
                                           "checkpoint_ns": cp.checkpoint_ns,
                                           "checkpoint_id": cp.parent_checkpoint_id}}
            out.append(CheckpointTuple(
                {"configurable": {"thread_id": cp.thread_id, "checkpoint_ns": cp.checkpoint_ns,
                                  "checkpoint_id": cp.checkpoint_id}},
                self.serde.loads_typed((cp.type, blob_of(cp, cp.checkpoint))),
                cp.metadata,
                parent,
                [(w.task_id, w.channel, self.serde.loads_typed((w.type, blob_of(w, w.value))))
                 for w in ws]))
        return out

    def _writes_of(self, cps: list[LangGraphCheckpoint],
                   dense: bool = False) -> list[list[LangGraphWrite]]:
        """The pending writes of each checkpoint, in writes_sort_key order (task_path,
        task_id, idx). One query per checkpoint; when ``dense`` (the checkpoints of each
        namespace among them are consecutive ones: list's without a filter), one per
        thread and namespace instead: the range from the least of their writes' key
        prefixes to the greatest, which then holds no other checkpoint's."""
        W = LangGraphWrite
        groups: dict[tuple[str, str], set[str]] = {}
        for cp in cps:
            groups.setdefault((cp.thread_id, cp.checkpoint_ns), set()).add(cp.checkpoint_id)
        found: dict[tuple[str, str, str], list[LangGraphWrite]] = {}
        for (tid, ns), ids in groups.items():
            prefixes = [_writes_key(tid, ns, cid) for cid in ids]
            if dense and len(prefixes) > 1:  # (every key between two keys of a namespace is
                conds = [W.key.between(min(prefixes), max(prefixes) + "\U0010ffff")]  # of it)
            else:
                conds = [W.key.startswith(p) for p in prefixes]
            for cond in conds:
                for w in self.writes.query(cond).find():
                    if w.checkpoint_id in ids:
                        found.setdefault((tid, ns, w.checkpoint_id), []).append(w)
        out = []
        for cp in cps:
            ws = found.get((cp.thread_id, cp.checkpoint_ns, cp.checkpoint_id), [])
            ws.sort(key=lambda w: (w.task_path, w.task_id, w.idx))
            out.append(ws)
        return out

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by config (its ``checkpoint_id``, else the thread's newest
        in ``checkpoint_ns``), with its pending writes; None if there is none."""
        C = LangGraphCheckpoint
        conf = config["configurable"]
        prefix = _ns_key(str(conf["thread_id"]), conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        with self.store.read():
            if checkpoint_id:
                cp = self.checkpoints.query(C.key == prefix + checkpoint_id).first()
            else:
                cp = self.checkpoints.query(C.key.startswith(prefix)).order_by(
                    C.key.desc()).limit(1).first()
            return self._tuples([cp])[0] if cp is not None else None

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first (by checkpoint id): of config's thread (and its
        ``checkpoint_ns`` if given, and ``checkpoint_id`` if given), or of every thread
        when config is None; only those whose metadata has each of ``filter``'s values
        (a dotted key reaches into nested objects; None matches a missing key), only
        those before ``before``'s checkpoint id, at most ``limit``. One snapshot: the
        result is read before the first is returned."""
        C = LangGraphCheckpoint
        if limit is not None and limit < 0:  # as SQL's LIMIT -1: none
            limit = None
        if limit == 0:
            return
        if before is not None and not get_checkpoint_id(before):
            return  # before no checkpoint: none (SqliteSaver compares with NULL)
        conf = config["configurable"] if config is not None else {}
        ns = conf.get("checkpoint_ns")
        if config is None:
            cond = None
        elif ns is None:
            cond = C.key.startswith(_thread_key(str(conf["thread_id"])))
        else:
            prefix = _ns_key(str(conf["thread_id"]), ns)
            cid = get_checkpoint_id(config)
            cond = C.key == prefix + cid if cid else C.key.startswith(prefix)
            if before is not None and not cid:
                # the range below `before`: the index is walked down from it
                cond = C.key.between(prefix, prefix + get_checkpoint_id(before)) & (
                    C.key != prefix + get_checkpoint_id(before))
        one_range = config is not None and ns is not None  # key order is checkpoint id order
        q = self.checkpoints.query(cond)
        if one_range:
            q.order_by(C.key.desc())
            if limit is not None and not filter:
                q.limit(limit)
        before_id = get_checkpoint_id(before) if before is not None else None
        picked = []
        with self.store.read():
            cps = q.find()
            if not one_range:  # several threads or namespaces: by checkpoint id
                cps.sort(key=lambda c: c.checkpoint_id, reverse=True)
            for cp in cps:
                if before_id is not None and not cp.checkpoint_id < before_id:
                    continue
                if filter and any(_metadata_value(cp.metadata, k) != v for k, v in filter.items()):
                    continue
                if limit is not None and len(picked) >= limit:
                    break
                picked.append(cp)
            out = self._tuples(picked, dense=not filter)
        yield from out

    # ---- writing --------------------------------------------------------------------

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store a checkpoint (one durable commit); config's ``checkpoint_id`` is its
        parent. Returns the config that names it."""
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        type_, blob = self.serde.dumps_typed(checkpoint)
        md = get_checkpoint_metadata(config, metadata)
        run_id = md.get("run_id")
        key = _ns_key(thread_id, ns) + checkpoint["id"]
        cut = _cut(blob)
        cp = LangGraphCheckpoint(
            key=key, thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint["id"],
            parent_checkpoint_id=conf.get("checkpoint_id"),
            run_id=run_id if isinstance(run_id, str) else None,
            type=type_, checkpoint=b"" if cut else blob, metadata=md)
        C = LangGraphCheckpoint
        learned = []
        with self.store.write():
            if cut:
                learned = self._add_pieces(thread_id, ns, cp.parent_checkpoint_id,
                                           [(cp, blob, cut)])
            try:
                self.checkpoints.put(cp)
            except motedb.UniqueViolationError:  # the same checkpoint again replaces it
                old = self.checkpoints.query(C.key == key).first()  # (the failed put wrote nothing)
                cp.id = old.id
                self.checkpoints.put(cp)
                self._drop_unnamed(thread_id, [old])
        self._remember(learned)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        """Store a task's writes linked to config's checkpoint (one durable commit). A
        write already stored under the same task and index is kept, unless every write
        is to a special channel (error, interrupt, ...), which replaces it."""
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        checkpoint_id = str(conf["checkpoint_id"])
        replace = all(w[0] in WRITES_IDX_MAP for w in writes)
        task_prefix = _writes_key(thread_id, ns, checkpoint_id) + key_part(task_id)
        new = []  # (write, its blob, its pieces)
        for idx, (channel, value) in enumerate(writes):
            i = WRITES_IDX_MAP.get(channel, idx)
            type_, blob = self.serde.dumps_typed(value)
            cut = _cut(blob)
            new.append((LangGraphWrite(
                key=task_prefix + str(i), thread_id=thread_id, checkpoint_ns=ns,
                checkpoint_id=checkpoint_id, task_id=task_id, task_path=task_path, idx=i,
                channel=channel, type=type_, value=b"" if cut else blob), blob, cut))
        W = LangGraphWrite
        put: list[tuple[LangGraphWrite, bytes, list]] = []
        learned = []
        with self.store.write():
            stored = {o.key: o for o in self.writes.query(W.key.startswith(task_prefix)).find()}
            replaced = []
            for w, blob, cut in new:
                if w.key in stored:
                    if not replace:
                        continue
                    w.id = stored[w.key].id
                    replaced.append(stored[w.key])
                put.append((w, blob, cut))
            if put:
                cut_ones = [one for one in put if one[2]]
                if cut_ones:  # (new values: what they share is with each other, if anything)
                    learned = self._add_pieces(thread_id, ns, None, cut_ones)
                self.writes.put_many([w for w, _b, _c in put])
                self._drop_unnamed(thread_id, replaced)
        self._remember(learned)

    def _remember(self, learned: list[tuple[bytes, bytes, dict[bytes, int]]]) -> None:
        """After the commit that stored them: the bytes and the pieces of checkpoints and
        writes kept as pieces, (piece ids, bytes, {piece's bytes: id}) each (see _Recent)."""
        for pieces, blob, family in learned:
            self._blobs.add(pieces, blob)
            self._families.add(pieces, family)

    def _family(self, thread_id: str, ns: str, checkpoint_id: str | None) -> dict[bytes, int]:
        """{piece's bytes: id} of the pieces of a checkpoint and of its pending writes as
        stored now (inside a write transaction): what the next checkpoint, and more writes
        to it, share with them. Those pieces are stored while the snapshot names them, so
        the ids can be named again in it. Each one's pieces come from ``self._families``,
        else they are read (and remembered)."""
        if not checkpoint_id:
            return {}
        C, W = LangGraphCheckpoint, LangGraphWrite
        named = [p for (p,) in self.checkpoints.query(
            C.key == _ns_key(thread_id, ns) + checkpoint_id).tuples(C.pieces) if p]
        named += [p for (p,) in self.writes.query(W.key.startswith(
            _writes_key(thread_id, ns, checkpoint_id))).tuples(W.pieces) if p]
        family: dict[bytes, int] = {}
        for pieces in named:
            theirs = self._families.get(pieces)
            if theirs is None:
                theirs = {data: i for i, data in self._piece_data(_unpack(pieces)).items()}
                self._families.add(pieces, theirs)
            family.update(theirs)
        return family

    def _add_pieces(self, thread_id: str, ns: str, parent_id: str | None,
                    cut: list[tuple[Any, bytes, list[bytes]]]
                    ) -> list[tuple[bytes, bytes, dict[bytes, int]]]:
        """Give each checkpoint or write of cut, (it, its bytes, its pieces), its piece ids,
        inside a write transaction: the pieces that the checkpoint parent_id and its
        pending writes have (its family: a put's parent, whose state and writes the new
        checkpoint repeats), or that come earlier in cut, are named again; the others are
        stored. A piece is found by its bytes (a dict: equal bytes, not a hash of them).
        Returns what to remember once that commits: (piece ids, bytes, {piece's bytes:
        id}) of each."""
        family = self._family(thread_id, ns, parent_id)
        new: list[LangGraphPiece] = []
        first: dict[bytes, int] = {}  # a new piece's bytes -> its index in new
        for _o, _blob, pieces in cut:
            for data in pieces:
                if data not in family and data not in first:
                    first[data] = len(new)
                    new.append(LangGraphPiece(data=data))
        ids = self.pieces.put_many(new) if new else []
        learned = []
        for o, blob, pieces in cut:
            # the family's bytes objects are the keys, not the new ones: the families
            # remembered of a thread's checkpoints hold one copy of each piece
            wanted = set(pieces)
            mine = {data: i for data, i in family.items() if data in wanted}
            for data in pieces:
                if data not in mine:
                    mine[data] = ids[first[data]]
            o.pieces = _pack([mine[data] for data in pieces])
            learned.append((o.pieces, blob, mine))
        return learned

    def _named(self, thread_id: str) -> set[int]:
        """The piece ids the checkpoints and writes of a thread name (inside a transaction)."""
        tk, named = _thread_key(thread_id), set()
        for box, E in ((self.checkpoints, LangGraphCheckpoint), (self.writes, LangGraphWrite)):
            for (p,) in box.query(E.key.startswith(tk)).tuples(E.pieces):
                if p:
                    named.update(_unpack(p))
        return named

    def _drop_unnamed(self, thread_id: str, gone: list) -> None:
        """After checkpoints or writes of a thread were removed or replaced (gone: them, as
        they were), remove the pieces they named that nothing of the thread names now
        (inside a write transaction)."""
        theirs: set[int] = set()
        for o in gone:
            theirs.update(_unpack(o.pieces))
        if theirs:
            self.pieces.remove_many(list(theirs - self._named(thread_id)))
        if any(o.chunks for o in gone):
            self._collect_chunks({thread_id})

    def _remove(self, cps: list[LangGraphCheckpoint]) -> None:
        """Remove checkpoints, their writes and the pieces nothing else names (inside a
        write transaction)."""
        W = LangGraphWrite
        gone: dict[str, list] = {}
        for cp in cps:
            q = self.writes.query(W.key.startswith(
                _writes_key(cp.thread_id, cp.checkpoint_ns, cp.checkpoint_id)))
            gone.setdefault(cp.thread_id, []).extend([cp, *q.find()])
            q.remove()
        self.checkpoints.remove_many([cp.id for cp in cps])
        for tid, objs in gone.items():
            self._drop_unnamed(tid, objs)

    def _collect_chunks(self, thread_ids: set[str]) -> None:
        """Remove the LangGraphChunk chunks of these threads that none of their checkpoints
        and writes names (inside a write transaction; stores written before 2026-12-07)."""
        C, W, K = LangGraphCheckpoint, LangGraphWrite, LangGraphChunk
        box = self._old_chunks()
        if box is None:
            return
        for tid in thread_ids:
            tk = _thread_key(tid)
            if not box.query(K.key.startswith(tk)).limit(1).ids():
                continue
            named = set()
            for obox, E in ((self.checkpoints, C), (self.writes, W)):
                for (refs,) in obox.query(E.key.startswith(tk)).tuples(E.chunks):
                    named.update(_chunk_keys(tid, refs))
            box.remove_many([i for i, k in box.query(K.key.startswith(tk)).tuples(
                "id", K.key) if k not in named])

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of a thread, in every namespace (one commit)."""
        thread_id = str(thread_id)
        prefix = _thread_key(thread_id)
        with self.store.write():
            self.pieces.remove_many(list(self._named(thread_id)))
            self.checkpoints.query(LangGraphCheckpoint.key.startswith(prefix)).remove()
            self.writes.query(LangGraphWrite.key.startswith(prefix)).remove()
            if self._old_chunks() is not None:
                self.chunks.query(LangGraphChunk.key.startswith(prefix)).remove()

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints made by these runs (metadata ``run_id``) and their
        writes, in every thread (one commit). It reads every checkpoint's run id (no
        index: ~70 ns a checkpoint, 7 ms for 100,000), so that ``put`` writes no index."""
        run_ids = [str(r) for r in run_ids]
        if not run_ids:
            return
        with self.store.write():
            self._remove(self.checkpoints.query(LangGraphCheckpoint.run_id.in_(run_ids)).find())

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to another thread id (one
        commit); what the target already holds under the same ids is replaced."""
        src, dst = str(source_thread_id), str(target_thread_id)
        if src == dst:
            return
        sp, dp = _thread_key(src), _thread_key(dst)
        with self.store.write():
            # copies of the source's pieces: a thread's pieces are its own, so removing
            # them never reaches into another thread
            ids = sorted(self._named(src))
            data = self._piece_data(ids)
            if len(data) < len(ids):
                raise motedb.CorruptError(f"thread {src!r} names piece "
                                          f"{min(set(ids) - set(data))}, which is not stored")
            new_id = dict(zip(ids, self.pieces.put_many([LangGraphPiece(data=data[i])
                                                         for i in ids]) if ids else []))
            replaced = []
            boxes = [(self.checkpoints, LangGraphCheckpoint), (self.writes, LangGraphWrite)]
            if self._old_chunks() is not None:
                boxes.append((self.chunks, LangGraphChunk))
            for box, E in boxes:
                have = {o.key: o for o in box.query(E.key.startswith(dp)).find()}
                objs = box.query(E.key.startswith(sp)).find()
                for o in objs:
                    o.key = dp + o.key[len(sp):]
                    if E is not LangGraphChunk:  # a chunk is named by its key alone
                        o.thread_id = dst
                        if o.pieces:
                            o.pieces = _pack([new_id[i] for i in _unpack(o.pieces)])
                    old = have.get(o.key)
                    o.id = old.id if old is not None else 0
                    if old is not None and E is not LangGraphChunk:
                        replaced.append(old)
                box.put_many(objs)
            self._drop_unnamed(dst, replaced)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep each namespace's newest checkpoint (with its writes)
        and the ancestors its DeltaChannel values are rebuilt from; remove the other
        checkpoints of these threads. ``"delete"``: remove the threads. One commit."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: 'keep_latest' or 'delete'")
        C = LangGraphCheckpoint
        with self.store.write():
            for tid in thread_ids:
                if strategy == "delete":
                    self.delete_thread(tid)
                    continue
                cps = self.checkpoints.query(C.key.startswith(_thread_key(str(tid)))).find()
                by_ns: dict[str, dict[str, LangGraphCheckpoint]] = {}
                for cp in cps:
                    by_ns.setdefault(cp.checkpoint_ns, {})[cp.checkpoint_id] = cp
                drop = []
                for chain in by_ns.values():
                    keep = self._delta_ancestors(chain, max(chain))
                    drop.extend(cp for cid, cp in chain.items() if cid not in keep)
                self._remove(drop)

    def _delta_ancestors(self, chain: dict[str, LangGraphCheckpoint], latest: str) -> set[str]:
        """The ids to keep so that `latest` stays whole: itself and, while any of its
        DeltaChannels (the channels of its metadata's counters_since_delta_snapshot)
        has no stored value yet, its parents up to the nearest that stores one, as
        get_delta_channel_history walks them."""
        keep = {latest}
        need = set(chain[latest].metadata.get("counters_since_delta_snapshot") or ())
        cp = chain[latest]
        while need and cp.parent_checkpoint_id in chain:
            cp = chain[cp.parent_checkpoint_id]
            keep.add(cp.checkpoint_id)
            need -= set(self.serde.loads_typed((cp.type, self._blob(cp)))["channel_values"])
        return keep

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Channel versions as ``SqliteSaver`` makes them: a zero-padded counter, then a
        random fraction (increasing as strings)."""
        if current is None:
            n = 0
        elif isinstance(current, int):
            n = current
        else:
            n = int(current.split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    def close(self) -> None:
        """Close the store if this saver opened it, once the writes queued by ``aput``
        and ``aput_writes`` are done (closing twice is fine)."""
        writer, self._writer = self._writer, None
        for t in writer.stop() if writer is not None else []:
            t.join()
        super().close()

    # ---- async: the same operations, never waiting for the disk on the loop -----------
    # get_tuple and list run on the loop's thread when every page they read is in the
    # store's cache (store.read(cached=True)), else on a worker thread (asyncio.to_thread).
    # Their work is mostly the serializer's decoding, which holds the GIL wherever it runs:
    # on a worker thread it only adds the trips and the GIL's hand-overs (AsyncSqliteSaver
    # decodes on the loop too, once aiosqlite's thread has read the rows). The two writes
    # LangGraph makes at every step go to one writer thread (motedb.aio's), which commits
    # every write queued, each in its own transaction, and makes them durable with one
    # fdatasync before any of their tasks resumes: concurrent threads of a graph share
    # their syncs.

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        if self._writer is None:
            self._writer = _Workers(1, self.store)
        return await self._writer.submit(fn, args, {})

    async def _read(self, fn: Callable[[], T]) -> T:
        """fn() on this thread if it reads only what the store's cache holds, else on a
        worker thread."""
        try:
            with self.store.read(cached=True):
                return fn()
        except motedb.WouldBlockError:  # (it read nothing; also: inside a transaction)
            return await asyncio.to_thread(fn)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._read(lambda: self.get_tuple(config))

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await self._read(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for tup in found:
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        return await self._write(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await self._write(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
