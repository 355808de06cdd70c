/*
 * btree.c — the copy-on-write B+tree over pages, and its cursors.
 *
 * Node format: see node.h. Keys are compared with memcmp, shorter first.
 * Writes copy every node on the path from the root (in the txn's private
 * slot) down to the leaf before changing it (mote__page_write), so the base
 * commit stays intact. Each branch pointer carries the number of entries
 * below it, which makes count and rank O(log n).
 *
 * Inserting into a full node splits it by bytes; when the new key goes to
 * the end of the node (ascending ids), the old cells stay together and the
 * new one starts the right node, so sequential inserts fill pages. A leaf
 * whose next keys go right after the new one (a sorted batch, or the last
 * key of its tree before another tree's) splits next to the new cell, after
 * it or, if the left part would not fit, before it (split_after_new). When
 * the root overflows, its cells move into two new pages and the root
 * becomes a branch above them. Deleting merges a node that is less than a
 * quarter full into a sibling when both fit into one page; empty nodes are
 * removed; a root with one child takes the child's cells if they fit.
 *
 * Every node read from disk is validated (mote__node_validate) before use,
 * so the search code may trust offsets and lengths.
 */
#include <stdlib.h>

#include "btree.h"

static inline uint32_t node_cap(const mote_txn *t, int is_root)
{
    return is_root ? root_cap(t->s) : t->s->P;
}

/* ---- node editing ------------------------------------------------------ */

typedef struct cref {
    const uint8_t *p;
    uint32_t size;
} cref;

/* Bytes of cell i of a validated node (its lengths are trusted). */
static uint32_t cell_size(const uint8_t *n, uint32_t cap, unsigned i)
{
    (void)cap;
    const uint8_t *p = n + n_off(n, i), *q;
    uint64_t kl = 0, vf = 0;
    if (n_type(n) == NODE_BRANCH) {
        q = p + CHILD;
        q += mote__varint_fast(q, q + 10, &kl);
        return (uint32_t)(q - p + kl);
    }
    q = p + mote__varint_fast(p, p + 10, &kl);
    q += mote__varint_fast(q, q + 10, &vf);
    return (uint32_t)(q - p + kl + ((vf & 1) ? PTR12 : vf >> 1));
}

static uint32_t node_used(const uint8_t *n)
{
    return NH + 2u * n_nkeys(n) + n_area(n) - n_holes(n);
}

/* Rebuild n (type/level kept) from a list of cells. */
static void node_build(uint8_t *n, uint32_t cap, const cref *cells, unsigned cnt)
{
    uint32_t upper = cap;
    for (unsigned i = 0; i < cnt; i++) {
        upper -= cells[i].size;
        memcpy(n + upper, cells[i].p, cells[i].size);
        wr16(n + NH + 2 * i, (uint16_t)upper);
    }
    wr16(n + 2, (uint16_t)cnt);
    wr16(n + 16, (uint16_t)(cap - upper));
    wr16(n + 18, 0);
}

/* Collect a node's cells (pointing into `src`) into cells[]. */
static unsigned node_cells(const uint8_t *src, uint32_t cap, cref *cells)
{
    unsigned nk = n_nkeys(src);
    for (unsigned i = 0; i < nk; i++) {
        cells[i].p = src + n_off(src, i);
        cells[i].size = cell_size(src, cap, i);
    }
    return nk;
}

/* Squeeze out the holes: cells move to the top, in key order. */
static void node_compact(mote_txn *t, uint8_t *n, uint32_t cap)
{
    uint8_t *tmp = t->scratch;
    memcpy(tmp, n, cap);
    uint32_t upper = cap;
    for (unsigned i = 0, nk = n_nkeys(n); i < nk; i++) {
        uint32_t sz = cell_size(tmp, cap, i);
        upper -= sz;
        memcpy(n + upper, tmp + n_off(tmp, i), sz);
        wr16(n + NH + 2 * i, (uint16_t)upper);
    }
    wr16(n + 16, (uint16_t)(cap - upper));
    wr16(n + 18, 0);
}

/* Make room for a cell of csize bytes at idx (compacting if needed) and
 * return where its bytes go; NULL if it does not fit. */
static uint8_t *node_cell_room(mote_txn *t, uint8_t *n, uint32_t cap, unsigned idx,
                               uint32_t csize)
{
    unsigned nk = n_nkeys(n);
    if (node_used(n) + 2 + csize > cap)
        return NULL;
    uint32_t upper = cap - n_area(n);
    if (upper < NH + 2u * (nk + 1) + csize) {
        node_compact(t, n, cap);
        upper = cap - n_area(n);
        if (upper < NH + 2u * (nk + 1) + csize)
            return NULL;
    }
    upper -= csize;
    uint8_t *offs = n + NH;
    if (idx < nk)
        memmove(offs + 2 * (idx + 1), offs + 2 * idx, 2 * (nk - idx));
    wr16(offs + 2 * idx, (uint16_t)upper);
    wr16(n + 2, (uint16_t)(nk + 1));
    wr16(n + 16, (uint16_t)(cap - upper));
    return n + upper;
}

/* Where a cell of csize bytes replacing cell idx (old bytes, no overflow
 * chain, csize <= old) goes: over the old one; the bytes left become holes.
 * Updates in a full leaf replaced each cell by removing it and making room
 * for the new one, which compacted the whole node every time. */
static uint8_t *cell_in_place(uint8_t *n, unsigned idx, uint32_t old, uint32_t csize)
{
    wr16(n + 18, (uint16_t)(n_holes(n) + old - csize));
    return n + n_off(n, idx);
}

