"""results.json -> the flat tables of every measured point, the summary per engine, the Markdown report with the
targets of issue 18, the charts (matplotlib, PNG) and the smoke checks."""

import math
import statistics
from pathlib import Path

from . import K, RECALL_TARGET
from .backends import LABELS
from .datasets import SELECTIVITIES

HNSWLIB, OBJECTBOX, SQLITE_VEC, MOTEDB, MOTEDB_EXACT = "hnswlib", "ObjectBox", "sqlite-vec", "MoteDB", "MoteDB exact"


# --- the flat tables and the summary ------------------------------------------------------------------------------

def merge_rounds(results):
    """One engine's search phases, one per round, as one result: each point (sweep: per ef; filtered: per
    selectivity) with the median over the rounds of its QPS and latencies, its recall and plan from the first
    round (the same index and queries every round), `qps_rounds` and the passes of all rounds; open and first
    search times are medians too; memory and the operating ef are the first round's. Not ok if a round failed."""
    first = results[0]
    if len(results) == 1 or not all(r.get("ok") for r in results):
        merged = dict(first)
        merged["ok"] = all(r.get("ok") for r in results)
        merged["errors"] = [e for r in results for e in r.get("errors", [])]
        return merged
    merged = dict(first)

    def points(key, ident):
        out = []
        for p in first.get(key) or []:
            same = [q for r in results for q in (r.get(key) or []) if q.get(ident) == p.get(ident)]
            m = dict(p)
            m["qps_rounds"] = [q["qps"] for q in same]
            m["qps"] = statistics.median(m["qps_rounds"])
            for lat in ("latency_median_us", "latency_p99_us", "latency_mean_us"):
                if all(q.get(lat) is not None for q in same):
                    m[lat] = statistics.median(q[lat] for q in same)
            m["passes"] = sum(q.get("passes", 0) for q in same)
            m["qps_passes"] = [x for q in same for x in q.get("qps_passes", [])]
            out.append(m)
        return out

    merged["sweep"] = points("sweep", "ef")
    merged["filtered"] = points("filtered", "selectivity_pct")
    for key in ("open_s", "first_search_s"):
        if all(r.get(key) is not None for r in results):
            merged[key] = statistics.median(r[key] for r in results)
    merged["gates"] = {f"{where} (round {i + 1})": g for i, r in enumerate(results)
                       for where, g in (r.get("gates") or {}).items()}
    merged["errors"] = [e for r in results for e in r.get("errors", [])]
    return merged


def best_point(run):
    """The sweep point with the most QPS among those reaching RECALL_TARGET (None if none does): the QPS at matched
    recall that the targets compare."""
    good = [p for p in run.get("sweep") or [] if p.get("recall") is not None and p["recall"] >= RECALL_TARGET]
    return max(good, key=lambda p: p["qps"]) if good else None


def interpolated_qps(run):
    """The QPS at recall exactly RECALL_TARGET, on the straight line between the two swept points (by ef) whose
    recalls lie on either side of it: an engine's curve compared at equal recall, where the best swept point depends
    on where the sweep's steps fall (one engine's ef 32 reaching 0.954 and another's 0.946 puts the second at its
    ef 48). None when no point is below the target and one above (an exact engine, or a sweep that starts above)."""
    pts = sorted((p for p in run.get("sweep") or [] if p.get("recall") is not None and p.get("ef")),
                 key=lambda p: p["ef"])
    for lo, hi in zip(pts, pts[1:]):
        if lo["recall"] < RECALL_TARGET <= hi["recall"]:
            f = (RECALL_TARGET - lo["recall"]) / (hi["recall"] - lo["recall"])
            return lo["qps"] + f * (hi["qps"] - lo["qps"])
    return None


