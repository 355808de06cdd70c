/*
 * test_json.c — the JSON reader (json.c): paths compiled (every form, every
 * error with its byte position, out of memory); values found at paths
 * (tables of documents with the exact span expected, marked in the text);
 * conditions on values found (every operator against every kind and value
 * type by a small model of the rules, then the rules one by one: NULL,
 * int64 exactness, structural equality, string operators, ARRAY CONTAINS);
 * mote__json_check (valid and invalid text, with positions); and
 * robustness: thousands of mutated documents and 100,000 levels of nesting
 * read without a crash. Every text is copied to a block of its exact size,
 * so the ASan build catches a read past its end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "test.h"

/* A copy of p[0..n) in a block of exactly n bytes (1 if n is 0). */
static uint8_t *exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    CHECK(b);
    if (n)
        memcpy(b, p, n);
    return b;
}

static jpath *compile(const char *text)
{
    jpath *p;
    OK(mote__jpath_compile(text, strlen(text), &p));
    return p;
}

/* ---- Paths --------------------------------------------------------------- */

/* p's steps as text: "k:<key>" (bytes other than printable ASCII as \xHH)
 * or "i:<index>", separated by spaces. */
static void render(const jpath *p, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < p->n && k < cap; i++) {
        const jstep *s = &p->steps[i];
        if (i)
            k += (size_t)snprintf(out + k, cap - k, " ");
        if (s->index >= 0) {
            CHECK(!s->key && !s->klen);
            k += (size_t)snprintf(out + k, cap - k, "i:%lld", (long long)s->index);
            continue;
        }
        CHECK(s->index == -1);
        k += (size_t)snprintf(out + k, cap - k, "k:");
        for (size_t j = 0; j < s->klen && k < cap; j++) {
            uint8_t c = s->key[j];
            if (c >= 0x20 && c < 0x7f && c != '\\')
                k += (size_t)snprintf(out + k, cap - k, "%c", c);
            else
                k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
        }
    }
    CHECK(k < cap);
}

static const struct {
    const char *path, *steps;
} good_paths[] = {
    {"", ""},
    {"$", ""},
    {"$.a", "k:a"},
    {"a", "k:a"},
    {".a", "k:a"},
    {"a.b[2]", "k:a k:b i:2"},
    {"$.a.b[2]", "k:a k:b i:2"},
    {"$.a[0].b", "k:a i:0 k:b"},
    {"$[0]", "i:0"},
    {"[0][10]", "i:0 i:10"},
    {"$[9223372036854775807]", "i:9223372036854775807"},
    {"$.\"a.b\"", "k:a.b"},
    {"$[\"a[0]\"]", "k:a[0]"},
    {"$[\"x\"][1]", "k:x i:1"},
    {"$.\"\"", "k:"},
    {"$[\"\"].x", "k: k:x"},
    {"\"a b\".c", "k:a b k:c"},
    {"$.a b", "k:a b"},
    {"$.a]b", "k:a]b"},
    {"$.a\"b", "k:a\"b"},
    {"$.$x", "k:$x"},
    {"$.\"\\u00e9\"", "k:\\xc3\\xa9"},
    {"$.\"\\u00E9\"", "k:\\xc3\\xa9"},
    {"$.\xc3\xa9", "k:\\xc3\\xa9"},
    {"$.\"\\ud83d\\ude00\"", "k:\\xf0\\x9f\\x98\\x80"},
    {"$.\"\\ud800x\"", "k:\\xed\\xa0\\x80x"},  /* a lone surrogate: its 3 bytes */
    {"$.\"\\udc00\\ud800\"", "k:\\xed\\xb0\\x80\\xed\\xa0\\x80"},
    {"$.\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "k:\"\\x5c/\\x08\\x0c\\x0a\\x0d\\x09"},
    {"$.\"\\u0000\"", "k:\\x00"},
};

TEST(json_path_compile)
{
    char buf[512];
    for (size_t i = 0; i < sizeof good_paths / sizeof good_paths[0]; i++) {
        jpath *p = compile(good_paths[i].path);
        render(p, buf, sizeof buf);
        if (strcmp(buf, good_paths[i].steps)) {
            fprintf(stderr, "path %s: steps %s, expected %s\n", good_paths[i].path, buf,
                    good_paths[i].steps);
            CHECK(0);
        }
        mote__free(p);
    }
    /* a NUL inside a bare key; a path of many steps */
    jpath *p;
    OK(mote__jpath_compile("$.a\0b[3]", 8, &p));
    CHECK(p->n == 2 && p->steps[0].klen == 3 && !memcmp(p->steps[0].key, "a\0b", 3));
    CHECK(p->steps[1].index == 3);
    mote__free(p);
    char many[3000];
    size_t k = 0;
    for (int i = 0; i < 500; i++)
        k += (size_t)snprintf(many + k, sizeof many - k, i % 2 ? "[%d]" : ".k%d", i);
    p = compile(many);
    CHECK(p->n == 500);
    CHECK(p->steps[498].klen == 4 && !memcmp(p->steps[498].key, "k498", 4));
    CHECK(p->steps[499].index == 499);
    mote__free(p);
    /* NULL arguments */
    OK(mote__jpath_compile(NULL, 0, &p));
    CHECK(p->n == 0);
    mote__free(p);
    CHECK_RC(mote__jpath_compile(NULL, 1, &p), MOTE_INVALID);
    CHECK(!p);
    CHECK_RC(mote__jpath_compile("$", 1, NULL), MOTE_INVALID);
}

static const struct {
    const char *path, *what;
    int pos;
} bad_paths[] = {
    {"a..b", "empty key", 2},
    {"$..a", "empty key", 2},
    {"a.", "empty key", 2},
    {".", "empty key", 1},
    {"$.", "empty key", 2},
    {"$.a.[0]", "empty key", 4},
    {"$.a[0].", "empty key", 7},
    {"$.\"abc", "unterminated quoted key", 2},
    {"$[\"abc", "unterminated quoted key", 2},
    {"$.\"\\", "unterminated quoted key", 2},
    {"$[\"abc\"", "expected ]", 7},
    {"$[\"a\"x]", "expected ]", 5},
    {"$.\"a\\x\"", "bad escape", 4},
    {"$.\"\\u12G4\"", "bad \\u escape", 3},
    {"$.\"\\ud83d\\u12\"", "bad \\u escape", 9},
    {"$.\"a\x01\"", "control character in a string", 4},
    {"$.\"\xff\"", "invalid UTF-8", 3},
    {"$[]", "bad array index", 2},
    {"$[", "bad array index", 2},
    {"$[-1]", "bad array index", 2},
    {"$[+1]", "bad array index", 2},
    {"$[01]", "bad array index", 2},
    {"$[ 1]", "bad array index", 2},
    {"$[1 ]", "expected ]", 3},
    {"$[1a]", "expected ]", 3},
    {"$[1", "expected ]", 3},
    {"$[9223372036854775808]", "array index too large", 2},
    {"$[99999999999999999999999]", "array index too large", 2},
    {"$a", "unexpected character", 1},
    {"$$", "unexpected character", 1},
    {"$ .a", "unexpected character", 1},
    {"$.a.\"b\"c", "unexpected character", 7},
    {"$[0]x", "unexpected character", 4},
    {"\"a\"b", "unexpected character", 3},
};

TEST(json_path_errors)
{
    char want[600];
    for (size_t i = 0; i < sizeof bad_paths / sizeof bad_paths[0]; i++) {
        jpath *p = (jpath *)1;
        int rc = mote__jpath_compile(bad_paths[i].path, strlen(bad_paths[i].path), &p);
        snprintf(want, sizeof want, "JSON path \"%s\": %s at byte %d", bad_paths[i].path,
                 bad_paths[i].what, bad_paths[i].pos);
        if (rc != MOTE_INVALID || p || strcmp(mote_errmsg(NULL), want)) {
            fprintf(stderr, "path %s: rc %d, message \"%s\", expected \"%s\"\n",
                    bad_paths[i].path, rc, mote_errmsg(NULL), want);
            CHECK(0);
        }
    }
    CHECK(!strcmp(mote_errmsg(NULL), "JSON path \"\"a\"b\": unexpected character at byte 3"));
    /* a long path is cut short in the message, not the position */
    char longp[400];
    memset(longp, 'a', 300);
    memcpy(longp + 300, "..", 3);
    jpath *p;
    CHECK_RC(mote__jpath_compile(longp, strlen(longp), &p), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "aaa...\": empty key at byte 301"));
}

static int fail_alloc(size_t n)
{
    (void)n;
    return 1;
}

TEST(json_path_nomem)
{
    jpath *p = (jpath *)1;
    mote__alloc_hook = fail_alloc;
    int rc = mote__jpath_compile("$.a[1]", 6, &p);
    mote__alloc_hook = NULL;
    CHECK_RC(rc, MOTE_NOMEM);
    CHECK(!p);
    /* an error of the text is found before anything is allocated */
    mote__alloc_hook = fail_alloc;
    rc = mote__jpath_compile("$.a[x]", 6, &p);
    mote__alloc_hook = NULL;
    CHECK_RC(rc, MOTE_INVALID);
}

/* ---- Values at paths ----------------------------------------------------- */