/* Insert a cell at idx if it fits (compacting if needed); 1 if no room. */
static int node_try_insert(mote_txn *t, uint8_t *n, uint32_t cap, unsigned idx,
                           const uint8_t *cb, uint32_t csize)
{
    uint8_t *p = node_cell_room(t, n, cap, idx, csize);
    if (p)
        memcpy(p, cb, csize);
    return p == NULL;
}

static void node_remove(uint8_t *n, uint32_t cap, unsigned idx)
{
    unsigned nk = n_nkeys(n);
    uint32_t sz = cell_size(n, cap, idx);
    uint8_t *offs = n + NH;
    memmove(offs + 2 * idx, offs + 2 * (idx + 1), 2 * (nk - idx - 1));
    wr16(n + 2, (uint16_t)(nk - 1));
    if (nk == 1) {
        wr16(n + 16, 0);
        wr16(n + 18, 0);
        return;
    }
    wr16(n + 18, (uint16_t)(n_holes(n) + sz));
}

/* Remove leaf cell idx, freeing its overflow chain if it has one. */
static int leaf_remove(mote_txn *t, uint8_t *n, uint32_t cap, unsigned idx)
{
    cell c;
    mote__cell(n, cap, idx, &c);
    if (c.ovf) {
        int rc = mote__ovf_free(t, c.val, c.vlen);
        if (rc)
            return rc;
    }
    node_remove(n, cap, idx);
    return MOTE_OK;
}

static uint32_t make_leaf_cell(uint8_t *out, const uint8_t *k, uint32_t kl,
                               const void *v, size_t vl, int ovf)
{
    uint32_t a = mote__varint_put(out, kl);
    a += mote__varint_put(out + a, ((uint64_t)vl << 1) | (unsigned)ovf);
    size_t vb = ovf ? PTR12 : vl;
    if (v == k + kl) { /* a batch's key and value lie together: one copy */
        memcpy(out + a, k, kl + vb);
        return a + kl + (uint32_t)vb;
    }
    if (kl)
        memcpy(out + a, k, kl);
    if (vb)
        memcpy(out + a + kl, v, vb);
    return a + kl + (uint32_t)vb;
}

/* Bytes of a leaf cell with an inline value. */
static uint32_t leaf_cell_size(uint32_t kl, size_t vl)
{
    return mote__varint_size(kl) + mote__varint_size((uint64_t)vl << 1) + kl + (uint32_t)vl;
}

static uint32_t make_branch_cell(uint8_t *out, const uint8_t *ptr, const uint8_t *k,
                                 uint32_t kl)
{
    memcpy(out, ptr, CHILD);
    uint32_t a = mote__varint_put(out + CHILD, kl);
    if (kl)
        memcpy(out + CHILD + a, k, kl);
    return CHILD + a + kl;
}

static void set_ptr(uint8_t *ptr, const mpage *pg, uint64_t count)
{
    wr32(ptr, pg->pgno);
    wr32(ptr + 4, (uint32_t)pg->birth);
    wr32(ptr + 8, 0);
    wr64(ptr + 12, count);
}

/* Result of an insert one level down: the node split, and this is the new
 * right sibling with its separator key. */
typedef struct split {
    int happened;
    uint8_t ptr[CHILD];
    uint8_t sep[MAX_IKEY];
    uint32_t seplen;
} split;

/*
 * Where a full leaf that gets cell idx (cells[] holds the total cells with
 * it) should split when the keys that come next go right after the new one:
 * there, so that they go on filling the left node (an append there leaves
 * it full), where a split in the middle would leave it half empty. That is
 * - a sorted batch (bt_apply sets t->split_next) whose next key also comes
 *   before the cell after the new one (inserting 10,000 sorted keys among
 *   existing ones wrote twice the pages);
 * - the cell after the new one belongs to another tree: the new key is the
 *   last of its tree here, as every new object id is (10,000 single puts
 *   left the object tree's leaves half full).
 * Right after the new cell (idx + 1) if the left part fits; else (the cells
 * after it take less room than the new one, as the id sequence's entry
 * behind the object tree's last leaf does) right before it (idx): the old
 * cells stay as they are and the new one starts the right node with the few
 * after it, which the next keys fill. Splitting that leaf in the middle left
 * every leaf of a put_many after the first half full (3,000 objects of 300
 * bytes in 6 batches took 474 pages, 257 in one). 0: split in the middle.
 */
static unsigned split_after_new(const mote_txn *t, const cref *cells, unsigned idx,
                                unsigned total, uint32_t P)
{
    uint32_t kl, nl;
    const uint8_t *k = lcell_key(cells[idx + 1].p, &kl), *nk = lcell_key(cells[idx].p, &nl);
    const mote_kvop *next = t->split_next;
    if (!(next && keycmp(next->key, next->klen, k, kl) < 0) &&
        mote__key_tree(nk, nl) == mote__key_tree(k, kl))
        return 0;
    uint64_t left = NH, right = NH;
    for (unsigned i = 0; i <= idx; i++)
        left += cells[i].size + 2;
    if (left <= P)
        return idx + 1;
    for (unsigned i = idx; i < total; i++)
        right += cells[i].size + 2;
    return idx && right <= P ? idx : 0;
}

/* A full leaf (not the root) gets a cell after its last: the leaf stays as
 * it is and a new right sibling starts with the cell (appends leave full
 * leaves, and the leaf's cells are not copied). */
static int leaf_append_split(mote_txn *t, const uint8_t *cb, uint32_t csize, split *sp)
{
    uint32_t P = t->s->P;
    mpage *right;
    int rc = mote__page_new(t, &right);
    if (rc)
        return rc;
    mote__node_init(right->data, P, NODE_LEAF, 0);
    cref c = {cb, csize};
    node_build(right->data, P, &c, 1);
    const uint8_t *k = lcell_key(cb, &sp->seplen);
    memcpy(sp->sep, k, sp->seplen);
    set_ptr(sp->ptr, right, 1);
    sp->happened = 1;
    return MOTE_OK;
}

