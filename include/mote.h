/*
 * mote.h — the public C API of MoteDB, an embedded object database.
 *
 * This header is the manual. Every function says what it does, what it
 * returns and who owns what. Conventions:
 *
 *   - Handles are opaque: mote_store (one open store file), mote_txn (a
 *     transaction), mote_cursor (a position in a tree).
 *   - Functions return an int: MOTE_OK (0) on success, a MOTE_* code
 *     otherwise. mote_strerror(rc) names a code; mote_errmsg(store) gives the
 *     message of the last error on that store (which file, what was wrong).
 *   - Lengths are size_t, byte strings are (pointer, length) pairs and may
 *     contain NUL bytes.
 *   - Bytes returned by the library (mote_val) belong to the library and stay
 *     valid until the next call on the same transaction or cursor, or until
 *     the transaction ends, whichever comes first. Copy them to keep them.
 *
 * Threads: a store may be used from any number of threads. At most one write
 * transaction exists at a time (mote_begin for writing blocks until the
 * previous writer ends); any number of read transactions (snapshots) run
 * concurrently with it, each on one thread at a time. A transaction or cursor
 * must not be used by two threads at once.
 *
 * Layers: this header exposes the ordered key/value engine ("kv": named trees
 * of byte keys and values in one file). The object layer (entities, records,
 * indexes, queries) builds on it and will be added to this header.
 */
#ifndef MOTE_H
#define MOTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOTE_VERSION_MAJOR 0
#define MOTE_VERSION_MINOR 1
#define MOTE_VERSION_STRING "0.1.0"

/* ---- Result codes ------------------------------------------------------ */

enum {
    MOTE_OK = 0,        /* success */
    MOTE_NOTFOUND = 1,  /* no such key / tree / position (not a failure) */
    MOTE_EXISTS = 2,    /* key exists and MOTE_NOOVERWRITE was given */
    MOTE_INVALID = 3,   /* bad argument: NULL pointer, bad flag, bad size */
    MOTE_NOMEM = 4,     /* out of memory; the operation had no effect */
    MOTE_IO = 5,        /* a read or write failed (errno in mote_errmsg) */
    MOTE_NOSPACE = 6,   /* the disk is full; the transaction was rolled back */
    MOTE_CORRUPT = 7,   /* the file is damaged; mote_errmsg says where */
    MOTE_LOCKED = 8,    /* the store is open for writing elsewhere */
    MOTE_READONLY = 9,  /* a write on a read-only store or transaction */
    MOTE_POISONED = 10, /* a durable sync failed earlier: close and reopen */
    MOTE_TOOBIG = 11,   /* key or value larger than the limits below */
    MOTE_FORMAT = 12,   /* not a MoteDB file, or a newer format version */
    MOTE_BUSY = 13,     /* the operation conflicts with open transactions */
    MOTE_FULL = 14      /* a format limit was reached (pages, trees) */
};

/* Name of a result code, e.g. "MOTE_CORRUPT: file is damaged". Static. */
const char *mote_strerror(int rc);

/* ---- Limits ------------------------------------------------------------ */

#define MOTE_MAX_KEY 512u             /* bytes per key */
#define MOTE_MAX_VALUE (1u << 30)     /* bytes per value (1 GiB) */
#define MOTE_MAX_TREES 32767u         /* named trees per store */
#define MOTE_MAX_TREE_NAME 200u       /* bytes per tree name */

/* ---- Stores ------------------------------------------------------------ */

typedef struct mote_store mote_store;
typedef struct mote_txn mote_txn;
typedef struct mote_cursor mote_cursor;
struct mote_io; /* the I/O shim; see src/io.h (tests and tools only) */

/* Flags for mote_options.flags */
#define MOTE_RDONLY 0x1u     /* open read-only (shared lock); no writes */
#define MOTE_CREATE 0x2u     /* create the file if it does not exist */
#define MOTE_NODIRSYNC 0x4u  /* on create, skip the directory fsync (the
                                caller syncs the directory itself, e.g. once
                                after creating many stores) */
