/*
 * mote — command-line tool for MoteDB stores.
 *
 *   mote stat FILE            txnid, page size, pages used/free, trees, bytes;
 *                             per entity: objects, record bytes per object;
 *                             per vector index: vectors, bytes per vector
 *   mote check FILE           full consistency check; exit 0 = consistent,
 *                             1 = problems (listed), 2 = cannot open
 *   mote compact FILE [OUT]   write a compacted copy (default FILE.compact)
 *   mote delta FILE SINCE OUT what a copy of FILE at commit SINCE lacks to be
 *                             FILE now (SINCE 0: a full copy), into OUT; prints
 *                             the commit it brings a copy to
 *   mote apply COPY DELTA     put a delta into a copy (a full one makes COPY;
 *                             DELTA "-": a full one read from standard input,
 *                             as it comes, e.g. from a download)
 *   mote replicate FILE... s3://BUCKET/PREFIX [--interval S] [--once]
 *   mote restore s3://BUCKET/PREFIX/STORE FILE [--txn N | --time T]
 *   mote prune s3://BUCKET/PREFIX [--retention S]
 *                             copies in S3-compatible object storage: these run
 *                             `python3 -m motedb.replicate` (boto3 signs the
 *                             requests; pip install motedb[s3]), MOTE_PYTHON
 *                             naming another interpreter
 *   mote --version            the version (meson.build's, as the library's)
 *   mote dump FILE [ENTITY]   objects as JSON lines, using the stored schema:
 *                             {"_entity": "Note", "id": 1, "level": 10, ...}
 *
 * Each dump line is strict JSON (no NaN tokens) in valid UTF-8, one object
 * per line, entities in name order, objects in id order. Values:
 *   NULL                  null
 *   bool, ints, to-one    true/false, numbers (to-one: the target id)
 *   float64, float32      numbers (%.17g, %.9g: they read back exactly);
 *                         NaN, +inf, -inf as the strings "NaN", "Infinity",
 *                         "-Infinity" (the tokens of Python's json module)
 *   timestamp             "YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z",
 *                         UTC; the fraction left out when zero, else the
 *                         fewest of 3, 6, 9 digits that hold it exactly
 *   date                  "YYYY-MM-DD", proleptic Gregorian; years outside
 *                         0..9999 with a sign and at least 4 digits (ISO 8601
 *                         expanded): "+10000-01-01", "-0001-12-31"
 *   string, decimal       JSON strings; bytes that are not valid UTF-8 are
 *                         written as \u00XX of their value (as if Latin-1)
 *   bytes                 arrays of numbers 0..255
 *   vector                arrays of numbers, non-finite elements as above
 *   JSON                  the stored text, with the bare tokens NaN, Infinity
 *                         and -Infinity outside strings replaced by the strings
 *                         "NaN", "Infinity", "-Infinity" and line breaks between
 *                         tokens by spaces; a text that is not one JSON value
 *                         (with those tokens) in valid UTF-8 is written as a
 *                         JSON string of the raw text instead
 *   to-many               the array of target ids, in id order
 */
#include <errno.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mote.h"

static mote_store *open_ro(const char *path)
{
    mote_options o = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *s;
    int rc = mote_open(path, &o, &s);
    if (rc) {
        fprintf(stderr, "mote: cannot open %s: %s\n", path, mote_last_open_error());
        return NULL;
    }
    return s;
}

/* mote stat: objects and record bytes of each entity. */
typedef struct obj_sizes {
    uint64_t n, bytes;
} obj_sizes;

static int add_size(void *ctx, const mote_record *r)
{
    obj_sizes *z = ctx;
    z->n++;
    z->bytes += r->size;
    return 0;
}

