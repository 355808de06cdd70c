/* test_io.c — structural budgets measured with the counting in-memory
 * shim: syncs per commit, syscalls for open and close. */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "memio.h"
#include "test.h"

static mote_store *mopen(memio *m, unsigned flags)
{
    mote_options o = {flags, 0, 0, &m->io};
    mote_store *s = NULL;
    int rc = mote_open("/m/s.mote", &o, &s);
    if (rc) {
        fprintf(stderr, "open: %s\n", mote_last_open_error());
        abort();
    }
    return s;
}

static void put_n(mote_store *s, int from, int n, size_t vlen)
{
    mote_txn *t;
    uint32_t tr;
    static uint8_t v[20000];
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (int i = from; i < from + n; i++) {
        uint8_t k[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
        OK(mote_kv_put(t, tr, k, 4, v, vlen, 0));
    }
    OK(mote_commit(t));
}


/* MOTE_TXN_CACHED: a read that would read a page from the file fails with
 * MOTE_WOULDBLOCK and reads nothing; once another read cached the pages, it
 * succeeds without I/O; the snapshot stays usable after a refusal. */
TEST(io_cached_read_reads_nothing)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 3000, 100); /* leaves enough for keys far apart to be on different pages */
    put_n(s, 5000, 1, 9000); /* and an overflow value */
    OK(mote_close(s));
    s = mopen(&m, 0); /* nothing cached */
    mote_txn *t, *c;
    uint32_t tr;
    CHECK_RC(mote_begin(s, MOTE_TXN_CACHED, &t), MOTE_INVALID); /* reads only */
    CHECK_RC(mote_begin(s, MOTE_TXN_CACHED | MOTE_TXN_LAZY, &t), MOTE_INVALID);
    memio_reset_counts(&m);
    OK(mote_begin(s, MOTE_TXN_RDONLY | MOTE_TXN_CACHED, &c));
    CHECK(m.ops == 0); /* beginning reads nothing */
    CHECK_RC(mote_kv_tree(c, "t", 0, &tr), MOTE_WOULDBLOCK);
    CHECK(m.reads == 0);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* an ordinary read caches the path to key 7 */
    OK(mote_kv_tree(t, "t", 0, &tr));
    uint8_t k7[4] = {0, 0, 0, 7}, far[4] = {0, 0, 11, 180}, big[4] = {0, 0, 19, 136};
    OK(mote_kv_get(t, tr, k7, 4, NULL));
    mote_abort(t);
    memio_reset_counts(&m);
    uint32_t tr2;
    OK(mote_kv_tree(c, "t", 0, &tr2)); /* the refused snapshot goes on */
    CHECK(tr2 == tr);
    mote_val v;
    OK(mote_kv_get(c, tr, k7, 4, &v));
    CHECK(v.size == 100);
    CHECK_RC(mote_kv_get(c, tr, far, 4, &v), MOTE_WOULDBLOCK); /* key 2,996: another leaf */
    mote_cursor *cur;
    OK(mote_cursor_open(c, tr, &cur));
    CHECK_RC(mote_cursor_seek(cur, far, 4, MOTE_SEEK_GE), MOTE_WOULDBLOCK);
    mote_cursor_close(cur);
    CHECK(m.reads == 0);
    mote_abort(c);
    /* the overflow value: its leaf cached, its pages not */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_get(t, tr, far, 4, NULL));
    mote_abort(t);
    OK(mote_begin(s, MOTE_TXN_RDONLY | MOTE_TXN_CACHED, &c));
    OK(mote_kv_get(c, tr, far, 4, &v));
    int rc = mote_kv_get(c, tr, big, 4, &v);
    CHECK(rc == MOTE_WOULDBLOCK);
    mote_abort(c);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_get(t, tr, big, 4, &v));
    CHECK(v.size == 9000);
    mote_abort(t);
    memio_reset_counts(&m);
    OK(mote_begin(s, MOTE_TXN_RDONLY | MOTE_TXN_CACHED, &c));
    OK(mote_kv_get(c, tr, big, 4, &v));
    CHECK(v.size == 9000 && m.reads == 0);
    mote_abort(c);
    OK(mote_close(s));
    memio_free(&m);
}

/* Group commit from one thread: ten transactions written with
 * mote_commit_nowait, then their tickets waited for: one fdatasync for all,
 * nothing seen by readers before, everything after and after a reopen. */
