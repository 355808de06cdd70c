/* mkstore.c — a store for the dump tests of tests/cli/run.sh, written through
 * the public API: values that JSON has no plain form for (timestamps before
 * 1970 and with nanoseconds, dates outside years 0..9999, NaN and infinities
 * in floats, vectors and JSON text, strings that are not valid UTF-8,
 * unparsable JSON text), to-many links and NULLs. run.sh knows the values.
 * Entities:
 *   Tag    label; ids 1..3
 *   Thing  every kind of value, rows 1..5 (row 5 all NULL, no links)
 *   When   timestamp ts and date day, with their raw numbers in ns and days:
 *          edge cases, then pseudo-random values (run.sh recomputes them)
 *   Doc    one JSON property, one row per case
 *   Fuzz   random JSON-like texts (often broken), as bytes in raw and as the
 *          JSON property doc: run.sh parses raw with Python and compares
 * Run: ./mkstore FILE (FILE must not exist).
 * ./mkstore --hold FILE: afterwards, keep FILE open with a write transaction
 * (one more Tag, not committed), print "holding" and wait for a line on
 * stdin, then commit: the CLI's view of a store another process has open.
 * ./mkstore --add-tag FILE: open the store FILE (which exists), add one Tag
 * ("added") in one commit, close. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mote.h"

static mote_store *s;

static int fail(const char *what)
{
    fprintf(stderr, "mkstore: %s: %s\n", what, mote_errmsg(s));
    return 1;
}

static mote_value null_v(void)
{
    mote_value v = {0};
    v.null = 1;
    return v;
}

static mote_value int_v(int64_t i)
{
    mote_value v = {0};
    v.v.i = i;
    return v;
}

static mote_value flt_v(double f)
{
    mote_value v = {0};
    v.v.f = f;
    return v;
}

static mote_value str_v(const void *p, size_t n)
{
    mote_value v = {0};
    v.v.s.p = p;
    v.v.s.n = n;
    return v;
}

#define STR(lit) str_v(lit, sizeof lit - 1)

enum { TS, DAY, F64, F32, VEC, DOC, NAME, TAGS, DEC, RAW, FLAG, NUM, NTHING };

static const mote_prop_def tag_def[] = {
    {"label", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL},
};

static const mote_prop_def thing_def[NTHING] = {
    {"ts", MOTE_T_TIMESTAMP, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"day", MOTE_T_DATE, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"f64", MOTE_T_FLOAT64, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"f32", MOTE_T_FLOAT32, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"vec", MOTE_T_VECTOR, MOTE_P_NULLABLE, 3, NULL, NULL, {0}, NULL},
    {"doc", MOTE_T_JSON, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"name", MOTE_T_STRING, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"tags", MOTE_T_TOMANY, 0, 0, NULL, "Tag", {0}, NULL},
    {"dec", MOTE_T_DECIMAL, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"raw", MOTE_T_BYTES, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"flag", MOTE_T_BOOL, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"num", MOTE_T_INT32, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
};

static const mote_prop_def when_def[] = {
    {"ts", MOTE_T_TIMESTAMP, 0, 0, NULL, NULL, {0}, NULL},
    {"day", MOTE_T_DATE, 0, 0, NULL, NULL, {0}, NULL},
    {"ns", MOTE_T_INT64, 0, 0, NULL, NULL, {0}, NULL},
    {"days", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
};

static const mote_prop_def doc_def[] = {
    {"doc", MOTE_T_JSON, 0, 0, NULL, NULL, {0}, NULL},
};

/* Doc rows, in id order; run.sh has the expected value of each. */
static const char *const docs[] = {
    "{\"a\": NaN, \"b\": [Infinity, -Infinity, 1.5], \"s\": \"NaN\", "
    "\"q\": \"say \\\"NaN\\\" x\", \"r\": \"\\\\\", \"c\": -Infinity}",
    "[NaN,-Infinity,Infinity]",
    "NaN",
    "{\n  \"k\": -Infinity,\n\t\"m\": \"-Infinity\"\r\n}",
    "{\"u\": \"\\u00e9\\ud83d\\ude00 caf\xc3\xa9\", \"e\": -0.5e+3, \"z\": [true, false, null, {}]}",
    "{\"a\": \"unterminated",
    "[1, 2",
    "{\"a\": 01}",
    "[\"\xff\"]",
    "[NaN, Nan]",
    "-Inf",
    "{\"a\": 1} x",
    "",
};

