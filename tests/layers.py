"""The include graph of src/ is the layer diagram (ARCHITECTURE.md, "Layers"):
a file may include the headers of its own layer and of the layers below,
never one above. Run by `make test` (test-c); exits 1 and names each upward
include, a file of src/ that no layer claims, or one that ARCHITECTURE.md's
Layers diagram does not name.

    python3 tests/layers.py [SRC_DIR]
"""

from __future__ import annotations

import pathlib
import re
import sys

# Bottom to top. A layer is its header(s) and the .c files that implement it.
LAYERS = [
    ("support", ["support.h", "checksum.h", "vecmath.h", "tokenize.h", "unicode_tab.h", "util.c",
                 "checksum.c", "vecmath.c", "tokenize.c", "chunk.c", "json.h", "json.c", "stem.h",
                 "stem.c"]),
    ("io", ["io.h", "io.c"]),
    ("node", ["node.h", "node.c"]),
    ("pager", ["pager.h", "pager.c", "cache.c", "alloc.c", "open.c", "share.c"]),
    ("btree", ["btree.h", "btree.c", "cursor.c", "overflow.c"]),
    ("kv", ["kv.h", "kv.c"]),
    ("object", ["object.h", "query.h", "object.c", "schema.c", "record.c", "query.c", "match.c",
                "aggregate.c", "relation.c", "objcheck.c", "hnsw.c", "text.h", "text.c"]),
    ("top", ["check.h", "check.c", "delta.c", "store.c"]),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def diagram(architecture: pathlib.Path) -> str:
    """The Layers diagram: the first ``` block of ARCHITECTURE.md."""
    text = architecture.read_text()
    start = text.index("```") + 3
    return text[start:text.index("```", start)]


def main(src: pathlib.Path) -> int:
    drawn = set(re.findall(r"[\w.]+\.[ch]\b", diagram(src.parent / "ARCHITECTURE.md")))
    rank = {name: i for i, (_, files) in enumerate(LAYERS) for name in files}
    layer = {name: LAYERS[i][0] for name, i in rank.items()}
    problems = []
    files = sorted(p for p in src.iterdir() if p.suffix in (".c", ".h"))
    for path in files:
        if path.name not in rank:
            problems.append(f"{path.name}: in no layer (add it to LAYERS in tests/layers.py)")
            continue
        if path.name not in drawn:
            problems.append(f"{path.name}: not in ARCHITECTURE.md's Layers diagram")
        for inc in INCLUDE.findall(path.read_text()):
            if inc == "mote.h":  # the public API: below everything
                continue
            if inc not in rank:
                problems.append(f"{path.name}: includes {inc}, which is in no layer")
            elif rank[inc] > rank[path.name]:
                problems.append(f"{path.name} ({layer[path.name]}) includes {inc}, "
                                f"of the layer above it ({layer[inc]})")
    for p in problems:
        print(f"layers: {p}")
    print(f"layers: {len(files)} files, {len(problems)} upward or unplaced includes or files")
    return 1 if problems else 0


if __name__ == "__main__":
    here = pathlib.Path(__file__).resolve().parent.parent
    sys.exit(main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else here / "src"))