TEST(io_commit_nowait_one_sync)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 100, 100); /* a store with a commit chain */
    mote_ticket *k[10];
    uint32_t tr;
    memio_reset_counts(&m);
    for (int i = 0; i < 10; i++) {
        mote_txn *t;
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        uint8_t key[4] = {0, 0, 1, (uint8_t)i};
        OK(mote_kv_put(t, tr, key, 4, "v", 1, 0));
        if (i == 4) { /* one that fails leaves the others */
            mote_abort(t);
            k[i] = NULL;
            continue;
        }
        OK(mote_commit_nowait(t, &k[i]));
        CHECK(k[i] != NULL);
    }
    CHECK(m.syncs == 0);
    CHECK(test_count(s, "t") == 100); /* not durable: not seen */
    CHECK_RC(mote_close(s), MOTE_BUSY); /* tickets not waited for */
    for (int i = 9; i >= 0; i--) /* the last first: its sync covers the others */
        OK(mote_commit_wait(k[i]));
    CHECK(m.syncs == 1);
    CHECK(test_count(s, "t") == 109);
    mote_txn *t;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_commit_nowait(t, NULL), MOTE_INVALID); /* (and t rolled back) */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    mote_ticket *none;
    OK(mote_commit_nowait(t, &none)); /* a read: nothing to wait for */
    CHECK(none == NULL);
    OK(mote_commit_wait(NULL));
    OK(mote_close(s));
    s = mopen(&m, 0);
    CHECK(test_count(s, "t") == 109);
    OK(mote_close(s));
    memio_free(&m);
}

TEST(io_one_sync_per_commit)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    CHECK(m.syncs == 0 && m.dirsyncs == 0 && m.writes == 0); /* creation: the first commit writes it */
    int sizes[] = {1, 10, 100, 1000, 10000};
    int at = 0;
    for (int i = 0; i < 5; i++) {
        memio_reset_counts(&m);
        put_n(s, at, sizes[i], 100);
        at += sizes[i];
        printf("commit of %5d puts: %ld sync, %ld writes, %ld reads\n", sizes[i],
               m.syncs, m.writes, m.reads);
        CHECK(m.syncs == 1);
        CHECK(m.dirsyncs == (i == 0) && m.truncs == 0); /* the first: the directory too */
        CHECK(i > 0 || m.writes == 1); /* both slots and the pages in one request */
    }
    /* overwrites, deletes and overflow values: still one sync */
    memio_reset_counts(&m);
    put_n(s, 0, 500, 9000);
    CHECK(m.syncs == 1);
    /* a read transaction does no I/O at all once pages are cached */
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    uint8_t k[4] = {0, 0, 0, 7};
    OK(mote_kv_get(t, tr, k, 4, NULL));
    mote_abort(t);
    memio_reset_counts(&m);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_get(t, tr, k, 4, NULL));
    mote_abort(t);
    CHECK(m.ops == 0);
    /* a write transaction that changes nothing does no I/O */
    OK(mote_begin(s, 0, &t));
    CHECK_RC(mote_kv_del(t, tr, "nope", 4), MOTE_NOTFOUND);
    OK(mote_commit(t));
    CHECK(m.ops == 0);
    /* close after writes: one write (the clean-close marker), no sync */
    memio_reset_counts(&m);
    OK(mote_close(s));
    CHECK(m.writes == 1 && m.syncs == 0 && m.closes == 1);
    memio_free(&m);
}

/* A new store: open, register an entity (a lazy transaction, as Python's
 * store.box()), write ten objects, close: one fdatasync and one directory
 * fsync in all (creation syncs nothing; the registration rides on the
 * write). On a store that has a durable commit, a lazy transaction is an
 * ordinary one: one sync. */
