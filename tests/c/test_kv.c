/* test_kv.c — unit tests of the key/value API: trees, put/get/del,
 * overflow values, cursors, counts, persistence, bad input, open errors,
 * footprint. */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static uint32_t tree(mote_txn *t, const char *name)
{
    uint32_t id;
    OK(mote_kv_tree(t, name, MOTE_TREE_CREATE, &id));
    return id;
}

static void put_str(mote_txn *t, uint32_t tr, const char *k, const char *v)
{
    OK(mote_kv_put(t, tr, k, strlen(k), v, strlen(v), 0));
}

static int get_eq(mote_txn *t, uint32_t tr, const char *k, const char *v)
{
    mote_val out;
    int rc = mote_kv_get(t, tr, k, strlen(k), &out);
    if (rc)
        return 0;
    return out.size == strlen(v) && !memcmp(out.data, v, out.size);
}

TEST(kv_put_get_del)
{
    mote_store *s = test_open(test_path("a.mote"), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a"), b = tree(t, "b");
    CHECK(a != b);
    put_str(t, a, "k1", "v1");
    put_str(t, b, "k1", "other");
    put_str(t, a, "", "empty key");
    CHECK(get_eq(t, a, "k1", "v1"));
    CHECK(get_eq(t, b, "k1", "other"));
    CHECK(get_eq(t, a, "", "empty key"));
    CHECK_RC(mote_kv_put(t, a, "k1", 2, "x", 1, MOTE_NOOVERWRITE), MOTE_EXISTS);
    CHECK(get_eq(t, a, "k1", "v1"));
    put_str(t, a, "k1", "replaced");
    CHECK(get_eq(t, a, "k1", "replaced"));
    OK(mote_kv_del(t, a, "k1", 2));
    CHECK_RC(mote_kv_del(t, a, "k1", 2), MOTE_NOTFOUND);
    CHECK_RC(mote_kv_get(t, a, "k1", 2, NULL), MOTE_NOTFOUND);
    OK(mote_commit(t));

    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK(get_eq(t, b, "k1", "other"));
    CHECK_RC(mote_kv_put(t, a, "z", 1, "z", 1, 0), MOTE_READONLY);
    uint32_t again;
    OK(mote_kv_tree(t, "b", 0, &again));
    CHECK(again == b);
    CHECK_RC(mote_kv_tree(t, "missing", 0, &again), MOTE_NOTFOUND);
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));

    s = test_open(test_path("a.mote"), NULL);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK(get_eq(t, b, "k1", "other"));
    CHECK(get_eq(t, a, "", "empty key"));
    mote_abort(t);
    OK(mote_close(s));
}

/* Values replaced by ones as long or shorter are written over the old cells
 * (the bytes left become holes), longer ones elsewhere; new keys between
 * them then need the holes back (compaction). Every value, the store's
 * consistency and a reopen are checked after each round. */
static void value_of_len(char *v, unsigned k, int round, unsigned len)
{
    for (unsigned i = 0; i < len; i++)
        v[i] = (char)('a' + (k * 7 + (unsigned)round * 3 + i) % 26);
}

static void check_values(mote_store *s, unsigned nkeys, const unsigned *len, const int *round)
{
    mote_txn *t;
    uint32_t tr;
    char v[200];
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "r", 0, &tr));
    for (unsigned k = 0; k < nkeys; k++) {
        uint32_t key = __builtin_bswap32(k);
        mote_val out;
        int rc = mote_kv_get(t, tr, &key, 4, &out);
        if (!len[k]) {
            CHECK(rc == MOTE_NOTFOUND);
            continue;
        }
        OK(rc);
        value_of_len(v, k, round[k], len[k]);
        CHECK(out.size == len[k] && !memcmp(out.data, v, len[k]));
    }
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
}