#define MOTE_NOSYNC 0x8u     /* commits are not synced: fast, NOT durable
                                (a crash may lose recent commits, never
                                corrupt the file). For tests and bulk loads. */

typedef struct mote_options {
    unsigned flags;          /* MOTE_* open flags above */
    unsigned page_size;      /* at creation: power of two 4096..65536; 0 =
                                4096. Ignored for existing files. */
    unsigned cache_pages;    /* page cache limit in pages; 0 = 16384 (64 MB at
                                4 KB pages). Pages are allocated as they are
                                read, so small stores use little. */
    const struct mote_io *io;/* I/O shim; NULL = real POSIX I/O */
} mote_options;

/*
 * Open the store file at `path`. `opts` may be NULL: read-write, create if
 * missing. A writable open takes an exclusive lock on the file (flock), a
 * read-only open a shared one; a conflicting lock gives MOTE_LOCKED. A file
 * that is already open in this process gives MOTE_BUSY.
 *
 * Opening a file that was not closed cleanly verifies the last commit and
 * rolls back to the one before it if that commit is incomplete; no
 * acknowledged commit is lost.
 *
 * On success *out is the handle, to be released with mote_close. On failure
 * *out is NULL and the message is available from mote_last_open_error().
 */
int mote_open(const char *path, const mote_options *opts, mote_store **out);

/* Message for the last failed mote_open on this thread ("" if none). */
const char *mote_last_open_error(void);

/*
 * Close the store. Aborts nothing: all transactions must be ended first
 * (MOTE_BUSY otherwise, and the store stays open). After writes, a small
 * clean-close marker is written so that the next open needs no verification.
 * NULL is accepted and does nothing.
 */
int mote_close(mote_store *store);

/* Message of the last error on this store (thread-local to the store's last
 * failing call; "" if none). Valid until the next failing call. */
const char *mote_errmsg(const mote_store *store);

/* Statistics of a store, as of its latest commit. */
typedef struct mote_stat {
    uint64_t txnid;          /* id of the latest commit */
    unsigned page_size;      /* bytes per page */
    uint64_t pages;          /* logical size of the file in pages */
    uint64_t pages_free;     /* pages not used by the latest commit */
    uint64_t file_bytes;     /* physical size of the file */
    uint64_t trees;          /* named trees */
    uint64_t entries;        /* key/value pairs in all trees */
    unsigned depth;          /* levels of the B+tree (1 = root only) */
} mote_stat;

int mote_store_stat(mote_store *store, mote_stat *st);

/* ---- Transactions ------------------------------------------------------ */

#define MOTE_TXN_RDONLY 0x1u /* a read-only snapshot */

/*
 * Begin a transaction. A read transaction sees the latest commit as of this
 * call and nothing after it. A write transaction waits for any other write
 * transaction of this store to end. Release with mote_commit or mote_abort.
 */
int mote_begin(mote_store *store, unsigned flags, mote_txn **out);

/*
 * Commit and free the transaction. A write transaction is durable when this
 * returns MOTE_OK (exactly one fdatasync, unless MOTE_NOSYNC). On failure the
 * transaction is rolled back and freed; a failed sync poisons the store
 * (MOTE_POISONED from then on; reopen to recover). For a read transaction
 * commit equals abort.
 */
int mote_commit(mote_txn *txn);

/* Discard the transaction's changes and free it. NULL does nothing. */
void mote_abort(mote_txn *txn);

/* Id of the commit a transaction reads from (read) or will write (write). */
uint64_t mote_txn_id(const mote_txn *txn);

/* ---- Key/value trees ----------------------------------------------------- */

/* Bytes returned by the library; see the ownership rule at the top. */
typedef struct mote_val {
    const void *data;
    size_t size;
} mote_val;

/* Flags for mote_kv_tree */
#define MOTE_TREE_CREATE 0x1u /* create the tree if missing (write txn) */

