"""results.json, Markdown tables and matplotlib charts from the measured cells."""

import json
import os

from bench.common.stats import geomean, median
from bench.orm import spec
from bench.orm.backends import BACKENDS, BY_LABEL


def build_cells(samples):
    """samples: {(test, mode, label, op): [rows/s, ...]} -> cells (results.json shape)."""
    cells = []
    for (test, mode, label, op), runs in sorted(samples.items(), key=lambda kv: _cell_order(kv[0])):
        cells.append({"test": test, "mode": mode, "backend": label, "op": op,
                      "runs": runs, "median": median(runs)})
    return cells


def _cell_order(key):
    test, mode, label, op = key
    return (test, list(spec.MODES).index(mode) if mode in spec.MODES else 99, _backend_order(label), op)


def _backend_order(label):
    for i, b in enumerate(BACKENDS):
        if b.label == label:
            return i
    return 99


def build_geomeans(cells):
    groups = {}
    for c in cells:
        if c["op"] in spec.GEOMEAN_OPS and c["median"]:
            groups.setdefault((c["test"], c["mode"], c["backend"]), []).append(c["median"])
    out = []
    for (test, mode, label), vals in sorted(groups.items(), key=lambda kv: _cell_order(kv[0] + ("",))):
        out.append({"test": test, "mode": mode, "backend": label, "value": geomean(v for v in vals if v > 0),
                    "ops": len(vals)})
    return out


def write_json(path, environment, config, cells, geomeans, extra=None):
    doc = {"environment": environment, "config": config, "cells": cells, "geomean": geomeans}
    if extra:
        doc.update(extra)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


def _fmt(v):
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:,.1f}"


def _is_sql_orm(label):
    b = BY_LABEL.get(label)
    return bool(b and b.sql and b.id != "sqlite3")


def markdown(cells, geomeans, notes_by_label=None):
    """One table per test and mode; returns the Markdown text."""
    out = []
    keys = sorted({(c["test"], c["mode"]) for c in cells},
                  key=lambda k: (list(spec.MODES).index(k[1]) if k[1] in spec.MODES else 99, k[0]))
    for test, mode in keys:
        tc = [c for c in cells if c["test"] == test and c["mode"] == mode]
        labels = sorted({c["backend"] for c in tc}, key=_backend_order)
        val = {(c["backend"], c["op"]): c["median"] for c in tc}
        gm = {g["backend"]: g for g in geomeans if g["test"] == test and g["mode"] == mode}
        out.append(f"### {spec.TESTS[test]} — {mode}\n")
        out.append("rows/s (median of the runs); best per row in bold; G and H are not in the geometric mean.\n")
        out.append("| Operation | " + " | ".join(labels) + " |")
        out.append("|---|" + "---:|" * len(labels))
        for op in spec.OPS:
            row = [val.get((lb, op)) for lb in labels]
            best = max([v for v in row if v], default=None)
            cells_txt = [("**" + _fmt(v) + "**") if (v and v == best) else _fmt(v) for v in row]
            out.append(f"| {op} {spec.OP_NAMES[op]} | " + " | ".join(cells_txt) + " |")
        gms = [gm.get(lb, {}).get("value") for lb in labels]
        best = max([v for v in gms if v], default=None)
        txt = []
        for lb, v in zip(labels, gms):
            s = ("**" + _fmt(v) + "**") if (v and v == best) else _fmt(v)
            ops = gm.get(lb, {}).get("ops")
            if v and ops != len(spec.GEOMEAN_OPS):
                s += f" ({ops} ops)"
            txt.append(s)
        out.append("| **Geometric mean** | " + " | ".join(txt) + " |")
        sql = {lb: gm[lb]["value"] for lb in labels if lb in gm and gm[lb]["value"] and _is_sql_orm(lb)}
        # the best SQL ORM among those with every operation (a geometric mean over fewer
        # operations, e.g. without bulk insert, is not comparable)
        full = {lb: v for lb, v in sql.items() if gm[lb]["ops"] == len(spec.GEOMEAN_OPS)}
        best_sql = max((full or sql).items(), key=lambda kv: kv[1]) if sql else None
        obx = gm.get("ObjectBox", {}).get("value")
        if best_sql:
            out.append(f"| vs best SQL ORM ({best_sql[0]}) | " + " | ".join(
                f"{v / best_sql[1]:.2f}x" if v else "–" for v in gms) + " |")
        if obx:
            out.append("| vs ObjectBox | " + " | ".join(f"{v / obx:.2f}x" if v else "–" for v in gms) + " |")
        out.append("")
    return "\n".join(out)


