/*
 * common.c — the helpers bench-engine and bench-objects share (common.h):
 * errors, clock, random numbers, statistics, the work directory, the
 * machine's description, the Markdown table and the MoteDB and SQLite
 * wrapper parts.
 */
#include "common.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ---- Errors, memory, time, random numbers -------------------------------- */

char bench_work_dir[4096];

void bench_die(const char *fmt, ...)
{
    static int dying;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", bench_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (!dying++ && bench_work_dir[0])
        bench_rm_tree(bench_work_dir); /* best effort: stores may still be open */
    exit(1);
}

void *bench_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        bench_die("out of memory");
    return p;
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

uint64_t bench_rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* ---- Statistics ----------------------------------------------------------- */

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double *bench_sorted(const double *v, int n)
{
    double *s = bench_xcalloc((size_t)n, sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return s;
}

double bench_median(const double *v, int n)
{
    double *s = bench_sorted(v, n);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* ---- Command line ----------------------------------------------------------- */

int bench_common_opt(int argc, char **argv, int *i, const char **dir, const char **json,
                     int *reps)
{
    if (*i + 1 >= argc)
        return 0;
    if (strcmp(argv[*i], "--dir") == 0)
        *dir = argv[++*i];
    else if (strcmp(argv[*i], "--json") == 0)
        *json = argv[++*i];
    else if (strcmp(argv[*i], "--reps") == 0)
        *reps = atoi(argv[++*i]);
    else
        return 0;
    return 1;
}

/* ---- Directories and the environment ------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void bench_rm_tree(const char *path)
{
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        bench_die("cannot remove %s: %s", path, strerror(errno));
}

void bench_mkdir(char *dir, size_t n, const char *fmt, ...)
{
    size_t base = strlen(bench_work_dir) + 1;
    va_list ap;
    snprintf(dir, n, "%s/", bench_work_dir);
    va_start(ap, fmt);
    vsnprintf(dir + base, n > base ? n - base : 0, fmt, ap);
    va_end(ap);
    for (char *p = dir + base; *p; p++)
        if (*p == ' ')
            *p = '_';
    if (mkdir(dir, 0755) != 0)
        bench_die("mkdir %s: %s", dir, strerror(errno));
}

char bench_env_cpu[256] = "unknown", bench_env_kernel[256] = "unknown", bench_env_fs[64];

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
    snprintf(bench_env_fs, sizeof bench_env_fs, "ext4 on %.24s, %s", dev,
             access(jbd2, F_OK) == 0 ? "journaled" : "no journal");
}

static void read_env(const char *dir)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(bench_env_cpu, sizeof bench_env_cpu, "%s", colon + 2);
            bench_env_cpu[strcspn(bench_env_cpu, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(bench_env_kernel, sizeof bench_env_kernel, "%s %s", u.sysname, u.release);

    static const struct {
        unsigned long magic;
        const char *name;
    } fs[] = {{0xEF53, "ext4"},          {0x58465342, "xfs"},  {0x9123683E, "btrfs"},
              {0x794C7630, "overlayfs"}, {0x2FC12FC1, "zfs"},  {0xF2F52010, "f2fs"},
              {0x6969, "nfs"},           {0x01021994, "tmpfs"}, {0x858458F6, "ramfs"}};
    struct statfs sf;
    if (statfs(dir, &sf) != 0)
        bench_die("statfs %s: %s", dir, strerror(errno));
    snprintf(bench_env_fs, sizeof bench_env_fs, "0x%lx", (unsigned long)sf.f_type);
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if ((unsigned long)sf.f_type == fs[i].magic)
            snprintf(bench_env_fs, sizeof bench_env_fs, "%s", fs[i].name);
    if (strcmp(bench_env_fs, "ext4") == 0)
        describe_ext4(dir);
    if (strcmp(bench_env_fs, "tmpfs") == 0 || strcmp(bench_env_fs, "ramfs") == 0)
        bench_die("%s is on %s: fdatasync costs nothing there; use a directory on disk", dir,
                  bench_env_fs);
}

void bench_start(const char *base)
{
    read_env(base);
    snprintf(bench_work_dir, sizeof bench_work_dir, "%s/%s-XXXXXX", base, bench_prog);
    if (!mkdtemp(bench_work_dir))
        bench_die("mkdtemp %s: %s", bench_work_dir, strerror(errno));
}

/* ---- Report ---------------------------------------------------------------- */

void bench_print_header(const char *title)
{
    char when[64];
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    printf("## %s — %s\n\n", title, when);
    printf("- machine: %s, %ld CPUs, %s\n", bench_env_cpu, sysconf(_SC_NPROCESSORS_ONLN),
           bench_env_kernel);
    printf("- directory: %s (%s)\n", bench_work_dir, bench_env_fs);
}

void bench_fmt_num(char *out, size_t n, double v)
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

int bench_display_width(const char *s)
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        w += (*p & 0xC0) != 0x80;
    return w;
}

void bench_print_cells(const char *cells, int rows, int cols, size_t cell, int left_cols)
{
#define CELL_AT(r, c) (cells + ((size_t)(r) * (size_t)cols + (size_t)(c)) * cell)
    int *width = bench_xcalloc((size_t)cols, sizeof *width);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            if (bench_display_width(CELL_AT(r, c)) > width[c])
                width[c] = bench_display_width(CELL_AT(r, c));
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            int pad = width[c] - bench_display_width(CELL_AT(r, c));
            int right = c >= left_cols && c < cols - 1;
            printf("| %*s%s%*s ", right ? pad : 0, "", CELL_AT(r, c), right ? 0 : pad, "");
        }
        printf("|\n");
        for (int c = 0; r == 0 && c < cols; c++) {
            int right = c >= left_cols && c < cols - 1;
            printf("|%c", right ? '-' : ':');
            for (int i = 0; i < width[c]; i++)
                putchar('-');
            printf("%c%s", right ? ':' : '-', c == cols - 1 ? "|\n" : "");
        }
    }
    free(width);