/* Documents with the span expected marked by backquotes (none: absent). */
static const struct {
    const char *doc, *path;
    int kind;
} at_rows[] = {
    /* the whole document */
    {"  `{\"a\":1}`  ", "", J_OBJECT},
    {"\n`[1, 2]`\t", "$", J_ARRAY},
    {"`\"s\"`", "", J_STRING},
    {"", "", J_ABSENT},
    {"   ", "$", J_ABSENT},
    /* nesting */
    {"{\"a\":{\"b\":[10,20,`{\"c\":true}`]}}", "a.b[2]", J_OBJECT},
    {"{\"a\":{\"b\":[10,20,{\"c\":`true`}]}}", "$.a.b[2].c", J_TRUE},
    {"{\"a\":{\"b\":[10,`20`,{\"c\":true}]}}", "$.a.b[1]", J_NUMBER},
    {"[[1,[2,`3`]]]", "$[0][1][1]", J_NUMBER},
    {"[[1,[2,3]]]", "$[0][1][2]", J_ABSENT},
    {"{\"a b\":{\"c.d\":`1`}}", "$.\"a b\".\"c.d\"", J_NUMBER},
    {"{\"a b\":`1`}", "a b", J_NUMBER},
    {"{\"a]\":`1`}", "$.a]", J_NUMBER},
    {"{\"\":`5`}", "$.\"\"", J_NUMBER},
    {"{\"\":5}", "$.a", J_ABSENT},
    /* whitespace everywhere */
    {" \n { \"a\" \t : \r\n [ 1 , `2` ] , \"b\" : 3 } ", "$.a[1]", J_NUMBER},
    {"{ \"x\" : `\"y\"` }", "x", J_STRING},
    {"[1, `[ 2 , { } ]` ]", "[1]", J_ARRAY},
    {"{\"k\": `{ \"a\" : [ ] }` }", "k", J_OBJECT},
    /* keys compared decoded */
    {"{\"\\u00e9\":`1`}", "$.\xc3\xa9", J_NUMBER},
    {"{\"\\u00E9\":`1`}", "$.\xc3\xa9", J_NUMBER},
    {"{\"\xc3\xa9\":`1`}", "$.\"\\u00e9\"", J_NUMBER},
    {"{\"a\\\"b\":`1`}", "$.\"a\\\"b\"", J_NUMBER},
    {"{\"a\\/b\":`1`}", "$.a/b", J_NUMBER},
    {"{\"a\\nb\":`1`}", "$.\"a\\nb\"", J_NUMBER},
    {"{\"\\ud83d\\ude00\":`1`}", "$.\xf0\x9f\x98\x80", J_NUMBER},
    {"{\"\\u0061\":`7`}", "a", J_NUMBER},
    {"{\"a\\u0000b\":`1`}", "$.\"a\\u0000b\"", J_NUMBER},
    {"{\"a\\u0000b\":1}", "$.a", J_ABSENT},
    {"{\"ab\":1,\"a\":`2`}", "$.a", J_NUMBER},
    {"{\"a\":1}", "$.ab", J_ABSENT},
    {"{\"a\":1}", "$.A", J_ABSENT},
    /* a repeated key: the last counts */
    {"{\"a\":1,\"b\":2,\"a\":`3`}", "$.a", J_NUMBER},
    {"{\"a\":{\"x\":1},\"a\":{\"y\":2}}", "$.a.x", J_ABSENT},
    {"{\"a\":{\"x\":1},\"a\":{\"x\":`2`}}", "$.a.x", J_NUMBER},
    {"{\"\\u0061\":1,\"a\":`2`}", "a", J_NUMBER},
    {"{\"a\":`2`,\"\\u0062\":1}", "a", J_NUMBER},
    /* missing keys, indexes past the end */
    {"{\"a\":1}", "$.b", J_ABSENT},
    {"{}", "$.a", J_ABSENT},
    {"[]", "$[0]", J_ABSENT},
    {"[1,2]", "$[2]", J_ABSENT},
    {"[1,2]", "$[9223372036854775807]", J_ABSENT},
    /* steps into scalars, or of the other kind */
    {"{\"a\":1}", "$.a.b", J_ABSENT},
    {"{\"a\":\"str\"}", "$.a[0]", J_ABSENT},
    {"[1]", "$.a", J_ABSENT},
    {"{\"0\":1}", "$[0]", J_ABSENT},
    {"\"x\"", "$.a", J_ABSENT},
    {"null", "$[0]", J_ABSENT},
    {"5", "$[0]", J_ABSENT},
    /* every kind, exactly */
    {"[`null`]", "[0]", J_NULL},
    {"[`false`]", "[0]", J_FALSE},
    {"[`true`]", "[0]", J_TRUE},
    {"[`-1.5e+3`]", "[0]", J_NUMBER},
    {"[ `0` ]", "[0]", J_NUMBER},
    {"[`\"x\\\"y\"`]", "[0]", J_STRING},
    {"[`\"\"`]", "[0]", J_STRING},
    {"[`[]`]", "[0]", J_ARRAY},
    {"[`{}`]", "[0]", J_OBJECT},
    /* malformed on the way: absent */
    {"{\"a\":1,,\"b\":2}", "$.b", J_ABSENT},
    {"{\"a\":[1,2},\"b\":3}", "$.b", J_ABSENT},
    {"{\"a\":tru,\"b\":1}", "$.b", J_ABSENT},
    {"{\"a\":1", "$.a", J_ABSENT},          /* the whole object is read */
    {"{\"a\":1 \"b\":2}", "$.a", J_ABSENT},
    {"{\"a\":01}", "$.a", J_ABSENT},
    {"{\"a\":[1,2]]}", "$.a", J_ABSENT},
    {"{\"a\":\"\x01\",\"b\":1}", "b", J_ABSENT},
    {"{\"a\":\"\xff\",\"b\":1}", "b", J_ABSENT},
    {"{\"a\":[1,,2]}", "a", J_ABSENT},
    {"{\"a\":\"abc}", "a", J_ABSENT},
    {"{\"a\":[1}", "a", J_ABSENT},
    {"[[1,2},3]", "[1]", J_ABSENT},
    {"[1 2]", "$[1]", J_ABSENT},
    {"[1,]", "$[1]", J_ABSENT},
    {"{\"a\\x\":1}", "b", J_ABSENT},
    {"{a:1}", "a", J_ABSENT},
    /* what follows the value found is not read */
    {"[1, `2`, oops", "$[1]", J_NUMBER},
    {"[1, 2, oops", "$[2]", J_ABSENT},
    {"[`1` 2]", "$[0]", J_NUMBER},
    {"`1` x", "", J_NUMBER},
};

TEST(json_at_table)
{
    char doc[256];
    for (size_t r = 0; r < sizeof at_rows / sizeof at_rows[0]; r++) {
        size_t n = 0, start = SIZE_MAX, end = SIZE_MAX;
        for (const char *c = at_rows[r].doc; *c; c++) {
            if (*c == '`')
                *(start == SIZE_MAX ? &start : &end) = n;
            else
                doc[n++] = *c;
        }
        CHECK((start == SIZE_MAX) == (at_rows[r].kind == J_ABSENT));
        uint8_t *d = exact(doc, n);
        jpath *p = compile(at_rows[r].path);
        jval v;
        mote__json_at(d, n, p, &v);
        int ok = v.kind == at_rows[r].kind;
        if (ok && v.kind == J_ABSENT)
            ok = !v.p && !v.n;
        else if (ok)
            ok = v.p == d + start && v.n == end - start && mote__json_check(v.p, v.n) == MOTE_OK;
        if (!ok) {
            fprintf(stderr, "%s at %s: kind %d [%td, +%zu), expected %d [%zu, %zu)\n",
                    at_rows[r].doc, at_rows[r].path, v.kind, v.p ? v.p - d : -1, v.n,
                    at_rows[r].kind, start, end);
            CHECK(0);
        }
        mote__free(p);
        free(d);
    }
}

TEST(json_at_edges)
{
    jval v;
    /* no path: the whole document; no document: absent */
    uint8_t *d = exact(" [1] ", 5);
    mote__json_at(d, 5, NULL, &v);
    CHECK(v.kind == J_ARRAY && v.p == d + 1 && v.n == 3);
    mote__json_at(NULL, 0, NULL, &v);
    CHECK(v.kind == J_ABSENT);
    free(d);
    /* a NUL byte: inside a string it must be escaped; it ends nothing */
    jpath *p = compile("$.a");
    d = exact("{\"a\":\"x\0y\"}", 11);
    mote__json_at(d, 11, p, &v);
    CHECK(v.kind == J_ABSENT);
    free(d);
    d = exact("{\"b\":1}\0{\"a\":1}", 15);
    mote__json_at(d, 15, p, &v);
    CHECK(v.kind == J_ABSENT);
    free(d);
    /* a document cut anywhere: absent, never a read past the end */
    const char *full = "{\"a\": [1, \"two\", {\"b\": null}], \"c\": \"\\u00e9\"}";
    jpath *q = compile("$.c");
    for (size_t n = 0; n <= strlen(full); n++) {
        d = exact(full, n);
        mote__json_at(d, n, q, &v);
        CHECK(v.kind == (n == strlen(full) ? J_STRING : J_ABSENT));
        mote__json_at(d, n, p, &v);
        CHECK(v.kind == (n == strlen(full) ? J_ARRAY : J_ABSENT));
        free(d);
    }
    mote__free(q);
    mote__free(p);
}

/* ---- Conditions ---------------------------------------------------------- */

#define T_I MOTE_T_INT64
#define T_F MOTE_T_FLOAT64
#define T_B MOTE_T_BOOL
#define T_S MOTE_T_STRING
#define T_J MOTE_T_JSON
#define NULLV "\x01NULL" /* a value with null set */

/* vals[k] from text as type t; its bytes (strings, JSON) in an exact block
 * kept in *bytes (freed by the caller). */
