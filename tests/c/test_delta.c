/*
 * test_delta.c — mote_delta / mote_delta_apply: copies kept up to date by
 * deltas equal the store at each delta's commit (every entry, mote_check
 * clean), deltas of one small commit are a few pages, a damaged or
 * misplaced delta writes nothing, and a delta taken while another process
 * writes is of a durable commit.
 */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checksum.h"
#include "memio.h"
#include "pager.h"
#include "test.h"

/* A digest of tree "t" (every key and value, in order) and its entries. */
static uint64_t digest(mote_store *s, uint64_t *n)
{
    mote_txn *t;
    uint32_t tr;
    mote_cursor *c;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    OK(mote_cursor_open(t, tr, &c));
    uint64_t h = 1469598103934665603ull;
    *n = 0;
    for (int rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        OK(mote_cursor_get(c, &k, &v));
        const uint8_t *parts[2] = {k.data, v.data};
        size_t lens[2] = {k.size, v.size};
        for (int p = 0; p < 2; p++) {
            h = (h ^ lens[p]) * 1099511628211ull;
            for (size_t i = 0; i < lens[p]; i++)
                h = (h ^ parts[p][i]) * 1099511628211ull;
        }
        (*n)++;
    }
    mote_cursor_close(c);
    mote_abort(t);
    return h;
}

/* The copy at `path` equals `want` (digest, entries) at commit `txnid`. */
static void check_copy(const char *path, uint64_t want, uint64_t entries, uint64_t txnid)
{
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *c;
    OK(mote_open(path, &ro, &c));
    mote_stat st;
    OK(mote_store_stat(c, &st));
    CHECK(st.txnid == txnid);
    uint64_t n;
    CHECK(digest(c, &n) == want && n == entries);
    OK(mote_check(c, NULL, NULL));
    OK(mote_close(c));
}

/* Random puts (small values, and values of several pages), deletes and
 * replacements in `commits` commits. */
static void churn(mote_store *s, uint64_t *rs, int commits, int keys)
{
    static uint8_t big[20000];
    for (int c = 0; c < commits; c++) {
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
        int ops = 1 + (int)(test_rand(rs) % 40);
        for (int i = 0; i < ops; i++) {
            char k[24];
            snprintf(k, sizeof k, "k%06d", (int)(test_rand(rs) % (uint64_t)keys));
            uint64_t r = test_rand(rs) % 10;
            if (r < 2) {
                int rc = mote_kv_del(t, tr, k, strlen(k));
                CHECK(rc == MOTE_OK || rc == MOTE_NOTFOUND);
            } else {
                size_t len = r == 9 ? 5000 + test_rand(rs) % 15000 : 1 + test_rand(rs) % 300;
                for (size_t b = 0; b < len; b += 8) {
                    uint64_t x = test_rand(rs);
                    memcpy(big + b, &x, len - b < 8 ? len - b : 8);
                }
                OK(mote_kv_put(t, tr, k, strlen(k), big, len, 0));
            }
        }
        OK(mote_commit(t));
    }
}

/* test_path's buffers are reused: a path kept across calls is copied */
#define PATH(var, name) char var[600]; snprintf(var, sizeof var, "%s", test_path(name))

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* A copy made from a full delta and kept up to date by deltas equals the
 * store at every delta's commit, across checkpoints, commit records, a
 * clean close and reopen, overflow values and deletes. */
TEST(delta_copy_follows_the_store)
{
    PATH(p, "src.mote");
    PATH(copy, "copy.mote");
    mote_store *s = test_open(p, NULL);
    uint64_t rs = 7, since = 0, txnid = 0;
    int rounds = 12 * test_scale();
    for (int round = 0; round < rounds; round++) {
        churn(s, &rs, 1 + (int)(test_rand(&rs) % 12), 400);
        if (round == 5) { /* a clean close: the next opens from the marker */
            OK(mote_close(s));
            s = test_open(p, NULL);
        }
        char dp[64];
        snprintf(dp, sizeof dp, "d%02d.delta", round);
        PATH(dpath, dp);
        OK(mote_delta(s, since, dpath, 0, &txnid));
        mote_stat st;
        OK(mote_store_stat(s, &st));
        CHECK(txnid == st.txnid && txnid > since);
        OK(mote_delta_apply(copy, dpath, NULL));
        uint64_t n, h = digest(s, &n);
        check_copy(copy, h, n, txnid);
        printf("round %d: commits %llu..%llu, delta %ld bytes, %llu entries\n", round,
               (unsigned long long)since, (unsigned long long)txnid, file_size(dpath),
               (unsigned long long)n);
        since = txnid;
    }
    OK(mote_close(s));
}

