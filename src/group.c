/*
 * group.c — counts per value of one property over a query's matches
 * (mote_query_group_count), e.g. notes per topic.
 *
 * Two ways, the same answer. A query without conditions, offset or limit on
 * an indexed property walks that index once: its keys are in value order, a
 * run of keys with one encoded value is one group, and the value itself is
 * read from the record of the run's first object (one read per group, not
 * per object). Anything else takes the query's matches, reads the property
 * of each, sorts the values and counts the runs. A string too long for its
 * index key (cut after IDX_MAX_VALUE bytes) could put two values in one run,
 * so meeting one sends the index walk back to the general way.
 *
 * Groups come in value order (NULL first; floats as in queries, NaN last);
 * a NULL in a property that is not nullable (see mote_record_get) is a NULL.
 */
#include <stdlib.h>

#include "object.h"

#define GROUP_CUT 2 /* the index walk met a cut string: go the general way */

static int is_null(const mprop *p, const mote_value *v)
{
    return v->null || (p->type == MOTE_T_TOONE && v->v.i == 0);
}

/* NULL first, then the order of queries. */
static int gcmp(const mprop *p, const mote_value *a, const mote_value *b)
{
    int na = is_null(p, a), nb = is_null(p, b);
    if (na || nb)
        return nb - na;
    return mote__value_cmp(p->type, a, b);
}

/* Report one group: a NULL as a NULL value. */
static int report(const mprop *p, const mote_value *v, uint64_t n, mote_group_fn fn, void *ctx)
{
    mote_value null = {1, {0}};
    return fn(ctx, is_null(p, v) ? &null : v, n);
}

/* ---- the general way: every match's value, sorted ---------------------------------- */

typedef struct gvals {
    const mprop *p;
    mote_value *v; /* strings and bytes: v.s.p holds an offset into buf until sorted */
    size_t n;
    uint8_t *buf;
    size_t len, cap;
} gvals;

/* Merge sort of perm[0..n) by value (tmp: n more); stable, no global state. */
static void gsort(const gvals *g, size_t *perm, size_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = gcmp(g->p, &g->v[perm[j]], &g->v[perm[i]]) < 0 ? perm[j++] : perm[i++];
            while (i < mid)
                tmp[k++] = perm[i++];
            while (j < hi)
                tmp[k++] = perm[j++];
        }
        memcpy(perm, tmp, n * sizeof *perm);
    }
}

static int group_matches(mote_txn *t, mote_query *q, const mote_entity *e, unsigned prop,
                         mote_group_fn fn, void *ctx)
{
    uint64_t *ids;
    size_t n;
    int rc = mote_query_ids(t, q, &ids, &n);
    if (rc)
        return rc;
    gvals g = {&e->props[prop], mote__malloc((n + 1) * sizeof(mote_value)), 0, NULL, 0, 0};
    size_t *perm = mote__malloc((2 * n + 1) * sizeof *perm);
    if (!g.v || !perm)
        rc = mote__err(MOTE_NOMEM, "out of memory grouping %zu objects", n);
    int var = type_is_var(g.p->type);
    for (size_t i = 0; !rc && i < n; i++) {
        mote_record r;
        mote_value *v = &g.v[g.n];
        if ((rc = mote_get(t, (mote_entity *)e, ids[i], &r)) ||
            (rc = mote_record_get(&r, prop, v, NULL)))
            break;
        if (var && !v->null) { /* copy the bytes: the record is not kept */
            if ((rc = mote__grow(&g.buf, &g.cap, g.len + v->v.s.n + 1)))
                break;
            memcpy(g.buf + g.len, v->v.s.p, v->v.s.n);
            v->v.s.p = (const void *)(uintptr_t)g.len;
            g.len += v->v.s.n;
        }
        perm[g.n] = g.n;
        g.n++;
    }
    for (size_t i = 0; !rc && var && i < g.n; i++)
        if (!g.v[i].null)
            g.v[i].v.s.p = g.buf + (uintptr_t)g.v[i].v.s.p;
    if (!rc)
        gsort(&g, perm, perm + n, g.n);
    for (size_t i = 0, run = 1; !rc && i < g.n; i++, run++)
        if (i + 1 == g.n || gcmp(g.p, &g.v[perm[i]], &g.v[perm[i + 1]])) {
            rc = report(g.p, &g.v[perm[i]], run, fn, ctx);
            run = 0;
        }
    mote__free(ids);
    mote__free(perm);
    mote__free(g.v);
    mote__free(g.buf);
    return rc;
}

/* ---- the index walk ----------------------------------------------------------------------- */

/* Groups found by the walk, reported only once it is complete (a cut string
 * found halfway sends it back to the general way). */
typedef struct gruns {
    gvals g;        /* one value per group, bytes in g.buf by offset */
    uint64_t *cnt;
    size_t cap;
    uint8_t enc[IDX_MAX_VALUE + 16]; /* the current run's encoded value */
    size_t elen;
} gruns;

