"""Full-text search: the tokenizer (motedb.tokenize, mote_tokenize in C)
checked against its definition, tools/gen_unicode.py's `classify` and
`fold`: every code point alone, and random text (hypothesis) through a
reference tokenizer written here from those two functions. Test data:
synthetic (every code point; random strings over chosen alphabets)."""

from __future__ import annotations

import io
import pathlib
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import motedb

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_unicode as gen  # noqa: E402

TOKEN_MAX = 255
same_unicode = pytest.mark.skipif(
    unicodedata.unidata_version != "14.0.0",
    reason=f"the tables are Unicode 14.0.0, this Python has {unicodedata.unidata_version}")


def reference(text: str, remove: bool = True) -> list[str]:
    """The tokens of text by mote.h's rules, from the generator's functions."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    full = False
    in_run = False

    def emit() -> None:
        if cur:
            out.append("".join(cur))

    for ch in text:
        cp = ord(ch)
        k = gen.SEP if 0xD800 <= cp <= 0xDFFF else gen.classify(cp)
        if k in (gen.SEP, gen.IDEO):
            if in_run:
                emit()
            in_run, cur, size, full = False, [], 0, False
            if k == gen.IDEO:
                out.append(chr(gen.fold(cp, remove)))
            continue
        in_run = True
        if k == gen.DIACRITIC and remove:
            continue
        f = chr(gen.fold(cp, remove)) if k == gen.WORD or not remove else ""
        n = len(f.encode())
        if full or size + n > TOKEN_MAX:
            full = True
            continue
        cur.append(f)
        size += n
    if in_run:
        emit()
    return out


@same_unicode
@pytest.mark.parametrize("keep", [False, True])
def test_every_code_point_alone(keep: bool) -> None:
    # each code point between NULs: its class and folding, all 1.1 million
    cps = [cp for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    text = "\0".join(map(chr, cps))
    want = []
    for cp in cps:
        k = gen.classify(cp)
        if k in (gen.WORD, gen.IDEO) or (k == gen.DIACRITIC and keep):
            want.append(chr(gen.fold(cp, not keep)))
    got = motedb.tokenize(text, keep_diacritics=keep)
    if got != want:
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        pytest.fail(f"token {first}: C gives {got[first]!r} (U+{ord(got[first][0]):04X}), "
                    f"the definition {want[first]!r} (U+{ord(want[first][0]):04X})")


@same_unicode
def test_tables_match_the_generator() -> None:
    # src/unicode_tab.h is what tools/gen_unicode.py writes (no hand edits,
    # none forgotten after a rule changed)
    out = io.StringIO()
    gen.emit(out)
    assert (ROOT / "src" / "unicode_tab.h").read_text() == out.getvalue()


# Alphabets that meet the rules' edges: ASCII words and separators, Latin
# with precomposed and combining diacritics, Greek (final sigma, tonos),
# Cyrillic, CJK, Hangul, Devanagari (marks inside words), emoji (separators
# outside the BMP), Deseret (case outside the BMP), NUL.
ALPHABET = st.sampled_from(
    list("aZ09 _-.,\t\n") + list("éÉêÅøßİı") + ["\u0301", "\u0308", "\u20d7"]
    + list("ΣσςάΆ") + list("йЙёДд") + list("中文あア") + list("한국")
    + list("हिन्") + ["\U0001F600", "\U00010400", "\U00010428", "\0", "\uf8ff"])


@same_unicode
@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=60).map("".join), st.booleans())
def test_random_text_against_reference(text: str, keep: bool) -> None:
    assert motedb.tokenize(text, keep_diacritics=keep) == reference(text, not keep)


@same_unicode
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["a", "é", "中", "\U00010400", "ß"]),
       st.integers(min_value=100, max_value=400))
def test_long_runs_are_cut_at_a_character(ch: str, n: int) -> None:
    text = ch * n + " end"
    got = motedb.tokenize(text)
    assert got == reference(text)
    assert all(len(t.encode()) <= TOKEN_MAX for t in got) and got[-1] == "end"


def fts5_porter(words: list[str]) -> list[str]:
    """Each word's term in SQLite FTS5 with tokenize='porter unicode61 remove_diacritics 2'
    (one row per word; the vocabulary table's instances give the row's term)."""
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 "
               "remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(words, 1)))
    term = {doc: t for t, doc in db.execute("SELECT term, doc FROM v")}
    return [term[i] for i in range(1, len(words) + 1)]


def test_stems_equal_fts5_porter() -> None:
    """stem=True gives SQLite FTS5's porter terms. Real words: every token of the docstrings
    of 25 standard library modules (text others wrote, offline); synthetic ones: random
    stems with the suffixes each Porter rule looks for, doubled, in every order."""
    import importlib
    import random
    import warnings
    words: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ["os", "collections", "json", "argparse", "typing", "asyncio", "email",
                     "subprocess", "logging", "unittest", "decimal", "datetime", "pathlib",
                     "re", "shutil", "inspect", "threading", "socket", "tarfile", "zipfile",
                     "pydoc", "difflib", "textwrap", "statistics", "functools"]:
            m = importlib.import_module(name)
            for obj in [m] + [getattr(m, a, None) for a in dir(m)]:
                if isinstance(getattr(obj, "__doc__", None), str):
                    words.update(motedb.tokenize(obj.__doc__))
    assert len(words) > 3000
    rng = random.Random(19)
    suffixes = ["s", "sses", "ies", "ss", "eed", "ed", "ing", "at", "bl", "iz", "y", "ational",
                "tional", "enci", "anci", "izer", "bli", "alli", "entli", "eli", "ousli",
                "ization", "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti",
                "iviti", "biliti", "logi", "icate", "ative", "alize", "iciti", "ical", "ful",
                "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment",
                "ent", "sion", "tion", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
                "e", "ll", "l", "z"]
    for _ in range(20000):
        stem = "".join(rng.choice("bcdfghlmnprstvwxyzaeiouy") for _ in range(rng.randint(1, 6)))
        words.add(stem + "".join(rng.choice(suffixes) for _ in range(rng.randint(1, 2))))
    words_l = sorted(words)
    want = fts5_porter(words_l)
    got = [motedb.tokenize(w, stem=True) for w in words_l]
    bad = [(w, g, x) for w, g, x in zip(words_l, got, want) if g != [x]]
    assert not bad, bad[:20]
    assert motedb.tokenize("Connections were RUNNING", stem=True) == ["connect", "were", "run"]


def test_examples_and_errors() -> None:
    assert motedb.tokenize("Élan vital, CAFÉ crème") == ["elan", "vital", "cafe", "creme"]
    assert motedb.tokenize("Élan", keep_diacritics=True) == ["élan"]
    assert motedb.tokenize("ERR_CONN_TIMEOUT") == ["err", "conn", "timeout"]
    assert motedb.tokenize("中文 text") == ["中", "文", "text"]
    assert motedb.tokenize("") == []
    with pytest.raises(TypeError):
        motedb.tokenize(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        motedb.tokenize("x", True)  # type: ignore[misc]
    with pytest.raises(UnicodeEncodeError):
        motedb.tokenize("lone \ud83d surrogate")


# ---- full-text indexes and matches() ------------------------------------------------
# Data: synthetic (random documents over a small vocabulary with accents
# and CJK, so that terms repeat), and in the FTS5 comparison the same
# corpus given to SQLite.

import math  # noqa: E402
import sqlite3  # noqa: E402
from typing import Annotated  # noqa: E402

K1, B = 1.2, 0.75
WORDS = ["alpha", "Beta", "gamma", "délta", "DELTA", "epsilon", "zeta", "eta", "theta",
         "iota", "kappa", "lambda", "mu", "timeout", "error", "connection", "中", "文"]


class Memory(motedb.Entity):
    id: int = 0
    topic: Annotated[int, motedb.Index] = 0
    text: Annotated[str, motedb.FullText] | None = None


def bm25_reference(texts: dict[int, str | None], query: str, all_terms: bool = False,
                   keep=lambda i: True) -> list[tuple[int, float]]:
    """FTS5's bm25() (negated), from the texts and the reference tokenizer."""
    docs = {i: reference(t) for i, t in texts.items() if t is not None}
    terms = list(dict.fromkeys(reference(query)))
    n = len(docs)
    if not n or not terms:
        return []
    avgdl = sum(len(d) for d in docs.values()) / n
    df = {t: sum(1 for d in docs.values() if t in d) for t in terms}
    out = []
    for i, d in docs.items():
        held = [t for t in terms if t in d]
        if not held or (all_terms and len(held) < len(terms)) or not keep(i):
            continue
        s = 0.0
        for t in held:
            idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5))
            idf = idf if idf > 0 else 1e-6
            tf = d.count(t)
            s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avgdl))
        out.append((i, s))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


