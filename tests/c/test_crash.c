/*
 * test_crash.c — crash simulation. A workload runs on the in-memory shim
 * and "crashes" at op k (every op from k on fails and does nothing). From
 * the durable image plus any subset of the unsynced sectors (sometimes
 * garbage) we build the disk after the crash, reopen it and require: the
 * store holds the last acknowledged commit or the one in flight, never
 * anything else, and mote_check finds it consistent. Then a further commit
 * on the recovered store must work.
 */
#include "kv.h"
#include "memio.h"
#include "pager.h"
#include "workload.h"

static long points;

/* Run wl with a crash at op k (its commits in groups of `group`, GROUP
 * COMMIT; 0: one by one); check every post-crash image variant. */
static void crash_group_at(wl *w, int group, long k, int images, uint64_t seed)
{
    memio m;
    memio_init(&m);
    m.crash_at = k;
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s = NULL;
    int acked = 0, inflight = 0, opened = mote_open("/c/s.mote", &o, &s) == MOTE_OK;
    int tried = 0; /* commits begun: any of them may be there after the crash */
    if (opened && group) {
        acked = wl_run_grouped(w, s, 0, group, &tried);
        mote_close(s);
    } else if (opened) {
        acked = wl_run(w, s, 0, &inflight);
        tried = acked + inflight;
        mote_close(s);
    }
    for (int i = 0; i < images; i++) {
        size_t len = 0;
        if (!memio_get(&m, "/c/s.mote", &len))
            break; /* crashed before the file existed */
        /* (groups: some images keep or lose each write whole, so that one
         * commit's pages are lost while a later one's record is there) */
        unsigned how = (i % 3 == 2 ? MEMIO_HOSTILE : 0) | (group ? MEMIO_WHOLE : 0);
        uint8_t *img = memio_crash_image(&m, "/c/s.mote", seed + (uint64_t)i * 7919, how, &len);
        memio r;
        memio_init(&r);
        memio_set(&r, "/c/s.mote", img, len);
        free(img);
        mote_options ro = {0, 0, 0, &r.io};
        mote_store *rs = NULL;
        int rc = mote_open("/c/s.mote", &ro, &rs);
        points++;
        /* creation never finished, or the first commit (which makes creation
         * durable) was torn: nothing was acknowledged, the store may be refused */
        if ((!opened || acked == 0) && rc != MOTE_OK) {
            CHECK(rc == MOTE_FORMAT || rc == MOTE_CORRUPT);
            memio_free(&r);
            continue;
        }
        if (rc) {
            fprintf(stderr, "crash at op %ld image %d: open failed: %s\n", k, i,
                    mote_last_open_error());
            abort();
        }
        int ok = 0;
        for (int c = acked; c <= tried && c <= w->ncommits && !ok; c++)
            ok = wl_matches(rs, &w->states[c]);
        if (!ok) {
            fprintf(stderr, "crash at op %ld image %d: state is none of commits %d to %d\n",
                    k, i, acked, tried);
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

static void crash_at(wl *w, long k, int images, uint64_t seed)
{
    crash_group_at(w, 0, k, images, seed);
}

static long count_group_ops(wl *w, int group, long *syncs)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    OK(mote_open("/c/s.mote", &o, &s));
    int inflight;
    CHECK((group ? wl_run_grouped(w, s, 0, group, &inflight) : wl_run(w, s, 0, &inflight)) ==
          w->ncommits);
    OK(mote_close(s));
    long n = m.ops;
    if (syncs)
        *syncs = m.syncs;
    memio_free(&m);
    return n;
}

static long count_ops(wl *w) { return count_group_ops(w, 0, NULL); }

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

TEST(crash_exhaustive_chain)
{
    /* every crash point of small commits into a filled store: commit
     * records and checkpoints (pager.h COMMIT CHAIN), several images each */
    long before = points;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        wl w;
        wl_init_filled(&w, seed, 14, 2, 2000);
        long n = count_ops(&w);
        for (long k = 1; k <= n + 1; k++)
            crash_at(&w, k, 6, seed * 7777 + (uint64_t)k);
        wl_free(&w);
    }
    printf("%ld crash images checked\n", points - before);
}

TEST(crash_group_commit)
{
    /* every crash point of small commits written in groups, one sync for
     * each group (pager.h GROUP COMMIT): records on bases not yet durable,
     * their lag, checkpoints that sync such a base first; after a crash,
     * any commit of the group may be there or not, in order, but the store
     * is never damaged and every acknowledged one is there */
    long before = points;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        wl w; /* groups longer than the chain between checkpoints, too */
        wl_init_filled(&w, seed, 16, 2, seed % 2 ? 1500 : seed == 4 ? 60 : 300);
        int group = seed == 4 ? 7 : 1 + (int)seed;
        long syncs = 0, n = count_group_ops(&w, group, &syncs);
        CHECK(syncs < w.ncommits); /* groups share syncs */
        for (long k = 1; k <= n + 1; k++)
            crash_group_at(&w, group, k, 6, seed * 5557 + (uint64_t)k);
        wl_free(&w);
    }
    printf("%ld crash images checked\n", points - before);
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

TEST(crash_placed_commits)
{
    /* small commits into a full store of ~90 pages: their pages are
     * renumbered into runs, at times at the end of the file (pager.c
     * place_pages); crash points anywhere in them */
    uint64_t rs = 4242;
    long before = points, target = points + 1500L * test_scale();
    while (points < target) {
        wl w;
        wl_init_filled(&w, test_rand(&rs), 40, 4, 2000);
        long n = count_ops(&w);
        for (int j = 0; j < 25; j++) {
            long k = 1 + (long)(test_rand(&rs) % (uint64_t)(n + 1));
            crash_at(&w, k, 6, test_rand(&rs));
        }
        wl_free(&w);
    }
    printf("%ld crash images checked\n", points - before);
}

/* Crash at every op of a close that shrinks the file (relocating pages,
 * committing the smaller size, truncating): the contents never change. */
/* Open an image of /c/s.mote: MOTE_OK with *has = whether tree "t" holds
 * key "k", or the error. */
/* A crash image of m's "/c/s.mote" (seed; hostile: unsynced sectors may hold
 * garbage) put into r and opened, fsck clean: the store (close it, then
 * memio_free(r)). */
static mote_store *open_crashed(memio *m, memio *r, uint64_t seed, int hostile)
{
    size_t len;
    uint8_t *img = memio_crash_image(m, "/c/s.mote", seed, hostile ? MEMIO_HOSTILE : 0, &len);
    memio_init(r);
    memio_set(r, "/c/s.mote", img, len);
    free(img);
    mote_options ro = {0, 0, 0, &r->io};
    mote_store *s;
    OK(mote_open("/c/s.mote", &ro, &s));
    OK(mote_check(s, NULL, NULL));
    return s;
}

static int open_image(const uint8_t *img, size_t len, int *has)
{
    memio r;
    memio_init(&r);
    memio_set(&r, "/c/s.mote", img, len);
    mote_options o = {0, 0, 0, &r.io};
    mote_store *s;
    int rc = mote_open("/c/s.mote", &o, &s);
    *has = 0;
    if (!rc) {
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        *has = mote_kv_tree(t, "t", 0, &tr) == MOTE_OK && mote_kv_get(t, tr, "k", 1, NULL) == MOTE_OK;
        mote_abort(t);
        OK(mote_check(s, NULL, NULL));
        /* it takes a commit (the first of a store that was never committed) */
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "after", MOTE_TREE_CREATE, &tr));
        OK(mote_commit(t));
        OK(mote_close(s));
    }
    memio_free(&r);
    return rc;
}

