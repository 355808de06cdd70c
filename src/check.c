/*
 * check.c — full consistency check (fsck), compaction, and the lazy shrink
 * at close (mote__shrink; with MOTE_REPACK it repacks a store of up to 8 MB).
 *
 * mote_check reads every page of the latest commit from disk (not from the
 * cache) and verifies: each pointer's crc32c, page number and birth; node
 * structure; keys in order across the whole tree (each child's keys within
 * its parent's separators); the entry count in every pointer; every page
 * reachable exactly once (the commit chain's records and reserved page
 * count as reachable); the allocation bitmap equal to the reachable set;
 * every key's tree id present in the catalog, which sorts first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "object.h"

typedef struct ck {
    mote_store *s;
    mote_problems pr;
    uint8_t *seen;   /* reachable pages */
    uint32_t npages;
    uint64_t txnid;
    uint8_t *ids;    /* tree ids present in the catalog */
    uint32_t next_tree;
} ck;

/* Mark a page reachable; 0 if it was already (or is out of range). */
static int mark(ck *k, uint32_t pgno, const char *what)
{
    if (pgno < 2 || pgno >= k->npages) {
        mote__problem(&k->pr, "%s pointer to page %u outside the file (%u pages)", what, pgno,
                k->npages);
        return 0;
    }
    if (k->seen[pgno >> 3] & (1u << (pgno & 7))) {
        mote__problem(&k->pr, "page %u is reachable twice (%s)", pgno, what);
        return 0;
    }
    k->seen[pgno >> 3] |= (uint8_t)(1u << (pgno & 7));
    return 1;
}

/* Read a page from disk and check it against its pointer. */
static int load(ck *k, const uint8_t *ptr, uint8_t *buf, const char *what)
{
    if (!mark(k, ptr_pgno(ptr), what))
        return 0;
    if (ptr_birth(ptr) > (uint32_t)k->txnid && k->txnid < 0xFFFFFFFFull)
        mote__problem(&k->pr, "page %u: born in txn %u, after the commit (%llu)", ptr_pgno(ptr),
                ptr_birth(ptr), (unsigned long long)k->txnid);
    if (mote__read_page_raw(k->s, ptr_pgno(ptr), buf) ||
        mote__verify_page(k->s, buf, ptr, what)) {
        mote__problem(&k->pr, "%s", mote_errmsg(k->s));
        return 0;
    }
    return 1;
}

static void check_ovf(ck *k, const uint8_t *ptr12, uint64_t vlen, uint8_t *buf)
{
    uint8_t ptr[CHILD] = {0};
    memcpy(ptr, ptr12, PTR12);
    uint64_t have = 0, chunk = k->s->P - OVF_HDR;
    while (ptr_pgno(ptr)) {
        if (!load(k, ptr, buf, "overflow"))
            return;
        if (buf[0] != PAGE_OVERFLOW) {
            mote__problem(&k->pr, "page %u: type %u in an overflow chain", ptr_pgno(ptr), buf[0]);
            return;
        }
        have += chunk;
        memcpy(ptr, buf + NH, PTR12);
    }
    if (have < vlen || have >= vlen + chunk)
        mote__problem(&k->pr, "overflow chain of %llu bytes holds a %llu-byte value",
                (unsigned long long)have, (unsigned long long)vlen);
}

static void check_key_tree(ck *k, const uint8_t *key, uint32_t kl, int is_leaf)
{
    if (kl == 0) {
        mote__problem(&k->pr, "empty internal key");
        return;
    }
    uint32_t id = mote__key_tree(key, kl);
    if (id == 0 || id == 0xFFFFFFFF) {
        if (id == 0 && is_leaf && kl >= 1) {
            /* a catalog entry: remember its id */
            return;
        }
        mote__problem(&k->pr, "key with a malformed tree prefix");
        return;
    }
    if (id >= k->next_tree || !(k->ids[id >> 3] & (1u << (id & 7))))
        mote__problem(&k->pr, "key of tree %u, which is not in the catalog", id);
}