TEST(kv_replace_in_place)
{
    const char *p = test_path("inplace.mote");
    mote_store *s = test_open(p, NULL);
    enum { N = 600 };
    static unsigned len[N];
    static int round[N];
    const unsigned lens[] = {60, 60, 40, 55, 61, 20, 90, 90};
    char v[200];
    mote_txn *t;
    uint32_t tr;
    for (int r = 0; r < 8; r++) {
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "r", MOTE_TREE_CREATE, &tr));
        for (unsigned k = 0; k < N; k += 2) { /* even keys: replaced every round */
            uint32_t key = __builtin_bswap32(k);
            len[k] = lens[r] - k % 3; /* some longer, some as long, some shorter */
            round[k] = r;
            value_of_len(v, k, r, len[k]);
            OK(mote_kv_put(t, tr, &key, 4, v, len[k], 0));
        }
        for (unsigned k = 1 + 2 * (unsigned)r; r >= 4 && k < N; k += 8) { /* odd keys: new */
            uint32_t key = __builtin_bswap32(k);
            len[k] = 30;
            round[k] = r;
            value_of_len(v, k, r, len[k]);
            OK(mote_kv_put(t, tr, &key, 4, v, len[k], 0));
        }
        OK(mote_commit(t));
        check_values(s, N, len, round);
    }
    OK(mote_close(s));
    s = test_open(p, NULL);
    check_values(s, N, len, round);
    OK(mote_close(s));
}

