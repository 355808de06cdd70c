/*
 * objcheck.c — the object layer's part of mote_check: for every entity,
 * every record readable by its layouts, each object in each of its indexes
 * (a unique entry naming it), as many entries in each index as objects,
 * every to-many link with its backlink and naming existing objects, each
 * object's vector in its vector index and the index's graph (hnsw.c), each
 * object's text in its full-text index with every term and position, and
 * that index's structure and totals (text.c). (The id sequence is not
 * checked: since 2026-12-07 a put leaves it below the highest id, object.c's
 * "Ids".) Problems are reported
 * one by one (mote_problems); only an error that stops the walk is returned.
 */
#include <stdlib.h>

#include "object.h"
#include "text.h"


typedef struct ocheck {
    mote_txn *t;
    mote_problems *pr;
} ocheck;

typedef struct tproblem {
    mote_problems *pr;
    const char *entity, *prop;
} tproblem;

static void text_problem(void *ctx, const char *problem)
{
    tproblem *p = ctx;
    mote__problem(p->pr, "%s.%s: %s", p->entity, p->prop, problem);
}

static int check_entity(void *ctx, const char *name)
{
    ocheck *k = ctx;
    mote_txn *t = k->t;
    mote_entity *e;
    int rc = mote_entity_stored(t, name, &e);
    if (rc) {
        mote__problem(k->pr, "entity %s: %s", name, mote_errmsg(t->s));
        return MOTE_OK;
    }
    unsigned np = e->nall;
    mote_value *vals = mote__malloc((np + 1) * sizeof *vals);
    mote_cursor *c;
    if (!vals || mote_cursor_open(t, e->eid, &c)) {
        mote__free(vals);
        return mote__err(MOTE_NOMEM, "out of memory checking %s", name);
    }
    uint64_t nobj = 0;
    /* per property: vectors in its vector index; texts, and their distinct
     * terms, in its full-text index */
    uint64_t *nvec = mote__calloc(3 * (size_t)np + 1, sizeof *nvec);
    uint64_t *ntext = nvec + np, *nterms = nvec + 2 * (size_t)np;
    if (!nvec) {
        mote_cursor_close(c);
        mote__free(vals);
        return mote__err(MOTE_NOMEM, "out of memory checking %s", name);
    }
    uint8_t *copy = NULL;
    size_t ccap = 0;
    unsigned char *oldtext = mote__calloc(np + 1, 1); /* an index of the earlier layout */
    if (!oldtext) {
        mote_cursor_close(c);
        mote__free(vals);
        mote__free(nvec);
        return mote__err(MOTE_NOMEM, "out of memory checking %s", name);
    }
    for (unsigned i = 0; i < np; i++)
        if (e->props[i].text_tree && mote__text_layout(t, e->props[i].text_tree) == MOTE_FORMAT) {
            oldtext[i] = 1;
            mote__problem(k->pr, "%s.%s: %s", name, e->props[i].name, mote_errmsg(t->s));
        }
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val key, v;
        if ((rc = mote_cursor_get(c, &key, &v)))
            break;
        nobj++;
        if (key.size != 8) {
            mote__problem(k->pr, "%s: object key of %zu bytes", name, key.size);
            continue;
        }
        uint64_t id = mote__be64(key.data);
        if (mote__grow(&copy, &ccap, v.size + 1)) {
            rc = MOTE_NOMEM;
            break;
        }
        memcpy(copy, v.data, v.size);
        int fatal = MOTE_OK; /* an error that stops the check */
        if (mote__decode_all(e, copy, v.size, id, vals)) {
            mote__problem(k->pr, "%s: object %llu: %s", name, (unsigned long long)id,
                     mote_errmsg(t->s));
            continue;
        }
        for (unsigned i = 0; i < np; i++) {
            const mprop *p = &e->props[i];
            if (p->vindex_tree && has_vector(&vals[i])) {
                uint8_t nk[9] = {'n'};
                mote__wr_be64(nk + 1, id);
                nvec[i]++;
                if (mote_kv_get(t, p->vindex_tree, nk, 9, NULL) == MOTE_NOTFOUND)
                    mote__problem(k->pr, "%s.%s: object %llu is missing from the vector "
                                  "index", name, p->name, (unsigned long long)id);
            }
            if (p->text_tree && !vals[i].null && !oldtext[i]) {
                uint64_t terms;
                int tr = mote__text_check_doc(t, p->text_tree, id, vals[i].v.s.p, vals[i].v.s.n,
                                              p->flags & MOTE_P_STEM ? MOTE_TOKEN_STEM : 0,
                                              &terms);
                ntext[i]++;
                nterms[i] += terms;
                if (tr == MOTE_CORRUPT)
                    mote__problem(k->pr, "%s.%s: object %llu in the full-text index: %s", name,
                                  p->name, (unsigned long long)id, mote_errmsg(t->s));
                else if (tr) {
                    fatal = tr;
                    break;
                }
            }
            if (!p->index_tree)
                continue;
            uint8_t ik[IDX_MAX_VALUE + 16];
            size_t kl = mote__index_key(p, &vals[i], id, ik);
            mote_val got;
            int g = mote_kv_get(t, p->index_tree, ik, kl, &got);
            if (g == MOTE_NOTFOUND)
                mote__problem(k->pr, "%s.%s: object %llu is missing from the index", name, p->name,
                         (unsigned long long)id);
            else if (g == MOTE_OK && (p->flags & MOTE_P_UNIQUE) && !vals[i].null &&
                     (got.size != 8 || rd64(got.data) != id))
                mote__problem(k->pr, "%s.%s: unique index names another object for %llu", name,
                         p->name, (unsigned long long)id);
        }
        if (fatal) {
            rc = fatal;
            break;
        }
    }
    mote_cursor_close(c);
    mote__free(copy);
    mote__free(vals);
    for (unsigned i = 0; (!rc || rc == MOTE_NOTFOUND) && i < np; i++)
        if (e->props[i].vindex_tree)
            rc = mote__hnsw_check(t, e, i, nvec[i], k->pr);
    for (unsigned i = 0; (!rc || rc == MOTE_NOTFOUND) && i < np; i++) {
        if (!e->props[i].text_tree || oldtext[i])
            continue;
        text_stat st;
        tproblem tp = {k->pr, name, e->props[i].name};
        rc = mote__text_verify(t, e->props[i].text_tree, &st, text_problem, &tp);
        if (rc == MOTE_CORRUPT)
            rc = MOTE_OK; /* reported */
        else if (!rc && (st.docs != ntext[i] || st.postings != nterms[i]))
            mote__problem(k->pr, "%s.%s: the full-text index holds %llu texts and %llu postings, "
                          "the objects %llu and %llu", name, e->props[i].name,
                          (unsigned long long)st.docs, (unsigned long long)st.postings,
                          (unsigned long long)ntext[i], (unsigned long long)nterms[i]);
    }
    mote__free(nvec);
    mote__free(oldtext);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    for (unsigned i = 0; i < np; i++) { /* no extra index entries */
        uint64_t n;
        if (e->props[i].index_tree &&
            !mote_kv_count(t, e->props[i].index_tree, NULL, 0, NULL, 0, &n) && n != nobj)
            mote__problem(k->pr, "%s.%s: index has %llu entries for %llu objects", name,
                     e->props[i].name, (unsigned long long)n, (unsigned long long)nobj);
    }
    for (unsigned i = 0; i < np; i++) { /* to-many: each link has its backlink */
        const mprop *p = &e->props[i];
        uint32_t teid, btree;
        if (p->type != MOTE_T_TOMANY || !p->link_tree || mote__target_eid(t, p, &teid))
            continue;
        int hasb = teid && !mote__backlink_tree(t, teid, 0, &btree);
        if (mote_cursor_open(t, p->link_tree, &c))
            continue;
        for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
            mote_val lk;
            uint8_t bk[22];
            if (mote_cursor_get(c, &lk, NULL) || lk.size != 16)
                break;
            uint64_t src = mote__be64(lk.data), dst = mote__be64((const uint8_t *)lk.data + 8);
            mote__backlink_key(dst, e->eid, p->id, src, bk);
            if (!hasb || mote_kv_get(t, btree, bk, 22, NULL))
                mote__problem(k->pr, "%s.%s: link %llu -> %llu has no backlink", name, p->name,
                         (unsigned long long)src, (unsigned long long)dst);
            if (mote__obj_exists(t, e->eid, src) || !teid || mote__obj_exists(t, teid, dst))
                mote__problem(k->pr, "%s.%s: link %llu -> %llu names a missing object", name,
                         p->name, (unsigned long long)src, (unsigned long long)dst);
        }
        mote_cursor_close(c);
    }
    return MOTE_OK;
}

int mote__check_objects(mote_txn *t, mote_problems *pr)
{
    ocheck k = {t, pr};
    return mote_entity_list(t, check_entity, &k);
}
