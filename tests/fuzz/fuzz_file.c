/*
 * fuzz_file.c — libFuzzer target: the input is a store file image. It is
 * opened read-only and read-write through the in-memory shim, checked,
 * walked with cursors and written to. Damaged files must give an error
 * (MOTE_CORRUPT, MOTE_FORMAT, ...), never a crash, hang or bad read.
 *
 * The first byte selects a mode: odd = recompute every checksum after the
 * mutation (slot and commit record hashes, page CRCs in parent pointers,
 * page headers), so that mutations reach the structural checks behind the
 * checksums.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "pager.h"
#include "memio.h"
#include "walk.h"

static uint32_t P;
static uint8_t *img;
static size_t img_len;
static uint8_t *seen; /* a byte per page: its CRCs below were fixed already */

/* Recompute the CRCs below a node, children first, each page once: a
 * mutated file may point many cells at the same pages, and walking them
 * again per pointer grew as the fan-out to the depth (a 15 s timeout). */
static void fix_node(uint8_t *n, uint32_t cap, int depth)
{
    if (depth > 8 || n_type(n) != NODE_BRANCH)
        return;
    unsigned nk = n_nkeys(n);
    if (NH + 2u * nk > cap)
        return;
    for (unsigned i = 0; i < nk; i++) {
        uint32_t off = n_off(n, i);
        if (off + CHILD > cap)
            continue;
        uint8_t *ptr = n + off;
        uint64_t pgno = ptr_pgno(ptr);
        if (pgno < 2 || (pgno + 1) * P > img_len)
            continue;
        uint8_t *child = img + pgno * P;
        if (!seen[pgno]) {
            seen[pgno] = 1;
            wr32(child + 4, (uint32_t)pgno);
            wr64(child + 8, ptr_birth(ptr));
            fix_node(child, P, depth + 1);
        }
        wr32(ptr + 8, mote__crc32c(0, child, P));
    }
}

static void fix_checksums(void)
{
    if (img_len < 4096)
        return;
    P = rd32(img + 12);
    if (P < 4096 || P > 65536 || (P & (P - 1)) || img_len < P)
        return;
    if (!(seen = calloc(img_len / P + 1, 1)))
        return;
    for (int s = 0; s < 2 && (size_t)(s + 1) * P <= img_len; s++) {
        uint8_t *slot = img + (size_t)s * P;
        /* the commit records along the chain first (pager.h COMMIT CHAIN) */
        uint64_t next = rd32(slot + 44);
        for (int n = 0; n <= (int)CHAIN_MAX && next >= 2 && (next + 1) * P <= img_len; n++) {
            uint8_t *rec = img + next * P;
            if (rd64(rec) != MOTE_MAGIC || seen[next])
                break;
            seen[next] = 1;
            fix_node(rec + SLOT_ROOT_OFF, P - 8 - SLOT_ROOT_OFF, 0);
            wr64(rec + P - 8, mote__hash64(rec, P - 8, 0x4D4F5445534C4F54ull));
            next = rd32(rec + 44);
        }
        fix_node(slot + SLOT_ROOT_OFF, P - 8 - SLOT_ROOT_OFF, 0);
        wr64(slot + P - 8, mote__hash64(slot, P - 8, 0x4D4F5445534C4F54ull));
    }
    free(seen);
    seen = NULL;
}

/* Read every object of every stored entity, every property. */
static int read_record(void *ctx, const mote_record *r)
{
    (void)ctx;
    for (unsigned i = 0; i < mote_entity_nprops(r->e); i++) {
        mote_value v;
        if (mote_record_get(r, i, &v, NULL) == MOTE_OK && !v.null && v.v.s.n < (1u << 30)) {
            volatile uint8_t sink = 0;
            (void)sink;
        }
    }
    return 0;
}

