/*
 * node.h — the format of the B+tree's nodes and of the pointers between
 * pages, below both the pager (which validates every node it reads) and the
 * B+tree (which searches and edits them). node.c parses and validates.
 *
 * One B+tree holds every named tree: an entry's internal key is the tree id
 * (1 or 2 bytes, order-preserving: id < 0x80 -> [id], else
 * [0x80 | id >> 8, id & 0xff]) followed by the user key. Tree 0 is the
 * catalog: name -> u32 tree id. So a tiny store is its root slot alone.
 *
 * Node (a data page, or the root area of a root slot, see pager.h):
 *     0  u8   type: 1 leaf, 2 branch (3 overflow, 4 bitmap for pages)
 *     1  u8   level (0 = leaf)
 *     2  u16  nkeys
 *     4  u32  pgno (0 in a slot)
 *     8  u64  birth txnid (0 in a slot)
 *    16  u16  area: bytes of the cell area, which is [cap - area, cap)
 *    18  u16  holes: bytes of deleted cells inside the area
 *    20  u16  cell offsets[nkeys], in key order
 *   Leaf cell: varint klen, varint (vlen << 1 | overflow), key, value; an
 *   overflow value is stored as a 12-byte pointer to its first page.
 *   Branch cell: 20-byte child pointer, varint klen, key. The key of cell 0
 *   is empty (minus infinity); child i holds keys in [key i, key i+1).
 *
 * Child pointer (20 bytes): u32 pgno, u32 birth (low 32 bits of the txnid
 * that wrote the child), u32 crc32c of the child page, u64 entries below.
 * Overflow page: header (type 3, pgno, birth), at 20 a 12-byte pointer
 * {pgno, birth32, crc} to the next page (pgno 0 = last), data from 32.
 * Bitmap page: header (type 4, pgno, birth), bits from 32.
 */
#ifndef MOTE_NODE_H
#define MOTE_NODE_H

#include "support.h"

#define PTR12 12u    /* {pgno, birth32, crc} */
#define NODE_LEAF 1
#define NODE_BRANCH 2
#define PAGE_OVERFLOW 3
#define PAGE_BITMAP 4
#define NH 20u       /* node header bytes */
#define CHILD 20u    /* child pointer bytes */
#define OVF_HDR 32u  /* overflow / bitmap page header bytes */
#define MAX_DEPTH 24 /* a tree deeper than this is corrupt */
#define MAX_IKEY (MOTE_MAX_KEY + 2u) /* internal key: tree prefix + key */

/* The tree id an internal key starts with (the inverse of mote__tree_prefix, kv.h);
 * 0xFFFFFFFF if the key is too short for its prefix. */
static inline uint32_t mote__key_tree(const uint8_t *key, uint32_t kl)
{
    if (!kl)
        return 0xFFFFFFFF;
    return key[0] < 0x80 ? key[0] : kl >= 2 ? ((key[0] & 0x7fu) << 8 | key[1]) : 0xFFFFFFFF;
}

/* Key order: memcmp, shorter first on a tie. Inline because keys are short
 * and share long prefixes (the tree id, then the index value). */
static inline int mote__keycmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    uint32_t m = al < bl ? al : bl;
    for (; m >= 8; m -= 8, a += 8, b += 8) {
        uint64_t x = mote__be64(a), y = mote__be64(b);
        if (x != y)
            return x < y ? -1 : 1;
    }
    for (; m; m--, a++, b++)
        if (*a != *b)
            return *a < *b ? -1 : 1;
    return (al > bl) - (al < bl);
}

static inline uint32_t ptr_pgno(const uint8_t *p) { return rd32(p); }
static inline uint32_t ptr_birth(const uint8_t *p) { return rd32(p + 4); }
static inline uint32_t ptr_crc(const uint8_t *p) { return rd32(p + 8); }
static inline uint64_t ptr_count(const uint8_t *p) { return rd64(p + 12); }

