/*
 * pager.h — the file, its root slots, the page cache, allocation,
 * transactions, commit and recovery (pager.c), and the structures of a store
 * and a transaction.
 *
 * FILE FORMAT, version 2 (all integers little-endian; P = page size)
 *
 *   page 0: root slot A    page 1: root slot B    pages 2..npages-1: data
 *
 * A commit's state is one page (the root of its tree, its allocation
 * bitmap, its chain): the same layout in a root slot (a checkpoint), in a
 * data page (a commit record, see COMMIT CHAIN) and in the clean-close
 * marker.
 *     0  u64  magic "MOTEDB\0\1"
 *     8  u32  format version (2; version 1 is read, see below)
 *    12  u32  page size P
 *    16  u32  where: the page this state is in (0 or 1 for a slot)
 *    20  u32  kind: 1 = checkpoint, 2 = clean-close marker, 3 = commit record
 *    24  u64  txnid (the commit whose state this is)
 *    32  u32  npages (logical file size in pages)
 *    36  u32  next tree id
 *    40  u32  number of bitmap pages in use
 *    44  u32  chain_next: the page reserved for the next commit record (0: none)
 *    48  u64  base: the txnid of the state this commit was built on
 *    56  u32  chain_head: the first record page after the checkpoint
 *    60  u16  chain_len: commit records since the checkpoint (0 in one)
 *    62  u8   ckpt: the slot holding that checkpoint
 *    63  u8   lag: 0 if the base was durable when this state was written;
 *             else this txnid minus the newest commit then known durable
 *             (255: unknown), see GROUP COMMIT
 *    64  [SLOT_INLINE_BM] allocation bitmap of pages 0..SLOT_INLINE_BITS-1
 *   192  [SLOT_MAX_BMP x 12] bitmap page pointers {pgno, birth32, crc32c}
 *   960  the root node of the B+tree (node.h), up to P-8
 *   P-8  u64  hash64 of bytes [0, P-8)
 * Version 1 (read as is, upgraded by the first commit, which is a
 * checkpoint): bytes 44..63 are zero (no chain; a slot is its own
 * checkpoint), and its marker has the header only (kind 2, naming the
 * commit it vouches for).
 * Data pages are nodes, overflow pages, bitmap pages (node.h) and commit
 * records. The pages of the chain (records since the checkpoint and the
 * reserved chain_next) are marked in use in the bitmap; nothing in the tree
 * points to them.
 *
 * COMMIT CHAIN: a commit of a store whose state names a reserved page R
 * writes its state as a commit record at R and its pages right after it
 * (R+1, ... as far as they are free; the rest onto runs elsewhere): one
 * write request, then one fdatasync. It reserves the next record's page
 * where a run of its page count + 1 (at most CHAIN_RUN + 1) is free inside
 * the file: after its own pages, else the first such run, else while a
 * quarter of the file is free the longest run of 2 or more, else the end of
 * the file (a record past the end brings zeros after it, in its request).
 * Every CHAIN_MAX records (npages / 8 in a store of fewer than 256 pages,
 * at least CHAIN_MIN), and when nothing is reserved, a commit is a
 * checkpoint: its state goes into the slot not holding the last checkpoint
 * (pages, then slot: two requests, one fdatasync), and it frees the records
 * (pending, like any page: a snapshot's mote_check reads them) and keeps
 * the reserved page for the next record if the run after it is free (else
 * frees it; nobody reads it). Tiny stores (the whole tree in the root) and
 * bulk commits (more than 64 pages) reserve nothing: their checkpoints stay
 * the only commits, the file its size. A record whose write fails is wiped
 * (zeros at R; the handle is poisoned if that fails too): the next commit
 * writes its own there.
 * Recovery: the newest valid checkpoint (or a v2 marker newer than it),
 * then along chain_next while the page there is a valid record whose base
 * is the state reached, whose chain_len is one more and whose txnid is
 * higher. The last state's pages are verified (unless it is the marker and
 * nothing follows): every page it reaches that a commit after its durable
 * floor wrote (GROUP COMMIT). If they fail, the state before it: taken as
 * is when it is not after that floor, else verified the same way, and so
 * on back. With no state left in the chain, the other checkpoint and its
 * chain.
 * Clean close: a copy of the latest state, kind 2, into the slot not
 * holding the checkpoint (unsynced, only once the state is synced; or with
 * a new store's first commit when its state is all in its slot: FRESH).
 *
 * GROUP COMMIT: a commit is written in one step, under the writer lock, and
 * made durable in another, so that the next writer writes during its sync
 * and one fdatasync can make several commits durable. Phase 1 builds the
 * commit on the newest *written* state (s->wcur, or the segment's
 * `written`: maybe not durable yet), writes it and publishes it as
 * written, then releases the writer lock. Phase 2 (s->dur: where commits
 * stand on disk): if a sync that began after the commit was written has
 * ended (synced >= txnid), done; if another process's sync that covers it
 * is under way (syncing >= txnid), it waits for that one; else it syncs
 * the file for every commit written so far and publishes the newest of them
 * as the latest: readers see only durable commits (s->cur, the segment's
 * `latest`). One sync at a time per process (s->smu: the kernel reports a
 * failed writeback once per open file, so every thread of the process must
 * see it), but processes sync at once, each through its own open file:
 * this disk runs concurrent flushes side by side. A checkpoint goes this
 * way too when the checkpoint it leaves in the other slot is durable (the
 * base's txnid minus the records since that one is synced: pager.c
 * ckpt_durable); else it is synced under the writer lock, so a checkpoint
 * never overwrites a slot while the other slot's is not durable. A new
 * store's first commit is synced under the lock as well.
 * What recovery must know: a commit written on a base that was not yet
 * durable says so (byte 63, lag = txnid - the newest commit known durable
 * then, its *durable floor*; 0: its base). A crash may keep any subset of
 * the writes after the last sync, so every page that a commit after the
 * floor wrote and that the state reaches is verified (a page's birth in
 * (floor, txnid]: its subtree was written before the floor otherwise, as a
 * parent is rewritten with any child); states up to the floor need none.
 * Pages freed by commit C are reused only once C is durable (and no
 * snapshot is older), so no commit after the floor overwrites a page that a
 * state at or after the floor reaches. A sync that fails poisons every
 * handle waiting on it and refuses every later write (the segment's
 * `failed`, or the store's): nothing is built on commits whose durability
 * is unknown; reads go on from the latest durable commit.
 *
 * FRESH: creation, and the store's first durable commit. The state of a new
 * store is the creation page (a commit slot of txnid 1: an empty store,
 * always the same bytes for a page size). Creation syncs nothing, and
 * writes nothing with 4096-byte pages: an empty file is a new store of
 * them, so the file has no page until the first commit; with larger pages
 * it writes the creation page as page 0 (another opener learns the page
 * size there). While no commit is durable (s->fresh), slot 0 keeps the
 * creation page: a lazy commit (MOTE_TXN_LAZY: not synced) writes it with
 * slot 1 (one 2-page request), and the first other commit writes its slot
 * into both slots, in the same write request as its pages when they start
 * at page 2, then one fdatasync (none with MOTE_NOSYNC) and one fsync of
 * the directory. So creation and a first
 * commit cost one sync of each. When that commit's state is all in its
 * slot (the file is the two slots: a tiny store), slot 0 gets it as the
 * clean-close marker instead of a second checkpoint: a marker vouches that
 * the pages its state reaches are on disk, and this one reaches none, so
 * the close has nothing to write (the write of a 4 KB page after the sync,
 * and the two system calls that ask whether the process is alone: 6-12 us
 * of a ~0.5 ms create-write-close on our test VM). A crash before the sync
 * that keeps both slots opens clean: nothing to verify, and the next
 * commit's sync covers the file's every page.
 * A store is fresh at open when page 0 holds the creation page byte for
 * byte and slot 1 no valid commit. With one there it is not (a store made
 * before creation went unsynced, whose first commit is durable in slot 1
 * only, or one whose creator made only lazy commits): its next commit goes
 * to slot 0, and the open fsyncs the directory.
 * Telling "never committed" from "damaged", when neither slot is valid:
 *  - never committed (opens as an empty store): every 512-byte sector of
 *    page 0 the file holds is creation's or zeros, and either the file is
 *    no longer than 4096 bytes (the smallest page) or page 0's first
 *    sector (the header) is creation's. A crash before the first commit
 *    leaves that, or no file, or an empty one.
 *  - anything else is MOTE_CORRUPT. A store that ever made a commit durable
 *    wrote that commit into slot 0 as well, in full, so one damaged slot
 *    leaves the other, and both damaged never reads as creation's bytes
 *    (zeros do not forge a header, and a store that made a commit durable
 *    is longer than 4096 bytes). A crash during the first commit itself
 *    (not acknowledged) can leave both slots torn: MOTE_CORRUPT, the file
 *    held nothing. A process killed in it (kill -9: its write request
 *    stops between two pages, so the file ends before the commit's pages)
 *    leaves slots that name pages past the file's end: the empty store it
 *    was built on opens, fresh (mote__recover; its pages there but damaged
 *    stay MOTE_CORRUPT).
 *
 * INVARIANTS
 *  - Pages reachable from the durable base commit D (its tree, bitmap
 *    pages and chain) are never written by the next commit W, but for the
 *    record page D reserved; a checkpoint goes into the slot not holding
 *    the last checkpoint; one fdatasync ends a commit.
 *  - Every page read from disk is checked against the pointer that led to
 *    it (crc32c, pgno, birth) and its structure validated before use.
 *  - A page freed by commit C is reused only when C is durable, the latest
 *    commit (what a reader that begins takes) is C or newer, and every
 *    live snapshot in the process is >= C (pending list); pages allocated
 *    and freed by the same transaction are reusable at once.
 *  - Readers see durable commits only (MOTE_NOSYNC: written ones); a
 *    checkpoint is written into a slot only when the checkpoint in the
 *    other slot is durable.
 *
 * The store and transaction structures also carry, as opaque pointers, what
 * the layers above keep per transaction (cursors, deferred puts: kv.h) and
 * per store (the object layer's state: object.h).
 */
