/*
 * match.c — a query's condition evaluated on one object's record (the check
 * of every candidate the plan did not prove, see query.c): comparisons,
 * IN lists, NULL tests, string operators with ASCII + Latin-1 case folding,
 * conditions on the id, conditions on a value inside a JSON property
 * (json.c reads and compares it), AND / OR, relation conditions resolved
 * into sets;
 * and whether a record has expired (mote__query_admit). A comparison with a
 * NULL value is false, as in SQL.
 */
#include <stdlib.h>

#include "json.h"
#include "query.h"

/* Fold ASCII and Latin-1 (2-byte UTF-8) upper case to lower case. */
static size_t fold(const uint8_t *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (uint8_t)(c + 32);
        } else if (c == 0xC3 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9E &&
                   s[i + 1] != 0x97) {
            out[i] = c;
            out[i + 1] = (uint8_t)(s[i + 1] + 0x20);
            i++;
            continue;
        }
        out[i] = c;
    }
    return n;
}

static int str_match(int op, const uint8_t *h, size_t hn, const uint8_t *nd, size_t nn)
{
    if (nn > hn)
        return 0;
    if (op == MOTE_STARTS_WITH)
        return !nn || !memcmp(h, nd, nn);
    if (op == MOTE_ENDS_WITH)
        return !nn || !memcmp(h + hn - nn, nd, nn);
    if (!nn)
        return 1;
    return memmem(h, hn, nd, nn) != NULL;
}

/* Equal after case folding (ASCII + Latin-1 keep their byte lengths). */
static int nocase_eq(const mote_value *x, const mote_value *v)
{
    size_t n = x->v.s.n;
    if (n != v->v.s.n)
        return 0;
    const uint8_t *a = x->v.s.p, *b = v->v.s.p;
    uint8_t fa[2], fb[2];
    for (size_t i = 0; i < n; i++) {
        size_t w = a[i] == 0xC3 && i + 1 < n ? 2 : 1; /* fold a Latin-1 pair at once */
        if (w == 2 && b[i] != 0xC3)
            return 0;
        fold(a + i, w, fa);
        fold(b + i, w, fb);
        if (memcmp(fa, fb, w))
            return 0;
        i += w - 1;
    }
    return 1;
}

/* x op v for the value types of conditions; flags: MOTE_Q_NOCASE */
static int cmp_eq(int type, unsigned flags, const mote_value *x, const mote_value *v)
{
    if (flags & MOTE_Q_NOCASE)
        return nocase_eq(x, v);
    return mote__value_cmp(type, x, v) == 0;
}