TEST(io_create_register_write_one_sync)
{
    static const mote_prop_def props[] = {
        {"text", MOTE_T_STRING, 0, 0, NULL, NULL, {0}, NULL},
        {"value", MOTE_T_INT64, MOTE_P_INDEXED, 0, NULL, NULL, {0}, NULL},
    };
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    CHECK(m.opens == 1); /* one open makes the file */
    mote_txn *t;
    mote_entity *e;
    OK(mote_begin(s, MOTE_TXN_LAZY, &t));
    OK(mote_entity_open(t, "Note", props, 2, &e));
    OK(mote_commit(t));
    CHECK(m.syncs == 0 && m.dirsyncs == 0);
    OK(mote_begin(s, 0, &t));
    for (int i = 0; i < 10; i++) {
        mote_value v[2] = {{0}, {0}};
        v[0].v.s.p = "a short note";
        v[0].v.s.n = 12;
        v[1].v.i = i;
        OK(mote_put(t, e, 0, v, 0, NULL));
    }
    OK(mote_commit(t));
    OK(mote_close(s));
    printf("create, register, 10 objects, close: %ld fdatasync, %ld directory fsync, "
           "%ld writes\n", m.syncs, m.dirsyncs, m.writes);
    CHECK(m.syncs == 1 && m.dirsyncs == 1);
    /* reopened: both are there */
    s = mopen(&m, 0);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_entity_stored(t, "Note", &e));
    uint64_t n = 0;
    OK(mote_count(t, e, &n));
    CHECK(n == 10);
    mote_abort(t);
    /* a lazy transaction on a store with a durable commit syncs as usual */
    memio_reset_counts(&m);
    OK(mote_begin(s, MOTE_TXN_LAZY, &t));
    OK(mote_entity_open(t, "Other", props, 2, &e));
    OK(mote_commit(t));
    CHECK(m.syncs == 1 && m.dirsyncs == 0);
    CHECK_RC(mote_begin(s, MOTE_TXN_LAZY | MOTE_TXN_RDONLY, &t), MOTE_INVALID);
    OK(mote_close(s));
    memio_free(&m);
}

/* The kind (1 checkpoint, 2 marker) and txnid of root slot i in the file. */
static void slot_kind(memio *m, int i, uint32_t *kind, uint64_t *txnid)
{
    size_t len = 0;
    const uint8_t *img = memio_get(m, "/m/s.mote", &len);
    CHECK(img && len >= (size_t)(i + 1) * 4096);
    uint32_t k = 0;
    uint64_t t = 0;
    for (int b = 3; b >= 0; b--)
        k = k << 8 | img[i * 4096 + 20 + b];
    for (int b = 7; b >= 0; b--)
        t = t << 8 | img[i * 4096 + 24 + b];
    *kind = k;
    *txnid = t;
}

/* A new store's first commit whose state is all in its slot (the file is
 * the two slots) writes the clean-close marker as its second copy: the
 * close writes nothing and asks nothing, and the next open is clean (its
 * first commit syncs once). One with pages of its own writes the
 * checkpoint twice and the marker at close, as before (pager.h FRESH). */
TEST(io_first_commit_writes_the_marker)
{
    for (int big = 0; big < 2; big++) {
        memio m;
        memio_init(&m);
        mote_store *s = mopen(&m, MOTE_CREATE);
        put_n(s, 0, big ? 200 : 10, 40);
        uint32_t k0, k1;
        uint64_t t0, t1;
        slot_kind(&m, 0, &k0, &t0);
        slot_kind(&m, 1, &k1, &t1);
        CHECK(t0 == t1 && t0 == 2 && k1 == 1 && k0 == (big ? 1u : 2u));
        memio_reset_counts(&m);
        OK(mote_close(s));
        printf("first commit of %s: the close makes %ld writes, %ld calls besides close\n",
               big ? "200 entries" : "10 entries", m.writes, m.ops);
        CHECK(m.writes == (big ? 1 : 0) && m.closes == 1 && (big || m.ops == 0));
        slot_kind(&m, 0, &k0, &t0);
        CHECK(k0 == 2 && t0 == 2);
        /* reopened clean: the next commit syncs once (an unclean open syncs
         * its base first) */
        s = mopen(&m, 0);
        memio_reset_counts(&m);
        put_n(s, 1000, 1, 40);
        CHECK(m.syncs == 1);
        OK(mote_close(s));
        s = mopen(&m, MOTE_RDONLY);
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
        memio_free(&m);
    }
}

