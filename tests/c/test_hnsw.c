/*
 * test_hnsw.c — vector indexes (MOTE_P_HNSW, issue 18): recall against
 * exact search on random and clustered data (synthetic, fixed seeds; recall
 * is a structural property of the graph at default parameters, so it is
 * asserted), filtered queries at 1 %, 10 % and 50 % giving exactly k,
 * random changes against a model with aborts and reopens (mote check after
 * each commit), no trace of an aborted transaction, schema changes (an
 * index added over objects, new parameters, dropped), bad input, and
 * readers searching while a writer changes the index.
 */
#include <math.h>
#include <pthread.h>

#include "test.h"

enum { P_TOPIC = 0, P_VEC = 1 };

static mote_prop_def hprops(unsigned dim, int metric, unsigned m, int i)
{
    mote_prop_def d[2] = {
        {"topic", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
        {"vec", MOTE_T_VECTOR, MOTE_P_NULLABLE | MOTE_P_HNSW, dim, NULL, NULL, {metric, m, 0}, NULL},
    };
    return d[i];
}

static mote_entity *open_docs(mote_txn *t, unsigned dim, int metric, unsigned m)
{
    mote_prop_def d[2] = {hprops(dim, metric, m, 0), hprops(dim, metric, m, 1)};
    mote_entity *e;
    OK(mote_entity_open(t, "Doc", d, 2, &e));
    return e;
}

static float frand(uint64_t *rs) { return (float)(test_rand(rs) % 20001) / 10000.0f - 1.0f; }

/* n vectors of dim: uniform in [-1, 1], or (clusters > 0) around that many
 * centres with noise of a tenth of their spread. */
static float *make_data(size_t n, unsigned dim, int clusters, uint64_t seed)
{
    uint64_t rs = seed;
    float *v = malloc(n * dim * sizeof *v), *c = NULL;
    CHECK(v);
    if (clusters) {
        c = malloc((size_t)clusters * dim * sizeof *c);
        CHECK(c);
        for (size_t i = 0; i < (size_t)clusters * dim; i++)
            c[i] = frand(&rs);
    }
    for (size_t i = 0; i < n; i++) {
        const float *cc = clusters ? c + (test_rand(&rs) % (uint64_t)clusters) * dim : NULL;
        for (unsigned j = 0; j < dim; j++)
            v[i * dim + j] = cc ? cc[j] + 0.1f * frand(&rs) : frand(&rs);
    }
    free(c);
    return v;
}

static mote_value vec_value(const float *v, unsigned dim)
{
    mote_value x = {0};
    x.v.s.p = v; /* (little-endian machines: floats as stored) */
    x.v.s.n = (size_t)dim * 4;
    return x;
}

/* Put objects first..first+n-1 with vectors data[0..n), topic = id % 100. */
static void put_range(mote_txn *t, mote_entity *e, uint64_t first, size_t n, const float *data,
                      unsigned dim)
{
    for (size_t i = 0; i < n; i++) {
        mote_value v[2] = {{0}};
        v[P_TOPIC].v.i = (int64_t)((first + i) % 100);
        v[P_VEC] = vec_value(data + i * dim, dim);
        OK(mote_put(t, e, first + i, v, MOTE_PUT_INSERT, NULL));
    }
}

/* A new store test_path(name) whose Doc entity (index of distance metric)
 * holds objects 1..n with vectors data[0..n), committed; *e its handle. */
static mote_store *docs_store(const char *name, unsigned dim, int metric, const float *data,
                              size_t n, mote_entity **e)
{
    mote_store *s = test_open(test_path(name), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    *e = open_docs(t, dim, metric, 0);
    put_range(t, *e, 1, n, data, dim);
    OK(mote_commit(t));
    return s;
}

/* The ids of a nearest query (how: MOTE_NEAR_*), with an optional
 * condition topic < lt (lt > 0) or topic == -lt (lt < 0). */
static size_t nearest(mote_txn *t, mote_entity *e, const float *q, unsigned dim, uint64_t k,
                      int metric, int how, int lt, uint64_t *ids, const char **plan)
{
    mote_query *qq;
    OK(mote_query_new(e, &qq));
    if (lt) {
        int c;
        mote_value v = {0};
        v.v.i = lt > 0 ? lt : -lt;
        OK(mote_query_cond(qq, P_TOPIC, lt > 0 ? MOTE_LT : MOTE_EQ, &v, 1, 0, &c));
        OK(mote_query_where(qq, c));
    }
    OK(mote_query_nearest(qq, P_VEC, q, dim, k, metric));
    OK(mote_query_search(qq, how, 0));
    if (plan)
        *plan = mote_query_plan(t, qq);
    uint64_t *got;
    size_t n;
    OK(mote_query_ids(t, qq, &got, &n));
    if (n)
        memcpy(ids, got, n * sizeof *ids);
    mote_free(got);
    mote_query_free(qq);
    return n;
}

/* How many of want[0..n) are in got[0..m). */
static size_t overlap(const uint64_t *want, size_t n, const uint64_t *got, size_t m)
{
    size_t hit = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            if (want[i] == got[j]) {
                hit++;
                break;
            }
    return hit;
}

static void print_problem(void *ctx, const char *problem)
{
    (void)ctx;
    fprintf(stderr, "mote_check: %s\n", problem);
}

static void check_clean(mote_store *s) { OK(mote_check(s, print_problem, NULL)); }

/* The vector index tree of Doc.vec ("@h:<entity id>:2"). */
static uint32_t doc_index_tree(mote_txn *t, int must)
{
    for (unsigned eid = 1; eid < 64; eid++) {
        char name[32];
        uint32_t tree;
        snprintf(name, sizeof name, "@h:%u:2", eid);
        if (mote_kv_tree(t, name, 0, &tree) == MOTE_OK)
            return tree;
    }
    CHECK(!must);
    return 0;
}

/* Recall@10 of index searches against exact ones, 100 queries, on n
 * vectors of data (random or clustered; scaled: each vector times a factor
 * from 1 to 1000, so that the searches' 8-bit rows have scales that differ
 * as much; far: every component + 10, all vectors in one region away
 * from the origin, in nearly one direction, which the 8-bit rows keep apart only
 * less their centre), for each distance. */
static void recall_case(int clusters, int scaled, int far, uint64_t seed)
{
    const unsigned dim = 32;
    const size_t n = 4000, nq = 100;
    /* held-out queries from the same distribution (the same centres) */
    float *data = make_data(n + nq, dim, clusters, seed), *qs = data + n * dim;
    uint64_t rs = seed;
    for (size_t i = 0; scaled && i < n + nq; i++) {
        float f = powf(10.0f, (float)(test_rand(&rs) % 3001) / 1000.0f);
        for (unsigned j = 0; j < dim; j++)
            data[i * dim + j] *= f;
    }
    for (size_t i = 0; far && i < (n + nq) * dim; i++)
        data[i] += 10.0f;
    for (int metric = MOTE_DIST_COSINE; metric <= MOTE_DIST_DOT; metric++) {
        mote_entity *e;
        mote_store *s = docs_store("recall.mote", dim, metric, data, n, &e);
        mote_txn *t;
        size_t hits = 0;
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        for (size_t i = 0; i < nq; i++) {
            uint64_t want[10], got[10];
            const char *plan;
            CHECK(nearest(t, e, qs + i * dim, dim, 10, metric, MOTE_NEAR_EXACT, 0, want,
                          NULL) == 10);
            CHECK(nearest(t, e, qs + i * dim, dim, 10, metric, MOTE_NEAR_AUTO, 0, got,
                          &plan) == 10);
            CHECK(!strcmp(plan, "vector index nearest"));
            hits += overlap(want, 10, got, 10);
        }
        double recall = (double)hits / (double)(nq * 10);
        printf("%s%s%s data, distance %d: recall@10 %.3f\n", scaled ? "scaled " : "",
               far ? "far " : "", clusters ? "clustered" : "random", metric, recall);
        CHECK(recall >= 0.95);
        mote_abort(t);
        check_clean(s);
        OK(mote_close(s));
        remove(test_path("recall.mote"));
    }
    free(data);
}

TEST(hnsw_recall_random) { recall_case(0, 0, 0, 11); }
TEST(hnsw_recall_clustered) { recall_case(40, 0, 0, 12); }
TEST(hnsw_recall_scaled) { recall_case(40, 1, 0, 13); }
TEST(hnsw_recall_far) { recall_case(40, 0, 1, 14); }

/* Searches wider than the buffers' first size (256): ef 300 to 2,000, and
 * k up to 700 (the search keeps max(ef, k)). Found by bench/vectors' full
 * sweep (ef 384: the heap of the ef nearest was allocated for 256 and
 * written past; glibc aborted). Under ASan any overrun fails here. */
TEST(hnsw_wide_searches)
{
    const unsigned dim = 16;
    const size_t n = 3000;
    float *data = make_data(n + 20, dim, 0, 21), *qs = data + n * dim;
    mote_entity *e;
    mote_store *s = docs_store("wide.mote", dim, MOTE_DIST_EUCLIDEAN, data, n, &e);
    mote_txn *t;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    unsigned efs[] = {300, 384, 512, 700, 2000};
    uint64_t ks[] = {10, 300, 700};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 3; b++) {
            for (size_t i = 0; i < 20; i++) {
                uint64_t *want, *got;
                size_t nw, ng;
                for (int how = 0; how < 2; how++) {
                    mote_query *q;
                    OK(mote_query_new(e, &q));
                    OK(mote_query_nearest(q, P_VEC, qs + i * dim, dim, ks[b],
                                          MOTE_DIST_EUCLIDEAN));
                    OK(mote_query_search(q, how ? MOTE_NEAR_INDEX : MOTE_NEAR_EXACT, efs[a]));
                    OK(mote_query_ids(t, q, how ? &got : &want, how ? &ng : &nw));
                    mote_query_free(q);
                }
                CHECK(nw == ks[b] && ng == ks[b]);
                /* ef >= 300 over 3,000 vectors: (nearly) exact */
                CHECK(overlap(want, nw, got, ng) * 100 >= nw * 97);
                mote_free(want);
                mote_free(got);
            }
        }
    mote_abort(t);
    OK(mote_close(s));
    free(data);
}

/* Results through the index carry the distances an exact search gives, bit
 * for bit: from the index's rows (euclidean, dot: the stored vectors) or
 * from the records (cosine). The image's memory counts its 8-bit rows
 * (cosine and dot: dim rounded up to 64 bytes and a scale each; hnsw.c
 * QUANTIZED ROWS). */
TEST(hnsw_distances_as_exact)
{
    const unsigned dim = 16;
    const size_t n = 3000;
    float *data = make_data(n, dim, 0, 21);
    uint64_t memory[4] = {0};
    for (int metric = MOTE_DIST_COSINE; metric <= MOTE_DIST_DOT; metric++) {
        char name[32];
        snprintf(name, sizeof name, "d%d.mote", metric);
        mote_entity *e;
        mote_store *s = docs_store(name, dim, metric, data, n, &e);
        mote_txn *t;
        for (int i = 0; i < 20; i++) {
            mote_query *qi, *qe;
            const float *q = data + (size_t)i * 97 * dim;
            OK(mote_query_new(e, &qi));
            OK(mote_query_new(e, &qe));
            OK(mote_query_nearest(qi, P_VEC, q, dim, 10, metric));
            OK(mote_query_nearest(qe, P_VEC, q, dim, 10, metric));
            OK(mote_query_search(qi, MOTE_NEAR_INDEX, 0));
            OK(mote_query_search(qe, MOTE_NEAR_EXACT, 0));
            uint64_t *ia, *ib;
            double *da, *db;
            size_t na, nb, same = 0;
            OK(mote_query_scored(NULL, qi, &ia, &da, &na));
            OK(mote_query_scored(NULL, qe, &ib, &db, &nb));
            CHECK(na == 10 && nb == 10);
            if (metric == MOTE_DIST_EUCLIDEAN) /* the object itself */
                CHECK(ia[0] == (uint64_t)i * 97 + 1 && da[0] == 0);
            for (size_t a = 0; a < na; a++) {
                CHECK(a == 0 || da[a] >= da[a - 1]);
                for (size_t b = 0; b < nb; b++)
                    if (ia[a] == ib[b]) {
                        CHECK(da[a] == db[b]);
                        same++;
                    }
            }
            CHECK(same >= 5);
            mote_free(ia);
            mote_free(ib);
            mote_free(da);
            mote_free(db);
            mote_query_free(qi);
            mote_query_free(qe);
        }
        mote_vstat vs;
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        OK(mote_vindex_stat(t, e, P_VEC, &vs));
        CHECK(vs.vectors == n && vs.dim == dim && vs.memory > 0);
        memory[metric] = vs.memory;
        mote_abort(t);
        OK(mote_close(s));
    }
    /* the same ids, so the same levels: what differs is the rows (cosine's
     * 8 floats of norm in front of 16), and every image counts at least
     * its float rows, 8-bit rows (64 bytes), scales and norms */
    CHECK(memory[MOTE_DIST_COSINE] - memory[MOTE_DIST_DOT] >= n * 8 * 4);
    CHECK(memory[MOTE_DIST_EUCLIDEAN] == memory[MOTE_DIST_DOT]);
    for (int m = MOTE_DIST_COSINE; m <= MOTE_DIST_DOT; m++)
        CHECK(memory[m] >= n * (dim * 4 + 64 + 4 + 4));
    free(data);
}

/* Filters selecting 1 %, 10 % and 50 % of the objects: exactly k results
 * through the index (and exactly through the planner's choice), recall
 * against the exact answer; k past the matches gives every match. */
TEST(hnsw_filtered_exactly_k)
{
    const unsigned dim = 24;
    const size_t n = 8000, nq = 40;
    float *data = make_data(n + nq, dim, 30, 31), *qs = data + n * dim;
    mote_entity *e;
    mote_store *s = docs_store("f.mote", dim, MOTE_DIST_COSINE, data, n, &e);
    mote_txn *t;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    const int filters[3] = {-7, 10, 50}; /* topic == 7, topic < 10, topic < 50 */
    for (int f = 0; f < 3; f++) {
        size_t hits = 0, total = 0;
        for (size_t i = 0; i < nq; i++) {
            uint64_t want[10], got[10], any[10];
            const char *plan;
            CHECK(nearest(t, e, qs + i * dim, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_EXACT,
                          filters[f], want, NULL) == 10);
            CHECK(nearest(t, e, qs + i * dim, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX,
                          filters[f], got, NULL) == 10);
            CHECK(nearest(t, e, qs + i * dim, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_AUTO,
                          filters[f], any, &plan) == 10);
            /* 80 and 800 matches: compared exactly; 4,000: through the index */
            CHECK(!strcmp(plan, f < 2 ? "exact nearest, index" : "vector index nearest, filtered"));
            if (f < 2)
                CHECK(overlap(want, 10, any, 10) == 10);
            for (int j = 0; j < 10; j++) { /* every result matches */
                mote_record r;
                mote_value tv;
                OK(mote_get(t, e, got[j], &r));
                OK(mote_record_get(&r, P_TOPIC, &tv, NULL));
                CHECK(filters[f] < 0 ? tv.v.i == -filters[f] : tv.v.i < filters[f]);
            }
            hits += overlap(want, 10, got, 10);
            total += 10;
        }
        printf("filter %d: recall@10 through the index %.3f\n", filters[f],
               (double)hits / (double)total);
        CHECK(hits >= total * 95 / 100);
    }
    /* k past the matches: all 80 of topic 7 */
    uint64_t *all = malloc(200 * sizeof *all);
    CHECK(nearest(t, e, qs, dim, 200, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, -7, all, NULL) == 80);
    free(all);
    mote_abort(t);
    OK(mote_close(s));
    free(data);
}

/* ---- random changes against a model --------------------------------------------- */

enum { MDIM = 8, MMAX = 1500 };

typedef struct mstate {
    int has[MMAX + 1];  /* 1: the object exists; 2: with a vector */
    float v[MMAX + 1][MDIM];
} mstate;

static void random_vec(uint64_t *rs, float *v)
{
    for (int j = 0; j < MDIM; j++)
        v[j] = frand(rs);
}

/* One write transaction of random changes to e and the model m. */
static void random_txn(mote_txn *t, mote_entity *e, mstate *m, uint64_t *rs)
{
    int ops = 1 + (int)(test_rand(rs) % 40);
    for (int op = 0; op < ops; op++) {
        uint64_t id = 1 + test_rand(rs) % MMAX;
        int kind = (int)(test_rand(rs) % 10);
        mote_value v[2] = {{0}};
        float vec[MDIM];
        random_vec(rs, vec);
        v[P_TOPIC].v.i = (int64_t)(id % 100);
        v[P_VEC] = vec_value(vec, MDIM);
        if (kind < 4) { /* put (insert or replace) */
            if (test_rand(rs) % 8 == 0)
                v[P_VEC].null = 1;
            OK(mote_put(t, e, id, v, MOTE_PUT_UPSERT, NULL));
            m->has[id] = v[P_VEC].null ? 1 : 2;
            memcpy(m->v[id], vec, sizeof vec);
        } else if (kind < 6 && m->has[id]) { /* partial update: the vector, or the topic */
            unsigned which = test_rand(rs) % 3 ? P_VEC : P_TOPIC;
            OK(mote_update(t, e, id, &which, &v[which], 1));
            if (which == P_VEC) {
                m->has[id] = 2;
                memcpy(m->v[id], vec, sizeof vec);
            }
        } else if (kind < 8) { /* remove */
            CHECK_RC(mote_remove(t, e, id), m->has[id] ? MOTE_OK : MOTE_NOTFOUND);
            m->has[id] = 0;
        } else if (kind == 8) { /* a batch of new objects above the others */
            uint64_t ids[20];
            mote_value vs[40];
            float vv[20][MDIM];
            size_t cnt = 0;
            for (uint64_t x = 1 + test_rand(rs) % MMAX; x <= MMAX && cnt < 20; x += 1 + test_rand(rs) % 5)
                if (!m->has[x]) {
                    ids[cnt] = x;
                    random_vec(rs, vv[cnt]);
                    memset(&vs[2 * cnt], 0, 2 * sizeof *vs);
                    vs[2 * cnt].v.i = (int64_t)(x % 100);
                    vs[2 * cnt + 1] = vec_value(vv[cnt], MDIM);
                    m->has[x] = 2;
                    memcpy(m->v[x], vv[cnt], sizeof vv[cnt]);
                    cnt++;
                }
            OK(mote_put_many(t, e, cnt, ids, vs, MOTE_PUT_INSERT, NULL, NULL));
        } else { /* remove a batch */
            uint64_t ids[30], removed;
            size_t cnt = 0, want = 0;
            for (int j = 0; j < 30; j++) {
                ids[cnt] = 1 + test_rand(rs) % MMAX;
                int dup = 0;
                for (size_t q = 0; q < cnt; q++)
                    dup |= ids[q] == ids[cnt];
                if (dup)
                    continue;
                want += m->has[ids[cnt]] != 0;
                m->has[ids[cnt]] = 0;
                cnt++;
            }
            OK(mote_remove_many(t, e, ids, cnt, &removed));
            CHECK(removed == want);
        }
    }
}

/* Index searches as t sees the model m: min(k, vectors) results, each an
 * object with a vector; a stored vector finds its own object (almost always:
 * counted). */
static void model_queries(mote_txn *t, mote_entity *e, const mstate *m, uint64_t *rs,
                          long *self, long *tries)
{
    size_t live = 0;
    for (int i = 1; i <= MMAX; i++)
        live += m->has[i] == 2;
    for (int r = 0; r < 5; r++) {
        uint64_t id = 1 + test_rand(rs) % MMAX, got[20];
        float q[MDIM];
        if (m->has[id] == 2)
            memcpy(q, m->v[id], sizeof q);
        else
            random_vec(rs, q);
        size_t n = nearest(t, e, q, MDIM, 20, MOTE_DIST_EUCLIDEAN, MOTE_NEAR_INDEX, 0, got, NULL);
        CHECK(n == (live < 20 ? live : 20));
        for (size_t i = 0; i < n; i++)
            CHECK(got[i] <= MMAX && m->has[got[i]] == 2);
        if (m->has[id] == 2) {
            (*tries)++;
            *self += n && got[0] == id;
        }
    }
}

TEST(hnsw_model)
{
    static mstate m, before;
    memset(&m, 0, sizeof m);
    uint64_t rs = 4242;
    const char *path = test_path("model.mote");
    mote_store *s = test_open(path, NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    mote_entity *e = open_docs(t, MDIM, MOTE_DIST_EUCLIDEAN, 6);
    OK(mote_commit(t));
    long self = 0, tries = 0, commits = 0;
    int rounds = 160 * test_scale();
    for (int round = 0; round < rounds; round++) {
        before = m;
        OK(mote_begin(s, 0, &t));
        random_txn(t, e, &m, &rs);
        if (test_rand(&rs) % 4 == 0) /* read own writes through the index */
            model_queries(t, e, &m, &rs, &self, &tries);
        if (test_rand(&rs) % 5 == 0) {
            mote_abort(t);
            m = before;
        } else {
            OK(mote_commit(t));
            commits++;
        }
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        model_queries(t, e, &m, &rs, &self, &tries);
        mote_abort(t);
        if (round % 16 == 15)
            check_clean(s);
        if (round % 40 == 39) { /* the index from the store, after a reopen */
            OK(mote_close(s));
            s = test_open(path, NULL);
            OK(mote_begin(s, 0, &t));
            e = open_docs(t, MDIM, MOTE_DIST_EUCLIDEAN, 6);
            OK(mote_commit(t));
        }
    }
    check_clean(s);
    printf("%ld commits; a stored vector found its object first %ld of %ld times\n", commits,
           self, tries);
    CHECK(self >= tries * 97 / 100);
    OK(mote_close(s));
}

/* An aborted transaction leaves the index as it was: the same entries, the
 * same answers. */
TEST(hnsw_abort_leaves_no_trace)
{
    const unsigned dim = 8;
    float *data = make_data(600, dim, 0, 51);
    mote_entity *e;
    mote_store *s = docs_store("a.mote", dim, MOTE_DIST_COSINE, data, 400, &e);
    mote_txn *t;
    uint32_t tree;
    uint64_t before, after, ids0[10], ids1[10];
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    tree = doc_index_tree(t, 1);
    OK(mote_kv_count(t, tree, NULL, 0, NULL, 0, &before));
    CHECK(nearest(t, e, data, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, 0, ids0, NULL) == 10);
    mote_abort(t);
    CHECK(before == 401); /* 400 nodes and the state */
    OK(mote_begin(s, 0, &t));
    put_range(t, e, 401, 200, data + 400 * dim, dim);
    for (uint64_t id = 1; id <= 100; id++)
        OK(mote_remove(t, e, id));
    uint64_t tmp[10];
    CHECK(nearest(t, e, data, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, 0, tmp, NULL) == 10);
    mote_abort(t);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_count(t, tree, NULL, 0, NULL, 0, &after));
    CHECK(nearest(t, e, data, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, 0, ids1, NULL) == 10);
    mote_abort(t);
    CHECK(after == before && !memcmp(ids0, ids1, sizeof ids0));
    check_clean(s);
    OK(mote_close(s));
    free(data);
}

/* An index declared on an entity with objects is built from them; new
 * parameters build it again; without the flag it is dropped, and with the
 * property. */
TEST(hnsw_schema_changes)
{
    const unsigned dim = 12;
    float *data = make_data(500, dim, 5, 61);
    mote_store *s = test_open(test_path("s.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    mote_prop_def plain[2] = {hprops(dim, 0, 0, 0), hprops(dim, 0, 0, 1)};
    plain[1].flags = MOTE_P_NULLABLE;
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Doc", plain, 2, &e));
    put_range(t, e, 1, 500, data, dim);
    OK(mote_commit(t));
    /* a read transaction names the difference */
    mote_prop_def idx[2] = {hprops(dim, MOTE_DIST_EUCLIDEAN, 0, 0),
                            hprops(dim, MOTE_DIST_EUCLIDEAN, 0, 1)};
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_entity_open(t, "Doc", idx, 2, &e), MOTE_SCHEMA);
    CHECK(strstr(mote_errmsg(NULL), "vec gains a vector index"));
    mote_abort(t);
    uint64_t got[10];
    for (int round = 0; round < 3; round++) {
        OK(mote_begin(s, 0, &t));
        if (round == 1)
            idx[1].hnsw.m = 5; /* new parameters: built again */
        if (round == 2)
            idx[1].hnsw.distance = MOTE_DIST_DOT;
        OK(mote_entity_open(t, "Doc", idx, 2, &e));
        OK(mote_commit(t));
        check_clean(s);
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        int metric = round == 2 ? MOTE_DIST_DOT : MOTE_DIST_EUCLIDEAN;
        CHECK(nearest(t, e, data + 33 * dim, dim, 10, metric, MOTE_NEAR_INDEX, 0, got,
                      NULL) == 10);
        CHECK(round == 2 || got[0] == 34);
        const char *plan;
        nearest(t, e, data, dim, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, 0, got, &plan);
        CHECK(!strcmp(plan, "exact nearest, scan")); /* no index for this distance */
        mote_abort(t);
    }
    OK(mote_begin(s, 0, &t)); /* the flag goes: so does the tree */
    OK(mote_entity_open(t, "Doc", plain, 2, &e));
    CHECK(!doc_index_tree(t, 0));
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Doc", idx, 2, &e));
    CHECK(doc_index_tree(t, 1));
    put_range(t, e, 501, 1, data, dim); /* noted, then the property goes in the same txn */
    OK(mote_entity_drop_prop(t, "Doc", "vec"));
    CHECK(!doc_index_tree(t, 0));
    OK(mote_commit(t));
    check_clean(s);
    OK(mote_close(s));
    free(data);
}

/* A vector property (not nullable) added to stored objects: their records
 * predate it and read as 0 bytes, which is no vector, for exact search and
 * for an index built over them, then for objects given a vector later. */
TEST(hnsw_property_added_to_stored_objects)
{
    const unsigned dim = 8;
    float *data = make_data(50, dim, 0, 71);
    mote_store *s = test_open(test_path("a.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    mote_prop_def d[2] = {hprops(dim, 0, 0, 0), hprops(dim, 0, 0, 1)};
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "Doc", d, 1, &e)); /* topic only */
    for (uint64_t id = 1; id <= 30; id++) {
        mote_value v = {0};
        v.v.i = (int64_t)id;
        OK(mote_put(t, e, id, &v, MOTE_PUT_INSERT, NULL));
    }
    OK(mote_commit(t));
    uint64_t got[10];
    for (int indexed = 0; indexed < 2; indexed++) {
        d[1].flags = indexed ? MOTE_P_HNSW : 0;
        OK(mote_begin(s, 0, &t));
        OK(mote_entity_open(t, "Doc", d, 2, &e));
        CHECK(nearest(t, e, data, dim, 5, MOTE_DIST_COSINE, MOTE_NEAR_EXACT, 0, got, NULL) ==
              (size_t)(indexed ? 2 : 0));
        if (!indexed)
            put_range(t, e, 31, 2, data, dim);
        OK(mote_commit(t));
        check_clean(s);
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        for (int how = MOTE_NEAR_EXACT; how <= indexed + 1; how++) {
            CHECK(nearest(t, e, data, dim, 5, MOTE_DIST_COSINE, how, 0, got, NULL) == 2);
            CHECK(got[0] == 31 && got[1] == 32);
        }
        mote_abort(t);
    }
    OK(mote_close(s));
    free(data);
}

TEST(hnsw_errors)
{
    mote_store *s = test_open(test_path("e.mote"), NULL);
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, 0, &t));
    mote_prop_def bad = {"n", MOTE_T_INT32, MOTE_P_HNSW, 0, NULL, NULL, {0}, NULL};
    CHECK_RC(mote_entity_open(t, "B", &bad, 1, &e), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "for vector properties"));
    mote_prop_def v = hprops(4, 0, 0, 1);
    v.hnsw.m = 1;
    CHECK_RC(mote_entity_open(t, "B", &v, 1, &e), MOTE_INVALID);
    v.hnsw.m = 101;
    CHECK_RC(mote_entity_open(t, "B", &v, 1, &e), MOTE_INVALID);
    v.hnsw.m = 8;
    v.hnsw.ef_construction = 4;
    CHECK_RC(mote_entity_open(t, "B", &v, 1, &e), MOTE_INVALID);
    v.hnsw.ef_construction = 0;
    v.hnsw.distance = 9;
    CHECK_RC(mote_entity_open(t, "B", &v, 1, &e), MOTE_INVALID);
    v.hnsw.distance = 0;
    v.flags = MOTE_P_NULLABLE; /* parameters without the flag */
    v.hnsw.m = 8;
    CHECK_RC(mote_entity_open(t, "B", &v, 1, &e), MOTE_INVALID);
    e = open_docs(t, 4, 0, 0);
    float x[4] = {1, 2, NAN, 4};
    mote_value vals[2] = {{0}};
    vals[P_VEC] = vec_value(x, 4);
    CHECK_RC(mote_put(t, e, 1, vals, MOTE_PUT_INSERT, NULL), MOTE_RANGE);
    CHECK(strstr(mote_errmsg(NULL), "component 2 of the vector is NaN"));
    x[2] = INFINITY;
    CHECK_RC(mote_put(t, e, 1, vals, MOTE_PUT_INSERT, NULL), MOTE_RANGE);
    x[2] = 3;
    vals[P_VEC].v.s.n = 12;
    CHECK_RC(mote_put(t, e, 1, vals, MOTE_PUT_INSERT, NULL), MOTE_TYPE);
    mote_abort(t);
    /* an index declared over a stored NaN: the commit fails, nothing written */
    OK(mote_begin(s, 0, &t));
    mote_prop_def plain[2] = {hprops(4, 0, 0, 0), hprops(4, 0, 0, 1)};
    plain[1].flags = MOTE_P_NULLABLE;
    OK(mote_entity_open(t, "C", plain, 2, &e));
    x[2] = NAN;
    vals[P_VEC] = vec_value(x, 4);
    OK(mote_put(t, e, 1, vals, MOTE_PUT_INSERT, NULL));
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    mote_prop_def idx[2] = {hprops(4, 0, 0, 0), hprops(4, 0, 0, 1)};
    OK(mote_entity_open(t, "C", idx, 2, &e));
    CHECK_RC(mote_commit(t), MOTE_RANGE);
    CHECK(strstr(mote_errmsg(NULL), "NaN or infinity cannot be indexed"));
    mote_query *q;
    OK(mote_query_new(e, &q));
    CHECK_RC(mote_query_search(q, 3, 0), MOTE_INVALID);
    CHECK_RC(mote_query_search(q, MOTE_NEAR_INDEX, 100001), MOTE_INVALID);
    mote_query_free(q);
    check_clean(s);
    OK(mote_close(s));
}

