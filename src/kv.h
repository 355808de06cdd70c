/*
 * kv.h — the key/value layer's internals (kv.c): named trees as key
 * prefixes, sorted batches on one tree, deferred puts, and the cursor
 * helpers the object layer uses. The public key/value API is in mote.h.
 */
#ifndef MOTE_KV_H
#define MOTE_KV_H

#include "btree.h"

/* Sort ops by key; equal keys end up adjacent, in no particular order. */
int mote__kvops_sort(mote_kvop *ops, size_t n);
/* mote__bt_apply on one tree with user keys (strictly ascending, else
 * MOTE_INVALID before anything is written). */
int mote__kv_apply(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                   uint64_t *missing);
/* The same with keys that already carry tree's prefix (mote__tree_prefix),
 * as the object layer builds them: no copy. The caller has checked that the
 * keys strictly ascend; a put's val must not be NULL. */
int mote__kv_apply_ikeys(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                         uint64_t *missing);
/* mote_kv_del for a key the caller knows exists (the object layer, which
 * has just read the object or its index entries). */
int mote__kv_del_known(mote_txn *t, uint32_t tree, const void *key, size_t klen);

unsigned mote__tree_prefix(uint32_t tree, uint8_t *out);
/* Put (key, empty value) into tree later: at the latest before the next
 * operation that touches the tree (any read, write, cursor step or count of
 * it) or at the commit, together with the other deferred keys of the tree as
 * one sorted batch. For non-unique index entries, whose puts are never
 * refused and whose keys are never given twice. An error of the deferred
 * write surfaces in the call that triggers it and fails the transaction. */
int mote__kv_put_later(mote_txn *t, uint32_t tree, const void *key, size_t klen);
/* A read transaction on write transaction w's base: the state before w's
 * changes, readable while w runs (mote__txn_base_view); and its end. */
int mote__kv_base_view(mote_txn *w, mote_txn **out);
void mote__kv_view_end(mote_txn *v);
/* The bytes of the file's pages as t sees it (its snapshot's, or a write's
 * so far): what bounds how much a tree in it can hold. */
uint64_t mote__kv_bytes(const mote_txn *t);
/* The store's identity as t sees it (0 if it has none yet: kv.c), and
 * setting it (a new random one if ident is 0: a compacted copy's). */
int mote__kv_ident(mote_txn *t, uint64_t *ident);
int mote__kv_ident_set(mote_txn *t, uint64_t ident);
/* At the commit of a write that changed the store: its identity given if it
 * has none yet (looked up once per handle). */
int mote__kv_ident_ensure(mote_txn *t);
/* Write every deferred put of the transaction (the commit does). */
int mote__kv_flush(mote_txn *t);
/* The transaction ends (store.c, before its commit or abort): its cursors
 * are detached and its deferred puts, written or not, freed. */
void mote__kv_txn_end(mote_txn *t);
/* Position cursor c on key (a user key of its tree) and give its value;
 * MOTE_NOTFOUND if the key is absent (the cursor then rests on the next). */
/* Exact lookup of the 8-byte big-endian key id, leaving the cursor on it;
 * MOTE_NOTFOUND if absent. No argument checks: for the object layer's loops
 * over a cursor they opened on an object tree. */
int mote__cursor_find_id(mote_cursor *c, uint64_t id, mote_val *val);
/* mote_cursor_get without the checks, for a cursor the caller just moved. */
int mote__cursor_entry(mote_cursor *c, mote_val *key, mote_val *val);
/* For the query planner: the ranks in the whole keyspace of user keys lo
 * and hi of tree (entries before them), and the user key at a rank of tree
 * (copied into buf, at most cap bytes; MOTE_NOTFOUND past the end). */
int mote__kv_range_ranks(mote_txn *t, uint32_t tree, const void *lo, size_t lol,
                         const void *hi, size_t hil, uint64_t *rlo, uint64_t *rhi);
int mote__kv_key_at(mote_txn *t, uint32_t tree, uint64_t rank, uint8_t *buf, size_t cap,
                    size_t *len);

#endif