/* mkstore --near FILE: entity Near, 300 vectors of 4 floats with a vector
 * index (mote stat shows it, mote check verifies it). */
static const mote_prop_def near_def[] = {
    {"vec", MOTE_T_VECTOR, MOTE_P_HNSW, 4, NULL, NULL, {MOTE_DIST_EUCLIDEAN, 8, 0}, NULL},
};

static int near_store(const char *path)
{
    mote_txn *t;
    mote_entity *near;
    if (mote_open(path, NULL, &s) || mote_begin(s, 0, &t) ||
        mote_entity_open(t, "Near", near_def, 1, &near))
        return fail("near");
    for (int i = 0; i < 300; i++) {
        float x[4] = {(float)(i % 7), (float)(i % 11), (float)(i % 13), (float)i / 100.0f};
        mote_value v = {0};
        v.v.s.p = x;
        v.v.s.n = sizeof x;
        if (mote_put(t, near, 0, &v, MOTE_PUT_INSERT, NULL))
            return fail("put Near");
    }
    return mote_commit(t) || mote_close(s) ? fail("commit") : 0;
}

/* mkstore --text FILE: entity Doc, 200 texts of 3 words each (600 words,
 * 20 distinct) with a full-text index, JSON indexed on a path, an expiry
 * time that is never reached, and a title "Running connections" in an index
 * that stems (400 words, 2 distinct: run, connect) (mote stat shows them,
 * mote check verifies the indexes). */
static const mote_prop_def text_def[] = {
    {"body", MOTE_T_STRING, MOTE_P_FULLTEXT, 0, NULL, NULL, {0}, NULL},
    {"meta", MOTE_T_JSON, MOTE_P_INDEXED, 0, NULL, NULL, {0}, "n"},
    {"until", MOTE_T_TIMESTAMP, MOTE_P_NULLABLE | MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL, NULL,
     {0}, NULL},
    {"title", MOTE_T_STRING, MOTE_P_FULLTEXT | MOTE_P_STEM, 0, NULL, NULL, {0}, NULL},
};

static int text_store(const char *path)
{
    mote_txn *t;
    mote_entity *doc;
    if (mote_open(path, NULL, &s) || mote_begin(s, 0, &t) ||
        mote_entity_open(t, "Doc", text_def, 4, &doc))
        return fail("text");
    for (int i = 0; i < 200; i++) {
        char b[64], m[32];
        mote_value v[4] = {{0}, {0}, {1, {0}}, {0}};
        v[3].v.s.p = "Running connections";
        v[3].v.s.n = 19;
        v[0].v.s.p = b;
        v[0].v.s.n = (size_t)snprintf(b, sizeof b, "Word%d word%d WORD%d", i % 7, 7 + i % 6,
                                      13 + i % 7);
        v[1].v.s.p = m;
        v[1].v.s.n = (size_t)snprintf(m, sizeof m, "{\"n\": %d}", i % 5);
        if (mote_put(t, doc, 0, v, MOTE_PUT_INSERT, NULL))
            return fail("put Doc");
    }
    return mote_commit(t) || mote_close(s) ? fail("commit") : 0;
}

static const mote_prop_def fuzz_def[] = {
    {"raw", MOTE_T_BYTES, 0, 0, NULL, NULL, {0}, NULL},
    {"doc", MOTE_T_JSON, 0, 0, NULL, NULL, {0}, NULL},
};

