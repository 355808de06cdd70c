/*
 * vecmath.h — distance kernels for float32 vectors (vector search, issue
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
