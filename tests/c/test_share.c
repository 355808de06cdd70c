/*
 * test_share.c — many processes on one store (src/share.c): forked children
 * that open the store themselves, as readers and writers. Randomized
 * workloads with a commit counter (every acknowledged commit is there at the
 * end; a reader's view never changes inside its transaction, and no value it
 * reads was overwritten by a page reused under it), a kill -9 loop over such
 * workloads, the writer lock's busy timeout, the shared segment's life, and
 * the exclusive fallback once a process maps its budget of segments.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "kv.h"
#include "pager.h"
#include "test.h"

#define NKEYS 400

/* ---- the workload ----------------------------------------------------------- */

/* Key k's value at version v: v, then a filler whose length and bytes
 * depend on (k, v), so a value read from a reused page is caught. */
static size_t make_value(uint32_t k, uint64_t v, uint8_t *buf)
{
    size_t len = 8 + 20 + (size_t)((k * 7u + v) % 300u);
    memcpy(buf, &v, 8);
    memset(buf + 8, (int)((k ^ v) & 0xff), len - 8);
    return len;
}

static int value_ok(uint32_t k, const mote_val *v, uint64_t *ver)
{
    uint8_t want[400];
    if (v->size < 8)
        return 0;
    memcpy(ver, v->data, 8);
    size_t len = make_value(k, *ver, want);
    return v->size == len && memcmp(v->data, want, len) == 0;
}

static uint64_t get_u64(mote_txn *t, uint32_t tr, const char *key)
{
    mote_val v;
    uint64_t x = 0;
    int rc = mote_kv_get(t, tr, key, strlen(key), &v);
    if (rc == MOTE_OK && v.size == 8)
        memcpy(&x, v.data, 8);
    else if (rc != MOTE_NOTFOUND) {
        fprintf(stderr, "%d: get %s in txn %llu: %s: %s\n", (int)getpid(), key,
                (unsigned long long)mote_txn_id(t), mote_strerror(rc), mote_errmsg(NULL));
        _exit(60);
    }
    return x;
}

/* One commit: counter and latest = v (the counter + 1), 8 keys to version v
 * or deleted. Returns v, or 0 on a failure (*rc). */
static uint64_t write_one(mote_store *s, uint64_t *rs, int *rc)
{
    mote_txn *t;
    uint32_t tr;
    if ((*rc = mote_begin(s, 0, &t)))
        return 0;
    if ((*rc = mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr))) {
        mote_abort(t);
        return 0;
    }
    uint64_t v = get_u64(t, tr, "counter") + 1;
    uint8_t buf[400];
    for (int j = 0; j < 8 && !*rc; j++) {
        uint32_t k = (uint32_t)(test_rand(rs) % NKEYS);
        if (test_rand(rs) % 4)
            *rc = mote_kv_put(t, tr, &k, 4, buf, make_value(k, v, buf), 0);
        else if ((*rc = mote_kv_del(t, tr, &k, 4)) == MOTE_NOTFOUND)
            *rc = MOTE_OK;
    }
    if (!*rc)
        *rc = mote_kv_put(t, tr, "counter", 7, &v, 8, 0);
    if (!*rc)
        *rc = mote_kv_put(t, tr, "latest", 6, &v, 8, 0);
    if (*rc) {
        mote_abort(t);
        return 0;
    }
    return (*rc = mote_commit(t)) ? 0 : v;
}

static void stop_here(void);

/* One read transaction: every value consistent and not newer than the
 * counter, the counter unchanged at the end (halfway it sleeps hold_us;
 * hold_us < 0: at its third entry it stops until the parent lets it go). Returns the
 * counter; exits with a code > 30 on an inconsistency. */
static uint64_t read_one(mote_store *s, int hold_us)
{
    mote_txn *t;
    uint32_t tr;
    int rc = mote_begin(s, MOTE_TXN_RDONLY, &t);
    if (rc) {
        fprintf(stderr, "reader %d: begin: %s: %s\n", (int)getpid(), mote_strerror(rc),
                mote_errmsg(NULL));
        _exit(31);
    }
    rc = mote_kv_tree(t, "t", 0, &tr);
    if (rc == MOTE_NOTFOUND) {
        mote_abort(t);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "reader %d: tree: %s: %s\n", (int)getpid(), mote_strerror(rc),
                mote_errmsg(NULL));
        _exit(32);
    }
    uint64_t c = get_u64(t, tr, "counter");
    mote_cursor *cur;
    if (mote_cursor_open(t, tr, &cur))
        _exit(33);
    int n = 0;
    for (rc = mote_cursor_first(cur); rc == MOTE_OK; rc = mote_cursor_next(cur), n++) {
        mote_val k, v;
        uint64_t ver = 0;
        if (mote_cursor_get(cur, &k, &v))
            _exit(34);
        if (k.size != 4)
            continue; /* counter, latest */
        uint32_t key;
        memcpy(&key, k.data, 4);
        if (!value_ok(key, &v, &ver) || ver > c) {
            fprintf(stderr, "reader %d: key %u: %s (version %llu, counter %llu, %zu bytes)\n",
                    (int)getpid(), key, ver > c ? "newer than the counter" : "damaged",
                    (unsigned long long)ver, (unsigned long long)c, v.size);
            _exit(35);
        }
        if (hold_us > 0 && n == NKEYS / 2)
            usleep((useconds_t)hold_us); /* writers commit and free pages meanwhile */
        else if (hold_us < 0 && n == 2)
            stop_here(); /* until the parent lets it go (stop_up, stop_down) */
    }
    if (rc != MOTE_NOTFOUND) {
        fprintf(stderr, "reader %d: cursor in txn %llu: %s: %s\n", (int)getpid(),
                (unsigned long long)mote_txn_id(t), mote_strerror(rc), mote_errmsg(NULL));
        _exit(36);
    }
    mote_cursor_close(cur);
    if (get_u64(t, tr, "latest") != c || get_u64(t, tr, "counter") != c)
        _exit(37);
    mote_abort(t);
    return c;
}

/* Readers use a tiny cache, so that their reads go to the file: a page
 * reused under them is read, not answered from the cache. */
static mote_store *open_or_exit(const char *path, unsigned flags)
{
    mote_options o = {flags, 0, (flags & MOTE_RDONLY) ? 8u : 0u, NULL};
    mote_store *s;
    if (mote_open(path, &o, &s)) {
        fprintf(stderr, "child %d: open: %s\n", (int)getpid(), mote_last_open_error());
        _exit(10);
    }
    return s;
}

/* A writer child: `n` commits (0: forever), each acknowledged on fd. */
static void writer_child(const char *path, int fd, int n, uint64_t seed, unsigned flags)
{
    mote_store *s = open_or_exit(path, flags);
    uint64_t rs = seed;
    for (int i = 0; !n || i < n; i++) {
        int rc;
        uint64_t v = write_one(s, &rs, &rc);
        if (!v) {
            fprintf(stderr, "writer %d: %s: %s\n", (int)getpid(), mote_strerror(rc),
                    mote_errmsg(NULL));
            _exit(11);
        }
        if (fd >= 0 && write(fd, &v, 8) != 8)
            _exit(12);
    }
    mote_close(s);
    _exit(0);
}

/* A reader child: read transactions until the counter reaches `until`
 * (0: forever); prints how many. */
static void reader_child(const char *path, uint64_t until, int hold_us)
{
    mote_store *s = open_or_exit(path, MOTE_RDONLY);
    uint64_t last = 0;
    long n = 0;
    for (;;) {
        uint64_t c = read_one(s, n % 4 == 0 ? hold_us : 0);
        if (c < last)
            _exit(38); /* a later transaction saw an older commit */
        last = c;
        n++;
        if (until && c >= until)
            break;
    }
    printf("reader %d: %ld snapshots\n", (int)getpid(), n);
    mote_close(s);
    _exit(0);
}

static pid_t spawn_writer(const char *path, int fd, int n, uint64_t seed, unsigned flags)
{
    pid_t pid = fork();
    if (pid == 0)
        writer_child(path, fd, n, seed, flags);
    return pid;
}

static pid_t spawn_reader(const char *path, uint64_t until, int hold_us)
{
    pid_t pid = fork();
    if (pid == 0)
        reader_child(path, until, hold_us);
    return pid;
}

static void wait_ok(pid_t pid)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child %d: %s %d\n", (int)pid, WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        abort();
    }
}

static uint64_t counter_of(const char *path)
{
    mote_store *s = test_open(path, NULL);
    mote_txn *t;
    uint32_t tr;
    uint64_t c = 0;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    if (mote_kv_tree(t, "t", 0, &tr) == MOTE_OK)
        c = get_u64(t, tr, "counter");
    mote_abort(t);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    return c;
}

/* The shared segment's name of store `path` (share.c: by device and inode). */
static void segment_name(const char *path, char *seg, size_t n)
{
    struct stat st;
    CHECK(stat(path, &st) == 0);
    snprintf(seg, n, "/dev/shm/motedb-%llx-%llx", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
}

static int segment_exists(const char *path)
{
    char seg[96];
    segment_name(path, seg, sizeof seg);
    return access(seg, F_OK) == 0;
}

/* ---- tests -------------------------------------------------------------------- */

/* Two writer and two reader processes: every commit counted, every snapshot
 * stable, nothing read from a reused page (readers hold snapshots while the
 * writers free pages, and the writers take turns, so each finds the other's
 * pending pages unknown). */
TEST(share_readers_and_writers)
{
    const char *p = test_path("rw.mote");
    OK(mote_close(test_open(p, NULL)));
    int per = 300 * test_scale();
    pid_t w1 = spawn_writer(p, -1, per, 11, MOTE_NOSYNC);
    pid_t w2 = spawn_writer(p, -1, per, 22, 0);
    pid_t r1 = spawn_reader(p, (uint64_t)2 * per, 300);
    pid_t r2 = spawn_reader(p, (uint64_t)2 * per, 0);
    wait_ok(w1);
    wait_ok(w2);
    wait_ok(r1);
    wait_ok(r2);
    CHECK(counter_of(p) == (uint64_t)2 * per);
    mote_store *s = test_open(p, NULL);
    mote_stat st;
    OK(mote_store_stat(s, &st));
    printf("%d commits by 2 processes under 2 reading ones: %llu pages\n", 2 * per,
           (unsigned long long)st.pages);
    OK(mote_close(s));
    CHECK(!segment_exists(p)); /* the last close removed it */
}

/* A reader in one process sees another's commits at its next transaction,
 * and keeps its snapshot inside one. */
TEST(share_visibility)
{
    const char *p = test_path("vis.mote");
    mote_store *s = test_open(p, NULL);
    CHECK(!segment_exists(p)); /* alone: none until another process opens it (SOLO) */
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "a", 1, "1", 1, 0));
    OK(mote_commit(t));
    mote_txn *old;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &old));
    pid_t pid = fork();
    if (pid == 0) { /* another process: sees "a", writes "b" */
        mote_store *c = open_or_exit(p, 0);
        mote_txn *ct;
        mote_val v;
        OK(mote_begin(c, 0, &ct));
        OK(mote_kv_get(ct, tr, "a", 1, &v));
        OK(mote_kv_put(ct, tr, "b", 1, "2", 1, 0));
        OK(mote_commit(ct));
        OK(mote_close(c));
        _exit(0);
    }
    wait_ok(pid);
    mote_val v;
    CHECK_RC(mote_kv_get(old, tr, "b", 1, &v), MOTE_NOTFOUND); /* its snapshot */
    mote_abort(old);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* the next transaction sees it */
    OK(mote_kv_get(t, tr, "b", 1, &v));
    CHECK(v.size == 1 && ((const char *)v.data)[0] == '2');
    mote_abort(t);
    OK(mote_begin(s, 0, &t)); /* and writes on top of it */
    OK(mote_kv_put(t, tr, "c", 1, "3", 1, 0));
    OK(mote_commit(t));
    OK(mote_close(s));
    CHECK(!segment_exists(p));
}

/* A snapshot held in one process (at commit 40 of store p, open as s)
 * while two others write 60 commits each in turn: it reads what it read
 * before they wrote. */
static void snapshot_under_two_writers(const char *p, mote_store *s)
{
    mote_txn *t;
    uint32_t tr;
    int rc;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* the old snapshot, at 40 */
    OK(mote_kv_tree(t, "t", 0, &tr));
    uint8_t before[NKEYS][400];
    size_t blen[NKEYS];
    for (uint32_t k = 0; k < NKEYS; k++) {
        mote_val v;
        rc = mote_kv_get(t, tr, &k, 4, &v);
        blen[k] = rc == MOTE_OK ? v.size : 0;
        if (blen[k])
            memcpy(before[k], v.data, v.size);
    }
    for (int w = 0; w < 2; w++) { /* one writer process, then another */
        pid_t pid = spawn_writer(p, -1, 60, 100 + (uint64_t)w, MOTE_NOSYNC);
        wait_ok(pid);
    }
    for (uint32_t k = 0; k < NKEYS; k++) {
        mote_val v;
        rc = mote_kv_get(t, tr, &k, 4, &v);
        CHECK(rc == (blen[k] ? MOTE_OK : MOTE_NOTFOUND));
        CHECK(!blen[k] || (v.size == blen[k] && memcmp(v.data, before[k], v.size) == 0));
    }
    CHECK(get_u64(t, tr, "counter") == 40);
    mote_abort(t);
    CHECK(read_one(s, 0) == 160);
    OK(mote_check(s, NULL, NULL));
}

/* A store of 40 commits, open with a tiny cache (reads go to the file). */
static mote_store *store_of_40(const char *p)
{
    mote_options small = {MOTE_CREATE, 0, 4, NULL};
    mote_store *s = test_open(p, &small);
    uint64_t rs = 3;
    int rc;
    for (int i = 0; i < 40; i++)
        CHECK(write_one(s, &rs, &rc) != 0);
    CHECK(read_one(s, 0) == 40);
    return s;
}

/* The second writer does not know which pages the first one's commits
 * freed (they are pending in that process, or it is gone), so it must not
 * reuse any page free in the latest commit until the snapshot ends. */
