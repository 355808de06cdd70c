"""The data sets: embeddings of real text (TF-IDF + TruncatedSVD), clustered synthetic vectors, the held-out queries,
the integer attribute the filters test, and the exact ground truth (numpy, float64).

Each data set is made once and cached in .bench-tmp/vectors/ as <name>-<key>.npz plus a .json beside it; the key
is a hash of everything that decides its contents (the spec, the corpus' passages, the numpy and scikit-learn
versions, DATASET_VERSION), so a rerun with the same inputs reads the file and a change makes a new one.

  real-<dim>       passages of bench/vectors/corpus.py. The seed's permutation of the corpus picks the held-out
                   queries (the first ones) and the indexed passages (the next ones); TF-IDF (scikit-learn's
                   TfidfVectorizer: English stop words removed, terms in at least 2 and at most half of the
                   passages, sublinear tf) is fitted on the indexed passages only, TruncatedSVD (randomized, the
                   seed as random_state) reduces it to <dim> components, and every vector is scaled to unit length.
                   The queries are transformed by the same fitted model: they are not in the indexed set.
                   Metric: cosine. A passage or query without any term of the vocabulary (an all-zero TF-IDF row)
                   is skipped (the next one of the permutation takes its place).
  synthetic-<dim>  SYNTHETIC_CLUSTERS Gaussian clusters: centres drawn from N(0, I), each point a centre chosen
                   uniformly plus N(0, SYNTHETIC_SIGMA^2 I) noise; the queries are further points of the same
                   distribution (not indexed). Metric: euclidean.

Every indexed vector gets an integer attribute `tag`, uniform in 0..99 and independent of the vector (its own
seeded generator), so the filter `tag < s` matches s % of the vectors for s in SELECTIVITIES.

Ground truth: for every query the K nearest indexed vectors (and, per selectivity, the K nearest among those that
match the filter), computed in float64 from the stored float32 vectors; ties are broken by row number.
"""

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

DATASET_VERSION = 1
K = 10
SELECTIVITIES = (1, 10, 50)  # percent of the indexed vectors a filter matches (tag < s)
TAG_RANGE = 100
SYNTHETIC_CLUSTERS = 100
SYNTHETIC_SIGMA = 0.5
METRICS = {"real": "cosine", "synthetic": "euclidean"}
# A returned vector counts as one of the K nearest if its exact distance is at most the K-th exact distance plus
# this much (times max(1, that distance)): float32 engines and the float64 reference may order near-ties apart.
TIE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Spec:
    kind: str     # "real" | "synthetic"
    dim: int
    n: int        # indexed vectors
    queries: int  # held-out queries
    seed: int

    @property
    def name(self):
        return f"{self.kind}-{self.dim}"

    @property
    def metric(self):
        return METRICS[self.kind]


def distances(base, query, rows, metric):
    """Exact (float64) distances between query and base[rows]."""
    x = base[np.asarray(rows, dtype=np.int64)].astype(np.float64)
    q = np.asarray(query, dtype=np.float64)
    if metric == "cosine":
        nx = np.linalg.norm(x, axis=1)
        nq = np.linalg.norm(q)
        denom = nx * nq
        cos = np.where(denom > 0, x @ q / np.where(denom > 0, denom, 1.0), 0.0)
        return 1.0 - np.clip(cos, -1.0, 1.0)
    return np.sqrt(((x - q) ** 2).sum(axis=1))


def exact_topk(base, queries, metric, k=K, mask=None, chunk=64):
    """(rows nq x k int32, distances nq x k float64): the k nearest of base (where mask is true) per query, nearest
    first, ties by row. Fewer than k matches leave -1 / inf in the tail."""
    b64 = base.astype(np.float64)
    norms2 = (b64 * b64).sum(axis=1)
    norms = np.sqrt(norms2)
    nq = len(queries)
    out_rows = np.full((nq, k), -1, dtype=np.int32)
    out_d = np.full((nq, k), np.inf)
    extra = 32  # candidates by the fast formula, then re-ranked by the direct one
    for start in range(0, nq, chunk):
        q = queries[start:start + chunk].astype(np.float64)
        dots = q @ b64.T
        if metric == "cosine":
            qn = np.linalg.norm(q, axis=1)
            approx = 1.0 - dots / np.maximum(qn[:, None] * norms[None, :], 1e-300)
        else:
            approx = (q * q).sum(axis=1)[:, None] + norms2[None, :] - 2.0 * dots
        if mask is not None:
            approx[:, ~mask] = np.inf
        m = min(k + extra, approx.shape[1])
        cand = np.argpartition(approx, m - 1, axis=1)[:, :m]
        for i in range(len(q)):
            rows = cand[i][np.isfinite(approx[i, cand[i]])]
            d = distances(base, q[i], rows, metric)
            order = np.lexsort((rows, d))[:k]
            out_rows[start + i, :len(order)] = rows[order]
            out_d[start + i, :len(order)] = d[order]
    return out_rows, out_d