#ifndef MOTE_PAGER_H
#define MOTE_PAGER_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include "io.h"
#include "node.h"

#define MOTE_MAGIC 0x0100424445544F4Dull /* "MOTEDB\0\1" little-endian */
/* The first bytes of both root slots of a copy that a delta is being applied
 * to (delta.c): open refuses it, naming why. */
#define MOTE_APPLYING "MOTEAPLY"
#define MOTE_FORMAT_VERSION 2u
#define SLOT_KIND_COMMIT 1u /* a checkpoint */
#define SLOT_KIND_MARKER 2u
#define SLOT_KIND_RECORD 3u
#define CHAIN_MAX 32u /* commit records between checkpoints ... */
#define CHAIN_MIN 4u  /* ... down to this many in a store of 32 pages or fewer */
#define CHAIN_RUN 8u  /* free pages wanted after a reserved record page, at most */
#define SLOT_INLINE_OFF 64u
#define SLOT_INLINE_BM 128u
#define SLOT_INLINE_BITS (SLOT_INLINE_BM * 8u)
#define SLOT_BMP_OFF (SLOT_INLINE_OFF + SLOT_INLINE_BM)
#define SLOT_MAX_BMP 64u
#define SLOT_ROOT_OFF 960u /* SLOT_BMP_OFF + SLOT_MAX_BMP * 12 */