/* One small commit's delta is a few pages (its leaf, its record, a slot),
 * not the store. */
TEST(delta_of_a_small_commit_is_small)
{
    PATH(p, "s.mote");
    PATH(copy, "c.mote");
    mote_store *s = test_open(p, NULL);
    uint64_t rs = 3, since = 0;
    churn(s, &rs, 30, 2000);
    OK(mote_delta(s, 0, test_path("full.delta"), 0, &since));
    OK(mote_delta_apply(copy, test_path("full.delta"), NULL));
    long full = file_size(test_path("full.delta")), most = 0;
    for (int i = 0; i < 10; i++) {
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
        OK(mote_kv_put(t, tr, "k000100", 7, "one small value", 15, 0));
        OK(mote_commit(t));
        char dp[32];
        snprintf(dp, sizeof dp, "%d.delta", i);
        uint64_t to;
        OK(mote_delta(s, since, test_path(dp), 0, &to));
        OK(mote_delta_apply(copy, test_path(dp), NULL));
        long n = file_size(test_path(dp));
        most = n > most ? n : most;
        since = to;
    }
    printf("full delta %ld bytes; one small commit's: at most %ld bytes\n", full, most);
    CHECK(most <= 64 + 32 + 6 * (8 + 4096) && most * 10 < full);
    uint64_t n, h = digest(s, &n);
    check_copy(copy, h, n, since);
    OK(mote_close(s));
}

/* A delta whose `since` is not the copy's commit, a damaged one, one cut
 * short, something that is not a delta: refused, the copy left as it was;
 * a full delta onto an existing file and bad arguments too. */
TEST(delta_refused_where_it_does_not_fit)
{
    PATH(p, "s.mote");
    PATH(copy, "c.mote");
    mote_store *s = test_open(p, NULL);
    uint64_t rs = 5, t1, t2, t3;
    churn(s, &rs, 10, 300);
    OK(mote_delta(s, 0, test_path("1.delta"), 0, &t1));
    churn(s, &rs, 3, 300);
    OK(mote_delta(s, t1, test_path("2.delta"), 0, &t2));
    churn(s, &rs, 3, 300);
    OK(mote_delta(s, t2, test_path("3.delta"), 0, &t3));
    CHECK_RC(mote_delta(s, t3 + 1, test_path("x.delta"), 0, NULL), MOTE_INVALID);
    CHECK_RC(mote_delta(s, t2, test_path("3.delta"), 0, NULL), MOTE_EXISTS);
    CHECK_RC(mote_delta(NULL, 0, test_path("y.delta"), 0, NULL), MOTE_INVALID);
    OK(mote_delta_apply(copy, test_path("1.delta"), NULL));
    uint64_t n1, h1 = 0;
    { /* the copy's own digest at t1 */
        mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
        mote_store *c;
        OK(mote_open(copy, &ro, &c));
        h1 = digest(c, &n1);
        OK(mote_close(c));
    }
    /* out of order: the copy is at t1, this delta goes from t2 */
    CHECK_RC(mote_delta_apply(copy, test_path("3.delta"), NULL), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "is at commit") != NULL);
    check_copy(copy, h1, n1, t1);
    /* a full delta onto an existing copy */
    CHECK_RC(mote_delta_apply(copy, test_path("1.delta"), NULL), MOTE_EXISTS);
    /* damaged: one byte of a page, then cut short, then not a delta */
    FILE *f = fopen(test_path("2.delta"), "rb");
    CHECK(f);
    static uint8_t img[1 << 20];
    size_t len = fread(img, 1, sizeof img, f);
    fclose(f);
    CHECK(len > 200 && len < sizeof img);
    PATH(bad, "bad.delta");
    for (int kind = 0; kind < 4; kind++) {
        uint8_t *b = malloc(len);
        memcpy(b, img, len);
        size_t n = len;
        if (kind == 0)
            b[64 + 8 + 100] ^= 1; /* in the first page */
        else if (kind == 1)
            n = len - 4096; /* cut short */
        else if (kind == 2)
            b[20] ^= 1; /* the header's since */
        else
            memcpy(b, "NOTADELT", 8);
        unlink(bad);
        f = fopen(bad, "wb");
        CHECK(f && fwrite(b, 1, n, f) == n);
        fclose(f);
        free(b);
        CHECK_RC(mote_delta_apply(copy, bad, NULL), kind == 3 ? MOTE_FORMAT : MOTE_CORRUPT);
        check_copy(copy, h1, n1, t1);
    }
    CHECK_RC(mote_delta_apply(copy, test_path("none.delta"), NULL), MOTE_NOTFOUND);
    CHECK_RC(mote_delta_apply(NULL, bad, NULL), MOTE_INVALID);
    /* in order it goes on */
    OK(mote_delta_apply(copy, test_path("2.delta"), NULL));
    OK(mote_delta_apply(copy, test_path("3.delta"), NULL));
    uint64_t n, h = digest(s, &n);
    check_copy(copy, h, n, t3);
    /* a new store has nothing durable to ship */
    mote_store *fresh;
    mote_options o = {MOTE_CREATE, 0, 0, NULL};
    OK(mote_open(test_path("new.mote"), &o, &fresh));
    CHECK_RC(mote_delta(fresh, 0, test_path("new.delta"), 0, NULL), MOTE_NOTFOUND);
    CHECK(access(test_path("new.delta"), F_OK) != 0);
    OK(mote_close(fresh));
    OK(mote_close(s));
}