/*
 * Insert cell cb at idx into writable node n; split n if it is full. For the
 * root, both halves move to new pages and the root becomes their parent.
 */
static int node_put(mote_txn *t, uint8_t *n, int is_root, unsigned idx,
                    const uint8_t *cb, uint32_t csize, split *sp)
{
    uint32_t cap = node_cap(t, is_root), P = t->s->P;
    if (!node_try_insert(t, n, cap, idx, cb, csize))
        return MOTE_OK;
    unsigned nk = n_nkeys(n), total = nk + 1;
    int type = (int)n_type(n), level = (int)n_level(n);
    if (idx == nk && type == NODE_LEAF && !is_root)
        return leaf_append_split(t, cb, csize, sp);
    uint8_t *tmp = t->scratch;
    memcpy(tmp, n, cap);
    cref *cells = mote__malloc(total * sizeof *cells);
    if (!cells)
        return mote__err(MOTE_NOMEM, "out of memory splitting a node");
    node_cells(tmp, cap, cells);
    memmove(cells + idx + 1, cells + idx, (nk - idx) * sizeof *cells);
    cells[idx].p = cb;
    cells[idx].size = csize;

    /* split point m: cells [0,m) left, [m,total) right */
    uint64_t bytes = 0;
    for (unsigned i = 0; i < total; i++)
        bytes += cells[i].size + 2;
    unsigned m;
    if (idx == nk && type == NODE_LEAF) {
        m = nk; /* appending: keep the full node, start a new one */
    } else if (type == NODE_LEAF && (m = split_after_new(t, cells, idx, total, P))) {
        /* what comes next goes before cells[idx + 1]: it fills the node of the new cell */
    } else {
        uint64_t acc = 0;
        for (m = 0; m < total - 1 && acc + cells[m].size + 2 <= bytes / 2; m++)
            acc += cells[m].size + 2;
        if (m == 0)
            m = 1;
    }
    /* the right node's first key becomes the separator; in a branch it is
     * replaced by the empty key */
    uint8_t sepbuf[MAX_IKEY], first[CHILD + 1];
    uint32_t seplen;
    const uint8_t *sk = type == NODE_BRANCH ? bcell_key(cells[m].p, &seplen)
                                            : lcell_key(cells[m].p, &seplen);
    memcpy(sepbuf, sk, seplen);
    if (type == NODE_BRANCH) {
        cells[m].size = make_branch_cell(first, cells[m].p, NULL, 0);
        cells[m].p = first;
    }
    mpage *right = NULL, *left = NULL;
    int rc = mote__page_new(t, &right);
    if (!rc && is_root)
        rc = mote__page_new(t, &left);
    if (rc) {
        if (right)
            mote__page_free(t, right->pgno, (uint32_t)right->birth);
        mote__free(cells);
        return rc;
    }
    mote__node_init(right->data, P, type, level);
    node_build(right->data, P, cells + m, total - m);
    if (is_root) {
        mote__node_init(left->data, P, type, level);
        node_build(left->data, P, cells, m);
        mote__node_init(n, cap, NODE_BRANCH, level + 1);
        uint8_t lc[CHILD + 1], rcb[CHILD + 4 + MAX_IKEY], lp[CHILD], rp[CHILD];
        set_ptr(lp, left, mote__node_count(left->data));
        set_ptr(rp, right, mote__node_count(right->data));
        cref rootc[2];
        rootc[0].p = lc;
        rootc[0].size = make_branch_cell(lc, lp, NULL, 0);
        rootc[1].p = rcb;
        rootc[1].size = make_branch_cell(rcb, rp, sepbuf, seplen);
        node_build(n, cap, rootc, 2);
    } else {
        node_build(n, cap, cells, m);
        sp->happened = 1;
        set_ptr(sp->ptr, right, mote__node_count(right->data));
        memcpy(sp->sep, sepbuf, seplen);
        sp->seplen = seplen;
    }
    mote__free(cells);
    return MOTE_OK;
}

/* ---- get / put / delete ---------------------------------------------------- */

int mote__bt_get(mote_txn *t, const uint8_t *k, size_t kl, mote_val *v)
{
    const uint8_t *n = txn_root(t);
    mpage *pg = NULL;
    mote__txn_release_held(t);
    while (n_type(n) == NODE_BRANCH) {
        unsigned i = branch_search(n, k, (uint32_t)kl);
        mpage *child;
        int rc = mote__page_get(t, n + n_off(n, i), (int)n_level(n) - 1, &child);
        mote__page_put(t->s, pg);
        if (rc)
            return rc;
        pg = child;
        n = pg->data;
    }
    int found;
    unsigned i = leaf_find(n, k, (uint32_t)kl, &found);
    int rc = MOTE_NOTFOUND;
    if (found) {
        rc = MOTE_OK;
        if (v) {
            cell c;
            leaf_cell(n, i, &c);
            if (c.ovf) {
                rc = mote__ovf_read(t, c.val, c.vlen, v);
            } else {
                v->data = c.val;
                v->size = c.vlen;
            }
        }
    }
    if (rc == MOTE_OK && pg && !pg->dirty)
        t->held = pg; /* keep the value's page pinned until the next call */
    else
        mote__page_put(t->s, pg);
    return rc;
}

