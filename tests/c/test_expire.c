/*
 * test_expire.c — expiry times (MOTE_P_EXPIRES, mote_sweep): expired objects
 * are gone for every read (get, count, scan, queries by scan, index, order,
 * nearest, full-text match, aggregates) from the transaction whose clock has
 * passed their time, a transaction's view does not change while it runs,
 * writes that meet them remove them and go on as if they were not there (an
 * insert of the id, a unique value taken, an update, a remove), and the sweep
 * removes exactly them with their index entries. Times are set relative to the real clock: far in the past, far in
 * the future, and a few that expire while the test sleeps.
 */
#include <time.h>

#include "object.h" /* the entity's object tree, to count what is stored */
#include "test.h"

static mote_value I(int64_t i) { mote_value v = {0}; v.v.i = i; return v; }
static mote_value N(void) { mote_value v = {0}; v.null = 1; return v; }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define HOUR (3600 * (int64_t)1000000000)
#define NOBJ 300

static const mote_prop_def mem_props[] = {
    {"tag", MOTE_T_INT64, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"expires", MOTE_T_TIMESTAMP, MOTE_P_NULLABLE | MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL,
     NULL, {0}, NULL},
    {"text", MOTE_T_STRING, MOTE_P_FULLTEXT, 0, NULL, NULL, {0}, NULL},
    {"vec", MOTE_T_VECTOR, 0, 2, NULL, NULL, {0}, NULL},
    {"key", MOTE_T_STRING, MOTE_P_NULLABLE | MOTE_P_UNIQUE, 0, NULL, NULL, {0}, NULL},
};
#define NPROPS 5

/* Object i's unique key: "k<i>" for every fourth, else NULL. */
static mote_value key_of(uint64_t i, char *buf)
{
    if (i % 4)
        return N();
    mote_value v = {0};
    v.v.s.p = buf;
    v.v.s.n = (size_t)sprintf(buf, "k%llu", (unsigned long long)i);
    return v;
}

/* Object i's fate: 0 expired an hour ago, 1 expires in an hour, 2 never,
 * 3 expires during the test (at `soon`). */
static int fate(uint64_t i) { return (int)(i % 4); }

static mote_entity *open_mem(mote_store *s)
{
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Mem", mem_props, NPROPS, &e));
    OK(mote_commit(t));
    return e;
}

static void put_all(mote_store *s, mote_entity *e, int64_t soon)
{
    mote_txn *t;
    int64_t now = now_ns();
    OK(mote_begin(s, 0, &t));
    for (uint64_t i = 1; i <= NOBJ; i++) {
        float vec[2] = {(float)i, 1};
        char kb[32];
        mote_value v[NPROPS] = {I((int64_t)(i % 10)), I(0), {0}, {0}, key_of(i, kb)};
        int f = fate(i);
        v[1] = f == 0 ? I(now - HOUR) : f == 1 ? I(now + HOUR) : f == 2 ? N() : I(soon);
        v[2].v.s.p = i % 2 ? "alpha memory" : "beta memory";
        v[2].v.s.n = strlen(v[2].v.s.p);
        v[3].v.s.p = vec;
        v[3].v.s.n = sizeof vec;
        OK(mote_put(t, e, i, v, MOTE_PUT_INSERT, NULL));
    }
    OK(mote_commit(t));
}

/* How many of objects 1..NOBJ with tag % 10 == tag (tag < 0: any) a reader
 * sees, with or without the `soon` ones. */
static uint64_t alive(int tag, int soon_gone)
{
    uint64_t n = 0;
    for (uint64_t i = 1; i <= NOBJ; i++)
        if ((tag < 0 || (int)(i % 10) == tag) && fate(i) != 0 && !(soon_gone && fate(i) == 3))
            n++;
    return n;
}

static int count_rec(void *ctx, const mote_record *r)
{
    (void)r;
    ++*(uint64_t *)ctx;
    return 0;
}

static int sum_groups(void *ctx, const mote_value *v, uint64_t count)
{
    (void)v;
    *(uint64_t *)ctx += count;
    return 0;
}