typedef struct mpage {
    uint32_t pgno;
    uint32_t refs;         /* pins (cache pages only) */
    uint64_t birth;        /* txnid that wrote this page */
    struct mpage *hnext;   /* hash chain (cache, or a txn's dirty map) */
    struct mpage *lprev, *lnext; /* LRU list of unpinned cache pages */
    int dirty;             /* owned by the write txn, not in the cache */
    int cached;            /* linked into the cache hash */
    uint8_t *data;         /* P bytes */
} mpage;

/* A pinned copy of a root slot: the root of one snapshot. */
typedef struct snap {
    uint32_t refs;
    uint8_t *data; /* P bytes */
} snap;

typedef struct reader {
    uint64_t txnid;
    struct reader *next;
} reader;

/* Where commits stand on disk (GROUP COMMIT): in the shared segment when
 * processes share the store, else in the handle (mote_store.own_dur). */
typedef struct durability {
    _Atomic uint64_t synced;   /* the newest commit known durable (0: none) */
    _Atomic uint64_t syncing;  /* the newest commit a sync under way covers */
    _Atomic uint32_t gen;      /* bumped when a sync ends (a futex word) */
    _Atomic uint32_t waiters;  /* processes waiting for a sync of another */
    _Atomic uint32_t failed;   /* a sync failed: nothing more is written */
    uint32_t pad;
} durability;

/* A process alone with a store and without a segment (share.c SOLO): its
 * entry in the process's solo page, which another process that opens the
 * store reads and rings. A cache line each. */
typedef struct solo_entry {
    _Atomic uint64_t dev, ino; /* the store's (0: a free entry) */
    _Atomic uint64_t oldest;   /* the oldest snapshot this process reads (UINT64_MAX: none) */
    _Atomic uint32_t bell;     /* bumped by a process that opens the store */
    _Atomic uint32_t writing;  /* write transactions begun alone, not yet durable */
    _Atomic uint64_t synced;   /* its newest commit known durable */
    uint8_t pad[24];
} solo_entry;

typedef struct pending {
    uint32_t pgno;
    uint64_t tag; /* freed by this commit */
} pending;

struct mote_store {
    const mote_io *io;
    int fd;
    char *path;
    unsigned flags;      /* MOTE_* open flags */
    int ro_errno;        /* opened read-only because writing was refused (EACCES, EROFS) */
    uint32_t P;          /* page size */
    uint32_t page_shift;
    uint64_t dev, ino;
    unsigned uid, mode;  /* the file's owner and permission bits */
    uint64_t file_bytes; /* physical size */

    pthread_mutex_t mu;  /* cache, readers, cur, poisoned */
    pthread_mutex_t wmu; /* held by the write transaction */
    _Atomic(const void *) writer; /* the writer thread's token, NULL if none */

    snap *cur;           /* latest commit's state: what readers see (durable) */
    uint64_t txnid;      /* latest commit */
    snap *wcur;          /* the newest commit written, while it is not durable yet
                            (GROUP COMMIT: the next write's base), else NULL */
    uint64_t wtxnid;     /* its txnid */
    durability *dur;     /* s->own_dur, or the segment's (GROUP COMMIT) */
    durability own_dur;
    pthread_mutex_t smu; /* held by this handle's sync: one at a time in a process */
    uint64_t next_txnid;
    int base_slot;       /* the slot holding the checkpoint of cur (st_ckpt) */
    int poisoned;
    int need_sync;       /* unclean open: sync once before the first commit */
    int fresh;           /* no commit is durable yet: slot 0 holds creation's page (FRESH) */
    int marker_ok;       /* the other slot already holds a marker for txnid */
    int has_ident;       /* the store's identity was seen (kv.c) */
    int ntxn;            /* live transactions (for close) */
    int nticket;         /* commits of mote_commit_nowait not waited for (for close) */
    uint64_t txn_serial; /* last write transaction's serial */

    /* allocation state of the latest commit (writer side, loaded lazily) */
    uint8_t *bm;         /* bit = page in use by the latest commit */
    uint8_t *pend;       /* bit = freed but maybe visible to a snapshot */
    uint32_t bm_cap, pend_cap; /* capacities of bm and pend in bytes */
    uint32_t hint;       /* no free page below this one (writer side) */
    /* the record pages of the chain this process wrote last, in order, and
     * the txnid of its last record: a checkpoint on that record frees them
     * without reading them back (mote__free_chain) */
    uint32_t chain_pg[CHAIN_MAX];
    uint32_t chain_n;
    uint64_t chain_txnid;
    pending *pendv;
    size_t npend, cap_pend;

