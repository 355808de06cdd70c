/*
 * aggregate.c — what a query computes over its matches instead of listing
 * them: min, max, sum, average, count and count distinct of one property
 * (mote_query_aggregate), and counts per value (mote_query_group_count).
 *
 * Aggregates read the property of every match (NULLs ignored); sums of
 * integers are exact int64 (overflow reported); count distinct sorts the
 * values' index encodings (a value too long for its key, whole).
 *
 * Counts per value, two ways, the same answer. A query without conditions,
 * offset or limit on an indexed property walks that index once: its keys are
 * in value order, a run of keys with one encoded value is one group, and the
 * value itself is read from the record of the run's first object (one read
 * per group, not per object). Anything else takes the query's matches, reads
 * the property of each, sorts the values and counts the runs. A string too
 * long for its index key (cut after IDX_MAX_VALUE bytes) could put two values
 * in one run, so meeting one sends the index walk back to the general way.
 * Groups come in value order (NULL first; floats as in queries, NaN last); a
 * NULL in a property that is not nullable (see mote_record_get) is a NULL.
 */
#include <stdlib.h>

#include "object.h"

/* ---- aggregates -------------------------------------------------------------------- */

typedef struct agg {
    mote_query *q;
    unsigned prop;
    int type, op;
    uint64_t n;
    int have;
    int64_t isum;
    double fsum;
    int overflow;
    mote_value best;       /* MIN/MAX so far (variable bytes in q's buffer) */
    uint8_t *keys;         /* COUNT_DISTINCT: encoded values */
    size_t kbytes, kcap;
    size_t *koff;
    uint32_t *klen;
    size_t nk, capk;
} agg;

static int agg_one(void *ctx, const mote_record *r)
{
    agg *a = ctx;
    mote_value v;
    int rc = mote_record_get(r, a->prop, &v, NULL);
    if (rc || v.null)
        return rc;
    a->n++;
    switch (a->op) {
    case MOTE_AGG_MIN:
    case MOTE_AGG_MAX: {
        int c = a->have ? mote__value_cmp(a->type, &v, &a->best) : 0;
        if (!a->have || (a->op == MOTE_AGG_MIN ? c < 0 : c > 0)) {
            a->best = v;
            if (type_is_var(a->type)) { /* keep the bytes: the record goes away */
                uint8_t *b = mote__realloc(a->keys, v.v.s.n + 1);
                if (!b)
                    return mote__err(MOTE_NOMEM, "out of memory");
                if (v.v.s.n)
                    memcpy(b, v.v.s.p, v.v.s.n);
                a->keys = b;
                a->best.v.s.p = b;
            }
            a->have = 1;
        }
        break;
    }
    case MOTE_AGG_SUM:
    case MOTE_AGG_AVG:
        if (type_is_float(a->type)) {
            a->fsum += v.v.f;
        } else {
            if (__builtin_add_overflow(a->isum, v.v.i, &a->isum))
                a->overflow = 1;
            a->fsum += (double)v.v.i;
        }
        a->have = 1;
        break;
    case MOTE_AGG_COUNT_DISTINCT: {
        uint8_t k[IDX_MAX_VALUE + 16];
        int cut;
        size_t l = mote__index_enc(a->type, &v, k, &cut);
        if (cut && type_is_var(a->type)) { /* long values: compare them whole */
            l = v.v.s.n;
        }
        if (a->nk == a->capk) {
            size_t n = a->capk ? a->capk * 2 : 64;
            size_t *ko = mote__realloc(a->koff, n * sizeof *ko);
            if (ko)
                a->koff = ko;
            uint32_t *kl = ko ? mote__realloc(a->klen, n * sizeof *kl) : NULL;
            if (!kl)
                return mote__err(MOTE_NOMEM, "out of memory");
            a->klen = kl;
            a->capk = n;
        }
        if ((rc = mote__grow(&a->keys, &a->kcap, a->kbytes + l)))
            return rc;
        memcpy(a->keys + a->kbytes, cut && type_is_var(a->type) ? v.v.s.p : k, l);
        a->koff[a->nk] = a->kbytes;
        a->klen[a->nk++] = (uint32_t)l;
        a->kbytes += l;
        break;
    }
    default:
        break;
    }
    return MOTE_OK;
}