def same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert len(got) == len(want)
    for (gi, gs), (wi, ws) in zip(got, want):
        assert math.isclose(gs, ws, rel_tol=1e-9, abs_tol=1e-15), (gi, gs, wi, ws)
    # where ids differ in order, their scores are equal to the last bits
    for (gi, gs), (wi, ws) in zip(got, want):
        if gi != wi:
            assert math.isclose(gs, ws, rel_tol=1e-9)


texts_st = st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join),
                    min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(texts_st, st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
       st.booleans(), st.integers(min_value=1, max_value=40), st.integers(0, 2))
def test_match_scores_equal_reference(tmp_path_factory, texts, query, all_terms, k, topic):
    path = tmp_path_factory.mktemp("ft") / "m.mote"
    with motedb.open(str(path)) as store:
        box = store.box(Memory)
        ids = box.put_many([Memory(topic=i % 3, text=t) for i, t in enumerate(texts)])
        by_id = {i: t for i, t in zip(ids, texts)}
        topics = {i: n % 3 for n, i in enumerate(ids)}
        cond = Memory.text.matches(query, k=k, all_terms=all_terms)
        got = [(m.id, s) for m, s in box.query(cond).find_with_scores()]
        same_ranking(got, bm25_reference(by_id, query, all_terms)[:k])
        filtered = [(m.id, s) for m, s in
                    box.query(cond & (Memory.topic == topic)).find_with_scores()]
        want = bm25_reference(by_id, query, all_terms, keep=lambda i: topics[i] == topic)[:k]
        same_ranking(filtered, want)


