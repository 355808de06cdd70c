"""bench.agents' "store search" configurations: LangGraph's long-term memory store, MoteStore against SqliteStore.

The issue's row: store search with a filter and with semantic search, MoteDB / SQLite >= 3x. The data is an agent
platform's memories: `users` users, each with `per_user` items in the namespace ("users", "u<n>", "memories"),
whose value is {"text": a passage of at most TEXT_MAX_CHARS characters of the suite's corpus of real text,
"kind": one of KINDS, "stars": 0..4}.

  fill      every user's items, one batch (one commit) per user, the same for both engines (not timed)
  filter    `queries` searches one after another, each in a user's namespace with a filter on two fields,
            search(("users", u), filter={"kind": k, "stars": {"$gte": s}}, limit=10): the newest 10 that match
  semantic  (when both stores have an index) the same number of searches with a query text and a filter,
            search(("users", u), query=<a passage of that user>, filter={"kind": k}, limit=10): the 10 nearest
            that match, by cosine similarity of the item's "text" field

Which user, filter and query text come where is drawn in advance with a fixed seed: both engines run the same
sequence. Embeddings (semantic) are computed before the runs by a fixed function of the words (EMBED_DIMS floats:
each word hashed to a dimension, counted, normalised); the stores' embed function looks them up, so both pay the
same (nothing) for embedding and the measurement is the store's search. Each search is checked to return
min(10, matches) items and, for the filter, only items that match.

The engines, as their users would set them up:

  MoteStore    MoteStore.from_path(path) (motedb.open's defaults: sync=True), index={"dims", "embed",
               "fields": ["text"]} for semantic search (an HNSW index on cosine distance)
  SqliteStore  SqliteStore.from_conn_string(path) + setup() (journal_mode=WAL as it sets it), the same index
               config through sqlite-vec, when this Python's sqlite3 can load extensions and sqlite-vec is installed

Measured per run: searches per second of each kind (over the summed time of its searches: the checks of each answer
run after the loop, untimed; they once took as long as a search) and the latency of each search (p50, p90, p99).
"""

import hashlib
import math
import os
import random
import sqlite3
import time

from bench.common.stats import percentile

TEXT_MAX_CHARS = 300
KINDS_OF_ITEM = ("fact", "preference", "event", "task")
EMBED_DIMS = 256
SEARCH_KINDS = ("filter", "semantic")
LIMIT = 10


class Workload:
    """items [(namespace, key, value)], and per search kind the searches [(user, filter, query text or None)]."""

    def __init__(self, items, searches, users):
        self.items = items
        self.searches = searches
        self.users = users


def make_workload(texts, users, per_user, queries, seed):
    rnd = random.Random(seed)
    items = []
    for u in range(users):
        for i in range(per_user):
            t = texts[rnd.randrange(len(texts))][:TEXT_MAX_CHARS]
            items.append((("users", f"u{u}", "memories"), f"m{i}",
                          {"text": t, "kind": KINDS_OF_ITEM[rnd.randrange(len(KINDS_OF_ITEM))],
                           "stars": rnd.randrange(5)}))
    by_user = {}
    for ns, _k, v in items:
        by_user.setdefault(ns[1], []).append(v["text"])
    searches = {"filter": [], "semantic": []}
    for _ in range(queries):
        u = f"u{rnd.randrange(users)}"
        searches["filter"].append((u, {"kind": rnd.choice(KINDS_OF_ITEM), "stars": {"$gte": rnd.randrange(5)}},
                                   None))
        searches["semantic"].append((u, {"kind": rnd.choice(KINDS_OF_ITEM)}, rnd.choice(by_user[u])))
    return Workload(items, searches, users)


def embedding(text):
    """EMBED_DIMS floats: the words' counts, each word at the dimension its hash names, normalised."""
    v = [0.0] * EMBED_DIMS
    for w in text.lower().split():
        v[int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little") % EMBED_DIMS] += 1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


class Embedder:
    """The stores' embed function: the embeddings of the workload's texts, computed once."""

    def __init__(self, wl):
        texts = {v["text"] for _ns, _k, v in wl.items} | {q for _u, _f, q in wl.searches["semantic"]}
        self.table = {t: embedding(t) for t in texts}

    def __call__(self, texts):
        return [self.table[t] if t in self.table else embedding(t) for t in texts]


def sqlite_can_load_extensions():
    con = sqlite3.connect(":memory:")
    try:
        return hasattr(con, "enable_load_extension")
    finally:
        con.close()


def semantic_unavailable():
    """Why SqliteStore's semantic search cannot run here (None if it can)."""
    if not sqlite_can_load_extensions():
        return "this Python's sqlite3 cannot load extensions (run under Debian's /usr/bin/python3 for this row)"
    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        return "sqlite-vec is not installed"
    return None


def _matches(value, flt):
    for field, cond in flt.items():
        if isinstance(cond, dict):
            if not all(value.get(field) is not None and value[field] >= x for op, x in cond.items()
                       if op == "$gte"):
                return False
        elif value.get(field) != cond:
            return False
    return True


def _check(cond, what):
    if not cond:
        raise AssertionError(f"store search: {what}")


def open_store(engine, path, index):
    if engine == "MoteStore":
        from motedb.integrations.langgraph_store import MoteStore
        return MoteStore.from_path(path, **({"index": index} if index else {}))
    from langgraph.store.sqlite import SqliteStore
    return SqliteStore.from_conn_string(path, **({"index": index} if index else {}))


def measure(engine, wl, work, kinds):
    """One run of the searches of `kinds` with engine "MoteStore" or "SqliteStore" in the (fresh) directory
    work; its record: per kind searches/s and latencies (µs), the fill's time."""
    embedder = Embedder(wl) if "semantic" in kinds else None
    index = {"dims": EMBED_DIMS, "embed": embedder, "fields": ["text"]} if embedder else None
    path = os.path.join(work, "memory.mote" if engine == "MoteStore" else "memory.sqlite")
    per_ns = {}
    for ns, k, v in wl.items:
        per_ns.setdefault(ns, []).append((k, v))
    rec = {"kinds": {}}
    pc = time.perf_counter
    with open_store(engine, path, index) as store:
        if engine == "SqliteStore":
            store.setup()
        from langgraph.store.base import PutOp
        t0 = pc()
        for ns, kv in per_ns.items():
            store.batch([PutOp(ns, k, v) for k, v in kv])
        rec["fill_s"] = pc() - t0
        for kind in kinds:
            lat, answers = [], []
            for u, flt, query in wl.searches[kind]:
                s0 = pc()
                got = store.search(("users", u), filter=flt, query=query, limit=LIMIT)
                lat.append(pc() - s0)
                answers.append(got)
            for (u, flt, _q), got in zip(wl.searches[kind], answers):  # checked after, untimed
                _check(len(got) <= LIMIT and all(_matches(i.value, flt) for i in got),
                       f"{engine} {kind}: {len(got)} items, or one that does not match {flt}")
                if kind == "filter":
                    want = sum(_matches(v, flt) for _k, v in per_ns[("users", u, "memories")])
                    _check(len(got) == min(LIMIT, want), f"{engine}: {len(got)} items, {want} match")
            wall = sum(lat)
            rec["kinds"][kind] = {"searches": len(lat), "wall_s": wall, "searches_per_s": len(lat) / wall,
                                  "latency_us": {"p50": percentile(lat, 50) * 1e6, "p90": percentile(lat, 90) * 1e6,
                                                 "p99": percentile(lat, 99) * 1e6, "n": len(lat)}}
    return rec
