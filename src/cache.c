/*
 * cache.c — the page cache of a store (shared by its transactions, under the
 * store's mutex): a hash of pages by number with an LRU list of the unpinned
 * ones, trimmed to cache_limit; and reading pages from the file, each checked
 * against the pointer that led to it (crc32c, page number, birth) and
 * validated (node.h) before anyone uses it.
 */
#include <stdlib.h>

#include "checksum.h"
#include "pager.h"

/* ---- Page cache --------------------------------------------------------- */

int mote__page_rehash(mpage ***hash, uint32_t *mask)
{
    uint32_t n = *hash ? (*mask + 1) * 2 : 64;
    mpage **h = mote__calloc(n, sizeof *h);
    if (!h)
        return MOTE_NOMEM;
    for (uint32_t i = 0; *hash && i <= *mask; i++)
        for (mpage *p = (*hash)[i], *nx; p; p = nx) {
            nx = p->hnext;
            p->hnext = h[p->pgno & (n - 1)];
            h[p->pgno & (n - 1)] = p;
        }
    mote__free(*hash);
    *hash = h;
    *mask = n - 1;
    return MOTE_OK;
}

/* ---- Page buffers ---------------------------------------------------------
 * Freed buffers of 4 KB pages are kept per thread (at most POOL_MAX: 1 MB)
 * and reused, so a store opened, read and closed again and again (one per
 * agent) takes no fresh memory from the system each time: glibc gives a
 * closed store's pages back, and touching new ones cost ~116 page faults
 * per cycle of a store of 1,000 vectors. A thread's pool is freed when the
 * thread exits. */
#define POOL_MAX 256

typedef struct ppool {
    mpage *head; /* chained through hnext */
    unsigned n;
} ppool;

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_ok;

static void pool_drain(void *p)
{
    ppool *pp = p;
    while (pp->head) {
        mpage *x = pp->head;
        pp->head = x->hnext;
        mote__free(x);
    }
    mote__free(pp);
}

static void pool_init(void) { pool_ok = pthread_key_create(&pool_key, pool_drain) == 0; }

static ppool *pool_get(int make)
{
    pthread_once(&pool_once, pool_init);
    if (!pool_ok)
        return NULL;
    ppool *pp = pthread_getspecific(pool_key);
    if (!pp && make && (pp = mote__calloc(1, sizeof *pp)) && pthread_setspecific(pool_key, pp)) {
        mote__free(pp);
        pp = NULL;
    }
    return pp;
}

mpage *mote__mpage_alloc(uint32_t P)
{
    ppool *pp = P == 4096 ? pool_get(0) : NULL;
    mpage *pg = pp ? pp->head : NULL;
    if (pg) {
        pp->head = pg->hnext;
        pp->n--;
    } else if (!(pg = mote__malloc(sizeof *pg + P))) {
        return NULL;
    }
    memset(pg, 0, sizeof *pg);
    pg->data = (uint8_t *)(pg + 1);
    return pg;
}

void mote__mpage_free(mpage *pg, uint32_t P)
{
    ppool *pp = pg && P == 4096 ? pool_get(1) : NULL;
    if (pp && pp->n < POOL_MAX) {
        pg->hnext = pp->head;
        pp->head = pg;
        pp->n++;
        return;
    }
    mote__free(pg);
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
        mote__mpage_free(pg, s->P);
    }
}

void mote__cache_evict(mote_store *s)
{
    while (s->ncached > s->cache_limit && s->lru.lprev != &s->lru)
        cache_unlink(s, s->lru.lprev);
}

/* Insert pg (refs already set) replacing any entry of the same pgno. */
int mote__cache_insert(mote_store *s, mpage *pg)
{
    if (!s->hash || s->ncached + 1 > (s->hash_mask + 1)) {
        /* without room to grow, a full table still works (longer chains) */
        if (mote__page_rehash(&s->hash, &s->hash_mask) && !s->hash)
            return MOTE_NOMEM;
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
            mote__mpage_free(pg, s->P);
    }
    mote__cache_evict(s);
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
    if (mote__crc32c(0, buf, s->P) != ptr_crc(ptr)) /* (what it holds: rewritten, or torn?) */
        return CORRUPT("%s page %u: checksum mismatch (it holds page %u of txn %llu, type %u; "
                       "expected txn %u)", what, pgno, rd32(buf + 4),
                       (unsigned long long)rd64(buf + 8), buf[0], ptr_birth(ptr));
    if (rd32(buf + 4) != pgno)
        return CORRUPT("%s page %u: holds page number %u (misdirected write)",
                       what, pgno, rd32(buf + 4));
    if ((uint32_t)rd64(buf + 8) != ptr_birth(ptr))
        return CORRUPT("%s page %u: written by txn %llu, expected %u (stale page)",
                       what, pgno, (unsigned long long)rd64(buf + 8), ptr_birth(ptr));
    return MOTE_OK;
}

int mote__validate_aux(const mote_store *s, const uint8_t *buf, int type)
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

/* The bytes of the page ptr points to, if cached, into the CPU's caches
 * (s->mu held). Page buffers lie apart in the heap, so the CPU's own
 * prefetcher, which streams LMDB's adjacent pages of one mapping, stops at
 * each: a scan that asks for the leaf after the next while it reads one ran
 * 1.6-1.8x as fast (bench-engine full scan, 100,000 entries). Into the
 * second-level cache (locality 1: prefetcht2), not the first: on the AMD
 * EPYC of 2026-12-05 a leaf's 64 prefetcht0 stalled the scan in that loop
 * (full flush before each scan, scratch driver: 0.89x LMDB with t0, 1.37x
 * with t2, 0.88x with nta); the cursor asks for its next cells itself
 * (mote__cur_next_in_leaf). */
