/*
 * json.c — values inside JSON text, for conditions on JSON paths: a path is
 * compiled once (mote__jpath_compile), the value at it is found in each
 * stored document (mote__json_at) and tested against the condition's values
 * (mote__json_test); mote__json_check says whether text is JSON at all.
 *
 * Paths. An optional `$`, then steps: `.key` (one or more bytes other than
 * `.` and `[`, not starting with `"`), `."key"` or `["key"]` (a JSON string
 * literal, escapes decoded to UTF-8), `[N]` (an array index: decimal, no sign,
 * no leading zero, at most INT64_MAX). A path starting with anything but `$`,
 * `.` or `[` has an implied `$.` before it (`a.b[2]` is `$.a.b[2]`, as
 * LangGraph writes filters). Empty or `$` alone: the whole document. There is
 * no whitespace between steps. A compiled path is one block: the steps, then
 * the decoded key bytes they point at; it is parsed twice, once to measure
 * the block and once to fill it, by the same code.
 *
 * Reading. Documents are read where they are stored, never parsed into a
 * tree, and nothing is allocated. A key step reads the whole object, since
 * when a key is repeated its last occurrence counts; an index step reads the
 * elements up to the one wanted. Keys are compared with the step's key as
 * they are decoded, escape by escape ("\u00e9" matches a step key "é").
 * Every value read on the way, and the value found, is checked as
 * mote__json_check would check it, so a value found is well-formed JSON;
 * anything malformed on the way makes the value absent. What follows the
 * value found (the rest of its array, of the document) is not read.
 *
 * No recursion whose depth the input chooses: a value is scanned by one loop
 * that keeps the kind of each open container in a bit of a stack array of
 * JSON_MAX_DEPTH bits (125 bytes). Nesting deeper than JSON_MAX_DEPTH (1000,
 * SQLite's limit) is not well-formed, so a document of 100,000 `[` costs
 * nothing but a scan. Structural comparison of two values does recurse, into
 * their nested containers, but stops at JSON_EQ_DEPTH (256) levels: values
 * nested deeper compare unequal.
 *
 * Strings must be UTF-8, without raw control characters. A `\u` escape of a
 * surrogate that is not half of a pair decodes to that code point's 3-byte
 * form (as Python's "surrogatepass" writes it), so escapes stay distinct.
 *
 * Comparisons follow SQL as SQLite's json_extract gives them:
 *
 *   - absent and JSON null are SQL NULL: every operator is false for them
 *     except IS NULL (true), NOT NULL (false) and KEY EXISTS (true for a
 *     null, false when absent); any other value is NOT NULL and exists.
 *   - numbers (and true/false as 1/0) against integer, float and bool values:
 *     exactly, an integer of the document that fits int64 as that integer,
 *     any other number as the double strtod makes of it (correctly rounded
 *     however many digits it has; inf past the range); an int64 against a
 *     double exactly, without long double. A NaN equals and orders nothing.
 *   - strings against string values: their decoded UTF-8 bytes, memcmp
 *     order, a prefix before what it begins.
 *   - JSON values (the text of any JSON value): equal structurally —
 *     numbers numerically, strings decoded, arrays element by element,
 *     objects as sets of keys (the last of a repeated key) with equal values,
 *     true, false and null by kind (so true is not 1 here). Ordered only
 *     when both are numbers (true and false as 1 and 0) or both strings.
 *   - anything else is of another kind: not equal, not ordered.
 *
 * A condition value with `null` set, like a NaN, equals nothing and orders
 * nothing (so NE and NOT IN hold against it). NE is NOT EQ and NOT IN is NOT
 * IN, both false on NULL. STARTS WITH, ENDS WITH and CONTAINS take a string
 * value and hold only for strings. ARRAY CONTAINS holds for an array with an
 * element equal to the value by the rules of EQ (a null element equals
 * nothing).
 */
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"

/* ---- Scanning ------------------------------------------------------------ */

/* Text being read: bytes p[0..n) and the position i (<= n); what was wrong,
 * at i, when a scan failed. */
typedef struct jscan {
    const uint8_t *p;
    size_t n, i;
    const char *err;
} jscan;

static int fail(jscan *s, const char *what)
{
    s->err = what;
    return -1;
}

