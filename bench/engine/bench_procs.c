/*
 * bench_procs.c — bench-procs: several processes on one store, MoteDB
 * against SQLite in WAL mode (synchronous=FULL) and LMDB, in one run.
 *
 * The data: N objects {level (int, indexed, 100 values), text (40 bytes)}.
 *   MoteDB  entity Journal, level indexed
 *   SQLite  t(id INTEGER PRIMARY KEY, level INTEGER, text TEXT), an index on
 *           level; WAL, synchronous=FULL, busy_timeout 10 s
 *   LMDB    a database id -> (level, text) and a dupsort database level ->
 *           id; durable commits (its defaults)
 * Operations, each in its own transaction, in processes that each open the
 * store themselves (after fork):
 *   read   half get by a random id, half the first 10 objects of a random
 *          level (through its index), every value read
 *   write  one object's text replaced, one durable commit
 * Scenarios:
 *   mixed      4 processes, each 90 % reads / 10 % writes for T seconds:
 *              write commits per second (all processes), read p50 latency
 *              (all reads, and gets and filters apart)
 *   writer     3 reader processes for 2T; a writer process (writes only)
 *              starts at T (it sleeps until then): the readers' reads per
 *              second with the writer over those without it. On 2 CPUs the
 *              3 readers already use all the CPU there is, so whatever the
 *              writer and the kernel's writeback take comes out of theirs:
 *              that ratio is split into the readers' CPU time with / without
 *              (what the writer and the interrupts of its I/O took from
 *              them) and their reads per second of user CPU with / without
 *              (what the writes cost each read: cold caches, pages to read
 *              again), with the writer's commits/s
 *   scaling    reads per second of 1 reader process, then of 2 (no writer)
 * Every process runs 0.5 s before anything is counted (caches warm). Each
 * scenario R times (--reps, default 3), medians; engines in turn within
 * each repetition. --engines and --scenarios run some of them (a build
 * against itself: `--engines motedb --scenarios mixed`); what did not run
 * shows as "-" (null in the JSON).
 *
 * Usage: bench-procs [--dir DIR] [--reps R] [--json FILE] [--seconds T]
 *                    [--engines motedb,sqlite,lmdb] [--scenarios mixed,writer,scaling]
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

const char bench_prog[] = "bench-procs";

#define N_OBJ 20000
#define N_LEVEL 100
#define TEXT_LEN 40
#define FILTER_LIMIT 10
#define MAX_SAMPLES 20000 /* read latencies a process reports (a reservoir) */

/* ---- engines -------------------------------------------------------------- */

typedef struct engine {
    const char *name;
    void *(*open)(const char *dir, int create);
    void (*load)(void *h);                          /* untimed: N_OBJ objects */
    uint64_t (*read_get)(void *h, uint64_t id);     /* returns a check value */
    uint64_t (*read_filter)(void *h, int level);
    void (*write)(void *h, uint64_t id, const char *text); /* durable */
    void (*close)(void *h);
} engine;

static void make_text(char *t, uint64_t id, uint64_t v)
{
    snprintf(t, TEXT_LEN + 1, "object %010llu version %014llu", /* 40 characters */
             (unsigned long long)(id % 10000000000ull), (unsigned long long)(v % 100000000000000ull));
}

/* MoteDB */

enum { P_LEVEL, P_TEXT, NPROPS };
static const mote_prop_def mt_props[NPROPS] = {
    [P_LEVEL] = {.name = "level", .type = MOTE_T_INT32, .flags = MOTE_P_INDEXED},
    [P_TEXT] = {.name = "text", .type = MOTE_T_STRING},
};

typedef struct mt_h {
    bench_mt mt;
    mote_entity *ent;
    mote_query *q;
    int q_level;
} mt_h;

#define MT_OK(h, call) BENCH_MT_CHECK(&(h)->mt, call)

static void *mt_open(const char *dir, int create)
{
    mt_h *h = bench_xcalloc(1, sizeof *h);
    bench_mt_open(&h->mt, dir, 0, 0);
    MT_OK(h, mote_busy_timeout(h->mt.store, 10000));
    bench_mt_begin(h, create);
    MT_OK(h, mote_entity_open(h->mt.txn, "Journal", mt_props, NPROPS, &h->ent));
    bench_mt_commit(h);
    mote_value v = {0};
    MT_OK(h, mote_query_new(h->ent, &h->q));
    MT_OK(h, mote_query_cond(h->q, P_LEVEL, MOTE_EQ, &v, 1, 0, &h->q_level));
    MT_OK(h, mote_query_where(h->q, h->q_level));
    MT_OK(h, mote_query_limit(h->q, 0, FILTER_LIMIT));
    return h;
}