def summarize(run, raw_bytes):
    best = best_point(run)
    sweep = run.get("sweep") or []
    build = run.get("build") or {}
    mem = run.get("memory") or {}
    out = {
        "qps_at_recall_target": best["qps"] if best else None,
        "qps_at_recall_interpolated": interpolated_qps(run),
        "ef_at_recall_target": best["ef"] if best else None,
        "recall_at_that_point": best["recall"] if best else None,
        "max_recall": max((p["recall"] for p in sweep if p.get("recall") is not None), default=None),
        # the point with the largest ef (an exact engine's one point)
        "recall_at_max_ef": max(sweep, key=lambda p: p["ef"] or 0)["recall"] if sweep else None,
        "max_ef": max(sweep, key=lambda p: p["ef"] or 0)["ef"] if sweep else None,
        "build_s_reps": build.get("build_s_reps"),
        "build_s": build.get("build_s"),
        "disk_bytes_per_vector": build.get("disk_bytes_per_vector"),
        "disk_bytes_apparent_per_vector": build.get("disk_bytes_apparent_per_vector"),
        "disk_ratio_to_raw": (build["disk_bytes_per_vector"] / raw_bytes) if build.get("disk_bytes_per_vector")
        else None,
        "resident_bytes_per_vector": mem.get("resident_bytes_per_vector"),
        "anonymous_bytes_per_vector": mem.get("anonymous_bytes_per_vector"),
        "open_s": run.get("open_s"),
        "first_search_s": run.get("first_search_s"),
        "operating_ef": run.get("operating_ef"),
        "filtered": {},
    }
    for f in run.get("filtered") or []:
        out["filtered"][str(f["selectivity_pct"])] = {k: f.get(k) for k in ("recall", "qps", "short_queries", "ef",
                                                                             "wrong_filter_rows", "plan")}
    return out


def tables(results):
    """{"sweep": [...], "filtered": [...], "summary": {...}}: every measured point as one flat row."""
    sweep, filtered, summary = [], [], {}
    for ds, runs in results["runs"].items():
        raw = results["datasets"][ds]["raw_vector_bytes"]
        summary[ds] = {}
        for label, run in runs.items():
            if run["status"] != "ok":
                continue
            summary[ds][label] = summarize(run, raw)
            for p in run.get("sweep") or []:
                sweep.append(dict({"dataset": ds, "engine": label, "exact": run.get("exact")},
                                  **{k: v for k, v in p.items()}))
            if run.get("filter_mode") is None:
                for s in SELECTIVITIES:
                    filtered.append({"dataset": ds, "engine": label, "selectivity_pct": s, "mode": None,
                                     "note": "no filter support"})
            for f in run.get("filtered") or []:
                filtered.append(dict({"dataset": ds, "engine": label, "mode": run.get("filter_mode")}, **f))
    return {"sweep": sweep, "filtered": filtered, "summary": summary}


# --- formatting ---------------------------------------------------------------------------------------------------