def fts5_table(texts: list[str], porter: bool = False) -> sqlite3.Connection:
    """An in-memory FTS5 table t(x) of texts (rowids from 1), tokenized as MoteDB does (with
    porter: as an index that stems, motedb.FullText(stem=True))."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='" + ("porter " if porter else "")
                    + "unicode61 remove_diacritics 2')")
    except sqlite3.OperationalError:
        pytest.skip("this sqlite3 has no FTS5")
    con.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(texts, 1))
    return con


def test_scores_equal_sqlite_fts5(tmp_path) -> None:
    # the same corpus in SQLite FTS5 (unicode61, remove_diacritics 2): bm25()
    # negated equals the score, for every document, ASCII and Latin text
    rng = __import__("random").Random(7)
    words = [w for w in WORDS if w.isascii() or w == "délta"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 15))) for _ in range(300)]
    con = fts5_table(texts)
    with motedb.open(str(tmp_path / "f.mote")) as store:
        box = store.box(Memory)
        box.put_many([Memory(id=i, text=t) for i, t in enumerate(texts, 1)])
        for query in ["alpha", "timeout error", "delta", "connection zeta mu", "kappa iota"]:
            fts = {rowid: -score for rowid, score in con.execute(
                "SELECT rowid, bm25(t) FROM t WHERE t MATCH ?",
                [" OR ".join(query.split())])}
            ours = {m.id: s for m, s in
                    box.query(Memory.text.matches(query, k=1000)).find_with_scores()}
            assert ours.keys() == fts.keys()
            for i, s in ours.items():
                assert math.isclose(s, fts[i], rel_tol=1e-9), (query, i, s, fts[i])


class Rollback(Exception):
    pass


def test_changes_aborts_and_reopen(tmp_path) -> None:
    rng = __import__("random").Random(3)
    path = str(tmp_path / "c.mote")
    model: dict[int, tuple[int, str | None]] = {}
    for round_ in range(12):
        with motedb.open(path) as store:
            box = store.box(Memory)
            for _ in range(6):
                aborted = rng.random() < 0.25
                saved = dict(model)
                try:
                    with store.write():
                        for _ in range(rng.randint(1, 25)):
                            i = rng.randint(1, 60)
                            r = rng.random()
                            if r < 0.5:
                                t = None if rng.random() < 0.1 else " ".join(
                                    rng.choice(WORDS) for _ in range(rng.randint(0, 10)))
                                box.put(Memory(id=i, topic=i % 3, text=t))
                                model[i] = (i % 3, t)
                            elif r < 0.7 and i in model:
                                t = " ".join(rng.choice(WORDS) for _ in range(3))
                                obj = box.get(i)
                                obj.text = t
                                box.put(obj)
                                model[i] = (model[i][0], t)
                            elif i in model:
                                box.remove(i)
                                del model[i]
                        # a match inside the transaction sees its own changes
                        q = "timeout alpha"
                        got = [(m.id, s) for m, s in
                               box.query(Memory.text.matches(q, k=100)).find_with_scores()]
                        same_ranking(got, bm25_reference(
                            {i: t for i, (_, t) in model.items()}, q)[:100])
                        if aborted:
                            raise Rollback
                except Rollback:
                    model = saved
            for q in ["alpha", "gamma theta", "中 timeout", "delta"]:
                got = [(m.id, s) for m, s in
                       box.query(Memory.text.matches(q, k=100)).find_with_scores()]
                same_ranking(got, bm25_reference({i: t for i, (_, t) in model.items()}, q)[:100])


def test_index_declared_over_stored_texts(tmp_path) -> None:
    path = str(tmp_path / "d.mote")

    class Note(motedb.Entity):
        id: int = 0
        text: str = ""

    with motedb.open(path) as store:
        store.box(Note).put_many([Note(text="the timeout error"), Note(text="a cup of tea")])

    class Note(motedb.Entity):  # noqa: F811 (the same entity, now with the index)
        id: int = 0
        text: Annotated[str, motedb.FullText] = ""

    with motedb.open(path) as store:
        box = store.box(Note)
        assert [n.text for n in box.query(Note.text.matches("TEA")).find()] == ["a cup of tea"]


def test_match_errors() -> None:
    with pytest.raises(TypeError, match="full-text index"):
        Memory.topic.matches("x")
    with pytest.raises(TypeError):
        Memory.text.matches(b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        Memory.text.matches("x", k=0)
    with pytest.raises(TypeError, match="& only"):
        Memory.text.matches("x") | (Memory.topic == 1)
    with pytest.raises(TypeError, match="negated"):
        ~Memory.text.matches("x")
    with pytest.raises(TypeError, match="one nearest"):
        Memory.text.matches("x") & Memory.text.matches("y")
    with pytest.raises(TypeError, match="str properties"):
        class Bad(motedb.Entity):
            id: int = 0
            n: Annotated[int, motedb.FullText] = 0


class Doc(motedb.Entity):
    id: int = 0
    title: Annotated[str, motedb.FullText] | None = None
    body: Annotated[str, motedb.FullText] | None = None
    note: Annotated[str, motedb.FullText] | None = None
    topic: int = 0


def test_several_properties_equal_fts5_column_weights(tmp_path) -> None:
    # title, body and note searched at once: the documents and scores of an FTS5 table with
    # those three columns ranked by bm25(t, w1, w2, w3), for words, phrases, prefixes, NOT
    # and AND across columns; texts synthetic (random words), some properties None. In the
    # second store every object has a body (N counted without a pass over the lengths).
    rng = __import__("random").Random(11)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "thetas", "kappa",
             "timeout", "error", "connection", "connect"]

    def text(n: int, none: float) -> str | None:
        return None if rng.random() < none else " ".join(rng.choice(words)
                                                         for _ in range(rng.randint(1, n)))

    for every_body in (False, True):
        rows = [(i, text(5, 0.25), text(20, 0.0 if every_body else 0.25), text(8, 0.5))
                for i in range(1, 301)]
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(title, body, note, "
                        "tokenize='unicode61 remove_diacritics 2')")
        except sqlite3.OperationalError:
            pytest.skip("this sqlite3 has no FTS5")
        con.executemany("INSERT INTO t(rowid, title, body, note) VALUES (?, ?, ?, ?)",
                        [r for r in rows if any(x is not None for x in r[1:])])
        with motedb.open(str(tmp_path / f"d{every_body}.mote")) as store:
            box = store.box(Doc)
            box.put_many([Doc(id=i, title=a, body=b, note=c) for i, a, b, c in rows])
            for query in ["alpha", "timeout error", '"alpha beta" OR theta*', "gamma NOT delta",
                          "kappa AND connection", "conn* NOT (zeta OR eta)"]:
                for w in [(1.0, 1.0, 1.0), (2.0, 0.5, 1.0), (0.0, 3.0, 10.0)]:
                    fts = {r: -s for r, s in con.execute(
                        "SELECT rowid, bm25(t, ?, ?, ?) FROM t WHERE t MATCH ?", [*w, query])}
                    cond = Doc.title.matches(query, k=1000, all_terms=True, weight=w[0],
                                             also={Doc.body: w[1], Doc.note: w[2]})
                    ours = {m.id: s for m, s in box.query(cond).find_with_scores()}
                    assert ours.keys() == fts.keys(), (query, w)
                    for i, s in ours.items():
                        assert math.isclose(s, fts[i], rel_tol=1e-9, abs_tol=1e-12), (query, w, i)
            # a word list (OR), k and a filter: the best k of FTS5's ranking among the kept
            kept = {i for i, *_ in rows if i % 3 == 0}
            fts = sorted(((-s, r) for r, s in con.execute(
                "SELECT rowid, bm25(t, 3, 1, 1) FROM t WHERE t MATCH 'timeout OR kappa'")
                if r in kept), key=lambda x: (-x[0], x[1]))[:7]
            box.put_many([Doc(id=i, title=a, body=b, note=c, topic=1 if i in kept else 0)
                          for i, a, b, c in rows])
            got = box.query(Doc.title.matches("timeout kappa", k=7, weight=3, also=[Doc.body,
                                                                                  Doc.note])
                            & (Doc.topic == 1)).find_with_scores()
            assert [m.id for m, _ in got] == [r for _, r in fts]
            assert all(math.isclose(s, f, rel_tol=1e-9) for (_, s), (f, _) in zip(got, fts))
            # one property with weight 1 is the single-property match; weight 2 changes tf only
            one = box.query(Doc.body.matches("alpha theta", k=50)).find_with_scores()
            same = box.query(Doc.body.matches("alpha theta", k=50, also={})).find_with_scores()
            assert [(m.id, s) for m, s in one] == [(m.id, s) for m, s in same]
            two = {m.id: s for m, s in
                   box.query(Doc.body.matches("alpha", k=1000, weight=2)).find_with_scores()}
            con.execute("CREATE VIRTUAL TABLE b USING fts5(x, "
                        "tokenize='unicode61 remove_diacritics 2')")
            con.executemany("INSERT INTO b(rowid, x) VALUES (?, ?)",
                            [(i, body) for i, _, body, _ in rows if body is not None])
            fts = {r: -s for r, s in con.execute(
                "SELECT rowid, bm25(b, 2) FROM b WHERE b MATCH 'alpha'")}
            assert two.keys() == fts.keys()
            assert all(math.isclose(s, fts[i], rel_tol=1e-9) for i, s in two.items())
            assert repr(Doc.title.matches("x", weight=2.0, also={Doc.body: 0.5})) == \
                "Doc.title.matches('x', k=10, weight=2.0, also={Doc.body: 0.5})"


def test_several_properties_errors() -> None:
    with pytest.raises(TypeError, match="property of Doc"):
        Doc.title.matches("x", also=[Memory.text])
    with pytest.raises(TypeError, match="full-text index"):
        Doc.title.matches("x", also=[Doc.topic])
    with pytest.raises(ValueError, match="named twice"):
        Doc.title.matches("x", also={Doc.body: 1, Doc.title: 2})
    for bad in (-1, float("nan"), True, "2", 2e9):
        with pytest.raises(ValueError, match="number from 0 to 1e9"):
            Doc.title.matches("x", weight=bad)
        with pytest.raises(ValueError, match="number from 0 to 1e9"):
            Doc.title.matches("x", also={Doc.body: bad})
    with pytest.raises(TypeError, match="dict"):
        Doc.title.matches("x", also=3)

    class Mixed(motedb.Entity):
        id: int = 0
        a: Annotated[str, motedb.FullText] = ""
        b: Annotated[str, motedb.FullText(stem=True)] = ""

    with pytest.raises(ValueError, match="stem"):
        Mixed.a.matches("x", also=[Mixed.b])


class Fact(motedb.Entity):
    id: int = 0
    topic: Annotated[int, motedb.Index] = 0
    text: Annotated[str, motedb.FullText] = ""
    vec: Annotated[list[float], motedb.Vector(2)] = motedb.field(default_factory=lambda: [0.0, 0.0])


def rrf_k(k: float, *lists: list[int]) -> list[tuple[int, float]]:
    """Reciprocal Rank Fusion with constant k of ranked id lists: best first, ties by id."""
    score: dict[int, float] = {}
    for ids in lists:
        for rank, i in enumerate(ids, 1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(score.items(), key=lambda x: (-x[1], x[0]))


def rrf(*lists: list[int]) -> list[tuple[int, float]]:
    """Reciprocal Rank Fusion with mote.h's default constant, 60."""
    return rrf_k(60, *lists)


