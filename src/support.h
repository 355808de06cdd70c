/*
 * support.h — what every layer uses: little-endian loads and stores,
 * allocation (hookable, so tests can fail the Nth allocation), and the
 * calling thread's error message (util.c). Checksums: checksum.h.
 */
#ifndef MOTE_SUPPORT_H
#define MOTE_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mote.h"

/* ---- Little-endian helpers ------------------------------------------------ */

static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
/* Big-endian load: comparing these compares 8 key bytes at once. */
static inline uint64_t mote__be64(const uint8_t *p)
{
    uint64_t v = rd64(p);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void mote__wr_be64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* ---- Memory (hookable so tests can fail the Nth allocation and count) ---- */

void *mote__malloc(size_t n);
void *mote__calloc(size_t n, size_t m);
void *mote__realloc(void *p, size_t n);
/* Make *b (of *cap bytes) hold at least need bytes, doubling from 256:
 * MOTE_NOMEM (with the message set) if it cannot. */
int mote__grow(uint8_t **b, size_t *cap, size_t need);
void mote__free(void *p);
/* Test hook: when set, called before every allocation with its size; a
 * non-zero return makes that allocation fail. */
extern int (*mote__alloc_hook)(size_t n);

/* ---- Errors ------------------------------------------------------------- */

/* Set the calling thread's error message, of a failure without an operating
 * system cause (mote_last_oserror then returns 0); returns rc. */
int mote__err(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define CORRUPT(...) mote__corrupt(__FILE__, __LINE__, __VA_ARGS__)
int mote__corrupt(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Problems found by mote_check: counted, and the first 1,000 passed to the
 * caller's report callback (may be NULL). */
typedef struct mote_problems {
    void (*report)(void *ctx, const char *problem);
    void *ctx;
    unsigned n;
} mote_problems;
void mote__problem(mote_problems *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Set the message of a failure the operating system reported: errno `err`
 * on the file `path`, which mote_last_oserror then returns. Returns rc. */
int mote__oserr(int rc, int err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map -errno from the I/O shim to MOTE_IO / MOTE_NOSPACE / MOTE_NOMEM, with
 * the message "<what> of <path> failed: <strerror>" (mote__oserr). */
int mote__ioerr(int neg_errno, const char *what, const char *path);

#endif
