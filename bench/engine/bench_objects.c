/*
 * bench_objects.c — MoteDB's object layer against SQLite's C API on the
 * Test 1 model of the ORM benchmark (bench/orm/README.md, "Models and
 * operations"), measured side by side in one process, one run, one directory
 * on local disk (tmpfs is refused).
 *
 * Model: Journal {timestamp (timestamp, "now" when the object is built),
 * level (int16, indexed, from {10,20,30,40,50}), text (string, indexed,
 * "Insert from B, item 1234": 21..31 bytes)}.
 *   MoteDB  entity Journal, properties in that order; library defaults
 *           (4 KB pages, default cache), durable commits.
 *   SQLite  journal(id INTEGER PRIMARY KEY, timestamp INTEGER, level INTEGER,
 *           text TEXT), indexes on level and on text; synchronous=FULL;
 *           "SQLite WAL" journal_mode=WAL, "SQLite rollback" journal_mode=
 *           DELETE (SQLite's default). Every statement is prepared once, at
 *           open, and reused; MoteDB's query is likewise built once.
 *
 * Operations (N = 100, BATCH = 10,000), all objects and new values made
 * before any timer starts (fixed seed: the same data for every engine):
 *   A  N inserts, each its own durable transaction; each begin..commit is
 *      timed alone, the engines taking turns in runs of 10 (as bench-engine).
 *   B  BATCH inserts, one put / one INSERT per object, one transaction.
 *   C  BATCH inserts through the bulk path, one transaction. MoteDB:
 *      mote_put_many (returns the new ids). SQLite: a multi-row INSERT of
 *      --sqlite-bulk-rows rows (default 1,000; 1 = the single-row statement).
 *   After B and after C (untimed, durable) the newest 9,900 rows are deleted,
 *   so D..K run on 300 rows (--large keeps them: 20,100 rows).
 *   D  10 rounds x 5 levels: every row with level == L, each property read
 *      (MoteDB: query EQ level + mote_query_find, callback reads all three
 *      properties; SQLite: SELECT id, timestamp, level, text WHERE level = ?,
 *      every column read).
 *   E  N/2 queries level == L LIMIT 20 OFFSET k, k uniform in
 *      0..count(level == L) - 20 (5 levels in turn).
 *   F  2N gets of distinct random existing ids, every property read.
 *   I  every row: a random level and text + " Update", one transaction
 *      (MoteDB: mote_put with the id, MOTE_PUT_UPDATE; SQLite: UPDATE SET
 *      timestamp, level, text WHERE id).
 *   J  every row: a random level only, one transaction (MoteDB: mote_update;
 *      SQLite: UPDATE SET level WHERE id).
 *   K  every row deleted one by one in one transaction.
 * D, E, F run in one read transaction each (SQLite: BEGIN..COMMIT), timed
 * from begin to commit. Reads are checked against the harness's model of
 * the rows; after C, J and K every engine's rows are compared with it.
 *
 * Every repetition (--reps, default 5) gives each engine a fresh store and
 * runs A..K in order, the engines taking turns per operation (the order
 * rotating). The report gives, per op, the median over repetitions of
 * rows/s (rows processed / seconds), the ratio MoteDB / SQLite, and the
 * geometric mean over A-F, I-K; the target of issue 3 (MoteDB >= 3x SQLite
 * on batch insert B and C, filters D and E, and get F) is checked against
 * the faster SQLite mode.
 *
 * Usage: bench-objects [--dir DIR] [--reps R] [--json FILE] [--large]
 *                      [--sqlite-bulk-rows K]
 * Output: a Markdown table on stdout (progress on stderr); --json writes
 * every raw sample. Helpers shared with bench-engine are in common.c.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common.h"
#include "mote.h"

#define N 100            /* ITERATIONS of the seed */
#define BATCH 10000      /* BATCH_SIZE of the seed */
#define KEEP 100         /* rows of B and of C kept after the untimed delete */
#define N_LEVELS 5
#define D_ROUNDS 10      /* D: rounds over the 5 levels */
#define E_QUERIES (N / 2)
#define E_LIMIT 20
#define F_GETS (2 * N)
#define SINGLE_RUN 10    /* A: consecutive commits per engine turn */
#define TEXT_CAP 48
#define MAX_REPS 20
#define MAX_BULK_ROWS 10000 /* SQLite: 3 variables a row, limit 32,766 */

static const int levels[N_LEVELS] = {10, 20, 30, 40, 50};
enum { P_TS, P_LEVEL, P_TEXT, NPROPS }; /* MoteDB property order */

/* ---- Helpers ------------------------------------------------------------ */

const char bench_prog[] = "bench-objects";

static int64_t wall_ns(void) /* "now" for the timestamp property */
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The q-quantile (nearest rank) of n samples; q = 0.5 gives the median. */
static double quantile(const double *v, int n, double q)
{
    if (q == 0.5)
        return bench_median(v, n);
    double *s = bench_sorted(v, n);
    double r = s[(int)ceil(q * n) - 1];
    free(s);
    return r;
}

/* ---- Objects and the model ------------------------------------------------ */

/* One Journal object as the application holds it before saving. */
typedef struct obj {
    int64_t ts;
    int level;
    uint32_t len;
    char text[TEXT_CAP];
} obj;

/* Objects ready to save: the same objects as MoteDB values (n * NPROPS,
 * pointing into o), built before the timer like an ORM's unsaved objects. */