static void skip_ws(jscan *s)
{
    while (s->i < s->n) {
        uint8_t c = s->p[s->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        s->i++;
    }
}

/* Is the byte at s->i c? */
static int at(const jscan *s, uint8_t c)
{
    return s->i < s->n && s->p[s->i] == c;
}

/* The length of the well-formed UTF-8 sequence at p[0..n) that starts with a
 * byte >= 0x80; 0 if it is not one (overlong, a surrogate, past U+10FFFF,
 * cut short). */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (len > n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Code point c (<= 0x10FFFF) as UTF-8 (surrogates too) into out: its length. */
static int utf8_put(uint32_t c, uint8_t out[4])
{
    if (c < 0x80) {
        out[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xC0 | c >> 6);
        out[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xE0 | c >> 12);
        out[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | c >> 18);
    out[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* The 4 hex digits at p[i..i+4) of p[0..n) as a number; -1 if they are not. */
static long hex4(const uint8_t *p, size_t n, size_t i)
{
    if (i > n || n - i < 4)
        return -1;
    long v = 0;
    for (size_t k = i; k < i + 4; k++) {
        uint8_t c = p[k], d;
        if (c >= '0' && c <= '9')
            d = (uint8_t)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (uint8_t)((c | 0x20) - 'a' + 10);
        else
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* The escape at s->i (a backslash) decoded into out: its length, -1 if bad.
 * A high surrogate followed by the escape of a low one is their pair. */
static int str_escape(jscan *s, uint8_t out[4])
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t i = s->i;
    if (i + 1 >= s->n) {
        s->i = s->n;
        return fail(s, "unterminated string");
    }
    const char *f = memchr(from, s->p[i + 1], 8);
    if (f) {
        out[0] = (uint8_t)to[f - from];
        s->i = i + 2;
        return 1;
    }
    long c = s->p[i + 1] == 'u' ? hex4(s->p, s->n, i + 2) : -2;
    if (c < 0)
        return fail(s, c == -2 ? "bad escape" : "bad \\u escape");
    s->i = i + 6;
    if (c >= 0xD800 && c <= 0xDBFF && at(s, '\\') && s->i + 1 < s->n &&
        s->p[s->i + 1] == 'u') {
        long lo = hex4(s->p, s->n, s->i + 2);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
            s->i += 6;
        }
    }
    return utf8_put((uint32_t)c, out);
}

/* One code point of a string's body at s->i decoded into out: its length
 * (1..4); 0 at the closing quote (s->i then past it); -1 if malformed. */
static int str_unit(jscan *s, uint8_t out[4])
{
    if (s->i >= s->n) {
        s->i = s->n;
        return fail(s, "unterminated string");
    }
    uint8_t c = s->p[s->i];
    if (c == '"') {
        s->i++;
        return 0;
    }
    if (c < 0x20)
        return fail(s, "control character in a string");
    if (c == '\\')
        return str_escape(s, out);
    size_t len = c < 0x80 ? 1 : utf8_len(s->p + s->i, s->n - s->i);
    if (!len)
        return fail(s, "invalid UTF-8");
    memcpy(out, s->p + s->i, len);
    s->i += len;
    return (int)len;
}

static int plain_byte(uint8_t c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Does one of the 8 bytes of w need a closer look than plain_byte's: a
 * quote, a backslash, a control character or a byte >= 0x80? (May say yes
 * for a plain byte after one that does: the bytes are then read one by one.) */
static int word_special(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t below = (w - ones * 0x20) | (q - ones) | (b - ones); /* a borrow: < 0x20, " or \ */
    return ((below & ~(q & b & w)) | w) & highs ? 1 : 0;
}

/* Past the plain bytes at s->i: 16 at a time (SSE2, every x86-64) to the
 * first that needs a look, or 8 at a time while none does. */
static void skip_plain(jscan *s)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (s->n - s->i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s->p + s->i));
        /* signed: a byte >= 0x80 is below 0x20 too */
        __m128i look = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                    _mm_cmplt_epi8(v, space));
        unsigned m = (unsigned)_mm_movemask_epi8(look);
        if (m) {
            s->i += (size_t)__builtin_ctz(m);
            return;
        }
        s->i += 16;
    }
#endif
    while (s->n - s->i >= 8) {
        uint64_t w;
        memcpy(&w, s->p + s->i, 8);
        if (word_special(w))
            break;
        s->i += 8;
    }
    while (s->i < s->n && plain_byte(s->p[s->i]))
        s->i++;
}

/* The string at s->i (its opening quote): 0 with s->i past it, or -1. */
static int scan_string(jscan *s)
{
    uint8_t u[4];
    int k;
    s->i++;
    do
        skip_plain(s);
    while ((k = str_unit(s, u)) > 0);
    return k;
}

/* Digits at s->i: how many (s->i past them). */
static size_t digits(jscan *s)
{
    size_t i0 = s->i;
    while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9')
        s->i++;
    return s->i - i0;
}

/* The number at s->i: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static int scan_number(jscan *s)
{
    if (at(s, '-'))
        s->i++;
    if (at(s, '0'))
        s->i++;
    else if (!digits(s))
        return fail(s, "bad number");
    if (at(s, '.')) {
        s->i++;
        if (!digits(s))
            return fail(s, "bad number");
    }
    if (at(s, 'e') || at(s, 'E')) {
        s->i++;
        if (at(s, '+') || at(s, '-'))
            s->i++;
        if (!digits(s))
            return fail(s, "bad number");
    }
    return 0;
}

/* The scalar at s->i, or the bracket opening a container (s->i past it):
 * its kind, or -1. */
static int scan_start(jscan *s)
{
    static const char *const words[] = {"null", "false", "true"};
    if (s->i >= s->n)
        return fail(s, "expected a value");
    uint8_t c = s->p[s->i];
    if (c == '[' || c == '{') {
        s->i++;
        return c == '[' ? J_ARRAY : J_OBJECT;
    }
    if (c == '"')
        return scan_string(s) ? -1 : J_STRING;
    if (c == '-' || (c >= '0' && c <= '9'))
        return scan_number(s) ? -1 : J_NUMBER;
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(words[k]);
        if (c == words[k][0]) {
            if (s->n - s->i < len || memcmp(s->p + s->i, words[k], len))
                return fail(s, "bad literal");
            s->i += len;
            return J_NULL + k;
        }
    }
    return fail(s, "expected a value");
}

/* An object's key and its colon, at s->i (before whitespace). */
static int scan_key(jscan *s)
{
    skip_ws(s);
    if (!at(s, '"'))
        return fail(s, "expected a key string");
    if (scan_string(s))
        return -1;
    skip_ws(s);
    if (!at(s, ':'))
        return fail(s, "expected :");
    s->i++;
    return 0;
}

/* The kinds of the open containers: bit d of objs is 1 when the container
 * at nesting d (from 0) inside the value being scanned is an object. */
static void kind_set(uint8_t *objs, unsigned d, int obj)
{
    uint8_t bit = (uint8_t)(1u << d % 8);
    if (d % 8 == 0)
        objs[d / 8] = 0; /* a byte's first use */
    objs[d / 8] = obj ? objs[d / 8] | bit : objs[d / 8] & ~bit;
}

static int kind_obj(const uint8_t *objs, unsigned d)
{
    return objs[d / 8] >> d % 8 & 1;
}

/* After a value inside the containers open (d of them): close those that
 * end, or pass the comma (and key) before the next value. 1 = a value is
 * next, 0 = no container is left open, -1. */
static int scan_after(jscan *s, const uint8_t *objs, unsigned *d)
{
    while (*d) {
        int obj = kind_obj(objs, *d - 1);
        skip_ws(s);
        if (at(s, ',')) {
            s->i++;
            return obj && scan_key(s) ? -1 : 1;
        }
        if (!at(s, obj ? '}' : ']'))
            return fail(s, obj ? "expected , or }" : "expected , or ]");
        s->i++;
        (*d)--;
    }
    return 0;
}

/* The value at s->i (before whitespace), `depth` containers deep: its kind
 * with s->i past it, or -1 with s->i at the error. One loop, whatever the
 * nesting: each open container's kind is a bit of objs. */
static int scan_value(jscan *s, unsigned depth)
{
    uint8_t objs[(JSON_MAX_DEPTH + 7) / 8];
    unsigned d = 0; /* containers open inside the value */
    int kind = J_ABSENT;
    for (;;) {
        skip_ws(s);
        int k = scan_start(s);
        if (k < 0)
            return -1;
        if (kind == J_ABSENT)
            kind = k;
        if (k == J_ARRAY || k == J_OBJECT) {
            if (depth + d >= JSON_MAX_DEPTH) {
                s->i--;
                return fail(s, "nesting too deep");
            }
            kind_set(objs, d++, k == J_OBJECT);
            skip_ws(s);
            if (!at(s, k == J_ARRAY ? ']' : '}')) { /* its first element or member */
                if (k == J_OBJECT && scan_key(s))
                    return -1;
                continue;
            }
            s->i++; /* empty */
            d--;
        }
        int more = scan_after(s, objs, &d);
        if (more <= 0)
            return more < 0 ? -1 : kind;
    }
}

/* ---- Paths --------------------------------------------------------------- */

/* A path being compiled: measured when out is NULL, else written into it. */
typedef struct pbuild {
    const uint8_t *t;
    size_t len;
    jpath *out;
    uint8_t *keys; /* the key bytes of out */
    size_t nsteps, nbytes;
} pbuild;

static int path_err(const pbuild *b, const char *what, size_t pos)
{
    int shown = b->len > 200 ? 200 : (int)b->len;
    return mote__err(MOTE_INVALID, "JSON path \"%.*s%s\": %s at byte %zu", shown,
                     (const char *)b->t, b->len > 200 ? "..." : "", what, pos);
}

static void add_bytes(pbuild *b, const uint8_t *p, size_t n)
{
    if (b->out && n)
        memcpy(b->keys + b->nbytes, p, n);
    b->nbytes += n;
}

/* A step: a key of the bytes added since key byte `from`, or an index. */
static void add_step(pbuild *b, size_t from, int64_t index)
{
    if (b->out) {
        jstep *st = &b->out->steps[b->nsteps];
        st->key = index < 0 ? b->keys + from : NULL;
        st->klen = index < 0 ? b->nbytes - from : 0;
        st->index = index;
    }
    b->nsteps++;
}

/* The quoted key at *i (its opening quote), *i then past it. */
static int quoted_key(pbuild *b, size_t *i)
{
    jscan s = {b->t, b->len, *i + 1, NULL};
    size_t from = b->nbytes;
    uint8_t u[4];
    int k;
    while ((k = str_unit(&s, u)) > 0)
        add_bytes(b, u, (size_t)k);
    if (k < 0 && s.i >= b->len)
        return path_err(b, "unterminated quoted key", *i);
    if (k < 0)
        return path_err(b, s.err, s.i);
    add_step(b, from, -1);
    *i = s.i;
    return MOTE_OK;
}

/* The key of a `.` step at *i (quoted or bare), *i then past it. */
static int key_step(pbuild *b, size_t *i)
{
    size_t j = *i;
    if (j < b->len && b->t[j] == '"')
        return quoted_key(b, i);
    while (j < b->len && b->t[j] != '.' && b->t[j] != '[')
        j++;
    if (j == *i)
        return path_err(b, "empty key", j);
    size_t from = b->nbytes;
    add_bytes(b, b->t + *i, j - *i);
    add_step(b, from, -1);
    *i = j;
    return MOTE_OK;
}

/* The inside of a `[` step at *i (a quoted key or an index) and its `]`. */
static int bracket_step(pbuild *b, size_t *i)
{
    size_t j = *i;
    if (j < b->len && b->t[j] == '"') {
        int rc = quoted_key(b, &j);
        if (rc)
            return rc;
    } else {
        uint64_t v = 0;
        size_t end = j;
        while (end < b->len && b->t[end] >= '0' && b->t[end] <= '9')
            end++;
        if (end == j || (b->t[j] == '0' && end > j + 1)) /* none, or a leading zero */
            return path_err(b, "bad array index", j);
        for (; j < end; j++) {
            uint64_t d = (uint64_t)(b->t[j] - '0');
            if (v > (INT64_MAX - d) / 10)
                return path_err(b, "array index too large", *i);
            v = v * 10 + d;
        }
        add_step(b, 0, (int64_t)v);
    }
    if (j >= b->len || b->t[j] != ']')
        return path_err(b, "expected ]", j);
    *i = j + 1;
    return MOTE_OK;
}

static int path_parse(pbuild *b)
{
    size_t i = 0;
    int rc = MOTE_OK;
    if (b->len && b->t[0] == '$')
        i = 1;
    else if (b->len && b->t[0] != '.' && b->t[0] != '[')
        rc = key_step(b, &i); /* the implied `$.` */
    while (!rc && i < b->len) {
        uint8_t c = b->t[i++];
        if (c == '.')
            rc = key_step(b, &i);
        else if (c == '[')
            rc = bracket_step(b, &i);
        else
            rc = path_err(b, "unexpected character", i - 1);
    }
    return rc;
}

int mote__jpath_compile(const char *text, size_t len, jpath **out)
{
    if (out)
        *out = NULL;
    if (!out || (!text && len))
        return mote__err(MOTE_INVALID, "JSON path: NULL argument");
    pbuild b = {(const uint8_t *)text, len, NULL, NULL, 0, 0};
    int rc = path_parse(&b);
    if (rc)
        return rc;
    size_t steps = b.nsteps, bytes = b.nbytes;
    if (steps > (SIZE_MAX - sizeof(jpath) - bytes) / sizeof(jstep))
        return mote__err(MOTE_NOMEM, "out of memory");
    jpath *p = mote__malloc(sizeof(jpath) + steps * sizeof(jstep) + bytes);
    if (!p)
        return mote__err(MOTE_NOMEM, "out of memory");
    p->n = steps;
    b = (pbuild){(const uint8_t *)text, len, p, (uint8_t *)(p->steps + steps), 0, 0};
    (void)path_parse(&b); /* cannot fail: it did not the first time */
    *out = p;
    return MOTE_OK;
}

/* ---- Finding the value at a path ----------------------------------------- */

/* Compare the key whose body is at s->i with key[0..klen) while decoding it:
 * 1 equal, 0 not, -1 malformed; s->i past its closing quote. */
static int key_is(jscan *s, const uint8_t *key, size_t klen)
{
    size_t start = s->i;
    skip_plain(s);
    if (at(s, '"')) { /* the common key: plain bytes only, compared at once */
        size_t n = s->i++ - start;
        return n == klen && !memcmp(s->p + start, key, n);
    }
    s->i = start;
    size_t off = 0;
    int same = 1, k;
    uint8_t u[4];
    while ((k = str_unit(s, u)) > 0) {
        if (same && (off + (size_t)k > klen || memcmp(key + off, u, (size_t)k)))
            same = 0;
        off += (size_t)k;
    }
    return k < 0 ? -1 : same && off == klen;
}

/* In the object at s->i, `depth` containers deep: 1 with s->i at the value
 * of the last member named st's key, else 0. Reads the whole object. */
static int find_member(jscan *s, const jstep *st, unsigned depth)
{
    size_t found = SIZE_MAX;
    if (!at(s, '{'))
        return 0;
    s->i++;
    skip_ws(s);
    if (at(s, '}'))
        return 0;
    for (;;) {
        skip_ws(s);
        if (!at(s, '"'))
            return 0;
        s->i++;
        int same = key_is(s, st->key, st->klen);
        skip_ws(s);
        if (same < 0 || !at(s, ':'))
            return 0;
        s->i++;
        skip_ws(s);
        if (same)
            found = s->i;
        if (scan_value(s, depth + 1) < 0)
            return 0;
        skip_ws(s);
        if (!at(s, ','))
            break;
        s->i++;
    }
    if (!at(s, '}') || found == SIZE_MAX)
        return 0;
    s->i = found;
    return 1;
}

/* In the array at s->i, `depth` containers deep: 1 with s->i at element
 * `index`, else 0. */
static int find_element(jscan *s, int64_t index, unsigned depth)
{
    if (!at(s, '['))
        return 0;
    s->i++;
    skip_ws(s);
    if (at(s, ']'))
        return 0;
    for (int64_t k = 0; k < index; k++) {
        if (scan_value(s, depth + 1) < 0)
            return 0;
        skip_ws(s);
        if (!at(s, ','))
            return 0;
        s->i++;
        skip_ws(s);
    }
    return 1;
}

void mote__json_at(const uint8_t *doc, size_t n, const jpath *p, jval *out)
{
    *out = (jval){J_ABSENT, NULL, 0};
    if (!doc)
        return;
    jscan s = {doc, n, 0, NULL};
    size_t steps = p ? p->n : 0;
    if (steps > JSON_MAX_DEPTH)
        return; /* no value is that deep */
    skip_ws(&s);
    for (size_t k = 0; k < steps; k++) {
        const jstep *st = &p->steps[k];
        int found = st->index < 0 ? find_member(&s, st, (unsigned)k)
                                  : find_element(&s, st->index, (unsigned)k);
        if (!found)
            return;
    }
    size_t start = s.i;
    int kind = scan_value(&s, (unsigned)steps);
    if (kind > 0)
        *out = (jval){kind, doc + start, s.i - start};
}

int mote__json_check(const uint8_t *text, size_t n)
{
    if (!text && n)
        return mote__err(MOTE_INVALID, "JSON text: NULL pointer");
    jscan s = {text, n, 0, NULL};
    if (scan_value(&s, 0) < 0)
        return mote__err(MOTE_INVALID, "invalid JSON: %s at byte %zu", s.err, s.i);
    skip_ws(&s);
    if (s.i < n)
        return mote__err(MOTE_INVALID, "invalid JSON: %s at byte %zu",
                         "unexpected character after the value", s.i);
    return MOTE_OK;
}

/* ---- Walking a value found ----------------------------------------------- */

/* The elements or members of a container value, one after the other. */
typedef struct jiter {
    jscan s;
    int obj, first;
} jiter;

static void iter_init(jiter *it, const jval *v)
{
    it->s = (jscan){v->p, v->n, v->n ? 1 : 0, NULL};
    it->obj = v->kind == J_OBJECT;
    it->first = 1;
}

/* The next element (key NULL) or member: 1 with *val (and *key, a string),
 * 0 at the end (or at anything malformed). */
static int iter_next(jiter *it, jval *key, jval *val)
{
    jscan *s = &it->s;
    skip_ws(s);
    if (!it->first) {
        if (!at(s, ','))
            return 0;
        s->i++;
        skip_ws(s);
    }
    it->first = 0;
    if (it->obj) {
        size_t k0 = s->i;
        if (!at(s, '"') || scan_string(s))
            return 0;
        *key = (jval){J_STRING, s->p + k0, s->i - k0};
        skip_ws(s);
        if (!at(s, ':'))
            return 0;
        s->i++;
        skip_ws(s);
    }
    size_t v0 = s->i;
    int kind = scan_value(s, 0);
    if (kind < 0)
        return 0;
    *val = (jval){kind, s->p + v0, s->i - v0};
    return 1;
}

/* ---- Numbers ------------------------------------------------------------- */

enum { UNORD = 2 }; /* the result of comparing what has no order */

typedef struct jnum {
    int isint;
    int64_t i; /* isint */
    double f;  /* !isint */
} jnum;

#define NUM_DIGITS 800 /* more than the 767 significant digits a double can need */

/* The number text p[0..n) (JSON syntax) without its sign as an integer that
 * fits int64 with that sign: 1 and *out, else 0. */
static int num_int(const uint8_t *p, size_t n, int neg, int64_t *out)
{
    uint64_t v = 0, max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        unsigned d = p[i] - '0';
        if (v > (max - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return n > 0;
}

/* The number text p[0..n) (JSON syntax) as a double: rewritten as at most
 * NUM_DIGITS significant digits (a last 1 standing for any non-zero digit
 * cut, which rounds as they would) and an exponent, then strtod. */
static double num_double(const uint8_t *p, size_t n)
{
    char buf[NUM_DIGITS + 40];
    size_t i = 0, k = 0, nd = 0;
    int sticky = 0;
    int64_t point = 0, exp = 0; /* value = digits * 10^(point - nd + exp) */
    if (i < n && p[i] == '-')
        buf[k++] = p[i++];
    for (int frac = 0; i < n; i++) {
        if (p[i] == '.' && !frac) {
            frac = 1;
            continue;
        }
        if (p[i] < '0' || p[i] > '9')
            break;
        point += !frac;
        if (!nd && p[i] == '0')
            point--; /* a leading zero */
        else if (nd < NUM_DIGITS)
            buf[k++] = (char)p[i], nd++;
        else
            sticky |= p[i] != '0';
    }
    if (!nd)
        return k ? -0.0 : 0.0;
    if (sticky)
        buf[k++] = '1', nd++;
    if (i < n && (p[i] | 0x20) == 'e') {
        int neg = ++i < n && p[i] == '-';
        i += i < n && (p[i] == '-' || p[i] == '+');
        for (; i < n && p[i] >= '0' && p[i] <= '9' && exp < 100000000; i++)
            exp = exp * 10 + (p[i] - '0');
        exp = neg ? -exp : exp;
    }
    int64_t e = point - (int64_t)nd + exp;
    e = e > 1000000 ? 1000000 : e < -1000000 ? -1000000 : e;
    snprintf(buf + k, sizeof buf - k, "e%lld", (long long)e);
    int saved = errno;
    double f = strtod(buf, NULL);
    errno = saved;
    return f;
}

/* The number that v is (a number, true as 1, false as 0): 1 and *out, or 0. */
static int num_of(const jval *v, jnum *out)
{
    if (v->kind == J_TRUE || v->kind == J_FALSE) {
        *out = (jnum){1, v->kind == J_TRUE, 0};
        return 1;
    }
    if (v->kind != J_NUMBER)
        return 0;
    int neg = v->n && v->p[0] == '-';
    out->isint = num_int(v->p + neg, v->n - (size_t)neg, neg, &out->i);
    if (!out->isint)
        out->f = num_double(v->p, v->n);
    return 1;
}

/* int64 a against double b, exactly. */
static int cmp_int_double(int64_t a, double b)
{
    if (b != b)
        return UNORD;
    if (b >= 9223372036854775808.0)
        return -1;
    if (b < -9223372036854775808.0)
        return 1;
    int64_t t = (int64_t)b; /* b truncated: exact, and so is b - t */
    if (a != t)
        return a < t ? -1 : 1;
    double frac = b - (double)t;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int num_cmp(const jnum *a, const jnum *b)
{
    if (a->isint && b->isint)
        return (a->i > b->i) - (a->i < b->i);
    if (a->isint)
        return cmp_int_double(a->i, b->f);
    if (b->isint) {
        int c = cmp_int_double(b->i, a->f);
        return c == UNORD ? UNORD : -c;
    }
    if (a->f != a->f || b->f != b->f)
        return UNORD;
    return (a->f > b->f) - (a->f < b->f);
}

/* ---- Strings ------------------------------------------------------------- */

/* The bytes of a string one by one: a JSON string decoded, or raw bytes (a
 * string value, or a JSON string without escapes, read as it is). */
typedef struct sread {
    jscan s;
    int json; /* s is in a JSON string's body (else raw bytes s.p[s.i..s.n)) */
    uint8_t buf[4];
    int bn, bi; /* decoded bytes in buf, and the next to give */
} sread;

static void sread_raw(sread *r, const uint8_t *p, size_t n)
{
    *r = (sread){.s = {p, n, 0, NULL}};
}

/* v: a JSON string with its quotes. */
static void sread_json(sread *r, const jval *v)
{
    if (v->n >= 2 && !memchr(v->p + 1, '\\', v->n - 2))
        sread_raw(r, v->p + 1, v->n - 2);
    else
        *r = (sread){.s = {v->p, v->n, v->n ? 1 : 0, NULL}, .json = 1};
}

/* The next byte, or -1 at the end (or at anything malformed). */
static int sread_next(sread *r)
{
    if (r->bi < r->bn)
        return r->buf[r->bi++];
    if (r->json) {
        int k = str_unit(&r->s, r->buf);
        if (k > 0) {
            r->bn = k;
            r->bi = 1;
            return r->buf[0];
        }
        sread_raw(r, (const uint8_t *)"", 0); /* ended */
        return -1;
    }
    return r->s.i < r->s.n ? r->s.p[r->s.i++] : -1;
}

/* Byte order of what a and b give, a prefix first. */
static int sread_cmp(sread *a, sread *b)
{
    if (!a->json && !b->json) {
        size_t an = a->s.n - a->s.i, bn = b->s.n - b->s.i, m = an < bn ? an : bn;
        int c = m ? memcmp(a->s.p + a->s.i, b->s.p + b->s.i, m) : 0;
        return c ? (c > 0) - (c < 0) : (an > bn) - (an < bn);
    }
    for (;;) {
        int x = sread_next(a), y = sread_next(b);
        if (x != y)
            return x < y ? -1 : 1;
        if (x < 0)
            return 0;
    }
}

/* Does r give nd[0..n) next? (r advances) */
static int sread_starts(sread *r, const uint8_t *nd, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (sread_next(r) != nd[k])
            return 0;
    return 1;
}

/* STARTS_WITH, ENDS_WITH or CONTAINS of the JSON string x and nd[0..n). */
static int str_op(int op, const jval *x, const uint8_t *nd, size_t n)
{
    sread r;
    sread_json(&r, x);
    if (op == MOTE_STARTS_WITH)
        return sread_starts(&r, nd, n);
    if (!r.json) { /* no escapes: the bytes as they are */
        const uint8_t *h = r.s.p;
        size_t hn = r.s.n;
        if (n > hn)
            return 0;
        if (op == MOTE_ENDS_WITH)
            return !n || !memcmp(h + hn - n, nd, n);
        return !n || memmem(h, hn, nd, n) != NULL;
    }
    if (op == MOTE_ENDS_WITH) {
        size_t len = 0;
        for (sread c = r; sread_next(&c) >= 0;)
            len++;
        for (size_t k = 0; len >= n && k < len - n; k++)
            sread_next(&r);
        return len >= n && sread_starts(&r, nd, n);
    }
    for (;;) { /* CONTAINS: at each byte in turn */
        sread c = r;
        if (sread_starts(&c, nd, n))
            return 1;
        if (sread_next(&r) < 0)
            return 0;
    }
}

/* ---- Equality and order -------------------------------------------------- */

static int str_cmp(const jval *a, const jval *b)
{
    sread x, y;
    sread_json(&x, a);
    sread_json(&y, b);
    return sread_cmp(&x, &y);
}

static int deep_eq(const jval *a, const jval *b, int depth);

/* Is the member with key k, which iterator it has just given, the last of
 * its key? */
static int last_of_key(const jiter *it, const jval *k)
{
    jiter rest = *it;
    jval k2, v2;
    while (iter_next(&rest, &k2, &v2))
        if (!str_cmp(k, &k2))
            return 0;
    return 1;
}

/* The value of object o's last member with key k: 1 and *v, or 0. */
static int member(const jval *o, const jval *k, jval *v)
{
    jiter it;
    jval k2, v2;
    int found = 0;
    iter_init(&it, o);
    while (iter_next(&it, &k2, &v2))
        if (!str_cmp(k, &k2))
            *v = v2, found = 1;
    return found;
}

static size_t distinct_keys(const jval *o)
{
    jiter it;
    jval k, v;
    size_t n = 0;
    iter_init(&it, o);
    while (iter_next(&it, &k, &v))
        n += last_of_key(&it, &k);
    return n;
}

/* Same keys (the last of each) with equal values, in any order. Quadratic
 * in the number of members. */
static int obj_eq(const jval *a, const jval *b, int depth)
{
    jiter it;
    jval k, v, w;
    size_t n = 0;
    iter_init(&it, a);
    while (iter_next(&it, &k, &v)) {
        if (!last_of_key(&it, &k))
            continue;
        if (!member(b, &k, &w) || !deep_eq(&v, &w, depth + 1))
            return 0;
        n++;
    }
    return n == distinct_keys(b);
}

static int arr_eq(const jval *a, const jval *b, int depth)
{
    jiter x, y;
    jval k, v, w;
    iter_init(&x, a);
    iter_init(&y, b);
    for (;;) {
        int more = iter_next(&x, &k, &v);
        if (more != iter_next(&y, &k, &w))
            return 0;
        if (!more)
            return 1;
        if (!deep_eq(&v, &w, depth + 1))
            return 0;
    }
}

/* Structural equality of two values (of the JSON rules, null equal to null). */
static int deep_eq(const jval *a, const jval *b, int depth)
{
    jnum x, y;
    if (a->kind != b->kind || depth > JSON_EQ_DEPTH)
        return 0;
    switch (a->kind) {
    case J_NUMBER: return num_of(a, &x) && num_of(b, &y) && num_cmp(&x, &y) == 0;
    case J_STRING: return str_cmp(a, b) == 0;
    case J_ARRAY: return arr_eq(a, b, depth);
    case J_OBJECT: return obj_eq(a, b, depth);
    default: return a->kind != J_ABSENT;
    }
}

/* A condition's value, ready to compare with. */
enum { N_NONE, N_NUM, N_STR, N_JSON };
typedef struct needle {
    int kind;          /* N_*; N_NONE: equal to nothing, ordered with nothing */
    jnum num;          /* N_NUM */
    const uint8_t *s;  /* N_STR */
    size_t sn;
    jval j;            /* N_JSON */
} needle;

static void needle_of(int type, const mote_value *v, needle *nd)
{
    nd->kind = N_NONE;
    if (v->null)
        return;
    switch (type) {
    case MOTE_T_BOOL:
        *nd = (needle){.kind = N_NUM, .num = {1, v->v.i != 0, 0}};
        return;
    case MOTE_T_INT8: case MOTE_T_INT16: case MOTE_T_INT32: case MOTE_T_INT64:
        *nd = (needle){.kind = N_NUM, .num = {1, v->v.i, 0}};
        return;
    case MOTE_T_FLOAT32: case MOTE_T_FLOAT64:
        *nd = (needle){.kind = N_NUM, .num = {0, 0, v->v.f}};
        return;
    case MOTE_T_STRING:
        *nd = (needle){.kind = N_STR, .s = v->v.s.p ? v->v.s.p : (const void *)"",
                       .sn = v->v.s.p ? v->v.s.n : 0};
        return;
    case MOTE_T_JSON: {
        jscan s = {v->v.s.p, v->v.s.p ? v->v.s.n : 0, 0, NULL};
        skip_ws(&s);
        size_t start = s.i;
        int kind = scan_value(&s, 0);
        size_t end = s.i;
        skip_ws(&s);
        if (kind > 0 && s.i == s.n)
            *nd = (needle){.kind = N_JSON, .j = {kind, s.p + start, end - start}};
        return;
    }
    }
}

/* x (neither absent nor null) against nd: -1, 0, 1, or UNORD. */
static int order(const jval *x, const needle *nd)
{
    jnum a, b;
    sread r, q;
    switch (nd->kind) {
    case N_NUM: return num_of(x, &a) ? num_cmp(&a, &nd->num) : UNORD;
    case N_STR:
        if (x->kind != J_STRING)
            return UNORD;
        sread_json(&r, x);
        sread_raw(&q, nd->s, nd->sn);
        return sread_cmp(&r, &q);
    case N_JSON:
        if (num_of(x, &a) && num_of(&nd->j, &b))
            return num_cmp(&a, &b);
        if (x->kind == J_STRING && nd->j.kind == J_STRING)
            return str_cmp(x, &nd->j);
        return UNORD;
    default: return UNORD;
    }
}

static int equal(const jval *x, const needle *nd)
{
    if (x->kind == J_ABSENT || x->kind == J_NULL)
        return 0;
    return nd->kind == N_JSON ? deep_eq(x, &nd->j, 0) : order(x, nd) == 0;
}

static int equal_val(const jval *x, int type, const mote_value *v)
{
    needle nd;
    needle_of(type, v, &nd);
    return equal(x, &nd);
}

/* x op v, for EQ .. GE: an order that exists, of the right sign. */
static int compare(const jval *x, int op, int type, const mote_value *v)
{
    needle nd;
    needle_of(type, v, &nd);
    int c = order(x, &nd);
    if (c == UNORD)
        return 0;
    switch (op) {
    case MOTE_LT: return c < 0;
    case MOTE_LE: return c <= 0;
    case MOTE_GT: return c > 0;
    default: return c >= 0; /* MOTE_GE */
    }
}

static int array_contains(const jval *x, int type, const mote_value *v)
{
    jiter it;
    jval k, e;
    needle nd;
    if (x->kind != J_ARRAY)
        return 0;
    needle_of(type, v, &nd);
    iter_init(&it, x);
    while (iter_next(&it, &k, &e))
        if (equal(&e, &nd))
            return 1;
    return 0;
}

static int in_list(const jval *x, int type, const mote_value *vals, size_t nvals)
{
    for (size_t i = 0; i < nvals; i++)
        if (equal_val(x, type, &vals[i]))
            return 1;
    return 0;
}

int mote__json_test(const jval *v, int op, int type, const mote_value *vals, size_t nvals)
{
    int kind = v ? v->kind : J_ABSENT, one = nvals >= 1 && vals;
    if (op == MOTE_IS_NULL || op == MOTE_NOT_NULL || op == MOTE_KEY_EXISTS) {
        int null = kind == J_ABSENT || kind == J_NULL;
        return op == MOTE_IS_NULL ? null : op == MOTE_NOT_NULL ? !null : kind != J_ABSENT;
    }
    if (kind == J_ABSENT || kind == J_NULL)
        return 0;
    switch (op) {
    case MOTE_EQ: return one && equal_val(v, type, &vals[0]);
    case MOTE_NE: return one && !equal_val(v, type, &vals[0]);
    case MOTE_LT: case MOTE_LE: case MOTE_GT: case MOTE_GE:
        return one && compare(v, op, type, &vals[0]);
    case MOTE_BETWEEN:
        return nvals >= 2 && vals && compare(v, MOTE_GE, type, &vals[0]) &&
               compare(v, MOTE_LE, type, &vals[1]);
    case MOTE_IN: return vals && in_list(v, type, vals, nvals);
    case MOTE_NOT_IN: return !vals || !in_list(v, type, vals, nvals);
    case MOTE_STARTS_WITH: case MOTE_ENDS_WITH: case MOTE_CONTAINS:
        if (!one || kind != J_STRING || type != MOTE_T_STRING || vals[0].null)
            return 0;
        return str_op(op, v, vals[0].v.s.p ? vals[0].v.s.p : (const void *)"",
                      vals[0].v.s.p ? vals[0].v.s.n : 0);
    case MOTE_ARRAY_CONTAINS: return one && array_contains(v, type, &vals[0]);
    default: return 0;
    }
}

/* ---- For indexes on a path ----------------------------------------------- */

int mote__jpath_same(const jpath *a, const jpath *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const jstep *x = &a->steps[i], *y = &b->steps[i];
        if (x->index != y->index || x->klen != y->klen ||
            (x->klen && memcmp(x->key, y->key, x->klen)))
            return 0;
    }
    return 1;
}

int mote__json_num(const jval *v, double *out)
{
    jnum x;
    if (!num_of(v, &x))
        return 0;
    *out = x.isint ? (double)x.i : x.f;
    return 1;
}

size_t mote__json_str(const jval *v, uint8_t *out, size_t cap)
{
    sread r;
    size_t n = 0;
    sread_json(&r, v);
    for (int c; (c = sread_next(&r)) >= 0; n++)
        if (n < cap)
            out[n] = (uint8_t)c;
    return n;
}
