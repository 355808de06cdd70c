/*
 * query.h — a query's structure, shared by the files of queries in the
 * object layer: query.c (building, planning, running), match.c (evaluating
 * a condition on a record). A query is a tree of condition nodes (leaves on
 * a property or the id, AND / OR, relation links), an order, an offset and
 * a limit; the public handle is mote_query (mote.h).
 */
#ifndef MOTE_QUERY_H
#define MOTE_QUERY_H

#include "object.h"

/* Q_ID: a leaf on the object id; Q_JSON: a leaf on a value inside a JSON
 * property (mote_query_json) */
enum { Q_LEAF, Q_AND, Q_OR, Q_LINK, Q_ID, Q_JSON };

typedef struct qnode {
    int kind;
    unsigned prop;
    int op;
    unsigned flags;
    mote_value *vals;
    size_t nvals;
    int sorted; /* IN / NOT IN on a property: vals in mote__value_cmp's order
                   (match.c bisects them) */
    int *kids;
    size_t nkids;
    /* Q_LINK: the target query; resolved per run into an IN leaf on the
     * to-one property (op, vals) or, for to-many, the set of source ids
     * (idset); Q_ID IN and NOT IN: their ids (idset). Sorted, each once. */
    mote_query *sub;
    uint64_t *idset;
    size_t nidset;
    /* Q_JSON: the compiled path (json.h) and the type of vals */
    struct jpath *jp;
    int jtype;
} qnode;

typedef struct qorder {
    unsigned prop;
    unsigned flags;
} qorder;

/* A nearest-neighbour clause (mote_query_nearest). */
typedef struct qnear {
    unsigned prop;
    int metric;  /* MOTE_DIST_* */
    uint32_t dim;
    uint64_t k;
    float qq;    /* |vec|^2 */
    float vec[]; /* dim floats */
} qnear;

/* A full-text clause (mote_query_match). */
typedef struct qmatch {
    unsigned prop;  /* the first of its properties */
    unsigned nprops;
    unsigned props[MOTE_MATCH_PROPS_MAX];
    double w[MOTE_MATCH_PROPS_MAX];
    int weighted;   /* several properties, or a weight other than 1 */
    unsigned flags; /* MOTE_MATCH_* */
    uint64_t k;
    size_t len;
    char text[];    /* the query text, len bytes */
} qmatch;

struct mote_query {
    mote_entity *e;
    qnode *nodes;
    size_t nn, cap;
    int root;
    qorder *order;
    size_t norder;
    uint64_t offset, limit;
    uint8_t *agg_buf; /* bytes of the last MIN/MAX string result */
    qnear *near;      /* nearest neighbours (replaces an order), or NULL */
    int near_how;     /* MOTE_NEAR_* (mote_query_search) */
    unsigned near_ef; /* search breadth through an index, 0: the default */
    qmatch *match;    /* full-text match (replaces an order), or NULL */
    int fuse;         /* a hybrid query's fusion: MOTE_FUSE_RRF, MOTE_FUSE_WEIGHTED */
    double fuse_arg;  /* its parameter: RRF's k (0: MOTE_RRF_K), the text's weight */
    int64_t now;      /* the run's transaction's clock, for expiry (object.c) */
    int defer_json;   /* a sorted run's first pass: JSON conditions hold (query.c,
                         "Deferred JSON conditions") */
    int test_late;    /* a top k run: its visitor tests the candidates (query.c,
                         "TOP K") */
    int covered;      /* during a run: 1 + the conjunct of the root AND that
                         the index ranges walked make true (0: none) */
};

/* match.c: does the condition tree below `node` hold for record r? 1 = match,
 * 0 = no match, < 0: -(error code). */
int mote__query_eval(const mote_query *q, int node, const mote_record *r);
/* Is record r a match of q: not expired (object.c "EXPIRY", by q->now),
 * and its conditions hold? As mote__query_eval. */
int mote__query_admit(const mote_query *q, const mote_record *r);
/* Must a run of q read each candidate's record: it has conditions, or its
 * entity an expiry time? */
static inline int query_filtered(const mote_query *q)
{
    return q->root >= 0 || q->e->expires >= 0;
}

#endif