TEST(kv_abort_discards)
{
    mote_store *s = test_open(test_path("a.mote"), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a");
    put_str(t, a, "keep", "1");
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    put_str(t, a, "gone", "2");
    OK(mote_kv_del(t, a, "keep", 4));
    mote_abort(t);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK(get_eq(t, a, "keep", "1"));
    CHECK_RC(mote_kv_get(t, a, "gone", 4, NULL), MOTE_NOTFOUND);
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

TEST(kv_many_keys_and_cursor)
{
    const int N = 20000;
    mote_store *s = test_open(test_path("m.mote"), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a"), b = tree(t, "b");
    uint64_t rs = 42;
    for (int i = 0; i < N; i++) {
        char k[32], v[64];
        int n = (int)(test_rand(&rs) % N); /* random order */
        snprintf(k, sizeof k, "key%08d", n);
        snprintf(v, sizeof v, "value-%d-%0*d", n, (int)(n % 40), 0);
        OK(mote_kv_put(t, a, k, strlen(k), v, strlen(v), 0));
    }
    put_str(t, b, "only", "one");
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));

    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    uint64_t cnt;
    OK(mote_kv_count(t, a, NULL, 0, NULL, 0, &cnt));
    mote_cursor *c;
    OK(mote_cursor_open(t, a, &c));
    uint64_t seen = 0;
    char prev[32] = "";
    for (int rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        OK(mote_cursor_get(c, &k, &v));
        CHECK(k.size == 11 && memcmp(k.data, "key", 3) == 0);
        CHECK(memcmp(prev, k.data, 11) < 0);
        memcpy(prev, k.data, 11);
        prev[11] = 0;
        uint64_t r;
        if (seen % 997 == 0) {
            OK(mote_cursor_rank(c, &r));
            CHECK(r == seen);
        }
        seen++;
    }
    CHECK(seen == cnt);
    CHECK(cnt > (uint64_t)N / 2);
    /* backwards */
    uint64_t back = 0;
    for (int rc = mote_cursor_last(c); rc == MOTE_OK; rc = mote_cursor_prev(c))
        back++;
    CHECK(back == cnt);
    /* nth agrees with iteration; seek modes */
    OK(mote_cursor_nth(c, 5));
    mote_val k5;
    OK(mote_cursor_get(c, &k5, NULL));
    char key5[16];
    memcpy(key5, k5.data, 11);
    OK(mote_cursor_first(c));
    for (int i = 0; i < 5; i++)
        OK(mote_cursor_next(c));
    mote_val kk;
    OK(mote_cursor_get(c, &kk, NULL));
    CHECK(!memcmp(kk.data, key5, 11));
    CHECK_RC(mote_cursor_nth(c, cnt), MOTE_NOTFOUND);
    OK(mote_cursor_seek(c, "key", 3, MOTE_SEEK_GE));
    CHECK_RC(mote_cursor_seek(c, "key", 3, MOTE_SEEK_LT), MOTE_NOTFOUND);
    OK(mote_cursor_seek(c, "kez", 3, MOTE_SEEK_LE));
    OK(mote_cursor_get(c, &kk, NULL));
    CHECK(!memcmp(kk.data, prev, 11)); /* the last key */
    CHECK_RC(mote_cursor_seek(c, "kez", 3, MOTE_SEEK_GE), MOTE_NOTFOUND);
    /* count ranges */
    uint64_t lo;
    OK(mote_kv_count(t, a, "key00000000", 11, "key00010000", 11, &lo));
    CHECK(lo > 0 && lo < cnt);
    OK(mote_kv_count(t, b, NULL, 0, NULL, 0, &cnt));
    CHECK(cnt == 1);
    mote_cursor_close(c);
    mote_abort(t);

    /* delete everything in random order, then the tree is empty */
    OK(mote_begin(s, 0, &t));
    rs = 42;
    for (int i = 0; i < N; i++) {
        char k[32];
        int n = (int)(test_rand(&rs) % N);
        snprintf(k, sizeof k, "key%08d", n);
        int rc = mote_kv_del(t, a, k, strlen(k));
        CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
    }
    OK(mote_kv_count(t, a, NULL, 0, NULL, 0, &cnt));
    CHECK(cnt == 0);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    CHECK(st.entries == 1 && st.trees == 2 && st.depth == 1);
    OK(mote_close(s));
}

/* The inline cursor steps (btree.h: the next entry in the same leaf, the
 * current entry): three small trees share one leaf, so a cursor must stop
 * where its tree's keys end inside a leaf; writes during a walk in a write
 * transaction (the walk goes on from its key, seeing what was put after it
 * and not what was deleted); an overflow value met on the way. */
TEST(kv_cursor_inline_steps)
{
    mote_store *s = test_open(test_path("steps.mote"), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t tr[3] = {tree(t, "x"), tree(t, "y"), tree(t, "z")};
    char k[16], v[16];
    for (int i = 0; i < 10; i++) /* 30 short entries: all in the root leaf */
        for (int j = 0; j < 3; j++) {
            snprintf(k, sizeof k, "k%02d", i);
            snprintf(v, sizeof v, "%d-%d", j, i);
            OK(mote_kv_put(t, tr[j], k, 3, v, strlen(v), 0));
        }
    static uint8_t big[5000];
    memset(big, 7, sizeof big);
    OK(mote_kv_put(t, tr[1], "k05", 3, big, sizeof big, 0)); /* an overflow value */
    OK(mote_commit(t));
    for (int w = 0; w < 2; w++) { /* a read transaction, then a write one */
        OK(mote_begin(s, w ? 0 : MOTE_TXN_RDONLY, &t));
        for (int j = 0; j < 3; j++) {
            mote_cursor *c;
            OK(mote_cursor_open(t, tr[j], &c));
            int n = 0, rc;
            for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c), n++) {
                mote_val kk, vv;
                OK(mote_cursor_get(c, &kk, &vv));
                snprintf(k, sizeof k, "k%02d", n);
                CHECK(kk.size == 3 && !memcmp(kk.data, k, 3));
                if (j == 1 && n == 5) {
                    CHECK(vv.size == sizeof big && !memcmp(vv.data, big, sizeof big));
                } else {
                    snprintf(v, sizeof v, "%d-%d", j, n);
                    CHECK(vv.size == strlen(v) && !memcmp(vv.data, v, vv.size));
                }
            }
            CHECK_RC(rc, MOTE_NOTFOUND);
            CHECK(n == 10);
            mote_cursor_close(c);
        }
        mote_abort(t);
    }
    /* writes while walking: delete the next key, put one after it */
    OK(mote_begin(s, 0, &t));
    mote_cursor *c;
    OK(mote_cursor_open(t, tr[0], &c));
    OK(mote_cursor_first(c)); /* k00 */
    OK(mote_kv_del(t, tr[0], "k01", 3));
    OK(mote_kv_put(t, tr[0], "k015", 4, "new", 3, 0));
    OK(mote_cursor_next(c));
    mote_val kk, vv;
    OK(mote_cursor_get(c, &kk, &vv));
    CHECK(kk.size == 4 && !memcmp(kk.data, "k015", 4) && vv.size == 3);
    OK(mote_kv_put(t, tr[0], "k015", 4, "newer", 5, 0)); /* the current entry changes */
    OK(mote_cursor_get(c, &kk, &vv));
    CHECK(vv.size == 5 && !memcmp(vv.data, "newer", 5));
    OK(mote_cursor_next(c));
    OK(mote_cursor_get(c, &kk, NULL));
    CHECK(kk.size == 3 && !memcmp(kk.data, "k02", 3));
    mote_cursor_close(c);
    mote_abort(t);
    OK(mote_close(s));
}

