/*
 * pager.c — root slots, transactions and the one-fdatasync commit. The
 * pager layer's other files: cache.c (the page cache, reading and verifying
 * pages), alloc.c (allocation, overflow values, placement of a commit's
 * pages), open.c (open with recovery, close). The file format and
 * invariants are described in pager.h (nodes: node.h).
 *
 * COMMIT (write txn W on durable base D; its checkpoint is in s->base_slot)
 *   1. Dirty pages live in the txn's dirty map; each was allocated from
 *      pages free in D and not pending (never a page reachable from D).
 *   2. A record (D reserved a page R, pager.h COMMIT CHAIN): its tree nodes
 *      are renumbered onto R+1, ... (mote__place_chain); a checkpoint: the
 *      chain of D is freed and its nodes go onto as few runs of free pages
 *      as possible (place_pages; one write request per run).
 *      finalize(): bottom-up over dirty nodes, store each child's crc32c in
 *      its parent pointer.
 *   3. Bitmap: every bitmap page whose bits changed is copied to a newly
 *      allocated page (looping until no more change: allocating for the
 *      bitmap changes the bitmap), the old one freed; the next record's
 *      page is reserved (the bitmap again).
 *   4. Growth: above 64 KB the file grows in chunks written as real zeros in
 *      the same batch, so later commits overwrite blocks that exist.
 *   5. pwritev in page order: a record with its pages (one request), or a
 *      checkpoint's pages then its slot into the slot not holding D's
 *      checkpoint; then one fdatasync. A failed sync poisons the store; no
 *      sync is ever retried. A new store's first commit writes both slots
 *      instead, with its pages, and fsyncs the directory (pager.h FRESH).
 *   6. Publish: the state becomes s->cur, dirty pages move into the cache,
 *      pages freed by W become pending (tag W) until no snapshot < W lives.
 *
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "pager.h"

#define GROW_EXACT_BYTES (64u * 1024u)
#define GROW_MAX_CHUNK (8u * 1024u * 1024u)
#define WRITE_BATCH 512 /* iovecs per pwritev */

static const uint8_t zero_page[65536];

/* Its address identifies a thread: the one holding a store's writer lock. */
static _Thread_local char thread_token;

/* ---- Bitmap helpers ---------------------------------------------------- */


static uint32_t bmp_bytes_per_page(uint32_t P) { return P - OVF_HDR; }

uint32_t mote__bmp_needed(uint32_t P, uint32_t npages)
{
    if (npages <= SLOT_INLINE_BITS)
        return 0;
    uint64_t bpp = (uint64_t)bmp_bytes_per_page(P) * 8;
    return (uint32_t)((npages - SLOT_INLINE_BITS + bpp - 1) / bpp);
}

uint32_t mote__max_pages(uint32_t P)
{
    uint64_t m = SLOT_INLINE_BITS + (uint64_t)SLOT_MAX_BMP * bmp_bytes_per_page(P) * 8;
    return m > 0xFFFFFFF0u ? 0xFFFFFFF0u : (uint32_t)m;
}

/* bytes of bitmap needed to cover npages, rounded up to whole bitmap pages */
uint32_t mote__bm_cover_bytes(uint32_t P, uint32_t npages)
{
    return SLOT_INLINE_BM + mote__bmp_needed(P, npages) * bmp_bytes_per_page(P);
}

int mote__bm_grow(uint8_t **b, uint32_t *cap, uint32_t need)
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

void mote__slot_seal(uint8_t *slot, uint32_t P) { wr64(slot + P - 8, slot_hash(slot, P)); }

int mote__slot_valid(const uint8_t *slot, uint32_t P, uint32_t where)
{
    uint32_t ver = rd32(slot + 8);
    if (rd64(slot) != MOTE_MAGIC || (ver != 1 && ver != MOTE_FORMAT_VERSION) ||
        rd32(slot + 12) != P || rd32(slot + 16) != where)
        return 0;
    if (rd64(slot + P - 8) != slot_hash(slot, P))
        return 0;
    uint32_t kind = rd32(slot + 20);
    if (kind == SLOT_KIND_MARKER && ver == 1) /* the header only */
        return where <= 1 ? 2 : 0;
    if (where <= 1 ? kind != SLOT_KIND_COMMIT && kind != SLOT_KIND_MARKER
                   : kind != SLOT_KIND_RECORD || ver == 1)
        return 0;
    uint32_t npages = rd32(slot + 32), next_tree = rd32(slot + 36);
    if (npages < 2 || npages > mote__max_pages(P) || next_tree < 1 ||
        next_tree > MOTE_MAX_TREES + 1 ||
        rd32(slot + 40) != mote__bmp_needed(P, npages))
        return 0;
    if (ver != 1) { /* the chain (pager.h FILE FORMAT) */
        uint32_t next = st_chain_next(slot), len = st_chain_len(slot), head = st_chain_head(slot);
        if ((next && (next < 2 || next >= npages || next == where)) || len > CHAIN_MAX ||
            (kind == SLOT_KIND_COMMIT && len) || (kind == SLOT_KIND_RECORD && !len) ||
            (len ? head < 2 || head >= npages : head != 0) || slot[62] > 1)
            return 0;
    }
    const uint8_t *root = slot + SLOT_ROOT_OFF;
    if (n_level(root) >= MAX_DEPTH ||
        mote__node_validate(root, P - 8 - SLOT_ROOT_OFF, (int)n_level(root), 0))
        return 0;
    return (int)kind;
}

