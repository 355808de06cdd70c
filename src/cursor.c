/*
 * cursor.c — cursors over the B+tree (btree.h): a stack of pinned nodes from
 * the root to a leaf cell. A cursor in a write transaction saves its key
 * before the tree changes (mote__cur_save) and finds its place again by key
 * (the tree's pages may have moved); an exact lookup starts from where the
 * cursor is (the current cell, the distance dense ids give, the rest of the
 * leaf, the next leaf) before it descends from the root.
 */
#include <stdlib.h>

#include "btree.h"

static inline const uint8_t *cur_node(const mote_cursor *c, int d)
{
    return d == 0 ? txn_root(c->t) : c->pg[d]->data;
}

void mote__cur_reset(mote_cursor *c)
{
    /* pages of an outdated stack may be dirty pages freed since: only cache
     * pages (pinned, so still alive) are touched */
    for (int d = 1; d < c->depth; d++)
        if (c->pg[d] && !c->dirty[d])
            mote__page_put(c->t->s, c->pg[d]);
    c->depth = 0;
    c->run_leaf = NULL;
    c->ahead = c->back = 0;
}

/* The pinned page `child` (the child at c->idx[d] of level d) at level d+1. */
static int cur_set(mote_cursor *c, int d, mpage *child)
{
    c->pg[d + 1] = child;
    c->dirty[d + 1] = child->dirty;
    c->depth = d + 2;
    c->run_leaf = NULL; /* (a page buffer may come back at the address of another) */
    return MOTE_OK;
}

/* Load the child at c->idx[d] of level d into level d+1. */
static int cur_down(mote_cursor *c, int d)
{
    /* levels decrease by one per step from a root below MAX_DEPTH (checked
     * when the slot is read, and every node's level when it is) */
    assert(d + 1 < MAX_DEPTH);
    const uint8_t *n = cur_node(c, d);
    mpage *child;
    int rc = mote__page_get(c->t, n + n_off(n, c->idx[d]), (int)n_level(n) - 1, &child);
    return rc ? rc : cur_set(c, d, child);
}

/* Copy the current key into the cursor, so that it can find its place
 * again after its transaction changes the tree. Called before every write
 * in the cursor's transaction (not on every step: reads never pay). */
void mote__cur_save(mote_cursor *c)
{
    if (c->depth == 0 || c->saved)
        return;
    uint32_t kl;
    const uint8_t *k = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &kl);
    memcpy(c->key, k, kl);
    c->klen = kl;
    c->saved = 1;
}

/* Positioned on a leaf entry: accept it if it carries the cursor's prefix
 * (its tree), else unset the cursor. */
static int cur_finish(mote_cursor *c)
{
    uint32_t kl;
    const uint8_t *k = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &kl);
    c->gen = c->t->gen;
    c->saved = 0;
    int out = kl < c->lolen;
    for (uint32_t i = 0; i < c->lolen && !out; i++) /* 1 or 2 bytes: no memcmp call */
        out = k[i] != c->lo[i];
    if (out) {
        mote__cur_reset(c);
        return MOTE_NOTFOUND;
    }
    return MOTE_OK;
}


/* Descend to the leaf for k (NULL: leftmost, or rightmost if `last`). */
static int cur_descend(mote_cursor *c, const uint8_t *k, uint32_t kl, int last)
{
    mote__cur_reset(c);
    mote__txn_release_held(c->t);
    c->depth = 1;
    c->pg[0] = NULL;
    for (int d = 0;; d++) {
        const uint8_t *n = cur_node(c, d);
        if (d >= MAX_DEPTH - 1)
            return CORRUPT("tree deeper than %d levels", MAX_DEPTH);
        if (n_type(n) == NODE_LEAF) {
            int found;
            c->idx[d] = k ? leaf_find(n, k, kl, &found) : last ? n_nkeys(n) : 0;
            return MOTE_OK;
        }
        c->idx[d] = k ? branch_search(n, k, kl) : last ? n_nkeys(n) - 1 : 0;
        int rc = cur_down(c, d);
        if (rc)
            return rc;
    }
}

/* Move to the next (dir > 0) or previous leaf entry across leaves. On
 * entry the leaf index may be one past the end (forward) or 0 (backward). */
