/*
 * mote.h — the public C API of MoteDB, an embedded object database.
 *
 * This header is the manual. Every function says what it does, what it
 * returns and who owns what. Conventions:
 *
 *   - Handles are opaque: mote_store (one open store file), mote_txn (a
 *     transaction), mote_cursor (a position in a tree).
 *   - Functions return an int: MOTE_OK (0) on success, a MOTE_* code
 *     otherwise. mote_strerror(rc) names a code; mote_errmsg() gives the
 *     message of the calling thread's last error (which file, entity,
 *     property or value, and what was wrong), and mote_last_oserror() its
 *     errno and file when the operating system reported it (a failed open,
 *     read, write or sync: ENOENT, EACCES, ENOSPC, EIO, ...). MOTE_NOTFOUND
 *     is an answer, not a failure. A NULL handle or output pointer where
 *     one is required gives MOTE_INVALID; functions that free (mote_close,
 *     mote_abort, mote_cursor_close, mote_query_free, mote_free) accept NULL.
 *   - Lengths are size_t, byte strings are (pointer, length) pairs and may
 *     contain NUL bytes.
 *   - Bytes returned by the library (mote_val) belong to the library and stay
 *     valid until the next call on the same transaction or cursor, or until
 *     the transaction ends, whichever comes first. Copy them to keep them.
 *
 * Threads: a store may be used from any number of threads. At most one write
 * transaction exists at a time (mote_begin for writing blocks until the
 * previous writer ends; MOTE_BUSY if the calling thread holds it already);
 * any number of read transactions (snapshots) run concurrently with it, each
 * on one thread at a time. A transaction or cursor must not be used by two
 * threads at once.
 *
 * Implicit transactions: object-layer functions (mote_put ... mote_query_*)
 * accept txn == NULL and then run in a transaction of their own on the
 * entity's store: a write transaction committed (durably) when the call
 * succeeds and rolled back when it fails, or a read snapshot. mote_get needs
 * an explicit transaction (its record would not outlive an implicit one).
 *
 * Layers: this header exposes the ordered key/value engine ("kv": named trees
 * of byte keys and values in one file) and, built on it, the object layer
 * (entities, records, ids, indexes, queries).
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
    MOTE_IO = 5,        /* the operating system refused an open, read,
                           write or sync (errno: mote_last_oserror) */
    MOTE_NOSPACE = 6,   /* the disk is full (ENOSPC, EDQUOT); the
                           transaction was rolled back */
    MOTE_CORRUPT = 7,   /* the file is damaged; mote_errmsg says where */
    MOTE_LOCKED = 8,    /* the store is open for writing elsewhere */
    MOTE_READONLY = 9,  /* a write on a read-only store or transaction */
    MOTE_POISONED = 10, /* a durable sync failed earlier: close and reopen */
    MOTE_TOOBIG = 11,   /* key or value larger than the limits below */
    MOTE_FORMAT = 12,   /* not a MoteDB file, or a newer format version */
    MOTE_BUSY = 13,     /* the operation conflicts with open transactions */
    MOTE_FULL = 14,     /* a format limit was reached (pages, trees) */
    MOTE_SCHEMA = 15,   /* incompatible schema change; mote_errmsg says what */
    MOTE_UNIQUE = 16,   /* a unique index already holds the value */
    MOTE_RANGE = 17,    /* value out of range for its property's type */
    MOTE_TYPE = 18      /* value of the wrong kind for its property */
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
 * A zero-byte file is a store that was never initialized (creation makes
 * the file, then writes and syncs its first page, so a crash in between
 * leaves one; so do tools that hand out empty temporary files): a writable
 * open initializes it, with or without MOTE_CREATE. A read-only open of it
 * gives MOTE_FORMAT ("store X is empty (0 bytes): it was never initialized;
 * open it writable once to create it").
 *
 * Failures of the operating system come with their errno and the path, from
 * mote_last_oserror(): a missing file without MOTE_CREATE (or read-only)
 * gives MOTE_NOTFOUND ("store X does not exist") with ENOENT; a missing
 * directory with MOTE_CREATE gives MOTE_IO ("cannot create store X:
 * directory D does not exist") with ENOENT; a directory, a file without
 * permission, a read-only file system give MOTE_IO (EISDIR, EACCES, EROFS),
 * a full disk while creating MOTE_NOSPACE (ENOSPC).
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
 * clean-close marker is written (no sync) so that the next open needs no
 * verification. A handle that wrote also shrinks the file when at least a
 * quarter of it (and 1 MB) is free: one more commit (one fdatasync), then
 * the file is truncated. NULL is accepted and does nothing.
 */
int mote_close(mote_store *store);

/* Message of the last failing call on the calling thread (whatever the
 * store; `store` may be NULL). Calls that succeed, and lookups that return
 * MOTE_NOTFOUND as an answer, may leave an older message in place: read it
 * right after a call returned an error. Valid until the thread's next
 * failing call. */
const char *mote_errmsg(const mote_store *store);
/* Empty the calling thread's message (mote_errmsg then returns ""), e.g.
 * before a call whose MOTE_NOTFOUND answer should not show an old message.
 * Also clears the OS error (mote_last_oserror then returns 0). */
void mote_clear_error(void);

/*
 * The operating system's part of the calling thread's last failing call: the
 * errno it reported (ENOENT, EACCES, EISDIR, EROFS, ENOSPC, EIO, ...), or 0
 * if that failure did not come from the operating system (a damaged file, a
 * lock held elsewhere, a bad argument, a schema conflict ...). If `path` is
 * not NULL, *path is the file the failed operation was on (the store's path
 * as given to mote_open, or mote_compact's output file), or NULL when the
 * errno is 0. A short write counts as EIO. Calls that return MOTE_IO or
 * MOTE_NOSPACE always set it, and so does the commit whose write or sync
 * failed and that returns MOTE_POISONED (later calls on the poisoned store
 * do not: their failure is the poisoning); so does a failed mote_open whose
 * cause was the operating system (MOTE_NOTFOUND included: ENOENT). Same
 * lifetime as mote_errmsg: read it right after the failing call; *path
 * stays valid until the thread's next failing call.
 */
int mote_last_oserror(const char **path);

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

/* Fill *st (MOTE_INVALID if either pointer is NULL). Reads only the
 * in-memory state; any thread, any time while the store is open. */
int mote_store_stat(mote_store *store, mote_stat *st);

/* ---- Transactions ------------------------------------------------------ */

#define MOTE_TXN_RDONLY 0x1u /* a read-only snapshot */

/*
 * Begin a transaction. A read transaction (MOTE_TXN_RDONLY) sees the latest
 * commit as of this call and nothing after it; it never blocks and costs no
 * I/O. A write transaction waits for any other write transaction of this
 * store to end (MOTE_READONLY on a store opened read-only; MOTE_POISONED
 * after a failed sync; MOTE_BUSY if the calling thread holds this store's
 * write transaction already, instead of waiting for itself). *out is
 * released with mote_commit or mote_abort.
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

/* Insert or replace key -> value in `tree` (write txn): MOTE_READONLY in a
 * read transaction, MOTE_TOOBIG above MOTE_MAX_KEY / MOTE_MAX_VALUE,
 * MOTE_EXISTS with MOTE_NOOVERWRITE. The bytes are copied. Values larger
 * than a quarter page go to overflow pages. */
int mote_kv_put(mote_txn *txn, uint32_t tree, const void *key, size_t klen,
                const void *val, size_t vlen, unsigned flags);

/* Look up `key`; MOTE_NOTFOUND if absent. `val` may be NULL (existence);
 * its bytes follow the ownership rule at the top. */
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

/* ---- Object layer: entities ------------------------------------------------
 *
 * An entity is a named type of object with typed properties. Its schema is
 * stored in the store; opening an entity with an unchanged definition costs
 * one catalog lookup and a hash compare (no "model sync"). Objects have
 * uint64 ids from 1; an entity's objects live in their own tree, each
 * indexed property in another. Tree names starting with '@' are reserved
 * for the object layer.
 */

typedef struct mote_entity mote_entity;
typedef struct mote_query mote_query;

/* Property types */
enum {
    MOTE_T_BOOL = 1,
    MOTE_T_INT8 = 2,
    MOTE_T_INT16 = 3,
    MOTE_T_INT32 = 4,
    MOTE_T_INT64 = 5,
    MOTE_T_FLOAT32 = 6,
    MOTE_T_FLOAT64 = 7,
    MOTE_T_STRING = 8,    /* UTF-8 text (not checked), may contain NUL */
    MOTE_T_BYTES = 9,
    MOTE_T_TIMESTAMP = 10,/* int64 nanoseconds since 1970-01-01 UTC */
    MOTE_T_DATE = 11,     /* int32 days since 1970-01-01 */
    MOTE_T_DECIMAL = 12,  /* exact decimal as canonical text, e.g. "-12.50" */
    MOTE_T_JSON = 13,     /* JSON text */
    MOTE_T_VECTOR = 14,   /* float32 array of the property's dimension */
    MOTE_T_TOONE = 15,    /* to-one relation: the id of a `target` object
                             (0 or NULL: none); always nullable and indexed,
                             so backlinks are index lookups */
    MOTE_T_TOMANY = 16    /* to-many relation to `target` objects: stored as
                             link records, not in the object; its value in
                             mote_value arrays is ignored (use mote_link) */
};

/* Property flags */
#define MOTE_P_NULLABLE 0x1u /* may hold NULL */
#define MOTE_P_INDEXED 0x2u  /* value index: fast eq/range/order queries */
#define MOTE_P_UNIQUE 0x4u   /* unique value index (implies indexed) */

typedef struct mote_prop_def {
    const char *name;         /* 1..200 bytes */
    int type;                 /* MOTE_T_* */
    unsigned flags;           /* MOTE_P_* */
    unsigned dim;             /* MOTE_T_VECTOR: number of floats */
    const char *renamed_from; /* keeps the data of a property of this old
                                 name; NULL if none */
    const char *target;       /* MOTE_T_TOONE / MOTE_T_TOMANY: the name of
                                 the related entity; NULL otherwise */
} mote_prop_def;

/*
 * Open (and create or evolve) the entity `name` with the given properties.
 *
 * Stored data is never dropped implicitly: the stored schema keeps every
 * property ever declared until mote_entity_drop_prop. A definition is
 * matched to it by name, then by `renamed_from` or a former name (a renamed
 * property remembers its last 8 names, so an older definition still finds
 * it). Properties the definition lacks are kept: their values are carried
 * over unchanged by mote_put / mote_update of existing objects, their
 * indexes and links are maintained, and new objects hold NULL in them.
 * Added properties read as NULL (nullable) or zero/empty in older objects;
 * an index added later is built from the existing objects. Changing the
 * type of a stored property, or adding MOTE_P_UNIQUE over duplicate values,
 * fails with MOTE_SCHEMA and a message naming the property.
 *
 * A definition that only lacks stored properties or orders them differently
 * changes nothing in the store, so it opens in a read transaction too; one
 * that adds or renames a property or changes flags (indexes, nullability)
 * needs a write transaction (in a read one: MOTE_SCHEMA, and the message
 * says what differs). When a write transaction changes an entity's stored
 * schema, the other handles of that entity give MOTE_SCHEMA ("open it
 * again") in it, and everywhere once it commits.
 *
 * The handle belongs to the store and stays valid until mote_close; the
 * property order of `props` is the order used by mote_value arrays. Entity
 * handles may be opened and used from several threads.
 */
int mote_entity_open(mote_txn *txn, const char *name, const mote_prop_def *props,
                     unsigned nprops, mote_entity **out);

/* Number of properties, and the index of a property by name (-1 if none). */
unsigned mote_entity_nprops(const mote_entity *e);
int mote_entity_prop(const mote_entity *e, const char *name);
/* The definition of property i (strings owned by the handle). */
int mote_entity_prop_def(const mote_entity *e, unsigned i, mote_prop_def *def);
const char *mote_entity_name(const mote_entity *e);

/* Open an entity with its stored definition, every kept property included
 * (tools, introspection). */
int mote_entity_stored(mote_txn *txn, const char *name, mote_entity **out);

/*
 * Drop stored property `prop` of entity `name` (write transaction): its
 * values leave every object (each object is written again, in this
 * transaction), its index, and a to-many property's links with their
 * backlinks. The only way a property's data goes. MOTE_NOTFOUND if the
 * entity has no stored property of that name (its current name; former
 * names do not count). A definition that still declares it adds it back as
 * a new, empty property the next time it is opened.
 */
int mote_entity_drop_prop(mote_txn *txn, const char *name, const char *prop);
/* Call fn for each stored entity name, in name order; fn returns 0 to go
 * on, non-zero to stop (that value is returned). */
int mote_entity_list(mote_txn *txn, int (*fn)(void *ctx, const char *name), void *ctx);

/* ---- Object layer: values and records ------------------------------------ */

/* One property value. For strings, bytes, decimals, JSON and vectors, `s`
 * points at the bytes (vectors: dim little-endian float32s). */
typedef struct mote_value {
    int null;   /* 1 = NULL */
    union {
        int64_t i;  /* bool, ints, timestamp, date */
        double f;   /* float32, float64 */
        struct {
            const void *p;
            size_t n;
        } s;
    } v;
} mote_value;

/* A stored object, as returned by reads; valid like a mote_val. */
typedef struct mote_record {
    const mote_entity *e;
    const uint8_t *data;
    size_t size;
    uint64_t id;
    const void *layout_; /* private: the record's parsed layout (may be NULL) */
    size_t nulls_;       /* private */
} mote_record;

/* Value of property `prop` (index in the entity's definition) of a record.
 * A property the record predates reads as NULL if nullable, else zero or
 * empty; `*absent` (may be NULL) is set to 1 in that case. A NULL in a
 * property that is not nullable (the object was written while the property
 * was not declared, see mote_entity_open, or before it became non-nullable)
 * reads as NULL with *absent = 1. */
int mote_record_get(const mote_record *r, unsigned prop, mote_value *out, int *absent);

/* ---- Object layer: operations --------------------------------------------- */

/* Put modes */
#define MOTE_PUT_UPSERT 0  /* insert (id 0 or unknown id) or update */
#define MOTE_PUT_INSERT 1  /* MOTE_EXISTS if the id exists */
#define MOTE_PUT_UPDATE 2  /* MOTE_NOTFOUND if the id does not exist */

/*
 * Put one object: `vals` has one value per property, in definition order.
 * id 0 assigns the next id (*out_id receives it; may be NULL). Ids: an
 * explicit id may be any of 1 .. 2^64-1; automatic ids are one more than
 * the highest id below 2^63 ever used or handed out (ids are never reused)
 * and stay below 2^63, so explicit ids at or above 2^63 never collide with
 * them (MOTE_FULL only when the automatic range is used up). Values are
 * checked against their types first (MOTE_RANGE: an int16 given 40000;
 * MOTE_TYPE: NULL in a non-nullable property, a vector of the wrong size);
 * a unique index violation gives MOTE_UNIQUE. On any error nothing is
 * written. Inside a transaction, the object's entries in non-unique indexes
 * are written together with the other puts' entries (a sorted batch per
 * index) when that index is next read or written, or at the commit; reads
 * see them as if written at once. An I/O or memory error while writing them
 * is reported by the call that triggered it (a query, say) and fails the
 * transaction like any failed write.
 */
int mote_put(mote_txn *txn, mote_entity *e, uint64_t id, const mote_value *vals,
             unsigned mode, uint64_t *out_id);

/*
 * Put n objects; vals holds n * nprops values, object after object. Ids 0
 * get a contiguous block of new ids, written to ids_out[i] (ids[i] in,
 * may be NULL for all-new). Stops at the first error (the transaction then
 * holds the objects before it; abort to discard them). All-new objects, and
 * updates of existing objects of an entity without unique indexes, are
 * written as sorted batches (one descent per leaf of each tree); the result
 * is the same as one put per object.
 */
int mote_put_many(mote_txn *txn, mote_entity *e, size_t n, const uint64_t *ids,
                  const mote_value *vals, unsigned mode, uint64_t *ids_out,
                  size_t *done);

/* Partial update: set properties props[0..n) of object id to vals[0..n),
 * keeping the others; only the indexes of changed values are touched.
 * MOTE_NOTFOUND if there is no such object, MOTE_INVALID for an unknown
 * property, and the checks of mote_put (nothing written on error). */
int mote_update(mote_txn *txn, mote_entity *e, uint64_t id, const unsigned *props,
                const mote_value *vals, unsigned n);

/* Read one object into *out (valid like a mote_val; read properties with
 * mote_record_get); MOTE_NOTFOUND if absent. out may be NULL: "contains"
 * (then txn may be NULL too).
 * Several objects: one mote_get per id (each O(log n), no I/O for cached
 * pages). */
int mote_get(mote_txn *txn, mote_entity *e, uint64_t id, mote_record *out);

/* Remove one object with its index entries and to-many links;
 * MOTE_NOTFOUND if absent. */
int mote_remove(mote_txn *txn, mote_entity *e, uint64_t id);
/*
 * Remove the objects of ids[0..n) that exist, with their index entries and
 * links; absent ids (and repeats) are skipped. *removed (may be NULL) gets
 * the number removed. Two or more ids are removed as one sorted batch (one
 * descent per leaf, not per object).
 */
int mote_remove_many(mote_txn *txn, mote_entity *e, const uint64_t *ids, size_t n,
                     uint64_t *removed);
/* Remove every object of the entity (as one batch); *removed may be NULL.
 * The id sequence is kept: new objects do not reuse old ids. */
int mote_remove_all(mote_txn *txn, mote_entity *e, uint64_t *removed);
/* Number of objects, O(log n). */
int mote_count(mote_txn *txn, mote_entity *e, uint64_t *count);

/* Iterate all objects in id order: fn returns 0 to go on, non-zero to stop
 * (that value is returned). */
typedef int (*mote_record_fn)(void *ctx, const mote_record *rec);
int mote_scan(mote_txn *txn, mote_entity *e, mote_record_fn fn, void *ctx);

/* ---- Object layer: relations ------------------------------------------------
 *
 * A to-one property holds the id of a target object (set it like an int64;
 * 0 or NULL means none). A to-many property is a set of links from an object
 * to target objects, kept in link records with their reverse (backlinks), so
 * both directions are index lookups. Removing an object removes every to-many
 * link from or to it. A to-one value naming a removed object is left as it is
 * (reading the target then gives MOTE_NOTFOUND).
 */

/* Link src -> dst through to-many property `prop` of entity e (both objects
 * must exist; linking twice is a no-op). */
int mote_link(mote_txn *txn, mote_entity *e, unsigned prop, uint64_t src, uint64_t dst);
/* Remove that link; MOTE_NOTFOUND if absent. */
int mote_unlink(mote_txn *txn, mote_entity *e, unsigned prop, uint64_t src, uint64_t dst);
/* Targets of src through a to-one or to-many property, in id order, as a
 * malloc'd array (free with mote_free). */
int mote_links(mote_txn *txn, mote_entity *e, unsigned prop, uint64_t src, uint64_t **ids,
               size_t *n);
/* Sources that point at dst (an object of the property's target entity)
 * through property `prop` of e, in id order (backlinks). */
int mote_backlinks(mote_txn *txn, mote_entity *e, unsigned prop, uint64_t dst,
                   uint64_t **ids, size_t *n);

/* ---- Object layer: queries ------------------------------------------------- */

/* Condition operators */
enum {
    MOTE_EQ = 1, MOTE_NE, MOTE_LT, MOTE_LE, MOTE_GT, MOTE_GE,
    MOTE_BETWEEN,     /* two values: lo <= x <= hi */
    MOTE_IN, MOTE_NOT_IN,
    MOTE_IS_NULL, MOTE_NOT_NULL,
    MOTE_STARTS_WITH, MOTE_ENDS_WITH, MOTE_CONTAINS
};
#define MOTE_Q_NOCASE 0x1u  /* strings: case-insensitive (ASCII + Latin-1) for EQ,
                               NE, IN, NOT IN and the three string operators */
#define MOTE_PROP_ID 0xFFFFFFFFu /* as `prop` of a condition: the object id
                                    (values in v.i; EQ..BETWEEN, IN, NOT IN) */
#define MOTE_Q_DESC 0x1u    /* order: descending */
#define MOTE_Q_NULLS_LAST 0x2u /* order: NULLs after the values (default:
                                  before), in either direction */

/*
 * A query is built once and run many times. Conditions are nodes: leaves
 * compare a property; mote_query_and/or combine nodes; mote_query_where
 * sets the root (no root: all objects). Values are copied. Node ids are
 * small ints >= 0. mote_query_set changes a leaf's value(s) for re-runs.
 */
int mote_query_new(mote_entity *e, mote_query **out);
void mote_query_free(mote_query *q);
int mote_query_cond(mote_query *q, unsigned prop, int op, const mote_value *vals,
                    size_t nvals, unsigned flags, int *node);
int mote_query_and(mote_query *q, const int *nodes, size_t n, int *node);
int mote_query_or(mote_query *q, const int *nodes, size_t n, int *node);
int mote_query_where(mote_query *q, int node);
/* A condition across a relation: objects whose to-one target, or any of
 * whose to-many targets, match `sub` (a query on the target entity, which
 * must outlive q; its order, offset and limit are ignored). */
int mote_query_link(mote_query *q, unsigned prop, mote_query *sub, int *node);
int mote_query_set(mote_query *q, int node, const mote_value *vals, size_t nvals);
/* Order by properties, in the order of calls (MOTE_Q_DESC,
 * MOTE_Q_NULLS_LAST); ties by id. Without an order, results come in id
 * order. Decimal, JSON, vector and to-many properties have no order:
 * MOTE_TYPE. */
int mote_query_order(mote_query *q, unsigned prop, unsigned flags);
/* Skip `offset` matches, then return at most `limit` (0 = no limit). */
int mote_query_limit(mote_query *q, uint64_t offset, uint64_t limit);

/*
 * Run the query in `txn` (read or write) and call fn for each match, in
 * order; fn returns 0 to go on, non-zero to stop (that value is returned).
 * Records are valid during the call only. The query object is not changed
 * by running and may be run again; it must not run on two threads at once.
 */
int mote_query_find(mote_txn *txn, mote_query *q, mote_record_fn fn, void *ctx);
/*
 * Projection: the matches as rows of chosen properties (MOTE_PROP_ID gives
 * the id, in v.i), in the query's order, offset and limit. fn gets the id
 * and nprops values; strings and bytes point into the store's pages and are
 * valid only during the call. fn returns 0 to go on, non-zero to stop (that
 * value is returned). MOTE_INVALID for an unknown property.
 */
typedef int (*mote_row_fn)(void *ctx, uint64_t id, const mote_value *vals, size_t n);
int mote_query_project(mote_txn *txn, mote_query *q, const unsigned *props, size_t nprops,
                       mote_row_fn fn, void *ctx);
/* Ids of the matches, in order, into a malloc'd array *ids of *n entries
 * (free with mote_free; NULL when there are none). */
int mote_query_ids(mote_txn *txn, mote_query *q, uint64_t **ids, size_t *n);
/* Number of matches (offset and limit apply); O(log n) for a condition that
 * is exactly one index range, else one pass over the candidates. */
int mote_query_count(mote_txn *txn, mote_query *q, uint64_t *count);
/* Remove the matches (write txn; offset and limit apply), as one batch;
 * *removed (may be NULL) gets their number. */
int mote_query_remove(mote_txn *txn, mote_query *q, uint64_t *removed);
/* Aggregates over the matches (offset and limit apply). */
enum {
    MOTE_AGG_MIN = 1,      /* smallest non-NULL value (any orderable type) */
    MOTE_AGG_MAX,          /* largest non-NULL value */
    MOTE_AGG_SUM,          /* integers: exact int64 (MOTE_RANGE on overflow);
                              floats: double */
    MOTE_AGG_AVG,          /* double, of numeric properties */
    MOTE_AGG_COUNT,        /* number of non-NULL values */
    MOTE_AGG_COUNT_DISTINCT /* number of distinct non-NULL values */
};
/*
 * Compute one aggregate of property `prop` over the query's matches. *out is
 * NULL when no non-NULL value matched (MIN/MAX/SUM/AVG); COUNT results are in
 * out->v.i. For MIN/MAX of strings and bytes, out points into memory owned
 * by the query, valid until its next use. *n (may be NULL) receives the
 * number of non-NULL values aggregated.
 */
int mote_query_aggregate(mote_txn *txn, mote_query *q, unsigned prop, int agg,
                         mote_value *out, uint64_t *n);

/*
 * Count the matches per value of property `prop` (offset and limit apply):
 * fn gets each distinct value once, in value order (NULL first, as a value
 * with null = 1), with the number of matches that hold it; it returns 0 to
 * go on, non-zero to stop (that value is returned). Strings and bytes are
 * valid during the call only. MOTE_TYPE for a decimal, JSON, vector or
 * to-many property. A query without conditions, offset or limit on an
 * indexed property walks that index once, reading one record per distinct
 * value; otherwise one pass over the matches.
 */
typedef int (*mote_group_fn)(void *ctx, const mote_value *value, uint64_t count);
int mote_query_group_count(mote_txn *txn, mote_query *q, unsigned prop, mote_group_fn fn,
                           void *ctx);

/* How the query runs: "index" (a condition's index), "index order" (walks
 * the index of the order property), "id range" (a scan bounded by id
 * conditions) or "scan"; "invalid" for a NULL query. Static string. */
const char *mote_query_plan(mote_txn *txn, mote_query *q);

/* Free memory the library returned (mote_query_ids, mote_links, ...). */
void mote_free(void *p);

/* ---- Maintenance --------------------------------------------------------- */

/*
 * Full consistency check of the latest commit: every page reachable once,
 * checksums, births and page numbers, key order, counts, the allocation
 * bitmap; and for the object layer: every record readable, every index
 * entry matching an object and every object in each of its indexes.
 * Returns MOTE_OK if consistent, MOTE_CORRUPT if not; each problem found is
 * passed to `report` (may be NULL) as one line of text.
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