static mote_value make_val(int type, const char *text, uint8_t **bytes)
{
    mote_value v = {0};
    *bytes = NULL;
    if (!strcmp(text, NULLV)) {
        v.null = 1;
    } else if (type == T_S || type == T_J || type == MOTE_T_BYTES) {
        *bytes = exact(text, strlen(text));
        v.v.s.p = *bytes;
        v.v.s.n = strlen(text);
    } else if (type == T_F) {
        v.v.f = strtod(text, NULL);
    } else {
        v.v.i = strtoll(text, NULL, 10);
    }
    return v;
}

/* The result of op on the value doc (JSON text; NULL: absent) against the
 * values in text (NULL-ended, at most 4). */
static int run(const char *doc, int op, int type, const char *const *texts)
{
    mote_value vals[4];
    uint8_t *bytes[4];
    size_t n = 0;
    while (n < 4 && texts[n]) {
        vals[n] = make_val(type, texts[n], &bytes[n]);
        n++;
    }
    jval v = {J_ABSENT, NULL, 0};
    uint8_t *d = NULL;
    if (doc) {
        d = exact(doc, strlen(doc));
        mote__json_at(d, strlen(doc), NULL, &v);
        CHECK(v.kind != J_ABSENT);
    }
    int r = mote__json_test(doc ? &v : NULL, op, type, vals, n);
    free(d);
    for (size_t i = 0; i < n; i++)
        free(bytes[i]);
    return r;
}

static const char *op_name(int op)
{
    static const char *const names[] = {"?", "EQ", "NE", "LT", "LE", "GT", "GE", "BETWEEN",
                                        "IN", "NOT_IN", "IS_NULL", "NOT_NULL", "STARTS_WITH",
                                        "ENDS_WITH", "CONTAINS", "ARRAY_CONTAINS", "KEY_EXISTS"};
    return op >= 1 && op <= MOTE_KEY_EXISTS ? names[op] : "?";
}

static void expect(const char *doc, int op, int type, const char *const *texts, int want)
{
    int got = run(doc, op, type, texts);
    if (got != want) {
        fprintf(stderr, "%s %s (type %d)", doc ? doc : "<absent>", op_name(op), type);
        for (int i = 0; i < 4 && texts[i]; i++)
            fprintf(stderr, " %s", texts[i]);
        fprintf(stderr, ": %d, expected %d\n", got, want);
        CHECK(0);
    }
}

/* Every operator, every kind, every value type: the fields below against
 * the number nv (0, 1 or 2) as each type, by the rules in a few lines. */
TEST(json_test_matrix)
{
    static const struct {
        const char *doc;
        int kind, num; /* num: the number it is (-1: none) */
    } fields[] = {
        {NULL, J_ABSENT, -1}, {"null", J_NULL, -1}, {"false", J_FALSE, 0},
        {"true", J_TRUE, 1},  {"1", J_NUMBER, 1},   {"\"1\"", J_STRING, -1},
        {"[1]", J_ARRAY, -1}, {"{\"a\":1}", J_OBJECT, -1},
    };
    static const int types[] = {T_I, T_F, T_B, T_S, T_J};
    static const char *const nums[] = {"0", "1", "2"};
    int checked = 0;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (size_t t = 0; t < 5; t++)
            for (int nv = 0; nv < 3; nv++) {
                int type = types[t], kind = fields[f].kind, fv = fields[f].num;
                if (type == T_B && nv == 2)
                    continue;
                const char *one[] = {nums[nv], NULL}, *two[] = {nums[nv], nums[nv], NULL};
                int null = kind == J_ABSENT || kind == J_NULL, numeric = type != T_S;
                /* the order of the field against the value, 2 = none */
                int c = 2;
                if (!null && numeric && fv >= 0)
                    c = (fv > nv) - (fv < nv);
                if (!null && type == T_S && kind == J_STRING)
                    c = (1 > nv) - (1 < nv);
                int eq = type == T_J ? kind == J_NUMBER && nv == 1 : c == 0;
                int str = !null && kind == J_STRING && type == T_S;
                for (int op = MOTE_EQ; op <= MOTE_KEY_EXISTS; op++) {
                    int want;
                    switch (op) {
                    case MOTE_EQ: want = !null && eq; break;
                    case MOTE_NE: want = !null && !eq; break;
                    case MOTE_LT: want = c == -1; break;
                    case MOTE_LE: want = c == -1 || c == 0; break;
                    case MOTE_GT: want = c == 1; break;
                    case MOTE_GE: want = c == 1 || c == 0; break;
                    case MOTE_BETWEEN: want = c == 0; break;
                    case MOTE_IN: want = !null && eq; break;
                    case MOTE_NOT_IN: want = !null && !eq; break;
                    case MOTE_IS_NULL: want = null; break;
                    case MOTE_NOT_NULL: want = !null; break;
                    case MOTE_KEY_EXISTS: want = kind != J_ABSENT; break;
                    case MOTE_ARRAY_CONTAINS: want = kind == J_ARRAY && numeric && nv == 1; break;
                    default: want = str && nv == 1; break; /* "1" and the string ops */
                    }
                    const char *none[] = {NULL};
                    const char *const *texts = op == MOTE_BETWEEN ? two
                                               : op == MOTE_IS_NULL || op == MOTE_NOT_NULL ||
                                                       op == MOTE_KEY_EXISTS
                                                   ? none
                                                   : one;
                    expect(fields[f].doc, op, type, texts, want);
                    checked++;
                }
            }
    CHECK(checked == 8 * 14 * 16);
}

typedef struct jrow {
    const char *doc; /* the value's JSON text; NULL: absent */
    int op, type, want;
    const char *v[4]; /* the values as text (NULLV: a NULL value) */
} jrow;

#define EQ MOTE_EQ
#define NE MOTE_NE
#define LT MOTE_LT
#define LE MOTE_LE
#define GT MOTE_GT
#define GE MOTE_GE
#define BTW MOTE_BETWEEN
#define IN MOTE_IN
#define NIN MOTE_NOT_IN
#define SW MOTE_STARTS_WITH
#define EW MOTE_ENDS_WITH
#define CT MOTE_CONTAINS
#define AC MOTE_ARRAY_CONTAINS

