/*
 * relation.c — relations between objects: to-many links (link records with
 * their backlinks) and the reads of both kinds (mote_link, mote_unlink,
 * mote_links, mote_backlinks), and the cleanup of an object's links when it
 * is removed. Formats: object.h ("@l:<eid>:<pid>", "@b:<eid>").
 *
 * A to-one relation is an int64 slot of the record, always indexed, so its
 * backlinks are an index range. A to-many link src -> dst is the key src+dst
 * in its property's link tree and dst + source entity + property + src in
 * the target entity's backlink tree: both directions are range scans, and
 * removing an object finds every link to it through its backlinks.
 */
#include <stdio.h>
#include <stdlib.h>

#include "object.h"

int mote__target_eid(mote_txn *t, const mprop *p, uint32_t *eid)
{
    /* the cache is written only by the (single) writer */
    mprop *w = (mprop *)p;
    if (t->write && p->tgt_serial == t->serial && p->tgt_next_tree == t->next_tree) {
        *eid = p->tgt_eid;
        return MOTE_OK;
    }
    char tn[160];
    snprintf(tn, sizeof tn, "@o:%s", p->target);
    int rc = mote_kv_tree(t, tn, 0, eid);
    if (rc == MOTE_NOTFOUND)
        *eid = 0;
    if (rc == MOTE_NOTFOUND || rc == MOTE_OK) {
        if (t->write) {
            w->tgt_serial = t->serial;
            w->tgt_next_tree = t->next_tree;
            w->tgt_eid = *eid;
        }
        rc = MOTE_OK;
    }
    return rc;
}

int mote__backlink_tree(mote_txn *t, uint32_t target_eid, int create, uint32_t *tree)
{
    char tn[32];
    snprintf(tn, sizeof tn, "@b:%u", target_eid);
    return mote_kv_tree(t, tn, create ? MOTE_TREE_CREATE : 0, tree);
}

/* backlink key: dst + source entity + property + src */
size_t mote__backlink_key(uint64_t dst, uint32_t eid, uint16_t pid, uint64_t src, uint8_t *k)
{
    mote__obj_tree_key(dst, k);
    k[8] = (uint8_t)(eid >> 24);
    k[9] = (uint8_t)(eid >> 16);
    k[10] = (uint8_t)(eid >> 8);
    k[11] = (uint8_t)eid;
    k[12] = (uint8_t)(pid >> 8);
    k[13] = (uint8_t)pid;
    mote__obj_tree_key(src, k + 14);
    return 22;
}

static int rel_prop(const mote_entity *e, unsigned prop, int want_many, const mprop **p)
{
    if (prop >= e->nprops || !type_is_rel(e->props[prop].type) ||
        (want_many && e->props[prop].type != MOTE_T_TOMANY))
        return mote__err(MOTE_INVALID, "%s: property %u is not a %s relation", e->name, prop,
                         want_many ? "to-many" : "");
    *p = &e->props[prop];
    return MOTE_OK;
}

int mote__obj_exists(mote_txn *t, uint32_t tree, uint64_t id)
{
    uint8_t k[8];
    mote__obj_tree_key(id, k);
    return mote_kv_get(t, tree, k, 8, NULL);
}

static int link_op(mote_txn *t, mote_entity *e, unsigned prop, uint64_t src, uint64_t dst,
                   int add)
{
    const mprop *p = NULL;
    uint32_t teid, btree;
    int rc = mote__obj_check(t, e, 1);
    if (!rc)
        rc = rel_prop(e, prop, 1, &p);
    if (!rc)
        rc = mote__target_eid(t, p, &teid);
    if (rc)
        return rc;
    if (!teid)
        return mote__err(MOTE_NOTFOUND, "%s.%s: target entity %s does not exist", e->name,
                         p->name, p->target);
    if (add && (rc = mote__obj_exists(t, e->eid, src)) == MOTE_NOTFOUND)
        return mote__err(rc, "%s: no object %llu to link from", e->name,
                         (unsigned long long)src);
    if (add && !rc && (rc = mote__obj_exists(t, teid, dst)) == MOTE_NOTFOUND)
        return mote__err(rc, "%s: no object %llu to link to", p->target,
                         (unsigned long long)dst);
    if (rc)
        return rc;
    uint8_t k[16], bk[22];
    mote__obj_tree_key(src, k);
    mote__obj_tree_key(dst, k + 8);
    mote__backlink_key(dst, e->eid, p->id, src, bk);
    if ((rc = mote__backlink_tree(t, teid, add, &btree)))
        return rc == MOTE_NOTFOUND ? mote__err(rc, "no such link") : rc;
    if (add) {
        rc = mote_kv_put(t, p->link_tree, k, 16, "", 0, 0);
        if (!rc)
            rc = mote_kv_put(t, btree, bk, 22, "", 0, 0);
    } else {
        rc = mote_kv_del(t, p->link_tree, k, 16);
        if (!rc)
            rc = mote_kv_del(t, btree, bk, 22);
    }
    return mote__obj_write_result(t, rc);
}

