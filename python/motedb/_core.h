/*
 * _core.h — what the C files of the motedb extension share: the field kinds,
 * the module state, the object structures and the functions one file calls
 * in another. Files: _core.c (module init), state.c (the state ST, errors,
 * entity info), values.c (Python <-> mote_value), json.c (JSON properties),
 * entity.c (metatype, Entity, Property, Order, Condition), store.c (Store,
 * transactions, operations), box.c (Box), query.c (Query). See _core.c for
 * the design.
 */
#ifndef MOTEDB_CORE_H
#define MOTEDB_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mote.h"

/* ---- kinds (shared with _schema.py) ----------------------------------------- */

enum {
    K_ID, K_BOOL, K_INT, K_FLOAT, K_STR, K_BYTES, K_DATETIME, K_DATE, K_DECIMAL, K_DICT,
    K_LIST, K_VECTOR, K_TOONE, K_TOMANY
};

extern const char *kind_expect[];

/* The module's state (state.c): the Python helpers motedb/__init__.py hands
 * over (_init), the exception classes, interned names. One instance, ST. */
typedef struct motedb_state {
    PyObject *prepare, *Decimal, *dumps, *loads, *scan, *missing, *rel_get, *rel_set,
        *after_put;
    PyObject *Error, *Locked, *Corrupt, *Schema, *Unique, *Closed, *NotFound, *Exists,
        *ReadOnly, *Busy, *Txn, *FileSystem, *Forked, *WouldBlock;
    PyObject *str_id, *str_utcoffset, *str_code;
} motedb_state;
extern motedb_state ST;

typedef struct FieldInfo {
    PyObject *name;      /* interned attribute name */
    PyObject *dflt;      /* default value, NULL if none */
    PyObject *factory;   /* default factory, NULL if none */
    Py_ssize_t offset;   /* slot offset in instances */
    int kind, mtype;
    unsigned flags, dim;
    int hdist;           /* vector index (MOTE_P_HNSW): its distance, else 0 */
    int64_t imin, imax;  /* integer range of the property type */
    const char *cname;   /* UTF-8 of name (owned by name) */
    char *renamed;       /* renamed_from, PyMem, or NULL */
    char *json_path;     /* an index on this path of a JSON property, PyMem, or NULL */
    PyObject *target;    /* relations: the target entity name (str), else NULL */
    /* The last value read of a str or Decimal property (values.c, memo_str
     * and memo_decimal), handed out again while the stored text repeats:
     * both are immutable */
    PyObject *memo;
    PyObject *put_dec, *put_text; /* Decimal: the last one put and its str() */
    uint16_t memo_skip;  /* values left to read without the memo (after misses) */
    uint8_t memo_miss;   /* misses in a row */
    uint8_t memo_n;      /* Decimal: the length of its text in memo_text */
    char memo_text[44];
} FieldInfo;

typedef struct EntityInfo {
    PyObject *name;      /* the entity name (class __name__) */
    const char *cname;
    Py_ssize_t nf;       /* properties (without the id) */
    FieldInfo *f;
    Py_ssize_t id_off;   /* slot offset of the id */
    Py_ssize_t store_off; /* slot of the store an object was loaded from / put to; -1: none */
    int has_tomany;      /* relations: call ST.after_put after a put */
    mote_prop_def *defs;
    /* The collector's view of an instance (entity.c, ent_traverse): the
     * slots that may hold what it follows (containers: dict, list and
     * vector properties, relations, the store), and the hidden slot that
     * is set once any other slot is given such an object (kept_slot). */
    Py_ssize_t gc_off;   /* the hidden slot; -1: none (every slot is visited) */
    Py_ssize_t nvisit, *visit;
} EntityInfo;

typedef struct {
    PyHeapTypeObject ht;
    EntityInfo *info;
} EntityTypeObject;

extern PyTypeObject EntityMeta_Type, EntityBase_Type, Property_Type, Cond_Type, Order_Type,
    Store_Type, Box_Type, Query_Type, Txn_Type, QueryIter_Type, JsonPath_Type;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* A value v that the application may have put in a slot of kind `kind`
 * (K_ID for the id): when the collector follows it and the slot's kind
 * holds no containers, the instance is marked so that ent_traverse
 * visits every slot from then on. */
static inline void kept_slot(PyObject *o, const EntityInfo *in, int kind, PyObject *v)
{
    if (in && in->gc_off >= 0 && v && kind <= K_DECIMAL && PyType_IS_GC(Py_TYPE(v)) &&
        !SLOT(o, in->gc_off))
        SLOT(o, in->gc_off) = Py_NewRef(Py_True);
}

/* entity.c */
typedef struct {
    PyObject_HEAD
    PyTypeObject *owner;  /* the entity class */
    PyObject *name;
    Py_ssize_t index;     /* field index; -1 = the id */
    Py_ssize_t offset;
} PropertyObject;

