#!/usr/bin/env bash
# tests/cli/run.sh BUILD_DIR — the mote CLI on real stores: stat, check (exit
# codes 0/1/2), dump (strict JSON lines: its rule for times, non-finite
# floats, JSON text, bad UTF-8 and to-many links), compact, deltas (a copy
# kept level, deltas refused); damaged files; a store another process has
# open.
set -u
B=${1:-build}
D=$(mktemp -d /var/tmp/mote-cli.XXXXXX)
trap 'rm -rf "$D"' EXIT
pass=0 fail=0
t() { # name, command...
    local name=$1; shift
    if "$@" >"$D/out" 2>&1; then pass=$((pass + 1)); echo "ok    $name"
    else fail=$((fail + 1)); echo "FAIL  $name"; sed 's/^/      /' "$D/out" | tail -20; fi
}
exit_is() { local want=$1; shift; "$@"; [ $? -eq "$want" ]; }

"$B/examples/objects" "$D/a.mote" >/dev/null
"$B/examples/objects" "$D/a.mote" >/dev/null # twice: the entity is reopened
t "stat" bash -c "'$B/mote' stat '$D/a.mote' | grep -q 'entries:'"
t "stat: bytes per object" bash -c "'$B/mote' stat '$D/a.mote' | grep -Eq '^entity Note: 10 objects, [0-9]+ record bytes \([0-9.]+ bytes per object\)$'"
t "check consistent: exit 0" exit_is 0 "$B/mote" check "$D/a.mote"
t "dump: 10 valid JSON lines" bash -c "'$B/mote' dump '$D/a.mote' Note | python3 -c '
import codecs, json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 10 and rows[0][\"_entity\"] == \"Note\" and rows[0][\"id\"] == 1, rows
assert rows[0][\"topic\"] is None and rows[0][\"level\"] == 10
'"
t "dump unknown entity: exit 1" exit_is 1 "$B/mote" dump "$D/a.mote" Nope
# dump's rule for values JSON has no plain form for (tools/mote.c): a store
# with each of them, made through the public API by tests/cli/mkstore.c
"$B/tests/cli/mkstore" "$D/d.mote"
"$B/tests/cli/mkstore" --near "$D/near.mote"
t "stat: a vector index" bash -c "'$B/mote' stat '$D/near.mote' | grep -Eq '^  vector index vec: 300 vectors, [0-9]+ bytes \([0-9.]+ bytes per vector, [0-9.]+ links; vectors 16 bytes each, in the objects\), [0-9]+ levels, euclidean, m 8, ef_construction 200$'"
# a store another process has open, in a write transaction: stat, check and
# dump read the latest commit (3 Tags; the held one is not committed)
coproc HOLD { "$B/tests/cli/mkstore" --hold "$D/live.mote"; }
read -r held <&"${HOLD[0]}"
t "mkstore holds a store open" test "$held" = holding
t "stat on a store open elsewhere" bash -c "'$B/mote' stat '$D/live.mote' | grep -q '^entity Tag: 3 objects'"
t "check on a store open elsewhere: exit 0" exit_is 0 "$B/mote" check "$D/live.mote"
t "dump on a store open elsewhere: the committed Tags" bash -c "[ \$('$B/mote' dump '$D/live.mote' Tag | wc -l) -eq 3 ]"
echo >&"${HOLD[1]}"
wait "$HOLD_PID"
t "the held transaction committed after" bash -c "[ \$('$B/mote' dump '$D/live.mote' Tag | wc -l) -eq 4 ]"
cat > "$D/dump.py" <<'PY'
import codecs, json, sys
from datetime import date, datetime, timedelta

def no_constant(tok):
    raise ValueError("bare " + tok + " in the dump")

def rows(path, entity):  # the lines of one entity (None: all), each checked
    raw = open(path, "rb").read()
    assert raw.endswith(b"\n"), raw[-100:]
    out = []
    for line in raw.split(b"\n")[:-1]:
        if entity is None or line.startswith(b'{"_entity": "%s"' % entity.encode()):
            # strict UTF-8 and strict JSON
            out.append(json.loads(line.decode("utf-8"), parse_constant=no_constant))
    return out

def iso_date(days):  # the proleptic calendar repeats every 400 years
    o = days + date(1970, 1, 1).toordinal()
    k = (o - 1) // 146097
    d = date.fromordinal(o - 146097 * k)
    y = d.year + 400 * k
    return (f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}") + d.strftime("-%m-%d")

def iso_ts(ns):
    s, frac = divmod(ns, 10**9)
    t = (datetime(1970, 1, 1) + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S")
    f = f"{frac:09d}"
    for digits in (3, 6, 9):
        if frac and f[digits:].strip("0") == "":
            return f"{t}.{f[:digits]}Z"
    return t + "Z"

path, what = sys.argv[1], sys.argv[2]
if what == "all":
    r = rows(path, None)
    assert [x["_entity"] for x in r] == (["Doc"] * 13 + ["Fuzz"] * 3000 + ["Tag"] * 3 +
                                         ["Thing"] * 5 + ["When"] * 400)
elif what == "Thing":
    r = rows(path, "Thing")
    nulls = dict(ts=None, day=None, f64=None, f32=None, vec=None, doc=None, name=None,
                 tags=[], dec=None, raw=None, flag=None, num=None)
    want = [
        dict(ts="2023-11-14T22:13:20.123456789Z", day="1969-12-31", f64="NaN", f32=1.5,
             vec=[1, "NaN", -0.5],
             doc={"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "s": "NaN",
                  "q": 'say "NaN" x', "r": "\\", "c": "-Infinity"},
             name="ok \xff\xfe caf\xe9 \xe2\x82 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 "
                  "\U0001F600 end\xe2",
             tags=[1, 3], dec="-12.50", raw=[0, 255, 7], flag=True, num=-7),
        dict(ts="1969-12-31T23:59:59.999999999Z", day="+10000-01-01", f64="Infinity",
             f32=0.100000001, vec=["Infinity", "-Infinity", 0],
             doc=["NaN", "-Infinity", "Infinity"], flag=False),
        dict(ts="1969-12-31T23:59:58.500Z", day="-0001-12-31", f64="-Infinity", f32="NaN",
             doc='{"a": "unterminated', name='tab\there "q" \\ \x01\x7f', tags=[2]),
        dict(ts="1970-01-01T00:00:00.000001Z", day="1970-01-01", f64=0.1, f32=-2,
             vec=[0.25, 0.100000001, -3], doc={"k": "-Infinity", "m": "-Infinity"}, name=""),
        dict(),
    ]
    assert len(r) == len(want), r
    for i, (got, w) in enumerate(zip(r, want)):
        w = dict(_entity="Thing", id=i + 1, **dict(nulls, **w))
        assert got == w and list(got) == list(w), (got, w)
elif what == "Doc":
    want = [{"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "s": "NaN",
             "q": 'say "NaN" x', "r": "\\", "c": "-Infinity"},
            ["NaN", "-Infinity", "Infinity"], "NaN", {"k": "-Infinity", "m": "-Infinity"},
            {"u": "\xe9\U0001F600 caf\xe9", "e": -500.0, "z": [True, False, None, {}]},
            '{"a": "unterminated', "[1, 2", '{"a": 01}', '["\xff"]', "[NaN, Nan]", "-Inf",
            '{"a": 1} x', ""]
    got = [x["doc"] for x in rows(path, "Doc")]
    assert got == want, (got, want)
elif what == "When":
    r = rows(path, "When")
    assert len(r) == 400
    assert {"+5881580-07-11", "-5877641-06-23", "0000-01-01", "2000-02-29"} <= {x["day"] for x in r}
    assert {"2262-04-11T23:47:16.854775807Z", "1677-09-21T00:12:43.145224192Z"} <= {x["ts"] for x in r}
    for x in r:
        assert x["ts"] == iso_ts(x["ns"]) and x["day"] == iso_date(x["days"]), x
    assert sum(len(x["ts"]) == 20 for x in r) > 10 and sum(len(x["ts"]) == 24 for x in r) > 10
elif what == "Fuzz":
    # Text Python's json accepts (its NaN tokens given as strings) must dump as
    # that value; any other as a string of the text, bad UTF-8 bytes as U+00XX.
    codecs.register_error("bytewise", lambda e: (
        "".join(map(chr, e.object[e.start:e.end])), e.end))
    valid = 0
    r = rows(path, "Fuzz")
    for x in r:
        raw = bytes(x["raw"])
        try:
            want = json.loads(raw.decode("utf-8"), parse_constant=str)
            valid += 1
        except ValueError:  # UnicodeDecodeError and JSONDecodeError
            want = raw.decode("utf-8", "bytewise")
        assert repr(x["doc"]) == repr(want), (raw, x["doc"], want)
    assert len(r) == 3000 and 500 < valid < 2500, valid
PY
t "mkstore's store is consistent" exit_is 0 "$B/mote" check "$D/d.mote"
t "a vector index is consistent" exit_is 0 "$B/mote" check "$D/near.mote"
"$B/tests/cli/mkstore" --text "$D/text.mote"
t "stat: a full-text index" bash -c "'$B/mote' stat '$D/text.mote' | grep -Eq '^  full-text index body: 200 texts, 600 words, 20 distinct, 600 postings in [0-9]+ blocks of [0-9]+ segments, [0-9]+ bytes \\([0-9.]+ bytes per word\\)$'"
t "stat: a full-text index that stems" bash -c "'$B/mote' stat '$D/text.mote' | grep -Eq '^  full-text index title \\(stemmed\\): 200 texts, 400 words, 2 distinct, 400 postings in [0-9]+ blocks'"
t "a full-text index is consistent" exit_is 0 "$B/mote" check "$D/text.mote"
t "stat: an index on a JSON path" bash -c "'$B/mote' stat '$D/text.mote' | grep -q '^  index meta on the JSON path n$'"
t "stat: an expiry time" bash -c "'$B/mote' stat '$D/text.mote' | grep -q '^  expiry time until '"
t "dump: lines are strict JSON in UTF-8, all entities" bash -c "'$B/mote' dump '$D/d.mote' > '$D/d.json' && python3 '$D/dump.py' '$D/d.json' all"
t "dump: each kind of value (ISO times, NaN strings, to-many ids, NULLs)" python3 "$D/dump.py" "$D/d.json" Thing
t "dump: JSON properties (bare NaN tokens replaced, bad text as a string)" python3 "$D/dump.py" "$D/d.json" Doc
t "dump: 400 timestamps and dates against Python's calendar" python3 "$D/dump.py" "$D/d.json" When
t "dump: 3,000 random JSON-like texts against Python's json" python3 "$D/dump.py" "$D/d.json" Fuzz
t "dump of one entity" bash -c "'$B/mote' dump '$D/d.mote' Thing | cmp - <(grep -a '^{\"_entity\": \"Thing\"' '$D/d.json')"
t "compact" "$B/mote" compact "$D/a.mote" "$D/b.mote"
t "compacted copy is consistent" exit_is 0 "$B/mote" check "$D/b.mote"
t "compacted copy has the same objects" bash -c "diff <('$B/mote' dump '$D/a.mote') <('$B/mote' dump '$D/b.mote')"
t "compact refuses an existing output" exit_is 1 "$B/mote" compact "$D/a.mote" "$D/b.mote"
# deltas: a copy made from a full delta, then kept level by a delta after a write
cp "$D/d.mote" "$D/e.mote"
t "delta: a full copy" bash -c "'$B/mote' delta '$D/e.mote' 0 '$D/e0.delta' | grep -q '^$D/e.mote: commits 0\.\.[0-9]* -> $D/e0.delta$'"
t "apply: a full delta makes the copy" bash -c "'$B/mote' apply '$D/ecopy.mote' '$D/e0.delta' | grep -q 'at commit'"
t "the copy is consistent" exit_is 0 "$B/mote" check "$D/ecopy.mote"
t "the copy has the same objects" bash -c "diff <('$B/mote' dump '$D/e.mote') <('$B/mote' dump '$D/ecopy.mote')"
E_AT=$("$B/mote" stat "$D/e.mote" | awk '/^txnid:/ {print $2}')
"$B/tests/cli/mkstore" --add-tag "$D/e.mote"
t "delta: since a commit" "$B/mote" delta "$D/e.mote" "$E_AT" "$D/e1.delta"
t "apply: the copy follows" "$B/mote" apply "$D/ecopy.mote" "$D/e1.delta"
t "the copy has the new object too" bash -c "diff <('$B/mote' dump '$D/e.mote') <('$B/mote' dump '$D/ecopy.mote')"
t "apply refuses a delta that does not start at the copy's commit" exit_is 1 "$B/mote" apply "$D/ecopy.mote" "$D/e1.delta"
t "apply refuses a full delta onto an existing copy" exit_is 1 "$B/mote" apply "$D/ecopy.mote" "$D/e0.delta"
head -c 5000 "$D/e1.delta" > "$D/cut.delta"
t "apply refuses a delta cut short" exit_is 1 "$B/mote" apply "$D/ecopy.mote" "$D/cut.delta"
t "apply -: a full delta from standard input" bash -c "cat '$D/e0.delta' | '$B/mote' apply '$D/pcopy.mote' - | grep -q 'at commit'"
t "apply -: the same file as from the delta file" bash -c "'$B/mote' apply '$D/q.mote' '$D/e0.delta' >/dev/null && cmp '$D/pcopy.mote' '$D/q.mote'"
t "apply -: a cut stream leaves no copy" bash -c "head -c 20000 '$D/e0.delta' | '$B/mote' apply '$D/rcopy.mote' -; test \$? = 1 && test ! -e '$D/rcopy.mote'"
t "apply -: a delta from a commit needs a file" bash -c "cat '$D/e1.delta' | '$B/mote' apply '$D/scopy.mote' -; test \$? = 1 && test ! -e '$D/scopy.mote'"
t "delta refuses an existing output" exit_is 1 "$B/mote" delta "$D/e.mote" 0 "$D/e0.delta"
t "delta: SINCE must be a number" exit_is 2 "$B/mote" delta "$D/e.mote" x "$D/x.delta"
t "replicate without a Python that has motedb: exit 2" exit_is 2 env MOTE_PYTHON=/nonexistent "$B/mote" replicate "$D/e.mote" s3://bucket/prefix
printf 'not a store at all, just some text that is long enough\n%.0s' {1..100} > "$D/junk.mote"
# a store of format 1 (tests/cli/format1.mote.gz: made by mkstore with the
# library of commit ee46df4): read as is, upgraded to format 2 by its first commit
gzip -dc "$(dirname "$0")/format1.mote.gz" > "$D/f1.mote"
t "format 1: stat names it" bash -c "'$B/mote' stat '$D/f1.mote' | grep -q '^format:      1$'"
t "format 1: consistent" exit_is 0 "$B/mote" check "$D/f1.mote"
t "format 1: dump equal to the same store made now" bash -c "'$B/mote' dump '$D/f1.mote' | cmp - '$D/d.json'"
t "format 1: no identity before a write" bash -c "'$B/mote' stat '$D/f1.mote' | grep -q '^identity:    none yet'"
t "format 1: a write" "$B/tests/cli/mkstore" --add-tag "$D/f1.mote"
t "format 1: upgraded by the write" bash -c "'$B/mote' stat '$D/f1.mote' | grep -q '^format:      2$'"
t "format 1: an identity given by the write" bash -c "'$B/mote' stat '$D/f1.mote' | grep -Eq '^identity:    [0-9a-f]{16}$'"
t "format 1: consistent after the write" exit_is 0 "$B/mote" check "$D/f1.mote"
t "format 1: its Tags and the new one" bash -c "[ \$('$B/mote' dump '$D/f1.mote' Tag | wc -l) -eq 4 ] && '$B/mote' dump '$D/f1.mote' Thing | cmp - <(grep -a '^{\"_entity\": \"Thing\"' '$D/d.json')"
t "check of a non-store: exit 2" exit_is 2 "$B/mote" check "$D/junk.mote"
t "check of a missing file: exit 2" exit_is 2 "$B/mote" check "$D/missing.mote"
# damage a data page of a larger store: check reports it (exit 1)
"$B/examples/kv_basics" "$D/c.mote" >/dev/null
python3 - "$D/c.mote" <<'PY'
import sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
# slot A holds the tiny store's root inline: flip a byte inside its root
# area; both slots then fail their checksums or one falls back
data[4096 + 1000] ^= 0xFF
data[1000] ^= 0xFF
open(p, "wb").write(data)
PY
t "both root slots damaged: exit 2 with a message" bash -c "'$B/mote' check '$D/c.mote'; [ \$? -eq 2 ]"
t "usage: exit 2" exit_is 2 "$B/mote" frobnicate "$D/a.mote"
want=$(sed -n "s/^  version : '\(.*\)',$/\1/p" meson.build)
t "--version: meson.build's version ($want)" bash -c "[ \"\$('$B/mote' --version)\" = 'mote $want' ]"
echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
