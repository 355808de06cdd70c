/*
 * pager.c — the store file: root slots, page cache, page allocation,
 * transactions, the one-fdatasync commit, open with recovery, close.
 * The file format and invariants are described in pager.h (nodes: node.h).
 *
 * COMMIT (write txn W on durable base D, whose slot is s->base_slot)
 *   1. Dirty pages live in the txn's dirty map; each was allocated from
 *      pages free in D and not pending (never a page reachable from D).
 *   2. place_pages(): a small commit's tree nodes are renumbered onto as
 *      few runs of free pages as possible (one write request per run).
 *      finalize(): bottom-up over dirty nodes, store each child's crc32c in
 *      its parent pointer.
 *   3. Bitmap: every bitmap page whose bits changed is copied to a newly
 *      allocated page (looping until no more change: allocating for the
 *      bitmap changes the bitmap), the old one freed.
 *   4. Growth: above 64 KB the file grows in chunks written as real zeros in
 *      the same batch, so later commits overwrite blocks that exist.
 *   5. pwritev the dirty pages in page order, then pwrite the slot into the
 *      slot index that does not hold D, then one fdatasync. A failed slot
 *      write or sync poisons the store; no sync is ever retried.
 *   6. Publish: the slot becomes s->cur, dirty pages move into the cache,
 *      pages freed by W become pending (tag W) until no snapshot < W lives.
 *
 * CLOSE: after writes, a clean-close marker goes (unsynced) into the other
 * slot. A handle that wrote first shrinks the file if its free tail is large
 * (a commit with a smaller npages, then ftruncate after its sync).
 *
 * OPEN: one pread of both slots. The newest valid commit slot is W. If the
 * other slot is a clean-close marker naming W, W is trusted as is; else
 * every page W wrote (pointers with birth == W) is verified and, on any
 * failure, the store falls back to D. An unclean writable open syncs once
 * before its first commit so that nothing is built on a non-durable base.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>

#include "checksum.h"
#include "pager.h"

#define GROW_EXACT_BYTES (64u * 1024u)
#define GROW_MAX_CHUNK (8u * 1024u * 1024u)
#define WRITE_BATCH 512 /* iovecs per pwritev */

static const uint8_t zero_page[65536];

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
/* Its address identifies a thread: the one holding a store's writer lock. */
static _Thread_local char thread_token;
static mote_store *reg_head;

/* ---- Bitmap helpers ---------------------------------------------------- */

static inline void bit_set(uint8_t *b, uint32_t p) { b[p >> 3] |= (uint8_t)(1u << (p & 7)); }
static inline void bit_clr(uint8_t *b, uint32_t p) { b[p >> 3] &= (uint8_t)~(1u << (p & 7)); }

static uint32_t bmp_bytes_per_page(uint32_t P) { return P - OVF_HDR; }

uint32_t mote__bmp_needed(uint32_t P, uint32_t npages)
{
    if (npages <= SLOT_INLINE_BITS)
        return 0;
    uint64_t bpp = (uint64_t)bmp_bytes_per_page(P) * 8;
    return (uint32_t)((npages - SLOT_INLINE_BITS + bpp - 1) / bpp);
}

static uint32_t max_pages(uint32_t P)
{
    uint64_t m = SLOT_INLINE_BITS + (uint64_t)SLOT_MAX_BMP * bmp_bytes_per_page(P) * 8;
    return m > 0xFFFFFFF0u ? 0xFFFFFFF0u : (uint32_t)m;
}

/* bytes of bitmap needed to cover npages, rounded up to whole bitmap pages */
static uint32_t bm_cover_bytes(uint32_t P, uint32_t npages)
{
    return SLOT_INLINE_BM + mote__bmp_needed(P, npages) * bmp_bytes_per_page(P);
}

static int grow_bytes(uint8_t **b, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return MOTE_OK;
    uint32_t n = *cap ? *cap : SLOT_INLINE_BM;
    while (n < need)
        n *= 2;
    uint8_t *nb = mote__realloc(*b, n);
    if (!nb)
        return mote__err(MOTE_NOMEM, "out of memory growing the page bitmap");
    memset(nb + *cap, 0, n - *cap);
    *b = nb;
    *cap = n;
    return MOTE_OK;
}

/* ---- Slots ---------------------------------------------------------------- */

static uint64_t slot_hash(const uint8_t *slot, uint32_t P)
{
    return mote__hash64(slot, P - 8, 0x4D4F5445534C4F54ull);
}

static void slot_seal(uint8_t *slot, uint32_t P) { wr64(slot + P - 8, slot_hash(slot, P)); }

/* 1 = valid commit slot, 2 = valid marker, 0 = invalid */
int mote__slot_valid(const uint8_t *slot, uint32_t P, int index)
{
    if (rd64(slot) != MOTE_MAGIC || rd32(slot + 8) != MOTE_FORMAT_VERSION ||
        rd32(slot + 12) != P || rd32(slot + 16) != (uint32_t)index)
        return 0;
    if (rd64(slot + P - 8) != slot_hash(slot, P))
        return 0;
    uint32_t kind = rd32(slot + 20);
    if (kind == SLOT_KIND_MARKER)
        return 2;
    if (kind != SLOT_KIND_COMMIT)
        return 0;
    uint32_t npages = rd32(slot + 32), next_tree = rd32(slot + 36);
    if (npages < 2 || npages > max_pages(P) || next_tree < 1 ||
        next_tree > MOTE_MAX_TREES + 1 ||
        rd32(slot + 40) != mote__bmp_needed(P, npages))
        return 0;
    const uint8_t *root = slot + SLOT_ROOT_OFF;
    if (n_level(root) >= MAX_DEPTH ||
        mote__node_validate(root, P - 8 - SLOT_ROOT_OFF, (int)n_level(root), 0))
        return 0;
    return 1;
}

static void slot_init_header(uint8_t *slot, uint32_t P, int index, uint32_t kind,
                             uint64_t txnid)
{
    wr64(slot, MOTE_MAGIC);
    wr32(slot + 8, MOTE_FORMAT_VERSION);
    wr32(slot + 12, P);
    wr32(slot + 16, (uint32_t)index);
    wr32(slot + 20, kind);
    wr64(slot + 24, txnid);
}

static snap *snap_new(uint32_t P)
{
    snap *sn = mote__malloc(sizeof *sn + P);
    if (!sn)
        return NULL;
    sn->refs = 1;
    sn->data = (uint8_t *)(sn + 1);
    return sn;
}

static void snap_unref(snap *sn)
{
    if (sn && --sn->refs == 0)
        mote__free(sn);
}

/* ---- Page cache --------------------------------------------------------- */

static mpage *mpage_alloc(uint32_t P)
{
    mpage *pg = mote__malloc(sizeof *pg + P);
    if (!pg)
        return NULL;
    memset(pg, 0, sizeof *pg);
    pg->data = (uint8_t *)(pg + 1);
    return pg;
}

static void lru_unlink(mpage *pg)
{
    pg->lprev->lnext = pg->lnext;
    pg->lnext->lprev = pg->lprev;
    pg->lprev = pg->lnext = NULL;
}

static void lru_push(mote_store *s, mpage *pg)
{
    pg->lnext = s->lru.lnext;
    pg->lprev = &s->lru;
    s->lru.lnext->lprev = pg;
    s->lru.lnext = pg;
}

static mpage *cache_find(mote_store *s, uint32_t pgno)
{
    if (!s->hash)
        return NULL;
    for (mpage *pg = s->hash[pgno & s->hash_mask]; pg; pg = pg->hnext)
        if (pg->pgno == pgno)
            return pg;
    return NULL;
}

static void cache_unlink(mote_store *s, mpage *pg)
{
    mpage **pp = &s->hash[pg->pgno & s->hash_mask];
    while (*pp != pg)
        pp = &(*pp)->hnext;
    *pp = pg->hnext;
    pg->hnext = NULL;
    pg->cached = 0;
    s->ncached--;
    if (pg->refs == 0) {
        lru_unlink(pg);
        mote__free(pg);
    }
}

static void cache_evict(mote_store *s)
{
    while (s->ncached > s->cache_limit && s->lru.lprev != &s->lru)
        cache_unlink(s, s->lru.lprev);
}

