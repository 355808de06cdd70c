/*
 * query.c — queries on one entity: a tree of conditions (leaves compare a
 * property; AND / OR nodes), ordering, offset and limit.
 *
 * PLAN. Among the top-level conjuncts (the root leaf, or the leaves of a
 * root AND) the planner picks one on an indexed property, preferring EQ,
 * then IN, then ranges (LT..BETWEEN, IS [NOT] NULL), then STARTS WITH
 * (case-sensitive). Its index gives the candidate ids as key ranges; every
 * candidate is checked against the rest of the condition on its record
 * (exact ranges hold their conjunct), unless the range is exact and it is
 * the only condition: then count is a difference of ranks and offset jumps
 * straight to the n-th entry (both O(log n)). Without such a conjunct,
 * ordering by an indexed property walks that index; otherwise the objects
 * are scanned in id order. A requested order the access path does not give
 * is made by sorting encoded keys (with a small limit, keeping the first
 * ones in a heap: "TOP K").
 *
 * Conditions on the id (MOTE_PROP_ID) bound the scan: EQ, IN, BETWEEN and
 * the ranges seek the object tree to the smallest id and stop after the
 * largest; an id EQ or IN is preferred to any index. An IN whose ids are
 * sparse in that span (fewer than one in ID_SEEK_GAP) looks each of them
 * up instead (its ids are kept sorted), as a get of each would: 40 ids
 * spread over 100,000 objects were counted in 3.9 ms, now 15 us.
 *
 * SEMANTICS. A comparison with a NULL property value is false (as in SQL),
 * except IS NULL / IS NOT NULL; NE and NOT IN are false for NULL too.
 * Case-insensitive string matching folds ASCII and Latin-1 letters (UTF-8
 * U+00C0..U+00DE to U+00E0..U+00FE, except U+00D7). Float NaN sorts last.
 * Ordering by strings longer than 400 bytes orders by their first 400.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "query.h"
#include "text.h"
#include "vecmath.h"

/* A filtered nearest query compares every candidate exactly when a value
 * index selects at most this share (1/n) of the vector index's nodes. */
#define NEAR_EXACT_SHARE 16
#define ID_SEEK_GAP 8 /* an id IN seeks each id when the span it bounds holds
                        * at least this many ids per id it names: a seek costs
                        * about as much as stepping over eight objects (0.37
                        * against 0.05 us: 100,000 objects of 100 bytes) */

int mote_query_new(mote_entity *e, mote_query **out)
{
    if (!out || !e)
        return mote__err(MOTE_INVALID, "mote_query_new: NULL argument");
    mote_query *q = mote__calloc(1, sizeof *q);
    if (!q)
        return mote__err(MOTE_NOMEM, "out of memory");
    q->e = e;
    q->root = -1;
    *out = q;
    return MOTE_OK;
}

static void free_vals(qnode *n)
{
    mote__free(n->vals); /* the values and their bytes are one block */
    n->vals = NULL;
    n->nvals = 0;
}

void mote_query_free(mote_query *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->nn; i++) {
        free_vals(&q->nodes[i]);
        mote__free(q->nodes[i].kids);
        mote__free(q->nodes[i].idset);
        mote__free(q->nodes[i].jp);
    }
    mote__free(q->nodes);
    mote__free(q->order);
    mote__free(q->agg_buf);
    mote__free(q->near);
    mote__free(q->match);
    mote__free(q);
}

static int new_node(mote_query *q, int *id)
{
    *id = 0;
    if (q->nn == q->cap) {
        size_t n = q->cap ? q->cap * 2 : 8;
        qnode *nn = mote__realloc(q->nodes, n * sizeof *nn);
        if (!nn)
            return mote__err(MOTE_NOMEM, "out of memory");
        q->nodes = nn;
        q->cap = n;
    }
    memset(&q->nodes[q->nn], 0, sizeof(qnode));
    *id = (int)q->nn++;
    return MOTE_OK;
}

/* Copy values into one block: the array, then variable bytes. */
static int copy_vals(qnode *n, int type, const mote_value *vals, size_t nvals)
{
    size_t bytes = nvals * sizeof(mote_value);
    for (size_t i = 0; i < nvals; i++)
        if (type_is_var(type) && !vals[i].null)
            bytes += vals[i].v.s.n;
    mote_value *c = mote__malloc(bytes + 1);
    if (!c)
        return mote__err(MOTE_NOMEM, "out of memory");
    uint8_t *extra = (uint8_t *)(c + nvals);
    for (size_t i = 0; i < nvals; i++) {
        c[i] = vals[i];
        if (type_is_var(type) && !vals[i].null) {
            if (vals[i].v.s.n)
                memcpy(extra, vals[i].v.s.p, vals[i].v.s.n);
            c[i].v.s.p = extra;
            extra += vals[i].v.s.n;
        }
    }
    free_vals(n);
    n->vals = c;
    n->nvals = nvals;
    return MOTE_OK;
}

/* Conditions on the id compare it as an unsigned integer (in v.i). */
static const mprop id_prop = {.name = "id", .type = MOTE_T_INT64};

static const mprop *leaf_prop(const mote_query *q, unsigned prop)
{
    return prop == MOTE_PROP_ID ? &id_prop : &q->e->props[prop];
}

static int check_leaf_vals(const mote_query *q, unsigned prop, int op, const mote_value *vals,
                           size_t nvals)
{
    const mprop *p = leaf_prop(q, prop);
    size_t want = op == MOTE_BETWEEN ? 2 : op == MOTE_IS_NULL || op == MOTE_NOT_NULL ? 0 : 1;
    if (op == MOTE_IN || op == MOTE_NOT_IN)
        want = nvals;
    if (nvals != want || (nvals && !vals))
        return mote__err(MOTE_INVALID, "%s.%s: condition takes %zu value(s), got %zu",
                         q->e->name, p->name, want, nvals);
    int str_op = op == MOTE_STARTS_WITH || op == MOTE_ENDS_WITH || op == MOTE_CONTAINS;
    if (str_op && p->type != MOTE_T_STRING && p->type != MOTE_T_BYTES)
        return mote__err(MOTE_TYPE, "%s.%s: string condition on a %s property", q->e->name,
                         p->name, mote__type_name(p->type));
    for (size_t i = 0; i < nvals; i++) {
        if (vals[i].null)
            return mote__err(MOTE_INVALID, "%s.%s: compare with NULL using IS NULL",
                             q->e->name, p->name);
        if (type_is_var(p->type) && !vals[i].v.s.p && vals[i].v.s.n)
            return mote__err(MOTE_INVALID, "%s.%s: NULL pointer in a value", q->e->name,
                             p->name);
    }
    return MOTE_OK;
}

/* Sort n values of a type with an order by mote__value_cmp (a merge sort:
 * qsort takes no context). */
static int sort_vals(mote_value *v, size_t n, int type)
{
    mote_value *tmp = n > 1 ? mote__malloc(n * sizeof *tmp) : NULL;
    if (n > 1 && !tmp)
        return mote__err(MOTE_NOMEM, "out of memory");
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo + w < n; lo += 2 * w) {
            size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = 0;
            while (a < mid && b < hi)
                tmp[k++] = mote__value_cmp(type, &v[b], &v[a]) < 0 ? v[b++] : v[a++];
            while (a < mid)
                tmp[k++] = v[a++];
            while (b < hi)
                tmp[k++] = v[b++];
            memcpy(v + lo, tmp, k * sizeof *tmp);
        }
    }
    mote__free(tmp);
    return MOTE_OK;
}

/* The values of condition leaf n (its kind, op and flags set), copied; for an
 * id IN or NOT IN also its ids, sorted and each once, in idset (match.c looks
 * an id up there by bisection, run_matches looks each one up in order); for
 * a property IN or NOT IN (not case-insensitive) the values sorted, which
 * match.c bisects instead of comparing each. */
static int leaf_vals(qnode *n, int type, const mote_value *vals, size_t nvals)
{
    int ids = n->kind == Q_ID && (n->op == MOTE_IN || n->op == MOTE_NOT_IN);
    uint64_t *set = ids ? mote__malloc((nvals + 1) * sizeof *set) : NULL;
    if (ids && !set)
        return mote__err(MOTE_NOMEM, "out of memory");
    int rc = copy_vals(n, type, vals, nvals);
    n->sorted = 0;
    if (!rc && n->kind == Q_LEAF && (n->op == MOTE_IN || n->op == MOTE_NOT_IN) &&
        !(n->flags & MOTE_Q_NOCASE) && type_indexable(type) && !(rc = sort_vals(n->vals, nvals, type)))
        n->sorted = 1;
    if (rc || !ids) {
        mote__free(set);
        return rc;
    }
    for (size_t i = 0; i < nvals; i++)
        set[i] = (uint64_t)vals[i].v.i;
    mote__free(n->idset);
    n->idset = set;
    n->nidset = mote__sort_unique_u64(set, nvals);
    return MOTE_OK;
}

int mote_query_cond(mote_query *q, unsigned prop, int op, const mote_value *vals,
                    size_t nvals, unsigned flags, int *node)
{
    if (!q || !node)
        return mote__err(MOTE_INVALID, "mote_query_cond: NULL argument");
    if (prop >= q->e->nprops && prop != MOTE_PROP_ID)
        return mote__err(MOTE_INVALID, "%s: no property %u", q->e->name, prop);
    if (op < MOTE_EQ || op > MOTE_CONTAINS || (flags & ~MOTE_Q_NOCASE))
        return mote__err(MOTE_INVALID, "mote_query_cond: bad operator or flags");
    const mprop *p = leaf_prop(q, prop);
    if (prop == MOTE_PROP_ID && (op == MOTE_IS_NULL || op == MOTE_NOT_NULL || op >= MOTE_STARTS_WITH))
        return mote__err(MOTE_INVALID, "%s.id: ids take comparisons, BETWEEN and IN", q->e->name);
    if (flags & MOTE_Q_NOCASE) {
        if (p->type != MOTE_T_STRING && p->type != MOTE_T_BYTES)
            return mote__err(MOTE_TYPE, "%s.%s: case-insensitive condition on a %s property",
                             q->e->name, p->name, mote__type_name(p->type));
        if (op != MOTE_EQ && op != MOTE_NE && op != MOTE_IN && op != MOTE_NOT_IN &&
            op < MOTE_STARTS_WITH)
            return mote__err(MOTE_INVALID, "%s.%s: case-insensitive ordering is not supported",
                             q->e->name, p->name);
    }
    int rc = check_leaf_vals(q, prop, op, vals, nvals), id;
    if (!rc)
        rc = new_node(q, &id);
    if (rc)
        return rc;
    qnode *n = &q->nodes[id];
    n->kind = prop == MOTE_PROP_ID ? Q_ID : Q_LEAF;
    n->prop = prop;
    n->op = op;
    n->flags = flags;
    if ((rc = leaf_vals(n, p->type, vals, nvals))) {
        q->nn--;
        return rc;
    }
    *node = id;
    return MOTE_OK;
}

/* Put "<entity>.<prop>: " (and `what`) before the message of failure rc. */
static int json_err(int rc, const mote_query *q, const mprop *p, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", mote_errmsg(NULL));
    return mote__err(rc, "%s.%s: %s%s", q->e->name, p->name, what, msg);
}