TEST(io_open_budget)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 10, 40);
    OK(mote_close(s));
    /* clean open of a tiny store: open, fstat, flock, one pread */
    memio_reset_counts(&m);
    s = mopen(&m, MOTE_CREATE);
    printf("open: %ld ops (%ld open, %ld fstat, %ld flock, %ld pread)\n", m.ops,
           m.opens, m.stats, m.locks, m.reads);
    CHECK(m.opens == 1 && m.stats == 1 && m.locks == 1 && m.reads == 1 && m.ops == 4);
    /* query: no syscall */
    memio_reset_counts(&m);
    CHECK(test_count(s, "t") == 10);
    CHECK(m.ops == 0);
    /* close without writes: just close */
    OK(mote_close(s));
    CHECK(m.ops == 0 && m.closes == 1 && m.writes == 0);

    /* an unclean store (no marker) is verified at open, and the first
     * commit syncs once more to make the base durable */
    s = mopen(&m, MOTE_CREATE);
    put_n(s, 100, 5, 40);
    /* simulate a crash: drop the handle without the marker */
    size_t len;
    const uint8_t *img = memio_get(&m, "/m/s.mote", &len);
    uint8_t *copy = malloc(len);
    memcpy(copy, img, len);
    OK(mote_close(s));
    memio_set(&m, "/m/s.mote", copy, len);
    free(copy);
    memio_reset_counts(&m);
    s = mopen(&m, 0);
    CHECK(m.syncs == 0);
    memio_reset_counts(&m);
    put_n(s, 200, 1, 40);
    CHECK(m.syncs == 2);
    memio_reset_counts(&m);
    put_n(s, 300, 1, 40);
    CHECK(m.syncs == 1);
    OK(mote_close(s));
    memio_free(&m);
}

/* The commit chain (pager.h COMMIT CHAIN): a small durable commit into a
 * store that has one writes its record and its pages in one request, then
 * one fdatasync, when its pages fit in the run reserved after the record;
 * every CHAIN_MAX-th is a checkpoint (pages, then the slot). Inserts of new
 * ids (the ORM's single inserts) fit; overwrites at random places of a
 * store packed by a bulk load find the free runs short (their pages go to
 * runs elsewhere: two requests). */
TEST(io_one_request_per_small_commit)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 20000, 100); /* ~700 pages: chains of CHAIN_MAX records */
    for (int round = 0; round < 2; round++) {
        int one = 0, ckpt = 0, more = 0, commits = 200;
        for (int i = 0; i < commits; i++) {
            memio_reset_counts(&m);
            put_n(s, round ? (i * 7919) % 20000 : 20000 + i, 1, 100);
            CHECK(m.syncs == 1);
            mote_stat st;
            OK(mote_store_stat(s, &st));
            CHECK(st.format == 2 && st.chain <= 32);
            if (st.chain == 0) { /* a checkpoint: the slot is a request of its own */
                CHECK(m.writes >= 2);
                ckpt++;
            } else {
                one += m.writes == 1;
                more += m.writes > 1; /* its pages did not all fit after the record */
                CHECK(m.writes <= 3);
            }
        }
        printf("%d single puts (%s): %d records in one write request, %d in more, "
               "%d checkpoints\n", commits, round ? "random overwrites" : "new ids", one,
               more, ckpt);
        CHECK(ckpt <= commits / 32 + 1);
        if (!round)
            CHECK(one >= commits * 9 / 10);
    }
    OK(mote_close(s));
    memio_free(&m);
}

TEST(io_growth_overwrites_existing_blocks)
{
    /* after the file has grown, commits of a steady-state workload write
     * only inside the existing file (no appends) */
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 20000, 100);
    size_t len0, len1;
    for (int r = 0; r < 100; r++) /* warm-up: growth chunks for COW copies and the chain */
        put_n(s, (r * 37) % 20000, 50, 100);
    memio_get(&m, "/m/s.mote", &len0);
    for (int r = 100; r < 150; r++)
        put_n(s, (r * 37) % 20000, 50, 100); /* overwrite existing keys */
    memio_get(&m, "/m/s.mote", &len1);
    printf("file after warm-up: %zu bytes, after 50 more commits: %zu\n", len0, len1);
    CHECK(len1 == len0);
    OK(mote_close(s));
    memio_free(&m);
}

/* Growth writes zeros in chunks past the last page (an eighth of the file);
 * a close cuts them: the file then ends at its last page, and it opens with
 * everything in it. */
