/*
 * object.c — object operations: put (insert/update/upsert, one or many, the
 * many as sorted batches), partial update, get, remove, count, scan; ids;
 * index maintenance; kept properties carried over (object.h); dropping a
 * property's data. The object layer's state per store and its settling at a
 * transaction's end. Relations are in relation.c, the objects' part of
 * mote_check in objcheck.c.
 *
 * Ids: automatic ids are one more than both the highest id below 2^63 in
 * the object tree and the id sequence kept in "@seq", so ids of removed
 * objects are not reused; explicit ids may be anything from 1. A put does not
 * write "@seq" (the object tree's last key already says what it handed out):
 * a transaction that removed objects does, at its end, when the highest id it
 * handed out or found is no longer in the tree. One leaf less per commit of
 * puts (the sequence's entry is rarely in the leaf the new objects go to). A put
 * first checks every value and every unique index, then writes: a failed put
 * writes nothing.
 *
 * EXPIRY. A timestamp property flagged MOTE_P_EXPIRES holds the time an
 * object expires (NULL: never). Reads compare it with the transaction's
 * clock (CLOCK_REALTIME, read once, at the transaction's first question, so
 * a transaction's view does not change while it runs): an object whose time
 * is at or before it is gone. Reads leave it out: get, count, scan and
 * queries (query.c checks every candidate's record, and its plans that would
 * not read records do). Writes that meet it remove it first and go on as if
 * it were not there: a put of its id inserts a new object, a put whose
 * unique value it holds takes the value, a remove removes it and says it was
 * not found, an update does not find it. Otherwise it stays on disk until
 * mote_sweep removes it. The property's index makes both the count of
 * expired objects (two ranks) and the sweep (a walk over the expired
 * entries) cost O(log n) and O(expired), not a scan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "object.h"

int mote__entity_usable(const mote_entity *e, const mote_txn *t)
{
    if (store_forked(e->s))
        return mote__forked_err(e->s);
    if (e->dead)
        return mote__err(MOTE_SCHEMA, "entity %s: the transaction that created or "
                         "changed it was rolled back; open it again", e->name);
    if (e->stale || (e->stale_serial && t && e->stale_serial == t->serial))
        return mote__err(MOTE_SCHEMA, "entity %s: its stored schema was changed after this "
                         "handle was opened (by another definition, or a dropped "
                         "property); open it again", e->name);
    if (e->pending_txn && e->pending_txn != t)
        return mote__err(MOTE_SCHEMA, "entity %s: its creation or change is not "
                         "committed yet", e->name);
    return MOTE_OK;
}

void mote__objects_take(mote_txn *t, objend *out)
{
    objtxn *x = OTX(t);
    out->serial = t->serial;
    out->new_entities = x->new_entities;
    out->seq_dirty = x->seq_dirty;
    x->new_entities = NULL;
    x->seq_dirty = NULL;
    mote__text_reset(x); /* written before a commit; an abort drops them */
    out->hnsw = mote__hnsw_take(t);
}

void mote__objects_end(mote_store *s, objend *taken, int committed)
{
    pthread_mutex_lock(&s->mu); /* other threads look handles up */
    if (taken->new_entities) /* it may have superseded handles (schema.c) */
        for (mote_entity *e = OBJ(s)->entities; e; e = e->next)
            if (e->stale_serial && e->stale_serial == taken->serial) {
                e->stale = committed;
                e->stale_serial = 0;
            }
    for (mote_entity *e = taken->new_entities; e; e = e->pending_next) {
        e->pending_txn = NULL;
        if (!committed)
            e->dead = 1;
    }
    pthread_mutex_unlock(&s->mu);
    for (mote_entity *e = taken->seq_dirty; e; e = e->seq_next_dirty) /* not saved */
        e->seq_dirty = 0;
    mote__hnsw_end(taken->hnsw, committed);
}

void mote__objects_detach(mote_store *s)
{
    objstore *o = OBJ(s);
    mote__hnsw_detach(s);
    mote__entities_free(s);
    mote__free(o->writer.obuf);
    mote__free(o->writer.oldbuf);
    mote__text_free(&o->writer);
    memset(o, 0, sizeof *o);
}

int mote__implicit_begin(const mote_entity *e, int write, mote_txn **t)
{
    if (!e)
        return mote__err(MOTE_INVALID, "entity or query is NULL");
    return mote_begin(e->s, write ? 0 : MOTE_TXN_RDONLY, t);
}

int mote__implicit_end(mote_txn *t, int rc)
{
    if (rc == MOTE_OK)
        return mote_commit(t);
    mote_abort(t);
    return rc;
}

int mote__obj_seek(const mote_entity *e, mote_cursor *oc, uint64_t id, mote_record *r)
{
    mote_val v;
    int rc = mote__cursor_find_id(oc, id, &v);
    return rc ? rc : mote__record_init(r, e, v.data, v.size, id);
}

int mote__obj_check(mote_txn *t, mote_entity *e, int write)
{
    if (!t || !e)
        return mote__err(MOTE_INVALID, "transaction or entity is NULL");
    if (e->s != t->s)
        return mote__err(MOTE_INVALID, "entity %s belongs to another store", e->name);
    if (write && !t->write)
        return mote__err(MOTE_READONLY, "write in a read-only transaction");
    return mote__entity_usable(e, t);
}

int mote__obj_tree_key(uint64_t id, uint8_t *k)
{
    mote__wr_be64(k, id);
    return 8;
}

/* ---- ids ------------------------------------------------------------------------ */