typedef struct batch {
    size_t n;
    obj *o;
    mote_value *mv;
} batch;

static void batch_values(batch *b)
{
    b->mv = bench_xcalloc(b->n * NPROPS, sizeof *b->mv);
    for (size_t i = 0; i < b->n; i++) {
        mote_value *v = b->mv + i * NPROPS;
        v[P_TS].v.i = b->o[i].ts;
        v[P_LEVEL].v.i = b->o[i].level;
        v[P_TEXT].v.s.p = b->o[i].text;
        v[P_TEXT].v.s.n = b->o[i].len;
    }
}

static batch make_batch(char op, size_t n)
{
    batch b = {n, bench_xcalloc(n, sizeof(obj)), NULL};
    for (size_t i = 0; i < n; i++) {
        b.o[i].ts = wall_ns();
        b.o[i].level = levels[bench_rng_next() % N_LEVELS];
        b.o[i].len = (uint32_t)snprintf(b.o[i].text, TEXT_CAP, "Insert from %c, item %zu", op, i);
    }
    batch_values(&b);
    return b;
}

static void free_batch(batch *b)
{
    free(b->o);
    free(b->mv);
}

/* What a read of one row adds to a check sum: every property, not the id
 * (ids differ between engines: SQLite reuses deleted ids, MoteDB does not). */
static uint64_t row_sum(int64_t ts, int64_t level, const void *text, size_t len)
{
    const uint8_t *t = text;
    return (uint64_t)ts * 3 + (uint64_t)level * 7 + len * 11 + (len ? t[0] + t[len - 1] : 0);
}

static uint64_t obj_sum(const obj *o)
{
    return row_sum(o->ts, o->level, o->text, o->len);
}

/* The rows every store should hold, in id order (ids ascend with inserts). */
static obj *model;
static size_t nmodel;

static void model_add(const batch *b, size_t n)
{
    model = realloc(model, (nmodel + n) * sizeof *model);
    if (!model)
        bench_die("out of memory");
    memcpy(model + nmodel, b->o, n * sizeof *model);
    nmodel += n;
}

/* ---- Engines -------------------------------------------------------------- */

typedef struct acc { /* rows read and their check sum */
    uint64_t rows, sum;
} acc;

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
    uint64_t (*insert)(void *h, const batch *b, size_t i); /* returns the id */
    void (*bulk)(void *h, const batch *b);                 /* one transaction */
    void (*filter)(void *h, int level, uint64_t off, uint64_t limit, acc *a);
    void (*get)(void *h, uint64_t id, acc *a);
    void (*update)(void *h, uint64_t id, const batch *b, size_t i); /* whole */
    void (*set_level)(void *h, uint64_t id, int level);
    void (*remove)(void *h, uint64_t id);
    size_t (*load)(void *h, uint64_t **ids, obj **rows); /* untimed, id order */
    int variant;                                         /* SQLite: 1 = WAL */
} engine;

/* MoteDB */

static const mote_prop_def journal_props[NPROPS] = {
    [P_TS] = {.name = "timestamp", .type = MOTE_T_TIMESTAMP},
    [P_LEVEL] = {.name = "level", .type = MOTE_T_INT16, .flags = MOTE_P_INDEXED},
    [P_TEXT] = {.name = "text", .type = MOTE_T_STRING, .flags = MOTE_P_INDEXED},
};

typedef struct mt_handle {
    bench_mt mt; /* first: the shared begin and commit take the handle */
    mote_entity *ent;
    mote_query *q; /* level == ? */
    int q_level;   /* its node */
    uint64_t *ids_out;
} mt_handle;

#define MT_CHECK(h, call) BENCH_MT_CHECK(&(h)->mt, call)

static void *mt_open(const engine *e, const char *dir)
{
    (void)e;
    mt_handle *h = bench_xcalloc(1, sizeof *h);
    bench_mt_open(&h->mt, dir, 0, 0);
    bench_mt_begin(h, 1);
    MT_CHECK(h, mote_entity_open(h->mt.txn, "Journal", journal_props, NPROPS, &h->ent));
    bench_mt_commit(h);
    mote_value v = {0};
    v.v.i = levels[0];
    MT_CHECK(h, mote_query_new(h->ent, &h->q));
    MT_CHECK(h, mote_query_cond(h->q, P_LEVEL, MOTE_EQ, &v, 1, 0, &h->q_level));
    MT_CHECK(h, mote_query_where(h->q, h->q_level));
    h->ids_out = bench_xcalloc(BATCH, sizeof *h->ids_out);
    return h;
}

static void mt_close(void *hp)
{
    mt_handle *h = hp;
    mote_query_free(h->q);
    bench_mt_close(&h->mt);
    free(h->ids_out);
    free(h);
}

static uint64_t mt_insert(void *hp, const batch *b, size_t i)
{
    mt_handle *h = hp;
    uint64_t id;
    MT_CHECK(h, mote_put(h->mt.txn, h->ent, 0, b->mv + i * NPROPS, MOTE_PUT_INSERT, &id));
    return id;
}

static void mt_bulk(void *hp, const batch *b)
{
    mt_handle *h = hp;
    bench_mt_begin(h, 1);
    MT_CHECK(h, mote_put_many(h->mt.txn, h->ent, b->n, NULL, b->mv, MOTE_PUT_INSERT,
                              h->ids_out, NULL));
    bench_mt_commit(h);
}