static int runs_add(gruns *r, const mote_value *v)
{
    if (r->g.n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        mote_value *nv = mote__realloc(r->g.v, nc * sizeof *nv);
        if (nv)
            r->g.v = nv;
        uint64_t *nn = nv ? mote__realloc(r->cnt, nc * sizeof *nn) : NULL;
        if (!nn)
            return mote__err(MOTE_NOMEM, "out of memory grouping");
        r->cnt = nn;
        r->cap = nc;
    }
    mote_value *d = &r->g.v[r->g.n];
    *d = *v;
    if (type_is_var(r->g.p->type) && !v->null) {
        int rc = mote__grow(&r->g.buf, &r->g.cap, r->g.len + v->v.s.n + 1);
        if (rc)
            return rc;
        memcpy(r->g.buf + r->g.len, v->v.s.p, v->v.s.n);
        d->v.s.p = (const void *)(uintptr_t)r->g.len;
        r->g.len += v->v.s.n;
    }
    r->cnt[r->g.n++] = 1;
    return MOTE_OK;
}

static int group_index(mote_txn *t, const mote_entity *e, unsigned prop, mote_group_fn fn,
                       void *ctx)
{
    const mprop *p = &e->props[prop];
    int unique = (p->flags & MOTE_P_UNIQUE) != 0, var = type_is_var(p->type);
    mote_cursor *c;
    int rc = mote_cursor_open(t, p->index_tree, &c);
    if (rc)
        return rc;
    gruns r;
    memset(&r, 0, sizeof r);
    r.g.p = p;
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        const uint8_t *kp = k.data;
        /* the key: enc(value) + id, or for a unique non-NULL value enc(value)
         * with the id as the entry's value */
        int with_id = !unique || (k.size && kp[0] == 0);
        size_t elen = with_id ? k.size - 8 : k.size;
        if (k.size < (with_id ? 9u : 1u) || elen > sizeof r.enc || (!with_id && v.size != 8)) {
            rc = CORRUPT("%s.%s: index key of %zu bytes", e->name, p->name, k.size);
            break;
        }
        if (var && kp[0] && (elen < 3 || kp[elen - 1] || kp[elen - 2])) {
            rc = GROUP_CUT;
            break;
        }
        if (r.g.n && elen == r.elen && !memcmp(kp, r.enc, elen)) {
            r.cnt[r.g.n - 1]++;
            continue;
        }
        memcpy(r.enc, kp, elen);
        r.elen = elen;
        /* the id: big-endian after the value, or the unique entry's value */
        uint64_t id = with_id ? mote__be64(kp + elen) : rd64(v.data);
        mote_record rec; /* the run's value, from its first object */
        mote_value val;
        if ((rc = mote_get(t, (mote_entity *)e, id, &rec)) == MOTE_NOTFOUND)
            rc = CORRUPT("%s.%s: index entry names missing object %llu", e->name, p->name,
                         (unsigned long long)id);
        if (rc || (rc = mote_record_get(&rec, prop, &val, NULL)) || (rc = runs_add(&r, &val)))
            break;
    }
    mote_cursor_close(c);
    if (rc == MOTE_NOTFOUND) /* the end of the index */
        rc = MOTE_OK;
    for (size_t i = 0; !rc && var && i < r.g.n; i++)
        if (!r.g.v[i].null)
            r.g.v[i].v.s.p = r.g.buf + (uintptr_t)r.g.v[i].v.s.p;
    for (size_t i = 0; !rc && i < r.g.n; i++)
        rc = report(p, &r.g.v[i], r.cnt[i], fn, ctx);
    mote__free(r.g.v);
    mote__free(r.g.buf);
    mote__free(r.cnt);
    return rc;
}

int mote_query_group_count(mote_txn *t, mote_query *q, unsigned prop, mote_group_fn fn,
                           void *ctx)
{
    mote_entity *e = q ? mote__query_entity(q) : NULL;
    IMPLICIT(t, e, 0, mote_query_group_count(t_, q, prop, fn, ctx));
    if (!q || !fn)
        return mote__err(MOTE_INVALID, "mote_query_group_count: NULL argument");
    if (prop >= e->nprops)
        return mote__err(MOTE_INVALID, "%s: no property %u", e->name, prop);
    const mprop *p = &e->props[prop];
    if (!type_indexable(p->type))
        return mote__err(MOTE_TYPE, "%s.%s: %s values cannot be grouped", e->name, p->name,
                         mote__type_name(p->type));
    int rc = e->s != t->s ? mote__err(MOTE_INVALID, "%s: a query of another store", e->name)
                          : mote__entity_usable(e, t);
    if (!rc && p->index_tree && mote__query_unbounded(q)) {
        rc = group_index(t, e, prop, fn, ctx);
        if (rc != GROUP_CUT)
            return rc;
        rc = MOTE_OK;
    }
    return rc ? rc : group_matches(t, q, e, prop, fn, ctx);
}