int mote__read_seq(mote_txn *t, mote_entity *e, uint64_t *seq)
{
    uint8_t k[4] = {(uint8_t)(e->eid >> 24), (uint8_t)(e->eid >> 16), (uint8_t)(e->eid >> 8),
                    (uint8_t)e->eid};
    mote_val v;
    *seq = 0;
    if (!e->seq_tree)
        return MOTE_OK;
    int rc = mote_kv_get(t, e->seq_tree, k, 4, &v);
    if (rc == MOTE_OK && v.size == 8)
        *seq = rd64(v.data);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

static int write_seq(mote_txn *t, mote_entity *e, uint64_t seq)
{
    uint8_t k[4] = {(uint8_t)(e->eid >> 24), (uint8_t)(e->eid >> 16), (uint8_t)(e->eid >> 8),
                    (uint8_t)e->eid};
    uint8_t v[8];
    wr64(v, seq);
    if (!e->seq_tree) { /* the handle came from a read transaction */
        int rc = mote_kv_tree(t, "@seq", MOTE_TREE_CREATE, &e->seq_tree);
        if (rc)
            return rc;
    }
    return mote_kv_put(t, e->seq_tree, k, 4, v, 8, 0);
}

/* The highest id below AUTO_ID_LIMIT in the object tree (0: none). */
static int top_id(mote_txn *t, const mote_entity *e, uint64_t *last)
{
    mote_cursor *c;
    int rc;
    if ((rc = mote_cursor_open(t, e->eid, &c)))
        return rc;
    uint8_t lim[8];
    mote__obj_tree_key(AUTO_ID_LIMIT, lim);
    rc = mote_cursor_seek(c, lim, 8, MOTE_SEEK_LT);
    uint64_t top = 0;
    if (rc == MOTE_OK) {
        mote_val k;
        if (!(rc = mote_cursor_get(c, &k, NULL)))
            top = k.size == 8 ? mote__be64(k.data) : 0;
    }
    mote_cursor_close(c);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    *last = top;
    return MOTE_OK;
}

/* ---- index entries --------------------------------------------------------------- */

size_t mote__index_key(const mprop *p, const mote_value *v, uint64_t id, uint8_t *key)
{
    int cut;
    size_t n = p->jp ? mote__json_index_enc(p->jp, v, key) : mote__index_enc(p->type, v, key, &cut);
    if (!(p->flags & MOTE_P_UNIQUE) || v->null)
        n += (size_t)mote__obj_tree_key(id, key + n);
    return n;
}

/* MOTE_UNIQUE if another object holds v in p's unique index. */
static int unique_check(mote_txn *t, const mote_entity *e, const mprop *p,
                        const mote_value *v, uint64_t id)
{
    if (!(p->flags & MOTE_P_UNIQUE) || v->null)
        return MOTE_OK;
    uint8_t key[IDX_MAX_VALUE + 16];
    size_t kl = mote__index_key(p, v, id, key);
    mote_val got;
    int rc = mote_kv_get(t, p->index_tree, key, kl, &got);
    if (rc == MOTE_NOTFOUND)
        return MOTE_OK;
    if (rc)
        return rc;
    if (got.size == 8 && rd64(got.data) == id)
        return MOTE_OK;
    return mote__err(MOTE_UNIQUE, "%s.%s: another object (id %llu) has this value",
                     e->name, p->name,
                     got.size == 8 ? (unsigned long long)rd64(got.data) : 0ull);
}

int mote__index_add(mote_txn *t, const mote_entity *e, const mprop *p, const mote_value *v,
                    uint64_t id)
{
    int rc = unique_check(t, e, p, v, id);
    if (rc)
        return rc;
    uint8_t key[IDX_MAX_VALUE + 16], idv[8];
    size_t kl = mote__index_key(p, v, id, key);
    wr64(idv, id);
    if ((p->flags & MOTE_P_UNIQUE) && !v->null)
        return mote_kv_put(t, p->index_tree, key, kl, idv, 8, 0);
    /* never refused (the key holds the id): written later, as a batch */
    return mote__kv_put_later(t, p->index_tree, key, kl);
}

static int index_del(mote_txn *t, const mprop *p, const mote_value *v, uint64_t id)
{
    uint8_t key[IDX_MAX_VALUE + 16];
    size_t kl = mote__index_key(p, v, id, key);
    int rc = mote__kv_del_known(t, p->index_tree, key, kl);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

static int same_value(int type, const mote_value *a, const mote_value *b)
{
    if (a->null || b->null)
        return a->null == b->null;
    if (type_is_var(type))
        return a->v.s.n == b->v.s.n && (!a->v.s.n || !memcmp(a->v.s.p, b->v.s.p, a->v.s.n));
    return mote__value_cmp(type, a, b) == 0;
}

/* A text-indexed value of object id changed from ov to nv (either may be
 * NULL: a new or a removed object): the old text leaves its full-text
 * index, the new one enters it. */
static int note_text(mote_txn *t, const mprop *p, uint64_t id, const mote_value *ov,
                     const mote_value *nv)
{
    if (ov && nv && same_value(p->type, ov, nv))
        return MOTE_OK;
    int rc = mote__text_note_value(t, p, id, ov, 0);
    return rc ? rc : mote__text_note_value(t, p, id, nv, 1);
}

/* Note the vector and full-text index changes of object id (old values ov,
 * new nv; NULL: none, for a new or a removed object): each indexed vector
 * and text that differs. */
static int note_derived(mote_txn *t, mote_entity *e, uint64_t id, const mote_value *ov,
                        const mote_value *nv)
{
    int rc = MOTE_OK;
    for (unsigned i = 0; !rc && i < e->nall; i++) {
        const mprop *p = &e->props[i];
        if (p->text_tree)
            rc = note_text(t, p, id, ov ? &ov[i] : NULL, nv ? &nv[i] : NULL);
        if (rc || !p->vindex_tree)
            continue;
        int changed = ov && nv ? !same_value(p->type, &ov[i], &nv[i])
                      : ov     ? has_vector(&ov[i])
                               : has_vector(&nv[i]);
        if (changed)
            rc = mote__hnsw_note(t, e, i, id);
    }
    return rc;
}

/* ---- put ------------------------------------------------------------------------ */

/* Every property's value (nall of them, kept ones included). */
int mote__decode_all(const mote_entity *e, const uint8_t *rec, size_t len, uint64_t id,
                      mote_value *vals)
{
    mote_record r;
    int rc = mote__record_init(&r, e, rec, len, id);
    for (unsigned i = 0; !rc && i < e->nall; i++)
        rc = mote_record_get(&r, i, &vals[i], NULL);
    return rc;
}

/* Values of properties from..to-1 that record r predates read as zero or
 * empty; carried over into a rewrite of the object they must stay absent:
 * NULL, which in a property that is not nullable reads as absent again
 * (mote_record_get). Without this a kept property, or one left alone by a
 * partial update, would turn from "no value" into a stored zero. */
static void keep_absent(const mote_record *r, unsigned from, unsigned to, mote_value *vals)
{
    const mlayout *L = r->layout_;
    for (unsigned i = from; L && i < to; i++)
        if (L->slot_of[i] < 0)
            vals[i].null = 1;
}

/* Put one object whose id is known (old: its current record, or NULL).
 * vals has nall values; an update carries the kept ones over from old
 * (written into vals[nprops..nall), an empty range without kept ones). */
static int put_one(mote_txn *t, mote_entity *e, uint64_t id, mote_value *vals,
                   const uint8_t *old, size_t oldlen)
{
    unsigned np = e->nall;
    mote_value stackv[16], *ov = NULL;
    int rc = MOTE_OK;
    if (old) {
        ov = np <= 16 ? stackv : mote__malloc(np * sizeof *ov);
        if (!ov)
            return mote__err(MOTE_NOMEM, "out of memory");
        rc = mote__decode_all(e, old, oldlen, id, ov);
        if (!rc && np > e->nprops) {
            mote_record r;
            for (unsigned i = e->nprops; i < np; i++)
                vals[i] = ov[i];
            if (!(rc = mote__record_init(&r, e, old, oldlen, id)))
                keep_absent(&r, e->nprops, np, vals);
        }
    }
    for (unsigned i = 0; !rc && i < np; i++)
        if (e->props[i].index_tree && !(ov && same_value(e->props[i].type, &ov[i], &vals[i])))
            rc = unique_check(t, e, &e->props[i], &vals[i], id);
    size_t len = 0;
    if (!rc)
        rc = mote__record_encode(e, vals, &OTX(t)->obuf, &OTX(t)->obuf_cap, &len);
    /* checks done: from here on, writes */
    uint8_t k[8];
    mote__obj_tree_key(id, k);
    if (!rc)
        rc = mote_kv_put(t, e->eid, k, 8, OTX(t)->obuf, len, 0);
    for (unsigned i = 0; !rc && i < np; i++) {
        const mprop *p = &e->props[i];
        if (!p->index_tree || (ov && same_value(p->type, &ov[i], &vals[i])))
            continue;
        if (ov)
            rc = index_del(t, p, &ov[i], id);
        if (!rc)
            rc = mote__index_add(t, e, p, &vals[i], id);
    }
    if (!rc && (e->vindexes || e->tindexes))
        rc = note_derived(t, e, id, ov, vals);
    if (ov && ov != stackv)
        mote__free(ov);
    return rc;
}

/* Copy the current record of id into the transaction's oldbuf; MOTE_NOTFOUND
 * if none. */
static int load_old(mote_txn *t, mote_entity *e, uint64_t id, size_t *len)
{
    uint8_t k[8];
    mote_val v;
    mote__obj_tree_key(id, k);
    int rc = mote_kv_get(t, e->eid, k, 8, &v);
    if (rc)
        return rc;
    objtxn *x = OTX(t);
    if ((rc = mote__grow(&x->oldbuf, &x->oldbuf_cap, v.size + 1)))
        return rc;
    memcpy(x->oldbuf, v.data, v.size);
    *len = v.size;
    return MOTE_OK;
}

/* Check the definition's values (kept ones come from the store, or NULL). */
static int check_values(const mote_entity *e, const mote_value *vals)
{
    if (!vals && e->nprops)
        return mote__err(MOTE_INVALID, "%s: values are NULL", e->name);
    for (unsigned i = 0; i < e->nprops; i++) {
        int rc = mote__value_check(&e->props[i], &vals[i], e->name);
        if (rc)
            return rc;
    }
    return MOTE_OK;
}

/* The entity's id sequence for this write transaction: the highest id below
 * AUTO_ID_LIMIT in use or handed out (the stored sequence or the object
 * tree's last id, whichever is higher), read once and kept in the handle. */
static int seq_load(mote_txn *t, mote_entity *e)
{
    if (e->seq_serial == t->serial)
        return MOTE_OK;
    uint64_t seq, top;
    int rc = mote__read_seq(t, e, &seq);
    if (!rc)
        rc = top_id(t, e, &top);
    if (rc)
        return rc;
    if (seq >= AUTO_ID_LIMIT) /* written by older versions after a huge explicit id */
        seq = 0;
    e->seq_serial = t->serial;
    e->seq_stored = seq;
    e->seq_hi = seq > top ? seq : top;
    e->seq_dirty = 0;
    return MOTE_OK;
}

/* Before objects of e are removed: load the sequence, and have
 * mote__entities_flush save it if the removal took its highest id away. */
static int seq_removing(mote_txn *t, mote_entity *e)
{
    int rc = seq_load(t, e);
    if (!rc && !e->seq_dirty) {
        e->seq_dirty = 1;
        e->seq_next_dirty = OTX(t)->seq_dirty;
        OTX(t)->seq_dirty = e;
    }
    return rc;
}

int mote__entities_flush(mote_txn *t)
{
    int rc = mote__text_flush(t);
    if (!rc)
        rc = mote__hnsw_flush(t);
    for (mote_entity *e = OTX(t)->seq_dirty; e; e = e->seq_next_dirty) {
        uint64_t top;
        if (!rc && e->seq_serial == t->serial && e->seq_hi > e->seq_stored &&
            !(rc = top_id(t, e, &top)) && top < e->seq_hi)
            rc = write_seq(t, e, e->seq_hi);
        e->seq_dirty = 0;
    }
    OTX(t)->seq_dirty = NULL;
    return rc;
}

static int remove_one(mote_txn *t, mote_entity *e, uint64_t id);

/* Has record r's object expired by t's clock? (At once 0 for an entity
 * without an expiry time, whose reads never read the clock.) */
static int expired_now(mote_txn *t, const mote_record *r)
{
    return r->e->expires >= 0 && mote__expired(r, mote__txn_now(t));
}

/* Object id, whose record is rec[0..len), is gone if it has expired: then
 * remove it (MOTE_NOTFOUND), else MOTE_OK. rec may be oldbuf, which the
 * removal reuses. */
static int drop_if_expired(mote_txn *t, mote_entity *e, uint64_t id, const uint8_t *rec,
                           size_t len)
{
    mote_record r;
    int rc = mote__record_init(&r, e, rec, len, id);
    if (rc || !expired_now(t, &r))
        return rc;
    return (rc = remove_one(t, e, id)) ? rc : MOTE_NOTFOUND;
}

/* Remove the expired objects other than id that hold one of vals' unique
 * values, so that the write of vals takes them (see EXPIRY). vals must not
 * point into oldbuf. */
static int drop_expired_holders(mote_txn *t, mote_entity *e, const mote_value *vals, uint64_t id)
{
    for (unsigned i = 0; i < e->nall; i++) {
        const mprop *p = &e->props[i];
        if (!(p->flags & MOTE_P_UNIQUE) || vals[i].null)
            continue;
        uint8_t key[IDX_MAX_VALUE + 16], ok[8];
        mote_val got, rec;
        int rc = mote_kv_get(t, p->index_tree, key, mote__index_key(p, &vals[i], id, key), &got);
        if (rc == MOTE_NOTFOUND || (!rc && (got.size != 8 || rd64(got.data) == id)))
            continue;
        uint64_t other = rd64(got.data);
        mote__obj_tree_key(other, ok);
        if (!rc && !(rc = mote_kv_get(t, e->eid, ok, 8, &rec)))
            rc = drop_if_expired(t, e, other, rec.data, rec.size);
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
    }
    return MOTE_OK;
}

static int put_with_id(mote_txn *t, mote_entity *e, uint64_t id, mote_value *vals,
                       unsigned mode)
{
    size_t oldlen = 0;
    int rc = load_old(t, e, id, &oldlen);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    if (!rc && e->expires >= 0 && (rc = drop_if_expired(t, e, id, OTX(t)->oldbuf, oldlen)) &&
        rc != MOTE_NOTFOUND)
        return rc;
    int exists = rc == MOTE_OK;
    if (mode == MOTE_PUT_INSERT && exists)
        return mote__err(MOTE_EXISTS, "%s: object %llu already exists", e->name,
                         (unsigned long long)id);
    if (mode == MOTE_PUT_UPDATE && !exists)
        return mote__err(MOTE_NOTFOUND, "%s: no object with id %llu to update", e->name,
                         (unsigned long long)id);
    rc = put_one(t, e, id, vals, exists ? OTX(t)->oldbuf : NULL, oldlen);
    if (!rc && !exists && id > e->seq_hi && id < AUTO_ID_LIMIT) {
        /* ids above the sequence are not reused (those over the automatic
         * range do not move it) */
        e->seq_hi = id;
    }
    return rc;
}

int mote__obj_write_result(mote_txn *t, int rc)
{
    if (!rc && OTX(t)->ntext)
        rc = mote__text_flush_big(t); /* between operations: no record in use */
    if (rc && rc != MOTE_NOTFOUND && rc != MOTE_EXISTS && rc != MOTE_UNIQUE &&
        rc != MOTE_RANGE && rc != MOTE_TYPE && rc != MOTE_TOOBIG && rc != MOTE_INVALID &&
        !t->failed)
        t->failed = rc; /* may have left the tree half changed */
    return rc;
}

/* ---- batches: many objects, one descent per leaf ------------------------------- */

/*
 * put_many and remove_many of two or more objects gather the changes of each
 * tree (the object tree, every index) into a sorted batch and apply it with
 * mote__kv_apply, so that the changes falling into one leaf cost one descent.
 * Everything that can refuse an object (values, unique indexes, missing ids)
 * is checked before the first write; when something would, the batch is
 * dropped unwritten (BATCH_NO) and the caller goes object by object, which
 * writes the objects before the bad one and reports it, as documented.
 */
#define BATCH_NO (-1)

/* The keys and values of one tree's batch in one buffer; the ops point into
 * it once kb_seal has run (the buffer moves while it grows). */
typedef struct kbatch {
    mote_kvop *ops;
    size_t *off; /* key offset of ops[i]; its value follows the key */
    size_t n, cap;
    uint8_t *buf;
    size_t len, bcap;
    uint8_t pre[4]; /* the tree's key prefix, which every key starts with */
    unsigned prelen;
} kbatch;

static int kb_grow(kbatch *b, size_t nops, size_t bytes);

/* Room for nops ops in all and bytes more key and value bytes. */
static inline int kb_reserve(kbatch *b, size_t nops, size_t bytes)
{
    if (nops <= b->cap && b->len + bytes <= b->bcap)
        return MOTE_OK; /* the usual case: no call */
    return kb_grow(b, nops, bytes);
}

static int kb_grow(kbatch *b, size_t nops, size_t bytes)
{
    if (nops > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < nops)
            nc *= 2;
        mote_kvop *o = mote__realloc(b->ops, nc * sizeof *o);
        if (o)
            b->ops = o;
        size_t *f = o ? mote__realloc(b->off, nc * sizeof *f) : NULL;
        if (!f)
            return mote__err(MOTE_NOMEM, "out of memory");
        b->off = f;
        b->cap = nc;
    }
    return mote__grow(&b->buf, &b->bcap, b->len + bytes);
}

/* Record the op whose key (kl bytes, prefix included) and value (vl) were
 * written at the end of the buffer, after a kb_reserve. */
static void kb_push(kbatch *b, size_t kl, size_t vl, int del)
{
    mote_kvop *op = &b->ops[b->n];
    b->off[b->n++] = b->len;
    b->len += kl + vl;
    op->klen = (uint32_t)kl;
    op->vlen = vl;
    op->del = del;
}

/* Add an op with an empty value on key k (without the prefix). */
static int kb_add(kbatch *b, const void *k, uint32_t kl, int del)
{
    int rc = kb_reserve(b, b->n + 1, b->prelen + kl);
    if (rc)
        return rc;
    uint8_t *p = b->buf + b->len;
    memcpy(p, b->pre, b->prelen);
    memcpy(p + b->prelen, k, kl);
    kb_push(b, b->prelen + kl, 0, del);
    return MOTE_OK;
}

#define BATCH_DUP (-2)

/* How kb_seal orders a batch. */
enum {
    KB_SORT,      /* sort, then check: BATCH_DUP if a key is there twice */
    KB_SORT_ONLY, /* sort; the keys differ by construction (they end in ids) */
    KB_CHECK,     /* check the order the caller made */
    KB_ASCENDING  /* ascending by construction (new ids first, first + 1, ...) */
};

/* Point the ops into the buffer and order them as `how` says, for
 * mote__kv_apply_ikeys, which requires strictly ascending keys. */
static int kb_seal(kbatch *b, int how)
{
    for (size_t i = 0; i < b->n; i++) {
        b->ops[i].key = b->buf + b->off[i];
        b->ops[i].val = b->ops[i].key + b->ops[i].klen;
    }
    if (how == KB_ASCENDING)
        return MOTE_OK;
    if (how == KB_SORT_ONLY)
        return mote__kvops_sort(b->ops, b->n);
    int rc = how == KB_SORT ? mote__kvops_sort(b->ops, b->n) : MOTE_OK;
    for (size_t i = 1; !rc && i < b->n; i++) {
        int c = mote__keycmp(b->ops[i - 1].key, b->ops[i - 1].klen, b->ops[i].key,
                             b->ops[i].klen);
        if (c >= 0)
            rc = c ? mote__err(MOTE_CORRUPT, "internal: batch keys out of order") : BATCH_DUP;
    }
    return rc;
}

static void kb_free(kbatch *b)
{
    mote__free(b->ops);
    mote__free(b->off);
    mote__free(b->buf);
}

/* Add (or delete) the index entry of value v of object id. */
static int kb_index(kbatch *b, const mprop *p, const mote_value *v, uint64_t id, int del)
{
    int rc = kb_reserve(b, b->n + 1, b->prelen + IDX_MAX_VALUE + 16 + 8);
    if (rc)
        return rc;
    uint8_t *k = b->buf + b->len; /* the key is built in place */
    memcpy(k, b->pre, b->prelen);
    size_t kl = b->prelen + mote__index_key(p, v, id, k + b->prelen);
    int with_id = (p->flags & MOTE_P_UNIQUE) && !v->null && !del;
    if (with_id)
        wr64(k + kl, id);
    kb_push(b, kl, with_id ? 8 : 0, del);
    return MOTE_OK;
}

/* Replace the (non-unique) index entry of value ov of object id by that of
 * nv. Compared as keys, not values: strings that differ only after the
 * indexed prefix have one key, which stays. */
static int kb_change(kbatch *b, const mprop *p, const mote_value *ov, const mote_value *nv,
                     uint64_t id)
{
    uint8_t ko[IDX_MAX_VALUE + 16], kn[IDX_MAX_VALUE + 16];
    size_t lo = mote__index_key(p, ov, id, ko), ln = mote__index_key(p, nv, id, kn);
    if (lo == ln && !memcmp(ko, kn, lo))
        return MOTE_OK;
    int rc = kb_add(b, ko, (uint32_t)lo, 1);
    return rc ? rc : kb_add(b, kn, (uint32_t)ln, 0);
}

/* One batch per indexed property (ib[i] for property i) and one for the
 * object tree. */
typedef struct objbatch {
    kbatch ob, *ib;
    unsigned np;
} objbatch;

static int ob_init(objbatch *b, const mote_entity *e)
{
    memset(b, 0, sizeof *b);
    b->np = e->nall;
    b->ib = mote__calloc(e->nall + 1, sizeof *b->ib);
    if (!b->ib)
        return mote__err(MOTE_NOMEM, "out of memory");
    b->ob.prelen = mote__tree_prefix(e->eid, b->ob.pre);
    for (unsigned i = 0; i < b->np; i++)
        if (e->props[i].index_tree)
            b->ib[i].prelen = mote__tree_prefix(e->props[i].index_tree, b->ib[i].pre);
    return MOTE_OK;
}

static void ob_free(objbatch *b)
{
    kb_free(&b->ob);
    for (unsigned i = 0; b->ib && i < b->np; i++)
        kb_free(&b->ib[i]);
    mote__free(b->ib);
}

/* Reserve room for n objects: obytes each in the object tree's batch (their
 * records, or 8-byte keys to delete) and one entry per index (sizes are
 * guesses; the batches still grow past them). */
static int ob_reserve(objbatch *b, const mote_entity *e, size_t n, size_t obytes)
{
    int rc = kb_reserve(&b->ob, n, n * obytes);
    for (unsigned i = 0; !rc && i < b->np; i++)
        if (e->props[i].index_tree)
            rc = kb_reserve(&b->ib[i], n, n * 24 + IDX_MAX_VALUE + 24);
    return rc;
}

/* Seal every index batch; a unique index given one value twice: BATCH_NO.
 * Entries of the other indexes end in the object's id, so they differ. */
static int ob_seal_indexes(objbatch *b, const mote_entity *e)
{
    for (unsigned i = 0; i < b->np; i++) {
        int unique = (e->props[i].flags & MOTE_P_UNIQUE) != 0;
        int rc = kb_seal(&b->ib[i], unique ? KB_SORT : KB_SORT_ONLY);
        if (rc)
            return rc == BATCH_DUP ? BATCH_NO : rc;
    }
    return MOTE_OK;
}

/* Seal the object batch (how: as kb_seal). */
static int ob_seal_objects(objbatch *b, int how)
{
    int rc = kb_seal(&b->ob, how);
    return rc == BATCH_DUP ? mote__err(MOTE_CORRUPT, "internal: object id twice") : rc;
}

/* Write the sealed batches: objects, then every index. */
static int ob_write(mote_txn *t, const mote_entity *e, objbatch *b)
{
    int rc = mote__kv_apply_ikeys(t, e->eid, b->ob.ops, b->ob.n, NULL);
    for (unsigned i = 0; !rc && i < b->np; i++)
        if (b->ib[i].n)
            rc = mote__kv_apply_ikeys(t, e->props[i].index_tree, b->ib[i].ops, b->ib[i].n,
                                      NULL);
    return rc;
}

/* Add object id's record (values vals) to the object batch, encoded in
 * place. */
static int ob_record(const mote_entity *e, objbatch *b, uint64_t id, const mote_value *vals)
{
    kbatch *ob = &b->ob;
    size_t len = 0, kl = ob->prelen + 8;
    int rc = mote__record_size(e, vals, &len);
    if (!rc)
        rc = kb_reserve(ob, ob->n + 1, kl + len);
    if (rc)
        return rc;
    uint8_t *p = ob->buf + ob->len;
    memcpy(p, ob->pre, ob->prelen);
    mote__obj_tree_key(id, p + ob->prelen);
    mote__record_write(e, vals, p + kl);
    kb_push(ob, kl, len, 0);
    return MOTE_OK;
}

/* n new objects with ids first, first + 1, ... */
static int put_new_batch(mote_txn *t, mote_entity *e, size_t n, const mote_value *vals,
                         uint64_t first)
{
    unsigned np = e->nall;
    for (size_t i = 0; i < n; i++)
        if (check_values(e, vals + i * np))
            return BATCH_NO;
    objbatch b;
    int rc = ob_init(&b, e);
    if (!rc)
        rc = ob_reserve(&b, e, n, 64);
    for (size_t i = 0; !rc && i < n; i++) {
        const mote_value *v = vals + i * np;
        for (unsigned j = 0; !rc && j < np; j++) {
            if (!e->props[j].index_tree)
                continue;
            rc = unique_check(t, e, &e->props[j], &v[j], first + i);
            if (rc == MOTE_UNIQUE)
                rc = BATCH_NO;
            if (!rc)
                rc = kb_index(&b.ib[j], &e->props[j], &v[j], first + i, 0);
        }
        if (!rc)
            rc = ob_record(e, &b, first + i, v);
        if (!rc && (e->vindexes || e->tindexes))
            rc = note_derived(t, e, first + i, NULL, v);
        if (!rc && e->tindexes) /* the values are the caller's: a write may come */
            rc = mote__text_flush_big(t);
    }
    if (!rc)
        rc = ob_seal_indexes(&b, e);
    if (!rc)
        rc = ob_seal_objects(&b, KB_ASCENDING); /* first, first + 1, ... */
    if (!rc)
        rc = ob_write(t, e, &b);
    ob_free(&b);
    return rc;
}


/* A sorted copy of ids without repeats (*m of them). */
static int sorted_ids(const uint64_t *ids, size_t n, uint64_t **out, size_t *m)
{
    uint64_t *s = mote__malloc((n + 1) * sizeof *s);
    if (!s)
        return mote__err(MOTE_NOMEM, "out of memory");
    memcpy(s, ids, n * sizeof *s);
    *out = s;
    *m = mote__sort_unique_u64(s, n);
    return MOTE_OK;
}

/* Updates of n existing objects (no unique index: swapping unique values
 * between objects must fail as it does one by one). */
static int put_existing_batch(mote_txn *t, mote_entity *e, size_t n, const uint64_t *ids,
                              mote_value *vals)
{
    unsigned np = e->nall;
    for (unsigned j = 0; j < np; j++)
        if (e->props[j].flags & MOTE_P_UNIQUE)
            return BATCH_NO;
    for (size_t i = 0; i < n; i++)
        if (check_values(e, vals + i * np))
            return BATCH_NO;
    uint64_t *sorted;
    size_t m;
    int rc = sorted_ids(ids, n, &sorted, &m);
    if (rc)
        return rc;
    mote__free(sorted);
    if (m != n)
        return BATCH_NO; /* an id twice: the later put sees the earlier */
    objbatch b;
    mote_cursor *oc = NULL;
    rc = ob_init(&b, e);
    if (!rc)
        rc = ob_reserve(&b, e, n, 64);
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &oc);
    for (size_t i = 0; !rc && i < n; i++) {
        mote_value *v = vals + i * np;
        mote_record r;
        rc = mote__obj_seek(e, oc, ids[i], &r);
        if (rc == MOTE_NOTFOUND || (!rc && expired_now(t, &r)))
            rc = BATCH_NO; /* one by one: see put_with_id */
        for (unsigned j = e->nprops; !rc && j < np; j++) /* kept: carried over */
            rc = mote_record_get(&r, j, &v[j], NULL);
        if (!rc)
            keep_absent(&r, e->nprops, np, v);
        for (unsigned j = 0; !rc && j < np; j++) {
            mote_value ov;
            if (e->props[j].index_tree && !(rc = mote_record_get(&r, j, &ov, NULL)))
                rc = kb_change(&b.ib[j], &e->props[j], &ov, &v[j], ids[i]);
            if (!rc && e->props[j].vindex_tree && !(rc = mote_record_get(&r, j, &ov, NULL)) &&
                !same_value(MOTE_T_VECTOR, &ov, &v[j]))
                rc = mote__hnsw_note(t, e, j, ids[i]);
            if (!rc && e->props[j].text_tree && !(rc = mote_record_get(&r, j, &ov, NULL)))
                rc = note_text(t, &e->props[j], ids[i], &ov, &v[j]);
        }
        if (!rc)
            rc = ob_record(e, &b, ids[i], v);
    }
    mote_cursor_close(oc);
    if (!rc)
        rc = ob_seal_indexes(&b, e);
    if (!rc)
        rc = ob_seal_objects(&b, KB_SORT);
    if (!rc)
        rc = ob_write(t, e, &b);
    ob_free(&b);
    return rc;
}