/* Is id in n's sorted set of ids (idset)? */
static int in_idset(const qnode *n, uint64_t id)
{
    size_t lo = 0, hi = n->nidset;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (n->idset[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n->nidset && n->idset[lo] == id;
}

static int eval_id(const qnode *n, uint64_t id)
{
    const mote_value *v = n->vals;
    uint64_t a = n->nvals ? (uint64_t)v[0].v.i : 0; /* IN () has no value */
    switch (n->op) {
    case MOTE_EQ: return id == a;
    case MOTE_NE: return id != a;
    case MOTE_LT: return id < a;
    case MOTE_LE: return id <= a;
    case MOTE_GT: return id > a;
    case MOTE_GE: return id >= a;
    case MOTE_BETWEEN: return id >= a && id <= (uint64_t)v[1].v.i;
    default: { /* IN, NOT IN: their ids, sorted (query.c leaf_vals) */
        int in = in_idset(n, id);
        return n->op == MOTE_IN ? in : !in;
    }
    }
}

/* An IN of this many sorted values or more is bisected; fewer are compared
 * one after another (a few predictable compares against a bisection's
 * branches, which a CPU cannot guess). Counting a scan of 100,000 objects
 * (an int IN / a string IN, 2026-12-07): 30 values 11-12 / 18-26 ms one by
 * one, 7-10 / 9-14 bisected; 300 values 96-117 / 186-240 against 9-14 /
 * 15-21. */
#define IN_BISECT_MIN 16

/* Is x among n's values, sorted in mote__value_cmp's order (query.c
 * leaf_vals)? */
static int in_sorted_vals(const qnode *n, int type, const mote_value *x)
{
    size_t lo = 0, hi = n->nvals;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = mote__value_cmp(type, &n->vals[mid], x);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int eval_leaf(const qnode *n, const mote_entity *e, const mote_value *x)
{
    int type = e->props[n->prop].type;
    if (n->op == MOTE_IS_NULL)
        return x->null;
    if (n->op == MOTE_NOT_NULL)
        return !x->null;
    if (x->null)
        return 0;
    const mote_value *v = n->vals;
    switch (n->op) {
    case MOTE_EQ: return cmp_eq(type, n->flags, x, v);
    case MOTE_NE: return !cmp_eq(type, n->flags, x, v);
    case MOTE_LT: return mote__value_cmp(type, x, v) < 0;
    case MOTE_LE: return mote__value_cmp(type, x, v) <= 0;
    case MOTE_GT: return mote__value_cmp(type, x, v) > 0;
    case MOTE_GE: return mote__value_cmp(type, x, v) >= 0;
    case MOTE_BETWEEN:
        return mote__value_cmp(type, x, &v[0]) >= 0 && mote__value_cmp(type, x, &v[1]) <= 0;
    case MOTE_IN:
    case MOTE_NOT_IN: {
        int in = 0;
        if (n->sorted && n->nvals >= IN_BISECT_MIN)
            in = in_sorted_vals(n, type, x);
        else
            for (size_t i = 0; i < n->nvals && !in; i++)
                in = cmp_eq(type, n->flags, x, &v[i]);
        return n->op == MOTE_IN ? in : !in;
    }
    default: { /* string operations */
        const uint8_t *h = x->v.s.p, *nd = v->v.s.p;
        size_t hn = x->v.s.n, nn = v->v.s.n;
        if (!(n->flags & MOTE_Q_NOCASE))
            return str_match(n->op, h, hn, nd, nn);
        uint8_t hs[256], ns[256];
        uint8_t *hb = hn <= sizeof hs ? hs : mote__malloc(hn);
        uint8_t *nb = nn <= sizeof ns ? ns : mote__malloc(nn);
        int r = 0;
        if (hb && nb) {
            fold(h, hn, hb);
            fold(nd, nn, nb);
            r = str_match(n->op, hb, hn, nb, nn);
        }
        if (hb != hs)
            mote__free(hb);
        if (nb != ns)
            mote__free(nb);
        return r;
    }
    }
}

/* 1 = match, 0 = no match, < 0: -(error code) */
int mote__query_eval(const mote_query *q, int node, const mote_record *r)
{
    if (node < 0)
        return 1;
    const qnode *n = &q->nodes[node];
    if (n->kind == Q_LINK && q->e->props[n->prop].type == MOTE_T_TOMANY)
        return in_idset(n, r->id); /* is the object one of the sources? */
    if (n->kind == Q_ID)
        return eval_id(n, r->id);
    if (n->kind == Q_JSON && q->defer_json) /* checked later: a superset now */
        return 1;
    if (n->kind == Q_JSON) { /* a NULL property: no value at any path */
        mote_value x;
        jval v = {J_ABSENT, NULL, 0};
        int rc = mote_record_get(r, n->prop, &x, NULL);
        if (rc)
            return -rc;
        if (!x.null)
            mote__json_at(x.v.s.p, x.v.s.n, n->jp, &v);
        return mote__json_test(&v, n->op, n->jtype, n->vals, n->nvals);
    }
    if (n->kind == Q_LEAF || n->kind == Q_LINK) {
        mote_value x;
        int rc = mote_record_get(r, n->prop, &x, NULL);
        return rc ? -rc : eval_leaf(n, q->e, &x);
    }
    for (size_t i = 0; i < n->nkids; i++) {
        if (node == q->root && n->kids[i] + 1 == q->covered) /* true of every candidate */
            continue;
        int m = mote__query_eval(q, n->kids[i], r);
        if (m < 0)
            return m;
        if (n->kind == Q_AND && !m)
            return 0;
        if (n->kind == Q_OR && m)
            return 1;
    }
    return n->kind == Q_AND;
}

int mote__query_admit(const mote_query *q, const mote_record *r)
{
    if (q->e->expires >= 0 && mote__expired(r, q->now))
        return 0;
    return mote__query_eval(q, q->root, r);
}