/* The values of a condition on a JSON path (see mote_query_json). */
static int check_json_vals(const mote_query *q, const mprop *p, int op, int type,
                           const mote_value *vals, size_t nvals)
{
    size_t want = op == MOTE_BETWEEN ? 2
                  : op == MOTE_IS_NULL || op == MOTE_NOT_NULL || op == MOTE_KEY_EXISTS ? 0 : 1;
    if (op == MOTE_IN || op == MOTE_NOT_IN)
        want = nvals;
    if (nvals != want || (nvals && !vals))
        return mote__err(MOTE_INVALID, "%s.%s: condition takes %zu value(s), got %zu",
                         q->e->name, p->name, want, nvals);
    if (nvals && type != MOTE_T_INT64 && type != MOTE_T_FLOAT64 && type != MOTE_T_BOOL &&
        type != MOTE_T_STRING && type != MOTE_T_JSON)
        return mote__err(MOTE_TYPE, "%s.%s: a JSON path compares with int64, float64, bool, "
                         "string or JSON values, not %s", q->e->name, p->name,
                         mote__type_name(type));
    if ((op == MOTE_STARTS_WITH || op == MOTE_ENDS_WITH || op == MOTE_CONTAINS) &&
        type != MOTE_T_STRING)
        return mote__err(MOTE_TYPE, "%s.%s: a string condition takes a string value",
                         q->e->name, p->name);
    for (size_t i = 0; i < nvals; i++) {
        if (vals[i].null)
            return mote__err(MOTE_INVALID, "%s.%s: compare with NULL using IS NULL",
                             q->e->name, p->name);
        if (type_is_var(type) && !vals[i].v.s.p && vals[i].v.s.n)
            return mote__err(MOTE_INVALID, "%s.%s: NULL pointer in a value", q->e->name,
                             p->name);
        if (type == MOTE_T_BOOL && (vals[i].v.i & ~(int64_t)1))
            return mote__err(MOTE_RANGE, "%s.%s: a bool is 0 or 1", q->e->name, p->name);
        if (type == MOTE_T_JSON && mote__json_check(vals[i].v.s.p, vals[i].v.s.n))
            return json_err(MOTE_INVALID, q, p, "a value: ");
    }
    return MOTE_OK;
}

int mote_query_json(mote_query *q, unsigned prop, const char *path, size_t pathlen, int op,
                    int type, const mote_value *vals, size_t nvals, int *node)
{
    if (!q || !node || (pathlen && !path))
        return mote__err(MOTE_INVALID, "mote_query_json: NULL argument");
    if (prop >= q->e->nprops)
        return mote__err(MOTE_INVALID, "%s: no property %u", q->e->name, prop);
    const mprop *p = &q->e->props[prop];
    if (p->type != MOTE_T_JSON)
        return mote__err(MOTE_TYPE, "%s.%s: a JSON path condition needs a JSON property, not "
                         "%s", q->e->name, p->name, mote__type_name(p->type));
    if (op < MOTE_EQ || op > MOTE_KEY_EXISTS)
        return mote__err(MOTE_INVALID, "mote_query_json: unknown operator %d", op);
    jpath *jp;
    int id, rc = check_json_vals(q, p, op, type, vals, nvals);
    if (!rc && (rc = mote__jpath_compile(path, pathlen, &jp)))
        return json_err(rc, q, p, "");
    if (!rc && (rc = new_node(q, &id)))
        mote__free(jp);
    if (rc)
        return rc;
    qnode *n = &q->nodes[id];
    n->kind = Q_JSON;
    n->prop = prop;
    n->op = op;
    n->jp = jp;
    n->jtype = type;
    if ((rc = copy_vals(n, type, vals, nvals))) {
        mote__free(jp);
        q->nn--;
        return rc;
    }
    *node = id;
    return MOTE_OK;
}

static int group(mote_query *q, int kind, const int *nodes, size_t n, int *node)
{
    if (!q || !node || (n && !nodes) || n == 0)
        return mote__err(MOTE_INVALID, "mote_query_and/or: needs at least one node");
    for (size_t i = 0; i < n; i++)
        if (nodes[i] < 0 || (size_t)nodes[i] >= q->nn)
            return mote__err(MOTE_INVALID, "mote_query_and/or: unknown node %d", nodes[i]);
    int id, rc = new_node(q, &id);
    if (rc)
        return rc;
    qnode *g = &q->nodes[id];
    g->kind = kind;
    g->kids = mote__malloc(n * sizeof *g->kids);
    if (!g->kids) {
        q->nn--;
        return mote__err(MOTE_NOMEM, "out of memory");
    }
    memcpy(g->kids, nodes, n * sizeof *g->kids);
    g->nkids = n;
    *node = id;
    return MOTE_OK;
}

int mote_query_and(mote_query *q, const int *nodes, size_t n, int *node)
{
    return group(q, Q_AND, nodes, n, node);
}

int mote_query_or(mote_query *q, const int *nodes, size_t n, int *node)
{
    return group(q, Q_OR, nodes, n, node);
}

int mote_query_link(mote_query *q, unsigned prop, mote_query *sub, int *node)
{
    if (!q || !sub || !node)
        return mote__err(MOTE_INVALID, "mote_query_link: NULL argument");
    if (prop >= q->e->nprops || !type_is_rel(q->e->props[prop].type))
        return mote__err(MOTE_INVALID, "%s: property %u is not a relation", q->e->name, prop);
    if (strcmp(sub->e->name, q->e->props[prop].target))
        return mote__err(MOTE_INVALID, "%s.%s relates to %s, not %s", q->e->name,
                         q->e->props[prop].name, q->e->props[prop].target, sub->e->name);
    int id, rc = new_node(q, &id);
    if (rc)
        return rc;
    qnode *n = &q->nodes[id];
    n->kind = Q_LINK;
    n->prop = prop;
    n->op = MOTE_IN;
    n->sub = sub;
    *node = id;
    return MOTE_OK;
}

int mote_query_where(mote_query *q, int node)
{
    if (!q || node < -1 || node >= (int)q->nn)
        return mote__err(MOTE_INVALID, "mote_query_where: unknown node %d", node);
    q->root = node;
    return MOTE_OK;
}

int mote_query_set(mote_query *q, int node, const mote_value *vals, size_t nvals)
{
    if (!q || node < 0 || (size_t)node >= q->nn ||
        (q->nodes[node].kind != Q_LEAF && q->nodes[node].kind != Q_ID &&
         q->nodes[node].kind != Q_JSON))
        return mote__err(MOTE_INVALID, "mote_query_set: not a condition node");
    qnode *n = &q->nodes[node];
    if (n->kind == Q_JSON) {
        int rc = check_json_vals(q, &q->e->props[n->prop], n->op, n->jtype, vals, nvals);
        return rc ? rc : copy_vals(n, n->jtype, vals, nvals);
    }
    int rc = check_leaf_vals(q, n->prop, n->op, vals, nvals);
    return rc ? rc : leaf_vals(n, leaf_prop(q, n->prop)->type, vals, nvals);
}

int mote_query_order(mote_query *q, unsigned prop, unsigned flags)
{
    if (!q || prop >= q->e->nprops || (flags & ~(MOTE_Q_DESC | MOTE_Q_NULLS_LAST)))
        return mote__err(MOTE_INVALID, "mote_query_order: bad property or flags");
    if (!type_indexable(q->e->props[prop].type))
        return mote__err(MOTE_TYPE, "%s.%s: %s values have no order", q->e->name,
                         q->e->props[prop].name, mote__type_name(q->e->props[prop].type));
    if (q->near || q->match)
        return mote__err(MOTE_INVALID, "%s: a %s query is ordered by %s; it takes no other "
                         "order", q->e->name, q->near ? "nearest" : "match",
                         q->near ? "distance" : "score");
    qorder *o = mote__realloc(q->order, (q->norder + 1) * sizeof *o);
    if (!o)
        return mote__err(MOTE_NOMEM, "out of memory");
    q->order = o;
    o[q->norder].prop = prop;
    o[q->norder++].flags = flags;
    return MOTE_OK;
}

int mote_query_nearest(mote_query *q, unsigned prop, const float *vec, size_t dim, uint64_t k,
                       int distance)
{
    if (!q || !vec)
        return mote__err(MOTE_INVALID, "mote_query_nearest: NULL argument");
    mote_entity *e = q->e;
    if (prop >= e->nprops)
        return mote__err(MOTE_INVALID, "%s: no property %u", e->name, prop);
    const mprop *p = &e->props[prop];
    if (p->type != MOTE_T_VECTOR)
        return mote__err(MOTE_TYPE, "%s.%s: nearest needs a vector property, not %s", e->name,
                         p->name, mote__type_name(p->type));
    if (dim != p->dim)
        return mote__err(MOTE_INVALID, "%s.%s: a vector of %zu floats for a property of %u",
                         e->name, p->name, dim, p->dim);
    if (!k)
        return mote__err(MOTE_INVALID, "%s.%s: nearest needs k >= 1", e->name, p->name);
    if (distance < MOTE_DIST_COSINE || distance > MOTE_DIST_DOT)
        return mote__err(MOTE_INVALID, "%s.%s: unknown distance %d", e->name, p->name, distance);
    if (q->norder)
        return mote__err(MOTE_INVALID, "%s: a nearest query is ordered by distance; it takes "
                         "no other order", e->name);
    float qq = 0;
    for (size_t i = 0; i < dim; i++) {
        if (!isfinite(vec[i]))
            return mote__err(MOTE_INVALID, "%s.%s: the query vector's component %zu is %s",
                             e->name, p->name, i, isnan(vec[i]) ? "NaN" : "infinite");
        qq += vec[i] * vec[i];
    }
    qnear *nr = mote__malloc(sizeof *nr + dim * sizeof(float));
    if (!nr)
        return mote__err(MOTE_NOMEM, "out of memory");
    nr->prop = prop;
    nr->metric = distance;
    nr->dim = (uint32_t)dim;
    nr->k = k;
    nr->qq = qq;
    memcpy(nr->vec, vec, dim * sizeof(float));
    mote__free(q->near);
    q->near = nr;
    return MOTE_OK;
}

int mote_query_match_in(mote_query *q, const unsigned *props, const double *weights,
                        unsigned n, const char *text, size_t len, uint64_t k, unsigned flags)
{
    if (!q || !props || (!text && len))
        return mote__err(MOTE_INVALID, "mote_query_match: NULL argument");
    mote_entity *e = q->e;
    if (n < 1 || n > MOTE_MATCH_PROPS_MAX)
        return mote__err(MOTE_INVALID, "%s: a match is over 1 to %d properties, not %u", e->name,
                         MOTE_MATCH_PROPS_MAX, n);
    const mprop *p = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (props[i] >= e->nprops)
            return mote__err(MOTE_INVALID, "%s: no property %u", e->name, props[i]);
        p = &e->props[props[i]];
        if (p->type != MOTE_T_STRING)
            return mote__err(MOTE_TYPE, "%s.%s: match needs a string property, not %s",
                             e->name, p->name, mote__type_name(p->type));
        if (!(p->flags & MOTE_P_FULLTEXT))
            return mote__err(MOTE_INVALID, "%s.%s: match needs a full-text index on the "
                             "property (MOTE_P_FULLTEXT)", e->name, p->name);
        for (unsigned j = 0; j < i; j++)
            if (props[j] == props[i])
                return mote__err(MOTE_INVALID, "%s.%s: a match names a property once", e->name,
                                 p->name);
        if ((p->flags & MOTE_P_STEM) != (e->props[props[0]].flags & MOTE_P_STEM))
            return mote__err(MOTE_INVALID, "%s.%s and %s.%s: the properties of a match either "
                             "all stem their words (MOTE_P_STEM) or none does", e->name,
                             e->props[props[0]].name, e->name, p->name);
        if (weights && !(weights[i] >= 0 && weights[i] <= 1e9))
            return mote__err(MOTE_INVALID, "%s.%s: a match weight is a number from 0 to 1e9, "
                             "not %g", e->name, p->name, weights[i]);
    }
    p = &e->props[props[0]];
    if (!k)
        return mote__err(MOTE_INVALID, "%s.%s: match needs k >= 1", e->name, p->name);
    if (flags & ~(unsigned)MOTE_MATCH_ALL)
        return mote__err(MOTE_INVALID, "%s.%s: unknown match flags 0x%x", e->name, p->name,
                         flags);
    if (q->norder)
        return mote__err(MOTE_INVALID, "%s: a match query is ordered by score; it takes no "
                         "other order", e->name);
    int rc = mote__text_query_check(text, len, flags & MOTE_MATCH_ALL);
    if (rc)
        return rc;
    qmatch *m = mote__malloc(sizeof *m + len + 1);
    if (!m)
        return mote__err(MOTE_NOMEM, "out of memory");
    *m = (qmatch){.prop = props[0], .nprops = n, .flags = flags, .k = k, .len = len};
    for (unsigned i = 0; i < n; i++) {
        m->props[i] = props[i];
        m->w[i] = weights ? weights[i] : 1;
        m->weighted |= n > 1 || m->w[i] != 1;
    }
    if (len)
        memcpy(m->text, text, len);
    m->text[len] = 0;
    mote__free(q->match);
    q->match = m;
    return MOTE_OK;
}