static const jrow rows[] = {
    /* integers exactly, near 2^53 and the ends of int64 */
    {"9007199254740993", EQ, T_I, 1, {"9007199254740993"}},
    {"9007199254740993", EQ, T_I, 0, {"9007199254740992"}},
    {"9007199254740993", NE, T_I, 1, {"9007199254740992"}},
    {"9007199254740993", GT, T_I, 1, {"9007199254740992"}},
    {"9007199254740992", LT, T_I, 1, {"9007199254740993"}},
    {"9007199254740993", EQ, T_F, 0, {"9007199254740992"}},
    {"9007199254740993", GT, T_F, 1, {"9007199254740992"}},
    {"9007199254740993", LT, T_F, 1, {"9007199254740994"}},
    {"9007199254740993.0", EQ, T_I, 1, {"9007199254740992"}}, /* not integer syntax: a double */
    {"9007199254740993.0", EQ, T_I, 0, {"9007199254740993"}},
    {"9223372036854775807", EQ, T_I, 1, {"9223372036854775807"}},
    {"9223372036854775807", EQ, T_I, 0, {"9223372036854775806"}},
    {"9223372036854775806", LT, T_I, 1, {"9223372036854775807"}},
    {"9223372036854775807", EQ, T_F, 0, {"9223372036854775807"}}, /* the double is 2^63 */
    {"9223372036854775807", LT, T_F, 1, {"9223372036854775808"}},
    {"9223372036854775808", GT, T_I, 1, {"9223372036854775807"}},
    {"9223372036854775808", EQ, T_F, 1, {"9223372036854775808"}},
    {"-9223372036854775808", EQ, T_I, 1, {"-9223372036854775808"}},
    {"-9223372036854775807", GT, T_I, 1, {"-9223372036854775808"}},
    {"-9223372036854775809", EQ, T_I, 1, {"-9223372036854775808"}}, /* past int64: -2^63.0 */
    {"-9223372036854775808", GT, T_F, 1, {"-9223372036854777856"}},
    /* mixed integers and fractions */
    {"1.5", GT, T_I, 1, {"1"}},
    {"1.5", LT, T_I, 1, {"2"}},
    {"-1.5", LT, T_I, 1, {"-1"}},
    {"-1.5", GT, T_I, 1, {"-2"}},
    {"1", LT, T_F, 1, {"1.0000000000000002"}},
    {"1", GT, T_F, 1, {"0.9999999999999999"}},
    {"1.0", EQ, T_I, 1, {"1"}},
    {"1e0", EQ, T_I, 1, {"1"}},
    {"10e-1", EQ, T_I, 1, {"1"}},
    {"0.1e1", EQ, T_I, 1, {"1"}},
    {"100E-2", EQ, T_F, 1, {"1"}},
    {"0.1", EQ, T_F, 1, {"0.1"}},
    {"0.1", EQ, T_F, 0, {"0.10000000000000002"}},
    {"-0", EQ, T_F, 1, {"0"}},
    {"-0.0", EQ, T_I, 1, {"0"}},
    {"0", EQ, T_F, 1, {"-0.0"}},
    {"1.7976931348623157e308", EQ, T_F, 1, {"1.7976931348623157e308"}},
    {"4.9e-324", GT, T_I, 1, {"0"}},
    /* NaN orders and equals nothing */
    {"1", EQ, T_F, 0, {"nan"}},
    {"1", NE, T_F, 1, {"nan"}},
    {"1", LT, T_F, 0, {"nan"}},
    {"1", GE, T_F, 0, {"nan"}},
    {"1.5", LE, T_F, 0, {"nan"}},
    {"1", BTW, T_F, 0, {"nan", "2"}},
    {"1", BTW, T_F, 0, {"0", "nan"}},
    {"1", IN, T_F, 0, {"nan"}},
    {"1", NIN, T_F, 1, {"nan"}},
    {"[1]", AC, T_F, 0, {"nan"}},
    /* past the range of a double */
    {"1e400", GT, T_F, 1, {"1.7976931348623157e308"}},
    {"1e400", EQ, T_F, 1, {"inf"}},
    {"-1e400", EQ, T_F, 1, {"-inf"}},
    {"-1e400", LT, T_I, 1, {"-9223372036854775808"}},
    {"1e400", GT, T_I, 1, {"9223372036854775807"}},
    {"1e-400", EQ, T_I, 1, {"0"}},
    {"1e99999999999999999999", EQ, T_F, 1, {"inf"}},
    {"-1e-99999999999999999999", EQ, T_I, 1, {"0"}},
    {"0e99999999999999999999", EQ, T_I, 1, {"0"}},
    /* true and false are 1 and 0 to numbers */
    {"true", EQ, T_B, 1, {"1"}},
    {"true", EQ, T_I, 1, {"1"}},
    {"true", EQ, T_F, 1, {"1"}},
    {"false", EQ, T_I, 1, {"0"}},
    {"false", EQ, T_F, 1, {"0"}},
    {"false", EQ, T_B, 0, {"1"}},
    {"1", EQ, T_B, 1, {"1"}},
    {"0", EQ, T_B, 1, {"0"}},
    {"2", GT, T_B, 1, {"1"}},
    {"true", GT, T_B, 1, {"0"}},
    {"false", LT, T_F, 1, {"0.5"}},
    {"true", BTW, T_I, 1, {"0", "1"}},
    {"\"true\"", EQ, T_B, 0, {"1"}},
    {"\"true\"", NE, T_B, 1, {"1"}},
    {"true", EQ, T_S, 0, {"true"}},
    {"true", NE, T_S, 1, {"true"}},
    /* strings: decoded bytes, memcmp order, a prefix first */
    {"\"abc\"", EQ, T_S, 1, {"abc"}},
    {"\"a\\u0062c\"", EQ, T_S, 1, {"abc"}},
    {"\"abc\"", EQ, T_S, 0, {"ab"}},
    {"\"ab\"", EQ, T_S, 0, {"abc"}},
    {"\"\\u00e9\"", EQ, T_S, 1, {"\xc3\xa9"}},
    {"\"\xc3\xa9\"", EQ, T_S, 1, {"\xc3\xa9"}},
    {"\"ab\"", LT, T_S, 1, {"abc"}},
    {"\"abc\"", GT, T_S, 1, {"ab"}},
    {"\"a\\u0062\"", LT, T_S, 1, {"abc"}},
    {"\"abd\"", GT, T_S, 1, {"abc"}},
    {"\"\"", LT, T_S, 1, {"a"}},
    {"\"\"", EQ, T_S, 1, {""}},
    {"\"\"", LE, T_S, 1, {""}},
    {"\"\\u00e9\"", GT, T_S, 1, {"z"}},
    {"\"\\u00e9x\"", LT, T_S, 1, {"\xc3\xa9y"}},
    {"\"a\\nb\"", EQ, T_S, 1, {"a\nb"}},
    {"\"a\\\\b\"", EQ, T_S, 1, {"a\\b"}},
    {"\"a\\/b\"", EQ, T_S, 1, {"a/b"}},
    {"\"\\\"\"", EQ, T_S, 1, {"\""}},
    {"\"\\ud83d\\ude00\"", EQ, T_S, 1, {"\xf0\x9f\x98\x80"}},
    {"\"\\ud800\"", EQ, T_S, 1, {"\xed\xa0\x80"}}, /* a lone surrogate: its 3 bytes */
    {"\"\\ud800\"", EQ, T_S, 0, {"\xef\xbf\xbd"}},
    {"\"abc\"", BTW, T_S, 1, {"abb", "abd"}},
    {"\"abc\"", BTW, T_S, 1, {"abc", "abc"}},
    {"\"abc\"", BTW, T_S, 0, {"abd", "abz"}},
    {"\"b\"", IN, T_S, 1, {"a", "b"}},
    {"\"c\"", NIN, T_S, 1, {"a", "b"}},
    /* different kinds */
    {"\"1\"", EQ, T_I, 0, {"1"}},
    {"\"1\"", NE, T_I, 1, {"1"}},
    {"\"1\"", LT, T_I, 0, {"2"}},
    {"\"1\"", GE, T_I, 0, {"0"}},
    {"1", EQ, T_S, 0, {"1"}},
    {"1", LT, T_S, 0, {"2"}},
    {"1", NE, T_S, 1, {"1"}},
    {"[1]", EQ, T_I, 0, {"1"}},
    {"[1]", NE, T_S, 1, {"x"}},
    {"{\"a\":1}", GT, T_I, 0, {"0"}},
    {"{\"a\":1}", NE, T_J, 1, {"[1]"}},
    {"\"x\"", NIN, T_I, 1, {"1", "2"}},
    {"\"x\"", IN, T_I, 0, {"1", "2"}},
    {"\"x\"", BTW, T_I, 0, {"0", "9"}},
    /* string operators, on decoded bytes, for strings and string values */
    {"\"hello\"", SW, T_S, 1, {"he"}},
    {"\"hello\"", SW, T_S, 1, {""}},
    {"\"hello\"", SW, T_S, 1, {"hello"}},
    {"\"he\"", SW, T_S, 0, {"hello"}},
    {"\"hello\"", SW, T_S, 0, {"el"}},
    {"\"h\\u0065llo\"", SW, T_S, 1, {"he"}},
    {"\"h\\u0065llo\"", SW, T_S, 0, {"hx"}},
    {"\"hello\"", EW, T_S, 1, {"llo"}},
    {"\"hello\"", EW, T_S, 1, {""}},
    {"\"lo\"", EW, T_S, 0, {"hello"}},
    {"\"hell\\u006f\"", EW, T_S, 1, {"lo"}},
    {"\"hell\\u006f\"", EW, T_S, 1, {"hello"}},
    {"\"hell\\u006f\"", EW, T_S, 0, {"xhello"}},
    {"\"hell\\u006f\"", EW, T_S, 0, {"ll"}},
    {"\"h\\u0065llo\"", EW, T_S, 1, {""}},
    {"\"hello\"", CT, T_S, 1, {"ell"}},
    {"\"hello\"", CT, T_S, 0, {"elo"}},
    {"\"h\\u0065llo\"", CT, T_S, 1, {"ell"}},
    {"\"h\\u0065llo\"", CT, T_S, 0, {"elo"}},
    {"\"a\\u0061ab\"", CT, T_S, 1, {"aab"}},
    {"\"a\\u0061a\"", CT, T_S, 0, {"aab"}},
    {"\"\\u00e9t\\u00e9\"", CT, T_S, 1, {"t\xc3\xa9"}},
    {"\"say \\\"hi\\\"\"", CT, T_S, 1, {"\"hi\""}},
    {"\"x\"", CT, T_S, 1, {""}},
    {"\"\"", CT, T_S, 1, {""}},
    {"\"\"", CT, T_S, 0, {"a"}},
    {"123", CT, T_S, 0, {"2"}},
    {"[\"a\"]", CT, T_S, 0, {"a"}},
    {"\"abc\"", CT, T_J, 0, {"\"b\""}},
    {"\"abc\"", SW, T_I, 0, {"1"}},
    {"\"abc\"", SW, T_S, 0, {NULL}},
    /* JSON values: structural equality */
    {"1", EQ, T_J, 1, {"1.0"}},
    {"1.0", EQ, T_J, 1, {"1e0"}},
    {"1e0", EQ, T_J, 1, {"1"}},
    {"100", EQ, T_J, 1, {"1e2"}},
    {"9007199254740993", EQ, T_J, 1, {"9007199254740993"}},
    {"9007199254740993", EQ, T_J, 0, {"9007199254740992"}},
    {"1", EQ, T_J, 0, {"true"}},
    {"true", EQ, T_J, 1, {"true"}},
    {"true", EQ, T_J, 0, {"1"}},
    {"false", EQ, T_J, 0, {"true"}},
    {"false", EQ, T_J, 1, {" false "}},
    {"\"a\"", EQ, T_J, 1, {"\"a\""}},
    {"\"\\u0061\"", EQ, T_J, 1, {"\"a\""}},
    {"\"a\"", EQ, T_J, 1, {"\"\\u0061\""}},
    {"\"a\"", EQ, T_J, 0, {"\"b\""}},
    {"\"a\"", EQ, T_J, 0, {"[\"a\"]"}},
    {"\"1\"", EQ, T_J, 0, {"1"}},
    {"[1,2]", EQ, T_J, 1, {"[1.0, 2e0]"}},
    {"[1,2]", EQ, T_J, 1, {" [ 1 , 2 ] "}},
    {"[1,2]", EQ, T_J, 0, {"[2,1]"}},
    {"[1,2]", EQ, T_J, 0, {"[1,2,3]"}},
    {"[1,2,3]", EQ, T_J, 0, {"[1,2]"}},
    {"[1,2]", NE, T_J, 1, {"[1,2,3]"}},
    {"[]", EQ, T_J, 1, {"[]"}},
    {"{}", EQ, T_J, 1, {"{ }"}},
    {"[]", EQ, T_J, 0, {"{}"}},
    {"[null]", EQ, T_J, 1, {"[null]"}},
    {"[null]", EQ, T_J, 0, {"[false]"}},
    {"[true]", EQ, T_J, 0, {"[1]"}},
    {"{\"a\":1,\"b\":[1,{\"c\":null}]}", EQ, T_J, 1, {"{\"b\":[1.0,{\"c\":null}],\"a\":1}"}},
    {"{\"a\":1,\"b\":2}", EQ, T_J, 1, {"{\"b\":2,\"a\":1}"}},
    {"{\"a\":1}", EQ, T_J, 0, {"{\"a\":1,\"b\":2}"}},
    {"{\"a\":1,\"b\":2}", EQ, T_J, 0, {"{\"a\":1}"}},
    {"{\"a\":1}", EQ, T_J, 0, {"{\"b\":1}"}},
    {"{\"a\":1}", EQ, T_J, 0, {"{\"a\":\"1\"}"}},
    {"{\"a\":1,\"a\":2}", EQ, T_J, 1, {"{\"a\":2}"}},
    {"{\"a\":1,\"a\":2}", EQ, T_J, 0, {"{\"a\":1}"}},
    {"{\"a\":2}", EQ, T_J, 1, {"{\"a\":1,\"a\":2}"}},
    {"{\"a\":1,\"a\":2,\"b\":3}", EQ, T_J, 1, {"{\"b\":3,\"a\":2}"}},
    {"{\"a\":1,\"b\":2}", EQ, T_J, 0, {"{\"a\":1,\"a\":1}"}},
    {"{\"a\":1,\"a\":1}", EQ, T_J, 0, {"{\"a\":1,\"b\":2}"}},
    {"{\"\\u0061\":1}", EQ, T_J, 1, {"{\"a\":1}"}},
    {"{\"a\":1,\"\\u0061\":2}", EQ, T_J, 1, {"{\"a\":2}"}},
    {"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"x\"}]}}}", EQ, T_J, 1,
     {"{\"a\":{\"b\":{\"c\":[1e0,{\"d\":\"\\u0078\"}]}}}"}},
    {"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"x\"}]}}}", EQ, T_J, 0,
     {"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"y\"}]}}}"}},
    {"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"x\"}]}}}", NE, T_J, 1,
     {"{\"a\":{\"b\":{\"c\":[1,{\"d\":\"x\", \"e\":0}]}}}"}},
    /* JSON values: ordered when both are numbers or both strings */
    {"2", GT, T_J, 1, {"1.5"}},
    {"2", LT, T_J, 0, {"1.5"}},
    {"true", LE, T_J, 1, {"1"}},
    {"true", GE, T_J, 1, {"1"}},
    {"false", LT, T_J, 1, {"true"}},
    {"\"b\"", GT, T_J, 1, {"\"a\""}},
    {"\"b\"", GT, T_J, 1, {"\"\\u0061\""}},
    {"\"ab\"", LT, T_J, 1, {"\"abc\""}},
    {"[1]", LT, T_J, 0, {"[2]"}},
    {"[1]", GE, T_J, 0, {"[1]"}},
    {"{}", LE, T_J, 0, {"{}"}},
    {"1", LT, T_J, 0, {"\"2\""}},
    {"\"1\"", LT, T_J, 0, {"2"}},
    {"5", BTW, T_J, 1, {"1", "10"}},
    {"5", BTW, T_J, 0, {"6", "10"}},
    {"\"m\"", BTW, T_J, 1, {"\"a\"", "\"z\""}},
    /* the JSON value null equals nothing */
    {"1", EQ, T_J, 0, {"null"}},
    {"1", NE, T_J, 1, {"null"}},
    {"null", EQ, T_J, 0, {"null"}},
    {"null", NE, T_J, 0, {"null"}},
    /* a JSON value that is not JSON equals nothing */
    {"1", EQ, T_J, 0, {"1 2"}},
    {"1", NE, T_J, 1, {"nope"}},
    {"1", EQ, T_J, 0, {""}},
    {"[1]", AC, T_J, 0, {"[1"}},
    /* IN and NOT IN */
    {"2", IN, T_I, 1, {"1", "2", "3"}},
    {"4", IN, T_I, 0, {"1", "2", "3"}},
    {"4", NIN, T_I, 1, {"1", "2", "3"}},
    {"2", NIN, T_I, 0, {"1", "2"}},
    {"2.0", IN, T_I, 1, {"1", "2"}},
    {"2", IN, T_I, 0, {NULL}},
    {"2", NIN, T_I, 1, {NULL}},
    {"{\"a\":1.0}", IN, T_J, 1, {"[1]", "{\"a\":1}"}},
    {"{\"a\":1.0}", NIN, T_J, 0, {"[1]", "{\"a\":1}"}},
    /* BETWEEN */
    {"5", BTW, T_I, 1, {"5", "10"}},
    {"5", BTW, T_I, 0, {"6", "10"}},
    {"5", BTW, T_I, 1, {"1", "5"}},
    {"5", BTW, T_I, 0, {"10", "1"}},
    {"5.5", BTW, T_I, 1, {"5", "6"}},
    {"5", BTW, T_I, 0, {"1"}},
    /* NULL and absent */
    {"null", MOTE_IS_NULL, 0, 1, {NULL}},
    {NULL, MOTE_IS_NULL, 0, 1, {NULL}},
    {"1", MOTE_IS_NULL, 0, 0, {NULL}},
    {"null", MOTE_NOT_NULL, 0, 0, {NULL}},
    {NULL, MOTE_NOT_NULL, 0, 0, {NULL}},
    {"[]", MOTE_NOT_NULL, 0, 1, {NULL}},
    {"null", MOTE_KEY_EXISTS, 0, 1, {NULL}},
    {NULL, MOTE_KEY_EXISTS, 0, 0, {NULL}},
    {"false", MOTE_KEY_EXISTS, 0, 1, {NULL}},
    {"null", NE, T_I, 0, {"1"}},
    {NULL, NE, T_I, 0, {"1"}},
    {"null", LT, T_I, 0, {"1"}},
    {NULL, GE, T_I, 0, {"1"}},
    {"null", BTW, T_I, 0, {"0", "1"}},
    {"null", IN, T_J, 0, {"null"}},
    {"null", NIN, T_I, 0, {"1"}},
    {NULL, NIN, T_I, 0, {"1"}},
    {"null", AC, T_J, 0, {"null"}},
    {"null", SW, T_S, 0, {""}},
    {NULL, CT, T_S, 0, {""}},
    /* a NULL value equals nothing, orders nothing */
    {"1", EQ, T_I, 0, {NULLV}},
    {"1", NE, T_I, 1, {NULLV}},
    {"1", LT, T_I, 0, {NULLV}},
    {"1", BTW, T_I, 0, {NULLV, "2"}},
    {"1", IN, T_I, 1, {NULLV, "1"}},
    {"1", NIN, T_I, 1, {NULLV}},
    {"[1]", AC, T_I, 0, {NULLV}},
    {"\"a\"", SW, T_S, 0, {NULLV}},
    {"\"a\"", EQ, T_S, 0, {NULLV}},
    {"1", EQ, T_J, 0, {NULLV}},
    /* ARRAY CONTAINS: an element equal by the rules of EQ */
    {"[\"a\",\"b\"]", AC, T_S, 1, {"b"}},
    {"[\"a\",\"b\"]", AC, T_S, 0, {"c"}},
    {"[\"a\\u0062\"]", AC, T_S, 1, {"ab"}},
    {"[1,2.5,3]", AC, T_I, 0, {"2"}},
    {"[1,2.5,3]", AC, T_F, 1, {"2.5"}},
    {"[1,2.5,3]", AC, T_I, 1, {"3"}},
    {"[1, 2.0]", AC, T_I, 1, {"2"}},
    {"[9007199254740993]", AC, T_I, 1, {"9007199254740993"}},
    {"[9007199254740993]", AC, T_I, 0, {"9007199254740992"}},
    {"[true]", AC, T_B, 1, {"1"}},
    {"[true]", AC, T_I, 1, {"1"}},
    {"[true]", AC, T_J, 0, {"1"}},
    {"[true]", AC, T_J, 1, {"true"}},
    {"[{\"a\":1,\"b\":2}]", AC, T_J, 1, {"{\"b\":2,\"a\":1}"}},
    {"[{\"a\":1,\"b\":2}]", AC, T_J, 0, {"{\"a\":1}"}},
    {"[0, {\"a\":[1,{\"b\":null}]}]", AC, T_J, 1, {"{\"a\":[1.0,{\"b\":null}]}"}},
    {"[[1,2]]", AC, T_J, 1, {"[1,2]"}},
    {"[[1,2]]", AC, T_I, 0, {"1"}},
    {"[null]", AC, T_J, 0, {"null"}},
    {"[null, 1]", AC, T_I, 1, {"1"}},
    {"[]", AC, T_I, 0, {"1"}},
    {"[ ]", AC, T_J, 0, {"[]"}},
    {"\"abc\"", AC, T_S, 0, {"a"}},
    {"{\"a\":1}", AC, T_I, 0, {"1"}},
    {"[1, \"1\"]", AC, T_S, 1, {"1"}},
    {"[\"x\", 1]", AC, T_S, 0, {"1"}},
    {"[\"\\u00e9\"]", AC, T_S, 1, {"\xc3\xa9"}},
    {"[\"\xc3\xa9\"]", AC, T_J, 1, {"\"\\u00e9\""}},
    {"[1]", AC, T_I, 0, {NULL}},
    /* other operators and types */
    {"1", 0, T_I, 0, {"1"}},
    {"1", 99, T_I, 0, {"1"}},
    {"7", EQ, MOTE_T_INT32, 1, {"7"}},
    {"1", EQ, MOTE_T_BYTES, 0, {"1"}},
};