static pthread_mutex_t dist_mu = PTHREAD_MUTEX_INITIALIZER; /* qsort has no context */
static agg *dist_ctx;

static int cmp_dist(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    size_t li = dist_ctx->klen[i], lj = dist_ctx->klen[j], m = li < lj ? li : lj;
    int r = memcmp(dist_ctx->keys + dist_ctx->koff[i], dist_ctx->keys + dist_ctx->koff[j], m);
    return r ? r : (li > lj) - (li < lj);
}

int mote_query_aggregate(mote_txn *t, mote_query *q, unsigned prop, int op, mote_value *out,
                         uint64_t *n)
{
    mote_entity *e = q ? mote__query_entity(q) : NULL;
    IMPLICIT(t, e, 0, mote_query_aggregate(t_, q, prop, op, out, n));
    int rc = mote__query_check(t, q);
    if (!rc && (!out || prop >= e->nprops || op < MOTE_AGG_MIN ||
                op > MOTE_AGG_COUNT_DISTINCT))
        rc = mote__err(MOTE_INVALID, "mote_query_aggregate: bad argument");
    if (rc)
        return rc;
    int type = e->props[prop].type;
    if ((op == MOTE_AGG_SUM || op == MOTE_AGG_AVG) &&
        (type_is_var(type) || type == MOTE_T_BOOL))
        return mote__err(MOTE_TYPE, "%s.%s: sum and average need a numeric property",
                         e->name, e->props[prop].name);
    if ((op == MOTE_AGG_MIN || op == MOTE_AGG_MAX) && !type_indexable(type))
        return mote__err(MOTE_TYPE, "%s.%s: %s values have no order", e->name,
                         e->props[prop].name, mote__type_name(type));
    agg a;
    memset(&a, 0, sizeof a);
    a.q = q;
    a.prop = prop;
    a.type = type;
    a.op = op;
    /* the matches in order, with offset and limit, then their records */
    uint64_t *ids;
    size_t nids;
    rc = mote__query_matches(t, q, &ids, &nids);
    for (size_t i = 0; !rc && i < nids; i++) {
        mote_record r;
        if (!(rc = mote_get(t, e, ids[i], &r)))
            rc = agg_one(&a, &r);
    }
    mote__free(ids);
    memset(out, 0, sizeof *out);
    if (!rc) {
        switch (op) {
        case MOTE_AGG_MIN:
        case MOTE_AGG_MAX:
            if (a.have) {
                *out = a.best;
                if (type_is_var(type)) { /* hand the bytes to the query */
                    mote__query_keep(q, a.keys);
                    out->v.s.p = a.keys;
                    a.keys = NULL;
                }
            } else {
                out->null = 1;
            }
            break;
        case MOTE_AGG_SUM:
            if (a.overflow && !type_is_float(type))
                rc = mote__err(MOTE_RANGE, "%s.%s: the sum overflows int64", e->name,
                               e->props[prop].name);
            out->null = !a.have;
            if (type_is_float(type))
                out->v.f = a.fsum;
            else
                out->v.i = a.isum;
            break;
        case MOTE_AGG_AVG:
            out->null = !a.have;
            out->v.f = a.n ? a.fsum / (double)a.n : 0;
            break;
        case MOTE_AGG_COUNT:
            out->v.i = (int64_t)a.n;
            break;
        case MOTE_AGG_COUNT_DISTINCT: {
            size_t *perm = a.nk ? mote__malloc(a.nk * sizeof *perm) : NULL;
            uint64_t d = 0;
            if (a.nk && !perm) {
                rc = mote__err(MOTE_NOMEM, "out of memory");
                break;
            }
            for (size_t i = 0; i < a.nk; i++)
                perm[i] = i;
            pthread_mutex_lock(&dist_mu);
            dist_ctx = &a;
            if (a.nk > 1)
                qsort(perm, a.nk, sizeof *perm, cmp_dist);
            for (size_t i = 0; i < a.nk; i++)
                d += i == 0 || cmp_dist(&perm[i - 1], &perm[i]) != 0;
            pthread_mutex_unlock(&dist_mu);
            mote__free(perm);
            out->v.i = (int64_t)d;
            break;
        }
        }
    }
    if (n)
        *n = a.n;
    mote__free(a.keys);
    mote__free(a.koff);
    mote__free(a.klen);
    return rc;
}

/* ---- counts per value ------------------------------------------------------------ */

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
