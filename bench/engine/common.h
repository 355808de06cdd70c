/*
 * common.h — helpers shared by bench-engine and bench-objects: errors and
 * memory, clock and fixed-seed random numbers, sample statistics, the work
 * directory, the description of the machine, Markdown tables and JSON, and
 * the parts of the MoteDB and SQLite engine wrappers both programs use.
 * Everything here is fatal on error (bench_die): a benchmark that silently
 * skips work measures nothing.
 */
#ifndef BENCH_ENGINE_COMMON_H
#define BENCH_ENGINE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "mote.h"

/* ---- Errors, memory, time, random numbers -------------------------------- */

/* The program's name, the prefix of every error ("bench-engine"); each
 * program defines it. */
extern const char bench_prog[];

/* A fresh directory under --dir (see bench_start), removed at exit; empty
 * until it exists. */
extern char bench_work_dir[4096];

/* Print "<bench_prog>: <message>" to stderr, remove bench_work_dir (best
 * effort: stores may still be open) and exit(1). */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* calloc that dies when out of memory (n = 0 allocates one element). */
void *bench_xcalloc(size_t n, size_t size);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* splitmix64 with a fixed seed: the same data on every run. */
uint64_t bench_rng_next(void);

/* ---- Statistics ----------------------------------------------------------- */

/* qsort comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* A sorted copy of n samples (the caller frees it). */
double *bench_sorted(const double *v, int n);

/* The median of n > 0 samples (the mean of the middle two when n is even). */
double bench_median(const double *v, int n);

/* ---- Command line ----------------------------------------------------------- */

/* If argv[*i] is an option both programs take (--dir DIR, --json FILE or
 * --reps R, each with its value present), store its value, step *i over
 * the value and return 1; otherwise return 0. */
int bench_common_opt(int argc, char **argv, int *i, const char **dir, const char **json,
                     int *reps);

/* ---- Directories and the environment ------------------------------------- */

/* Remove a file or a directory tree; dies on failure (a missing path is fine). */
void bench_rm_tree(const char *path);

/* Describe the machine (bench_env_*) and refuse a `base` on tmpfs or ramfs,
 * then make bench_work_dir, "<base>/<bench_prog>-XXXXXX". */
void bench_start(const char *base);

/* Make the directory "<bench_work_dir>/<name>" (printf-style; spaces in the
 * name become '_'), writing its path to dir (n bytes). */
void bench_mkdir(char *dir, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Set by bench_start: the CPU model, "<sysname> <release>", and the file
 * system of `base` ("ext4 on vda, journaled", "xfs", or its magic number). */
extern char bench_env_cpu[256], bench_env_kernel[256], bench_env_fs[64];

/* ---- Report ---------------------------------------------------------------- */

/* Print "## <title> — <UTC time>" and the machine and directory lines. */
void bench_print_header(const char *title);

/* A number with 3 significant digits below 100 and thousands separators above. */
void bench_fmt_num(char *out, size_t n, double v);

/* Columns of a terminal: UTF-8 characters (non-continuation bytes). */
int bench_display_width(const char *s);

/*
 * Print a Markdown table of rows x cols cells, each a string in a char array
 * of `cell` bytes, row-major from `cells` (a char [rows][cols][cell] array).
 * Row 0 is the header. Every column is padded to its widest cell; the first
 * `left_cols` columns and the last one are left-aligned, the others (numbers)
 * right-aligned.
 */
void bench_print_cells(const char *cells, int rows, int cols, size_t cell, int left_cols);

/* Open a JSON report and write its opening brace and "machine" line. */
FILE *bench_json_open(const char *path);

/* Close the last open object and the top-level one, and the file. */
void bench_json_close(FILE *f, const char *path);

/* ---- MoteDB ------------------------------------------------------------- */

/* The part of a MoteDB engine handle both programs share; it must be the
 * first member of the handle (the engine callbacks get void *). */
typedef struct bench_mt {
    mote_store *store;
    mote_txn *txn; /* the open transaction, if any */
} bench_mt;

/* Die unless `call` returns MOTE_OK; m is a bench_mt *. */
#define BENCH_MT_CHECK(m, call)                                                  \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != MOTE_OK)                                                      \
            bench_die("MoteDB: %s: %s (%s)", #call, mote_strerror(rc_),          \
                      mote_errmsg((m)->store));                                  \
    } while (0)

/* Create "<dir>/store.mote" (cache_pages 0: the library's default; flags:
 * MOTE_* open flags besides MOTE_CREATE, e.g. MOTE_NOSYNC). */
void bench_mt_open(bench_mt *m, const char *dir, unsigned cache_pages, unsigned flags);

/* Close the store (not the handle's own memory). */
void bench_mt_close(bench_mt *m);

/* Engine callbacks; h points to a handle whose first member is a bench_mt. */
void bench_mt_begin(void *h, int write); /* read-only unless write */
void bench_mt_commit(void *h);           /* durable for a write transaction */

/* ---- SQLite --------------------------------------------------------------- */

/* The part of a SQLite engine handle both programs share; it must be the
 * first member of the handle (the engine callbacks get void *). */
typedef struct bench_sq {
    sqlite3 *db;
    sqlite3_stmt *begin, *commit;
} bench_sq;

/* Die with "SQLite: <what>: <the connection's error message>". */
_Noreturn void bench_sq_fail(bench_sq *s, const char *what);

/* Run SQL without results (sqlite3_exec). */
void bench_sq_exec(bench_sq *s, const char *sql);

/* Prepare one statement. */
sqlite3_stmt *bench_sq_prepare(bench_sq *s, const char *sql);

/* Run a statement that returns no rows, and reset it for reuse. */
void bench_sq_run(bench_sq *s, sqlite3_stmt *st);

/* Create "<dir>/store.db" with journal_mode=WAL (wal) or DELETE and
 * synchronous=FULL, and prepare BEGIN and COMMIT. */
void bench_sq_open(bench_sq *s, const char *dir, int wal);

/* Finalize BEGIN and COMMIT and close the connection (finalize the
 * program's own statements first). */
void bench_sq_close(bench_sq *s);

/* Engine callbacks; h points to a handle whose first member is a bench_sq.
 * BEGIN is deferred: the first read or write takes the lock. */
void bench_sq_begin(void *h, int write);
void bench_sq_commit(void *h);

#endif