int mote_put(mote_txn *t, mote_entity *e, uint64_t id, const mote_value *vals,
             unsigned mode, uint64_t *out_id)
{
    return mote_put_many(t, e, 1, id ? &id : NULL, vals, mode, out_id, NULL);
}

/* put_many on values of nall per object (see mote_put_many). */
static int put_many_all(mote_txn *t, mote_entity *e, size_t n, const uint64_t *ids,
                        mote_value *vals, unsigned mode, uint64_t *ids_out, size_t *done)
{
    int rc = seq_load(t, e);
    if (rc)
        return rc;
    /* new objects get a contiguous block above the sequence and above every
     * explicit id of the batch below AUTO_ID_LIMIT (so that none collides
     * with them); explicit ids above it do not move the sequence */
    size_t nnew = 0;
    uint64_t top = e->seq_hi;
    for (size_t i = 0; i < n; i++) {
        nnew += !ids || !ids[i];
        if (ids && ids[i] > top && ids[i] < AUTO_ID_LIMIT)
            top = ids[i];
    }
    if (nnew && mode == MOTE_PUT_UPDATE)
        return mote__err(MOTE_INVALID, "%s: update of an object without id", e->name);
    if (nnew && top > AUTO_ID_LIMIT - 1 - nnew)
        return mote__err(MOTE_FULL, "%s: automatic ids are used up (they end at 2^63-1, "
                         "the highest is %llu; explicit ids can still be given)", e->name,
                         (unsigned long long)top);
    uint64_t next = top + 1;
    if (n >= 2) {
        if (nnew == n && mode != MOTE_PUT_UPDATE)
            rc = put_new_batch(t, e, n, vals, next);
        else if (!nnew && mode != MOTE_PUT_INSERT)
            rc = put_existing_batch(t, e, n, ids, vals);
        else
            rc = BATCH_NO;
        if (rc != BATCH_NO) {
            if (!rc && nnew)
                e->seq_hi = next + nnew - 1;
            for (size_t i = 0; !rc && ids_out && i < n; i++)
                ids_out[i] = nnew ? next + i : ids[i];
            if (!rc && done)
                *done = n;
            return mote__obj_write_result(t, rc);
        }
        rc = MOTE_OK;
    }
    unsigned np = e->nall;
    for (size_t i = 0; i < n; i++) {
        mote_value *v = vals + i * np;
        if ((rc = check_values(e, v)))
            break;
        uint64_t id = ids && ids[i] ? ids[i] : 0;
        if (e->expires >= 0 && (rc = drop_expired_holders(t, e, v, id ? id : next)))
            break;
        if (id) {
            rc = put_with_id(t, e, id, v, mode);
        } else {
            id = next++;
            if (!(rc = put_one(t, e, id, v, NULL, 0)) && id > e->seq_hi)
                e->seq_hi = id; /* only written objects use up ids */
        }
        if (rc)
            break;
        if (ids_out)
            ids_out[i] = id;
        if (done)
            *done = i + 1;
    }
    return mote__obj_write_result(t, rc);
}