/* Deltas taken by a process that opened the store read-only while another
 * commits as fast as it can: each applies and the copy opens at its
 * commit, clean by mote_check, and one more delta once the writer is done
 * makes the copy equal the store. */
TEST(delta_while_another_process_writes)
{
    PATH(p, "w.mote");
    PATH(copy, "wc.mote");
    mote_store *s = test_open(p, NULL);
    churn(s, &(uint64_t){9}, 5, 200);
    OK(mote_close(s));
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        mote_store *w = test_open(p, NULL);
        uint64_t rs = 11;
        char x = 0;
        CHECK(write(go[1], &x, 1) == 1);
        for (int i = 0; i < 300; i++)
            churn(w, &rs, 1, 200);
        OK(mote_close(w));
        _exit(0);
    }
    char x;
    CHECK(read(go[0], &x, 1) == 1);
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL}; /* (a snapshot: read-only is enough) */
    OK(mote_open(p, &ro, &s));
    uint64_t since = 0, to = 0;
    for (int i = 0; i < 15; i++) {
        char dp[32];
        snprintf(dp, sizeof dp, "w%d.delta", i);
        OK(mote_delta(s, since, test_path(dp), 0, &to));
        OK(mote_delta_apply(copy, test_path(dp), NULL));
        mote_store *c;
        OK(mote_open(copy, &ro, &c));
        OK(mote_check(c, NULL, NULL));
        OK(mote_close(c));
        since = to;
        usleep(2000);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the copy is at `since`; the store is past it: one more delta brings it level */
    OK(mote_delta(s, since, test_path("last.delta"), 0, &to));
    OK(mote_delta_apply(copy, test_path("last.delta"), NULL));
    uint64_t n, h = digest(s, &n);
    check_copy(copy, h, n, to);
    printf("15 deltas beside a writer, then one more: the copy at commit %llu\n",
           (unsigned long long)to);
    OK(mote_close(s));
}

/* Two commits of a store in memory and a copy at the first: what the fault
 * and crash tests start from (memio images of the store, the copy and the
 * delta between them, and each commit's entries). */
typedef struct twocommits {
    uint64_t since, to, h0, n0, h1, n1;
    uint8_t *simg, *cimg, *dimg;
    size_t slen, clen, dlen;
} twocommits;

static uint8_t *image_of(memio *m, const char *path, size_t *len)
{
    const uint8_t *p = memio_get(m, path, len);
    uint8_t *img = malloc(*len ? *len : 1);
    memcpy(img, p, *len);
    return img;
}

static void two_commits(twocommits *w, uint64_t seed)
{
    memio m;
    memio_init(&m);
    mote_options o = {MOTE_CREATE, 0, 0, &m.io};
    mote_store *s;
    OK(mote_open("/f/s.mote", &o, &s));
    uint64_t rs = seed;
    churn(s, &rs, 8, 300);
    OK(mote_delta(s, 0, "/f/full.delta", 0, &w->since));
    OK(mote_delta_apply("/f/c.mote", "/f/full.delta", &o));
    w->h0 = digest(s, &w->n0);
    churn(s, &rs, 3, 300);
    OK(mote_delta(s, w->since, "/f/d.delta", 0, &w->to));
    w->h1 = digest(s, &w->n1);
    OK(mote_close(s));
    w->simg = image_of(&m, "/f/s.mote", &w->slen);
    w->cimg = image_of(&m, "/f/c.mote", &w->clen);
    w->dimg = image_of(&m, "/f/d.delta", &w->dlen);
    memio_free(&m);
}