TEST(share_writer_switch_under_old_snapshot)
{
    const char *p = test_path("sw.mote");
    mote_store *s = store_of_40(p);
    snapshot_under_two_writers(p, s);
    OK(mote_close(s));
}

/* The slots past the segment's header page (a process's slot is a cache
 * line; 59 fit there): with 64 other processes holding the store open, a
 * snapshot held in the 65th still keeps its pages from reuse. */
TEST(share_slots_past_the_header_page)
{
    const char *p = test_path("slots.mote");
    OK(mote_close(store_of_40(p)));
    enum { HOLDERS = 64 };
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t pids[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        if ((pids[i] = fork()) == 0) {
            close(ready[0]);
            close(go[1]);
            mote_store *c = open_or_exit(p, 0);
            char b = 1;
            if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 0)
                _exit(3);
            OK(mote_close(c));
            _exit(0);
        }
    }
    close(ready[1]);
    close(go[0]);
    char b;
    for (int i = 0; i < HOLDERS; i++)
        CHECK(read(ready[0], &b, 1) == 1);
    mote_options small = {0, 0, 4, NULL};
    mote_store *s = test_open(p, &small); /* slot HOLDERS or above */
    snapshot_under_two_writers(p, s);
    close(go[1]); /* the holders close */
    for (int i = 0; i < HOLDERS; i++)
        wait_ok(pids[i]);
    close(ready[0]);
    OK(mote_close(s));
    CHECK(!segment_exists(p));
}

/* A commit that frees more pages than the shared ring holds (341): the
 * writers that follow cannot tell which free pages a snapshot still reads,
 * so they use none (the file grows) until every snapshot is past it. */
static void rewrite_all(const char *path, int nkeys, int version)
{
    mote_store *s = open_or_exit(path, MOTE_NOSYNC);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "big", MOTE_TREE_CREATE, &tr));
    uint8_t v[100];
    for (uint32_t k = 0; k < (uint32_t)nkeys; k++) {
        memset(v, version, sizeof v);
        memcpy(v, &k, 4);
        uint32_t key = __builtin_bswap32(k);
        OK(mote_kv_put(t, tr, &key, 4, v, sizeof v, 0));
    }
    OK(mote_commit(t));
    OK(mote_close(s));
}

TEST(share_ring_overflow)
{
    const char *p = test_path("ring.mote");
    enum { NK = 20000 };
    mote_options small = {MOTE_CREATE, 0, 4, NULL};
    mote_store *s = test_open(p, &small);
    OK(mote_close(s));
    pid_t pid = fork();
    if (pid == 0) {
        rewrite_all(p, NK, 1);
        _exit(0);
    }
    wait_ok(pid);
    s = test_open(p, &small);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* the old snapshot: every value at 1 */
    OK(mote_kv_tree(t, "big", 0, &tr));
    for (int w = 2; w <= 4; w++) { /* each frees some 600 pages: more than the ring */
        pid = fork();
        if (pid == 0) {
            rewrite_all(p, NK, w);
            _exit(0);
        }
        wait_ok(pid);
    }
    for (uint32_t k = 0; k < NK; k += 7) {
        uint32_t key = __builtin_bswap32(k);
        mote_val v;
        OK(mote_kv_get(t, tr, &key, 4, &v));
        uint32_t got;
        memcpy(&got, v.data, 4);
        CHECK(v.size == 100 && got == k && ((const uint8_t *)v.data)[99] == 1);
    }
    mote_abort(t);
    mote_stat st;
    OK(mote_store_stat(s, &st));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    printf("3 rewrites of %d keys under an old snapshot: %llu pages\n", NK,
           (unsigned long long)st.pages);
}

/* A write transaction in another process makes mote_begin wait for the busy
 * timeout, then MOTE_BUSY naming that process; reads go on meanwhile. */
TEST(share_busy_timeout)
{
    const char *p = test_path("busy.mote");
    OK(mote_close(test_open(p, NULL)));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        mote_store *c = open_or_exit(p, 0);
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(c, 0, &t));
        OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
        OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
        char x = 1;
        CHECK(write(up[1], &x, 1) == 1);
        CHECK(read(down[0], &x, 1) == 1); /* hold the write transaction */
        OK(mote_commit(t));
        OK(mote_close(c));
        _exit(0);
    }
    char x;
    CHECK(read(up[0], &x, 1) == 1);
    mote_store *s = test_open(p, NULL);
    OK(mote_busy_timeout(s, 150));
    mote_txn *t;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_RC(mote_begin(s, 0, &t), MOTE_BUSY);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    char want[64];
    snprintf(want, sizeof want, "process %d is in a write transaction", (int)pid);
    CHECK(strstr(mote_errmsg(NULL), want) != NULL);
    CHECK(ms >= 140);
    OK(mote_busy_timeout(s, -1)); /* do not wait */
    CHECK_RC(mote_begin(s, 0, &t), MOTE_BUSY);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* a reader is never held up */
    mote_abort(t);
    OK(mote_busy_timeout(s, 10000));
    CHECK(write(down[1], &x, 1) == 1);
    OK(mote_begin(s, 0, &t)); /* waits for the commit, then sees it */
    uint32_t tr;
    mote_val v;
    OK(mote_kv_tree(t, "t", 0, &tr));
    OK(mote_kv_get(t, tr, "k", 1, &v));
    mote_abort(t);
    wait_ok(pid);
    OK(mote_close(s));
    printf("busy after %.0f ms (timeout 150)\n", ms);
}

/* kill -9 of readers and writers at random points, including inside their
 * write transactions: a survivor goes on (nothing blocks it), nothing
 * acknowledged is lost, the store checks clean, and a segment left by
 * processes that all died is rebuilt by the next open. */
TEST(share_kill9_loop)
{
    const char *p = test_path("k9.mote");
    OK(mote_close(test_open(p, NULL)));
    int iters = 70 * test_scale(), kills = 0;
    uint64_t rs = 5, acked_max = 0;
    /* a new store every n iterations (MOTE_TEST_K9_NEW, 10 unless set; 0:
     * never): takeovers of a new store's first commits race the most (the
     * solo process commits within a millisecond of its open), and found
     * most of the bugs share_taker_* and share_joiner_* test */
    const char *nv = getenv("MOTE_TEST_K9_NEW");
    int reset = nv ? atoi(nv) : 10;
    for (int it = 0; it < iters; it++) {
        if (reset && it % reset == 0) {
            unlink(p);
            OK(mote_close(test_open(p, NULL)));
            acked_max = 0;
        }
        int fa[2], fb[2];
        CHECK(pipe(fa) == 0 && pipe(fb) == 0);
        pid_t pids[3];
        pids[0] = spawn_writer(p, fa[1], 0, rs + (uint64_t)it * 3, 0);
        pids[1] = spawn_writer(p, fb[1], 0, rs + (uint64_t)it * 7, 0);
        pids[2] = spawn_reader(p, 0, 200);
        close(fa[1]);
        close(fb[1]);
        usleep((useconds_t)(2000 + test_rand(&rs) % 25000));
        int first = (int)(test_rand(&rs) % 3);
        kill(pids[first], SIGKILL);
        kills++;
        if (first < 2) { /* the other writer must go on: two more commits within 5 s */
            int fd = first == 0 ? fb[0] : fa[0];
            for (int got = 0; got < 2;) {
                struct timeval tv = {5, 0};
                fd_set set;
                FD_ZERO(&set);
                FD_SET(fd, &set);
                CHECK(select(fd + 1, &set, NULL, NULL, &tv) == 1); /* else blocked */
                uint64_t v;
                CHECK(read(fd, &v, 8) == 8);
                got++;
            }
        }
        for (int i = 0; i < 3; i++)
            if (i != first) {
                usleep((useconds_t)(test_rand(&rs) % 3000));
                kill(pids[i], SIGKILL);
                kills++;
            }
        uint64_t acks = 0;
        for (int i = 0; i < 3; i++) {
            int st;
            CHECK(waitpid(pids[i], &st, 0) == pids[i]);
            if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
                fprintf(stderr, "iteration %d: child %d ended by itself (%s %d)\n", it, i,
                        WIFEXITED(st) ? "exit" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                abort();
            }
        }
        uint64_t v;
        while (read(fa[0], &v, 8) == 8)
            acks = v > acks ? v : acks;
        while (read(fb[0], &v, 8) == 8)
            acks = v > acks ? v : acks;
        close(fa[0]);
        close(fb[0]);
        if (acks > acked_max)
            acked_max = acks;
        uint64_t c = counter_of(p); /* opens (rebuilding the segment), checks */
        if (c < acked_max) {
            fprintf(stderr, "iteration %d: acknowledged %llu, found %llu\n", it,
                    (unsigned long long)acked_max, (unsigned long long)c);
            abort();
        }
        acked_max = c;
    }
    printf("%d kills of 2 writers and a reader, %llu commits, none lost\n", kills,
           (unsigned long long)acked_max);
    CHECK(!segment_exists(p));
}

/* Store p, open, after n commits of write_one (its random state: rs). */
static mote_store *store_of(const char *p, int n, uint64_t *rs)
{
    mote_store *s = test_open(p, NULL);
    int rc;
    for (int i = 0; i < n; i++)
        CHECK(write_one(s, rs, &rc) != 0);
    return s;
}

/* Store p opened through the shim `io` (a copy of mote_io_posix with a hook
 * that stops the process somewhere), or the child exits (20). */
static mote_store *open_io(const char *p, const mote_io *io)
{
    mote_options o = {0, 0, 0, io};
    mote_store *b;
    if (mote_open(p, &o, &b)) {
        fprintf(stderr, "child %d: open: %s\n", (int)getpid(), mote_last_open_error());
        _exit(20);
    }
    return b;
}

/* A child alone with store p (SOLO: no segment) after n commits, then idle
 * until it reads a byte on `down` (or is killed); it tells `up` when idle. */
static pid_t spawn_idle_solo(const char *p, int n, int up, int down)
{
    pid_t pid = fork();
    if (pid)
        return pid;
    uint64_t rs = 2;
    mote_store *b = store_of(p, n, &rs);
    char y = 1;
    CHECK(write(up, &y, 1) == 1);
    CHECK(read(down, &y, 1) == 1);
    OK(mote_close(b));
    _exit(0);
}

/* Where the shims below stop a child: it tells the parent on stop_up and
 * waits for a byte on stop_down. stop_up < 0: disarmed. */
static int stop_up = -1, stop_down = -1;

static void stop_here(void)
{
    char x = 1;
    CHECK(write(stop_up, &x, 1) == 1);
    CHECK(read(stop_down, &x, 1) == 1);
}

static void stop_once(void)
{
    stop_here();
    stop_up = -1;
}

/* In a child: a copy of mote_io_posix for one stopping shim to replace a
 * call of, armed on the pipe ends up and down (static: the store keeps it). */
static mote_io *stop_io(int up, int down)
{
    static mote_io io;
    io = mote_io_posix;
    stop_up = up;
    stop_down = down;
    return &io;
}

/* A shim that stops a process at its first exclusive lock of byte 0 (the
 * segment's, while a taker makes it) until the parent lets it go. */
static int pause_lock(void *c, int fd, int op, uint64_t off, uint64_t len)
{
    if (op == MOTE_LK_WRITE && off == 0 && len == 1 && stop_up >= 0)
        stop_once();
    return mote_io_posix.lock(c, fd, op, off, len);
}

static off_t segment_size(const char *path)
{
    char seg[96];
    struct stat st;
    segment_name(path, seg, sizeof seg);
    return stat(seg, &st) == 0 ? st.st_size : -1;
}

/* Two processes take over a store that a third holds alone (SOLO). The
 * first opens the segment's file and stops before its lock; the second
 * makes the segment and commits (its page copies grow the file); then the
 * first goes on. It must not make the file smaller: with its size read
 * before the lock it did, and the second died of SIGBUS at its next commit
 * (share_kill9_loop found it, one run in ten). */
TEST(share_taker_never_cuts_the_segment)
{
    const char *p = test_path("cut.mote");
    uint64_t rs = 11;
    int rc;
    mote_store *s = store_of(p, 20, &rs); /* alone: no segment */
    CHECK(!segment_exists(p));
    int up[2], down[2], up1[2], down1[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0);
    pid_t second = fork();
    if (second == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->lock = pause_lock;
        mote_store *b = open_io(p, io); /* stops at the segment's byte 0 */
        char y = 1;
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1);
        CHECK(write_one(b, &rs, &rc) != 0); /* (its page copies would grow it again) */
        OK(mote_close(b));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1);
    CHECK(segment_size(p) == 0); /* it made the file, nothing more */
    pid_t first = fork();
    if (first == 0) {
        mote_store *b = test_open(p, NULL); /* makes the segment */
        CHECK(write_one(b, &rs, &rc) != 0); /* its page copies grow the file */
        CHECK(write(up1[1], &x, 1) == 1);
        CHECK(read(down1[0], &x, 1) == 1);
        CHECK(write_one(b, &rs, &rc) != 0); /* SIGBUS here if the file was cut */
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up1[0], &x, 1) == 1);
    off_t grown = segment_size(p);
    CHECK(grown > 65536);
    CHECK(write(down[1], &x, 1) == 1); /* the stopped one goes on: opens */
    CHECK(read(up[0], &x, 1) == 1);
    CHECK(segment_size(p) == grown);
    CHECK(write(down1[1], &x, 1) == 1);
    wait_ok(first);
    CHECK(write(down[1], &x, 1) == 1); /* and commits */
    wait_ok(second);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* joins, sees both commits */
    OK(mote_kv_tree(t, "t", 0, &tr));
    CHECK(get_u64(t, tr, "counter") == 23);
    mote_abort(t);
    OK(mote_close(s));
    printf("the segment's file stayed at %lld bytes\n", (long long)grown);
}

/* A process that opens a store finds another alone with it (SOLO) and
 * stops before it makes the segment; the other dies. The opener must make
 * the segment itself and open (with the solo process's byte found unlocked
 * there it took the normal path, found the segment it had just made not
 * ready and no live process: "never made ready", share_kill9_loop). */