int mote_link(mote_txn *t, mote_entity *e, unsigned prop, uint64_t src, uint64_t dst)
{
    IMPLICIT(t, e, 1, mote_link(t_, e, prop, src, dst));
    return link_op(t, e, prop, src, dst, 1);
}

int mote_unlink(mote_txn *t, mote_entity *e, unsigned prop, uint64_t src, uint64_t dst)
{
    IMPLICIT(t, e, 1, mote_unlink(t_, e, prop, src, dst));
    return link_op(t, e, prop, src, dst, 0);
}

/* Collect the u64 at `at` of every key of tree starting with prefix. */
static int collect_ids(mote_txn *t, uint32_t tree, const uint8_t *prefix, size_t plen,
                       size_t at, uint64_t **ids, size_t *n)
{
    mote_cursor *c;
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    int rc = mote_cursor_open(t, tree, &c);
    if (rc)
        return rc;
    for (rc = mote_cursor_seek(c, prefix, plen, MOTE_SEEK_GE); rc == MOTE_OK;
         rc = mote_cursor_next(c)) {
        mote_val k;
        if ((rc = mote_cursor_get(c, &k, NULL)))
            break;
        if (k.size < plen || memcmp(k.data, prefix, plen) || k.size < at + 8)
            break;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *nids = mote__realloc(*ids, cap * sizeof *nids);
            if (!nids) {
                rc = mote__err(MOTE_NOMEM, "out of memory");
                break;
            }
            *ids = nids;
        }
        (*ids)[(*n)++] = mote__be64((const uint8_t *)k.data + at);
    }
    mote_cursor_close(c);
    if (rc == MOTE_NOTFOUND)
        rc = MOTE_OK;
    if (rc) {
        mote__free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

int mote__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

size_t mote__sort_unique_u64(uint64_t *s, size_t n)
{
    size_t i = 1;
    while (i < n && s[i - 1] < s[i]) /* mostly given in order */
        i++;
    if (i < n)
        qsort(s, n, sizeof *s, mote__cmp_u64);
    size_t k = 0;
    for (i = 0; i < n; i++)
        if (!k || s[k - 1] != s[i])
            s[k++] = s[i];
    return k;
}

int mote_links(mote_txn *t, mote_entity *e, unsigned prop, uint64_t src, uint64_t **ids,
               size_t *n)
{
    IMPLICIT(t, e, 0, mote_links(t_, e, prop, src, ids, n));
    const mprop *p = NULL;
    int rc = mote__obj_check(t, e, 0);
    if (!rc && (!ids || !n))
        rc = mote__err(MOTE_INVALID, "mote_links: NULL argument");
    if (!rc)
        rc = rel_prop(e, prop, 0, &p);
    if (rc)
        return rc;
    *ids = NULL;
    *n = 0;
    if (p->type == MOTE_T_TOONE) {
        mote_record r;
        mote_value v;
        if ((rc = mote_get(t, e, src, &r)) || (rc = mote_record_get(&r, prop, &v, NULL)))
            return rc;
        if (v.null || v.v.i == 0)
            return MOTE_OK;
        if (!(*ids = mote__malloc(sizeof **ids)))
            return mote__err(MOTE_NOMEM, "out of memory");
        (*ids)[0] = (uint64_t)v.v.i;
        *n = 1;
        return MOTE_OK;
    }
    if (!p->link_tree)
        return MOTE_OK; /* no link was ever made */
    uint8_t k[8];
    mote__obj_tree_key(src, k);
    return collect_ids(t, p->link_tree, k, 8, 8, ids, n);
}

int mote_backlinks(mote_txn *t, mote_entity *e, unsigned prop, uint64_t dst, uint64_t **ids,
                   size_t *n)
{
    IMPLICIT(t, e, 0, mote_backlinks(t_, e, prop, dst, ids, n));
    const mprop *p = NULL;
    int rc = mote__obj_check(t, e, 0);
    if (!rc && (!ids || !n))
        rc = mote__err(MOTE_INVALID, "mote_backlinks: NULL argument");
    if (!rc)
        rc = rel_prop(e, prop, 0, &p);
    if (rc)
        return rc;
    *ids = NULL;
    *n = 0;
    if (p->type == MOTE_T_TOONE) { /* its index: value dst, then ids */
        uint8_t k[IDX_MAX_VALUE + 16];
        mote_value v = {0};
        int cut;
        v.v.i = (int64_t)dst;
        size_t kl = mote__index_enc(MOTE_T_TOONE, &v, k, &cut);
        return collect_ids(t, p->index_tree, k, kl, kl, ids, n);
    }
    uint32_t teid, btree;
    if ((rc = mote__target_eid(t, p, &teid)))
        return rc;
    if (!teid || mote__backlink_tree(t, teid, 0, &btree))
        return MOTE_OK;
    uint8_t k[22];
    mote__backlink_key(dst, e->eid, p->id, 0, k);
    rc = collect_ids(t, btree, k, 14, 14, ids, n);
    if (!rc && *n > 1)
        qsort(*ids, *n, sizeof **ids, mote__cmp_u64);
    return rc;
}

int mote__links_cleanup(mote_txn *t, mote_entity *e, uint64_t id)
{
    int rc = MOTE_OK;
    uint8_t k[8];
    mote__obj_tree_key(id, k);
    /* links from id: forward entries and the targets' backlinks */
    for (unsigned i = 0; !rc && i < e->nall; i++) {
        const mprop *p = &e->props[i];
        if (p->type != MOTE_T_TOMANY || !p->link_tree)
            continue;
        uint64_t *dst;
        size_t n;
        uint32_t teid, btree = 0;
        if ((rc = collect_ids(t, p->link_tree, k, 8, 8, &dst, &n)) ||
            (rc = mote__target_eid(t, p, &teid)))
            break;
        if (n && teid && mote__backlink_tree(t, teid, 0, &btree))
            btree = 0;
        for (size_t j = 0; !rc && j < n; j++) {
            uint8_t fk[16], bk[22];
            memcpy(fk, k, 8);
            mote__obj_tree_key(dst[j], fk + 8);
            rc = mote_kv_del(t, p->link_tree, fk, 16);
            if (!rc && btree) {
                mote__backlink_key(dst[j], e->eid, p->id, id, bk);
                rc = mote_kv_del(t, btree, bk, 22);
                if (rc == MOTE_NOTFOUND)
                    rc = MOTE_OK;
            }
        }
        mote__free(dst);
    }
    /* links to id: every backlink names a forward entry to remove */
    if (rc)
        return rc;
    if (e->bl_serial != t->serial || e->bl_next_tree != t->next_tree) {
        uint32_t bt;
        e->bl_tree = mote__backlink_tree(t, e->eid, 0, &bt) ? 0 : bt;
        e->bl_serial = t->serial;
        e->bl_next_tree = t->next_tree;
    }
    uint32_t btree = e->bl_tree;
    if (!btree)
        return MOTE_OK;
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, btree, &c)))
        return rc;
    uint32_t last_seid = 0, last_ltree = 0; /* backlinks mostly come from one property */
    uint16_t last_pid = 0;
    int have_last = 0;
    while ((rc = mote_cursor_seek(c, k, 8, MOTE_SEEK_GE)) == MOTE_OK) {
        mote_val bk;
        if ((rc = mote_cursor_get(c, &bk, NULL)))
            break;
        if (bk.size != 22 || memcmp(bk.data, k, 8))
            break;
        uint8_t b[22];
        memcpy(b, bk.data, 22);
        uint32_t seid = (uint32_t)b[8] << 24 | (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
        uint16_t pid = (uint16_t)(b[12] << 8 | b[13]);
        if (!have_last || seid != last_seid || pid != last_pid) {
            char tn[64];
            snprintf(tn, sizeof tn, "@l:%u:%u", seid, pid);
            if (mote_kv_tree(t, tn, 0, &last_ltree))
                last_ltree = 0;
            last_seid = seid;
            last_pid = pid;
            have_last = 1;
        }
        uint32_t ltree = last_ltree;
        if (ltree) {
            uint8_t fk[16];
            memcpy(fk, b + 14, 8);
            memcpy(fk + 8, k, 8);
            rc = mote_kv_del(t, ltree, fk, 16);
            if (rc == MOTE_NOTFOUND)
                rc = MOTE_OK;
        }
        if (!rc)
            rc = mote_kv_del(t, btree, b, 22);
        if (rc)
            break;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}