/* Insert pg (refs already set) replacing any entry of the same pgno. */
static int cache_insert(mote_store *s, mpage *pg)
{
    if (!s->hash || s->ncached + 1 > (s->hash_mask + 1)) {
        uint32_t n = s->hash ? (s->hash_mask + 1) * 2 : 64;
        mpage **h = mote__calloc(n, sizeof *h);
        if (!h) {
            if (!s->hash)
                return MOTE_NOMEM;
        } else {
            for (uint32_t i = 0; s->hash && i <= s->hash_mask; i++)
                for (mpage *p = s->hash[i], *nx; p; p = nx) {
                    nx = p->hnext;
                    p->hnext = h[p->pgno & (n - 1)];
                    h[p->pgno & (n - 1)] = p;
                }
            mote__free(s->hash);
            s->hash = h;
            s->hash_mask = n - 1;
        }
    }
    mpage *old = cache_find(s, pg->pgno);
    if (old)
        cache_unlink(s, old);
    pg->hnext = s->hash[pg->pgno & s->hash_mask];
    s->hash[pg->pgno & s->hash_mask] = pg;
    pg->cached = 1;
    s->ncached++;
    if (pg->refs == 0)
        lru_push(s, pg);
    return MOTE_OK;
}

void mote__page_put(mote_store *s, mpage *pg)
{
    if (!pg || pg->dirty)
        return;
    pthread_mutex_lock(&s->mu);
    if (--pg->refs == 0) {
        if (pg->cached)
            lru_push(s, pg);
        else
            mote__free(pg);
    }
    cache_evict(s);
    pthread_mutex_unlock(&s->mu);
}

/* ---- Reading and verifying pages ------------------------------------------ */

int mote__read_page_raw(mote_store *s, uint32_t pgno, uint8_t *buf)
{
    ssize_t r = s->io->pread(s->io->ctx, s->fd, buf, s->P, (uint64_t)pgno << s->page_shift);
    if (r < 0)
        return mote__ioerr((int)r, "read", s->path);
    if ((size_t)r != s->P)
        return CORRUPT("page %u lies beyond the end of the file", pgno);
    return MOTE_OK;
}

int mote__verify_page(const mote_store *s, const uint8_t *buf, const uint8_t *ptr,
                      const char *what)
{
    uint32_t pgno = ptr_pgno(ptr);
    if (mote__crc32c(0, buf, s->P) != ptr_crc(ptr))
        return CORRUPT("%s page %u: checksum mismatch", what, pgno);
    if (rd32(buf + 4) != pgno)
        return CORRUPT("%s page %u: holds page number %u (misdirected write)",
                       what, pgno, rd32(buf + 4));
    if ((uint32_t)rd64(buf + 8) != ptr_birth(ptr))
        return CORRUPT("%s page %u: written by txn %llu, expected %u (stale page)",
                       what, pgno, (unsigned long long)rd64(buf + 8), ptr_birth(ptr));
    return MOTE_OK;
}

static int validate_aux(const mote_store *s, const uint8_t *buf, int type)
{
    if (buf[0] != type)
        return CORRUPT("page %u: type %u, expected %d", rd32(buf + 4), buf[0], type);
    if (type == PAGE_OVERFLOW) {
        uint32_t next = rd32(buf + NH);
        if (next == 1 || (next != 0 && next < 2))
            return CORRUPT("overflow page %u: bad next page %u", rd32(buf + 4), next);
    }
    (void)s;
    return MOTE_OK;
}

static mpage *dirty_find(const mote_txn *t, uint32_t pgno)
{
    if (!t->dhash)
        return NULL;
    for (mpage *pg = t->dhash[pgno & t->dmask]; pg; pg = pg->hnext)
        if (pg->pgno == pgno)
            return pg;
    return NULL;
}

int mote__page_get(mote_txn *t, const uint8_t *ptr, int level, mpage **out)
{
    mote_store *s = t->s;
    uint32_t pgno = ptr_pgno(ptr), b32 = ptr_birth(ptr);
    if (t->write && b32 == (uint32_t)t->txnid) {
        mpage *d = dirty_find(t, pgno);
        if (d) {
            *out = d;
            return MOTE_OK;
        }
    }
    if (pgno < 2 || pgno >= rd32(t->root->data + 32))
        return CORRUPT("pointer to page %u outside the file (%u pages)", pgno,
                       rd32(t->root->data + 32));
    pthread_mutex_lock(&s->mu);
    mpage *pg = cache_find(s, pgno);
    if (pg && (uint32_t)pg->birth == b32) {
        if (pg->refs++ == 0)
            lru_unlink(pg);
        pthread_mutex_unlock(&s->mu);
        *out = pg;
        return MOTE_OK;
    }
    pthread_mutex_unlock(&s->mu);

    mpage *np = mpage_alloc(s->P);
    if (!np)
        return mote__err(MOTE_NOMEM, "out of memory reading page %u", pgno);
    int rc = mote__read_page_raw(s, pgno, np->data);
    if (!rc)
        rc = mote__verify_page(s, np->data, ptr, level < 0 ? "overflow" : "tree");
    if (!rc)
        rc = level < 0 ? validate_aux(s, np->data, PAGE_OVERFLOW)
                       : mote__node_validate(np->data, s->P, level, pgno);
    if (rc) {
        mote__free(np);
        return rc;
    }
    np->pgno = pgno;
    np->birth = rd64(np->data + 8);
    np->refs = 1;
    pthread_mutex_lock(&s->mu);
    pg = cache_find(s, pgno);
    if (pg && pg->birth == np->birth) { /* another thread loaded it */
        if (pg->refs++ == 0)
            lru_unlink(pg);
        mote__free(np);
        np = pg;
    } else if (cache_insert(s, np)) {
        np->cached = 0; /* uncached: freed at unpin */
    }
    cache_evict(s);
    pthread_mutex_unlock(&s->mu);
    *out = np;
    return MOTE_OK;
}

/* ---- Allocation (write transactions) ---------------------------------------- */

static int dirty_add(mote_txn *t, mpage *pg)
{
    if (!t->dhash || t->ndirty + 1 > t->dmask + 1) {
        uint32_t n = t->dhash ? (t->dmask + 1) * 2 : 64;
        mpage **h = mote__calloc(n, sizeof *h);
        if (!h)
            return mote__err(MOTE_NOMEM, "out of memory tracking dirty pages");
        for (uint32_t i = 0; t->dhash && i <= t->dmask; i++)
            for (mpage *p = t->dhash[i], *nx; p; p = nx) {
                nx = p->hnext;
                p->hnext = h[p->pgno & (n - 1)];
                h[p->pgno & (n - 1)] = p;
            }
        mote__free(t->dhash);
        t->dhash = h;
        t->dmask = n - 1;
    }
    pg->hnext = t->dhash[pg->pgno & t->dmask];
    t->dhash[pg->pgno & t->dmask] = pg;
    t->ndirty++;
    return MOTE_OK;
}

static void dirty_remove(mote_txn *t, mpage *pg)
{
    mpage **pp = &t->dhash[pg->pgno & t->dmask];
    while (*pp != pg)
        pp = &(*pp)->hnext;
    *pp = pg->hnext;
    t->ndirty--;
}

/* The txn's bitmap and the pending bits cover `npages` pages. */
static int bm_cover(mote_txn *t, uint32_t npages)
{
    uint32_t need = bm_cover_bytes(t->s->P, npages);
    int rc = grow_bytes(&t->bm, &t->bm_cap, need);
    return rc ? rc : grow_bytes(&t->s->pend, &t->s->pend_cap, need);
}

static int txn_alloc(mote_txn *t, uint32_t *out)
{
    mote_store *s = t->s;
    uint32_t np = t->npages, p = t->hint;
    while (p < np) {
        if ((p & 7) == 0 && p + 8 <= np && (t->bm[p >> 3] | s->pend[p >> 3]) == 0xff) {
            p += 8;
            continue;
        }
        if (!bit_get(t->bm, p) && !bit_get(s->pend, p))
            goto found;
        p++;
    }
    if (np >= max_pages(s->P))
        return mote__err(MOTE_FULL, "store %s is full: %u pages is the limit for "
                         "page size %u", s->path, np, s->P);
    int rc = bm_cover(t, np + 1);
    if (rc)
        return rc;
    p = np;
    t->npages = np + 1;
found:
    bit_set(t->bm, p);
    t->hint = p + 1;
    *out = p;
    return MOTE_OK;
}

