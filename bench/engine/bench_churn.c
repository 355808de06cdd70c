/*
 * bench_churn.c — durable single-put commits into a store that is already
 * full: what a long-lived store pays per commit once its free space is the
 * holes earlier commits left (the page placement of pager.c's place_pages).
 * MoteDB only: run it on two builds to compare them.
 *
 * Each repetition: a fresh store, one transaction of --keys objects into
 * three trees (like an entity with two indexes: "obj" 8-byte id -> 60 bytes,
 * "lvl" level byte + id, "txt" a random text), then --commits durable write
 * transactions of one object each (its three entries); every begin..commit
 * is timed alone. Reports the median and p99 per commit over all
 * repetitions, and the store's pages (in use, free) after the last one.
 *
 * Usage: bench-churn [--dir DIR] [--reps R] [--keys N] [--commits C] [--nosync]
 *   --dir      where the stores go (default /var/tmp; tmpfs is refused)
 *   --reps     repetitions (default 3)
 *   --keys     objects put before the timed commits (default 10,000)
 *   --commits  timed commits per repetition (default 600)
 *   --nosync   MOTE_NOSYNC: the CPU part of a commit alone
 * Example, the figures of ARCHITECTURE.md "Free pages and snapshots":
 *   ./build-bench/bench/engine/bench-churn --dir .bench-tmp --keys 10000
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

const char bench_prog[] = "bench-churn";

#define MAX_REPS 20

static int reps = 3, keys = 10000, commits = 600, nosync;

static void usage(void)
{
    fprintf(stderr, "usage: bench-churn [--dir DIR] [--reps R] [--keys N] [--commits C] "
                    "[--nosync]\n");
    exit(2);
}

/* The three entries of object `id`. */
static void put_object(bench_mt *m, const uint32_t *tree, uint64_t id)
{
    uint8_t k[32], v[60];
    memset(v, 'v', sizeof v);
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(id >> (56 - 8 * i));
    BENCH_MT_CHECK(m, mote_kv_put(m->txn, tree[0], k, 8, v, sizeof v, 0));
    k[8] = (uint8_t)(id % 5);
    memcpy(k + 9, k, 8);
    BENCH_MT_CHECK(m, mote_kv_put(m->txn, tree[1], k + 8, 9, NULL, 0, 0));
    int n = snprintf((char *)k, sizeof k, "text %llu",
                     (unsigned long long)(bench_rng_next() % 1000000));
    BENCH_MT_CHECK(m, mote_kv_put(m->txn, tree[2], k, (size_t)n, NULL, 0, 0));
}

int main(int argc, char **argv)
{
    const char *base = "/var/tmp", *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (bench_common_opt(argc, argv, &i, &base, &json, &reps))
            continue;
        if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
            keys = atoi(argv[++i]);
        else if (strcmp(argv[i], "--commits") == 0 && i + 1 < argc)
            commits = atoi(argv[++i]);
        else if (strcmp(argv[i], "--nosync") == 0)
            nosync = 1;
        else
            usage();
    }
    if (json)
        bench_die("--json is not supported");
    if (reps < 1 || reps > MAX_REPS || keys < 0 || commits < 1)
        bench_die("--reps must be 1..%d, --keys >= 0, --commits >= 1", MAX_REPS);
    bench_start(base);

    double *us = bench_xcalloc((size_t)reps * (size_t)commits, sizeof *us);
    mote_stat st = {0};
    static const char *names[3] = {"obj", "lvl", "txt"};
    for (int rep = 0; rep < reps; rep++) {
        fprintf(stderr, "repetition %d/%d ...\n", rep + 1, reps);
        char dir[4200];
        bench_mkdir(dir, sizeof dir, "churn-%d", rep);
        bench_mt m = {0};
        bench_mt_open(&m, dir, 0, nosync ? MOTE_NOSYNC : 0);
        uint32_t tree[3];
        bench_mt_begin(&m, 1);
        for (int t = 0; t < 3; t++)
            BENCH_MT_CHECK(&m, mote_kv_tree(m.txn, names[t], MOTE_TREE_CREATE, &tree[t]));
        uint64_t id = 0;
        while (id < (uint64_t)keys)
            put_object(&m, tree, ++id);
        bench_mt_commit(&m);
        for (int c = 0; c < commits; c++) {
            uint64_t t0 = bench_now_ns();
            bench_mt_begin(&m, 1);
            put_object(&m, tree, ++id);
            bench_mt_commit(&m);
            us[rep * commits + c] = (double)(bench_now_ns() - t0) / 1e3;
        }
        BENCH_MT_CHECK(&m, mote_store_stat(m.store, &st));
        bench_mt_close(&m);
        bench_rm_tree(dir);
    }
    bench_rm_tree(bench_work_dir);

    int n = reps * commits;
    double *s = bench_sorted(us, n);
    bench_print_header("bench/engine churn");
    printf("- %d repetitions: %d objects in three trees, then %d %s single-put commits\n\n",
           reps, keys, commits, nosync ? "unsynced (MOTE_NOSYNC)" : "durable");
    printf("| µs per commit (median) | p99 | pages after the last | of them free | file bytes |\n");
    printf("|--:|--:|--:|--:|--:|\n");
    printf("| %.1f | %.1f | %llu | %llu | %llu |\n", bench_median(us, n),
           s[(99 * n + 99) / 100 - 1], (unsigned long long)st.pages,
           (unsigned long long)st.pages_free, (unsigned long long)st.file_bytes);
    free(s);
    free(us);
    return 0;
}
