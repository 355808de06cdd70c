/*
 * object.h — private structures of the object layer: entities and their
 * schema (schema.c), records and index keys (record.c), object operations
 * (object.c) and queries (query.c). Everything is stored in kv trees:
 *
 *   "@schema"        entity name -> schema record (below)
 *   "@seq"           entity id (u32 BE) -> an id at or above every id handed
 *                    out before the last removal (u64; with the object
 *                    tree's last id, the sequence: object.c, "Ids")
 *   "@o:<name>"      object id (u64 BE) -> record; its kv tree id is the
 *                    entity id
 *   "@i:<eid>:<pid>" index entries: enc(value) + id (u64 BE) -> "" ;
 *                    unique: enc(value) -> id (NULLs as in non-unique)
 *   "@l:<eid>:<pid>" to-many links: src id + dst id (u64 BE each) -> ""
 *   "@b:<eid>"       backlinks into entity eid: dst id + source entity id
 *                    (u32 BE) + property id (u16 BE) + src id -> ""
 *   "@h:<eid>:<pid>" a vector property's HNSW graph (hnsw.c):
 *                    "m" -> the index's state: u8 format (1), u8 distance,
 *                      u16 m, u16 ef_construction, u32 dim, u64 generation
 *                      (+1 per transaction that changed it), u64 stamp
 *                      (unique per such transaction), u64 nodes, u64 entry
 *                      node's id (0: none), u8 top level
 *                    "n" + id (u64 BE) -> one node: u8 level, then per
 *                      level from 0: varint count, the neighbours' ids
 *                      ascending as varints (the first, then differences)
 *   "@t:<eid>:<pid>" a string property's full-text index (text.c): totals,
 *                    per-term document counts, blocks of postings,
 *                    documents' lengths
 *
 * RECORD (one object's value)
 *   varint layout number
 *   null bitmap, one bit per slot of that layout
 *   fixed area: each slot at a fixed offset: bool/int8 1 byte, int16 2,
 *     int32/float32/date 4, int64/float64/timestamp 8, and for variable
 *     types (string, bytes, decimal, JSON, vector) the u32 end offset of the
 *     value inside the variable area
 *   variable area: the variable values, in slot order
 * To-one relations are int64 slots; to-many relations have no slot.
 * Any property is reached in O(1): the layout gives its slot's offset, and
 * a variable value starts where the previous variable slot ends. A layout
 * is the ordered list of (property id, type) at the time of writing; the
 * schema keeps every layout ever used, so old records stay readable and a
 * schema change rewrites nothing.
 *
 * SCHEMA RECORD
 *   u32 format (2), u32 entity id, u16 next property id, u16 nprops,
 *   per property: u16 id, u8 type, u8 flags, u32 dim, u8 name length, name,
 *     for relations u8 target name length, target name,
 *     u8 number of former names (at most MAX_FORMER), each u8 length, name
 *   u16 nlayouts, per layout: u16 nslots, per slot: u16 property id, u8 type
 *   u64 hash of the definition that wrote the record (names, types, flags,
 *     dims, targets, in order; 0: none): its properties are the record's
 *     first ones, in its order; the rest are kept properties
 * Format 1 (read, never written) has no former names.
 *
 * KEPT PROPERTIES. The stored schema is the union of every property ever
 * declared and not dropped with mote_entity_drop_prop. A definition that
 * lacks some of them opens the entity without changing it: its handle has
 * the definition's properties first (nprops, the API's indexes), then the
 * kept ones (up to nall). Kept properties have slots in the current layout,
 * their indexes and links are maintained, updates carry their values over
 * unchanged, and new objects hold NULL in them (a NULL in a property that
 * is not nullable reads as absent: zero or empty, *absent = 1).
 *
 * INDEX KEY ENCODING (order-preserving): 0x00 = NULL (sorts first), else
 * 0x01 then: integers, bools, dates, timestamps as 8 bytes big-endian with
 * the sign bit flipped; floats as 8 bytes of the double with the usual
 * sign transform; strings and bytes escaped (0x00 -> 0x00 0xFF) and ended
 * by 0x00 0x00, cut after IDX_MAX_VALUE bytes (then without the end mark;
 * queries re-check such values on the record).
 */
#ifndef MOTE_OBJECT_H
#define MOTE_OBJECT_H

#include "kv.h"

#define IDX_MAX_VALUE 400u   /* encoded value bytes kept in an index key */
#define MAX_PROPS 1000u
#define MAX_FORMER 8u        /* former names a property remembers */
/* Automatic ids stay below this; explicit ids may be anything from 1. */
#define AUTO_ID_LIMIT (1ull << 63)