TEST(kv_overflow_values)
{
    mote_store *s = test_open(test_path("o.mote"), NULL);
    mote_txn *t;
    size_t sizes[] = {0, 1, 1000, 1100, 4000, 4096, 9000, 100000, 3 << 20};
    uint8_t *big = malloc(3 << 20);
    for (size_t i = 0; i < (3u << 20); i++)
        big[i] = (uint8_t)(i * 7 + i / 4096);
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char k[16];
        snprintf(k, sizeof k, "v%zu", i);
        OK(mote_kv_put(t, a, k, strlen(k), big, sizes[i], 0));
    }
    OK(mote_commit(t));
    OK(mote_close(s));
    s = test_open(test_path("o.mote"), NULL);
    OK(mote_check(s, NULL, NULL));
    OK(mote_begin(s, 0, &t));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char k[16];
        mote_val v;
        snprintf(k, sizeof k, "v%zu", i);
        OK(mote_kv_get(t, a, k, strlen(k), &v));
        CHECK(v.size == sizes[i] && (!v.size || !memcmp(v.data, big, v.size)));
    }
    /* replace big with small and delete: the chains are freed */
    OK(mote_kv_put(t, a, "v8", 2, "x", 1, 0));
    OK(mote_kv_del(t, a, "v7", 2));
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    CHECK(st.pages_free > (3u << 20) / 4096 - 10);
    OK(mote_close(s));
    free(big);
}

TEST(kv_drop_tree)
{
    mote_store *s = test_open(test_path("d.mote"), NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a"), b = tree(t, "b");
    for (int i = 0; i < 3000; i++) {
        char k[16];
        snprintf(k, sizeof k, "%06d", i);
        OK(mote_kv_put(t, a, k, 6, k, 6, 0));
        OK(mote_kv_put(t, b, k, 6, k, 6, 0));
    }
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_drop(t, "a"));
    CHECK_RC(mote_kv_tree(t, "a", 0, &a), MOTE_NOTFOUND);
    uint64_t cnt;
    OK(mote_kv_count(t, b, NULL, 0, NULL, 0, &cnt));
    CHECK(cnt == 3000);
    OK(mote_commit(t));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

TEST(kv_bad_input)
{
    mote_store *s = NULL;
    CHECK_RC(mote_open(NULL, NULL, &s), MOTE_INVALID);
    CHECK_RC(mote_open("", NULL, &s), MOTE_INVALID);
    CHECK_RC(mote_open(test_path("x.mote"), NULL, NULL), MOTE_INVALID);
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    CHECK_RC(mote_open(test_path("missing.mote"), &ro, &s), MOTE_NOTFOUND);
    mote_options none = {0, 0, 0, NULL};
    CHECK_RC(mote_open(test_path("missing.mote"), &none, &s), MOTE_NOTFOUND);
    mote_options badps = {MOTE_CREATE, 1000, 0, NULL};
    CHECK_RC(mote_open(test_path("ps.mote"), &badps, &s), MOTE_INVALID);
    CHECK(s == NULL);
    /* not a store */
    FILE *f = fopen(test_path("junk.mote"), "w");
    for (int i = 0; i < 10000; i++)
        fputc('j', f);
    fclose(f);
    CHECK_RC(mote_open(test_path("junk.mote"), NULL, &s), MOTE_FORMAT);
    CHECK(strstr(mote_last_open_error(), "junk.mote") != NULL);

    s = test_open(test_path("a.mote"), NULL);
    mote_store *s2;
    CHECK_RC(mote_open(test_path("a.mote"), NULL, &s2), MOTE_BUSY);
    mote_txn *t;
    CHECK_RC(mote_begin(s, 0x80, &t), MOTE_INVALID);
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "a");
    char big[MOTE_MAX_KEY + 1] = {0};
    CHECK_RC(mote_kv_put(t, a, big, sizeof big, "v", 1, 0), MOTE_TOOBIG);
    OK(mote_kv_put(t, a, big, MOTE_MAX_KEY, "v", 1, 0));
    CHECK_RC(mote_kv_put(t, 999, "k", 1, "v", 1, 0), MOTE_INVALID);
    CHECK_RC(mote_kv_put(t, 0, "k", 1, "v", 1, 0), MOTE_INVALID);
    CHECK_RC(mote_kv_put(t, a, NULL, 1, "v", 1, 0), MOTE_INVALID);
    CHECK_RC(mote_kv_put(t, a, "k", 1, NULL, 1, 0), MOTE_INVALID);
    CHECK_RC(mote_kv_put(t, a, "k", 1, "v", 1, 0x40), MOTE_INVALID);
    CHECK_RC(mote_kv_tree(t, "", MOTE_TREE_CREATE, &a), MOTE_INVALID);
    CHECK_RC(mote_close(s), MOTE_BUSY); /* txn still open */
    OK(mote_commit(t));
    OK(mote_close(s));
    CHECK_RC(mote_commit(NULL), MOTE_INVALID);
    mote_abort(NULL);
    OK(mote_close(NULL));
}