/* Read every property of a record into the check sum. */
static int mt_read(void *ctx, const mote_record *r)
{
    acc *a = ctx;
    mote_value ts, lv, tx;
    int rc = mote_record_get(r, P_TS, &ts, NULL);
    if (!rc)
        rc = mote_record_get(r, P_LEVEL, &lv, NULL);
    if (!rc)
        rc = mote_record_get(r, P_TEXT, &tx, NULL);
    if (rc || r->id == 0)
        return rc ? rc : MOTE_CORRUPT;
    a->sum += row_sum(ts.v.i, lv.v.i, tx.v.s.p, tx.v.s.n);
    a->rows++;
    return MOTE_OK;
}

static void mt_filter(void *hp, int level, uint64_t off, uint64_t limit, acc *a)
{
    mt_handle *h = hp;
    mote_value v = {0};
    v.v.i = level;
    MT_CHECK(h, mote_query_set(h->q, h->q_level, &v, 1));
    MT_CHECK(h, mote_query_limit(h->q, off, limit));
    MT_CHECK(h, mote_query_find(h->mt.txn, h->q, mt_read, a));
}

static void mt_get(void *hp, uint64_t id, acc *a)
{
    mt_handle *h = hp;
    mote_record r;
    MT_CHECK(h, mote_get(h->mt.txn, h->ent, id, &r));
    MT_CHECK(h, mt_read(a, &r));
}

static void mt_update(void *hp, uint64_t id, const batch *b, size_t i)
{
    mt_handle *h = hp;
    MT_CHECK(h, mote_put(h->mt.txn, h->ent, id, b->mv + i * NPROPS, MOTE_PUT_UPDATE, NULL));
}

static void mt_set_level(void *hp, uint64_t id, int level)
{
    mt_handle *h = hp;
    static const unsigned prop = P_LEVEL;
    mote_value v = {0};
    v.v.i = level;
    MT_CHECK(h, mote_update(h->mt.txn, h->ent, id, &prop, &v, 1));
}

static void mt_remove(void *hp, uint64_t id)
{
    mt_handle *h = hp;
    MT_CHECK(h, mote_remove(h->mt.txn, h->ent, id));
}

typedef struct loader {
    uint64_t *ids;
    obj *rows;
    size_t n, cap;
} loader;

static void loader_add(loader *l, uint64_t id, int64_t ts, int64_t level, const void *text,
                       size_t len)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->ids = realloc(l->ids, l->cap * sizeof *l->ids);
        l->rows = realloc(l->rows, l->cap * sizeof *l->rows);
        if (!l->ids || !l->rows)
            bench_die("out of memory");
    }
    obj *o = &l->rows[l->n];
    memset(o, 0, sizeof *o);
    if (len >= TEXT_CAP)
        bench_die("a text of %zu bytes: not written by this benchmark", len);
    o->ts = ts;
    o->level = (int)level;
    o->len = (uint32_t)len;
    memcpy(o->text, text, len);
    l->ids[l->n++] = id;
}

static int mt_load_one(void *ctx, const mote_record *r)
{
    mote_value ts, lv, tx;
    if (mote_record_get(r, P_TS, &ts, NULL) || mote_record_get(r, P_LEVEL, &lv, NULL) ||
        mote_record_get(r, P_TEXT, &tx, NULL))
        return MOTE_CORRUPT;
    loader_add(ctx, r->id, ts.v.i, lv.v.i, tx.v.s.p, tx.v.s.n);
    return MOTE_OK;
}

static size_t mt_load(void *hp, uint64_t **ids, obj **rows)
{
    mt_handle *h = hp;
    loader l = {0};
    bench_mt_begin(h, 0);
    MT_CHECK(h, mote_scan(h->mt.txn, h->ent, mt_load_one, &l));
    uint64_t count;
    MT_CHECK(h, mote_count(h->mt.txn, h->ent, &count));
    bench_mt_commit(h);
    if (count != l.n)
        bench_die("MoteDB: mote_count says %llu objects, the scan saw %zu",
            (unsigned long long)count, l.n);
    *ids = l.ids;
    *rows = l.rows;
    return l.n;
}

/* SQLite */

static int sqlite_bulk_rows = 1000; /* --sqlite-bulk-rows */

typedef struct sq_handle {
    bench_sq sq; /* first: the shared begin and commit take the handle */
    sqlite3_stmt *insert, *insert_many, *filter, *filter_lim, *get, *update, *set_level,
        *remove, *load;
} sq_handle;

