"""results.json -> Markdown tables (shaped like the seed's), charts (matplotlib, PNG), smoke checks."""

import math
from pathlib import Path

from . import WORKLOAD_METRICS
from .backends import LABELS

KB = 1024

ROW_LABELS = {
    "small": {
        "open_query_close_median_ms": "Open, query (read 10 objects), close (median)",
        "open_query_close_p99_ms": "same, p99",
        "memory_per_store_rss_bytes": "Memory per open store ({m:,} open), resident",
        "memory_per_store_anon_bytes": "same, anonymous (process' own memory)",
        "create_write_close_median_ms": "Create, write ten objects, close (median)",
        "space_per_store_bytes": "Space per store, files (allocated blocks)",
        "space_per_store_file_size_bytes": "same, file sizes",
    },
    "large": {
        "open_query_close_median_ms": "Open, query (count), close (median)",
        "open_query_close_p99_ms": "same, p99",
        "count_query_median_ms": "Count query (median)",
        "memory_per_store_rss_bytes": "Memory per open store ({m:,} open), resident",
        "memory_per_store_anon_bytes": "same, anonymous (process' own memory)",
        "create_write_close_median_ms": "Create, write 1,000 objects, close (median)",
        "space_per_store_bytes": "Space per store, files (allocated blocks)",
        "space_per_store_file_size_bytes": "same, file sizes",
    },
}
# shown in the table or used by the targets, not rows of results.json
DETAIL_METRICS = {"space_per_store_file_size_bytes", "create_probe_median_ms"}

WORKLOAD_TITLES = {
    "small": "Small workload: ten small objects per store",
    "large": "Large workload: 1,000 objects with a 300-character text per store",
}