static int scan_entity(void *ctx, const char *name)
{
    mote_txn *t = ctx;
    mote_entity *e;
    if (mote_entity_stored(t, name, &e) == MOTE_OK) {
        mote_scan(t, e, read_record, NULL);
        mote_query *q;
        if (mote_query_new(e, &q) == MOTE_OK) {
            mote_query_limit(q, 1, 3);
            uint64_t n;
            mote_query_count(t, q, &n);
            if (mote_entity_nprops(e) > 0) {
                mote_query_order(q, 0, MOTE_Q_DESC);
                mote_query_find(t, q, read_record, NULL);
            }
            mote_query_free(q);
        }
        /* each vector index: loaded from its records and searched */
        for (unsigned i = 0; i < mote_entity_nprops(e); i++) {
            mote_prop_def d;
            float vec[64] = {0.5f};
            if (mote_entity_prop_def(e, i, &d) || !(d.flags & MOTE_P_HNSW) || d.dim > 64 ||
                mote_query_new(e, &q))
                continue;
            uint64_t *ids;
            size_t n;
            if (!mote_query_nearest(q, i, vec, d.dim, 5, d.hnsw.distance) &&
                !mote_query_search(q, MOTE_NEAR_INDEX, 0) && !mote_query_ids(t, q, &ids, &n))
                mote_free(ids);
            mote_query_free(q);
        }
        /* each full-text index: its statistics, an OR and an AND match */
        for (unsigned i = 0; i < mote_entity_nprops(e); i++) {
            mote_prop_def d;
            mote_tstat ts;
            if (mote_entity_prop_def(e, i, &d) || !(d.flags & MOTE_P_FULLTEXT))
                continue;
            mote_text_stat(t, e, i, &ts);
            for (unsigned all = 0; all < 2; all++) {
                uint64_t *ids;
                size_t n;
                if (mote_query_new(e, &q))
                    break;
                if (!mote_query_match(q, i, "beta gamma", 10, 5, all ? MOTE_MATCH_ALL : 0) &&
                    !mote_query_ids(t, q, &ids, &n))
                    mote_free(ids);
                mote_query_free(q);
            }
        }
        /* the full-text indexes together (those stemming as the first one
         * does), weighted: every index's lengths merged */
        unsigned props[MOTE_MATCH_PROPS_MAX], np = 0, stem = 0;
        double w[MOTE_MATCH_PROPS_MAX];
        for (unsigned i = 0; i < mote_entity_nprops(e) && np < MOTE_MATCH_PROPS_MAX; i++) {
            mote_prop_def d;
            if (mote_entity_prop_def(e, i, &d) || !(d.flags & MOTE_P_FULLTEXT) ||
                (np && (d.flags & MOTE_P_STEM) != stem))
                continue;
            stem = d.flags & MOTE_P_STEM;
            w[np] = 2.0 + np; /* (not 1: one index too goes the weighted way) */
            props[np++] = i;
        }
        uint64_t *ids;
        size_t n;
        static const char mq[] = "beta OR \"gamma delta\" OR al*";
        if (np && !mote_query_new(e, &q)) {
            if (!mote_query_match_in(q, props, w, np, mq, sizeof mq - 1, 5, 0) &&
                !mote_query_ids(t, q, &ids, &n))
                mote_free(ids);
            mote_query_free(q);
        }
    }
    return 0;
}

static void exercise(mote_store *s, int write)
{
    mote_check(s, NULL, NULL);
    mote_stat st;
    mote_store_stat(s, &st);
    mote_txn *t;
    if (mote_begin(s, write ? 0 : MOTE_TXN_RDONLY, &t))
        return;
    mote_entity_list(t, scan_entity, t);
    const char *names[] = {"wl", "t", "a", "notes"};
    for (int i = 0; i < 4; i++) {
        uint32_t tree;
        if (mote_kv_tree(t, names[i], 0, &tree))
            continue;
        fuzz_walk_tree(t, tree);
        if (write) {
            mote_kv_put(t, tree, "fuzz", 4, "value", 5, 0);
            mote_kv_del(t, tree, "k", 1);
        }
    }
    if (write) {
        uint32_t tree;
        if (!mote_kv_tree(t, "new", MOTE_TREE_CREATE, &tree))
            mote_kv_put(t, tree, "x", 1, "y", 1, 0);
        mote_commit(t);
    } else {
        mote_abort(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > (1u << 20))
        return 0;
    img_len = size - 1;
    img = malloc(img_len);
    memcpy(img, data + 1, img_len);
    if (data[0] & 1)
        fix_checksums();
    for (int write = 0; write < 2; write++) {
        memio m;
        memio_init(&m);
        memio_set(&m, "/z/s.mote", img, img_len);
        mote_options o = {write ? 0u : MOTE_RDONLY, 0, 16, &m.io};
        mote_store *s;
        if (mote_open("/z/s.mote", &o, &s) == MOTE_OK) {
            exercise(s, write);
            mote_close(s);
        }
        memio_free(&m);
    }
    free(img);
    return 0;
}