TEST(share_taker_after_the_solo_process_died)
{
    const char *p = test_path("gone.mote");
    int up[2], down[2], up1[2], down1[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0);
    pid_t solo = spawn_idle_solo(p, 20, up1[1], down1[0]); /* (killed while idle) */
    char x = 1;
    CHECK(read(up1[0], &x, 1) == 1);
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->lock = pause_lock;
        mote_store *b = open_io(p, io); /* stops at the segment's byte 0 */
        CHECK(read_one(b, 0) == 20);
        uint64_t rs = 4;
        int rc;
        CHECK(write_one(b, &rs, &rc) == 21);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    CHECK(!segment_exists(p) || segment_size(p) == 0);
    kill(solo, SIGKILL);
    CHECK(waitpid(solo, NULL, 0) == solo);
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(taker);
    CHECK(counter_of(p) == 21);
}

/* A shim that stops a process at its first lock of a slot's byte (share.c
 * SLOT_LOCK + i: claiming a slot) until the parent lets it go. */
static int pause_slot(void *c, int fd, int op, uint64_t off, uint64_t len)
{
    if (op == MOTE_LK_READ && off >= (1ull << 62) && off < (1ull << 62) + 1024 && stop_up >= 0)
        stop_once();
    return mote_io_posix.lock(c, fd, op, off, len);
}

/* A solo process dies holding a snapshot after another one took the store
 * over; a writer reclaims its slot (slot 0, which stands for the solo
 * process's byte, SOLO). A reader that opens then must not get slot 0:
 * whether it lives was asked of the dead solo process's byte, so the next
 * writer found it dead too, reclaimed its slot and reused the pages of its
 * snapshot under it ("checksum mismatch" in share_kill9_loop with new
 * stores, about one run in 30 at MOTE_TEST_SCALE=10). */
TEST(share_slot_of_a_dead_solo_process)
{
    const char *p = test_path("deadsolo.mote");
    int up[2], up2[2], down2[2];
    CHECK(pipe(up) == 0 && pipe(up2) == 0 && pipe(down2) == 0);
    char x = 1;
    pid_t solo = fork();
    if (solo == 0) {
        uint64_t rs = 2;
        mote_store *b = store_of(p, 20, &rs); /* alone: no segment */
        mote_txn *t;
        OK(mote_begin(b, MOTE_TXN_RDONLY, &t)); /* its snapshot, held until killed */
        CHECK(write(up[1], &x, 1) == 1);
        pause();
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    mote_store *s = test_open(p, NULL); /* takes it over: slot 0 is the solo process's */
    kill(solo, SIGKILL);
    CHECK(waitpid(solo, NULL, 0) == solo);
    uint64_t rs = 7;
    int rc;
    for (int i = 0; i < 5; i++) /* its snapshot holds pages back: its slot is reclaimed */
        CHECK(write_one(s, &rs, &rc) != 0);
    pid_t reader = fork();
    if (reader == 0) {
        mote_store *b = open_or_exit(p, MOTE_RDONLY);
        stop_up = up2[1];
        stop_down = down2[0];
        CHECK(read_one(b, -1) == 25); /* stops early in its snapshot */
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up2[0], &x, 1) == 1);
    for (int i = 0; i < 40; i++) /* pages its snapshot reads are freed; reused if it is not seen */
        CHECK(write_one(s, &rs, &rc) != 0);
    CHECK(write(down2[1], &x, 1) == 1);
    wait_ok(reader);
    OK(mote_close(s));
    CHECK(counter_of(p) == 65);
}

/* A shim that stops a process at its lock of the open byte (share.c
 * OPEN_LOCK, 2^62 - 1: its flock is held, shared or exclusive, and it has
 * not looked for a solo process or a segment yet). */
static int pause_open_byte(void *c, int fd, int op, uint64_t off, uint64_t len)
{
    if (op == MOTE_LK_READ && off == (1ull << 62) - 1 && stop_up >= 0)
        stop_once();
    return mote_io_posix.lock(c, fd, op, off, len);
}

/* A segment its processes left behind (killed here; two closers at once
 * each finding the other there leave one too), with the store's close
 * marker still good (they committed nothing), outlives a process alone
 * with the store (SOLO: it removes a segment only after an unclean close),
 * whose commits make it stale. A process that opens as that one closes
 * finds no solo process and the segment: it must not join it as it is (its
 * latest commit is older than the file's; a write on it loses commits,
 * share_open_close_churn), but make it anew from the file. */
TEST(share_opener_remakes_a_segment_left_behind)
{
    const char *p = test_path("left.mote");
    uint64_t rs = 3;
    int rc;
    OK(mote_close(store_of(p, 5, &rs))); /* closed cleanly: the marker */
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t two[2];
    for (int i = 0; i < 2; i++) { /* two readers: the second takes the store over */
        two[i] = fork();
        if (two[i] == 0) {
            mote_store *b = open_or_exit(p, MOTE_RDONLY);
            CHECK(read_one(b, 0) == 5);
            CHECK(write(up[1], &rs, 1) == 1);
            pause();
            _exit(0);
        }
        char x;
        CHECK(read(up[0], &x, 1) == 1);
    }
    CHECK(segment_exists(p));
    for (int i = 0; i < 2; i++) {
        kill(two[i], SIGKILL);
        CHECK(waitpid(two[i], NULL, 0) == two[i]);
    }
    CHECK(segment_exists(p)); /* left behind, ready, nobody in it */
    mote_store *s = store_of(p, 5, &rs); /* alone (the marker is good): the segment stays */
    CHECK(segment_exists(p));
    pid_t opener = fork();
    if (opener == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->lock = pause_open_byte;
        mote_store *b = open_io(p, io); /* stops with its flock held */
        CHECK(read_one(b, 0) == 10);
        CHECK(write_one(b, &rs, &rc) == 11);
        OK(mote_close(b));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1);
    OK(mote_close(s)); /* not alone: the opener's flock */
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(opener);
    CHECK(counter_of(p) == 11);
}

/* A shim that stops a process before it opens a store's segment to make it
 * (a taker's open, O_CREAT: SOLO) until the parent lets it go. */
static int pause_segment_open(void *c, const char *path, int flags, int mode)
{
    if ((flags & O_CREAT) && strncmp(path, "/dev/shm/motedb-", 16) == 0 &&
        strncmp(path + 16, "solo", 4) != 0 && stop_up >= 0)
        stop_once();
    return mote_io_posix.open(c, path, flags, mode);
}

/* A taker finds the solo process gone (it closed after the taker found its
 * byte) and a segment that a first opener is making. It must wait for that
 * one, not make the segment again: it did (zeroes over a segment in use),
 * and with six processes opening one new store at once two of them then
 * built commits on one base, one commit lost (share_many_create_one_store).
 * Here the first opener stops while it makes the segment; the taker must
 * not finish opening meanwhile. */
TEST(share_taker_waits_for_the_first_opener)
{
    const char *p = test_path("twomakers.mote");
    uint64_t rs = 12;
    int rc;
    mote_store *s = store_of(p, 20, &rs); /* alone: no segment */
    int up[2], down[2], up1[2], down1[2], opened[2], go[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0 &&
          pipe(opened) == 0 && pipe(go) == 0);
    char x = 1;
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->open = pause_segment_open;
        mote_store *b = open_io(p, io); /* stops before it makes the segment */
        CHECK(write(opened[1], &x, 1) == 1);
        CHECK(read(go[0], &x, 1) == 1);
        CHECK(write_one(b, &rs, &rc) != 0);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    OK(mote_close(s)); /* the solo process goes */
    pid_t first = fork();
    if (first == 0) {
        mote_io *io = stop_io(up1[1], down1[0]);
        io->lock = pause_slot;
        mote_store *b = open_io(p, io); /* makes the segment, stops at its slot */
        CHECK(write_one(b, &rs, &rc) != 0);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up1[0], &x, 1) == 1);
    CHECK(write(down[1], &x, 1) == 1); /* the taker goes on: it must wait */
    struct pollfd pf = {opened[0], POLLIN, 0};
    CHECK(poll(&pf, 1, 500) == 0);
    CHECK(write(down1[1], &x, 1) == 1); /* the first opener goes on */
    CHECK(read(opened[0], &x, 1) == 1);
    CHECK(write(go[1], &x, 1) == 1);
    wait_ok(first);
    wait_ok(taker);
    CHECK(counter_of(p) == 22);
}

/* A process that joined a segment through join_ready (its read lock on the
 * segment file's byte 0 while it claims its slot) must let go of that lock:
 * closing the descriptor did not (the mapping keeps the file's description
 * and its locks), and a taker that had found the solo process's byte before
 * that one joined waited the whole busy timeout for the write lock, then
 * failed ("another process is opening it"; share_readers_and_writers in CI). */
TEST(share_joiner_lets_go_of_the_segment_lock)
{
    const char *p = test_path("letgo.mote");
    uint64_t rs = 4;
    mote_store *s = store_of(p, 5, &rs); /* alone: no segment */
    int up[2], down[2], up1[2], down1[2], up2[2], down2[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0 &&
          pipe(up2) == 0 && pipe(down2) == 0);
    char x = 1;
    pid_t late = fork();
    if (late == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->open = pause_segment_open;
        mote_store *b = open_io(p, io); /* found the solo byte; stops */
        CHECK(read_one(b, 0) == 5);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    pid_t taker = fork();
    if (taker == 0) {
        mote_store *b = open_or_exit(p, 0); /* takes the store over */
        CHECK(write(up1[1], &x, 1) == 1);
        CHECK(read(down1[0], &x, 1) == 1);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up1[0], &x, 1) == 1);
    CHECK(read_one(s, 0) == 5); /* the solo process joins: its byte goes */
    pid_t joiner = fork();
    if (joiner == 0) {
        mote_store *b = open_or_exit(p, MOTE_RDONLY); /* joins through join_ready */
        CHECK(write(up2[1], &x, 1) == 1);
        CHECK(read(down2[0], &x, 1) == 1);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up2[0], &x, 1) == 1);
    CHECK(write(down[1], &x, 1) == 1); /* the late taker goes on: byte 0 must be free */
    wait_ok(late);
    CHECK(write(down1[1], &x, 1) == 1);
    CHECK(write(down2[1], &x, 1) == 1);
    wait_ok(taker);
    wait_ok(joiner);
    OK(mote_close(s));
}

/* A process takes over a store from its solo process and stops (`made`:
 * after it initialized the segment, before it claims its slot; else after
 * it made the segment's file, before it sized it); the solo process dies;
 * a third process opens and finds the segment not ready and no live slot,
 * or too short. It must wait for the taker (it failed at once: "never made
 * ready", "is being made; try again", share_kill9_loop). */
static void joiner_waits(const char *p, int made)
{
    int up[2], down[2], up1[2], down1[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0);
    pid_t solo = spawn_idle_solo(p, 20, up1[1], down1[0]); /* (killed while idle) */
    char x = 1;
    CHECK(read(up1[0], &x, 1) == 1);
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->lock = made ? pause_slot : pause_lock;
        mote_store *b = open_io(p, io);
        CHECK(read_one(b, 0) == 20);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    kill(solo, SIGKILL);
    CHECK(waitpid(solo, NULL, 0) == solo);
    pid_t joiner = fork();
    if (joiner == 0) {
        mote_store *b = open_or_exit(p, 0); /* waits for the taker */
        CHECK(read_one(b, 0) == 20);
        uint64_t rs = 4;
        int rc;
        CHECK(write_one(b, &rs, &rc) == 21);
        OK(mote_close(b));
        _exit(0);
    }
    usleep(100000);
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(joiner);
    wait_ok(taker);
    CHECK(counter_of(p) == 21);
}

TEST(share_joiner_waits_for_a_taker)
{
    joiner_waits(test_path("wait.mote"), 1);
    joiner_waits(test_path("wait0.mote"), 0);
}

/* A taker dies after it initialized the segment, before it made it ready;
 * the solo process it took the store over from died too; another taker is
 * stopped before the segment's byte 0 (so the next one is not alone). A
 * process that opens then finds the segment not ready, its maker dead and
 * no process in it: it must make it itself (it failed: "never made ready",
 * share_kill9_loop), and the stopped taker then join it. */
TEST(share_remakes_a_segment_its_maker_left)
{
    const char *p = test_path("remake.mote");
    int up[2], down[2], up1[2], down1[2], up2[2], down2[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0 &&
          pipe(up2) == 0 && pipe(down2) == 0);
    pid_t solo = spawn_idle_solo(p, 20, up1[1], down1[0]); /* (killed while idle) */
    char x = 1;
    CHECK(read(up1[0], &x, 1) == 1);
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->lock = pause_slot;
        open_io(p, io); /* stops before its slot (killed there) */
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    pid_t other = fork();
    if (other == 0) {
        mote_io *io = stop_io(up2[1], down2[0]);
        io->lock = pause_lock;
        mote_store *b = open_io(p, io); /* stops at the segment's byte 0 */
        CHECK(read_one(b, 0) >= 20);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up2[0], &x, 1) == 1);
    kill(solo, SIGKILL);
    CHECK(waitpid(solo, NULL, 0) == solo);
    kill(taker, SIGKILL);
    CHECK(waitpid(taker, NULL, 0) == taker);
    pid_t opener = fork();
    if (opener == 0) {
        mote_store *b = open_or_exit(p, 0); /* makes the segment */
        CHECK(read_one(b, 0) == 20);
        uint64_t rs = 4;
        int rc;
        CHECK(write_one(b, &rs, &rc) == 21);
        OK(mote_close(b));
        _exit(0);
    }
    wait_ok(opener);
    CHECK(write(down2[1], &x, 1) == 1);
    wait_ok(other);
    CHECK(counter_of(p) == 21);
}

/* A shim that stops a process at its first flock (its open: after the
 * store file's fstat) until the parent lets it go. */