def fmt(metric, value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if metric.endswith("_ms"):
        return f"{value:,.3f} ms" if value < 100 else f"{value:,.1f} ms"
    kb = value / KB
    return f"{kb:,.1f} KB" if abs(kb) < 10 else f"{kb:,.0f} KB"


def values_by(results):
    """{workload: {label: {metric: value}}} from the rows plus the detail metrics of the runs."""
    out = {}
    for row in results["rows"]:
        out.setdefault(row["workload"], {}).setdefault(row["engine"], {})[row["metric"]] = row["value"]
    for w, runs in results["environment"].get("runs", {}).items():
        for label, run in runs.items():
            for metric in DETAIL_METRICS:
                v = (run.get("details") or {}).get(metric)
                if v is not None:
                    out.setdefault(w, {}).setdefault(label, {})[metric] = v
    return out


def targets(results, workload, vals):
    """{metric: (text, check(value) -> bool)} for MoteDB, from the issue's targets."""
    sqlite = vals.get("SQLite", {})
    probe = results["environment"].get("sync_probe", {}).get("file_and_dir_sync_median_ms")
    t = {}
    for metric in ("open_query_close_median_ms", "open_query_close_p99_ms"):
        ref = sqlite.get(metric)
        if ref is not None:
            t[metric] = (f"≤ 0.5× SQLite = {fmt(metric, ref / 2)}", lambda v, r=ref: v <= r / 2)
        else:
            t[metric] = ("≤ 0.5× SQLite (SQLite not run)", None)
    for metric in ("memory_per_store_rss_bytes", "memory_per_store_anon_bytes"):
        t[metric] = ("< 16 KB", lambda v: v < 16 * KB)
    if workload == "small":
        # the probe sampled between MoteDB's own creates (same minutes), else the one at the run's start
        same = vals.get("MoteDB", {}).get("create_probe_median_ms")
        if same is not None:
            t["create_write_close_median_ms"] = (
                f"≤ 1.1× (1 file sync + 1 dir sync = {same:.3f} ms, probed between its creates)",
                lambda v, p=same: v <= 1.1 * p)
        elif probe is not None:
            t["create_write_close_median_ms"] = (f"≤ 1 file sync + 1 dir sync = {probe:.3f} ms (measured)",
                                                 lambda v, p=probe: v <= p)
        t["space_per_store_bytes"] = ("≤ 8 KB", lambda v: v <= 8 * KB)
    else:
        ref = sqlite.get("space_per_store_bytes")
        if ref is not None:
            t["space_per_store_bytes"] = (f"≤ SQLite = {fmt('space_per_store_bytes', ref)}",
                                          lambda v, r=ref: v <= r)
        else:
            t["space_per_store_bytes"] = ("≤ SQLite (SQLite not run)", None)
    return t


def markdown(results):
    env = results["environment"]
    vals_all = values_by(results)
    lines = [f"# Many small stores — {env['mode']} run, {env['started']}", ""]
    pk = env.get("packages", {})
    fs = env.get("file_system", {})
    probe = env.get("sync_probe", {})
    lines += [
        f"Machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_total_bytes'] / 2**30:.0f} GiB, "
        f"kernel {env['kernel']}; stores on {fs.get('fstype')} ({fs.get('source')}); "
        f"load average at start {env['load_1m_at_start']}.",
        f"Python {env['python']}; SQLite {env['sqlite_version (stdlib sqlite3)']} (stdlib); "
        f"objectbox {pk.get('objectbox', '–')} (core {pk.get('objectbox-clib', '–')}); "
        f"pyturso {pk.get('pyturso', '–')}; libsql {pk.get('libsql', '–')}. "
        f"Disk: create + write 4 KB + fsync + directory fsync {probe.get('file_and_dir_sync_median_ms', 0):.3f} ms "
        f"(median).",
        "",
    ]
    for w, runs in env.get("runs", {}).items():
        n = env["stores_per_engine"][w]
        labels = [label for label in LABELS if label in runs]
        vals = vals_all.get(w, {})
        m = min(env.get("memory_stores_held_open", 1000), n)
        tg = targets(results, w, vals)
        lines += [f"## {WORKLOAD_TITLES[w]} ({n:,} stores per engine)", ""]
        lines.append("| | " + " | ".join(labels) + " | Target (MoteDB) |")
        lines.append("|---|" + "---|" * len(labels) + "---|")
        for metric, row_label in ROW_LABELS[w].items():
            cells = []
            for label in labels:
                run = runs[label]
                if run["status"] == "unavailable":
                    cells.append("n/a")
                    continue
                v = vals.get(label, {}).get(metric)
                cell = fmt(metric, v)
                if label == "MoteDB" and v is not None and metric in tg and tg[metric][1] is not None:
                    cell += " ✓" if tg[metric][1](v) else " ✗"
                cells.append(cell)
            target = tg.get(metric, ("–", None))[0]
            lines.append(f"| {row_label.format(m=m)} | " + " | ".join(cells) + f" | {target} |")
        lines.append("")
        notes = []
        for label in labels:
            run = runs[label]
            if run["status"] == "unavailable":
                notes.append(f"{label}: {run['reason']}.")
            elif run["status"] == "failed":
                err = (run.get("errors") or ["?"])[-1].strip().splitlines()[-1]
                notes.append(f"{label}: failed: {err}")
            for phase, g in (run.get("gates") or {}).items():
                if g.get("timed_out") and env["load_gate"]["timeout_s"] > 0:
                    notes.append(f"{label}: load gate before {phase} timed out after {g['waited_s']} s "
                                 f"(1-minute load {g['load_1m_after']}).")
        timed_out = any(g.get("timed_out") for r in runs.values() for g in (r.get("gates") or {}).values())
        if env["load_gate"]["timeout_s"] <= 0:
            notes.append("Load gate not waited for (timeout 0); loads recorded in results.json.")
        elif not timed_out:
            notes.append(f"Every phase started at a 1-minute load below {env['load_gate']['max_load_1m']}.")
        lines += [f"- {note}" for note in notes] + [""]
    return "\n".join(lines)


# --- charts -------------------------------------------------------------------------------------------------------

COLORS = {
    "MoteDB": "#d62728",
    "ObjectBox (sync every open)": "#9ecae1",
    "ObjectBox (cached model)": "#4292c6",
    "ObjectBox (skip model sync)": "#08519c",
    "SQLite": "#2ca02c",
    "Turso Database": "#ff7f0e",
    "libSQL": "#9467bd",
}

PANELS = [
    # (title, [(metric, series label)], unit)
    ("Open, query, close", [("open_query_close_median_ms", "median"), ("open_query_close_p99_ms", "p99")], "ms"),
    ("Count query (median)", [("count_query_median_ms", "median")], "ms"),
    ("Memory per open store", [("memory_per_store_rss_bytes", "resident"),
                               ("memory_per_store_anon_bytes", "anonymous")], "KB"),
    ("Create, write, close (median)", [("create_write_close_median_ms", "median")], "ms"),
    ("Space per store (allocated)", [("space_per_store_bytes", "allocated")], "KB"),
]


def charts(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env = results["environment"]
    vals_all = values_by(results)
    written = []
    for w, runs in env.get("runs", {}).items():
        vals = vals_all.get(w, {})
        labels = [label for label in LABELS if label in vals]
        if not labels:
            continue
        panels = [p for p in PANELS if any(m in vals[label] for label in labels for m, _ in p[1])]
        cols = 2
        rows = math.ceil(len(panels) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(13, 3.1 * rows + 1.0), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.axis("off")
        if len(panels) < rows * cols:
            pk = env.get("packages", {})
            notes = [
                f"{env['stores_per_engine'][w]:,} stores per engine; memory: "
                f"{min(env.get('memory_stores_held_open', 1000), env['stores_per_engine'][w]):,} held open",
                f"disk: file + directory fsync {env.get('sync_probe', {}).get('file_and_dir_sync_median_ms', 0):.3f} ms"
                f" (median)",
                f"Python {env['python']}, SQLite {env.get('sqlite_version (stdlib sqlite3)')}, "
                f"objectbox {pk.get('objectbox', '-')}, pyturso {pk.get('pyturso', '-')}, "
                f"libsql {pk.get('libsql', '-')}",
            ]
            notes += [f"{label}: {r.get('reason') or r['status']}" for label, r in runs.items() if r["status"] != "ok"]
            axes.flat[rows * cols - 1].text(0.0, 0.95, "\n".join(notes), va="top", ha="left", fontsize=8,
                                            transform=axes.flat[rows * cols - 1].transAxes, wrap=True)
        for ax, (title, series, unit) in zip(axes.flat, panels):
            height = 0.8 / len(series)
            allv = []
            for k, (metric, name) in enumerate(series):
                ys, xs, colors = [], [], []
                for i, label in enumerate(labels):
                    v = vals[label].get(metric)
                    if v is None:
                        continue
                    v = v / KB if unit == "KB" else v
                    ys.append(i + (k - (len(series) - 1) / 2) * height)
                    xs.append(v)
                    colors.append(COLORS.get(label, "grey"))
                    allv.append(v)
                bars = ax.barh(ys, xs, height=height * 0.95, color=colors,
                               alpha=1.0 if k == 0 else 0.55, label=name, edgecolor="black", linewidth=0.3)
                for bar, v in zip(bars, xs):
                    text = (f"{v:,.3f}" if v < 100 else f"{v:,.0f}") if unit == "ms" else f"{v:,.0f}"
                    ax.annotate(f" {text} {unit}" + (f" ({name})" if len(series) > 1 else ""),
                                (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                                va="center", ha="left", fontsize=7)
            positive = [v for v in allv if v > 0]
            if positive and max(positive) / max(min(positive), 1e-12) > 30:
                ax.set_xscale("log")
                ax.set_xlim(min(positive) / 2, max(positive) * 30)
            elif positive:
                ax.set_xlim(0, max(positive) * 1.6)
            ax.set_yticks(range(len(labels)))
            ax.set_yticklabels(labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_title(title, fontsize=10)
            ax.set_xlabel(unit + (" (log scale)" if ax.get_xscale() == "log" else ""), fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.grid(axis="x", alpha=0.3)
        n = env["stores_per_engine"][w]
        missing = [label for label, r in runs.items() if r["status"] != "ok"]
        subtitle = f"{n:,} stores per engine, {env['cpu']}, {env['file_system'].get('fstype')}, {env['started'][:10]}"
        if missing:
            subtitle += "; not measured: " + ", ".join(missing)
        fig.suptitle(f"{WORKLOAD_TITLES[w]}\n{subtitle}", fontsize=11)
        fig.tight_layout()
        path = Path(out_dir) / f"chart-{w}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# --- smoke checks -------------------------------------------------------------------------------------------------

def smoke_check(results, stores, memory_stores):
    """Problems found (empty: every phase of every engine that ran measured something plausible)."""
    problems = []
    env = results["environment"]
    vals_all = values_by(results)
    for w, runs in env["runs"].items():
        for label, run in runs.items():
            where = f"{w}/{label}"
            if run["status"] == "unavailable":
                continue
            if run["status"] != "ok":
                problems.append(f"{where}: {run['status']}: {(run.get('errors') or ['?'])[-1].strip()[-300:]}")
                continue
            vals = vals_all.get(w, {}).get(label, {})
            for metric in WORKLOAD_METRICS[w]:
                v = vals.get(metric)
                if v is None or not isinstance(v, (int, float)) or math.isnan(v):
                    problems.append(f"{where}: {metric} missing")
                elif metric.startswith("memory_per_store"):
                    # a handful of small stores may grow the heap by less than a page: 0 is
                    # plausible here; a negative growth is noise but not a failure either
                    continue
                elif v <= 0:
                    problems.append(f"{where}: {metric} = {v} (expected > 0)")
            if vals.get("open_query_close_p99_ms", 0) < vals.get("open_query_close_median_ms", 0):
                problems.append(f"{where}: p99 below the median")
            if run.get("verified_stores") != stores[w]:
                problems.append(f"{where}: {run.get('verified_stores')} of {stores[w]} stores read back and checked")
            held = (run.get("memory") or {}).get("stores_held_open")
            if held != memory_stores[w]:
                problems.append(f"{where}: {held} stores held open, expected {memory_stores[w]}")
            for phase in ("create", "open_query_close", "memory"):
                if phase not in (run.get("gates") or {}):
                    problems.append(f"{where}: no load gate recorded before {phase}")
            space = run.get("space") or {}
            if not space.get("file_size_bytes_min", 0) > 0:
                problems.append(f"{where}: a store with no bytes on disk")
    return problems
