"""bench.text: full-text search, MoteDB against SQLite FTS5 and tantivy in one run (bench/text/README.md).

Measured for each engine on the same passages of real text (bench/vectors/corpus.py: manual pages and Python
docstrings of this machine), with the same tokenizer settings (FTS5: unicode61, remove_diacritics 2; tantivy:
its default tokenizer, which folds no diacritics):

  build       storing N passages with their full-text index, in transactions of --batch passages (median of
              --build-reps builds)
  bytes       the index: the store's file size minus that of the same passages stored without an index
              (tantivy: its index directory, the text not stored)
  queries     top-10 by BM25 for queries of 1, 2 and 3 words (any of them: OR), of 2 words (all: AND), of
              two words adjacent in a passage as a phrase, and of a word's first three letters as a prefix,
              drawn from random passages; p50 and p99 latency per kind, in --rounds rounds that alternate
              the engines (a point is the median over the rounds' medians)
  overlap     of each MoteDB (and tantivy) top-10 with FTS5's (|both| / |FTS5's|), averaged per kind

  hybrid      MoteDB alone (FTS5 has no vector search): the same passages in a store with a full-text index
              and a vector with an HNSW index; per query (the "2 words OR" queries), the 10 best by words
              (matches), the 10 nearest (nearest) and both fused (matches() & nearest(): Reciprocal Rank
              Fusion), p50 of each in --rounds rounds; the target compares the hybrid with the sum of the two

MoteDB ranks as FTS5's bm25() does (k1 1.2, b 0.75), so with the same tokens the rankings are the same; the
overlap measures where the tokenizers differ. The hybrid row's vectors are hashed term vectors of the real
passages (feature hashing: each word, as motedb.tokenize cuts it, adds its count with a hashed sign to one of
HYBRID_DIM dimensions; unit length), and a query's vector is made from its words the same way: not a learned
embedding, so the row measures what a hybrid query costs, not how relevant its results are.
"""

import os
import random
import shutil
import sqlite3
import sys
import time
import zlib

from bench.common import envinfo
from bench.common import output
from bench.common.args import profile_parser
from bench.common.stats import median, percentile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = {  # passages, queries per kind, builds, rounds
    "smoke": (2_000, 20, 1, 1),
    "quick": (20_000, 200, 3, 3),
    "full": (100_000, 1_000, 3, 3),
}
# (name, words, how): "or" any of the words, "and" all, "phrase" the words at consecutive positions, "prefix" any
# word that starts with the word (three letters of a word of the text)
KINDS = [("1 word", 1, "or"), ("2 words OR", 2, "or"), ("3 words OR", 3, "or"), ("2 words AND", 2, "and"),
         ("phrase of 2 words", 2, "phrase"), ("prefix of 3 letters", 1, "prefix")]
TARGETS = {"overlap": 0.9, "query_p50": 0.5, "build": 1.0, "bytes": 1.0,  # MoteDB / FTS5, issue 19
           "hybrid": 1.1}  # MoteDB's hybrid / (its text query + its vector query)
HYBRID_DIM = 128
HYBRID_KIND = "2 words OR"


def log(msg):
    print(f"bench.text: {msg}", file=sys.stderr, flush=True)


# ---- engines ---------------------------------------------------------------------------------------------------

class MoteDB:
    name = "MoteDB"

    def __init__(self):
        from typing import Annotated

        import motedb

        self.motedb = motedb

        class Passage(motedb.Entity):
            id: int = 0
            text: Annotated[str, motedb.FullText] = ""

        class PlainPassage(motedb.Entity):
            id: int = 0
            text: str = ""

        self.indexed, self.plain = Passage, PlainPassage

    def build(self, path, texts, batch, index=True):
        cls = self.indexed if index else self.plain
        with self.motedb.open(path) as store:
            box = store.box(cls)
            for i in range(0, len(texts), batch):
                box.put_many([cls(id=i + j + 1, text=t) for j, t in enumerate(texts[i:i + batch])])

    def open(self, path):
        self.store = self.motedb.open(path)
        self.box = self.store.box(self.indexed)

    def search(self, words, how):
        text = (f'"{" ".join(words)}"' if how == "phrase" else f"{words[0]}*" if how == "prefix"
                else " ".join(words))
        cond = self.indexed.text.matches(text, k=10, all_terms=how == "and")
        return self.box.query(cond).ids()

    def close(self):
        self.store.close()


