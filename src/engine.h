/*
 * engine.h — private structures shared by the engine's layers:
 * pager.c (file, root slots, page cache, allocation, commit, recovery),
 * btree.c (copy-on-write B+tree and cursors), kv.c (public kv API and named
 * trees), check.c (consistency check, compaction).
 *
 * FILE FORMAT (all integers little-endian; P = page size)
 *
 *   page 0: root slot A    page 1: root slot B    pages 2..npages-1: data
 *
 * Root slot (one whole page):
 *     0  u64  magic "MOTEDB\0\1"
 *     8  u32  format version (1)
 *    12  u32  page size P
 *    16  u32  slot index (0 or 1; must equal the page it is in)
 *    20  u32  kind: 1 = commit, 2 = clean-close marker
 *    24  u64  txnid (commit: its id; marker: the commit it vouches for)
 *    32  u32  npages (logical file size in pages)
 *    36  u32  next tree id
 *    40  u32  number of bitmap pages in use
 *    44  u32  reserved (0)
 *    48  u64  reserved (0)
 *    56  u64  reserved (0)
 *    64  [SLOT_INLINE_BM] allocation bitmap of pages 0..SLOT_INLINE_BITS-1
 *   192  [SLOT_MAX_BMP x 12] bitmap page pointers {pgno, birth32, crc32c}
 *   960  the root node of the B+tree, up to P-8
 *   P-8  u64  hash64 of bytes [0, P-8)
 *   A marker has the header only (kind 2) and zeros up to the hash.
 *
 * One B+tree holds every named tree: an entry's internal key is the tree id
 * (1 or 2 bytes, order-preserving: id < 0x80 -> [id], else
 * [0x80 | id >> 8, id & 0xff]) followed by the user key. Tree 0 is the
 * catalog: name -> u32 tree id. So a tiny store is its root slot alone.
 *
 * Node (a data page, or the root area of a slot):
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
 *
 * INVARIANTS
 *  - Pages reachable from the durable base commit D are never written by the
 *    next commit W; W's slot goes into the slot not holding D; slot last,
 *    then one fdatasync.
 *  - Every page read from disk is checked against the pointer that led to
 *    it (crc32c, pgno, birth) and its structure validated before use.
 *  - A page freed by commit C is reused only when every live snapshot in
 *    the process is >= C (pending list); pages allocated and freed by the
 *    same transaction are reusable at once.
 */
#ifndef MOTE_ENGINE_H
#define MOTE_ENGINE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "io.h"
#include "mote.h"

/* ---- Format constants ---------------------------------------------------- */

#define MOTE_MAGIC 0x0100424445544F4Dull /* "MOTEDB\0\1" little-endian */
#define MOTE_FORMAT_VERSION 1u
#define SLOT_KIND_COMMIT 1u
#define SLOT_KIND_MARKER 2u
#define SLOT_INLINE_OFF 64u
#define SLOT_INLINE_BM 128u
#define SLOT_INLINE_BITS (SLOT_INLINE_BM * 8u)
#define SLOT_BMP_OFF (SLOT_INLINE_OFF + SLOT_INLINE_BM)
#define SLOT_MAX_BMP 64u
#define SLOT_ROOT_OFF 960u /* SLOT_BMP_OFF + SLOT_MAX_BMP * 12 */
#define PTR12 12u           /* {pgno, birth32, crc} */

#define NODE_LEAF 1
#define NODE_BRANCH 2
#define PAGE_OVERFLOW 3
#define PAGE_BITMAP 4
#define NH 20u       /* node header bytes */
#define CHILD 20u    /* child pointer bytes */
#define OVF_HDR 32u  /* overflow / bitmap page header bytes */
#define MAX_DEPTH 24 /* a tree deeper than this is corrupt */
#define MAX_IKEY (MOTE_MAX_KEY + 2u) /* internal key: tree prefix + key */

/* ---- Little-endian helpers ------------------------------------------------ */