/* Every read path agrees with alive(). */
static void check_reads(mote_store *s, mote_entity *e, int soon_gone)
{
    mote_txn *t;
    uint64_t n, *ids;
    size_t nids;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_count(t, e, &n));
    CHECK(n == alive(-1, soon_gone));
    n = 0;
    OK(mote_scan(t, e, count_rec, &n));
    CHECK(n == alive(-1, soon_gone));
    for (uint64_t i = 1; i <= NOBJ; i++) {
        int gone = fate(i) == 0 || (soon_gone && fate(i) == 3);
        CHECK_RC(mote_get(t, e, i, NULL), gone ? MOTE_NOTFOUND : MOTE_OK);
    }
    mote_query *q;
    OK(mote_query_new(e, &q)); /* no condition: count, ids, and by order */
    OK(mote_query_count(t, q, &n));
    CHECK(n == alive(-1, soon_gone));
    OK(mote_query_order(q, 0, MOTE_Q_DESC));
    OK(mote_query_ids(t, q, &ids, &nids));
    CHECK(nids == alive(-1, soon_gone));
    for (size_t i = 0; i < nids; i++)
        CHECK(fate(ids[i]) != 0 && !(soon_gone && fate(ids[i]) == 3));
    mote_free(ids);
    n = 0;
    OK(mote_query_group_count(t, q, 0, sum_groups, &n));
    CHECK(n == alive(-1, soon_gone));
    mote_query_free(q);
    /* an exact index condition (count by ranks without expiry) */
    mote_value tag = I(3);
    int node;
    OK(mote_query_new(e, &q));
    OK(mote_query_cond(q, 0, MOTE_EQ, &tag, 1, 0, &node));
    OK(mote_query_where(q, node));
    OK(mote_query_count(t, q, &n));
    CHECK(n == alive(3, soon_gone));
    OK(mote_query_limit(q, 1, 0)); /* an offset by rank */
    OK(mote_query_ids(t, q, &ids, &nids));
    CHECK(nids == alive(3, soon_gone) - 1);
    mote_free(ids);
    mote_query_free(q);
    /* nearest (exact) and full-text match without conditions */
    float qv[2] = {0, 1};
    OK(mote_query_new(e, &q));
    OK(mote_query_nearest(q, 3, qv, 2, NOBJ, MOTE_DIST_EUCLIDEAN));
    OK(mote_query_count(t, q, &n));
    CHECK(n == alive(-1, soon_gone));
    mote_query_free(q);
    OK(mote_query_new(e, &q));
    OK(mote_query_match(q, 2, "alpha", 5, NOBJ, 0));
    n = 0;
    OK(mote_query_find(t, q, count_rec, &n));
    uint64_t odd = 0;
    for (uint64_t i = 1; i <= NOBJ; i += 2)
        odd += fate(i) != 0 && !(soon_gone && fate(i) == 3);
    CHECK(n == odd);
    mote_query_free(q);
    /* an aggregate */
    mote_value out;
    OK(mote_query_new(e, &q));
    OK(mote_query_aggregate(t, q, 0, MOTE_AGG_COUNT, &out, NULL));
    CHECK((uint64_t)out.v.i == alive(-1, soon_gone));
    mote_query_free(q);
    OK(mote_commit(t));
}

/* What the object tree holds, expired or not. */
static uint64_t stored(mote_store *s, mote_entity *e)
{
    mote_txn *t;
    uint64_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_count(t, e->eid, NULL, 0, NULL, 0, &n));
    OK(mote_commit(t));
    return n;
}

static void no_problem(void *ctx, const char *p)
{
    (void)ctx;
    fprintf(stderr, "check: %s\n", p);
    abort();
}