/* A new dirty page; zeroed unless the caller overwrites all of it. */
static int page_new(mote_txn *t, mpage **out, int zero)
{
    uint32_t pgno = 0;
    mpage *pg = mpage_alloc(t->s->P);
    if (!pg)
        return mote__err(MOTE_NOMEM, "out of memory for a new page");
    int rc = txn_alloc(t, &pgno);
    if (!rc) {
        pg->pgno = pgno;
        rc = dirty_add(t, pg);
        if (rc)
            bit_clr(t->bm, pgno);
    }
    if (rc) {
        mote__free(pg);
        return rc;
    }
    if (zero)
        memset(pg->data, 0, t->s->P);
    wr32(pg->data + 4, pgno);
    wr64(pg->data + 8, t->txnid);
    pg->birth = t->txnid;
    pg->dirty = 1;
    *out = pg;
    return MOTE_OK;
}

int mote__page_new(mote_txn *t, mpage **out)
{
    return page_new(t, out, 1);
}

int mote__page_free(mote_txn *t, uint32_t pgno, uint64_t birth32)
{
    mote_store *s = t->s;
    mpage *d = birth32 == (uint32_t)t->txnid ? dirty_find(t, pgno) : NULL;
    if (d) {
        dirty_remove(t, d);
        mote__free(d);
        bit_clr(t->bm, pgno);
        if (pgno < t->hint)
            t->hint = pgno;
        return MOTE_OK;
    }
    if (t->nfreed == t->cap_freed) {
        size_t n = t->cap_freed ? t->cap_freed * 2 : 32;
        uint32_t *f = mote__realloc(t->freed, n * sizeof *f);
        if (!f)
            return mote__err(MOTE_NOMEM, "out of memory freeing a page");
        t->freed = f;
        t->cap_freed = n;
    }
    t->freed[t->nfreed++] = pgno;
    bit_clr(t->bm, pgno);
    bit_set(s->pend, pgno);
    return MOTE_OK;
}

int mote__page_write(mote_txn *t, uint8_t *ptr, int level, mpage **out)
{
    uint32_t pgno = ptr_pgno(ptr), b32 = ptr_birth(ptr);
    if (b32 == (uint32_t)t->txnid) {
        mpage *d = dirty_find(t, pgno);
        if (d) {
            *out = d;
            return MOTE_OK;
        }
    }
    mpage *old, *pg;
    int rc = mote__page_get(t, ptr, level, &old);
    if (rc)
        return rc;
    rc = page_new(t, &pg, 0);
    if (!rc) {
        memcpy(pg->data, old->data, t->s->P);
        wr32(pg->data + 4, pg->pgno);
        wr64(pg->data + 8, t->txnid);
        rc = mote__page_free(t, pgno, b32);
        if (rc) {
            mote__page_free(t, pg->pgno, (uint32_t)t->txnid);
        } else {
            wr32(ptr, pg->pgno);
            wr32(ptr + 4, (uint32_t)t->txnid);
            wr32(ptr + 8, 0); /* crc set at commit */
            *out = pg;
        }
    }
    mote__page_put(t->s, old);
    return rc;
}

/* ---- Overflow values ---------------------------------------------------- */

int mote__ovf_write(mote_txn *t, const uint8_t *v, size_t n, uint8_t *ptr12)
{
    uint32_t P = t->s->P, chunk = P - OVF_HDR;
    size_t npg = (n + chunk - 1) / chunk;
    uint8_t next[PTR12] = {0};
    for (size_t i = npg; i-- > 0;) {
        mpage *pg;
        int rc = mote__page_new(t, &pg);
        if (rc) {
            if (i + 1 < npg)
                mote__ovf_free(t, next, n - (i + 1) * chunk);
            return rc;
        }
        size_t off = i * chunk, len = n - off < chunk ? n - off : chunk;
        pg->data[0] = PAGE_OVERFLOW;
        memcpy(pg->data + NH, next, PTR12);
        memcpy(pg->data + OVF_HDR, v + off, len);
        wr32(next, pg->pgno);
        wr32(next + 4, (uint32_t)t->txnid);
        wr32(next + 8, mote__crc32c(0, pg->data, P));
    }
    memcpy(ptr12, next, PTR12);
    return MOTE_OK;
}

static int ovf_walk(mote_txn *t, const uint8_t *ptr12, size_t n, uint8_t *dst, int free_pages)
{
    uint32_t chunk = t->s->P - OVF_HDR;
    uint8_t ptr[CHILD] = {0};
    memcpy(ptr, ptr12, PTR12);
    size_t done = 0;
    while (ptr_pgno(ptr) != 0) {
        mpage *pg;
        int rc = mote__page_get(t, ptr, -1, &pg);
        if (rc)
            return rc;
        size_t len = n - done < chunk ? n - done : chunk;
        if (dst && done < n)
            memcpy(dst + done, pg->data + OVF_HDR, len);
        done += len;
        uint32_t pgno = pg->pgno, b32 = (uint32_t)pg->birth;
        memcpy(ptr, pg->data + NH, PTR12);
        mote__page_put(t->s, pg);
        if (free_pages && (rc = mote__page_free(t, pgno, b32)))
            return rc;
        if (done > n + chunk)
            return CORRUPT("overflow chain at page %u longer than its value", pgno);
    }
    if (done < n)
        return CORRUPT("overflow chain shorter than its value (%zu of %zu bytes)", done, n);
    return MOTE_OK;
}

int mote__ovf_read(mote_txn *t, const uint8_t *ptr12, size_t n, mote_val *out)
{
    if (n > t->vbuf_cap) {
        uint8_t *b = mote__realloc(t->vbuf, n);
        if (!b)
            return mote__err(MOTE_NOMEM, "out of memory reading a %zu-byte value", n);
        t->vbuf = b;
        t->vbuf_cap = n;
    }
    int rc = ovf_walk(t, ptr12, n, t->vbuf, 0);
    if (!rc) {
        out->data = t->vbuf;
        out->size = n;
    }
    return rc;
}

int mote__ovf_free(mote_txn *t, const uint8_t *ptr12, size_t n)
{
    return ovf_walk(t, ptr12, n, NULL, 1);
}

/* ---- Transactions ------------------------------------------------------ */

/* Load the allocation bitmap of the latest commit (writer, under wmu). */
static int load_bitmap(mote_store *s)
{
    const uint8_t *slot = s->cur->data;
    uint32_t npages = rd32(slot + 32), nb = rd32(slot + 40), bpp = bmp_bytes_per_page(s->P);
    uint32_t need = bm_cover_bytes(s->P, npages);
    uint8_t *bm = NULL;
    uint32_t cap = 0;
    int rc = grow_bytes(&bm, &cap, need);
    if (!rc)
        rc = grow_bytes(&s->pend, &s->pend_cap, need);
    if (rc) {
        mote__free(bm);
        return rc;
    }
    memcpy(bm, slot + SLOT_INLINE_OFF, SLOT_INLINE_BM);
    uint8_t *buf = nb ? mote__malloc(s->P) : NULL;
    if (nb && !buf)
        rc = mote__err(MOTE_NOMEM, "out of memory loading the page bitmap");
    for (uint32_t i = 0; !rc && i < nb; i++) {
        uint8_t ptr[CHILD] = {0};
        memcpy(ptr, slot + SLOT_BMP_OFF + i * PTR12, PTR12);
        rc = mote__read_page_raw(s, ptr_pgno(ptr), buf);
        if (!rc)
            rc = mote__verify_page(s, buf, ptr, "bitmap");
        if (!rc)
            rc = validate_aux(s, buf, PAGE_BITMAP);
        if (!rc)
            memcpy(bm + SLOT_INLINE_BM + i * bpp, buf + OVF_HDR, bpp);
    }
    mote__free(buf);
    if (rc) {
        mote__free(bm);
        return rc;
    }
    /* pages past npages must read as free */
    for (uint32_t p = npages; p < cap * 8u && (p & 7); p++)
        bit_clr(bm, p);
    if (npages / 8 + 1 < cap)
        memset(bm + (npages + 7) / 8, 0, cap - (npages + 7) / 8);
    s->bm = bm;
    s->bm_cap = cap;
    s->hint = 2;
    return MOTE_OK;
}