    /* page cache */
    mpage **hash;
    uint32_t hash_mask;
    uint32_t ncached, cache_limit;
    mpage lru;           /* sentinel: lnext = most recent, lprev = oldest */

    reader *readers;
    struct mote_store *reg_next; /* process-wide registry of open files */

    /* many processes (share.c) */
    struct segment *seg; /* the shared segment; NULL: the store is open exclusively */
    uint64_t seg_dev, seg_ino; /* the segment's file */
    _Atomic(uint8_t *) seg_area; /* its copies of written pages, mapped once another
                            process has the store open (share.c); NULL: not yet */
    _Atomic int area_failed; /* mapping them failed: no copies in this process */
    _Atomic uint64_t *sh_latest, *sh_snap; /* in seg: the latest commit, this
                            process's published snapshot (the read path's fast way) */
    _Atomic(solo_entry *) solo; /* alone without a segment (share.c SOLO); NULL once
                            it joined one, or never alone so */
    uint32_t bell_seen;  /* solo: the bell's value this process answered */
    uint64_t solo_off;   /* solo: the byte of the store file it locks */
    solo_entry *to_e;    /* opening: the solo process's entry this one took the
                            store over from (its page mapped), else NULL */
    uint64_t to_oldest;  /* the oldest snapshot it read there */
    uint64_t to_synced;  /* and its newest durable commit (0: unknown) */
    int waited;          /* opening: the flock was not had at once */
    int take_fd1;        /* 1 + the descriptor of the segment it is making after a
                            takeover (its first byte write-locked), 0: none */
    int slot;            /* this process's slot in seg */
    int alone;           /* the flock is held exclusively (no other process) */
    int probed;          /* closing: mote__store_alone asked the flock once */
    int open_lock;       /* it holds the open byte's lock (share.c: OPEN_LOCK) */
    int init;            /* this process read the file itself (first opener, or
                            the segment's maker, or without a segment) */
    int outsider;        /* it may only read the store file: no segment of its
                            own making; without one, its snapshots are not
                            protected and a read may give MOTE_BUSY */
    int busy_ms;         /* writers wait this long for another process's */
    uint64_t bm_txnid;   /* s->bm is this commit's bitmap (shared mode: another
                            process's commit makes it stale) */
    uint64_t own_since;  /* every commit from this one on was this process's (0:
                            none), so its pending list knows their freed pages */
    struct seen_alive *seen; /* slots of other processes found alive, and when
                            (share.c; allocated at the first check) */
    long forked_from;    /* in a forked child: the pid that opened it (open.c) */
    void *objects;       /* the object layer's state (object.h), in this block */
};

struct mote_txn {
    mote_store *s;
    int write;
    uint64_t txnid;      /* write: the id being built; read: snapshot id */
    snap *root;          /* read: pinned snapshot; write: private slot copy */
    snap *base;          /* write: the state it is built on (pinned) */
    uint64_t base_txnid;
    reader rd;
    uint64_t gen;        /* bumped by every change (cursor revalidation) */
    int changed;
    int lazy;            /* MOTE_TXN_LAZY */
    int cached_only;     /* MOTE_TXN_CACHED: no page read from the file */
    int no_chain;        /* commit as a checkpoint that reserves nothing and keeps its
                            page numbers (shrink, repack, compact) */
    int chain_freed;     /* the base's chain is freed (mote__free_chain) ... */
    uint32_t chain_next; /* ... but for its reserved page (0: none, or freed) */
    mpage *held;         /* pin held for the last returned value */
    uint8_t *vbuf;       /* assembled overflow values */
    size_t vbuf_cap;
    mote_cursor *cursors; /* open cursors, detached when the txn ends */
    mote_cursor *spare;  /* the last cursor closed, reused by the next open */
    uint64_t serial;     /* unique per write transaction of the store */
    int view;            /* a read transaction on a writer's base (mote__txn_base_view) */
    int solo_w;          /* a write begun alone (counted in the solo entry's
                            `writing` until its commit is durable or it ends) */
    int solo_keep;       /* its commit goes on: the count ends with it, not
                            with the transaction (pager.c) */
    int64_t now;         /* the object layer's clock for expiry, 0 until read
                            (mote__txn_now) */

    /* writer state */
    uint8_t *bm;         /* working bitmap (copy of s->bm) */
    uint32_t bm_cap;
    uint32_t hint;       /* lowest page that may be free */
    uint32_t npages;
    uint32_t next_tree;
    mpage **dhash;       /* dirty pages by pgno */
    uint32_t dmask, ndirty;
    uint32_t copied;     /* pages copied on write (tests count them) */
    uint32_t *freed;     /* pages of the base freed by this txn */
    size_t nfreed, cap_freed;
    uint8_t *scratch;    /* P bytes for node rebuilds */
    int failed;          /* a write failed midway: only abort is possible */
    const struct mote_kvop *split_next; /* bt_apply: the op after the one put */
    struct mote_pending *pend; /* deferred puts, one entry per tree (kv.c) */
    unsigned npend, pend_cap;
};

