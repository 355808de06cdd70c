/*
 * bench_engine.c — MoteDB's key/value engine against LMDB, SQLite and the
 * disk's own cost of a durable write, all measured in one process, in one
 * run, in one directory on local disk (tmpfs is refused).
 *
 * Probe (the physical limit), measured side by side with the single puts:
 *   overwrite  4 KB pwrite over an allocated block of an existing, synced
 *              1 MB file, then fdatasync (after 10 untimed ones).
 *   append     4 KB write at the end of a growing file, then fdatasync.
 *
 * Operations, the same for every engine (keys: 8-byte big-endian ids;
 * values: 100 random bytes, generated before any timer starts):
 *   single put  on a fresh store, 100 write transactions of one put each
 *               (ids 1..100), each commit durable; every begin..commit is
 *               timed alone. R rounds (--reps, default 5) of 100 commits,
 *               interleaved with the probe in runs of 10 samples (see
 *               run_single_and_probe): median and p99 over all R x 100
 *               commits; commits/s = commits / their summed time. The probe
 *               gets as many samples, and the same treatment.
 *   batch       on a fresh store, one durable write transaction of 10,000
 *               puts (ids 1..10,000 ascending); begin..commit timed.
 *   get         on a store of 100,000 entries (ids 1..100,000, loaded
 *               untimed in 10 durable transactions of 10,000), 100,000 gets
 *               of uniformly random existing ids in one read transaction;
 *               every value is read (length and two bytes, checked).
 *   scan        on the same store, a cursor walk over all entries in one
 *               read transaction, reading each key and value (count and
 *               bytes checked).
 * Batch, get and scan run R times, the engines taking turns within each
 * repetition; the report gives medians.
 *
 * Engines and their settings:
 *   MoteDB           defaults: 4 KB pages, 2048-page cache, durable commits
 *                    (one fdatasync each).
 *   LMDB             default (durable) flags: no MDB_NOSYNC / MDB_NOMETASYNC;
 *                    1 GiB map, the unnamed database, MDB_val pointers.
 *   SQLite WAL       table kv(k INTEGER PRIMARY KEY, v BLOB), journal_mode=WAL,
 *                    synchronous=FULL; statements prepared once and reused,
 *                    BEGIN/COMMIT around every transaction, reads included.
 *   SQLite rollback  the same with journal_mode=DELETE (SQLite's default).
 * The integer key (the rowid) is SQLite's fastest form for 8-byte ids; with
 * --sqlite-blob-key the table is kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID
 * and keys are the same 8 big-endian bytes as for the other engines.
 *
 * Usage: bench-engine [--dir DIR] [--reps R] [--json FILE] [--sqlite-blob-key]
 *                     [--mote-cache-pages N]
 *   --dir    where the stores go (default /var/tmp); a fresh subdirectory is
 *            made and removed. tmpfs and ramfs are refused.
 *   --mote-cache-pages  MoteDB's page cache (default: the library's, 2048).
 * Output: a Markdown table on stdout (progress on stderr); --json writes
 * every raw sample.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>
#include <sqlite3.h>

#include "mote.h"

#define N_SINGLE 100      /* durable single-put commits */
#define N_BATCH 10000     /* puts in the batch transaction */
#define N_STORE 100000    /* entries in the get/scan store */
#define N_GETS 100000     /* random gets per repetition */
#define LOAD_CHUNK 10000  /* puts per transaction when loading the store */
#define VAL_LEN 100       /* bytes per value */
#define PROBE_WARM 10     /* untimed overwrites before the first sample */
#define PROBE_BLOCKS 256  /* blocks of the overwrite probe file (1 MB) */
#define BLOCK 4096
#define SINGLE_RUN 10     /* consecutive single-put samples per part, see below */
#define MAX_REPS 20

/* ---- Helpers ------------------------------------------------------------ */

static char work_dir[4096]; /* a fresh directory under --dir, removed at exit */
static void rm_tree(const char *path);