static void prefetch_cached(mote_store *s, const uint8_t *ptr)
{
    mpage *pg = cache_find(s, ptr_pgno(ptr));
    if (pg && (uint32_t)pg->birth == ptr_birth(ptr))
        for (uint32_t off = 0; off < s->P; off += 64)
            __builtin_prefetch(pg->data + off, 0, 1);
}

void mote__page_prefetch(mote_txn *t, const uint8_t *ptr)
{
    mote_store *s = t->s;
    if (store_forked(s))
        return;
    pthread_mutex_lock(&s->mu);
    prefetch_cached(s, ptr);
    pthread_mutex_unlock(&s->mu);
}

mpage *mote__page_readahead(mote_txn *t, const uint8_t *const *ptrs, unsigned n, int level)
{
    mote_store *s = t->s;
    uint32_t first = n ? ptr_pgno(ptrs[0]) : 0, end = rd32(t->root->data + 32), run = 0;
    if (n < 2 || store_forked(s) || first < 2 || first >= end)
        return NULL;
    pthread_mutex_lock(&s->mu);
    prefetch_cached(s, ptrs[1]); /* the page after the next */
    if (n > 2 && s->hash) /* and the cache entry of the one after it (found then) */
        __builtin_prefetch(s->hash[ptr_pgno(ptrs[2]) & s->hash_mask], 0, 1);
    mpage *pg = t->write && ptr_birth(ptrs[0]) == (uint32_t)t->txnid ? NULL : cache_find(s, first);
    if (pg && (uint32_t)pg->birth == ptr_birth(ptrs[0])) { /* the next page, as mote__page_get */
        if (pg->refs++ == 0)
            lru_unlink(pg);
        pthread_mutex_unlock(&s->mu);
        return pg;
    }
    while (run < n && ptr_pgno(ptrs[run]) == first + run && first + run < end &&
           !(t->write && ptr_birth(ptrs[run]) == (uint32_t)t->txnid) &&
           !cache_find(s, first + run))
        run++;
    pthread_mutex_unlock(&s->mu);
    uint8_t *buf = run >= 2 && !t->cached_only ? mote__malloc((size_t)run * s->P) : NULL;
    if (!buf || s->io->pread(s->io->ctx, s->fd, buf, (size_t)run * s->P,
                             (uint64_t)first << s->page_shift) != (ssize_t)((size_t)run * s->P)) {
        mote__free(buf);
        return NULL;
    }
    for (uint32_t i = 0; i < run; i++) {
        const uint8_t *data = buf + (size_t)i * s->P;
        mpage *np;
        if (mote__verify_page(s, data, ptrs[i], "tree") ||
            (level < 0 ? mote__validate_aux(s, data, PAGE_OVERFLOW)
                       : mote__node_validate(data, s->P, level, first + i)) ||
            !(np = mote__mpage_alloc(s->P)))
            continue; /* (the message set is overwritten by the next error) */
        memcpy(np->data, data, s->P);
        np->pgno = first + i;
        np->birth = rd64(data + 8);
        pthread_mutex_lock(&s->mu);
        if (cache_find(s, np->pgno) || mote__cache_insert(s, np))
            mote__mpage_free(np, s->P);
        mote__cache_evict(s);
        pthread_mutex_unlock(&s->mu);
    }
    mote__free(buf);
    return NULL;
}

int mote__page_get(mote_txn *t, const uint8_t *ptr, int level, mpage **out)
{
    mote_store *s = t->s;
    if (store_forked(s))
        return mote__forked_err(s);
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
    if (t->cached_only)
        return mote__err(MOTE_WOULDBLOCK, "page %u is not in the cache of %s (a "
                         "MOTE_TXN_CACHED read)", pgno, s->path);

    mpage *np = mote__mpage_alloc(s->P);
    if (!np)
        return mote__err(MOTE_NOMEM, "out of memory reading page %u", pgno);
    /* another process's commit: its pages may be in the segment */
    const char *what = level < 0 ? "overflow" : "tree";
    int rc = s->seg && mote__share_page(s, pgno, b32, np->data)
                 ? mote__verify_page(s, np->data, ptr, what)
                 : MOTE_CORRUPT;
    if (rc) { /* from the file */
        rc = mote__read_page_raw(s, pgno, np->data);
        if (!rc)
            rc = mote__verify_page(s, np->data, ptr, what);
    }
    if (!rc)
        rc = level < 0 ? mote__validate_aux(s, np->data, PAGE_OVERFLOW)
                       : mote__node_validate(np->data, s->P, level, pgno);
    if (rc) {
        mote__mpage_free(np, s->P);
        return s->outsider ? mote__share_outsider_check(s, t->txnid, rc) : rc;
    }
    np->pgno = pgno;
    np->birth = rd64(np->data + 8);
    np->refs = 1;
    pthread_mutex_lock(&s->mu);
    pg = cache_find(s, pgno);
    if (pg && pg->birth == np->birth) { /* another thread loaded it */
        if (pg->refs++ == 0)
            lru_unlink(pg);
        mote__mpage_free(np, s->P);
        np = pg;
    } else if (mote__cache_insert(s, np)) {
        np->cached = 0; /* uncached: freed at unpin */
    }
    mote__cache_evict(s);
    pthread_mutex_unlock(&s->mu);
    *out = np;
    return MOTE_OK;
}