/* Bit p of an allocation bitmap (1: the page is in use). */
static inline int bit_get(const uint8_t *b, uint32_t p) { return (b[p >> 3] >> (p & 7)) & 1; }
static inline void bit_set(uint8_t *b, uint32_t p) { b[p >> 3] |= (uint8_t)(1u << (p & 7)); }
static inline void bit_clr(uint8_t *b, uint32_t p) { b[p >> 3] &= (uint8_t)~(1u << (p & 7)); }


/* A write transaction's dirty copy of page pgno, or NULL. */
static inline mpage *dirty_find(const mote_txn *t, uint32_t pgno)
{
    if (!t->dhash)
        return NULL;
    for (mpage *pg = t->dhash[pgno & t->dmask]; pg; pg = pg->hnext)
        if (pg->pgno == pgno)
            return pg;
    return NULL;
}

/* A state page's chain fields (FILE FORMAT; a version 1 slot has none,
 * whatever its bytes 44..63 hold, and is its own checkpoint). */
static inline int st_v1(const uint8_t *st) { return rd32(st + 8) == 1; }
static inline uint32_t st_where(const uint8_t *st) { return rd32(st + 16); }
static inline uint32_t st_chain_next(const uint8_t *st) { return st_v1(st) ? 0 : rd32(st + 44); }
static inline uint64_t st_base(const uint8_t *st) { return st_v1(st) ? 0 : rd64(st + 48); }
static inline uint32_t st_chain_head(const uint8_t *st) { return st_v1(st) ? 0 : rd32(st + 56); }
static inline uint32_t st_chain_len(const uint8_t *st)
{
    return st_v1(st) ? 0 : (uint32_t)st[60] | (uint32_t)st[61] << 8;
}
static inline int st_ckpt(const uint8_t *st) { return st_v1(st) ? (int)rd32(st + 16) : st[62]; }
#define LAG_UNKNOWN 255u
static inline uint32_t st_lag(const uint8_t *st) { return st_v1(st) ? 0 : st[63]; }
/* Write the chain fields (the state's other fields stay; lag 0). */
static inline void st_set_chain(uint8_t *st, uint32_t next, uint64_t base, uint32_t head,
                                uint32_t len, int ckpt)
{
    wr32(st + 44, next);
    wr64(st + 48, base);
    wr32(st + 56, head);
    st[60] = (uint8_t)len;
    st[61] = (uint8_t)(len >> 8);
    st[62] = (uint8_t)ckpt;
    st[63] = 0;
}

/* Is page p in use by the write's base, other than the page it reserved
 * for the next commit record? The pages a write transaction allocates and
 * writes never are (INVARIANTS above): asserted in debug and sanitizer
 * builds (release builds define NDEBUG). */
static inline int base_uses(const mote_txn *t, uint32_t p)
{
    const mote_store *s = t->s;
    return s->bm && p < rd32(t->base->data + 32) && bit_get(s->bm, p) &&
           p != st_chain_next(t->base->data);
}

/* The newest commit known durable (GROUP COMMIT; MOTE_NOSYNC's commits count
 * as durable, a lazy one on a new store does not). */
static inline uint64_t store_synced(const mote_store *s) { return atomic_load(&s->dur->synced); }

/* A handle inherited across fork() is dead in the child: open.c's fork
 * handler closes its file and marks it; every call on it fails with
 * MOTE_FORKED before it takes a lock or touches the file (another thread of
 * the parent may have held them at the fork), and releases nothing. */
static inline int store_forked(const mote_store *s) { return s->forked_from != 0; }
int mote__forked_err(const mote_store *s);

/* ---- within the pager layer (pager.c, cache.c, alloc.c, open.c) ---------- */

/* pager.c: root slots and snapshots; the bitmap's sizes. */
void mote__slot_seal(uint8_t *slot, uint32_t P);
void mote__slot_init(uint8_t *slot, uint32_t P, int index, uint32_t kind, uint64_t txnid);
snap *mote__snap_new(uint32_t P);
void mote__snap_unref(snap *sn);
uint32_t mote__max_pages(uint32_t P);
/* Bytes of bitmap that cover npages, rounded up to whole bitmap pages. */
uint32_t mote__bm_cover_bytes(uint32_t P, uint32_t npages);
/* Grow a bitmap (zero-filled) to at least `need` bytes. */
int mote__bm_grow(uint8_t **b, uint32_t *cap, uint32_t need);
/* cache.c: a page buffer; the cache's insert (replacing a page of the same
 * number) and trim to its limit (both under s->mu); checks of an overflow or
 * bitmap page read from the file. */
mpage *mote__mpage_alloc(uint32_t P);
void mote__mpage_free(mpage *pg, uint32_t P); /* (a pool keeps some for reuse) */
/* Double a hash table of pages chained by hnext (64 slots at first), moving
 * its pages; MOTE_NOMEM (table unchanged) if it cannot. */
int mote__page_rehash(mpage ***hash, uint32_t *mask);
int mote__cache_insert(mote_store *s, mpage *pg);
void mote__cache_evict(mote_store *s);
int mote__validate_aux(const mote_store *s, const uint8_t *buf, int type);
/* alloc.c: renumber a small commit's tree pages onto few runs of free pages
 * (before finalize); returns the lowest page the bitmap's pages may take. */