def _none(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


def f_qps(v):
    if _none(v):
        return "–"
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"


def f_s(v):
    if _none(v):
        return "–"
    return f"{v * 1e3:,.1f} ms" if v < 1 else f"{v:,.2f} s"


def f_ms(v):
    if _none(v):
        return "–"
    return f"{v:,.3f} ms" if v < 100 else f"{v:,.1f} ms"


def f_us(v):
    if _none(v):
        return "–"
    return f"{v:,.1f} µs" if v < 1000 else f"{v / 1e3:,.2f} ms"


def f_bytes(v):
    if _none(v):
        return "–"
    if abs(v) >= 10 * 1024 * 1024:
        return f"{v / 2**20:,.1f} MB"
    if abs(v) >= 100 * 1024:
        return f"{v / 1024:,.0f} KB"
    return f"{v:,.0f} B"


def f_recall(v):
    return "–" if _none(v) else f"{v:.3f}"


def mark(ok):
    return "" if ok is None else (" ✓" if ok else " ✗")


# --- targets (issue 18), for MoteDB ---------------------------------------------------------------------------------

def dataset_targets(summary, raw_bytes):
    """{row key: (text, check(MoteDB's summary) -> bool or None)}."""
    hn, ob, sv = summary.get(HNSWLIB), summary.get(OBJECTBOX), summary.get(SQLITE_VEC)
    t = {}
    refs, parts = [], []
    for ref, factor, name in ((hn, 1.0, "1.0× hnswlib"), (ob, 3.0, "3× ObjectBox")):
        if ref and ref["qps_at_recall_target"]:
            refs.append(factor * ref["qps_at_recall_target"])
            parts.append(f"{name} = {f_qps(factor * ref['qps_at_recall_target'])}")
        elif ref:
            parts.append(f"{name} (no swept point reached recall {RECALL_TARGET})")
        else:
            parts.append(f"{name} (not measured)")
    t["qps"] = ("≥ " + " and ≥ ".join(parts),
                (lambda s, r=max(refs): s["qps_at_recall_target"] is not None and s["qps_at_recall_target"] >= r)
                if refs else None)
    refs, parts = [], []  # the same at equal recall
    for ref, factor, name in ((hn, 1.0, "1.0× hnswlib"), (ob, 3.0, "3× ObjectBox")):
        if ref and ref.get("qps_at_recall_interpolated"):
            refs.append(factor * ref["qps_at_recall_interpolated"])
            parts.append(f"{name} = {f_qps(factor * ref['qps_at_recall_interpolated'])}")
        else:
            parts.append(f"{name} (not interpolated)")
    t["qpsi"] = ("≥ " + " and ≥ ".join(parts),
                 (lambda s, r=max(refs): s.get("qps_at_recall_interpolated") is not None
                  and s["qps_at_recall_interpolated"] >= r) if refs else None)
    if hn and hn["build_s"]:
        t["build"] = (f"≤ 1.2× hnswlib = {f_s(1.2 * hn['build_s'])}",
                      lambda s, r=1.2 * hn["build_s"]: s["build_s"] <= r)
    else:
        t["build"] = ("≤ 1.2× hnswlib (not measured)", None)
    t["disk"] = (f"≤ 1.5× raw vectors = {f_bytes(1.5 * raw_bytes)}",
                 lambda s, r=1.5 * raw_bytes: s["disk_bytes_per_vector"] <= r)
    for sel in SELECTIVITIES:
        key = str(sel)
        t[f"frecall{sel}"] = (f"≥ {RECALL_TARGET} with exactly {K} results for every query",
                              lambda s, key=key: (key in s["filtered"] and s["filtered"][key]["recall"] >= RECALL_TARGET
                                                  and s["filtered"][key]["short_queries"] == 0))
        ref = (sv or {}).get("filtered", {}).get(key, {}).get("qps")
        if ref:
            t[f"fqps{sel}"] = (f"≥ 1.0× sqlite-vec = {f_qps(ref)}",
                               lambda s, key=key, r=ref: key in s["filtered"] and s["filtered"][key]["qps"] >= r)
        else:
            t[f"fqps{sel}"] = ("≥ 1.0× sqlite-vec (not measured)", None)
    return t


# --- Markdown ------------------------------------------------------------------------------------------------------

def _sqlite_version(results):
    for runs in list(results["runs"].values()) + [results.get("agents", {}).get("runs", {})]:
        d = (runs.get(SQLITE_VEC) or {}).get("describe") or {}
        if d.get("sqlite_version (apsw)"):
            return d["sqlite_version (apsw)"]
    return None


def _objectbox_core(results):
    for runs in list(results["runs"].values()) + [results.get("agents", {}).get("runs", {})]:
        d = (runs.get(OBJECTBOX) or {}).get("describe") or {}
        if d.get("objectbox_core"):
            return d["objectbox_core"]
    return None


def dataset_title(meta):
    if meta["kind"] == "real":
        c = meta.get("corpus") or {}
        src = (f"real text: {c.get('passages', 0):,} passages of the installed manual pages and Python docstrings, "
               f"TF-IDF + TruncatedSVD computed here")
    else:
        src = (f"synthetic: {meta['made']['clusters']} Gaussian clusters (σ = {meta['made']['sigma']}), "
               f"seed {meta['seed']}")
    return (f"{meta['name']}: {meta['n']:,} vectors of {meta['dim']} dimensions, {meta['metric']}; {src}; "
            f"{meta['queries']:,} held-out queries")


def short_title(meta):
    kind = ("real text: manual pages + Python docstrings, TF-IDF + TruncatedSVD" if meta["kind"] == "real"
            else f"synthetic: {meta['made']['clusters']} Gaussian clusters")
    return (f"{meta['name']}: {meta['n']:,} vectors, {meta['dim']} dimensions, {meta['metric']} ({kind}); "
            f"{meta['queries']:,} held-out queries")


def _exact_sentence(results):
    exact = [label for label in LABELS
             if any(runs.get(label, {}).get("exact") for runs in results["runs"].values())]
    out = []
    if exact:
        out.append(f"{' and '.join(exact)} search{'es' if len(exact) == 1 else ''} exactly (every candidate "
                   f"compared): one point, no ef.")
    if any(MOTEDB in runs for runs in results["runs"].values()):
        out.append("MoteDB's planner chooses per query between its HNSW graph and exact search (exact below 2,048 "
                   "indexed vectors and for a filter whose index selects few objects): the \"plan\" columns say "
                   "which it took.")
    return " ".join(out)


def markdown(results):
    env, par = results["environment"], results["parameters"]
    pk = env.get("packages", {})
    lines = [f"# Vector search — {env['mode']} run, {env['started']}", ""]
    gov = env.get("cpu_governor")
    commit = (env["git"].get("commit") or "?")[:10]
    modified = ", modified sources" if env["git"].get("motedb_sources_modified") else ""
    lines += [
        f"Machine: {env['cpu']}, {env['cpus']} CPUs{f' ({gov})' if gov else ''}, "
        f"{env['memory_total_bytes'] / 2**30:.0f} GiB, kernel {env['kernel']}; indexes on "
        f"{env['file_system'].get('fstype')}; load average at start {env['load_1m_at_start']}.",
        f"Python {env['python']}; motedb {pk.get('motedb', '–')} (this checkout, {commit}{modified}); "
        f"hnswlib {pk.get('hnswlib', '–')}; usearch {pk.get('usearch', '–')}; "
        f"faiss-cpu {pk.get('faiss-cpu', '–')}; "
        f"sqlite-vec {pk.get('sqlite-vec', '–')} in SQLite {_sqlite_version(results) or '–'} (apsw "
        f"{pk.get('apsw', '–')}); objectbox {pk.get('objectbox', '–')} (core {_objectbox_core(results) or '–'}); "
        f"lancedb {pk.get('lancedb', '–')}; numpy {pk.get('numpy', '–')}; "
        f"scikit-learn {pk.get('scikit-learn', '–')}.",
        f"Every search: one query at a time from one thread, k = {K}; HNSW: M = {par['hnsw']['m']}, "
        f"ef_construction = {par['hnsw']['ef_construction']}, ef_search swept over {par['ef_search_sweep']}; "
        f"QPS = median of the timed passes over all queries (at least {par['timed_passes']} passes and "
        f"{par.get('point_min_search_s', 0)} s of searching, at most {par.get('max_passes', '–')} passes or "
        f"{par['point_budget_s']} s), then the median over {par.get('rounds', 1)} round(s) in which every engine "
        f"searches in turn after all have built; recall@{K} of the first pass; build time: median of "
        f"{par.get('build_reps', 1)} build(s) from scratch. {_exact_sentence(results)}",
        "",
    ]
    for ds, runs in results["runs"].items():
        meta = results["datasets"][ds]
        summ = results["summary"].get(ds, {})
        labels = [label for label in LABELS if label in runs]
        raw = meta["raw_vector_bytes"]
        tg = dataset_targets(summ, raw)
        lines += [f"## {dataset_title(meta)}", ""]
        lines.append("| | " + " | ".join(labels) + " | Target (MoteDB) |")
        lines.append("|---|" + "---|" * len(labels) + "---|")

        def row(title, key, cell):
            cells = []
            for label in labels:
                run = runs[label]
                if run["status"] == "unavailable":
                    cells.append("n/a")
                    continue
                if run["status"] != "ok":
                    cells.append("failed")
                    continue
                c = cell(summ[label], run)
                if label == MOTEDB and key in tg and tg[key][1] is not None and c not in ("–", ""):
                    try:
                        c += mark(bool(tg[key][1](summ[label])))
                    except (TypeError, KeyError):
                        pass
                cells.append(c)
            lines.append(f"| {title} | " + " | ".join(cells) + f" | {tg[key][0] if key in tg else '–'} |")

        def qps_cell(s, run):
            if s["qps_at_recall_target"] is None:
                return f"– (max recall {f_recall(s['max_recall'])})"
            where = "exact" if run.get("exact") else f"ef {s['ef_at_recall_target']}"
            return f"{f_qps(s['qps_at_recall_target'])} ({where}, recall {f_recall(s['recall_at_that_point'])})"

        row(f"QPS at recall@{K} ≥ {RECALL_TARGET} (best swept point)", "qps", qps_cell)
        row(f"QPS at recall@{K} = {RECALL_TARGET} (interpolated between the swept points around it)", "qpsi",
            lambda s, run: f_qps(s.get("qps_at_recall_interpolated")))
        row(f"Recall@{K} at the largest swept ef", "maxrecall",
            lambda s, run: f_recall(s["recall_at_max_ef"]) + ("" if s["max_ef"] is None else f" (ef {s['max_ef']})"))
        row("Build time (median; one thread where settable)", "build", lambda s, run: f_s(s["build_s"]))
        row("Bytes on disk per vector (allocated)", "disk",
            lambda s, run: f"{f_bytes(s['disk_bytes_per_vector'])} ({s['disk_ratio_to_raw']:.2f}× raw)"
            if s["disk_bytes_per_vector"] else "–")
        row("Resident bytes per vector (Rss growth: open + sweep)", "resident",
            lambda s, run: f_bytes(s["resident_bytes_per_vector"]))
        row("Open (load) time; then the first search", "open",
            lambda s, run: f"{f_s(s['open_s'])}; {f_s(s['first_search_s'])}" if s.get("first_search_s") is not None
            else f_s(s["open_s"]))
        for sel in SELECTIVITIES:
            key = str(sel)

            def frecall(s, run, key=key):
                if run.get("filter_mode") is None:
                    return "no filter support"
                f = s["filtered"].get(key)
                if not f:
                    return "–"
                short = f" ({f['short_queries']} short)" if f["short_queries"] else ""
                return f"{f_recall(f['recall'])}{short}"

            def fqps(s, run, key=key):
                if run.get("filter_mode") is None:
                    return "no filter support"
                f = s["filtered"].get(key)
                return f_qps(f["qps"]) if f else "–"
            row(f"Filtered {sel} %: recall@{K} (queries with < {K} results)", f"frecall{sel}", frecall)
            row(f"Filtered {sel} %: QPS", f"fqps{sel}", fqps)
        lines.append("")
        notes = [f"raw vectors: {raw:,} B per vector ({meta['dim']} float32); bytes on disk: all files of the index "
                 f"or store (st_blocks × 512), divided by the vectors; resident: growth of the search process' Rss "
                 f"(/proc/self/smaps_rollup) from before opening the index to after the sweep, divided by the vectors.",
                 f"filtered: `tag < s` on an integer attribute uniform in 0..99, independent of the vectors; the HNSW "
                 f"engines search at their operating ef (the smallest swept ef with recall@{K} ≥ {RECALL_TARGET}, "
                 f"else the largest); \"short\": queries that got fewer than {K} matching results."]
        for label in labels:
            run = runs[label]
            if run["status"] == "unavailable":
                notes.append(f"{label}: unavailable: {run['reason']}.")
            elif run["status"] == "failed":
                notes.append(f"{label}: failed: {(run.get('errors') or ['?'])[-1].strip().splitlines()[-1]}")
            else:
                for where, g in (run.get("gates") or {}).items():
                    if g.get("timed_out") and env["load_gate"]["timeout_s"] > 0:
                        notes.append(f"{label}: load gate before the {where} searches timed out after "
                                     f"{g['waited_s']} s (1-minute load {g['load_1m_after']}).")
        lines += [f"- {n}" for n in notes] + [""]

        # every point of the sweep
        lines += [f"### {ds}: recall@{K} and QPS, every point", "",
                  "| Engine | ef | recall@10 | QPS | median latency | p99 latency | timed passes | plan |",
                  "|---|---|---|---|---|---|---|---|"]
        for label in labels:
            run = runs[label]
            for p in run.get("sweep") or []:
                lines.append(f"| {label} | {'exact' if p['ef'] is None else p['ef']} | {f_recall(p['recall'])} | "
                             f"{f_qps(p['qps'])} | {f_us(p['latency_median_us'])} | {f_us(p['latency_p99_us'])} | "
                             f"{p['passes']} | {p.get('plan') or '–'} |")
        lines.append("")
        lines += [f"### {ds}: filtered search (tag < s)", "",
                  "| Engine | filter | s | matching | ef | recall@10 | queries with < 10 results | QPS | "
                  "median latency | plan |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        hows = []
        for label in labels:
            run = runs[label]
            if run["status"] != "ok":
                continue
            hows.append(f"{label}: {run.get('filter_how', '')}")
            if run.get("filter_mode") is None:
                lines.append(f"| {label} | no filter support | – | – | – | – | – | – | – | – |")
                continue
            for f in run.get("filtered") or []:
                lines.append(f"| {label} | {run.get('filter_mode')} | {f['selectivity_pct']} % | {f['matches']:,} | "
                             f"{'exact' if f['ef'] is None else f['ef']} | {f_recall(f['recall'])} | "
                             f"{f['short_queries']} of {meta['queries']:,} | {f_qps(f['qps'])} | "
                             f"{f_us(f['latency_median_us'])} | {f.get('plan') or '–'} |")
        lines.append("")
        lines += [f"- {h}" for h in hows]
        lines.append("")

    agents = results.get("agents") or {}
    if agents.get("runs"):
        lines += agents_markdown(agents)
    lines += ["## Data", ""]
    for ds, meta in results["datasets"].items():
        if meta["kind"] == "real":
            c = meta["corpus"]
            per_source = ", ".join(f"{k} {v:,}" for k, v in c["passages_per_source"].items())
            lines.append(f"- {ds} (**real text**): {c['passages']:,} passages ({per_source}) "
                         f"from {c['files']['man']:,} manual pages and {c['files']['pydoc']:,} Python modules "
                         f"(passages sha256 {c['passages_sha256'][:16]}); {meta['n']:,} indexed and "
                         f"{meta['queries']:,} held-out queries drawn with seed {meta['seed']}; "
                         f"{meta['made']['embedding']}; {meta['made']['vocabulary_terms']:,} terms, explained "
                         f"variance {meta['made']['svd_explained_variance_ratio_sum']:.3f}.")
        else:
            lines.append(f"- {ds} (**synthetic**): {meta['made']['generator']}; {meta['n']:,} indexed, "
                         f"{meta['queries']:,} queries (further points of the same distribution).")
    lines += ["- Ground truth: exact search in numpy (float64 over the stored float32 vectors); a returned vector "
              f"counts as a hit if its exact distance is within 1e-5 of the {K}th nearest (ties).", ""]
    lines += [f"Total {results['environment'].get('total_seconds', 0):.0f} s.", ""]
    return "\n".join(lines)


def agents_markdown(agents):
    runs = agents["runs"]
    labels = [label for label in LABELS if label in runs]
    sv = runs.get(SQLITE_VEC) or {}
    lines = [f"## One store per agent: open + top-{K} + close ({agents['stores']:,} stores of "
             f"{agents['vectors_per_store']:,} vectors from {agents['dataset']}, {agents['passes']} passes in shuffled "
             f"order, ef {agents['ef']})", ""]
    if agents.get("skipped"):
        return lines + [f"Skipped: {agents['skipped']}.", ""]
    lines.append("| | " + " | ".join(labels) + " | Target (MoteDB) |")
    lines.append("|---|" + "---|" * len(labels) + "---|")
    rows = [
        ("Open + top-10 + close (median)", "open_query_close_median_ms", f_ms, True),
        ("same, p99", "open_query_close_p99_ms", f_ms, True),
        (f"recall@{K}", "recall", f_recall, False),
        ("Create the store (median)", "create_median_ms", f_ms, False),
        ("Bytes on disk per store", "disk_bytes_per_store", f_bytes, False),
    ]
    for title, key, fmt, target in rows:
        cells = []
        ref = sv.get(key) if sv.get("status") == "ok" else None
        for label in labels:
            run = runs[label]
            if run["status"] == "unavailable":
                cells.append("n/a")
            elif run["status"] != "ok":
                cells.append("failed")
            else:
                c = fmt(run.get(key))
                if label == MOTEDB and target and ref:
                    c += mark(run[key] <= 0.5 * ref)
                cells.append(c)
        if not target:
            tgt = "–"
        else:
            tgt = f"≤ 0.5× sqlite-vec = {f_ms(0.5 * ref)}" if ref else "≤ 0.5× sqlite-vec (not measured)"
        lines.append(f"| {title} | " + " | ".join(cells) + f" | {tgt} |")
    lines.append("")
    notes = ["Each cycle: open the store (or load the index file), make the searcher, one top-10 search, close; "
             "files read once before (warm page cache). Query i goes to store i (held-out queries of the data set)."]
    for label in labels:
        run = runs[label]
        if run["status"] == "unavailable":
            notes.append(f"{label}: unavailable: {run['reason']}.")
        elif run["status"] == "failed":
            notes.append(f"{label}: failed: {(run.get('errors') or ['?'])[-1].strip().splitlines()[-1]}")
        elif run.get("plan"):
            notes.append(f"{label}: plan of these searches: {run['plan']}.")
    return lines + [f"- {n}" for n in notes] + [""]


# --- charts --------------------------------------------------------------------------------------------------------

COLORS = {MOTEDB: "#d62728", MOTEDB_EXACT: "#f4a3a3", HNSWLIB: "#1f77b4", "USearch": "#9467bd", "FAISS": "#ff7f0e",
          SQLITE_VEC: "#2ca02c", OBJECTBOX: "#08519c", "LanceDB": "#8c564b"}


def _bars(ax, labels, values, title, unit, fmt, log=None):
    ys = list(range(len(labels)))
    vals = [0 if _none(v) else v for v in values]
    bars = ax.barh(ys, vals, color=[COLORS.get(label, "grey") for label in labels], edgecolor="black", linewidth=0.3)
    for bar, v in zip(bars, values):
        ax.annotate(" " + ("–" if _none(v) else fmt(v)), (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", ha="left", fontsize=7)
    pos = [v for v in vals if v > 0]
    if log is None:
        log = bool(pos) and max(pos) / min(pos) > 30
    if pos and log:
        ax.set_xscale("log")
        ax.set_xlim(min(pos) / 2, max(pos) * 20)
    elif pos:
        ax.set_xlim(0, max(pos) * 1.45)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(unit + (" (log scale)" if ax.get_xscale() == "log" else ""), fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)


def charts(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    env = results["environment"]
    for ds, runs in results["runs"].items():
        meta = results["datasets"][ds]
        summ = results["summary"].get(ds, {})
        labels = [label for label in LABELS if label in summ]
        if not labels:
            continue
        fig, axes = plt.subplots(2, 2, figsize=(13, 9))
        ax = axes[0][0]
        for label in labels:
            pts = [p for p in runs[label].get("sweep") or [] if p.get("recall") is not None]
            if not pts:
                continue
            xs, ys = [p["recall"] for p in pts], [p["qps"] for p in pts]
            if runs[label].get("exact"):
                ax.scatter(xs, ys, s=60, marker="D", color=COLORS.get(label, "grey"), label=f"{label} (exact)",
                           zorder=3, edgecolor="black", linewidth=0.5)
            else:
                ax.plot(xs, ys, marker="o", markersize=3, color=COLORS.get(label, "grey"), label=label)
        ax.axvline(RECALL_TARGET, color="grey", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_xlabel(f"recall@{K}", fontsize=9)
        ax.set_ylabel("queries per second (one thread, log scale)", fontsize=9)
        ax.set_title(f"Recall@{K} vs QPS (ef_search swept)", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        _bars(axes[0][1], labels, [summ[label]["build_s"] for label in labels], "Build time", "s",
              lambda v: f"{v:,.2f} s")
        ax = axes[1][0]
        _bars(ax, labels, [summ[label]["disk_bytes_per_vector"] for label in labels],
              "Bytes on disk per vector (dotted: raw vector, dashed: 1.5× raw)", "bytes", lambda v: f"{v:,.0f} B")
        raw = meta["raw_vector_bytes"]
        if ax.get_xscale() != "log":
            ax.set_xlim(0, max(ax.get_xlim()[1], 1.6 * raw))
        ax.axvline(raw, color="grey", linestyle=":", linewidth=1)
        ax.axvline(1.5 * raw, color="grey", linestyle="--", linewidth=1)
        ax = axes[1][1]
        width = 0.8 / len(SELECTIVITIES)
        allv = []
        for j, sel in enumerate(SELECTIVITIES):
            for i, label in enumerate(labels):
                f = summ[label]["filtered"].get(str(sel))
                if not f:
                    continue
                y = i + (j - (len(SELECTIVITIES) - 1) / 2) * width
                ax.barh(y, f["qps"], height=width * 0.95, color=COLORS.get(label, "grey"),
                        alpha=[1.0, 0.7, 0.45][j % 3], edgecolor="black", linewidth=0.3)
                ax.annotate(f" {sel}%: {f_qps(f['qps'])} (recall {f['recall']:.2f}"
                            + (f", {f['short_queries']} short" if f["short_queries"] else "") + ")",
                            (f["qps"], y), va="center", ha="left", fontsize=6)
                allv.append(f["qps"])
        for i, label in enumerate(labels):
            if runs[label].get("filter_mode") is None:
                ax.annotate("no filter support", (0.01, i), xycoords=("axes fraction", "data"), va="center",
                            ha="left", fontsize=7)
        if allv:
            ax.set_xscale("log")
            ax.set_xlim(min(allv) / 2, max(allv) * 60)
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_title("Filtered search (tag < s): QPS at the operating ef", fontsize=10)
        ax.set_xlabel("queries per second (log scale)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        missing = [label for label, r in runs.items() if r["status"] != "ok"]
        sub = f"{env['cpu']}, {env['started'][:10]}, {env['mode']} run"
        if missing:
            sub += "; not measured: " + ", ".join(missing)
        fig.suptitle(f"{short_title(meta)}\n{sub}", fontsize=10)
        fig.tight_layout()
        path = Path(out_dir) / f"chart-{ds}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    agents = results.get("agents") or {}
    aruns = {label: r for label, r in (agents.get("runs") or {}).items() if r.get("status") == "ok"}
    if aruns:
        labels = [label for label in LABELS if label in aruns]
        fig, axes = plt.subplots(1, 2, figsize=(13, 3.2))
        both = [aruns[label][m] for label in labels for m in ("open_query_close_median_ms", "open_query_close_p99_ms")]
        log = max(both) / max(min(both), 1e-9) > 30
        _bars(axes[0], labels, [aruns[label]["open_query_close_median_ms"] for label in labels],
              f"Open + top-{K} + close, median", "ms", lambda v: f"{v:,.3f} ms", log=log)
        _bars(axes[1], labels, [aruns[label]["open_query_close_p99_ms"] for label in labels],
              f"Open + top-{K} + close, p99", "ms", lambda v: f"{v:,.3f} ms", log=log)
        fig.suptitle(f"One store per agent: {agents['stores']:,} stores of {agents['vectors_per_store']:,} vectors "
                     f"({agents['dataset']}), {env['started'][:10]}", fontsize=10)
        fig.tight_layout()
        path = Path(out_dir) / "chart-agents.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


# --- smoke checks ---------------------------------------------------------------------------------------------------

def _num(v):
    return isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))


def smoke_check(results):
    """Problems found (empty: every engine that ran measured plausible numbers)."""
    problems = []
    for ds, runs in results["runs"].items():
        for label, run in runs.items():
            where = f"{ds}/{label}"
            if run["status"] == "unavailable":
                continue
            if run["status"] != "ok":
                problems.append(f"{where}: {run['status']}: {(run.get('errors') or ['?'])[-1].strip()[-300:]}")
                continue
            sweep = run.get("sweep") or []
            if not sweep:
                problems.append(f"{where}: no sweep points")
            for p in sweep:
                if not (_num(p.get("recall")) and 0.0 <= p["recall"] <= 1.0):
                    problems.append(f"{where} ef {p.get('ef')}: recall {p.get('recall')} not in [0, 1]")
                if not (_num(p.get("qps")) and p["qps"] > 0):
                    problems.append(f"{where} ef {p.get('ef')}: qps {p.get('qps')} not > 0")
            recalls = [p["recall"] for p in sweep if _num(p.get("recall"))]
            if run.get("exact") and recalls and min(recalls) < 0.999:
                problems.append(f"{where}: exact search with recall {min(recalls):.4f} < 0.999")
            if not run.get("exact") and recalls and max(recalls) < 0.8:
                problems.append(f"{where}: HNSW recall at most {max(recalls):.3f} (< 0.8 even at the largest ef)")
            b = run.get("build") or {}
            if not (_num(b.get("build_s")) and b["build_s"] > 0):
                problems.append(f"{where}: build time {b.get('build_s')}")
            if not (_num(b.get("disk_bytes")) and b["disk_bytes"] > 0):
                problems.append(f"{where}: {b.get('disk_bytes')} bytes on disk")
            if not _num((run.get("memory") or {}).get("resident_bytes_per_vector")):
                problems.append(f"{where}: no resident memory measured")
            if run.get("filter_mode") is not None:
                got = {f["selectivity_pct"] for f in run.get("filtered") or []}
                if got != set(SELECTIVITIES):
                    problems.append(f"{where}: filtered selectivities {sorted(got)}, expected {list(SELECTIVITIES)}")
                for f in run.get("filtered") or []:
                    w = f"{where} filtered {f['selectivity_pct']}%"
                    if not (_num(f.get("recall")) and 0.0 <= f["recall"] <= 1.0):
                        problems.append(f"{w}: recall {f.get('recall')} not in [0, 1]")
                    if not (_num(f.get("qps")) and f["qps"] > 0):
                        problems.append(f"{w}: qps {f.get('qps')} not > 0")
                    if f.get("wrong_filter_rows"):
                        problems.append(f"{w}: {f['wrong_filter_rows']} returned rows do not match the filter")
                    if run.get("exact") and (f["recall"] < 0.999 or f["short_queries"]):
                        problems.append(f"{w}: exact search with recall {f['recall']:.4f}, "
                                        f"{f['short_queries']} short queries")
    agents = results.get("agents") or {}
    for label, run in (agents.get("runs") or {}).items():
        where = f"agents/{label}"
        if run["status"] == "unavailable":
            continue
        if run["status"] != "ok":
            problems.append(f"{where}: {run['status']}: {(run.get('errors') or ['?'])[-1].strip()[-300:]}")
            continue
        med, p99 = run.get("open_query_close_median_ms"), run.get("open_query_close_p99_ms")
        if not (_num(med) and med > 0):
            problems.append(f"{where}: median {med}")
        elif not (_num(p99) and p99 >= med):
            problems.append(f"{where}: p99 {p99} below the median {med}")
        if not (_num(run.get("recall")) and 0.0 <= run["recall"] <= 1.0):
            problems.append(f"{where}: recall {run.get('recall')} not in [0, 1]")
    measured = [label for runs in results["runs"].values() for label, r in runs.items() if r["status"] == "ok"]
    if not measured:
        problems.append("no engine was measured")
    return problems