typedef struct {
    PyObject_HEAD
    PropertyObject *prop;
    unsigned flags; /* MOTE_Q_DESC | MOTE_Q_NULLS_LAST */
} OrderObject;

/* C_NEAR: Property.nearest(): prop, op = the distance (MOTE_DIST_*), vals =
 * (the vector as float32 bytes,), k, how (MOTE_NEAR_*) and ef. C_MATCH:
 * Property.matches(): prop, op = MOTE_MATCH_* flags, vals = (the text as
 * UTF-8 bytes,), k. Either (a ranked clause) only as the query's condition
 * or one conjunct of it (& , never | or ~); one of each per query at most
 * (both: hybrid search, fused by rank). */
/* C_JSON: a value inside a JSON property (Property[key]...): prop, op, vals
 * (Python values), path (the path text, mote_query_json's syntax). */
enum { C_LEAF, C_AND, C_OR, C_LINK, C_NEAR, C_MATCH, C_JSON };

typedef struct {
    PyObject_HEAD
    int kind;
    PropertyObject *prop; /* leaves */
    int op;
    unsigned flags;
    PyObject *vals;       /* leaves: tuple of values */
    PyObject *kids;       /* and/or: tuple of conditions */
    PyTypeObject *owner;  /* the entity class */
    uint64_t k;           /* C_NEAR: how many */
    int how;              /* C_NEAR: MOTE_NEAR_* */
    unsigned ef;          /* C_NEAR: the index search's breadth (0: default) */
    PyObject *path;       /* C_JSON: the path (str) */
    PyObject *shown;      /* C_JSON: the path as written, for repr ("['a'][0]") */
} CondObject;

/* A path into a JSON property (Note.meta["user"]["age"]): conditions on the
 * value there. */
typedef struct {
    PyObject_HEAD
    PropertyObject *prop;
    PyObject *path;  /* str: mote_query_json's syntax ("$[\"user\"][\"age\"]") */
    PyObject *shown; /* str: as written ("['user']['age']") */
} JsonPathObject;

/* The ranked clauses condition c holds: 1 a nearest(), 2 a matches(), 3
 * both (a hybrid query), 0 none. */
int cond_ranked(const CondObject *c);

/* store.c */
typedef struct TxnSlot {
    struct TxnSlot *next;
    unsigned long tid;
    mote_txn *txn;
    int write;
    int depth;   /* entered blocks (explicit transactions) */
    int doomed;  /* a nested block failed: roll back at the end */
    uint64_t serial; /* explicit transactions: unique per store (0: an Op's own) */
} TxnSlot;

typedef struct {
    PyObject_HEAD
    mote_store *s;
    PyObject *path;
    PyObject *boxes;    /* entity class -> Box */
    TxnSlot *txns;      /* transactions in progress, one per thread at most */
    int nexplicit;      /* store.write() / store.read() blocks in progress */
    int nimplicit;      /* single-operation transactions in progress */
    int npending;       /* boxes whose entity was opened in an uncommitted txn */
    int ndeferred;      /* boxes whose entity is to be registered (BoxObject.deferred) */
    int busy_ms;        /* the store's timeout (open's `timeout`) */
    int readonly;
    PyObject *weakrefs;
    uint64_t txn_serial;         /* the last explicit transaction's serial */
    struct QueryIterObject *iters; /* iterations holding a snapshot of their own */
    /* deferred durability (motedb.aio's writer thread: _defer_sync): the
     * single operations of thread defer_tid commit with mote_commit_nowait
     * and keep their tickets here until _wait_synced */
    unsigned long defer_tid;
    mote_ticket **tickets;
    Py_ssize_t ntickets, cap_tickets;
} StoreObject;

typedef struct {
    PyObject_HEAD
    StoreObject *store;
    PyTypeObject *cls;
    EntityInfo *info;
    mote_entity *e;     /* NULL: open it again (its transaction rolled back) */
    mote_txn *pending;  /* opened in this uncommitted write transaction */
    int superseded;     /* its class was redefined: store.box(new class) */
    int deferred;       /* its entity is new, or as before a rolled-back transaction that
                           created or changed it (settle_boxes): the first single write
                           operation that uses the box registers it; a read, a
                           store.write() block or an aio writer's write registers it
                           first (a commit of its own, MOTE_TXN_LAZY: register_deferred
                           in store.c) */
} BoxObject;

typedef struct {
    TxnSlot slot;
    TxnSlot *ts;
    int own;
} Op;

enum { OP_FAIL = 0, OP_COMMIT = 1, OP_NOCHANGE = 2 };

/* A write that failed after it may have changed the transaction: an outer
 * (explicit) transaction must then roll back at its end; an operation's own
 * transaction is rolled back by op_end anyway. */
static inline void op_doom(Op *op)
{
    if (!op->own)
        op->ts->doomed = 1;
}

