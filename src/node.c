/*
 * node.c — parsing and validating the B+tree's nodes (format: node.h):
 * varints, cells with full bounds checks, and the structural validation of
 * every node read from the file, so that the search code above may trust
 * offsets and lengths.
 */
#include "node.h"

/* ---- varints ----------------------------------------------------------------- */

unsigned mote__varint_put(uint8_t *p, uint64_t v)
{
    unsigned n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* ---- nodes and cells ------------------------------------------------------- */

void mote__node_init(uint8_t *n, uint32_t cap, int type, int level)
{
    (void)cap;
    n[0] = (uint8_t)type;
    n[1] = (uint8_t)level;
    wr16(n + 2, 0);
    wr16(n + 16, 0);
    wr16(n + 18, 0);
}

uint64_t mote__node_count(const uint8_t *n)
{
    if (n_type(n) == NODE_LEAF)
        return n_nkeys(n);
    uint64_t sum = 0;
    for (unsigned i = 0, nk = n_nkeys(n); i < nk; i++)
        sum += ptr_count(n + n_off(n, i));
    return sum;
}

/*
 * The bytes of a leaf's cells, checking each the way mote__cell and
 * mote__node_validate do, in one tight loop (every page read from the file
 * is validated, so this is most of the cost of a first read). 0 if any check
 * fails: the caller then finds and reports it through the general path.
 */
static int leaf_cells_ok(const uint8_t *n, uint32_t cap, unsigned nk, uint32_t area,
                         uint32_t *live)
{
    const uint8_t *end = n + cap;
    uint32_t lo = cap - area; /* >= NH + 2 * nk, checked by the caller */
    uint64_t sum = 0;
    for (unsigned i = 0; i < nk; i++) {
        uint32_t off = n_off(n, i);
        if (off < lo || off >= cap)
            return 0;
        const uint8_t *p = n + off;
        uint64_t kl, vf;
        unsigned a = mote__varint_fast(p, end, &kl);
        unsigned b = a ? mote__varint_fast(p + a, end, &vf) : 0;
        if (!b || kl > MAX_IKEY || (vf >> 1) > MOTE_MAX_VALUE)
            return 0;
        uint64_t size = a + b + kl + ((vf & 1) ? PTR12 : vf >> 1);
        if (off + size > cap || ((vf & 1) && ptr_pgno(p + a + b + kl) < 2))
            return 0;
        sum += size;
    }
    *live = (uint32_t)sum;
    return 1;
}

/*
 * Structural validation of a node read from disk: type, level, offsets and
 * lengths inside the node, cell bytes adding up. After it, search code may
 * trust offsets and lengths. Key order is not checked here (a misordered
 * node gives wrong answers, never a bad read); mote_check verifies it.
 */
int mote__node_validate(const uint8_t *n, uint32_t cap, int level, uint32_t pgno)
{
    unsigned nk = n_nkeys(n), type = n_type(n);
    if (type != (level == 0 ? NODE_LEAF : NODE_BRANCH))
        return CORRUPT("page %u: node type %u at level %d", pgno, type, level);
    if ((int)n_level(n) != level)
        return CORRUPT("page %u: level %u, expected %d", pgno, n_level(n), level);
    uint32_t area = n_area(n), holes = n_holes(n);
    if (NH + 2u * nk + area > cap || holes > area)
        return CORRUPT("page %u: %u cells and %u bytes do not fit", pgno, nk, area);
    if (type == NODE_BRANCH && nk < 1)
        return CORRUPT("page %u: empty branch", pgno);
    uint32_t live = 0;
    if (type == NODE_LEAF && leaf_cells_ok(n, cap, nk, area, &live)) {
        if (live + holes != area)
            return CORRUPT("page %u: cell bytes %u + holes %u != area %u", pgno, live,
                           holes, area);
        return MOTE_OK;
    }
    live = 0;
    for (unsigned i = 0; i < nk; i++) {
        cell c;
        int rc = mote__cell(n, cap, i, &c);
        if (rc)
            return rc;
        if (n_off(n, i) < cap - area)
            return CORRUPT("page %u: cell %u outside the cell area", pgno, i);
        live += c.size;
        if (type == NODE_BRANCH) {
            if (i == 0 && c.klen != 0)
                return CORRUPT("page %u: first branch key not empty", pgno);
            if (ptr_pgno(c.ptr) < 2)
                return CORRUPT("page %u: child pointer to page %u", pgno, ptr_pgno(c.ptr));
        } else if (c.ovf && ptr_pgno(c.val) < 2) {
            return CORRUPT("page %u: overflow pointer to page %u", pgno, ptr_pgno(c.val));
        }
    }
    if (live + holes != area)
        return CORRUPT("page %u: cell bytes %u + holes %u != area %u", pgno, live,
                       holes, area);
    return MOTE_OK;
}

int mote__node_check_order(const uint8_t *n, uint32_t cap)
{
    unsigned first = n_type(n) == NODE_BRANCH ? 1 : 0, nk = n_nkeys(n);
    for (unsigned i = first + 1; i < nk; i++) {
        cell a, b;
        if (mote__cell(n, cap, i - 1, &a) || mote__cell(n, cap, i, &b))
            return MOTE_CORRUPT;
        if (mote__keycmp(a.key, a.klen, b.key, b.klen) >= 0)
            return CORRUPT("keys out of order at cell %u", i);
    }
    return MOTE_OK;
}