static inline unsigned n_type(const uint8_t *n) { return n[0]; }
static inline unsigned n_level(const uint8_t *n) { return n[1]; }
static inline unsigned n_nkeys(const uint8_t *n) { return rd16(n + 2); }
static inline uint32_t n_area(const uint8_t *n) { return rd16(n + 16); }
static inline uint32_t n_holes(const uint8_t *n) { return rd16(n + 18); }
static inline uint32_t n_off(const uint8_t *n, unsigned i) { return rd16(n + NH + 2 * i); }

/* varint (LEB128) helpers; return bytes used, 0 on malformed input. Inline
 * (like the cell parser below): the search and cursor code of btree.c calls
 * them on every step, and a call there costs ~1% of a full scan. */
static inline unsigned mote__varint_get(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && p + i < end; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}
/* The same, with one or two bytes (every key length, value lengths below
 * 8 KB, layout numbers) decoded inline. */
static inline unsigned mote__varint_fast(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    if (p < end && p[0] < 0x80) {
        *v = p[0];
        return 1;
    }
    if (p + 1 < end && p[1] < 0x80) {
        *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        return 2;
    }
    return mote__varint_get(p, end, v);
}
unsigned mote__varint_put(uint8_t *p, uint64_t v);
/* Bytes mote__varint_put writes for v. */
static inline unsigned mote__varint_size(uint64_t v)
{
    unsigned b = 1;
    for (; v >= 0x80; v >>= 7)
        b++;
    return b;
}

/* Parsed cell */
typedef struct cell {
    const uint8_t *key;
    uint32_t klen;
    const uint8_t *val;  /* leaf: inline value or 12-byte overflow pointer */
    uint64_t vlen;       /* leaf: the value's full length */
    int ovf;             /* leaf: value lives in overflow pages */
    const uint8_t *ptr;  /* branch: child pointer */
    uint32_t size;       /* bytes the cell occupies */
} cell;
/* Parse cell i with full bounds checks (MOTE_CORRUPT names the problem). */
static inline int mote__cell(const uint8_t *n, uint32_t cap, unsigned i, cell *c)
{
    uint32_t off = n_off(n, i);
    const uint8_t *end = n + cap, *p = n + off;
    uint64_t kl, vf;
    unsigned a, b;
    memset(c, 0, sizeof *c);
    if (off < NH + 2u * n_nkeys(n) || off >= cap)
        return CORRUPT("cell %u at offset %u outside its node", i, off);
    if (n_type(n) == NODE_BRANCH) {
        if (off + CHILD >= cap)
            return CORRUPT("branch cell %u truncated", i);
        c->ptr = p;
        if (!(a = mote__varint_get(p + CHILD, end, &kl)) || kl > MAX_IKEY ||
            p + CHILD + a + kl > end)
            return CORRUPT("branch cell %u: bad key length", i);
        c->key = p + CHILD + a;
        c->klen = (uint32_t)kl;
        c->size = CHILD + a + (uint32_t)kl;
        return MOTE_OK;
    }
    if (!(a = mote__varint_get(p, end, &kl)) || kl > MAX_IKEY ||
        !(b = mote__varint_get(p + a, end, &vf)) || (vf >> 1) > MOTE_MAX_VALUE)
        return CORRUPT("leaf cell %u: bad lengths", i);
    c->key = p + a + b;
    c->klen = (uint32_t)kl;
    c->ovf = (int)(vf & 1);
    c->vlen = vf >> 1;
    uint64_t vbytes = c->ovf ? PTR12 : c->vlen;
    if (p + a + b + kl + vbytes > end)
        return CORRUPT("leaf cell %u overruns its node", i);
    c->val = c->key + kl;
    c->size = (uint32_t)(a + b + kl + vbytes);
    return MOTE_OK;
}
/* Sum of the entries below a node. */
uint64_t mote__node_count(const uint8_t *n);
void mote__node_init(uint8_t *n, uint32_t cap, int type, int level);
/* Validate a node's structure (not its key order). 0 or MOTE_CORRUPT. */
int mote__node_validate(const uint8_t *n, uint32_t cap, int level, uint32_t pgno);
/* Keys strictly ascending within the node (mote_check). */
int mote__node_check_order(const uint8_t *n, uint32_t cap);