/* Pages freed by commits no live snapshot can see become free. */
static void release_pending(mote_store *s)
{
    uint64_t oldest = UINT64_MAX;
    pthread_mutex_lock(&s->mu);
    for (reader *r = s->readers; r; r = r->next)
        if (r->txnid < oldest)
            oldest = r->txnid;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < s->npend;) {
        if (s->pendv[i].tag <= oldest) {
            uint32_t p = s->pendv[i].pgno;
            bit_clr(s->pend, p);
            if (p < s->hint)
                s->hint = p;
            s->pendv[i] = s->pendv[--s->npend];
        } else {
            i++;
        }
    }
}

int mote__txn_begin(mote_store *s, int write, mote_txn **out)
{
    *out = NULL;
    mote_txn *t = mote__calloc(1, sizeof *t);
    if (!t)
        return mote__err(MOTE_NOMEM, "out of memory beginning a transaction");
    t->s = s;
    t->write = write;
    if (!write) {
        pthread_mutex_lock(&s->mu);
        if (s->poisoned) {
            pthread_mutex_unlock(&s->mu);
            mote__free(t);
            return mote__err(MOTE_POISONED, "store %s: an earlier sync failed; "
                             "close and reopen it", s->path);
        }
        t->root = s->cur;
        t->root->refs++;
        t->txnid = t->rd.txnid = s->txnid;
        t->rd.next = s->readers;
        s->readers = &t->rd;
        s->ntxn++;
        pthread_mutex_unlock(&s->mu);
        *out = t;
        return MOTE_OK;
    }
    if (s->flags & MOTE_RDONLY) {
        mote__free(t);
        return mote__err(MOTE_READONLY, "store %s was opened read-only", s->path);
    }
    if (atomic_load(&s->writer) == &thread_token) { /* waiting would never end */
        mote__free(t);
        return mote__err(MOTE_BUSY, "store %s: this thread already holds its write "
                         "transaction", s->path);
    }
    pthread_mutex_lock(&s->wmu);
    atomic_store(&s->writer, &thread_token);
    int rc = MOTE_OK;
    if (s->poisoned)
        rc = mote__err(MOTE_POISONED, "store %s: an earlier sync failed; close "
                       "and reopen it", s->path);
    if (!rc && !s->bm)
        rc = load_bitmap(s);
    if (!rc) {
        release_pending(s);
        t->root = snap_new(s->P);
        t->bm = mote__malloc(s->bm_cap);
        t->scratch = mote__malloc(s->P);
        if (!t->root || !t->bm || !t->scratch)
            rc = mote__err(MOTE_NOMEM, "out of memory beginning a write transaction");
    }
    if (rc) {
        if (t->root)
            snap_unref(t->root);
        mote__free(t->bm);
        mote__free(t->scratch);
        mote__free(t);
        atomic_store(&s->writer, NULL);
        pthread_mutex_unlock(&s->wmu);
        return rc;
    }
    memcpy(t->root->data, s->cur->data, s->P);
    memcpy(t->bm, s->bm, s->bm_cap);
    t->bm_cap = s->bm_cap;
    t->hint = s->hint;
    t->txnid = s->next_txnid;
    t->serial = ++s->txn_serial;
    t->npages = rd32(s->cur->data + 32);
    t->next_tree = rd32(s->cur->data + 36);
    pthread_mutex_lock(&s->mu);
    s->ntxn++;
    pthread_mutex_unlock(&s->mu);
    *out = t;
    return MOTE_OK;
}

void mote__txn_release_held(mote_txn *t)
{
    if (t->held) {
        mote__page_put(t->s, t->held);
        t->held = NULL;
    }
}

static void txn_free(mote_txn *t)
{
    mote_store *s = t->s;
    mote__txn_release_held(t);
    pthread_mutex_lock(&s->mu);
    if (!t->write) {
        reader **pp = &s->readers;
        while (*pp != &t->rd)
            pp = &(*pp)->next;
        *pp = t->rd.next;
    }
    snap_unref(t->root);
    s->ntxn--;
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; t->dhash && i <= t->dmask; i++)
        for (mpage *p = t->dhash[i], *nx; p; p = nx) {
            nx = p->hnext;
            mote__free(p);
        }
    mote__free(t->dhash);
    mote__free(t->bm);
    mote__free(t->freed);
    mote__free(t->scratch);
    mote__free(t->vbuf);
    mote__free(t->spare);
    if (t->write) {
        atomic_store(&s->writer, NULL);
        pthread_mutex_unlock(&s->wmu);
    }
    mote__free(t);
}

void mote__txn_abort(mote_txn *t)
{
    if (t->write)
        for (size_t i = 0; i < t->nfreed; i++)
            bit_clr(t->s->pend, t->freed[i]);
    txn_free(t);
}

/* Store each dirty child's crc32c in its parent pointer, bottom-up. */
static void finalize(mote_txn *t, uint8_t *node, uint32_t cap)
{
    if (n_type(node) != NODE_BRANCH)
        return;
    unsigned n = n_nkeys(node);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *ptr = node + n_off(node, i);
        (void)cap;
        if (ptr_birth(ptr) != (uint32_t)t->txnid)
            continue;
        mpage *pg = dirty_find(t, ptr_pgno(ptr));
        if (!pg)
            continue;
        finalize(t, pg->data, t->s->P);
        wr32(ptr + 8, mote__crc32c(0, pg->data, t->s->P));
    }
}

/* ---- Placement of a small commit's pages ---------------------------------- */

#define PLACE_MAX 64u /* dirty pages a commit places, at most */
#define PLACE_BMP 2u  /* pages kept for the bitmap pages the commit copies */
#define PLACE_SLACK 8u  /* free pages may reach 1/8 of the file ... */
#define PLACE_PIECES 2u /* ... so that a commit needs at most 2 runs */

typedef struct {
    uint32_t start, len;
} page_run;

typedef struct {
    uint8_t *ptr[PLACE_MAX]; /* the parent pointer of each dirty tree node */
    mpage *pg[PLACE_MAX];
    uint32_t n;
    page_run top[PLACE_MAX + PLACE_BMP]; /* the longest free runs, longest first */
    uint32_t ntop;
} placement;

/* Collect the dirty nodes below `node` and their parent pointers; 0 when
 * there are more than PLACE_MAX. */
static int place_collect(mote_txn *t, uint8_t *node, placement *pl)
{
    if (n_type(node) != NODE_BRANCH)
        return 1;
    unsigned n = n_nkeys(node);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *ptr = node + n_off(node, i);
        if (ptr_birth(ptr) != (uint32_t)t->txnid)
            continue;
        mpage *pg = dirty_find(t, ptr_pgno(ptr));
        if (!pg)
            continue;
        if (pl->n == PLACE_MAX)
            return 0;
        pl->ptr[pl->n] = ptr;
        pl->pg[pl->n++] = pg;
        if (!place_collect(t, pg->data, pl))
            return 0;
    }
    return 1;
}

/* Keep in pl->top the `keep` longest runs seen so far, longest first. */
static void top_add(placement *pl, uint32_t start, uint32_t len, uint32_t keep)
{
    uint32_t i;
    if (pl->ntop == keep) {
        if (pl->top[keep - 1].len >= len)
            return;
        i = keep - 1;
    } else {
        i = pl->ntop++;
    }
    for (; i > 0 && pl->top[i - 1].len < len; i--)
        pl->top[i] = pl->top[i - 1];
    pl->top[i] = (page_run){start, len};
}

/* 64 bits of a bitmap (bit i = page base + i). */
static inline uint64_t bits64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* Scan the pages from `from` on that are free in the txn and in no
 * snapshot, 64 at a time: keep the `keep` longest runs, and stop at the
 * first run of `keep` pages. Returns the number of free pages seen, and in
 * *tail the first page of the free run that ends the file (npages if none). */