/* Random JSON-like text: values from pieces, some of them not JSON. */
static uint64_t rnd_x = 0x2545F4914F6CDD1DULL;

static unsigned rnd(unsigned n)
{
    rnd_x ^= rnd_x << 13;
    rnd_x ^= rnd_x >> 7;
    rnd_x ^= rnd_x << 17;
    return (unsigned)(rnd_x % n);
}

static void add(char *buf, size_t *len, size_t cap, const char *piece)
{
    size_t n = strlen(piece);
    if (*len + n < cap) {
        memcpy(buf + *len, piece, n);
        *len += n;
    }
}

static void gen_value(char *buf, size_t *len, size_t cap, int depth)
{
    static const char *const scalars[] = {
        "0", "-0", "12", "-3.25", "1.5e+3", "-1E-2", "1e400", "NaN", "Infinity", "-Infinity",
        "true", "false", "null", "01", "1.", ".5", "+1", "-", "Inf", "-Inf", "nan", "-NaN",
        "nul", "NaNa"};
    static const char *const chars[] = {
        "a", " ", "NaN", "\\\"", "\\\\", "\\u00e9", "\\ud83d", "\\ude00", "\\/",
        "\\n", "\\x", "\\u12", "\xc3\xa9", "\xff", "\x01", "\t", "\xe2\x82",
        "\xf0\x9f\x98\x80", "Infinity"};
    static const char *const spaces[] = {"", "", "", " ", "\n", "\r\n", "\t"};
    unsigned k = rnd(depth < 4 ? 8 : 5);
    add(buf, len, cap, spaces[rnd(7)]);
    if (k >= 5) { /* object or array */
        int obj = k == 5;
        add(buf, len, cap, obj ? "{" : "[");
        for (unsigned m = rnd(4), j = 0; j < m; j++) {
            if (j)
                add(buf, len, cap, ",");
            if (obj) {
                add(buf, len, cap, spaces[rnd(7)]);
                add(buf, len, cap, rnd(2) ? "\"k\"" : "\"NaN\"");
                add(buf, len, cap, spaces[rnd(7)]);
                add(buf, len, cap, ":");
            }
            gen_value(buf, len, cap, depth + 1);
        }
        add(buf, len, cap, spaces[rnd(7)]);
        add(buf, len, cap, obj ? "}" : "]");
    } else if (k >= 3) { /* string */
        add(buf, len, cap, "\"");
        for (unsigned m = rnd(5), j = 0; j < m; j++)
            add(buf, len, cap, chars[rnd(sizeof chars / sizeof *chars)]);
        add(buf, len, cap, "\"");
    } else
        add(buf, len, cap, scalars[rnd(sizeof scalars / sizeof *scalars)]);
    add(buf, len, cap, spaces[rnd(7)]);
}

static size_t gen_text(char *buf, size_t cap)
{
    static const char breakers[] = "{}[]\",:\\ \nN-";
    size_t len = 0;
    gen_value(buf, &len, cap, 0);
    if (len && rnd(4) == 0) { /* drop a byte */
        size_t at = rnd((unsigned)len);
        memmove(buf + at, buf + at + 1, len - at - 1);
        len--;
    }
    if (len + 1 < cap && rnd(4) == 0) { /* insert one */
        size_t at = rnd((unsigned)len + 1);
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = breakers[rnd(sizeof breakers - 1)];
        len++;
    }
    return len;
}

static void vec3(float *v, float a, float b, float c)
{
    v[0] = a;
    v[1] = b;
    v[2] = c;
}

/* Keep the store open, a write transaction in progress, until a line comes. */
static int hold(mote_entity *tag)
{
    mote_txn *t;
    mote_value v = str_v("held", 4);
    if (mote_begin(s, 0, &t) || mote_put(t, tag, 0, &v, MOTE_PUT_INSERT, NULL))
        return fail("hold");
    printf("holding\n");
    fflush(stdout);
    char line[8];
    if (!fgets(line, sizeof line, stdin))
        line[0] = 0;
    if (mote_commit(t))
        return fail("commit of the held transaction");
    return mote_close(s) ? 1 : 0;
}