TEST(json_test_table)
{
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        expect(rows[r].doc, rows[r].op, rows[r].type, rows[r].v, rows[r].want);
    /* no vals at all */
    jval v;
    uint8_t *d = exact("[1]", 3);
    mote__json_at(d, 3, NULL, &v);
    CHECK(!mote__json_test(&v, MOTE_EQ, T_I, NULL, 0));
    CHECK(!mote__json_test(&v, MOTE_IN, T_I, NULL, 0));
    CHECK(mote__json_test(&v, MOTE_NOT_IN, T_I, NULL, 0));
    CHECK(!mote__json_test(&v, MOTE_ARRAY_CONTAINS, T_I, NULL, 1));
    CHECK(mote__json_test(&v, MOTE_KEY_EXISTS, T_I, NULL, 0));
    free(d);
    /* strings holding NUL, both sides */
    d = exact("\"a\\u0000b\"", 10);
    mote__json_at(d, 10, NULL, &v);
    mote_value s = {0};
    s.v.s.p = "a\0b";
    s.v.s.n = 3;
    CHECK(mote__json_test(&v, MOTE_EQ, T_S, &s, 1));
    CHECK(mote__json_test(&v, MOTE_ENDS_WITH, T_S, &s, 1));
    s.v.s.n = 2;
    CHECK(!mote__json_test(&v, MOTE_EQ, T_S, &s, 1));
    CHECK(mote__json_test(&v, MOTE_GT, T_S, &s, 1));
    CHECK(mote__json_test(&v, MOTE_STARTS_WITH, T_S, &s, 1));
    s.v.s.p = "\0";
    s.v.s.n = 1;
    CHECK(mote__json_test(&v, MOTE_CONTAINS, T_S, &s, 1));
    s.v.s.p = NULL; /* an empty string may have no bytes */
    s.v.s.n = 0;
    CHECK(mote__json_test(&v, MOTE_CONTAINS, T_S, &s, 1));
    CHECK(mote__json_test(&v, MOTE_GT, T_S, &s, 1));
    free(d);
}

