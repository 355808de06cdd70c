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

How it is stored: three entities, ``LangGraphCheckpoint``, ``LangGraphWrite`` and
``LangGraphChunk``, in the same store as the application's own (so a store can hold an
agent's memories and its threads). Each is keyed by a string that starts with the
thread id and the namespace, length-prefixed (``"7:thread-13:sub"``), so one thread,
one namespace of a thread and one checkpoint's writes are each a key range of a unique
index: the newest checkpoint of a thread is the last key of its range, one index entry.
A checkpoint is the serializer's bytes, its metadata JSON; the run id is indexed for
``delete_for_runs``.

Each checkpoint holds a thread's whole state, which mostly repeats the one before it
(a chat's messages so far, plus one). A checkpoint or a write value of more than
``INLINE_MAX`` bytes is cut into content-defined chunks (``mote_chunk``: the cuts
follow the bytes, so the history shared with the parent is cut the same way), each
kept once per thread under its hash; the checkpoint or write holds the list of hashes.
A thread then grows by what each step adds, not by its whole state each step, and no
record is long enough to need pages of its own (a record over a third of a page
gets whole pages in MoteDB). Chunks that nothing of their thread names any more are
removed by ``delete_thread``, ``prune`` and ``delete_for_runs``. A saver remembers the
bytes of the chunked checkpoints and writes it cut or joined lately, by their hashes
(``BLOBS_BUDGET``, 8 MB): the ``get_tuple`` after a ``put`` and a ``list`` that repeats
most of the one before read no chunks (a hash names its bytes: never stale).

Besides the base capabilities (``put``, ``put_writes``, ``get_tuple``, ``list``,
``delete_thread``) it has ``delete_for_runs``, ``copy_thread`` and ``prune``; the
``prune`` strategy ``"keep_latest"`` keeps, beside the newest checkpoint of each
namespace, the ancestors its ``DeltaChannel`` values are rebuilt from.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
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

__all__ = ["MoteSaver", "LangGraphCheckpoint", "LangGraphWrite", "LangGraphChunk"]

INLINE_MAX = 700  # a checkpoint or write value of more bytes than this is kept as chunks
CHUNK_MIN, CHUNK_MAX, CHUNK_BITS = 192, 768, 9  # about 530 bytes: records inside a leaf
DIGEST = 16  # bytes of a chunk's hash (BLAKE2b)
BLOBS_BUDGET = 8 << 20  # bytes of joined checkpoints and writes a saver remembers (_Blobs)


class LangGraphCheckpoint(motedb.Entity):
    """One checkpoint of a thread (a step of a graph)."""
    id: int = 0
    key: Annotated[str, motedb.Unique]  # _ns_key(thread, ns) + checkpoint_id
    thread_id: str = ""
    checkpoint_ns: str = ""
    checkpoint_id: str = ""
    parent_checkpoint_id: str | None = None
    run_id: Annotated[str | None, motedb.Index] = None  # metadata["run_id"]
    type: str = ""  # the serializer's type tag of `checkpoint`
    checkpoint: bytes = b""  # the serializer's bytes, or b"" when kept as chunks
    chunks: bytes = b""  # the hashes of its chunks (DIGEST bytes each), in order
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
    value: bytes = b""  # the serializer's bytes, or b"" when kept as chunks
    chunks: bytes = b""  # the hashes of its chunks (DIGEST bytes each), in order


class LangGraphChunk(motedb.Entity):
    """A piece of a thread's checkpoints, kept once per thread under its hash."""
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
    """The chunk keys a list of hashes names."""
    tk, h = _thread_key(thread_id), refs.hex()
    return [tk + h[i:i + 2 * DIGEST] for i in range(0, len(h), 2 * DIGEST)]


def _cut(thread_id: str, blob: bytes, pieces: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(inline bytes, chunk hashes) to keep blob as: itself when short, else its chunks,
    which are added to pieces (chunk key -> bytes)."""
    if len(blob) <= INLINE_MAX:
        return blob, b""
    view, start, bounds, digests = memoryview(blob), 0, [], []
    for end in motedb._core._chunk_ends(blob, CHUNK_MIN, CHUNK_MAX, CHUNK_BITS):
        digests.append(hashlib.blake2b(view[start:end], digest_size=DIGEST).digest())
        bounds.append((start, end))
        start = end
    refs = b"".join(digests)
    for k, (a, b) in zip(_chunk_keys(thread_id, refs), bounds):
        pieces[k] = blob[a:b]
    return b"", refs


class _Blobs:
    """The serializer's bytes of the chunked checkpoints and writes a saver cut or joined
    lately, by their chunk hashes, least recently used dropped first beyond ``budget``
    bytes: a thread's next reads join the same ones again (``list``'s ten checkpoints are
    nine of the previous step's, ``get_tuple``'s is the one ``put`` just cut). The hashes
    name the bytes, so what is remembered is never stale: it is what those chunks hold,
    in any thread, in any snapshot that names them."""

    def __init__(self, budget: int) -> None:
        self._budget, self._size = budget, 0
        self._by_refs: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()  # (the sync methods may be called from any thread)

    def get(self, refs: bytes) -> bytes | None:
        with self._lock:
            blob = self._by_refs.get(refs)
            if blob is not None:
                self._by_refs.move_to_end(refs)
            return blob

    def add(self, refs: bytes, blob: bytes) -> None:
        if len(blob) > self._budget // 8:  # (one long thread does not push out the others)
            return
        with self._lock:
            if refs in self._by_refs:
                self._by_refs.move_to_end(refs)
                return
            self._by_refs[refs] = blob
            self._size += len(blob)
            while self._size > self._budget:
                self._size -= len(self._by_refs.popitem(last=False)[1])


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
        self._blobs = _Blobs(BLOBS_BUDGET)
        self.checkpoints = self.store.box(LangGraphCheckpoint)
        self.writes = self.store.box(LangGraphWrite)
        self.chunks = self.store.box(LangGraphChunk)

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

    def _chunk_data(self, keys: Iterable[str]) -> dict[str, bytes]:
        """{chunk key: bytes} of the stored chunks among keys (one query)."""
        K = LangGraphChunk
        return dict(self.chunks.query(K.key.in_(list(keys))).tuples(K.key, K.data))

    def _joined(self, thread_id: str, inline: bytes, refs: bytes, what: str,
                data: dict[str, bytes] | None = None, keys: list[str] | None = None) -> bytes:
        """The serializer's bytes of a checkpoint or write: inline, or its chunks joined
        (remembered by ``self._blobs``; else from data when given: chunks read beforehand;
        keys: refs' chunk keys)."""
        if not refs:
            return inline
        blob = self._blobs.get(refs)
        if blob is not None:
            return blob
        if keys is None:
            keys = _chunk_keys(thread_id, refs)
        if data is None:
            data = self._chunk_data(keys)
        try:
            blob = b"".join([data[k] for k in keys])
        except KeyError as e:
            raise motedb.CorruptError(f"{what!r} names chunk {e.args[0]!r}, which is not "
                                      "stored") from None
        self._blobs.add(refs, blob)
        return blob

    def _blob(self, cp: LangGraphCheckpoint) -> bytes:
        return self._joined(cp.thread_id, cp.checkpoint, cp.chunks, cp.key)

    def _tuples(self, cps: list[LangGraphCheckpoint],
                dense: bool = False) -> list[CheckpointTuple]:
        """Checkpoint tuples with their pending writes (in writes_sort_key order: task_path,
        task_id, idx; dense: see _writes_of). The chunks of all of them that ``self._blobs``
        does not hold joined are read in one query, each once: the checkpoints of a thread
        share most of theirs."""
        writes, keys = self._writes_of(cps, dense), set()
        named: dict[str, list[str]] = {}  # object key -> its chunk keys
        held: dict[bytes, bytes] = {}  # (taken now: joining the others may push them out)
        for cp, ws in zip(cps, writes):
            for o in (cp, *ws):
                if o.chunks:
                    blob = self._blobs.get(o.chunks)
                    if blob is not None:
                        held[o.chunks] = blob
                    else:
                        keys.update(named.setdefault(o.key, _chunk_keys(o.thread_id, o.chunks)))
        data = self._chunk_data(keys) if keys else {}

        def blob_of(o: LangGraphCheckpoint | LangGraphWrite, inline: bytes) -> bytes:
            got = held.get(o.chunks) if o.chunks else None
            return got if got is not None else self._joined(
                o.thread_id, inline, o.chunks, o.key, data, named.get(o.key))
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
        pieces: dict[str, bytes] = {}
        inline, refs = _cut(thread_id, blob, pieces)
        if refs:
            self._blobs.add(refs, blob)
        cp = LangGraphCheckpoint(
            key=key, thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint["id"],
            parent_checkpoint_id=conf.get("checkpoint_id"),
            run_id=run_id if isinstance(run_id, str) else None,
            type=type_, checkpoint=inline, chunks=refs, metadata=md)
        C = LangGraphCheckpoint
        with self.store.write():
            self._add_chunks(pieces)
            try:
                self.checkpoints.put(cp)
            except motedb.UniqueViolationError:  # the same checkpoint again replaces it
                old = self.checkpoints.query(C.key == key).first()  # (the failed put wrote nothing)
                cp.id = old.id
                self.checkpoints.put(cp)
                if old.chunks:
                    self._collect_chunks({thread_id})
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
        new = []  # (write, its chunks)
        for idx, (channel, value) in enumerate(writes):
            i = WRITES_IDX_MAP.get(channel, idx)
            type_, blob = self.serde.dumps_typed(value)
            pieces: dict[str, bytes] = {}
            inline, refs = _cut(thread_id, blob, pieces)
            if refs:
                self._blobs.add(refs, blob)
            new.append((LangGraphWrite(
                key=task_prefix + str(i), thread_id=thread_id, checkpoint_ns=ns,
                checkpoint_id=checkpoint_id, task_id=task_id, task_path=task_path, idx=i,
                channel=channel, type=type_, value=inline, chunks=refs), pieces))
        W = LangGraphWrite
        with self.store.write():
            stored = {k: (i, refs) for i, k, refs in self.writes.query(
                W.key.startswith(task_prefix)).tuples("id", W.key, W.chunks)}
            put, pieces, replaced_chunks = [], {}, False
            for w, p in new:
                if w.key in stored:
                    if not replace:
                        continue
                    w.id, old_refs = stored[w.key]
                    replaced_chunks |= bool(old_refs)
                put.append(w)
                pieces.update(p)
            if put:
                self._add_chunks(pieces)
                self.writes.put_many(put)
                if replaced_chunks:  # chunks only the replaced writes named
                    self._collect_chunks({thread_id})

    def _add_chunks(self, pieces: dict[str, bytes]) -> None:
        """Store the chunks the thread does not have yet (inside a write transaction)."""
        if not pieces:
            return
        K = LangGraphChunk
        for (k,) in self.chunks.query(K.key.in_(list(pieces))).tuples(K.key):
            del pieces[k]
        self.chunks.put_many([LangGraphChunk(key=k, data=d) for k, d in pieces.items()])

    def _remove(self, cps: list[LangGraphCheckpoint]) -> None:
        """Remove checkpoints, their writes and the chunks nothing else names (inside a
        write transaction)."""
        W = LangGraphWrite
        for cp in cps:
            self.writes.query(W.key.startswith(
                _writes_key(cp.thread_id, cp.checkpoint_ns, cp.checkpoint_id))).remove()
        self.checkpoints.remove_many([cp.id for cp in cps])
        self._collect_chunks({cp.thread_id for cp in cps})

    def _collect_chunks(self, thread_ids: set[str]) -> None:
        """Remove the chunks of these threads that none of their checkpoints and writes
        names (inside a write transaction)."""
        C, W, K = LangGraphCheckpoint, LangGraphWrite, LangGraphChunk
        for tid in thread_ids:
            tk = _thread_key(tid)
            if not self.chunks.query(K.key.startswith(tk)).limit(1).ids():
                continue
            named = set()
            for box, E in ((self.checkpoints, C), (self.writes, W)):
                for (refs,) in box.query(E.key.startswith(tk)).tuples(E.chunks):
                    named.update(_chunk_keys(tid, refs))
            self.chunks.remove_many([i for i, k in self.chunks.query(K.key.startswith(tk)).tuples(
                "id", K.key) if k not in named])

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of a thread, in every namespace (one commit)."""
        prefix = _thread_key(str(thread_id))
        with self.store.write():
            self.checkpoints.query(LangGraphCheckpoint.key.startswith(prefix)).remove()
            self.writes.query(LangGraphWrite.key.startswith(prefix)).remove()
            self.chunks.query(LangGraphChunk.key.startswith(prefix)).remove()

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints made by these runs (metadata ``run_id``) and their
        writes, in every thread (one commit)."""
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
            for box, E in ((self.checkpoints, LangGraphCheckpoint), (self.writes, LangGraphWrite),
                           (self.chunks, LangGraphChunk)):
                have = {o.key: o.id for o in box.query(E.key.startswith(dp)).find()}
                copies = box.query(E.key.startswith(sp)).find()
                for o in copies:
                    o.key = dp + o.key[len(sp):]
                    if E is not LangGraphChunk:  # a chunk is named by its key alone
                        o.thread_id = dst
                    o.id = have.get(o.key, 0)
                box.put_many(copies)

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