/* A copy of /c/s.mote as it is now (what a crash right after a sync leaves). */
static uint8_t *image_now(memio *m, size_t *len)
{
    const uint8_t *cur = memio_get(m, "/c/s.mote", len);
    uint8_t *img = malloc(*len);
    memcpy(img, cur, *len);
    return img;
}

/* Creation syncs nothing and the first commit makes it durable, so open must
 * tell a store that was never committed (empty) from a damaged one
 * (pager.h FRESH): both directions. */
TEST(crash_never_damaged_as_empty)
{
    uint64_t rs = 99;
    int has, empty = 0, refused = 0;
    /* 1. never committed: an empty file (creation writes nothing); the
     * creation page (a lazy commit writes it, and stores of larger pages or
     * made before 2026-12-07 have it), any of its sectors lost (zeros), the
     * file cut after any sector: an empty store */
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    OK(mote_open("/c/s.mote", &o, &s));
    OK(mote_close(s));
    size_t len;
    memio_get(&m, "/c/s.mote", &len);
    CHECK(len == 0);
    OK(open_image((const uint8_t *)"", 0, &has));
    CHECK(!has);
    uint8_t created[4096];
    mote__creation_page(created, 4096);
    for (int round = 0; round < 300; round++) {
        uint8_t img[4096];
        memcpy(img, created, 4096);
        uint64_t lost = test_rand(&rs);
        for (int sec = 0; sec < 8; sec++)
            if (lost >> sec & 1)
                memset(img + sec * 512, 0, 512);
        size_t n = round % 2 ? 4096 : 512 * (1 + test_rand(&rs) % 8);
        OK(open_image(img, n, &has));
        CHECK(!has);
        empty++;
    }
    /* ... and with a lazy commit (an entity registered) torn in slot 1 */
    OK(mote_open("/c/s.mote", &o, &s));
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_LAZY, &t));
    OK(mote_kv_tree(t, "lazy", MOTE_TREE_CREATE, &tr));
    OK(mote_commit(t));
    CHECK(m.syncs == 0);
    for (int i = 0; i < 30; i++) {
        uint8_t *img = memio_crash_image(&m, "/c/s.mote", test_rand(&rs),
                                         i % 3 == 2 ? MEMIO_HOSTILE : 0, &len);
        OK(open_image(img, len, &has));
        CHECK(!has);
        free(img);
    }

    /* 2. a store with one durable commit (both slots hold it) */
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
    OK(mote_commit(t));
    CHECK(m.syncs == 1 && m.dirsyncs == 1);
    uint8_t *one = image_now(&m, &len); /* unclean: no marker */
    size_t one_len = len;
    OK(mote_close(s));
    uint8_t *closed = image_now(&m, &len); /* clean: a marker in slot 0 */
    size_t closed_len = len;
    CHECK(one_len >= 8192 && closed_len == one_len);
    OK(open_image(one, one_len, &has));
    CHECK(has);
    /* one slot damaged: the other holds the commit */
    for (int slot = 0; slot < 2; slot++) {
        uint8_t *img = malloc(one_len);
        memcpy(img, one, one_len);
        memset(img + slot * 4096, 0, 4096);
        OK(open_image(img, one_len, &has));
        CHECK(has);
        free(img);
    }
    /* both damaged (zeros, garbage, creation's page put back in slot 0 with
     * slot 1 zeroed is NOT tried: that is a write the disk lost, which looks
     * like a crash before the first commit): refused, never empty; after a
     * clean close, the commit's slot damaged beside the marker (a copy of
     * the state): opened with the data */
    int marker_opens = 0;
    for (int round = 0; round < 400; round++) {
        const uint8_t *base = round % 4 == 3 ? closed : one;
        uint8_t *img = malloc(one_len);
        memcpy(img, base, one_len);
        int first = round % 4 == 3 ? 1 : 0;
        for (int slot = first; slot < 2; slot++) {
            int k = 1 + (int)(test_rand(&rs) % 8); /* sectors damaged */
            for (int j = 0; j < k; j++) {
                uint8_t *sec = img + slot * 4096 + (test_rand(&rs) % 8) * 512;
                if (round % 2)
                    memset(sec, 0, 512);
                else
                    for (int b = 0; b < 512; b++)
                        sec[b] = (uint8_t)test_rand(&rs);
            }
        }
        if (round % 8 == 5) /* whole slots zeroed */
            memset(img, 0, 8192);
        int rc = open_image(img, one_len, &has);
        if (round % 4 == 3) { /* slot 0: the marker, untouched */
            OK(rc);
            CHECK(has);
            marker_opens++;
        } else if (rc == MOTE_OK) {
            CHECK(has); /* the damage missed (zeros over zeros), or the marker did */
        } else {
            refused++;
        }
        free(img);
    }
    printf("never committed: %d images opened empty; damaged: %d of 400 refused, "
           "%d opened by the marker, none opened empty\n", empty, refused, marker_opens);
    CHECK(refused > 250 && marker_opens == 100);
    free(one);
    free(closed);
    memio_free(&m);
}