static uint32_t free_runs(const mote_txn *t, placement *pl, uint32_t from, uint32_t keep,
                          uint32_t *tail)
{
    const uint8_t *bm = t->bm, *pend = t->s->pend;
    uint32_t np = t->npages, total = 0, start = 0, len = 0;
    pl->ntop = 0;
    *tail = np;
    from = from < 2 ? 2 : from;
    for (uint32_t base = from & ~63u; base < np; base += 64) {
        uint64_t used = bits64(bm + base / 8) | bits64(pend + base / 8);
        if (base < from)
            used |= (1ull << (from - base)) - 1;
        if (np - base < 64)
            used |= ~0ull << (np - base);
        for (uint32_t pos = 0; pos < 64;) {
            uint64_t r = used >> pos; /* the bits above 63 - pos read as free */
            if (r & 1) { /* used pages: to the next free one (~r is 0 if all 64 are used) */
                pos = ~r ? pos + (uint32_t)__builtin_ctzll(~r) : 64;
                if (len) {
                    top_add(pl, start, len, keep);
                    total += len;
                    len = 0;
                }
                continue;
            }
            uint32_t n = r ? (uint32_t)__builtin_ctzll(r) : 64 - pos;
            start = len ? start : base + pos;
            len += n;
            pos += n;
            if (len >= keep) { /* one run holds the commit */
                top_add(pl, start, len, keep);
                return total + len;
            }
        }
    }
    if (len) {
        top_add(pl, start, len, keep);
        total += len;
        *tail = start;
    }
    return total;
}

/* Free pages may grow to 1/SLACK of the file to keep commits in one run */
static int slack_ok(const mote_txn *t, uint32_t total, uint32_t need)
{
    return (uint64_t)(total + need) * PLACE_SLACK <= t->npages;
}

/* Would the pick take more than PLACE_PIECES runs? */
static int many_pieces(const placement *pl, uint32_t need)
{
    uint32_t sum = 0;
    for (uint32_t i = 0; i < pl->ntop && i < PLACE_PIECES; i++)
        sum += pl->top[i].len;
    return sum < need;
}

/*
 * A small commit's pages go to as few runs of adjacent pages as the free
 * space allows: the fdatasync of a commit costs per write request (measured
 * here: 8 scattered pages + slot + fdatasync 0.42 ms, 8 adjacent ones
 * 0.18 ms). Pages take numbers first-fit as the txn goes, so a commit that
 * changes leaves in several places lands in the holes earlier commits left.
 * Here its tree nodes (and room for the bitmap pages write_bitmap may copy)
 * are renumbered onto the longest free runs, the last piece best-fit. The
 * commit goes to the end of the file in one run (the file grows) when fewer
 * pages are free than it needs, as with first-fit, or when it would take
 * more than PLACE_PIECES runs while free pages are under 1/PLACE_SLACK of
 * the file: without that slack a churning store has no runs at all (each
 * commit fills exactly the single-page holes the one before left).
 * Commits with an overflow page (a chain carries checksums over its page
 * numbers) or more than PLACE_MAX pages keep their numbers. Returns the
 * lowest page this may have freed (for the allocation hint), else UINT32_MAX.
 */
static uint32_t place_pages(mote_txn *t)
{
    placement pl;
    pl.n = 0;
    if (t->ndirty < 2 || t->ndirty > PLACE_MAX ||
        !place_collect(t, t->root->data + SLOT_ROOT_OFF, &pl) || pl.n != t->ndirty)
        return UINT32_MAX;
    /* runs the pages are in now */
    uint32_t lo = UINT32_MAX, now_runs = 0;
    uint8_t *bm = t->bm;
    for (uint32_t i = 0; i < pl.n; i++) {
        uint32_t p = pl.pg[i]->pgno;
        lo = p < lo ? p : lo;
        now_runs += p < 3 || !bit_get(bm, p - 1) || !dirty_find(t, p - 1);
    }
    if (now_runs == 1)
        return UINT32_MAX;
    for (uint32_t i = 0; i < pl.n; i++) /* their own numbers are candidates */
        bit_clr(bm, pl.pg[i]->pgno);
    uint32_t nbmp = mote__bmp_needed(t->s->P, t->npages);
    uint32_t need = pl.n + (nbmp < PLACE_BMP ? nbmp : PLACE_BMP), tail;
    uint32_t from = lo < t->hint ? lo : t->hint; /* no free page below */
    uint32_t total = free_runs(t, &pl, from, need, &tail), base_np = rd32(t->s->cur->data + 32);
    page_run pick[PLACE_MAX + PLACE_BMP];
    uint32_t npick = 0;
    if (total < need || (slack_ok(t, total, need) && many_pieces(&pl, need))) {
        /* the file grows: one run at its end */
        if (t->npages < base_np || tail + need > max_pages(t->s->P) || bm_cover(t, tail + need))
            goto keep;
        bm = t->bm;
        pick[npick++] = (page_run){tail, need};
    } else {
        for (uint32_t i = 0, left = need; left; i++) {
            if (pl.top[i].len >= left) { /* best fit for the last piece */
                uint32_t j = i;
                while (j + 1 < pl.ntop && pl.top[j + 1].len >= left)
                    j++;
                pick[npick++] = (page_run){pl.top[j].start, left};
                break;
            }
            pick[npick++] = pl.top[i];
            left -= pl.top[i].len;
        }
    }
    if (npick >= now_runs)
        goto keep;
    for (uint32_t i = 0; i <= t->dmask; i++)
        t->dhash[i] = NULL;
    uint32_t k = 0, end = 0;
    for (uint32_t r = 0; r < npick && k < pl.n; r++)
        for (uint32_t p = pick[r].start; p < pick[r].start + pick[r].len && k < pl.n; p++) {
            mpage *pg = pl.pg[k++];
            pg->pgno = p;
            bit_set(bm, p);
            wr32(pg->data + 4, p);
            wr32(pl.ptr[k - 1], p);
            pg->hnext = t->dhash[p & t->dmask];
            t->dhash[p & t->dmask] = pg;
            end = p + 1;
        }
    if (t->npages < end)
        t->npages = end;
    /* pages the txn took at the end and no longer uses are not file */
    while (t->npages > base_np && !bit_get(bm, t->npages - 1) &&
           !bit_get(t->s->pend, t->npages - 1))
        t->npages--;
    uint32_t low = lo < t->hint ? lo : t->hint;
    t->hint = end; /* bitmap pages follow the last piece */
    return low;
keep:
    for (uint32_t i = 0; i < pl.n; i++)
        bit_set(t->bm, pl.pg[i]->pgno);
    return UINT32_MAX;
}

/* Copy every changed bitmap chunk to a new page; fills the slot's pointers. */
static int write_bitmap(mote_txn *t, mpage **bmp_pages)
{
    mote_store *s = t->s;
    uint8_t *slot = t->root->data;
    uint32_t bpp = bmp_bytes_per_page(s->P);
    uint32_t old_nb = rd32(slot + 40);
    int changed;
    /* a shrinking commit drops the bitmap pages past its new size */
    for (uint32_t i = mote__bmp_needed(s->P, t->npages); i < old_nb; i++) {
        uint8_t *op = slot + SLOT_BMP_OFF + i * PTR12;
        int rc = mote__page_free(t, ptr_pgno(op), ptr_birth(op));
        if (rc)
            return rc;
        memset(op, 0, PTR12);
    }
    do {
        changed = 0;
        uint32_t nb = mote__bmp_needed(s->P, t->npages);
        if (nb > SLOT_MAX_BMP)
            return mote__err(MOTE_FULL, "store %s is full", s->path);
        for (uint32_t i = 0; i < nb; i++) {
            if (bmp_pages[i])
                continue;
            uint32_t off = SLOT_INLINE_BM + i * bpp;
            int differs = i >= old_nb || off + bpp > s->bm_cap ||
                          memcmp(t->bm + off, s->bm + off, bpp) != 0 ||
                          ptr_pgno(slot + SLOT_BMP_OFF + i * PTR12) >= t->npages;
            if (!differs)
                continue;
            int rc = grow_bytes(&t->bm, &t->bm_cap, off + bpp);
            if (!rc)
                rc = mote__page_new(t, &bmp_pages[i]);
            if (!rc && i < old_nb) {
                const uint8_t *op = slot + SLOT_BMP_OFF + i * PTR12;
                rc = mote__page_free(t, ptr_pgno(op), ptr_birth(op));
            }
            if (rc)
                return rc;
            changed = 1;
        }
    } while (changed);
    uint32_t nb = mote__bmp_needed(s->P, t->npages);
    for (uint32_t i = 0; i < nb; i++) {
        mpage *pg = bmp_pages[i];
        if (!pg)
            continue;
        pg->data[0] = PAGE_BITMAP;
        memcpy(pg->data + OVF_HDR, t->bm + SLOT_INLINE_BM + i * bpp, bpp);
        uint8_t *ptr = slot + SLOT_BMP_OFF + i * PTR12;
        wr32(ptr, pg->pgno);
        wr32(ptr + 4, (uint32_t)t->txnid);
        wr32(ptr + 8, mote__crc32c(0, pg->data, s->P));
    }
    memcpy(slot + SLOT_INLINE_OFF, t->bm, SLOT_INLINE_BM);
    wr32(slot + 40, nb);
    return MOTE_OK;
}