/* The errno and file of the last OS failure, checked against want/path. */
static int oserror_is(int want, const char *path)
{
    const char *p = (const char *)1;
    int e = mote_last_oserror(&p);
    if (e != want || (path ? !p || strcmp(p, path) : p != NULL)) {
        fprintf(stderr, "mote_last_oserror: %d (%s), expected %d (%s); message: %s\n", e,
                p ? p : "NULL", want, path ? path : "NULL", mote_errmsg(NULL));
        return 0;
    }
    return 1;
}

/* mote_open's failures name the file and, when the operating system caused
 * them, report its errno and the path through mote_last_oserror: a missing
 * directory (MOTE_IO, not "store does not exist"), a missing file, a
 * directory. Other failures report no errno. */
TEST(kv_open_errors)
{
    mote_store *s = NULL;
    char path[600], dir[600], want[1400];
    snprintf(path, sizeof path, "%s", test_path("nope/dir/x.mote"));
    snprintf(dir, sizeof dir, "%s", test_path("nope/dir"));
    CHECK_RC(mote_open(path, NULL, &s), MOTE_IO);
    CHECK(s == NULL && oserror_is(ENOENT, path));
    snprintf(want, sizeof want, "cannot create store %s: directory %s does not exist", path,
             dir);
    CHECK(!strcmp(mote_last_open_error(), want));
    mote_clear_error();
    CHECK(oserror_is(0, NULL) && !*mote_errmsg(NULL));

    /* a missing file, not to be created */
    mote_options none = {0, 0, 0, NULL}, ro = {MOTE_RDONLY, 0, 0, NULL};
    snprintf(path, sizeof path, "%s", test_path("missing.mote"));
    snprintf(want, sizeof want, "store %s does not exist", path);
    CHECK_RC(mote_open(path, &none, &s), MOTE_NOTFOUND);
    CHECK(oserror_is(ENOENT, path) && !strcmp(mote_last_open_error(), want));
    CHECK_RC(mote_open(path, &ro, &s), MOTE_NOTFOUND);
    CHECK(oserror_is(ENOENT, path));

    /* a directory, writable and read-only */
    snprintf(path, sizeof path, "%s", test_path("adir"));
    CHECK(mkdir(path, 0755) == 0);
    CHECK_RC(mote_open(path, NULL, &s), MOTE_IO);
    CHECK(oserror_is(EISDIR, path) && strstr(mote_last_open_error(), path));
    CHECK_RC(mote_open(path, &ro, &s), MOTE_IO);
    CHECK(oserror_is(EISDIR, path) && strstr(mote_last_open_error(), path));

    /* not an OS failure: the errno of the one before is gone */
    snprintf(path, sizeof path, "%s", test_path("junk.mote"));
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 10000; i++)
        fputc('j', f);
    fclose(f);
    CHECK_RC(mote_open(path, NULL, &s), MOTE_FORMAT);
    CHECK(oserror_is(0, NULL));
}