static int stop_flock(void *c, int fd, int op)
{
    if (stop_up >= 0)
        stop_once();
    return mote_io_posix.flock(c, fd, op);
}

/* A process opening a store that another holds alone (SOLO) is stopped
 * after its fstat; the solo one commits 60 more times, which grows the
 * file; then the opener takes the store over. It must read the newest
 * commit: with the size of its fstat it followed the chain of commit
 * records only up to the old end of the file, took an older commit for the
 * newest, and either found that commit's pages reused since (MOTE_CORRUPT)
 * or built on it (the commits after it lost). share_kill9_loop found it. */
TEST(share_taker_reads_the_file_as_it_is)
{
    const char *p = test_path("stale.mote");
    uint64_t rs = 5;
    int rc;
    mote_store *s = store_of(p, 10, &rs); /* alone: no segment */
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->flock = stop_flock;
        mote_store *b = open_io(p, io);
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(b, MOTE_TXN_RDONLY, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        uint64_t c = get_u64(t, tr, "counter");
        mote_abort(t);
        if (c != 70) {
            fprintf(stderr, "taker: counter %llu, expected 70\n", (unsigned long long)c);
            _exit(21);
        }
        CHECK(write_one(b, &rs, &rc) == 71);
        OK(mote_check(b, NULL, NULL));
        OK(mote_close(b));
        _exit(0);
    }
    char x;
    CHECK(read(up[0], &x, 1) == 1); /* stopped after its fstat */
    struct stat before, after;
    CHECK(stat(p, &before) == 0);
    for (int i = 0; i < 60; i++)
        CHECK(write_one(s, &rs, &rc) != 0);
    CHECK(stat(p, &after) == 0);
    CHECK(after.st_size > before.st_size); /* (else the test shows nothing) */
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(pid);
    CHECK(read_one(s, 0) == 71);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    printf("the file grew from %lld to %lld bytes after the taker's fstat\n",
           (long long)before.st_size, (long long)after.st_size);
}

/* A shim for the write request at offset 0 (a new store's first commit:
 * both root slots, then its pages): stop_whole 0: the first half of its
 * first page (as a read in the middle of the kernel's copy finds it), then
 * a stop until the parent lets it go, then the rest; 1: a stop before it
 * and another after it. */
static int stop_whole;
static ssize_t torn_pwritev(void *c, int fd, const struct iovec *iov, int cnt, uint64_t off)
{
    if (off != 0 || cnt < 2 || stop_up < 0)
        return mote_io_posix.pwritev(c, fd, iov, cnt, off);
    ssize_t a, b;
    if (stop_whole) {
        stop_here();
        a = mote_io_posix.pwritev(c, fd, iov, cnt, off);
        b = 0;
        stop_here();
    } else {
        struct iovec half[2] = {{iov[0].iov_base, iov[0].iov_len / 2}, iov[0]}, rest[64];
        half[1].iov_base = (uint8_t *)iov[0].iov_base + half[0].iov_len;
        half[1].iov_len = iov[0].iov_len - half[0].iov_len;
        CHECK(cnt < 64);
        rest[0] = half[1];
        memcpy(rest + 1, iov + 1, (size_t)(cnt - 1) * sizeof *iov);
        a = mote_io_posix.pwritev(c, fd, half, 1, off);
        stop_here();
        b = mote_io_posix.pwritev(c, fd, rest, cnt, off + half[0].iov_len);
    }
    stop_up = -1;
    return a < 0 ? a : b < 0 ? b : a + b;
}

/* A process alone with a new store, stopped in its first commit by
 * torn_pwritev (its pages beside the slots: a tiny commit lives in them);
 * it commits, then reads (joining the segment if it was taken over). */
static pid_t spawn_first_commit(const char *p, int up, int down, int whole)
{
    pid_t pid = fork();
    if (pid)
        return pid;
    mote_io *io = stop_io(up, down);
    io->pwritev = torn_pwritev;
    stop_whole = whole;
    mote_options o = {0, 0, 0, io};
    mote_store *b;
    OK(mote_open(p, &o, &b));
    mote_txn *t;
    uint32_t tr;
    uint8_t buf[400];
    uint64_t v = 1;
    OK(mote_begin(b, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t k = 0; k < NKEYS; k++)
        OK(mote_kv_put(t, tr, &k, 4, buf, make_value(k, v, buf), 0));
    OK(mote_kv_put(t, tr, "counter", 7, &v, 8, 0));
    OK(mote_kv_put(t, tr, "latest", 6, &v, 8, 0));
    OK(mote_commit(t));
    CHECK(read_one(b, 0) == 1);
    OK(mote_close(b));
    _exit(0);
}

/* A new store's first commit writes both root slots and its pages in one
 * request. A process that takes the store over from the solo process in
 * the middle of it reads half of slot 0 written, slot 1 not yet: it waits
 * for the commit to end and reads the file again (it failed to open,
 * "neither root slot is valid": share_kill9_loop, on a new store). */
TEST(share_taker_during_the_first_commit)
{
    const char *p = test_path("first.mote");
    OK(mote_close(test_open(p, NULL))); /* created: no commit yet */
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t solo = spawn_first_commit(p, up[1], down[0], 0); /* stops in slot 0 */
    char x;
    CHECK(read(up[0], &x, 1) == 1);
    pid_t taker = fork();
    if (taker == 0) {
        mote_store *b = open_or_exit(p, 0); /* waits for the first commit */
        CHECK(read_one(b, 0) == 1);
        uint64_t rs = 3;
        int rc;
        CHECK(write_one(b, &rs, &rc) == 2);
        OK(mote_check(b, NULL, NULL));
        OK(mote_close(b));
        _exit(0);
    }
    usleep(200000); /* the taker reads the file meanwhile */
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(taker);
    wait_ok(solo);
    CHECK(counter_of(p) == 2);
}

/* A shim for the write request at offset 0 (a new store's first commit):
 * its first `die_after` pages, then the process dies, as a kill -9 between
 * two pages of the request would leave it. */
static int die_after;
static ssize_t dying_pwritev(void *c, int fd, const struct iovec *iov, int cnt, uint64_t off)
{
    if (off != 0 || cnt <= die_after)
        return mote_io_posix.pwritev(c, fd, iov, cnt, off);
    mote_io_posix.pwritev(c, fd, iov, die_after, off);
    _exit(0);
}

/* A process dies in a new store's first commit after its slots (one or
 * both), before its pages: the commit was never synced, so never
 * acknowledged, and the store opens as the empty store it was built on
 * (it was MOTE_CORRUPT for good: "neither root slot is valid", or its
 * pages past the file's end). The next commit works, and is there after a
 * reopen. */
TEST(share_killed_in_the_first_commit)
{
    for (die_after = 1; die_after <= 3; die_after++) {
        const char *p = test_path(die_after == 1 ? "d1.mote" : die_after == 2 ? "d2.mote"
                                                                               : "d3.mote");
        OK(mote_close(test_open(p, NULL)));
        pid_t pid = fork();
        if (pid == 0) {
            static mote_io io;
            io = mote_io_posix;
            io.pwritev = dying_pwritev;
            mote_store *b = open_io(p, &io);
            mote_txn *t;
            uint32_t tr;
            uint8_t buf[400];
            OK(mote_begin(b, 0, &t));
            OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
            for (uint32_t k = 0; k < NKEYS; k++)
                OK(mote_kv_put(t, tr, &k, 4, buf, make_value(k, 1, buf), 0));
            mote_commit(t); /* dies in it */
            _exit(30);
        }
        wait_ok(pid);
        CHECK(counter_of(p) == 0); /* the empty store */
        /* with a segment (writable by its group: no process goes alone
         * without one), where another process that joins finds the empty
         * store in neither slot of the file */
        CHECK(chmod(p, 0664) == 0);
        uint64_t rs = 3;
        int rc;
        mote_store *s = test_open(p, NULL);
        CHECK(segment_exists(p));
        pid_t joiner = fork();
        if (joiner == 0) {
            mote_store *b = open_or_exit(p, MOTE_RDONLY);
            CHECK(read_one(b, 0) == 0);
            OK(mote_close(b));
            _exit(0);
        }
        wait_ok(joiner);
        CHECK(write_one(s, &rs, &rc) == 1);
        OK(mote_close(s));
        CHECK(counter_of(p) == 1);
    }
}

/* A process takes over a new store whose solo process is about to write
 * its first commit: it reads the empty store (txnid 1, the creation page).
 * The first commit then rewrites both slots, and a process that opens the
 * store next joins the segment while the latest commit is still the empty
 * store: it must take it from the segment's copy (from the file, it found
 * only a commit not yet published, a thousand times: "commits come too fast
 * to read the latest", share_kill9_loop on a new store). */
TEST(share_joiner_during_the_first_commit)
{
    const char *p = test_path("join1.mote");
    OK(mote_close(test_open(p, NULL)));
    int up[2], down[2], up1[2], down1[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0);
    pid_t solo = spawn_first_commit(p, up[1], down[0], 1);
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1); /* stopped before its first write */
    pid_t taker = fork();
    if (taker == 0) {
        mote_store *b = open_or_exit(p, 0);
        CHECK(read_one(b, 0) == 0); /* the empty store */
        CHECK(write(up1[1], &x, 1) == 1);
        CHECK(read(down1[0], &x, 1) == 1);
        CHECK(read_one(b, 0) == 1);
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up1[0], &x, 1) == 1); /* the taker has the store open */
    CHECK(write(down[1], &x, 1) == 1);
    CHECK(read(up[0], &x, 1) == 1); /* the first commit written, not yet done */
    pid_t joiner = fork();
    if (joiner == 0) {
        mote_store *b = open_or_exit(p, MOTE_RDONLY);
        uint64_t c = read_one(b, 0); /* the empty store, or the first commit */
        CHECK(c <= 1);
        OK(mote_close(b));
        _exit(0);
    }
    wait_ok(joiner);
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(solo);
    CHECK(write(down1[1], &x, 1) == 1);
    wait_ok(taker);
    CHECK(counter_of(p) == 1);
}

/* The solo page (/dev/shm/motedb-solo-*) whose head names process `pid`
 * (share.c solo_head: magic, owner word with the pid in its low 32 bits);
 * its path in `out`. 1 if there is one. */
static int solo_page_of(pid_t pid, char *out, size_t n)
{
    DIR *d = opendir("/dev/shm");
    CHECK(d != NULL);
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) {
        if (strncmp(de->d_name, "motedb-solo-", 12))
            continue;
        snprintf(out, n, "/dev/shm/%s", de->d_name);
        uint64_t h[2] = {0, 0};
        int fd = open(out, O_RDONLY);
        if (fd < 0)
            continue;
        found = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
                h[0] == 0x314F4C4F53544F4Dull && (uint32_t)h[1] == (uint32_t)pid;
        close(fd);
    }
    closedir(d);
    return found;
}

/* A child that opens a store alone (so makes its solo page), says so on
 * `fd` and waits to be killed. */
static pid_t solo_holder(const char *path, int fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        (void)open_or_exit(path, MOTE_CREATE);
        char x = 1;
        if (write(fd, &x, 1) != 1)
            _exit(20);
        for (;;)
            pause();
    }
    CHECK(pid > 0);
    return pid;
}

/* A process that made a solo page removes at its exit its own and those of
 * processes that died (killed: no exit handler ran), and a page whose maker
 * died before it wrote its head (zeros), but no page of a live process; a
 * page of an earlier library (no `kept` mark: its owner word and pid
 * namespace) goes when its process is dead. Each process's first open read
 * /proc twice for that owner word, and swept, before (a third of its time):
 * now its maker's lock on the page's byte 0 says it lives, and the sweep
 * waits for the exit. */
TEST(share_solo_pages_of_dead_processes_swept)
{
    char pa[600], pb[600], pc[600], dead[300], live[300], zero[64], old[64];
    snprintf(pa, sizeof pa, "%s", test_path("sweep-a.mote"));
    snprintf(pb, sizeof pb, "%s", test_path("sweep-b.mote"));
    snprintf(pc, sizeof pc, "%s", test_path("sweep-c.mote"));
    int up[2];
    CHECK(pipe(up) == 0);
    pid_t a = solo_holder(pa, up[1]), b = solo_holder(pb, up[1]);
    char x;
    CHECK(read(up[0], &x, 1) == 1 && read(up[0], &x, 1) == 1);
    CHECK(solo_page_of(a, dead, sizeof dead) && solo_page_of(b, live, sizeof live));
    CHECK(kill(a, SIGKILL) == 0 && waitpid(a, NULL, 0) == a);
    CHECK(access(dead, F_OK) == 0); /* killed: its page stays, for now */

    /* one whose maker died before its head, and one of an earlier library
     * whose process (a, dead now) was in this pid namespace */
    snprintf(zero, sizeof zero, "/dev/shm/motedb-solo-%010llx", 0x3ffffffff0ull + (unsigned)(getpid() & 7));
    snprintf(old, sizeof old, "/dev/shm/motedb-solo-%010llx", 0x3ffffffff8ull + (unsigned)(getpid() & 7));
    char nsl[64] = {0};
    CHECK(readlink("/proc/self/ns/pid", nsl, sizeof nsl - 1) > 0);
    uint64_t head[8] = {0, (uint64_t)a | 12345ull << 32, strtoull(strchr(nsl, '[') + 1, NULL, 10)};
    head[0] = 0x314F4C4F53544F4Dull;
    for (int i = 0; i < 2; i++) {
        int fd = open(i ? old : zero, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
        if (i)
            CHECK(pwrite(fd, head, sizeof head, 0) == (ssize_t)sizeof head);
        close(fd);
    }

    fflush(NULL);
    pid_t c = fork();
    if (c == 0) { /* its first open makes its page; its exit sweeps */
        OK(mote_close(open_or_exit(pc, MOTE_CREATE)));
        char own[300];
        if (!solo_page_of(getpid(), own, sizeof own) || access(dead, F_OK) != 0)
            _exit(30); /* (not at the open) */
        exit(0);
    }
    wait_ok(c);
    CHECK(access(dead, F_OK) != 0 && errno == ENOENT);
    CHECK(access(zero, F_OK) != 0 && errno == ENOENT);
    CHECK(access(old, F_OK) != 0 && errno == ENOENT);
    CHECK(access(live, F_OK) == 0);
    char own[300];
    CHECK(!solo_page_of(c, own, sizeof own)); /* its own went too */
    CHECK(kill(b, SIGKILL) == 0 && waitpid(b, NULL, 0) == b);
    unlink(live); /* (not left for the next sweep) */
    close(up[0]);
    close(up[1]);
}

/* A byte of the solo range of a store locked by a process whose solo page
 * entry there is another store's (one closing that store frees the entry
 * before its descriptor and lock go; or a process that confuses on
 * purpose): an open of the store fails with MOTE_LOCKED after its retries,
 * naming the process. It read the page's owner for that message after
 * unmapping the page: SIGSEGV (found by six processes opening one new
 * store at once). */
TEST(share_solo_byte_of_another_store)
{
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s", test_path("solo-a.mote"));
    snprintf(p2, sizeof p2, "%s", test_path("solo-b.mote"));
    OK(mote_close(test_open(p1, NULL)));
    OK(mote_close(test_open(p2, NULL)));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t a = fork();
    if (a == 0) {
        mote_store *s = open_or_exit(p1, 0); /* alone: solo, its byte locked on p1 */
        int fd1 = open(p1, O_RDONLY), fd2 = open(p2, O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                           .l_start = (off_t)((1ull << 62) + (1ull << 58)), .l_len = 1ll << 56};
        if (fd1 < 0 || fd2 < 0 || fcntl(fd1, F_OFD_GETLK, &fl) || fl.l_type == F_UNLCK)
            _exit(20); /* (the solo range: share.c SOLO_LOCK, SOLO_SPAN) */
        struct flock rd = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = fl.l_start,
                           .l_len = 1};
        if (fcntl(fd2, F_OFD_SETLK, &rd) || flock(fd2, LOCK_SH))
            _exit(21); /* p2 open here (shared), its solo byte p1's entry */
        char x = 1;
        if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
            _exit(22);
        OK(mote_close(s));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1);
    mote_store *s = NULL;
    CHECK_RC(mote_open(p2, NULL, &s), MOTE_LOCKED);
    CHECK(strstr(mote_last_open_error(), "is not visible here (it does not match)"));
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(a);
    OK(mote_close(test_open(p2, NULL))); /* once it is gone */
}