#undef CELL_AT
}

FILE *bench_json_open(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"machine\": {\"cpu\": \"%s\", \"cpus\": %ld, \"kernel\": \"%s\", "
               "\"fs\": \"%s\"},\n",
            bench_env_cpu, sysconf(_SC_NPROCESSORS_ONLN), bench_env_kernel, bench_env_fs);
    return f;
}

void bench_json_close(FILE *f, const char *path)
{
    fprintf(f, "  }\n}\n");
    if (fclose(f) != 0)
        bench_die("cannot write %s: %s", path, strerror(errno));
}

/* ---- MoteDB ------------------------------------------------------------- */

void bench_mt_open(bench_mt *m, const char *dir, unsigned cache_pages, unsigned flags)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/store.mote", dir);
    mote_options opts = {.flags = MOTE_CREATE | flags, .cache_pages = cache_pages};
    if (mote_open(path, &opts, &m->store) != MOTE_OK)
        bench_die("MoteDB: open %s: %s", path, mote_last_open_error());
}

void bench_mt_close(bench_mt *m)
{
    BENCH_MT_CHECK(m, mote_close(m->store));
}

void bench_mt_begin(void *h, int write)
{
    bench_mt *m = h;
    BENCH_MT_CHECK(m, mote_begin(m->store, write ? 0 : MOTE_TXN_RDONLY, &m->txn));
}

void bench_mt_commit(void *h)
{
    bench_mt *m = h;
    BENCH_MT_CHECK(m, mote_commit(m->txn));
    m->txn = NULL;
}

/* ---- SQLite --------------------------------------------------------------- */

void bench_sq_fail(bench_sq *s, const char *what)
{
    bench_die("SQLite: %s: %s", what, sqlite3_errmsg(s->db));
}

void bench_sq_exec(bench_sq *s, const char *sql)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        bench_sq_fail(s, sql);
}

sqlite3_stmt *bench_sq_prepare(bench_sq *s, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        bench_sq_fail(s, sql);
    return st;
}

void bench_sq_run(bench_sq *s, sqlite3_stmt *st)
{
    if (sqlite3_step(st) != SQLITE_DONE)
        bench_sq_fail(s, sqlite3_sql(st));
    sqlite3_reset(st);
}

void bench_sq_open(bench_sq *s, const char *dir, int wal)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/store.db", dir);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        bench_sq_fail(s, "open");
    /* Before the first statement: processes opening one database at once
     * (bench-procs) meet each other's locks as early as the journal mode. */
    sqlite3_busy_timeout(s->db, 10000);
    bench_sq_exec(s, wal ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE");
    bench_sq_exec(s, "PRAGMA synchronous=FULL");
    s->begin = bench_sq_prepare(s, "BEGIN");
    s->commit = bench_sq_prepare(s, "COMMIT");
}

void bench_sq_close(bench_sq *s)
{
    sqlite3_finalize(s->begin);
    sqlite3_finalize(s->commit);
    if (sqlite3_close(s->db) != SQLITE_OK)
        bench_sq_fail(s, "close");
}

void bench_sq_begin(void *h, int write)
{
    (void)write; /* BEGIN is deferred: the first read or write takes the lock */
    bench_sq *s = h;
    bench_sq_run(s, s->begin);
}

void bench_sq_commit(void *h)
{
    bench_sq *s = h;
    bench_sq_run(s, s->commit);
}