/* A zero-byte file is a store of 4096-byte pages that was never committed
 * (creation writes nothing until the first commit; a crash before it leaves
 * one): read-only it opens empty and writes nothing; a writable open
 * without MOTE_CREATE uses it too, with the page size it asks for; its
 * first commit makes it a store of two pages or more. */
TEST(kv_open_empty_file)
{
    mote_store *s = NULL;
    mote_options none = {0, 0, 0, NULL}, ro = {MOTE_RDONLY, 0, 0, NULL};
    mote_options big = {0, 8192, 0, NULL};
    char path[600];
    snprintf(path, sizeof path, "%s", test_path("empty.mote"));
    FILE *f = fopen(path, "w");
    fclose(f);
    struct stat st;
    OK(mote_open(path, &ro, &s));
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    CHECK_RC(mote_kv_tree(t, "t", 0, &tr), MOTE_NOTFOUND);
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    CHECK(stat(path, &st) == 0 && st.st_size == 0);
    s = test_open(path, &none); /* without MOTE_CREATE too */
    mote_stat sst;
    OK(mote_store_stat(s, &sst)); /* (it said 8192: the slots creation did not write) */
    CHECK(sst.file_bytes == 0 && sst.pages == 2 && sst.page_size == 4096);
    OK(mote_close(s));
    CHECK(stat(path, &st) == 0 && st.st_size == 0);
    s = test_open(path, &big); /* larger pages: the creation page says so at once */
    OK(mote_close(s));
    CHECK(stat(path, &st) == 0 && st.st_size == 8192);
    OK(mote_open(path, &ro, &s));
    OK(mote_close(s));
    CHECK(unlink(path) == 0);
    f = fopen(path, "w");
    fclose(f);
    s = test_open(path, &none);
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
    OK(mote_commit(t));
    OK(mote_close(s));
    CHECK(stat(path, &st) == 0 && st.st_size >= 8192);
    OK(mote_open(path, &ro, &s));
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    OK(mote_kv_get(t, tr, "k", 1, NULL));
    mote_abort(t);
    OK(mote_close(s));
}

/* A symbolic link is followed: to a missing file, MOTE_CREATE makes the
 * file it names (one open with O_CREAT); without it the store does not
 * exist. */
TEST(kv_open_through_symlink)
{
    mote_store *s = NULL;
    mote_options none = {0, 0, 0, NULL};
    char link[600], target[600];
    snprintf(link, sizeof link, "%s", test_path("link.mote"));
    snprintf(target, sizeof target, "%s", test_path("target.mote"));
    CHECK(symlink(target, link) == 0);
    CHECK_RC(mote_open(link, &none, &s), MOTE_NOTFOUND);
    CHECK(oserror_is(ENOENT, link));
    s = test_open(link, NULL);
    OK(mote_close(s));
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat(target, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0);
    s = test_open(target, &none);
    OK(mote_close(s));
}

/* MOTE_EXCLUSIVE keeps other processes out (shared opens: test_proc.c). */
TEST(kv_locked_by_other_process)
{
    const char *p = test_path("l.mote");
    mote_store *s = test_open(p, NULL);
    OK(mote_close(s));
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        mote_options ex = {MOTE_EXCLUSIVE, 0, 0, NULL};
        mote_store *c = test_open(p, &ex);
        char x = 1;
        CHECK(write(fds[1], &x, 1) == 1);
        sleep(30);
        mote_close(c);
        _exit(0);
    }
    char x;
    CHECK(read(fds[0], &x, 1) == 1);
    CHECK_RC(mote_open(p, NULL, &s), MOTE_LOCKED);
    CHECK(strstr(mote_last_open_error(), "another process") != NULL);
    CHECK(mote_last_oserror(NULL) == 0); /* a lock held elsewhere: no OS failure */
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    CHECK_RC(mote_open(p, &ro, &s), MOTE_LOCKED);
    kill(pid, 9);
    waitpid(pid, NULL, 0);
    s = test_open(p, NULL);
    OK(mote_close(s));
}