/* Processes that open one new path at the same instant, each to commit
 * once: one of them creates the store (the others find the file it made,
 * empty or not yet initialized, and wait for its lock), every commit is
 * kept, and the store checks clean. Twenty rounds of six. */
TEST(share_many_create_one_store)
{
    enum { ROUNDS = 20, PROCS = 6 };
    uint64_t *got = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(got != MAP_FAILED);
    for (int r = 0; r < ROUNDS; r++) {
        char name[40];
        snprintf(name, sizeof name, "many-%d.mote", r);
        const char *p = test_path(name);
        int go[2];
        CHECK(pipe(go) == 0);
        pid_t kids[PROCS];
        for (int i = 0; i < PROCS; i++) {
            kids[i] = fork();
            if (kids[i] == 0) {
                close(go[1]);
                char x;
                if (read(go[0], &x, 1) != 0) /* until the parent closes it: all at once */
                    _exit(11);
                mote_store *s = open_or_exit(p, MOTE_CREATE);
                uint64_t rs = (uint64_t)(r * PROCS + i + 1);
                int rc = 0;
                if (!(got[i] = write_one(s, &rs, &rc))) {
                    fprintf(stderr, "child %d: commit: %s: %s\n", (int)getpid(),
                            mote_strerror(rc), mote_errmsg(NULL));
                    _exit(12);
                }
                OK(mote_close(s));
                _exit(0);
            }
        }
        close(go[0]);
        close(go[1]);
        for (int i = 0; i < PROCS; i++)
            wait_ok(kids[i]);
        uint64_t c = counter_of(p);
        if (c != PROCS) /* (which commits read the same counter) */
            for (int i = 0; i < PROCS; i++)
                fprintf(stderr, "round %d: child %d committed counter %llu\n", r, i,
                        (unsigned long long)got[i]);
        CHECK(c == PROCS);
    }
    munmap(got, 4096);
}

/* A shim that stops a process after its second fstat of the file its
 * first fstat was of (an open: the store file's size again, after the
 * takeover's bell) until the parent lets it go. */
static int fstat_fd = -1, fstat_n;
static int stop_second_fstat(void *c, int fd, mote_fileinfo *fi)
{
    int r = mote_io_posix.fstat(c, fd, fi);
    if (fstat_fd < 0)
        fstat_fd = fd;
    if (fd == fstat_fd && ++fstat_n == 2 && stop_up >= 0)
        stop_once();
    return r;
}

/* A solo process is in a write when another process takes the store over;
 * it commits (growing the file) between the taker's size and the taker's
 * read of the file, which then finds that commit. The taker's first write
 * must not take the file for the size it read: its growth's zeros went
 * over that commit's pages (share_kill9_loop: "checksum mismatch (it holds
 * page 0 of txn 0)"). */
TEST(share_taker_after_a_growing_commit)
{
    const char *p = test_path("grow.mote");
    int up[2], down[2], up1[2], down1[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0 && pipe(up1) == 0 && pipe(down1) == 0);
    pid_t solo = fork();
    if (solo == 0) {
        uint64_t rs = 2;
        int rc;
        mote_store *b = store_of(p, 10, &rs); /* alone: no segment */
        mote_txn *t;
        uint32_t tr;
        uint8_t buf[400];
        uint64_t v = 11;
        OK(mote_begin(b, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        for (uint32_t k = 0; k < NKEYS; k++) /* (the file grows by a chunk of zeros) */
            OK(mote_kv_put(t, tr, &k, 4, buf, make_value(k, v, buf), 0));
        OK(mote_kv_put(t, tr, "counter", 7, &v, 8, 0));
        OK(mote_kv_put(t, tr, "latest", 6, &v, 8, 0));
        char y = 1;
        CHECK(write(up1[1], &y, 1) == 1);
        CHECK(read(down1[0], &y, 1) == 1); /* taken over meanwhile */
        OK(mote_commit(t));
        CHECK(write(up1[1], &y, 1) == 1);
        CHECK(read(down1[0], &y, 1) == 1);
        CHECK(read_one(b, 0) >= 11); /* joins */
        CHECK(write_one(b, &rs, &rc) != 0);
        OK(mote_check(b, NULL, NULL));
        OK(mote_close(b));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up1[0], &x, 1) == 1); /* in its write */
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->fstat = stop_second_fstat;
        mote_store *b = open_io(p, io);
        CHECK(write(up[1], &x, 1) == 1);
        uint64_t rs = 4;
        int rc;
        CHECK(write_one(b, &rs, &rc) != 0); /* waits until the solo process joined */
        CHECK(write(up[1], &x, 1) == 1);
        OK(mote_check(b, NULL, NULL));
        OK(mote_close(b));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1); /* the taker has the file's size */
    struct stat before, after;
    CHECK(stat(p, &before) == 0);
    CHECK(write(down1[1], &x, 1) == 1); /* the solo process commits */
    for (int i = 0; i < 5000; i++) { /* (its write done, it waits for the segment) */
        CHECK(stat(p, &after) == 0);
        if (after.st_size > before.st_size)
            break;
        usleep(1000);
    }
    CHECK(after.st_size > before.st_size); /* (else the test shows nothing) */
    CHECK(write(down[1], &x, 1) == 1);
    CHECK(read(up[0], &x, 1) == 1); /* the taker opened */
    CHECK(read(up1[0], &x, 1) == 1); /* the solo process committed, and joined */
    CHECK(read(up[0], &x, 1) == 1); /* the taker committed */
    CHECK(write(down1[1], &x, 1) == 1);
    wait_ok(solo);
    wait_ok(taker);
    CHECK(counter_of(p) == 13);
}

/* A taker stops after it rang the solo process's bell, before the segment
 * is ready, for longer than the solo process's busy timeout. The solo
 * process's write must fail with MOTE_BUSY (it went on alone: two writers,
 * each unaware of the other), and its next one, once the taker is ready,
 * join. */
TEST(share_solo_waits_for_a_slow_taker)
{
    const char *p = test_path("slow.mote");
    uint64_t rs = 5;
    int rc;
    mote_store *s = store_of(p, 10, &rs); /* alone: no segment */
    OK(mote_busy_timeout(s, 100));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t taker = fork();
    if (taker == 0) {
        mote_io *io = stop_io(up[1], down[0]);
        io->fstat = stop_second_fstat; /* after the bell */
        mote_store *b = open_io(p, io);
        uint64_t rs2 = 7;
        CHECK(write_one(b, &rs2, &rc) != 0);
        OK(mote_close(b));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1);
    mote_txn *t;
    CHECK_RC(mote_begin(s, 0, &t), MOTE_BUSY);
    CHECK(strstr(mote_errmsg(NULL), "another process is opening it") != NULL);
    CHECK(write(down[1], &x, 1) == 1);
    CHECK(write_one(s, &rs, &rc) != 0); /* joins */
    wait_ok(taker);
    CHECK(read_one(s, 0) == 12);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

/* A process opens a store that another holds exclusively: it reads the
 * file's size, then waits for the flock; the other commits 60 times
 * (growing the file) and dies. The opener, alone now, must read the newest
 * commit: with the size it read before the flock it followed the chain of
 * commit records only that far (share_kill9_loop: a reader that waited
 * while two writers had the store open, then both died). */
TEST(share_open_after_waiting_reads_the_file_as_it_is)
{
    const char *p = test_path("waited.mote");
    uint64_t rs = 5;
    OK(mote_close(store_of(p, 10, &rs)));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t holder = fork();
    if (holder == 0) {
        mote_options o = {MOTE_EXCLUSIVE | MOTE_NOSYNC, 0, 0, NULL};
        mote_store *b;
        OK(mote_open(p, &o, &b));
        char y = 1;
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1);
        int rc;
        for (int i = 0; i < 60; i++)
            CHECK(write_one(b, &rs, &rc) != 0);
        _exit(0); /* dies with the store open */
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1);
    struct stat before, after;
    CHECK(stat(p, &before) == 0);
    pid_t opener = fork();
    if (opener == 0) {
        mote_store *b = open_or_exit(p, 0); /* waits up to 50 ms for the flock */
        uint64_t c = read_one(b, 0);
        if (c != 70) {
            fprintf(stderr, "opener: counter %llu, expected 70\n", (unsigned long long)c);
            _exit(21);
        }
        OK(mote_check(b, NULL, NULL));
        OK(mote_close(b));
        _exit(0);
    }
    usleep(5000); /* it read the size and waits */
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(holder);
    wait_ok(opener);
    CHECK(stat(p, &after) == 0);
    CHECK(after.st_size > before.st_size); /* (else the test shows nothing) */
}

/* A process alone with a store (no segment, SOLO in share.c) that stays
 * idle holds nothing back: another process that opens the store takes it
 * over and rewrites the same keys 200 times, reusing pages (the file does
 * not grow with the commits); the idle one joins at its next transaction
 * and sees the last commit. */
TEST(share_solo_idle_holds_nothing_back)
{
    const char *p = test_path("idle.mote"), *q = test_path("idle2.mote");
    uint64_t rs = 3;
    int rc;
    mote_store *s = store_of(p, 20, &rs);
    CHECK(!segment_exists(p));
    wait_ok(spawn_writer(p, -1, 20, 7, 0));
    wait_ok(spawn_writer(p, -1, 200, 9, 0));
    /* the same commits with no other process: the size this store takes */
    uint64_t rs2 = 3;
    OK(mote_close(store_of(q, 20, &rs2)));
    wait_ok(spawn_writer(q, -1, 20, 7, 0));
    wait_ok(spawn_writer(q, -1, 200, 9, 0));
    CHECK(read_one(s, 0) == 240); /* joins: sees the last commit */
    CHECK(write_one(s, &rs, &rc) == 241);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    CHECK(!segment_exists(p));
    /* (sizes after the last close of each: the zeros that growth wrote past
     * the last page are cut then, check.c mote__shrink; pages held back by
     * the idle one would be hundreds more: the 200 rewrites free 2-3 each,
     * where the takeover and the 241st commit cost a few) */
    struct stat fs, fs2;
    CHECK(stat(p, &fs) == 0 && stat(q, &fs2) == 0);
    printf("file after 240 commits: %llu pages (the one alone idle), %llu (alone throughout)\n",
           (unsigned long long)fs.st_size / 4096, (unsigned long long)fs2.st_size / 4096);
    CHECK(fs.st_size <= fs2.st_size + 16 * 4096);
}

/* A process alone with a store is killed in a write transaction after
 * another process took the store over: the taker's next write finds it
 * gone, takes what is on disk (nothing of the unfinished transaction) and
 * commits on it. */
