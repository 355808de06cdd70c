/*
 * fuzz_json.c — libFuzzer target for the JSON reader (src/json.c), which
 * reads stored documents and condition values from any source: the input is
 * cut at its first two 0xFF bytes into a path, a document and a value. The
 * path is compiled; the document checked and searched at the path; what is
 * found is tested with every operator against the value taken as each value
 * type. Checked besides the sanitizers: a value found is well-formed JSON
 * inside the document, and a valid value equals itself.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"

static const int types[] = {MOTE_T_INT64, MOTE_T_FLOAT64, MOTE_T_BOOL, MOTE_T_STRING, MOTE_T_JSON};

static const uint8_t *cut(const uint8_t **p, size_t *n, size_t *len)
{
    const uint8_t *start = *p, *end = memchr(*p, 0xFF, *n);
    *len = end ? (size_t)(end - start) : *n;
    *p += *len + (end != NULL);
    *n -= *len + (end != NULL);
    return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pl, dl, vl;
    const uint8_t *path = cut(&data, &size, &pl), *doc = cut(&data, &size, &dl);
    const uint8_t *val = cut(&data, &size, &vl);
    /* copies of exactly their size, so that ASan sees any read past them */
    uint8_t *d = malloc(dl + 1), *v = malloc(vl + 1);
    if (!d || !v)
        abort();
    memcpy(d, doc, dl);
    memcpy(v, val, vl);
    jpath *jp = NULL;
    if (mote__jpath_compile((const char *)path, pl, &jp) == MOTE_OK) {
        jval found;
        mote__json_at(d, dl, jp, &found);
        if (found.kind != J_ABSENT &&
            (found.p < d || found.p + found.n > d + dl || mote__json_check(found.p, found.n)))
            abort();
        mote_value mv[2];
        memset(mv, 0, sizeof mv);
        uint64_t bits = 0;
        memcpy(&bits, v, vl < 8 ? vl : 8);
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            int type = types[t];
            if (type == MOTE_T_JSON && mote__json_check(v, vl))
                continue;
            if (type == MOTE_T_STRING || type == MOTE_T_JSON) {
                mv[0].v.s.p = v;
                mv[0].v.s.n = vl;
            } else if (type == MOTE_T_FLOAT64) {
                memcpy(&mv[0].v.f, &bits, 8);
            } else {
                mv[0].v.i = type == MOTE_T_BOOL ? (int64_t)(bits & 1) : (int64_t)bits;
            }
            mv[1] = mv[0];
            for (int op = MOTE_EQ; op <= MOTE_KEY_EXISTS; op++)
                (void)mote__json_test(&found, op, type, mv, op == MOTE_BETWEEN ? 2 : 1);
            if (type == MOTE_T_JSON) { /* a valid value equals itself */
                jval self;
                mote__json_at(v, vl, NULL, &self);
                if (self.kind != J_ABSENT && self.kind != J_NULL &&
                    !mote__json_test(&self, MOTE_EQ, MOTE_T_JSON, mv, 1))
                    abort();
            }
        }
    }
    mote__free(jp);
    free(d);
    free(v);
    return 0;
}