def facts_box(store, seed: int):
    """The box of 200 Facts of random words (WORDS, synthetic), topics 0-2 and 2-d vectors."""
    rng = __import__("random").Random(seed)
    box = store.box(Fact)
    box.put_many([Fact(topic=i % 3, text=" ".join(rng.choice(WORDS) for _ in range(8)),
                       vec=[rng.random(), rng.random()]) for i in range(200)])
    return box


def weighted(w: float, text: list[tuple[int, float]], near: list[tuple[int, float]]
             ) -> list[tuple[int, float]]:
    """The weighted fusion of mote.h: each list's scores min-max scaled (best 1, worst 0, all
    equal 1; BM25 higher is better, distances lower), w for the text, 1 - w for the nearest."""
    score: dict[int, float] = {}
    for weight, pairs, higher in ((w, text, True), (1 - w, near, False)):
        lo, hi = min(s for _, s in pairs), max(s for _, s in pairs)
        for i, s in pairs:
            v = 1.0 if hi <= lo else ((s - lo) if higher else (hi - s)) / (hi - lo)
            score[i] = score.get(i, 0.0) + weight * v
    return sorted(score.items(), key=lambda x: (-x[1], x[0]))


def test_hybrid_fusions(tmp_path) -> None:
    with motedb.open(str(tmp_path / "f.mote")) as store:
        box = facts_box(store, 5)
        words = Fact.text.matches("beta timeout", k=14) & (Fact.topic != 2)
        near = Fact.vec.nearest([0.7, 0.1], k=11) & (Fact.topic != 2)
        text = [(o.id, s) for o, s in box.query(words).find_with_scores()]
        vec = [(o.id, s) for o, s in box.query(near).find_with_scores()]
        for how, want in [({"text_weight": 0.25}, weighted(0.25, text, vec)),
                          ({"text_weight": 1.0}, weighted(1.0, text, vec)),
                          ({"text_weight": 0.0}, weighted(0.0, text, vec)),
                          ({"rrf_k": 5}, rrf_k(5, [i for i, _ in text], [i for i, _ in vec])),
                          ({"rrf_k": 60}, rrf([i for i, _ in text], [i for i, _ in vec]))]:
            got = [(o.id, s) for o, s in box.query(words & near).fusion(**how).find_with_scores()]
            assert [i for i, _ in got] == [i for i, _ in want], how
            assert all(math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
                       for (_, a), (_, b) in zip(got, want)), how
        q = box.query(words & near).fusion(text_weight=0.5)
        assert q.offset(2).limit(3).ids() == [i for i, _ in weighted(0.5, text, vec)[2:5]]
        with pytest.raises(TypeError, match="one of"):
            box.query(words & near).fusion()
        with pytest.raises(TypeError, match="one of"):
            box.query(words & near).fusion(rrf_k=1, text_weight=0.5)
        with pytest.raises(ValueError, match="0 to 1"):
            box.query(words & near).fusion(text_weight=1.5)
        with pytest.raises(ValueError, match="above 0"):
            box.query(words & near).fusion(rrf_k=0)
        with pytest.raises(TypeError, match="is a number"):
            box.query(words & near).fusion(text_weight="0.5")


