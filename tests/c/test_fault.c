/*
 * test_fault.c — fault injection. For every call N of a workload, the N-th
 * file operation fails (EIO, ENOSPC, or a short write), or the N-th memory
 * allocation fails. Each API call must return a clean error code (for a
 * file operation, with the errno it failed with and the file, from
 * mote_last_oserror); after reopening without faults the store holds the
 * last acknowledged commit or the one in flight, and passes mote_check.
 */
#include <errno.h>

#include "kv.h"
#include "memio.h"
#include "workload.h"

static uint8_t *base_img;
static size_t base_len;

/* A store holding the workload's first 3 commits, as a durable image. */
static void make_base(wl *w)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    OK(mote_open("/f/s.mote", &o, &s));
    wl big = *w;
    big.ncommits = 3;
    int inflight;
    CHECK(wl_run(&big, s, 0, &inflight) == 3);
    OK(mote_close(s));
    const uint8_t *img = memio_get(&m, "/f/s.mote", &base_len);
    base_img = malloc(base_len);
    memcpy(base_img, img, base_len);
    memio_free(&m);
}

/* The store holds commit acked, or one of those after it up to `tried`. */
static void verify_between(memio *m, wl *w, int acked, int tried, const char *what, long n)
{
    m->fail_at = 0;
    m->crashed = 0;
    mote_options o = {0, 0, 0, &m->io};
    mote_store *s;
    int rc = mote_open("/f/s.mote", &o, &s);
    if (rc) {
        fprintf(stderr, "%s at %ld: reopen failed: %s\n", what, n, mote_last_open_error());
        abort();
    }
    int ok = 0;
    for (int c = acked; c <= tried && c <= w->ncommits && !ok; c++)
        ok = wl_matches(s, &w->states[c]);
    if (!ok) {
        fprintf(stderr, "%s at %ld: state is none of commits %d to %d\n", what, n, acked,
                tried);
        abort();
    }
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

static void verify_after(memio *m, wl *w, int acked, int inflight, const char *what, long n)
{
    verify_between(m, w, acked, acked + inflight, what, n);
}

/* Run open + commits 3.. (in groups of `group`: GROUP COMMIT; 0: one by
 * one) + close with the n-th op failing. Returns 0 once n is past the end
 * of the workload. */
static int run_io_fault(wl *w, long n, int err, int shortw, int group)
{
    memio m;
    memio_init(&m);
    memio_set(&m, "/f/s.mote", base_img, base_len);
    m.fail_at = n;
    m.fail_errno = err;
    m.fail_short = shortw;
    mote_options o = {0, 0, 0, &m.io};
    mote_store *s;
    int acked = 3, inflight = 0, tried = 3;
    const char *file;
    int rc = mote_open("/f/s.mote", &o, &s);
    if (rc) {
        CHECK(rc == MOTE_IO || rc == MOTE_NOSPACE);
        CHECK(mote_last_oserror(&file) == err && !strcmp(file, "/f/s.mote"));
    } else {
        if (group) {
            acked = wl_run_grouped(w, s, 3, group, &tried);
        } else {
            acked = wl_run(w, s, 3, &inflight);
            tried = acked + inflight;
        }
        rc = w->last_rc;
        if (acked < w->ncommits)
            CHECK(rc == MOTE_IO || rc == MOTE_NOSPACE || rc == MOTE_POISONED);
        if (err == ENOSPC && rc && rc != MOTE_POISONED)
            CHECK(rc == MOTE_NOSPACE);
        /* the errno survives the poisoning of the commit whose write or
         * sync failed (a short write counts as EIO, the errno injected) */
        if (rc)
            CHECK(mote_last_oserror(&file) == err && !strcmp(file, "/f/s.mote"));
        OK(mote_close(s));
    }
    int more = m.ops >= n;
    verify_between(&m, w, acked, tried, shortw ? "short write" : err == EIO ? "EIO" : "ENOSPC",
                   n);
    memio_free(&m);
    return more;
}

TEST(fault_io_every_call)
{
    for (uint64_t seed = 11; seed <= 13; seed++) {
        wl w;
        if (seed == 13)
            wl_init_keys(&w, seed, 6, 400, 1, 1200);
        else
            wl_init(&w, seed, 7, 30, 1);
        make_base(&w);
        long cases = 0;
        /* the last seed's commits also in groups: a failed sync for several */
        for (int mode = 0; mode < (seed == 12 ? 6 : 3); mode++)
            for (long n = 1; run_io_fault(&w, n, mode % 3 == 1 ? ENOSPC : EIO, mode % 3 == 2,
                                          mode < 3 ? 0 : 3);
                 n++)
                cases++;
        printf("seed %llu: %ld fault cases\n", (unsigned long long)seed, cases);
        free(base_img);
        wl_free(&w);
    }
}

static long alloc_n, alloc_fail_at;

static int fail_nth(size_t sz)
{
    (void)sz;
    return ++alloc_n == alloc_fail_at;
}

TEST(fault_malloc_every_call)
{
    wl w;
    wl_init_keys(&w, 21, 6, 200, 1, 600);
    make_base(&w);
    long n;
    for (n = 1;; n++) {
        memio m;
        memio_init(&m);
        memio_set(&m, "/f/s.mote", base_img, base_len);
        alloc_n = 0;
        alloc_fail_at = n;
        mote__alloc_hook = fail_nth;
        mote_options o = {0, 0, 0, &m.io};
        mote_store *s;
        int acked = 3, inflight = 0;
        int rc = mote_open("/f/s.mote", &o, &s);
        if (rc) {
            CHECK(rc == MOTE_NOMEM);
        } else {
            acked = wl_run(&w, s, 3, &inflight);
            if (acked < w.ncommits)
                CHECK(w.last_rc == MOTE_NOMEM);
            OK(mote_close(s));
        }
        mote__alloc_hook = NULL;
        int more = alloc_n >= n;
        verify_after(&m, &w, acked, inflight, "malloc failure", n);
        memio_free(&m);
        if (!more)
            break;
    }
    printf("%ld allocation failure cases\n", n);
    free(base_img);
    wl_free(&w);
}

/* Object puts in one transaction (their index entries deferred to the
 * commit), with the n-th allocation failing: every call returns OK or
 * MOTE_NOMEM; the store then holds all the puts acknowledged before the
 * commit, or none if the commit failed, with indexes that agree. */
TEST(fault_malloc_object_puts)
{
    static const mote_prop_def props[] = {
        {"level", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
        {"text", MOTE_T_STRING, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    };
    enum { NPUT = 300 };
    long n;
    for (n = 1;; n++) {
        memio m;
        memio_init(&m);
        mote_options o = {MOTE_CREATE, 0, 0, &m.io};
        mote_store *s;
        mote_txn *t;
        mote_entity *e;
        OK(mote_open("/f/o.mote", &o, &s));
        OK(mote_begin(s, 0, &t));
        OK(mote_entity_open(t, "E", props, 2, &e));
        OK(mote_commit(t));
        alloc_n = 0;
        alloc_fail_at = n;
        mote__alloc_hook = fail_nth;
        int rc = mote_begin(s, 0, &t), acked = 0;
        for (int i = 0; !rc && i < NPUT; i++) {
            char text[32];
            int len = snprintf(text, sizeof text, "item %d", (i * 37) % NPUT);
            mote_value v[2] = {{0}};
            v[0].v.i = i % 7;
            v[1].v.s.p = text;
            v[1].v.s.n = (size_t)len;
            rc = mote_put(t, e, 0, v, 0, NULL);
            acked += rc == MOTE_OK;
        }
        int committed = 0;
        if (t) {
            int crc = mote_commit(t);
            committed = crc == MOTE_OK;
            CHECK(crc == MOTE_OK || crc == MOTE_NOMEM);
        }
        CHECK(rc == MOTE_OK || rc == MOTE_NOMEM);
        mote__alloc_hook = NULL;
        int more = alloc_n >= n;
        uint64_t count;
        OK(mote_count(NULL, e, &count));
        CHECK(count == (uint64_t)(committed ? acked : 0));
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
        memio_free(&m);
        if (!more)
            break;
    }
    printf("%ld allocation failure cases\n", n);
}

/* ---- vector indexes --------------------------------------------------------------- */

enum { VDIM = 4, VBASE = 60 };

static const mote_prop_def vfprops[] = {
    {"vec", MOTE_T_VECTOR, MOTE_P_NULLABLE | MOTE_P_HNSW, VDIM, NULL, NULL, {0, 4, 8}, NULL},
};

/* The k = 10 nearest of (1, 1, 1, 1) through the index: MOTE_OK with
 * min(10, objects) results, or the error. */
static int v_search(mote_store *s, mote_entity *e)
{
    mote_txn *t;
    mote_query *q = NULL;
    float at[VDIM] = {1, 1, 1, 1};
    uint64_t *ids = NULL, count = 0;
    size_t n = 0;
    int rc = mote_begin(s, MOTE_TXN_RDONLY, &t);
    if (rc)
        return rc;
    if (!(rc = mote_count(t, e, &count)) && !(rc = mote_query_new(e, &q)) &&
        !(rc = mote_query_nearest(q, 0, at, VDIM, 10, MOTE_DIST_COSINE)) &&
        !(rc = mote_query_search(q, MOTE_NEAR_INDEX, 0)) && !(rc = mote_query_ids(t, q, &ids, &n)))
        CHECK(n == (count < 10 ? count : 10));
    mote_free(ids);
    mote_query_free(q);
    mote_abort(t);
    return rc;
}

static void v_put(mote_txn *t, mote_entity *e, uint64_t id, int *rc)
{
    float v[VDIM] = {(float)(id % 5), (float)(id % 3), (float)(id % 7), 1};
    mote_value x = {0};
    x.v.s.p = v;
    x.v.s.n = sizeof v;
    if (!*rc)
        *rc = mote_put(t, e, id, &x, MOTE_PUT_UPSERT, NULL);
}

/*
 * A vector index with the n-th allocation failing, in every step: loading
 * the index into memory (a search), a transaction that inserts, changes and
 * removes vectors (the changes applied at the commit), the image brought up
 * to date, a search again. Every call returns OK or MOTE_NOMEM; afterwards
 * the store holds the commit or not, mote check finds the index sound, and
 * searches through it work.
 */
TEST(fault_malloc_vector_index)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    mote_txn *t;
    mote_entity *e;
    OK(mote_open("/f/v.mote", &o, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_entity_open(t, "V", vfprops, 1, &e));
    int rc = MOTE_OK;
    for (uint64_t id = 1; id <= VBASE; id++)
        v_put(t, e, id, &rc);
    OK(rc);
    OK(mote_commit(t));
    OK(mote_close(s));
    size_t len;
    const uint8_t *img = memio_get(&m, "/f/v.mote", &len);
    uint8_t *base = malloc(len);
    memcpy(base, img, len);
    memio_free(&m);
    long n;
    for (n = 1;; n++) {
        memio_init(&m);
        memio_set(&m, "/f/v.mote", base, len);
        o.flags = 0;
        OK(mote_open("/f/v.mote", &o, &s));
        OK(mote_begin(s, 0, &t));
        OK(mote_entity_open(t, "V", vfprops, 1, &e));
        OK(mote_commit(t));
        alloc_n = 0;
        alloc_fail_at = n;
        mote__alloc_hook = fail_nth;
        rc = v_search(s, e);
        CHECK(rc == MOTE_OK || rc == MOTE_NOMEM);
        int committed = 0, acked = 0; /* objects added minus removed */
        if (!(rc = mote_begin(s, 0, &t))) {
            for (uint64_t id = VBASE + 1; id <= VBASE + 10; id++) { /* new */
                v_put(t, e, id, &rc);
                acked += !rc;
            }
            for (uint64_t id = 2; id <= 20; id += 6) /* changed */
                v_put(t, e, id * 7919 % VBASE + 1, &rc);
            for (uint64_t id = 5; !rc && id <= 50; id += 15) /* removed */
                acked -= !(rc = mote_remove(t, e, id));
            int crc = mote_commit(t);
            CHECK(crc == MOTE_OK || crc == MOTE_NOMEM);
            committed = crc == MOTE_OK;
            CHECK(rc == MOTE_OK || rc == MOTE_NOMEM);
        }
        rc = v_search(s, e);
        CHECK(rc == MOTE_OK || rc == MOTE_NOMEM);
        mote__alloc_hook = NULL;
        int more = alloc_n >= n;
        uint64_t count;
        OK(mote_count(NULL, e, &count));
        CHECK(count == (uint64_t)(VBASE + (committed ? acked : 0)));
        OK(mote_check(s, NULL, NULL));
        OK(v_search(s, e));
        OK(mote_close(s));
        memio_free(&m);
        if (!more)
            break;
    }
    printf("%ld allocation failure cases\n", n);
    free(base);
}

/* A full-text index (text.c) under every allocation failure of a batch of
 * changes, its write and a search: the transaction fails with MOTE_NOMEM
 * (and is aborted) or commits, and the index is whole either way. */
#include "text.h"

static const char *const ft_texts[] = {
    "the quick brown fox", "jumps over the lazy dog", "Élan vital and café crème",
    "中文分词 and the fox", "error timeout in the connection pool", "a b c d e f g the",
};
#define FT_N (sizeof ft_texts / sizeof *ft_texts)

TEST(fault_malloc_text_index)
{
    const char *path = test_path("ft.mote");
    mote_store *s;
    mote_txn *t;
    uint32_t tree;
    text_batch b = {0};
    OK(mote_open(path, NULL, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "ft", MOTE_TREE_CREATE, &tree));
    for (uint64_t id = 1; id <= 60; id++)
        OK(mote__text_note(&b, id, ft_texts[id % FT_N], strlen(ft_texts[id % FT_N]), 1));
    OK(mote__text_apply(t, tree, &b));
    OK(mote_commit(t));
    uint64_t docs = 60;
    long n;
    for (n = 1;; n++) {
        alloc_n = 0;
        alloc_fail_at = n;
        mote__alloc_hook = fail_nth;
        int rc = mote_begin(s, 0, &t);
        if (!rc) {
            /* documents 61.. added, 1.. removed, 30.. changed */
            for (uint64_t i = 0; !rc && i < 8; i++) {
                const char *x = ft_texts[(i + 1) % FT_N], *y = ft_texts[(30 + i) % FT_N];
                if (!(rc = mote__text_note(&b, 61 + i + docs, x, strlen(x), 1)))
                    rc = mote__text_note(&b, 1 + i, ft_texts[(1 + i) % FT_N],
                                         strlen(ft_texts[(1 + i) % FT_N]), 0);
                if (!rc && !(rc = mote__text_note(&b, 30 + i, y, strlen(y), 0)))
                    rc = mote__text_note(&b, 30 + i, x, strlen(x), 1);
            }
            if (!rc)
                rc = mote__text_apply(t, tree, &b);
            uint64_t *ids = NULL;
            double *sc = NULL;
            size_t got;
            if (!rc)
                rc = mote__text_search(t, tree, "the fox", 7, 0, 0, &ids, &sc, &got);
            mote_free(ids);
            mote_free(sc);
            ids = NULL, sc = NULL;
            static const char lang[] = "(\"the fox\" OR qu* OR err*) NOT lazy";
            if (!rc)
                rc = mote__text_search(t, tree, lang, sizeof lang - 1, 0, 0, &ids, &sc, &got);
            mote_free(ids);
            mote_free(sc);
            CHECK(rc == MOTE_OK || rc == MOTE_NOMEM);
            mote__text_batch_clear(&b); /* what a failed transaction does */
            if (rc)
                mote_abort(t);
            else if ((rc = mote_commit(t)))
                CHECK(rc == MOTE_NOMEM);
        }
        mote__alloc_hook = NULL;
        int more = alloc_n >= n;
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        text_stat st;
        OK(mote__text_verify(t, tree, &st, NULL, NULL));
        mote_abort(t);
        if (!rc)
            break; /* the first run that failed nothing: committed */
        CHECK(st.docs == docs && more);
    }
    CHECK(n > 20); /* so many allocations were failed, each once */
    printf("%ld allocation failures\n", n - 1);
    mote__text_batch_free(&b);
    OK(mote_close(s));
}
