"""The real text: passages (paragraphs) that people wrote, read from what is on this machine without a network.

Two sources, present on every machine of this project's kind once the benchmark's environment exists:

  man     the English manual pages of the installed Debian packages, /usr/share/man/man1 .. man8 (the other
          languages' directories below /usr/share/man are left out). Regular files only (links and `.so`
          redirections name a page that is read once anyway). The Google Cloud CLI's pages (gcloud*: about
          16,600 pages generated from one template, which would otherwise be most of the corpus and make it
          repeat itself) are left out. Each page is read from its roff source: the text lines between the
          paragraph macros (.PP, .TP, .IP, .SH, ...) make one passage; macro definitions, tables and
          preformatted blocks (.nf/.fi, .EX/.EE: code and examples) are skipped; font changes and escapes are
          removed.
  pydoc   the docstrings (modules, classes, functions) of the running Python's standard library
          (sys.base_prefix/lib/python3.X, without site-packages and the test directories) and of the packages
          PYDOC_PACKAGES as pinned in requirements.txt (numpy, scipy, scikit-learn, matplotlib: installed in
          .bench-venvs/vectors/ anyway), split at blank lines.

A passage is kept if it has at least MIN_WORDS words and MIN_CHARS characters; whitespace is collapsed, and a
passage whose text (lower case) was seen before is dropped. The order is fixed (sources, then sorted paths, then
the order in the file), so the list is the same wherever the same files are installed.

The passages are cached in .bench-tmp/vectors/ under a hash of the inputs' paths, sizes and modification times
and of this module's EXTRACTION_VERSION; passages() returns (list of str, description for results.json).
"""

import ast
import gzip
import hashlib
import importlib.util
import json
import os
import re
import sys

EXTRACTION_VERSION = 1  # change when the extraction below changes: the cache is keyed by it
MIN_WORDS = 8
MIN_CHARS = 50
MAN_ROOT = "/usr/share/man"
MAN_EXCLUDE_PREFIXES = ("gcloud",)
PYDOC_PACKAGES = ("numpy", "scipy", "sklearn", "matplotlib")  # import names; their versions are recorded
PYDOC_SKIP_DIRS = {"site-packages", "__pycache__", "test", "tests", "idle_test", "lib2to3", "dist-packages"}

# roff: the macros that start a new paragraph (man and mdoc)
_BREAK = {"PP", "P", "LP", "IP", "TP", "TQ", "HP", "SH", "SS", "sp", "Sh", "Ss", "Pp", "It", "Bl", "El", "RS", "RE",
          "TH", "Dd", "Dt", "Os", "SY", "YS", "OP", "UR", "UE", "MT", "ME"}
# macros whose arguments are text (font changes: the alternating ones join their arguments without spaces)
_FONT_JOINED = {"BR", "RB", "IR", "RI", "BI", "IB"}
_FONT_SPACED = {"B", "I", "SM", "SB"}
# blocks skipped whole: preformatted text, tables, equations, macro definitions
_SKIP_BLOCKS = {"nf": "fi", "EX": "EE", "TS": "TE", "EQ": "EN", "de": "..", "de1": "..", "am": "..", "ig": ".."}
_SPECIAL = {"em": "-", "en": "-", "hy": "-", "mi": "-", "aq": "'", "dq": '"', "lq": '"', "rq": '"', "oq": "'",
            "cq": "'", "Fo": '"', "Fc": '"', "fo": "'", "fc": "'", "bu": "*", "co": "(c)", "rg": "(R)", "tm": "(TM)",
            "ti": "~", "ha": "^", "rs": "\\", "bv": "|", "ba": "|", "pl": "+", "eq": "=", "lt": "<", "gt": ">",
            "<=": "<=", ">=": ">=", "->": "->", "<-": "<-", "sl": "/", "sq": "*", "de": " degrees", "mu": "x",
            "aa": "'", "ga": "`", "ul": "_", "dg": "+", "ps": "P", "sc": "S", "Do": "$", "at": "@", "sh": "#",
            "lB": "[", "rB": "]", "lC": "{", "rC": "}", "la": "<", "ra": ">", "L\"": '"', "R\"": '"', "C`": '"',
            "C'": '"', "PI": "pi"}