/*
 * Find the tree called `name` (1..MOTE_MAX_TREE_NAME bytes) and store its id
 * in *tree. Tree ids are stable for the life of the store. MOTE_NOTFOUND if
 * it does not exist and MOTE_TREE_CREATE was not given.
 */
int mote_kv_tree(mote_txn *txn, const char *name, unsigned flags,
                 uint32_t *tree);

/* Remove a tree and all its entries (write txn). MOTE_NOTFOUND if missing. */
int mote_kv_drop(mote_txn *txn, const char *name);

/* Flags for mote_kv_put */
#define MOTE_NOOVERWRITE 0x1u /* MOTE_EXISTS if the key is present */

/* Insert or replace key -> value in `tree` (write txn). */
int mote_kv_put(mote_txn *txn, uint32_t tree, const void *key, size_t klen,
                const void *val, size_t vlen, unsigned flags);

/* Look up `key`; MOTE_NOTFOUND if absent. `val` may be NULL (existence). */
int mote_kv_get(mote_txn *txn, uint32_t tree, const void *key, size_t klen,
                mote_val *val);

/* Delete `key` (write txn); MOTE_NOTFOUND if absent. */
int mote_kv_del(mote_txn *txn, uint32_t tree, const void *key, size_t klen);

/*
 * Count the keys k of `tree` with lo <= k < hi in O(log n). lo == NULL means
 * from the first key, hi == NULL up to the end.
 */
int mote_kv_count(mote_txn *txn, uint32_t tree, const void *lo, size_t lolen,
                  const void *hi, size_t hilen, uint64_t *count);

/* ---- Cursors ------------------------------------------------------------- */

/*
 * A cursor walks one tree in key order. It stays valid across writes in its
 * own transaction (it re-finds its position by key). Free with
 * mote_cursor_close before the transaction ends.
 */
int mote_cursor_open(mote_txn *txn, uint32_t tree, mote_cursor **out);
void mote_cursor_close(mote_cursor *cur);

/* Seek modes */
#define MOTE_SEEK_GE 0 /* first key >= given key */
#define MOTE_SEEK_GT 1 /* first key >  given key */
#define MOTE_SEEK_LE 2 /* last key  <= given key */
#define MOTE_SEEK_LT 3 /* last key  <  given key */

/* Position the cursor; MOTE_NOTFOUND if no key qualifies. */
int mote_cursor_seek(mote_cursor *cur, const void *key, size_t klen, int mode);
int mote_cursor_first(mote_cursor *cur);
int mote_cursor_last(mote_cursor *cur);
/* Move by one; MOTE_NOTFOUND past either end (the cursor then is unset). */
int mote_cursor_next(mote_cursor *cur);
int mote_cursor_prev(mote_cursor *cur);
/* Position the cursor on the n-th key (0-based) of its tree in O(log n). */
int mote_cursor_nth(mote_cursor *cur, uint64_t n);
/* Rank of the current key: number of keys before it in the tree. */
int mote_cursor_rank(mote_cursor *cur, uint64_t *rank);
/* The current entry; either pointer may be NULL. */
int mote_cursor_get(mote_cursor *cur, mote_val *key, mote_val *val);

/* ---- Maintenance --------------------------------------------------------- */

/*
 * Full consistency check of the latest commit: every page reachable once,
 * checksums, births and page numbers, key order, counts, the allocation
 * bitmap. Returns MOTE_OK if consistent, MOTE_CORRUPT if not; each problem
 * found is passed to `report` (may be NULL) as one line of text.
 */
int mote_check(mote_store *store,
               void (*report)(void *ctx, const char *problem), void *ctx);

/*
 * Write a compacted copy of the store's latest commit to `out_path` (which
 * must not exist): live pages only, renumbered densely. Synced before return.
 */
int mote_compact(mote_store *store, const char *out_path);

#ifdef __cplusplus
}
#endif
#endif /* MOTE_H */