uint32_t mote__place_pages(mote_txn *t);
/* A commit record goes at page R: put the commit's tree pages right after
 * it (R+1, ...) as far as the pages there are free, the rest onto few runs
 * elsewhere (mote__place_pages). 1 if placed (*low: the lowest page this
 * may have freed, if lower), 0 if the commit's pages cannot move (more
 * than 64, overflow pages: nothing changed). */
int mote__place_chain(mote_txn *t, uint32_t R, uint32_t *low);
/* Reserve the next record's page (COMMIT CHAIN) where `want` free pages
 * start (the record and the pages the next commit may have) inside the
 * file: `keep` (a page already reserved, or 0) if they follow it, else
 * after the last page allocated, else the first such run, else while a
 * quarter of the file is free the longest run of 2 or more, else the end of
 * the file. Marked in use; 0 if the store is full. */
uint32_t mote__reserve_record(mote_txn *t, uint32_t want, uint32_t keep);

static inline uint8_t *txn_root(const mote_txn *t) { return t->root->data + SLOT_ROOT_OFF; }
static inline uint32_t root_cap(const mote_store *s) { return s->P - 8 - SLOT_ROOT_OFF; }

/* Page by child pointer: the txn's dirty copy, or a pinned, verified cache
 * page. `level` is the level the page must have (-1: overflow page). */
int mote__page_get(mote_txn *t, const uint8_t *ptr, int level, mpage **out);
/* Read ahead for a scan: of the pages ptrs[0..n) point to (children of one
 * branch, at `level`, in order), the run of consecutive page numbers from
 * ptrs[0] that is in no cache is read with one request, each page checked
 * as mote__page_get checks it, and cached unpinned. Best effort: nothing
 * is reported; a page that fails is left for mote__page_get. When ptrs[0]'s
 * page is cached, it is returned pinned instead, as mote__page_get would
 * (one lock of the cache per leaf a scan enters, not two), else NULL. */
mpage *mote__page_readahead(mote_txn *t, const uint8_t *const *ptrs, unsigned n, int level);
/* A scan going backwards: the page ptr points to, if cached, into the CPU's
 * caches (forwards, mote__page_readahead does it). */
void mote__page_prefetch(mote_txn *t, const uint8_t *ptr);
void mote__page_put(mote_store *s, mpage *pg); /* unpin (no-op if dirty) */
/* Make the child behind `ptr` (inside a writable node) writable: returns the
 * dirty page, copying it to a new page number if needed and updating ptr. */
int mote__page_write(mote_txn *t, uint8_t *ptr, int level, mpage **out);
/* A new zeroed dirty page. */
int mote__page_new(mote_txn *t, mpage **out);
/* Free a page of the tree (dirty or committed). */
int mote__page_free(mote_txn *t, uint32_t pgno, uint64_t birth32);

/* Open the store file (mote_open's work below the object layer), with
 * `extra` zeroed bytes after the store, in the same block, for the layer
 * above: s->objects points at them. */
int mote__store_open(const char *path, const mote_options *opts, size_t extra,
                     mote_store **out);
/* MOTE_BUSY (with the message) while transactions are open. */
int mote__store_busy(mote_store *s);
/* Write the clean-close marker (without a sync), close and free. */
void mote__store_close(mote_store *s);
/* write: 0 a read transaction, 1 a write transaction, 2 a lazy one (MOTE_TXN_LAZY) */
int mote__txn_begin(mote_store *s, int write, mote_txn **out);
int mote__txn_commit(mote_txn *t);
/* The base's commit chain freed in this write transaction, which must then
 * commit as a checkpoint (t->no_chain; a checkpoint's commit does it
 * itself): its records like any page (pending while a snapshot may be
 * older than this commit: mote_check reads them); its reserved page, which
 * nobody reads, kept in t->chain_next for the checkpoint to reserve again
 * (or freed at once: with t->no_chain, here). */
int mote__free_chain(mote_txn *t);
void mote__txn_abort(mote_txn *t);
void mote__txn_release_held(mote_txn *t);
/* A read transaction on write transaction w's base (the state w is built
 * on, written if not yet durable), to read that state while w runs (its
 * pages stay: nothing w does reuses them). End it with mote__txn_abort
 * before w ends. */
int mote__txn_base_view(mote_txn *w, mote_txn **out);

/* share.c: many processes on one store (see its top). */
/* At open, the file open and identified: the flock (shared or exclusive),
 * the shared segment and this process's slot in it. s->alone: no other
 * process has the store open (the caller reads, recovers or creates the
 * file); otherwise the caller calls mote__share_join. */
int mote__share_open(mote_store *s);

/* Taking over, the file's read failed with MOTE_CORRUPT: if the solo
 * process was in a write at the takeover (a new store's first commit
 * writes both slots, which the read may have found torn), waits until that
 * write ended and gives the size to read the file again with: 1; 0 if not
 * such a case (the error stands); < 0 an error (MOTE_BUSY after the busy
 * timeout). */
int mote__share_taken_again(mote_store *s, uint64_t *size);
/* Not s->init: the latest commit from the segment (file size `size`). */
int mote__share_join(mote_store *s, uint64_t size);
/* Alone: the segment describes the commit just opened; the flock becomes
 * shared. Both: after the file was read. */