#undef EQ
#undef NE
#undef LT
#undef LE
#undef GT
#undef GE
#undef IN

/* Numbers of any length convert as strtod would convert them whole. */
TEST(json_test_long_numbers)
{
    static const struct {
        const char *head;
        char fill;
        int count;
        const char *tail;
        int type;
        const char *val;
        int op, want;
    } rows[] = {
        {"1", '0', 1000, "", T_F, "inf", MOTE_EQ, 1},
        {"-1", '0', 1000, "", T_I, "-9223372036854775808", MOTE_LT, 1},
        {"1", '0', 1000, "e-1000", T_I, "1", MOTE_EQ, 1},
        {"1", '0', 1000, "e-999", T_I, "10", MOTE_EQ, 1},
        {"0.", '0', 1000, "1e1002", T_I, "10", MOTE_EQ, 1},
        {"0.", '0', 1000, "1", T_I, "0", MOTE_GT, 0}, /* 1e-1001: 0 as a double */
        {"0.", '0', 300, "1", T_F, "1e-301", MOTE_EQ, 1},
        {"1.", '0', 900, "1", T_F, "1", MOTE_EQ, 1},
        /* halfway between two doubles: the digit far away decides */
        {"9007199254740993.", '0', 900, "1", T_F, "9007199254740994", MOTE_EQ, 1},
        {"9007199254740993.", '0', 900, "", T_F, "9007199254740992", MOTE_EQ, 1},
        /* an integer past 2^53 is not equal to its float syntax (a double) */
        {"9007199254740993", '0', 0, "", T_J, "9007199254740993.", MOTE_EQ, 0},
        {"9007199254740992", '0', 0, "", T_J, "9007199254740992.", MOTE_EQ, 1},
        {"12345678901234567890", '9', 2000, "e-2000", T_F, "12345678901234567891", MOTE_EQ, 1},
        {"", '9', 3000, "", T_I, "9223372036854775807", MOTE_GT, 1},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        size_t hn = strlen(rows[r].head), tn = strlen(rows[r].tail), n = hn + rows[r].count + tn;
        char *num = malloc(n + 1);
        CHECK(num);
        memcpy(num, rows[r].head, hn);
        memset(num + hn, rows[r].fill, (size_t)rows[r].count);
        memcpy(num + hn + rows[r].count, rows[r].tail, tn + 1);
        OK(mote__json_check((const uint8_t *)num, n));
        const char *vals[] = {rows[r].val, NULL};
        char jv[64];
        if (rows[r].type == T_J) { /* the value is the number, with a long fraction */
            snprintf(jv, sizeof jv, "%s%s", rows[r].val, "0000000000000000000000000000");
            vals[0] = jv;
        }
        expect(num, rows[r].op, rows[r].type, vals, rows[r].want);
        free(num);
    }
}

/* ---- Checking ------------------------------------------------------------ */

/*
 * Strings are skipped 16 bytes at a time (SSE2) and then 8 at a time: one
 * byte that needs a look (the closing quote, an escape, a control byte,
 * UTF-8, a byte that is not UTF-8) at every place of strings of every
 * length up to 70, so every block boundary and tail is crossed. The
 * document {"s":"...","k":7} is checked, and k found after the string.
 */
TEST(json_string_skip)
{
    static const struct {
        const char *bytes, *name;
        int valid;
    } odd[] = {
        {"", "none", 1},
        {"\\n", "escape", 1},
        {"\\\"", "escaped quote", 1},
        {"\xc3\xa9", "2-byte UTF-8", 1},
        {"\xf0\x9f\x98\x80", "4-byte UTF-8", 1},
        {"\x1f", "control byte", 0},
        {"\x80", "lone continuation byte", 0},
        {"\"", "quote", 0}, /* ends the string: the rest is not JSON */
    };
    static const char plain[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; /* the bytes around the odd one */
    jpath *k = compile("k");
    char doc[128];
    for (size_t o = 0; o < sizeof odd / sizeof odd[0]; o++)
        for (size_t len = 0; len <= 70; len++)
            for (size_t at = 0; at <= len; at++) {
                size_t n = (size_t)snprintf(doc, sizeof doc, "{\"s\":\"%.*s%s%.*s\",\"k\":7}",
                                            (int)at, plain,
                                            odd[o].bytes, (int)(len - at), plain);
                uint8_t *d = exact(doc, n);
                jval v;
                mote__json_at(d, n, k, &v);
                int valid = mote__json_check(d, n) == MOTE_OK;
                if (valid != odd[o].valid || (v.kind == J_NUMBER) != odd[o].valid ||
                    (valid && (v.n != 1 || *v.p != '7'))) {
                    fprintf(stderr, "%s after %zu of %zu bytes: check %d, k kind %d\n", odd[o].name, at,
                            len, valid, v.kind);
                    CHECK(0);
                }
                free(d);
            }
    mote__free(k);
}

TEST(json_check_table)
{
    static const char *const good[] = {
        "0", "-0", "1.5e-3", "-1E+10", "1e99999", "\"\"", "\"a\\u0000b\"", "\"\\ud800\"",
        "\"\xc3\xa9\xf0\x9f\x98\x80\"", "\"\x7f\"", "\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"", "[]", "{}",
        "[[[]]]", " [ 1 , { \"a\" : [ true , false , null ] } ] \n", "{\"a\":1,\"a\":2}",
        "\t\r\n 7 \t\r\n", "{\"\":\"\"}", "[\"[{\", \"}]\"]",
        /* a level left by one kind of container and entered by the other */
        "[{\"a\":1},[2],{\"b\":[3]}]", "{\"a\":[{}],\"b\":[1,{\"c\":[2]}],\"d\":{}}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint8_t *d = exact(good[i], strlen(good[i]));
        if (mote__json_check(d, strlen(good[i]))) {
            fprintf(stderr, "%s: %s\n", good[i], mote_errmsg(NULL));
            CHECK(0);
        }
        free(d);
    }
    static const struct {
        const char *text, *what;
        int pos;
    } bad[] = {
        {"", "expected a value", 0},
        {"  ", "expected a value", 2},
        {"[1,]", "expected a value", 3},
        {"{\"a\" 1}", "expected :", 5},
        {"{1:2}", "expected a key string", 1},
        {"{\"a\":1,}", "expected a key string", 7},
        {"[1 2]", "expected , or ]", 3},
        {"{\"a\":1 \"b\":2}", "expected , or }", 7},
        {"[1}", "expected , or ]", 2},
        {"{\"a\":1]", "expected , or }", 6},
        {"tru", "bad literal", 0},
        {"nul", "bad literal", 0},
        {"True", "expected a value", 0},
        {"01", "unexpected character after the value", 1},
        {"1.", "bad number", 2},
        {"-", "bad number", 1},
        {"-a", "bad number", 1},
        {"1e", "bad number", 2},
        {"1e+", "bad number", 3},
        {"1.e5", "bad number", 2},
        {".5", "expected a value", 0},
        {"+1", "expected a value", 0},
        {"\"a", "unterminated string", 2},
        {"\"\\x\"", "bad escape", 1},
        {"\"\\u12\"", "bad \\u escape", 1},
        {"\"\\", "unterminated string", 2},
        {"\"a\x01\"", "control character in a string", 2},
        {"\"a\tb\"", "control character in a string", 2},
        {"\"\xff\"", "invalid UTF-8", 1},
        {"\"\xc0\x80\"", "invalid UTF-8", 1},
        {"\"\xed\xa0\x80\"", "invalid UTF-8", 1},
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8", 1},
        {"\"\xe2\x82\"", "invalid UTF-8", 1},
        {"\"\x80\"", "invalid UTF-8", 1},
        {"[1]]", "unexpected character after the value", 3},
        {"1 2", "unexpected character after the value", 2},
        {"[", "expected a value", 1},
        {"[1", "expected , or ]", 2},
        {"{", "expected a key string", 1},
        {"{\"a\"", "expected :", 4},
        {"{\"a\":", "expected a value", 5},
        {"NaN", "expected a value", 0},
        {"Infinity", "expected a value", 0},
        {"/**/1", "expected a value", 0},
        {"'a'", "expected a value", 0},
        {"\xef\xbb\xbf" "1", "expected a value", 0},
        {"[1,\n\"a\",\n", "expected a value", 9},
    };
    char want[200];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *d = exact(bad[i].text, strlen(bad[i].text));
        int rc = mote__json_check(d, strlen(bad[i].text));
        snprintf(want, sizeof want, "invalid JSON: %s at byte %d", bad[i].what, bad[i].pos);
        if (rc != MOTE_INVALID || strcmp(mote_errmsg(NULL), want)) {
            fprintf(stderr, "%s: %d \"%s\", expected \"%s\"\n", bad[i].text, rc,
                    mote_errmsg(NULL), want);
            CHECK(0);
        }
        free(d);
    }
    /* a NUL byte is not whitespace */
    CHECK_RC(mote__json_check((const uint8_t *)"1\0", 2), MOTE_INVALID);
    CHECK(!strcmp(mote_errmsg(NULL),
                  "invalid JSON: unexpected character after the value at byte 1"));
    CHECK_RC(mote__json_check(NULL, 1), MOTE_INVALID);
    CHECK_RC(mote__json_check(NULL, 0), MOTE_INVALID);
}

