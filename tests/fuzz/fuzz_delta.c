/*
 * fuzz_delta.c — libFuzzer target: the input is a delta file (src/delta.c,
 * FILE FORMAT), as a restore downloads one from object storage. It is
 * applied through the in-memory shim, as a full delta making a new copy or
 * to a copy of the store the seeds come from (delta_base.h), and a copy
 * that opens afterwards is checked and read. A damaged delta must give an
 * error (MOTE_CORRUPT, MOTE_FORMAT, MOTE_INVALID), never a crash, hang or
 * bad read; and a copy must never open at a commit other than its own
 * (the apply failed) or the delta's (it worked): an apply that fails after
 * it began writing leaves a copy that open refuses.
 *
 * The first byte selects a mode: bit 0 = make the framing and every hash
 * right after the mutation (the magic and version, whole entries, page
 * numbers within the store, the trailer's count and hashes, the header's
 * hash; to a copy: its commit and identity as the delta's since and
 * identity), so that mutations reach the pages behind the checks; bit 1 =
 * apply to the copy (else as a full delta, to a new file). A full delta
 * is also applied as it comes (mote_delta_apply_from, read in pieces whose
 * sizes bits 2-7 choose): it must work exactly when the file's apply does
 * and then make the same file, and leave no file when it fails.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "delta_base.h"
#include "pager.h"
#include "walk.h"

#define HEAD 64u
#define TAIL 32u

static uint8_t *base_img;
static size_t base_len;
static uint64_t base_txnid, base_ident;

static void make_base(void)
{
    memio m;
    mote_store *s = delta_base(&m, "/b/s.mote");
    mote_stat st;
    if (mote_store_stat(s, &st) || mote_store_ident(s, &base_ident) || mote_close(s))
        abort();
    base_txnid = st.txnid;
    size_t len;
    const uint8_t *img = memio_get(&m, "/b/s.mote", &len);
    base_img = malloc(len);
    memcpy(base_img, img, len);
    base_len = len;
    memio_free(&m);
}

/* The input made a well-framed delta with every hash right (mode bit 0):
 * a new buffer in *out, its length returned (0: too short to try). */
static size_t fix(const uint8_t *in, size_t n, int to_copy, uint8_t **out)
{
    if (n < HEAD + TAIL)
        return 0;
    uint8_t head[HEAD];
    memcpy(head, in, HEAD);
    memcpy(head, "MOTEDLT1", 8);
    wr32(head + 8, 1);
    uint32_t P = rd32(head + 12);
    if (P < 4096 || P > 65536 || (P & (P - 1)))
        wr32(head + 12, P = 4096);
    if (to_copy) {
        wr64(head + 16, base_txnid);
        wr64(head + 40, base_ident);
    }
    if (rd64(head + 24) < rd64(head + 16))
        wr64(head + 24, rd64(head + 16));
    uint32_t pages = rd32(head + 32) < 2 ? 2 : rd32(head + 32) % (1u << 14);
    pages = pages < 2 ? 2 : pages;
    wr32(head + 32, pages);
    wr64(head + 56, mote__hash64(head, 48, 0));
    uint64_t entry = 8u + P, count = (n - HEAD - TAIL) / entry;
    size_t len = HEAD + count * entry + TAIL;
    uint8_t *b = malloc(len);
    memcpy(b, head, HEAD);
    memcpy(b + HEAD, in + HEAD, count * entry);
    uint64_t h = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint8_t *e = b + HEAD + i * entry;
        wr32(e, rd32(e) % pages);
        wr32(e + 4, 0);
        h = mote__hash64(e, entry, h);
    }
    uint8_t *tail = b + len - TAIL;
    memcpy(tail, "MOTEDEND", 8);
    wr64(tail + 8, count);
    wr64(tail + 16, h);
    wr64(tail + 24, mote__hash64(head, HEAD, 0));
    *out = b;
    return len;
}

/* Open the copy if it opens; check and read it; abort if it is at a
 * commit it may not be at (`a` or `b`). */
static void exercise(memio *m, const char *path, uint64_t a, uint64_t b)
{
    mote_options o = {MOTE_RDONLY, 0, 16, &m->io};
    mote_store *s;
    if (mote_open(path, &o, &s))
        return;
    mote_stat st;
    if (mote_store_stat(s, &st) == MOTE_OK && st.txnid != a && st.txnid != b)
        abort(); /* a copy opened at another commit */
    mote_check(s, NULL, NULL);
    mote_txn *t;
    uint32_t tree;
    if (!mote_begin(s, MOTE_TXN_RDONLY, &t)) {
        if (!mote_kv_tree(t, "t", 0, &tree))
            fuzz_walk_tree(t, tree);
        mote_abort(t);
    }
    mote_close(s);
}

/* A delta's bytes given in pieces of `piece` bytes at most. */
typedef struct piecewise {
    const uint8_t *d;
    size_t len, at, piece;
} piecewise;

static long long read_pieces(void *ctx, void *buf, size_t n)
{
    piecewise *p = ctx;
    size_t k = p->len - p->at;
    k = k < n ? k : n;
    k = k < p->piece ? k : p->piece;
    memcpy(buf, p->d + p->at, k);
    p->at += k;
    return (long long)k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > (4u << 20))
        return 0;
    if (!base_img)
        make_base();
    int fixing = data[0] & 1, to_copy = (data[0] >> 1) & 1;
    uint8_t *delta = NULL;
    size_t len = size - 1;
    if (fixing && !(len = fix(data + 1, size - 1, to_copy, &delta)))
        return 0;
    const uint8_t *d = delta ? delta : data + 1;
    if (len >= HEAD && (uint64_t)rd32(d + 32) * rd32(d + 12) > (64u << 20)) {
        free(delta); /* (the copy's size would be made in memory: sparse on a disk) */
        return 0;
    }
    memio m;
    memio_init(&m);
    memio_set(&m, "/z/d.delta", d, len);
    const char *copy = to_copy ? "/z/c.mote" : "/z/new.mote";
    if (to_copy)
        memio_set(&m, copy, base_img, base_len);
    mote_options o = {MOTE_NOSYNC, 0, 0, &m.io};
    int rc = mote_delta_apply(copy, "/z/d.delta", &o);
    uint64_t to = len >= HEAD ? rd64(d + 24) : 0;
    if (!to_copy && len >= HEAD && rd64(d + 16) == 0) { /* a full delta, as it comes */
        piecewise src = {d, len, 0, 1 + (size_t)(data[0] >> 2) * 97};
        int rs = mote_delta_apply_from("/z/s.mote", read_pieces, &src, &o);
        size_t a_len, b_len;
        const uint8_t *a = memio_get(&m, copy, &a_len), *b = memio_get(&m, "/z/s.mote", &b_len);
        if ((rs == MOTE_OK) != (rc == MOTE_OK) || (rs && b) ||
            (!rs && (!a || a_len != b_len || memcmp(a, b, a_len))))
            abort(); /* the stream's apply differs from the file's */
    }
    if (to_copy || rc == MOTE_OK)
        exercise(&m, copy, to_copy ? base_txnid : to, rc == MOTE_OK ? to : base_txnid);
    memio_free(&m);
    free(delta);
    return 0;
}
