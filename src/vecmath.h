/*
 * vecmath.h — distance kernels for float32 vectors (vector search, issue
 * 18). A stored vector is `dim` little-endian float32s anywhere in a record
 * (not aligned); the query vector is an aligned float array. Each kernel
 * accumulates in float, eight lanes at a time with AVX2 and FMA when the
 * CPU has them (chosen once, at the first call), else in portable C; both
 * sum the same products, in a different order, so they agree to float
 * rounding (tests compare both with a double reference).
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
    const char *name; /* "avx2" or "portable" */
} vec_kernels;

/* The kernels for this CPU (MOTE_VEC_KERNELS=portable in the environment
 * forces the portable ones). */
const vec_kernels *mote__vec_kernels(void);
/* The portable ones, always (tests compare them with the fast ones). */
const vec_kernels *mote__vec_kernels_portable(void);

#endif