static int cmp_page(const void *a, const void *b)
{
    uint32_t x = (*(mpage *const *)a)->pgno, y = (*(mpage *const *)b)->pgno;
    return x < y ? -1 : x > y;
}

/* Write the dirty pages and any zero-fill growth, in page order. */
static int write_pages(mote_txn *t, mpage **pages, uint32_t npg, uint32_t target)
{
    mote_store *s = t->s;
    uint32_t phys = (uint32_t)(s->file_bytes >> s->page_shift);
    struct iovec iov[WRITE_BATCH];
    int cnt = 0;
    uint32_t run_start = 0, next = 0, k = 0;
    uint32_t p = 2;
    for (;;) {
        /* next page to write: a dirty page, or a zero page in [phys, target) */
        uint32_t dp = k < npg ? pages[k]->pgno : UINT32_MAX;
        uint32_t zp = p < phys ? phys : p;
        const uint8_t *data;
        uint32_t pg;
        if (zp < target && zp < dp) {
            pg = zp;
            data = zero_page;
        } else if (dp != UINT32_MAX) {
            pg = dp;
            data = pages[k++]->data;
        } else {
            break;
        }
        p = pg + 1;
        if (cnt && (pg != next || cnt == WRITE_BATCH)) {
            ssize_t r = s->io->pwritev(s->io->ctx, s->fd, iov, cnt,
                                       (uint64_t)run_start << s->page_shift);
            if (r != (ssize_t)((size_t)cnt << s->page_shift))
                return mote__ioerr(r < 0 ? (int)r : -EIO, "write", s->path);
            cnt = 0;
        }
        if (!cnt)
            run_start = pg;
        iov[cnt].iov_base = (void *)data;
        iov[cnt].iov_len = s->P;
        cnt++;
        next = pg + 1;
    }
    if (cnt) {
        ssize_t r = s->io->pwritev(s->io->ctx, s->fd, iov, cnt,
                                   (uint64_t)run_start << s->page_shift);
        if (r != (ssize_t)((size_t)cnt << s->page_shift))
            return mote__ioerr(r < 0 ? (int)r : -EIO, "write", s->path);
    }
    return MOTE_OK;
}

static uint32_t growth_target(const mote_store *s, uint32_t npages)
{
    uint32_t phys = (uint32_t)(s->file_bytes >> s->page_shift);
    if (npages <= phys)
        return phys;
    uint64_t bytes = (uint64_t)npages << s->page_shift;
    if (bytes <= GROW_EXACT_BYTES)
        return npages;
    uint64_t chunk = s->file_bytes / 8;
    if (chunk < GROW_EXACT_BYTES)
        chunk = GROW_EXACT_BYTES;
    if (chunk > GROW_MAX_CHUNK)
        chunk = GROW_MAX_CHUNK;
    uint64_t target = ((uint64_t)phys << s->page_shift) + chunk;
    if (target < bytes)
        target = bytes;
    target >>= s->page_shift;
    uint32_t mx = max_pages(s->P);
    return target > mx ? mx : (uint32_t)target;
}

int mote__txn_commit(mote_txn *t)
{
    mote_store *s = t->s;
    mote__txn_release_held(t);
    if (!t->write || !t->changed) {
        mote__txn_abort(t);
        return MOTE_OK;
    }
    uint8_t *slot = t->root->data;
    mpage *bmp_pages[SLOT_MAX_BMP] = {0};
    mpage **pages = NULL;
    int rc = MOTE_OK, poison = 0;

    uint32_t low = place_pages(t);
    finalize(t, slot + SLOT_ROOT_OFF, root_cap(s));
    rc = write_bitmap(t, bmp_pages);
    if (rc)
        goto fail;
    if (low < t->hint)
        t->hint = low;
    int index = 1 - s->base_slot;
    slot_init_header(slot, s->P, index, SLOT_KIND_COMMIT, t->txnid);
    wr32(slot + 32, t->npages);
    wr32(slot + 36, t->next_tree);
    slot_seal(slot, s->P);

    pages = mote__malloc((t->ndirty + 1) * sizeof *pages);
    if (!pages) {
        rc = mote__err(MOTE_NOMEM, "out of memory committing");
        goto fail;
    }
    uint32_t npg = 0;
    for (uint32_t i = 0; t->dhash && i <= t->dmask; i++)
        for (mpage *p = t->dhash[i]; p; p = p->hnext)
            pages[npg++] = p;
    qsort(pages, npg, sizeof *pages, cmp_page);

    if (s->need_sync) { /* make the base durable before building on it */
        int r = s->io->fdatasync(s->io->ctx, s->fd);
        if (r) {
            rc = mote__ioerr(r, "sync", s->path);
            poison = 1;
            goto fail;
        }
        s->need_sync = 0;
    }
    uint32_t target = growth_target(s, t->npages);
    rc = write_pages(t, pages, npg, target);
    if (rc)
        goto fail;
    uint64_t slot_end = (uint64_t)(index + 1) << s->page_shift;
    ssize_t w = s->io->pwrite(s->io->ctx, s->fd, slot, s->P, (uint64_t)index << s->page_shift);
    if (w != (ssize_t)s->P) {
        rc = mote__ioerr(w < 0 ? (int)w : -EIO, "write of the root slot", s->path);
        poison = 1;
        goto fail;
    }
    if (!(s->flags & MOTE_NOSYNC)) {
        int r = s->io->fdatasync(s->io->ctx, s->fd);
        if (r) {
            rc = mote__ioerr(r, "sync", s->path);
            poison = 1;
            goto fail;
        }
    }
    uint64_t fb = (uint64_t)target << s->page_shift;
    if (fb < slot_end)
        fb = slot_end;
    if (fb > s->file_bytes)
        s->file_bytes = fb;

    /* publish */
    for (size_t i = 0; i < t->nfreed; i++) {
        if (s->npend == s->cap_pend) {
            size_t n = s->cap_pend ? s->cap_pend * 2 : 64;
            pending *pv = mote__realloc(s->pendv, n * sizeof *pv);
            if (!pv) { /* cannot track: keep the page out of use for good */
                continue;
            }
            s->pendv = pv;
            s->cap_pend = n;
        }
        s->pendv[s->npend].pgno = t->freed[i];
        s->pendv[s->npend++].tag = t->txnid;
    }
    t->nfreed = 0;
    uint8_t *obm = s->bm;
    s->bm = t->bm;
    s->bm_cap = t->bm_cap;
    t->bm = obm;
    s->hint = t->hint;
    s->next_txnid = t->txnid + 1;
    s->synced = !(s->flags & MOTE_NOSYNC);
    s->marker_ok = 0;
    pthread_mutex_lock(&s->mu);
    snap *old = s->cur;
    s->cur = t->root;
    t->root = old; /* released by txn_free */
    s->txnid = t->txnid;
    s->base_slot = index;
    for (uint32_t i = 0; i < npg; i++) {
        mpage *p = pages[i];
        p->dirty = 0;
        p->refs = 0;
        p->hnext = NULL;
        if (cache_insert(s, p))
            mote__free(p);
    }
    mote__free(t->dhash);
    t->dhash = NULL;
    t->ndirty = 0;
    cache_evict(s);
    pthread_mutex_unlock(&s->mu);
    mote__free(pages);
    txn_free(t);
    return MOTE_OK;

fail:
    mote__free(pages);
    if (poison) {
        pthread_mutex_lock(&s->mu);
        s->poisoned = 1;
        pthread_mutex_unlock(&s->mu);
        if (rc == MOTE_IO || rc == MOTE_NOSPACE) { /* the OS cause stays */
            char cause[256];
            snprintf(cause, sizeof cause, "%s", mote_errmsg(s));
            mote__oserr(MOTE_POISONED, mote_last_oserror(NULL), s->path, "%s; the store "
                        "is unusable until reopened (the commit may or may not be "
                        "durable)", cause);
        }
        rc = MOTE_POISONED;
    }
    mote__txn_abort(t);
    return rc;
}

