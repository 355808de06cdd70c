/*
 * checksum.c — CRC32C and the 64-bit slot hash (see checksum.h).
 *
 * The table fallback is the reflected CRC with polynomial 0x82F63B78,
 * processed eight bytes per step (slicing-by-8). The hardware path uses the
 * crc32 instruction on 8-byte words. The slot hash mixes 8-byte words with
 * multiply/rotate steps and a final avalanche; it detects torn and random
 * damage, which is all a slot checksum has to do.
 */
#include "checksum.h"

#include <string.h>

static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
                              crc_table[0][crc_table[t - 1][i] & 0xff];
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init(); /* idempotent: racing threads compute the same table */
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

/*
 * The crc32 instruction takes 3 cycles but can start one per cycle, so the
 * hardware path runs three streams over consecutive thirds of each
 * 3 * CRC_L bytes and joins them: the register after A then B is the
 * register after A multiplied by x^(8|B|) mod P, plus the register of B
 * alone (the update is linear), and a product mod P is 32 shift-and-xor
 * steps (gf2_mul). A 4 KB page is one such block plus 16 bytes.
 */
enum { CRC_L = 1360 }; /* bytes per stream (a multiple of 8) */

/* a * b mod P, reflected: bit 31 is the coefficient of x^0. */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 31; i >= 0; i--) {
        r ^= b & (0u - ((a >> i) & 1u));
        b = (b >> 1) ^ (0x82F63B78u & (0u - (b & 1u))); /* b * x */
    }
    return r;
}

static uint32_t crc_shift; /* x^(8 * CRC_L) mod P, 0 until computed */

static uint32_t shift_const(void)
{
    uint32_t k = __atomic_load_n(&crc_shift, __ATOMIC_RELAXED);
    if (!k) { /* racing threads compute the same value */
        k = 0x80000000u; /* x^0 */
        for (int i = 0; i < 8 * CRC_L; i++)
            k = (k >> 1) ^ (0x82F63B78u & (0u - (k & 1u)));
        __atomic_store_n(&crc_shift, k, __ATOMIC_RELAXED);
    }
    return k;
}

__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    if (n >= 3 * CRC_L) {
        uint32_t k = shift_const();
        do {
            uint64_t a = c, b = 0, d = 0;
            for (size_t i = 0; i < CRC_L; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + CRC_L + i, 8);
                memcpy(&w2, p + 2 * CRC_L + i, 8);
                a = _mm_crc32_u64(a, w0);
                b = _mm_crc32_u64(b, w1);
                d = _mm_crc32_u64(d, w2);
            }
            uint32_t ab = gf2_mul((uint32_t)a, k) ^ (uint32_t)b;
            c = gf2_mul(ab, k) ^ (uint32_t)d;
            p += 3 * CRC_L;
            n -= 3 * CRC_L;
        } while (n >= 3 * CRC_L);
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
static int hw_state; /* 0 unknown, 1 yes, 2 no */
#endif

uint32_t mote__crc32c_table(uint32_t crc, const void *buf, size_t n)
{
    return ~crc_sw(~crc, buf, n);
}

uint32_t mote__crc32c(uint32_t crc, const void *buf, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    int s = __atomic_load_n(&hw_state, __ATOMIC_RELAXED);
    if (s == 0) {
        __builtin_cpu_init();
        s = __builtin_cpu_supports("sse4.2") ? 1 : 2;
        __atomic_store_n(&hw_state, s, __ATOMIC_RELAXED);
    }
    if (s == 1)
        return ~crc_hw(crc, buf, n);
#endif
    return ~crc_sw(crc, buf, n);
}

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

uint64_t mote__hash64(const void *buf, size_t n, uint64_t seed)
{
    const uint64_t K1 = 0x9E3779B185EBCA87ull, K2 = 0xC2B2AE3D27D4EB4Full;
    const unsigned char *p = buf;
    uint64_t a = seed ^ (n * K1), b = seed + K2;
    while (n >= 16) {
        uint64_t w0, w1;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + 8, 8);
        a = rotl64(a ^ (w0 * K2), 31) * K1;
        b = rotl64(b ^ (w1 * K1), 29) * K2;
        p += 16;
        n -= 16;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        a = rotl64(a ^ (w * K2), 31) * K1;
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, p, n);
    b = rotl64(b ^ (tail * K1) ^ n, 27) * K2;
    uint64_t h = a ^ rotl64(b, 17);
    h ^= h >> 33;
    h *= K2;
    h ^= h >> 29;
    h *= K1;
    h ^= h >> 32;
    return h;
}