int mote_query_match(mote_query *q, unsigned prop, const char *text, size_t len, uint64_t k,
                     unsigned flags)
{
    return mote_query_match_in(q, &prop, NULL, 1, text, len, k, flags);
}

int mote_query_search(mote_query *q, int how, unsigned ef)
{
    if (!q)
        return mote__err(MOTE_INVALID, "mote_query_search: query is NULL");
    if (how < MOTE_NEAR_AUTO || how > MOTE_NEAR_INDEX)
        return mote__err(MOTE_INVALID, "mote_query_search: unknown way %d", how);
    if (ef > 100000)
        return mote__err(MOTE_INVALID, "mote_query_search: ef %u is over 100,000", ef);
    q->near_how = how;
    q->near_ef = ef;
    return MOTE_OK;
}

int mote_query_limit(mote_query *q, uint64_t offset, uint64_t limit)
{
    if (!q)
        return mote__err(MOTE_INVALID, "mote_query_limit: query is NULL");
    q->offset = offset;
    q->limit = limit;
    return MOTE_OK;
}

int mote_query_fusion(mote_query *q, int how, double arg)
{
    if (!q)
        return mote__err(MOTE_INVALID, "mote_query_fusion: query is NULL");
    if (how == MOTE_FUSE_RRF) {
        if (!(arg >= 0 && arg <= 1e9))
            return mote__err(MOTE_INVALID, "mote_query_fusion: Reciprocal Rank Fusion's k "
                             "is a number from 0 (the default, %d) to 1e9, got %g", MOTE_RRF_K,
                             arg);
    } else if (how == MOTE_FUSE_WEIGHTED) {
        if (!(arg >= 0 && arg <= 1))
            return mote__err(MOTE_INVALID, "mote_query_fusion: the text's weight is a number "
                             "from 0 to 1, got %g", arg);
    } else {
        return mote__err(MOTE_INVALID, "mote_query_fusion: unknown fusion %d", how);
    }
    q->fuse = how;
    q->fuse_arg = arg;
    return MOTE_OK;
}

/* ---- planning ------------------------------------------------------------------ */

typedef struct range {
    uint8_t lo[IDX_MAX_VALUE + 16], hi[IDX_MAX_VALUE + 16];
    size_t lol, hil;
    int rev; /* walked from hi down to lo (a descending order) */
} range;

typedef struct plan {
    int leaf;        /* the index conjunct, -1 if none */
    const mprop *ip; /* index used (condition or order), NULL: scan */
    range *ranges;
    size_t nranges;
    int exact;       /* index ranges = the whole condition */
    int ordered;     /* output order is the requested order */
    uint64_t id_lo, id_hi; /* scan: the ids that can match */
    const qnode *id_in;    /* scan: an id IN conjunct whose ids (idset) are sparse in
                              [id_lo, id_hi], each looked up; else NULL */
    int down;        /* run_matches visits the highest ids first (top k) */
    int covered;     /* 1 + the conjunct the ranges make true (0: none) */
    const char *desc;
} plan;

/* Narrow [*lo, *hi] by id condition n; 1 if n is an EQ or IN. */
static int id_bounds(const qnode *n, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = n->nvals ? (uint64_t)n->vals[0].v.i : 0, l = 0, h = UINT64_MAX;
    switch (n->op) {
    case MOTE_EQ: l = h = a; break;
    case MOTE_BETWEEN: l = a, h = (uint64_t)n->vals[1].v.i; break;
    case MOTE_LT: if (a) h = a - 1; else l = 1, h = 0; break;
    case MOTE_LE: h = a; break;
    case MOTE_GT: if (a < UINT64_MAX) l = a + 1; else l = 1, h = 0; break;
    case MOTE_GE: l = a; break;
    case MOTE_IN:
        l = UINT64_MAX, h = 0;
        for (size_t i = 0; i < n->nvals; i++) {
            uint64_t x = (uint64_t)n->vals[i].v.i;
            l = x < l ? x : l;
            h = x > h ? x : h;
        }
        break;
    default: return 0; /* NE, NOT IN: no bound */
    }
    if (l > *lo)
        *lo = l;
    if (h < *hi)
        *hi = h;
    return n->op == MOTE_EQ || n->op == MOTE_IN;
}

/* Smallest key greater than every key starting with p. */
static size_t successor(uint8_t *p, size_t n)
{
    while (n && p[n - 1] == 0xFF)
        n--;
    if (n)
        p[n - 1]++;
    return n;
}

/* Can p's index on a JSON path serve JSON condition n? (Its path, an
 * operator with a range, values that have keys.) */
static int json_served(const mote_query *q, const qnode *n)
{
    const mprop *p = &q->e->props[n->prop];
    if (!p->jp || !p->index_tree || !mote__jpath_same(p->jp, n->jp))
        return 0;
    if (n->nvals && n->jtype != MOTE_T_INT64 && n->jtype != MOTE_T_FLOAT64 &&
        n->jtype != MOTE_T_BOOL && n->jtype != MOTE_T_STRING)
        return 0;
    return n->op == MOTE_EQ || n->op == MOTE_IN || n->op == MOTE_BETWEEN ||
           (n->op >= MOTE_LT && n->op <= MOTE_GE) || n->op == MOTE_IS_NULL ||
           n->op == MOTE_STARTS_WITH;
}

static int score(const mote_query *q, const qnode *n)
{
    if (n->kind == Q_JSON && !json_served(q, n))
        return 0;
    if (n->kind == Q_JSON)
        return n->op == MOTE_EQ ? 5 : n->op == MOTE_IN ? 4 : n->op == MOTE_BETWEEN ? 3 : 2;
    if ((n->kind != Q_LEAF && n->kind != Q_LINK) || !q->e->props[n->prop].index_tree)
        return 0;
    if ((n->flags & MOTE_Q_NOCASE) && n->op != MOTE_STARTS_WITH)
        return 0;
    switch (n->op) {
    case MOTE_EQ: return 5;
    case MOTE_IN: return 4;
    case MOTE_BETWEEN: return 3;
    case MOTE_LT: case MOTE_LE: case MOTE_GT: case MOTE_GE: case MOTE_IS_NULL:
        return 2;
    case MOTE_STARTS_WITH: return n->flags & MOTE_Q_NOCASE ? 0 : 2;
    case MOTE_NOT_NULL: return 1;
    default: return 0;
    }
}

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    size_t m = x->lol < y->lol ? x->lol : y->lol;
    int r = memcmp(x->lo, y->lo, m);
    return r ? r : (x->lol > y->lol) - (x->lol < y->lol);
}

/* n empty ranges. Not calloc: a range is 848 bytes of which a query uses a
 * few, and glibc's calloc skips its per-thread cache, so a query paid for
 * the allocator's bins and the zeroing in cache misses (a reader whose CPU
 * caches other processes keep cold: ARCHITECTURE.md, "Concurrency"). */
static range *new_ranges(size_t n)
{
    range *r = n <= SIZE_MAX / sizeof *r ? mote__malloc(n * sizeof *r) : NULL;
    for (size_t i = 0; r && i < n; i++)
        r[i].lol = r[i].hil = 0, r[i].rev = 0;
    return r;
}

/* The key of condition value v (of JSON condition type `type`) in an index
 * on a JSON path. Keys are a monotone function of the values (a number keys
 * as its nearest double, a long string as its first bytes), so a range
 * between the keys of two values, bounds included, holds every value
 * between them, and perhaps more (the records are checked). */
static size_t json_val_key(int type, const mote_value *v, uint8_t *out, int *cut)
{
    *cut = 0;
    if (type == MOTE_T_STRING)
        return mote__json_str_key(v->v.s.p, v->v.s.n, out, cut);
    return mote__json_num_key(type == MOTE_T_FLOAT64 ? v->v.f
                              : type == MOTE_T_BOOL  ? (double)(v->v.i != 0)
                                                     : (double)v->v.i,
                              out);
}

/* The ranges of an index on a JSON path for condition n (json_served):
 * wider than the condition where keys are rounded or cut; every candidate's
 * record is checked (the plan is never exact). Ranges of IN values that
 * overlap are merged, so no object is visited twice. */
static int json_ranges(const qnode *n, plan *pl)
{
    size_t nr = n->op == MOTE_IN ? n->nvals : 1;
    int type = n->jtype, cut;
    uint8_t kind = type == MOTE_T_STRING ? JKEY_STRING : JKEY_NUMBER;
    pl->ranges = new_ranges(nr ? nr : 1);
    if (!pl->ranges)
        return mote__err(MOTE_NOMEM, "out of memory");
    pl->nranges = nr;
    pl->exact = 0;
    for (size_t i = 0; i < nr; i++) {
        range *r = &pl->ranges[i];
        const mote_value *v = n->nvals ? &n->vals[n->op == MOTE_IN ? i : 0] : NULL;
        int op = n->op == MOTE_IN ? MOTE_EQ : n->op;
        if (v && type == MOTE_T_FLOAT64 && isnan(v->v.f)) { /* matches nothing */
            r->lol = r->hil = 1;
            r->lo[0] = r->hi[0] = 0;
            continue;
        }
        /* the kind's first key and the one past its last */
        r->lo[0] = r->hi[0] = 1;
        r->lo[1] = kind;
        r->hi[1] = (uint8_t)(kind + 1);
        r->lol = r->hil = 2;
        if (op == MOTE_IS_NULL) {
            r->lo[0] = 0;
            r->lol = r->hil = 1;
        } else if (op == MOTE_STARTS_WITH) {
            size_t l = json_val_key(type, v, r->lo, &cut);
            r->lol = cut ? l : l - 2; /* without the end mark: a prefix */
            memcpy(r->hi, r->lo, r->lol);
            r->hil = successor(r->hi, r->lol);
        } else {
            const mote_value *lo = op == MOTE_BETWEEN ? &n->vals[0] : v;
            const mote_value *hi = op == MOTE_BETWEEN ? &n->vals[1] : v;
            if (op != MOTE_LT && op != MOTE_LE)
                r->lol = json_val_key(type, lo, r->lo, &cut);
            if (op != MOTE_GT && op != MOTE_GE)
                r->hil = successor(r->hi, json_val_key(type, hi, r->hi, &cut));
        }
    }
    if (nr > 1) { /* in index order, overlaps merged */
        qsort(pl->ranges, nr, sizeof *pl->ranges, cmp_range);
        size_t w = 0;
        for (size_t i = 0; i < nr; i++) {
            range *a = w ? &pl->ranges[w - 1] : NULL, *b = &pl->ranges[i];
            size_t m = a && a->hil < b->lol ? a->hil : b->lol;
            if (!a || memcmp(b->lo, a->hi, m) > 0 || (!memcmp(b->lo, a->hi, m) && b->lol >= a->hil)) {
                pl->ranges[w++] = *b;
                continue;
            }
            /* they overlap: a ends where the later of the two ends (of two
             * ends equal as far as the shorter goes, the longer is later) */
            size_t mh = a->hil < b->hil ? a->hil : b->hil;
            int c = memcmp(b->hi, a->hi, mh);
            if (c > 0 || (!c && b->hil > a->hil)) {
                memcpy(a->hi, b->hi, b->hil);
                a->hil = b->hil;
            }
        }
        pl->nranges = w;
    }
    return MOTE_OK;
}