TEST(kv_tiny_store_footprint)
{
    const char *p = test_path("tiny.mote");
    mote_store *s = test_open(p, NULL);
    mote_txn *t;
    OK(mote_begin(s, 0, &t));
    uint32_t a = tree(t, "notes");
    for (int i = 0; i < 10; i++) {
        char k[8], v[64];

        snprintf(k, sizeof k, "%d", i);
        snprintf(v, sizeof v, "note number %d, a short agent memory", i);
        OK(mote_kv_put(t, a, k, strlen(k), v, strlen(v), 0));
    }
    OK(mote_commit(t));
    OK(mote_close(s));
    struct stat st;
    CHECK(stat(p, &st) == 0);
    printf("ten small values: %lld bytes, %lld blocks of 512\n", (long long)st.st_size,
           (long long)st.st_blocks);
    CHECK(st.st_size <= 8192);
    CHECK(st.st_blocks * 512 <= 8192);
}

TEST(kv_page_sizes)
{
    unsigned sizes[] = {4096, 8192, 16384, 65536};
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%u.mote", sizes[i]);
        mote_options o = {MOTE_CREATE, sizes[i], 0, NULL};
        mote_store *s = test_open(test_path(name), &o);
        mote_txn *t;
        OK(mote_begin(s, 0, &t));
        uint32_t a = tree(t, "a");
        for (int k = 0; k < 5000; k++) {
            char key[16];
            snprintf(key, sizeof key, "%08d", k * 7919 % 5000);
            OK(mote_kv_put(t, a, key, 8, key, 8, 0));
        }
        OK(mote_commit(t));
        OK(mote_close(s));
        s = test_open(test_path(name), NULL);
        mote_stat st;
        OK(mote_store_stat(s, &st));
        CHECK(st.page_size == sizes[i] && st.entries == 5000);
        OK(mote_check(s, NULL, NULL));
        OK(mote_close(s));
    }
}

TEST(kv_shrink_at_close)
{
    const char *p = test_path("shrink.mote");
    mote_store *s = test_open(p, NULL);
    mote_txn *t;
    uint32_t tr;
    static uint8_t v[300];
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t i = 0; i < 30000; i++)
        OK(mote_kv_put(t, tr, &i, 4, v, sizeof v, 0));
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    for (uint32_t i = 100; i < 30000; i++)
        OK(mote_kv_del(t, tr, &i, 4));
    OK(mote_commit(t));
    mote_stat st;
    OK(mote_store_stat(s, &st));
    uint64_t before = st.file_bytes;
    OK(mote_close(s));
    struct stat fs;
    CHECK(stat(p, &fs) == 0);
    printf("file: %llu bytes before close, %lld after\n", (unsigned long long)before,
           (long long)fs.st_size);
    CHECK(before > (8u << 20));
    CHECK(fs.st_size < (1 << 20));
    s = test_open(p, NULL);
    OK(mote_check(s, NULL, NULL));
    uint64_t n;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_count(t, tr, NULL, 0, NULL, 0, &n));
    CHECK(n == 100);
    mote_abort(t);
    /* the close left room past the last page (check.c CLOSE_ROOM_BYTES): a
     * commit that rewrites every page of the store writes into it, the file
     * does not grow */
    OK(mote_begin(s, 0, &t));
    memset(v, 7, sizeof v);
    for (uint32_t i = 0; i < 100; i++)
        OK(mote_kv_put(t, tr, &i, 4, v, sizeof v, 0));
    OK(mote_commit(t));
    OK(mote_store_stat(s, &st));
    printf("after a commit in the next session: %llu bytes\n", (unsigned long long)st.file_bytes);
    CHECK(st.file_bytes == (uint64_t)fs.st_size);
    OK(mote_close(s));
}

/* A store of a few MB (a tree of three levels, bitmap pages past the
 * slot's) that lost most of its entries and whose free pages are inside the
 * file: its close repacks it (check.c repack); what is left reads back, and
 * the file is a fraction of what it was. */