static int cur_move(mote_cursor *c, int dir)
{
    int d = c->depth - 1;
    const uint8_t *n = cur_node(c, d);
    if (dir > 0 && c->idx[d] < n_nkeys(n))
        return MOTE_OK;
    if (dir < 0 && c->idx[d] > 0) {
        c->idx[d]--;
        return MOTE_OK;
    }
    /* climb to a level with a sibling in that direction */
    int up = d - 1;
    while (up >= 0) {
        const uint8_t *un = cur_node(c, up);
        if (dir > 0 ? c->idx[up] + 1 < n_nkeys(un) : c->idx[up] > 0)
            break;
        up--;
    }
    if (up < 0)
        return MOTE_NOTFOUND;
    for (int x = up + 1; x < c->depth; x++)
        if (!c->dirty[x])
            mote__page_put(c->t->s, c->pg[x]);
    c->depth = up + 1;
    c->idx[up] += dir > 0 ? 1 : (unsigned)-1;
    c->ahead += dir > 0;
    c->back += dir < 0;
    for (int x = up;; x++) {
        const uint8_t *n = cur_node(c, x);
        mpage *next = NULL;
        if (dir > 0 && c->ahead >= 2 && n_level(n) == 1) { /* a scan: read leaves ahead */
            const uint8_t *ptrs[16];
            unsigned k = 0;
            for (unsigned i = c->idx[x]; i < n_nkeys(n) && k < 16; i++)
                ptrs[k++] = n + n_off(n, i);
            next = mote__page_readahead(c->t, ptrs, k, 0);
        } else if (dir < 0 && c->back >= 2 && n_level(n) == 1 && c->idx[x] > 0) {
            mote__page_prefetch(c->t, n + n_off(n, c->idx[x] - 1));
        }
        int rc = next ? cur_set(c, x, next) : cur_down(c, x);
        if (rc)
            return rc;
        const uint8_t *cn = cur_node(c, x + 1);
        unsigned nk = n_nkeys(cn);
        c->idx[x + 1] = dir > 0 ? 0 : nk - 1;
        if (n_type(cn) == NODE_LEAF) {
            if (nk == 0)
                return CORRUPT("empty leaf below a branch");
            return MOTE_OK;
        }
    }
}

int mote__cur_seek(mote_cursor *c, const uint8_t *k, size_t kl, int mode)
{
    /* the key lies within the current leaf: search that leaf only (ids
     * fetched in ascending order mostly stay in one leaf) */
    if (mode == MOTE_SEEK_GE && c->depth > 0 && c->gen == c->t->gen) {
        const uint8_t *leaf = cur_node(c, c->depth - 1);
        unsigned nk = n_nkeys(leaf);
        uint32_t fl, ll;
        const uint8_t *fk = nk ? leaf_key(leaf, 0, &fl) : NULL;
        const uint8_t *lk = nk ? leaf_key(leaf, nk - 1, &ll) : NULL;
        if (nk && keycmp(k, (uint32_t)kl, fk, fl) >= 0 && keycmp(k, (uint32_t)kl, lk, ll) <= 0) {
            int found;
            unsigned cur = c->idx[c->depth - 1];
            uint32_t cl;
            const uint8_t *ck = cur < nk ? leaf_key(leaf, cur, &cl) : NULL;
            mote__txn_release_held(c->t);
            /* at or after the current position (ascending seeks): gallop from it */
            c->idx[c->depth - 1] = ck && keycmp(ck, cl, k, (uint32_t)kl) <= 0
                                       ? leaf_search_from(leaf, cur, k, (uint32_t)kl, &found)
                                       : leaf_search(leaf, k, (uint32_t)kl, &found);
            return cur_finish(c);
        }
    }
    int rc = cur_descend(c, k, (uint32_t)kl, 0);
    if (!rc)
        rc = cur_move(c, 1); /* leaf index may be past the end */
    if (!rc && (mode == MOTE_SEEK_GT || mode == MOTE_SEEK_LE)) {
        uint32_t ckl;
        const uint8_t *ck = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &ckl);
        if (keycmp(ck, ckl, k, (uint32_t)kl) == 0) {
            c->idx[c->depth - 1]++;
            rc = cur_move(c, 1);
        }
    }
    if (mode == MOTE_SEEK_LE || mode == MOTE_SEEK_LT) {
        if (rc == MOTE_NOTFOUND) { /* nothing >= k: the answer is the last key */
            rc = cur_descend(c, NULL, 0, 1);
            if (!rc)
                rc = cur_move(c, -1);
        } else if (!rc) {
            rc = cur_move(c, -1);
        }
    }
    if (rc) {
        mote__cur_reset(c);
        return rc;
    }
    return cur_finish(c);
}

/* After its transaction changed the tree, position the cursor again from
 * its saved key (mode: GE to stay, GT/LT to step). */
static int cur_refind(mote_cursor *c, int mode)
{
    if (!c->saved)
        return mote__err(MOTE_INVALID, "internal: cursor position lost");
    uint8_t k[MAX_IKEY];
    uint32_t kl = c->klen;
    memcpy(k, c->key, kl); /* seek from a copy, not from the cursor itself */
    int rc = mote__cur_seek(c, k, kl, mode);
    if (!rc && mode == MOTE_SEEK_GE) {
        uint32_t nkl;
        const uint8_t *nk = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &nkl);
        if (keycmp(nk, nkl, k, kl) != 0)
            rc = MOTE_NOTFOUND; /* deleted meanwhile; the cursor moved on */
    }
    return rc;
}