int mote_put_many(mote_txn *t, mote_entity *e, size_t n, const uint64_t *ids,
                  const mote_value *vals, unsigned mode, uint64_t *ids_out, size_t *done)
{
    IMPLICIT(t, e, 1, mote_put_many(t_, e, n, ids, vals, mode, ids_out, done));
    int rc = mote__obj_check(t, e, 1);
    if (done)
        *done = 0;
    if (!rc && mode > MOTE_PUT_UPDATE)
        rc = mote__err(MOTE_INVALID, "unknown put mode %u", mode);
    if (!rc && t->failed)
        rc = mote__err(t->failed, "an earlier operation of this transaction failed");
    if (!rc && n && !vals && e->nprops)
        rc = mote__err(MOTE_INVALID, "%s: values are NULL", e->name);
    if (rc)
        return rc;
    /* Without kept properties the caller's values serve as they are (the
     * writes into vals[nprops..nall) are then to an empty range). */
    if (e->nall == e->nprops)
        return put_many_all(t, e, n, ids, (mote_value *)vals, mode, ids_out, done);
    /* Kept properties: values with room for them, NULL (carried over from
     * the stored object on updates) */
    unsigned np = e->nprops, na = e->nall;
    mote_value *xv = mote__malloc((n * na + 1) * sizeof *xv);
    if (!xv)
        return mote__err(MOTE_NOMEM, "out of memory for %zu objects", n);
    for (size_t i = 0; i < n; i++) {
        memcpy(xv + i * na, vals + i * np, np * sizeof *xv);
        for (unsigned j = np; j < na; j++)
            memset(&xv[i * na + j], 0, sizeof *xv), xv[i * na + j].null = 1;
    }
    rc = put_many_all(t, e, n, ids, xv, mode, ids_out, done);
    mote__free(xv);
    return rc;
}