class FTS5:
    name = "SQLite FTS5"

    def build(self, path, texts, batch, index=True):
        con = sqlite3.connect(path)
        if index:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
        else:
            con.execute("CREATE TABLE t(rowid INTEGER PRIMARY KEY, x TEXT)")
        for i in range(0, len(texts), batch):
            with con:
                con.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)",
                                [(i + j + 1, t) for j, t in enumerate(texts[i:i + batch])])
        con.close()

    def open(self, path):
        self.con = sqlite3.connect(path)

    def search(self, words, how):
        q = (f'"{" ".join(words)}"' if how == "phrase" else f'"{words[0]}"*' if how == "prefix"
             else (" AND " if how == "and" else " OR ").join(f'"{w}"' for w in words))
        return [r[0] for r in self.con.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10", [q])]

    def close(self):
        self.con.close()


class Tantivy:
    """tantivy (Rust, through its Python bindings): a text field with positions (its default tokenizer: split on
    non-alphanumeric characters, lower-cased) and the passage id stored; one writer thread, a commit per
    transaction, the background merges waited for at the end of the build. Its "plain" store is nothing: the
    index directory is all index (the passages' text is not stored)."""
    name = "tantivy"

    @staticmethod
    def available():
        try:
            import tantivy  # noqa: F401
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return None

    def __init__(self):
        import tantivy

        self.tantivy = tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_unsigned_field("id", stored=True)
        sb.add_text_field("text", stored=False, index_option="position")
        self.schema = sb.build()

    def build(self, path, texts, batch, index=True):
        if not index:
            return
        os.makedirs(path, exist_ok=True)
        idx = self.tantivy.Index(self.schema, path=path)
        w = idx.writer(heap_size=64_000_000, num_threads=1)
        for i in range(0, len(texts), batch):
            for j, t in enumerate(texts[i:i + batch]):
                w.add_document(self.tantivy.Document(id=i + j + 1, text=t))
            w.commit()
        w.wait_merging_threads()

    def size(self, path):
        return dir_bytes(path)

    def open(self, path):
        self.index = self.tantivy.Index.open(path)
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, words, how):
        if how == "prefix":  # (its query parser has no prefix of one word: a regular expression query)
            q = self.tantivy.Query.regex_query(self.index.schema, "text", f"{words[0]}.*")
        elif how == "phrase":
            q = self.index.parse_query(f'"{" ".join(words)}"', ["text"])
        else:
            q = self.index.parse_query((" AND " if how == "and" else " OR ").join(words), ["text"])
        s = self.searcher
        return [s.doc(addr)["id"][0] for _, addr in s.search(q, 10).hits]

    def close(self):
        self.searcher = self.index = None


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def hashed_vector(words, dim=HYBRID_DIM):
    """A passage's or query's vector from its words (feature hashing, unit length; zeros if no word)."""
    v = [0.0] * dim
    for w in words:
        h = zlib.crc32(w.encode())
        v[h % dim] += 1.0 if h >> 31 else -1.0
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v] if norm else v


class Hybrid:
    """MoteDB's text, vector and hybrid queries on one store of the passages with both indexes."""

    def __init__(self):
        from typing import Annotated

        import motedb

        self.motedb = motedb

        class HybridPassage(motedb.Entity):
            id: int = 0
            text: Annotated[str, motedb.FullText] = ""
            vec: Annotated[list[float], motedb.Vector(HYBRID_DIM, index=motedb.Hnsw())] = motedb.field(
                default_factory=lambda: [0.0] * HYBRID_DIM)

        self.cls = HybridPassage

    def build(self, path, texts, batch):
        tok = self.motedb.tokenize
        with self.motedb.open(path) as store:
            box = store.box(self.cls)
            for i in range(0, len(texts), batch):
                box.put_many([self.cls(id=i + j + 1, text=t, vec=hashed_vector(tok(t)))
                              for j, t in enumerate(texts[i:i + batch])])

    def open(self, path):
        self.store = self.motedb.open(path)
        self.box = self.store.box(self.cls)

    def text(self, words, vec):
        return self.box.query(self.cls.text.matches(" ".join(words), k=10)).ids()

    def vector(self, words, vec):
        return self.box.query(self.cls.vec.nearest(vec, k=10)).ids()

    def hybrid(self, words, vec):
        return self.box.query(self.cls.text.matches(" ".join(words), k=10)
                              & self.cls.vec.nearest(vec, k=10)).ids()

    def close(self):
        self.store.close()