TEST(kv_repack_at_close)
{
    const char *p = test_path("repack.mote");
    mote_options o = {MOTE_CREATE | MOTE_REPACK, 0, 0, NULL};
    mote_store *s = test_open(p, &o);
    mote_txn *t;
    uint32_t tr;
    uint8_t v[120];
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t i = 0; i < 16000; i++) { /* keys in a shuffled order: leaves part full */
        uint32_t k = __builtin_bswap32(i * 2654435761u);
        memset(v, (int)(k & 0xff), sizeof v);
        OK(mote_kv_put(t, tr, &k, 4, v, sizeof v, 0));
    }
    OK(mote_commit(t));
    OK(mote_begin(s, 0, &t));
    for (uint32_t i = 0; i < 16000; i++) /* two of three go, all over the tree */
        if (i % 3) {
            uint32_t k = __builtin_bswap32(i * 2654435761u);
            OK(mote_kv_del(t, tr, &k, 4));
        }
    OK(mote_commit(t));
    mote_stat before, after;
    OK(mote_store_stat(s, &before));
    OK(mote_close(s));
    s = test_open(p, NULL);
    OK(mote_check(s, NULL, NULL));
    OK(mote_store_stat(s, &after));
    printf("before close: %llu pages (%llu free), depth %u, %llu bytes; after: %llu pages "
           "(%llu free), depth %u, %llu bytes\n",
           (unsigned long long)before.pages, (unsigned long long)before.pages_free, before.depth,
           (unsigned long long)before.file_bytes, (unsigned long long)after.pages,
           (unsigned long long)after.pages_free, after.depth,
           (unsigned long long)after.file_bytes);
    CHECK(before.depth >= 3 && before.pages > 1100 && before.file_bytes < (8u << 20));
    CHECK(after.entries == before.entries && after.file_bytes * 2 < before.file_bytes);
    /* repacked, not only moved: under half the pages that were in use */
    CHECK(after.pages * 2 < before.pages - before.pages_free && after.pages_free * 8 <= after.pages);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    for (uint32_t i = 0; i < 16000; i++) {
        uint32_t k = __builtin_bswap32(i * 2654435761u);
        mote_val val;
        int rc = mote_kv_get(t, tr, &k, 4, &val);
        CHECK(i % 3 ? rc == MOTE_NOTFOUND
                    : rc == MOTE_OK && val.size == sizeof v &&
                          ((const uint8_t *)val.data)[119] == (uint8_t)(k & 0xff));
    }
    mote_abort(t);
    OK(mote_close(s));
}

static void count_problem(void *ctx, const char *msg)
{
    (*(int *)ctx)++;
    printf("  problem: %s\n", msg);
}

TEST(kv_damaged_page_detected)
{
    const char *p = test_path("dmg.mote");
    mote_store *s = test_open(p, NULL);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t i = 0; i < 5000; i++)
        OK(mote_kv_put(t, tr, &i, 4, "some value bytes", 16, 0));
    OK(mote_commit(t));
    OK(mote_close(s));
    FILE *f = fopen(p, "r+b"); /* flip one byte in the middle of page 5 */
    CHECK(f && fseek(f, 5 * 4096 + 2000, SEEK_SET) == 0);
    int c = fgetc(f);
    CHECK(fseek(f, 5 * 4096 + 2000, SEEK_SET) == 0 && fputc(c ^ 0x40, f) != EOF);
    fclose(f);
    s = test_open(p, NULL); /* clean close marker: open does not verify */
    int n = 0;
    CHECK_RC(mote_check(s, count_problem, &n), MOTE_CORRUPT);
    CHECK(n >= 1);
    /* reading through the damaged page fails cleanly, other reads work */
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    int bad = 0, good = 0;
    for (uint32_t i = 0; i < 5000; i++) {
        int rc = mote_kv_get(t, tr, &i, 4, NULL);
        CHECK(rc == MOTE_OK || rc == MOTE_CORRUPT);
        bad += rc == MOTE_CORRUPT;
        good += rc == MOTE_OK;
    }
    printf("reads: %d fine, %d report the damage\n", good, bad);
    CHECK(bad > 0 && good > 0);
    CHECK(strstr(mote_errmsg(s), "checksum") != NULL || bad);
    mote_abort(t);
    OK(mote_close(s));
}