#define SQ_BIND(h, call)                                                         \
    do {                                                                         \
        if ((call) != SQLITE_OK)                                                 \
            bench_sq_fail(&(h)->sq, #call);                                      \
    } while (0)

#define SQ_COLS "id, timestamp, level, text"

static void *sq_open(const engine *e, const char *dir)
{
    sq_handle *h = bench_xcalloc(1, sizeof *h);
    bench_sq *s = &h->sq;
    bench_sq_open(s, dir, e->variant);
    bench_sq_exec(s, "CREATE TABLE journal(id INTEGER PRIMARY KEY, timestamp INTEGER NOT NULL, "
                     "level INTEGER NOT NULL, text TEXT NOT NULL)");
    bench_sq_exec(s, "CREATE INDEX journal_level ON journal(level)");
    bench_sq_exec(s, "CREATE INDEX journal_text ON journal(text)");
    h->insert =
        bench_sq_prepare(s, "INSERT INTO journal(timestamp, level, text) VALUES(?, ?, ?)");
    /* INSERT ... VALUES (?, ?, ?), (?, ?, ?), ... with sqlite_bulk_rows rows */
    size_t cap = 64 + (size_t)sqlite_bulk_rows * 10;
    char *sql = bench_xcalloc(cap, 1);
    size_t len = (size_t)snprintf(sql, cap, "INSERT INTO journal(timestamp, level, text) VALUES");
    for (int i = 0; i < sqlite_bulk_rows; i++)
        len += (size_t)snprintf(sql + len, cap - len, "%s(?,?,?)", i ? "," : "");
    h->insert_many = bench_sq_prepare(s, sql);
    free(sql);
    h->filter = bench_sq_prepare(s, "SELECT " SQ_COLS " FROM journal WHERE level = ?");
    h->filter_lim = bench_sq_prepare(s, "SELECT " SQ_COLS " FROM journal WHERE level = ? "
                                        "LIMIT ? OFFSET ?");
    h->get = bench_sq_prepare(s, "SELECT " SQ_COLS " FROM journal WHERE id = ?");
    h->update = bench_sq_prepare(s, "UPDATE journal SET timestamp = ?, level = ?, text = ? "
                                    "WHERE id = ?");
    h->set_level = bench_sq_prepare(s, "UPDATE journal SET level = ? WHERE id = ?");
    h->remove = bench_sq_prepare(s, "DELETE FROM journal WHERE id = ?");
    h->load = bench_sq_prepare(s, "SELECT " SQ_COLS " FROM journal ORDER BY id");
    return h;
}

static void sq_close(void *hp)
{
    sq_handle *h = hp;
    sqlite3_stmt *all[] = {h->insert, h->insert_many, h->filter, h->filter_lim, h->get,
                           h->update, h->set_level,   h->remove, h->load};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        sqlite3_finalize(all[i]);
    bench_sq_close(&h->sq);
    free(h);
}

static void sq_bind_obj(sq_handle *h, sqlite3_stmt *st, int first, const obj *o)
{
    SQ_BIND(h, sqlite3_bind_int64(st, first, o->ts));
    SQ_BIND(h, sqlite3_bind_int(st, first + 1, o->level));
    SQ_BIND(h, sqlite3_bind_text(st, first + 2, o->text, (int)o->len, SQLITE_STATIC));
}

static uint64_t sq_insert(void *hp, const batch *b, size_t i)
{
    sq_handle *h = hp;
    sq_bind_obj(h, h->insert, 1, &b->o[i]);
    bench_sq_run(&h->sq, h->insert);
    return (uint64_t)sqlite3_last_insert_rowid(h->sq.db);
}

static void sq_bulk(void *hp, const batch *b)
{
    sq_handle *h = hp;
    size_t k = (size_t)sqlite_bulk_rows, i = 0;
    bench_sq_begin(h, 1);
    for (; k > 1 && i + k <= b->n; i += k) {
        for (size_t j = 0; j < k; j++)
            sq_bind_obj(h, h->insert_many, 1 + 3 * (int)j, &b->o[i + j]);
        bench_sq_run(&h->sq, h->insert_many);
    }
    for (; i < b->n; i++)
        sq_insert(h, b, i);
    bench_sq_commit(h);
}

/* Step a SELECT of SQ_COLS to its end, reading every column of every row. */
static void sq_read_rows(sq_handle *h, sqlite3_stmt *st, acc *a)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(st, 0);
        sqlite3_int64 ts = sqlite3_column_int64(st, 1);
        int level = sqlite3_column_int(st, 2);
        const unsigned char *text = sqlite3_column_text(st, 3);
        size_t len = (size_t)sqlite3_column_bytes(st, 3);
        if (id == 0)
            bench_die("SQLite: a row with id 0");
        a->sum += row_sum(ts, level, text, len);
        a->rows++;
    }
    if (rc != SQLITE_DONE)
        bench_sq_fail(&h->sq, sqlite3_sql(st));
    sqlite3_reset(st);
}

static void sq_filter(void *hp, int level, uint64_t off, uint64_t limit, acc *a)
{
    sq_handle *h = hp;
    sqlite3_stmt *st = limit ? h->filter_lim : h->filter;
    SQ_BIND(h, sqlite3_bind_int(st, 1, level));
    if (limit) {
        SQ_BIND(h, sqlite3_bind_int64(st, 2, (sqlite3_int64)limit));
        SQ_BIND(h, sqlite3_bind_int64(st, 3, (sqlite3_int64)off));
    }
    sq_read_rows(h, st, a);
}

static void sq_get(void *hp, uint64_t id, acc *a)
{
    sq_handle *h = hp;
    uint64_t before = a->rows;
    SQ_BIND(h, sqlite3_bind_int64(h->get, 1, (sqlite3_int64)id));
    sq_read_rows(h, h->get, a);
    if (a->rows != before + 1)
        bench_die("SQLite: get %llu: no row", (unsigned long long)id);
}

static void sq_update(void *hp, uint64_t id, const batch *b, size_t i)
{
    sq_handle *h = hp;
    sq_bind_obj(h, h->update, 1, &b->o[i]);
    SQ_BIND(h, sqlite3_bind_int64(h->update, 4, (sqlite3_int64)id));
    bench_sq_run(&h->sq, h->update);
    if (sqlite3_changes(h->sq.db) != 1)
        bench_die("SQLite: update %llu: no row", (unsigned long long)id);
}