/* ---- Robustness ---------------------------------------------------------- */

/* A random JSON value into b (of cap bytes, *n used), at most `depth` deep:
 * keys from a few, repeated sometimes; strings with escapes and UTF-8. */
static void gen(uint64_t *rs, char *b, size_t cap, size_t *n, int depth)
{
    static const char *const scalars[] = {
        "null", "true", "false", "0", "-1", "1.5", "2e3", "-0.25E-2", "9007199254740993",
        "12345678901234567890123", "\"\"", "\"a\"", "\"b\\u0062\"", "\"\\u00e9\"",
        "\"\xc3\xa9\"", "\"\\ud83d\\ude00\"", "\"x\\\"y\\\\z\"", "\"line\\nbreak\"",
        "\"\\u0000\"", "\"[{,:}]\""};
    static const char *const keys[] = {"\"a\"", "\"b\"", "\"c\"", "\"\\u0061\"",
                                       "\"\xc3\xa9\"", "\"k0\"", "\"\""};
    size_t room = cap - *n;
    int r = (int)(test_rand(rs) % 10);
    if (depth <= 0 || r < 4 || room < 200) {
        const char *s = scalars[test_rand(rs) % (sizeof scalars / sizeof scalars[0])];
        *n += (size_t)snprintf(b + *n, cap - *n, "%s%s", test_rand(rs) % 4 ? "" : " ", s);
        return;
    }
    int obj = r < 7;
    int count = (int)(test_rand(rs) % 5);
    b[(*n)++] = obj ? '{' : '[';
    for (int i = 0; i < count && cap - *n > 200; i++) {
        if (i)
            b[(*n)++] = ',';
        if (obj) {
            const char *k = keys[test_rand(rs) % (sizeof keys / sizeof keys[0])];
            *n += (size_t)snprintf(b + *n, cap - *n, "%s%s:", k, test_rand(rs) % 3 ? "" : " ");
        }
        gen(rs, b, cap, n, depth - 1);
    }
    if (test_rand(rs) % 3 == 0)
        b[(*n)++] = ' ';
    b[(*n)++] = obj ? '}' : ']';
    b[*n] = 0;
}

/* Mutate d[0..*n) (of cap bytes) once: a byte changed, inserted or removed,
 * a piece of JSON inserted, or the end cut. */
static void mutate(uint64_t *rs, uint8_t *d, size_t *n, size_t cap)
{
    static const char *const bits[] = {"[", "]", "{", "}", "\"", "\\", ",", ":", "\\u",
                                       "\\ud83d", "\xc3", "\xff", "1e", "-", "null", " "};
    size_t at = *n ? test_rand(rs) % (*n + 1) : 0;
    switch (test_rand(rs) % 6) {
    case 0: /* a byte changed */
        if (at < *n)
            d[at] = (uint8_t)test_rand(rs);
        break;
    case 1: /* a byte changed to a structural one */
        if (at < *n)
            d[at] = (uint8_t)"[]{}\",:\\ 0"[test_rand(rs) % 10];
        break;
    case 2: { /* a piece inserted */
        const char *s = bits[test_rand(rs) % (sizeof bits / sizeof bits[0])];
        size_t k = strlen(s);
        if (*n + k <= cap) {
            memmove(d + at + k, d + at, *n - at);
            memcpy(d + at, s, k);
            *n += k;
        }
        break;
    }
    case 3: /* a byte removed */
        if (at < *n) {
            memmove(d + at, d + at + 1, *n - at - 1);
            (*n)--;
        }
        break;
    case 4: /* cut */
        *n = at;
        break;
    default: /* a random byte inserted */
        if (*n < cap) {
            memmove(d + at + 1, d + at, *n - at);
            d[at] = (uint8_t)test_rand(rs);
            (*n)++;
        }
    }
}

static const char *const probe_paths[] = {
    "", "a", "b", "c", "a.b", "a.a", "a[0]", "[0]", "[1]", "[0].a", "$.b[1].c", "[0][0]",
    "$.\"\xc3\xa9\"", "k0", "$.\"\"", "[2].a[0]", "a.b.c.a",
};

/* Everything on the value found at v of document d[0..n) (ASan watches). */
static void probe_value(const jval *v, const uint8_t *d, size_t n, uint64_t *rs)
{
    CHECK(v->p >= d && v->n <= n && (size_t)(v->p - d) <= n - v->n);
    OK(mote__json_check(v->p, v->n));
    /* a value found equals itself as a JSON value, unless it is null */
    mote_value self = {0};
    self.v.s.p = v->p;
    self.v.s.n = v->n;
    CHECK(mote__json_test(v, MOTE_EQ, T_J, &self, 1) == (v->kind != J_NULL));
    CHECK(mote__json_test(v, MOTE_IN, T_J, &self, 1) == (v->kind != J_NULL));
    if (v->kind == J_STRING) {
        CHECK(mote__json_test(v, MOTE_LE, T_J, &self, 1));
        CHECK(mote__json_test(v, MOTE_GE, T_J, &self, 1));
    }
    static const char *const strs[] = {"a", "", "\xc3\xa9", "b\"", "z"};
    static const char *const jsons[] = {"1", "\"a\"", "[1]", "{\"a\":1}", "null", "[]", "{}"};
    mote_value vals[2] = {{0}};
    for (int op = MOTE_EQ; op <= MOTE_KEY_EXISTS; op++) {
        const char *s = strs[test_rand(rs) % 5];
        uint8_t *sb = exact(s, strlen(s));
        vals[0].v.s.p = vals[1].v.s.p = sb;
        vals[0].v.s.n = vals[1].v.s.n = strlen(s);
        mote__json_test(v, op, T_S, vals, 2);
        free(sb);
        const char *j = jsons[test_rand(rs) % 7];
        uint8_t *jb = exact(j, strlen(j));
        vals[0].v.s.p = vals[1].v.s.p = jb;
        vals[0].v.s.n = vals[1].v.s.n = strlen(j);
        mote__json_test(v, op, T_J, vals, 2);
        free(jb);
        vals[0].v.i = (int64_t)(test_rand(rs) % 3);
        vals[1].v.i = 2;
        mote__json_test(v, op, T_I, vals, 2);
        vals[0].v.f = 1.5;
        vals[1].v.f = NAN;
        mote__json_test(v, op, T_F, vals, 2);
    }
}

/* json_test on any bytes said to be a value of any kind, and any bytes as a
 * JSON value: no crash, no read outside them. */
static void probe_garbage(const uint8_t *d, size_t n, uint64_t *rs, const jval *good)
{
    size_t a = n ? test_rand(rs) % (n + 1) : 0, b = a + (n - a ? test_rand(rs) % (n - a + 1) : 0);
    uint8_t *g = exact(d + a, b - a);
    jval v = {1 + (int)(test_rand(rs) % 7), g, b - a};
    mote_value val = {0};
    val.v.s.p = "\"a\"";
    val.v.s.n = 3;
    for (int op = MOTE_EQ; op <= MOTE_KEY_EXISTS; op++) {
        mote__json_test(&v, op, T_J, &val, 1);
        mote__json_test(&v, op, T_S, &val, 1);
    }
    val.v.s.p = g; /* the bytes as a JSON value */
    val.v.s.n = b - a;
    if (good->kind != J_ABSENT)
        for (int op = MOTE_EQ; op <= MOTE_KEY_EXISTS; op++)
            mote__json_test(good, op, T_J, &val, 1);
    free(g);
}