TEST(share_solo_killed_in_a_write_after_takeover)
{
    const char *p = test_path("killed.mote");
    uint64_t rs = 3;
    int rc;
    OK(mote_close(store_of(p, 10, &rs)));
    int up[2];
    CHECK(pipe(up) == 0);
    pid_t pid = fork();
    if (pid == 0) { /* alone: in a write transaction until killed */
        mote_store *c = open_or_exit(p, 0);
        mote_txn *t;
        uint32_t tr;
        uint64_t big = 999;
        OK(mote_begin(c, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        OK(mote_kv_put(t, tr, "counter", 7, &big, 8, 0));
        char x = 1;
        CHECK(write(up[1], &x, 1) == 1);
        for (;;)
            pause();
    }
    char x;
    CHECK(read(up[0], &x, 1) == 1);
    mote_store *s = test_open(p, NULL); /* takes it over while it writes */
    CHECK(read_one(s, 0) == 10);         /* reads go on */
    OK(mote_busy_timeout(s, 50));
    mote_txn *t;
    CHECK_RC(mote_begin(s, 0, &t), MOTE_BUSY); /* a write waits for it */
    kill(pid, SIGKILL);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    OK(mote_busy_timeout(s, 5000));
    CHECK(write_one(s, &rs, &rc) == 11); /* on what is on disk */
    CHECK(read_one(s, 0) == 11);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    CHECK(!segment_exists(p));
    CHECK(counter_of(p) == 11);
}

/* Past its budget of mapped segments (MOTE_SHARED_MAX here; a quarter of
 * vm.max_map_count by default) a process opens stores exclusively: it can
 * hold more stores open than it could map, bounded by its descriptors. */
TEST(share_map_budget)
{
    enum { N = 60, BUDGET = 20 };
    setenv("MOTE_SHARED_MAX", "20", 1);
    mote_store *s[N];
    char name[32];
    for (int i = 0; i < N; i++) { /* writable by the group: each makes a segment
                                     (a process alone with its own store makes none) */
        snprintf(name, sizeof name, "b%d.mote", i);
        mote_options o = {MOTE_CREATE | MOTE_NOSYNC | MOTE_NODIRSYNC, 0, 0, NULL};
        OK(mote_close(test_open(test_path(name), &o)));
        CHECK(chmod(test_path(name), 0660) == 0);
        s[i] = test_open(test_path(name), &o);
    }
    pid_t pid = fork();
    if (pid == 0) { /* the shared ones open here too, the others are locked */
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "b%d.mote", i);
            mote_store *c = NULL;
            int rc = mote_open(test_path(name), NULL, &c);
            if (rc != (i < BUDGET ? MOTE_OK : MOTE_LOCKED)) {
                fprintf(stderr, "store %d: %s: %s\n", i, mote_strerror(rc), mote_last_open_error());
                _exit(1);
            }
            mote_close(c);
        }
        _exit(0);
    }
    wait_ok(pid);
    for (int i = 0; i < N; i++)
        OK(mote_close(s[i]));
    printf("%d stores open, %d of them shared\n", N, BUDGET);
}

/* ---- system calls of an open (the POSIX shim, counted) -------------------------- */

static long calls[20];
enum { C_OPEN, C_CLOSE, C_PREAD, C_PWRITE, C_SYNC, C_FLOCK, C_FSTAT, C_TRUNC, C_LOCK, C_MAP,
       C_UNMAP, C_UNLINK, C_CHMOD, C_OTHER };
#define P mote_io_posix
static int c_open(void *c, const char *p, int f, int m) { calls[C_OPEN]++; return P.open(c, p, f, m); }
static int c_close(void *c, int fd) { calls[C_CLOSE]++; return P.close(c, fd); }
static ssize_t c_pread(void *c, int fd, void *b, size_t n, uint64_t o)
{
    calls[C_PREAD]++;
    return P.pread(c, fd, b, n, o);
}
static ssize_t c_pwrite(void *c, int fd, const void *b, size_t n, uint64_t o)
{
    calls[C_PWRITE]++;
    return P.pwrite(c, fd, b, n, o);
}
static ssize_t c_pwritev(void *c, int fd, const struct iovec *v, int n, uint64_t o)
{
    calls[C_PWRITE]++;
    return P.pwritev(c, fd, v, n, o);
}
static int c_sync(void *c, int fd) { calls[C_SYNC]++; return P.fdatasync(c, fd); }
static int c_dsync(void *c, const char *p) { calls[C_SYNC]++; return P.fsync_dir(c, p); }
static int c_flock(void *c, int fd, int op) { calls[C_FLOCK]++; return P.flock(c, fd, op); }
static int c_fstat(void *c, int fd, mote_fileinfo *fi) { calls[C_FSTAT]++; return P.fstat(c, fd, fi); }
static int c_trunc(void *c, int fd, uint64_t n) { calls[C_TRUNC]++; return P.ftruncate(c, fd, n); }
static int c_lock(void *c, int fd, int op, uint64_t o, uint64_t n)
{
    calls[C_LOCK]++;
    return P.lock(c, fd, op, o, n);
}
static int c_map(void *c, int fd, size_t n, void **o) { calls[C_MAP]++; return P.map(c, fd, n, o); }
static int c_unmap(void *c, void *p, size_t n) { calls[C_UNMAP]++; return P.unmap(c, p, n); }
static int c_unlink(void *c, const char *p) { calls[C_UNLINK]++; return P.unlink(c, p); }
static int c_chmod(void *c, int fd, unsigned m) { calls[C_CHMOD]++; return P.chmod(c, fd, m); }
#undef P
static const mote_io counting = {NULL,    c_open,  c_close, c_pread,  c_pwrite, c_pwritev,
                                 c_sync,  c_dsync, c_flock, c_fstat,  c_trunc,  c_lock,
                                 c_map,   c_unmap, c_unlink, c_chmod, NULL};

static long total_calls(void)
{
    long n = 0;
    for (int i = 0; i < C_OTHER; i++)
        n += calls[i];
    return n;
}

/* The system calls of an open, stated. A process alone with a tiny store
 * makes no segment (SOLO in share.c): open, fstat, flock exclusive, the
 * open byte tested and locked, one pread, the solo byte locked, flock
 * shared; its last close of a store whose other slot holds the marker
 * already (it opened clean and wrote nothing): close, nothing else. A
 * read or write transaction makes none of its own. Another process that
 * opens the store takes it over (finds the solo byte, makes the segment);
 * the one alone joins at its next transaction, and the last close removes
 * the segment. A process's first open also makes its solo page, once; its
 * first open that takes a store over (or joins) reads its own start time
 * (/proc/self/stat, through the shim: an open, a pread, a close), once. */
TEST(share_open_syscalls)
{
    const char *p = test_path("sys.mote");
    mote_options o = {MOTE_CREATE, 0, 0, &counting};
    mote_store *s = test_open(p, &o);
    uint64_t rs = 3;
    int rc;
    CHECK(write_one(s, &rs, &rc) == 1); /* (closed cleanly after a commit: a marker) */
    OK(mote_close(s));
    memset(calls, 0, sizeof calls);
    s = test_open(p, &o);
    long first = total_calls();
    printf("open, alone: %ld calls (%ld open, %ld fstat, %ld flock, %ld lock, %ld pread)\n",
           first, calls[C_OPEN], calls[C_FSTAT], calls[C_FLOCK], calls[C_LOCK], calls[C_PREAD]);
    CHECK(calls[C_OPEN] == 1 && calls[C_FSTAT] == 1 && calls[C_FLOCK] == 2 && calls[C_LOCK] == 3 &&
          calls[C_PREAD] == 1 && first == 8);
    mote_txn *t;
    memset(calls, 0, sizeof calls);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    mote_abort(t);
    OK(mote_begin(s, 0, &t));
    mote_abort(t);
    CHECK(total_calls() == 0);
    OK(mote_close(s));
    printf("close, alone: %ld calls\n", total_calls());
    CHECK(calls[C_CLOSE] == 1 && total_calls() == 1);
    CHECK(!segment_exists(p));
    s = test_open(p, &o);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) { /* (its first open made its solo page) */
        OK(mote_close(test_open(test_path("other.mote"), &o)));
        memset(calls, 0, sizeof calls);
        mote_store *c = test_open(p, &o);
        long n = total_calls();
        printf("open, taking over: %ld calls (%ld lock tests, most finding the solo byte)\n",
               n, calls[C_LOCK]);
        CHECK(calls[C_MAP] == 2 && calls[C_UNMAP] == 1 && calls[C_PREAD] == 2 && n < 90);
        memset(calls, 0, sizeof calls);
        OK(mote_close(c)); /* not the last: no unlink */
        CHECK(calls[C_UNLINK] == 0 && calls[C_FLOCK] == 1);
        _exit(0);
    }
    wait_ok(pid);
    CHECK(segment_exists(p)); /* its maker closed; the one alone has not joined yet */
    memset(calls, 0, sizeof calls);
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t)); /* joins: the segment mapped, slot 0 locked */
    mote_abort(t);
    printf("joining at a transaction: %ld calls\n", total_calls());
    /* (and, this process's first join, its start time: open, pread, close) */
    CHECK(calls[C_MAP] == 1 && calls[C_OPEN] == 2 && calls[C_PREAD] == 1 && total_calls() <= 10);
    memset(calls, 0, sizeof calls);
    OK(mote_close(s));
    printf("close, last: %ld calls\n", total_calls());
    CHECK(calls[C_UNLINK] == 1 && calls[C_UNMAP] == 1 && calls[C_CLOSE] == 1 && calls[C_LOCK] == 1 &&
          total_calls() == 5);
    CHECK(!segment_exists(p));
    close(fds[0]);
    close(fds[1]);
}

/* A reader in another process takes the commit another process made since
 * its last transaction from the segment's copy of the root slot: no system
 * call (before, one pread of both slots and two slot hashes). The copy is
 * made only once a second process opened the store. */
TEST(share_reader_takes_root_copy)
{
    const char *p = test_path("copy.mote");
    mote_options o = {MOTE_CREATE, 0, 0, &counting};
    mote_store *s = test_open(p, &o);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "k", 1, "v1", 2, 0));
    OK(mote_commit(t));
    int to_child[2], to_parent[2];
    CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        mote_store *c = test_open(p, &o);
        char b = 'r';
        CHECK(write(to_parent[1], &b, 1) == 1);
        for (int round = 2; round <= 4; round++) {
            CHECK(read(to_child[0], &b, 1) == 1); /* the parent committed v<round> */
            memset(calls, 0, sizeof calls);
            mote_txn *r;
            mote_val v;
            char want[3] = {'v', (char)('0' + round), 0};
            OK(mote_begin(c, MOTE_TXN_RDONLY, &r));
            OK(mote_kv_tree(r, "t", 0, &tr));
            OK(mote_kv_get(r, tr, "k", 1, &v));
            CHECK(v.size == 2 && memcmp(v.data, want, 2) == 0);
            mote_abort(r);
            printf("round %d: %ld system calls to read the new commit\n", round, total_calls());
            CHECK(total_calls() == 0);
            CHECK(write(to_parent[1], &b, 1) == 1);
        }
        OK(mote_close(c));
        _exit(0);
    }
    close(to_child[0]); /* a child that fails ends its pipe: the read below fails */
    close(to_parent[1]);
    char b;
    CHECK(read(to_parent[0], &b, 1) == 1);
    for (int round = 2; round <= 4; round++) {
        char val[3] = {'v', (char)('0' + round), 0};
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        OK(mote_kv_put(t, tr, "k", 1, val, 2, 0));
        OK(mote_commit(t));
        CHECK(write(to_child[1], &b, 1) == 1);
        CHECK(read(to_parent[0], &b, 1) == 1);
    }
    wait_ok(pid);
    OK(mote_close(s));
    close(to_child[1]);
    close(to_parent[0]);
}

/* The counting shim, except that it cannot map more than 1 MB: a process
 * without the segment's page copies (share.c), which reads the file. */
static int small_map(void *c, int fd, size_t n, void **o)
{
    return n > (1u << 20) ? -ENOMEM : c_map(c, fd, n, o);
}

/* A reader in another process takes the pages of a new commit from the
 * shared segment's copies: reading the key another process just changed
 * costs no pread, where it cost two (its leaf and its parent branch) from
 * the file, and one with copies of branch pages only. A process that cannot
 * map the copies reads both from the file, and reads them right. */
TEST(share_reader_takes_page_copies)
{
    const char *p = test_path("branch.mote");
    mote_options o = {MOTE_CREATE, 0, 0, &counting};
    mote_store *s = test_open(p, &o);
    mote_txn *t;
    uint32_t tr;
    static const char val[40] = "forty bytes of value, so that the tree h";
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t k = 0; k < 20000; k++) { /* three levels: slot, branches, leaves */
        uint32_t key = __builtin_bswap32(k);
        OK(mote_kv_put(t, tr, &key, 4, val, sizeof val, 0));
    }
    OK(mote_commit(t));
    mote_io no_copies = counting;
    no_copies.map = small_map;
    for (int copies = 1; copies >= 0; copies--) {
        char now[4] = {'n', 'e', copies ? 'w' : '2', 0};
        int to_child[2], to_parent[2];
        CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            close(to_child[1]);
            close(to_parent[0]);
            mote_options co = {0, 0, 0, copies ? &counting : &no_copies};
            mote_store *c = test_open(p, &co);
            mote_txn *r;
            mote_val v;
            OK(mote_begin(c, MOTE_TXN_RDONLY, &r)); /* every page into its cache */
            OK(mote_kv_tree(r, "t", 0, &tr));
            for (uint32_t k = 0; k < 20000; k++) {
                uint32_t key = __builtin_bswap32(k);
                OK(mote_kv_get(r, tr, &key, 4, &v));
            }
            mote_abort(r);
            char b = 'r';
            CHECK(write(to_parent[1], &b, 1) == 1);
            CHECK(read(to_child[0], &b, 1) == 1); /* the parent changed key 7000 */
            memset(calls, 0, sizeof calls);
            uint32_t key = __builtin_bswap32(7000);
            OK(mote_begin(c, MOTE_TXN_RDONLY, &r));
            OK(mote_kv_tree(r, "t", 0, &tr));
            OK(mote_kv_get(r, tr, &key, 4, &v));
            CHECK(v.size == 3 && memcmp(v.data, now, 3) == 0);
            mote_abort(r);
            printf("%ld pread to read the changed key (%s)\n", calls[C_PREAD],
                   copies ? "its leaf and branch from the copies" : "no copies mapped");
            CHECK(calls[C_PREAD] == (copies ? 0 : 2));
            OK(mote_close(c));
            _exit(0);
        }
        close(to_child[0]);
        close(to_parent[1]);
        char b;
        CHECK(read(to_parent[0], &b, 1) == 1);
        uint32_t key = __builtin_bswap32(7000);
        OK(mote_begin(s, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        OK(mote_kv_put(t, tr, &key, 4, now, 3, 0));
        OK(mote_commit(t));
        CHECK(write(to_child[1], &b, 1) == 1);
        wait_ok(pid);
        close(to_child[1]);
        close(to_parent[0]);
    }
    OK(mote_close(s));
}

