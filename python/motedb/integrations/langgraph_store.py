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
thread until ``stop_ttl_sweeper()`` or ``close()``.

Semantic search: ``MoteStore(..., index={"dims": n, "embed": embeddings or a function,
"fields": ["text"], "distance_type": "cosine" | "l2" | "inner_product"})``. A put embeds
the texts at the item's fields (``fields``, default ``["$"]``, the whole value; the put's
``index`` list instead, none for ``index=False``; a path giving several texts,
``"tags[*]"``, gives one per element) and stores one vector per field in a second entity,
``LangGraphVector_<dims>_<distance>`` (the item's key, its dotted namespace, the field's
path, a copy of the item's value, the embedding with an HNSW index of the distance, the
item's expiry time), replacing the item's vectors; a delete removes them, a TTL refresh
moves their expiry with the item's, ``sweep_ttl`` sweeps both entities. A batch embeds
its search queries and its puts' texts (each text once) in one ``embed_documents`` call
(``aembed_documents`` in ``abatch``) before its transaction. A search with a ``query``
is a nearest-neighbour query on the vectors with the namespace and the filter as
conditions in C on the copied value (``k`` vectors whenever ``k`` match), asking for
more neighbours until ``offset + limit`` distinct items are found or none are left;
each item once, with its best field's score, best first: ``1 - cosine distance``,
``-L2 distance`` or the inner product (as ``PostgresStore``'s scores: higher is nearer).
Items without vectors never match a query. Without ``index`` a ``query`` is ignored, as
``SqliteStore`` ignores it, and puts and deletes leave the vectors as they are (a store
opened without ``index`` does not know their entity): put such items again to embed
them anew.
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
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        ensure_embeddings,
        get_text_at_path,
        tokenize_path,
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


# LangGraph's distance types as MoteDB's distances, and a search item's score from the
# distance MoteDB gives (higher is nearer, as PostgresStore's scores)
_DISTANCES = {"cosine": "cosine", "l2": "euclidean", "inner_product": "dot"}
_SCORES = {"cosine": lambda d: 1.0 - d, "euclidean": operator.neg, "dot": operator.neg}

_vector_classes: dict[tuple[int, str], type] = {}


def _vector_class(dims: int, distance: str) -> type:
    """The entity of the items' vectors for these dims and distance (made once per
    process: a store keeps one class per entity name)."""
    cls = _vector_classes.get((dims, distance))
    if cls is None:
        name = f"LangGraphVector_{dims}_{distance}"
        ns = {
            "__annotations__": {
                "id": int,
                "item": Annotated[str, motedb.Index],  # the item's LangGraphItem.key
                "prefix": Annotated[str, motedb.Index],  # the item's namespace, dotted
                "path": str,  # the field embedded ("text", "tags[*].1", "$")
                "value": dict,  # a copy of the item's value, for the filters
                "embedding": Annotated[list[float], motedb.Vector(
                    dims, index=motedb.Hnsw(distance=distance))],
                "expires_at": Annotated[dt.datetime | None, motedb.Expires],  # the item's
            },
            "id": 0, "prefix": "", "path": "", "value": motedb.field(default_factory=dict),
            "expires_at": None, "__module__": __name__, "__qualname__": name,
            "__doc__": "The embedding of one field of a LangGraph store's item.",
        }
        cls = _vector_classes[(dims, distance)] = type(name, (motedb.Entity,), ns)
    return cls


def _tokens(path: str) -> str | list[str]:
    return "$" if path == "$" else tokenize_path(path)


_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _condition(value: Any, field: str, op: str, x: Any) -> Any:
    """One filter condition as a condition on an item's JSON value (``value``: the
    entity's property), evaluated in C: the field's dotted path, and SQL's NULL (a
    missing field or JSON null satisfies only $eq None, fails $ne anything but None);
    numbers (bools are 0 and 1) order with numbers, text with text, nothing else."""
    v = value
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


def _filter(flt: dict[str, Any] | None, value: Any) -> Any:
    """A search filter as one condition on the JSON property ``value``: every field's
    conditions hold (None: no filter)."""
    conds = []
    for field, cond in (flt or {}).items():
        if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
            conds.extend(_condition(value, field, op, x) for op, x in cond.items())
        else:
            conds.append(_condition(value, field, "$eq", cond))
    return functools.reduce(operator.and_, conds) if conds else None


def _in_namespace(prefix: Any, namespace: tuple[str, ...]) -> Any:
    """The condition on a dotted ``prefix`` property: in the namespace or below (None:
    the empty namespace, everything). Its first part is one range of the prefix's
    index, which the plan reads: the names from ``text`` to ``text + "/"`` ("/" follows
    "." in byte order), the namespace's and its descendants' among them; the second
    leaves out the others there ("users.u1-x", but not "users.u10", is in that range)."""
    if not namespace:
        return None
    text = ".".join(namespace)
    return prefix.between(text, text + "/") & ((prefix == text) | prefix.startswith(text + "."))


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
    and closed by ``close()``, or an open ``motedb.Store``, which stays the caller's);
    ``index`` turns on semantic search (see the module's doc). A store it creates with
    an index gets pages large enough to keep each vector inside a leaf (8192 for 256 or
    384 floats; ``page_size=`` overrides it; an existing file keeps its own)."""

    supports_ttl = True

    def __init__(self, store: motedb.Store | str | os.PathLike, *, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None, **open_kwargs: Any) -> None:
        self.ttl_config = ttl
        self.index_config = index
        self.embeddings = ensure_embeddings(index.get("embed")) if index else None
        if index:
            self._dims, self._distance = _index_settings(index)
            self._fields = [(p, _tokens(p)) for p in index.get("fields") or ["$"]]
            self._vcls = _vector_class(self._dims, self._distance)
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()
        if index and not isinstance(store, motedb.Store):
            open_kwargs = {"page_size": _vector_page_size(self._dims), **open_kwargs}
        self._hold(store, open_kwargs)
        self.items = self.store.box(LangGraphItem)
        self.vectors = self.store.box(self._vcls) if index else None

    @classmethod
    @contextmanager
    def from_path(cls, path: str | os.PathLike, *, index: IndexConfig | None = None,
                  ttl: TTLConfig | None = None, **open_kwargs: Any) -> Iterator[MoteStore]:
        """``with MoteStore.from_path("memory.mote") as store:``."""
        s = cls(path, index=index, ttl=ttl, **open_kwargs)
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
        """Remove the expired items and their vectors (reads already leave them out); the
        number of items."""
        with self.store.write():
            if self.vectors is not None:
                self.vectors.sweep()
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

    def _search(self, op: SearchOp, refresh: list[LangGraphItem],
                embedded: dict[str, Any]) -> list[SearchItem]:
        if op.query and self.index_config:
            found = self._nearest(op, embedded[op.query])
        else:
            found = [(o, None) for o in self._newest(op)]
        if op.refresh_ttl:
            refresh.extend(o for o, _ in found if o.ttl_minutes is not None)
        return [SearchItem(namespace=tuple(o.prefix.split(".")), key=o.item_key, value=o.value,
                           created_at=o.created_at, updated_at=o.updated_at, score=score)
                for o, score in found]

    def _newest(self, op: SearchOp) -> list[LangGraphItem]:
        """A search without a query: the matching items, most recently updated first."""
        I = LangGraphItem
        q = self.items.query(_in_namespace(I.prefix, tuple(op.namespace_prefix)),
                             _filter(op.filter, I.value)).order_by(I.updated_at.desc())
        return q.offset(op.offset).limit(op.limit).find() if op.limit > 0 else []

    def _nearest(self, op: SearchOp, vector: Any) -> list[tuple[LangGraphItem, float]]:
        """A search with a query: the items with the vectors nearest to its embedding,
        each once with its best score, from the offset-th to the (offset + limit)-th."""
        if op.limit <= 0:
            return []
        V = self._vcls
        want = op.offset + op.limit
        where = (_in_namespace(V.prefix, tuple(op.namespace_prefix)), _filter(op.filter, V.value))
        k = 2 * want
        while True:  # k vectors whenever k match: fewer means there are no more
            found = self.vectors.query(V.embedding.nearest(vector, k=k), *where
                                       ).find_with_scores(V.item)  # not the vectors: their items
            best: dict[str, float] = {}
            for (item,), distance in found:  # nearest first: an item's first vector is its best
                best.setdefault(item, distance)
            if len(best) >= want or len(found) < k:
                break
            k *= 2
        page = list(best.items())[op.offset:want]
        keys = [key for key, _ in page]
        items = {o.key: o for o in self.items.query(LangGraphItem.key.in_(keys)).find()}
        score = _SCORES[self._distance]
        # vectors outlive an item deleted through a store opened without index: left out
        return [(items[key], score(d)) for key, d in page if key in items]

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

    def _put(self, op: PutOp, embedded: dict[str, Any]) -> None:
        I = LangGraphItem
        ns = tuple(op.namespace)
        k = _key(ns, op.key)
        old = self.items.query(I.key == k).first()
        if self.vectors is not None:
            self.vectors.query(self._vcls.item == k).remove()
        if op.value is None:
            if old is not None:
                self.items.remove(old.id)
            return
        now = dt.datetime.now(dt.timezone.utc)
        ttl = op.ttl
        expires = None if ttl is None else now + dt.timedelta(minutes=ttl)
        self.items.put(I(id=old.id if old else 0, key=k, prefix=".".join(ns), item_key=op.key,
                         value=dict(op.value), created_at=old.created_at if old else now,
                         updated_at=now, ttl_minutes=ttl, expires_at=expires))
        pairs = self._texts_of(op)  # none without an index
        if pairs:
            V = self._vcls
            self.vectors.put_many([V(item=k, prefix=".".join(ns), path=path, value=dict(op.value),
                                     embedding=embedded[text], expires_at=expires)
                                   for path, text in pairs])

    def _refresh(self, found: list[LangGraphItem]) -> None:
        """Move the expiry time of items read with refresh_ttl (and of their vectors) to
        now + their TTL."""
        now = dt.datetime.now(dt.timezone.utc)
        for o in {o.id: o for o in found}.values():
            if self.items.contains(o.id):  # not deleted since the read
                expires = now + dt.timedelta(minutes=o.ttl_minutes)
                self.items.update(o.id, expires_at=expires)
                if self.vectors is not None:
                    for vid in self.vectors.query(self._vcls.item == o.key).ids():
                        self.vectors.update(vid, expires_at=expires)

    # ---- embedding ----------------------------------------------------------------------

    def _texts_of(self, op: PutOp) -> list[tuple[str, str]]:
        """The (field path, text) pairs a put embeds: at the configured fields or at the
        put's ``index`` list; none for ``index=False``, a delete or a store without
        ``index``. A path giving several texts names each ``path.i``, as SqliteStore does."""
        if not self.index_config or op.value is None or op.index is False:
            return []
        paths = self._fields if op.index is None else [(p, _tokens(p)) for p in op.index]
        pairs = []
        for path, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            pairs.extend((f"{path}.{i}" if len(texts) > 1 else path, t)
                         for i, t in enumerate(texts))
        return pairs

    def _texts(self, ops: list[Op], puts: dict[tuple, PutOp]) -> list[str]:
        """What a batch embeds, each text once: its search queries and its puts' texts."""
        if not self.index_config:
            return []
        texts = [op.query for op in ops if isinstance(op, SearchOp) and op.query]
        texts.extend(t for op in puts.values() for _, t in self._texts_of(op))
        return list(dict.fromkeys(texts))

    def _embedded(self, texts: list[str], vectors: list[Any]) -> dict[str, Any]:
        """The embedder's answer as text -> vector, checked against ``dims``."""
        if len(vectors) != len(texts):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
        for text, v in zip(texts, vectors):
            if len(v) != self._dims:
                raise ValueError(f"the embedding of {text[:40]!r} has {len(v)} floats, but the "
                                 f"store's index has dims={self._dims}")
        return dict(zip(texts, vectors))

    # ---- batches ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch: embed its texts (one call), then its reads as of its start, then
        its puts (the last of a key wins), one commit when it puts anything; then the TTL
        refreshes its reads asked for."""
        ops = list(ops)
        puts = _last_puts(ops)
        texts = self._texts(ops, puts)
        vectors = self.embeddings.embed_documents(texts) if texts else []
        return self._run(ops, puts, self._embedded(texts, vectors))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch``, embedding with the embedder's async method, the rest on a worker thread."""
        ops = list(ops)
        puts = _last_puts(ops)
        texts = self._texts(ops, puts)
        vectors = await self.embeddings.aembed_documents(texts) if texts else []
        return await asyncio.to_thread(self._run, ops, puts, self._embedded(texts, vectors))

    def _run(self, ops: list[Op], puts: dict[tuple, PutOp],
             embedded: dict[str, Any]) -> list[Result]:
        results: list[Result] = []
        refresh: list[LangGraphItem] = []
        with self.store.write() if puts else self.store.read():
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op, refresh))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, refresh, embedded))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                elif isinstance(op, PutOp):
                    results.append(None)
                else:
                    raise ValueError(f"unknown operation {op!r}")
            for op in puts.values():
                self._put(op, embedded)
        if refresh:
            with self.store.write():
                self._refresh(refresh)
        return results