TEST(json_mutations)
{
    enum { NDOCS = 50, CAP = 4096 };
    static const char *const fixed[] = {
        "{\"a\":{\"b\":[1,{\"c\":\"x\"}],\"a\":2},\"b\":[null,true,{\"c\":[1,2]}]}",
        "[{\"a\":[\"\\u00e9\",\"\\ud83d\\ude00\"]},[[]],{}]",
        "{\"\xc3\xa9\":\"\xc3\xa9\",\"k0\":{\"\":1},\"c\":-1.5e-7}",
        "  [ 1 , 2 , [ 3 , [ 4 ] ] ]  ",
        "\"just a string with \\\"escapes\\\" \\\\ and \\/\"",
        "{\"a\":1,\"a\":{\"b\":{\"c\":{\"a\":[0,1,2]}}}}",
        "12345678901234567890.123e-4",
        "[\"[\",\"]\",\"{\",\"}\",\"\\\"\"]",
    };
    uint64_t rs = 0x5eed;
    size_t npaths = sizeof probe_paths / sizeof probe_paths[0];
    jpath *paths[sizeof probe_paths / sizeof probe_paths[0]];
    for (size_t i = 0; i < npaths; i++)
        paths[i] = compile(probe_paths[i]);
    char docs[NDOCS][CAP];
    size_t lens[NDOCS];
    for (int i = 0; i < NDOCS; i++) {
        size_t n = 0;
        if (i < (int)(sizeof fixed / sizeof fixed[0]))
            n = (size_t)snprintf(docs[i], CAP, "%s", fixed[i]);
        else
            gen(&rs, docs[i], CAP - 1, &n, 1 + i % 6);
        lens[i] = n;
        OK(mote__json_check((const uint8_t *)docs[i], n));
    }
    int rounds = 400 * test_scale(), found = 0, valid = 0;
    uint8_t work[CAP * 2];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NDOCS; i++) {
            size_t n = lens[i];
            memcpy(work, docs[i], n);
            int k = 1 + (int)(test_rand(&rs) % 4);
            for (int m = 0; m < k; m++)
                mutate(&rs, work, &n, sizeof work);
            uint8_t *d = exact(work, n);
            int rc = mote__json_check(d, n);
            CHECK(rc == MOTE_OK || (rc == MOTE_INVALID && strstr(mote_errmsg(NULL), " at byte ")));
            valid += rc == MOTE_OK;
            jval whole;
            mote__json_at(d, n, NULL, &whole);
            if (rc == MOTE_OK) /* then the whole document is a value */
                CHECK(whole.kind != J_ABSENT);
            jval v = {J_ABSENT, NULL, 0};
            for (size_t p = 0; p < npaths; p++) {
                mote__json_at(d, n, paths[p], &v);
                if (v.kind != J_ABSENT) {
                    probe_value(&v, d, n, &rs);
                    found++;
                }
            }
            probe_garbage(d, n, &rs, &whole);
            /* the same bytes as a path */
            jpath *jp;
            if (mote__jpath_compile((const char *)d, n, &jp) == MOTE_OK)
                mote__free(jp);
            free(d);
        }
    for (size_t i = 0; i < npaths; i++)
        mote__free(paths[i]);
    /* the mutations kept some documents valid and found values in many */
    CHECK(valid > rounds && found > rounds * NDOCS / 4);
}

/* d: `depth` openings of `open`, then `mid`, then closings of `close`. */
static uint8_t *nest(const char *open, size_t depth, const char *mid, const char *close,
                     size_t *n)
{
    size_t on = strlen(open), mn = strlen(mid), cn = strlen(close);
    *n = depth * (on + cn) + mn;
    uint8_t *d = malloc(*n ? *n : 1), *w = d;
    CHECK(d);
    for (size_t i = 0; i < depth; i++, w += on)
        memcpy(w, open, on);
    memcpy(w, mid, mn);
    w += mn;
    for (size_t i = 0; i < depth; i++, w += cn)
        memcpy(w, close, cn);
    return d;
}

TEST(json_deep_nesting)
{
    size_t n;
    jval v;
    char want[100];
    /* 100,000 levels: refused quickly, no stack overflow anywhere */
    static const char *const opens[][3] = {
        {"[", "", "]"}, {"{\"a\":", "1", "}"}, {"[", "", ""}, {"[{\"a\":", "1", "}]"}};
    jpath *p0 = compile("[0][0]"), *pa = compile("a.a.a");
    for (int k = 0; k < 4; k++) {
        uint8_t *d = nest(opens[k][0], 100000, opens[k][1], opens[k][2], &n);
        CHECK_RC(mote__json_check(d, n), MOTE_INVALID);
        snprintf(want, sizeof want, "invalid JSON: nesting too deep at byte %d",
                 k == 1 ? 5000 : k == 3 ? 3000 : 1000);
        CHECK(!strcmp(mote_errmsg(NULL), want));
        mote__json_at(d, n, NULL, &v);
        CHECK(v.kind == J_ABSENT);
        mote__json_at(d, n, p0, &v);
        CHECK(v.kind == J_ABSENT);
        mote__json_at(d, n, pa, &v);
        CHECK(v.kind == J_ABSENT);
        /* the bytes said to be a container, compared with themselves */
        jval raw = {k == 1 ? J_OBJECT : J_ARRAY, d, n};
        mote_value self = {0}, empty = {0};
        self.v.s.p = d;
        self.v.s.n = n;
        empty.v.s.p = "[]";
        empty.v.s.n = 2;
        CHECK(!mote__json_test(&raw, MOTE_EQ, T_J, &self, 1));
        CHECK(!mote__json_test(&raw, MOTE_ARRAY_CONTAINS, T_J, &empty, 1));
        CHECK(!mote__json_test(&raw, MOTE_LT, T_J, &self, 1));
        free(d);
    }
    /* deep inside a string it is only text */
    uint8_t *d = nest("[", 100000, "", "", &n);
    uint8_t *s = malloc(n + 4);
    CHECK(s);
    memcpy(s, "[\"", 2);
    memcpy(s + 2, d, n);
    memcpy(s + 2 + n, "\"]", 2);
    OK(mote__json_check(s, n + 4));
    jpath *p = compile("[0]");
    mote__json_at(s, n + 4, p, &v);
    CHECK(v.kind == J_STRING && v.n == n + 2);
    mote__free(p);
    free(s);
    free(d);
    /* a deep value next to the one wanted: the whole object is read */
    d = nest("[", 100000, "", "]", &n);
    s = malloc(n + 14);
    CHECK(s);
    memcpy(s, "{\"a\":1,\"b\":", 11);
    memcpy(s + 11, d, n);
    memcpy(s + 11 + n, "}", 1);
    p = compile("a");
    mote__json_at(s, n + 12, p, &v);
    CHECK(v.kind == J_ABSENT);
    mote__free(p);
    free(s);
    free(d);
    /* JSON_MAX_DEPTH levels are well-formed, one more is not */
    d = nest("[", JSON_MAX_DEPTH, "", "]", &n);
    OK(mote__json_check(d, n));
    mote__json_at(d, n, NULL, &v);
    CHECK(v.kind == J_ARRAY && v.n == n);
    free(d);
    d = nest("[", JSON_MAX_DEPTH + 1, "", "]", &n);
    CHECK_RC(mote__json_check(d, n), MOTE_INVALID);
    mote__json_at(d, n, NULL, &v);
    CHECK(v.kind == J_ABSENT);
    free(d);
    /* a path as deep as the deepest value, and one step past it */
    char *path = malloc(2 * JSON_MAX_DEPTH + 4);
    CHECK(path);
    for (int i = 0; i < JSON_MAX_DEPTH; i++)
        memcpy(path + 2 * i, ".a", 2);
    path[2 * JSON_MAX_DEPTH] = 0;
    jpath *deep = compile(path), *deeper;
    memcpy(path + 2 * JSON_MAX_DEPTH, ".a", 3);
    OK(mote__jpath_compile(path, strlen(path), &deeper));
    for (int extra = 0; extra < 2; extra++) {
        d = nest("{\"a\":", JSON_MAX_DEPTH + (size_t)extra, "1", "}", &n);
        CHECK_RC(mote__json_check(d, n), extra ? MOTE_INVALID : MOTE_OK);
        mote__json_at(d, n, deep, &v);
        CHECK(v.kind == (extra ? J_ABSENT : J_NUMBER));
        mote__json_at(d, n, deeper, &v);
        CHECK(v.kind == J_ABSENT);
        free(d);
    }
    mote__free(deep);
    mote__free(deeper);
    free(path);
    /* structural comparison goes JSON_EQ_DEPTH levels down, no further */
    for (size_t depth = JSON_EQ_DEPTH; depth <= JSON_EQ_DEPTH + 2; depth++) {
        size_t en;
        d = nest("[", depth, "7", "]", &n);
        uint8_t *e = nest("[", depth, "7.0", "]", &en);
        mote__json_at(d, n, NULL, &v);
        mote_value other = {0};
        other.v.s.p = e;
        other.v.s.n = en;
        CHECK(v.kind == J_ARRAY);
        CHECK(mote__json_test(&v, MOTE_EQ, T_J, &other, 1) == (depth <= JSON_EQ_DEPTH));
        CHECK(mote__json_test(&v, MOTE_NE, T_J, &other, 1) == (depth > JSON_EQ_DEPTH));
        free(e);
        free(d);
    }
    mote__free(p0);
    mote__free(pa);
}