def test_hybrid_fuses_by_rank(tmp_path) -> None:
    with motedb.open(str(tmp_path / "h.mote")) as store:
        box = facts_box(store, 11)
        for topic in (None, 1):
            words = Fact.text.matches("alpha timeout", k=15)
            near = Fact.vec.nearest([0.2, 0.9], k=12, distance="euclidean")
            flt = (Fact.topic == topic) if topic is not None else None

            def q(c):
                return box.query(c & flt) if flt is not None else box.query(c)

            text_ids = q(words).ids()
            vec_ids = q(near).ids()
            got = [(o.id, s) for o, s in q(words & near).find_with_scores()]
            want = rrf(text_ids, vec_ids)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert all(math.isclose(a, b, rel_tol=1e-12) for (_, a), (_, b) in zip(got, want))
            assert q(near & words).offset(3).limit(4).ids() == [i for i, _ in want[3:7]]
            assert q(words & near).count() == len(want)
    with pytest.raises(TypeError, match="one matches"):
        Fact.text.matches("x") & Fact.vec.nearest([0, 1]) & Fact.text.matches("y")


QUERIES = [
    '"alpha beta"', '"beta gamma delta"', "alp*", "ep*", "alpha NOT beta", "alpha AND beta",
    "alpha OR zeta", "(alpha OR zeta) AND timeout", "timeout NOT (error OR alpha)",
    '"timeout error" OR conn*', 'kappa "iota kappa" NOT mu', "theta* NOT theta", "mu AND NOT",
]


