/*
 * walk.h — the fuzzers' read of a key/value tree that may be damaged: every
 * entry by cursor (at most 100,000), the last, the one before, the fourth,
 * its count and a get. Errors are what a damaged tree may give; a crash or a
 * bad read is the bug.
 */
#ifndef MOTE_FUZZ_WALK_H
#define MOTE_FUZZ_WALK_H

#include "mote.h"

static void fuzz_walk_tree(mote_txn *t, uint32_t tree)
{
    mote_cursor *c;
    if (mote_cursor_open(t, tree, &c))
        return;
    int n = 0;
    for (int rc = mote_cursor_first(c); rc == MOTE_OK && n < 100000;
         rc = mote_cursor_next(c), n++) {
        mote_val k, v;
        if (mote_cursor_get(c, &k, &v))
            break;
    }
    mote_cursor_last(c);
    mote_cursor_prev(c);
    mote_cursor_nth(c, 3);
    uint64_t cnt;
    mote_kv_count(t, tree, NULL, 0, NULL, 0, &cnt);
    mote_kv_get(t, tree, "k", 1, NULL);
    mote_cursor_close(c);
}

#endif
