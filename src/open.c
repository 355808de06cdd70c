/*
 * open.c — opening a store (create, or read both slots and recover) and
 * closing it; the process-wide registry that refuses a second handle on the
 * same file.
 *
 * FORK: the registry is per process. In a child after fork() (not after
 * exec: the file is opened O_CLOEXEC), every handle the parent had open is
 * dead: the fork handler closes the child's copy of its file descriptor (so
 * that a child outliving its parent holds none of the parent's locks) and
 * marks it; every call on it fails with MOTE_FORKED, writes nothing and
 * releases nothing (the child's copy of its memory goes when the child
 * exits). The child opens the store itself to use it.
 *
 * CLOSE: after writes, a clean-close marker (a copy of the latest state)
 * goes (unsynced) into the slot not holding the checkpoint, unless it holds
 * one already (a clean open that wrote nothing; a tiny store's first
 * commit, pager.h FRESH): then the close asks nothing and writes nothing.
 * (The shrink of a file with a large free tail, or with MOTE_REPACK a
 * store's repack, runs before, from store.c: check.c.)
 *
 * OPEN: one pread of both slots, then along the commit chain (pager.h
 * COMMIT CHAIN): from a marker not older than the newest checkpoint W (one
 * pread of its chain_next, to see that nothing followed), else from W. The
 * last state reached is verified (every page it wrote: pointers with birth
 * == its txnid) unless it is the marker; if that fails, the state before
 * it, else the other checkpoint D and its chain. An unclean writable open
 * syncs once before its first commit so that nothing is built on a
 * non-durable base.
 * CREATE writes nothing with 4096-byte pages (an empty file is a new store
 * of them), the creation page with larger ones, and syncs nothing; a store
 * whose page 0 is that page, or its torn remains, is new (pager.h FRESH).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "checksum.h"
#include "pager.h"

/* The registry: the stores open in this process, by device and inode, in a
 * hash table of chains (an agent server may hold 100,000 open). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static mote_store **reg_tab;
static size_t reg_mask, reg_n; /* buckets - 1 (0: no table yet), stores */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* ---- Fork ------------------------------------------------------------------ */

static void fork_prepare(void) { pthread_mutex_lock(&reg_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&reg_mu); }

/* In the child, the only thread: every registered handle is the parent's. */
static void fork_child(void)
{
    long parent = (long)getppid();
    for (size_t b = 0; reg_tab && b <= reg_mask; b++) {
        for (mote_store *s = reg_tab[b]; s; s = s->reg_next) {
            s->forked_from = parent;
            if (s->fd >= 0)
                s->io->close(s->io->ctx, s->fd);
            s->fd = -1;
            mote__share_forked(s);
        }
        reg_tab[b] = NULL;
    }
    reg_n = 0;
    mote__share_fork_child();
    pthread_mutex_unlock(&reg_mu);
}

static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

int mote__forked_err(const mote_store *s)
{
    return mote__err(MOTE_FORKED, "store %s was opened in process %ld, before this process "
                     "was forked from it: open it again in this process", s->path,
                     s->forked_from);
}

/* ---- Open and close ------------------------------------------------------ */

static size_t reg_bucket(uint64_t dev, uint64_t ino)
{
    return (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) & reg_mask;
}

/* Double the table (64 buckets at first); under reg_mu. */
static int registry_grow(void)
{
    size_t n = reg_tab ? (reg_mask + 1) * 2 : 64;
    mote_store **t = mote__calloc(n, sizeof *t);
    if (!t)
        return mote__err(MOTE_NOMEM, "out of memory registering a store");
    mote_store **old = reg_tab;
    size_t old_n = reg_tab ? reg_mask + 1 : 0;
    reg_tab = t;
    reg_mask = n - 1;
    for (size_t b = 0; b < old_n; b++)
        for (mote_store *s = old[b], *nx; s; s = nx) {
            nx = s->reg_next;
            size_t k = reg_bucket(s->dev, s->ino);
            s->reg_next = reg_tab[k];
            reg_tab[k] = s;
        }
    mote__free(old);
    return MOTE_OK;
}

static int registry_add(mote_store *s)
{
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&reg_mu);
    int rc = !reg_tab || reg_n >= reg_mask + 1 ? registry_grow() : MOTE_OK;
    for (mote_store *o = rc ? NULL : reg_tab[reg_bucket(s->dev, s->ino)]; o; o = o->reg_next)
        if (o->dev == s->dev && o->ino == s->ino) {
            rc = mote__err(MOTE_BUSY, "store %s is already open in this process (as %s); "
                           "use that handle", s->path, o->path);
            break;
        }
    if (!rc) {
        size_t k = reg_bucket(s->dev, s->ino);
        s->reg_next = reg_tab[k];
        reg_tab[k] = s;
        reg_n++;
    }
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