def same_as_fts5(con: sqlite3.Connection, box, prop, query: str) -> None:
    """The query's documents and scores (implicit AND) equal FTS5's bm25() in con."""
    fts = {r: -s for r, s in con.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ?",
                                         [query])}
    ours = {m.id: s for m, s in box.query(
        prop.matches(query, k=1000, all_terms=True)).find_with_scores()}
    assert ours.keys() == fts.keys(), query
    for i, s in ours.items():
        assert math.isclose(s, fts[i], rel_tol=1e-9), (query, i, s, fts[i])


def test_query_language_equals_fts5(tmp_path) -> None:
    # phrases, prefixes, NOT, AND / OR, parentheses: the same documents and
    # the same scores as FTS5's bm25() (implicit AND on both sides)
    rng = __import__("random").Random(5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "thetas", "iota",
             "kappa", "mu", "timeout", "error", "connection", "connect", "alphabet"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 14))) for _ in range(400)]
    con = fts5_table(texts)
    with motedb.open(str(tmp_path / "q.mote")) as store:
        box = store.box(Memory)
        box.put_many([Memory(id=i, text=t) for i, t in enumerate(texts, 1)])
        for query in QUERIES:
            if query == "mu AND NOT":
                with pytest.raises(ValueError, match="at 7"):
                    Memory.text.matches(query, all_terms=True)
                continue
            same_as_fts5(con, box, Memory.text, query)


