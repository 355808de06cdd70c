/*
 * check.h — maintenance above the engine's layers (check.c): the full
 * consistency check and compaction are public (mote.h); the lazy shrink of a
 * store at close is called by store.c.
 */
#ifndef MOTE_CHECK_H
#define MOTE_CHECK_H

#include "btree.h"

/* When the file is at least a quarter (and 1 MB) larger than its live pages
 * need (and the store wrote, is writable, synced and not poisoned): move
 * the pages above the new end below it, commit, cut the file. Best effort:
 * on any failure the file stays as it is. */
void mote__shrink(mote_store *s);

#endif