static int stat_entity(void *ctx, const char *name)
{
    mote_txn *t = ctx;
    mote_entity *e;
    obj_sizes z = {0, 0};
    int rc = mote_entity_stored(t, name, &e);
    if (!rc)
        rc = mote_scan(t, e, add_size, &z);
    if (rc) {
        printf("entity %s: unreadable (%s)\n", name, mote_strerror(rc));
        return 0;
    }
    printf("entity %s: %llu objects, %llu record bytes", name, (unsigned long long)z.n,
           (unsigned long long)z.bytes);
    if (z.n)
        printf(" (%.1f bytes per object)", (double)z.bytes / (double)z.n);
    printf("\n");
    static const char *dist[] = {"?", "cosine", "euclidean", "dot"};
    for (unsigned i = 0; i < mote_entity_nprops(e); i++) {
        mote_prop_def d;
        mote_vstat vs;
        if (mote_entity_prop_def(e, i, &d) || !(d.flags & MOTE_P_HNSW) ||
            mote_vindex_stat(t, e, i, &vs))
            continue;
        printf("  vector index %s: %llu vectors, %llu bytes", d.name,
               (unsigned long long)vs.vectors, (unsigned long long)vs.bytes);
        if (vs.vectors)
            printf(" (%.1f bytes per vector, %.1f links; vectors %u bytes each, in the "
                   "objects)", (double)vs.bytes / (double)vs.vectors,
                   (double)vs.links / (double)vs.vectors, vs.dim * 4);
        printf(", %u levels, %s, m %u, ef_construction %u\n", vs.levels,
               dist[vs.distance >= 1 && vs.distance <= 3 ? vs.distance : 0], vs.m,
               vs.ef_construction);
    }
    for (unsigned i = 0; i < mote_entity_nprops(e); i++) {
        mote_prop_def d;
        mote_tstat ts;
        if (mote_entity_prop_def(e, i, &d) || !(d.flags & MOTE_P_FULLTEXT) ||
            mote_text_stat(t, e, i, &ts))
            continue;
        printf("  full-text index %s%s: %llu texts, %llu words, %llu distinct, %llu postings in "
               "%llu blocks of %llu segments, %llu bytes", d.name,
               d.flags & MOTE_P_STEM ? " (stemmed)" : "", (unsigned long long)ts.texts,
               (unsigned long long)ts.tokens, (unsigned long long)ts.terms,
               (unsigned long long)ts.postings, (unsigned long long)ts.blocks,
               (unsigned long long)ts.segments, (unsigned long long)ts.bytes);
        if (ts.tokens)
            printf(" (%.2f bytes per word)", (double)ts.bytes / (double)ts.tokens);
        printf("\n");
    }
    for (unsigned i = 0; i < mote_entity_nprops(e); i++) {
        mote_prop_def d;
        if (mote_entity_prop_def(e, i, &d))
            continue;
        if (d.json_path)
            printf("  index %s on the JSON path %s\n", d.name, d.json_path);
        if (d.flags & MOTE_P_EXPIRES)
            printf("  expiry time %s (expired objects are left out; mote_sweep removes them)\n",
                   d.name);
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: mote stat FILE\n"
                    "       mote check FILE\n"
                    "       mote compact FILE [OUT]\n"
                    "       mote delta FILE SINCE OUT\n"
                    "       mote apply COPY DELTA|-\n"
                    "       mote replicate FILE... s3://BUCKET/PREFIX [--interval S] [--once]\n"
                    "       mote restore s3://BUCKET/PREFIX/STORE FILE [--txn N | --time T]\n"
                    "       mote prune s3://BUCKET/PREFIX [--retention S]\n"
                    "       mote dump FILE [ENTITY]\n"
                    "       mote --version\n");
    return 2;
}

/* ---- mote dump: one JSON line per object ---------------------------------
 *
 * Every line must parse as strict JSON (RFC 8259: no NaN tokens) and be valid
 * UTF-8, whatever the store holds; the rule is in the comment at the top. */