typedef struct mprop {
    char *name;
    uint16_t id;
    uint8_t type;
    uint8_t flags;
    uint32_t dim;
    uint32_t index_tree; /* kv tree of its index, 0 if none */
    char *target;        /* relations: the target entity's name */
    uint32_t link_tree;  /* to-many: "@l:<eid>:<pid>", src+dst -> "" */
    /* relations: the target entity's id as looked up in write transaction
     * tgt_serial when the next new tree id was tgt_next_tree (valid while
     * both match; the lookup is a catalog descent) */
    uint64_t tgt_serial;
    uint32_t tgt_next_tree, tgt_eid;
    /* MOTE_P_HNSW: the vector index's distance (MOTE_DIST_*), links per node
     * and construction breadth, and its tree ("@h:<eid>:<pid>", 0 if none) */
    uint8_t hmetric;
    uint16_t hm, hefc;
    uint32_t vindex_tree;
    uint32_t text_tree;  /* MOTE_P_FULLTEXT: "@t:<eid>:<pid>", 0 if none */
    /* MOTE_T_JSON with MOTE_P_INDEXED: the path whose values index_tree
     * holds (mote__json_index_enc): its text, and compiled (NULL if none) */
    char *jpath_text;
    struct jpath *jp;
} mprop;

typedef struct mlayout {
    uint32_t n;          /* slots */
    uint16_t *pid;
    uint8_t *type;
    uint32_t *off;       /* offset of each slot in the fixed area */
    int32_t *prev_var;   /* previous variable slot, -1 if none */
    int32_t last_var;    /* last variable slot, -1 if none */
    uint32_t fixed;      /* bytes of the fixed area */
    int32_t *slot_of;    /* property index (< nall) -> slot, -1 if absent */
} mlayout;

struct mote_entity {
    mote_store *s;
    char *name;
    uint32_t eid;        /* = object tree id */
    uint32_t seq_tree;
    unsigned nprops;     /* the definition's properties (the API's) */
    unsigned nall;       /* nprops + kept properties (see KEPT PROPERTIES) */
    mprop *props;        /* definition order, then the kept ones */
    int vindexes;        /* some property has a vector index (MOTE_P_HNSW) */
    int tindexes;        /* some property has a full-text index (MOTE_P_FULLTEXT) */
    int expires;         /* the property holding the expiry time (MOTE_P_EXPIRES),
                            -1 if none: see "EXPIRY" in object.c */
    unsigned nlayouts;
    mlayout *layouts;    /* the last one is the current layout */
    uint64_t hash;       /* of the definition (0: opened as stored) */
    uint64_t rec_hash;   /* of the schema record it was built from */
    struct mote_entity *next; /* store's list, freed at close */
    mote_txn *pending_txn;    /* created/changed by this uncommitted txn */
    struct mote_entity *pending_next;
    int dead;                 /* its transaction aborted */
    /* the schema record was rewritten (another definition, a dropped
     * property): by write transaction stale_serial, or committed (stale) */
    uint64_t stale_serial;
    int stale;
    /* id sequence cached for one write transaction (serial): as stored in
     * @seq, and the highest id in use or handed out; saved to @seq before
     * the transaction commits if it removed objects (seq_dirty) and that
     * highest id is no longer the object tree's last (object.c, "Ids") */
    uint64_t seq_serial, seq_stored, seq_hi;
    int seq_dirty;
    struct mote_entity *seq_next_dirty;
    /* the backlink tree of this entity ("@b:<eid>", 0 = none) as looked up
     * in write transaction bl_serial when the next new tree id was
     * bl_next_tree: valid while both match (such trees are never dropped) */
    uint64_t bl_serial;
    uint32_t bl_next_tree, bl_tree;
};

/* The object layer's state of a store (s->objects, zeroed, in the store's
 * block: store.c asks the pager for room for it):
 * its entity handles, and the state of its write transaction (one at a
 * time), kept from one write transaction to the next so that the record
 * buffers are reused. Read transactions need none. */
typedef struct objtxn {
    mote_entity *new_entities; /* created or evolved by it, until it ends */
    mote_entity *seq_dirty;    /* entities it removed objects of (id sequences
                                  to save, see seq_hi) */
    uint8_t *obuf, *oldbuf;    /* an encoded record; a copy of an old one */
    size_t obuf_cap, oldbuf_cap;
    struct textw *text;        /* full-text changes to write before the commit
                                  (text.c), one per index it changed */
    size_t ntext, text_cap;
} objtxn;