int mote__cur_step(mote_cursor *c, int dir)
{
    if (c->depth == 0)
        return MOTE_NOTFOUND;
    if (c->gen != c->t->gen) /* the txn changed the tree: re-find by key */
        return cur_refind(c, dir > 0 ? MOTE_SEEK_GT : MOTE_SEEK_LT);
    mote__txn_release_held(c->t);
    int rc;
    if (dir > 0) {
        c->idx[c->depth - 1]++;
        rc = cur_move(c, 1);
    } else {
        rc = cur_move(c, -1);
    }
    if (rc) {
        mote__cur_reset(c);
        return rc;
    }
    return cur_finish(c);
}

int mote__cur_select(mote_cursor *c, uint64_t n)
{
    mote__cur_reset(c);
    mote__txn_release_held(c->t);
    c->depth = 1;
    c->pg[0] = NULL;
    for (int d = 0;; d++) {
        const uint8_t *nd = cur_node(c, d);
        unsigned nk = n_nkeys(nd);
        if (n_type(nd) == NODE_LEAF) {
            if (n >= nk) {
                mote__cur_reset(c);
                return MOTE_NOTFOUND;
            }
            c->idx[d] = (unsigned)n;
            return cur_finish(c);
        }
        if (d >= MAX_DEPTH - 1)
            return CORRUPT("tree deeper than %d levels", MAX_DEPTH);
        unsigned i = 0;
        for (; i < nk; i++) {
            uint64_t cnt = ptr_count(nd + n_off(nd, i));
            if (n < cnt)
                break;
            n -= cnt;
        }
        if (i == nk) {
            mote__cur_reset(c);
            return MOTE_NOTFOUND;
        }
        c->idx[d] = i;
        int rc = cur_down(c, d);
        if (rc) {
            mote__cur_reset(c);
            return rc;
        }
    }
}

/* The value of the leaf cell at the cursor (an overflow value is read). */
static int cur_value(mote_cursor *c, mote_val *v)
{
    cell cl;
    leaf_cell(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &cl);
    if (cl.ovf)
        return mote__ovf_read(c->t, cl.val, cl.vlen, v);
    v->data = cl.val;
    v->size = cl.vlen;
    return MOTE_OK;
}


/*
 * Seek (GE) to k > the cursor's key from the cursor's stack: climb to the
 * lowest branch whose range holds k (the parent's next separator is above
 * k) and descend from there, instead of from the root. Ids fetched in
 * ascending order a few leaves apart mostly stay under one branch: one
 * compare at the level above instead of a search there, and no page to pin
 * again (the branch is on the stack).
 */
static int cur_redescend(mote_cursor *c, const uint8_t *k, uint32_t kl)
{
    int u = c->depth - 2; /* the leaf's parent */
    while (u > 0) { /* k > the cursor's key, so k is in node u's range if below its end */
        int a = u - 1; /* node u's range ends at the next separator of the nearest
                          ancestor that has one (none: at the end of the keys) */
        while (a >= 0 && c->idx[a] + 1 >= n_nkeys(cur_node(c, a)))
            a--;
        if (a < 0 || branch_keycmp(cur_node(c, a), c->idx[a] + 1, k, kl) > 0)
            break;
        u = a; /* at or past that separator: node a's range may hold it */
    }
    mote__txn_release_held(c->t);
    for (int x = u + 1; x < c->depth; x++)
        if (!c->dirty[x])
            mote__page_put(c->t->s, c->pg[x]);
    c->depth = u + 1;
    c->run_leaf = NULL;
    c->ahead = c->back = 0; /* lookups: no read ahead */
    for (int d = u;; d++) {
        const uint8_t *n = cur_node(c, d);
        if (d >= MAX_DEPTH - 1)
            return CORRUPT("tree deeper than %d levels", MAX_DEPTH);
        if (n_type(n) == NODE_LEAF) {
            int found;
            c->idx[d] = leaf_find(n, k, kl, &found);
            break;
        }
        c->idx[d] = branch_search(n, k, kl);
        int rc = cur_down(c, d);
        if (rc) {
            mote__cur_reset(c);
            return rc;
        }
    }
    int rc = cur_move(c, 1); /* the leaf index may be past its end */
    if (rc) {
        mote__cur_reset(c);
        return rc;
    }
    return cur_finish(c);
}

/*
 * Exact lookup of k, leaving the cursor on it. Objects are fetched in
 * ascending id order (index entries of one value are in id order), so the
 * key is usually a few cells after the current one in the same leaf, or
 * early in the next leaf: those cases gallop from the current cell (or the
 * next leaf's first) instead of descending from the root. A walk down (a
 * sorted query with a limit visits the newest first) finds keys before the
 * current one: in the same leaf, where dense ids put it, else by bisection
 * of the cells before it. MOTE_NOTFOUND if k is absent.
 */