static void registry_remove(mote_store *s)
{
    pthread_mutex_lock(&reg_mu);
    for (mote_store **pp = &reg_tab[reg_bucket(s->dev, s->ino)]; *pp; pp = &(*pp)->reg_next)
        if (*pp == s) {
            *pp = s->reg_next;
            reg_n--;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
}

static void store_free(mote_store *s)
{
    if (s->cur)
        mote__snap_unref(s->cur);
    if (s->wcur)
        mote__snap_unref(s->wcur);
    for (uint32_t i = 0; s->hash && i <= s->hash_mask; i++)
        for (mpage *p = s->hash[i], *nx; p; p = nx) {
            nx = p->hnext;
            mote__mpage_free(p, s->P);
        }
    mote__free(s->hash);
    mote__free(s->bm);
    mote__free(s->pend);
    mote__free(s->pendv);
    mote__free(s->seen);
    mote__free(s->path);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->smu);
    mote__free(s);
}

/* The creation page of page size P: an empty store's commit slot, txnid 1
 * (pager.h FRESH: always the same bytes, so an open can recognise it). */
void mote__creation_page(uint8_t *slot, uint32_t P)
{
    memset(slot, 0, P);
    mote__slot_init(slot, P, 0, SLOT_KIND_COMMIT, 1);
    wr32(slot + 32, 2);
    wr32(slot + 36, 1);
    slot[SLOT_INLINE_OFF] = 0x3; /* pages 0 and 1: the slots */
    mote__node_init(slot + SLOT_ROOT_OFF, P - 8 - SLOT_ROOT_OFF, NODE_LEAF, 0);
    mote__slot_seal(slot, P);
}

void mote__marker(uint8_t *m, const uint8_t *st, uint32_t P, uint32_t slot, int ckpt)
{
    memcpy(m, st, P);
    wr32(m + 16, slot);
    wr32(m + 20, SLOT_KIND_MARKER);
    wr32(m + 8, MOTE_FORMAT_VERSION);
    if (rd32(st + 8) == 1) /* a version 1 state becomes its own checkpoint's */
        st_set_chain(m, 0, 0, 0, 0, ckpt);
    mote__slot_seal(m, P);
}

/* s starts as an empty store of page size P that no commit made durable:
 * its state is the creation page (in slot 0 of a file of file_bytes). */
static int start_fresh(mote_store *s, uint32_t P, uint64_t file_bytes)
{
    s->P = P;
    s->page_shift = (uint32_t)__builtin_ctz(P);
    s->cur = mote__snap_new(P);
    if (!s->cur)
        return mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
    mote__creation_page(s->cur->data, P);
    s->txnid = 1;
    s->next_txnid = 2;
    s->base_slot = 0;
    s->file_bytes = file_bytes;
    s->fresh = 1;
    atomic_store(&s->dur->synced, 0); /* no marker: slot 0 keeps the creation page */
    s->marker_ok = 0;
    s->need_sync = 0; /* nothing is durable, so nothing to keep */
    return MOTE_OK;
}

/* Creation syncs nothing: the first synced commit makes the store durable,
 * and fsyncs the directory (pager.h FRESH). With pages of 4096 bytes it
 * writes nothing either: an empty file is such a store, never committed
 * (the first commit, lazy or not, writes page 0); with larger pages it
 * writes the creation page, which tells later openers the page size. */
static int create_file(mote_store *s, unsigned page_size)
{
    uint32_t P = page_size ? page_size : 4096;
    if (P < 4096 || P > 65536 || (P & (P - 1)))
        return mote__err(MOTE_INVALID, "page size %u: must be a power of two "
                         "from 4096 to 65536", P);
    int written = P != 4096; /* (an empty file is a store of 4096-byte pages) */
    int rc = start_fresh(s, P, written ? P : 0);
    if (rc || !written)
        return rc;
    ssize_t w = s->io->pwrite(s->io->ctx, s->fd, s->cur->data, P, 0);
    if (w != (ssize_t)P)
        return mote__ioerr(w < 0 ? (int)w : -EIO, "creation", s->path);
    return MOTE_OK;
}