/* Files in memory holding the two-commit store, its copy and the delta. */
static void files_of(memio *f, const twocommits *w)
{
    memio_init(f);
    memio_set(f, "/f/s.mote", w->simg, w->slen);
    memio_set(f, "/f/c.mote", w->cimg, w->clen); /* (durable as they are) */
    memio_set(f, "/f/d.delta", w->dimg, w->dlen);
}

static void two_commits_free(twocommits *w)
{
    free(w->simg);
    free(w->cimg);
    free(w->dimg);
}

/* Where the copy in `f` opens: 0 at the first commit, 1 at the second (each
 * with its entries: checked), 2 refused (MOTE_CORRUPT). */
static int copy_state(memio *f, const twocommits *w)
{
    mote_store *c;
    mote_options ro = {MOTE_RDONLY, 0, 0, &f->io};
    int rc = mote_open("/f/c.mote", &ro, &c);
    if (rc) {
        CHECK(rc == MOTE_CORRUPT);
        return 2;
    }
    mote_stat st;
    uint64_t cnt;
    OK(mote_store_stat(c, &st));
    if (st.txnid != w->since && st.txnid != w->to)
        fprintf(stderr, "the copy at %llu (since %llu, to %llu)\n",
                (unsigned long long)st.txnid, (unsigned long long)w->since,
                (unsigned long long)w->to);
    int at = st.txnid == w->since ? 0 : 1;
    CHECK(st.txnid == (at ? w->to : w->since));
    CHECK(digest(c, &cnt) == (at ? w->h1 : w->h0) && cnt == (at ? w->n1 : w->n0));
    OK(mote_close(c));
    return at;
}

/* An I/O failure (EIO) at every call of a delta and of its apply, on files
 * in memory: each fails with MOTE_IO or works, and the copy then opens at
 * the commit it was at, or at the delta's, with that commit's entries, or
 * not at all, saying that a delta was being applied (its pages overwrite
 * pages the old commit used): never at another commit. */
TEST(delta_io_failure_at_every_call)
{
    twocommits w;
    two_commits(&w, 13);
    long cases = 0, at[3] = {0, 0, 0};
    for (long n = 1;; n++) {
        memio f;
        files_of(&f, &w);
        mote_options fo = {0, 0, 0, &f.io};
        mote_store *s;
        OK(mote_open("/f/s.mote", &fo, &s));
        memio_reset_counts(&f);
        f.fail_at = n;
        f.fail_errno = EIO;
        uint64_t to;
        int rc = mote_delta(s, w.since, "/f/e.delta", 0, &to);
        if (!rc)
            rc = mote_delta_apply("/f/c.mote", "/f/e.delta", &fo);
        int failed = f.ops >= n;
        f.fail_at = 0;
        mote_close(s);
        if (!failed) {
            OK(rc);
            memio_free(&f);
            break;
        }
        CHECK_RC(rc, MOTE_IO);
        int where = copy_state(&f, &w);
        if (where == 2) /* its slots unusable: said so */
            CHECK(strstr(mote_last_open_error(), "a delta was being applied") != NULL);
        at[where]++;
        cases++;
        memio_free(&f);
    }
    printf("%ld failure points: the copy at the old commit %ld, at the new %ld, refused %ld\n",
           cases, at[0], at[1], at[2]);
    CHECK(cases > 10 && at[0] > 0);
    two_commits_free(&w);
}

/* The copy after a crash at every point of an apply (the machine stops:
 * writes since the last sync kept, lost, torn or reordered, memio's crash
 * images): it opens at the commit it was at or at the delta's, with that
 * commit's entries, or is refused (MOTE_CORRUPT): never another commit. */