/* How many of keys 0..n-1 tree "t" of an image holds (-1: refused), the
 * store checked and written once more. */
static int keys_in_image(const uint8_t *img, size_t len, int n)
{
    memio r;
    memio_init(&r);
    memio_set(&r, "/c/s.mote", img, len);
    mote_options o = {0, 0, 0, &r.io};
    mote_store *s;
    int found = -1;
    if (mote_open("/c/s.mote", &o, &s) == MOTE_OK) {
        mote_txn *t;
        uint32_t tr;
        found = 0;
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        for (uint32_t k = 0; k < (uint32_t)n; k++)
            found += mote_kv_get(t, tr, &k, 4, NULL) == MOTE_OK;
        mote_abort(t);
        OK(mote_check(s, NULL, NULL));
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_put(t, tr, "after", 5, "x", 1, 0));
        OK(mote_commit(t));
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
    }
    memio_free(&r);
    return found;
}

/* A store on m (the in-memory shim) holding keys 0..4999 of tree "t"
 * (100-byte values), committed; its tree in *tr. */
static mote_store *filled_store(memio *m, uint32_t *tr)
{
    static uint8_t v[100];
    mote_options o = {MOTE_CREATE, 0, 0, &m->io};
    mote_store *s;
    mote_txn *t;
    memio_init(m);
    OK(mote_open("/c/s.mote", &o, &s));
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, tr));
    for (uint32_t k = 0; k < 5000; k++)
        OK(mote_kv_put(t, *tr, &k, 4, v, sizeof v, 0));
    OK(mote_commit(t));
    return s;
}

/* The commit chain's cases (pager.h COMMIT CHAIN), each on an image left
 * after 5,000 keys and then 10 single-key commits (records, not closed):
 * garbage at the reserved page; a record of another time there (a copy of
 * an earlier one: wrong base); a valid-looking record there with a wrong
 * count; the last record torn, lost, or written without its pages. Every
 * acknowledged commit survives where it can, nothing half applied. */
