/*
 * json.h — reading values inside JSON text, for JSON-path conditions: paths
 * compiled once, the value at a path found in a document without parsing it
 * into a tree, and that value tested against a condition's values. The
 * grammar of paths and the comparison rules are in json.c's opening comment.
 */
#ifndef MOTE_JSON_H
#define MOTE_JSON_H

#include "support.h"

/* Nesting deeper than this is not well-formed (mote__json_check refuses it,
 * mote__json_at does not read through it), as in SQLite. */
#define JSON_MAX_DEPTH 1000
/* Containers nested deeper than this inside compared values compare unequal. */
#define JSON_EQ_DEPTH 256

/* A compiled JSON path: steps from the document's root. */
typedef struct jstep {
    const uint8_t *key; /* a key step: the key's bytes (unescaped UTF-8), klen of them */
    size_t klen;
    int64_t index;      /* an array step: the element's index (>= 0); -1 for a key step */
} jstep;
typedef struct jpath {
    size_t n;
    jstep steps[];      /* the key bytes are stored after the steps, in the same block */
} jpath;

/* Compile path text[0..len) into *out (one mote__malloc'd block; free with
 * mote__free). MOTE_INVALID with a message (mote__err) naming the byte
 * position of the first error; MOTE_NOMEM. *out is NULL on failure. */
int mote__jpath_compile(const char *text, size_t len, jpath **out);

enum { J_ABSENT = 0, J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT };
typedef struct jval {
    int kind;           /* J_* */
    const uint8_t *p;   /* the value's text inside the document (a string with its quotes) */
    size_t n;
} jval;

/* The value at path p (NULL: the whole document) in the JSON document
 * doc[0..n) into *out; kind J_ABSENT when a step does not exist (missing
 * key, index past the end, a step into a scalar) or when the document is not
 * well-formed JSON along the way. A value found is well-formed. Never reads
 * outside doc[0..n). */
void mote__json_at(const uint8_t *doc, size_t n, const jpath *p, jval *out);

/* Is text[0..n) one well-formed JSON value (RFC 8259, UTF-8, surrounding
 * whitespace allowed, nesting at most JSON_MAX_DEPTH)? MOTE_OK, else
 * MOTE_INVALID with a message naming the byte position. */
int mote__json_check(const uint8_t *text, size_t n);

/* Does the found value v satisfy `op` (a MOTE_* condition operator) against
 * vals[0..nvals), all of property type `type`? 1 yes, 0 no. */
int mote__json_test(const jval *v, int op, int type, const mote_value *vals, size_t nvals);

/* For an index on a path (object.c): do two compiled paths name the same
 * value? The number v is (a number, true 1, false 0) as a double: 1 and
 * *out, else 0. The decoded bytes of the string v: their number, the first
 * cap of them written to out. */
int mote__jpath_same(const jpath *a, const jpath *b);
int mote__json_num(const jval *v, double *out);
size_t mote__json_str(const jval *v, uint8_t *out, size_t cap);

#endif