_ESCAPES = re.compile(
    r"\\(?:"
    r"f(?:\[[^\]]*\]|\(..|.)"           # font changes
    r"|s[+-]?(?:\d|\(\d\d|\[\d+\])"      # size changes
    r"|[*n](?:\[[^\]]*\]|\(..|.)"        # strings and number registers
    r"|[hvwlLoXDbxNSRZk]'[^']*'"         # motions, widths, device controls
    r"|\((..)"                           # special characters \(xx
    r"|\[([^\]]*)\]"                     # special characters \[name]
    r"|(.)"                              # anything else: \- \e \& \| \^ \0 \~ \c \% ...
    r")", re.S)
_SINGLE = {"-": "-", "e": "\\", "\\": "\\", "0": " ", "~": " ", " ": " ", "t": " ", "'": "'", "`": "`", ".": ".",
           "E": "\\"}
_PYSTRING = re.compile(r'\\\*\((L"|R"|C`|C\')')


def _unescape(text):
    text = _PYSTRING.sub(lambda m: _SPECIAL[m.group(1)], text)

    def repl(m):
        if m.group(1) is not None:
            return _SPECIAL.get(m.group(1), "")
        if m.group(2) is not None:
            name = m.group(2)
            return _SPECIAL.get(name, name if len(name) == 1 else "")
        if m.group(3) is not None:
            return _SINGLE.get(m.group(3), "")
        return ""
    return _ESCAPES.sub(repl, text)


def _macro_args(rest):
    """A macro line's arguments: words, or "quoted phrases"."""
    return [a[1:-1] if a.startswith('"') and a.endswith('"') and len(a) > 1 else a
            for a in re.findall(r'"[^"]*"|\S+', rest)]


def man_paragraphs(source):
    """The paragraphs of one page's roff source (str), as collapsed text."""
    out, cur = [], []
    end_block = None

    def flush():
        if cur:
            out.append(" ".join(" ".join(cur).split()))
            cur.clear()

    for line in source.splitlines():
        if end_block is not None:
            if line.startswith((".", "'")) and line[1:].strip().split(" ")[0] == end_block.lstrip("."):
                end_block = None
            elif end_block == ".." and line.strip() == "..":
                end_block = None
            continue
        if line.startswith((".", "'")):
            body = line[1:].lstrip()
            if body.startswith('\\"') or body.startswith("\\#") or not body:
                continue
            name, _, rest = body.partition(" ")
            name = name.rstrip()
            if name in _SKIP_BLOCKS:
                flush()
                end_block = _SKIP_BLOCKS[name]
                continue
            if name in _BREAK:
                flush()
                continue
            if name in _FONT_JOINED:
                cur.append(_unescape("".join(_macro_args(rest))))
            elif name in _FONT_SPACED:
                cur.append(_unescape(" ".join(_macro_args(rest))))
            # every other request or macro (.if, .ds, .nr, .in, .ft, mdoc's .Nm ...) carries no prose: dropped
            continue
        if not line.strip():
            flush()
            continue
        cur.append(_unescape(line))
    flush()
    return out


def _man_files():
    files = []
    for sec in sorted(os.listdir(MAN_ROOT)) if os.path.isdir(MAN_ROOT) else []:
        if not re.fullmatch(r"man[1-8]", sec):
            continue
        d = os.path.join(MAN_ROOT, sec)
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            if f.startswith(MAN_EXCLUDE_PREFIXES) or os.path.islink(p) or not os.path.isfile(p):
                continue
            files.append(p)
    return files


