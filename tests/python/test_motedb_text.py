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