int mote__share_ready(mote_store *s);
/* mote__txn_commit in its two phases (GROUP COMMIT): the first writes the
 * commit; when it is a record left to be made durable, it returns its txnid
 * and state (a reference) for the second, which waits until it is durable
 * (syncing if need be) and releases the reference; else *txnid is 0 and the
 * commit is done. Tests call them apart. */
int mote__txn_commit_write(mote_txn *t, uint64_t *txnid, snap **sn);
int mote__commit_wait(mote_store *s, uint64_t txnid, snap *sn);
/* A written commit nobody waits for (not acknowledged): its reference. */
void mote__commit_forget(mote_store *s, snap *sn);

/* Under s->mu: adopt the latest commit (s->cur, s->txnid); a read
 * transaction's snapshot, published in this process's slot; the slot after
 * a reader ended. */
int mote__share_refresh(mote_store *s);
/* An outsider without the segment: the newest commit on disk (one pread of
 * both slots, at each read transaction); a page that fails its check after
 * the latest commit moved gives MOTE_BUSY (a writer reused it). */
int mote__share_outsider_refresh(mote_store *s);
int mote__share_outsider_check(mote_store *s, uint64_t txnid, int rc);
int mote__share_snapshot(mote_store *s);
void mote__share_unpublish(mote_store *s);

/* A read transaction's snapshot (under s->mu): when this process has the
 * latest commit and no other reader, publish it inline; else share.c. */
static inline int share_read_begin(mote_store *s)
{
    if (!s->readers && atomic_load_explicit(s->sh_latest, memory_order_acquire) == s->txnid) {
        atomic_store(s->sh_snap, s->txnid); /* then the latest again (share.c) */
        if (atomic_load(s->sh_latest) == s->txnid)
            return MOTE_OK;
    }
    return mote__share_snapshot(s);
}

/* A reader ended (under s->mu): the oldest snapshot this process still reads. */
static inline void share_read_end(mote_store *s)
{
    if (s->readers)
        mote__share_unpublish(s);
    else
        atomic_store_explicit(s->sh_snap, UINT64_MAX, memory_order_release);
}
/* Alone without a segment (share.c SOLO), under s->mu. A read
 * transaction's snapshot goes into the solo entry (then the bell is read:
 * a process that rang it reads the entry after); a rung bell makes this
 * process join the segment the other one made, and the reader goes on as
 * a shared one. mote__solo_join_read says which: 1 joined, 0 still alone,
 * < 0 an error (the negated MOTE_* code). */
int mote__solo_join_read(mote_store *s, int ending);
uint64_t mote__solo_oldest(const mote_store *s);
static inline int solo_read_begin(mote_store *s)
{
    solo_entry *e = atomic_load_explicit(&s->solo, memory_order_relaxed);
    uint64_t o = s->txnid;
    if (s->readers) {
        uint64_t lo = mote__solo_oldest(s);
        if (lo < o)
            o = lo;
    }
    atomic_store(&e->oldest, o); /* then the bell (sequentially consistent both) */
    if (atomic_load(&e->bell) == s->bell_seen)
        return MOTE_OK;
    int rc = mote__solo_join_read(s, 0);
    return rc < 0 ? -rc : rc ? share_read_begin(s) : MOTE_OK;
}

static inline void solo_read_end(mote_store *s)
{
    solo_entry *e = atomic_load_explicit(&s->solo, memory_order_relaxed);
    atomic_store_explicit(&e->oldest, s->readers ? mote__solo_oldest(s) : UINT64_MAX,
                          memory_order_release);
    if (atomic_load(&e->bell) != s->bell_seen && mote__solo_join_read(s, 1) == 1)
        share_read_end(s);
}
/* A write transaction (s->wmu held): counted in `writing` (t->solo_w), or,
 * the bell rung, after joining the segment (then s->seg). */
int mote__solo_write_begin(mote_store *s, mote_txn *t);
/* A write begun alone is durable or over (neither s->wmu nor s->mu held):
 * the count goes down; with the bell rung, the last one joins (a taker's
 * writers wait for that, share.c). */
void mote__solo_join_late(mote_store *s);
static inline void solo_write_done(mote_store *s)
{
    solo_entry *e = atomic_load_explicit(&s->solo, memory_order_relaxed);
    if (!e)
        return;
    atomic_store_explicit(&e->synced, store_synced(s), memory_order_relaxed);
    if (atomic_fetch_sub(&e->writing, 1) == 1 && atomic_load(&e->bell) != s->bell_seen)
        mote__solo_join_late(s);
}
/* At close (no transactions): a rung bell is answered (joined) first. */
void mote__solo_close(mote_store *s);
/* In a forked child: the parent's solo page is not this process's. */
void mote__share_fork_child(void);

/* The oldest snapshot other processes read, checking those below `needed`
 * are alive (a dead one's slot is reclaimed). */
uint64_t mote__share_oldest(mote_store *s, uint64_t needed);
/* A write transaction across processes: the writer lock (waiting up to the
 * busy timeout), the latest commit; its commit published; its end. */
int mote__share_write_begin(mote_store *s);
/* The writer is about to write both root slots (a new store's first
 * commit, pager.h FRESH): the latest commit goes into the segment's root
 * copy, where other processes read it until the new one is published. */