typedef struct objstore {
    mote_entity *entities; /* every handle, freed at close (under s->mu) */
    objtxn writer;
    struct hstate *hnsw;   /* vector indexes (hnsw.c), NULL until one is used */
} objstore;

static inline objstore *OBJ(const mote_store *s) { return (objstore *)s->objects; }
/* The object state of write transaction t. */
static inline objtxn *OTX(const mote_txn *t) { return &OBJ(t->s)->writer; }

/* store.c: free what the object layer's state holds (the store closes). */
void mote__objects_detach(mote_store *s);
/* text.c: full-text indexes in the object layer. Note that object id's
 * value v of property p (with a full-text index) enters the index (add) or
 * leaves it; a NULL value is not indexed. The notes are written by
 * mote__text_flush (before the commit, and before a search in the same
 * transaction); mote__text_reset drops them (the transaction ends);
 * mote__text_free frees their memory (the store closes). */
int mote__text_note_value(mote_txn *t, const mprop *p, uint64_t id, const mote_value *v,
                          int add);
int mote__text_flush(mote_txn *t);
/* Write the notes of every index whose batch holds TEXT_BATCH_MAX entries
 * or more (memory stays bounded in a transaction that writes many texts).
 * Only where no record read from a page is used afterwards: a write moves
 * pages (the ends of operations, notes of values that are copies). */
int mote__text_flush_big(mote_txn *t);
void mote__text_reset(objtxn *x);
void mote__text_free(objtxn *x);
/* Before a write transaction commits: bring its vector indexes up to date
 * and save the id sequences it changed. */
int mote__entities_flush(mote_txn *t);
/* What a write transaction's end settles, taken from the writer's state
 * while it still holds the writer lock: the next writer may begin before
 * the commit is durable and this one ends (group commit). */
typedef struct objend {
    uint64_t serial;
    mote_entity *new_entities; /* created or evolved by it */
    mote_entity *seq_dirty;    /* id sequences it did not save */
    struct hwrite *hnsw;       /* its work on vector indexes */
} objend;
void mote__objects_take(mote_txn *t, objend *out);
/* The write transaction ended: the handles it created or evolved become
 * usable, or dead if it did not commit; the ones it superseded, stale if it
 * did; its vector index changes become the images' versions, or go. */
void mote__objects_end(mote_store *s, objend *taken, int committed);

/*
 * Implicit transactions: object-layer calls given txn == NULL run in their
 * own transaction on the entity's store, committed (durably, for writes)
 * when the call succeeds and rolled back when it fails:
 *     IMPLICIT(t, e, 1, mote_remove(t_, e, id));
 * returns from the calling function when t is NULL; `expr` is the same call
 * on the transaction t_.
 */
/* Read object id through cursor oc on e's object tree (MOTE_NOTFOUND if
 * absent): ascending ids mostly stay in one leaf, where the cursor's seek is
 * a local search instead of a descent. No transaction checks: the caller's
 * loop makes them (it opened oc, and steps a checked cursor or calls no user
 * code between fetches). */
int mote__obj_seek(const mote_entity *e, mote_cursor *oc, uint64_t id, mote_record *r);
int mote__implicit_begin(const mote_entity *e, int write, mote_txn **t);
int mote__implicit_end(mote_txn *t, int rc);
#define IMPLICIT(t, e, write, expr)                                                       \
    do {                                                                                  \
        if (!(t)) {                                                                       \
            mote_txn *t_;                                                                 \
            int rc_ = mote__implicit_begin((e), (write), &t_);                            \
            return rc_ ? rc_ : mote__implicit_end(t_, (expr));                            \
        }                                                                                 \
    } while (0)

static inline int type_is_var(int t)
{
    return t == MOTE_T_STRING || t == MOTE_T_BYTES || t == MOTE_T_DECIMAL ||
           t == MOTE_T_JSON || t == MOTE_T_VECTOR;
}
/* Does v (a vector property's value) hold a vector? Not when NULL, nor when
 * the record predates the property (a non-nullable one reads as 0 bytes). */
static inline int has_vector(const mote_value *v) { return !v->null && v->v.s.n; }
static inline int type_is_float(int t) { return t == MOTE_T_FLOAT32 || t == MOTE_T_FLOAT64; }
static inline int type_is_rel(int t) { return t == MOTE_T_TOONE || t == MOTE_T_TOMANY; }
static inline int type_indexable(int t)
{
    return t != MOTE_T_DECIMAL && t != MOTE_T_JSON && t != MOTE_T_VECTOR &&
           t != MOTE_T_TOMANY;
}
uint32_t mote__type_size(int t); /* fixed-area bytes of a slot */
const char *mote__type_name(int t);