def _last_puts(ops: list[Op]) -> dict[tuple, PutOp]:
    """A batch's puts by (namespace, key), the last of a key winning; namespaces checked."""
    puts: dict[tuple, PutOp] = {}
    for op in ops:
        if isinstance(op, PutOp):
            _check_namespace(op.namespace)
            puts[(tuple(op.namespace), op.key)] = op
    return puts


def _vector_page_size(dims: int) -> int:
    """The page size a new store with an index of ``dims`` floats is created with: the
    smallest (from 4096) where a vector's record takes at most a quarter of a page, four
    or more to a leaf (a record over a third of a page takes pages of its own; under the
    quarter-page rule before 2026-12-06, every vector of 256 floats took a 4 KB page at
    4096). Measured with bench/agents' memories (4,000 of 256 floats, 8192): the
    file 19.4 MB -> 8.8 MB, a semantic search's p50 125-213 -> 104-107 us, a filter
    search's the same (three alternated runs)."""
    size = 4096
    while 4 * dims + 128 > size // 4 and size < 65536:
        size *= 2
    return size


def _index_settings(index: IndexConfig) -> tuple[int, str]:
    """An index configuration's dims and MoteDB distance, checked."""
    dims = index.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise ValueError(f"index: 'dims' must be the embeddings' length (a positive int), "
                         f"not {dims!r}")
    kind = index.get("distance_type", "cosine")
    if kind not in _DISTANCES:
        raise ValueError(f"index: unknown distance_type {kind!r}: one of {', '.join(_DISTANCES)}")
    return dims, _DISTANCES[kind]


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