void mote__share_keep_base(mote_store *s);
/* GROUP COMMIT across processes. Phase 1, under the writer lock: the
 * commit `txnid` was written (its state `st`; the pages it freed go to the
 * ring): other processes' writers build on it. */
void mote__share_written(mote_store *s, uint64_t txnid, const uint8_t *st,
                         const uint32_t *freed, size_t nfreed);
/* Phase 1: the branch pages of the commit into the segment's copies; a
 * reader that misses its cache: a copy of page pgno of birth birth32 into
 * buf, 1 if there was one (the caller checks it as a page read). */
void mote__share_pages(mote_store *s, mpage *const *pages, uint32_t npg);
int mote__share_page(mote_store *s, uint32_t pgno, uint32_t birth32, uint8_t *buf);
/* The newest commit written and the page of its state. */
uint64_t mote__share_written_txn(const mote_store *s, uint32_t *page);
/* Commit txnid (its state at `page`) is the latest, which readers take (if
 * newer than theirs); durable if `synced` (under the segment's sync mutex:
 * robust, short). */
void mote__share_visible(mote_store *s, uint64_t txnid, uint32_t page, int synced);
/* At a write transaction's begin: the oldest snapshot of any process, but
 * not past the newest durable commit (local:
 * this one's; needed: the newest tag this process's pending list holds),
 * the ring's entries every snapshot is past dropped; then s->pend = the
 * pages a snapshot may still read (this process's pending list, the ring,
 * and every free page while the ring lost entries of others that matter). */
uint64_t mote__share_release(mote_store *s, uint64_t local, uint64_t needed);
void mote__share_pending(mote_store *s, uint64_t oldest);
void mote__share_write_end(mote_store *s);
/* At close: is this the only process with the store open? (then it stays
 * so: the flock is taken exclusively; asked once). Exclusive mode: always. */
int mote__store_alone(mote_store *s);
void mote__share_close(mote_store *s);
/* In a forked child: the parent's segment is unmapped and its descriptor
 * closed in this process (its slot and locks stay the parent's). */
void mote__share_forked(mote_store *s);

/* Is the page read from page `where` a valid state? Its kind (1 a
 * checkpoint, 2 a marker, 3 a commit record; a slot holds no record, a
 * data page nothing else), or 0. */
int mote__slot_valid(const uint8_t *slot, uint32_t P, uint32_t where);
/* The pages of a state's chain: its records since the checkpoint, then its
 * reserved page (read from the file: each record names the next). At most
 * CHAIN_MAX + 1; MOTE_CORRUPT if a record is not there. */
int mote__chain_pages(mote_store *s, const uint8_t *st, uint32_t *out, uint32_t *n);
/* The number of bitmap pages needed for npages pages. */
uint32_t mote__bmp_needed(uint32_t P, uint32_t npages);
int mote__read_page_raw(mote_store *s, uint32_t pgno, uint8_t *buf);
int mote__verify_page(const mote_store *s, const uint8_t *buf,
                      const uint8_t *ptr, const char *what);
/* The state to open, from the file's first `have` bytes (both slots) and
 * its size (pager.h COMMIT CHAIN: recovery): into `out` (P bytes; a marker
 * there reads as a checkpoint), the slot the next checkpoint must not
 * overwrite, whether it needs no verification (clean) and the highest
 * txnid any page looked at names (*hi, raised). MOTE_CORRUPT if none. */
int mote__recover(mote_store *s, const uint8_t *slots, size_t have, uint64_t size,
                  uint8_t *out, int *start_slot, int *clean, uint64_t *hi);
/* Was a page of birth b (low 32 bits) written after a floor? (lo: the
 * floor's low 32 bits, span: the txnids after it, UINT32_MAX: every one;
 * modular, as births are) */
static inline int birth_after(uint32_t b, uint32_t lo, uint32_t span)
{
    return span == UINT32_MAX || b - lo - 1u < span;
}
/* Walk the pages the state `st` reaches (its tree, its bitmap pages) whose
 * pointers' births are after the floor (birth_after(lo, span)), each read,
 * checked against its pointer and validated, then passed to `page` (may be
 * NULL) before the pages below it: below a page born at or before the
 * floor every page was too. `bufs`: MAX_DEPTH pages. Recovery verifies a
 * commit with it; a delta collects its pages (delta.c). */
int mote__walk_state(mote_store *s, const uint8_t *st, uint32_t lo, uint32_t span,
                     uint8_t *bufs,
                     int (*page)(void *ctx, uint32_t pgno, const uint8_t *buf), void *ctx);
/* A clean-close marker into m (P bytes): a copy of the state `st` for root
 * slot `slot`, naming the chain it copies (a version 1 state becomes its
 * own checkpoint's: `ckpt`), sealed. */
void mote__marker(uint8_t *m, const uint8_t *st, uint32_t P, uint32_t slot, int ckpt);
/* The creation page of page size P (FRESH): always the same bytes. */
void mote__creation_page(uint8_t *slot, uint32_t P);
/* Verify the pages commit txnid wrote, reached from its slot (open after an
 * unclean shutdown). */
int mote__verify_commit(mote_store *s, const uint8_t *slot, uint64_t txnid);
/* The store file's size now, into *size (an open reads it again once it
 * holds the flock when another process may have written meanwhile:
 * mote__store_open). */
int mote__file_size(mote_store *s, uint64_t *size);

#endif