TEST(io_close_cuts_growth_zeros)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    for (int r = 0; r < 20; r++)
        put_n(s, r * 1000, 1000, 100);
    mote_stat st;
    size_t len;
    OK(mote_store_stat(s, &st));
    memio_get(&m, "/m/s.mote", &len);
    printf("before close: %llu pages, %zu bytes in the file\n", (unsigned long long)st.pages,
           len);
    CHECK(len > st.pages * st.page_size); /* (else the test shows nothing) */
    OK(mote_close(s));
    memio_get(&m, "/m/s.mote", &len);
    CHECK(len == st.pages * st.page_size);
    s = mopen(&m, 0);
    OK(mote_check(s, NULL, NULL));
    CHECK(test_count(s, "t") == 20000);
    OK(mote_close(s));
    memio_free(&m);
}

/* CRC32C: the standard check value, the hardware path (three interleaved
 * streams on long buffers) equal to the table on every length and
 * alignment, and a CRC continued over a split buffer equal to one pass. */
/* One commit of a single object put: the object leaf at the end of its
 * tree, an index entry in one of 5 places, a text index entry anywhere. */
static void put_object(mote_txn *t, const uint32_t *tr, uint64_t id, uint64_t *rnd)
{
    uint8_t k[32], v[60] = {0};
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(id >> (56 - 8 * i));
    OK(mote_kv_put(t, tr[0], k, 8, v, sizeof v, 0));
    k[8] = (uint8_t)(id % 5);
    memcpy(k + 9, k, 8);
    OK(mote_kv_put(t, tr[1], k + 8, 9, NULL, 0, 0));
    *rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
    int n = snprintf((char *)k, sizeof k, "text %llu", (unsigned long long)(*rnd >> 40));
    OK(mote_kv_put(t, tr[2], k, (size_t)n, NULL, 0, 0));
}

TEST(io_small_commit_few_runs)
{
    /* A single put rewrites ~6 pages in three places; first-fit numbering
     * scatters them over the holes earlier commits left (~5.6 page write
     * requests per commit here, and the slot, before the pages were placed
     * in runs; each request costs the fdatasync). Placed onto runs: ~3.1
     * and the slot. With the commit chain (a record at the page the commit
     * before reserved, the pages after it): at most 2 requests in all,
     * and the free pages that buys stay within 1/2 of the file (the price:
     * free runs for the chain, ~1/8 before; pager.h COMMIT CHAIN). */
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    const char *names[3] = {"obj", "lvl", "txt"};
    uint32_t tr[3];
    uint64_t rnd = 1, id = 0;
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    for (int i = 0; i < 3; i++)
        OK(mote_kv_tree(t, names[i], MOTE_TREE_CREATE, &tr[i]));
    while (id < 10000)
        put_object(t, tr, ++id, &rnd);
    OK(mote_commit(t));
    const int commits = 2000;
    memio_reset_counts(&m);
    for (int i = 0; i < commits; i++) {
        OK(mote_begin(s, 0, &t));
        put_object(t, tr, ++id, &rnd);
        OK(mote_commit(t));
    }
    double per = (double)m.writes / commits; /* records, slots (checkpoints), pages */
    mote_stat st;
    OK(mote_store_stat(s, &st));
    printf("%d single-put commits: %.2f write requests each; %llu pages, %llu free\n",
           commits, per, (unsigned long long)st.pages, (unsigned long long)st.pages_free);
    CHECK(m.syncs == commits);
    CHECK(per <= 2.0);
    CHECK(st.pages_free * 2 <= st.pages + 64);
    OK(mote_close(s));
    memio_free(&m);
}

/* An update of object i of 20,000 (200-byte values): its value rewritten,
 * and its entries in two indexes (keys a[i], b[i]) moved to new random
 * keys: a leaf of the object tree and four index leaves, anywhere. */
static void update_object(mote_txn *t, const uint32_t *tr, uint32_t i, uint64_t *a, uint64_t *b,
                          uint64_t *rnd)
{
    uint8_t k[16], v[200] = {0};
    uint64_t *keys[2] = {a, b};
    for (int j = 0; j < 8; j++)
        k[j] = (uint8_t)((uint64_t)i >> (56 - 8 * j));
    v[0] = (uint8_t)*rnd;
    OK(mote_kv_put(t, tr[0], k, 8, v, sizeof v, 0));
    for (int x = 0; x < 2; x++) {
        uint8_t ik[12];
        for (int j = 0; j < 8; j++)
            ik[j] = (uint8_t)(keys[x][i] >> (56 - 8 * j));
        memcpy(ik + 8, k + 4, 4);
        if (keys[x][i])
            OK(mote_kv_del(t, tr[1 + x], ik, 12));
        *rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
        keys[x][i] = *rnd | 1;
        for (int j = 0; j < 8; j++)
            ik[j] = (uint8_t)(keys[x][i] >> (56 - 8 * j));
        OK(mote_kv_put(t, tr[1 + x], ik, 12, NULL, 0, 0));
    }
}