TEST(delta_crash_during_apply)
{
    twocommits w;
    two_commits(&w, 17);
    long images = 0, at[3] = {0, 0, 0};
    for (long k = 1;; k++) {
        memio f;
        files_of(&f, &w);
        mote_options fo = {0, 0, 0, &f.io};
        f.crash_at = k;
        int rc = mote_delta_apply("/f/c.mote", "/f/d.delta", &fo);
        int crashed = f.crashed;
        for (uint64_t seed = 1; seed <= 6; seed++) {
            size_t len;
            uint8_t *img = memio_crash_image(&f, "/f/c.mote", seed * 7919 + (uint64_t)k,
                                             (seed % 3 == 0 ? MEMIO_HOSTILE : 0) |
                                                 (seed % 2 ? MEMIO_WHOLE : 0), &len);
            memio r;
            memio_init(&r);
            memio_set(&r, "/f/c.mote", img, len);
            at[copy_state(&r, &w)]++;
            memio_free(&r);
            free(img);
            images++;
        }
        memio_free(&f);
        if (!crashed) {
            OK(rc);
            break;
        }
    }
    printf("%ld crash images of an apply: at the old commit %ld, at the new %ld, refused %ld\n",
           images, at[0], at[1], at[2]);
    CHECK(at[0] > 0 && at[1] > 0 && at[2] > 0);
    two_commits_free(&w);
}

/* The syncs of an apply: a full delta 2 (pages, then slots) and the
 * directory's; any other 4 (each root slot made unusable, pages, slots);
 * none with MOTE_NOSYNC, which still gives the same copy. */
TEST(delta_syncs)
{
    twocommits w;
    two_commits(&w, 19);
    for (int nosync = 0; nosync < 2; nosync++) {
        memio f;
        files_of(&f, &w);
        mote_options so = {0, 0, 0, &f.io}, ao = {nosync ? MOTE_NOSYNC : 0u, 0, 0, &f.io};
        mote_store *s;
        OK(mote_open("/f/s.mote", &so, &s));
        memio_reset_counts(&f);
        OK(mote_delta(s, 0, "/f/0.delta", nosync ? MOTE_NOSYNC : 0u, NULL));
        printf("a delta written%s: %ld fdatasync\n", nosync ? " with MOTE_NOSYNC" : "", f.syncs);
        CHECK(f.syncs == (nosync ? 0 : 1) && f.dirsyncs == 0);
        OK(mote_close(s));
        memio_reset_counts(&f);
        OK(mote_delta_apply("/f/new.mote", "/f/0.delta", &ao));
        printf("full delta applied%s: %ld fdatasync, %ld directory fsync\n",
               nosync ? " with MOTE_NOSYNC" : "", f.syncs, f.dirsyncs);
        CHECK(f.syncs == (nosync ? 0 : 2) && f.dirsyncs == (nosync ? 0 : 1));
        memio_reset_counts(&f);
        OK(mote_delta_apply("/f/c.mote", "/f/d.delta", &ao));
        printf("a delta applied%s: %ld fdatasync\n", nosync ? " with MOTE_NOSYNC" : "", f.syncs);
        CHECK(f.syncs == (nosync ? 0 : 4) && f.dirsyncs == 0);
        CHECK(copy_state(&f, &w) == 1);
        memio_free(&f);
    }
    two_commits_free(&w);
}

/* The store's identity: given by the first write, kept by a copy, new in a
 * compacted copy, no tree (mote_store_stat, mote_check); a delta of another
 * store at the same commit is refused and leaves the copy as it was. */