int mote__chain_pages(mote_store *s, const uint8_t *st, uint32_t *out, uint32_t *n)
{
    uint32_t len = st_chain_len(st), k = 0, next = len ? st_chain_head(st) : st_chain_next(st);
    uint8_t *buf = len ? mote__malloc(s->P) : NULL;
    int rc = MOTE_OK;
    if (len && !buf)
        return mote__err(MOTE_NOMEM, "out of memory reading %s", s->path);
    for (uint32_t i = 1; i <= len && !rc; i++) {
        if ((rc = mote__read_page_raw(s, next, buf)))
            break;
        if (mote__slot_valid(buf, s->P, next) != (int)SLOT_KIND_RECORD ||
            st_chain_len(buf) != i || rd64(buf + 24) > rd64(st + 24)) {
            rc = CORRUPT("%s: commit record %u of the chain (page %u) is not there", s->path,
                         i, next);
            break;
        }
        out[k++] = next;
        next = st_chain_next(buf);
    }
    if (!rc && len && next != st_chain_next(st))
        rc = CORRUPT("%s: the chain's last record does not name the reserved page %u",
                     s->path, st_chain_next(st));
    if (!rc && next)
        out[k++] = next;
    mote__free(buf);
    *n = k;
    return rc;
}

void mote__slot_init(uint8_t *slot, uint32_t P, int index, uint32_t kind,
                             uint64_t txnid)
{
    wr64(slot, MOTE_MAGIC);
    wr32(slot + 8, MOTE_FORMAT_VERSION);
    wr32(slot + 12, P);
    wr32(slot + 16, (uint32_t)index);
    wr32(slot + 20, kind);
    wr64(slot + 24, txnid);
}

snap *mote__snap_new(uint32_t P)
{
    snap *sn = mote__malloc(sizeof *sn + P);
    if (!sn)
        return NULL;
    sn->refs = 1;
    sn->data = (uint8_t *)(sn + 1);
    return sn;
}

void mote__snap_unref(snap *sn)
{
    if (sn && --sn->refs == 0)
        mote__free(sn);
}

/* ---- Transactions ------------------------------------------------------ */

/* Load the allocation bitmap of the write base `st` (writer, under wmu). */
static int load_bitmap(mote_store *s, const uint8_t *st)
{
    const uint8_t *slot = st;
    uint32_t npages = rd32(slot + 32), nb = rd32(slot + 40), bpp = bmp_bytes_per_page(s->P);
    uint32_t need = mote__bm_cover_bytes(s->P, npages);
    uint8_t *bm = NULL;
    uint32_t cap = 0;
    int rc = mote__bm_grow(&bm, &cap, need);
    if (!rc)
        rc = mote__bm_grow(&s->pend, &s->pend_cap, need);
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
            rc = mote__validate_aux(s, buf, PAGE_BITMAP);
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
    s->bm_txnid = rd64(st + 24);
    s->hint = 2;
    return MOTE_OK;
}

/* ---- Durability (pager.h GROUP COMMIT) ---------------------------------- */

static int failed_err(const mote_store *s)
{
    return mote__err(MOTE_POISONED, "store %s: a sync failed%s; close and reopen it", s->path,
                     s->seg ? " (in this or another process: every process must reopen it)" : "");
}

/* The handle's sync lock: one fdatasync at a time in a process, so that a
 * failure (which the kernel reports once per open file) reaches every
 * thread; processes sync at once, each with its own open file. MOTE_POISONED
 * (not locked) once a sync failed anywhere. */
static int sync_lock(mote_store *s)
{
    pthread_mutex_lock(&s->smu);
    if (atomic_load(&s->dur->failed)) {
        pthread_mutex_unlock(&s->smu);
        return failed_err(s);
    }
    return MOTE_OK;
}

static void sync_unlock(mote_store *s) { pthread_mutex_unlock(&s->smu); }

/* The state `sn` of commit txnid (a reference passed in) becomes what this
 * process's readers see, if it is newer (under s->mu). */
static void show(mote_store *s, uint64_t txnid, snap *sn)
{
    if (txnid > s->txnid) {
        mote__snap_unref(s->cur);
        s->cur = sn;
        s->txnid = txnid;
        s->base_slot = st_ckpt(sn->data);
        s->marker_ok = 0;
        sn = NULL;
    }
    if (s->wcur && s->wtxnid <= s->txnid) { /* caught up: the next write builds on cur */
        mote__snap_unref(s->wcur);
        s->wcur = NULL;
    }
    if (sn)
        mote__snap_unref(sn);
}