/* flock(2) changes an exclusive lock to a shared one by dropping it first:
 * this shim widens that instant to 300 ms. */
static int slow_flock(void *c, int fd, int op)
{
    if (op == LOCK_SH) {
        mote_io_posix.flock(c, fd, LOCK_UN);
        usleep(300000);
    }
    return mote_io_posix.flock(c, fd, op);
}

/* A process that opens and closes the store while another is in that
 * instant of its open is not alone: it leaves the other's shared segment,
 * marker and file as they are, and the other's commits reach a third
 * process. */
TEST(share_close_during_an_open)
{
    const char *p = test_path("instant.mote");
    OK(mote_close(test_open(p, NULL)));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        static mote_io io;
        io = mote_io_posix;
        io.flock = slow_flock;
        mote_store *b = open_io(p, &io); /* alone: makes the segment, then the slow instant */
        char x = 1;
        CHECK(write(up[1], &x, 1) == 1);
        CHECK(read(down[0], &x, 1) == 1);
        uint64_t rs = 5;
        int rc;
        CHECK(write_one(b, &rs, &rc) == 1); /* seen by the third process */
        CHECK(write(up[1], &x, 1) == 1);
        CHECK(read(down[0], &x, 1) == 1);
        OK(mote_close(b));
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    usleep(100000); /* the child is in its instant now */
    mote_store *a = test_open(p, NULL);
    OK(mote_close(a));
    CHECK(segment_exists(p)); /* the child's */
    char x;
    CHECK(read(up[0], &x, 1) == 1); /* the child's open ended */
    CHECK(write(down[1], &x, 1) == 1);
    CHECK(read(up[0], &x, 1) == 1); /* it committed */
    mote_store *c = test_open(p, NULL);
    CHECK(read_one(c, 0) == 1);
    OK(mote_close(c));
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(pid);
    CHECK(!segment_exists(p));
    close(up[0]);
    close(down[1]);
}

/* ---- a file this process may not write -------------------------------------------- */

static int refuse_errno; /* what opening for writing gives (EACCES, EROFS) */
static int ro_open(void *c, const char *p, int f, int m)
{
    if ((f & O_ACCMODE) != O_RDONLY && strstr(p, ".mote") && !strstr(p, "/dev/shm"))
        return -refuse_errno;
    return mote_io_posix.open(c, p, f, m);
}

/* No write permission, or a read-only file system: the store opens for
 * reading (alongside a writer elsewhere) and a write says why. */
TEST(share_unwritable_file_opens_read_only)
{
    const char *p = test_path("ro.mote");
    mote_store *w = test_open(p, NULL); /* a writer, in this process */
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(w, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_kv_put(t, tr, "k", 1, "v", 1, 0));
    OK(mote_commit(t));
    mote_io io = mote_io_posix;
    io.open = ro_open;
    int errs[2] = {EACCES, EROFS};
    const char *why[2] = {"this process may not write the file", "its file system is read-only"};
    for (int i = 0; i < 2; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            refuse_errno = errs[i];
            mote_options o = {MOTE_CREATE, 0, 0, &io};
            mote_store *s = test_open(p, &o);
            CHECK(mote_store_readonly(s) == 1);
            mote_val v;
            OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
            OK(mote_kv_get(t, tr, "k", 1, &v));
            mote_abort(t);
            CHECK_RC(mote_begin(s, 0, &t), MOTE_READONLY);
            CHECK(strstr(mote_errmsg(NULL), why[i]) != NULL);
            OK(mote_close(s));
            _exit(0);
        }
        wait_ok(pid);
    }
    CHECK(mote_store_readonly(w) == 0);
    OK(mote_close(w));
}

/* ---- a second user that may only read the store ---------------------------------- */

static void become_nobody(void)
{
    if (setgid(65534) != 0 || setuid(65534) != 0)
        _exit(70);
}

/* The path of a store the user "nobody" may read (its directory opened to
 * others), or NULL when the tests cannot become another user. */
static const char *nobody_readable(const char *name)
{
    if (geteuid() != 0) {
        printf("skipped: needs root to become another user\n");
        return NULL;
    }
    const char *p = test_path(name);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", p);
    *strrchr(dir, '/') = 0;
    CHECK(chmod(dir, 0755) == 0);
    return p;
}

/* A user that may only read the store (here: "nobody", where the tests run
 * as root) reads it alongside the owner's writer without the shared page
 * (it may not open it: its bits are the writers'), cannot write it, holds
 * no writer up, and never reads a value from a reused page: it sees the
 * data or MOTE_BUSY. Opened first, it does not make the page, and the
 * owner's process that opens next makes it. */
TEST(share_read_only_user)
{
    const char *p = nobody_readable("user.mote");
    if (!p)
        return;
    mote_store *w = test_open(p, NULL);
    uint64_t rs = 9;
    int rc;
    for (int i = 0; i < 20; i++)
        CHECK(write_one(w, &rs, &rc) != 0);
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    if (pid == 0) { /* nobody: reads while the owner writes */
        become_nobody();
        mote_options o = {0, 0, 4, NULL}; /* a tiny cache: reads go to the file */
        mote_store *s;
        OK(mote_open(p, &o, &s));
        CHECK(mote_store_readonly(s) == 1);
        mote_txn *t;
        CHECK_RC(mote_begin(s, 0, &t), MOTE_READONLY);
        long whole = 0, busy = 0;
        uint64_t last = 0;
        for (int n = 0; n < 20; n++) {
            uint32_t tr;
            OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
            OK(mote_kv_tree(t, "t", 0, &tr));
            uint64_t c = get_u64(t, tr, "counter");
            CHECK(c > last); /* the owner's commits, seen at the next transaction */
            last = c;
            mote_cursor *cur;
            OK(mote_cursor_open(t, tr, &cur));
            int seen = 0;
            for (rc = mote_cursor_first(cur); rc == MOTE_OK; rc = mote_cursor_next(cur)) {
                mote_val k, v;
                uint64_t ver = 0;
                OK(mote_cursor_get(cur, &k, &v));
                uint32_t key;
                if (k.size != 4)
                    continue;
                memcpy(&key, k.data, 4);
                CHECK(value_ok(key, &v, &ver) && ver <= c); /* never a wrong value */
                if (++seen == 10) { /* the owner commits 30 times meanwhile */
                    char x = 1;
                    CHECK(write(up[1], &x, 1) == 1);
                    CHECK(read(down[0], &x, 1) == 1);
                }
            }
            CHECK(rc == MOTE_NOTFOUND || rc == MOTE_BUSY);
            rc == MOTE_BUSY ? busy++ : whole++;
            mote_cursor_close(cur);
            mote_abort(t);
        }
        printf("nobody: %ld snapshots read whole, %ld ended by MOTE_BUSY (pages reused "
               "under them)\n", whole, busy);
        char x = 0;
        CHECK(write(up[1], &x, 1) == 1);
        OK(mote_close(s));
        _exit(0);
    }
    char x;
    struct stat st;
    CHECK(stat(p, &st) == 0);
    char seg[96];
    snprintf(seg, sizeof seg, "/dev/shm/motedb-%llx-%llx", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    CHECK(stat(seg, &st) != 0); /* the owner is alone: a reader that may only read takes
                                   nothing over (SOLO) */
    mote_busy_timeout(w, 0); /* the owner is never held up */
    uint64_t made = 20;
    while (read(up[0], &x, 1) == 1 && x == 1) {
        for (int i = 0; i < 30; i++)
            CHECK((made = write_one(w, &rs, &rc)) != 0);
        CHECK(write(down[1], &x, 1) == 1);
    }
    wait_ok(pid);
    OK(mote_close(w));
    CHECK(!segment_exists(p));

    /* nobody first: it makes no shared page; the owner's next open makes it */
    pid = fork();
    if (pid == 0) {
        become_nobody();
        mote_store *s;
        mote_options o = {MOTE_RDONLY, 0, 8, NULL};
        OK(mote_open(p, &o, &s));
        CHECK(!segment_exists(p));
        char y = 1;
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1);
        CHECK(read_one(s, 0) == made + 1); /* the owner's commit, seen at the next one */
        OK(mote_close(s));
        _exit(0);
    }
    CHECK(read(up[0], &x, 1) == 1);
    w = test_open(p, NULL);
    CHECK(segment_exists(p)); /* not alone: a segment, with the writers' bits only */
    CHECK(stat(seg, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(write_one(w, &rs, &rc) == made + 1);
    x = 1;
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(pid);
    OK(mote_close(w));
}

/* A user that may only read reads a store of no page (made, never
 * committed: creation writes nothing) that its owner holds open, then the
 * owner's first commit at its next transaction. */
TEST(share_read_only_user_tiny_store)
{
    const char *p = nobody_readable("tiny.mote");
    if (!p)
        return;
    mote_store *w = test_open(p, NULL);
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size == 0); /* no page */
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        become_nobody();
        mote_store *s;
        OK(mote_open(p, NULL, &s));
        CHECK(mote_store_readonly(s) == 1);
        mote_txn *t;
        uint32_t tr;
        for (int i = 0; i < 3; i++) { /* every read transaction reads the slots again */
            OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
            CHECK_RC(mote_kv_tree(t, "t", 0, &tr), MOTE_NOTFOUND);
            mote_abort(t);
        }
        char y = 1;
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1); /* the owner committed */
        OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        CHECK(get_u64(t, tr, "counter") == 1);
        mote_abort(t);
        OK(mote_close(s));
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    char x;
    CHECK(read(up[0], &x, 1) == 1);
    uint64_t rs = 3;
    int rc;
    CHECK(write_one(w, &rs, &rc) == 1);
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(pid);
    OK(mote_close(w));
    close(up[0]);
    close(down[1]);
}

/* ---- more stores than mappings -------------------------------------------------- */

/* One process holds more stores open than vm.max_map_count allows mappings
 * (65,530 by default): past its budget of shared pages, the stores open
 * exclusively, so the bound is the file descriptors (raised here; the test
 * is skipped where they cannot be). */
TEST(share_more_stores_than_mappings)
{
    long maps = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &maps) != 1)
            maps = 65530;
        fclose(f);
    }
    long n = maps + 1000, budget = maps / 4;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = (rlim_t)(n + 100); /* one descriptor per store */
    if (rl.rlim_cur < need) {
        rl.rlim_cur = need;
        if (rl.rlim_max < need)
            rl.rlim_max = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            printf("skipped: cannot raise the file descriptor limit to %llu\n",
                   (unsigned long long)need);
            return;
        }
    }
    mote_store **s = calloc((size_t)n, sizeof *s);
    CHECK(s);
    char name[32];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "m%ld.mote", i);
        mote_options o = {MOTE_CREATE | MOTE_NOSYNC | MOTE_NODIRSYNC, 0, 0, NULL};
        OK(mote_open(test_path(name), &o, &s[i]));
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s[n - 1], 0, &t)); /* the last one works */
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    OK(mote_commit(t));
    for (long i = 0; i < n; i++)
        OK(mote_close(s[i]));
    free(s);
    printf("%ld stores open in one process (vm.max_map_count %ld, %ld shared), opened in "
           "%.1f s\n", n, maps, budget, (double)(b.tv_sec - a.tv_sec) +
           (double)(b.tv_nsec - a.tv_nsec) / 1e9);
}

/* ---- containers: another /dev/shm, another pid namespace ---------------------- */

static int alt_open(void *c, const char *p, int f, int m)
{
    char alt[256];
    if (strncmp(p, "/dev/shm/motedb-", 16) == 0) { /* another container's /dev/shm */
        snprintf(alt, sizeof alt, "/dev/shm/motedb-alt-%s", p + 16);
        p = alt;
    }
    return mote_io_posix.open(c, p, f, m);
}

/* A process that does not see the shared memory of the processes that have
 * the store open (its own /dev/shm: another container on the same volume)
 * refuses to open it, instead of writing beside them unseen. */
TEST(share_another_dev_shm_refused)
{
    const char *p = test_path("ctr.mote");
    mote_store *s = test_open(p, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        mote_io io = mote_io_posix;
        io.open = alt_open;
        mote_options o = {0, 0, 0, &io};
        mote_store *c = NULL;
        CHECK_RC(mote_open(p, &o, &c), MOTE_LOCKED);
        CHECK(strstr(mote_last_open_error(), "not visible here") != NULL);
        _exit(0);
    }
    wait_ok(pid);
    OK(mote_close(s));
}

/* A reader in another pid namespace (its pid means another process here)
 * keeps its snapshot: its slot's byte lock says it is alive. */
TEST(share_reader_in_another_pid_namespace)
{
    if (geteuid() != 0) {
        printf("skipped: needs root for a pid namespace\n");
        return;
    }
    const char *p = test_path("ns.mote");
    mote_options small = {MOTE_CREATE, 0, 4, NULL};
    OK(mote_close(test_open(p, &small)));
    pid_t pid = fork();
    if (pid == 0) {
        rewrite_all(p, 20000, 1);
        _exit(0);
    }
    wait_ok(pid);
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWPID) != 0) {
            printf("skipped: unshare(CLONE_NEWPID): %s\n", strerror(errno));
            char x = 2;
            CHECK(write(up[1], &x, 1) == 1);
            _exit(0);
        }
        pid_t g = fork(); /* pid 1 of the new namespace */
        if (g == 0) {
            mote_store *c = test_open(p, &small);
            mote_txn *t;
            uint32_t tr;
            OK(mote_begin(c, MOTE_TXN_RDONLY, &t));
            OK(mote_kv_tree(t, "big", 0, &tr));
            char x = 1;
            CHECK(write(up[1], &x, 1) == 1);
            CHECK(read(down[0], &x, 1) == 1); /* the other namespace writes meanwhile */
            for (uint32_t k = 0; k < 20000; k += 7) {
                uint32_t key = __builtin_bswap32(k);
                mote_val v;
                OK(mote_kv_get(t, tr, &key, 4, &v));
                CHECK(v.size == 100 && ((const uint8_t *)v.data)[99] == 1);
            }
            mote_abort(t);
            OK(mote_close(c));
            _exit(0);
        }
        int st;
        CHECK(waitpid(g, &st, 0) == g && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        _exit(0);
    }
    char x;
    CHECK(read(up[0], &x, 1) == 1);
    if (x == 1) {
        for (int w = 2; w <= 3; w++) {
            pid_t wp = fork();
            if (wp == 0) {
                rewrite_all(p, 20000, w);
                _exit(0);
            }
            wait_ok(wp);
        }
        CHECK(write(down[1], &x, 1) == 1);
    }
    wait_ok(pid);
}