TEST(delta_of_another_store_refused)
{
    PATH(pa, "a.mote");
    PATH(pb, "b.mote");
    PATH(copy, "c.mote");
    mote_options o = {MOTE_CREATE, 0, 0, NULL};
    mote_store *a, *b;
    uint64_t ia, ib, ic, t1, t1b, t2b;
    OK(mote_open(pa, &o, &a));
    OK(mote_store_ident(a, &ia));
    CHECK(ia == 0); /* nothing written yet */
    uint64_t ra = 7, rb = 7; /* the same commits, other stores */
    churn(a, &ra, 4, 100);
    OK(mote_store_ident(a, &ia));
    CHECK(ia != 0);
    mote_stat st;
    OK(mote_store_stat(a, &st));
    CHECK(st.trees == 1); /* tree "t": the identity is none */
    OK(mote_delta(a, 0, test_path("a.delta"), 0, &t1));
    OK(mote_delta_apply(copy, test_path("a.delta"), NULL));
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *c;
    OK(mote_open(copy, &ro, &c));
    OK(mote_store_ident(c, &ic));
    uint64_t n, h = digest(c, &n);
    OK(mote_close(c));
    CHECK(ic == ia);
    b = test_open(pb, NULL);
    churn(b, &rb, 4, 100);
    OK(mote_store_ident(b, &ib));
    OK(mote_delta(b, 0, test_path("b0.delta"), 0, &t1b));
    CHECK(ib != 0 && ib != ia && t1b == t1);
    churn(b, &rb, 2, 100);
    OK(mote_delta(b, t1, test_path("b.delta"), 0, &t2b));
    CHECK_RC(mote_delta_apply(copy, test_path("b.delta"), NULL), MOTE_INVALID);
    CHECK(strstr(mote_errmsg(NULL), "another store") != NULL);
    check_copy(copy, h, n, t1);
    /* compacted: another store from now on */
    PATH(pk, "k.mote");
    OK(mote_compact(a, pk));
    mote_store *k;
    OK(mote_open(pk, &ro, &k));
    uint64_t ik;
    OK(mote_store_ident(k, &ik));
    CHECK(ik != 0 && ik != ia);
    OK(mote_check(k, NULL, NULL));
    OK(mote_close(k));
    /* kept across a reopen and further commits */
    OK(mote_close(a));
    OK(mote_open(pa, &o, &a));
    churn(a, &ra, 2, 100);
    uint64_t again;
    OK(mote_store_ident(a, &again));
    CHECK(again == ia);
    OK(mote_check(a, NULL, NULL));
    OK(mote_close(a));
    OK(mote_close(b));
}

/* A delta of more pages than apply reads at once (1 MB: 255 entries of 4 KB
 * pages), full and from a commit, applies whole; a full one damaged in its
 * last read (a byte of a page, or a page number past the store) is refused
 * and leaves no file: it is checked as it is written. */
/* A store at `p` churned in `c1` commits, its full delta (1.delta, commit
 * *t1), churned in `c2` more, the delta since (2.delta, commit *t2). */
static mote_store *two_deltas(const char *p, uint64_t seed, int c1, int c2, int keys,
                              uint64_t *t1, uint64_t *t2)
{
    mote_store *s = test_open(p, NULL);
    churn(s, &seed, c1, keys);
    OK(mote_delta(s, 0, test_path("1.delta"), 0, t1));
    churn(s, &seed, c2, keys);
    OK(mote_delta(s, *t1, test_path("2.delta"), 0, t2));
    return s;
}

TEST(delta_of_many_pages_applies_in_chunks)
{
    PATH(p, "s.mote");
    PATH(copy, "c.mote");
    PATH(bad, "bad.delta");
    PATH(badcopy, "bad.mote");
    uint64_t t1, t2;
    mote_store *s = two_deltas(p, 11, 400, 200, 20000, &t1, &t2);
    struct stat st1, st2;
    CHECK(stat(test_path("1.delta"), &st1) == 0 && stat(test_path("2.delta"), &st2) == 0);
    uint64_t entry = 8 + 4096, n1 = (uint64_t)(st1.st_size - 96) / entry;
    CHECK(n1 > 3 * 255); /* (several reads of 255 entries) */
    CHECK((uint64_t)(st2.st_size - 96) / entry > 255);
    OK(mote_delta_apply(copy, test_path("1.delta"), NULL));
    OK(mote_delta_apply(copy, test_path("2.delta"), NULL));
    uint64_t n, h = digest(s, &n);
    check_copy(copy, h, n, t2);
    /* damaged in the last entry */
    FILE *f = fopen(test_path("1.delta"), "rb");
    CHECK(f);
    uint8_t *img = malloc((size_t)st1.st_size);
    CHECK(img && fread(img, 1, (size_t)st1.st_size, f) == (size_t)st1.st_size);
    fclose(f);
    uint8_t *last = img + 64 + (n1 - 20) * entry; /* (a page: the slots' entries are last) */
    CHECK(n1 % 255 > 20 && (last[0] | last[1] << 8 | last[2] << 16 | last[3] << 24) >= 2);
    for (int kind = 0; kind < 2; kind++) {
        if (kind == 0)
            last[8 + 2000] ^= 0x40; /* a byte of the page */
        else
            memcpy(last, "\xff\xff\xff\x7f", 4); /* its number, past the store */
        f = fopen(bad, "wb");
        CHECK(f && fwrite(img, 1, (size_t)st1.st_size, f) == (size_t)st1.st_size);
        fclose(f);
        CHECK_RC(mote_delta_apply(badcopy, bad, NULL), MOTE_CORRUPT);
        CHECK(access(badcopy, F_OK) != 0);
        if (kind == 0)
            last[8 + 2000] ^= 0x40;
    }
    free(img);
    OK(mote_close(s));
}