static void sq_set_level(void *hp, uint64_t id, int level)
{
    sq_handle *h = hp;
    SQ_BIND(h, sqlite3_bind_int(h->set_level, 1, level));
    SQ_BIND(h, sqlite3_bind_int64(h->set_level, 2, (sqlite3_int64)id));
    bench_sq_run(&h->sq, h->set_level);
    if (sqlite3_changes(h->sq.db) != 1)
        bench_die("SQLite: update %llu: no row", (unsigned long long)id);
}

static void sq_remove(void *hp, uint64_t id)
{
    sq_handle *h = hp;
    SQ_BIND(h, sqlite3_bind_int64(h->remove, 1, (sqlite3_int64)id));
    bench_sq_run(&h->sq, h->remove);
    if (sqlite3_changes(h->sq.db) != 1)
        bench_die("SQLite: delete %llu: no row", (unsigned long long)id);
}

static size_t sq_load(void *hp, uint64_t **ids, obj **rows)
{
    sq_handle *h = hp;
    loader l = {0};
    int rc;
    bench_sq_begin(h, 0);
    while ((rc = sqlite3_step(h->load)) == SQLITE_ROW)
        loader_add(&l, (uint64_t)sqlite3_column_int64(h->load, 0),
                   sqlite3_column_int64(h->load, 1), sqlite3_column_int(h->load, 2),
                   sqlite3_column_text(h->load, 3), (size_t)sqlite3_column_bytes(h->load, 3));
    if (rc != SQLITE_DONE)
        bench_sq_fail(&h->sq, "load");
    sqlite3_reset(h->load);
    bench_sq_commit(h);
    *ids = l.ids;
    *rows = l.rows;
    return l.n;
}

#define SQLITE_OPS                                                                        \
    sq_open, sq_close, bench_sq_begin, bench_sq_commit, sq_insert, sq_bulk, sq_filter,    \
        sq_get, sq_update, sq_set_level, sq_remove, sq_load

static const engine engines[] = {
    {"MoteDB", mt_open, mt_close, bench_mt_begin, bench_mt_commit, mt_insert, mt_bulk,
     mt_filter, mt_get, mt_update, mt_set_level, mt_remove, mt_load, 0},
    {"SQLite WAL", SQLITE_OPS, 1},
    {"SQLite rollback", SQLITE_OPS, 0},
};
#define N_ENGINES (int)(sizeof engines / sizeof *engines)

/* ---- Measurements ----------------------------------------------------------- */

enum { OP_A, OP_B, OP_C, OP_D, OP_E, OP_F, OP_I, OP_J, OP_K, N_OPS };
static const char *const op_letter[N_OPS] = {"A", "B", "C", "D", "E", "F", "I", "J", "K"};
static const char *const op_name[N_OPS] = {
    "Insert: Single", "Insert: Batch", "Insert: Bulk",   "Filter: Large",  "Filter: Small",
    "Get",            "Update: Whole", "Update: Partial", "Delete"};
/* the target of issue 3: >= 3x SQLite on batch insert, get and filters */
static const int op_target[N_OPS] = {0, 1, 1, 1, 1, 1, 0, 0, 0};
#define TARGET 3.0

static int reps = 5, large;

typedef struct result {
    double rows[N_OPS][MAX_REPS];
    double secs[N_OPS][MAX_REPS];
    double commit_us[MAX_REPS * N]; /* A: every commit */
} result;

static result results[N_ENGINES];

typedef struct store {
    void *h;
    char dir[4200];
    uint64_t *ids; /* ids of the model's rows, loaded untimed */
} store;

static void record(int ei, int op, int rep, double rows, uint64_t t0)
{
    results[ei].rows[op][rep] = rows;
    results[ei].secs[op][rep] = (double)(bench_now_ns() - t0) / 1e9;
}

/* Compare an engine's rows with the model; keep its ids. */
static void verify(int ei, store *s, const char *when)
{
    const engine *e = &engines[ei];
    uint64_t *ids;
    obj *rows;
    size_t n = e->load(s->h, &ids, &rows);
    if (n != nmodel)
        bench_die("%s: %zu rows %s, expected %zu", e->name, n, when, nmodel);
    for (size_t i = 0; i < n; i++) {
        const obj *a = &rows[i], *b = &model[i];
        if (a->ts != b->ts || a->level != b->level || a->len != b->len ||
            memcmp(a->text, b->text, a->len) != 0)
            bench_die("%s: row %zu (id %llu) %s differs from what was written", e->name, i,
                (unsigned long long)ids[i], when);
    }
    free(s->ids);
    free(rows);
    s->ids = ids;
}

/* Untimed: delete the newest rows beyond the model's first `keep`, durably. */
static void trim(int ei, store *s, size_t keep)
{
    const engine *e = &engines[ei];
    uint64_t *ids;
    obj *rows;
    size_t n = e->load(s->h, &ids, &rows);
    e->begin(s->h, 1);
    for (size_t i = keep; i < n; i++)
        e->remove(s->h, ids[i]);
    e->commit(s->h);
    free(ids);
    free(rows);
}

static void check_sum(int ei, const char *op, const acc *a, const acc *want)
{
    if (a->rows != want->rows || a->sum != want->sum)
        bench_die("%s: %s read %llu rows (expected %llu) or wrong values", engines[ei].name, op,
            (unsigned long long)a->rows, (unsigned long long)want->rows);
}

