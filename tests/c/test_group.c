/*
 * test_group.c — mote_query_group_count against a naive count, by both ways
 * (the index walk and the pass over matches), with NULLs, strings longer
 * than an index key, a unique index, a to-one relation and entries still
 * deferred in a write transaction.
 */
#include "test.h"

static const mote_prop_def gprops[] = {
    {"topic", MOTE_T_STRING, MOTE_P_INDEXED | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"level", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"plain", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
    {"code", MOTE_T_STRING, MOTE_P_UNIQUE | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    {"owner", MOTE_T_TOONE, 0, 0, NULL, "G", {0}, NULL},
    {"score", MOTE_T_FLOAT64, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
};
#define GP 6
#define GN 600

typedef struct gobj {
    char topic[700];
    int has_topic, level, plain, has_code, owner;
    char code[16];
    double score;
} gobj;

static gobj objs[GN];

/* The groups as text lines "value=count", to compare two answers. */
typedef struct gtext {
    char *s;
    size_t len, cap;
    int prev_set;
} gtext;

static void gt_add(gtext *g, const char *line)
{
    size_t n = strlen(line);
    if (g->len + n + 2 > g->cap) {
        g->cap = (g->len + n + 2) * 2;
        g->s = realloc(g->s, g->cap);
    }
    memcpy(g->s + g->len, line, n);
    g->len += n;
    g->s[g->len++] = '\n';
    g->s[g->len] = 0;
}

static unsigned gprop;

static int group_line(void *ctx, const mote_value *v, uint64_t count)
{
    char line[800];
    int type = gprops[gprop].type;
    if (v->null)
        snprintf(line, sizeof line, "NULL=%llu", (unsigned long long)count);
    else if (type == MOTE_T_STRING)
        snprintf(line, sizeof line, "%.*s=%llu", (int)v->v.s.n, (const char *)v->v.s.p,
                 (unsigned long long)count);
    else if (type == MOTE_T_FLOAT64)
        snprintf(line, sizeof line, "%.17g=%llu", v->v.f, (unsigned long long)count);
    else
        snprintf(line, sizeof line, "%lld=%llu", (long long)v->v.i, (unsigned long long)count);
    gt_add(ctx, line);
    return 0;
}

/* The value of object i's property prop as text ("" for NULL) and its order. */
static void value_text(int i, unsigned prop, char *out, int *is_null)
{
    const gobj *o = &objs[i];
    *is_null = 0;
    switch (prop) {
    case 0:
        *is_null = !o->has_topic;
        snprintf(out, 700, "%s", o->topic);
        break;
    case 1: snprintf(out, 700, "%d", o->level); break;
    case 2: snprintf(out, 700, "%d", o->plain); break;
    case 3:
        *is_null = !o->has_code;
        snprintf(out, 700, "%s", o->code);
        break;
    case 4:
        *is_null = !o->owner;
        snprintf(out, 700, "%d", o->owner);
        break;
    default: snprintf(out, 700, "%.17g", o->score);
    }
}

static int by_value_prop;
static int cmp_idx(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b, nx, ny;
    char vx[700], vy[700];
    value_text(x, (unsigned)by_value_prop, vx, &nx);
    value_text(y, (unsigned)by_value_prop, vy, &ny);
    if (nx || ny)
        return ny - nx;
    const gobj *ox = &objs[x], *oy = &objs[y];
    switch (by_value_prop) {
    case 1: return (ox->level > oy->level) - (ox->level < oy->level);
    case 2: return (ox->plain > oy->plain) - (ox->plain < oy->plain);
    case 4: return (ox->owner > oy->owner) - (ox->owner < oy->owner);
    case 5: return (ox->score > oy->score) - (ox->score < oy->score);
    default: return strcmp(vx, vy);
    }
}

/* The naive answer over objects lo..hi-1 whose level is at least min_level. */
static void naive(unsigned prop, int lo, int hi, int min_level, gtext *g)
{
    int idx[GN], n = 0;
    for (int i = lo; i < hi; i++)
        if (objs[i].level >= min_level)
            idx[n++] = i;
    by_value_prop = (int)prop;
    qsort(idx, (size_t)n, sizeof *idx, cmp_idx);
    for (int i = 0, run = 1; i < n; i++, run++)
        if (i + 1 == n || cmp_idx(&idx[i], &idx[i + 1])) {
            char v[700], line[800];
            int isn;
            value_text(idx[i], prop, v, &isn);
            snprintf(line, sizeof line, "%s=%d", isn ? "NULL" : v, run);
            gt_add(g, line);
            run = 0;
        }
}

static void fill(uint64_t *rs)
{
    static const char *topics[] = {"apple", "pear", "fig", "", "kiwi"};
    for (int i = 0; i < GN; i++) {
        gobj *o = &objs[i];
        memset(o, 0, sizeof *o);
        int t = (int)(test_rand(rs) % 7);
        o->has_topic = t != 6;
        if (t == 5) { /* longer than an index key: differ after 600 bytes */
            memset(o->topic, 'x', 600);
            o->topic[600] = (char)('a' + test_rand(rs) % 3);
        } else if (t < 5) {
            snprintf(o->topic, sizeof o->topic, "%s", topics[t]);
        }
        o->level = (int)(test_rand(rs) % 9) - 4;
        o->plain = (int)(test_rand(rs) % 5);
        o->has_code = test_rand(rs) % 3 != 0;
        snprintf(o->code, sizeof o->code, "c%d", i);
        o->owner = (int)(test_rand(rs) % 4); /* 0: none */
        o->score = (double)(test_rand(rs) % 6) / 2;
    }
}

static void put_all(mote_txn *t, mote_entity *e, int lo, int hi)
{
    for (int i = lo; i < hi; i++) {
        gobj *o = &objs[i];
        mote_value v[GP];
        memset(v, 0, sizeof v);
        v[0].null = !o->has_topic;
        v[0].v.s.p = o->topic;
        v[0].v.s.n = strlen(o->topic);
        v[1].v.i = o->level;
        v[2].v.i = o->plain;
        v[3].null = !o->has_code;
        v[3].v.s.p = o->code;
        v[3].v.s.n = strlen(o->code);
        v[4].v.i = o->owner;
        v[5].v.f = o->score;
        OK(mote_put(t, e, 0, v, 0, NULL));
    }
}

static void compare(mote_txn *t, mote_entity *e, int lo, int hi, int with_cond)
{
    for (gprop = 0; gprop < GP; gprop++) {
        mote_query *q;
        OK(mote_query_new(e, &q));
        int min_level = -100;
        if (with_cond) {
            mote_value zero = {0};
            int c;
            OK(mote_query_cond(q, 1, MOTE_GE, &zero, 1, 0, &c));
            OK(mote_query_where(q, c));
            min_level = 0;
        }
        gtext got = {0}, want = {0};
        OK(mote_query_group_count(t, q, gprop, group_line, &got));
        naive(gprop, lo, hi, min_level, &want);
        if (strcmp(got.s ? got.s : "", want.s ? want.s : "")) {
            fprintf(stderr, "property %s, condition %d:\n--- got\n%s--- want\n%s",
                    gprops[gprop].name, with_cond, got.s, want.s);
            CHECK(0);
        }
        free(got.s);
        free(want.s);
        mote_query_free(q);
    }
}

TEST(group_count_matches_naive)
{
    uint64_t rs = 77;
    fill(&rs);
    mote_store *s = test_open(test_path("g.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "G", gprops, GP, &e));
    put_all(t, e, 0, GN / 2);
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    compare(t, e, 0, GN / 2, 0);
    compare(t, e, 0, GN / 2, 1);
    mote_abort(t);
    /* in a write transaction, with index entries of new puts still deferred */
    OK(mote_begin(s, 0, &t));
    put_all(t, e, GN / 2, GN);
    compare(t, e, 0, GN, 0);
    compare(t, e, 0, GN, 1);
    OK(mote_commit(t));
    /* limits apply; bad arguments */
    mote_query *q;
    OK(mote_query_new(e, &q));
    OK(mote_query_limit(q, 0, 10));
    gtext got = {0};
    gprop = 1;
    OK(mote_query_group_count(NULL, q, 1, group_line, &got));
    int total = 0;
    for (char *p = got.s; p && (p = strchr(p, '=')); p++)
        total += atoi(p + 1);
    CHECK(total == 10);
    free(got.s);
    static const mote_prop_def tm[] = {{"many", MOTE_T_TOMANY, 0, 0, NULL, "G", {0}, NULL},
                                       {"j", MOTE_T_JSON, MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL}};
    mote_entity *h;
    mote_query *hq;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "H", tm, 2, &h));
    OK(mote_commit(t));
    OK(mote_query_new(h, &hq));
    CHECK_RC(mote_query_group_count(NULL, hq, 0, group_line, &got), MOTE_TYPE);
    CHECK_RC(mote_query_group_count(NULL, hq, 1, group_line, &got), MOTE_TYPE);
    CHECK_RC(mote_query_group_count(NULL, hq, 7, group_line, &got), MOTE_INVALID);
    CHECK_RC(mote_query_group_count(NULL, hq, 0, NULL, NULL), MOTE_INVALID);
    mote_query_free(hq);
    mote_query_free(q);
    OK(mote_close(s));
}