def summary_markdown(geomeans, unavailable=None):
    """Geometric means: rows = backends, columns = (mode, test)."""
    keys = sorted({(g["mode"], g["test"]) for g in geomeans},
                  key=lambda k: (list(spec.MODES).index(k[0]) if k[0] in spec.MODES else 99, k[1]))
    labels = sorted({g["backend"] for g in geomeans}, key=_backend_order)
    val = {(g["backend"], g["mode"], g["test"]): g for g in geomeans}
    out = ["### Geometric means (rows/s, object operations A–F, I–K)\n",
           "| Backend | " + " | ".join(f"{m} T{t}" for m, t in keys) + " |",
           "|---|" + "---:|" * len(keys)]
    best = {k: max([val[(lb,) + k]["value"] or 0 for lb in labels if (lb,) + k in val], default=0) for k in keys}
    for lb in labels:
        row = []
        for k in keys:
            g = val.get((lb,) + k)
            v = g["value"] if g else None
            s = ("**" + _fmt(v) + "**") if v and v == best[k] else _fmt(v)
            if g and v and g["ops"] != len(spec.GEOMEAN_OPS):
                s += f" ({g['ops']} ops)"
            row.append(s)
        out.append(f"| {lb} | " + " | ".join(row) + " |")
    for lb in (unavailable or {}):
        out.append(f"| {lb} | " + " | ".join("n/a" for _ in keys) + " |")
    out.append("")
    if unavailable:
        for lb, reason in unavailable.items():
            out.append(f"- {lb}: {reason}")
        out.append("")
    return "\n".join(out)


# --- charts --------------------------------------------------------------------------

def _colors(labels):
    import matplotlib
    cmap = matplotlib.colormaps["tab20"]

    def idx(i):  # the saturated colours first, then the light ones
        return (2 * i) % 20 + (1 if 2 * i >= 20 else 0)
    return {lb: cmap(idx(_backend_order(lb))) for lb in labels}