# ---- the run ----------------------------------------------------------------------------------------------------

def draw_queries(texts, n, seed=19):
    """n queries per kind: words of random passages (as MoteDB tokenizes them: ASCII letters only, so both
    tokenizers agree on them), frequent words as often as the text has them."""
    import motedb

    rng = random.Random(seed)
    pool, pairs = [], []
    for t in rng.sample(texts, min(len(texts), 3000)):
        words = [w if w.isascii() and w.isalpha() and len(w) > 1 else None for w in motedb.tokenize(t)]
        pool += [w for w in words if w]
        pairs += [[a, b] for a, b in zip(words, words[1:]) if a and b]  # adjacent in the text
    long = [w for w in pool if len(w) >= 4]
    out = {}
    for kind, nw, how in KINDS:
        if how == "phrase":
            out[kind] = [rng.choice(pairs) for _ in range(n)]
        elif how == "prefix":
            out[kind] = [[rng.choice(long)[:3]] for _ in range(n)]
        else:
            out[kind] = [rng.sample(pool, nw) for _ in range(n)]
    return out


def file_bytes(path):
    total = 0
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            total += os.path.getsize(p)
    return total


def run(args):
    n, nq, build_reps, rounds = PROFILES[args.profile]
    n = args.n or n
    nq = args.queries or nq
    build_reps = args.build_reps or build_reps
    rounds = args.rounds or rounds
    sys.path.insert(0, REPO)
    from bench.vectors.corpus import passages

    texts, corpus = passages(os.path.join(REPO, ".bench-tmp", "vectors", "cache"), log=log)
    if len(texts) < n:
        log(f"the corpus has {len(texts):,} passages, fewer than {n:,}: using them all")
    texts = texts[:n]
    work = os.path.join(args.tmp, f"run-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    engines = [MoteDB(), FTS5()]
    why = Tantivy.available()
    if why is None:
        engines.append(Tantivy())
    else:
        log(f"tantivy is not available ({why}): the run goes on without it")
    ext = {"MoteDB": ".mote", "SQLite FTS5": ".db", "tantivy": ".tantivy"}
    results = {"build_s": {}, "index_bytes": {}, "queries": {}, "overlap": {}, "overlap_tantivy": {},
               "unavailable": {} if why is None else {"tantivy": why}}
    try:
        for e in engines:
            plain = os.path.join(work, "plain" + ext[e.name])
            e.build(plain, texts, args.batch, index=False)
            times = []
            for rep in range(build_reps):
                path = os.path.join(work, "index" + ext[e.name])
                for p in (path, path + "-wal", path + "-shm"):
                    if os.path.isdir(p):
                        shutil.rmtree(p)
                    elif os.path.exists(p):
                        os.remove(p)
                t0 = time.perf_counter()
                e.build(path, texts, args.batch)
                times.append(time.perf_counter() - t0)
                log(f"{e.name}: build {rep + 1}/{build_reps}: {times[-1]:.2f} s")
            results["build_s"][e.name] = median(times)
            size = getattr(e, "size", file_bytes)
            results["index_bytes"][e.name] = size(path) - size(plain)
        queries = draw_queries(texts, nq)
        lat = {e.name: {k: [] for k, _, _ in KINDS} for e in engines}
        tops = {e.name: {} for e in engines}
        for r in range(rounds):
            for e in engines:
                e.open(os.path.join(work, "index" + ext[e.name]))
                for kind, _, how in KINDS:
                    samples = []
                    for i, words in enumerate(queries[kind]):
                        t0 = time.perf_counter()
                        ids = e.search(words, how)
                        samples.append(time.perf_counter() - t0)
                        tops[e.name][(kind, i)] = ids
                    lat[e.name][kind].append(samples)
                e.close()
            log(f"queries: round {r + 1}/{rounds}")
        for e in engines:
            results["queries"][e.name] = {
                kind: {"p50_us": median(median(s) for s in lat[e.name][kind]) * 1e6,
                       "p99_us": median(percentile(s, 99) for s in lat[e.name][kind]) * 1e6}
                for kind, _, _ in KINDS}
        for kind, _, _ in KINDS:
            for who, into in (("MoteDB", "overlap"), ("tantivy", "overlap_tantivy")):
                if who not in tops:
                    continue
                ov = []
                for i in range(nq):
                    want = tops["SQLite FTS5"][(kind, i)]
                    if want:
                        ov.append(len(set(tops[who][(kind, i)]) & set(want)) / len(want))
                results[into][kind] = sum(ov) / len(ov) if ov else None
        results["hybrid"] = run_hybrid(work, texts, queries[HYBRID_KIND], args.batch, rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    env = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpu": envinfo.cpu_model(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version, "git": envinfo.git(REPO, "rev-parse", "--short", "HEAD"),
        "passages": len(texts), "text_bytes": sum(len(t.encode()) for t in texts),
        "queries_per_kind": nq, "batch": args.batch, "build_reps": build_reps, "rounds": rounds,
        "corpus": corpus, "targets": TARGETS,
    }
    return {"environment": env, "results": results}


def run_hybrid(work, texts, queries, batch, rounds):
    """p50 latency (µs) of MoteDB's text, vector and hybrid top-10 queries, each the median over the rounds."""
    h = Hybrid()
    path = os.path.join(work, "hybrid.mote")
    t0 = time.perf_counter()
    h.build(path, texts, batch)
    log(f"hybrid: stored {len(texts):,} passages with both indexes in {time.perf_counter() - t0:.1f} s")
    vecs = [hashed_vector(words) for words in queries]
    ways = {"text": h.text, "vector": h.vector, "hybrid": h.hybrid}
    lat = {w: [] for w in ways}
    empty = 0
    for r in range(rounds):
        h.open(path)
        for w, fn in ways.items():  # each way over all the queries, in turn
            samples = []
            for words, vec in zip(queries, vecs):
                t1 = time.perf_counter()
                ids = fn(words, vec)
                samples.append(time.perf_counter() - t1)
                empty += not ids
            lat[w].append(samples)
        h.close()
        log(f"hybrid: round {r + 1}/{rounds}")
    out = {f"{w}_p50_us": median(median(s) for s in lat[w]) * 1e6 for w in ways}
    out["ratio"] = out["hybrid_p50_us"] / (out["text_p50_us"] + out["vector_p50_us"])
    out["queries"] = len(queries)
    out["empty_results"] = empty
    return out


def markdown(res):
    env, r = res["environment"], res["results"]
    m, f, ty = "MoteDB", "SQLite FTS5", "tantivy"
    tv = ty in r["build_s"]  # tantivy installed and ran
    out = [f"## bench/text — {env['date']}", "",
           f"- {env['passages']:,} passages of real text ({env['text_bytes'] / 1e6:.1f} MB: manual pages and "
           f"Python docstrings), stored in transactions of {env['batch']:,}; {env['queries_per_kind']} queries "
           f"per kind, top-10, {env['rounds']} rounds; SQLite {env['sqlite']}; {env['cpu']}, {env['cpus']} CPUs",
           ""]
    if tv:
        out += ["| metric | MoteDB | SQLite FTS5 | tantivy | MoteDB / FTS5 | MoteDB / tantivy | target |",
                "|:--|--:|--:|--:|--:|--:|:--|"]
    else:
        out += ["| metric | MoteDB | SQLite FTS5 | MoteDB / FTS5 | target |", "|:--|--:|--:|--:|:--|"]

    def ratio_of(a, b):
        return a / b if a is not None and b else None

    def row(name, get, fmt, target, lower=True):
        a, b = get(m), get(f)
        ratio = ratio_of(a, b)
        ok = "" if ratio is None else ("✓" if (ratio <= target if lower else ratio >= target) else "✗")
        cells = [fmt(a), fmt(b)]
        if tv:
            c = get(ty)
            rt = ratio_of(a, c)
            cells += [fmt(c), '-' if ratio is None else f'{ratio:.2f}x', '-' if rt is None else f'{rt:.2f}x']
        else:
            cells += ['-' if ratio is None else f'{ratio:.2f}x']
        out.append(f"| {name} | {' | '.join(cells)} | {'≤' if lower else '≥'} {target}x {ok} |")

    row("build (s)", lambda e: r["build_s"][e], lambda x: f"{x:.2f}", TARGETS["build"])
    row("index bytes", lambda e: r["index_bytes"][e], lambda x: f"{x:,}", TARGETS["bytes"])
    for kind, _, _ in KINDS:
        row(f"{kind}: p50 µs", lambda e: r["queries"][e][kind]["p50_us"], lambda x: f"{x:,.0f}",
            TARGETS["query_p50"])
        row(f"{kind}: p99 µs", lambda e: r["queries"][e][kind]["p99_us"], lambda x: f"{x:,.0f}", 1.0)
    for kind, _, _ in KINDS:
        ov = r["overlap"][kind]
        ok = "" if ov is None else ("✓" if ov >= TARGETS["overlap"] else "✗")
        cells = ['-' if ov is None else f'{ov:.3f}', '']
        if tv:
            tov = r.get("overlap_tantivy", {}).get(kind)
            cells += ['-' if tov is None else f'{tov:.3f}', '', '']
        else:
            cells += ['']
        out.append(f"| {kind}: top-10 overlap with FTS5 | {' | '.join(cells)} | ≥ {TARGETS['overlap']} {ok} |")
    hy = r.get("hybrid")
    if hy:
        ok = "✓" if hy["ratio"] <= TARGETS["hybrid"] else "✗"
        out.append(f"| hybrid ({HYBRID_KIND} & the 10 nearest): p50 µs | {hy['hybrid_p50_us']:,.0f} | |"
                   + (" | " if tv else " ")
                   + f"{hy['ratio']:.2f}x of text {hy['text_p50_us']:,.0f} + vector {hy['vector_p50_us']:,.0f} |"
                   + (" |" if tv else "") + f" ≤ {TARGETS['hybrid']}x {ok} |")
    out += ["", "Ratios are MoteDB over the anchor (lower is better; the overlap: higher); the targets are "
            "against FTS5; the hybrid's is MoteDB's own: its p50 over the sum of its text query's and its "
            "vector query's (hashed term vectors of the passages, not a learned embedding)."]
    if tv:
        out.append("tantivy: one writer thread, its default tokenizer (no diacritic folding: its overlap with "
                   "FTS5's top-10 shows where the tokenizers differ), index = its directory (text not stored); "
                   "its query parser has no prefix of one word: a regular-expression query, whose matches all "
                   "score the same (so its prefix top-10 is not BM25's).")
    for e, why in r.get("unavailable", {}).items():
        out.append(f"{e}: not measured ({why}).")
    return "\n".join(out) + "\n"


def main(argv):
    ap = profile_parser("python3 -m bench.text", __doc__, PROFILES)
    ap.add_argument("--n", type=int, help="passages (default: the profile's)")
    ap.add_argument("--queries", type=int, help="queries per kind")
    ap.add_argument("--batch", type=int, default=1000, help="passages per transaction (default 1000)")
    ap.add_argument("--build-reps", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--out", help="directory of results.json and results.md (default results/text/<time>/)")
    ap.add_argument("--tmp", default=os.path.join(REPO, ".bench-tmp", "text"))
    ap.set_defaults(profile="quick")
    args = ap.parse_args(argv)
    res = run(args)
    out = args.out or os.path.join(REPO, "results", "text", time.strftime("%Y-%m-%d_%H%M%S"))
    output.save(out, res, markdown(res))
    if args.profile == "smoke":
        r = res["results"]
        bad = [k for k, v in r["overlap"].items() if v is None or v < 0.5]
        bad += [e for e, v in r["build_s"].items() if not v or v <= 0]
        bad += [e for e, v in r["index_bytes"].items() if not v or v <= 0]
        hy = r["hybrid"]
        bad += [k for k in ("text_p50_us", "vector_p50_us", "hybrid_p50_us") if not hy[k] > 0]
        if hy["empty_results"]:
            bad.append("hybrid: queries without results")
        if bad:
            log(f"smoke: implausible results: {bad}")
            return 1
        log("smoke: all measurements plausible")
    return 0