/* Commits that change twenty-odd scattered pages (four updates of indexed
 * objects): the run after the record holds at most CHAIN_RUN of them. While
 * a quarter of the file was free, a short run was taken for the next record
 * whatever the next commit's size, and the pages that did not fit went to
 * holes, a write request each: 8.17 requests per commit here. A short run is
 * now taken for such a commit only if it holds half of it, or once half the
 * file is free (RESERVE_HALF, RESERVE_CAP): 5.60, in a file 2.6 times its
 * pages in use instead of 2.0. (Longer, both grow alike: after 12,000
 * commits 6,128 pages against 6,165, 78 % free, 2.64 requests against 3.68;
 * MIDN=12000 runs that.) */
TEST(io_mid_commit_few_runs)
{
    enum { OBJECTS = 20000 };
    static uint64_t a[OBJECTS], b[OBJECTS];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    const char *names[3] = {"obj", "ia", "ib"};
    uint32_t tr[3];
    uint64_t rnd = 3;
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    for (int i = 0; i < 3; i++)
        OK(mote_kv_tree(t, names[i], MOTE_TREE_CREATE, &tr[i]));
    for (uint32_t i = 0; i < OBJECTS; i++)
        update_object(t, tr, i, a, b, &rnd);
    OK(mote_commit(t));
    const int commits = getenv("MIDN") ? atoi(getenv("MIDN")) : 1500;
    memio_reset_counts(&m);
    for (int c = 0; c < commits; c++) {
        OK(mote_begin(s, 0, &t));
        for (int j = 0; j < 4; j++) {
            rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
            update_object(t, tr, (uint32_t)((rnd >> 33) % OBJECTS), a, b, &rnd);
        }
        OK(mote_commit(t));
    }
    double per = (double)m.writes / commits;
    mote_stat st;
    OK(mote_store_stat(s, &st));
    printf("%d commits of 4 scattered updates: %.2f write requests each; %llu pages, %llu free\n",
           commits, per, (unsigned long long)st.pages, (unsigned long long)st.pages_free);
    CHECK(m.syncs == commits);
    CHECK(commits != 1500 || per <= 6.5);
    CHECK(commits != 1500 || st.pages <= 3 * (st.pages - st.pages_free) + 64);
    OK(mote_close(s));
    memio_free(&m);
}

TEST(io_checkpoint_reads_no_record)
{
    /* A checkpoint frees the chain's records. Read back and verified, each
     * cost a pread and a hash of its page (a 5-record chain: 7.4 -> 3.4 us
     * of CPU per checkpoint without them); the records this handle wrote
     * are known, so none is read. A chain another handle extended is not:
     * its checkpoint reads the records (and the store stays consistent). */
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    uint32_t tr[3];
    uint64_t rnd = 1, id = 0;
    mote_txn *t;
    const char *names[3] = {"obj", "lvl", "txt"};
    OK(mote_begin(s, 0, &t));
    for (int i = 0; i < 3; i++)
        OK(mote_kv_tree(t, names[i], MOTE_TREE_CREATE, &tr[i]));
    while (id < 2000)
        put_object(t, tr, ++id, &rnd);
    OK(mote_commit(t));
    memio_reset_counts(&m);
    for (int i = 0; i < 300; i++) { /* ~10 checkpoints (every 32 records at most) */
        OK(mote_begin(s, 0, &t));
        put_object(t, tr, ++id, &rnd);
        OK(mote_commit(t));
    }
    CHECK(m.reads == 0);
    OK(mote_close(s));
    /* reopened: the chain on disk is not this handle's (its first checkpoint
     * reads it), then the chains it writes are; every page stays accounted */
    s = mopen(&m, 0);
    for (int i = 0; i < 300; i++) {
        OK(mote_begin(s, 0, &t));
        put_object(t, tr, ++id, &rnd);
        OK(mote_commit(t));
        if (i % 7 == 0)
            OK(mote_check(s, NULL, NULL));
    }
    OK(mote_close(s));
    s = mopen(&m, 0);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    memio_free(&m);
}