/* ---- searching validated nodes (btree.c, cursor.c) ----------------------- */

/* Leaf cell i of a validated node, without bounds checks (mote__cell
 * checks them for nodes not yet validated). */
static inline void leaf_cell(const uint8_t *n, unsigned i, cell *c)
{
    const uint8_t *p = n + n_off(n, i), *q;
    uint64_t kl = 0, vf = 0;
    q = p + mote__varint_fast(p, p + 10, &kl);
    q += mote__varint_fast(q, q + 10, &vf);
    c->key = q;
    c->klen = (uint32_t)kl;
    c->ovf = (int)(vf & 1);
    c->vlen = vf >> 1;
    c->val = q + kl;
    c->ptr = NULL;
    c->size = (uint32_t)(q - p + kl + (c->ovf ? PTR12 : c->vlen));
}

/* Fast accessors for validated nodes. */
static inline const uint8_t *lcell_key(const uint8_t *p, uint32_t *kl)
{
    uint32_t k = p[0];
    if (k < 0x80) {
        p++;
    } else {
        k = (k & 0x7f) | ((uint32_t)p[1] << 7);
        p += 2;
    }
    while (*p & 0x80) /* skip the value-length varint */
        p++;
    *kl = k;
    return p + 1;
}

static inline const uint8_t *leaf_key(const uint8_t *n, unsigned i, uint32_t *kl)
{
    return lcell_key(n + n_off(n, i), kl);
}

static inline const uint8_t *bcell_key(const uint8_t *p, uint32_t *kl)
{
    p += CHILD;
    uint32_t k = p[0];
    if (k < 0x80) {
        *kl = k;
        return p + 1;
    }
    *kl = (k & 0x7f) | ((uint32_t)p[1] << 7);
    return p + 2;
}

static inline const uint8_t *branch_key(const uint8_t *n, unsigned i, uint32_t *kl)
{
    return bcell_key(n + n_off(n, i), kl);
}

static inline uint8_t *branch_ptr(uint8_t *n, unsigned i) { return n + n_off(n, i); }

static inline int keycmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    return mote__keycmp(a, al, b, bl);
}

/* Leaf n's key i against k (< 0: before it). Not keycmp(leaf_key(n, i, &l),
 * l, ...): the order in which a call's arguments are evaluated is
 * unspecified, so l could be read before leaf_key sets it. */
static inline int leaf_keycmp(const uint8_t *n, unsigned i, const uint8_t *k, uint32_t kl)
{
    uint32_t l;
    const uint8_t *x = leaf_key(n, i, &l);
    return keycmp(x, l, k, kl);
}

/* Branch n's separator i against k, as leaf_keycmp. */
static inline int branch_keycmp(const uint8_t *n, unsigned i, const uint8_t *k, uint32_t kl)
{
    uint32_t l;
    const uint8_t *x = branch_key(n, i, &l);
    return keycmp(x, l, k, kl);
}

/* First index in [lo, hi) with key >= k (hi if none); *found if equal. */
static inline unsigned leaf_bisect(const uint8_t *n, unsigned lo, unsigned hi, const uint8_t *k,
                            uint32_t kl, int *found)
{
    uint32_t ml;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        const uint8_t *mk = leaf_key(n, mid, &ml);
        int c = keycmp(mk, ml, k, kl);
        if (c < 0) {
            lo = mid + 1;
        } else {
            if (c == 0)
                *found = 1;
            hi = mid;
        }
    }
    return lo;
}

/*
 * First index with key >= k; *found if equal. The last key is tried first:
 * ascending inserts (new ids, appended index entries) then cost one compare
 * per node instead of a binary search.
 */
