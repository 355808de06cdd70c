/*
 * btree.h — the copy-on-write B+tree over the pager's pages, one tree for
 * every named tree (node.h), and its cursors (btree.c).
 */
#ifndef MOTE_BTREE_H
#define MOTE_BTREE_H

#include "pager.h"

/* overflow.c: write a value's overflow chain (fills the 12-byte pointer);
 * read a value whole (into the transaction's buffer: valid like a mote_val);
 * free a chain's pages. */
int mote__ovf_write(mote_txn *t, const uint8_t *v, size_t n, uint8_t *ptr12);
int mote__ovf_read(mote_txn *t, const uint8_t *ptr12, size_t n, mote_val *out);
int mote__ovf_free(mote_txn *t, const uint8_t *ptr12, size_t n);

int mote__bt_get(mote_txn *t, const uint8_t *k, size_t kl, mote_val *v);
int mote__bt_put(mote_txn *t, const uint8_t *k, size_t kl, const void *v,
                 size_t vl, unsigned flags);
/* Delete k. known: the caller knows k exists, so the read-only descent that
 * keeps a miss from copying pages is skipped (a miss then still returns
 * MOTE_NOTFOUND, having copied the path). */
int mote__bt_del(mote_txn *t, const uint8_t *k, size_t kl, int known);
/* One put (del = 0) or delete of a sorted batch (see mote__kv_apply). */
typedef struct mote_kvop {
    const uint8_t *key;
    uint32_t klen;
    int del;
    const void *val;
    size_t vlen;
} mote_kvop;
/* Apply ops with internal keys in strictly ascending order: puts overwrite,
 * deletes of absent keys add to *missing. The same result as one call per
 * op, but the ops that fall into one leaf cost one descent together. */
int mote__bt_apply(mote_txn *t, const mote_kvop *ops, size_t n, uint64_t *missing);
/* Copy every page at or above `cut` to a lower free page (write txn). */
int mote__bt_relocate(mote_txn *t, uint32_t cut);
/* number of keys < k (k NULL: all keys) */
int mote__bt_rank(mote_txn *t, const uint8_t *k, size_t kl, uint64_t *rank);

/* Cursor over the whole internal keyspace, restricted to the keys that
 * start with lo (one tree: lo = its prefix, hi = the next tree's prefix;
 * lolen = hilen = 0: everything). */
struct mote_cursor {
    mote_txn *t;
    uint32_t tree;
    uint8_t lo[4], hi[4];
    uint32_t lolen, hilen; /* hilen 0: no upper bound */
    int depth;             /* levels in the stack (0: unpositioned) */
    mpage *pg[MAX_DEPTH];  /* pg[0] NULL: the root node in the slot */
    int dirty[MAX_DEPTH];  /* pg[d] was a dirty page when loaded */
    unsigned idx[MAX_DEPTH];
    uint64_t gen;          /* txn gen when positioned */
    const uint8_t *run_leaf; /* the leaf whose cells before run_end are all of */
    unsigned run_end;      /* this cursor's tree (NULL: not known; reset on every move) */
    uint32_t klen;
    int saved;
    unsigned ahead;        /* forward steps to a next leaf since the last descent:
                              from the second on, leaves are read ahead */
    unsigned back;         /* backward steps to a previous leaf since the last
                              descent: from the second on, leaves are prefetched */
    struct mote_cursor *next_in_txn;
    uint8_t key[MAX_IKEY]; /* the current key, once saved (last: not cleared at open) */
};
/* The common cursor steps, inline (a full scan is mostly these): the next
 * entry inside the same leaf, and the current entry when its value is in the
 * leaf. Each returns 0 without changing anything when the general path is
 * needed (the tree changed in the transaction, a pinned value to release,
 * the leaf's end, another tree's key, an overflow value). */
static inline int mote__cur_next_in_leaf(mote_cursor *c)
{
    int d = c->depth - 1;
    if (d < 0 || c->gen != c->t->gen || c->t->held)
        return 0;
    const uint8_t *n = d == 0 ? c->t->root->data + SLOT_ROOT_OFF : c->pg[d]->data;
    unsigned i = c->idx[d] + 1;
    if (n != c->run_leaf) { /* a new leaf: is its last key of this tree? then all are */
        unsigned nk = n_nkeys(n);
        uint32_t kl;
        const uint8_t *k = nk ? leaf_key(n, nk - 1, &kl) : NULL;
        int ours = k && kl >= c->lolen;
        for (uint32_t j = 0; ours && j < c->lolen; j++) /* its tree: a byte or two */
            ours = k[j] == c->lo[j];
        c->run_leaf = n;
        c->run_end = ours ? nk : 0;
    }
    if (i >= c->run_end) /* the leaf's end, or a leaf another tree's keys end */
        return 0;
    c->idx[d] = i;
    c->saved = 0;
    if (i + 4 < c->run_end) { /* the cell four ahead into the CPU's first-level cache */
        const uint8_t *q = n + n_off(n, i + 4);
        __builtin_prefetch(q);
        __builtin_prefetch(q + 64);
    }
    return 1;
}

static inline int mote__cur_entry_in_leaf(const mote_cursor *c, mote_val *k, mote_val *v)
{
    int d = c->depth - 1;
    if (d < 0 || c->gen != c->t->gen)
        return 0;
    const uint8_t *n = d == 0 ? c->t->root->data + SLOT_ROOT_OFF : c->pg[d]->data;
    const uint8_t *p = n + n_off(n, c->idx[d]); /* a validated leaf cell */
    uint32_t kl = p[0], vf;
    if (kl < 0x80) {
        p++;
    } else {
        kl = (kl & 0x7f) | (uint32_t)p[1] << 7;
        p += 2;
    }
    if (p[0] < 0x80) { /* the value's length << 1 | overflow: one or two bytes here */
        vf = p[0];
        p++;
    } else if (p[1] < 0x80) {
        vf = (p[0] & 0x7fu) | (uint32_t)p[1] << 7;
        p += 2;
    } else {
        return 0;
    }
    if (vf & 1)
        return 0;
    if (k) {
        k->data = p + c->lolen;
        k->size = kl - c->lolen;
    }
    if (v) {
        v->data = p + kl;
        v->size = vf >> 1;
    }
    return 1;
}

int mote__cur_seek(mote_cursor *c, const uint8_t *k, size_t kl, int mode);
int mote__cur_step(mote_cursor *c, int dir);
int mote__cur_select(mote_cursor *c, uint64_t n); /* n-th key of keyspace */
void mote__cur_reset(mote_cursor *c);
void mote__cur_save(mote_cursor *c);
int mote__cur_entry(mote_cursor *c, mote_val *k, mote_val *v);
int mote__cur_find(mote_cursor *c, const uint8_t *k, size_t kl, mote_val *v);

#endif