/* record.c */
/* Check and normalise a value for a property: MOTE_RANGE / MOTE_TYPE. */
int mote__value_check(const mprop *p, const mote_value *v, const char *entity);
/* Encode vals (current definition order) with the current layout. The
 * buffer grows as needed (*buf, *cap owned by the caller). */
int mote__record_encode(const mote_entity *e, const mote_value *vals, uint8_t **buf,
                        size_t *cap, size_t *len);
/* The two halves of it: the record's size (MOTE_TOOBIG over the limit),
 * then the record written to r, which has room for that size. */
int mote__record_size(const mote_entity *e, const mote_value *vals, size_t *len);
void mote__record_write(const mote_entity *e, const mote_value *vals, uint8_t *r);
/* Structural check of a record against its layout (damaged data gives
 * MOTE_CORRUPT, never a bad read). */
int mote__record_check(const mote_entity *e, const uint8_t *rec, size_t len);
/* Check a record and fill r (with its parsed layout, so that property
 * reads do not parse the header again). */
int mote__record_init(mote_record *r, const mote_entity *e, const uint8_t *rec, size_t len,
                      uint64_t id);
/* Index key part for a value (enc); returns its length; *cut = 1 if the
 * value was longer than IDX_MAX_VALUE. out has room for IDX_MAX_VALUE+16. */
size_t mote__index_enc(int type, const mote_value *v, uint8_t *out, int *cut);
/*
 * Index keys of a JSON property indexed on a path (mote_prop_def.json_path):
 * the value at the path, NULL (absent, JSON null, a NULL property) as 0x00,
 * else 0x01 and a kind: JKEY_NUMBER (numbers, true as 1, false as 0) and 8
 * bytes that order as the double does (a number past 2^53 keys as its
 * nearest double: conditions read a range around it and check each
 * record); JKEY_STRING and the decoded string as strings are keyed;
 * JKEY_OTHER (arrays, objects: no condition reads them).
 */
enum { JKEY_NUMBER = 0x10, JKEY_STRING = 0x20, JKEY_OTHER = 0x30 };
struct jpath;
size_t mote__json_index_enc(const struct jpath *jp, const mote_value *v, uint8_t *out);
size_t mote__json_num_key(double d, uint8_t *out);
size_t mote__json_str_key(const void *s, size_t n, uint8_t *out, int *cut);
/* Expiry (object.c "EXPIRY"): the transaction's clock in nanoseconds since
 * 1970 (read at its first call in the transaction), and whether record r's
 * entity has an expiry time that r has reached by `now`. */
int64_t mote__txn_now(mote_txn *t);
int mote__expired(const mote_record *r, int64_t now);
/* Compare two values of one type (not NULL): <0, 0, >0. Floats: NaN last. */
int mote__value_cmp(int type, const mote_value *a, const mote_value *b);

/* object.c */
void mote__entities_free(mote_store *s);
int mote__index_add(mote_txn *t, const mote_entity *e, const mprop *p, const mote_value *v,
                    uint64_t id);
int mote__obj_tree_key(uint64_t id, uint8_t *k);
/* Remove these ids (missing ones are skipped); *removed may be NULL. */
int mote__remove_ids(mote_txn *t, mote_entity *e, const uint64_t *ids, size_t n,
                     uint64_t *removed);

/* Usable in this transaction? MOTE_SCHEMA if not (aborted, or pending in
 * another transaction). */
int mote__entity_usable(const mote_entity *e, const mote_txn *t);

/* Check objects against their indexes and links (mote_check). */
int mote__check_objects(mote_txn *t, mote_problems *pr);

/* object.c, shared with relation.c: the checks of every object call
 * (transaction and entity given, same store, writable if `write`, entity
 * usable); a write's result (a failure that may have changed the
 * transaction fails it); a u64 compare for qsort. */
int mote__obj_check(mote_txn *t, mote_entity *e, int write);
int mote__obj_write_result(mote_txn *t, int rc);
int mote__cmp_u64(const void *a, const void *b);
/* Sort n ids in place and keep each once; how many are left. */
size_t mote__sort_unique_u64(uint64_t *s, size_t n);

/* object.c, for objcheck.c: every property's value of a record (nall of
 * them); the index key of value v of object id (returns its length); the
 * entity's id sequence as stored (0 if none). */
int mote__decode_all(const mote_entity *e, const uint8_t *rec, size_t len, uint64_t id,
                     mote_value *vals);
size_t mote__index_key(const mprop *p, const mote_value *v, uint64_t id, uint8_t *key);
int mote__read_seq(mote_txn *t, mote_entity *e, uint64_t *seq);

