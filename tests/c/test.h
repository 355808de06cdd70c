/*
 * test.h — the C test harness. Each test is a function TEST(name) listed in
 * list.h; the runner (runner.c) runs each in a child process with a timeout,
 * so a crash or hang fails that test alone. Closing line: "N passed, N failed".
 * MOTE_TEST_SCALE=k multiplies randomized workloads (default 1 = CI size).
 */
#ifndef MOTE_TEST_H
#define MOTE_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mote.h"

#define TEST(name) void test_##name(void)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Check a MoteDB result code, printing the message on mismatch. */
#define CHECK_RC(expr, want)                                                   \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != (want)) {                                                   \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d: %s\n",   \
                    __FILE__, __LINE__, #expr, rc_, mote_strerror(rc_),        \
                    (want), mote_errmsg(NULL));                                \
            abort();                                                           \
        }                                                                      \
    } while (0)
#define OK(expr) CHECK_RC(expr, MOTE_OK)

/* A fresh path in the test's private temporary directory. */
const char *test_path(const char *name);
/* Workload multiplier from MOTE_TEST_SCALE. */
int test_scale(void);
/* Deterministic PRNG (xorshift64*). */
uint64_t test_rand(uint64_t *state);

/* Open a store and its tree "t" in one go (create if missing). */
mote_store *test_open(const char *path, const mote_options *o);
/* Entries of tree `name` of s, in a read transaction of their own. */
uint64_t test_count(mote_store *s, const char *name);

#endif