static int make_ranges(const mote_query *q, const qnode *n, plan *pl)
{
    if (n->kind == Q_JSON)
        return json_ranges(n, pl);
    const mprop *p = &q->e->props[n->prop];
    size_t nr = n->op == MOTE_IN ? n->nvals : 1;
    pl->ranges = new_ranges(nr ? nr : 1);
    if (!pl->ranges)
        return mote__err(MOTE_NOMEM, "out of memory");
    pl->nranges = nr;
    int cut = 0, c2 = 0;
    pl->exact = p->type != MOTE_T_FLOAT32;
    for (size_t i = 0; i < nr; i++) {
        range *r = &pl->ranges[i];
        const mote_value *v = n->nvals ? &n->vals[n->op == MOTE_IN ? i : 0] : NULL;
        switch (n->op) {
        case MOTE_EQ:
        case MOTE_IN:
            r->lol = mote__index_enc(p->type, v, r->lo, &cut);
            memcpy(r->hi, r->lo, r->lol);
            r->hil = successor(r->hi, r->lol);
            break;
        case MOTE_BETWEEN:
            r->lol = mote__index_enc(p->type, &n->vals[0], r->lo, &cut);
            r->hil = mote__index_enc(p->type, &n->vals[1], r->hi, &c2);
            r->hil = successor(r->hi, r->hil);
            cut |= c2;
            break;
        case MOTE_GT:
        case MOTE_GE:
            r->lol = mote__index_enc(p->type, v, r->lo, &cut);
            if (n->op == MOTE_GT)
                r->lol = successor(r->lo, r->lol);
            r->hi[0] = 2;
            r->hil = 1;
            break;
        case MOTE_LT:
        case MOTE_LE:
            r->lo[0] = 1;
            r->lol = 1;
            r->hil = mote__index_enc(p->type, v, r->hi, &cut);
            if (n->op == MOTE_LE)
                r->hil = successor(r->hi, r->hil);
            break;
        case MOTE_IS_NULL:
            r->lo[0] = 0;
            r->lol = 1;
            r->hi[0] = 1;
            r->hil = 1;
            break;
        case MOTE_NOT_NULL:
            r->lo[0] = 1;
            r->lol = 1;
            r->hi[0] = 2;
            r->hil = 1;
            break;
        case MOTE_STARTS_WITH: {
            size_t l = mote__index_enc(p->type, v, r->lo, &cut);
            r->lol = cut ? l : l - 2; /* without the end mark: a prefix */
            memcpy(r->hi, r->lo, r->lol);
            r->hil = successor(r->hi, r->lol);
            break;
        }
        }
        if (cut)
            pl->exact = 0;
    }
    if (n->op == MOTE_IN) { /* in index order, without duplicates */
        qsort(pl->ranges, nr, sizeof *pl->ranges, cmp_range);
        size_t w = 0;
        for (size_t i = 0; i < nr; i++)
            if (!w || cmp_range(&pl->ranges[w - 1], &pl->ranges[i]))
                pl->ranges[w++] = pl->ranges[i];
        pl->nranges = w;
    }
    return MOTE_OK;
}

/* Can one index range give the order `flags` of its own property? Index keys
 * hold NULL as 0x00 + id, before every value (0x01 ...), and equal values by
 * id. Walked up, that is the ascending order; walked down (the range marked
 * rev), the descending one with NULLs last, equal values still by id
 * (run_matches). A range without NULLs gives either NULL placement. */
static int walk_in_order(range *r, unsigned flags)
{
    int no_nulls = r->lol && r->lo[0] >= 1;
    if (flags & MOTE_Q_DESC) {
        if (!(flags & MOTE_Q_NULLS_LAST) && !no_nulls)
            return 0;
        r->rev = 1;
        return 1;
    }
    return !(flags & MOTE_Q_NULLS_LAST) || no_nulls;
}

static int access_plan(const mote_query *q, plan *pl);

/* The plan of q: its access path, which must read every candidate's record
 * when the entity has an expiry time (an expired object is no match). */
static int make_plan(const mote_query *q, plan *pl)
{
    int rc = access_plan(q, pl);
    if (q->e->expires >= 0)
        pl->exact = 0;
    return rc;
}

static int access_plan(const mote_query *q, plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->leaf = -1;
    pl->id_hi = UINT64_MAX;
    const qnode *root = q->root >= 0 ? &q->nodes[q->root] : NULL;
    int best = 0, id_few = 0, id_bound = 0;
    size_t nconj = 0;
    if (root && (root->kind == Q_LEAF || root->kind == Q_LINK || root->kind == Q_JSON)) {
        nconj = 1;
        if ((best = score(q, root)))
            pl->leaf = q->root;
    } else if (root && root->kind == Q_ID) {
        id_bound = 1;
        id_few = id_bounds(root, &pl->id_lo, &pl->id_hi);
        pl->id_in = root->op == MOTE_IN ? root : NULL;
    } else if (root && root->kind == Q_AND) {
        nconj = root->nkids;
        for (size_t i = 0; i < root->nkids; i++) {
            const qnode *k = &q->nodes[root->kids[i]];
            if (k->kind == Q_ID) {
                id_bound = 1;
                id_few |= id_bounds(k, &pl->id_lo, &pl->id_hi);
                if (k->op == MOTE_IN && (!pl->id_in || k->nidset < pl->id_in->nidset))
                    pl->id_in = k;
                continue;
            }
            int sc = score(q, k);
            if (sc > best) {
                best = sc;
                pl->leaf = root->kids[i];
            }
        }
    }
    if (id_few) /* a few ids beat any index */
        pl->leaf = -1;
    if (pl->leaf >= 0) {
        const qnode *n = &q->nodes[pl->leaf];
        pl->ip = &q->e->props[n->prop];
        int rc = make_ranges(q, n, pl);
        if (rc)
            return rc;
        if (pl->exact && nconj > 1) /* the ranges hold that conjunct: not tested */
            pl->covered = pl->leaf + 1;
        pl->exact = pl->exact && nconj == 1;
        /* one value's entries are in id order (the key ends with the id) */
        int one_value = pl->nranges == 1 && n->kind != Q_JSON &&
                        (n->op == MOTE_EQ || n->op == MOTE_IS_NULL ||
                         (n->op == MOTE_IN && n->nvals == 1));
        pl->ordered = (q->norder == 0 && one_value) ||
                      (q->norder == 1 && q->order[0].prop == n->prop && pl->nranges <= 1 &&
                       walk_in_order(pl->ranges, q->order[0].flags));
        pl->desc = "index";
        return MOTE_OK;
    }
    /* no index condition: walk the index of the first order property */
    if (!id_bound && q->norder == 1 && q->e->props[q->order[0].prop].index_tree) {
        pl->ip = &q->e->props[q->order[0].prop];
        unsigned f = q->order[0].flags;
        int split = f == MOTE_Q_DESC || f == MOTE_Q_NULLS_LAST; /* NULLs apart */
        pl->ranges = new_ranges(2);
        if (!pl->ranges)
            return mote__err(MOTE_NOMEM, "out of memory");
        pl->nranges = split ? 2 : 1;
        range *vals = &pl->ranges[f == MOTE_Q_DESC], *nulls = &pl->ranges[f != MOTE_Q_DESC];
        vals->lo[0] = 1; /* values: 0x01 ..., NULL: 0x00 id */
        vals->lol = split;
        vals->hi[0] = 0xFF;
        vals->hil = 1;
        vals->rev = (f & MOTE_Q_DESC) != 0;
        if (split) {
            nulls->lo[0] = 0;
            nulls->lol = 1;
            nulls->hi[0] = 1;
            nulls->hil = 1;
        }
        pl->exact = root == NULL;
        pl->ordered = 1;
        pl->desc = "index order";
        return MOTE_OK;
    }
    pl->exact = root == NULL;
    pl->ordered = q->norder == 0; /* a scan is in id order */
    if (pl->id_in && (pl->id_lo > pl->id_hi || (pl->id_hi - pl->id_lo) / ID_SEEK_GAP < pl->id_in->nidset))
        pl->id_in = NULL; /* dense enough: the range, object after object */
    pl->desc = pl->id_in ? "id seeks" : id_bound ? "id range" : "scan";
    return MOTE_OK;
}

static int near_use_index(mote_txn *t, const mote_query *q, const plan *pl, int *use);

const char *mote_query_plan(mote_txn *t, mote_query *q)
{
    plan pl;
    if (!q || make_plan(q, &pl))
        return "invalid";
    int use = 0;
    if (q->near && t && near_use_index(t, q, &pl, &use))
        use = 0;
    mote__free(pl.ranges);
    if (q->match && q->near)
        return q->root < 0 ? "hybrid: full-text match and nearest, fused"
                           : "hybrid: full-text match and nearest, filtered, fused";
    if (q->match)
        return q->root < 0 ? "full-text match" : "full-text match, filtered";
    if (!q->near)
        return pl.desc;
    if (use)
        return q->root < 0 ? "vector index nearest" : "vector index nearest, filtered";
    return !strcmp(pl.desc, "index") ? "exact nearest, index"
           : !strncmp(pl.desc, "id ", 3) ? "exact nearest, id range"
                                          : "exact nearest, scan";
}

/* ---- execution ------------------------------------------------------------------- */

/* Visits candidate ids (with their records when `need_rec`) in plan order. */
typedef int (*visit_fn)(void *ctx, uint64_t id, const mote_record *r);

static uint64_t be_id(const uint8_t *k) { return mote__be64(k); }

/* Read object id through a cursor on the object tree: consecutive ids
 * mostly stay in one leaf, where the cursor's seek is a local search. */
static int fetch_obj(mote_entity *e, mote_cursor *oc, uint64_t id, mote_record *r)
{
    int rc = mote__obj_seek(e, oc, id, r);
    if (rc == MOTE_NOTFOUND)
        return CORRUPT("%s: an index names object %llu, which does not exist", e->name,
                       (unsigned long long)id);
    return rc;
}

/* The object id of an index entry, and in *vlen the length of its value part
 * (a unique index keeps a value's id in the entry's value; NULLs, and every
 * entry of another index, end their key with the id). */
static uint64_t index_entry_id(mote_val k, mote_val v, int unique, size_t *vlen)
{
    const uint8_t *kd = k.data;
    if (unique && k.size && kd[0] != 0) {
        if (vlen)
            *vlen = k.size;
        return v.size == 8 ? rd64(v.data) : 0;
    }
    if (vlen)
        *vlen = k.size >= 8 ? k.size - 8 : 0;
    return k.size >= 8 ? be_id(kd + k.size - 8) : 0;
}

/* An index walk's visits: each id found is checked against the whole
 * condition (unless the ranges are exact) and handed to fn. */
typedef struct idwalk {
    mote_query *q;
    int exact;
    mote_cursor *oc;
    visit_fn fn;
    void *ctx;
    uint64_t *ids; /* walk_down: the ids of one value, highest first */
    size_t n, cap;
    uint8_t val[IDX_MAX_VALUE + 16];
    size_t vlen;
    int down; /* walk_down visits a value's ids highest first too */
} idwalk;

/* fn(ctx, ...) for record r if it matches q. */
static int admit_visit(const mote_query *q, const mote_record *r, visit_fn fn, void *ctx)
{
    if (q->test_late) /* the visitor tests it if it wants it */
        return fn(ctx, r->id, r);
    int mt = mote__query_admit(q, r);
    return mt < 0 ? -mt : mt ? fn(ctx, r->id, r) : MOTE_OK;
}

static int visit_id(idwalk *w, uint64_t id)
{
    if (w->exact)
        return w->fn(w->ctx, id, NULL);
    mote_record r;
    int rc = fetch_obj(w->q->e, w->oc, id, &r);
    return rc ? rc : admit_visit(w->q, &r, w->fn, w->ctx);
}

/* Visit the ids of the value held in w, lowest first (ties are by id in
 * either direction) unless w->down, and forget them. */
static int flush_value(idwalk *w)
{
    int rc = MOTE_OK;
    for (size_t i = 0; i < w->n && !rc; i++)
        rc = visit_id(w, w->ids[w->down ? i : w->n - 1 - i]);
    w->n = 0;
    return rc;
}

/* Walk range R from its top down: values in descending order, the ids of
 * one value gathered and visited in ascending order. */