/* A: durable single inserts, engines taking turns in runs of SINGLE_RUN. */
static void run_single(store *st, const batch *b, int rep)
{
    double total[N_ENGINES] = {0};
    for (int first = 0; first < N; first += SINGLE_RUN) {
        for (int k = 0; k < N_ENGINES; k++) {
            int ei = (first / SINGLE_RUN + k + rep) % N_ENGINES;
            const engine *e = &engines[ei];
            for (int i = first; i < first + SINGLE_RUN; i++) {
                uint64_t t0 = bench_now_ns();
                e->begin(st[ei].h, 1);
                e->insert(st[ei].h, b, (size_t)i);
                e->commit(st[ei].h);
                double us = (double)(bench_now_ns() - t0) / 1e3;
                results[ei].commit_us[rep * N + i] = us;
                total[ei] += us;
            }
        }
    }
    for (int ei = 0; ei < N_ENGINES; ei++) {
        results[ei].rows[OP_A][rep] = N;
        results[ei].secs[OP_A][rep] = total[ei] / 1e6;
    }
}

static void run_rep(int rep, batch *bA, batch *bB, batch *bC)
{
    store st[N_ENGINES];
    memset(st, 0, sizeof st);
    for (int ei = 0; ei < N_ENGINES; ei++) {
        bench_mkdir(st[ei].dir, sizeof st[ei].dir, "%s-%d", engines[ei].name, rep);
        st[ei].h = engines[ei].open(&engines[ei], st[ei].dir);
    }
    nmodel = 0;

    /* In each op the engines take turns, the first one rotating. */
#define EACH_ENGINE(op)                                                                   \
    for (int k_ = 0, ei; k_ < N_ENGINES && (ei = (k_ + rep + (op)) % N_ENGINES, 1); k_++)

    fprintf(stderr, "rep %d/%d: A", rep + 1, reps);
    run_single(st, bA, rep);
    model_add(bA, N);

    fprintf(stderr, " B");
    EACH_ENGINE(OP_B) {
        const engine *e = &engines[ei];
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 1);
        for (size_t i = 0; i < bB->n; i++)
            e->insert(st[ei].h, bB, i);
        e->commit(st[ei].h);
        record(ei, OP_B, rep, (double)bB->n, t0);
        if (!large)
            trim(ei, &st[ei], nmodel + KEEP);
    }
    model_add(bB, large ? bB->n : KEEP);

    fprintf(stderr, " C");
    EACH_ENGINE(OP_C) {
        const engine *e = &engines[ei];
        uint64_t t0 = bench_now_ns();
        e->bulk(st[ei].h, bC);
        record(ei, OP_C, rep, (double)bC->n, t0);
        if (!large)
            trim(ei, &st[ei], nmodel + KEEP);
    }
    model_add(bC, large ? bC->n : KEEP);
    for (int ei = 0; ei < N_ENGINES; ei++)
        verify(ei, &st[ei], "after the inserts");

    /* The queries and new values of this repetition, and what reads must see. */
    size_t count[N_LEVELS] = {0};
    acc want_d = {0}, want_e = {0}, want_f = {0};
    for (size_t i = 0; i < nmodel; i++)
        for (int l = 0; l < N_LEVELS; l++)
            if (model[i].level == levels[l]) {
                count[l]++;
                want_d.rows += D_ROUNDS;
                want_d.sum += D_ROUNDS * obj_sum(&model[i]);
            }
    uint64_t e_off[E_QUERIES];
    for (int q = 0; q < E_QUERIES; q++) {
        int l = q % N_LEVELS;
        size_t span = count[l] > E_LIMIT ? count[l] - E_LIMIT + 1 : 1;
        e_off[q] = bench_rng_next() % span;
        for (size_t i = 0, seen = 0; i < nmodel; i++) /* matches in id order */
            if (model[i].level == levels[l] && seen++ >= e_off[q] &&
                seen <= e_off[q] + E_LIMIT) {
                want_e.rows++;
                want_e.sum += obj_sum(&model[i]);
            }
    }
    size_t *f_pos = bench_xcalloc(nmodel, sizeof *f_pos); /* a random permutation's head */
    for (size_t i = 0; i < nmodel; i++)
        f_pos[i] = i;
    for (size_t i = 0; i < F_GETS && i < nmodel; i++) {
        size_t j = i + bench_rng_next() % (nmodel - i), t = f_pos[i];
        f_pos[i] = f_pos[j];
        f_pos[j] = t;
    }
    size_t nget = F_GETS < nmodel ? F_GETS : nmodel;
    for (size_t i = 0; i < nget; i++) {
        want_f.rows++;
        want_f.sum += obj_sum(&model[f_pos[i]]);
    }
    batch bI = {nmodel, bench_xcalloc(nmodel, sizeof(obj)), NULL};
    int *j_level = bench_xcalloc(nmodel, sizeof *j_level);
    for (size_t i = 0; i < nmodel; i++) {
        bI.o[i] = model[i];
        bI.o[i].level = levels[bench_rng_next() % N_LEVELS];
        if (bI.o[i].len + 7 >= TEXT_CAP)
            bench_die("text too long to update");
        memcpy(bI.o[i].text + bI.o[i].len, " Update", 8);
        bI.o[i].len += 7;
        j_level[i] = levels[bench_rng_next() % N_LEVELS];
    }
    batch_values(&bI);

    fprintf(stderr, " D");
    EACH_ENGINE(OP_D) {
        const engine *e = &engines[ei];
        acc a = {0};
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 0);
        for (int r = 0; r < D_ROUNDS; r++)
            for (int l = 0; l < N_LEVELS; l++)
                e->filter(st[ei].h, levels[l], 0, 0, &a);
        e->commit(st[ei].h);
        record(ei, OP_D, rep, (double)a.rows, t0);
        check_sum(ei, "D", &a, &want_d);
    }

    fprintf(stderr, " E");
    EACH_ENGINE(OP_E) {
        const engine *e = &engines[ei];
        acc a = {0};
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 0);
        for (int q = 0; q < E_QUERIES; q++)
            e->filter(st[ei].h, levels[q % N_LEVELS], e_off[q], E_LIMIT, &a);
        e->commit(st[ei].h);
        record(ei, OP_E, rep, (double)a.rows, t0);
        check_sum(ei, "E", &a, &want_e);
    }

    fprintf(stderr, " F");
    EACH_ENGINE(OP_F) {
        const engine *e = &engines[ei];
        const uint64_t *ids = st[ei].ids;
        acc a = {0};
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 0);
        for (size_t i = 0; i < nget; i++)
            e->get(st[ei].h, ids[f_pos[i]], &a);
        e->commit(st[ei].h);
        record(ei, OP_F, rep, (double)a.rows, t0);
        check_sum(ei, "F", &a, &want_f);
    }

    fprintf(stderr, " I");
    EACH_ENGINE(OP_I) {
        const engine *e = &engines[ei];
        const uint64_t *ids = st[ei].ids;
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 1);
        for (size_t i = 0; i < nmodel; i++)
            e->update(st[ei].h, ids[i], &bI, i);
        e->commit(st[ei].h);
        record(ei, OP_I, rep, (double)nmodel, t0);
    }
    memcpy(model, bI.o, nmodel * sizeof *model);

    fprintf(stderr, " J");
    EACH_ENGINE(OP_J) {
        const engine *e = &engines[ei];
        const uint64_t *ids = st[ei].ids;
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 1);
        for (size_t i = 0; i < nmodel; i++)
            e->set_level(st[ei].h, ids[i], j_level[i]);
        e->commit(st[ei].h);
        record(ei, OP_J, rep, (double)nmodel, t0);
    }
    for (size_t i = 0; i < nmodel; i++)
        model[i].level = j_level[i];
    for (int ei = 0; ei < N_ENGINES; ei++)
        verify(ei, &st[ei], "after the updates");

    fprintf(stderr, " K\n");
    EACH_ENGINE(OP_K) {
        const engine *e = &engines[ei];
        const uint64_t *ids = st[ei].ids;
        uint64_t t0 = bench_now_ns();
        e->begin(st[ei].h, 1);
        for (size_t i = 0; i < nmodel; i++)
            e->remove(st[ei].h, ids[i]);
        e->commit(st[ei].h);
        record(ei, OP_K, rep, (double)nmodel, t0);
    }
    size_t rows_dk = nmodel;
    nmodel = 0;
    for (int ei = 0; ei < N_ENGINES; ei++) {
        verify(ei, &st[ei], "after the delete");
        engines[ei].close(st[ei].h);
        bench_rm_tree(st[ei].dir);
        free(st[ei].ids);
    }
    nmodel = rows_dk; /* for the report */
    free(f_pos);
    free(j_level);
    free_batch(&bI);