def recall_hits(base, query, rows, kth, metric, k=K, mask=None):
    """How many of the first k distinct rows returned are among the k nearest (within TIE_TOLERANCE of the k-th
    exact distance kth; for a filtered search they must also match the filter)."""
    seen = []
    for r in rows:
        r = int(r)
        if r < 0 or r >= len(base) or r in seen:
            continue
        seen.append(r)
        if len(seen) == k:
            break
    if not seen:
        return 0
    if mask is not None:
        seen = [r for r in seen if mask[r]]
        if not seen:
            return 0
    d = distances(base, query, seen, metric)
    return int((d <= kth + TIE_TOLERANCE * max(1.0, kth)).sum())


def tags_for(n, seed):
    return np.random.default_rng([seed, 1]).integers(0, TAG_RANGE, n).astype(np.int32)


def _normalize(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    if (n <= 0).any():
        raise RuntimeError("an embedding is all zeros")
    return (x / n).astype(np.float32)


def _real(spec, texts, log):
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    rng = np.random.default_rng(spec.seed)
    perm = rng.permutation(len(texts))
    q_spare = spec.queries // 10 + 10
    b_spare = spec.n // 50 + 50
    need = spec.queries + q_spare + spec.n + b_spare
    if need > len(texts):
        raise RuntimeError(f"{spec.name}: {spec.n:,} indexed passages and {spec.queries:,} queries need about "
                           f"{need:,} passages; the corpus has {len(texts):,}")
    q_cand = perm[:spec.queries + q_spare]
    b_cand = perm[spec.queries + q_spare:need]
    t0 = time.monotonic()
    vec = TfidfVectorizer(lowercase=True, stop_words="english", min_df=2, max_df=0.5, sublinear_tf=True,
                          dtype=np.float32)
    tf_cand = vec.fit_transform([texts[i] for i in b_cand])
    keep = np.flatnonzero(tf_cand.getnnz(axis=1) > 0)[:spec.n]
    if len(keep) < spec.n:
        raise RuntimeError(f"{spec.name}: only {len(keep):,} passages with terms of the vocabulary")
    # The vocabulary was fitted on the candidates; refit on exactly the indexed passages, so nothing else counts.
    base_idx = b_cand[keep]
    vec = TfidfVectorizer(lowercase=True, stop_words="english", min_df=2, max_df=0.5, sublinear_tf=True,
                          dtype=np.float32)
    tf_base = vec.fit_transform([texts[i] for i in base_idx])
    tf_q = vec.transform([texts[i] for i in q_cand])
    q_keep = np.flatnonzero(tf_q.getnnz(axis=1) > 0)[:spec.queries]
    t1 = time.monotonic()
    log(f"{spec.name}: TF-IDF of {len(base_idx):,} passages ({tf_base.shape[1]:,} terms) in {t1 - t0:.1f} s; "
        f"TruncatedSVD to {spec.dim} dimensions ...")
    svd = TruncatedSVD(n_components=spec.dim, algorithm="randomized", n_iter=5, random_state=spec.seed)
    base = svd.fit_transform(tf_base)
    queries = svd.transform(tf_q[q_keep])
    t2 = time.monotonic()
    empty_rows = int((np.linalg.norm(base, axis=1) == 0).sum())
    if empty_rows:
        raise RuntimeError(f"{spec.name}: {empty_rows} passages have an all-zero embedding")
    meta = {
        "embedding": "TF-IDF (TfidfVectorizer: stop_words='english', min_df=2, max_df=0.5, sublinear_tf=True), "
                     f"fitted on the indexed passages; TruncatedSVD(n_components={spec.dim}, algorithm='randomized', "
                     f"n_iter=5, random_state={spec.seed}); unit length",
        "vocabulary_terms": int(tf_base.shape[1]),
        "svd_explained_variance_ratio_sum": float(svd.explained_variance_ratio_.sum()),
        "tfidf_seconds": round(t1 - t0, 1),
        "svd_seconds": round(t2 - t1, 1),
        "passages_skipped_without_terms": int(keep[-1] + 1 - len(keep)),
        "queries_skipped_without_terms": int(q_keep[-1] + 1 - len(q_keep)) if len(q_keep) else 0,
        "example_passages": [texts[i][:200] for i in base_idx[:3]],
        "example_queries": [texts[i][:200] for i in q_cand[q_keep[:3]]],
    }
    return _normalize(base), _normalize(queries), meta


def _synthetic(spec):
    rng = np.random.default_rng(spec.seed)
    centres = rng.standard_normal((SYNTHETIC_CLUSTERS, spec.dim))
    total = spec.n + spec.queries
    labels = rng.integers(0, SYNTHETIC_CLUSTERS, total)
    x = np.empty((total, spec.dim), dtype=np.float32)
    step = 20_000
    for s in range(0, total, step):
        e = min(total, s + step)
        x[s:e] = centres[labels[s:e]] + SYNTHETIC_SIGMA * rng.standard_normal((e - s, spec.dim))
    meta = {"generator": f"numpy default_rng({spec.seed}): {SYNTHETIC_CLUSTERS} centres ~ N(0, I_{spec.dim}); "
                         f"point = a uniformly chosen centre + N(0, {SYNTHETIC_SIGMA}^2 I)",
            "clusters": SYNTHETIC_CLUSTERS, "sigma": SYNTHETIC_SIGMA}
    # the queries are the last points drawn: same distribution, not indexed
    return x[:spec.n], x[spec.n:], meta


def prepare(spec, cache_dir, log=print):
    """The data set of spec: (path of its .npz, its description for results.json). Made and cached if needed."""
    os.makedirs(cache_dir, exist_ok=True)
    import sklearn
    key_parts = {"version": DATASET_VERSION, "spec": asdict(spec), "k": K, "selectivities": SELECTIVITIES,
                 "tag_range": TAG_RANGE, "numpy": np.__version__}
    texts = corpus_desc = None
    if spec.kind == "real":
        from .corpus import passages
        texts, corpus_desc = passages(cache_dir, log=log)
        key_parts["corpus"] = corpus_desc["passages_sha256"]
        key_parts["sklearn"] = sklearn.__version__
    elif spec.kind == "synthetic":
        key_parts.update(clusters=SYNTHETIC_CLUSTERS, sigma=SYNTHETIC_SIGMA)
    else:
        raise ValueError(f"unknown data set kind {spec.kind!r}")
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()
    stem = os.path.join(cache_dir, f"{spec.name}-n{spec.n}-q{spec.queries}-{key[:12]}")
    npz, meta_path = stem + ".npz", stem + ".json"
    if os.path.exists(npz) and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        meta["cache"] = {"file": npz, "hit": True}
        return npz, meta

    t0 = time.monotonic()
    if spec.kind == "real":
        base, queries, made = _real(spec, texts, log)
    else:
        base, queries, made = _synthetic(spec)
    tags = tags_for(len(base), spec.seed)
    t1 = time.monotonic()
    log(f"{spec.name}: exact ground truth for {len(queries):,} queries over {len(base):,} vectors ...")
    arrays = {"base": base, "queries": queries, "tags": tags}
    gt_rows, gt_d = exact_topk(base, queries, spec.metric)
    arrays["gt_rows"], arrays["gt_dist"] = gt_rows, gt_d
    matches = {}
    for s in SELECTIVITIES:
        mask = tags < s
        matches[str(s)] = int(mask.sum())
        r, d = exact_topk(base, queries, spec.metric, mask=mask)
        arrays[f"gt_rows_{s}"], arrays[f"gt_dist_{s}"] = r, d
    t2 = time.monotonic()
    meta = {
        "name": spec.name, "kind": spec.kind, "dim": spec.dim, "n": int(len(base)), "queries": int(len(queries)),
        "seed": spec.seed, "metric": spec.metric, "k": K,
        "data": "real text (embeddings computed here)" if spec.kind == "real" else "synthetic",
        "made": made,
        "corpus": corpus_desc,
        "tags": f"tag uniform in 0..{TAG_RANGE - 1} (numpy default_rng([{spec.seed}, 1])), independent of the vector",
        "filter_matches": matches,
        "ground_truth": "exact, float64, from the stored float32 vectors; ties by row",
        "raw_vector_bytes": int(spec.dim * 4),
        "base_sha256": hashlib.sha256(base.tobytes()).hexdigest(),
        "queries_sha256": hashlib.sha256(queries.tobytes()).hexdigest(),
        "make_seconds": round(t1 - t0, 1),
        "ground_truth_seconds": round(t2 - t1, 1),
        "key": key,
    }
    tmp = stem + f".tmp{os.getpid()}.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, npz)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    meta["cache"] = {"file": npz, "hit": False}
    return npz, meta


class Loaded:
    """A cached data set as the workers read it."""

    def __init__(self, npz_path, meta):
        with np.load(npz_path) as z:
            self.arrays = {k: z[k] for k in z.files}
        self.meta = meta
        self.metric = meta["metric"]
        self.base = self.arrays["base"]
        self.queries = self.arrays["queries"]
        self.tags = self.arrays["tags"]
        self.dim = self.base.shape[1]
        self.n = self.base.shape[0]

    def truth(self, selectivity=None):
        """(rows, distances) of the exact K nearest per query, unfiltered or for the filter tag < selectivity."""
        if selectivity is None:
            return self.arrays["gt_rows"], self.arrays["gt_dist"]
        return self.arrays[f"gt_rows_{selectivity}"], self.arrays[f"gt_dist_{selectivity}"]