static void mt_load(void *hp)
{
    mt_h *h = hp;
    char text[TEXT_LEN + 1];
    bench_mt_begin(h, 1);
    for (uint64_t id = 1; id <= N_OBJ; id++) {
        make_text(text, id, 0);
        mote_value v[NPROPS] = {0};
        v[P_LEVEL].v.i = (int64_t)(id % N_LEVEL);
        v[P_TEXT].v.s.p = text;
        v[P_TEXT].v.s.n = TEXT_LEN;
        MT_OK(h, mote_put(h->mt.txn, h->ent, 0, v, MOTE_PUT_INSERT, NULL));
    }
    bench_mt_commit(h);
}

static uint64_t mt_sum(const mote_record *r)
{
    mote_value lv, tx;
    if (mote_record_get(r, P_LEVEL, &lv, NULL) || mote_record_get(r, P_TEXT, &tx, NULL) ||
        tx.v.s.n != TEXT_LEN)
        bench_die("MoteDB: object %llu unreadable", (unsigned long long)r->id);
    return (uint64_t)lv.v.i + ((const unsigned char *)tx.v.s.p)[TEXT_LEN - 1];
}

static int mt_add(void *ctx, const mote_record *r)
{
    *(uint64_t *)ctx += mt_sum(r);
    return MOTE_OK;
}

static uint64_t mt_get(void *hp, uint64_t id)
{
    mt_h *h = hp;
    mote_record r;
    bench_mt_begin(h, 0);
    MT_OK(h, mote_get(h->mt.txn, h->ent, id, &r));
    uint64_t x = mt_sum(&r);
    mote_abort(h->mt.txn);
    return x;
}

static uint64_t mt_filter(void *hp, int level)
{
    mt_h *h = hp;
    mote_value v = {0};
    v.v.i = level;
    uint64_t x = 0;
    MT_OK(h, mote_query_set(h->q, h->q_level, &v, 1));
    bench_mt_begin(h, 0);
    MT_OK(h, mote_query_find(h->mt.txn, h->q, mt_add, &x));
    mote_abort(h->mt.txn);
    return x;
}

static void mt_write(void *hp, uint64_t id, const char *text)
{
    mt_h *h = hp;
    static const unsigned prop = P_TEXT;
    mote_value v = {0};
    v.v.s.p = text;
    v.v.s.n = TEXT_LEN;
    bench_mt_begin(h, 1);
    MT_OK(h, mote_update(h->mt.txn, h->ent, id, &prop, &v, 1));
    bench_mt_commit(h);
}

static void mt_close(void *hp)
{
    mt_h *h = hp;
    mote_query_free(h->q);
    bench_mt_close(&h->mt);
    free(h);
}

/* SQLite, WAL */

typedef struct sq_h {
    bench_sq sq;
    sqlite3_stmt *get, *filter, *write;
} sq_h;

static void *sq_open(const char *dir, int create)
{
    sq_h *h = bench_xcalloc(1, sizeof *h);
    bench_sq_open(&h->sq, dir, 1);
    if (create)
        bench_sq_exec(&h->sq, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, "
                              "level INTEGER, text TEXT); "
                              "CREATE INDEX IF NOT EXISTS t_level ON t(level)");
    h->get = bench_sq_prepare(&h->sq, "SELECT level, text FROM t WHERE id = ?");
    h->filter = bench_sq_prepare(&h->sq, "SELECT level, text FROM t WHERE level = ? LIMIT 10");
    h->write = bench_sq_prepare(&h->sq, "UPDATE t SET text = ? WHERE id = ?");
    return h;
}

static void sq_load(void *hp)
{
    sq_h *h = hp;
    sqlite3_stmt *ins = bench_sq_prepare(&h->sq, "INSERT INTO t(id, level, text) VALUES (?, ?, ?)");
    char text[TEXT_LEN + 1];
    bench_sq_begin(h, 1);
    for (uint64_t id = 1; id <= N_OBJ; id++) {
        make_text(text, id, 0);
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)id);
        sqlite3_bind_int(ins, 2, (int)(id % N_LEVEL));
        sqlite3_bind_text(ins, 3, text, TEXT_LEN, SQLITE_STATIC);
        bench_sq_run(&h->sq, ins);
    }
    bench_sq_commit(h);
    sqlite3_finalize(ins);
}