static int walk_down(idwalk *w, mote_cursor *c, const range *R, int unique)
{
    int rc;
    w->n = 0;
    for (rc = mote_cursor_seek(c, R->hi, R->hil, MOTE_SEEK_LT); rc == MOTE_OK;
         rc = mote_cursor_prev(c)) {
        mote_val k, v;
        if ((rc = mote__cursor_entry(c, &k, &v))) /* c was just moved */
            break;
        size_t m = k.size < R->lol ? k.size : R->lol;
        int cmp = memcmp(k.data, R->lo, m);
        if (cmp < 0 || (cmp == 0 && k.size < R->lol))
            break;
        size_t vl;
        uint64_t id = index_entry_id(k, v, unique, &vl);
        if (vl > sizeof w->val)
            vl = sizeof w->val;
        if (w->n && (vl != w->vlen || memcmp(k.data, w->val, vl)) && (rc = flush_value(w)))
            break;
        if (!w->n) {
            memcpy(w->val, k.data, vl);
            w->vlen = vl;
        }
        if (w->n == w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 16;
            uint64_t *ids = mote__realloc(w->ids, cap * sizeof *ids);
            if (!ids) {
                rc = mote__err(MOTE_NOMEM, "out of memory");
                break;
            }
            w->ids = ids;
            w->cap = cap;
        }
        w->ids[w->n++] = id;
    }
    if (rc == MOTE_NOTFOUND) /* the index's start */
        rc = MOTE_OK;
    return rc ? rc : flush_value(w); /* below R, or at the start */
}

/* Iterate the matches of q (ignoring offset/limit and order) in plan order. */
static int run_matches(mote_txn *t, mote_query *q, const plan *pl, visit_fn fn, void *ctx)
{
    mote_entity *e = q->e;
    int rc;
    if (!pl->ip) { /* scan, from id_lo to id_hi */
        mote_cursor *c;
        uint8_t lo[8];
        if (pl->id_lo > pl->id_hi)
            return MOTE_OK;
        if ((rc = mote_cursor_open(t, e->eid, &c)))
            return rc;
        const qnode *in = pl->id_in;
        if (in) { /* a few ids spread out: a lookup of each (in order, once) */
            for (size_t i = 0; i < in->nidset && !rc; i++) {
                uint64_t id = in->idset[pl->down ? in->nidset - 1 - i : i];
                mote_record r;
                if (id < pl->id_lo || id > pl->id_hi)
                    continue;
                if ((rc = mote__obj_seek(e, c, id, &r)) == MOTE_NOTFOUND)
                    rc = MOTE_OK;
                else if (!rc)
                    rc = admit_visit(q, &r, fn, ctx);
            }
            mote_cursor_close(c);
            return rc;
        }
        mote__obj_tree_key(pl->down ? pl->id_hi : pl->id_lo, lo);
        for (rc = mote_cursor_seek(c, lo, 8, pl->down ? MOTE_SEEK_LE : MOTE_SEEK_GE); rc == MOTE_OK;
             rc = pl->down ? mote_cursor_prev(c) : mote_cursor_next(c)) {
            mote_val k, v;
            mote_record r;
            if ((rc = mote__cursor_entry(c, &k, &v))) /* c was just moved */
                break;
            uint64_t id = be_id(k.data);
            if (id > pl->id_hi || id < pl->id_lo) {
                rc = MOTE_NOTFOUND;
                break;
            }
            if ((rc = mote__record_init(&r, e, v.data, v.size, id)) ||
                (rc = admit_visit(q, &r, fn, ctx)))
                break;
        }
        mote_cursor_close(c);
        return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
    }
    int unique = (pl->ip->flags & MOTE_P_UNIQUE) != 0;
    mote_cursor *c, *oc = NULL;
    if ((rc = mote_cursor_open(t, pl->ip->index_tree, &c)))
        return rc;
    if (!pl->exact && (rc = mote_cursor_open(t, e->eid, &oc))) {
        mote_cursor_close(c);
        return rc;
    }
    idwalk w = {q, pl->exact, oc, fn, ctx, NULL, 0, 0, {0}, 0, pl->down};
    q->covered = pl->covered;
    for (size_t i = 0; i < pl->nranges && !rc; i++) {
        const range *R = &pl->ranges[pl->down ? pl->nranges - 1 - i : i];
        if (R->rev || pl->down) {
            rc = walk_down(&w, c, R, unique);
            continue;
        }
        for (rc = mote_cursor_seek(c, R->lo, R->lol, MOTE_SEEK_GE); rc == MOTE_OK;
             rc = mote_cursor_next(c)) {
            mote_val k, v;
            if ((rc = mote__cursor_entry(c, &k, &v))) /* c was just moved */
                break;
            size_t m = k.size < R->hil ? k.size : R->hil;
            int cmp = memcmp(k.data, R->hi, m);
            if (cmp > 0 || (cmp == 0 && k.size >= R->hil))
                break;
            if ((rc = visit_id(&w, index_entry_id(k, v, unique, NULL))))
                break;
        }
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
    }
    q->covered = 0;
    mote__free(w.ids);
    mote_cursor_close(c);
    mote_cursor_close(oc);
    return rc;
}

/* Collected matches: ids, with sort keys when sorting. */
typedef struct coll {
    mote_query *q;
    uint64_t *ids;
    size_t n, cap;
    uint8_t *keys; /* sort keys, each at koff[i] with klen[i] */
    size_t kbytes, kcap;
    size_t *koff;
    uint32_t *klen;
    int sorting;
    uint64_t stop_after; /* no sort: enough matches for offset + limit */
} coll;

/* The most bytes a sort key of q takes. */
static size_t sort_key_max(const mote_query *q)
{
    return q->norder * (IDX_MAX_VALUE + 16) + 8;
}

/* Object id's sort key (its order properties' index encodings, then its id)
 * into p, sort_key_max(q) bytes at most; its length in *len. */
static int sort_key(const mote_query *q, uint64_t id, const mote_record *r, uint8_t *p, size_t *len)
{
    uint8_t *k = p;
    if (!r) /* sorting plans always read records */
        return mote__err(MOTE_INVALID, "internal: sort key without a record");
    for (size_t i = 0; i < q->norder; i++) {
        mote_value v;
        int cut, rc = mote_record_get(r, q->order[i].prop, &v, NULL);
        if (rc)
            return rc;
        size_t l = mote__index_enc(q->e->props[q->order[i].prop].type, &v, p, &cut);
        /* NULL is 0x00 (first) or 0x02 (last) whatever the direction;
         * descending inverts the value bytes after the 0x01 marker */
        if (v.null && (q->order[i].flags & MOTE_Q_NULLS_LAST))
            p[0] = 2;
        if (q->order[i].flags & MOTE_Q_DESC)
            for (size_t j = 1; j < l; j++)
                p[j] = (uint8_t)~p[j];
        p += l;
    }
    p += mote__obj_tree_key(id, p);
    *len = (size_t)(p - k);
    return MOTE_OK;
}

static int coll_add(void *ctx, uint64_t id, const mote_record *r)
{
    coll *c = ctx;
    if (c->n == c->cap) {
        size_t n = c->cap ? c->cap * 2 : 64;
        uint64_t *ids = mote__realloc(c->ids, n * sizeof *ids);
        if (!ids)
            return mote__err(MOTE_NOMEM, "out of memory");
        c->ids = ids;
        if (c->sorting) {
            size_t *ko = mote__realloc(c->koff, n * sizeof *ko);
            if (ko)
                c->koff = ko;
            uint32_t *kl = ko ? mote__realloc(c->klen, n * sizeof *kl) : NULL;
            if (!kl)
                return mote__err(MOTE_NOMEM, "out of memory");
            c->klen = kl;
        }
        c->cap = n;
    }
    if (c->sorting) {
        int grc = mote__grow(&c->keys, &c->kcap, c->kbytes + sort_key_max(c->q));
        if (grc)
            return grc;
        size_t l;
        if ((grc = sort_key(c->q, id, r, c->keys + c->kbytes, &l)))
            return grc;
        c->koff[c->n] = c->kbytes;
        c->klen[c->n] = (uint32_t)l;
        c->kbytes += l;
    }
    c->ids[c->n++] = id;
    if (!c->sorting && c->stop_after && c->n >= c->stop_after)
        return -1; /* enough */
    return MOTE_OK;
}

static coll *sort_ctx;

static int cmp_sorted(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return mote__keycmp(sort_ctx->keys + sort_ctx->koff[x], sort_ctx->klen[x],
                    sort_ctx->keys + sort_ctx->koff[y], sort_ctx->klen[y]);
}

static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * TOP K. A sorted query with a limit needs only its first offset + limit
 * matches: a max-heap of that many sort keys (the last kept on top). The
 * walk hands every candidate over untested (test_late); once the heap is
 * full its key is made first, and one that sorts after the top is dropped
 * there, so the conditions (a JSON one scans text) are tested only on
 * candidates that would be kept, and nothing but the kept keys is sorted
 * (before, the test comes first: a match is kept whatever its key). The
 * walk visits the highest ids first for a descending order (the newest
 * objects: by a time they usually sort first), the lowest first otherwise,
 * so the heap fills with its winners early and most candidates are dropped
 * at the key. LangGraph's store search (the newest 10 of a namespace's 200
 * items with a JSON filter, 4,000 items): the query and its ten objects
 * 70-80 -> 46-50 us, the search 105 -> 72 us.
 */
#define TOP_MAX 1024 /* offset + limit beyond this: collect and sort all */

typedef struct kheap {
    mote_query *q;
    size_t k, n;    /* room for k keys, n held */
    size_t slot;    /* bytes per key slot (sort_key_max) */
    uint8_t *keys;  /* slot i: the key of heap entry i */
    uint32_t *klen;
    uint64_t *ids;
    uint8_t *key;   /* the candidate's key (slot k) */
} kheap;

static int kheap_cmp(const kheap *h, size_t a, size_t b)
{
    return mote__keycmp(h->keys + a * h->slot, h->klen[a], h->keys + b * h->slot, h->klen[b]);
}

/* Swap entries a and b, their keys through the candidate's slot (free
 * while sifting). */
static void kheap_swap(kheap *h, size_t a, size_t b)
{
    uint8_t *ka = h->keys + a * h->slot, *kb = h->keys + b * h->slot;
    memcpy(h->key, ka, h->klen[a]);
    memcpy(ka, kb, h->klen[b]);
    memcpy(kb, h->key, h->klen[a]);
    uint32_t l = h->klen[a];
    h->klen[a] = h->klen[b], h->klen[b] = l;
    uint64_t id = h->ids[a];
    h->ids[a] = h->ids[b], h->ids[b] = id;
}

static void kheap_sift_down(kheap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && kheap_cmp(h, l, m) > 0)
            m = l;
        if (r < h->n && kheap_cmp(h, r, m) > 0)
            m = r;
        if (m == i)
            return;
        kheap_swap(h, i, m);
        i = m;
    }
}

static int top_add(void *ctx, uint64_t id, const mote_record *r)
{
    kheap *h = ctx;
    size_t l;
    int full = h->n == h->k, rc, m;
    /* until the heap is full every match is kept: the test first (most
     * candidates of a selective query end there, without a key) */
    if (!full && (m = mote__query_admit(h->q, r)) <= 0)
        return -m;
    if ((rc = sort_key(h->q, id, r, h->key, &l)))
        return rc;
    if (full && mote__keycmp(h->key, (uint32_t)l, h->keys, h->klen[0]) >= 0)
        return MOTE_OK; /* sorts after every kept one: not tested */
    if (full && (m = mote__query_admit(h->q, r)) <= 0)
        return -m;
    size_t i = full ? 0 : h->n++; /* full: the new key replaces the top */
    memcpy(h->keys + i * h->slot, h->key, l);
    h->klen[i] = (uint32_t)l;
    h->ids[i] = id;
    if (i == 0) {
        kheap_sift_down(h, 0);
        return MOTE_OK;
    }
    for (; i > 0 && kheap_cmp(h, i, (i - 1) / 2) > 0; i = (i - 1) / 2) /* sift up */
        kheap_swap(h, i, (i - 1) / 2);
    return MOTE_OK;
}