static int put_rec(mote_txn *t, uint8_t *n, int is_root, const uint8_t *k,
                   uint32_t kl, const uint8_t *cb, uint32_t csize, unsigned flags,
                   int *delta, split *sp)
{
    uint32_t cap = node_cap(t, is_root);
    if (n_type(n) == NODE_LEAF) {
        int found;
        unsigned idx = leaf_search(n, k, kl, &found);
        *delta = 1;
        if (found) {
            if (flags & MOTE_NOOVERWRITE)
                return MOTE_EXISTS;
            cell c;
            mote__cell(n, cap, idx, &c);
            *delta = 0;
            if (!c.ovf && csize <= c.size) {
                memcpy(cell_in_place(n, idx, c.size, csize), cb, csize);
                return MOTE_OK;
            }
            int rc = leaf_remove(t, n, cap, idx);
            if (rc)
                return rc;
        }
        return node_put(t, n, is_root, idx, cb, csize, sp);
    }
    unsigned idx = branch_search(n, k, kl);
    uint8_t *ptr = branch_ptr(n, idx);
    mpage *child;
    int rc = mote__page_write(t, ptr, (int)n_level(n) - 1, &child);
    if (rc)
        return rc;
    split csp;
    csp.happened = 0;
    rc = put_rec(t, child->data, 0, k, kl, cb, csize, flags, delta, &csp);
    if (rc)
        return rc;
    if (!csp.happened) {
        wr64(ptr + 12, ptr_count(ptr) + (uint64_t)*delta);
        return MOTE_OK;
    }
    wr64(ptr + 12, mote__node_count(child->data));
    uint8_t ncell[CHILD + 4 + MAX_IKEY];
    uint32_t nsz = make_branch_cell(ncell, csp.ptr, csp.sep, csp.seplen);
    return node_put(t, n, is_root, idx + 1, ncell, nsz, sp);
}

/*
 * Whether a leaf cell of key kl and value vl bytes keeps its value in
 * overflow pages: when key, value and 8 bytes (the lengths and the cell's
 * slot, at most) pass a third of a node. Every cell within a third, a split
 * of a full node by bytes (node_put: the left part up to half) leaves both
 * halves within a node: the right part is under half the bytes plus one
 * cell, (U + C) / 2 + C <= U for the U = P - NH bytes a node holds and
 * C <= U / 3. A quarter of a page until 2026-12-06 (1,024
 * bytes at 4 KB; now 1,358): values of 1,000-1,350 bytes took a 4 KB
 * overflow page each, four times their size, and a put ~5x and a get ~3x
 * as long as one inline. Libraries before it read such cells and split
 * nodes of them the same way, so the format does not change.
 */
static int value_overflows(uint32_t P, size_t kl, size_t vl)
{
    return kl + vl + 8 > (P - NH) / 3;
}

int mote__bt_put(mote_txn *t, const uint8_t *k, size_t kl, const void *v, size_t vl,
                 unsigned flags)
{
    uint32_t P = t->s->P;
    uint8_t cb[CHILD + 16 + MAX_IKEY + 1024];
    uint8_t optr[PTR12];
    int ovf = value_overflows(P, kl, vl) || kl + vl + 8 > sizeof cb;
    int rc;
    mote__txn_release_held(t);
    if (ovf) {
        if (flags & MOTE_NOOVERWRITE) { /* don't write a chain for nothing */
            rc = mote__bt_get(t, k, kl, NULL);
            mote__txn_release_held(t);
            if (rc != MOTE_NOTFOUND)
                return rc ? rc : MOTE_EXISTS;
        }
        if ((rc = mote__ovf_write(t, v, vl, optr)))
            return rc;
    }
    uint32_t csize = make_leaf_cell(cb, k, (uint32_t)kl, ovf ? optr : v, vl, ovf);
    int delta = 0;
    split sp;
    sp.happened = 0;
    rc = put_rec(t, txn_root(t), 1, k, (uint32_t)kl, cb, csize, flags, &delta, &sp);
    if (rc && ovf)
        mote__ovf_free(t, optr, vl);
    return rc;
}

static int node_underfull(const uint8_t *n, uint32_t cap)
{
    return node_used(n) < cap / 4;
}

/* Whether children idx and idx+1 of n fit in one node; read-only, so that
 * a merge that does not happen copies no page. */
static int merge_fits(mote_txn *t, uint8_t *n, unsigned idx, int *fits)
{
    int level = (int)n_level(n) - 1;
    mpage *L, *R;
    int rc = mote__page_get(t, branch_ptr(n, idx), level, &L);
    if (rc)
        return rc;
    if ((rc = mote__page_get(t, branch_ptr(n, idx + 1), level, &R))) {
        mote__page_put(t->s, L);
        return rc;
    }
    uint32_t sepl;
    branch_key(n, idx + 1, &sepl);
    uint32_t extra = n_type(L->data) == NODE_BRANCH ? sepl + 2 : 0;
    *fits = node_used(L->data) + node_used(R->data) - NH + extra <= t->s->P;
    mote__page_put(t->s, L);
    mote__page_put(t->s, R);
    return MOTE_OK;
}

