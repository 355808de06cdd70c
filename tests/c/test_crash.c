/*
 * test_crash.c — crash simulation. A workload runs on the in-memory shim
 * and "crashes" at op k (every op from k on fails and does nothing). From
 * the durable image plus any subset of the unsynced sectors (sometimes
 * garbage) we build the disk after the crash, reopen it and require: the
 * store holds the last acknowledged commit or the one in flight, never
 * anything else, and mote_check finds it consistent. Then a further commit
 * on the recovered store must work.
 */
#include "memio.h"
#include "workload.h"

static long points;

/* Run wl with a crash at op k; check every post-crash image variant. */
static void crash_at(wl *w, long k, int images, uint64_t seed)
{
    memio m;
    memio_init(&m);
    m.crash_at = k;
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s = NULL;
    int acked = 0, inflight = 0, opened = mote_open("/c/s.mote", &o, &s) == MOTE_OK;
    if (opened) {
        acked = wl_run(w, s, 0, &inflight);
        mote_close(s);
    }
    for (int i = 0; i < images; i++) {
        size_t len = 0;
        if (!memio_get(&m, "/c/s.mote", &len))
            break; /* crashed before the file existed */
        uint8_t *img = memio_crash_image(&m, "/c/s.mote", seed + (uint64_t)i * 7919,
                                         i % 3 == 2, &len);
        memio r;
        memio_init(&r);
        memio_set(&r, "/c/s.mote", img, len);
        free(img);
        mote_options ro = {0, 0, 0, &r.io};
        mote_store *rs = NULL;
        int rc = mote_open("/c/s.mote", &ro, &rs);
        points++;
        if (!opened && rc != MOTE_OK) { /* creation never finished */
            CHECK(rc == MOTE_FORMAT || rc == MOTE_CORRUPT);
            memio_free(&r);
            continue;
        }
        if (rc) {
            fprintf(stderr, "crash at op %ld image %d: open failed: %s\n", k, i,
                    mote_last_open_error());
            abort();
        }
        int ok_acked = wl_matches(rs, &w->states[acked]);
        int ok_flight = inflight && acked < w->ncommits &&
                        wl_matches(rs, &w->states[acked + 1]);
        if (!ok_acked && !ok_flight) {
            fprintf(stderr, "crash at op %ld image %d: state is neither commit %d "
                    "nor %d\n", k, i, acked, acked + 1);
            abort();
        }
        OK(mote_check(rs, NULL, NULL));
        /* the recovered store accepts a new commit */
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(rs, 0, &t));
        OK(mote_kv_tree(t, "after", MOTE_TREE_CREATE, &tr));
        OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
        OK(mote_commit(t));
        OK(mote_check(rs, NULL, NULL));
        OK(mote_close(rs));
        memio_free(&r);
    }
    memio_free(&m);
}

static long count_ops(wl *w)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    OK(mote_open("/c/s.mote", &o, &s));
    int inflight;
    CHECK(wl_run(w, s, 0, &inflight) == w->ncommits);
    OK(mote_close(s));
    long n = m.ops;
    memio_free(&m);
    return n;
}

TEST(crash_exhaustive_small_commits)
{
    /* every crash point of a short workload, several images each */
    for (uint64_t seed = 1; seed <= 6; seed++) {
        wl w;
        wl_init(&w, seed, 8, 4, seed % 2 == 0);
        long n = count_ops(&w);
        for (long k = 1; k <= n + 1; k++)
            crash_at(&w, k, 6, seed * 1000003 + (uint64_t)k);
        wl_free(&w);
    }
    printf("%ld crash images checked\n", points);
}

TEST(crash_randomized)
{
    /* larger commits (splits, overflow chains, page reuse) at random points */
    uint64_t rs = 77;
    long target = 10000L * test_scale();
    while (points < target) {
        wl w;
        uint64_t seed = test_rand(&rs);
        if (points % 2)
            wl_init(&w, seed, 12, 40, 1);
        else /* deeper trees: splits, merges, page reuse */
            wl_init_keys(&w, seed, 10, 300, 1, 1500);
        long n = count_ops(&w);
        for (int j = 0; j < 40; j++) {
            long k = 1 + (long)(test_rand(&rs) % (uint64_t)(n + 1));
            crash_at(&w, k, 8, test_rand(&rs));
        }
        wl_free(&w);
    }
    printf("%ld crash images checked\n", points);
}

/* Crash at every op of a close that shrinks the file (relocating pages,
 * committing the smaller size, truncating): the contents never change. */
TEST(crash_during_shrink)
{
    static uint8_t v[200];
    long n_ops = 0;
    for (long k = 0;; k++) {
        memio m;
        memio_init(&m);
        mote_options o = {MOTE_CREATE, 0, 0, &m.io};
        mote_store *s;
        OK(mote_open("/c/s.mote", &o, &s));
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
        for (uint32_t i = 0; i < 20000; i++) {
            memset(v, (int)i, sizeof v);
            OK(mote_kv_put(t, tr, &i, 4, v, sizeof v, 0));
        }
        OK(mote_commit(t));
        OK(mote_begin(s, 0, &t));
        for (uint32_t i = 0; i < 20000; i++)
            if (i % 400)
                OK(mote_kv_del(t, tr, &i, 4));
        OK(mote_commit(t));
        long base = m.ops;
        if (k > 0)
            m.crash_at = base + k;
        OK(mote_close(s));
        if (k == 0) {
            n_ops = m.ops - base;
            CHECK(n_ops >= 4); /* relocate, commit (write, slot, sync), truncate */
            memio_free(&m);
            continue;
        }
        for (int img_i = 0; img_i < 4; img_i++) {
            size_t len;
            uint8_t *img = memio_crash_image(&m, "/c/s.mote", (uint64_t)(k * 31 + img_i),
                                             img_i == 3, &len);
            memio r;
            memio_init(&r);
            memio_set(&r, "/c/s.mote", img, len);
            free(img);
            mote_options ro = {0, 0, 0, &r.io};
            OK(mote_open("/c/s.mote", &ro, &s));
            OK(mote_check(s, NULL, NULL));
            OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
            uint64_t cnt;
            OK(mote_kv_count(t, tr, NULL, 0, NULL, 0, &cnt));
            CHECK(cnt == 50);
            for (uint32_t i = 0; i < 20000; i += 400) {
                mote_val val;
                OK(mote_kv_get(t, tr, &i, 4, &val));
                CHECK(val.size == sizeof v && ((const uint8_t *)val.data)[7] == (uint8_t)i);
            }
            mote_abort(t);
            OK(mote_close(s));
            memio_free(&r);
        }
        memio_free(&m);
        if (k > n_ops)
            break;
    }
    printf("%ld crash points in a shrinking close\n", n_ops + 1);
}