static void die(const char *fmt, ...)
{
    static int dying;
    va_list ap;
    va_start(ap, fmt);
    fputs("bench-engine: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (!dying++ && work_dir[0])
        rm_tree(work_dir); /* best effort: stores may still be open */
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        die("out of memory");
    return p;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng_next(void) /* splitmix64: fixed seed, same data every run */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void put_be64(uint8_t *b, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorted copy of n samples (the caller frees it). */
static double *sorted(const double *v, int n)
{
    double *s = xcalloc((size_t)n, sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return s;
}

static double median(const double *v, int n)
{
    double *s = sorted(v, n);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* The 99th percentile, nearest rank. */
static double p99(const double *v, int n)
{
    double *s = sorted(v, n);
    int rank = (99 * n + 99) / 100; /* ceil(0.99 n) */
    double q = s[rank - 1];
    free(s);
    return q;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path)
{
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        die("cannot remove %s: %s", path, strerror(errno));
}

/* ---- Workload data -------------------------------------------------------- */

static uint8_t *values;     /* N_STORE values of VAL_LEN bytes */
static uint64_t *get_ids;   /* N_GETS random ids in 1..N_STORE */
static uint64_t get_expect; /* the check sum the gets must produce */
static uint64_t scan_expect;

static const uint8_t *value_of(uint64_t id)
{
    return values + ((id - 1) % N_STORE) * VAL_LEN;
}

static void make_data(void)
{
    values = xcalloc(N_STORE, VAL_LEN);
    for (size_t i = 0; i < (size_t)N_STORE * VAL_LEN; i += 8) {
        uint64_t r = rng_next();
        memcpy(values + i, &r, 8);
    }
    get_ids = xcalloc(N_GETS, sizeof *get_ids);
    for (int i = 0; i < N_GETS; i++) {
        get_ids[i] = 1 + rng_next() % N_STORE;
        const uint8_t *v = value_of(get_ids[i]);
        get_expect += v[0] + v[VAL_LEN - 1];
    }
    for (uint64_t id = 1; id <= N_STORE; id++)
        scan_expect += value_of(id)[0] + (id & 0xff);
}

/* ---- Engines -------------------------------------------------------------- */

/*
 * Every engine keeps at most one open transaction in its handle. Errors are
 * fatal: a benchmark that silently skips work measures nothing.
 */
typedef struct engine {
    const char *name;
    void *(*open)(const struct engine *e, const char *dir); /* fresh store */
    void (*close)(void *h);
    void (*begin)(void *h, int write);
    void (*commit)(void *h); /* durable for a write transaction */
    void (*put)(void *h, uint64_t id, const uint8_t *val);
    const uint8_t *(*get)(void *h, uint64_t id, size_t *len);
    uint64_t (*scan)(void *h, uint64_t *sum); /* entries walked */
    int variant;                              /* SQLite: 1 = WAL */
} engine;

/* MoteDB */

static unsigned mote_cache_pages; /* --mote-cache-pages; 0 = the default */

typedef struct mt_handle {
    mote_store *store;
    mote_txn *txn;
    uint32_t tree;
} mt_handle;

#define MT_CHECK(h, call)                                                        \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != MOTE_OK)                                                      \
            die("MoteDB: %s: %s (%s)", #call, mote_strerror(rc_),                \
                mote_errmsg((h)->store));                                        \
    } while (0)

static void mt_begin(void *hp, int write)
{
    mt_handle *h = hp;
    MT_CHECK(h, mote_begin(h->store, write ? 0 : MOTE_TXN_RDONLY, &h->txn));
}

static void mt_commit(void *hp)
{
    mt_handle *h = hp;
    MT_CHECK(h, mote_commit(h->txn));
    h->txn = NULL;
}

static void *mt_open(const engine *e, const char *dir)
{
    (void)e;
    char path[4096];
    snprintf(path, sizeof path, "%s/store.mote", dir);
    mt_handle *h = xcalloc(1, sizeof *h);
    mote_options opts = {.flags = MOTE_CREATE, .cache_pages = mote_cache_pages};
    if (mote_open(path, &opts, &h->store) != MOTE_OK)
        die("MoteDB: open %s: %s", path, mote_last_open_error());
    mt_begin(h, 1);
    MT_CHECK(h, mote_kv_tree(h->txn, "bench", MOTE_TREE_CREATE, &h->tree));
    mt_commit(h);
    return h;
}

static void mt_close(void *hp)
{
    mt_handle *h = hp;
    MT_CHECK(h, mote_close(h->store));
    free(h);
}

static void mt_put(void *hp, uint64_t id, const uint8_t *val)
{
    mt_handle *h = hp;
    uint8_t k[8];
    put_be64(k, id);
    MT_CHECK(h, mote_kv_put(h->txn, h->tree, k, 8, val, VAL_LEN, 0));
}

static const uint8_t *mt_get(void *hp, uint64_t id, size_t *len)
{
    mt_handle *h = hp;
    uint8_t k[8];
    mote_val v;
    put_be64(k, id);
    MT_CHECK(h, mote_kv_get(h->txn, h->tree, k, 8, &v));
    *len = v.size;
    return v.data;
}

static uint64_t mt_scan(void *hp, uint64_t *sum)
{
    mt_handle *h = hp;
    mote_cursor *cur;
    uint64_t n = 0;
    MT_CHECK(h, mote_cursor_open(h->txn, h->tree, &cur));
    int rc;
    for (rc = mote_cursor_first(cur); rc == MOTE_OK; rc = mote_cursor_next(cur)) {
        mote_val k, v;
        MT_CHECK(h, mote_cursor_get(cur, &k, &v));
        *sum += ((const uint8_t *)v.data)[0] + ((const uint8_t *)k.data)[k.size - 1];
        n++;
    }
    if (rc != MOTE_NOTFOUND)
        die("MoteDB: cursor: %s", mote_strerror(rc));
    mote_cursor_close(cur);
    return n;
}

/* LMDB */

typedef struct lm_handle {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
} lm_handle;

#define LM_CHECK(call)                                                           \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != MDB_SUCCESS)                                                  \
            die("LMDB: %s: %s", #call, mdb_strerror(rc_));                       \
    } while (0)

static void lm_begin(void *hp, int write)
{
    lm_handle *h = hp;
    LM_CHECK(mdb_txn_begin(h->env, NULL, write ? 0 : MDB_RDONLY, &h->txn));
}

static void lm_commit(void *hp)
{
    lm_handle *h = hp;
    LM_CHECK(mdb_txn_commit(h->txn));
    h->txn = NULL;
}

static void *lm_open(const engine *e, const char *dir)
{
    (void)e;
    lm_handle *h = xcalloc(1, sizeof *h);
    LM_CHECK(mdb_env_create(&h->env));
    LM_CHECK(mdb_env_set_mapsize(h->env, (size_t)1 << 30));
    LM_CHECK(mdb_env_open(h->env, dir, 0, 0644)); /* durable defaults */
    lm_begin(h, 1);
    LM_CHECK(mdb_dbi_open(h->txn, NULL, 0, &h->dbi));
    lm_commit(h);
    return h;
}

static void lm_close(void *hp)
{
    lm_handle *h = hp;
    mdb_env_close(h->env);
    free(h);
}

static void lm_put(void *hp, uint64_t id, const uint8_t *val)
{
    lm_handle *h = hp;
    uint8_t k[8];
    put_be64(k, id);
    MDB_val key = {8, k}, data = {VAL_LEN, (void *)val};
    LM_CHECK(mdb_put(h->txn, h->dbi, &key, &data, 0));
}

static const uint8_t *lm_get(void *hp, uint64_t id, size_t *len)
{
    lm_handle *h = hp;
    uint8_t k[8];
    put_be64(k, id);
    MDB_val key = {8, k}, data;
    LM_CHECK(mdb_get(h->txn, h->dbi, &key, &data));
    *len = data.mv_size;
    return data.mv_data;
}

static uint64_t lm_scan(void *hp, uint64_t *sum)
{
    lm_handle *h = hp;
    MDB_cursor *cur;
    MDB_val k, v;
    uint64_t n = 0;
    LM_CHECK(mdb_cursor_open(h->txn, h->dbi, &cur));
    int rc;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        *sum += ((const uint8_t *)v.mv_data)[0] + ((const uint8_t *)k.mv_data)[k.mv_size - 1];
        n++;
    }
    if (rc != MDB_NOTFOUND)
        die("LMDB: cursor: %s", mdb_strerror(rc));
    mdb_cursor_close(cur);
    return n;
}

/* SQLite */

static int sqlite_blob_key; /* --sqlite-blob-key */

typedef struct sq_handle {
    sqlite3 *db;
    sqlite3_stmt *begin, *commit, *put, *get, *scan;
} sq_handle;

static void sq_fail(sq_handle *h, const char *what)
{
    die("SQLite: %s: %s", what, sqlite3_errmsg(h->db));
}

static void sq_exec(sq_handle *h, const char *sql)
{
    if (sqlite3_exec(h->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        sq_fail(h, sql);
}

static sqlite3_stmt *sq_prepare(sq_handle *h, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
        sq_fail(h, sql);
    return st;
}

/* Run a statement that returns no rows, and reset it for reuse. */
static void sq_run(sq_handle *h, sqlite3_stmt *st)
{
    if (sqlite3_step(st) != SQLITE_DONE)
        sq_fail(h, sqlite3_sql(st));
    sqlite3_reset(st);
}

static void sq_bind_key(sq_handle *h, sqlite3_stmt *st, uint64_t id, uint8_t *buf)
{
    int rc;
    if (sqlite_blob_key) {
        put_be64(buf, id);
        rc = sqlite3_bind_blob(st, 1, buf, 8, SQLITE_STATIC);
    } else {
        rc = sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    }
    if (rc != SQLITE_OK)
        sq_fail(h, "bind key");
}

static void sq_begin(void *hp, int write)
{
    (void)write; /* BEGIN is deferred: the first read or write takes the lock */
    sq_handle *h = hp;
    sq_run(h, h->begin);
}

static void sq_commit(void *hp)
{
    sq_handle *h = hp;
    sqlite3_reset(h->get);
    sq_run(h, h->commit);
}

static void *sq_open(const engine *e, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/store.db", dir);
    sq_handle *h = xcalloc(1, sizeof *h);
    if (sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        sq_fail(h, "open");
    sq_exec(h, e->variant ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE");
    sq_exec(h, "PRAGMA synchronous=FULL");
    sq_exec(h, sqlite_blob_key ? "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID"
                               : "CREATE TABLE kv(k INTEGER PRIMARY KEY, v BLOB)");
    h->begin = sq_prepare(h, "BEGIN");
    h->commit = sq_prepare(h, "COMMIT");
    h->put = sq_prepare(h, "INSERT OR REPLACE INTO kv(k, v) VALUES(?, ?)");
    h->get = sq_prepare(h, "SELECT v FROM kv WHERE k = ?");
    h->scan = sq_prepare(h, "SELECT k, v FROM kv ORDER BY k");
    return h;
}

static void sq_close(void *hp)
{
    sq_handle *h = hp;
    sqlite3_stmt *all[] = {h->begin, h->commit, h->put, h->get, h->scan};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sqlite3_finalize(all[i]);
    if (sqlite3_close(h->db) != SQLITE_OK)
        sq_fail(h, "close");
    free(h);
}

static void sq_put(void *hp, uint64_t id, const uint8_t *val)
{
    sq_handle *h = hp;
    uint8_t k[8];
    sq_bind_key(h, h->put, id, k);
    if (sqlite3_bind_blob(h->put, 2, val, VAL_LEN, SQLITE_STATIC) != SQLITE_OK)
        sq_fail(h, "bind value");
    sq_run(h, h->put);
}

static const uint8_t *sq_get(void *hp, uint64_t id, size_t *len)
{
    sq_handle *h = hp;
    uint8_t k[8];
    /* The previous row stays valid until this reset (or the commit's). */
    sqlite3_reset(h->get);
    sq_bind_key(h, h->get, id, k);
    if (sqlite3_step(h->get) != SQLITE_ROW)
        sq_fail(h, "get: no row");
    *len = (size_t)sqlite3_column_bytes(h->get, 0);
    return sqlite3_column_blob(h->get, 0);
}

static uint64_t sq_scan(void *hp, uint64_t *sum)
{
    sq_handle *h = hp;
    uint64_t n = 0;
    int rc;
    while ((rc = sqlite3_step(h->scan)) == SQLITE_ROW) {
        const uint8_t *v = sqlite3_column_blob(h->scan, 1);
        uint64_t last_key_byte;
        if (sqlite_blob_key)
            last_key_byte = ((const uint8_t *)sqlite3_column_blob(h->scan, 0))[7];
        else
            last_key_byte = (uint64_t)sqlite3_column_int64(h->scan, 0) & 0xff;
        *sum += v[0] + last_key_byte;
        n++;
    }
    if (rc != SQLITE_DONE)
        sq_fail(h, "scan");
    sqlite3_reset(h->scan);
    return n;
}

#define SQLITE_OPS sq_open, sq_close, sq_begin, sq_commit, sq_put, sq_get, sq_scan

static const engine engines[] = {
    {"MoteDB", mt_open, mt_close, mt_begin, mt_commit, mt_put, mt_get, mt_scan, 0},
    {"LMDB", lm_open, lm_close, lm_begin, lm_commit, lm_put, lm_get, lm_scan, 0},
    {"SQLite WAL", SQLITE_OPS, 1},
    {"SQLite rollback", SQLITE_OPS, 0},
};
#define N_ENGINES (int)(sizeof engines / sizeof *engines)

/* ---- Measurements ----------------------------------------------------------- */

static int reps = 5;

typedef struct result {
    double single_us[MAX_REPS * N_SINGLE]; /* per durable commit, all rounds */
    double batch_ms[MAX_REPS];
    double get_ns[MAX_REPS];  /* per get */
    double scan_ns[MAX_REPS]; /* per entry */
} result;

static result results[N_ENGINES];

typedef struct probe {
    int over_fd, append_fd;
    int next_block;
    uint8_t buf[BLOCK];
    double overwrite_us[MAX_REPS * N_SINGLE];
    double append_us[MAX_REPS * N_SINGLE];
} probe;

static probe disk;

/* A fresh, empty store directory for engine e. */
static void *fresh_store(const engine *e, const char *what, int rep, char *dir, size_t n)
{
    snprintf(dir, n, "%s/%s-%s-%d", work_dir, e->name, what, rep);
    for (char *p = dir + strlen(work_dir) + 1; *p; p++)
        if (*p == ' ')
            *p = '_';
    if (mkdir(dir, 0755) != 0)
        die("mkdir %s: %s", dir, strerror(errno));
    return e->open(e, dir);
}

static void drop_store(const engine *e, void *h, const char *dir)
{
    e->close(h);
    rm_tree(dir);
}

static int probe_file(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", work_dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die("open %s: %s", path, strerror(errno));
    return fd;
}

/* Create the probe files: the one to overwrite is written and synced whole. */
static void probe_open(void)
{
    for (size_t i = 0; i < BLOCK; i += 8) {
        uint64_t r = rng_next();
        memcpy(disk.buf + i, &r, 8);
    }
    disk.over_fd = probe_file("probe-overwrite");
    disk.append_fd = probe_file("probe-append");
    for (int b = 0; b < PROBE_BLOCKS; b++)
        if (pwrite(disk.over_fd, disk.buf, BLOCK, (off_t)b * BLOCK) != BLOCK)
            die("probe: write: %s", strerror(errno));
    if (fsync(disk.over_fd) != 0)
        die("probe: fsync: %s", strerror(errno));
}

/* One 4 KB overwrite of an allocated block + fdatasync; microseconds. */
static double probe_overwrite(void)
{
    disk.buf[disk.next_block]++; /* new contents every time */
    off_t off = (off_t)(disk.next_block++ % PROBE_BLOCKS) * BLOCK;
    uint64_t t0 = now_ns();
    if (pwrite(disk.over_fd, disk.buf, BLOCK, off) != BLOCK || fdatasync(disk.over_fd) != 0)
        die("probe: %s", strerror(errno));
    return (double)(now_ns() - t0) / 1e3;
}

/* One 4 KB append (the file grows) + fdatasync; microseconds. */
static double probe_append(void)
{
    disk.buf[0]++;
    uint64_t t0 = now_ns();
    if (write(disk.append_fd, disk.buf, BLOCK) != BLOCK || fdatasync(disk.append_fd) != 0)
        die("probe: %s", strerror(errno));
    return (double)(now_ns() - t0) / 1e3;
}

enum { OVERWRITE = N_ENGINES, APPEND, PARTS }; /* the parts of the single-put phase */

/* One sample of the single-put phase: a durable put of `id` or a probe. */
static void single_step(int part, void *h[], int sample, uint64_t id)
{
    if (part == OVERWRITE) {
        disk.overwrite_us[sample] = probe_overwrite();
    } else if (part == APPEND) {
        disk.append_us[sample] = probe_append();
    } else {
        const engine *e = &engines[part];
        uint64_t t0 = now_ns();
        e->begin(h[part], 1);
        e->put(h[part], id, value_of(id));
        e->commit(h[part]);
        results[part].single_us[sample] = (double)(now_ns() - t0) / 1e3;
    }
}

/*
 * Durable single puts and the probe, side by side. In each of `reps` rounds
 * every engine gets a fresh store and makes 100 commits, and the probe makes
 * 100 overwrites and 100 appends, in runs of SINGLE_RUN: each part takes its
 * turn for SINGLE_RUN consecutive samples, in an order that rotates. All parts
 * thus see the disk in the same state (a virtual disk's speed can change by
 * 2x, or to 4 ms a sync when throttled, within seconds), while each run is
 * mostly undisturbed by the others' syncs (switching files every sample adds
 * a roughly constant ~70 µs to every sync on our test VM, hiding differences).
 */
static void run_single_and_probe(void)
{
    probe_open();
    for (int i = 0; i < PROBE_WARM; i++)
        probe_overwrite();
    for (int round = 0; round < reps; round++) {
        fprintf(stderr, "single puts and probe %d/%d ...\n", round + 1, reps);
        void *h[N_ENGINES];
        char dir[N_ENGINES][4200];
        for (int e = 0; e < N_ENGINES; e++)
            h[e] = fresh_store(&engines[e], "single", round, dir[e], sizeof dir[e]);
        for (int first = 0; first < N_SINGLE; first += SINGLE_RUN) {
            for (int k = 0; k < PARTS; k++) {
                int part = (first / SINGLE_RUN + k) % PARTS;
                for (int step = first; step < first + SINGLE_RUN; step++)
                    single_step(part, h, round * N_SINGLE + step, (uint64_t)step + 1);
            }
        }
        for (int e = 0; e < N_ENGINES; e++)
            drop_store(&engines[e], h[e], dir[e]);
    }
    close(disk.over_fd);
    close(disk.append_fd);
}

static void run_batch(int ei, int rep)
{
    const engine *e = &engines[ei];
    char dir[4200];
    void *h = fresh_store(e, "batch", rep, dir, sizeof dir);
    uint64_t t0 = now_ns();
    e->begin(h, 1);
    for (uint64_t id = 1; id <= N_BATCH; id++)
        e->put(h, id, value_of(id));
    e->commit(h);
    results[ei].batch_ms[rep] = (double)(now_ns() - t0) / 1e6;
    drop_store(e, h, dir);
}

static void load_store(const engine *e, void *h)
{
    for (uint64_t id = 1; id <= N_STORE; id += LOAD_CHUNK) {
        e->begin(h, 1);
        for (uint64_t i = id; i < id + LOAD_CHUNK && i <= N_STORE; i++)
            e->put(h, i, value_of(i));
        e->commit(h);
    }
}

static void run_gets(int ei, void *h, int rep)
{
    const engine *e = &engines[ei];
    uint64_t sum = 0;
    uint64_t t0 = now_ns();
    e->begin(h, 0);
    for (int i = 0; i < N_GETS; i++) {
        size_t len;
        const uint8_t *v = e->get(h, get_ids[i], &len);
        if (len != VAL_LEN)
            die("%s: get returned %zu bytes", e->name, len);
        sum += v[0] + v[VAL_LEN - 1];
    }
    e->commit(h);
    results[ei].get_ns[rep] = (double)(now_ns() - t0) / N_GETS;
    if (sum != get_expect)
        die("%s: gets returned wrong values", e->name);
}

static void run_scan(int ei, void *h, int rep)
{
    const engine *e = &engines[ei];
    uint64_t sum = 0;
    uint64_t t0 = now_ns();
    e->begin(h, 0);
    uint64_t n = e->scan(h, &sum);
    e->commit(h);
    results[ei].scan_ns[rep] = (double)(now_ns() - t0) / N_STORE;
    if (n != N_STORE || sum != scan_expect)
        die("%s: scan saw %llu entries, or wrong ones", e->name, (unsigned long long)n);
}

/* ---- Environment ---------------------------------------------------------- */

static char env_cpu[256] = "unknown", env_kernel[256] = "unknown", env_fs[64];

/*
 * Name the block device of an ext4 directory and say whether the file system
 * has a journal (jbd2 lists it): without one, an append's fdatasync costs
 * little more than an overwrite's, which flatters WAL-style engines.
 */
static void describe_ext4(const char *dir)
{
    struct stat st;
    char link[512], sys[64], jbd2[600];
    if (stat(dir, &st) != 0)
        return;
    snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    ssize_t n = readlink(sys, link, sizeof link - 1);
    if (n <= 0)
        return;
    link[n] = 0;
    const char *dev = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
    snprintf(jbd2, sizeof jbd2, "/proc/fs/jbd2/%s-8", dev);
    snprintf(env_fs, sizeof env_fs, "ext4 on %.24s, %s", dev,
             access(jbd2, F_OK) == 0 ? "journaled" : "no journal");
}

static void read_env(const char *dir)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(env_cpu, sizeof env_cpu, "%s", colon + 2);
            env_cpu[strcspn(env_cpu, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(env_kernel, sizeof env_kernel, "%s %s", u.sysname, u.release);

    static const struct {
        unsigned long magic;
        const char *name;
    } fs[] = {{0xEF53, "ext4"},          {0x58465342, "xfs"},  {0x9123683E, "btrfs"},
              {0x794C7630, "overlayfs"}, {0x2FC12FC1, "zfs"},  {0xF2F52010, "f2fs"},
              {0x6969, "nfs"},           {0x01021994, "tmpfs"}, {0x858458F6, "ramfs"}};
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        die("statfs %s: %s", dir, strerror(errno));
    snprintf(env_fs, sizeof env_fs, "0x%lx", (unsigned long)sf.f_type);
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if ((unsigned long)sf.f_type == fs[i].magic)
            snprintf(env_fs, sizeof env_fs, "%s", fs[i].name);
    if (strcmp(env_fs, "ext4") == 0)
        describe_ext4(dir);
    if (strcmp(env_fs, "tmpfs") == 0 || strcmp(env_fs, "ramfs") == 0)
        die("%s is on %s: fdatasync costs nothing there; use a directory on disk", dir,
            env_fs);
}

/* ---- Report --------------------------------------------------------------- */

/* Medians of one engine, in the units of the table. */
typedef struct summary {
    double single_med_us, single_p99_us, single_per_s;
    double batch_ms, batch_per_s;
    double get_ns, get_per_s;
    double scan_per_s;
    double commit_over_probe;
} summary;

static double probe_overwrite_us, probe_append_us;

static summary summarize(int ei)
{
    const result *r = &results[ei];
    summary s;
    double total = 0;
    int n = reps * N_SINGLE;
    for (int i = 0; i < n; i++)
        total += r->single_us[i];
    s.single_med_us = median(r->single_us, n);
    s.single_p99_us = p99(r->single_us, n);
    s.single_per_s = n / (total / 1e6);
    s.batch_ms = median(r->batch_ms, reps);
    s.batch_per_s = N_BATCH / (s.batch_ms / 1e3);
    s.get_ns = median(r->get_ns, reps);
    s.get_per_s = 1e9 / s.get_ns;
    s.scan_per_s = 1e9 / median(r->scan_ns, reps);
    s.commit_over_probe = s.single_med_us / probe_overwrite_us;
    return s;
}

/* A number with 3 significant digits below 100 and thousands separators above. */
static void fmt_num(char *out, size_t n, double v)
{
    if (v < 10)
        snprintf(out, n, "%.2f", v);
    else if (v < 100)
        snprintf(out, n, "%.1f", v);
    else {
        char digits[32];
        int len = snprintf(digits, sizeof digits, "%.0f", v), j = 0;
        for (int i = 0; i < len && j + 2 < (int)n; i++) {
            if (i > 0 && (len - i) % 3 == 0)
                out[j++] = ',';
            out[j++] = digits[i];
        }
        out[j] = 0;
    }
}

/* The rows of the table: one metric each. */
enum target { NO_TARGET, VS_PROBE, VS_LMDB };
typedef struct metric {
    const char *label, *unit;
    size_t off;        /* the field in summary */
    int higher_better; /* throughput (1) or time (0) */
    enum target kind;  /* a target from the issue, checked for MoteDB */
    double goal;       /* VS_PROBE: at most goal x probe; VS_LMDB: speed >= goal */
    const char *target;
} metric;

static const metric metrics[] = {
    {"durable single put", "µs/commit (median)", offsetof(summary, single_med_us), 0,
     VS_LMDB, 1.8, "≥ 1.8x LMDB"},
    {"durable single put", "µs/commit (p99)", offsetof(summary, single_p99_us), 0,
     NO_TARGET, 0, ""},
    {"durable single put", "commits/s", offsetof(summary, single_per_s), 1, NO_TARGET, 0, ""},
    {"durable commit / probe", "x overwrite probe", offsetof(summary, commit_over_probe), 0,
     VS_PROBE, 1.2, "MoteDB ≤ 1.2x probe"},
    {"batch of 10,000 puts", "ms/batch", offsetof(summary, batch_ms), 0, NO_TARGET, 0, ""},
    {"batch of 10,000 puts", "puts/s", offsetof(summary, batch_per_s), 1, NO_TARGET, 0, ""},
    {"random get", "ns/get", offsetof(summary, get_ns), 0, VS_LMDB, 0.7, "≥ 0.7x LMDB"},
    {"random get", "gets/s", offsetof(summary, get_per_s), 1, NO_TARGET, 0, ""},
    {"full scan", "entries/s", offsetof(summary, scan_per_s), 1, NO_TARGET, 0, ""},
};
#define N_METRICS (int)(sizeof metrics / sizeof *metrics)

/* Columns: operation, unit, one per engine, MoteDB/peer per peer, target. */
#define COLS (2 + N_ENGINES + (N_ENGINES - 1) + 1)
#define CELL 64
static char cell[1 + N_METRICS][COLS][CELL];

static int display_width(const char *s) /* UTF-8: count non-continuation bytes */
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        w += (*p & 0xC0) != 0x80;
    return w;
}

static void print_table(const summary *s)
{
    const int target_col = COLS - 1;
    snprintf(cell[0][0], CELL, "operation");
    snprintf(cell[0][1], CELL, "unit");
    for (int e = 0; e < N_ENGINES; e++)
        snprintf(cell[0][2 + e], CELL, "%s", engines[e].name);
    for (int e = 1; e < N_ENGINES; e++)
        snprintf(cell[0][1 + N_ENGINES + e], CELL, "MoteDB/%s", engines[e].name);
    snprintf(cell[0][target_col], CELL, "target");

    for (int m = 0; m < N_METRICS; m++) {
        const metric *mt = &metrics[m];
        char(*row)[CELL] = cell[1 + m];
        double v[N_ENGINES];
        snprintf(row[0], CELL, "%s", mt->label);
        snprintf(row[1], CELL, "%s", mt->unit);
        for (int e = 0; e < N_ENGINES; e++) {
            v[e] = *(const double *)((const char *)&s[e] + mt->off);
            fmt_num(row[2 + e], CELL, v[e]);
        }
        for (int e = 1; e < N_ENGINES && mt->kind != VS_PROBE; e++) {
            double speed = mt->higher_better ? v[0] / v[e] : v[e] / v[0];
            snprintf(row[1 + N_ENGINES + e], CELL, "%.2fx", speed);
        }
        if (mt->kind == VS_PROBE)
            snprintf(row[target_col], CELL, "%s: %s", mt->target,
                     v[0] <= mt->goal ? "met" : "MISSED");
        else if (mt->kind == VS_LMDB)
            snprintf(row[target_col], CELL, "%s: %s", mt->target,
                     v[1] / v[0] >= mt->goal ? "met" : "MISSED");
    }

    /* Pad every column to its widest cell; numbers right-aligned. */
    int width[COLS] = {0};
    for (int r = 0; r <= N_METRICS; r++)
        for (int c = 0; c < COLS; c++)
            if (display_width(cell[r][c]) > width[c])
                width[c] = display_width(cell[r][c]);
    for (int r = 0; r <= N_METRICS; r++) {
        for (int c = 0; c < COLS; c++) {
            int pad = width[c] - display_width(cell[r][c]);
            int right = c >= 2 && c < target_col;
            printf("| %*s%s%*s ", right ? pad : 0, "", cell[r][c], right ? 0 : pad, "");
        }
        printf("|\n");
        for (int c = 0; r == 0 && c < COLS; c++) {
            int right = c >= 2 && c < target_col;
            printf("|%c", right ? '-' : ':');
            for (int i = 0; i < width[c]; i++)
                putchar('-');
            printf("%c%s", right ? ':' : '-', c == COLS - 1 ? "|\n" : "");
        }
    }
}

static void print_report(const summary *s)
{
    char when[64];
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    printf("## bench/engine — %s\n\n", when);
    printf("- machine: %s, %ld CPUs, %s\n", env_cpu, sysconf(_SC_NPROCESSORS_ONLN),
           env_kernel);
    printf("- directory: %s (%s)\n", work_dir, env_fs);
    printf("- versions: MoteDB %s, %s, SQLite %s (table %s)\n", MOTE_VERSION_STRING,
           mdb_version(NULL, NULL, NULL), sqlite3_libversion(),
           sqlite_blob_key ? "k BLOB PRIMARY KEY WITHOUT ROWID" : "k INTEGER PRIMARY KEY");
    printf("- repetitions: %d (single puts: %d rounds of %d commits, interleaved with "
           "the probe; batch, get, scan: medians of %d)\n",
           reps, reps, N_SINGLE, reps);
    if (mote_cache_pages)
        printf("- MoteDB cache: %u pages (--mote-cache-pages)\n", mote_cache_pages);
    printf("\n");

    int n = reps * N_SINGLE;
    printf("| disk probe: 4 KB + fdatasync | median µs | p99 µs |\n");
    printf("|:--|--:|--:|\n");
    printf("| overwrite of an allocated block | %.1f | %.1f |\n", probe_overwrite_us,
           p99(disk.overwrite_us, n));
    printf("| append (the file grows) | %.1f | %.1f |\n\n", probe_append_us,
           p99(disk.append_us, n));
    print_table(s);
    printf("\nRatios are speeds: above 1.00x MoteDB is faster (for times, peer time / "
           "MoteDB time).\n'durable commit / probe' is the median commit time over the "
           "median overwrite probe (%.1f µs).\n",
           probe_overwrite_us);
}

static void json_array(FILE *f, const char *name, const double *v, int n, int last)
{
    fprintf(f, "      \"%s\": [", name);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.3f", i ? ", " : "", v[i]);
    fprintf(f, "]%s\n", last ? "" : ",");
}

static void write_json(const char *path, const summary *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"machine\": {\"cpu\": \"%s\", \"cpus\": %ld, \"kernel\": \"%s\", "
               "\"fs\": \"%s\"},\n",
            env_cpu, sysconf(_SC_NPROCESSORS_ONLN), env_kernel, env_fs);
    fprintf(f, "  \"versions\": {\"motedb\": \"%s\", \"lmdb\": \"%s\", \"sqlite\": \"%s\"},\n",
            MOTE_VERSION_STRING, mdb_version(NULL, NULL, NULL), sqlite3_libversion());
    fprintf(f, "  \"sqlite_table\": \"%s\",\n", sqlite_blob_key ? "blob_key_without_rowid"
                                                                : "integer_primary_key");
    fprintf(f, "  \"reps\": %d,\n  \"probe\": {\n", reps);
    fprintf(f, "    \"overwrite_median_us\": %.3f,\n", probe_overwrite_us);
    fprintf(f, "    \"append_median_us\": %.3f,\n", probe_append_us);
    json_array(f, "overwrite_us", disk.overwrite_us, reps * N_SINGLE, 0);
    json_array(f, "append_us", disk.append_us, reps * N_SINGLE, 1);
    fprintf(f, "  },\n  \"engines\": {\n");
    for (int e = 0; e < N_ENGINES; e++) {
        const result *r = &results[e];
        fprintf(f, "    \"%s\": {\n", engines[e].name);
        fprintf(f, "      \"single_put_median_us\": %.3f, \"single_put_p99_us\": %.3f, "
                   "\"single_put_per_s\": %.1f,\n",
                s[e].single_med_us, s[e].single_p99_us, s[e].single_per_s);
        fprintf(f, "      \"batch_median_ms\": %.3f, \"get_median_ns\": %.3f, "
                   "\"scan_entries_per_s\": %.1f,\n",
                s[e].batch_ms, s[e].get_ns, s[e].scan_per_s);
        json_array(f, "single_put_us", r->single_us, reps * N_SINGLE, 0);
        json_array(f, "batch_ms", r->batch_ms, reps, 0);
        json_array(f, "get_ns", r->get_ns, reps, 0);
        json_array(f, "scan_ns_per_entry", r->scan_ns, reps, 1);
        fprintf(f, "    }%s\n", e + 1 < N_ENGINES ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    if (fclose(f) != 0)
        die("cannot write %s: %s", path, strerror(errno));
}

/* ---- Main ----------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench-engine [--dir DIR] [--reps R] [--json FILE] "
                    "[--sqlite-blob-key] [--mote-cache-pages N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *base = "/var/tmp", *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            base = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sqlite-blob-key") == 0)
            sqlite_blob_key = 1;
        else if (strcmp(argv[i], "--mote-cache-pages") == 0 && i + 1 < argc)
            mote_cache_pages = (unsigned)atoi(argv[++i]);
        else
            usage();
    }
    if (reps < 1 || reps > MAX_REPS)
        die("--reps must be 1..%d", MAX_REPS);

    read_env(base);
    snprintf(work_dir, sizeof work_dir, "%s/bench-engine-XXXXXX", base);
    if (!mkdtemp(work_dir))
        die("mkdtemp %s: %s", work_dir, strerror(errno));
    make_data();

    run_single_and_probe();
    for (int rep = 0; rep < reps; rep++) {
        fprintf(stderr, "batch %d/%d ...\n", rep + 1, reps);
        for (int e = 0; e < N_ENGINES; e++)
            run_batch(e, rep);
    }
    void *stores[N_ENGINES];
    char dirs[N_ENGINES][4200];
    for (int e = 0; e < N_ENGINES; e++) {
        fprintf(stderr, "loading %d entries: %s ...\n", N_STORE, engines[e].name);
        stores[e] = fresh_store(&engines[e], "store", 0, dirs[e], sizeof dirs[e]);
        load_store(&engines[e], stores[e]);
    }
    for (int rep = 0; rep < reps; rep++) {
        fprintf(stderr, "gets and scan %d/%d ...\n", rep + 1, reps);
        for (int e = 0; e < N_ENGINES; e++)
            run_gets(e, stores[e], rep);
        for (int e = 0; e < N_ENGINES; e++)
            run_scan(e, stores[e], rep);
    }
    for (int e = 0; e < N_ENGINES; e++)
        drop_store(&engines[e], stores[e], dirs[e]);
    rm_tree(work_dir);

    probe_overwrite_us = median(disk.overwrite_us, reps * N_SINGLE);
    probe_append_us = median(disk.append_us, reps * N_SINGLE);
    summary s[N_ENGINES];
    for (int e = 0; e < N_ENGINES; e++)
        s[e] = summarize(e);
    print_report(s);
    if (json)
        write_json(json, s);
    return 0;
}