#undef EACH_ENGINE
}

/* ---- Report --------------------------------------------------------------- */

static double rate[N_ENGINES][N_OPS]; /* median rows/s */
static double geomean[N_ENGINES];

static void summarize(void)
{
    for (int e = 0; e < N_ENGINES; e++) {
        double logs = 0;
        for (int op = 0; op < N_OPS; op++) {
            double r[MAX_REPS];
            for (int i = 0; i < reps; i++)
                r[i] = results[e].rows[op][i] / results[e].secs[op][i];
            rate[e][op] = bench_median(r, reps);
            logs += log(rate[e][op]);
        }
        geomean[e] = exp(logs / N_OPS);
    }
}

/* Columns: op, one per engine, MoteDB/peer per peer, target. */
#define COLS (1 + N_ENGINES + (N_ENGINES - 1) + 1)
#define ROWS (1 + N_OPS + 1)
#define CELL 80
static char cell[ROWS][COLS][CELL];

static void fill_row(char (*row)[CELL], const double *v, const char *target)
{
    for (int e = 0; e < N_ENGINES; e++)
        bench_fmt_num(row[1 + e], CELL, v[e]);
    for (int e = 1; e < N_ENGINES; e++)
        snprintf(row[N_ENGINES + e], CELL, "%.2fx", v[0] / v[e]);
    snprintf(row[COLS - 1], CELL, "%s", target);
}

static void print_table(void)
{
    snprintf(cell[0][0], CELL, "op (rows/s)");
    for (int e = 0; e < N_ENGINES; e++)
        snprintf(cell[0][1 + e], CELL, "%s", engines[e].name);
    for (int e = 1; e < N_ENGINES; e++)
        snprintf(cell[0][N_ENGINES + e], CELL, "MoteDB/%s", engines[e].name);
    snprintf(cell[0][COLS - 1], CELL, "target: ≥ %.0fx SQLite", TARGET);
    for (int op = 0; op < N_OPS; op++) {
        double v[N_ENGINES];
        char target[CELL] = "";
        for (int e = 0; e < N_ENGINES; e++)
            v[e] = rate[e][op];
        if (op_target[op]) {
            double best = 0;
            for (int e = 1; e < N_ENGINES; e++)
                best = v[e] > best ? v[e] : best;
            snprintf(target, sizeof target, "%.2fx: %s", v[0] / best,
                     v[0] / best >= TARGET ? "met" : "MISSED");
        }
        snprintf(cell[1 + op][0], CELL, "%s %s", op_letter[op], op_name[op]);
        fill_row(cell[1 + op], v, target);
    }
    snprintf(cell[ROWS - 1][0], CELL, "geometric mean (A–F, I–K)");
    fill_row(cell[ROWS - 1], geomean, "");

    bench_print_cells(&cell[0][0][0], ROWS, COLS, CELL, 1);
}