TEST(crash_chain_cases)
{
    memio m;
    uint32_t tr;
    mote_store *s = filled_store(&m, &tr);
    mote_txn *t;
    static uint8_t v[100];
    for (uint32_t k = 5000; k < 5010; k++) {
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_put(t, tr, &k, 4, v, sizeof v, 0));
        OK(mote_commit(t));
    }
    mote_stat st;
    OK(mote_store_stat(s, &st));
    CHECK(st.chain >= 5); /* the last commits are records */
    size_t len;
    uint8_t *img = image_now(&m, &len); /* unclean: no marker */
    OK(mote_close(s));
    uint8_t *closed = image_now(&m, &len);
    memio_free(&m);
    /* the chain, from the newest checkpoint */
    enum { P = 4096 };
    uint32_t rec[64], nrec = 0;
    const uint8_t *a = img, *b = img + P;
    const uint8_t *st0 = rd64(a + 24) > rd64(b + 24) ? a : b;
    for (uint32_t p = st_chain_next(st0); p && nrec < 64; p = st_chain_next(img + (size_t)p * P)) {
        if (mote__slot_valid(img + (size_t)p * P, P, p) != (int)SLOT_KIND_RECORD)
            break;
        rec[nrec++] = p;
    }
    CHECK(nrec == st.chain);
    uint32_t last = rec[nrec - 1], reserved = st_chain_next(img + (size_t)last * P);
    CHECK(reserved >= 2 && ((size_t)reserved + 1) * P <= len);
    CHECK(keys_in_image(img, len, 5010) == 5010);
    CHECK(keys_in_image(closed, len, 5010) == 5010);
    uint8_t *x = malloc(len);
    uint64_t rs = 5;
    /* garbage at the reserved page, and after a clean close */
    for (int clean = 0; clean < 2; clean++) {
        memcpy(x, clean ? closed : img, len);
        for (int i = 0; i < P; i++)
            x[(size_t)reserved * P + i] = (uint8_t)test_rand(&rs);
        CHECK(keys_in_image(x, len, 5010) == 5010);
    }
    /* an earlier record copied there, its count and txnid those a next one
     * would have: its base is not the last state */
    memcpy(x, img, len);
    memcpy(x + (size_t)reserved * P, img + (size_t)rec[0] * P, P);
    wr32(x + (size_t)reserved * P + 16, reserved);
    wr64(x + (size_t)reserved * P + 24, rd64(img + (size_t)last * P + 24) + 1);
    x[(size_t)reserved * P + 60] = (uint8_t)(nrec + 1);
    mote__slot_seal(x + (size_t)reserved * P, P);
    CHECK(mote__slot_valid(x + (size_t)reserved * P, P, reserved) == (int)SLOT_KIND_RECORD);
    CHECK(keys_in_image(x, len, 5010) == 5010);
    /* the same with the right base but a count that does not follow */
    memcpy(x, img, len);
    memcpy(x + (size_t)reserved * P, img + (size_t)rec[0] * P, P);
    wr32(x + (size_t)reserved * P + 16, reserved);
    wr64(x + (size_t)reserved * P + 24, rd64(img + (size_t)last * P + 24) + 1);
    wr64(x + (size_t)reserved * P + 48, rd64(img + (size_t)last * P + 24));
    x[(size_t)reserved * P + 60] = (uint8_t)nrec;
    mote__slot_seal(x + (size_t)reserved * P, P);
    CHECK(keys_in_image(x, len, 5010) == 5010);
    /* the last record torn (any sector), or lost: the commit before it */
    for (int sec = 0; sec < P / 512; sec++) {
        memcpy(x, img, len);
        memset(x + (size_t)last * P + sec * 512, sec & 1 ? 0 : 0x5A, 512);
        CHECK(keys_in_image(x, len, 5010) == 5009);
    }
    /* the last record naming a file far larger than the one there (a crash
     * leaves it short by a growth chunk at most): the state before it */
    memcpy(x, img, len);
    wr32(x + (size_t)last * P + 32, 1u << 20);
    wr32(x + (size_t)last * P + 40, mote__bmp_needed(P, 1u << 20));
    mote__slot_seal(x + (size_t)last * P, P);
    CHECK(mote__slot_valid(x + (size_t)last * P, P, last) == (int)SLOT_KIND_RECORD);
    CHECK(keys_in_image(x, len, 5010) == 5009);
    /* written without its pages: each of them lost in turn (the state before) */
    int without = 0;
    for (uint32_t p = last + 1; p < last + 4 && (size_t)(p + 1) * P <= len; p++) {
        if (rd64(img + (size_t)p * P + 8) != rd64(img + (size_t)last * P + 24))
            continue; /* not a page of that commit */
        memcpy(x, img, len);
        memset(x + (size_t)p * P, 0, P);
        CHECK(keys_in_image(x, len, 5010) == 5009);
        without++;
    }
    CHECK(without >= 1);
    /* after a clean close, the checkpoint's slot damaged: the marker alone
     * opens it; its closes write markers into both slots, and each reopen
     * takes the newer */
    memcpy(x, closed, len);
    const uint8_t *ck = rd32(closed + 20) == SLOT_KIND_COMMIT ? closed : closed + P;
    memset(x + (ck - closed), 0x33, 512);
    memio r;
    memio_init(&r);
    memio_set(&r, "/c/s.mote", x, len);
    mote_options ro = {0, 0, 0, &r.io};
    for (uint32_t k = 9000; k < 9003; k++) {
        OK(mote_open("/c/s.mote", &ro, &s));
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        for (uint32_t j = 9000; j < k; j++)
            OK(mote_kv_get(t, tr, &j, 4, NULL));
        OK(mote_kv_put(t, tr, &k, 4, v, sizeof v, 0));
        OK(mote_commit(t));
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
    }
    size_t rlen;
    const uint8_t *after = memio_get(&r, "/c/s.mote", &rlen);
    CHECK(rd32(after + 20) == SLOT_KIND_MARKER && rd32(after + P + 20) == SLOT_KIND_MARKER);
    memio_free(&r);
    printf("chain of %u records: garbage, an old record, a wrong count at the reserved page "
           "ignored; the last record torn (8 sectors), naming 4 GB, or %d of its pages lost: "
           "the one before\n", nrec, without);
    free(x);
    free(img);
    free(closed);
}

/* Checkpoints join the group commit (pager.h GROUP COMMIT) only while the
 * checkpoint they leave in the other slot is durable: commits written in
 * one run without a wait pass two checkpoints, and the disk keeps, of all
 * that was written since the last sync, only the last checkpoint's slot.
 * Had that checkpoint overwritten the slot of the last durable one while
 * the one before it (in the other slot) was not durable, both slots would
 * be lost: the open would find an older state, or none. */
TEST(crash_checkpoint_beside_an_unsynced_one)
{
    memio m;
    uint32_t tr;
    mote_store *s = filled_store(&m, &tr);
    mote_txn *t;
    static uint8_t v[100];
    uint32_t k = 5000;
    for (; k < 5040; k++) { /* acknowledged: records and checkpoints */
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_put(t, tr, &k, 4, v, sizeof v, 0));
        OK(mote_commit(t));
    }
    uint32_t acked = k;
    enum { N = 80, P = 4096 };
    snap *sn[N];
    int ckpts = 0;
    long syncs = m.syncs;
    for (int i = 0; i < N; i++, k++) { /* written, none waited for */
        uint64_t txnid;
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_put(t, tr, &k, 4, v, sizeof v, 0));
        OK(mote__kv_flush(t));
        mote__kv_txn_end(t);
        uint32_t before = (uint32_t)m.writes;
        OK(mote__txn_commit_write(t, &txnid, &sn[i]));
        ckpts += m.writes - before == 2; /* pages, then a slot */
        CHECK(txnid != 0 || !sn[i]);
    }
    syncs = m.syncs - syncs;
    CHECK(ckpts >= 2 && syncs < ckpts); /* some went without a sync of their own */
    /* the durable image, and the last slot written since the last sync */
    memio_file *f = NULL;
    for (int i = 0; i < m.nfiles; i++)
        if (!strcmp(m.files[i].path, "/c/s.mote"))
            f = &m.files[i];
    CHECK(f && f->cur_len >= f->dur_len);
    uint8_t *img = calloc(1, f->cur_len);
    memcpy(img, f->dur, f->dur_len);
    size_t last = SIZE_MAX;
    for (size_t i = 0; i < f->nlog; i++)
        if (f->log[i].off < 2 * P && f->log[i].len == P)
            last = i;
    if (last != SIZE_MAX)
        memcpy(img + f->log[last].off, f->log[last].data, P);
    int found = keys_in_image(img, f->cur_len, (int)k);
    if (found < (int)acked)
        fprintf(stderr, "%d keys after the crash, %u acknowledged\n", found, acked);
    CHECK(found >= (int)acked);
    for (int i = 0; i < N; i++)
        if (sn[i])
            mote__commit_forget(s, sn[i]);
    OK(mote_close(s));
    free(img);
    memio_free(&m);
    printf("%d checkpoints (%ld syncs) among %d commits written without a wait; of what "
           "followed the last sync, a checkpoint's slot alone on disk: %d keys (%u "
           "acknowledged)\n", ckpts, syncs, N, found, acked);
}