int mote_update(mote_txn *t, mote_entity *e, uint64_t id, const unsigned *props,
                const mote_value *vals, unsigned n)
{
    IMPLICIT(t, e, 1, mote_update(t_, e, id, props, vals, n));
    int rc = mote__obj_check(t, e, 1);
    if (rc)
        return rc;
    if (n && (!props || !vals))
        return mote__err(MOTE_INVALID, "mote_update: NULL properties or values");
    size_t oldlen;
    if (!(rc = load_old(t, e, id, &oldlen)) && e->expires >= 0)
        rc = drop_if_expired(t, e, id, OTX(t)->oldbuf, oldlen);
    if (rc)
        return rc == MOTE_NOTFOUND ? mote__err(rc, "%s: no object with id %llu", e->name,
                                               (unsigned long long)id)
                                   : rc;
    mote_value *all = mote__malloc((e->nall + 1) * sizeof *all);
    if (!all)
        return mote__err(MOTE_NOMEM, "out of memory");
    /* the new values point into oldbuf's copy, which put_one re-reads: keep
     * a private copy of the old record */
    uint8_t *copy = mote__malloc(oldlen + 1);
    rc = copy ? MOTE_OK : mote__err(MOTE_NOMEM, "out of memory");
    mote_record r;
    if (!rc) {
        memcpy(copy, OTX(t)->oldbuf, oldlen);
        if (!(rc = mote__decode_all(e, copy, oldlen, id, all)) &&
            !(rc = mote__record_init(&r, e, copy, oldlen, id)))
            keep_absent(&r, 0, e->nall, all);
    }
    /* only the given values are checked: the others are as stored */
    for (unsigned i = 0; !rc && i < n; i++) {
        if (props[i] >= e->nprops)
            rc = mote__err(MOTE_INVALID, "%s: no property %u", e->name, props[i]);
        else if (!(rc = mote__value_check(&e->props[props[i]], &vals[i], e->name)))
            all[props[i]] = vals[i];
    }
    if (!rc && e->expires >= 0)
        rc = drop_expired_holders(t, e, all, id);
    if (!rc)
        rc = mote__obj_write_result(t, put_one(t, e, id, all, copy, oldlen));
    mote__free(copy);
    mote__free(all);
    return rc;
}