static uint64_t sq_rows(sq_h *h, sqlite3_stmt *st)
{
    uint64_t x = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 1);
        if (sqlite3_column_bytes(st, 1) != TEXT_LEN)
            bench_sq_fail(&h->sq, "a row's text");
        x += (uint64_t)sqlite3_column_int(st, 0) + t[TEXT_LEN - 1];
    }
    if (rc != SQLITE_DONE)
        bench_sq_fail(&h->sq, "read");
    sqlite3_reset(st);
    return x;
}

static uint64_t sq_get(void *hp, uint64_t id)
{
    sq_h *h = hp;
    sqlite3_bind_int64(h->get, 1, (sqlite3_int64)id);
    return sq_rows(h, h->get);
}

static uint64_t sq_filter(void *hp, int level)
{
    sq_h *h = hp;
    sqlite3_bind_int(h->filter, 1, level);
    return sq_rows(h, h->filter);
}

static void sq_write(void *hp, uint64_t id, const char *text)
{
    sq_h *h = hp;
    sqlite3_bind_text(h->write, 1, text, TEXT_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(h->write, 2, (sqlite3_int64)id);
    bench_sq_run(&h->sq, h->write); /* autocommit: one durable commit */
}

static void sq_close(void *hp)
{
    sq_h *h = hp;
    sqlite3_finalize(h->get);
    sqlite3_finalize(h->filter);
    sqlite3_finalize(h->write);
    bench_sq_close(&h->sq);
    free(h);
}

/* LMDB */

typedef struct lm_h {
    MDB_env *env;
    MDB_dbi main, idx;
    MDB_txn *rtxn; /* reset between reads, renewed for the next */
} lm_h;

#define LM_OK(call)                                                                    \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != MDB_SUCCESS)                                                        \
            bench_die("LMDB: %s: %s", #call, mdb_strerror(rc_));                       \
    } while (0)

static void *lm_open(const char *dir, int create)
{
    lm_h *h = bench_xcalloc(1, sizeof *h);
    LM_OK(mdb_env_create(&h->env));
    LM_OK(mdb_env_set_mapsize(h->env, (size_t)1 << 30));
    LM_OK(mdb_env_set_maxdbs(h->env, 2));
    LM_OK(mdb_env_open(h->env, dir, 0, 0644)); /* durable defaults; a lock file */
    MDB_txn *t;
    LM_OK(mdb_txn_begin(h->env, NULL, 0, &t));
    LM_OK(mdb_dbi_open(t, "main", create ? MDB_CREATE | MDB_INTEGERKEY : MDB_INTEGERKEY, &h->main));
    LM_OK(mdb_dbi_open(t, "level", (create ? MDB_CREATE : 0) | MDB_DUPSORT | MDB_INTEGERKEY |
                                       MDB_DUPFIXED | MDB_INTEGERDUP, &h->idx));
    LM_OK(mdb_txn_commit(t));
    LM_OK(mdb_txn_begin(h->env, NULL, MDB_RDONLY, &h->rtxn));
    mdb_txn_reset(h->rtxn);
    return h;
}

typedef struct lm_rec {
    int32_t level;
    char text[TEXT_LEN];
} lm_rec;

static void lm_load(void *hp)
{
    lm_h *h = hp;
    MDB_txn *t;
    LM_OK(mdb_txn_begin(h->env, NULL, 0, &t));
    char text[TEXT_LEN + 1];
    for (uint64_t id = 1; id <= N_OBJ; id++) {
        lm_rec r;
        r.level = (int32_t)(id % N_LEVEL);
        make_text(text, id, 0);
        memcpy(r.text, text, TEXT_LEN);
        size_t lv = (size_t)r.level;
        MDB_val k = {sizeof id, &id}, v = {sizeof r, &r}, lk = {sizeof lv, &lv}, iv = {sizeof id, &id};
        LM_OK(mdb_put(t, h->main, &k, &v, MDB_APPEND));
        LM_OK(mdb_put(t, h->idx, &lk, &iv, 0));
    }
    LM_OK(mdb_txn_commit(t));
}

static uint64_t lm_sum(const MDB_val *v)
{
    if (v->mv_size != sizeof(lm_rec))
        bench_die("LMDB: a record of %zu bytes", v->mv_size);
    lm_rec r;
    memcpy(&r, v->mv_data, sizeof r);
    return (uint64_t)r.level + (unsigned char)r.text[TEXT_LEN - 1];
}

static uint64_t lm_get(void *hp, uint64_t id)
{
    lm_h *h = hp;
    LM_OK(mdb_txn_renew(h->rtxn));
    MDB_val k = {sizeof id, &id}, v;
    LM_OK(mdb_get(h->rtxn, h->main, &k, &v));
    uint64_t x = lm_sum(&v);
    mdb_txn_reset(h->rtxn);
    return x;
}

static uint64_t lm_filter(void *hp, int level)
{
    lm_h *h = hp;
    LM_OK(mdb_txn_renew(h->rtxn));
    MDB_cursor *c;
    LM_OK(mdb_cursor_open(h->rtxn, h->idx, &c));
    size_t lv = (size_t)level;
    MDB_val lk = {sizeof lv, &lv}, iv;
    uint64_t x = 0;
    int rc = mdb_cursor_get(c, &lk, &iv, MDB_SET_KEY), n = 0;
    for (; rc == MDB_SUCCESS && n < FILTER_LIMIT; rc = mdb_cursor_get(c, &lk, &iv, MDB_NEXT_DUP), n++) {
        MDB_val v;
        LM_OK(mdb_get(h->rtxn, h->main, &iv, &v));
        x += lm_sum(&v);
    }
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        bench_die("LMDB: cursor: %s", mdb_strerror(rc));
    mdb_cursor_close(c);
    mdb_txn_reset(h->rtxn);
    return x;
}

static void lm_write(void *hp, uint64_t id, const char *text)
{
    lm_h *h = hp;
    MDB_txn *t;
    LM_OK(mdb_txn_begin(h->env, NULL, 0, &t));
    MDB_val k = {sizeof id, &id}, v;
    LM_OK(mdb_get(t, h->main, &k, &v));
    lm_rec r;
    memcpy(&r, v.mv_data, sizeof r);
    memcpy(r.text, text, TEXT_LEN);
    v.mv_data = &r;
    v.mv_size = sizeof r;
    LM_OK(mdb_put(t, h->main, &k, &v, 0));
    LM_OK(mdb_txn_commit(t));
}

static void lm_close(void *hp)
{
    lm_h *h = hp;
    mdb_txn_abort(h->rtxn);
    mdb_env_close(h->env);
    free(h);
}

static const engine engines[] = {
    {"MoteDB", mt_open, mt_load, mt_get, mt_filter, mt_write, mt_close},
    {"SQLite WAL", sq_open, sq_load, sq_get, sq_filter, sq_write, sq_close},
    {"LMDB", lm_open, lm_load, lm_get, lm_filter, lm_write, lm_close},
};
#define N_ENGINES (int)(sizeof engines / sizeof *engines)

/* ---- a worker process ------------------------------------------------------------ */

/* What a worker sends back through its pipe. */
typedef struct report {
    uint64_t reads[2], writes[2]; /* in [from, split) and [split, to) */
    uint64_t sink;                /* the check values, so reads cannot be skipped */
    double cpu[2][2];             /* CPU seconds in each part: [part][0] user, [1] all */
    int nsamples[2];              /* [0] gets, [1] filters */
    uint64_t seen[2];
    double samples[2][MAX_SAMPLES]; /* read latencies in µs (reservoirs) */
} report;

static uint64_t xrand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* This process's CPU seconds so far: c[0] in user mode, c[1] in all. The
 * kernel charges the interrupts and softirqs it handles (the disk's
 * completions, say) to whichever process they interrupt, as system time:
 * user time is the one that only the process's own work fills. */
static void process_cpu_s(double c[2])
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    c[0] = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    c[1] = c[0] + (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Run reads (and writes, with probability write_pct %) from `start` to
 * `end` (CLOCK_MONOTONIC ns), counting those in [from, split) and
 * [split, end) apart (before `from`: warming up, not counted). */
static void worker(const engine *e, const char *dir, int fd, uint64_t seed, int write_pct,
                   uint64_t start, uint64_t from, uint64_t split, uint64_t end)
{
    void *h = e->open(dir, 0);
    report *r = bench_xcalloc(1, sizeof *r);
    uint64_t rs = seed | 1, v = seed << 20;
    char text[TEXT_LEN + 1];
    /* Sleep until 1 ms before the start, then spin to it: a process that
     * starts later (the writer scenario's writer) must not take CPU from
     * the others while it waits. */
    if (start > bench_now_ns() + 1000000u) {
        uint64_t wake = start - 1000000u;
        struct timespec ts = {(time_t)(wake / 1000000000u), (long)(wake % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (bench_now_ns() < start)
        ;
    double cpu_at[3][2] = {{0}}; /* at from, split, end */
    int part = 0;                 /* boundaries passed */
    for (uint64_t now = bench_now_ns(); now < end; now = bench_now_ns()) {
        int half = now >= split, counted = now >= from;
        for (; part < counted + half; part++)
            process_cpu_s(cpu_at[part]);
        uint64_t x = xrand(&rs);
        if ((int)(x % 100) < write_pct) {
            make_text(text, 1 + x / 100 % N_OBJ, ++v);
            e->write(h, 1 + x / 100 % N_OBJ, text);
            r->writes[half] += counted;
            continue;
        }
        int kind = !(x & 1); /* 0: get, 1: filter */
        uint64_t t0 = bench_now_ns();
        r->sink += kind ? e->read_filter(h, (int)(x / 2 % N_LEVEL)) : e->read_get(h, 1 + x / 2 % N_OBJ);
        double us = (double)(bench_now_ns() - t0) / 1e3;
        if (!counted)
            continue;
        r->reads[half]++;
        uint64_t seen = ++r->seen[kind];
        if (r->nsamples[kind] < MAX_SAMPLES) /* reservoir sampling of the latencies */
            r->samples[kind][r->nsamples[kind]++] = us;
        else if ((x = xrand(&rs) % seen) < MAX_SAMPLES)
            r->samples[kind][x] = us;
    }
    for (; part < 3; part++)
        process_cpu_s(cpu_at[part]);
    for (int k = 0; k < 2; k++)
        for (int h = 0; h < 2; h++)
            r->cpu[h][k] = cpu_at[h + 1][k] - cpu_at[h][k];
    e->close(h);
    const char *p = (const char *)r;
    for (size_t n = sizeof *r, done = 0; done < n;) {
        ssize_t w = write(fd, p + done, n - done);
        if (w <= 0)
            _exit(2);
        done += (size_t)w;
    }
    _exit(0);
}

typedef struct role {
    int write_pct;
    double from, to; /* in units of T after the warm-up, from the common start */
} role;

#define WARM_S 0.5 /* every process runs this long before anything is counted */

/* Run one worker process per role at once; the reports, in role order.
 * Counting starts after the warm-up; `split_t` (in T) splits the counts. */
static report *run_workers(const engine *e, const char *dir, const role *roles, int n, double T,
                           double split_t)
{
    report *out = bench_xcalloc((size_t)n, sizeof *out);
    int fds[16];
    pid_t pids[16];
    uint64_t t0 = bench_now_ns() + 300000000u; /* all open first, then start together */
    for (int i = 0; i < n; i++) {
        int p[2];
        if (pipe(p))
            bench_die("pipe: %s", strerror(errno));
        pids[i] = fork();
        if (pids[i] < 0)
            bench_die("fork: %s", strerror(errno));
        if (pids[i] == 0) {
            close(p[0]);
            uint64_t warm = (uint64_t)(WARM_S * 1e9);
            uint64_t begin = roles[i].from > 0 ? warm + (uint64_t)(roles[i].from * T * 1e9) : 0;
            worker(e, dir, p[1], bench_rng_next(), roles[i].write_pct, t0 + begin, t0 + warm,
                   t0 + warm + (uint64_t)(split_t * T * 1e9),
                   t0 + warm + (uint64_t)(roles[i].to * T * 1e9));
        }
        close(p[1]);
        fds[i] = p[0];
    }
    for (int i = 0; i < n; i++) {
        char *p = (char *)&out[i];
        size_t done = 0;
        ssize_t r;
        while (done < sizeof *out && (r = read(fds[i], p + done, sizeof *out - done)) > 0)
            done += (size_t)r;
        close(fds[i]);
        int st;
        waitpid(pids[i], &st, 0);
        if (done != sizeof *out || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bench_die("%s: worker %d failed", e->name, i);
    }
    return out;
}

/* ---- scenarios ------------------------------------------------------------------ */

enum { M_WRITES, M_READ_P50, M_GET_P50, M_FILTER_P50, M_READS, M_WRITER_RATIO,
       M_WRITER_CPU, M_WRITER_PER_CPU, M_WRITER_COMMITS, M_READS1, M_READS2, M_SCALING,
       NMETRICS };
static const char *metric_names[NMETRICS] = {
    "mixed: write commits/s", "mixed: read p50 µs", "mixed: get p50 µs",
    "mixed: filter p50 µs", "mixed: reads/s",
    "writer: readers' reads/s with / without", "writer: readers' CPU with / without",
    "writer: readers' reads per user CPU-s with / without", "writer: the writer's commits/s",
    "scaling: reads/s, 1 reader",
    "scaling: reads/s, 2 readers", "scaling: 2 readers / 1"};

/* Metrics that are an engine's own ratio (no column of MoteDB over others). */
static int is_ratio(int k)
{
    return k == M_WRITER_RATIO || k == M_WRITER_CPU || k == M_WRITER_PER_CPU || k == M_SCALING;
}

enum { SC_MIXED = 1, SC_WRITER = 2, SC_SCALING = 4 };

static void measure(const engine *e, const char *dir, double T, unsigned scenarios, double *m)
{
    for (int k = 0; k < NMETRICS; k++)
        m[k] = NAN;
    if (!(scenarios & SC_MIXED))
        goto writer;
    /* mixed: 4 processes, 90/10 */
    role mixed[4];
    for (int i = 0; i < 4; i++)
        mixed[i] = (role){10, 0, 1};
    report *r = run_workers(e, dir, mixed, 4, T, 1);
    uint64_t writes = 0, reads = 0;
    int ns[2] = {0, 0};
    double *all[2] = {bench_xcalloc(8 * MAX_SAMPLES, sizeof(double)),
                      bench_xcalloc(4 * MAX_SAMPLES, sizeof(double))};
    for (int i = 0; i < 4; i++) {
        writes += r[i].writes[0];
        reads += r[i].reads[0];
        for (int k = 0; k < 2; k++) {
            memcpy(all[k] + ns[k], r[i].samples[k], (size_t)r[i].nsamples[k] * sizeof(double));
            ns[k] += r[i].nsamples[k];
        }
    }
    m[M_WRITES] = (double)writes / T;
    m[M_READS] = (double)reads / T;
    m[M_GET_P50] = ns[0] ? bench_median(all[0], ns[0]) : NAN;
    m[M_FILTER_P50] = ns[1] ? bench_median(all[1], ns[1]) : NAN;
    /* gets and filters are equally likely: the reservoirs are equal samples */
    memcpy(all[0] + ns[0], all[1], (size_t)ns[1] * sizeof(double));
    m[M_READ_P50] = ns[0] + ns[1] ? bench_median(all[0], ns[0] + ns[1]) : NAN;
    free(all[0]);
    free(all[1]);
    free(r);
writer:
    if (!(scenarios & SC_WRITER))
        goto scaling;
    /* writer: 3 readers for 2T, a writer from T */
    role wr[4] = {{0, 0, 2}, {0, 0, 2}, {0, 0, 2}, {100, 1, 2}};
    r = run_workers(e, dir, wr, 4, T, 1);
    uint64_t before = 0, after = 0;
    double cpu[2][2] = {{0}}; /* [without, with][user, all] */
    for (int i = 0; i < 3; i++) {
        before += r[i].reads[0];
        after += r[i].reads[1];
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 2; k++)
                cpu[h][k] += r[i].cpu[h][k];
    }
    m[M_WRITER_RATIO] = before ? (double)after / (double)before : NAN;
    m[M_WRITER_CPU] = cpu[0][1] > 0 ? cpu[1][1] / cpu[0][1] : NAN;
    m[M_WRITER_PER_CPU] = cpu[0][0] > 0 && cpu[1][0] > 0 && before
                              ? ((double)after / cpu[1][0]) / ((double)before / cpu[0][0])
                              : NAN;
    m[M_WRITER_COMMITS] = (double)r[3].writes[1] / T;
    free(r);
scaling:
    if (!(scenarios & SC_SCALING))
        return;
    /* scaling: 1 reader, then 2 */
    role one[1] = {{0, 0, 1}}, two[2] = {{0, 0, 1}, {0, 0, 1}};
    r = run_workers(e, dir, one, 1, T, 1);
    m[M_READS1] = (double)r[0].reads[0] / T;
    free(r);
    r = run_workers(e, dir, two, 2, T, 1);
    m[M_READS2] = (double)(r[0].reads[0] + r[1].reads[0]) / T;
    free(r);
    m[M_SCALING] = m[M_READS2] / m[M_READS1];
}

/* ---- the disk's own limit ---------------------------------------------------------- */

/* What the disk allows writers that each wait for their own sync: n
 * processes, each writing `bytes` (one commit's pages) and calling
 * fdatasync in a loop, side by side, in regions of one file of their own
 * that were written and synced before (overwrites, as a commit's pages
 * are), for T seconds after the warm-up. Commits per second, all
 * processes together; no reads, no locks: an upper bound for an engine's
 * write commits in the mixed scenario. */
#define PROBE_SLOTS 256   /* positions per process, in turn */
#define PROBE_BYTES 12288 /* a one-object update: its record, a branch and a leaf */
static double probe_disk(const char *dir, int n, size_t bytes, double T)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/probe.dat", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        bench_die("open %s: %s", path, strerror(errno));
    uint8_t *buf = bench_xcalloc(1, bytes);
    memset(buf, 0x5a, bytes);
    for (int i = 0; i < n * PROBE_SLOTS; i++)
        if (pwrite(fd, buf, bytes, (off_t)i * (off_t)bytes) != (ssize_t)bytes)
            bench_die("write %s: %s", path, strerror(errno));
    if (fsync(fd))
        bench_die("fsync %s: %s", path, strerror(errno));
    int fds[16];
    pid_t pids[16];
    uint64_t t0 = bench_now_ns() + 100000000u, from = t0 + (uint64_t)(WARM_S * 1e9);
    uint64_t to = from + (uint64_t)(T * 1e9);
    for (int i = 0; i < n; i++) {
        int p[2];
        if (pipe(p))
            bench_die("pipe: %s", strerror(errno));
        if ((pids[i] = fork()) == 0) {
            close(p[0]);
            uint64_t count = 0, now;
            while (bench_now_ns() < t0)
                ;
            for (int k = 0; (now = bench_now_ns()) < to; k++) {
                off_t off = ((off_t)i * PROBE_SLOTS + k % PROBE_SLOTS) * (off_t)bytes;
                if (pwrite(fd, buf, bytes, off) != (ssize_t)bytes || fdatasync(fd))
                    _exit(2);
                count += now >= from;
            }
            _exit(write(p[1], &count, sizeof count) == sizeof count ? 0 : 3);
        }
        close(p[1]);
        fds[i] = p[0];
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t c = 0;
        int st;
        if (read(fds[i], &c, sizeof c) != sizeof c)
            bench_die("disk probe: worker %d failed", i);
        close(fds[i]);
        waitpid(pids[i], &st, 0);
        total += c;
    }
    close(fd);
    unlink(path);
    free(buf);
    return (double)total / T;
}

/* The set named by a comma-separated list of `names` (n of them, matched
 * case-insensitively against the start of each), as bits. */
static unsigned parse_set(const char *arg, const char *const *names, int n, const char *what)
{
    unsigned set = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (!strncasecmp(names[i], tok, strlen(tok)) && strlen(tok) > 0)
                found = i;
        if (found < 0)
            bench_die("--%s: unknown name '%s'", what, tok);
        set |= 1u << found;
    }
    return set;
}

int main(int argc, char **argv)
{
    static const char *const engine_ids[] = {"motedb", "sqlite", "lmdb"};
    static const char *const scenario_ids[] = {"mixed", "writer", "scaling"};
    const char *base = ".", *json = NULL;
    int reps = 3;
    double T = 2.0;
    unsigned run = (1u << N_ENGINES) - 1, scenarios = SC_MIXED | SC_WRITER | SC_SCALING;
    for (int i = 1; i < argc; i++) {
        if (bench_common_opt(argc, argv, &i, &base, &json, &reps))
            continue;
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            T = atof(argv[++i]);
        else if (!strcmp(argv[i], "--engines") && i + 1 < argc)
            run = parse_set(argv[++i], engine_ids, N_ENGINES, "engines");
        else if (!strcmp(argv[i], "--scenarios") && i + 1 < argc)
            scenarios = parse_set(argv[++i], scenario_ids, 3, "scenarios");
        else
            bench_die("usage: bench-procs [--dir DIR] [--reps R] [--json FILE] [--seconds T] "
                      "[--engines motedb,sqlite,lmdb] [--scenarios mixed,writer,scaling]");
    }
    if (reps < 1 || !(T > 0))
        bench_die("--reps and --seconds must be positive");
    bench_start(base);
    char dirs[N_ENGINES][4200];
    for (int e = 0; e < N_ENGINES; e++) { /* the stores, loaded once */
        if (!(run & 1u << e))
            continue;
        bench_mkdir(dirs[e], sizeof dirs[e], "%s", engines[e].name);
        void *h = engines[e].open(dirs[e], 1);
        engines[e].load(h);
        engines[e].close(h);
    }
    double (*m)[N_ENGINES][NMETRICS] = bench_xcalloc((size_t)reps, sizeof *m);
    double probe4[64], probe1[64]; /* the disk's limit, each repetition (mixed) */
    char pdir[4200];
    if (scenarios & SC_MIXED)
        bench_mkdir(pdir, sizeof pdir, "probe");
    for (int rep = 0; rep < reps; rep++) {
        if ((scenarios & SC_MIXED) && rep < 64) {
            fprintf(stderr, "rep %d/%d: disk ...\n", rep + 1, reps);
            probe4[rep] = probe_disk(pdir, 4, PROBE_BYTES, T);
            probe1[rep] = probe_disk(pdir, 1, 4096, T);
        }
        for (int e = 0; e < N_ENGINES; e++) {
            if (!(run & 1u << e)) {
                for (int k = 0; k < NMETRICS; k++)
                    m[rep][e][k] = NAN;
                continue;
            }
            fprintf(stderr, "rep %d/%d: %s ...\n", rep + 1, reps, engines[e].name);
            measure(&engines[e], dirs[e], T, scenarios, m[rep][e]);
        }
    }
    double med[N_ENGINES][NMETRICS];
    for (int e = 0; e < N_ENGINES; e++)
        for (int k = 0; k < NMETRICS; k++) {
            double v[64];
            int n = reps < 64 ? reps : 64;
            for (int rep = 0; rep < n; rep++)
                v[rep] = m[rep][e][k];
            med[e][k] = bench_median(v, n);
        }
    bench_print_header("bench/engine processes (several processes on one store)");
    printf("- %d objects; reads: half get by id, half the first %d of a level (indexed); "
           "writes: one object, one durable commit; T = %.1f s; medians of %d\n\n",
           N_OBJ, FILTER_LIMIT, T, reps);
    enum { CELL = 64 };
    char cells[NMETRICS + 1][N_ENGINES + 3][CELL];
    memset(cells, 0, sizeof cells);
    snprintf(cells[0][0], CELL, "metric");
    for (int e = 0; e < N_ENGINES; e++)
        snprintf(cells[0][1 + e], CELL, "%s", engines[e].name);
    snprintf(cells[0][1 + N_ENGINES], CELL, "MoteDB/SQLite WAL");
    snprintf(cells[0][2 + N_ENGINES], CELL, "MoteDB/LMDB");
    for (int k = 0; k < NMETRICS; k++) {
        snprintf(cells[1 + k][0], CELL, "%s", metric_names[k]);
        for (int e = 0; e < N_ENGINES; e++) {
            if (isnan(med[e][k]))
                snprintf(cells[1 + k][1 + e], CELL, "-");
            else if (is_ratio(k))
                snprintf(cells[1 + k][1 + e], CELL, "%.2f", med[e][k]);
            else
                bench_fmt_num(cells[1 + k][1 + e], CELL, med[e][k]);
        }
        if (is_ratio(k))
            continue;
        int lower = k == M_READ_P50 || k == M_GET_P50 || k == M_FILTER_P50; /* latencies */
        for (int o = 1; o <= 2; o++) {
            double r = lower ? med[o][k] / med[0][k] : med[0][k] / med[o][k];
            if (isnan(r))
                snprintf(cells[1 + k][N_ENGINES + o], CELL, "-");
            else
                snprintf(cells[1 + k][N_ENGINES + o], CELL, "%.2fx", r);
        }
    }
    bench_print_cells(&cells[0][0][0], NMETRICS + 1, N_ENGINES + 3, CELL, 1);
    printf("\nRatios are speeds: above 1.00x MoteDB is faster (for the latency, the other's "
           "p50 over MoteDB's).\n");
    double d4 = NAN, d1 = NAN;
    if (scenarios & SC_MIXED) {
        int n = reps < 64 ? reps : 64;
        d4 = bench_median(probe4, n);
        d1 = bench_median(probe1, n);
        printf("\nThe disk in the same run, no engine (medians): 4 processes each writing %d KB "
               "and calling fdatasync in a loop, side by side: %.0f per second (MoteDB's mixed "
               "write commits: %.2fx of it); 1 process writing 4 KB and calling fdatasync: %.0f "
               "per second (SQLite WAL's: %.2fx of it).\n",
               PROBE_BYTES / 1024, d4, med[0][M_WRITES] / d4, d1, med[1][M_WRITES] / d1);
    }
    if (json) {
        FILE *f = bench_json_open(json);
        fprintf(f, "  \"seconds\": %.3f, \"reps\": %d, \"objects\": %d,\n", T, reps, N_OBJ);
        if (!isnan(d4))
            fprintf(f, "  \"disk\": {\"4 writers, %d KB + fdatasync each, per s\": %.6g, "
                    "\"1 writer, 4 KB + fdatasync, per s\": %.6g},\n", PROBE_BYTES / 1024, d4, d1);
        fprintf(f, "  \"medians\": {");
        for (int e = 0; e < N_ENGINES; e++) {
            fprintf(f, "%s\n    \"%s\": {", e ? "," : "", engines[e].name);
            for (int k = 0; k < NMETRICS; k++)
                if (isnan(med[e][k]))
                    fprintf(f, "%s\"%s\": null", k ? ", " : "", metric_names[k]);
                else
                    fprintf(f, "%s\"%s\": %.6g", k ? ", " : "", metric_names[k], med[e][k]);
            fprintf(f, "}");
        }
        fprintf(f, "\n");
        bench_json_close(f, json); /* closes "medians" and the whole */
    }
    free(m);
    return 0;
}