/* A delta whose pages are whole and checked but do not make the copy it
 * says (here: a header without the store's identity, its hashes made
 * right, so that only the copy opened afterwards shows it): the apply
 * fails after it wrote, and the copy is refused at open ("a delta was
 * being applied"), not left at the delta's commit as if it had worked. */
TEST(delta_that_does_not_make_what_it_says_leaves_a_refused_copy)
{
    PATH(p, "s.mote");
    PATH(copy, "c.mote");
    PATH(bad, "bad.delta");
    uint64_t t1, t2;
    OK(mote_close(two_deltas(p, 3, 5, 3, 200, &t1, &t2)));
    OK(mote_delta_apply(copy, test_path("1.delta"), NULL));
    FILE *f = fopen(test_path("2.delta"), "rb");
    static uint8_t img[1 << 20];
    size_t len = f ? fread(img, 1, sizeof img, f) : 0;
    CHECK(f && len > 96 && len < sizeof img);
    fclose(f);
    memset(img + 40, 0, 8); /* identity: none */
    wr64(img + 56, mote__hash64(img, 48, 0));
    wr64(img + len - 8, mote__hash64(img, 64, 0));
    f = fopen(bad, "wb");
    CHECK(f && fwrite(img, 1, len, f) == len);
    fclose(f);
    CHECK_RC(mote_delta_apply(copy, bad, NULL), MOTE_CORRUPT);
    CHECK(strstr(mote_errmsg(NULL), "identity") != NULL);
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *c = NULL;
    CHECK_RC(mote_open(copy, &ro, &c), MOTE_CORRUPT);
    CHECK(strstr(mote_last_open_error(), "delta") != NULL);
}

/* A delta read as it comes (mote_delta_apply_from): the bytes of a delta
 * image given in pieces of random sizes (from 1 byte), or an error. */
typedef struct stream {
    const uint8_t *img;
    size_t len, at, fail_at; /* fail_at: -EIO once `at` reaches it (0: never) */
    uint64_t rs;
} stream;

static long long stream_read(void *ctx, void *buf, size_t n)
{
    stream *st = ctx;
    if (st->fail_at && st->at >= st->fail_at)
        return -EIO;
    size_t k = st->len - st->at, r = 1 + (size_t)(test_rand(&st->rs) % 3 == 0
                                                       ? test_rand(&st->rs) % 64
                                                       : test_rand(&st->rs) % (3 << 20));
    k = k < n ? k : n;
    k = k < r ? k : r;
    memcpy(buf, st->img + st->at, k);
    st->at += k;
    return (long long)k;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f && fseek(f, 0, SEEK_END) == 0);
    *len = (size_t)ftell(f);
    uint8_t *img = malloc(*len + 64);
    rewind(f);
    CHECK(img && fread(img, 1, *len, f) == *len);
    fclose(f);
    return img;
}

/* A full delta read as it comes makes the same file as the delta file
 * does (byte for byte), whatever the pieces it comes in; a stream cut
 * anywhere, grown after its end, damaged in a page, its trailer or its
 * header, or failing, is refused and leaves no file; a delta from a commit
 * is refused (it must be checked whole first), and so is an existing
 * copy. */