def _read_man(path):
    try:
        with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
            raw = f.read().decode("utf-8", "replace")
    except (OSError, EOFError):
        return None
    if raw.lstrip().startswith(".so "):  # a redirection to another page
        return None
    return raw


def _stdlib_dir():
    return os.path.join(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def _pydoc_files():
    roots = [_stdlib_dir()] + [d for d in (_package_dir(p) for p in PYDOC_PACKAGES) if d]
    files = []
    for root in roots:
        found = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in PYDOC_SKIP_DIRS)
            found.extend(os.path.join(d, f) for f in fs if f.endswith(".py"))
        files.extend(sorted(found))
    return files


def _package_versions():
    from importlib import metadata
    dists = {"sklearn": "scikit-learn"}
    out = {}
    for p in PYDOC_PACKAGES:
        try:
            out[dists.get(p, p)] = metadata.version(dists.get(p, p))
        except metadata.PackageNotFoundError:
            out[dists.get(p, p)] = None
    return out


def docstring_paragraphs(source):
    """The paragraphs of the docstrings of one module's source (str)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                out.extend(" ".join(p.split()) for p in re.split(r"\n\s*\n", doc))
    return out


def _signature(files):
    h = hashlib.sha256(f"extraction {EXTRACTION_VERSION} {MIN_WORDS} {MIN_CHARS} {sys.version}\n".encode())
    for p in files:
        st = os.stat(p)
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _keep(text):
    return len(text) >= MIN_CHARS and len(text.split()) >= MIN_WORDS


def extract(man_files, pydoc_files):
    """(passages, per-source counts): every kept passage, in the fixed order, duplicates dropped."""
    seen = set()
    passages = []
    counts = {}

    def add(source, paragraphs):
        n = 0
        for p in paragraphs:
            if not _keep(p):
                continue
            key = p.lower()
            if key in seen:
                continue
            seen.add(key)
            passages.append(p)
            n += 1
        counts[source] = counts.get(source, 0) + n

    for p in man_files:
        raw = _read_man(p)
        if raw is not None:
            add("man", man_paragraphs(raw))
    for p in pydoc_files:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                add("pydoc", docstring_paragraphs(f.read()))
        except OSError:
            continue
    return passages, counts


def passages(cache_dir, log=print):
    """The corpus: (list of passages, description). Read from the cache when the inputs are unchanged."""
    man_files, pydoc_files = _man_files(), _pydoc_files()
    sig = _signature(man_files + pydoc_files)
    path = os.path.join(cache_dir, f"corpus-{sig[:16]}.json.gz")
    if os.path.exists(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        return data["passages"], data["description"]
    log(f"extracting passages from {len(man_files):,} manual pages and {len(pydoc_files):,} Python modules "
        f"(cached afterwards)")
    texts, counts = extract(man_files, pydoc_files)
    description = {
        "sources": {
            "man": f"English manual pages of the installed Debian packages ({MAN_ROOT}/man1..man8; regular files, "
                   f"not links or .so redirections; gcloud* pages excluded): one passage per roff paragraph",
            "pydoc": f"docstrings of the Python {sys.version.split()[0]} standard library ({_stdlib_dir()}, without "
                     f"site-packages and test directories) and of the packages {', '.join(PYDOC_PACKAGES)} "
                     f"(pinned in requirements.txt): one passage per paragraph",
        },
        "files": {"man": len(man_files), "pydoc": len(pydoc_files)},
        "pydoc_package_versions": _package_versions(),
        "passages_per_source": counts,
        "passages": len(texts),
        "min_words": MIN_WORDS,
        "min_chars": MIN_CHARS,
        "duplicates": "dropped (same text in lower case)",
        "extraction_version": EXTRACTION_VERSION,
        "inputs_signature": sig,
        "passages_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
    }
    os.makedirs(cache_dir, exist_ok=True)
    tmp = path + f".tmp{os.getpid()}"
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        json.dump({"description": description, "passages": texts}, f)
    os.replace(tmp, path)
    return texts, description