/* ---- Open and close ------------------------------------------------------ */

static int registry_add(mote_store *s)
{
    pthread_mutex_lock(&reg_mu);
    for (mote_store *o = reg_head; o; o = o->reg_next)
        if (o->dev == s->dev && o->ino == s->ino) {
            pthread_mutex_unlock(&reg_mu);
            return mote__err(MOTE_BUSY, "store %s is already open in this process "
                             "(as %s); use that handle", s->path, o->path);
        }
    s->reg_next = reg_head;
    reg_head = s;
    pthread_mutex_unlock(&reg_mu);
    return MOTE_OK;
}

static void registry_remove(mote_store *s)
{
    pthread_mutex_lock(&reg_mu);
    for (mote_store **pp = &reg_head; *pp; pp = &(*pp)->reg_next)
        if (*pp == s) {
            *pp = s->reg_next;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
}

static void store_free(mote_store *s)
{
    if (s->cur)
        snap_unref(s->cur);
    for (uint32_t i = 0; s->hash && i <= s->hash_mask; i++)
        for (mpage *p = s->hash[i], *nx; p; p = nx) {
            nx = p->hnext;
            mote__free(p);
        }
    mote__free(s->hash);
    mote__free(s->bm);
    mote__free(s->pend);
    mote__free(s->pendv);
    mote__free(s->path);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    mote__free(s);
}

static int create_file(mote_store *s, unsigned page_size, int created)
{
    uint32_t P = page_size ? page_size : 4096;
    if (P < 4096 || P > 65536 || (P & (P - 1)))
        return mote__err(MOTE_INVALID, "page size %u: must be a power of two "
                         "from 4096 to 65536", P);
    s->P = P;
    s->page_shift = (uint32_t)__builtin_ctz(P);
    snap *sn = snap_new(P);
    if (!sn)
        return mote__err(MOTE_NOMEM, "out of memory creating %s", s->path);
    uint8_t *slot = sn->data;
    memset(slot, 0, P);
    slot_init_header(slot, P, 0, SLOT_KIND_COMMIT, 1);
    wr32(slot + 32, 2);
    wr32(slot + 36, 1);
    slot[SLOT_INLINE_OFF] = 0x3; /* pages 0 and 1: the slots */
    mote__node_init(slot + SLOT_ROOT_OFF, root_cap(s), NODE_LEAF, 0);
    slot_seal(slot, P);
    ssize_t w = s->io->pwrite(s->io->ctx, s->fd, slot, P, 0);
    int r = w == (ssize_t)P ? s->io->fdatasync(s->io->ctx, s->fd) : (w < 0 ? (int)w : -EIO);
    if (!r && created && !(s->flags & MOTE_NODIRSYNC))
        r = s->io->fsync_dir(s->io->ctx, s->path);
    if (r) {
        snap_unref(sn);
        return mote__ioerr(r, "creation", s->path);
    }
    s->cur = sn;
    s->txnid = 1;
    s->next_txnid = 2;
    s->base_slot = 0;
    s->file_bytes = P;
    s->synced = 1;
    s->marker_ok = 0;
    return MOTE_OK;
}

/* Verify every page the commit in `slot` wrote (birth == its txnid). */
static int verify_new(mote_store *s, const uint8_t *node, uint32_t cap,
                      uint32_t w32, uint8_t *bufs, int depth)
{
    (void)cap;
    unsigned n = n_nkeys(node);
    for (unsigned i = 0; i < n; i++) {
        cell c;
        int rc = mote__cell(node, cap, i, &c);
        if (rc)
            return rc;
        uint8_t ptr[CHILD] = {0};
        int level;
        if (n_type(node) == NODE_BRANCH) {
            memcpy(ptr, c.ptr, CHILD);
            level = (int)n_level(node) - 1;
        } else if (c.ovf) {
            memcpy(ptr, c.val, PTR12);
            level = -1;
        } else {
            continue;
        }
        while (ptr_pgno(ptr) && ptr_birth(ptr) == w32) {
            uint8_t *buf = bufs + (size_t)depth * s->P;
            if (depth + 1 >= MAX_DEPTH)
                return CORRUPT("tree deeper than %d levels", MAX_DEPTH);
            if ((rc = mote__read_page_raw(s, ptr_pgno(ptr), buf)) ||
                (rc = mote__verify_page(s, buf, ptr, "new")))
                return rc;
            if (level >= 0) {
                if ((rc = mote__node_validate(buf, s->P, level, ptr_pgno(ptr))) ||
                    (rc = verify_new(s, buf, s->P, w32, bufs, depth + 1)))
                    return rc;
                break;
            }
            if ((rc = validate_aux(s, buf, PAGE_OVERFLOW)))
                return rc;
            memcpy(ptr, buf + NH, PTR12);
        }
    }
    return MOTE_OK;
}

int mote__verify_commit(mote_store *s, const uint8_t *slot, uint64_t txnid)
{
    uint8_t *bufs = mote__malloc((size_t)MAX_DEPTH * s->P);
    if (!bufs)
        return mote__err(MOTE_NOMEM, "out of memory verifying %s", s->path);
    uint32_t w32 = (uint32_t)txnid;
    int rc = verify_new(s, slot + SLOT_ROOT_OFF, root_cap(s), w32, bufs, 0);
    uint32_t nb = rd32(slot + 40);
    for (uint32_t i = 0; !rc && i < nb; i++) {
        uint8_t ptr[CHILD] = {0};
        memcpy(ptr, slot + SLOT_BMP_OFF + i * PTR12, PTR12);
        if (ptr_birth(ptr) != w32)
            continue;
        if (!(rc = mote__read_page_raw(s, ptr_pgno(ptr), bufs)) &&
            !(rc = mote__verify_page(s, bufs, ptr, "bitmap")))
            rc = validate_aux(s, bufs, PAGE_BITMAP);
    }
    mote__free(bufs);
    return rc;
}

/* Read both slots and choose the commit to open (see the top comment). */
static int open_existing(mote_store *s, uint64_t size)
{
    if (size < 4096)
        return mote__err(MOTE_FORMAT, "%s is not a MoteDB store (%llu bytes)",
                         s->path, (unsigned long long)size);
    size_t cap = size < 2 * 4096 ? (size_t)size : 2 * 4096;
    uint8_t *buf = mote__malloc(2 * 65536);
    if (!buf)
        return mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
    ssize_t r = s->io->pread(s->io->ctx, s->fd, buf, cap, 0);
    int rc = MOTE_OK;
    if (r < 0 || (size_t)r < 4096) {
        rc = r < 0 ? mote__ioerr((int)r, "read", s->path)
                   : mote__err(MOTE_FORMAT, "%s is too short", s->path);
        goto out;
    }
    /* page size: slot A's header names it; if A is damaged, try each size */
    uint32_t P = 0, cands[6], nc = 0, hinted = rd64(buf) == MOTE_MAGIC ? rd32(buf + 12) : 0;
    if (hinted >= 4096 && hinted <= 65536 && !(hinted & (hinted - 1)))
        cands[nc++] = hinted;
    for (uint32_t c = 4096; c <= 65536; c *= 2)
        if (c != hinted)
            cands[nc++] = c;
    int va = 0, vb = 0;
    for (uint32_t i = 0; i < nc && !P; i++) {
        uint32_t try = cands[i];
        size_t want = (size_t)2 * try < size ? (size_t)2 * try : (size_t)size;
        if (want > (size_t)r) {
            r = s->io->pread(s->io->ctx, s->fd, buf, want, 0);
            if (r < 0) {
                rc = mote__ioerr((int)r, "read", s->path);
                goto out;
            }
        }
        va = (size_t)r >= try ? mote__slot_valid(buf, try, 0) : 0;
        vb = (size_t)r >= 2 * (size_t)try ? mote__slot_valid(buf + try, try, 1) : 0;
        if (va || vb)
            P = try;
    }
    if (!P) {
        rc = rd64(buf) == MOTE_MAGIC || (size >= 8192 && rd64(buf + 4096) == MOTE_MAGIC)
                 ? CORRUPT("%s: neither root slot is valid", s->path)
                 : mote__err(MOTE_FORMAT, "%s is not a MoteDB store", s->path);
        goto out;
    }
    if (rd32(buf + 8) > MOTE_FORMAT_VERSION && rd64(buf) == MOTE_MAGIC && !va) {
        rc = mote__err(MOTE_FORMAT, "%s has format version %u; this library "
                       "reads version %u", s->path, rd32(buf + 8), MOTE_FORMAT_VERSION);
        goto out;
    }
    s->P = P;
    s->page_shift = (uint32_t)__builtin_ctz(P);
    const uint8_t *A = buf, *B = buf + P;
    uint64_t ta = rd64(A) == MOTE_MAGIC ? rd64(A + 24) : 0;
    uint64_t tb = (size_t)r >= 2 * (size_t)P && rd64(B) == MOTE_MAGIC ? rd64(B + 24) : 0;
    /* choose W: the newest valid commit slot */
    int wi = -1;
    if (va == 1 && (vb != 1 || ta > tb))
        wi = 0;
    else if (vb == 1)
        wi = 1;
    if (wi < 0) {
        rc = CORRUPT("%s: no valid commit slot", s->path);
        goto out;
    }
    const uint8_t *W = wi ? B : A, *O = wi ? A : B;
    int vo = wi ? va : vb;
    uint64_t wtx = rd64(W + 24);
    int clean = vo == 2 && rd64(O + 24) == wtx;
    if (!clean) {
        rc = mote__verify_commit(s, W, wtx);
        if (rc && vo == 1 && rd64(O + 24) < wtx) { /* roll back to D */
            rc = MOTE_OK;
            wi = 1 - wi;
            W = O;
        }
        if (rc)
            goto out;
    }
    s->cur = snap_new(P);
    if (!s->cur) {
        rc = mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
        goto out;
    }
    memcpy(s->cur->data, W, P);
    s->txnid = rd64(W + 24);
    s->next_txnid = (ta > tb ? ta : tb) + 1;
    if (s->next_txnid <= s->txnid)
        s->next_txnid = s->txnid + 1;
    s->base_slot = wi;
    s->synced = clean;
    s->marker_ok = clean;
    s->need_sync = !clean && !(s->flags & MOTE_RDONLY);
out:
    mote__free(buf);
    return rc;
}

/* Creating `path` failed with ENOENT: a directory on the way is missing.
 * Name it: the path up to its last '/' ("/" for "/x.mote", "." without a
 * '/', which can only be missing if it was removed). */
static int missing_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dir = slash ? path : ".";
    int n = slash ? (int)(slash - path) : 1;
    while (n > 1 && dir[n - 1] == '/') /* "a//x.mote": directory "a" */
        n--;
    if (n == 0)
        n = 1;
    return mote__oserr(MOTE_IO, ENOENT, path, "cannot create store %s: directory %.*s "
                       "does not exist", path, n, dir);
}