/* ---- expiry -------------------------------------------------------------------------- */

int64_t mote__txn_now(mote_txn *t)
{
    if (!t->now) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t->now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
    return t->now;
}

int mote__expired(const mote_record *r, int64_t now)
{
    mote_value v;
    const mote_entity *e = r->e;
    return e->expires >= 0 && !mote_record_get(r, (unsigned)e->expires, &v, NULL) && !v.null &&
           v.v.i <= now;
}

/* The expiry index's key below which every entry has expired: the
 * encoding of now + 1, the first time that has not. */
static size_t expired_bound(mote_txn *t, uint8_t *key)
{
    mote_value v = {.v.i = mote__txn_now(t)};
    int cut;
    if (v.v.i < INT64_MAX)
        v.v.i++;
    return mote__index_enc(MOTE_T_TIMESTAMP, &v, key, &cut);
}

static const uint8_t first_value[1] = {1}; /* index keys of values start 0x01; NULL 0x00 */

int mote_sweep(mote_txn *t, mote_entity *e, uint64_t *removed)
{
    IMPLICIT(t, e, 1, mote_sweep(t_, e, removed));
    int rc = mote__obj_check(t, e, 1);
    if (removed)
        *removed = 0;
    if (rc || e->expires < 0)
        return rc;
    const mprop *p = &e->props[e->expires];
    uint8_t hi[IDX_MAX_VALUE + 16];
    size_t hil = expired_bound(t, hi);
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, p->index_tree, &c)))
        return rc;
    for (rc = mote_cursor_seek(c, first_value, 1, MOTE_SEEK_GE); rc == MOTE_OK;
         rc = mote_cursor_next(c)) {
        mote_val k, v;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        size_t m = k.size < hil ? k.size : hil;
        int cmp = memcmp(k.data, hi, m);
        if (cmp > 0 || (cmp == 0 && k.size >= hil) || k.size < 8)
            break;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            uint64_t *g = mote__realloc(ids, nc * sizeof *g);
            if (!g) {
                rc = mote__err(MOTE_NOMEM, "out of memory");
                break;
            }
            ids = g;
            cap = nc;
        }
        ids[n++] = mote__be64(k.data + k.size - 8); /* the key ends with the id */
    }
    mote_cursor_close(c);
    if (rc == MOTE_NOTFOUND)
        rc = MOTE_OK;
    if (!rc && n) /* each one exists and has expired */
        rc = mote__remove_ids(t, e, ids, n, NULL);
    if (!rc && removed)
        *removed = n;
    mote__free(ids);
    return rc;
}