/* Neither slot of the file's first `have` bytes (of `size`) is valid: is it
 * a store that was created and never committed (pager.h FRESH)? Its page
 * size, or 0. */
static uint32_t never_committed(const uint8_t *buf, size_t have, uint64_t size,
                                uint32_t hinted)
{
    static const uint8_t zeros[512];
    uint8_t *img = mote__malloc(65536);
    uint32_t found = 0;
    for (uint32_t P = 4096; img && P <= 65536 && !found; P *= 2) {
        if (hinted && P != hinted)
            continue;
        mote__creation_page(img, P);
        size_t n = have < P ? have : P;
        /* no header: only a file of one page of the smallest size (a file
         * of two pages of 4096 bytes, both zeroed, is a damaged store) */
        int ok = size <= 4096 || (n >= 512 && !memcmp(buf, img, 512));
        for (size_t off = 0; ok && off < n; off += 512) {
            size_t k = n - off < 512 ? n - off : 512;
            ok = !memcmp(buf + off, img + off, k) || !memcmp(buf + off, zeros, k);
        }
        if (ok)
            found = P;
    }
    mote__free(img);
    return found;
}

/* The pages below `node` (cap bytes) whose pointers' births are in (lo,
 * lo + span], each read, checked and validated, then given to `page` (may
 * be NULL) before the pages below it (mote__walk_state). */
static int walk_new(mote_store *s, const uint8_t *node, uint32_t cap, uint32_t lo,
                    uint32_t span, uint8_t *bufs, int depth,
                    int (*page)(void *ctx, uint32_t pgno, const uint8_t *buf), void *ctx)
{
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
        while (ptr_pgno(ptr) && birth_after(ptr_birth(ptr), lo, span)) {
            uint8_t *buf = bufs + (size_t)depth * s->P;
            if (depth + 1 >= MAX_DEPTH)
                return CORRUPT("tree deeper than %d levels", MAX_DEPTH);
            if ((rc = mote__read_page_raw(s, ptr_pgno(ptr), buf)) ||
                (rc = mote__verify_page(s, buf, ptr, "new")))
                return rc;
            if (level >= 0) {
                if ((rc = mote__node_validate(buf, s->P, level, ptr_pgno(ptr))) ||
                    (page && (rc = page(ctx, ptr_pgno(ptr), buf))) ||
                    (rc = walk_new(s, buf, s->P, lo, span, bufs, depth + 1, page, ctx)))
                    return rc;
                break;
            }
            if ((rc = mote__validate_aux(s, buf, PAGE_OVERFLOW)) ||
                (page && (rc = page(ctx, ptr_pgno(ptr), buf))))
                return rc;
            memcpy(ptr, buf + NH, PTR12);
        }
    }
    return MOTE_OK;
}

int mote__walk_state(mote_store *s, const uint8_t *st, uint32_t lo, uint32_t span,
                     uint8_t *bufs,
                     int (*page)(void *ctx, uint32_t pgno, const uint8_t *buf), void *ctx)
{
    int rc = walk_new(s, st + SLOT_ROOT_OFF, root_cap(s), lo, span, bufs, 0, page, ctx);
    uint32_t nb = rd32(st + 40);
    for (uint32_t i = 0; !rc && i < nb && i < SLOT_MAX_BMP; i++) {
        uint8_t ptr[CHILD] = {0};
        memcpy(ptr, st + SLOT_BMP_OFF + i * PTR12, PTR12);
        if (!birth_after(ptr_birth(ptr), lo, span))
            continue;
        if (!(rc = mote__read_page_raw(s, ptr_pgno(ptr), bufs)) &&
            !(rc = mote__verify_page(s, bufs, ptr, "bitmap")) &&
            !(rc = mote__validate_aux(s, bufs, PAGE_BITMAP)) && page)
            rc = page(ctx, ptr_pgno(ptr), bufs);
    }
    return rc;
}

/* Verify every page the state in `slot` reaches that a commit after its
 * floor wrote (pager.h GROUP COMMIT): below a page written before it,
 * every page was too. */
int mote__verify_commit(mote_store *s, const uint8_t *slot, uint64_t txnid)
{
    uint8_t *bufs = mote__malloc((size_t)MAX_DEPTH * s->P);
    if (!bufs)
        return mote__err(MOTE_NOMEM, "out of memory verifying %s", s->path);
    /* its floor: the commit before it, or the one its lag names; unknown:
     * every page */
    uint32_t lag = st_lag(slot), lo = lag == LAG_UNKNOWN ? 0 : (uint32_t)txnid - (lag ? lag : 1);
    uint32_t span = lag == LAG_UNKNOWN ? UINT32_MAX : lag ? lag : 1;
    int rc = mote__walk_state(s, slot, lo, span, bufs, NULL, NULL);
    mote__free(bufs);
    return rc;
}