/* ---- group commit (pager.h GROUP COMMIT) ------------------------------------------ */

static _Atomic long *shared_syncs; /* fdatasyncs of every process, in shared memory */
static long own_syncs;             /* this process's */

static int g_sync(void *c, int fd)
{
    atomic_fetch_add(shared_syncs, 1);
    own_syncs++;
    return mote_io_posix.fdatasync(c, fd);
}

/* The value of key `k` of tree "t" (0 if absent) in a new read transaction. */
static uint64_t read_key(mote_store *s, const char *k)
{
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, MOTE_TXN_RDONLY, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    uint64_t v = get_u64(t, tr, k);
    mote_abort(t);
    return v;
}

/* A store of 300 keys at p (its commits are records: pages of their own),
 * its syncs counted in shared_syncs; *o: the options for the processes. */
static mote_store *group_store(const char *p, mote_io *io, int (*sync)(void *, int),
                               mote_options *o)
{
    shared_syncs = mmap(NULL, sizeof *shared_syncs, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared_syncs != MAP_FAILED);
    *io = mote_io_posix;
    io->fdatasync = sync;
    *o = (mote_options){MOTE_CREATE, 0, 0, io};
    mote_store *s = test_open(p, o);
    mote_txn *t;
    uint32_t tr;
    OK(mote_begin(s, 0, &t));
    OK(mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tr));
    for (uint32_t k = 0; k < 300; k++)
        OK(mote_kv_put(t, tr, &k, 4, "a value of some length, to fill pages", 38, 0));
    OK(mote_commit(t));
    return s;
}

/* Key `key` = 1 in a commit written but not made durable (mote_commit's
 * first phase): its txnid and state for mote__commit_wait. */
static uint64_t write_unsynced(mote_store *c, const char *key, snap **sn)
{
    mote_txn *t;
    uint32_t tr;
    uint64_t one = 1, txnid;
    OK(mote_begin(c, 0, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    OK(mote_kv_put(t, tr, key, strlen(key), &one, 8, 0));
    OK(mote__kv_flush(t));
    mote__kv_txn_end(t);
    OK(mote__txn_commit_write(t, &txnid, sn));
    CHECK(txnid != 0); /* a record, left to be made durable */
    return txnid;
}

/* Every key to version v and the counter to v, in a commit written but not
 * made durable (mote_commit's first phase): its txnid, its state in *sn. */
static uint64_t rewrite_unsynced(mote_store *c, uint64_t v, snap **sn)
{
    mote_txn *t;
    uint32_t tr;
    uint8_t buf[400];
    uint64_t txnid;
    OK(mote_begin(c, 0, &t));
    OK(mote_kv_tree(t, "t", 0, &tr));
    for (uint32_t k = 0; k < NKEYS; k++)
        OK(mote_kv_put(t, tr, &k, 4, buf, make_value(k, v, buf), 0));
    OK(mote_kv_put(t, tr, "counter", 7, &v, 8, 0));
    OK(mote_kv_put(t, tr, "latest", 6, &v, 8, 0));
    OK(mote__kv_flush(t));
    mote__kv_txn_end(t);
    OK(mote__txn_commit_write(t, &txnid, sn));
    CHECK(txnid != 0); /* a record, left to be made durable */
    return txnid;
}

/* A commit synced but not yet the latest (between a sync's end and its
 * commit becoming the one readers take, GROUP COMMIT) must not let a
 * writer reuse the pages it freed: a reader of another process that
 * begins after the writer looked at the slots takes the latest, older
 * commit, which reads them (share_kill9_loop: a reader's "checksum mismatch
 * (it holds page 9 of txn 114; expected txn 109)"). */
TEST(share_no_reuse_before_the_latest)
{
    const char *p = test_path("latest.mote");
    int rc;
    uint64_t rs = 5;
    mote_store *s = store_of(p, 1, &rs); /* (a new store's first commit is synced at once) */
    snap *s0, *sc, *sw;
    uint64_t c0 = rewrite_unsynced(s, 1, &s0); /* the latest: every key at 1 */
    OK(mote__commit_wait(s, c0, s0));
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t reader = fork();
    if (reader == 0) {
        mote_store *b = open_or_exit(p, MOTE_RDONLY); /* (a cache of 8 pages) */
        char y = 1;
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1);
        mote_txn *t;
        uint32_t tr;
        OK(mote_begin(b, MOTE_TXN_RDONLY, &t)); /* after the writer looked */
        OK(mote_kv_tree(t, "t", 0, &tr));
        CHECK(write(up[1], &y, 1) == 1);
        CHECK(read(down[0], &y, 1) == 1); /* the writer's pages are written */
        mote_cursor *cur;
        OK(mote_cursor_open(t, tr, &cur));
        for (rc = mote_cursor_first(cur); rc == MOTE_OK; rc = mote_cursor_next(cur)) {
            mote_val k, v;
            uint64_t ver;
            OK(mote_cursor_get(cur, &k, &v));
            uint32_t key;
            memcpy(&key, k.data, 4);
            CHECK(k.size != 4 || (value_ok(key, &v, &ver) && ver == 1));
        }
        if (rc != MOTE_NOTFOUND) {
            fprintf(stderr, "reader: %s\n", mote_errmsg(NULL));
            _exit(40);
        }
        mote_cursor_close(cur);
        mote_abort(t);
        OK(mote_close(b));
        _exit(0);
    }
    char x = 1;
    CHECK(read(up[0], &x, 1) == 1); /* it has the store open */
    uint64_t c = rewrite_unsynced(s, 3, &sc); /* frees the pages of the latest */
    atomic_store(&s->dur->synced, c); /* its sync ended; not yet the latest */
    mote_txn *w;
    uint32_t tr;
    uint8_t buf[400];
    uint64_t v = 4;
    OK(mote_begin(s, 0, &w)); /* looks at the slots: the reader reads nothing */
    w->no_chain = 1; /* a checkpoint (as every CHAIN_MAX commits): its pages go where
                        pages are free (a record's go after its record's page) */
    CHECK(write(down[1], &x, 1) == 1);
    CHECK(read(up[0], &x, 1) == 1); /* it took the latest commit: every key at 1 */
    OK(mote_kv_tree(w, "t", 0, &tr));
    for (uint32_t k = 0; k < NKEYS; k++)
        OK(mote_kv_put(w, tr, &k, 4, buf, make_value(k, v, buf), 0));
    OK(mote__kv_flush(w));
    mote__kv_txn_end(w);
    uint64_t wt;
    OK(mote__txn_commit_write(w, &wt, &sw));
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(reader);
    OK(mote__commit_wait(s, c, sc));
    if (wt)
        OK(mote__commit_wait(s, wt, sw));
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
}

/* Process A writes a commit and waits before it makes it durable; process
 * B's commit is built on it (not durable yet), and B's one fdatasync makes
 * both durable: A then returns without a sync of its own. Until then, a
 * reader sees neither; after B's, both. */
TEST(share_group_commit)
{
    const char *p = test_path("group.mote");
    mote_io io;
    mote_options o;
    mote_store *s = group_store(p, &io, g_sync, &o);
    mote_txn *t;
    uint32_t tr;
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t a = fork();
    if (a == 0) {
        mote_store *c = test_open(p, &o);
        snap *sn;
        uint64_t txnid = write_unsynced(c, "a", &sn);
        char x = 1;
        CHECK(write(up[1], &x, 1) == 1);
        CHECK(read(down[0], &x, 1) == 1); /* B committed meanwhile */
        long before = atomic_load(shared_syncs);
        OK(mote__commit_wait(c, txnid, sn));
        CHECK(atomic_load(shared_syncs) == before); /* B's sync made it durable */
        CHECK(read_key(c, "a") == 1 && read_key(c, "b") == 1);
        OK(mote_close(c));
        _exit(0);
    }
    char x;
    CHECK(read(up[0], &x, 1) == 1); /* A's commit is written, not durable */
    CHECK(read_key(s, "a") == 0);   /* nor seen */
    long before = atomic_load(shared_syncs);
    pid_t b = fork();
    if (b == 0) {
        mote_store *c = test_open(p, &o);
        uint64_t one = 1;
        OK(mote_begin(c, 0, &t));
        OK(mote_kv_tree(t, "t", 0, &tr));
        CHECK(get_u64(t, tr, "a") == 1); /* built on A's commit */
        OK(mote_kv_put(t, tr, "b", 1, &one, 8, 0));
        OK(mote_commit(t));
        OK(mote_close(c));
        _exit(0);
    }
    wait_ok(b);
    CHECK(atomic_load(shared_syncs) == before + 1); /* one sync for both */
    CHECK(read_key(s, "a") == 1 && read_key(s, "b") == 1);
    CHECK(write(down[1], &x, 1) == 1);
    wait_ok(a);
    CHECK(atomic_load(shared_syncs) == before + 1);
    OK(mote_check(s, NULL, NULL));
    OK(mote_close(s));
    munmap((void *)shared_syncs, sizeof *shared_syncs);
}

/* A process that is in an fdatasync holds it until told (share_sync_wait). */
static int hold_fd[2] = {-1, -1}, held_fd[2] = {-1, -1};

static int g_held_sync(void *c, int fd)
{
    char x = 1;
    if (held_fd[1] >= 0) { /* tell the test, then wait to be let go */
        CHECK(write(held_fd[1], &x, 1) == 1);
        CHECK(read(hold_fd[0], &x, 1) == 1);
    }
    return g_sync(c, fd);
}

/* Two processes each write a commit (B's on A's); A's sync, which covers
 * both, is under way when B waits for its own: B waits for A's instead of
 * syncing too (one fdatasync for both). */
TEST(share_group_commit_waits_for_a_sync)
{
    const char *p = test_path("wait.mote");
    mote_io io;
    mote_options o;
    mote_store *s = group_store(p, &io, g_held_sync, &o);
    int a_up[2], b_up[2], go_a[2], go_b[2];
    CHECK(pipe(a_up) == 0 && pipe(b_up) == 0 && pipe(go_a) == 0 && pipe(go_b) == 0 &&
          pipe(hold_fd) == 0 && pipe(held_fd) == 0);
    char x = 1;
    pid_t a = fork();
    if (a == 0) {
        mote_store *c = test_open(p, &o);
        snap *sn;
        uint64_t txnid = write_unsynced(c, "a", &sn);
        CHECK(write(a_up[1], &x, 1) == 1);
        CHECK(read(go_a[0], &x, 1) == 1); /* B's commit is written too */
        OK(mote__commit_wait(c, txnid, sn)); /* its sync stops in the shim */
        OK(mote_close(c));
        _exit(0);
    }
    CHECK(read(a_up[0], &x, 1) == 1);
    pid_t b = fork();
    if (b == 0) {
        held_fd[1] = -1; /* (B's syncs are not held) */
        mote_store *c = test_open(p, &o);
        snap *sn;
        uint64_t txnid = write_unsynced(c, "b", &sn);
        CHECK(write(b_up[1], &x, 1) == 1);
        CHECK(read(go_b[0], &x, 1) == 1); /* A is in its sync, which covers this one */
        long mine = own_syncs;
        OK(mote__commit_wait(c, txnid, sn)); /* waits for A's */
        CHECK(own_syncs == mine);
        OK(mote_close(c));
        _exit(0);
    }
    CHECK(read(b_up[0], &x, 1) == 1); /* B's commit is written */
    CHECK(write(go_a[1], &x, 1) == 1);
    CHECK(read(held_fd[0], &x, 1) == 1); /* A is in its fdatasync */
    long before = atomic_load(shared_syncs);
    CHECK(write(go_b[1], &x, 1) == 1); /* B waits for its commit */
    usleep(2000);
    CHECK(write(hold_fd[1], &x, 1) == 1); /* A's sync goes on */
    wait_ok(a);
    wait_ok(b);
    CHECK(atomic_load(shared_syncs) == before + 1); /* one sync for both */
    held_fd[1] = -1; /* (the parent's own syncs are not held) */
    CHECK(read_key(s, "a") == 1 && read_key(s, "b") == 1);
    OK(mote_close(s));
    munmap((void *)shared_syncs, sizeof *shared_syncs);
}

/* Processes that open, use and close one store over and over, so that it
 * passes between alone (SOLO), taken over, shared and closed by its last
 * process, while the others read and write. Every commit is kept; no reader
 * sees an inconsistent or reused page. Four processes, 30 opens each. */
TEST(share_open_close_churn)
{
    enum { PROCS = 4, OPENS = 30 };
    const char *p = test_path("churn.mote");
    OK(mote_close(test_open(p, NULL)));
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            uint64_t rs = (uint64_t)i * 7919 + 1;
            for (int k = 0; k < OPENS; k++) {
                usleep((useconds_t)(test_rand(&rs) % 300));
                mote_store *s = open_or_exit(p, (k + i) % 2 ? 0 : MOTE_RDONLY);
                if ((k + i) % 2) {
                    int rc = 0;
                    if (!write_one(s, &rs, &rc)) {
                        fprintf(stderr, "child %d: commit: %s: %s\n", (int)getpid(),
                                mote_strerror(rc), mote_errmsg(NULL));
                        _exit(12);
                    }
                } else {
                    read_one(s, (int)(test_rand(&rs) % 200));
                }
                OK(mote_close(s));
            }
            _exit(0);
        }
    }
    for (int i = 0; i < PROCS; i++)
        wait_ok(kids[i]);
    CHECK(counter_of(p) == PROCS * OPENS / 2);
}
