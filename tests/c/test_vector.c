/*
 * test_vector.c — vector search (issue 18): the distance kernels against a
 * double reference, and exact nearest-neighbour queries against a naive
 * model, with filters of every selectivity, offset and limit, NULL and
 * all-zero vectors, and the errors.
 */
#include <math.h>

#include "test.h"
#include "vecmath.h"

/* ---- kernels ------------------------------------------------------------------- */

static void put_le(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static double rel_err(double got, double want)
{
    double scale = fabs(want) > 1 ? fabs(want) : 1;
    return fabs(got - want) / scale;
}

/* Every kernel set this CPU runs against sums in double, every length
 * from 0 to 300, the stored vector at every alignment. */
TEST(vector_kernels)
{
    const vec_kernels *sets[3];
    size_t nsets = mote__vec_kernels_all(sets);
    CHECK(nsets >= 1 && sets[nsets - 1] == mote__vec_kernels_portable());
    printf("kernels of this CPU: %s (chosen: %s)\n", sets[0]->name, mote__vec_kernels()->name);
    uint64_t rs = 17;
    static uint8_t store[4 * 300 + 8];
    static float q[300];
    for (size_t dim = 0; dim <= 300; dim++) {
        for (size_t align = 0; align < 4; align++) {
            uint8_t *a = store + align;
            double dot = 0, aa = 0, l2 = 0;
            for (size_t i = 0; i < dim; i++) {
                float x = (float)((int64_t)(test_rand(&rs) % 20001) - 10000) / 1000.0f;
                float y = (float)((int64_t)(test_rand(&rs) % 20001) - 10000) / 1000.0f;
                put_le(a + 4 * i, x);
                q[i] = y;
                dot += (double)x * y;
                aa += (double)x * x;
                l2 += ((double)x - y) * ((double)x - y);
            }
            for (size_t k = 0; k < nsets; k++) {
                float d, n;
                sets[k]->dot_norm(a, q, dim, &d, &n);
                double tol = 1e-5 * (double)(dim + 1);
                CHECK(rel_err(sets[k]->dot(a, q, dim), dot) < tol);
                CHECK(rel_err(d, dot) < tol && rel_err(n, aa) < tol);
                CHECK(rel_err(sets[k]->l2sq(a, q, dim), l2) < tol);
            }
        }
    }
    /* the byte kernel, exact: every length up to 1024 in steps of 64, bytes
     * over their whole range (the extremes in the first 64), at every
     * alignment of both rows */
    static uint8_t ab[1024 + 64];
    static int8_t qb[1024 + 64];
    for (size_t n = 0; n <= 1024; n += 64) {
        for (size_t align = 0; align < 64; align += 13) {
            uint8_t *a = ab + align;
            int8_t *qq = qb + 63 - align;
            int64_t want = 0;
            for (size_t i = 0; i < n; i++) {
                a[i] = i < 32 ? 255 : i < 64 ? 0 : (uint8_t)test_rand(&rs);
                qq[i] = i < 16 ? -128 : i < 32 ? 127 : (int8_t)(uint8_t)test_rand(&rs);
                want += (int64_t)a[i] * qq[i];
            }
            for (size_t k = 0; k < nsets; k++)
                CHECK(sets[k]->dot8(a, qq, n) == want);
        }
    }
}

/* ---- nearest queries -------------------------------------------------------------- */

enum { DIM = 24, NOBJ = 3000, P_TOPIC = 0, P_LEVEL, P_VEC };

static const mote_prop_def vprops[] = {
    {"topic", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"level", MOTE_T_INT32, 0, 0, NULL, NULL, {0}, NULL},
    {"vec", MOTE_T_VECTOR, MOTE_P_NULLABLE, DIM, NULL, NULL, {0}, NULL},
};

/* Components are small integers, so every dot product and squared norm is
 * exact in float as in double: the model's distances equal the library's
 * bit for bit and its order (ties by id) can be compared exactly. */
typedef struct vobj {
    int topic, level, null;
    float v[DIM];
} vobj;

static vobj objs[NOBJ + 1];

static double model_dist(const float *a, const float *q, int metric)
{
    double dot = 0, aa = 0, qq = 0, l2 = 0;
    for (int i = 0; i < DIM; i++) {
        dot += (double)a[i] * q[i];
        aa += (double)a[i] * a[i];
        qq += (double)q[i] * q[i];
        l2 += ((double)a[i] - q[i]) * ((double)a[i] - q[i]);
    }
    if (metric == MOTE_DIST_EUCLIDEAN)
        return sqrt(l2);
    if (metric == MOTE_DIST_DOT)
        return -dot;
    double c = aa > 0 && qq > 0 ? dot / (sqrt(aa) * sqrt(qq)) : 0;
    return 1.0 - (c > 1 ? 1 : c < -1 ? -1 : c);
}

typedef struct scored {
    double d;
    uint64_t id;
} scored;

static int cmp_scored(const void *x, const void *y)
{
    const scored *a = x, *b = y;
    if (a->d != b->d)
        return a->d < b->d ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

typedef struct found {
    uint64_t ids[NOBJ];
    double d[NOBJ];
    size_t n;
} found;

static int collect(void *ctx, const mote_record *r)
{
    found *f = ctx;
    f->ids[f->n] = r->id;
    f->d[f->n++] = r->distance;
    return 0;
}

static mote_entity *vector_store(mote_store **s)
{
    *s = test_open(test_path("vec.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    uint64_t rs = 99;
    OK(mote_begin(*s, 0, &t));
    OK(mote_entity_open(t, "Memory", vprops, 3, &e));
    for (uint64_t id = 1; id <= NOBJ; id++) {
        vobj *o = &objs[id];
        o->topic = (int)(test_rand(&rs) % 100); /* topic == x: 1 % */
        o->level = (int)(test_rand(&rs) % 10);  /* level < x: 10 % steps */
        o->null = id % 97 == 0;
        int zero = id % 89 == 0; /* an all-zero vector */
        for (int i = 0; i < DIM; i++)
            o->v[i] = zero ? 0 : (float)((int)(test_rand(&rs) % 7) - 3);
        mote_value v[3] = {{0}};
        v[P_TOPIC].v.i = o->topic;
        v[P_LEVEL].v.i = o->level;
        uint8_t bytes[DIM * 4];
        for (int i = 0; i < DIM; i++)
            put_le(bytes + 4 * i, o->v[i]);
        v[P_VEC].null = o->null;
        v[P_VEC].v.s.p = bytes;
        v[P_VEC].v.s.n = sizeof bytes;
        OK(mote_put(t, e, id, v, MOTE_PUT_INSERT, NULL));
    }
    OK(mote_commit(t));
    return e;
}

/* The model's answer: objects with a vector matching the filter (kind 0:
 * none, 1: topic == x, 2: level < x), the k nearest, then offset / limit. */
static size_t model(const float *q, int metric, int kind, int x, uint64_t k, uint64_t off,
                    uint64_t lim, scored *out)
{
    static scored all[NOBJ];
    size_t n = 0;
    for (uint64_t id = 1; id <= NOBJ; id++) {
        const vobj *o = &objs[id];
        if (o->null || (kind == 1 && o->topic != x) || (kind == 2 && o->level >= x))
            continue;
        all[n].d = model_dist(o->v, q, metric);
        all[n++].id = id;
    }
    qsort(all, n, sizeof *all, cmp_scored);
    if (n > k)
        n = (size_t)k;
    size_t start = off < n ? (size_t)off : n, cnt = n - start;
    if (lim && cnt > lim)
        cnt = (size_t)lim;
    memcpy(out, all + start, cnt * sizeof *out);
    return cnt;
}

TEST(vector_nearest_exact)
{
    mote_store *s;
    mote_entity *e = vector_store(&s);
    uint64_t rs = 5;
    static found f;
    static scored want[NOBJ];
    long queries = 0, results = 0;
    for (int round = 0; round < 120; round++) {
        float q[DIM];
        int zero_q = round % 40 == 39;
        for (int i = 0; i < DIM; i++)
            q[i] = zero_q ? 0 : (float)((int)(test_rand(&rs) % 7) - 3);
        int metric = MOTE_DIST_COSINE + round % 3, kind = (round / 3) % 3;
        int x = kind == 1 ? (int)(test_rand(&rs) % 100) : (int)(1 + test_rand(&rs) % 9);
        uint64_t ks[] = {1, 10, 200, NOBJ + 5};
        uint64_t k = ks[test_rand(&rs) % 4], off = test_rand(&rs) % 3 == 0 ? test_rand(&rs) % 15 : 0;
        uint64_t lim = test_rand(&rs) % 3 == 0 ? 1 + test_rand(&rs) % 20 : 0;
        mote_query *qq;
        OK(mote_query_new(e, &qq));
        if (kind) {
            int c;
            mote_value v = {0};
            v.v.i = x;
            OK(mote_query_cond(qq, kind == 1 ? P_TOPIC : P_LEVEL, kind == 1 ? MOTE_EQ : MOTE_LT,
                               &v, 1, 0, &c));
            OK(mote_query_where(qq, c));
        }
        OK(mote_query_nearest(qq, P_VEC, q, DIM, k, metric));
        OK(mote_query_limit(qq, off, lim));
        size_t wn = model(q, metric, kind, x, k, off, lim, want);
        f.n = 0;
        OK(mote_query_find(NULL, qq, collect, &f));
        CHECK(f.n == wn);
        for (size_t i = 0; i < wn; i++)
            CHECK(f.ids[i] == want[i].id && f.d[i] == want[i].d);
        uint64_t *ids;
        double *dist;
        size_t n;
        OK(mote_query_scored(NULL, qq, &ids, &dist, &n));
        CHECK(n == wn);
        for (size_t i = 0; i < n; i++)
            CHECK(ids[i] == want[i].id && dist[i] == want[i].d);
        mote_free(ids);
        mote_free(dist);
        uint64_t cnt;
        OK(mote_query_count(NULL, qq, &cnt));
        CHECK(cnt == wn);
        OK(mote_query_ids(NULL, qq, &ids, &n));
        CHECK(n == wn && (!n || ids[0] == want[0].id));
        mote_free(ids);
        const char *plan = mote_query_plan(NULL, qq);
        CHECK(!strcmp(plan, kind == 1 ? "exact nearest, index" : "exact nearest, scan"));
        mote_query_free(qq);
        queries++;
        results += (long)wn;
    }
    printf("%ld nearest queries, %ld results, all equal to the model\n", queries, results);
    OK(mote_close(s));
}

TEST(vector_nearest_errors)
{
    mote_store *s;
    mote_entity *e = vector_store(&s);
    mote_query *q;
    float v[DIM] = {1};
    OK(mote_query_new(e, &q));
    CHECK_RC(mote_query_nearest(q, P_TOPIC, v, DIM, 10, MOTE_DIST_COSINE), MOTE_TYPE);
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM - 1, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM, 0, MOTE_DIST_COSINE), MOTE_INVALID);
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM, 10, 7), MOTE_INVALID);
    CHECK_RC(mote_query_nearest(q, 9, v, DIM, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    CHECK_RC(mote_query_nearest(q, P_VEC, NULL, DIM, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    v[5] = NAN;
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "component 5 is NaN"));
    v[5] = INFINITY;
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "infinite"));
    v[5] = 1;
    uint64_t *ids;
    double *dist;
    size_t n;
    CHECK_RC(mote_query_scored(NULL, q, &ids, &dist, &n), MOTE_INVALID); /* not nearest */
    OK(mote_query_nearest(q, P_VEC, v, DIM, 10, MOTE_DIST_COSINE));
    CHECK_RC(mote_query_order(q, P_TOPIC, 0), MOTE_INVALID); /* it has its own order */
    mote_query_free(q);
    OK(mote_query_new(e, &q));
    OK(mote_query_order(q, P_TOPIC, 0));
    CHECK_RC(mote_query_nearest(q, P_VEC, v, DIM, 10, MOTE_DIST_COSINE), MOTE_INVALID);
    mote_query_free(q);
    OK(mote_close(s));
}