static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
/* Big-endian load: comparing these compares 8 key bytes at once. */
static inline uint64_t mote__be64(const uint8_t *p)
{
    uint64_t v = rd64(p);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void mote__wr_be64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
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
static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* ---- Memory (hookable so tests can fail the Nth allocation and count) ---- */

void *mote__malloc(size_t n);
void *mote__calloc(size_t n, size_t m);
void *mote__realloc(void *p, size_t n);
/* Make *b (of *cap bytes) hold at least need bytes, doubling from 256:
 * MOTE_NOMEM (with the message set) if it cannot. */
int mote__grow(uint8_t **b, size_t *cap, size_t need);
void mote__free(void *p);
/* Test hook: when set, called before every allocation with its size; a
 * non-zero return makes that allocation fail. */
extern int (*mote__alloc_hook)(size_t n);

/* ---- Errors ------------------------------------------------------------- */

/* Set the calling thread's error message, of a failure without an operating
 * system cause (mote_last_oserror then returns 0); returns rc. */
int mote__err(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define CORRUPT(...) mote__corrupt(__FILE__, __LINE__, __VA_ARGS__)
int mote__corrupt(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Problems found by mote_check: counted, and the first 1,000 passed to the
 * caller's report callback (may be NULL). */
typedef struct mote_problems {
    void (*report)(void *ctx, const char *problem);
    void *ctx;
    unsigned n;
} mote_problems;
void mote__problem(mote_problems *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Set the message of a failure the operating system reported: errno `err`
 * on the file `path`, which mote_last_oserror then returns. Returns rc. */
int mote__oserr(int rc, int err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map -errno from the I/O shim to MOTE_IO / MOTE_NOSPACE / MOTE_NOMEM, with
 * the message "<what> of <path> failed: <strerror>" (mote__oserr). */
int mote__ioerr(int neg_errno, const char *what, const char *path);

/* ---- Pages ---------------------------------------------------------------- */

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

typedef struct pending {
    uint32_t pgno;
    uint64_t tag; /* freed by this commit */
} pending;

struct mote_store {
    const mote_io *io;
    int fd;
    char *path;
    unsigned flags;      /* MOTE_* open flags */
    uint32_t P;          /* page size */
    uint32_t page_shift;
    uint64_t dev, ino;
    uint64_t file_bytes; /* physical size */

    pthread_mutex_t mu;  /* cache, readers, cur, poisoned */
    pthread_mutex_t wmu; /* held by the write transaction */
    _Atomic(const void *) writer; /* the writer thread's token, NULL if none */

    snap *cur;           /* latest commit's slot */
    uint64_t txnid;      /* latest commit */
    uint64_t next_txnid;
    int base_slot;       /* slot index holding cur */
    int poisoned;
    int need_sync;       /* unclean open: sync once before the first commit */
    int synced;          /* a commit was synced by this handle (or clean open) */
    int marker_ok;       /* the other slot already holds a marker for txnid */
    int ntxn;            /* live transactions (for close) */
    uint64_t txn_serial; /* last write transaction's serial */

    /* allocation state of the latest commit (writer side, loaded lazily) */
    uint8_t *bm;         /* bit = page in use by the latest commit */
    uint8_t *pend;       /* bit = freed but maybe visible to a snapshot */
    uint32_t bm_cap, pend_cap; /* capacities of bm and pend in bytes */
    uint32_t hint;       /* no free page below this one (writer side) */
    pending *pendv;
    size_t npend, cap_pend;

    /* page cache */
    mpage **hash;
    uint32_t hash_mask;
    uint32_t ncached, cache_limit;
    mpage lru;           /* sentinel: lnext = most recent, lprev = oldest */

    reader *readers;
    struct mote_store *reg_next; /* process-wide registry of open files */
    void *objects;       /* the object layer's state (object.h), in this block */
};

struct mote_txn {
    mote_store *s;
    int write;
    uint64_t txnid;      /* write: the id being built; read: snapshot id */
    snap *root;          /* read: pinned snapshot; write: private slot copy */
    reader rd;
    uint64_t gen;        /* bumped by every change (cursor revalidation) */
    int changed;
    mpage *held;         /* pin held for the last returned value */
    uint8_t *vbuf;       /* assembled overflow values */
    size_t vbuf_cap;
    mote_cursor *cursors; /* open cursors, detached when the txn ends */
    mote_cursor *spare;  /* the last cursor closed, reused by the next open */
    uint64_t serial;     /* unique per write transaction of the store */
    void *objects;       /* the object layer's state of a write txn (object.h) */

    /* writer state */
    uint8_t *bm;         /* working bitmap (copy of s->bm) */
    uint32_t bm_cap;
    uint32_t hint;       /* lowest page that may be free */
    uint32_t npages;
    uint32_t next_tree;
    mpage **dhash;       /* dirty pages by pgno */
    uint32_t dmask, ndirty;
    uint32_t *freed;     /* pages of the base freed by this txn */
    size_t nfreed, cap_freed;
    uint8_t *scratch;    /* P bytes for node rebuilds */
    int failed;          /* a write failed midway: only abort is possible */
    const struct mote_kvop *split_next; /* bt_apply: the op after the one put */
    struct mote_pending *pend; /* deferred puts, one entry per tree (kv.c) */
    unsigned npend, pend_cap;
};

/* ---- pager.c ------------------------------------------------------------- */

static inline uint8_t *txn_root(const mote_txn *t) { return t->root->data + SLOT_ROOT_OFF; }
static inline uint32_t root_cap(const mote_store *s) { return s->P - 8 - SLOT_ROOT_OFF; }

/* Page by child pointer: the txn's dirty copy, or a pinned, verified cache
 * page. `level` is the level the page must have (-1: overflow page). */
int mote__page_get(mote_txn *t, const uint8_t *ptr, int level, mpage **out);
void mote__page_put(mote_store *s, mpage *pg); /* unpin (no-op if dirty) */
/* Make the child behind `ptr` (inside a writable node) writable: returns the
 * dirty page, copying it to a new page number if needed and updating ptr. */
int mote__page_write(mote_txn *t, uint8_t *ptr, int level, mpage **out);
/* A new zeroed dirty page. */
int mote__page_new(mote_txn *t, mpage **out);
/* Free a page of the tree (dirty or committed). */
int mote__page_free(mote_txn *t, uint32_t pgno, uint64_t birth32);
/* Write an overflow chain for a value; fills the 12-byte pointer. */
int mote__ovf_write(mote_txn *t, const uint8_t *v, size_t n, uint8_t *ptr12);
int mote__ovf_read(mote_txn *t, const uint8_t *ptr12, size_t n, mote_val *out);
int mote__ovf_free(mote_txn *t, const uint8_t *ptr12, size_t n);

/* Open the store file (mote_open's work below the object layer), with
 * `extra` zeroed bytes after the store, in the same block, for the layer
 * above: s->objects points at them. */
int mote__store_open(const char *path, const mote_options *opts, size_t extra,
                     mote_store **out);
/* MOTE_BUSY (with the message) while transactions are open. */
int mote__store_busy(mote_store *s);
/* Shrink if worth it, write the clean-close marker, close and free. */
void mote__store_close(mote_store *s);
int mote__txn_begin(mote_store *s, int write, mote_txn **out);
int mote__txn_commit(mote_txn *t);
void mote__txn_abort(mote_txn *t);
void mote__txn_release_held(mote_txn *t);

/* Validate a node's structure (not its key order). 0 or MOTE_CORRUPT. */
int mote__node_validate(const uint8_t *n, uint32_t cap, int level, uint32_t pgno);
/* Keys strictly ascending within the node (mote_check). */
int mote__node_check_order(const uint8_t *n, uint32_t cap);
int mote__slot_valid(const uint8_t *slot, uint32_t P, int index);
/* The number of bitmap pages needed for npages pages. */
uint32_t mote__bmp_needed(uint32_t P, uint32_t npages);
int mote__read_page_raw(mote_store *s, uint32_t pgno, uint8_t *buf);
int mote__verify_page(const mote_store *s, const uint8_t *buf,
                      const uint8_t *ptr, const char *what);

/* ---- btree.c ------------------------------------------------------------- */

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

/* varint (LEB128) helpers; return bytes used, 0 on malformed input */
unsigned mote__varint_get(const uint8_t *p, const uint8_t *end, uint64_t *v);
/* The same, with one byte (every key length, most value lengths, layout
 * numbers) decoded inline. */
static inline unsigned mote__varint_fast(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    if (p < end && p[0] < 0x80) {
        *v = p[0];
        return 1;
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
int mote__cell(const uint8_t *n, uint32_t cap, unsigned i, cell *c);
/* Sum of the entries below a node. */
uint64_t mote__node_count(const uint8_t *n);
void mote__node_init(uint8_t *n, uint32_t cap, int type, int level);

int mote__bt_get(mote_txn *t, const uint8_t *k, size_t kl, mote_val *v);
int mote__bt_put(mote_txn *t, const uint8_t *k, size_t kl, const void *v,
                 size_t vl, unsigned flags);
/* Delete k. known: the caller knows k exists, so the read-only descent that
 * keeps a miss from copying pages is skipped (a miss then still returns
 * MOTE_NOTFOUND, having copied the path). */
int mote__bt_del(mote_txn *t, const uint8_t *k, size_t kl, int known);
/* One put (del = 0) or delete of a sorted batch (see mote__kv_apply). */
typedef struct mote_kvop {
    const uint8_t *key;
    uint32_t klen;
    int del;
    const void *val;
    size_t vlen;
} mote_kvop;
/* Apply ops with internal keys in strictly ascending order: puts overwrite,
 * deletes of absent keys add to *missing. The same result as one call per
 * op, but the ops that fall into one leaf cost one descent together. */
int mote__bt_apply(mote_txn *t, const mote_kvop *ops, size_t n, uint64_t *missing);
/* Sort ops by key; equal keys end up adjacent, in no particular order. */
int mote__kvops_sort(mote_kvop *ops, size_t n);
/* mote__bt_apply on one tree with user keys (strictly ascending, else
 * MOTE_INVALID before anything is written). */
int mote__kv_apply(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                   uint64_t *missing);
/* The same with keys that already carry tree's prefix (mote__tree_prefix),
 * as the object layer builds them: no copy. The caller has checked that the
 * keys strictly ascend; a put's val must not be NULL. */
int mote__kv_apply_ikeys(mote_txn *t, uint32_t tree, const mote_kvop *ops, size_t n,
                         uint64_t *missing);
/* mote_kv_del for a key the caller knows exists (the object layer, which
 * has just read the object or its index entries). */
int mote__kv_del_known(mote_txn *t, uint32_t tree, const void *key, size_t klen);
/* Copy every page at or above `cut` to a lower free page (write txn). */
int mote__bt_relocate(mote_txn *t, uint32_t cut);
/* number of keys < k (k NULL: all keys) */
int mote__bt_rank(mote_txn *t, const uint8_t *k, size_t kl, uint64_t *rank);

/* Cursor over the whole internal keyspace, restricted to the keys that
 * start with lo (one tree: lo = its prefix, hi = the next tree's prefix;
 * lolen = hilen = 0: everything). */
struct mote_cursor {
    mote_txn *t;
    uint32_t tree;
    uint8_t lo[4], hi[4];
    uint32_t lolen, hilen; /* hilen 0: no upper bound */
    int depth;             /* levels in the stack (0: unpositioned) */
    mpage *pg[MAX_DEPTH];  /* pg[0] NULL: the root node in the slot */
    int dirty[MAX_DEPTH];  /* pg[d] was a dirty page when loaded */
    unsigned idx[MAX_DEPTH];
    uint64_t gen;          /* txn gen when positioned */
    uint32_t klen;
    int saved;
    struct mote_cursor *next_in_txn;
    uint8_t key[MAX_IKEY]; /* the current key, once saved (last: not cleared at open) */
};
int mote__cur_seek(mote_cursor *c, const uint8_t *k, size_t kl, int mode);
int mote__cur_step(mote_cursor *c, int dir);
int mote__cur_select(mote_cursor *c, uint64_t n); /* n-th key of keyspace */
void mote__cur_reset(mote_cursor *c);
void mote__cur_save(mote_cursor *c);
int mote__cur_entry(mote_cursor *c, mote_val *k, mote_val *v);
int mote__cur_find(mote_cursor *c, const uint8_t *k, size_t kl, mote_val *v);

/* ---- kv.c ------------------------------------------------------------- */

unsigned mote__tree_prefix(uint32_t tree, uint8_t *out);
/* The tree id an internal key starts with (the inverse of mote__tree_prefix);
 * 0xFFFFFFFF if the key is too short for its prefix. */
static inline uint32_t mote__key_tree(const uint8_t *key, uint32_t kl)
{
    if (!kl)
        return 0xFFFFFFFF;
    return key[0] < 0x80 ? key[0] : kl >= 2 ? ((key[0] & 0x7fu) << 8 | key[1]) : 0xFFFFFFFF;
}
/* Put (key, empty value) into tree later: at the latest before the next
 * operation that touches the tree (any read, write, cursor step or count of
 * it) or at the commit, together with the other deferred keys of the tree as
 * one sorted batch. For non-unique index entries, whose puts are never
 * refused and whose keys are never given twice. An error of the deferred
 * write surfaces in the call that triggers it and fails the transaction. */
int mote__kv_put_later(mote_txn *t, uint32_t tree, const void *key, size_t klen);
/* Write every deferred put of the transaction (the commit does). */
int mote__kv_flush(mote_txn *t);
/* The transaction ends (store.c, before its commit or abort): its cursors
 * are detached and its deferred puts, written or not, freed. */
void mote__kv_txn_end(mote_txn *t);
/* Position cursor c on key (a user key of its tree) and give its value;
 * MOTE_NOTFOUND if the key is absent (the cursor then rests on the next). */
/* Exact lookup of the 8-byte big-endian key id, leaving the cursor on it;
 * MOTE_NOTFOUND if absent. No argument checks: for the object layer's loops
 * over a cursor they opened on an object tree. */
int mote__cursor_find_id(mote_cursor *c, uint64_t id, mote_val *val);
/* mote_cursor_get without the checks, for a cursor the caller just moved. */
int mote__cursor_entry(mote_cursor *c, mote_val *key, mote_val *val);
/* For the query planner: the ranks in the whole keyspace of user keys lo
 * and hi of tree (entries before them), and the user key at a rank of tree
 * (copied into buf, at most cap bytes; MOTE_NOTFOUND past the end). */
int mote__kv_range_ranks(mote_txn *t, uint32_t tree, const void *lo, size_t lol,
                         const void *hi, size_t hil, uint64_t *rlo, uint64_t *rhi);
int mote__kv_key_at(mote_txn *t, uint32_t tree, uint64_t rank, uint8_t *buf, size_t cap,
                    size_t *len);

/* ---- check.c ------------------------------------------------------------- */

int mote__verify_commit(mote_store *s, const uint8_t *slot, uint64_t txnid);

#endif