/* One more Tag in the existing store `path`. */
static int add_tag(const char *path)
{
    mote_options o = {0, 0, 0, NULL};
    mote_txn *t;
    mote_entity *tag;
    mote_value v = str_v("added", 5);
    if (mote_open(path, &o, &s)) {
        fprintf(stderr, "mkstore: open: %s\n", mote_last_open_error());
        return 1;
    }
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Tag", tag_def, 1, &tag) ||
        mote_put(t, tag, 0, &v, MOTE_PUT_INSERT, NULL) || mote_commit(t))
        return fail("add a Tag");
    return mote_close(s) ? 1 : 0;
}

int main(int argc, char **argv)
{
    int holding = argc == 3 && !strcmp(argv[1], "--hold");
    if (argc == 3 && !strcmp(argv[1], "--add-tag"))
        return add_tag(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--near"))
        return near_store(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--text"))
        return text_store(argv[2]);
    if (argc != 2 && !holding) {
        fprintf(stderr, "usage: mkstore [--hold | --add-tag | --near | --text] FILE\n");
        return 2;
    }
    if (mote_open(argv[argc - 1], NULL, &s)) {
        fprintf(stderr, "mkstore: open: %s\n", mote_last_open_error());
        return 1;
    }
    mote_txn *t;
    mote_entity *tag, *thing, *when, *doc, *fuzz;
    if (mote_begin(s, 0, &t) || mote_entity_open(t, "Tag", tag_def, 1, &tag) ||
        mote_entity_open(t, "Thing", thing_def, NTHING, &thing) ||
        mote_entity_open(t, "When", when_def, 4, &when) ||
        mote_entity_open(t, "Doc", doc_def, 1, &doc) ||
        mote_entity_open(t, "Fuzz", fuzz_def, 2, &fuzz))
        return fail("entities");

    const char *labels[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        mote_value v = str_v(labels[i], 1);
        if (mote_put(t, tag, 0, &v, MOTE_PUT_INSERT, NULL))
            return fail("put Tag");
    }

    float vecs[4][3];
    vec3(vecs[0], 1.0f, NAN, -0.5f);
    vec3(vecs[1], INFINITY, -INFINITY, 0.0f);
    vec3(vecs[2], 0.25f, 0.1f, -3.0f);
    static const unsigned char raw[] = {0, 255, 7};
    mote_value rows[5][NTHING];
    for (int r = 0; r < 5; r++)
        for (int p = 0; p < NTHING; p++)
            rows[r][p] = null_v();
    /* 1: nanoseconds, the day before 1970, NaN, a vector with NaN, JSON with
     * the bare tokens, a string with invalid UTF-8 */
    rows[0][TS] = int_v(1700000000123456789LL);
    rows[0][DAY] = int_v(-1);
    rows[0][F64] = flt_v(NAN);
    rows[0][F32] = flt_v(1.5);
    rows[0][VEC] = str_v(vecs[0], 12);
    rows[0][DOC] = str_v(docs[0], strlen(docs[0]));
    rows[0][NAME] = STR("ok \xff\xfe caf\xc3\xa9 \xe2\x82 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 "
                        "\xf0\x9f\x98\x80 end\xe2");
    rows[0][DEC] = STR("-12.50");
    rows[0][RAW] = str_v(raw, sizeof raw);
    rows[0][FLAG] = int_v(1);
    rows[0][NUM] = int_v(-7);
    /* 2: 1 ns before 1970, year 10000, +inf, a float32 that needs 9 digits */
    rows[1][TS] = int_v(-1);
    rows[1][DAY] = int_v(2932897);
    rows[1][F64] = flt_v(INFINITY);
    rows[1][F32] = flt_v(0.1);
    rows[1][VEC] = str_v(vecs[1], 12);
    rows[1][DOC] = STR("[NaN,-Infinity,Infinity]");
    rows[1][FLAG] = int_v(0);
    /* 3: milliseconds before 1970, year -1, -inf, float32 NaN, bad JSON */
    rows[2][TS] = int_v(-1500000000LL);
    rows[2][DAY] = int_v(-719529);
    rows[2][F64] = flt_v(-INFINITY);
    rows[2][F32] = flt_v(NAN);
    rows[2][DOC] = STR("{\"a\": \"unterminated");
    rows[2][NAME] = STR("tab\there \"q\" \\ \x01\x7f");
    /* 4: microseconds, day 0 (1970-01-01), finite floats, JSON over lines */
    rows[3][TS] = int_v(1000);
    rows[3][DAY] = int_v(0);
    rows[3][F64] = flt_v(0.1);
    rows[3][F32] = flt_v(-2.0);
    rows[3][VEC] = str_v(vecs[2], 12);
    rows[3][DOC] = str_v(docs[3], strlen(docs[3]));
    rows[3][NAME] = STR("");
    /* 5: all NULL */
    for (int r = 0; r < 5; r++)
        if (mote_put(t, thing, 0, rows[r], MOTE_PUT_INSERT, NULL))
            return fail("put Thing");
    /* links: 1 -> {3, 1} (linked out of order), 3 -> {2}; 2, 4, 5 none */
    if (mote_link(t, thing, TAGS, 1, 3) || mote_link(t, thing, TAGS, 1, 1) ||
        mote_link(t, thing, TAGS, 3, 2))
        return fail("link");

    /* When: edge cases, then an LCG over the whole int64 / int32 ranges and
     * over years 1..2999 */
    static const int64_t ts_edge[] = {
        0, 1, -1, 999, 1000, 1000000, -1000000, 1000000000, -1000000000, 86399999999999LL,
        -86400000000000LL, 951782400000000000LL /* 2000-02-29 */, INT64_MAX, INT64_MIN,
        -2208988800000000000LL /* 1900-01-01 */, 4102444800123000000LL /* 2100-01-01 */};
    static const int32_t day_edge[] = {
        0, -1, 59, 11016, 11017, -25508, -25509, -719528, -719529, -719162, 2932896,
        2932897, INT32_MAX, INT32_MIN, -146097, 146097, -146098, 146096};
    size_t ne = sizeof ts_edge / sizeof *ts_edge, nd = sizeof day_edge / sizeof *day_edge;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (size_t k = 0; k < 400; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t ns = k < ne ? ts_edge[k] : (int64_t)(x ^ (x >> 29));
        int32_t days = k < nd ? day_edge[k]
                       : k % 2 ? (int32_t)(uint32_t)(x >> 32)
                               : (int32_t)((x >> 33) % (3000 * 366)) - 719162;
        if (k % 3 == 0 && k >= ne) /* whole seconds and milliseconds too */
            ns -= ns % (k % 2 ? 1000000000 : 1000000);
        mote_value v[4] = {int_v(ns), int_v(days), int_v(ns), int_v(days)};
        if (mote_put(t, when, 0, v, MOTE_PUT_INSERT, NULL))
            return fail("put When");
    }

    for (size_t k = 0; k < sizeof docs / sizeof *docs; k++) {
        mote_value v = str_v(docs[k], strlen(docs[k]));
        if (mote_put(t, doc, 0, &v, MOTE_PUT_INSERT, NULL))
            return fail("put Doc");
    }
    for (int k = 0; k < 3000; k++) {
        char buf[300];
        size_t n = gen_text(buf, sizeof buf);
        mote_value v[2] = {str_v(buf, n), str_v(buf, n)};
        if (mote_put(t, fuzz, 0, v, MOTE_PUT_INSERT, NULL))
            return fail("put Fuzz");
    }
    if (mote_commit(t))
        return fail("commit");
    if (holding)
        return hold(tag);
    return mote_close(s) ? 1 : 0;
}