TEST(delta_applied_as_it_comes)
{
    PATH(p, "s.mote");
    PATH(byfile, "f.mote");
    PATH(copy, "c.mote");
    uint64_t t1, t2;
    mote_store *s = two_deltas(p, 5, 300, 20, 20000, &t1, &t2);
    OK(mote_delta_apply(byfile, test_path("1.delta"), NULL));
    size_t len, flen;
    uint8_t *img = read_file(test_path("1.delta"), &len);
    CHECK(len > 3 * (1 << 20));
    uint64_t rs = 99;
    for (int round = 0; round < 3; round++) {
        stream st = {img, len, 0, 0, test_rand(&rs)};
        OK(mote_delta_apply_from(copy, stream_read, &st, NULL));
        CHECK(st.at == len);
        size_t clen;
        uint8_t *a = read_file(byfile, &flen), *b = read_file(copy, &clen);
        CHECK(clen == flen && memcmp(a, b, clen) == 0);
        free(a);
        free(b);
        if (round < 2)
            CHECK(unlink(copy) == 0);
    }
    mote_stat mst;
    mote_options ro = {MOTE_RDONLY, 0, 0, NULL};
    mote_store *c;
    OK(mote_open(copy, &ro, &c));
    OK(mote_store_stat(c, &mst));
    CHECK(mst.txnid == t1);
    OK(mote_check(c, NULL, NULL));
    OK(mote_close(c));
    stream st = {img, len, 0, 0, 1};
    CHECK_RC(mote_delta_apply_from(copy, stream_read, &st, NULL), MOTE_EXISTS);
    CHECK(unlink(copy) == 0);
    /* damaged: each kind refused, no file left */
    uint64_t entry = 8 + 4096;
    size_t cuts[] = {0, 10, 63, 64, 64 + 100, 64 + entry, len / 2, len - 32, len - 31, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts + 6; i++) {
        uint8_t *bad = malloc(len + 64);
        memcpy(bad, img, len);
        size_t blen = len, fail = 0;
        int want = MOTE_CORRUPT;
        if (i < sizeof cuts / sizeof *cuts) {
            blen = cuts[i];
            if (blen < 64)
                want = MOTE_FORMAT; /* (not even a header) */
        } else {
            switch (i - sizeof cuts / sizeof *cuts) {
            case 0: /* grown after its end */
                memcpy(bad + len, "x", 1);
                blen = len + 1;
                break;
            case 1: /* a byte of a page */
                bad[64 + 3 * entry + 8 + 100] ^= 1;
                break;
            case 2: /* the trailer's count */
                bad[len - 24] ^= 1;
                break;
            case 3: /* the header (its hash no longer matches) */
                bad[30] ^= 1;
                break;
            case 4: /* a page number past the store */
                memcpy(bad + 64 + 2 * entry, "\xff\xff\xff\x7f", 4);
                break;
            default: /* the reader fails half way */
                fail = len / 2;
                want = MOTE_IO;
            }
        }
        stream bs = {bad, blen, 0, fail, test_rand(&rs)};
        CHECK_RC(mote_delta_apply_from(copy, stream_read, &bs, NULL), want);
        CHECK(access(copy, F_OK) != 0);
        free(bad);
    }
    free(img);
    /* a delta from a commit: from a file only */
    img = read_file(test_path("2.delta"), &len);
    stream inc = {img, len, 0, 0, 3};
    CHECK_RC(mote_delta_apply_from(copy, stream_read, &inc, NULL), MOTE_INVALID);
    CHECK(access(copy, F_OK) != 0 && inc.at == 64);
    free(img);
    OK(mote_close(s));
}

/* An apply begins the writeback of the pages it writes, as it goes (a
 * hint: the sync at the end then has the last ones left to wait for):
 * every page of a full delta but its slots, each in some hinted range. */
static uint8_t *hinted; /* per page of the copy: its writeback was begun */
static uint32_t hinted_pages;

static int hint_writeback(void *ctx, int fd, uint64_t off, uint64_t len)
{
    for (uint64_t pg = off / 4096; pg < (off + len) / 4096; pg++) {
        CHECK(pg < hinted_pages);
        hinted[pg] = 1;
    }
    return mote_io_posix.writeback(ctx, fd, off, len);
}

TEST(delta_apply_begins_writeback)
{
    PATH(p, "s.mote");
    PATH(copy, "c.mote");
    uint64_t t1, t2;
    mote_store *s = two_deltas(p, 8, 200, 1, 20000, &t1, &t2);
    size_t len;
    uint8_t *img = read_file(test_path("1.delta"), &len);
    hinted_pages = rd32(img + 32);
    hinted = calloc(hinted_pages, 1);
    mote_io io = mote_io_posix;
    io.writeback = hint_writeback;
    mote_options o = {MOTE_NOSYNC, 0, 0, &io};
    OK(mote_delta_apply(copy, test_path("1.delta"), &o));
    uint64_t entry = 8 + 4096, n = (len - 96) / entry, missed = 0, slots = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t pg = rd32(img + 64 + i * entry);
        slots += pg < 2;
        missed += pg >= 2 && !hinted[pg];
    }
    CHECK(n > 300 && slots >= 1 && missed == 0);
    CHECK(!hinted[0] && !hinted[1]); /* (the slots: written last, by the sync's caller) */
    free(hinted);
    free(img);
    OK(mote_close(s));
}