static void atomic_max(_Atomic uint64_t *p, uint64_t v)
{
    uint64_t cur = atomic_load(p);
    while (cur < v && !atomic_compare_exchange_weak(p, &cur, v))
        ;
}

/* A sync ended: wake the processes waiting for one (futex). */
static void sync_ended(mote_store *s)
{
    durability *d = s->dur;
    atomic_fetch_add(&d->gen, 1);
    if (s->seg && atomic_load(&d->waiters))
        syscall(SYS_futex, &d->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Under the sync lock: one fdatasync. A failure refuses every later write of
 * every handle (no sync is retried: what it failed to write may be lost). */
static int sync_file(mote_store *s)
{
    int r = s->io->fdatasync(s->io->ctx, s->fd);
    if (!r)
        return MOTE_OK;
    atomic_store(&s->dur->failed, 1);
    sync_ended(s);
    return mote__ioerr(r, "sync", s->path);
}

/* Under the sync lock: one fdatasync makes every commit written before it
 * began durable (another process's may run at the same time), and the
 * newest of them the latest. */
static int sync_written(mote_store *s)
{
    uint32_t page = 0;
    uint64_t w;
    snap *sn = NULL;
    if (s->seg) {
        w = mote__share_written_txn(s, &page);
    } else {
        pthread_mutex_lock(&s->mu);
        sn = s->wcur ? s->wcur : s->cur;
        w = s->wcur ? s->wtxnid : s->txnid;
        sn->refs++;
        pthread_mutex_unlock(&s->mu);
    }
    atomic_max(&s->dur->syncing, w);
    int rc = sync_file(s);
    if (!rc && s->seg) {
        mote__share_visible(s, w, page, 1);
    } else if (!rc) {
        atomic_max(&s->dur->synced, w);
        pthread_mutex_lock(&s->mu);
        show(s, w, sn);
        sn = NULL;
        pthread_mutex_unlock(&s->mu);
    }
    if (sn) {
        pthread_mutex_lock(&s->mu);
        mote__snap_unref(sn);
        pthread_mutex_unlock(&s->mu);
    }
    if (!rc)
        sync_ended(s);
    return rc;
}

/* Wait up to `us` for a sync of another process to end (a futex on the
 * segment's sync counter, last read as `gen`). */
static void wait_sync(mote_store *s, uint32_t gen, uint64_t txnid, long us)
{
    durability *d = s->dur;
    atomic_fetch_add(&d->waiters, 1);
    if (atomic_load(&d->synced) < txnid && !atomic_load(&d->failed)) {
        struct timespec ts = {0, us * 1000};
        syscall(SYS_futex, &d->gen, FUTEX_WAIT, gen, &ts, NULL, 0);
    }
    atomic_fetch_sub(&d->waiters, 1);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Phase 2: commit txnid durable. Done if a sync that began after it was
 * written has ended; if another process's sync that covers it is under
 * way, after that one (waiting SYNC_WAIT_US at most: its process may have
 * died in it); else one fdatasync of this process for everything written
 * so far. */
#define SYNC_WAIT_US 50000
static int make_durable(mote_store *s, uint64_t txnid)
{
    int rc = sync_lock(s);
    if (rc)
        return rc;
    durability *d = s->dur;
    uint64_t start = 0;
    while (atomic_load(&d->synced) < txnid) {
        uint32_t gen = atomic_load(&d->gen);
        if (atomic_load(&d->failed)) {
            rc = failed_err(s);
            break;
        }
        if (s->seg && atomic_load(&d->syncing) >= txnid) {
            uint64_t now = now_us();
            if (!start)
                start = now;
            if (now - start < SYNC_WAIT_US) {
                wait_sync(s, gen, txnid, 1000);
                continue;
            }
        }
        rc = sync_written(s);
        break;
    }
    sync_unlock(s);
    return rc;
}

/* Pages freed by commits no live snapshot can see become free (shared by
 * processes: the segment's ring says which, share.c). */
static void release_pending(mote_store *s)
{
    uint64_t oldest = UINT64_MAX;
    pthread_mutex_lock(&s->mu);
    for (reader *r = s->readers; r; r = r->next)
        if (r->txnid < oldest)
            oldest = r->txnid;
    /* A reader that begins after this look (at the slots too, below) takes
     * the latest commit, which may be older than the newest synced one
     * (GROUP COMMIT: a sync ends, then its commit becomes the latest):
     * pages freed by commits after it stay, as after one not yet durable. */
    uint64_t latest = s->seg ? atomic_load(s->sh_latest) : s->txnid;
    pthread_mutex_unlock(&s->mu);
    uint64_t synced = store_synced(s); /* (GROUP COMMIT: pages a state not yet durable freed) */
    if (synced < oldest)
        oldest = synced;
    if (latest < oldest)
        oldest = latest;
    if (s->seg) {
        uint64_t needed = 0;
        for (size_t i = 0; i < s->npend; i++)
            if (s->pendv[i].tag > needed)
                needed = s->pendv[i].tag;
        oldest = mote__share_release(s, oldest, needed);
    }
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
    if (s->seg)
        mote__share_pending(s, oldest);
}

int mote__txn_begin(mote_store *s, int write, mote_txn **out)
{
    *out = NULL;
    if (store_forked(s))
        return mote__forked_err(s);
    /* (malloc and memset, not calloc: glibc's calloc skips its per-thread
     * cache, and a read transaction is begun per query) */
    mote_txn *t = mote__malloc(sizeof *t);
    if (!t)
        return mote__err(MOTE_NOMEM, "out of memory beginning a transaction");
    memset(t, 0, sizeof *t);
    t->s = s;
    t->write = write != 0;
    t->lazy = write == 2;
    if (!write) {
        pthread_mutex_lock(&s->mu);
        int rc = s->poisoned ? mote__err(MOTE_POISONED, "store %s: an earlier sync failed; "
                                         "close and reopen it", s->path)
                 : s->seg      ? share_read_begin(s)
                 : s->solo     ? solo_read_begin(s)
                 : s->outsider ? mote__share_outsider_refresh(s)
                               : MOTE_OK;
        if (rc) {
            pthread_mutex_unlock(&s->mu);
            mote__free(t);
            return rc;
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
        return s->ro_errno ? mote__err(MOTE_READONLY, "store %s is read-only: %s, so it was "
                                       "opened for reading only", s->path,
                                       s->ro_errno == EROFS ? "its file system is read-only"
                                                            : "this process may not write the file")
                           : mote__err(MOTE_READONLY, "store %s was opened read-only", s->path);
    }
    if (atomic_load(&s->writer) == &thread_token) { /* waiting would never end */
        mote__free(t);
        return mote__err(MOTE_BUSY, "store %s: this thread already holds its write "
                         "transaction", s->path);
    }
    pthread_mutex_lock(&s->wmu);
    atomic_store(&s->writer, &thread_token);
    int rc = MOTE_OK, shared = 0;
    if (s->poisoned)
        rc = mote__err(MOTE_POISONED, "store %s: an earlier sync failed; close "
                       "and reopen it", s->path);
    else if (!s->seg && atomic_load(&s->dur->failed))
        rc = failed_err(s);
    if (!rc && s->solo)
        rc = mote__solo_write_begin(s, t);
    if (!rc && s->seg && !(rc = mote__share_write_begin(s)))
        shared = 1;
    if (!rc) { /* the base: the newest commit written (GROUP COMMIT) */
        pthread_mutex_lock(&s->mu);
        t->base = s->wcur ? s->wcur : s->cur;
        t->base->refs++;
        pthread_mutex_unlock(&s->mu);
        t->base_txnid = rd64(t->base->data + 24);
        if (s->bm && s->bm_txnid != t->base_txnid) { /* (another process's commit) */
            mote__free(s->bm);
            s->bm = NULL;
            s->bm_cap = 0;
        }
    }
    if (!rc && !s->bm)
        rc = load_bitmap(s, t->base->data);
    if (!rc) {
        release_pending(s);
        t->root = mote__snap_new(s->P);
        t->bm = mote__malloc(s->bm_cap);
        t->scratch = mote__malloc(s->P);
        if (!t->root || !t->bm || !t->scratch)
            rc = mote__err(MOTE_NOMEM, "out of memory beginning a write transaction");
    }
    if (rc) {
        if (t->root)
            mote__snap_unref(t->root);
        if (t->base) {
            pthread_mutex_lock(&s->mu);
            mote__snap_unref(t->base);
            pthread_mutex_unlock(&s->mu);
        }
        mote__free(t->bm);
        mote__free(t->scratch);
        int solo = t->solo_w;
        if (shared)
            mote__share_write_end(s);
        atomic_store(&s->writer, NULL);
        pthread_mutex_unlock(&s->wmu);
        if (solo)
            solo_write_done(s);
        mote__free(t);
        return rc;
    }
    memcpy(t->root->data, t->base->data, s->P);
    memcpy(t->bm, s->bm, s->bm_cap);
    t->bm_cap = s->bm_cap;
    t->hint = s->hint;
    t->txnid = s->next_txnid;
    t->serial = ++s->txn_serial;
    t->npages = rd32(t->base->data + 32);
    t->next_tree = rd32(t->base->data + 36);
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
        if (s->seg && !t->view)
            share_read_end(s);
        else if (s->solo && !t->view)
            solo_read_end(s);
    }
    mote__snap_unref(t->root);
    if (t->base)
        mote__snap_unref(t->base);
    s->ntxn--;
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; t->dhash && i <= t->dmask; i++)
        for (mpage *p = t->dhash[i], *nx; p; p = nx) {
            nx = p->hnext;
            mote__mpage_free(p, s->P);
        }
    mote__free(t->dhash);
    mote__free(t->bm);
    mote__free(t->freed);
    mote__free(t->scratch);
    mote__free(t->vbuf);
    mote__free(t->spare);
    if (t->write) {
        int solo = t->solo_w && !t->solo_keep;
        if (s->seg && !t->solo_w)
            mote__share_write_end(s);
        atomic_store(&s->writer, NULL);
        pthread_mutex_unlock(&s->wmu);
        if (solo) /* (after the lock: the last one may join) */
            solo_write_done(s);
    }
    mote__free(t);
}

int mote__txn_base_view(mote_txn *w, mote_txn **out)
{
    mote_store *s = w->s;
    mote_txn *t = mote__calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return mote__err(MOTE_NOMEM, "out of memory beginning a transaction");
    t->s = s;
    t->view = 1;
    pthread_mutex_lock(&s->mu);
    t->root = w->base;
    t->root->refs++;
    t->txnid = t->rd.txnid = w->base_txnid;
    t->rd.next = s->readers;
    s->readers = &t->rd;
    s->ntxn++;
    pthread_mutex_unlock(&s->mu);
    *out = t;
    return MOTE_OK;
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

/* ---- Commit ------------------------------------------------------------------ */

/* Allocate a new page for every bitmap chunk whose bits changed (again
 * after more allocation: chunks already copied keep their page). */
static int bitmap_alloc(mote_txn *t, mpage **bmp_pages)
{
    mote_store *s = t->s;
    uint8_t *slot = t->root->data;
    uint32_t bpp = bmp_bytes_per_page(s->P);
    uint32_t old_nb = rd32(slot + 40);
    int changed;
    /* a shrinking commit drops the bitmap pages past its new size */
    for (uint32_t i = mote__bmp_needed(s->P, t->npages); i < old_nb; i++) {
        uint8_t *op = slot + SLOT_BMP_OFF + i * PTR12;
        int rc = ptr_pgno(op) ? mote__page_free(t, ptr_pgno(op), ptr_birth(op)) : MOTE_OK;
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
            int rc = mote__bm_grow(&t->bm, &t->bm_cap, off + bpp);
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
    return MOTE_OK;
}

/* Copy the bitmap into the slot and its chunks into their new pages; fills
 * the slot's pointers. */
static void bitmap_fill(mote_txn *t, mpage **bmp_pages)
{
    mote_store *s = t->s;
    uint8_t *slot = t->root->data;
    uint32_t bpp = bmp_bytes_per_page(s->P);
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
}

static int cmp_page(const void *a, const void *b)
{
    uint32_t x = (*(mpage *const *)a)->pgno, y = (*(mpage *const *)b)->pgno;
    return x < y ? -1 : x > y;
}

/* Write the dirty pages, any zero-fill growth and the `head_n` pages of
 * `head` (from page head_pg: both root slots of a first commit, or a commit
 * record), in page order, one write request per run of adjacent pages. */
static int write_pages(mote_txn *t, mpage **pages, uint32_t npg, uint32_t target,
                       const uint8_t *head, uint32_t head_pg, uint32_t head_n)
{
    mote_store *s = t->s;
    uint32_t phys = (uint32_t)(s->file_bytes >> s->page_shift);
    struct iovec iov[WRITE_BATCH];
    int cnt = 0;
    uint32_t run_start = 0, next = 0, k = 0, hk = 0;
    uint32_t p = 2;
    for (;;) {
        /* next page to write: a dirty page, a head page, or a zero page in [phys, target) */
        uint32_t dp = k < npg ? pages[k]->pgno : UINT32_MAX;
        uint32_t hp = hk < head_n ? head_pg + hk : UINT32_MAX;
        uint32_t zp = p < phys ? phys : p, m = dp < hp ? dp : hp;
        const uint8_t *data;
        uint32_t pg;
        if (zp < target && zp < m) {
            pg = zp;
            data = zero_page;
        } else if (m == UINT32_MAX) {
            break;
        } else if (hp < dp) {
            pg = hp;
            data = head + (size_t)hk++ * s->P;
        } else {
            pg = dp;
            data = pages[k++]->data;
            assert(pg >= 2 && pg < t->npages && !base_uses(t, pg));
        }
        p = pg + 1 > p ? pg + 1 : p;
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
    uint32_t mx = mote__max_pages(s->P);
    return target > mx ? mx : (uint32_t)target;
}

/* A write or sync of the commit failed: no sync is retried, the handle is
 * unusable until reopened. Returns MOTE_POISONED (the OS cause stays). */
static int poison(mote_store *s, int rc)
{
    pthread_mutex_lock(&s->mu);
    s->poisoned = 1;
    pthread_mutex_unlock(&s->mu);
    if (rc == MOTE_IO || rc == MOTE_NOSPACE) {
        char cause[256];
        snprintf(cause, sizeof cause, "%s", mote_errmsg(s));
        mote__oserr(MOTE_POISONED, mote_last_oserror(NULL), s->path, "%s; the store "
                    "is unusable until reopened (the commit may or may not be durable)",
                    cause);
    }
    return MOTE_POISONED;
}

/* The commit is written (phase 1 of GROUP COMMIT): its state becomes the
 * base of the next write (s->wcur), its pages move into the cache, the pages
 * it freed become pending until it is durable and no snapshot older than it
 * lives. Readers see it once it is durable (show). Frees t. */
static void publish(mote_txn *t, mpage **pages, uint32_t npg)
{
    mote_store *s = t->s;
    if (s->seg) { /* the freed pages go to the segment's ring too */
        mote__share_pages(s, pages, npg);
        mote__share_written(s, t->txnid, t->root->data, t->freed, t->nfreed);
    }
    for (size_t i = 0; i < t->nfreed; i++) {
        if (s->npend == s->cap_pend) {
            size_t n = s->cap_pend ? s->cap_pend * 2 : 64;
            pending *pv = mote__realloc(s->pendv, n * sizeof *pv);
            if (!pv) /* cannot track: keep the page out of use for good */
                continue;
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
    s->bm_txnid = t->txnid;
    t->bm = obm;
    s->hint = t->hint;
    s->next_txnid = t->txnid + 1;
    pthread_mutex_lock(&s->mu);
    if (s->wcur)
        mote__snap_unref(s->wcur);
    s->wcur = t->root;
    s->wtxnid = t->txnid;
    t->root = NULL;
    for (uint32_t i = 0; i < npg; i++) {
        mpage *p = pages[i];
        p->dirty = 0;
        p->refs = 0;
        p->hnext = NULL;
        if (mote__cache_insert(s, p))
            mote__mpage_free(p, s->P);
    }
    mote__free(t->dhash);
    t->dhash = NULL;
    t->ndirty = 0;
    mote__cache_evict(s);
    pthread_mutex_unlock(&s->mu);
    txn_free(t);
}

/* Records between checkpoints: CHAIN_MAX, fewer in a small store (its
 * records and the pages between them would make most of its file). */
static uint32_t chain_limit(uint32_t npages)
{
    uint32_t n = npages / 8;
    return n < CHAIN_MIN ? CHAIN_MIN : n > CHAIN_MAX ? CHAIN_MAX : n;
}

int mote__free_chain(mote_txn *t)
{
    mote_store *s = t->s;
    const uint8_t *base = t->base->data;
    if (t->chain_freed || s->fresh || (!st_chain_len(base) && !st_chain_next(base)))
        return MOTE_OK;
    uint32_t pages[CHAIN_MAX + 1], n = 0, len = st_chain_len(base);
    int rc = MOTE_OK;
    if (len && s->chain_txnid == t->base_txnid && s->chain_n == len &&
        s->chain_pg[0] == st_chain_head(base)) { /* this process wrote it */
        memcpy(pages, s->chain_pg, len * sizeof *pages);
        n = len;
        if (st_chain_next(base))
            pages[n++] = st_chain_next(base);
#ifndef NDEBUG /* where other processes write too, the tests check it against the file */
        uint32_t disk[CHAIN_MAX + 1], nd = 0;
        assert(!s->seg || mote__chain_pages(s, base, disk, &nd) ||
               (nd == n && !memcmp(disk, pages, n * sizeof *pages)));
#endif
    } else if ((rc = mote__chain_pages(s, base, pages, &n))) {
        return rc;
    }
    t->chain_freed = 1;
    uint32_t nrec = st_chain_next(base) ? n - 1 : n;
    for (uint32_t i = 0; !rc && i < nrec; i++) /* pending: a snapshot's check reads them */
        rc = mote__page_free(t, pages[i], 0);
    t->chain_next = nrec < n ? pages[nrec] : 0;
    if (t->chain_next && t->no_chain) { /* read by nobody: free at once */
        bit_clr(t->bm, t->chain_next);
        t->chain_next = 0;
    }
    return rc;
}

/* The checkpoint that the base's chain starts from is durable: the one a
 * new checkpoint keeps in the other slot. Its txnid is at most the base's
 * minus the records since it (each record's txnid is above its base's). */
static int ckpt_durable(const mote_txn *t)
{
    return store_synced(t->s) + st_chain_len(t->base->data) >= t->base_txnid;
}

/* What recovery must verify of a commit built on a base that was not
 * durable (pager.h GROUP COMMIT): its txnid minus the newest commit known
 * durable, 0 if that is its base. */
static uint32_t commit_lag(const mote_txn *t, uint64_t synced)
{
    if (synced >= t->base_txnid)
        return 0;
    return !synced || t->txnid - synced >= LAG_UNKNOWN ? LAG_UNKNOWN
                                                      : (uint32_t)(t->txnid - synced);
}

int mote__txn_commit_write(mote_txn *t, uint64_t *txnid_out, snap **sn_out)
{
    mote_store *s = t->s;
    *txnid_out = 0;
    *sn_out = NULL;
    mote__txn_release_held(t);
    if (!t->write || !t->changed) {
        mote__txn_abort(t);
        return MOTE_OK;
    }
    uint8_t *slot = t->root->data;
    const uint8_t *base = t->base->data;
    int base_slot = st_ckpt(base);
    mpage *bmp_pages[SLOT_MAX_BMP] = {0};
    mpage **pages = NULL;
    uint8_t *both = NULL; /* both root slots (the first durable commit) */
    int rc = MOTE_OK, poisons = 0;

    /* a commit record at the page the base reserved, or a checkpoint
     * (pager.h COMMIT CHAIN) */
    uint32_t R = s->fresh || t->no_chain ? 0 : st_chain_next(base);
    uint32_t len = R ? st_chain_len(base) + 1 : 0, limit = chain_limit(t->npages);
    int record = R >= 2 && len <= limit;
    if (!record && (rc = mote__free_chain(t)))
        goto fail;
    uint32_t low = UINT32_MAX, tree_pages = t->ndirty;
    /* (a commit that reserves nothing keeps its numbers: a shrink's pages
     * must stay below its cut) */
    if (!t->no_chain && (!record || !mote__place_chain(t, R, &low)))
        low = mote__place_pages(t);
    finalize(t, slot + SLOT_ROOT_OFF, root_cap(s));
    if ((rc = bitmap_alloc(t, bmp_pages)))
        goto fail;
    /* a new store (pager.h FRESH): slot 0 keeps the creation page until its
     * first commit that is not lazy, which writes both slots */
    int lazy = s->fresh && t->lazy;
    int sync = !(s->flags & MOTE_NOSYNC) && !lazy;
    /* made durable after the writer lock is released, with the commits of
     * others (pager.h GROUP COMMIT); a checkpoint only when the checkpoint
     * it leaves in the other slot is durable, else synced here */
    int group = sync && !s->fresh && (record || ckpt_durable(t));
    /* the next record's page: a record's successor, unless the chain is
     * full; a checkpoint's if it has pages, not too many (tiny stores and
     * bulk loads keep their size) */
    int reserve = !t->no_chain && !lazy &&
                  (record ? len < limit : tree_pages >= 1 && tree_pages <= 64);
    uint32_t next = 0;
    if (reserve || t->chain_next) { /* (a checkpoint may keep its base's reserved page) */
        next = reserve ? mote__reserve_record(t, t->ndirty + 1, t->chain_next) : 0;
        if (t->chain_next && next != t->chain_next)
            bit_clr(t->bm, t->chain_next); /* read by nobody: free at once */
        if ((rc = bitmap_alloc(t, bmp_pages))) /* the bitmap changed again */
            goto fail;
    }
    bitmap_fill(t, bmp_pages);
    if (low < t->hint)
        t->hint = low;

    if (s->fresh) /* nothing durable to keep */
        s->need_sync = 0;
    if (sync && !s->fresh && s->need_sync) {
        /* make the base durable first: after an unclean open or a writer
         * that died, it may not be, although it was taken as durable */
        if ((rc = sync_lock(s)))
            goto fail;
        rc = sync_written(s);
        sync_unlock(s);
        if (rc) {
            poisons = 1;
            goto fail;
        }
        s->need_sync = 0;
    }

    uint32_t where = record ? R : s->fresh ? 1 : 1 - (uint32_t)base_slot;
    int ckpt = record ? base_slot : (int)where;
    mote__slot_init(slot, s->P, (int)where, record ? SLOT_KIND_RECORD : SLOT_KIND_COMMIT,
                    t->txnid);
    wr32(slot + 32, t->npages);
    wr32(slot + 36, t->next_tree);
    st_set_chain(slot, next, t->base_txnid, !record ? 0 : len > 1 ? st_chain_head(base) : R,
                 record ? len : 0, ckpt);
    if (!s->fresh)
        slot[63] = (uint8_t)commit_lag(t, store_synced(s));
    mote__slot_seal(slot, s->P);
    /* a first commit whose state is all in its slot (the file is the two
     * slots) puts the clean-close marker into slot 0 at once: it vouches for
     * no page but the slot itself, so the close writes none (pager.h FRESH) */
    int first_marker = 0, first = s->fresh && !lazy;
    if (s->fresh) { /* (a lazy one: slot 1 after the creation page, which
                     * creation did not write with 4096-byte pages: open.c) */
        if (!(both = mote__malloc((size_t)2 * s->P))) {
            rc = mote__err(MOTE_NOMEM, "out of memory committing");
            goto fail;
        }
        first_marker = first && sync && t->npages == 2;
        if (lazy) {
            mote__creation_page(both, s->P);
        } else if (first_marker) {
            mote__marker(both, slot, s->P, 0, (int)where);
        } else {
            memcpy(both, slot, s->P);
            wr32(both + 16, 0);
            mote__slot_seal(both, s->P);
        }
        memcpy(both + s->P, slot, s->P);
    }

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

    uint32_t target = growth_target(s, t->npages), phys = (uint32_t)(s->file_bytes >> s->page_shift);
    if (record && t->npages > phys) {
        /* a record past the file's end: zeros follow it in the same request,
         * so that the next records find blocks that exist */
        uint32_t chunk = phys / 8 > CHAIN_RUN + 1 ? phys / 8 : CHAIN_RUN + 1;
        uint32_t mx = mote__max_pages(s->P);
        if (target < phys + chunk)
            target = phys + chunk > mx ? mx : phys + chunk;
    }
    if (first && s->seg) /* neither slot holds the latest commit until this one is published */
        mote__share_keep_base(s);
    if (both)
        poisons = 1; /* the slots go with the pages */
    /* (a record that goes with them does not poison on a failed write: the
     * base is unchanged and its chain_next still names the page, so the
     * record there is wiped below, and the next commit writes there) */
    if ((rc = write_pages(t, pages, npg, target, both ? both : record ? slot : NULL,
                          both ? 0 : where, both ? 2 : record))) {
        if (record && !both &&
            s->io->pwrite(s->io->ctx, s->fd, zero_page, s->P, (uint64_t)R << s->page_shift) !=
                (ssize_t)s->P)
            poisons = 1; /* the failed commit's record may stay: a reopen could take it */
        goto fail;
    }
    poisons = 1; /* from the slot on, a failure may have reached the disk */
    if (record) { /* written: the chain this process knows grows, or starts */
        int known = len == 1 || (s->chain_txnid == t->base_txnid && s->chain_n == len - 1);
        s->chain_n = known ? len : 0;
        s->chain_pg[len - 1] = R;
        s->chain_txnid = t->txnid;
    }
    uint64_t slot_end = (uint64_t)(where + 1) << s->page_shift;
    ssize_t w = both || record ? (ssize_t)s->P
                               : s->io->pwrite(s->io->ctx, s->fd, slot, s->P,
                                               (uint64_t)where << s->page_shift);
    if (w != (ssize_t)s->P) {
        rc = mote__ioerr(w < 0 ? (int)w : -EIO, "write of the root slot", s->path);
        goto fail;
    }
    int synced_here = 0;
    if (sync && !group) {
        if ((rc = sync_lock(s)))
            goto fail;
        atomic_max(&s->dur->syncing, t->txnid);
        if ((rc = sync_file(s))) {
            sync_unlock(s);
            goto fail;
        }
        synced_here = 1; /* (the sync lock is held until the commit is shown) */
    }
    if (first) { /* the store's first durable commit: its directory entry too
                 * (with MOTE_NOSYNC, the entry alone) */
        int r = (s->flags & MOTE_NODIRSYNC) ? 0 : s->io->fsync_dir(s->io->ctx, s->path);
        if (r) {
            if (synced_here)
                sync_unlock(s);
            rc = mote__ioerr(r, "sync of the directory", s->path);
            goto fail;
        }
        s->fresh = 0;
    }
    uint64_t fb = (uint64_t)target << s->page_shift;
    if (fb < slot_end)
        fb = slot_end;
    if (fb > s->file_bytes)
        s->file_bytes = fb;
    uint64_t txnid = t->txnid;
    snap *sn = t->root;
    sn->refs++; /* the caller's */
    int solo = t->solo_w;
    t->solo_keep = solo; /* counted until durable, below or in mote__commit_wait */
    publish(t, pages, npg); /* frees t, ends the write transaction */
    mote__free(pages);
    mote__free(both);
    if (!group) {
        /* durable now (or never: MOTE_NOSYNC, a lazy commit): readers see it */
        if (s->seg)
            mote__share_visible(s, txnid, where, sync || !lazy);
        else if (sync || !lazy) /* (MOTE_NOSYNC counts as durable) */
            atomic_max(&s->dur->synced, txnid);
        pthread_mutex_lock(&s->mu);
        show(s, txnid, sn);
        if (first_marker && s->txnid == txnid)
            s->marker_ok = 1;
        pthread_mutex_unlock(&s->mu);
        if (synced_here) {
            sync_ended(s);
            sync_unlock(s);
        }
        if (solo)
            solo_write_done(s);
        return MOTE_OK;
    }
    *txnid_out = txnid;
    *sn_out = sn;
    return MOTE_OK;

fail:
    mote__free(pages);
    mote__free(both);
    if (poisons)
        rc = poison(s, rc);
    mote__txn_abort(t);
    return rc;
}

int mote__commit_wait(mote_store *s, uint64_t txnid, snap *sn)
{
    int rc = make_durable(s, txnid);
    pthread_mutex_lock(&s->mu);
    if (!rc) /* (shared: readers here take it without a copy from the segment) */
        show(s, txnid, sn);
    else
        mote__snap_unref(sn);
    pthread_mutex_unlock(&s->mu);
    rc = rc ? poison(s, rc) : MOTE_OK;
    solo_write_done(s); /* (a store joins only once no write is counted) */
    return rc;
}

void mote__commit_forget(mote_store *s, snap *sn)
{
    pthread_mutex_lock(&s->mu);
    mote__snap_unref(sn);
    pthread_mutex_unlock(&s->mu);
    solo_write_done(s);
}

int mote__txn_commit(mote_txn *t)
{
    mote_store *s = t->s;
    uint64_t txnid;
    snap *sn;
    int rc = mote__txn_commit_write(t, &txnid, &sn);
    if (rc || !txnid)
        return rc;
    return mote__commit_wait(s, txnid, sn);
}
