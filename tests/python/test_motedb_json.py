"""JSON properties: the C writer (values.c) gives the text json's encoder gives,
and the C reader the values json.loads gives."""
import json

from hypothesis import given, settings, strategies as st

import motedb
from motedb import _core


def ref(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12) | \
    st.sampled_from(['"', "\\", "\n\r\t\b\f", "\x00\x01\x1f\x7f", "é€😀", ""])
scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | \
    st.floats(allow_nan=True, allow_infinity=True) | text
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) |
                      st.tuples(c, c) | st.dictionaries(text, c, max_size=4), max_leaves=20)


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(text, values, max_size=5) | st.lists(values, max_size=5))
def test_json_text_is_jsons(v):
    got = _core._json_text(v)
    assert isinstance(got, bytes)  # all of these are the C writer's
    assert got.decode() == ref(v)


def test_json_text_int_edges():
    """The C writer's own decimal formatting at the ends of the 64-bit range."""
    edges = [0, 1, -1, 9, 10, -10, 2**31, -2**31 - 1, 10**18, -10**18, 2**63 - 1, -2**63]
    assert _core._json_text(edges).decode() == ref(edges)
    assert _core._json_text({"n": -2**63}) == b'{"n":-9223372036854775808}'


def nested(depth):
    v = [0]
    for _ in range(depth):
        v = [v]
    return v


def test_json_text_falls_back_to_json():
    """What the C writer does not cover goes through json's encoder, whole."""
    class D(dict):
        pass
    for v in ({1: "int key"}, {"big": 2**70}, D(a=1), [1.5, D()], nested(100)):
        got = _core._json_text(v)
        assert isinstance(got, str) and got == ref(v)
    assert isinstance(_core._json_text(nested(60)), bytes)


class Doc(motedb.Entity):
    id: int = 0
    data: dict = motedb.field(default_factory=dict)
    items: list = motedb.field(default_factory=list)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(text, values, max_size=5), st.lists(values, max_size=5))
def test_json_round_trip(tmp_path_factory, d, items):
    path = tmp_path_factory.mktemp("j") / "j.mote"
    with motedb.open(path, sync=False) as s:
        box = s.box(Doc)
        obj = Doc(data=d, items=items)
        box.put(obj)
        got = box.get(obj.id)
        # through text: tuples come back as lists, NaN compares by its text
        assert ref(got.data) == ref(json.loads(ref(d)))
        assert ref(got.items) == ref(json.loads(ref(items)))


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(text, values, max_size=5) | st.lists(values, max_size=5))
def test_json_value_is_jsons(v):
    t = ref(v).encode()
    assert ref(_core._json_value(t)) == ref(json.loads(t))
    spaced = json.dumps(v, ensure_ascii=True, indent=1).encode()  # escapes, whitespace
    assert ref(_core._json_value(spaced)) == ref(json.loads(spaced))


def test_json_value_other_texts():
    """Texts the C reader leaves to json read as json reads them, errors alike."""
    for t in [b'{"a": 1}', b'["\\ud83d\\ude00", "\\u00e9\\/"]', b"[1e400,-0,-0.0,1E-2]",
              b"[" + b"9" * 80 + b"]", b"[NaN,Infinity,-Infinity]", nested(100).__repr__().encode(),
              b'{"k":1,"k":2}', b'[1.5e3]']:
        assert ref(_core._json_value(t)) == ref(json.loads(t)), t
    for bad in [b"[1,]", b'{"a" 1}', b"[01]", b'["a\x01"]', b"[1] x", b'["\\ud800"', b"{"]:
        try:
            json.loads(bad)
        except ValueError as e:
            want = type(e)
        else:
            raise AssertionError(bad)
        try:
            _core._json_value(bad)
        except ValueError as e:
            assert type(e) is want, bad
        else:
            raise AssertionError(bad)