/* The first k matches of sorted query q by plan pl, in order: ids[0..*n). */
static int top_matches(mote_txn *t, mote_query *q, plan *pl, size_t k, uint64_t **ids, size_t *n)
{
    kheap h = {q, k, 0, sort_key_max(q), NULL, NULL, NULL, NULL};
    h.keys = mote__malloc((k + 1) * h.slot);
    h.klen = mote__malloc(k * sizeof *h.klen);
    h.ids = mote__malloc(k * sizeof *h.ids);
    int rc = h.keys && h.klen && h.ids ? MOTE_OK : mote__err(MOTE_NOMEM, "out of memory");
    if (!rc) {
        h.key = h.keys + k * h.slot;
        pl->down = (q->order[0].flags & MOTE_Q_DESC) != 0;
        q->test_late = 1;
        rc = run_matches(t, q, pl, top_add, &h);
        q->test_late = 0;
    }
    size_t count = h.n;
    for (size_t m = count; !rc && m > 1; m--) { /* the last kept goes off the top to the back */
        kheap_swap(&h, 0, m - 1);
        h.n = m - 1;
        kheap_sift_down(&h, 0);
    }
    mote__free(h.keys);
    mote__free(h.klen);
    if (rc) {
        mote__free(h.ids);
        return rc;
    }
    *ids = h.ids;
    *n = count;
    return MOTE_OK;
}

int mote__query_check(mote_txn *t, mote_query *q)
{
    if (!t || !q)
        return mote__err(MOTE_INVALID, "transaction or query is NULL");
    if (q->e->s != t->s)
        return mote__err(MOTE_INVALID, "query of another store");
    if (q->e->expires >= 0)
        q->now = mote__txn_now(t);
    return mote__entity_usable(q->e, t);
}


/* Resolve the relation conditions of q for this run: the ids of each
 * target query become an IN list (to-one) or a sorted set of sources. */
static int resolve_links(mote_txn *t, mote_query *q)
{
    for (size_t i = 0; i < q->nn; i++) {
        qnode *n = &q->nodes[i];
        if (n->kind != Q_LINK)
            continue;
        mote_query *sub = n->sub;
        uint64_t off = sub->offset, lim = sub->limit;
        size_t nord = sub->norder, ntarget;
        uint64_t *target;
        sub->offset = sub->limit = 0;
        sub->norder = 0;
        int rc = mote__query_matches(t, sub, &target, &ntarget);
        sub->offset = off;
        sub->limit = lim;
        sub->norder = nord;
        if (rc)
            return rc;
        if (q->e->props[n->prop].type == MOTE_T_TOONE) {
            mote_value *v = mote__malloc((ntarget + 1) * sizeof *v);
            if (!v) {
                mote__free(target);
                return mote__err(MOTE_NOMEM, "out of memory");
            }
            for (size_t k = 0; k < ntarget; k++) {
                memset(&v[k], 0, sizeof v[k]);
                v[k].v.i = (int64_t)target[k];
            }
            free_vals(n);
            n->vals = v;
            n->nvals = ntarget;
            n->sorted = 1; /* the matches of a query without an order: in id order */
        } else { /* sources linking to any target, through the backlinks */
            uint64_t *set = NULL;
            size_t nset = 0;
            for (size_t k = 0; !rc && k < ntarget; k++) {
                uint64_t *src;
                size_t ns;
                if ((rc = mote_backlinks(t, q->e, n->prop, target[k], &src, &ns)))
                    break;
                uint64_t *grown = ns ? mote__realloc(set, (nset + ns) * sizeof *set) : set;
                if (ns && !grown) {
                    mote__free(src);
                    rc = mote__err(MOTE_NOMEM, "out of memory");
                    break;
                }
                set = grown;
                if (ns)
                    memcpy(set + nset, src, ns * sizeof *set);
                nset += ns;
                mote__free(src);
            }
            if (!rc)
                nset = mote__sort_unique_u64(set, nset);
            mote__free(n->idset);
            n->idset = set;
            n->nidset = nset;
        }
        mote__free(target);
        if (rc)
            return rc;
    }
    return MOTE_OK;
}

/*
 * Plan a run: resolve relation conditions, choose the access path, and for
 * an exact single index range jump over the offset with the index's ranks.
 * *off is the offset still to skip; *empty is set when the offset is past
 * the end. The caller frees pl->ranges.
 */
static int prepare_run(mote_txn *t, mote_query *q, plan *pl, uint64_t *off, int *empty)
{
    *empty = 0;
    *off = q->offset;
    memset(pl, 0, sizeof *pl);
    int rc = mote__query_check(t, q);
    if (!rc)
        rc = resolve_links(t, q);
    if (!rc)
        rc = make_plan(q, pl);
    if (rc)
        return rc;
    if (!pl->ordered && q->norder > 0)
        pl->exact = 0; /* sorting by properties reads the records */
    if (!(pl->ordered && pl->exact && pl->ip && pl->nranges == 1 && !pl->ranges[0].rev && *off))
        return MOTE_OK;
    /* skip the offset by rank: start the range at the key `offset` entries in */
    uint64_t lo, hi;
    range *R = &pl->ranges[0];
    size_t kl;
    rc = mote__kv_range_ranks(t, pl->ip->index_tree, R->lo, R->lol, R->hi, R->hil, &lo, &hi);
    if (!rc && lo + *off >= hi) {
        *empty = 1;
        return MOTE_OK;
    }
    if (!rc)
        rc = mote__kv_key_at(t, pl->ip->index_tree, lo + *off, R->lo, sizeof R->lo, &kl);
    if (!rc) {
        R->lol = kl;
        *off = 0;
    }
    return rc;
}

/* ---- nearest neighbours, exact (mote_query_nearest) -------------------------------- */

/* The k nearest so far: a max-heap of (distance, id), the farthest on top. */
typedef struct nheap {
    const qnear *nr;
    const vec_kernels *K;
    double *dist;
    uint64_t *ids;
    size_t n, cap;
} nheap;

/* Is (da, ia) farther than (db, ib)? (ties by id: the larger id is farther) */
static int farther(double da, uint64_t ia, double db, uint64_t ib)
{
    return da > db || (da == db && ia > ib);
}

static void nheap_sift_down(nheap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && farther(h->dist[l], h->ids[l], h->dist[m], h->ids[m]))
            m = l;
        if (r < h->n && farther(h->dist[r], h->ids[r], h->dist[m], h->ids[m]))
            m = r;
        if (m == i)
            return;
        double d = h->dist[i];
        uint64_t id = h->ids[i];
        h->dist[i] = h->dist[m], h->ids[i] = h->ids[m];
        h->dist[m] = d, h->ids[m] = id;
        i = m;
    }
}

/* The distance of a stored vector (dim little-endian floats) from the query's. */
static double near_distance(const qnear *nr, const vec_kernels *K, const uint8_t *a)
{
    double d;
    if (nr->metric == MOTE_DIST_EUCLIDEAN) {
        d = sqrt((double)K->l2sq(a, nr->vec, nr->dim));
    } else if (nr->metric == MOTE_DIST_DOT) {
        d = -(double)K->dot(a, nr->vec, nr->dim);
    } else {
        float dot, aa;
        K->dot_norm(a, nr->vec, nr->dim, &dot, &aa);
        double c = aa > 0 && nr->qq > 0 ? (double)dot / (sqrt((double)aa) * sqrt((double)nr->qq))
                                        : 0;
        d = 1.0 - (c > 1 ? 1 : c < -1 ? -1 : c);
    }
    return isnan(d) ? INFINITY : d; /* (a stored NaN sorts last) */
}

static int near_push(nheap *h, uint64_t id, double d);

static int near_add(void *ctx, uint64_t id, const mote_record *r)
{
    nheap *h = ctx;
    mote_value v;
    int rc = mote_record_get(r, h->nr->prop, &v, NULL);
    if (rc || !has_vector(&v))
        return rc;
    if (v.v.s.n != (size_t)h->nr->dim * 4)
        return CORRUPT("%s: object %llu holds a vector of %zu bytes", r->e->name,
                       (unsigned long long)id, v.v.s.n);
    return near_push(h, id, near_distance(h->nr, h->K, v.v.s.p));
}