/* Length of the well-formed UTF-8 sequence at p (n > 0 bytes left), 0 if
 * there is none: a stray continuation byte, an overlong form, a surrogate,
 * a code point over U+10FFFF or a truncated sequence. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (p[k] < 0x80 || p[k] > 0xBF)
            return 0;
    return len;
}

/* A JSON string of n bytes. Valid UTF-8 sequences are copied; " and \ are
 * escaped, control characters written as \u00XX, and each byte that is not
 * part of one (see utf8_len) as \u00XX of its value. */
static void json_str(const unsigned char *p, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = utf8_len(p + i, n - i);
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || !len)
            printf("\\u%04x", c);
        else {
            fwrite(p + i, 1, len, stdout);
            i += len;
            continue;
        }
        i++;
    }
    putchar('"');
}

/* Floats: finite values as numbers with enough digits to read back exactly
 * (prec 17 for float64, 9 for float32), the others as Python's tokens in a
 * string. */
static void json_float(double f, int prec)
{
    if (isnan(f))
        printf("\"NaN\"");
    else if (isinf(f))
        printf(f > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        printf("%.*g", prec, f);
}

/* Proleptic Gregorian date of a day number (days since 1970-01-01), any
 * int64 that does not overflow below. Counts from 0000-03-01, so that each
 * leap day is the last day of its year, of its 4-year cycle, of its century
 * and of its 400-year era. */
static void civil_date(int64_t days, int64_t *year, int *month, int *day)
{
    static const int month_start[12] = {0, 31, 61, 92, 122, 153, 184, 214, 245, 275, 306, 337};
    int64_t z = days + 719468; /* 0000-03-01 to 1970-01-01 */
    int64_t era = z / 146097;  /* 400 years */
    if (z % 146097 < 0)
        era--;
    int64_t r = z - era * 146097;  /* day of the era, 0..146096 */
    int64_t c = r / 36524;         /* century; 4 only on the era's leap day */
    if (c > 3)
        c = 3;
    r -= c * 36524;
    int64_t q = r / 1461;          /* 4-year cycle of the century */
    r -= q * 1461;
    int64_t y = r / 365;           /* year of the cycle; 4 only on a leap day */
    if (y > 3)
        y = 3;
    r -= y * 365;                  /* day of the year from March 1st, 0..365 */
    int m = 11;
    while (month_start[m] > r)
        m--;
    *day = (int)(r - month_start[m]) + 1;
    *month = m < 10 ? m + 3 : m - 9;
    *year = era * 400 + c * 100 + q * 4 + y + (*month <= 2);
}

/* "YYYY-MM-DD"; years outside 0..9999 as ISO 8601 expanded years with a
 * sign and at least four digits ("+10000", "-0001"). No quotes. */
static void put_date(int64_t days)
{
    int64_t y;
    int m, d;
    civil_date(days, &y, &m, &d);
    if (y >= 0 && y <= 9999)
        printf("%04lld-%02d-%02d", (long long)y, m, d);
    else
        printf("%c%04lld-%02d-%02d", y < 0 ? '-' : '+', (long long)(y < 0 ? -y : y), m, d);
}

/* "YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z" of int64 ns since 1970 UTC:
 * no fraction when it is zero, else the fewest of 3, 6, 9 digits that hold
 * it exactly. Seconds and days are rounded toward -infinity (the fraction
 * of a time before 1970 counts forward from the second before it). */
static void put_timestamp(int64_t ns)
{
    int64_t s = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        s--;
    }
    int64_t days = s / 86400, sec = s % 86400;
    if (sec < 0) {
        sec += 86400;
        days--;
    }
    putchar('"');
    put_date(days);
    printf("T%02d:%02d:%02d", (int)(sec / 3600), (int)(sec / 60 % 60), (int)(sec % 60));
    if (frac % 1000000 == 0 && frac)
        printf(".%03d", (int)(frac / 1000000));
    else if (frac % 1000 == 0 && frac)
        printf(".%06d", (int)(frac / 1000));
    else if (frac)
        printf(".%09d", (int)frac);
    printf("Z\"");
}