/* Merge child idx+1 into child idx of n (writable) if they fit. */
static int try_merge(mote_txn *t, uint8_t *n, int is_root, unsigned idx, int *merged)
{
    uint32_t P = t->s->P;
    int fits = 0, rc = merge_fits(t, n, idx, &fits);
    *merged = 0;
    if (rc || !fits)
        return rc;
    uint8_t *lp = branch_ptr(n, idx), *rp;
    mpage *L, *R;
    int level = (int)n_level(n) - 1;
    if ((rc = mote__page_write(t, lp, level, &L)))
        return rc;
    rp = branch_ptr(n, idx + 1);
    if ((rc = mote__page_write(t, rp, level, &R)))
        return rc;
    lp = branch_ptr(n, idx);
    uint32_t sepl;
    const uint8_t *sep = branch_key(n, idx + 1, &sepl);
    unsigned nl = n_nkeys(L->data), nr = n_nkeys(R->data);
    cref *cells = mote__malloc((nl + nr) * sizeof *cells);
    uint8_t *tmpL = mote__malloc(P);
    if (!cells || !tmpL) {
        mote__free(cells);
        mote__free(tmpL);
        return mote__err(MOTE_NOMEM, "out of memory merging nodes");
    }
    memcpy(tmpL, L->data, P);
    node_cells(tmpL, P, cells);
    node_cells(R->data, P, cells + nl);
    uint8_t first[CHILD + 4 + MAX_IKEY];
    if (n_type(L->data) == NODE_BRANCH) { /* R's empty first key gets the separator */
        cells[nl].size = make_branch_cell(first, cells[nl].p, sep, sepl);
        cells[nl].p = first;
    }
    node_build(L->data, P, cells, nl + nr);
    mote__free(cells);
    mote__free(tmpL);
    wr64(lp + 12, mote__node_count(L->data));
    rc = mote__page_free(t, R->pgno, (uint32_t)R->birth);
    if (rc)
        return rc;
    node_remove(n, node_cap(t, is_root), idx + 1);
    *merged = 1;
    return MOTE_OK;
}

/* Give cell 0 of a branch the empty key (after its first child went away). */
static int branch_fix_first(mote_txn *t, uint8_t *n, int is_root)
{
    uint32_t kl;
    branch_key(n, 0, &kl);
    if (kl == 0)
        return MOTE_OK;
    uint8_t cb[CHILD + 1];
    uint32_t sz = make_branch_cell(cb, branch_ptr(n, 0), NULL, 0);
    node_remove(n, node_cap(t, is_root), 0);
    return node_try_insert(t, n, node_cap(t, is_root), 0, cb, sz)
               ? mote__err(MOTE_CORRUPT, "internal: no room for a shorter key")
               : MOTE_OK;
}

/* Whether key k (a run's next, NULL if none) lands in child idx of n. */
static int lands_in(const uint8_t *n, const uint8_t *k, uint32_t kl, unsigned idx)
{
    return k && idx < n_nkeys(n) && branch_search(n, k, kl) == idx;
}

/* Merge child idx of n with its right sibling if child idx is underfull and
 * the two fit in one node. */
static int merge_if_underfull(mote_txn *t, uint8_t *n, int is_root, unsigned idx)
{
    mpage *L;
    int merged, rc = mote__page_get(t, branch_ptr(n, idx), (int)n_level(n) - 1, &L);
    if (rc)
        return rc;
    int under = node_underfull(L->data, t->s->P);
    mote__page_put(t->s, L);
    return under ? try_merge(t, n, is_root, idx, &merged) : MOTE_OK;
}

/* Drop child idx of n (page pgno, born in birth32), which has no entries
 * left; the child before it then meets a new right sibling, and merges with
 * it if it was left underfull, unless the run of deletes goes on into that
 * sibling (nk: its next key). */
static int drop_child(mote_txn *t, uint8_t *n, int is_root, unsigned idx, uint32_t pgno,
                      uint32_t birth32, const uint8_t *nk, uint32_t nkl)
{
    unsigned cnt = n_nkeys(n);
    int rc = mote__page_free(t, pgno, birth32);
    if (rc)
        return rc;
    node_remove(n, node_cap(t, is_root), idx);
    if (idx == 0 && cnt > 1)
        rc = branch_fix_first(t, n, is_root);
    if (!rc && idx > 0 && idx + 1 < cnt && !lands_in(n, nk, nkl, idx))
        rc = merge_if_underfull(t, n, is_root, idx - 1);
    return rc;
}

/*
 * After deletes below child idx of n: drop the child if empty, else merge it
 * with a sibling if it is underfull. nk (a key, or NULL) is where a sorted run
 * of deletes goes next: a sibling it lands in is not merged with yet, as the
 * run may be about to empty it (deleting every object of a type merged each
 * next leaf, full, into the first, then emptied it: 18 merges of 19 leaves).
 */
static int child_fixup(mote_txn *t, uint8_t *n, int is_root, unsigned idx, mpage *child,
                       const uint8_t *nk, uint32_t nkl)
{
    unsigned cnt = n_nkeys(n);
    int rc = MOTE_OK;
    if (n_nkeys(child->data) == 0) {
        rc = drop_child(t, n, is_root, idx, child->pgno, (uint32_t)child->birth, nk, nkl);
    } else if (node_underfull(child->data, t->s->P) && cnt > 1) {
        /* the left sibling first: a sorted run of deletes has left it as it
         * stays, where the right one still holds keys the run deletes next
         * (merging into the right never fit: keeping every 100th of 10,000
         * keys left 54 of 79 pages in use) */
        int merged = 0;
        if (idx > 0)
            rc = try_merge(t, n, is_root, idx - 1, &merged);
        if (!rc && !merged && idx + 1 < cnt && !lands_in(n, nk, nkl, idx + 1))
            rc = try_merge(t, n, is_root, idx, &merged);
    }
    return rc;
}

static int del_rec(mote_txn *t, uint8_t *n, int is_root, const uint8_t *k, uint32_t kl)
{
    uint32_t cap = node_cap(t, is_root);
    if (n_type(n) == NODE_LEAF) {
        int found;
        unsigned idx = leaf_search(n, k, kl, &found);
        if (!found)
            return MOTE_NOTFOUND;
        return leaf_remove(t, n, cap, idx);
    }
    unsigned idx = branch_search(n, k, kl);
    uint8_t *ptr = branch_ptr(n, idx);
    mpage *child;
    int rc = mote__page_write(t, ptr, (int)n_level(n) - 1, &child);
    if (rc)
        return rc;
    rc = del_rec(t, child->data, 0, k, kl);
    if (rc)
        return rc;
    ptr = branch_ptr(n, idx);
    wr64(ptr + 12, ptr_count(ptr) - 1);
    return child_fixup(t, n, is_root, idx, child, NULL, 0);
}