/* From state `st` (P bytes) follow the chain (pager.h COMMIT CHAIN) to
 * the file's end (a short read, not the size the open read before its
 * flock: mote__store_open): the pages of the records reached, in order, into
 * pg (*n of them, at most CHAIN_MAX); the newest state reached into
 * `last` (P bytes; st itself if none); *hi the highest txnid any page
 * along the way names. `probe`: P bytes of room. */
static int walk_chain(mote_store *s, const uint8_t *st, uint8_t *last,
                      uint8_t *probe, uint32_t *pg, uint32_t *n, uint64_t *hi)
{
    uint32_t P = s->P;
    memcpy(last, st, P);
    *n = 0;
    for (;;) {
        uint32_t p = st_chain_next(last);
        if (p < 2 || *n == CHAIN_MAX)
            break;
        ssize_t r = s->io->pread(s->io->ctx, s->fd, probe, P, (uint64_t)p * P);
        if (r < 0)
            return mote__ioerr((int)r, "read", s->path);
        if ((size_t)r != P)
            break;
        if (rd64(probe) == MOTE_MAGIC && rd64(probe + 24) > *hi && rd64(probe + 24) < UINT64_MAX / 2)
            *hi = rd64(probe + 24);
        if (mote__slot_valid(probe, P, p) != (int)SLOT_KIND_RECORD ||
            st_base(probe) != rd64(last + 24) || st_chain_len(probe) != st_chain_len(last) + 1 ||
            rd64(probe + 24) <= rd64(last + 24))
            break;
        memcpy(last, probe, P);
        pg[(*n)++] = p;
    }
    return MOTE_OK;
}

/* A file of `size` bytes too short for a commit of np pages of P bytes: a
 * crash may leave the file short of the last commit's growth (a chunk at
 * most: pager.c), never by more. */
static int too_short(uint64_t np, uint64_t size, uint32_t P)
{
    uint64_t have = size / P;
    return np > have + have / 4 + (8u << 20) / P + 64;
}

/* The newest commit known durable when the state `st` was written (pager.h
 * GROUP COMMIT): its base, or the one its lag names (0: unknown). */
static uint64_t durable_floor(const uint8_t *st)
{
    uint32_t lag = st_lag(st);
    uint64_t txnid = rd64(st + 24);
    return !lag ? st_base(st) : lag == LAG_UNKNOWN || lag > txnid ? 0 : txnid - lag;
}