/* ---- get / remove / count / scan ----------------------------------------------------- */

int mote_get(mote_txn *t, mote_entity *e, uint64_t id, mote_record *out)
{
    if (!t && !out) /* contains */
        IMPLICIT(t, e, 0, mote_get(t_, e, id, NULL));
    int rc = mote__obj_check(t, e, 0);
    if (rc)
        return rc;
    uint8_t k[8];
    mote_val v;
    mote__obj_tree_key(id, k);
    if ((rc = mote_kv_get(t, e->eid, k, 8, &v)))
        return rc;
    mote_record r;
    rc = mote__record_init(out ? out : &r, e, v.data, v.size, id);
    if (!rc && expired_now(t, out ? out : &r))
        rc = MOTE_NOTFOUND;
    return rc;
}

static int remove_one(mote_txn *t, mote_entity *e, uint64_t id)
{
    size_t oldlen;
    int rc = load_old(t, e, id, &oldlen);
    if (!rc)
        rc = seq_removing(t, e);
    if (rc)
        return rc;
    unsigned np = e->nall;
    int any_index = e->vindexes || e->tindexes;
    for (unsigned i = 0; i < np; i++)
        any_index |= e->props[i].index_tree != 0;
    if (any_index) {
        mote_value *ov = mote__malloc((np + 1) * sizeof *ov);
        if (!ov)
            return mote__err(MOTE_NOMEM, "out of memory");
        rc = mote__decode_all(e, OTX(t)->oldbuf, oldlen, id, ov);
        for (unsigned i = 0; !rc && i < np; i++)
            if (e->props[i].index_tree)
                rc = index_del(t, &e->props[i], &ov[i], id);
        if (!rc && (e->vindexes || e->tindexes))
            rc = note_derived(t, e, id, ov, NULL);
        mote__free(ov);
    }
    if (!rc)
        rc = mote__links_cleanup(t, e, id);
    uint8_t k[8];
    mote__obj_tree_key(id, k);
    if (!rc)
        rc = mote__kv_del_known(t, e->eid, k, 8);
    return rc;
}

/* Remove object id; MOTE_NOTFOUND if there is none, or if it has expired
 * (then it is removed all the same: see EXPIRY). */
static int remove_visible(mote_txn *t, mote_entity *e, uint64_t id)
{
    size_t len;
    int rc;
    if (e->expires >= 0 && ((rc = load_old(t, e, id, &len)) ||
                            (rc = drop_if_expired(t, e, id, OTX(t)->oldbuf, len))))
        return rc;
    return remove_one(t, e, id);
}

int mote_remove(mote_txn *t, mote_entity *e, uint64_t id)
{
    IMPLICIT(t, e, 1, mote_remove(t_, e, id));
    int rc = mote__obj_check(t, e, 1);
    return rc ? rc : mote__obj_write_result(t, remove_visible(t, e, id));
}

/* Remove the objects of ids that exist (sorted, no repeats), as a batch. */
static int remove_batch(mote_txn *t, mote_entity *e, const uint64_t *ids, size_t n,
                        uint64_t *removed)
{
    unsigned np = e->nall;
    uint64_t cnt = 0;
    objbatch b;
    mote_cursor *oc = NULL;
    int rc = ob_init(&b, e);
    if (!rc)
        rc = ob_reserve(&b, e, n, b.ob.prelen + 8);
    if (!rc)
        rc = seq_removing(t, e);
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &oc);
    for (size_t i = 0; !rc && i < n; i++) {
        uint8_t k[8];
        mote_record r;
        mote__obj_tree_key(ids[i], k);
        rc = mote__obj_seek(e, oc, ids[i], &r);
        if (rc == MOTE_NOTFOUND) {
            rc = MOTE_OK;
            continue;
        }
        for (unsigned j = 0; !rc && j < np; j++) {
            mote_value ov;
            if (e->props[j].index_tree && !(rc = mote_record_get(&r, j, &ov, NULL)))
                rc = kb_index(&b.ib[j], &e->props[j], &ov, ids[i], 1);
            if (!rc && e->props[j].vindex_tree)
                rc = mote__hnsw_note(t, e, j, ids[i]);
            if (!rc && e->props[j].text_tree && !(rc = mote_record_get(&r, j, &ov, NULL)))
                rc = mote__text_note_value(t, &e->props[j], ids[i], &ov, 0);
        }
        if (!rc)
            rc = kb_add(&b.ob, k, 8, 1);
        if (!rc)
            rc = mote__links_cleanup(t, e, ids[i]);
        cnt += !expired_now(t, &r); /* see EXPIRY */
    }
    mote_cursor_close(oc);
    if (!rc)
        rc = ob_seal_indexes(&b, e);
    if (!rc)
        rc = ob_seal_objects(&b, KB_CHECK);
    if (!rc)
        rc = ob_write(t, e, &b);
    ob_free(&b);
    if (removed)
        *removed = rc ? 0 : cnt;
    return rc;
}