/* Object id at distance d into h, if among the k nearest so far. */
static int near_push(nheap *h, uint64_t id, double d)
{
    if (h->n == h->nr->k) { /* full: replace the farthest if this one is nearer */
        if (!farther(h->dist[0], h->ids[0], d, id))
            return MOTE_OK;
        h->dist[0] = d;
        h->ids[0] = id;
        nheap_sift_down(h, 0);
        return MOTE_OK;
    }
    if (h->n == h->cap) {
        size_t n = h->cap ? h->cap * 2 : 64;
        if (n > h->nr->k)
            n = (size_t)h->nr->k;
        double *dv = mote__realloc(h->dist, n * sizeof *dv);
        if (dv)
            h->dist = dv;
        uint64_t *iv = dv ? mote__realloc(h->ids, n * sizeof *iv) : NULL;
        if (!iv)
            return mote__err(MOTE_NOMEM, "out of memory");
        h->ids = iv;
        h->cap = n;
    }
    size_t i = h->n++; /* sift up */
    while (i > 0 && farther(d, id, h->dist[(i - 1) / 2], h->ids[(i - 1) / 2])) {
        h->dist[i] = h->dist[(i - 1) / 2];
        h->ids[i] = h->ids[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->dist[i] = d;
    h->ids[i] = id;
    return MOTE_OK;
}

/*
 * Whether to search a nearest query through its property's vector index:
 * not when told to search exactly or when there is no index for its
 * distance; not (unless told to) when the index is small, or when the
 * query's conditions select few objects through a value index: comparing
 * them all costs less than walking the graph past the others, and is exact.
 */
static int near_use_index(mote_txn *t, const mote_query *q, const plan *pl, int *use)
{
    const qnear *nr = q->near;
    const mprop *p = &q->e->props[nr->prop];
    *use = 0;
    if (q->near_how == MOTE_NEAR_EXACT || !p->vindex_tree || p->hmetric != nr->metric)
        return MOTE_OK;
    if (q->near_how == MOTE_NEAR_INDEX) {
        *use = 1;
        return MOTE_OK;
    }
    uint64_t size;
    int rc = mote__hnsw_size(t, q->e, nr->prop, &size);
    if (rc || size < MOTE_HNSW_EXACT_BELOW)
        return rc;
    *use = 1;
    if (q->root < 0 || !pl->ip)
        return MOTE_OK;
    uint64_t cand = 0;
    for (size_t i = 0; i < pl->nranges; i++) {
        const range *R = &pl->ranges[i];
        uint64_t lo, hi;
        if ((rc = mote__kv_range_ranks(t, pl->ip->index_tree, R->lo, R->lol, R->hi, R->hil,
                                       &lo, &hi)))
            return rc;
        cand += hi - lo;
    }
    *use = cand > MOTE_HNSW_EXACT_BELOW && cand > size / NEAR_EXACT_SHARE;
    return MOTE_OK;
}

/* A nearest query's filter in an index search: does object id match? */
typedef struct nfilter {
    mote_query *q;
    mote_cursor *oc;
} nfilter;

static int near_accept(void *ctx, uint64_t id)
{
    nfilter *f = ctx;
    mote_record r;
    int rc = fetch_obj(f->q->e, f->oc, id, &r);
    return rc ? -rc : mote__query_admit(f->q, &r);
}

/* A result's exact distance from the index's row of it (hnear.rowdist). */
static double near_rowdist(void *ctx, const uint8_t *row)
{
    const nheap *h = ctx;
    return near_distance(h->nr, h->K, row);
}

/* The k nearest through the index into h (*done = 0: the index did not
 * answer, or found fewer than k: search exactly). */
static int near_index(mote_txn *t, mote_query *q, nheap *h, int *done)
{
    const qnear *nr = q->near;
    nfilter f = {q, NULL};
    hnear r = {.vec = nr->vec, .metric = nr->metric, .want = nr->k, .ef = q->near_ef,
               .force = q->near_how == MOTE_NEAR_INDEX,
               .accept = query_filtered(q) ? near_accept : NULL, .actx = &f,
               .rowdist = near_rowdist, .dctx = h};
    int rc = mote_cursor_open(t, q->e->eid, &f.oc);
    *done = 0;
    if (!rc)
        rc = mote__hnsw_nearest(t, q->e, nr->prop, &r);
    /* exact distances, as an exact search gives them (from the index's rows,
     * which are the stored vectors), and their order */
    for (size_t i = 0; !rc && r.served && r.n == nr->k && i < r.n; i++) {
        mote_record rec;
        if (r.dist)
            rc = near_push(h, r.ids[i], r.dist[i]);
        else if (!(rc = fetch_obj(q->e, f.oc, r.ids[i], &rec)))
            rc = near_add(h, r.ids[i], &rec);
    }
    *done = !rc && r.served && r.n == nr->k;
    mote_cursor_close(f.oc);
    mote__free(r.ids);
    mote__free(r.dist);
    return rc;
}

/* Offset and limit within ranked results ids[0..*n) and their scores. */
static void ranked_window(const mote_query *q, uint64_t *ids, double *score, size_t *n)
{
    size_t count = *n, start = q->offset < count ? (size_t)q->offset : count;
    size_t cnt = count - start;
    if (q->limit && cnt > q->limit)
        cnt = (size_t)q->limit;
    if (start && cnt) {
        memmove(ids, ids + start, cnt * sizeof *ids);
        memmove(score, score + start, cnt * sizeof *score);
    }
    *n = cnt;
}

/* The k best matches of a full-text query by BM25 score, highest first,
 * that also meet its conditions (the candidates are taken in score order
 * and each one's record evaluated until k have met them), after offset and
 * limit: ids and scores (malloc'd; *score may be NULL if not wanted). */
static int match_run(mote_txn *t, mote_query *q, uint64_t **ids, double **score, size_t *n,
                     int window)
{
    const qmatch *m = q->match;
    const mprop *p = &q->e->props[m->prop];
    uint64_t *id = NULL;
    double *sc = NULL;
    size_t na = 0, k = 0;
    mote_cursor *oc = NULL;
    uint32_t trees[MOTE_MATCH_PROPS_MAX];
    int rc = mote__query_check(t, q);
    if (!rc)
        rc = resolve_links(t, q);
    for (unsigned i = 0; !rc && i < m->nprops; i++)
        if (!(trees[i] = q->e->props[m->props[i]].text_tree)) /* a handle of a definition
                                                                   without the index */
            rc = mote__err(MOTE_INVALID, "%s.%s: match needs a full-text index on the "
                           "property", q->e->name, q->e->props[m->props[i]].name);
    if (!rc && t->write) /* this transaction's own changes */
        rc = mote__text_flush(t);
    int flags = (int)(m->flags & MOTE_MATCH_ALL) | (p->flags & MOTE_P_STEM ? MOTE_TOKEN_STEM : 0);
    uint64_t objects = 0; /* (several properties: how many objects may have a text) */
    if (!rc && m->nprops > 1)
        rc = mote_kv_count(t, q->e->eid, NULL, 0, NULL, 0, &objects);
    int filtered = query_filtered(q); /* (then every match, in score order, until k pass) */
    size_t want = filtered ? 0 : (size_t)m->k;
    if (!rc && m->weighted)
        rc = mote__text_search_in(t, trees, m->w, m->nprops, objects, m->text, m->len, flags,
                                  want, &id, &sc, &na);
    else if (!rc)
        rc = mote__text_search(t, p->text_tree, m->text, m->len, flags, want, &id, &sc, &na);
    if (!rc && filtered)
        rc = mote_cursor_open(t, q->e->eid, &oc);
    for (size_t i = 0; !rc && i < na && k < m->k; i++) {
        if (oc) {
            mote_record r;
            if ((rc = mote__obj_seek(q->e, oc, id[i], &r)) == MOTE_NOTFOUND)
                rc = CORRUPT("%s.%s: the full-text index holds object %llu, which is not "
                             "stored", q->e->name, p->name, (unsigned long long)id[i]);
            int ok = rc ? 0 : mote__query_admit(q, &r);
            if (ok < 0)
                rc = -ok;
            if (rc || !ok)
                continue;
        }
        id[k] = id[i];
        sc[k++] = sc[i];
    }
    mote_cursor_close(oc);
    if (rc) {
        mote__free(id);
        mote__free(sc);
        return rc;
    }
    if (window)
        ranked_window(q, id, sc, &k);
    *ids = id;
    *n = k;
    if (score)
        *score = sc;
    else
        mote__free(sc);
    return MOTE_OK;
}

/* The k nearest matches, nearest first (after offset and limit if
 * `window`): ids and distances (malloc'd; *dist may be NULL if not
 * wanted). */
static int near_run(mote_txn *t, mote_query *q, uint64_t **ids, double **dist, size_t *n,
                    int window)
{
    plan pl;
    int rc = mote__query_check(t, q);
    if (!rc)
        rc = resolve_links(t, q);
    if (!rc)
        rc = make_plan(q, &pl);
    if (rc)
        return rc;
    pl.exact = 0; /* every candidate's record: its vector */
    nheap h = {q->near, mote__vec_kernels(), NULL, NULL, 0, 0};
    int use = 0, done = 0;
    rc = near_use_index(t, q, &pl, &use);
    if (!rc && use)
        rc = near_index(t, q, &h, &done);
    if (!rc && !done) {
        h.n = 0;
        rc = run_matches(t, q, &pl, near_add, &h);
    }
    mote__free(pl.ranges);
    if (rc) {
        mote__free(h.dist);
        mote__free(h.ids);
        return rc;
    }
    /* nearest first: the farthest goes off the top to the back, in turn */
    size_t count = h.n;
    for (size_t m = count; m > 1; m--) {
        double d = h.dist[0];
        uint64_t id = h.ids[0];
        h.dist[0] = h.dist[m - 1], h.ids[0] = h.ids[m - 1];
        h.dist[m - 1] = d, h.ids[m - 1] = id;
        h.n = m - 1;
        nheap_sift_down(&h, 0);
    }
    if (window)
        ranked_window(q, h.ids, h.dist, &count);
    *ids = h.ids;
    *n = count;
    if (dist)
        *dist = h.dist;
    else
        mote__free(h.dist);
    return MOTE_OK;
}

/* An object of a hybrid query: its id, its rank in either list (0: not in
 * it) and its score there, then its fused score. */
typedef struct fused {
    uint64_t id;
    size_t rank[2];
    double part[2];
    double score;
} fused;

static int cmp_fused_id(const void *x, const void *y)
{
    const fused *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_fused_score(const void *x, const void *y)
{
    const fused *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* What list l's score `v` is worth in a weighted fusion: min-max scaled
 * over the list (its best 1, its worst 0; all equal: 1). The match's
 * scores are better higher (l = 0), the distances lower (l = 1). */
static double scaled(double lo, double hi, int l, double v)
{
    if (!(hi > lo))
        return 1.0;
    return l == 0 ? (v - lo) / (hi - lo) : (hi - v) / (hi - lo);
}

/* A hybrid query (a match and a nearest clause): the k best of each, each
 * filtered by the conditions, fused (mote.h, mote_query_fusion): by
 * Reciprocal Rank Fusion, an object's score is the sum over the lists that
 * hold it of 1 / (k + its rank there, from 1); weighted, w times its scaled
 * match score plus (1 - w) times its scaled distance (0 where a list does
 * not hold it). Best first, ties by id; then offset and limit. */
static int hybrid_run(mote_txn *t, mote_query *q, uint64_t **ids, double **score, size_t *n)
{
    uint64_t *id[2] = {NULL, NULL};
    double *sc[2] = {NULL, NULL};
    size_t cnt[2] = {0, 0};
    fused *f = NULL;
    int rc = match_run(t, q, &id[0], &sc[0], &cnt[0], 0);
    if (!rc)
        rc = near_run(t, q, &id[1], &sc[1], &cnt[1], 0);
    if (!rc && !(f = mote__malloc((cnt[0] + cnt[1] + 1) * sizeof *f)))
        rc = mote__err(MOTE_NOMEM, "out of memory");
    size_t m = 0;
    for (int l = 0; !rc && l < 2; l++)
        for (size_t i = 0; i < cnt[l]; i++) {
            f[m] = (fused){.id = id[l][i]};
            f[m].rank[l] = i + 1;
            f[m++].part[l] = sc[l][i];
        }
    uint64_t *oi = NULL;
    double *os = NULL;
    if (!rc) { /* one entry per object, its ranks and scores in both lists */
        qsort(f, m, sizeof *f, cmp_fused_id);
        size_t w = 0;
        for (size_t i = 0; i < m; i++) {
            if (w && f[w - 1].id == f[i].id) {
                for (int l = 0; l < 2; l++)
                    if (f[i].rank[l]) {
                        f[w - 1].rank[l] = f[i].rank[l];
                        f[w - 1].part[l] = f[i].part[l];
                    }
            } else {
                f[w++] = f[i];
            }
        }
        m = w;
        double k = q->fuse_arg > 0 ? q->fuse_arg : MOTE_RRF_K, lo[2] = {0, 0}, hi[2] = {0, 0};
        for (int l = 0; l < 2; l++)
            for (size_t i = 0; i < cnt[l]; i++) {
                lo[l] = i == 0 || sc[l][i] < lo[l] ? sc[l][i] : lo[l];
                hi[l] = i == 0 || sc[l][i] > hi[l] ? sc[l][i] : hi[l];
            }
        for (size_t i = 0; i < m; i++)
            for (int l = 0; l < 2; l++)
                if (f[i].rank[l] && q->fuse == MOTE_FUSE_WEIGHTED)
                    f[i].score += (l == 0 ? q->fuse_arg : 1.0 - q->fuse_arg) *
                                  scaled(lo[l], hi[l], l, f[i].part[l]);
                else if (f[i].rank[l])
                    f[i].score += 1.0 / (k + (double)f[i].rank[l]);
        qsort(f, m, sizeof *f, cmp_fused_score);
        oi = mote__malloc((m + 1) * sizeof *oi);
        os = mote__malloc((m + 1) * sizeof *os);
        if (!oi || !os)
            rc = mote__err(MOTE_NOMEM, "out of memory");
    }
    if (!rc) {
        for (size_t i = 0; i < m; i++) {
            oi[i] = f[i].id;
            os[i] = f[i].score;
        }
        ranked_window(q, oi, os, &m);
        *ids = oi;
        *n = m;
        if (score)
            *score = os;
        else
            mote__free(os);
    } else {
        mote__free(oi);
        mote__free(os);
    }
    for (int l = 0; l < 2; l++) {
        mote__free(id[l]);
        mote__free(sc[l]);
    }
    mote__free(f);
    return rc;
}

/* The best matches of a ranked query, best first, after offset and limit:
 * ids and scores (distances for a nearest query; malloc'd; *score may be
 * NULL if not wanted). */
static int nearest_run(mote_txn *t, mote_query *q, uint64_t **ids, double **score, size_t *n)
{
    *ids = NULL;
    if (score)
        *score = NULL;
    *n = 0;
    if (q->match && q->near)
        return hybrid_run(t, q, ids, score, n);
    if (q->match)
        return match_run(t, q, ids, score, n, 1);
    return near_run(t, q, ids, score, n, 1);
}

/*
 * Deferred JSON conditions. A sorted query whose offset + limit is beyond
 * TOP_MAX (smaller ones keep a heap: "TOP K") keeps only the first offset +
 * limit matches in its order, but every candidate would have its JSON read
 * (json.c scans the text up to the key, often past long strings). The first
 * pass takes the JSON conditions as holding: condition trees have no
 * negation (NOT is folded into the operators), so its matches are a
 * superset. After the sort the candidates are checked whole, in order, until
 * enough match: for a query on 200 candidates where one in eight matches, 80
 * JSON reads instead of 200.
 */
static int has_json(const mote_query *q)
{
    for (size_t i = 0; i < q->nn; i++)
        if (q->nodes[i].kind == Q_JSON)
            return 1;
    return 0;
}

/* The first `want` ids of ids[0..*n) (in their order) whose records match
 * q whole: kept at the front, *n their number. */
static int check_deferred(mote_txn *t, mote_query *q, uint64_t *ids, size_t *n, uint64_t want)
{
    mote_cursor *oc;
    size_t k = 0;
    int rc = mote_cursor_open(t, q->e->eid, &oc);
    for (size_t i = 0; !rc && i < *n && k < want; i++) {
        mote_record r;
        if ((rc = fetch_obj(q->e, oc, ids[i], &r)))
            break;
        int m = mote__query_admit(q, &r);
        if (m < 0)
            rc = -m;
        else if (m)
            ids[k++] = ids[i];
    }
    mote_cursor_close(oc);
    *n = k;
    return rc;
}

/* The matching ids after order, offset and limit. On error *ids is NULL. */
int mote__query_matches(mote_txn *t, mote_query *q, uint64_t **ids, size_t *n)
{
    plan pl;
    uint64_t off;
    int empty;
    *ids = NULL;
    *n = 0;
    if (q->near || q->match)
        return nearest_run(t, q, ids, NULL, n);
    coll c;
    memset(&c, 0, sizeof c);
    c.q = q;
    int rc = prepare_run(t, q, &pl, &off, &empty);
    if (rc || empty) {
        mote__free(pl.ranges);
        return rc;
    }
    /* without an order, results come in id order */
    int id_sort = !pl.ordered && q->norder == 0;
    c.sorting = !pl.ordered && !id_sort;
    /* the matches the page needs: offset + limit (0: all; the sum saturates,
     * as a limit of UINT64_MAX means all) */
    uint64_t want = !q->limit ? 0 : q->limit > UINT64_MAX - off ? UINT64_MAX : off + q->limit;
    if (pl.ordered)
        c.stop_after = want;
    if (c.sorting && want && want <= TOP_MAX) {
        rc = top_matches(t, q, &pl, (size_t)want, &c.ids, &c.n);
        mote__free(pl.ranges);
        if (rc)
            return rc;
        goto page;
    }
    q->defer_json = c.sorting && q->limit && has_json(q);
    rc = run_matches(t, q, &pl, coll_add, &c);
    if (rc == -1)
        rc = MOTE_OK;
    mote__free(pl.ranges);
    if (!rc && c.sorting && c.n > 1) {
        size_t *perm = mote__malloc(c.n * sizeof *perm);
        uint64_t *sorted = perm ? mote__malloc(c.n * sizeof *sorted) : NULL;
        if (!sorted) {
            mote__free(perm);
            rc = mote__err(MOTE_NOMEM, "out of memory sorting");
        } else {
            for (size_t i = 0; i < c.n; i++)
                perm[i] = i;
            pthread_mutex_lock(&sort_mu);
            sort_ctx = &c;
            qsort(perm, c.n, sizeof *perm, cmp_sorted);
            pthread_mutex_unlock(&sort_mu);
            for (size_t i = 0; i < c.n; i++)
                sorted[i] = c.ids[perm[i]];
            mote__free(c.ids);
            c.ids = sorted;
            mote__free(perm);
        }
    }
    if (!rc && id_sort && c.n > 1)
        qsort(c.ids, c.n, sizeof *c.ids, mote__cmp_u64);
    if (q->defer_json) {
        q->defer_json = 0;
        if (!rc)
            rc = check_deferred(t, q, c.ids, &c.n, want);
    }
    mote__free(c.keys);
    mote__free(c.koff);
    mote__free(c.klen);
    if (rc) {
        mote__free(c.ids);
        return rc;
    }
page:;
    size_t start = off < c.n ? (size_t)off : c.n;
    size_t cnt = c.n - start;
    if (q->limit && cnt > q->limit)
        cnt = (size_t)q->limit;
    if (start)
        memmove(c.ids, c.ids + start, cnt * sizeof *c.ids);
    *ids = c.ids;
    *n = cnt;
    return MOTE_OK;
}

int mote_query_ids(mote_txn *t, mote_query *q, uint64_t **ids, size_t *n)
{
    IMPLICIT(t, q ? q->e : NULL, 0, mote_query_ids(t_, q, ids, n));
    if (!ids || !n)
        return mote__err(MOTE_INVALID, "mote_query_ids: NULL argument");
    *ids = NULL;
    *n = 0;
    return mote__query_matches(t, q, ids, n);
}

int mote_query_scored(mote_txn *t, mote_query *q, uint64_t **ids, double **dist, size_t *n)
{
    IMPLICIT(t, q ? q->e : NULL, 0, mote_query_scored(t_, q, ids, dist, n));
    if (!ids || !dist || !n)
        return mote__err(MOTE_INVALID, "mote_query_scored: NULL argument");
    *ids = NULL;
    *dist = NULL;
    *n = 0;
    if (!q->near && !q->match)
        return mote__err(MOTE_INVALID, "%s: mote_query_scored of a query that is neither a "
                         "nearest nor a match query", q->e->name);
    return nearest_run(t, q, ids, dist, n);
}

/* find without collecting ids: the plan's order is the output order */
typedef struct direct {
    mote_txn *t;
    mote_cursor *oc; /* on the object tree, for exact index plans */
    mote_query *q;
    mote_record_fn fn;
    void *ctx;
    uint64_t skip, left; /* left 0: no limit */
    int limited;
} direct;

static int direct_one(void *ctx, uint64_t id, const mote_record *r)
{
    direct *d = ctx;
    if (d->skip) {
        d->skip--;
        return MOTE_OK;
    }
    mote_record got;
    if (!r) { /* exact index plan: fetch the object */
        int rc = fetch_obj(d->q->e, d->oc, id, &got);
        if (rc)
            return rc;
        r = &got;
    }
    int rc = d->fn(d->ctx, r);
    if (rc)
        return rc;
    if (d->limited && --d->left == 0)
        return -1; /* done */
    return MOTE_OK;
}

int mote_query_find(mote_txn *t, mote_query *q, mote_record_fn fn, void *ctx)
{
    IMPLICIT(t, q ? q->e : NULL, 0, mote_query_find(t_, q, fn, ctx));
    if (!fn)
        return mote__err(MOTE_INVALID, "mote_query_find: callback is NULL");
    if (q->near || q->match) { /* the k best, then their records with their scores */
        uint64_t *ids;
        double *dist;
        size_t n;
        int rc = nearest_run(t, q, &ids, &dist, &n);
        for (size_t i = 0; !rc && i < n; i++) {
            mote_record r;
            if (!(rc = mote_get(t, q->e, ids[i], &r))) {
                r.distance = dist[i];
                rc = fn(ctx, &r);
            }
        }
        mote__free(ids);
        mote__free(dist);
        return rc;
    }
    plan pl;
    uint64_t off;
    int empty;
    int rc = prepare_run(t, q, &pl, &off, &empty);
    if (!rc && !empty && pl.ordered) { /* the plan's order is the output order */
        direct d = {t, NULL, q, fn, ctx, off, q->limit, q->limit != 0};
        if (pl.exact)
            rc = mote_cursor_open(t, q->e->eid, &d.oc);
        if (!rc)
            rc = run_matches(t, q, &pl, direct_one, &d);
        mote_cursor_close(d.oc);
        mote__free(pl.ranges);
        return rc == -1 ? MOTE_OK : rc;
    }
    mote__free(pl.ranges);
    if (rc || empty)
        return rc;
    uint64_t *ids;
    size_t n;
    rc = mote__query_matches(t, q, &ids, &n);
    for (size_t i = 0; !rc && i < n; i++) {
        mote_record r;
        if (!(rc = mote_get(t, q->e, ids[i], &r)))
            rc = fn(ctx, &r);
    }
    mote__free(ids);
    return rc;
}

/* mote_query_project: a find whose callback reads the chosen columns. */
typedef struct project {
    const unsigned *props;
    size_t n;
    mote_value *vals;
    mote_row_fn fn;
    void *ctx;
} project;

static int project_one(void *ctx, const mote_record *r)
{
    project *p = ctx;
    for (size_t i = 0; i < p->n; i++) {
        if (p->props[i] == MOTE_PROP_ID) {
            memset(&p->vals[i], 0, sizeof p->vals[i]);
            p->vals[i].v.i = (int64_t)r->id;
            continue;
        }
        int rc = mote_record_get(r, p->props[i], &p->vals[i], NULL);
        if (rc)
            return rc;
    }
    return p->fn(p->ctx, r->id, p->vals, p->n);
}

int mote_query_project(mote_txn *t, mote_query *q, const unsigned *props, size_t nprops,
                       mote_row_fn fn, void *ctx)
{
    IMPLICIT(t, q ? q->e : NULL, 0, mote_query_project(t_, q, props, nprops, fn, ctx));
    if (!q || !fn || (nprops && !props))
        return mote__err(MOTE_INVALID, "mote_query_project: NULL argument");
    for (size_t i = 0; i < nprops; i++)
        if (props[i] >= q->e->nprops && props[i] != MOTE_PROP_ID)
            return mote__err(MOTE_INVALID, "%s: no property %u", q->e->name, props[i]);
    mote_value stackv[16];
    project p = {props, nprops, stackv, fn, ctx};
    if (nprops > 16 && !(p.vals = mote__malloc(nprops * sizeof *p.vals)))
        return mote__err(MOTE_NOMEM, "out of memory");
    int rc = mote_query_find(t, q, project_one, &p);
    if (p.vals != stackv)
        mote__free(p.vals);
    return rc;
}

typedef struct counter {
    uint64_t n;
} counter;

static int count_one(void *ctx, uint64_t id, const mote_record *r)
{
    (void)id;
    (void)r;
    ((counter *)ctx)->n++;
    return MOTE_OK;
}

int mote_query_count(mote_txn *t, mote_query *q, uint64_t *count)
{
    IMPLICIT(t, q ? q->e : NULL, 0, mote_query_count(t_, q, count));
    plan pl;
    int rc = mote__query_check(t, q);
    if (!rc && !count)
        rc = mote__err(MOTE_INVALID, "mote_query_count: count is NULL");
    if (!rc && (q->near || q->match)) { /* min(k, matches), after offset and limit */
        uint64_t *ids;
        size_t n;
        if (!(rc = nearest_run(t, q, &ids, NULL, &n)))
            *count = n;
        mote__free(ids);
        return rc;
    }
    if (!rc)
        rc = resolve_links(t, q);
    if (!rc)
        rc = make_plan(q, &pl);
    if (rc)
        return rc;
    counter c = {0};
    if (q->root < 0) { /* no condition (an order does not count) */
        rc = mote_count(t, q->e, &c.n);
    } else if (pl.exact) { /* ranks of the index ranges */
        for (size_t i = 0; !rc && i < pl.nranges; i++) {
            uint64_t lo, hi;
            const range *R = &pl.ranges[i];
            rc = mote_kv_count(t, pl.ip->index_tree, NULL, 0, R->lo, R->lol, &lo);
            if (!rc)
                rc = mote_kv_count(t, pl.ip->index_tree, NULL, 0, R->hi, R->hil, &hi);
            if (!rc)
                c.n += hi > lo ? hi - lo : 0;
        }
    } else {
        rc = run_matches(t, q, &pl, count_one, &c);
    }
    mote__free(pl.ranges);
    if (rc)
        return rc;
    uint64_t n = c.n > q->offset ? c.n - q->offset : 0;
    if (q->limit && n > q->limit)
        n = q->limit;
    *count = n;
    return MOTE_OK;
}

int mote_query_remove(mote_txn *t, mote_query *q, uint64_t *removed)
{
    IMPLICIT(t, q ? q->e : NULL, 1, mote_query_remove(t_, q, removed));
    uint64_t *ids;
    size_t n;
    if (t && !t->write)
        return mote__err(MOTE_READONLY, "remove in a read-only transaction");
    int rc = mote__query_matches(t, q, &ids, &n);
    if (rc)
        return rc;
    rc = mote__remove_ids(t, q->e, ids, n, removed);
    mote__free(ids);
    return rc;
}

mote_entity *mote__query_entity(const mote_query *q) { return q->e; }

int mote__query_unbounded(const mote_query *q)
{
    return q->root < 0 && !q->offset && !q->limit && !q->near && !q->match && q->e->expires < 0;
}

void mote__query_keep(mote_query *q, uint8_t *bytes)
{
    mote__free(q->agg_buf);
    q->agg_buf = bytes;
}