static void print_report(void)
{
    bench_print_header("bench/engine objects (Test 1 model)");
    printf("- versions: MoteDB %s, SQLite %s (synchronous=FULL)\n", MOTE_VERSION_STRING,
           sqlite3_libversion());
    printf("- N = %d, BATCH = %d; D–K on %zu rows%s; medians of %d repetitions, fresh "
           "stores each\n",
           N, BATCH, nmodel, large ? " (--large)" : " (newest 9,900 deleted after B and C)",
           reps);
    if (sqlite_bulk_rows > 1)
        printf("- C for SQLite: a prepared %d-row INSERT ... VALUES (?,?,?),... in one "
               "transaction; MoteDB: mote_put_many\n",
               sqlite_bulk_rows);
    else
        printf("- C for SQLite: the single-row INSERT, as in B; MoteDB: mote_put_many\n");
    printf("\n");
    print_table();
    printf("\nRatios are speeds: above 1.00x MoteDB is faster. The target column compares "
           "MoteDB with the faster SQLite mode.\n");
    printf("A per durable commit (all %d x %d; the sum above is swayed by the disk's slow "
           "spells):", reps, N);
    for (int e = 0; e < N_ENGINES; e++)
        printf("%s %s %.0f µs median, %.0f µs p99", e ? ";" : "", engines[e].name,
               quantile(results[e].commit_us, reps * N, 0.5),
               quantile(results[e].commit_us, reps * N, 0.99));
    printf(".\n");
}

static void write_json(const char *path)
{
    FILE *f = bench_json_open(path);
    fprintf(f, "  \"versions\": {\"motedb\": \"%s\", \"sqlite\": \"%s\"},\n",
            MOTE_VERSION_STRING, sqlite3_libversion());
    fprintf(f, "  \"n\": %d, \"batch\": %d, \"rows_d_to_k\": %zu, \"large\": %s, "
               "\"sqlite_bulk_rows\": %d, \"reps\": %d,\n",
            N, BATCH, nmodel, large ? "true" : "false", sqlite_bulk_rows, reps);
    fprintf(f, "  \"engines\": {\n");
    for (int e = 0; e < N_ENGINES; e++) {
        const result *r = &results[e];
        fprintf(f, "    \"%s\": {\n      \"geomean_rows_per_s\": %.1f,\n", engines[e].name,
                geomean[e]);
        for (int op = 0; op < N_OPS; op++) {
            fprintf(f, "      \"%s\": {\"name\": \"%s\", \"median_rows_per_s\": %.1f, "
                       "\"rows\": [", op_letter[op], op_name[op], rate[e][op]);
            for (int i = 0; i < reps; i++)
                fprintf(f, "%s%.0f", i ? ", " : "", r->rows[op][i]);
            fprintf(f, "], \"seconds\": [");
            for (int i = 0; i < reps; i++)
                fprintf(f, "%s%.9f", i ? ", " : "", r->secs[op][i]);
            fprintf(f, "]},\n");
        }
        fprintf(f, "      \"A_commit_median_us\": %.3f, \"A_commit_p99_us\": %.3f,\n",
                quantile(r->commit_us, reps * N, 0.5), quantile(r->commit_us, reps * N, 0.99));
        fprintf(f, "      \"A_commit_us\": [");
        for (int i = 0; i < reps * N; i++)
            fprintf(f, "%s%.3f", i ? ", " : "", r->commit_us[i]);
        fprintf(f, "]\n    }%s\n", e + 1 < N_ENGINES ? "," : "");
    }
    bench_json_close(f, path);
}

/* ---- Main ----------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench-objects [--dir DIR] [--reps R] [--json FILE] [--large] "
                    "[--sqlite-bulk-rows K]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *base = "/var/tmp", *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (bench_common_opt(argc, argv, &i, &base, &json, &reps))
            continue;
        if (strcmp(argv[i], "--large") == 0)
            large = 1;
        else if (strcmp(argv[i], "--sqlite-bulk-rows") == 0 && i + 1 < argc)
            sqlite_bulk_rows = atoi(argv[++i]);
        else
            usage();
    }
    if (reps < 1 || reps > MAX_REPS)
        bench_die("--reps must be 1..%d", MAX_REPS);
    if (sqlite_bulk_rows < 1 || sqlite_bulk_rows > MAX_BULK_ROWS)
        bench_die("--sqlite-bulk-rows must be 1..%d", MAX_BULK_ROWS);

    bench_start(base);

    batch bA = make_batch('A', N), bB = make_batch('B', BATCH), bC = make_batch('C', BATCH);
    for (int rep = 0; rep < reps; rep++)
        run_rep(rep, &bA, &bB, &bC);
    bench_rm_tree(bench_work_dir);

    summarize();
    print_report();
    if (json)
        write_json(json);
    free_batch(&bA);
    free_batch(&bB);
    free_batch(&bC);
    free(model);
    return 0;
}
