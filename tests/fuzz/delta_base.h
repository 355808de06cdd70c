/*
 * delta_base.h — the store that fuzz_delta applies incremental deltas to,
 * and that make_corpus makes its delta seeds from: the same commits, so a
 * seed from the base's commit fits the fuzzer's copy.
 */
#ifndef MOTE_FUZZ_DELTA_BASE_H
#define MOTE_FUZZ_DELTA_BASE_H

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "memio.h"
#include "mote.h"

/* Every store of these programs gets the same identity (kv.c draws it from
 * getrandom): the base the fuzzer builds is then the store its seeds'
 * deltas come from, identity and all, and an incremental seed applies. */
ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    (void)flags;
    memset(buf, 0x5a, n);
    return (ssize_t)n;
}

/* `commits` commits of puts (some values of several pages) and deletes
 * into tree "t" of store `s`, from commit number `from` on. */
static void delta_base_commits(mote_store *s, int from, int commits)
{
    static uint8_t v[6000];
    for (int c = from; c < from + commits; c++) {
        mote_txn *t;
        uint32_t tree;
        if (mote_begin(s, 0, &t) || mote_kv_tree(t, "t", MOTE_TREE_CREATE, &tree))
            abort();
        for (int i = 0; i < 40; i++) {
            uint32_t k = (uint32_t)(c * 40 + i) * 2654435761u % 997u;
            memset(v, c + i, sizeof v);
            if (i % 9 == 8)
                mote_kv_del(t, tree, &k, 4);
            else if (mote_kv_put(t, tree, &k, 4, v, i % 13 == 0 ? sizeof v : 20u + (size_t)i,
                                 0))
                abort();
        }
        if (mote_commit(t))
            abort();
    }
}

/* The base: a new store at `path` in `m` (initialized here) with three
 * commits; returned open. */
static mote_store *delta_base(memio *m, const char *path)
{
    memio_init(m);
    mote_options o = {MOTE_CREATE, 0, 0, &m->io};
    mote_store *s;
    if (mote_open(path, &o, &s))
        abort();
    delta_base_commits(s, 0, 3);
    return s;
}

#endif