int mote__store_open(const char *path, const mote_options *opts, size_t extra,
                     mote_store **out)
{
    if (!path || !*path)
        return mote__err(MOTE_INVALID, "mote_open: no path given");
    unsigned flags = opts ? opts->flags : MOTE_CREATE;
    if (flags & ~(MOTE_RDONLY | MOTE_CREATE | MOTE_NODIRSYNC | MOTE_NOSYNC))
        return mote__err(MOTE_INVALID, "mote_open: unknown flags 0x%x", flags);
    /* one block: the store, then `extra` zeroed bytes for the layer above */
    size_t head = (sizeof(mote_store) + 15) & ~(size_t)15;
    mote_store *s = mote__calloc(1, head + extra);
    if (!s)
        return mote__err(MOTE_NOMEM, "out of memory opening %s", path);
    s->objects = extra ? (char *)s + head : NULL;
    s->io = opts && opts->io ? opts->io : &mote_io_posix;
    s->flags = flags;
    s->fd = -1;
    s->cache_limit = opts && opts->cache_pages ? opts->cache_pages : 16384;
    s->lru.lnext = s->lru.lprev = &s->lru;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    size_t pl = strlen(path);
    s->path = mote__malloc(pl + 1);
    if (!s->path) {
        store_free(s);
        return mote__err(MOTE_NOMEM, "out of memory opening %s", path);
    }
    memcpy(s->path, path, pl + 1);

    int ro = (flags & MOTE_RDONLY) != 0, created = 0, rc = MOTE_OK, registered = 0;
    int fd = s->io->open(s->io->ctx, path, ro ? O_RDONLY : O_RDWR, 0);
    if (fd == -ENOENT && (flags & MOTE_CREATE) && !ro) {
        fd = s->io->open(s->io->ctx, path, O_RDWR | O_CREAT | O_EXCL, 0644);
        created = fd >= 0;
        if (fd == -ENOENT) { /* O_CREAT makes the file, not its directory */
            rc = missing_dir(path);
            goto fail;
        }
        if (fd == -EEXIST)
            fd = s->io->open(s->io->ctx, path, O_RDWR, 0);
    }
    if (fd < 0) {
        rc = fd == -ENOENT
                 ? mote__oserr(MOTE_NOTFOUND, ENOENT, path, "store %s does not exist", path)
                 : mote__ioerr(fd, "open", path);
        goto fail;
    }
    s->fd = fd;
    uint64_t size;
    int r = s->io->fstat(s->io->ctx, fd, &size, &s->dev, &s->ino);
    if (r) {
        rc = mote__ioerr(r, "stat", path);
        goto fail;
    }
    if ((rc = registry_add(s)))
        goto fail;
    registered = 1;
    r = s->io->flock(s->io->ctx, fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB);
    if (r) {
        rc = r == -EWOULDBLOCK
                 ? mote__err(MOTE_LOCKED, "store %s is open for writing in another "
                             "process", path)
                 : mote__ioerr(r, "lock", path);
        if (r == -EWOULDBLOCK && ro)
            mote__err(MOTE_LOCKED, "store %s is open for writing in another process", path);
        goto fail;
    }
    /* A zero-byte file is a store that was never initialized: creation
     * makes the file, then writes and syncs its first page, so a crash in
     * between leaves one (and tempfile.NamedTemporaryFile hands out such
     * files). A writable open initializes it, with or without MOTE_CREATE;
     * a read-only open cannot, and says so. */
    if (size == 0 && !ro)
        rc = create_file(s, opts ? opts->page_size : 0, created);
    else if (size == 0)
        rc = mote__err(MOTE_FORMAT, "store %s is empty (0 bytes): it was never "
                       "initialized; open it writable once to create it", path);
    else
        rc = open_existing(s, size);
    if (rc)
        goto fail;
    if (!s->file_bytes)
        s->file_bytes = size;
    *out = s;
    return MOTE_OK;
fail:
    if (registered)
        registry_remove(s);
    if (s->fd >= 0)
        s->io->close(s->io->ctx, s->fd);
    store_free(s);
    return rc;
}

int mote__store_busy(mote_store *s)
{
    pthread_mutex_lock(&s->mu);
    int busy = s->ntxn > 0;
    pthread_mutex_unlock(&s->mu);
    return busy ? mote__err(MOTE_BUSY, "store %s: close with transactions still open; "
                            "end them first", s->path)
                : MOTE_OK;
}

void mote__store_close(mote_store *s)
{
    if (!(s->flags & MOTE_RDONLY) && !s->poisoned && s->synced && !s->marker_ok) {
        uint8_t *m = mote__calloc(1, s->P);
        if (m) { /* best effort: without it the next open verifies */
            slot_init_header(m, s->P, 1 - s->base_slot, SLOT_KIND_MARKER, s->txnid);
            slot_seal(m, s->P);
            s->io->pwrite(s->io->ctx, s->fd, m, s->P,
                          (uint64_t)(1 - s->base_slot) << s->page_shift);
            mote__free(m);
        }
    }
    registry_remove(s);
    s->io->close(s->io->ctx, s->fd);
    store_free(s);
}