/* A store whose slot 0 is the creation page and slot 1 a durable commit
 * (made by the library before creation went unsynced: creation synced, the
 * first commit in slot 1) is not new: its next commit goes to slot 0 only,
 * so a crash at any point of that commit keeps the durable one. */
TEST(crash_creation_page_beside_commit)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    mote_txn *t;
    uint32_t tr;
    OK(mote_open("/c/s.mote", &o, &s));
    OK(mote_begin(s, MOTE_TXN_LAZY, &t)); /* slot 1 only, as the old first commit */
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
    OK(mote_commit(t));
    size_t len;
    uint8_t *old = image_now(&m, &len); /* taken as durable */
    OK(mote_close(s));
    memio_free(&m);
    long points = 0;
    for (long k = 1; k <= 12; k++) {
        memio_init(&m);
        memio_set(&m, "/c/s.mote", old, len);
        mote_options w = {0, 0, 0, &m.io};
        OK(mote_open("/c/s.mote", &w, &s));
        CHECK(m.dirsyncs == 1); /* its creator may never have synced the directory */
        m.crash_at = m.ops + k;
        if (!mote_begin(s, 0, &t)) {
            if (!mote_kv_tree(t, "t", 0, &tr) && !mote_kv_put(t, tr, "k2", 2, "v", 1, 0))
                mote_commit(t);
            else
                mote_abort(t);
        }
        mote_close(s);
        for (int i = 0; i < 64; i++) {
            size_t n;
            uint8_t *img = memio_crash_image(&m, "/c/s.mote", (uint64_t)(k * 1000 + i),
                                             i % 3 == 2 ? MEMIO_HOSTILE : 0, &n);
            int has;
            OK(open_image(img, n, &has));
            CHECK(has); /* the durable commit survives */
            free(img);
            points++;
        }
        memio_free(&m);
    }
    printf("%ld crash images of a commit beside the creation page: the durable one kept\n",
           points);
    free(old);
}

/* Group commit from one thread: batches of five transactions written with
 * mote_commit_nowait, then waited for; a crash at every I/O step of three
 * batches. Every transaction waited for survives; every one found is whole
 * (its two keys, or neither). */
TEST(crash_commit_nowait_batches)
{
    long points = 0, steps = 0;
    for (long k = 1; steps == 0 || k <= steps; k++) {
        memio m;
        memio_init(&m);
        mote_options o = {MOTE_CREATE, 0, 0, &m.io};
        mote_store *s;
        mote_txn *t;
        uint32_t tr;
        OK(mote_open("/c/s.mote", &o, &s));
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
        for (uint32_t i = 1000; i < 1300; i++)
            OK(mote_kv_put(t, tr, &i, 4, "base", 4, 0));
        OK(mote_commit(t));
        long base = m.ops;
        m.crash_at = base + k;
        int acked[15] = {0};
        for (int b = 0; b < 3; b++) {
            mote_ticket *tk[5] = {0};
            int wrote[5] = {0};
            for (int j = 0; j < 5; j++) {
                uint32_t a = (uint32_t)(b * 5 + j), z = a + 500;
                if (mote_begin(s, 0, &t))
                    continue;
                if (mote_kv_put(t, tr, &a, 4, "a", 1, 0) || mote_kv_put(t, tr, &z, 4, "z", 1, 0)) {
                    mote_abort(t);
                    continue;
                }
                wrote[j] = mote_commit_nowait(t, &tk[j]) == MOTE_OK;
            }
            for (int j = 4; j >= 0; j--)
                if (mote_commit_wait(tk[j]) == MOTE_OK && wrote[j])
                    acked[b * 5 + j] = 1;
        }
        mote_close(s);
        if (!m.crashed) { /* past the last step: the run without a crash */
            steps = k - 1;
            for (int i = 0; i < 15; i++)
                CHECK(acked[i]);
            memio_free(&m);
            break;
        }
        for (int img_i = 0; img_i < 4; img_i++) {
            memio r;
            s = open_crashed(&m, &r, (uint64_t)(k * 17 + img_i), img_i == 3);
            OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
            for (uint32_t i = 0; i < 15; i++) {
                uint32_t z = i + 500;
                int ha = mote_kv_get(t, tr, &i, 4, NULL) == MOTE_OK;
                int hz = mote_kv_get(t, tr, &z, 4, NULL) == MOTE_OK;
                CHECK(ha == hz);          /* whole or absent */
                CHECK(ha || !acked[i]);   /* acknowledged: there */
            }
            uint64_t n;
            OK(mote_kv_count(t, tr, NULL, 0, NULL, 0, &n));
            CHECK(n >= 300); /* the base, durable before */
            mote_abort(t);
            OK(mote_close(s));
            memio_free(&r);
            points++;
        }
        memio_free(&m);
    }
    CHECK(steps > 10);
    printf("%ld crash images over %ld steps of three batches: acknowledged commits kept\n",
           points, steps);
}

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
            memio r;
            s = open_crashed(&m, &r, (uint64_t)(k * 31 + img_i), img_i == 3);
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