/* hnsw.c: vector indexes (MOTE_P_HNSW). Nearest queries on an index of
 * fewer nodes compare every vector (unless told to use the index); the
 * default search breadth. */
#define MOTE_HNSW_EXACT_BELOW 2048u
#define MOTE_HNSW_EF 64u
struct hwrite;
/* Object id's vector in property prop changed (put, update, remove): the
 * index is brought up to date at the flush. */
int mote__hnsw_note(mote_txn *t, mote_entity *e, unsigned prop, uint64_t id);
/* Apply the write transaction's notes to its indexes (before the commit,
 * and before an index search in it); on error the transaction is failed. */
int mote__hnsw_flush(mote_txn *t);
/* The index of (eid, pid) is dropped or made again in t: its notes and
 * changes in t go. */
void mote__hnsw_forget(mote_txn *t, uint32_t eid, uint16_t pid);
/* The number of nodes of e's property prop's index as t sees it (0: none
 * or empty). */
int mote__hnsw_size(mote_txn *t, const mote_entity *e, unsigned prop, uint64_t *n);
/* mote check of e's property prop's index: nodes well formed, each of an
 * object with a vector (nvec of them in all), links to nodes of their
 * level, the entry on the top level, counts. */
int mote__hnsw_check(mote_txn *t, const mote_entity *e, unsigned prop, uint64_t nvec,
                     mote_problems *pr);
struct hwrite *mote__hnsw_take(mote_txn *t);
void mote__hnsw_end(struct hwrite *taken, int committed);
void mote__hnsw_detach(mote_store *s);
/* A search through a vector index (mote__hnsw_nearest). */
typedef struct hnear {
    const float *vec;   /* the query vector (the property's dim floats) */
    int metric;         /* MOTE_DIST_* */
    uint64_t want;      /* results wanted */
    unsigned ef;        /* breadth (0: MOTE_HNSW_EF) */
    int force;          /* search whatever the index's size */
    int (*accept)(void *ctx, uint64_t id); /* a filter or NULL: 1 take, 0 pass
                                               by, < 0 -(error) */
    void *actx;
    /* optional: a result's exact distance from the stored vector (its row
     * in the index's image), called under the index's lock */
    double (*rowdist)(void *ctx, const uint8_t *row);
    void *dctx;
    /* out: up to want ids, nearest first (malloc'd), their distances
     * (malloc'd, NULL without rowdist); served = 0 when the
     * index cannot answer (none for this metric, too small, a snapshot
     * older than the image in memory): the caller searches exactly */
    uint64_t *ids;
    double *dist;
    size_t n;
    int served;
} hnear;
int mote__hnsw_nearest(mote_txn *t, const mote_entity *e, unsigned prop, hnear *r);

/* relation.c: the backlink tree of an entity ("@b:<eid>"), a backlink key
 * (22 bytes), and whether object id is in the object tree `tree`. */
int mote__backlink_tree(mote_txn *t, uint32_t target_eid, int create, uint32_t *tree);
size_t mote__backlink_key(uint64_t dst, uint32_t eid, uint16_t pid, uint64_t src,
                          uint8_t *k);
int mote__obj_exists(mote_txn *t, uint32_t tree, uint64_t id);
/* Remove every to-many link from or to object id of e (object removal). */
int mote__links_cleanup(mote_txn *t, mote_entity *e, uint64_t id);
/* The entity id of a relation's target (0 if it does not exist yet). */
int mote__target_eid(mote_txn *t, const mprop *p, uint32_t *eid);

/* Remove what object layer data a dropped property had: the backlinks of a
 * to-many one's links, or its values (every object of e is written again by
 * e, whose schema no longer has it). Its index or link tree is the caller's. */
int mote__drop_prop_data(mote_txn *t, mote_entity *e, mprop *gone);

/* query.c, for aggregate.c: the entity of a query; no condition, offset or
 * limit?; the checks of a run (transaction of the query's store, entity
 * usable); the ids of the matches in order, offset and limit applied (a
 * malloc'd array); hand bytes (a MIN/MAX string result) to the query, which
 * frees them at its next use of this or at mote_query_free. */
mote_entity *mote__query_entity(const mote_query *q);
int mote__query_unbounded(const mote_query *q);
int mote__query_check(mote_txn *t, mote_query *q);
int mote__query_matches(mote_txn *t, mote_query *q, uint64_t **ids, size_t *n);
void mote__query_keep(mote_query *q, uint8_t *bytes);

/* schema.c */
int mote__schema_build_index(mote_txn *t, mote_entity *e, unsigned prop);

#endif
