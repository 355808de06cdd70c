/*
 * vecmath.h — distance kernels for float32 vectors, and for the byte rows
 * of hnsw.c's graph searches (dot8, below) (vector search, issue
 * 18). A stored vector is `dim` little-endian float32s anywhere in a record
 * (not aligned); the query vector is an aligned float array. Each kernel
 * accumulates in float, sixteen lanes at a time with AVX-512, eight with
 * AVX2 and FMA, whichever is the widest the CPU has (chosen once, at the
 * first call), else in portable C; all sum the same products, in different
 * orders, so they agree to float rounding (tests compare each with a
 * double reference).
 */
#ifndef MOTE_VECMATH_H
#define MOTE_VECMATH_H

#include <stddef.h>
#include <stdint.h>

/* The sums a distance needs: dot = a·q, aa = a·a (for cosine), or the
 * squared L2 distance. `a`: dim stored floats, `q`: dim floats. */
typedef struct vec_kernels {
    float (*dot)(const uint8_t *a, const float *q, size_t dim);
    void (*dot_norm)(const uint8_t *a, const float *q, size_t dim, float *dot, float *aa);
    float (*l2sq)(const uint8_t *a, const float *q, size_t dim);
    /* The sum of a[i] * q[i], i < n, a multiple of 64: a unsigned and q
     * signed bytes (the quantized rows of a graph search, hnsw.c; exact in
     * int32 for n up to 65536). AVX-512 VNNI where the CPU has it (the
     * "avx512" set), else AVX2, else portable C. */
    int32_t (*dot8)(const uint8_t *a, const int8_t *q, size_t n);
    const char *name; /* "avx512", "avx2" or "portable" */
} vec_kernels;

/* The kernels for this CPU: the widest it has, or the set that
 * MOTE_VEC_KERNELS in the environment names ("avx2", "portable"), if it
 * has that one. */
const vec_kernels *mote__vec_kernels(void);
/* The portable ones, always. */
const vec_kernels *mote__vec_kernels_portable(void);
/* Every set this CPU can run, widest first, portable last, into out[0..3);
 * returns how many (tests check each). */
size_t mote__vec_kernels_all(const vec_kernels **out);

#endif
