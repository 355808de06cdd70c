/*
 * chunk.c — content-defined chunking (mote_chunk).
 *
 * Cutting a byte string where its content says, not every N bytes, makes
 * two strings that share long runs share most of their chunks: an insertion
 * or a deletion moves only the cuts next to it, and a cut found after it is
 * found again at the same place relative to the bytes around it. LangGraph's
 * checkpoints are such strings (each step's state repeats the whole history
 * before it plus a little), and a store that keeps each distinct chunk once
 * keeps what a thread adds per step, not its whole state again
 * (python/motedb/integrations/langgraph.py).
 *
 * The hash is a "gear" hash: h = (h << 1) + G[byte] (mod 2^64), so h depends
 * on the last 64 bytes only (older bytes have been shifted out), and a cut
 * goes after a byte where the top `bits` bits of h are zero: on random data
 * one place in 2^bits, so chunks are about min + 2^bits bytes long, and
 * never shorter than min (no hash is looked at before min bytes) or longer
 * than max (a cut is forced there). The table G is 256 constants from
 * splitmix64 with a fixed seed, made once per process: the cuts of a string
 * are the same in every process and every version that keeps the seed.
 */
#include <pthread.h>
#include <stdint.h>

#include "support.h"
#include "mote.h"

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

static void make_gear(void)
{
    uint64_t x = 0x6d6f74652d636463ull; /* "mote-cdc" */
    for (int i = 0; i < 256; i++) {     /* splitmix64 */
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        gear[i] = z ^ (z >> 31);
    }
}

size_t mote_chunk(const void *data, size_t n, size_t min, size_t max, unsigned bits)
{
    if (!data || n == 0 || min == 0 || max < min || bits == 0 || bits > 63)
        return 0;
    if (n <= min)
        return n;
    pthread_once(&gear_once, make_gear);
    const uint8_t *p = data;
    size_t end = n < max ? n : max;
    uint64_t mask = ~0ull << (64 - bits), h = 0;
    /* the 64 bytes before min decide the hash at min: start there */
    for (size_t i = min > 64 ? min - 64 : 0; i < end; i++) {
        h = (h << 1) + gear[p[i]];
        if (i + 1 >= min && !(h & mask))
            return i + 1;
    }
    return end;
}