/* ---- JSON properties: the stored text, checked and copied ----------------
 *
 * json_scan reads p[0..n) as one JSON value, with Python's extra tokens NaN,
 * Infinity and -Infinity allowed where a value may stand, and returns 1 if
 * that is all the text holds (else 0). With out set it also writes the text:
 * unchanged, except that each of those tokens becomes the string "NaN",
 * "Infinity" or "-Infinity", and CR and LF between tokens become spaces (the
 * object stays on one line). Strings must be valid UTF-8 without raw control
 * characters. stack has a byte per open level ('{' or '['): n at most. */
typedef struct jscan {
    const unsigned char *p;
    size_t n, i;
    int out;
} jscan;

static void js_emit(jscan *s, size_t from)
{
    if (s->out)
        fwrite(s->p + from, 1, s->i - from, stdout);
}

static void js_ws(jscan *s)
{
    for (; s->i < s->n; s->i++) {
        unsigned c = s->p[s->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        if (s->out)
            putchar(c == '\t' ? '\t' : ' ');
    }
}

static int js_lit(jscan *s, const char *word)
{
    size_t len = strlen(word);
    if (s->n - s->i < len || memcmp(s->p + s->i, word, len))
        return 0;
    s->i += len;
    return 1;
}

static int js_digits(jscan *s)
{
    size_t from = s->i;
    while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9')
        s->i++;
    return s->i > from;
}

static int js_string(jscan *s)
{
    size_t from = s->i++; /* the opening quote */
    while (s->i < s->n) {
        unsigned c = s->p[s->i];
        if (c == '"') {
            s->i++;
            js_emit(s, from);
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            if (++s->i >= s->n)
                return 0;
            c = s->p[s->i++];
            if (c == 'u') {
                for (int k = 0; k < 4; k++, s->i++)
                    if (s->i >= s->n || !strchr("0123456789abcdefABCDEF", s->p[s->i]) ||
                        !s->p[s->i])
                        return 0;
            } else if (!strchr("\"\\/bfnrt", (int)c) || !c)
                return 0;
            continue;
        }
        size_t len = utf8_len(s->p + s->i, s->n - s->i);
        if (!len)
            return 0;
        s->i += len;
    }
    return 0; /* unterminated */
}

/* A scalar value: string, number, true, false, null or one of the tokens. */
static int js_scalar(jscan *s)
{
    size_t from = s->i;
    unsigned c = s->p[s->i];
    const char *token = NULL;
    if (c == '"')
        return js_string(s);
    if (js_lit(s, "true") || js_lit(s, "false") || js_lit(s, "null")) {
        js_emit(s, from);
        return 1;
    }
    if (js_lit(s, "NaN"))
        token = "NaN";
    else if (js_lit(s, "Infinity"))
        token = "Infinity";
    else if (js_lit(s, "-Infinity"))
        token = "-Infinity";
    if (token) {
        if (s->out)
            printf("\"%s\"", token);
        return 1;
    }
    if (c == '-')
        s->i++;
    if (s->i < s->n && s->p[s->i] == '0')
        s->i++;
    else if (!js_digits(s))
        return 0;
    if (s->i < s->n && s->p[s->i] == '.' && (s->i++, !js_digits(s)))
        return 0;
    if (s->i < s->n && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
        s->i++;
        if (s->i < s->n && (s->p[s->i] == '+' || s->p[s->i] == '-'))
            s->i++;
        if (!js_digits(s))
            return 0;
    }
    js_emit(s, from);
    return 1;
}

/* An object member's key and colon, after '{' or ','. */
static int js_key(jscan *s)
{
    js_ws(s);
    if (s->i >= s->n || s->p[s->i] != '"' || !js_string(s))
        return 0;
    js_ws(s);
    if (s->i >= s->n || s->p[s->i] != ':')
        return 0;
    s->i++;
    if (s->out)
        putchar(':');
    return 1;
}

static int json_scan(const unsigned char *p, size_t n, int out, char *stack)
{
    jscan s = {p, n, 0, out};
    size_t depth = 0;
    for (;;) {
        js_ws(&s); /* a value */
        if (s.i >= n)
            return 0;
        unsigned c = p[s.i];
        if (c == '{' || c == '[') {
            s.i++;
            if (out)
                putchar((int)c);
            stack[depth++] = (char)c;
            js_ws(&s);
            if (s.i < n && p[s.i] == (c == '{' ? '}' : ']')) {
                depth--;
                s.i++;
                if (out)
                    putchar(c == '{' ? '}' : ']');
            } else {
                if (c == '{' && !js_key(&s))
                    return 0;
                continue;
            }
        } else if (!js_scalar(&s))
            return 0;
        for (;;) { /* after a value: ',', a closing bracket or the end */
            js_ws(&s);
            if (!depth)
                return s.i == n;
            if (s.i >= n)
                return 0;
            c = p[s.i++];
            if (c == ',') {
                if (out)
                    putchar(',');
                if (stack[depth - 1] == '{' && !js_key(&s))
                    return 0;
                break;
            }
            if (c != (stack[depth - 1] == '{' ? '}' : ']'))
                return 0;
            depth--;
            if (out)
                putchar((int)c);
        }
    }
}

/* A JSON property: its text if json_scan accepts it (with the tokens
 * replaced), else (or if memory runs out) the raw text as a JSON string. */
static void json_text(const unsigned char *p, size_t n)
{
    char *stack = malloc(n + 1);
    if (stack && json_scan(p, n, 0, stack))
        json_scan(p, n, 1, stack);
    else
        json_str(p, n);
    free(stack);
}

typedef struct dump_ctx {
    mote_txn *t;
    const char *only;
    const char *name; /* the entity being dumped */
    mote_entity *e;
    int rc;
} dump_ctx;

static int dump_one(void *ctx, const mote_record *r)
{
    dump_ctx *dc = ctx;
    unsigned np = mote_entity_nprops(r->e);
    printf("{\"_entity\": ");
    json_str((const unsigned char *)dc->name, strlen(dc->name));
    printf(", \"id\": %llu", (unsigned long long)r->id);
    for (unsigned i = 0; i < np; i++) {
        mote_prop_def d;
        mote_value v;
        int rc = mote_entity_prop_def(r->e, i, &d);
        if (!rc && d.type != MOTE_T_TOMANY)
            rc = mote_record_get(r, i, &v, NULL);
        if (rc)
            return rc;
        printf(", ");
        json_str((const unsigned char *)d.name, strlen(d.name));
        printf(": ");
        if (d.type == MOTE_T_TOMANY) { /* link records, not in the object */
            uint64_t *ids;
            size_t n;
            if ((rc = mote_links(dc->t, dc->e, i, r->id, &ids, &n)))
                return rc;
            putchar('[');
            for (size_t k = 0; k < n; k++)
                printf("%s%llu", k ? ", " : "", (unsigned long long)ids[k]);
            putchar(']');
            mote_free(ids);
            continue;
        }
        if (v.null) {
            printf("null");
            continue;
        }
        switch (d.type) {
        case MOTE_T_BOOL: printf(v.v.i ? "true" : "false"); break;
        case MOTE_T_FLOAT32: json_float(v.v.f, 9); break;
        case MOTE_T_FLOAT64: json_float(v.v.f, 17); break;
        case MOTE_T_STRING:
        case MOTE_T_DECIMAL: json_str(v.v.s.p, v.v.s.n); break;
        case MOTE_T_JSON: json_text(v.v.s.p, v.v.s.n); break;
        case MOTE_T_TIMESTAMP: put_timestamp(v.v.i); break;
        case MOTE_T_DATE:
            putchar('"');
            put_date(v.v.i);
            putchar('"');
            break;
        case MOTE_T_BYTES:
        case MOTE_T_VECTOR:
            putchar('[');
            if (d.type == MOTE_T_BYTES) {
                for (size_t k = 0; k < v.v.s.n; k++)
                    printf("%s%u", k ? ", " : "", ((const unsigned char *)v.v.s.p)[k]);
            } else {
                for (size_t k = 0; k + 4 <= v.v.s.n; k += 4) {
                    float f;
                    memcpy(&f, (const char *)v.v.s.p + k, 4);
                    printf("%s", k ? ", " : "");
                    json_float(f, 9);
                }
            }
            putchar(']');
            break;
        default: printf("%lld", (long long)v.v.i);
        }
    }
    printf("}\n");
    return 0;
}

static int dump_entity(void *ctx, const char *name)
{
    dump_ctx *d = ctx;
    if (d->only && strcmp(d->only, name))
        return 0;
    d->name = name;
    d->rc = mote_entity_stored(d->t, name, &d->e);
    if (!d->rc)
        d->rc = mote_scan(d->t, d->e, dump_one, d);
    return d->rc;
}

static int cmd_dump(const char *path, const char *entity)
{
    mote_store *s = open_ro(path);
    if (!s)
        return 2;
    dump_ctx d = {NULL, entity, NULL, NULL, 0};
    int rc = mote_begin(s, MOTE_TXN_RDONLY, &d.t);
    if (!rc)
        rc = mote_entity_list(d.t, dump_entity, &d);
    if (!rc && entity && !d.rc) {
        mote_entity *e;
        rc = mote_entity_stored(d.t, entity, &e); /* report a missing entity */
    }
    if (rc)
        fprintf(stderr, "mote: dump failed: %s\n", mote_errmsg(s));
    mote_abort(d.t);
    mote_close(s);
    return rc ? 1 : 0;
}

/* mote replicate / restore / prune: `python3 -m motedb.replicate CMD ARGS...` (an S3
 * client signs the requests: boto3, not this tool). Returns only if it
 * cannot be run. */
static int run_python(int argc, char **argv)
{
    const char *py = getenv("MOTE_PYTHON");
    if (!py || !*py)
        py = "python3";
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args)
        return 2;
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "motedb.replicate";
    for (int i = 1; i < argc; i++)
        args[i + 2] = argv[i];
    execvp(py, args);
    fprintf(stderr, "mote: %s runs `%s -m motedb.replicate` (pip install motedb[s3]; "
                    "MOTE_PYTHON names another Python): %s\n", argv[1], py, strerror(errno));
    free(args);
    return 2;
}