int mote__recover(mote_store *s, const uint8_t *slots, size_t have, uint64_t size,
                  uint8_t *out, int *start_slot, int *clean, uint64_t *hi)
{
    uint32_t P = s->P;
    int v[2];
    uint64_t tx[2];
    for (int i = 0; i < 2; i++) {
        const uint8_t *d = slots + (size_t)i * P;
        v[i] = have >= (size_t)(i + 1) * P ? mote__slot_valid(d, P, (uint32_t)i) : 0;
        tx[i] = have >= (size_t)(i + 1) * P && rd64(d) == MOTE_MAGIC ? rd64(d + 24) : 0;
        if (tx[i] > *hi && tx[i] < UINT64_MAX / 2)
            *hi = tx[i];
    }
    /* the starts, best first: a version 2 marker not older than the newest
     * checkpoint, the newest checkpoint, the other one */
    int order[3], n = 0, w = v[0] == 1 && (v[1] != 1 || tx[0] > tx[1]) ? 0 : v[1] == 1 ? 1 : -1;
    for (int i = 0; i < 2; i++)
        if (v[i] == 2 && rd32(slots + (size_t)i * P + 8) != 1 && (w < 0 || tx[i] >= tx[w]))
            order[n++] = i;
    if (n == 2 && tx[1] > tx[0]) { /* two markers (no valid checkpoint): the newer first */
        order[0] = 1;
        order[1] = 0;
    }
    if (w >= 0)
        order[n++] = w;
    if (w >= 0 && v[1 - w] == 1 && tx[1 - w] < tx[w])
        order[n++] = 1 - w;
    if (!n)
        return CORRUPT("%s: no valid commit slot", s->path);
    uint8_t *bufs = mote__malloc((size_t)2 * P);
    if (!bufs)
        return mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
    uint8_t *last = bufs, *probe = bufs + P;
    uint32_t pg[CHAIN_MAX];
    int rc = MOTE_OK;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        const uint8_t *st = slots + (size_t)i * P;
        uint32_t nrec = 0;
        if ((rc = walk_chain(s, st, last, probe, pg, &nrec, hi)))
            break;
        /* a marker vouches for the state it copies (v2), or names it (v1) */
        const uint8_t *o = slots + (size_t)(1 - i) * P;
        int marker = v[i] == 2 || (v[1 - i] == 2 && rd32(o + 8) == 1 && tx[1 - i] == tx[i]);
        int vouched = !nrec && marker;
        /* The newest state reached, verified; if that fails, the one before
         * it: as is when a later state's writer knew it durable (its floor),
         * or a marker; else verified too; and so on back to the start. */
        uint64_t floor = 0;
        uint32_t j = nrec; /* the state: record j (0: the start) */
        for (;;) {
            if ((j == 0 && marker) || rd64(last + 24) <= floor) {
                rc = MOTE_OK;
                break;
            }
            rc = mote__verify_commit(s, last, rd64(last + 24));
            uint64_t np = rd32(last + 32);
            /* (a size read before another process grew the file: again) */
            if (!rc && size != UINT64_MAX && too_short(np, size, P) &&
                !mote__file_size(s, &size) && too_short(np, size, P))
                rc = CORRUPT("%s: the commit names %llu pages, the file has %llu", s->path,
                             (unsigned long long)np, (unsigned long long)(size / P));
            if (rc != MOTE_CORRUPT || j == 0)
                break;
            uint64_t f = durable_floor(last);
            if (f > floor)
                floor = f;
            j--; /* the state before it */
            if (j == 0)
                memcpy(last, st, P);
            else if ((rc = mote__read_page_raw(s, pg[j - 1], last)) ||
                     mote__slot_valid(last, P, pg[j - 1]) != (int)SLOT_KIND_RECORD)
                break; /* (it was valid a moment ago) */
        }
        int alone = !nrec; /* the start, nothing after it */
        /* A commit on the empty store (the first) whose pages lie past the
         * file's end was cut short with its process (kill -9: a write
         * request stops between pages, and the file grows with them): it
         * was never synced, so never acknowledged; the store is the empty
         * one it was built on (its slots are overwritten by the next
         * commit: pager.h FRESH). Pages there but damaged stay MOTE_CORRUPT. */
        uint64_t fsz = 0;
        if (rc == MOTE_CORRUPT && k + 1 == n && alone && st_base(st) == 1 &&
            rd32(st + 32) > 2 && !mote__file_size(s, &fsz) &&
            fsz < ((uint64_t)rd32(st + 32) << s->page_shift)) {
            mote__creation_page(out, P);
            *start_slot = 0;
            *clean = 0;
            rc = MOTE_OK;
            break;
        }
        if (rc == MOTE_CORRUPT && k + 1 == n && alone && v[1 - i] == 1 &&
            tx[1 - i] == tx[i]) {
            char why[256]; /* both slots name it: the store's first commit */
            snprintf(why, sizeof why, "%s", mote_errmsg(s));
            rc = CORRUPT("%s (in the store's first commit: if the machine stopped while "
                         "it was made, it was not acknowledged and the store holds nothing "
                         "else)", why);
        }
        if (rc == MOTE_CORRUPT && k + 1 < n)
            continue; /* the next start */
        if (!rc) {
            memcpy(out, last, P);
            if (rd32(out + 20) == SLOT_KIND_MARKER) /* the start: a v2 marker */
                wr32(out + 20, SLOT_KIND_COMMIT); /* (in memory) */
            /* the slot the next checkpoint must not overwrite: the
             * checkpoint, also when a marker (not synced) was the start */
            *start_slot = v[i] == 2 && w >= 0 ? w : i;
            if (rd32(out + 8) != 1)
                out[62] = (uint8_t)*start_slot; /* what later records name (st_ckpt) */
            *clean = vouched;
            if (v[i] == 2 && w < 0) /* the marker alone: made durable before anything else */
                *clean = 0;
        }
        break;
    }
    mote__free(bufs);
    return rc;
}

int mote__file_size(mote_store *s, uint64_t *size)
{
    mote_fileinfo fi;
    int r = s->io->fstat(s->io->ctx, s->fd, &fi);
    if (r)
        return mote__ioerr(r, "stat", s->path);
    *size = fi.size;
    return MOTE_OK;
}