class Stemmed(motedb.Entity):
    id: int = 0
    text: Annotated[str, motedb.FullText(stem=True)] = ""


def test_stemming_index_equals_fts5_porter(tmp_path) -> None:
    """An index that stems against FTS5's porter tokenizer: the same documents and bm25()
    scores for words, phrases, AND / OR / NOT, prefixes (matched against the stems: FTS5
    does not stem a prefix either). Texts: synthetic, of English words in many forms."""
    rng = __import__("random").Random(23)
    words = ["connect", "connected", "connecting", "connection", "connections", "general",
             "generalizations", "generate", "running", "runs", "ran", "timeout", "timeouts",
             "error", "errors", "erroneous", "happy", "happiness", "relational", "relate",
             "alpha", "caresses", "ponies", "agreed", "hopping", "hop"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(400)]
    con = fts5_table(texts, porter=True)
    with motedb.open(str(tmp_path / "s.mote")) as store:
        box = store.box(Stemmed)
        box.put_many([Stemmed(id=i, text=t) for i, t in enumerate(texts, 1)])
        for query in ["connection", "timeouts error", '"connected timeout"', "happiness NOT hop",
                      "relational AND generalizations", "connect* OR gen*", "runs", "erroneous",
                      "(ponies OR caresses) AND agreed", "connecti*", "hopping running"]:
            same_as_fts5(con, box, Stemmed.text, query)
    assert repr(motedb.FullText(stem=True)) == "motedb.FullText(stem=True)"
    assert motedb.FullText(stem=False) is motedb.FullText
    with pytest.raises(TypeError, match="bool"):
        motedb.FullText(stem="yes")


@pytest.mark.parametrize("query, where", [
    ('"alpha beta', 0), ("alpha (beta", 11), ("alpha )", 6), ("(", 1), ("OR alpha", 0),
    ("al*pha", 2), ("NOT", 0),
])
def test_query_errors_name_the_position(query: str, where: int) -> None:
    with pytest.raises(ValueError, match=f"at {where}"):
        Memory.text.matches(query)