int mote__remove_ids(mote_txn *t, mote_entity *e, const uint64_t *ids, size_t n,
                     uint64_t *removed)
{
    int rc = MOTE_OK;
    uint64_t cnt = 0;
    if (n >= 2) {
        uint64_t *s;
        size_t m;
        if (!(rc = sorted_ids(ids, n, &s, &m))) {
            rc = remove_batch(t, e, s, m, removed);
            mote__free(s);
        }
        return mote__obj_write_result(t, rc);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        rc = remove_visible(t, e, ids[i]);
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        else if (!rc)
            cnt++;
    }
    if (removed)
        *removed = cnt;
    return mote__obj_write_result(t, rc);
}

int mote_remove_many(mote_txn *t, mote_entity *e, const uint64_t *ids, size_t n,
                     uint64_t *removed)
{
    IMPLICIT(t, e, 1, mote_remove_many(t_, e, ids, n, removed));
    int rc = mote__obj_check(t, e, 1);
    if (!rc && n && !ids)
        rc = mote__err(MOTE_INVALID, "mote_remove_many: ids is NULL");
    if (!rc && t->failed)
        rc = mote__err(t->failed, "an earlier operation of this transaction failed");
    return rc ? rc : mote__remove_ids(t, e, ids, n, removed);
}


/* The ids of all objects of e, ascending, in a malloc'd array. */
static int all_ids(mote_txn *t, mote_entity *e, uint64_t **out, size_t *n)
{
    uint64_t *ids = NULL, count;
    mote_cursor *c = NULL;
    int rc;
    *n = 0;
    if (!(rc = mote_kv_count(t, e->eid, NULL, 0, NULL, 0, &count)) &&
        !(ids = mote__malloc((count + 1) * sizeof *ids)))
        rc = mote__err(MOTE_NOMEM, "out of memory for %llu ids", (unsigned long long)count);
    if (!rc)
        rc = mote_cursor_open(t, e->eid, &c);
    for (int r = rc ? rc : mote_cursor_first(c); !rc && r == MOTE_OK && *n < count;
         r = mote_cursor_next(c)) {
        mote_val k;
        if (!(rc = mote_cursor_get(c, &k, NULL)))
            ids[(*n)++] = mote__be64(k.data);
    }
    mote_cursor_close(c);
    if (rc) {
        mote__free(ids);
        ids = NULL;
    }
    *out = ids;
    return rc;
}

int mote_remove_all(mote_txn *t, mote_entity *e, uint64_t *removed)
{
    IMPLICIT(t, e, 1, mote_remove_all(t_, e, removed));
    int rc = mote__obj_check(t, e, 1);
    if (rc)
        return rc;
    uint64_t *ids;
    size_t n;
    if (!(rc = all_ids(t, e, &ids, &n)))
        rc = mote__remove_ids(t, e, ids, n, removed);
    mote__free(ids);
    return rc;
}

int mote__drop_prop_data(mote_txn *t, mote_entity *e, mprop *gone)
{
    int rc = MOTE_OK;
    if (gone->type == MOTE_T_TOMANY) { /* the backlinks of its links */
        char tn[64];
        uint32_t ltree, teid, btree;
        mote_cursor *c;
        snprintf(tn, sizeof tn, "@l:%u:%u", e->eid, gone->id);
        if (mote_kv_tree(t, tn, 0, &ltree) || (rc = mote__target_eid(t, gone, &teid)) ||
            !teid || mote__backlink_tree(t, teid, 0, &btree))
            return rc;
        if ((rc = mote_cursor_open(t, ltree, &c)))
            return rc;
        for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
            mote_val lk;
            uint8_t bk[22];
            if ((rc = mote_cursor_get(c, &lk, NULL)) || lk.size != 16)
                break;
            mote__backlink_key(mote__be64((const uint8_t *)lk.data + 8), e->eid, gone->id,
                         mote__be64(lk.data), bk);
            if ((rc = mote_kv_del(t, btree, bk, 22)) == MOTE_NOTFOUND)
                rc = MOTE_OK;
            if (rc)
                break;
        }
        mote_cursor_close(c);
        return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
    }
    /* every record again, by e's layout, which has no slot for it: its
     * values as they are (no checks: a kept property may hold NULL) */
    uint64_t *ids;
    size_t n, oldlen;
    mote_value *vals = mote__malloc((e->nall + 1) * sizeof *vals);
    uint8_t *copy = NULL;
    size_t ccap = 0;
    if (!vals)
        return mote__err(MOTE_NOMEM, "out of memory");
    if ((rc = all_ids(t, e, &ids, &n))) {
        mote__free(vals);
        return rc;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        if ((rc = load_old(t, e, ids[i], &oldlen)) ||
            (rc = mote__grow(&copy, &ccap, oldlen + 1)))
            break;
        memcpy(copy, OTX(t)->oldbuf, oldlen); /* vals point into it; put_one reads oldbuf */
        mote_record r;
        if (!(rc = mote__decode_all(e, copy, oldlen, ids[i], vals)) &&
            !(rc = mote__record_init(&r, e, copy, oldlen, ids[i]))) {
            keep_absent(&r, 0, e->nall, vals);
            rc = put_one(t, e, ids[i], vals, copy, oldlen);
        }
    }
    mote__free(copy);
    mote__free(ids);
    mote__free(vals);
    return rc;
}

int mote_count(mote_txn *t, mote_entity *e, uint64_t *count)
{
    IMPLICIT(t, e, 0, mote_count(t_, e, count));
    int rc = mote__obj_check(t, e, 0);
    if (!rc && !count)
        rc = mote__err(MOTE_INVALID, "mote_count: count is NULL");
    if (!rc)
        rc = mote_kv_count(t, e->eid, NULL, 0, NULL, 0, count);
    if (!rc && e->expires >= 0) { /* less the expired entries of the expiry index */
        uint32_t tree = e->props[e->expires].index_tree;
        uint8_t hi[IDX_MAX_VALUE + 16];
        uint64_t lo, below;
        if (!(rc = mote_kv_count(t, tree, NULL, 0, first_value, 1, &lo)) &&
            !(rc = mote_kv_count(t, tree, NULL, 0, hi, expired_bound(t, hi), &below)))
            *count -= below > lo ? below - lo : 0;
    }
    return rc;
}

int mote_scan(mote_txn *t, mote_entity *e, mote_record_fn fn, void *ctx)
{
    IMPLICIT(t, e, 0, mote_scan(t_, e, fn, ctx));
    int rc = mote__obj_check(t, e, 0);
    if (!rc && !fn)
        rc = mote__err(MOTE_INVALID, "mote_scan: callback is NULL");
    if (rc)
        return rc;
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, e->eid, &c)))
        return rc;
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        mote_record r;
        if ((rc = mote_cursor_get(c, &k, &v)) ||
            (rc = mote__record_init(&r, e, v.data, v.size, mote__be64(k.data))))
            break;
        if (expired_now(t, &r))
            continue;
        if ((rc = fn(ctx, &r)))
            break;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

