"""LangGraph's long-term memory on a MoteDB store: ``MoteStore`` (a ``BaseStore``).

    from motedb.integrations.langgraph_store import MoteStore

    with MoteStore.from_path("memory.mote") as store:
        store.put(("users", "ada"), "prefs", {"drink": "tea", "stars": 3})
        store.get(("users", "ada"), "prefs").value
        store.search(("users",), filter={"stars": {"$gte": 2}})

Items (a namespace, a key, a JSON value, created and updated times) are objects of
one entity, ``LangGraphItem``, keyed by the length-prefixed namespace labels and key
(a unique index), with the namespace as dotted text (``"users.ada"``, indexed: a
namespace and its descendants are one equality and one prefix) and the update time
indexed (a search returns the most recently updated first). Semantics follow
``SqliteStore``'s: a batch reads first (gets, searches, namespace lists, all as of the
batch's start) and then applies its puts, the last put of a key winning, in one
commit; a put of ``None`` deletes. Filters: ``{"field": value}`` (equal),
``{"field": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": value}}``, several
fields all holding, a dotted field reaching into nested objects; a missing field or
JSON null matches only ``None`` (as ``json_extract`` gives NULL, which no comparison
but ``IS NULL`` accepts).

TTL: ``put(..., ttl=minutes)`` (or ``ttl={"default_ttl": minutes}``) stores the item's
expiry time in a ``motedb.Expires`` property, so an expired item is gone for every
read at once, before any sweep (as ``omit_expired=True`` asks; ``SqliteStore`` keeps
returning it until its sweeper runs). A get or search with ``refresh_ttl`` (by
default ``ttl_config["refresh_on_read"]``, true when unset) moves the expiry time
of the items it returns that have a TTL to now + their TTL, in a commit after the
reads. ``sweep_ttl()`` removes the expired items through the expiry index;
``start_ttl_sweeper()`` runs it every ``sweep_interval_minutes`` (default 5) on a
thread until ``stop_ttl_sweeper()`` or ``close()``. Not yet: semantic search
(``index``; a ``query`` is ignored, as ``SqliteStore`` ignores it without an index).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import functools
import logging
import operator
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import motedb

from ._store import StoreHolder, key_part

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("motedb.integrations.langgraph_store needs LangGraph: "
                      "pip install 'motedb[langgraph]'") from e

__all__ = ["MoteStore", "LangGraphItem"]

logger = logging.getLogger(__name__)


class LangGraphItem(motedb.Entity):
    """One item of LangGraph's store."""
    id: int = 0
    key: Annotated[str, motedb.Unique]  # the length-prefixed namespace labels, then the item's key
    prefix: Annotated[str, motedb.Index] = ""  # the namespace, dotted ("users.ada")
    item_key: str = ""
    value: dict = motedb.field(default_factory=dict)
    created_at: dt.datetime = motedb.field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    updated_at: Annotated[dt.datetime, motedb.Index] = motedb.field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    expires_at: Annotated[dt.datetime | None, motedb.Expires] = None
    ttl_minutes: float | None = None  # what a refresh adds to the time of the read


def _key(namespace: tuple[str, ...], key: str) -> str:
    return "".join(map(key_part, (*namespace, "", key)))


_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _condition(field: str, op: str, x: Any) -> Any:
    """One filter condition as a condition on the item's JSON value, evaluated in C: the
    field's dotted path, and SQL's NULL (a missing field or JSON null satisfies only
    $eq None, fails $ne anything but None); numbers (bools are 0 and 1) order with
    numbers, text with text, nothing else."""
    v = LangGraphItem.value
    for part in field.split("."):
        v = v[part]
    if op == "$eq":
        return v == x  # None: is_null()
    if op == "$ne":
        return v != x  # None: is_not_null()
    cmp = _ORDER.get(op)
    if cmp is None:
        raise ValueError(f"unsupported filter operator {op!r}: $eq, $ne, $gt, $gte, $lt or $lte")
    return v.in_([]) if x is None else cmp(v, x)  # nothing orders with None


def _filter(flt: dict[str, Any]) -> Any:
    """A search filter as one condition: every field's conditions hold."""
    conds = []
    for field, cond in flt.items():
        if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
            conds.extend(_condition(field, op, x) for op, x in cond.items())
        else:
            conds.append(_condition(field, "$eq", cond))
    return functools.reduce(operator.and_, conds)