/* ---- object layer under crashes ----------------------------------------------- */

#define OMAX 400
typedef struct ostate {
    int n;
    uint64_t id[OMAX];
    int32_t level[OMAX];
    int32_t tag[OMAX]; /* -1 = NULL; unique otherwise */
    int nl;             /* to-many links "friends": src -> dst ids */
    uint64_t lsrc[OMAX], ldst[OMAX];
} ostate;

static const mote_prop_def oprops[] = {
    {"level", MOTE_T_INT32, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    {"tag", MOTE_T_INT32, MOTE_P_UNIQUE | MOTE_P_INDEXED | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
    /* a full-text index: the text names level and tag (changes with them) */
    {"pad", MOTE_T_STRING, MOTE_P_FULLTEXT, 0, NULL, NULL, {0}, NULL},
    {"friends", MOTE_T_TOMANY, 0, 0, NULL, "O", {0}, NULL},
    /* a vector index: the vector follows level and tag (NULL with the tag) */
    {"emb", MOTE_T_VECTOR, MOTE_P_NULLABLE | MOTE_P_HNSW, 4, NULL, NULL, {MOTE_DIST_EUCLIDEAN, 4, 8}, NULL},
};
enum { NOPROPS = 5 };

static int o_has_link(const ostate *s, uint64_t a, uint64_t b)
{
    for (int i = 0; i < s->nl; i++)
        if (s->lsrc[i] == a && s->ldst[i] == b)
            return 1;
    return 0;
}

/* drop the links of a removed object from the model */
static void o_drop_links(ostate *s, uint64_t id)
{
    int w = 0;
    for (int i = 0; i < s->nl; i++)
        if (s->lsrc[i] != id && s->ldst[i] != id) {
            s->lsrc[w] = s->lsrc[i];
            s->ldst[w++] = s->ldst[i];
        }
    s->nl = w;
}


/* Build the states of an object workload: commit c applies ops to state c. */
static ostate *o_states(uint64_t seed, int ncommits)
{
    ostate *st = calloc((size_t)ncommits + 1, sizeof *st);
    uint64_t rs = seed, next = 1;
    int tagn = 0;
    for (int c = 0; c < ncommits; c++) {
        st[c + 1] = st[c];
        ostate *s = &st[c + 1];
        int nops = 1 + (int)(test_rand(&rs) % 30);
        for (int o = 0; o < nops; o++) {
            uint64_t r = test_rand(&rs) % 10;
            /* updates and removals touch objects of earlier commits only (the
             * store assigns ids to new objects at put time) */
            int old = 0;
            while (old < s->n && s->id[old] < st[c].id[st[c].n ? st[c].n - 1 : 0] + 1 &&
                   st[c].n)
                old++;
            if ((r < 5 || old == 0) && s->n < OMAX) {
                s->id[s->n] = next++;
                s->level[s->n] = (int32_t)(test_rand(&rs) % 5) * 10;
                s->tag[s->n] = test_rand(&rs) % 3 ? tagn++ : -1;
                s->n++;
            } else if (r < 8 && old) {
                int i = (int)(test_rand(&rs) % (uint64_t)old);
                s->level[i] = (int32_t)(test_rand(&rs) % 5) * 10;
                s->tag[i] = test_rand(&rs) % 2 ? tagn++ : -1;
            } else if (r == 8 && old >= 2 && s->nl < OMAX) { /* link two old objects */
                uint64_t a = s->id[test_rand(&rs) % (uint64_t)old];
                uint64_t b = s->id[test_rand(&rs) % (uint64_t)old];
                if (!o_has_link(s, a, b)) {
                    s->lsrc[s->nl] = a;
                    s->ldst[s->nl++] = b;
                }
            } else if (old) {
                int i = (int)(test_rand(&rs) % (uint64_t)old);
                o_drop_links(s, s->id[i]);
                memmove(&s->id[i], &s->id[i + 1], (size_t)(s->n - i - 1) * 8);
                memmove(&s->level[i], &s->level[i + 1], (size_t)(s->n - i - 1) * 4);
                memmove(&s->tag[i], &s->tag[i + 1], (size_t)(s->n - i - 1) * 4);
                s->n--;
            }
        }
    }
    return st;
}

static void o_vals(const ostate *s, int i, mote_value *v)
{
    static float emb[4];
    static char pad[96];
    memset(v, 0, NOPROPS * sizeof *v);
    v[0].v.i = s->level[i];
    v[1].null = s->tag[i] < 0;
    v[1].v.i = s->tag[i];
    v[2].v.s.p = pad;
    v[2].v.s.n = (size_t)snprintf(pad, sizeof pad, "padding level%d tag%d so that objects fill "
                                  "several pages ....", s->level[i], s->tag[i]);
    emb[0] = (float)s->level[i];
    emb[1] = (float)s->tag[i];
    emb[2] = (float)(s->id[i] % 7);
    emb[3] = 1;
    v[4].null = s->tag[i] < 0;
    v[4].v.s.p = emb;
    v[4].v.s.n = sizeof emb;
}

/* Apply commits to a store; returns acknowledged commits. */
static int o_run(mote_store *s, const ostate *st, int ncommits, int *inflight)
{
    *inflight = 0;
    for (int c = 0; c < ncommits; c++) {
        mote_txn *t;
        mote_entity *e;
        *inflight = 1;
        if (mote_begin(s, 0, &t))
            return c;
        int rc = mote_entity_open(t, "O", oprops, NOPROPS, &e);
        const ostate *a = &st[c], *b = &st[c + 1];
        for (int i = 0; !rc && i < a->n; i++) { /* removed or changed */
            int j = 0;
            while (j < b->n && b->id[j] != a->id[i])
                j++;
            if (j == b->n)
                rc = mote_remove(t, e, a->id[i]);
        }
        for (int j = 0; !rc && j < b->n; j++) {
            int i = 0;
            while (i < a->n && a->id[i] != b->id[j])
                i++;
            if (i < a->n && a->level[i] == b->level[j] && a->tag[i] == b->tag[j])
                continue;
            mote_value v[NOPROPS];
            o_vals(b, j, v);
            uint64_t got;
            rc = mote_put(t, e, i < a->n ? b->id[j] : 0, v, 0, &got);
            if (!rc && got != b->id[j]) {
                fprintf(stderr, "id %llu assigned, model expects %llu\n",
                        (unsigned long long)got, (unsigned long long)b->id[j]);
                abort();
            }
        }
        for (int l = 0; !rc && l < b->nl; l++) /* new links (removals cascade) */
            if (!o_has_link(a, b->lsrc[l], b->ldst[l]))
                rc = mote_link(t, e, 3, b->lsrc[l], b->ldst[l]);
        if (rc) {
            mote_abort(t);
            return c;
        }
        if (mote_commit(t))
            return c;
        *inflight = 0;
    }
    return ncommits;
}

typedef struct ocmp {
    const ostate *s;
    int i, ok;
} ocmp;

static int o_cmp_one(void *ctx, const mote_record *r)
{
    ocmp *c = ctx;
    mote_value lv, tv;
    if (c->i >= c->s->n || r->id != c->s->id[c->i] || mote_record_get(r, 0, &lv, NULL) ||
        mote_record_get(r, 1, &tv, NULL) || lv.v.i != c->s->level[c->i] ||
        (c->s->tag[c->i] < 0 ? !tv.null : tv.null || tv.v.i != c->s->tag[c->i]))
        c->ok = 0;
    c->i++;
    return 0;
}

static int o_links_match(mote_txn *t, mote_entity *e, const ostate *st)
{
    int ok = 1, total = 0;
    for (int i = 0; i < st->n && ok; i++) {
        uint64_t *ids;
        size_t n;
        OK(mote_links(t, e, 3, st->id[i], &ids, &n));
        for (size_t k = 0; k < n; k++)
            ok &= o_has_link(st, st->id[i], ids[k]);
        total += (int)n;
        mote_free(ids);
    }
    return ok && total == st->nl;
}

static int o_matches(mote_store *s, const ostate *st)
{
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    int rc = mote_entity_stored(t, "O", &e);
    ocmp c = {st, 0, 1};
    if (rc == MOTE_NOTFOUND) {
        mote_abort(t);
        return st->n == 0;
    }
    OK(rc);
    OK(mote_scan(t, e, o_cmp_one, &c));
    int links = c.ok && c.i == st->n && o_links_match(t, e, st);
    size_t nvec = 0, want, n = 0;
    for (int i = 0; i < st->n; i++)
        nvec += st->tag[i] >= 0;
    want = nvec < 20 ? nvec : 20;
    mote_query *q;
    float at[4] = {20, 5, 3, 1};
    uint64_t *ids = NULL;
    if (links && mote_entity_nprops(e) == NOPROPS) { /* (a store of the workload's first commit) */
        OK(mote_query_new(e, &q));
        OK(mote_query_nearest(q, 4, at, 4, 20, MOTE_DIST_EUCLIDEAN));
        OK(mote_query_search(q, MOTE_NEAR_INDEX, 0));
        OK(mote_query_ids(t, q, &ids, &n));
        mote_query_free(q);
        mote_free(ids);
        links = n == want;
        /* the full-text index: the objects of level 20 */
        uint64_t count;
        size_t level20 = 0;
        for (int i = 0; i < st->n; i++)
            level20 += st->level[i] == 20;
        OK(mote_query_new(e, &q));
        OK(mote_query_match(q, 2, "LEVEL20", 7, OMAX, 0));
        OK(mote_query_count(t, q, &count));
        mote_query_free(q);
        links = links && count == level20;
    }
    mote_abort(t);
    return links;
}

TEST(crash_object_layer)
{
    uint64_t rs = 31337;
    long checked = 0;
    int rounds = 12 * test_scale();
    for (int round = 0; round < rounds; round++) {
        int ncommits = 8;
        ostate *st = o_states(test_rand(&rs), ncommits);
        memio m;
        memio_init(&m);
        mote_options o = {MOTE_CREATE, 0, 0, &m.io};
        mote_store *s;
        int inflight;
        OK(mote_open("/o/s.mote", &o, &s));
        CHECK(o_run(s, st, ncommits, &inflight) == ncommits);
        CHECK(round > 0 || st[ncommits].nl > 0); /* the workload does link */
        OK(mote_close(s));
        long total = m.ops;
        memio_free(&m);
        for (int j = 0; j < 25; j++) {
            long k = 1 + (long)(test_rand(&rs) % (uint64_t)total);
            memio_init(&m);
            m.crash_at = k;
            int acked = 0;
            if (mote_open("/o/s.mote", &o, &s) == MOTE_OK) {
                acked = o_run(s, st, ncommits, &inflight);
                mote_close(s);
            } else {
                memio_free(&m);
                continue;
            }
            for (int img = 0; img < 3; img++) {
                size_t len;
                uint8_t *im = memio_crash_image(&m, "/o/s.mote", test_rand(&rs),
                                                img == 2 ? MEMIO_HOSTILE : 0, &len);
                memio r;
                memio_init(&r);
                memio_set(&r, "/o/s.mote", im, len);
                free(im);
                mote_options ro = {0, 0, 0, &r.io};
                int orc = mote_open("/o/s.mote", &ro, &s);
                if ((orc == MOTE_CORRUPT || orc == MOTE_FORMAT) && acked == 0) { /* a torn first commit */
                    memio_free(&r);
                    continue;
                }
                OK(orc);
                OK(mote_check(s, NULL, NULL)); /* pages, objects and indexes agree */
                int ok = o_matches(s, &st[acked]) ||
                         (inflight && acked < ncommits && o_matches(s, &st[acked + 1]));
                if (!ok) {
                    fprintf(stderr, "round %d crash at %ld: neither commit %d nor %d\n",
                            round, k, acked, acked + 1);
                    abort();
                }
                OK(mote_close(s));
                memio_free(&r);
                checked++;
            }
            memio_free(&m);
        }
        free(st);
    }
    printf("%ld crash images of object workloads: objects, indexes and links consistent\n",
           checked);
}

/* A small store after a churn of commits (the workload's keys, overflow
 * values among them): free pages the commit chain kept, leaves part full,
 * so that its close repacks it (check.c repack, then the relocation). */
static mote_store *churned(memio *m, wl *w, unsigned flags)
{
    memio_init(m);
    wl_init_keys(w, 42, 120, 12, 1, 600);
    mote_options o = {MOTE_CREATE | flags, 0, 0, &m->io};
    mote_store *s;
    OK(mote_open("/c/s.mote", &o, &s));
    int inflight = 0;
    CHECK(wl_run(w, s, 0, &inflight) == w->ncommits);
    return s;
}

/* With MOTE_REPACK, the close of a small store whose file is a quarter or
 * more free pages, and that its entries would fill much less of, repacks
 * it: two checkpoints (the entries rewritten in key order, then the pages
 * above the cut moved below it) and a truncation; the entries are those of
 * the last commit, the file a good deal smaller, leaves fuller. A close
 * without writes, one after a small commit, and one without MOTE_REPACK do
 * neither. */
TEST(repack_at_close)
{
    memio m;
    wl w;
    mote_store *s = churned(&m, &w, 0);
    memio_reset_counts(&m);
    OK(mote_close(s)); /* (no MOTE_REPACK) */
    CHECK(m.syncs == 0 && m.writes == 1);
    wl_free(&w);
    memio_free(&m);
    s = churned(&m, &w, MOTE_REPACK);
    mote_stat before, after;
    OK(mote_store_stat(s, &before));
    memio_reset_counts(&m);
    OK(mote_close(s));
    mote_options o = {MOTE_REPACK, 0, 0, &m.io};
    OK(mote_open("/c/s.mote", &o, &s));
    OK(mote_check(s, NULL, NULL));
    CHECK(wl_matches(s, &w.states[w.ncommits]));
    OK(mote_store_stat(s, &after));
    printf("before close: %llu pages (%llu free, depth %u); after: %llu pages (%llu free); "
           "close: %ld syncs, %ld truncations\n",
           (unsigned long long)before.pages, (unsigned long long)before.pages_free,
           before.depth, (unsigned long long)after.pages, (unsigned long long)after.pages_free,
           m.syncs, m.truncs);
    CHECK(before.pages_free * 4 >= before.pages); /* (the workload makes the case) */
    CHECK(m.syncs == 2 && m.truncs == 1);
    /* (a page that moves or changes leaves a hole where it was: a leaf below
     * the cut whose overflow chain had pages above it, the chain's pages) */
    CHECK(after.pages * 2 <= before.pages && after.pages_free * 8 <= after.pages);
    CHECK(after.file_bytes == after.pages * after.page_size);
    memio_reset_counts(&m);
    OK(mote_close(s)); /* no writes: nothing */
    CHECK(m.writes == 0 && m.syncs == 0 && m.truncs == 0);
    OK(mote_open("/c/s.mote", &o, &s));
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "x", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "new", 3, "v", 1, 0));
    OK(mote_commit(t));
    memio_reset_counts(&m);
    OK(mote_close(s)); /* few free pages after a small commit: the marker only */
    CHECK(m.writes == 1 && m.syncs == 0); /* (the zeros of its growth cut) */
    wl_free(&w);
    memio_free(&m);
}

/* Crash at every op of a repacking close: the entries never change. */
TEST(crash_during_repack)
{
    long n_ops = 0;
    for (long k = 0;; k++) {
        memio m;
        wl w;
        mote_store *s = churned(&m, &w, MOTE_REPACK);
        long base = m.ops;
        if (k > 0)
            m.crash_at = base + k;
        mote_close(s);
        if (k == 0) {
            n_ops = m.ops - base;
            CHECK(n_ops >= 6); /* repack (write, slot, sync), relocate (likewise), truncate */
        } else {
            for (int img_i = 0; img_i < 4; img_i++) {
                memio r;
                s = open_crashed(&m, &r, (uint64_t)(k * 31 + img_i), img_i == 3);
                CHECK(wl_matches(s, &w.states[w.ncommits]));
                OK(mote_close(s));
                memio_free(&r);
            }
        }
        wl_free(&w);
        memio_free(&m);
        if (k > n_ops)
            break;
    }
    printf("%ld crash points in a repacking close\n", n_ops + 1);
}