def charts(cells, geomeans, out_dir):
    """Per test and mode: grouped bars (ops x backends), log scale; summary of geomeans by mode."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    ops = list(spec.GEOMEAN_OPS)
    for test, mode in sorted({(c["test"], c["mode"]) for c in cells}):
        tc = [c for c in cells if c["test"] == test and c["mode"] == mode and c["op"] in ops and c["median"]]
        if not tc:
            continue
        labels = sorted({c["backend"] for c in tc}, key=_backend_order)
        val = {(c["backend"], c["op"]): c["median"] for c in tc}
        colors = _colors(labels)
        fig, ax = plt.subplots(figsize=(min(18, max(8, 1.1 * len(ops) * max(1, len(labels)) / 4 + 4)),
                                        5.2))
        width = 0.8 / len(labels)
        for i, lb in enumerate(labels):
            xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(ops))]
            ys = [val.get((lb, op), 0) or 0 for op in ops]
            ax.bar(xs, ys, width, label=lb, color=colors[lb])
        ax.set_yscale("log")
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels([f"{op}\n{spec.OP_NAMES[op]}" for op in ops], fontsize=8)
        ax.set_ylabel("rows/s (log scale, higher is better)")
        ax.set_title(f"{spec.TESTS[test]} — {mode}")
        ax.grid(axis="y", which="major", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(labels), 5), loc="upper center", bbox_to_anchor=(0.5, -0.14))
        fig.tight_layout()
        name = f"test{test}-{mode}.png"
        fig.savefig(os.path.join(out_dir, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        files.append(name)

    modes = sorted({g["mode"] for g in geomeans if g["value"]},
                   key=lambda m: list(spec.MODES).index(m) if m in spec.MODES else 99)
    if modes:
        fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 5.2), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            gs = [g for g in geomeans if g["mode"] == mode and g["value"]]
            tests = sorted({g["test"] for g in gs})
            labels = sorted({g["backend"] for g in gs}, key=_backend_order)
            colors = _colors(labels)
            val = {(g["backend"], g["test"]): g["value"] for g in gs}
            width = 0.8 / len(labels)
            for i, lb in enumerate(labels):
                xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(tests))]
                ax.bar(xs, [val.get((lb, t), 0) for t in tests], width, label=lb, color=colors[lb])
            ax.set_yscale("log")
            ax.set_xticks(range(len(tests)))
            ax.set_xticklabels([f"Test {t}" for t in tests])
            ax.set_ylabel("geometric mean rows/s (log)")
            ax.set_title(f"Geometric means — {mode}")
            ax.grid(axis="y", alpha=0.3)
        handles = {}
        for ax in axes[0]:
            for h, lb in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lb, h)
        labels = sorted(handles, key=_backend_order)
        ncol = max(1, min(len(labels), 5 * len(modes)))  # ~5 entries fit under one panel
        fig.legend([handles[lb] for lb in labels], labels, loc="lower center", fontsize=8,
                   ncol=ncol)
        rows = (len(labels) + ncol - 1) // ncol
        fig.tight_layout(rect=(0, 0.045 * rows + 0.02, 1, 1))
        fig.savefig(os.path.join(out_dir, "summary.png"), dpi=110, bbox_inches="tight")
        plt.close(fig)
        files.append("summary.png")
    return files


# --- README's table, per-operation ratios, before/after ----------------------------
# python3 -m bench.orm.report RESULTS.json [--readme README.md] [--ops] [--diff OLD.json]

def _load(path):
    with open(path) as f:
        return json.load(f)


def _keys(geomeans):
    return sorted({(g["mode"], g["test"]) for g in geomeans},
                  key=lambda k: (list(spec.MODES).index(k[0]) if k[0] in spec.MODES else 99, k[1]))


def readme_table(doc):
    """README's table: geometric means per backend and (mode, test), MoteDB in bold, then
    MoteDB / ObjectBox and MoteDB / the best SQL ORM among those with every operation."""
    gms, keys = doc["geomean"], _keys(doc["geomean"])
    val = {(g["backend"], g["mode"], g["test"]): g for g in gms}
    labels = sorted({g["backend"] for g in gms}, key=_backend_order)
    full = len(spec.GEOMEAN_OPS)

    def cell(lb, k):
        g = val.get((lb,) + k)
        if not g or not g["value"]:
            return "n/a"
        s = _fmt(g["value"])
        return s + (f" ({g['ops']} ops)" if g["ops"] != full else "")

    out = ["| backend | " + " | ".join(f"{m} T{t}" for m, t in keys) + " |",
           "|---|" + "---:|" * len(keys)]
    for lb in labels:
        row = [cell(lb, k) for k in keys]
        if lb == "MoteDB":
            out.append(f"| **{lb}** | " + " | ".join(f"**{c}**" for c in row) + " |")
        else:
            out.append(f"| {lb} | " + " | ".join(row) + " |")
    mote = {k: (val.get(("MoteDB",) + k) or {}).get("value") for k in keys}
    obx = [(val.get(("ObjectBox",) + k) or {}).get("value") for k in keys]
    out.append("| MoteDB / ObjectBox | " + " | ".join(
        f"{mote[k] / o:.1f}x" if mote[k] and o else "–" for k, o in zip(keys, obx)) + " |")
    row = []
    for k in keys:
        sql = [(val[(lb,) + k]["value"], lb) for lb in labels if _is_sql_orm(lb) and (lb,) + k in val
               and val[(lb,) + k]["ops"] == full and val[(lb,) + k]["value"]]
        best = max(sql) if sql else None
        row.append(f"{mote[k] / best[0]:.1f}x ({best[1]})" if best and mote[k] else "–")
    out.append("| MoteDB / best SQL ORM with all ops | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def ops_table(doc, a="MoteDB", b="ObjectBox"):
    """a / b per operation (median over median) for every test and mode, with the geometric mean."""
    med = {(c["test"], c["mode"], c["backend"], c["op"]): c["median"] for c in doc["cells"]}
    gm = {(g["test"], g["mode"], g["backend"]): g["value"] for g in doc["geomean"]}
    ops = list(spec.GEOMEAN_OPS)
    out = ["| test, mode | " + " | ".join(ops) + " | GM |", "|---|" + "---:|" * (len(ops) + 1)]
    for mode, test in _keys(doc["geomean"]):
        row = []
        for op in ops:
            x, y = med.get((test, mode, a, op)), med.get((test, mode, b, op))
            row.append(f"{x / y:.1f}" if x and y else "–")
        x, y = gm.get((test, mode, a)), gm.get((test, mode, b))
        row.append(f"{x / y:.1f}" if x and y else "–")
        out.append(f"| T{test} {mode} | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def diff_table(old, new):
    """Geometric means per backend, old -> new (ratio), for the (mode, test) pairs of new."""
    keys = _keys(new["geomean"])
    ov = {(g["backend"], g["mode"], g["test"]): g["value"] for g in old["geomean"]}
    nv = {(g["backend"], g["mode"], g["test"]): g["value"] for g in new["geomean"]}
    labels = sorted({g["backend"] for g in new["geomean"]}, key=_backend_order)
    out = ["| backend | " + " | ".join(f"{m} T{t}" for m, t in keys) + " |", "|---|" + "---|" * len(keys)]
    for lb in labels:
        row = []
        for m, t in keys:
            o, n = ov.get((lb, m, t)), nv.get((lb, m, t))
            row.append(f"{_fmt(o)} → {_fmt(n)} ({n / o:.2f}x)" if o and n else
                       (f"– → {_fmt(n)}" if n else "n/a"))
        out.append(f"| {lb} | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


README_MARK = ("<!-- orm-table -->", "<!-- /orm-table -->")


def replace_readme(path, table):
    """Put table between README's markers; exits with a message if they are missing."""
    with open(path) as f:
        text = f.read()
    start, end = text.find(README_MARK[0]), text.find(README_MARK[1])
    if start < 0 or end < start:
        raise SystemExit(f"{path}: no {README_MARK[0]} ... {README_MARK[1]} markers")
    text = text[:start + len(README_MARK[0])] + "\n" + table + text[end:]
    with open(path, "w") as f:
        f.write(text)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="python3 -m bench.orm.report",
                                description="tables from a run's results.json")
    p.add_argument("results", help="results.json of a run")
    p.add_argument("--readme", help="replace the table between README's orm-table markers")
    p.add_argument("--ops", action="store_true", help="MoteDB / ObjectBox per operation")
    p.add_argument("--diff", metavar="OLD", help="geometric means OLD -> this run, per backend")
    a = p.parse_args(argv)
    doc = _load(a.results)
    if not doc["config"].get("complete", True):
        print(f"note: {a.results} is a partial run")
    table = readme_table(doc)
    if a.readme:
        replace_readme(a.readme, table)
        print(f"{a.readme}: table replaced")
    else:
        print(table)
    if a.ops:
        print(ops_table(doc))
    if a.diff:
        print(diff_table(_load(a.diff), doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