static int root_shrink(mote_txn *t);

int mote__bt_del(mote_txn *t, const uint8_t *k, size_t kl, int known)
{
    mote__txn_release_held(t);
    int rc = known ? MOTE_OK : mote__bt_get(t, k, kl, NULL); /* don't copy pages for nothing */
    mote__txn_release_held(t);
    if (rc)
        return rc;
    rc = del_rec(t, txn_root(t), 1, k, (uint32_t)kl);
    return rc ? rc : root_shrink(t);
}

/* After deletes: a root with one child takes over the child's cells if they
 * fit; a root branch left without children becomes an empty leaf. */
static int root_shrink(mote_txn *t)
{
    uint8_t *root = txn_root(t);
    int rc;
    if (n_type(root) == NODE_BRANCH && n_nkeys(root) == 0)
        mote__node_init(root, root_cap(t->s), NODE_LEAF, 0);
    while (n_type(root) == NODE_BRANCH && n_nkeys(root) == 1) {
        mpage *child;
        uint8_t *ptr = branch_ptr(root, 0);
        if ((rc = mote__page_write(t, ptr, (int)n_level(root) - 1, &child)))
            return rc;
        uint8_t *cd = child->data;
        if (node_used(cd) > root_cap(t->s))
            break;
        cref *cells = mote__malloc((n_nkeys(cd) + 1) * sizeof *cells);
        if (!cells)
            return mote__err(MOTE_NOMEM, "out of memory shrinking the tree");
        unsigned cnt = node_cells(cd, t->s->P, cells);
        mote__node_init(root, root_cap(t->s), (int)n_type(cd), (int)n_level(cd));
        node_build(root, root_cap(t->s), cells, cnt);
        mote__free(cells);
        if ((rc = mote__page_free(t, child->pgno, (uint32_t)child->birth)))
            return rc;
    }
    return MOTE_OK;
}

/* ---- sorted runs ------------------------------------------------------------ */

/* State of one mote__bt_apply pass. */
typedef struct run {
    const mote_kvop *ops;
    size_t n, i;        /* ops, their count, the next one */
    uint64_t *missing;  /* deletes of absent keys */
    int stuck;          /* the next op needs the one-at-a-time path */
    int grow;           /* stuck: it goes after the last cell of a full leaf */
} run;

/* Apply ops to leaf n while they fall below the bound (bk, NULL = none) and
 * fit without a split or an overflow chain; *delta = entries added. */
static int run_leaf(mote_txn *t, uint8_t *n, int is_root, run *r, const uint8_t *bk,
                    uint32_t bkl, int64_t *delta)
{
    uint32_t cap = node_cap(t, is_root), P = t->s->P;
    unsigned pos = 0; /* ops ascend: each one lands at or after the last */
    int tail = 0;     /* the last op appended a cell after the leaf's last */
    for (; r->i < r->n; r->i++) {
        const mote_kvop *op = &r->ops[r->i];
        if (bk && keycmp(op->key, op->klen, bk, bkl) >= 0)
            return MOTE_OK;
        int found = 0;
        unsigned nk = n_nkeys(n); /* after an append, the next key goes last too */
        unsigned idx = tail ? nk : leaf_search_from(n, pos, op->key, op->klen, &found);
        pos = idx;
        tail = 0;
        cell c;
        if (found)
            mote__cell(n, cap, idx, &c);
        if (op->del) {
            if (!found) {
                (*r->missing)++;
                continue;
            }
            if (c.ovf) {
                int rc = mote__ovf_free(t, c.val, c.vlen);
                if (rc)
                    return rc;
            }
            node_remove(n, cap, idx);
            (*delta)--;
            continue;
        }
        if (value_overflows(P, op->klen, op->vlen) || (found && c.ovf)) {
            r->stuck = 1; /* overflow values go one at a time */
            return MOTE_OK;
        }
        uint32_t csize = leaf_cell_size(op->klen, op->vlen);
        if (node_used(n) - (found ? c.size + 2 : 0) + 2 + csize > cap) {
            r->stuck = 1; /* a split: run_grow, or one at a time */
            r->grow = !found && idx == nk && !is_root;
            return MOTE_OK;
        }
        if (found && csize <= c.size) {
            make_leaf_cell(cell_in_place(n, idx, c.size, csize), op->key, op->klen, op->val,
                           op->vlen, 0);
            continue;
        }
        if (found)
            node_remove(n, cap, idx);
        uint8_t *room = node_cell_room(t, n, cap, idx, csize); /* built in place */
        if (!room)
            return mote__err(MOTE_CORRUPT, "internal: no room for a cell that fits");
        make_leaf_cell(room, op->key, op->klen, op->val, op->vlen, 0);
        tail = !found && idx == nk;
        *delta += !found;
    }
    return MOTE_OK;
}

/*
 * The run has inserted into leaf child idx of n and goes on with a put into
 * child idx+1 (written anyway): if the two fit in one page, merge them. A
 * sorted batch that fills the gaps between existing keys (index entries of
 * repeated values, say) ends each gap with a part-filled leaf; merged with
 * the leaf of the following old keys, it fills up with the next gap's keys
 * instead of staying part-filled (batches of 10,000 objects whose texts
 * repeat earlier batches' wrote 381 pages per commit, 302 with the merge,
 * 292 into a fresh store).
 */