typedef struct {
    PyObject_HEAD
    StoreObject *store;
    TxnSlot *slot;
    int write;
    int cached;  /* store.read(cached=True): reads only what the cache holds */
    int state;   /* 0 new, 1 entered, 2 exited */
    int joined;  /* entered inside another transaction of the thread */
    unsigned long tid;
} TxnObject;

/* query.c */
/* An iteration over a query's matches: the ids taken once, the objects built
 * one at a time from the same transaction (its own read snapshot, or the
 * thread's transaction it started in: serial). */
typedef struct QueryIterObject {
    PyObject_HEAD
    BoxObject *box;
    mote_entity *e;
    mote_txn *own;      /* its own read snapshot, or NULL */
    uint64_t serial;    /* else: the explicit transaction it runs in */
    uint64_t *ids;
    size_t n, next;
    struct QueryIterObject *link; /* store's list of iterations with `own` */
    int closed;         /* ended by store.close() */
} QueryIterObject;

void iter_end_all(StoreObject *st); /* store.close(): end the iterations */

typedef struct {
    PyObject_HEAD
    BoxObject *box;
    mote_query *mq;
    mote_entity *mqe;  /* the entity mq was built for */
    PyObject *cond;    /* root condition or NULL */
    PyObject *orders;  /* list of Order */
    uint64_t offset, limit;
    int limit_zero;
    int fuse;              /* a hybrid query's fusion (mote_query_fusion) and its argument */
    double fuse_arg;
    int busy;
    Py_ssize_t *leaf_prop; /* the leaves of the built query: property index */
    int *leaf_node;        /* and node id */
    Py_ssize_t nleaves, capleaves;
    PyObject *params;      /* property index -> values given to set_parameter() */
    int has_link;          /* relation conditions: built in each run's transaction */
    TxnSlot *ts;           /* the transaction q_build runs in (relation conditions) */
    PyObject *subs;        /* list of the Query objects of relation conditions */
} QueryObject;

/* state.c */
int state_exceptions(PyObject *m);
int raise_code(int rc, const char *prefix, const char *msg);
int raise_rc(int rc);
int raise_open_error(int rc);
EntityInfo *info_of_type(PyTypeObject *tp);
void info_free(EntityInfo *in);

/* values.c */
int to_value(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
             PyObject **keep, Py_ssize_t *nk, int put);
PyObject *from_value(const FieldInfo *f, const mote_value *v, int absent);
/* A vector value (a sequence of numbers, or a buffer of float32) as bytes
 * of dim little-endian float32s; ValueError for a wrong length. */
PyObject *vector_of(const char *ent, const FieldInfo *f, PyObject *v);
/* The first of n float32 values at p that is NaN or infinite (its index;
 * -1 if none), and what it is in *what ("NaN" or "infinite"). */
long vector_nonfinite(const char *p, unsigned n, const char **what);
PyObject *json_text(PyObject *v);
PyObject *json_value(const char *p, size_t n);
PyObject *build_obj(PyTypeObject *cls, const EntityInfo *in, const mote_record *r);
PyObject *record_field(const EntityInfo *in, const mote_record *r, Py_ssize_t i);

/* entity.c */
FieldInfo *prop_field(PropertyObject *p);
int set_slot(PyObject *o, const EntityInfo *in, Py_ssize_t off, int kind, PyObject *v);
int id_value(const char *ent, PyObject *v, mote_value *mv);
PyObject *cond_group(int kind, PyObject *a, PyObject *b);
PyObject *prop_order(PyObject *self, unsigned flags);

/* store.c */
TxnSlot *find_txn(StoreObject *st); /* the calling thread's transaction, or NULL */
/* write: 0 read, 1 write, 2 a write that registers an entity (MOTE_TXN_LAZY) */
int op_begin(StoreObject *st, int write, Op *op);
/* A read of its own that reads only cached pages (MOTE_TXN_CACHED): 1 begun,
 * 0 not (the thread is in a transaction: use op_begin), -1 an exception. */
int op_begin_cached(StoreObject *st, Op *op);
int op_end(StoreObject *st, Op *op, int how);
PyObject *store_box(PyObject *self, PyObject *cls);
/* SchemaError for a class that does not match the stored schema (rc from
 * mote_entity_open), said in Python terms. Returns -1. */
int schema_error(StoreObject *st, int rc);

/* box.c */
PyObject *box_build(BoxObject *b, const mote_record *r);
int after_put(BoxObject *b, PyObject *obj, uint64_t id);
int box_entity(BoxObject *b, TxnSlot *ts);
void box_undefer(BoxObject *b);
int registering_wait(BoxObject *b, double *deadline);
int box_op_begin(BoxObject *b, int write, Op *op);
void release_keep(PyObject **keep, Py_ssize_t nk);

/* query.c: a Query of box b (query(*conditions)) */
PyObject *query_new(BoxObject *b, PyObject *args);

int values_init(void); /* values.c: imports the datetime C API */

#endif