static inline unsigned leaf_search(const uint8_t *n, const uint8_t *k, uint32_t kl, int *found)
{
    unsigned lo = 0, hi = n_nkeys(n);
    uint32_t ml;
    *found = 0;
    if (hi) {
        const uint8_t *lk = leaf_key(n, hi - 1, &ml);
        int c = keycmp(lk, ml, k, kl);
        if (c < 0)
            return hi;
        if (c == 0) {
            *found = 1;
            return hi - 1;
        }
        hi--;
    }
    return leaf_bisect(n, lo, hi, k, kl, found);
}

/* leaf_search for sorted runs: the answer is known to be >= from, and
 * usually near it (gallop forward, then bisect). */
static inline unsigned leaf_search_from(const uint8_t *n, unsigned from, const uint8_t *k, uint32_t kl,
                                 int *found)
{
    unsigned nk = n_nkeys(n), lo = from, step = 1, hi;
    uint32_t ml;
    *found = 0;
    for (;;) { /* find hi with key_hi >= k (or nk) */
        hi = lo + step - 1;
        if (hi >= nk) {
            hi = nk;
            break;
        }
        const uint8_t *mk = leaf_key(n, hi, &ml);
        int c = keycmp(mk, ml, k, kl);
        if (c >= 0) {
            if (c == 0) {
                *found = 1;
                return hi;
            }
            break;
        }
        lo = hi + 1;
        step *= 2;
    }
    return leaf_bisect(n, lo, hi, k, kl, found); /* key_hi > k; keys before lo are < k */
}

/*
 * How many cells after a key ck < k the key k probably is: keys that end in
 * an 8-byte big-endian number (object ids) and differ only there are mostly
 * dense, so k is the difference of the two numbers further on. 0: no guess.
 * Only a guess: searches using it stay correct when it is wrong.
 */
static inline unsigned dense_distance(const uint8_t *ck, uint32_t cl, const uint8_t *k, uint32_t kl)
{
    if (cl != kl || kl < 8)
        return 0;
    for (uint32_t i = 0; i < kl - 8; i++) /* the tree prefix: a byte or two */
        if (ck[i] != k[i])
            return 0;
    uint64_t dist = mote__be64(k + kl - 8) - mote__be64(ck + kl - 8);
    return dist < 0x10000 ? (unsigned)dist : 0;
}

/* leaf_search, trying first where dense ids put k: in a tree of objects
 * (a tree prefix and an 8-byte id, few ids deleted) the key at index i is
 * the first key's id + i, so one compare usually finds it instead of a
 * bisection (a get by id, and the lookups of a query's matches). */
static inline unsigned leaf_find(const uint8_t *n, const uint8_t *k, uint32_t kl, int *found)
{
    unsigned nk = n_nkeys(n);
    uint32_t fl;
    const uint8_t *fk = nk > 1 ? leaf_key(n, 0, &fl) : NULL;
    unsigned g = fk ? dense_distance(fk, fl, k, kl) : 0;
    if (g && g < nk) {
        const uint8_t *gk = leaf_key(n, g, &fl);
        int c = keycmp(gk, fl, k, kl);
        *found = c == 0;
        if (c == 0)
            return g;
        return c > 0 ? leaf_bisect(n, 1, g, k, kl, found) /* key_0 < k < key_g */
                     : leaf_bisect(n, g + 1, nk, k, kl, found);
    }
    return leaf_search(n, k, kl, found);
}

/* Largest index i with key_i <= k (key_0 is minus infinity). */
static inline unsigned branch_search(const uint8_t *n, const uint8_t *k, uint32_t kl)
{
    unsigned lo = 1, hi = n_nkeys(n);
    uint32_t ml;
    if (hi > 1) { /* the last child first, as in leaf_search */
        const uint8_t *mk = branch_key(n, hi - 1, &ml);
        if (keycmp(mk, ml, k, kl) <= 0)
            return hi - 1;
        hi--;
    }
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        const uint8_t *mk = branch_key(n, mid, &ml);
        if (keycmp(mk, ml, k, kl) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

#endif