static int run_pack(mote_txn *t, uint8_t *n, int is_root, const run *r, unsigned idx,
                    const mpage *child)
{
    if (r->stuck || r->i >= r->n || n_type(child->data) != NODE_LEAF ||
        idx + 1 >= n_nkeys(n) || node_used(child->data) > t->s->P * 3 / 4)
        return MOTE_OK;
    const mote_kvop *op = &r->ops[r->i];
    if (op->del || branch_search(n, op->key, op->klen) != idx + 1)
        return MOTE_OK;
    int merged;
    return try_merge(t, n, is_root, idx, &merged);
}

/*
 * The run stopped at a put after the last cell of full leaf child idx of n:
 * the op starts a new leaf right of it (leaf_append_split), without the
 * one-op descent from the root and the new descent after it (a batch of
 * 10,000 objects starts ~290 leaves). Only if n has room for the
 * separator; else the op takes the one-at-a-time path, which splits n.
 */
static int run_grow(mote_txn *t, uint8_t *n, int is_root, run *r, unsigned idx,
                    int64_t *delta)
{
    const mote_kvop *op = &r->ops[r->i];
    uint32_t cap = node_cap(t, is_root);
    if (node_used(n) + 2 + CHILD + mote__varint_size(op->klen) + op->klen > cap)
        return MOTE_OK;
    uint32_t csize = make_leaf_cell(t->scratch, op->key, op->klen, op->val, op->vlen, 0);
    split sp;
    int rc = leaf_append_split(t, t->scratch, csize, &sp);
    if (rc)
        return rc;
    uint8_t bc[CHILD + 4 + MAX_IKEY];
    uint32_t bsz = make_branch_cell(bc, sp.ptr, sp.sep, sp.seplen);
    if (node_try_insert(t, n, cap, idx + 1, bc, bsz))
        return mote__err(MOTE_CORRUPT, "internal: no room for a separator that fits");
    r->i++;
    r->stuck = 0;
    (*delta)++;
    return MOTE_OK;
}

/* The run's next op if it is a delete below the bound bk (in the node being
 * run). A put that goes on into the right sibling merges with the child
 * left underfull as before: the put fills the merged node. */
static const mote_kvop *run_next_del(const run *r, const uint8_t *bk, uint32_t bkl)
{
    if (r->i >= r->n || r->stuck || !r->ops[r->i].del)
        return NULL;
    const mote_kvop *op = &r->ops[r->i];
    return bk && keycmp(op->key, op->klen, bk, bkl) >= 0 ? NULL : op;
}

/* *gone = the entries of leaf ptr (from an earlier commit) if the run's next
 * ops delete every one of them, none with an overflow value; else 0. Such a
 * leaf is freed without a copy (bulk removals, delete_for_runs). */
static int run_clears(mote_txn *t, const uint8_t *ptr, const run *r, unsigned *gone)
{
    *gone = 0;
    if (!r->ops[r->i].del || ptr_birth(ptr) == (uint32_t)t->txnid)
        return MOTE_OK; /* a put, or a copy already: nothing to save */
    mpage *pg;
    int rc = mote__page_get(t, ptr, 0, &pg);
    if (rc)
        return rc;
    const uint8_t *L = pg->data; /* validated when read */
    unsigned nk = n_nkeys(L), j = 0;
    if (nk && r->n - r->i >= nk && !leaf_keycmp(L, nk - 1, r->ops[r->i + nk - 1].key,
                                                 r->ops[r->i + nk - 1].klen))
        for (cell c; j < nk; j++) {
            const mote_kvop *op = &r->ops[r->i + j];
            leaf_cell(L, j, &c);
            if (!op->del || c.ovf || keycmp(c.key, c.klen, op->key, op->klen))
                break;
        }
    mote__page_put(t->s, pg);
    *gone = nk && j == nk ? nk : 0;
    return MOTE_OK;
}

/* Apply the run below node n (keys under bound bk), child by child. */
static int run_rec(mote_txn *t, uint8_t *n, int is_root, run *r, const uint8_t *bk,
                   uint32_t bkl, int64_t *delta)
{
    if (n_type(n) == NODE_LEAF)
        return run_leaf(t, n, is_root, r, bk, bkl, delta);
    while (r->i < r->n && !r->stuck) {
        const mote_kvop *op = &r->ops[r->i];
        if (bk && keycmp(op->key, op->klen, bk, bkl) >= 0)
            break;
        unsigned idx = branch_search(n, op->key, op->klen), nk = n_nkeys(n);
        const uint8_t *cbk = bk;
        uint32_t cbkl = bkl;
        if (idx + 1 < nk)
            cbk = branch_key(n, idx + 1, &cbkl);
        uint8_t *ptr = branch_ptr(n, idx);
        mpage *child;
        unsigned gone = 0;
        int rc = n_level(n) == 1 ? run_clears(t, ptr, r, &gone) : MOTE_OK;
        if (!rc && gone) { /* the run deletes the whole leaf: no copy of it */
            r->i += gone;
            *delta -= gone;
            const mote_kvop *nx = run_next_del(r, bk, bkl);
            rc = drop_child(t, n, is_root, idx, ptr_pgno(ptr), ptr_birth(ptr),
                            nx ? nx->key : NULL, nx ? nx->klen : 0);
            if (rc)
                return rc;
            continue;
        }
        if (!rc)
            rc = mote__page_write(t, ptr, (int)n_level(n) - 1, &child);
        if (rc)
            return rc;
        size_t before = r->i;
        int64_t d = 0;
        rc = run_rec(t, child->data, 0, r, cbk, cbkl, &d);
        if (rc)
            return rc;
        ptr = branch_ptr(n, idx);
        wr64(ptr + 12, (uint64_t)((int64_t)ptr_count(ptr) + d));
        *delta += d;
        if (d < 0) {
            const mote_kvop *nx = run_next_del(r, bk, bkl);
            if ((rc = child_fixup(t, n, is_root, idx, child, nx ? nx->key : NULL,
                                  nx ? nx->klen : 0)))
                return rc;
        }
        if (d > 0 && (rc = run_pack(t, n, is_root, r, idx, child)))
            return rc;
        if (r->grow) { /* only the leaf's parent starts a leaf */
            r->grow = 0;
            if (d >= 0 && (rc = run_grow(t, n, is_root, r, idx, delta)))
                return rc;
        }
        if (r->i == before)
            break;
    }
    return MOTE_OK;
}