TEST(io_crc32c)
{
    CHECK(mote__crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(mote__crc32c_table(0, "123456789", 9) == 0xE3069283u);
    CHECK(mote__crc32c(0, "", 0) == 0);
    static uint8_t buf[20000];
    uint64_t rng = 17;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)test_rand(&rng);
    for (size_t n = 0; n < 13000; n += n < 100 ? 1 : 1 + test_rand(&rng) % 97) {
        size_t at = test_rand(&rng) % 8;
        uint32_t seed = (uint32_t)test_rand(&rng);
        uint32_t hw = mote__crc32c(seed, buf + at, n);
        CHECK(hw == mote__crc32c_table(seed, buf + at, n));
        size_t cut = n ? test_rand(&rng) % n : 0;
        CHECK(mote__crc32c(mote__crc32c(seed, buf + at, cut), buf + at + cut, n - cut) == hw);
    }
}

/* A scan of a store just opened reads its leaves ahead, up to 16 pages in
 * one request (with 200 leaves: at most 30 reads, not 200); a lookup
 * reads only its path. */
TEST(io_scan_reads_ahead)
{
    memio m;
    memio_init(&m);
    mote_store *s = mopen(&m, MOTE_CREATE);
    put_n(s, 0, 6000, 100); /* ~33 entries per leaf: ~180 leaves */
    OK(mote_close(s));
    s = mopen(&m, 0);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    memio_reset_counts(&m);
    uint8_t k[4] = {0, 0, 0x0b, 0xb8}; /* 3000 */
    OK(mote_kv_get(t, tr, k, 4, NULL));
    long lookup = m.reads;
    mote_cursor *c;
    OK(mote_cursor_open(t, tr, &c));
    int n = 0;
    for (int rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c))
        n++;
    mote_cursor_close(c);
    printf("a lookup: %ld reads; a scan of %d entries: %ld reads\n", lookup, n, m.reads - lookup);
    CHECK(n == 6000);
    CHECK(lookup <= 3);
    CHECK(m.reads - lookup <= 30);
    mote_abort(t);
    OK(mote_close(s));
    memio_free(&m);
}

/* The POSIX shim's fstat leaves the file's times unseen. On Linux 6.13+
 * (multigrain timestamps) a query of a file's times makes the next write
 * stamp a fine-grained mtime, which dirties the inode, so the next
 * fdatasync writes the inode block as well: each commit of several
 * processes, which stat the store at the start of a write, paid a second
 * write in its sync. Seen from here: after a write that stamped the file,
 * a second write stamps it again (later than a clock read between the two)
 * only if its times were queried in between. A real fstat in between shows
 * that this kernel stamps that way (else there is nothing to check); the
 * shim's fstat in between must not (a write may still land on a new
 * clock tick: one attempt of 20 without a new stamp is enough). */
static int stamped_again(int fd, int shim)
{
    struct stat st;
    CHECK(fstat(fd, &st) == 0);          /* the times are seen... */
    CHECK(pwrite(fd, "a", 1, 0) == 1);   /* ...so this write stamps them finely */
    struct timespec between;
    clock_gettime(CLOCK_REALTIME, &between);
    if (shim) {
        mote_fileinfo fi;
        CHECK(mote_io_posix.fstat(mote_io_posix.ctx, fd, &fi) == 0 && fi.size == 1);
    } else {
        CHECK(fstat(fd, &st) == 0);
    }
    CHECK(pwrite(fd, "b", 1, 0) == 1);
    CHECK(fstat(fd, &st) == 0);
    return st.st_mtim.tv_sec > between.tv_sec ||
           (st.st_mtim.tv_sec == between.tv_sec && st.st_mtim.tv_nsec > between.tv_nsec);
}

TEST(io_stat_leaves_times_unseen)
{
    int fd = open(test_path("times"), O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    int fine = 1;
    for (int i = 0; i < 5; i++)
        fine &= stamped_again(fd, 0);
    if (!fine) {
        printf("this kernel stamps writes coarsely after a query: nothing to check\n");
        close(fd);
        return;
    }
    int unstamped = 0;
    for (int i = 0; i < 20 && !unstamped; i++)
        unstamped = !stamped_again(fd, 1);
    printf("a fine stamp after fstat: yes; after the shim's fstat: %s\n",
           unstamped ? "no" : "yes, in 20 of 20 attempts");
    CHECK(unstamped);
    close(fd);
}