def _ns_matches(ns: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    """A namespace against a prefix or suffix path, "*" matching any one label."""
    if len(ns) < len(path):
        return False
    part = ns[:len(path)] if kind == "prefix" else ns[len(ns) - len(path):]
    if kind not in ("prefix", "suffix"):
        raise ValueError(f"unknown match type {kind!r}: 'prefix' or 'suffix'")
    return all(p == "*" or p == n for n, p in zip(part, path))


class MoteStore(StoreHolder, BaseStore):
    """LangGraph's ``BaseStore`` on a MoteDB store (a path, opened with ``open_kwargs``
    and closed by ``close()``, or an open ``motedb.Store``, which stays the caller's)."""

    supports_ttl = True

    def __init__(self, store: motedb.Store | str | os.PathLike, *, ttl: TTLConfig | None = None,
                 **open_kwargs: Any) -> None:
        self.ttl_config = ttl
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._hold(store, open_kwargs)
        self.items = self.store.box(LangGraphItem)

    @classmethod
    @contextmanager
    def from_path(cls, path: str | os.PathLike, *, ttl: TTLConfig | None = None,
                  **open_kwargs: Any) -> Iterator[MoteStore]:
        """``with MoteStore.from_path("memory.mote") as store:``."""
        s = cls(path, ttl=ttl, **open_kwargs)
        try:
            yield s
        finally:
            s.close()

    def close(self) -> None:
        """Stop the TTL sweeper, then close the store if this object opened it."""
        self.stop_ttl_sweeper()
        super().close()

    # ---- TTL ----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Remove the expired items (reads already leave them out); their number."""
        return self.items.sweep()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None
                          ) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (else ``ttl_config``'s, else 5) on a
        daemon thread; the future ends when the sweeper stops (cancel it to stop it).
        Without a ``ttl`` configuration there is nothing to sweep: a finished future."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not self.ttl_config or (self._sweeper and self._sweeper.is_alive()):
            if not self.ttl_config:
                future.set_result(None)
            else:
                future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
            return future
        minutes = float(sweep_interval_minutes or self.ttl_config.get("sweep_interval_minutes") or 5)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    logger.exception("MoteStore TTL sweep failed")
            if not future.done():
                future.set_result(None)

        future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        self._sweeper = threading.Thread(target=loop, daemon=True, name="motestore-ttl-sweeper")
        self._sweeper.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within ``timeout`` seconds."""
        if not self._sweeper or not self._sweeper.is_alive():
            return True
        self._stop.set()
        self._sweeper.join(timeout)
        if self._sweeper.is_alive():
            return False
        self._sweeper = None
        return True

    # ---- operations ---------------------------------------------------------------------

    def _get(self, op: GetOp, refresh: list[LangGraphItem]) -> Item | None:
        o = self.items.query(LangGraphItem.key == _key(tuple(op.namespace), op.key)).first()
        if o is None:
            return None
        if op.refresh_ttl and o.ttl_minutes is not None:
            refresh.append(o)
        return Item(value=o.value, key=o.item_key, namespace=tuple(op.namespace),
                    created_at=o.created_at, updated_at=o.updated_at)

    def _search(self, op: SearchOp, refresh: list[LangGraphItem]) -> list[SearchItem]:
        I = LangGraphItem
        ns = tuple(op.namespace_prefix)
        text = ".".join(ns)
        where = [(I.prefix == text) | I.prefix.startswith(text + ".")] if ns else []
        if op.filter:
            where.append(_filter(op.filter))
        q = self.items.query(*where).order_by(I.updated_at.desc())
        found = q.offset(op.offset).limit(op.limit).find() if op.limit > 0 else []
        if op.refresh_ttl:
            refresh.extend(o for o in found if o.ttl_minutes is not None)
        return [SearchItem(namespace=tuple(o.prefix.split(".")), key=o.item_key, value=o.value,
                           created_at=o.created_at, updated_at=o.updated_at) for o in found]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        I = LangGraphItem
        names = {tuple(p.split(".")) for p in self.items.query().group_count(I.prefix)}
        for cond in op.match_conditions or ():
            if cond.path:
                names = {n for n in names if _ns_matches(n, cond.match_type, tuple(cond.path))}
        if op.max_depth is not None:
            names = {n[:op.max_depth] for n in names}
        ordered = sorted(names, key=".".join)  # as SqliteStore orders the dotted text
        return ordered[op.offset:op.offset + op.limit]

    def _put(self, op: PutOp) -> None:
        I = LangGraphItem
        ns = tuple(op.namespace)
        k = _key(ns, op.key)
        old = self.items.query(I.key == k).first()
        if op.value is None:
            if old is not None:
                self.items.remove(old.id)
            return
        now = dt.datetime.now(dt.timezone.utc)
        ttl = op.ttl
        self.items.put(I(id=old.id if old else 0, key=k, prefix=".".join(ns), item_key=op.key,
                         value=dict(op.value), created_at=old.created_at if old else now,
                         updated_at=now, ttl_minutes=ttl,
                         expires_at=None if ttl is None else now + dt.timedelta(minutes=ttl)))

    def _refresh(self, found: list[LangGraphItem]) -> None:
        """Move the expiry time of items read with refresh_ttl to now + their TTL."""
        now = dt.datetime.now(dt.timezone.utc)
        for o in {o.id: o for o in found}.values():
            if self.items.contains(o.id):  # not deleted since the read
                self.items.update(o.id, expires_at=now + dt.timedelta(minutes=o.ttl_minutes))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch: its reads as of its start, then its puts (the last of a key wins),
        one commit when it puts anything; then the TTL refreshes its reads asked for."""
        ops = list(ops)
        puts: dict[tuple, PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                _check_namespace(op.namespace)
                puts[(tuple(op.namespace), op.key)] = op
        results: list[Result] = []
        refresh: list[LangGraphItem] = []
        with self.store.write() if puts else self.store.read():
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op, refresh))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, refresh))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                elif isinstance(op, PutOp):
                    results.append(None)
                else:
                    raise ValueError(f"unknown operation {op!r}")
            for op in puts.values():
                self._put(op)
        if refresh:
            with self.store.write():
                self._refresh(refresh)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` on a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))


def _check_namespace(namespace: tuple[str, ...]) -> None:
    """Namespaces as LangGraph's stores take them: labels of text without "." that are
    not empty, the first not "langgraph"."""
    from langgraph.store.base import InvalidNamespaceError
    if not namespace:
        raise InvalidNamespaceError("a namespace cannot be empty")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label:
            raise InvalidNamespaceError(f"namespace {namespace!r}: labels are non-empty strings "
                                        "without '.'")
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(f"namespace {namespace!r} starts with 'langgraph' (reserved)")