/* Read both slots and choose the commit to open (see the top comment). */
static int open_existing(mote_store *s, uint64_t size)
{
    size_t cap = size < 2 * 4096 ? (size_t)size : 2 * 4096;
    /* both slots at 4 KB pages, on the stack; on the heap (zeroed) only to
     * try larger pages: a 128 KB buffer at every open cost a tiny store's
     * open ~5 µs (page faults zeroing it, glibc trimming the heap at its
     * free), and an 8 KB one from the heap left holes that made an open
     * store 1.6 KB larger (a thousand stores of 1,000 objects held open) */
    uint8_t small[2 * 4096] = {0};
    size_t bcap = sizeof small;
    uint8_t *buf = small;
    ssize_t r = s->io->pread(s->io->ctx, s->fd, buf, cap, 0);
    int rc = MOTE_OK;
    /* page size: slot A's header names it; if A is damaged, try each size */
    uint32_t P = 0, cands[6], nc = 0, hinted = rd64(buf) == MOTE_MAGIC ? rd32(buf + 12) : 0;
    if (hinted < 4096 || hinted > 65536 || (hinted & (hinted - 1)))
        hinted = 0;
    if (r >= 0 && size < 4096) { /* creation's page, torn by a crash? */
        uint32_t fp = never_committed(buf, (size_t)r, size, hinted);
        /* a slot's header: the first commit, under way or cut short (the
         * file had no page before it: open.c create_file) */
        rc = fp ? start_fresh(s, fp, size)
             : (size_t)r >= 8 && rd64(buf) == MOTE_MAGIC
                 ? CORRUPT("%s: neither root slot is valid (if the store's first commit "
                           "was interrupted, nothing in it was acknowledged)", s->path)
                 : mote__err(MOTE_FORMAT, "%s is not a MoteDB store (%llu bytes)",
                             s->path, (unsigned long long)size);
        goto out;
    }
    if (r < 0 || (size_t)r < 4096) {
        rc = r < 0 ? mote__ioerr((int)r, "read", s->path)
                   : mote__err(MOTE_FORMAT, "%s is too short", s->path);
        goto out;
    }
    if (hinted)
        cands[nc++] = hinted;
    for (uint32_t c = 4096; c <= 65536; c *= 2)
        if (c != hinted)
            cands[nc++] = c;
    int va = 0, vb = 0;
    for (uint32_t i = 0; i < nc && !P; i++) {
        uint32_t try = cands[i];
        size_t want = (size_t)2 * try < size ? (size_t)2 * try : (size_t)size;
        if (want > (size_t)r) {
            if (want > bcap) {
                uint8_t *nb = mote__calloc(1, 2 * (size_t)try);
                if (!nb) {
                    rc = mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
                    goto out;
                }
                memcpy(nb, buf, bcap);
                if (buf != small)
                    mote__free(buf);
                buf = nb;
                bcap = 2 * (size_t)try;
            }
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
    int applying = !memcmp(buf, MOTE_APPLYING, 8); /* (in either slot, at any page size) */
    for (uint32_t c = 4096; !P && !applying && c <= 65536 && (size_t)r >= c + 8; c *= 2)
        applying = !memcmp(buf + c, MOTE_APPLYING, 8);
    if (!P && applying) {
        rc = CORRUPT("%s: a delta was being applied to it (mote_delta_apply) and did not "
                     "finish: make the copy again from a full delta", s->path);
        goto out;
    }
    if (!P) {
        uint32_t fp = never_committed(buf, (size_t)r, size, hinted);
        if (fp)
            rc = start_fresh(s, fp, size);
        else /* page 0 only creation's sectors, its header lost: a torn first commit? */
            rc = rd64(buf) == MOTE_MAGIC || (size >= 8192 && rd64(buf + 4096) == MOTE_MAGIC) ||
                         never_committed(buf, (size_t)r, 0, hinted)
                     ? CORRUPT("%s: neither root slot is valid (if the store's first commit "
                               "was interrupted, nothing in it was acknowledged)", s->path)
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
    s->cur = mote__snap_new(P);
    if (!s->cur) {
        rc = mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
        goto out;
    }
    const uint8_t *A = buf;
    uint64_t ta = rd64(A) == MOTE_MAGIC ? rd64(A + 24) : 0;
    int clean = 0, wi = 0;
    uint64_t hi = 0;
    if ((rc = mote__recover(s, buf, (size_t)r, size, s->cur->data, &wi, &clean, &hi)))
        goto out;
    s->txnid = rd64(s->cur->data + 24);
    s->next_txnid = hi + 1 > s->txnid + 1 ? hi + 1 : s->txnid + 1;
    s->base_slot = wi;
    atomic_store(&s->dur->synced, clean ? s->txnid : 0);
    s->marker_ok = clean;
    s->need_sync = !clean && !(s->flags & MOTE_RDONLY);
    int created = 0; /* page 0 is the creation page (only that has txnid 1 there) */
    if (ta == 1) {
        uint8_t *cp = mote__malloc(P);
        if (!cp) {
            rc = mote__err(MOTE_NOMEM, "out of memory opening %s", s->path);
            goto out;
        }
        mote__creation_page(cp, P);
        created = !memcmp(A, cp, P);
        mote__free(cp);
    }
    if ((created && vb != 1) || s->txnid == 1) { /* nothing durable yet: see pager.h FRESH
                                                  * (1: the empty store, mote__recover) */
        s->fresh = 1;
        atomic_store(&s->dur->synced, 0);
        s->marker_ok = s->need_sync = 0;
    } else if (created && !(s->flags & (MOTE_RDONLY | MOTE_NODIRSYNC))) {
        /* a commit in slot 1 beside the creation page: a store made by the
         * library before creation went unsynced (creation synced, its first
         * commit durable in slot 1 only, so it is not new), or one whose
         * creator made only lazy commits and never fsynced the directory:
         * that is done now (its next commit syncs its base first, as after
         * any unclean close) */
        int r = s->io->fsync_dir(s->io->ctx, s->path);
        if (r) {
            rc = mote__ioerr(r, "sync of the directory", s->path);
            goto out;
        }
    }
out:
    if (buf != small)
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
    if (flags & ~(MOTE_RDONLY | MOTE_CREATE | MOTE_NODIRSYNC | MOTE_NOSYNC | MOTE_EXCLUSIVE |
                  MOTE_REPACK))
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
    s->slot = -1;
    s->cache_limit = opts && opts->cache_pages ? opts->cache_pages : 16384;
    s->lru.lnext = s->lru.lprev = &s->lru;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->smu, NULL);
    s->dur = &s->own_dur; /* (the segment's, once the store is shared: share.c) */
    size_t pl = strlen(path);
    s->path = mote__malloc(pl + 1);
    if (!s->path) {
        store_free(s);
        return mote__err(MOTE_NOMEM, "out of memory opening %s", path);
    }
    memcpy(s->path, path, pl + 1);

    int ro = (flags & MOTE_RDONLY) != 0, rc = MOTE_OK, registered = 0;
    /* One open, with O_CREAT when creating is allowed: a file made here is
     * empty, which is how it is told from a store below (a zero-byte file
     * is initialized under the lock whoever made it), so trying without
     * O_CREAT first (as before) only cost a creation a path walk (~2 us of
     * ~400). (Linux before 6.12 locks the directory for an O_CREAT open of
     * an existing file; later ones look the name up first.) */
    int create = (flags & MOTE_CREATE) && !ro;
    int fd = s->io->open(s->io->ctx, path, ro ? O_RDONLY : create ? O_RDWR | O_CREAT : O_RDWR,
                         0644);
    if (fd == -ENOENT && create) { /* O_CREAT makes the file, not its directory */
        rc = missing_dir(path);
        goto fail;
    }
    if ((fd == -EACCES || fd == -EROFS || fd == -EPERM) && !ro) {
        /* no write permission, a read-only mount: open it for reading, say so on a write */
        int rfd = s->io->open(s->io->ctx, path, O_RDONLY, 0);
        if (rfd >= 0) {
            s->ro_errno = fd == -EROFS ? EROFS : EACCES;
            s->flags |= MOTE_RDONLY;
            flags |= MOTE_RDONLY;
            ro = 1;
            fd = rfd;
        }
    }
    if (fd < 0) {
        rc = fd == -ENOENT
                 ? mote__oserr(MOTE_NOTFOUND, ENOENT, path, "store %s does not exist", path)
                 : mote__ioerr(fd, "open", path);
        goto fail;
    }
    s->fd = fd;
    mote_fileinfo fi;
    int r = s->io->fstat(s->io->ctx, fd, &fi);
    if (r) {
        rc = mote__ioerr(r, "stat", path);
        goto fail;
    }
    uint64_t size = fi.size;
    s->dev = fi.dev;
    s->ino = fi.ino;
    s->uid = fi.uid;
    s->mode = fi.mode;
    if ((rc = registry_add(s)))
        goto fail;
    registered = 1;
    /* The size again once the flock is held, if another process may have
     * written since the fstat: it waited for the flock (another one opened
     * or closed the store meanwhile), takes the store over from a solo
     * process (share.c SOLO: whose commits before its bell may have grown
     * the file), or found a new store (another's first commit may have
     * made the slot it reads). Otherwise a process that wrote in between
     * and died is the one case left: the chain is followed to the file's
     * end, not to this size, and file_bytes is never below the pages of the
     * commit read (below), so a size too small loses nothing. */
    if ((rc = mote__share_open(s)) ||
        ((s->to_e || s->waited || size <= 4096) && (rc = mote__file_size(s, &size))))
        goto fail;
    /* A zero-byte file is a store of 4096-byte pages that was never
     * committed: creation writes nothing until the first commit (create_file;
     * a crash before it leaves such a file, and tempfile.NamedTemporaryFile
     * hands them out). Opened by the only process that has it (writable),
     * it is created here, with the page size asked for; by any other opener
     * (a process beside its creator, or one that may not write) it is an
     * empty store of that page size, and writes nothing: the creator's first
     * commit may be under way. */
    if (s->seg && !s->init)
        rc = mote__share_join(s, size); /* read and recovered by the first opener */
    else if (size == 0 && !ro && s->alone)
        rc = create_file(s, opts ? opts->page_size : 0);
    else if (size == 0)
        rc = start_fresh(s, 4096, 0);
    else if ((rc = open_existing(s, size)) == MOTE_CORRUPT && s->to_e) {
        int again = mote__share_taken_again(s, &size); /* a torn first commit? */
        if (again > 0) {
            mote__snap_unref(s->cur);
            s->cur = NULL;
            s->fresh = 0;
            rc = open_existing(s, size);
        } else if (again < 0) {
            rc = again;
        }
    }
    if (!rc)
        rc = mote__share_ready(s);
    if (rc)
        goto fail;
    if (!s->file_bytes)
        s->file_bytes = size;
    uint64_t used = (uint64_t)rd32(s->cur->data + 32) << s->page_shift;
    if (s->file_bytes < used) /* (its growth writes zeros from there) */
        s->file_bytes = used;
    *out = s;
    return MOTE_OK;
fail:
    mote__share_close(s);
    if (registered)
        registry_remove(s);
    if (s->fd >= 0)
        s->io->close(s->io->ctx, s->fd);
    store_free(s);
    return rc;
}

int mote__store_busy(mote_store *s)
{
    if (store_forked(s))
        return mote__forked_err(s);
    pthread_mutex_lock(&s->mu);
    int busy = s->ntxn > 0, tickets = s->nticket > 0;
    pthread_mutex_unlock(&s->mu);
    return busy      ? mote__err(MOTE_BUSY, "store %s: close with transactions still open; "
                                 "end them first", s->path)
           : tickets ? mote__err(MOTE_BUSY, "store %s: close with commits not waited for "
                                 "(mote_commit_wait each ticket first)", s->path)
                     : MOTE_OK;
}

void mote__store_close(mote_store *s)
{
    mote__solo_close(s); /* another process took the store over: join it first */
    /* (asked only when a marker may be written: the flock and the lock test
     * are two system calls of a tiny store's create-write-close) */
    int alone = !(s->flags & MOTE_RDONLY) && !s->poisoned && !s->fresh &&
                (s->seg || !s->marker_ok) && mote__store_alone(s);
    if (s->seg && alone) { /* the marker names the latest commit of any process */
        pthread_mutex_lock(&s->mu);
        if (mote__share_refresh(s))
            alone = 0;
        pthread_mutex_unlock(&s->mu);
    }
    /* (a sync that failed in another process leaves no marker: the next
     * open verifies what it finds) */
    if (alone && store_synced(s) >= s->txnid && !s->marker_ok &&
        !atomic_load(&s->dur->failed)) {
        uint8_t *m = mote__malloc(s->P);
        if (m) { /* best effort: without it the next open verifies */
            mote__marker(m, s->cur->data, s->P, (uint32_t)(1 - s->base_slot), s->base_slot);
            s->io->pwrite(s->io->ctx, s->fd, m, s->P,
                          (uint64_t)(1 - s->base_slot) << s->page_shift);
            mote__free(m);
        }
    }
    mote__share_close(s);
    registry_remove(s);
    s->io->close(s->io->ctx, s->fd);
    store_free(s);
}