int mote__cur_find(mote_cursor *c, const uint8_t *k, size_t kl, mote_val *v)
{
    int d = c->depth - 1, found = 0, rc, ahead = 0; /* ahead: k is after the cursor's key */
    uint32_t ml = 0, kl32 = (uint32_t)kl;
    if (d >= 0 && c->gen == c->t->gen) {
        const uint8_t *leaf = cur_node(c, d);
        unsigned nk = n_nkeys(leaf), from = c->idx[d], hi = nk;
        const uint8_t *ck = from < nk ? leaf_key(leaf, from, &ml) : NULL;
        uint32_t cl = ml;
        int cmp = ck ? keycmp(ck, ml, k, kl32) : 1;
        if (cmp > 0 && ck && from > 0 && leaf_keycmp(leaf, 0, k, kl32) <= 0) {
            mote__txn_release_held(c->t); /* k is in this leaf, before the cursor */
            c->saved = 0;
            unsigned back = dense_distance(k, kl32, ck, cl), lo = 0;
            if (back && back <= from) { /* try where dense ids would put k */
                int gc = leaf_keycmp(leaf, from - back, k, kl32);
                if (gc == 0) {
                    c->idx[d] = from - back;
                    return cur_value(c, v);
                }
                if (gc < 0)
                    lo = from - back + 1; /* k is after that cell */
                else
                    from -= back; /* k is before it */
            }
            c->idx[d] = leaf_bisect(leaf, lo, from, k, kl32, &found);
            if (found)
                return cur_value(c, v);
            rc = cur_finish(c);
            return rc ? rc : MOTE_NOTFOUND;
        }
        if (cmp <= 0) { /* k is at or after the cursor */
            mote__txn_release_held(c->t);
            c->saved = 0;
            if (cmp == 0)
                return cur_value(c, v);
            ahead = 1;
            unsigned g = from + dense_distance(ck, ml, k, kl32);
            if (g > from && g < nk) { /* try where dense ids would put k */
                const uint8_t *gk = leaf_key(leaf, g, &ml);
                int gc = keycmp(gk, ml, k, kl32);
                if (gc == 0) {
                    c->idx[d] = g;
                    return cur_value(c, v);
                }
                if (gc > 0)
                    hi = g; /* k is before g: in this leaf */
                else
                    from = g; /* k is after g */
            }
            from++;
            if (hi == nk && leaf_keycmp(leaf, nk - 1, k, kl32) < 0) {
                /* past this leaf: try the next one, unless the parent's
                 * separator after it says k lies further on */
                if (d > 0) {
                    const uint8_t *parent = cur_node(c, d - 1);
                    unsigned j = c->idx[d - 1] + 2;
                    if (j < n_nkeys(parent) && branch_keycmp(parent, j, k, kl32) <= 0)
                        goto descend;
                }
                c->idx[d] = nk;
                rc = cur_move(c, 1);
                if (rc && rc != MOTE_NOTFOUND) {
                    mote__cur_reset(c);
                    return rc;
                }
                d = c->depth - 1;
                leaf = cur_node(c, d);
                hi = nk = n_nkeys(leaf);
                from = 0;
                if (rc || leaf_keycmp(leaf, nk - 1, k, kl32) < 0)
                    goto descend; /* not there either */
            }
            c->idx[d] = hi < nk ? leaf_bisect(leaf, from, hi, k, kl32, &found)
                        : from == 0 ? leaf_find(leaf, k, kl32, &found) /* the next leaf */
                                    : leaf_search_from(leaf, from, k, kl32, &found);
            if (found) /* equal to k, so in the cursor's tree */
                return cur_value(c, v);
            rc = cur_finish(c); /* stays on the next key, like a seek */
            return rc ? rc : MOTE_NOTFOUND;
        }
    }
descend:
    if ((rc = ahead && c->depth >= 2 ? cur_redescend(c, k, kl32)
                                     : mote__cur_seek(c, k, kl, MOTE_SEEK_GE)))
        return rc;
    const uint8_t *mk = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &ml);
    return keycmp(mk, ml, k, kl32) ? MOTE_NOTFOUND : cur_value(c, v);
}

int mote__cur_entry(mote_cursor *c, mote_val *k, mote_val *v)
{
    if (c->depth == 0)
        return MOTE_NOTFOUND;
    if (c->gen != c->t->gen) { /* re-find the current key after changes */
        int rc = cur_refind(c, MOTE_SEEK_GE);
        if (rc)
            return rc;
    }
    if (k) {
        uint32_t kl;
        k->data = leaf_key(cur_node(c, c->depth - 1), c->idx[c->depth - 1], &kl);
        k->size = kl;
    }
    return v ? cur_value(c, v) : MOTE_OK;
}