int mote__bt_apply(mote_txn *t, const mote_kvop *ops, size_t n, uint64_t *missing)
{
    run r = {ops, n, 0, missing, 0, 0};
    mote__txn_release_held(t);
    while (r.i < n) {
        size_t before = r.i;
        int64_t d = 0;
        int rc = run_rec(t, txn_root(t), 1, &r, NULL, 0, &d);
        if (!rc && d < 0)
            rc = root_shrink(t);
        if (!rc && r.i == before) { /* a split or an overflow value */
            const mote_kvop *op = &ops[r.i++];
            t->split_next = r.i < n ? &ops[r.i] : NULL;
            rc = op->del ? mote__bt_del(t, op->key, op->klen, 0)
                         : mote__bt_put(t, op->key, op->klen, op->val, op->vlen, 0);
            t->split_next = NULL;
            if (rc == MOTE_NOTFOUND) {
                (*missing)++;
                rc = MOTE_OK;
            }
        }
        if (rc)
            return rc;
        r.stuck = 0;
    }
    return MOTE_OK;
}

int mote__bt_rank(mote_txn *t, const uint8_t *k, size_t kl, uint64_t *rank)
{
    const uint8_t *n = txn_root(t);
    mpage *pg = NULL;
    uint64_t r = 0;
    mote__txn_release_held(t);
    while (n_type(n) == NODE_BRANCH) {
        unsigned i = k ? branch_search(n, k, (uint32_t)kl) : n_nkeys(n);
        for (unsigned j = 0; j < i; j++)
            r += ptr_count(n + n_off(n, j));
        if (!k)
            break;
        mpage *child;
        int rc = mote__page_get(t, n + n_off(n, i), (int)n_level(n) - 1, &child);
        mote__page_put(t->s, pg);
        if (rc)
            return rc;
        pg = child;
        n = pg->data;
    }
    if (n_type(n) == NODE_LEAF) {
        int found;
        r += k ? leaf_search(n, k, (uint32_t)kl, &found) : n_nkeys(n);
    }
    mote__page_put(t->s, pg);
    *rank = r;
    return MOTE_OK;
}

/* ---- relocation (for shrinking the file) ----------------------------------- */

/* Rewrite an overflow chain if any of its pages is at or above `cut`. */
static int reloc_ovf(mote_txn *t, uint8_t *leaf, uint32_t cap, unsigned i, uint32_t cut)
{
    cell c;
    mote__cell(leaf, cap, i, &c);
    uint8_t ptr[CHILD] = {0};
    memcpy(ptr, c.val, PTR12);
    int high = 0;
    while (ptr_pgno(ptr) && !high) {
        mpage *pg;
        int rc = mote__page_get(t, ptr, -1, &pg);
        if (rc)
            return rc;
        high = pg->pgno >= cut;
        memcpy(ptr, pg->data + NH, PTR12);
        mote__page_put(t->s, pg);
    }
    if (!high)
        return MOTE_OK;
    mote_val v;
    uint8_t nptr[PTR12];
    int rc = mote__ovf_read(t, c.val, c.vlen, &v);
    if (!rc)
        rc = mote__ovf_write(t, v.data, v.size, nptr);
    if (!rc)
        rc = mote__ovf_free(t, c.val, c.vlen);
    if (!rc)
        memcpy((uint8_t *)c.val, nptr, PTR12);
    return rc;
}

/* Move every page at or above `cut` below it: leaves and overflow chains
 * that lie high are copied (copy-on-write takes the lowest free page);
 * branches are always copied, so their pointers can change. */
static int reloc_node(mote_txn *t, uint8_t *n, int is_root, uint32_t cut)
{
    uint32_t cap = node_cap(t, is_root);
    unsigned nk = n_nkeys(n);
    for (unsigned i = 0; i < nk; i++) {
        int rc = MOTE_OK;
        if (n_type(n) == NODE_LEAF) {
            cell c;
            mote__cell(n, cap, i, &c);
            if (c.ovf)
                rc = reloc_ovf(t, n, cap, i, cut);
        } else {
            uint8_t *ptr = branch_ptr(n, i);
            mpage *child;
            int level = (int)n_level(n) - 1;
            if (level > 0 || ptr_pgno(ptr) >= cut)
                rc = mote__page_write(t, ptr, level, &child);
            else
                rc = mote__page_get(t, ptr, level, &child);
            if (!rc && (level > 0 || child->dirty)) {
                rc = reloc_node(t, child->data, 0, cut);
            } else if (!rc) { /* a low leaf: only its overflow chains may move */
                int has_ovf = 0;
                for (unsigned j = 0; j < n_nkeys(child->data) && !has_ovf; j++) {
                    cell c;
                    mote__cell(child->data, t->s->P, j, &c);
                    has_ovf = c.ovf;
                }
                mote__page_put(t->s, child);
                if (has_ovf && !(rc = mote__page_write(t, ptr, level, &child)))
                    rc = reloc_node(t, child->data, 0, cut);
            }
        }
        if (rc)
            return rc;
    }
    return MOTE_OK;
}

int mote__bt_relocate(mote_txn *t, uint32_t cut)
{
    mote__txn_release_held(t);
    return reloc_node(t, txn_root(t), 1, cut);
}
