/*
 * workload.h — a deterministic random workload and its model, shared by the
 * crash, fault and kill tests. Keys are small integers of one tree; each
 * commit puts or deletes a few of them; a value's bytes are derived from
 * (key, version) so a model needs only lengths and versions.
 */
#ifndef MOTE_WORKLOAD_H
#define MOTE_WORKLOAD_H

#include "pager.h"
#include "test.h"

#define WL_KEYS 2048 /* capacity; a workload uses nkeys of them */

typedef struct wl_state {
    int nkeys;            /* keys of the workload */
    int32_t len[WL_KEYS]; /* -1 = absent */
    uint32_t ver[WL_KEYS];
} wl_state;

typedef struct wl {
    uint64_t seed;
    int ncommits;
    int max_ops;        /* operations per commit */
    int big;            /* allow overflow values */
    int nkeys;          /* keys in use (<= WL_KEYS); default 48 */
    wl_state *states;   /* states[i] = after i acknowledged commits */
    int last_rc;        /* the error that stopped wl_run (0 if none) */
} wl;

void wl_init(wl *w, uint64_t seed, int ncommits, int max_ops, int big);
/* The same with a larger key space: deeper trees, splits and merges. */
void wl_init_keys(wl *w, uint64_t seed, int ncommits, int max_ops, int big, int nkeys);
/* The first commit puts every key (small values), the others as above:
 * small commits into a full store of many pages. */
void wl_init_filled(wl *w, uint64_t seed, int ncommits, int max_ops, int nkeys);
void wl_free(wl *w);
/* Run commits [from, ncommits) on s; returns the number of commits that
 * were acknowledged (mote_commit returned OK) before the first error. */
int wl_run(wl *w, mote_store *s, int from, int *inflight);
/* Run commits [from, ncommits) in groups of `group` (GROUP COMMIT,
 * pager.h): each commit written, then the group's waits (the first syncs
 * the group). Returns the number of commits acknowledged (a wait, or a
 * checkpoint's commit, returned OK for them or a later one); *tried:
 * commits begun. */
#define WL_GROUP_MAX 8
int wl_run_grouped(wl *w, mote_store *s, int from, int group, int *tried);
/* Compare a store with a state: 1 if equal. */
int wl_matches(mote_store *s, const wl_state *st);
void wl_value(int key, uint32_t ver, int32_t len, uint8_t *out);

#endif
