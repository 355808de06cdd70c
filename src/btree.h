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
    uint32_t klen;
    int saved;
    struct mote_cursor *next_in_txn;
    uint8_t key[MAX_IKEY]; /* the current key, once saved (last: not cleared at open) */
};
int mote__cur_seek(mote_cursor *c, const uint8_t *k, size_t kl, int mode);
int mote__cur_step(mote_cursor *c, int dir);
int mote__cur_select(mote_cursor *c, uint64_t n); /* n-th key of keyspace */
void mote__cur_reset(mote_cursor *c);
void mote__cur_save(mote_cursor *c);
int mote__cur_entry(mote_cursor *c, mote_val *k, mote_val *v);
int mote__cur_find(mote_cursor *c, const uint8_t *k, size_t kl, mote_val *v);

#endif