/* Returns the number of entries below the node. lo/hi bound its keys. */
static uint64_t check_node(ck *k, const uint8_t *n, uint32_t cap, int depth,
                           const uint8_t *lo, uint32_t lol, const uint8_t *hi,
                           uint32_t hil, int has_hi)
{
    uint64_t total = 0;
    unsigned nk = n_nkeys(n);
    uint8_t *buf = NULL;
    if (depth >= MAX_DEPTH) {
        mote__problem(&k->pr, "tree deeper than %d levels", MAX_DEPTH);
        return 0;
    }
    if (mote__node_check_order(n, cap))
        mote__problem(&k->pr, "%s (level %u)", mote_errmsg(k->s), n_level(n));
    for (unsigned i = 0; i < nk; i++) {
        cell c;
        if (mote__cell(n, cap, i, &c)) {
            mote__problem(&k->pr, "%s", mote_errmsg(k->s));
            break;
        }
        int is_first_branch = n_type(n) == NODE_BRANCH && i == 0;
        if (!is_first_branch) {
            if (lo && keycmp(c.key, c.klen, lo, lol) < 0)
                mote__problem(&k->pr, "key below its parent's separator (level %u)", n_level(n));
            if (has_hi && keycmp(c.key, c.klen, hi, hil) >= 0)
                mote__problem(&k->pr, "key at or above the next separator (level %u)", n_level(n));
        }
        if (n_type(n) == NODE_LEAF) {
            total++;
            check_key_tree(k, c.key, c.klen, 1);
            if (c.klen == 1 && c.key[0] == 0) { /* the store's identity (kv.c) */
                if (c.vlen != 8 || c.ovf)
                    mote__problem(&k->pr, "the store's identity has %llu bytes",
                                  (unsigned long long)c.vlen);
            } else if (c.klen >= 1 && c.key[0] == 0) { /* catalog entry */
                if (c.vlen != 4 || c.ovf) {
                    mote__problem(&k->pr, "catalog entry with a %llu-byte value",
                            (unsigned long long)c.vlen);
                } else {
                    uint32_t id = rd32(c.val);
                    if (id < 1 || id >= k->next_tree)
                        mote__problem(&k->pr, "catalog names tree id %u (next id %u)", id,
                                k->next_tree);
                    else if (k->ids[id >> 3] & (1u << (id & 7)))
                        mote__problem(&k->pr, "tree id %u named twice in the catalog", id);
                    else
                        k->ids[id >> 3] |= (uint8_t)(1u << (id & 7));
                }
            }
            if (c.ovf) {
                if (!buf && !(buf = mote__malloc(k->s->P)))
                    break;
                check_ovf(k, c.val, c.vlen, buf);
            }
            continue;
        }
        /* branch: bounds of child i are [key i, key i+1) */
        const uint8_t *clo = is_first_branch ? lo : c.key;
        uint32_t clol = is_first_branch ? lol : c.klen;
        const uint8_t *chi = hi;
        uint32_t chil = hil;
        int chas = has_hi;
        cell nx;
        if (i + 1 < nk && !mote__cell(n, cap, i + 1, &nx)) {
            chi = nx.key;
            chil = nx.klen;
            chas = 1;
        }
        if (!buf && !(buf = mote__malloc(k->s->P)))
            break;
        if (!load(k, c.ptr, buf, "tree"))
            continue;
        if (mote__node_validate(buf, k->s->P, (int)n_level(n) - 1, ptr_pgno(c.ptr))) {
            mote__problem(&k->pr, "%s", mote_errmsg(k->s));
            continue;
        }
        uint64_t below = check_node(k, buf, k->s->P, depth + 1, clo, clol, chi, chil, chas);
        if (below != ptr_count(c.ptr))
            mote__problem(&k->pr, "page %u: pointer says %llu entries, found %llu", ptr_pgno(c.ptr),
                    (unsigned long long)ptr_count(c.ptr), (unsigned long long)below);
        if (n_nkeys(buf) == 0)
            mote__problem(&k->pr, "page %u: empty node below a branch", ptr_pgno(c.ptr));
        total += below;
    }
    mote__free(buf);
    return total;
}