/* ---- readers while a writer changes the index ------------------------------------ */

typedef struct rdr {
    mote_store *s;
    mote_entity *e;
    volatile int *stop;
    long queries;
} rdr;

static void *reader_main(void *arg)
{
    rdr *r = arg;
    uint64_t rs = (uint64_t)(uintptr_t)arg | 1;
    while (!*r->stop) {
        mote_txn *t;
        OK(mote_begin(r->s, MOTE_TXN_RDONLY, &t));
        uint64_t count, got[10];
        OK(mote_count(t, r->e, &count));
        float q[MDIM];
        random_vec(&rs, q);
        size_t n = nearest(t, r->e, q, MDIM, 10, MOTE_DIST_COSINE, MOTE_NEAR_INDEX, 0, got, NULL);
        CHECK(n == (count < 10 ? count : 10));
        for (size_t i = 0; i < n; i++) /* every result is in this snapshot */
            OK(mote_get(t, r->e, got[i], NULL));
        mote_abort(t);
        r->queries++;
    }
    return NULL;
}

TEST(hnsw_threads)
{
    mote_options o = {MOTE_CREATE | MOTE_NOSYNC, 0, 0, NULL};
    mote_store *s;
    OK(mote_open(test_path("th.mote"), &o, &s));
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    mote_entity *e = open_docs(t, MDIM, MOTE_DIST_COSINE, 8);
    OK(mote_commit(t));
    volatile int stop = 0;
    rdr r[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        r[i] = (rdr){s, e, &stop, 0};
        CHECK(pthread_create(&th[i], NULL, reader_main, &r[i]) == 0);
    }
    uint64_t rs = 77, next = 1;
    for (int round = 0; round < 300; round++) {
        OK(mote_begin(s, 0, &t));
        for (int j = 0; j < 10; j++) {
            float v[MDIM];
            random_vec(&rs, v);
            mote_value vals[2] = {{0}};
            vals[P_VEC] = vec_value(v, MDIM);
            OK(mote_put(t, e, next++, vals, MOTE_PUT_INSERT, NULL));
        }
        for (int j = 0; j < 3; j++) { /* and some go */
            uint64_t id = 1 + test_rand(&rs) % next;
            int rc = mote_remove(t, e, id);
            CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
        }
        OK(mote_commit(t));
    }
    stop = 1;
    long total = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        total += r[i].queries;
    }
    printf("%ld reader queries during 300 commits\n", total);
    CHECK(total > 0);
    check_clean(s);
    OK(mote_close(s));
}