static void print_problem(void *ctx, const char *msg)
{
    (void)ctx;
    printf("problem: %s\n", msg);
}

/* mote apply COPY -: the delta's bytes from standard input. */
static long long read_stdin(void *ctx, void *buf, size_t n)
{
    (void)ctx;
    for (;;) {
        ssize_t r = read(0, buf, n);
        if (r >= 0 || errno != EINTR)
            return r < 0 ? -errno : (long long)r;
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("mote %s\n", MOTE_VERSION_STRING);
        return 0;
    }
    if (argc >= 3 && (!strcmp(argv[1], "replicate") || !strcmp(argv[1], "restore") ||
                      !strcmp(argv[1], "prune")))
        return run_python(argc, argv);
    if (argc < 3)
        return usage();
    const char *cmd = argv[1], *path = argv[2];
    if (!strcmp(cmd, "stat") && argc == 3) {
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        mote_stat st;
        int rc = mote_store_stat(s, &st);
        if (rc) {
            fprintf(stderr, "mote: %s\n", mote_errmsg(s));
            mote_close(s);
            return 1;
        }
        printf("file:        %s\n", path);
        printf("txnid:       %llu\n", (unsigned long long)st.txnid);
        printf("format:      %u\n", st.format);
        uint64_t ident = 0;
        if (!mote_store_ident(s, &ident) && ident)
            printf("identity:    %016llx\n", (unsigned long long)ident);
        else
            printf("identity:    none yet (given by the first write)\n");
        printf("chain:       %u commit records since the checkpoint\n", st.chain);
        printf("page size:   %u\n", st.page_size);
        printf("pages:       %llu (%llu used, %llu free)\n",
               (unsigned long long)st.pages,
               (unsigned long long)(st.pages - st.pages_free),
               (unsigned long long)st.pages_free);
        printf("file bytes:  %llu\n", (unsigned long long)st.file_bytes);
        printf("trees:       %llu\n", (unsigned long long)st.trees);
        printf("entries:     %llu\n", (unsigned long long)st.entries);
        printf("depth:       %u\n", st.depth);
        mote_txn *t;
        if (mote_begin(s, MOTE_TXN_RDONLY, &t) == MOTE_OK) {
            mote_entity_list(t, stat_entity, t);
            mote_abort(t);
        }
        mote_close(s);
        return 0;
    }
    if (!strcmp(cmd, "check") && argc == 3) {
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        int rc = mote_check(s, print_problem, NULL);
        if (rc == MOTE_OK)
            printf("%s: consistent\n", path);
        else
            printf("%s: %s\n", path, mote_errmsg(s));
        mote_close(s);
        return rc == MOTE_OK ? 0 : 1;
    }
    if (!strcmp(cmd, "compact") && (argc == 3 || argc == 4)) {
        char def[4096];
        const char *out = argc == 4 ? argv[3] : def;
        snprintf(def, sizeof def, "%s.compact", path);
        mote_store *s = open_ro(path);
        if (!s)
            return 2;
        int rc = mote_compact(s, out);
        if (rc)
            fprintf(stderr, "mote: compact failed: %s\n", mote_errmsg(s));
        else
            printf("%s -> %s\n", path, out);
        mote_close(s);
        return rc ? 1 : 0;
    }
    if (!strcmp(cmd, "delta") && argc == 5) {
        char *end;
        errno = 0;
        unsigned long long since = strtoull(argv[3], &end, 10);
        if (errno || end == argv[3] || *end || argv[3][0] == '-') {
            fprintf(stderr, "mote: delta: SINCE must be a commit number (0: a full copy), "
                            "not '%s'\n", argv[3]);
            return 2;
        }
        mote_store *s = open_ro(path); /* (a delta reads a snapshot) */
        if (!s)
            return 2;
        uint64_t to = 0;
        int rc = mote_delta(s, since, argv[4], 0, &to);
        if (rc)
            fprintf(stderr, "mote: delta failed: %s\n", mote_errmsg(s));
        else
            printf("%s: commits %llu..%llu -> %s\n", path, since, (unsigned long long)to,
                   argv[4]);
        mote_close(s);
        return rc ? 1 : 0;
    }
    if (!strcmp(cmd, "apply") && argc == 4) {
        int rc = strcmp(argv[3], "-") ? mote_delta_apply(path, argv[3], NULL)
                                      : mote_delta_apply_from(path, read_stdin, NULL, NULL);
        if (rc) {
            fprintf(stderr, "mote: apply failed: %s\n", mote_errmsg(NULL));
            return 1;
        }
        mote_store *s = open_ro(path);
        mote_stat st;
        if (!s || mote_store_stat(s, &st)) {
            if (s)
                mote_close(s);
            return 1;
        }
        printf("%s: at commit %llu\n", path, (unsigned long long)st.txnid);
        mote_close(s);
        return 0;
    }
    if (!strcmp(cmd, "dump") && (argc == 3 || argc == 4))
        return cmd_dump(path, argc == 4 ? argv[3] : NULL);
    return usage();
}