int mote_check(mote_store *s, void (*report)(void *, const char *), void *ctx)
{
    if (!s)
        return mote__err(MOTE_INVALID, "mote_check: store is NULL");
    mote_txn *t;
    int rc = mote__txn_begin(s, 0, &t);
    if (rc)
        return rc;
    const uint8_t *slot = t->root->data;
    ck k;
    memset(&k, 0, sizeof k);
    k.s = s;
    k.pr.report = report;
    k.pr.ctx = ctx;
    k.npages = rd32(slot + 32);
    k.txnid = t->txnid;
    k.next_tree = rd32(slot + 36);
    k.seen = mote__calloc(k.npages / 8 + 1, 1);
    k.ids = mote__calloc(k.next_tree / 8 + 1, 1);
    uint32_t nb = rd32(slot + 40), bpp = s->P - OVF_HDR;
    uint8_t *bm = mote__calloc(SLOT_INLINE_BM + (size_t)nb * bpp, 1);
    uint8_t *buf = mote__malloc(s->P);
    if (!k.seen || !k.ids || !bm || !buf) {
        rc = mote__err(MOTE_NOMEM, "out of memory checking %s", s->path);
        goto out;
    }
    k.seen[0] |= 3;
    memcpy(bm, slot + SLOT_INLINE_OFF, SLOT_INLINE_BM);
    for (uint32_t i = 0; i < nb; i++) {
        uint8_t ptr[CHILD] = {0};
        memcpy(ptr, slot + SLOT_BMP_OFF + i * PTR12, PTR12);
        if (load(&k, ptr, buf, "bitmap")) {
            if (buf[0] != PAGE_BITMAP)
                mote__problem(&k.pr, "bitmap page %u has type %u", ptr_pgno(ptr), buf[0]);
            memcpy(bm + SLOT_INLINE_BM + (size_t)i * bpp, buf + OVF_HDR, bpp);
        }
    }
    uint32_t chain[CHAIN_MAX + 1], nch = 0; /* pager.h COMMIT CHAIN */
    if (mote__chain_pages(s, slot, chain, &nch))
        mote__problem(&k.pr, "%s", mote_errmsg(s));
    for (uint32_t i = 0; i < nch; i++)
        mark(&k, chain[i], i + 1 < nch || !st_chain_next(slot) ? "commit record" : "reserved record");
    const uint8_t *root = slot + SLOT_ROOT_OFF;
    check_node(&k, root, s->P - 8 - SLOT_ROOT_OFF, 0, NULL, 0, NULL, 0, 0);
    for (uint32_t p = 0; p < k.npages; p++) {
        int used = (bm[p >> 3] >> (p & 7)) & 1, reach = (k.seen[p >> 3] >> (p & 7)) & 1;
        if (used && !reach)
            mote__problem(&k.pr, "page %u is marked in use but nothing refers to it (leak)", p);
        else if (!used && reach)
            mote__problem(&k.pr, "page %u is in use but marked free", p);
    }
    /* objects and indexes, once the pages are known to be sound */
    if (!k.pr.n && (rc = mote__check_objects(t, &k.pr)))
        goto out;
    rc = k.pr.n ? mote__err(MOTE_CORRUPT, "%s: %u problem(s) found", s->path,
                                k.pr.n)
                    : MOTE_OK;
out:
    mote__free(k.seen);
    mote__free(k.ids);
    mote__free(bm);
    mote__free(buf);
    mote__txn_abort(t);
    return rc;
}

/* ---- compaction -------------------------------------------------------------- */

/* Call fn(ctx, key, value) for every entry of t's tree (every named tree,
 * internal keys), in key order, until it returns non-zero: that, or MOTE_OK. */
