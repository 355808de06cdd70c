/*
 * test_chunk.c — content-defined chunking (mote_chunk): chunk lengths within
 * their bounds, the same cuts for the same bytes, cuts that survive an
 * insertion before them (what deduplication relies on), the average length
 * on random bytes, refused arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MIN 192
#define MAX 768
#define BITS 9

/* The cut offsets of data[0..n), ends of chunks; returns how many. */
static size_t cuts(const uint8_t *data, size_t n, size_t *out, size_t cap)
{
    size_t k = 0, at = 0;
    while (at < n) {
        size_t len = mote_chunk(data + at, n - at, MIN, MAX, BITS);
        CHECK(len >= 1 && len <= MAX && len <= n - at);
        CHECK(len >= MIN || at + len == n); /* only the last is short */
        at += len;
        CHECK(k < cap);
        out[k++] = at;
    }
    return k;
}

TEST(chunk_cuts)
{
    uint64_t rs = 99;
    size_t n = 1 << 20;
    uint8_t *a = malloc(n + 1000);
    size_t *ca = malloc(sizeof *ca * (n / MIN + 2)), *cb = malloc(sizeof *cb * (n / MIN + 10));
    CHECK(a && ca && cb);
    for (size_t i = 0; i < n; i++)
        a[i] = (uint8_t)test_rand(&rs);
    size_t ka = cuts(a, n, ca, n / MIN + 2);
    /* about MIN + 2^BITS bytes per chunk on random bytes, when max is far */
    size_t far = 0, nfar = 0;
    while (far < n) {
        far += mote_chunk(a + far, n - far, MIN, 1 << 16, BITS);
        nfar++;
    }
    double avg = (double)n / (double)nfar;
    CHECK(avg > MIN + (1 << BITS) * 0.85 && avg < MIN + (1 << BITS) * 1.15);
    /* the same bytes elsewhere in memory: the same cuts */
    uint8_t *copy = malloc(n);
    CHECK(copy);
    memcpy(copy, a, n);
    size_t kc = cuts(copy, n, cb, n / MIN + 10);
    CHECK(kc == ka && !memcmp(ca, cb, ka * sizeof *ca));
    /* 37 bytes inserted at 1000: from the first cut after a few chunks on,
     * every cut is where it was, shifted by 37 */
    memmove(a + 1037, a + 1000, n - 1000);
    for (int i = 0; i < 37; i++)
        a[1000 + i] = (uint8_t)test_rand(&rs);
    size_t kb = cuts(a, n + 37, cb, n / MIN + 10);
    size_t same = 0, j = 0;
    for (size_t i = 0; i < ka; i++) {
        while (j < kb && cb[j] < ca[i] + 37)
            j++;
        if (j < kb && cb[j] == ca[i] + 37)
            same++;
    }
    CHECK(same + 5 >= ka); /* all but the few cuts next to the insertion */
    /* text with runs shorter than min and longer than max */
    memset(a, 'x', 5000);
    CHECK(mote_chunk(a, 5000, MIN, MAX, BITS) == MAX); /* one value: no cut, forced at max */
    CHECK(mote_chunk(a, 100, MIN, MAX, BITS) == 100);
    CHECK(mote_chunk(a, MIN, MIN, MAX, BITS) == MIN);
    /* refused */
    CHECK(mote_chunk(NULL, 10, MIN, MAX, BITS) == 0);
    CHECK(mote_chunk(a, 0, MIN, MAX, BITS) == 0);
    CHECK(mote_chunk(a, 10, 0, MAX, BITS) == 0);
    CHECK(mote_chunk(a, 10, MAX, MIN, BITS) == 0);
    CHECK(mote_chunk(a, 10, MIN, MAX, 0) == 0);
    CHECK(mote_chunk(a, 10, MIN, MAX, 64) == 0);
    free(a), free(copy), free(ca), free(cb);
}