TEST(expire_reads_writes_sweep)
{
    const char *path = test_path("x.mote");
    mote_store *s = test_open(path, NULL);
    mote_entity *e = open_mem(s);
    int64_t soon = now_ns() + 400 * (int64_t)1000000;
    put_all(s, e, soon);
    if (now_ns() >= soon - 100 * (int64_t)1000000) { /* a very slow machine */
        fprintf(stderr, "expire: the puts took too long to test before `soon`\n");
        OK(mote_close(s));
        return;
    }
    check_reads(s, e, 0);

    /* a read transaction keeps its clock: the soon ones stay while it runs */
    mote_txn *r;
    uint64_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &r));
    OK(mote_count(r, e, &n));
    CHECK(n == alive(-1, 0));
    while (now_ns() <= soon)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    OK(mote_count(r, e, &n));
    CHECK(n == alive(-1, 0));
    CHECK_RC(mote_get(r, e, 3, NULL), MOTE_OK);
    OK(mote_commit(r));
    check_reads(s, e, 1); /* a new one's does not */

    /* writes that meet expired objects remove them first: 4 is inserted
     * anew, 8's key is taken by a new object and 12's by 1, 16 is not found
     * to update, 20 to remove (4 * k all expired an hour ago) */
    mote_txn *t;
    float vec[2] = {0, 0};
    char kb[32];
    mote_value v[NPROPS] = {I(1), I(now_ns() + HOUR), {0}, {0}, key_of(4, kb)};
    v[3].v.s.p = vec;
    v[3].v.s.n = sizeof vec;
    unsigned pkey = 4, pexp = 1;
    uint64_t got, stored0 = stored(s, e);
    OK(mote_begin(s, 0, &t));
    OK(mote_put(t, e, 4, v, MOTE_PUT_INSERT, NULL));
    OK(mote_get(t, e, 4, NULL));
    v[4] = key_of(8, kb);
    OK(mote_put(t, e, 0, v, MOTE_PUT_INSERT, &got));
    CHECK(got > NOBJ);
    CHECK_RC(mote_put(t, e, 0, v, MOTE_PUT_INSERT, &got), MOTE_UNIQUE); /* live now */
    v[4] = key_of(12, kb);
    OK(mote_update(t, e, 1, &pkey, &v[4], 1));
    CHECK_RC(mote_update(t, e, 16, &pexp, &v[1], 1), MOTE_NOTFOUND);
    CHECK_RC(mote_remove(t, e, 20), MOTE_NOTFOUND);
    OK(mote_commit(t));
    /* 4, 8, 12, 16, 20 removed, 4 and one new object added */
    CHECK(stored(s, e) == stored0 - 5 + 2);
    uint64_t removed_many;
    OK(mote_begin(s, 0, &t));
    uint64_t two[2] = {24, 2}; /* remove_many counts the live one */
    OK(mote_remove_many(t, e, two, 2, &removed_many));
    CHECK(removed_many == 1);
    OK(mote_commit(t));

    /* the sweep removes what has expired, and only that */
    uint64_t before = stored(s, e), removed;
    uint64_t expired = NOBJ - alive(-1, 1) - 6; /* less 4, 8, ..., 24, removed above */
    OK(mote_begin(s, 0, &t));
    OK(mote_sweep(t, e, &removed));
    CHECK(removed == expired);
    OK(mote_count(t, e, &n));
    CHECK(n == alive(-1, 1) + 1); /* less 2, plus 4 and the new object */
    OK(mote_commit(t));
    CHECK(stored(s, e) == before - expired);
    OK(mote_begin(s, 0, &t));
    OK(mote_sweep(t, e, &removed));
    CHECK(removed == 0);
    mote_abort(t);
    OK(mote_check(s, no_problem, NULL));

    /* after a reopen (schema format 5), the same */
    OK(mote_close(s));
    s = test_open(path, NULL);
    e = open_mem(s);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_count(t, e, &n));
    CHECK(n == alive(-1, 1) + 1);
    CHECK_RC(mote_get(t, e, 8, NULL), MOTE_NOTFOUND); /* swept */
    CHECK_RC(mote_get(t, e, 3, NULL), MOTE_NOTFOUND); /* expired at `soon` */
    OK(mote_get(t, e, 4, NULL));                        /* inserted anew */
    OK(mote_get(t, e, 1, NULL));
    OK(mote_commit(t));
    OK(mote_close(s));
}

TEST(expire_definitions)
{
    mote_store *s = test_open(test_path("d.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, 0, &t));
    static const mote_prop_def not_time[] = {
        {"x", MOTE_T_INT64, MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def no_index[] = {
        {"x", MOTE_T_TIMESTAMP, MOTE_P_EXPIRES, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def two[] = {
        {"x", MOTE_T_TIMESTAMP, MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL, NULL, {0}, NULL},
        {"y", MOTE_T_TIMESTAMP, MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL, NULL, {0}, NULL}};
    CHECK_RC(mote_entity_open(t, "A", not_time, 1, &e), MOTE_INVALID);
    CHECK_RC(mote_entity_open(t, "A", no_index, 1, &e), MOTE_INVALID);
    CHECK_RC(mote_entity_open(t, "A", two, 2, &e), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "two expiry times"));
    /* an entity without one: nothing to sweep */
    static const mote_prop_def plain[] = {{"x", MOTE_T_INT64, 0, 0, NULL, NULL, {0}, NULL}};
    uint64_t removed = 9;
    OK(mote_entity_open(t, "B", plain, 1, &e));
    OK(mote_sweep(t, e, &removed));
    CHECK(removed == 0);
    OK(mote_commit(t));
    /* sweeping needs a write transaction; becoming an expiry time needs one too */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_sweep(t, e, NULL), MOTE_READONLY);
    static const mote_prop_def becomes[] = {
        {"x", MOTE_T_TIMESTAMP, MOTE_P_INDEXED | MOTE_P_EXPIRES, 0, NULL, NULL, {0}, NULL}};
    static const mote_prop_def was[] = {{"x", MOTE_T_TIMESTAMP, MOTE_P_INDEXED, 0, NULL, NULL,
                                         {0}, NULL}};
    mote_abort(t);
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "C", was, 1, &e));
    mote_value past = I(now_ns() - HOUR);
    OK(mote_put(t, e, 1, &past, MOTE_PUT_INSERT, NULL));
    OK(mote_commit(t));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_entity_open(t, "C", becomes, 1, &e), MOTE_SCHEMA);
    CHECK(strstr(mote_errmsg(NULL), "becomes an expiry time"));
    mote_abort(t);
    OK(mote_begin(s, 0, &t)); /* declared over stored objects: they expire at once */
    OK(mote_entity_open(t, "C", becomes, 1, &e));
    CHECK_RC(mote_get(t, e, 1, NULL), MOTE_NOTFOUND);
    OK(mote_commit(t));
    OK(mote_close(s));
}