static int each_entry(mote_txn *t, int (*fn)(void *ctx, const mote_val *k, const mote_val *v),
                      void *ctx)
{
    mote_cursor c;
    memset(&c, 0, sizeof c);
    c.t = t;
    uint8_t zero = 0;
    int rc;
    for (rc = mote__cur_seek(&c, &zero, 0, MOTE_SEEK_GE); rc == MOTE_OK;
         rc = mote__cur_step(&c, 1)) {
        mote_val k, v;
        if ((rc = mote__cur_entry(&c, &k, &v)) || (rc = fn(ctx, &k, &v)))
            break;
    }
    mote__cur_reset(&c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

static int copy_entry(void *wt, const mote_val *k, const mote_val *v)
{
    ((mote_txn *)wt)->changed = 1;
    return mote__bt_put(wt, k->data, k->size, v->data, v->size, 0);
}

int mote_compact(mote_store *s, const char *out_path)
{
    if (!s || !out_path)
        return mote__err(MOTE_INVALID, "mote_compact: NULL argument");
    if (store_forked(s))
        return mote__forked_err(s);
    int fd = s->io->open(s->io->ctx, out_path, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return fd == -EEXIST ? mote__err(MOTE_EXISTS, "%s already exists", out_path)
                             : mote__ioerr(fd, "create", out_path);
    s->io->close(s->io->ctx, fd);
    mote_options o = {MOTE_CREATE, s->P, 0, s->io};
    mote_store *d = NULL;
    mote_txn *rt = NULL, *wt = NULL;
    int rc = mote_open(out_path, &o, &d);
    if (!rc)
        rc = mote__txn_begin(s, 0, &rt);
    if (!rc)
        rc = mote__txn_begin(d, 1, &wt);
    if (rc)
        goto out;
    wt->no_chain = 1; /* the copy keeps its size */
    rc = each_entry(rt, copy_entry, wt);
    if (!rc) /* another store from now on: its own identity */
        rc = mote__kv_ident_set(wt, 0);
    if (!rc) {
        wt->next_tree = rd32(rt->root->data + 36);
        wt->changed = 1;
        rc = mote__txn_commit(wt);
        wt = NULL;
    }
out:
    if (wt)
        mote__txn_abort(wt);
    if (rt)
        mote__txn_abort(rt);
    if (d)
        mote_close(d);
    return rc;
}

/* ---- shrink at close ---------------------------------------------------------- */

#define SHRINK_MIN_BYTES (1u << 20)
#define REPACK_MAX_BYTES (8u << 20) /* a file up to this size is repacked ... */
#define REPACK_MIN_FREE 8u  /* ... when it has this many free pages, a quarter of its
                               pages (REPACK_FREE_PART), and its entries packed would
                               take as many fewer */
#define REPACK_FREE_PART 4u
/*
 * What a close that shrinks the file leaves past the last page in use: up
 * to this many bytes of free pages, so that the next session's first
 * commits overwrite blocks that exist instead of growing the file again. A
 * sync that grows a file also allocates its blocks and writes its inode: a
 * process that opens a store, updates its 300 objects and closes (the ORM
 * benchmark's cold "Update: Whole", after a close that shrank the file)
 * synced in 0.4-1.4 ms into a file cut at its last page, 0.26-0.32 ms into
 * the room. A close that moves nothing cuts every zero growth wrote past
 * the last page (a file kept as written, as a full-text index is, stays as
 * small as it can be).
 */
#define CLOSE_ROOM_BYTES (256u << 10)

/* Pages of the latest state (npages) and how many of them are in use. */
static void count_used(const mote_store *s, uint32_t *np, uint32_t *used)
{
    *np = rd32(s->cur->data + 32);
    *used = 0;
    for (uint32_t p = 0; p < *np; p++)
        *used += bit_get(s->bm, p);
}

/* The lowest cut with room below it for every used page at or above it and
 * for the pages a relocation copies besides: every branch page (the root's
 * children when the root, in the slot, is at level 2; in a deeper tree a
 * 32nd of the pages, as many as branches of 32 children would be) and the
 * bitmap pages. Too little room only leaves pages above the cut. */
static uint32_t low_cut(const mote_store *s, uint32_t np, uint32_t used)
{
    const uint8_t *root = s->cur->data + SLOT_ROOT_OFF;
    uint32_t lv = n_level(root);
    uint32_t room = (lv < 2 ? 0 : lv == 2 ? n_nkeys(root) : np / 32 + 4) +
                    mote__bmp_needed(s->P, np);
    uint32_t cut = np, above = 0; /* used pages at or above cut */
    while (cut > 2) {
        uint32_t a = above + bit_get(s->bm, cut - 1);
        uint32_t free_below = (cut - 1) - (used - a); /* below cut - 1 */
        if (free_below < a + room)
            break;
        cut--;
        above = a;
    }
    return cut;
}

/* The entries, one after another: key length, value length (u64 each), key,
 * value. */
typedef struct entries {
    uint8_t *buf;
    size_t bytes, cap;
} entries;

static int keep_entry(void *ctx, const mote_val *k, const mote_val *v)
{
    entries *e = ctx;
    int rc = mote__grow(&e->buf, &e->cap, e->bytes + 16 + k->size + v->size);
    if (rc)
        return rc;
    uint8_t *at = e->buf + e->bytes;
    wr64(at, k->size);
    wr64(at + 8, v->size);
    memcpy(at + 16, k->data, k->size);
    memcpy(at + 16 + k->size, v->data, v->size);
    e->bytes += 16 + k->size + v->size;
    return MOTE_OK;
}

/*
 * Repack a store: one write transaction deletes every entry and puts them
 * back in key order, as mote_compact fills a new file (appends leave
 * full leaves), committed as a checkpoint. Copy-on-write puts the new pages
 * into the free ones and past the end; the relocation after it moves them
 * down. A store that only ever grew has leaves about two-thirds full and,
 * after the commits of a session, free pages that the commit chain kept
 * (LangGraph's checkpoints, one store per thread: 75 pages, 43 in use with
 * leaves 63 % full; repacked and cut, 31). 1 if it committed; 0 if it left
 * the store as it was (nothing to gain, or an error).
 */
static int repack(mote_store *s)
{
    mote_txn *t;
    if (mote__txn_begin(s, 1, &t))
        return 0;
    t->no_chain = 1;
    entries e = {NULL, 0, 0};
    int rc = each_entry(t, keep_entry, &e);
    uint8_t *buf = e.buf;
    size_t bytes = e.bytes;
    /* what the entries take packed (their lengths stand for the cells'
     * headers and offsets), plus the slots: worth two more syncs at close? */
    uint64_t np = t->npages, packed = 2 + bytes / (s->P - 64) + 1;
    int worth = packed + REPACK_MIN_FREE <= np && (np - packed) * REPACK_FREE_PART >= np;
    for (int put = 0; worth && put < 2; put++) /* every entry deleted, then every entry put */
        for (size_t off = 0; off < bytes && !rc;) {
            const uint8_t *at = buf + off;
            size_t kl = (size_t)rd64(at), vl = (size_t)rd64(at + 8);
            rc = put ? mote__bt_put(t, at + 16, kl, at + 16 + kl, vl, 0)
                     : mote__bt_del(t, at + 16, kl, 1);
            off += 16 + kl + vl;
        }
    mote__free(buf);
    if (rc || !worth) {
        mote__txn_abort(t);
        return 0;
    }
    t->changed = 1;
    return mote__txn_commit(t) == MOTE_OK;
}

/*
 * Lazy shrink: with MOTE_REPACK, a file of up to REPACK_MAX_BYTES with a
 * quarter of its pages free is repacked when that pays, then its pages above
 * the lowest cut with room below it are moved below; otherwise a file at
 * least a quarter (and 1 MB) larger than its live pages need has the pages
 * that lie above the cut moved below it. Then the smaller npages (the last
 * page in use, and the room: CLOSE_ROOM_BYTES) is committed and the file cut
 * after that commit's sync; else only the zeros past the last page are cut.
 * Only handles that wrote (their bitmap is loaded) do this, at close,
 * alone with the store.
 */
void mote__shrink(mote_store *s)
{
    /* nothing to cut: no zeros past the last page, too small to move pages
     * (known without asking whether it is alone: two system calls) */
    int small = !(s->flags & MOTE_REPACK) && s->file_bytes < SHRINK_MIN_BYTES &&
                s->file_bytes <= (uint64_t)rd32(s->cur->data + 32) << s->page_shift;
    if (!s->bm || small || (s->flags & (MOTE_RDONLY | MOTE_NOSYNC)) || s->poisoned ||
        !mote__store_alone(s)) /* another process has the store open */
        return;
    if (s->seg) { /* s->bm must be the latest commit's: this process made it */
        pthread_mutex_lock(&s->mu);
        int rc = mote__share_refresh(s);
        pthread_mutex_unlock(&s->mu);
        if (rc || s->bm_txnid != s->txnid)
            return;
    }
    uint32_t np, used;
    count_used(s, &np, &used);
    /* room below the cut for every page that moves, plus copied branches */
    uint64_t cut = (uint64_t)used + used / 8 + 64;
    int big = s->file_bytes >= (cut << s->page_shift) + SHRINK_MIN_BYTES;
    int repacked = (s->flags & MOTE_REPACK) && s->file_bytes <= REPACK_MAX_BYTES &&
                   np - used >= REPACK_MIN_FREE &&
                   (np - used) * REPACK_FREE_PART >= np && repack(s);
    if (s->poisoned) /* (its commit failed) */
        return;
    if (repacked) {
        count_used(s, &np, &used);
        cut = low_cut(s, np, used);
    } else if (!big || s->file_bytes - (cut << s->page_shift) < s->file_bytes / 4) {
        cut = np;
    }
    if (cut >= np) {
        /* no move: cut only the zeros that growth wrote past the last
         * page (pager.c, growth; up to an eighth of the file), which no
         * state names */
        uint64_t end = (uint64_t)np << s->page_shift;
        if (s->file_bytes > end && s->io->ftruncate(s->io->ctx, s->fd, end) == 0)
            s->file_bytes = end;
        return;
    }
    mote_txn *t;
    if (mote__txn_begin(s, 1, &t))
        return;
    t->no_chain = 1; /* a checkpoint: the chain's pages go, nothing is reserved */
    if (mote__free_chain(t) || mote__bt_relocate(t, (uint32_t)cut)) {
        mote__txn_abort(t);
        return;
    }
    /* the new end: past the last page in use, not counting bitmap pages
     * (the commit copies those that lie past it to lower pages; the commit
     * chain's were freed above) */
    const uint8_t *bmp = t->root->data + SLOT_BMP_OFF;
    uint32_t last = t->npages, nb = rd32(t->root->data + 40);
    while (last > 2) {
        int is_bmp = 0;
        for (uint32_t i = 0; i < nb && !is_bmp; i++)
            is_bmp = ptr_pgno(bmp + i * PTR12) == last - 1;
        if (!is_bmp && bit_get(t->bm, last - 1))
            break;
        last--;
    }
    /* the room stays as free pages of the state, below the cut (they hold
     * old pages, as free pages may); none with MOTE_REPACK, which asks for
     * the smallest file */
    uint32_t room = (s->flags & MOTE_REPACK) ? 0 : CLOSE_ROOM_BYTES >> s->page_shift;
    if (last + room > cut)
        room = last < cut ? (uint32_t)cut - last : 0;
    t->npages = last + room;
    t->changed = 1;
    if (mote__txn_commit(t))
        return;
    uint64_t bytes = (uint64_t)rd32(s->cur->data + 32) << s->page_shift;
    if (s->io->ftruncate(s->io->ctx, s->fd, bytes) == 0)
        s->file_bytes = bytes;
}
