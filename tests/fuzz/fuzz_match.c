/*
 * fuzz_match.c — libFuzzer target for the full-text match language
 * (text.c: lexer, parser, units, operators, BM25): the input's first byte
 * chooses the implicit operator (bit 0: AND, MOTE_MATCH_ALL), the rest is a
 * match text run against one store made once: 400 texts over a small
 * vocabulary (plain, accented and CJK words, so that words, phrases and
 * prefixes match), written in 24 transactions with updates and removes (the
 * index in segments of two levels, some merged). Checked besides the
 * sanitizers: mote_match_check and mote_query_match agree on what is well
 * formed (MOTE_INVALID for the same texts); a well-formed text runs (or
 * runs out of memory), its results number at most k, best first with
 * equal scores by ascending id, each score finite and positive.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memio.h"
#include "mote.h"

static memio mem;
static mote_store *store;

static void fail(const char *why)
{
    fprintf(stderr, "fuzz_match: %s\n", why);
    abort();
}

static const mote_prop_def props[] = {
    {"body", MOTE_T_STRING, MOTE_P_FULLTEXT | MOTE_P_NULLABLE, 0, NULL, NULL, {0}, NULL},
};

/* The store, made at the first input. */
static void make_store(void)
{
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "épsilon", "zeta",
                                        "eta",   "theta", "中文", "iota", "kappa", "lambda"};
    memio_init(&mem);
    mote_options o = {MOTE_CREATE, 0, 0, &mem.io};
    if (mote_open("/f/m.mote", &o, &store))
        fail("cannot create the store");
    uint64_t rs = 7;
    for (int c = 0; c < 24; c++) {
        mote_txn *t;
        mote_entity *e;
        if (mote_begin(store, 0, &t) || mote_entity_open(t, "Doc", props, 1, &e))
            fail("cannot begin");
        for (int k = 0; k < (c ? 40 : 400); k++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t id = 1 + (rs >> 33) % 400;
            if (c && (rs >> 20) % 7 == 0) {
                mote_remove(t, e, id);
                continue;
            }
            char b[256];
            size_t n = 0;
            for (uint64_t w = 0; w < 2 + (rs >> 40) % 12; w++)
                n += (size_t)snprintf(b + n, sizeof b - n, "%s ",
                                      words[(rs >> (w % 50)) % (sizeof words / sizeof *words)]);
            mote_value v = {0};
            v.v.s.p = b;
            v.v.s.n = n;
            if (mote_put(t, e, c ? id : (uint64_t)k + 1, &v, MOTE_PUT_UPSERT, NULL))
                fail("cannot put");
        }
        if (mote_commit(t))
            fail("cannot commit");
    }
    if (mote_check(store, NULL, NULL))
        fail("the store does not check");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!store)
        make_store();
    if (!size)
        return 0;
    unsigned flags = data[0] & 1 ? MOTE_MATCH_ALL : 0;
    size_t len = size - 1;
    char *text = malloc(len + 1); /* exactly its size: ASan sees a read past it */
    if (!text)
        abort();
    memcpy(text, data + 1, len);
    int ok = mote_match_check(text, len, flags);
    mote_txn *t = NULL;
    mote_entity *e = NULL;
    mote_query *q = NULL;
    if (mote_begin(store, MOTE_TXN_RDONLY, &t) || mote_entity_open(t, "Doc", props, 1, &e) ||
        mote_query_new(e, &q))
        fail("cannot begin a query");
    const uint64_t k = 20;
    int rc = mote_query_match(q, 0, text, len, k, flags);
    if ((ok == MOTE_INVALID) != (rc == MOTE_INVALID))
        fail("mote_match_check and mote_query_match disagree on a text");
    if (!rc) {
        uint64_t *ids;
        double *sc;
        size_t n;
        rc = mote_query_scored(t, q, &ids, &sc, &n);
        if (rc && rc != MOTE_NOMEM)
            fail("a well-formed match failed");
        if (!rc) {
            if (n > k)
                fail("more results than asked for");
            for (size_t i = 0; i < n; i++) {
                if (!isfinite(sc[i]) || sc[i] <= 0)
                    fail("a score that is not finite and positive");
                if (i && (sc[i - 1] < sc[i] || (sc[i - 1] == sc[i] && ids[i - 1] >= ids[i])))
                    fail("results out of order");
            }
            mote_free(ids);
            mote_free(sc);
        }
    }
    mote_query_free(q);
    mote_abort(t);
    free(text);
    return 0;
}
