/*
 * schema.c — entities: the schema record stored in the "@schema" tree,
 * opening an entity (create, unchanged, or evolve), building the layouts
 * that make record access O(1), building indexes for existing objects, and
 * dropping a property. Formats: see object.h.
 *
 * Stored data is never dropped implicitly. The stored schema is the union of
 * the properties ever declared (KEPT PROPERTIES in object.h): a definition
 * is matched to it by name, then by renamed_from or a former name; what the
 * definition lacks is kept, what it adds is appended. Opening changes the
 * stored record only when the definition adds a property, renames one,
 * changes flags (indexes) or needs a new layout; a definition that merely
 * lacks properties or orders them differently opens without a write, so it
 * also works in a read transaction. Only mote_entity_drop_prop removes a
 * property's data.
 *
 * Handles are cached per store by (name, definition hash, hash of the
 * record bytes); the usual open is one lookup of the record and a hash of
 * its bytes. When a transaction rewrites an entity's record, every other
 * handle of that entity becomes unusable in it, and for everyone once it
 * commits (MOTE_SCHEMA: open it again), so no handle writes by an outdated
 * schema (an index it believes in may be gone). Handles created or evolved
 * by a transaction become usable by others only when it commits; if it
 * aborts they report MOTE_SCHEMA.
 */
#include <stdio.h>
#include <stdlib.h>

#include "checksum.h"
#include "json.h"
#include "object.h"

typedef struct sformer {
    unsigned n;
    const char *s[MAX_FORMER];
} sformer;

typedef struct sschema {
    uint32_t eid;
    uint16_t next_pid;
    unsigned np;
    mprop *p;            /* names point into the decoded buffer or defs */
    sformer *former;     /* per property: its former names (newest first) */
    unsigned nl;
    mlayout *l;          /* n, pid, type only */
    uint64_t hash;
    unsigned format;     /* the stored schema's (schema_decode) */
} sschema;

/* The vector index parameters of a definition, defaults filled in (all
 * zero without MOTE_P_HNSW). */
static void hnsw_params(const mote_prop_def *d, mprop *q)
{
    int on = (d->flags & MOTE_P_HNSW) != 0;
    q->hmetric = (uint8_t)(!on ? 0 : d->hnsw.distance ? d->hnsw.distance : MOTE_DIST_COSINE);
    q->hm = (uint16_t)(!on ? 0 : d->hnsw.m ? d->hnsw.m : 16);
    q->hefc = (uint16_t)(!on ? 0 : d->hnsw.ef_construction ? d->hnsw.ef_construction : 200);
}

static int same_path(const mprop *a, const mprop *b)
{
    return !a->jpath_text == !b->jpath_text && (!a->jpath_text || !strcmp(a->jpath_text, b->jpath_text));
}

static int same_hnsw(const mprop *a, const mprop *b)
{
    return a->hmetric == b->hmetric && a->hm == b->hm && a->hefc == b->hefc;
}

static uint64_t def_hash(const char *name, const mote_prop_def *d, unsigned n)
{
    uint64_t h = mote__hash64(name, strlen(name), 0x5343484D41ull);
    for (unsigned i = 0; i < n; i++) {
        uint8_t rec[17];
        mprop hp;
        hnsw_params(&d[i], &hp);
        wr32(rec, (uint32_t)d[i].type);
        wr32(rec + 4, d[i].flags);
        wr32(rec + 8, d[i].dim);
        rec[12] = hp.hmetric;
        wr16(rec + 13, hp.hm);
        wr16(rec + 15, hp.hefc);
        h = mote__hash64(d[i].name, strlen(d[i].name), h) ^ mote__hash64(rec, 17, h);
        if (d[i].target)
            h ^= mote__hash64(d[i].target, strlen(d[i].target), h + 1);
        if (d[i].json_path)
            h ^= mote__hash64(d[i].json_path, strlen(d[i].json_path), h + 2);
    }
    return h ? h : 1; /* 0 means "no definition" in records and handles */
}

static uint64_t rec_hash(const mote_val *v)
{
    return mote__hash64(v->data, v->size, 0x5245434F5244ull);
}

/* Does property d's json_path compile? (MOTE_INVALID with the message) */
static int check_path(const char *name, const mote_prop_def *d)
{
    jpath *jp;
    int rc = mote__jpath_compile(d->json_path, strlen(d->json_path), &jp);
    mote__free(jp);
    (void)name;
    return rc;
}

static int validate_defs(const char *name, const mote_prop_def *d, unsigned n)
{
    if (!name || !*name || strlen(name) > 150)
        return mote__err(MOTE_INVALID, "entity name must be 1 to 150 bytes");
    if (n > MAX_PROPS || (n && !d))
        return mote__err(MOTE_INVALID, "entity %s: bad property list", name);
    for (unsigned i = 0; i < n; i++) {
        if (!d[i].name || !*d[i].name || strlen(d[i].name) > 200)
            return mote__err(MOTE_INVALID, "entity %s: property %u has no valid name",
                             name, i);
        if (d[i].renamed_from && (!*d[i].renamed_from || strlen(d[i].renamed_from) > 200))
            return mote__err(MOTE_INVALID, "%s.%s: renamed_from must be 1 to 200 bytes",
                             name, d[i].name);
        if (d[i].type < MOTE_T_BOOL || d[i].type > MOTE_T_TOMANY)
            return mote__err(MOTE_INVALID, "%s.%s: unknown type %d", name, d[i].name,
                             d[i].type);
        if (type_is_rel(d[i].type) != (d[i].target != NULL) ||
            (d[i].target && (!*d[i].target || strlen(d[i].target) > 150)))
            return mote__err(MOTE_INVALID, "%s.%s: a relation needs a target entity "
                             "name (and only a relation has one)", name, d[i].name);
        if (d[i].type == MOTE_T_TOONE &&
            (d[i].flags & MOTE_P_UNIQUE))
            return mote__err(MOTE_INVALID, "%s.%s: a to-one relation cannot be unique",
                             name, d[i].name);
        if (d[i].type == MOTE_T_TOMANY && d[i].flags)
            return mote__err(MOTE_INVALID, "%s.%s: a to-many relation takes no flags",
                             name, d[i].name);
        if ((d[i].flags & MOTE_P_FULLTEXT) && d[i].type != MOTE_T_STRING)
            return mote__err(MOTE_INVALID, "%s.%s: a full-text index is for string properties, "
                             "not %s", name, d[i].name, mote__type_name(d[i].type));
        if ((d[i].flags & MOTE_P_STEM) && !(d[i].flags & MOTE_P_FULLTEXT))
            return mote__err(MOTE_INVALID, "%s.%s: stemming (MOTE_P_STEM) is an option of a "
                             "full-text index (MOTE_P_FULLTEXT)", name, d[i].name);
        if ((d[i].flags & MOTE_P_EXPIRES) &&
            (d[i].type != MOTE_T_TIMESTAMP || !(d[i].flags & MOTE_P_INDEXED) ||
             (d[i].flags & MOTE_P_UNIQUE)))
            return mote__err(MOTE_INVALID, "%s.%s: an expiry time (MOTE_P_EXPIRES) is an "
                             "indexed, not unique, timestamp property", name, d[i].name);
        for (unsigned j = 0; (d[i].flags & MOTE_P_EXPIRES) && j < i; j++)
            if (d[j].flags & MOTE_P_EXPIRES)
                return mote__err(MOTE_INVALID, "entity %s: two expiry times (%s and %s)", name,
                                 d[j].name, d[i].name);
        if (d[i].flags & ~(MOTE_P_NULLABLE | MOTE_P_INDEXED | MOTE_P_UNIQUE | MOTE_P_HNSW |
                           MOTE_P_FULLTEXT | MOTE_P_EXPIRES | MOTE_P_STEM))
            return mote__err(MOTE_INVALID, "%s.%s: unknown flags 0x%x", name,
                             d[i].name, d[i].flags);
        const mote_hnsw_def *h = &d[i].hnsw;
        if (!(d[i].flags & MOTE_P_HNSW) && (h->distance || h->m || h->ef_construction))
            return mote__err(MOTE_INVALID, "%s.%s: vector index parameters without "
                             "MOTE_P_HNSW", name, d[i].name);
        if ((d[i].flags & MOTE_P_HNSW) && d[i].type != MOTE_T_VECTOR)
            return mote__err(MOTE_INVALID, "%s.%s: a vector index is for vector properties, "
                             "not %s", name, d[i].name, mote__type_name(d[i].type));
        if (h->distance && (h->distance < MOTE_DIST_COSINE || h->distance > MOTE_DIST_DOT))
            return mote__err(MOTE_INVALID, "%s.%s: unknown distance %d for the vector index",
                             name, d[i].name, h->distance);
        if (h->m && (h->m < 2 || h->m > 100))
            return mote__err(MOTE_INVALID, "%s.%s: the vector index's m must be 2 to 100, "
                             "not %u", name, d[i].name, h->m);
        if (h->ef_construction &&
            (h->ef_construction > 4096 || h->ef_construction < (h->m ? h->m : 16u)))
            return mote__err(MOTE_INVALID, "%s.%s: the vector index's ef_construction must "
                             "be m (%u) to 4096, not %u", name, d[i].name, h->m ? h->m : 16u,
                             h->ef_construction);
        int json_ix = d[i].type == MOTE_T_JSON && (d[i].flags & MOTE_P_INDEXED);
        if (json_ix != (d[i].json_path != NULL) || (json_ix && (d[i].flags & MOTE_P_UNIQUE)))
            return mote__err(MOTE_INVALID, "%s.%s: an index on a JSON property is on a path: "
                             "MOTE_P_INDEXED (not unique) with a json_path, and only a JSON "
                             "property has one", name, d[i].name);
        if (json_ix && (strlen(d[i].json_path) > 1000 || check_path(name, &d[i])))
            return mote__err(MOTE_INVALID, "%s.%s: %s", name, d[i].name,
                             strlen(d[i].json_path) > 1000 ? "json_path is over 1000 bytes"
                                                           : mote_errmsg(NULL));
        if ((d[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) && !type_indexable(d[i].type) &&
            !json_ix)
            return mote__err(MOTE_INVALID, "%s.%s: %s properties cannot be indexed",
                             name, d[i].name, mote__type_name(d[i].type));
        if ((d[i].type == MOTE_T_VECTOR) != (d[i].dim > 0) || d[i].dim > 65536)
            return mote__err(MOTE_INVALID, "%s.%s: a vector needs a dimension of 1 "
                             "to 65536 (and only a vector has one)", name, d[i].name);
        for (unsigned j = 0; j < i; j++)
            if (!strcmp(d[i].name, d[j].name))
                return mote__err(MOTE_INVALID, "entity %s: property %s defined twice",
                                 name, d[i].name);
    }
    return MOTE_OK;
}

/* ---- the schema record ---------------------------------------------------- */

static void schema_free(sschema *ss)
{
    for (unsigned i = 0; ss->l && i < ss->nl; i++) {
        mote__free(ss->l[i].pid);
        mote__free(ss->l[i].type);
    }
    mote__free(ss->l);
    mote__free(ss->p);
    mote__free(ss->former);
    memset(ss, 0, sizeof *ss);
}

/* Room for np properties and nl layouts (their slot arrays not included). */
static int schema_alloc(sschema *ss, unsigned np, unsigned nl)
{
    ss->p = mote__calloc(np + 1, sizeof *ss->p);
    ss->former = mote__calloc(np + 1, sizeof *ss->former);
    ss->l = mote__calloc(nl + 1, sizeof *ss->l);
    return ss->p && ss->former && ss->l ? MOTE_OK
                                        : mote__err(MOTE_NOMEM, "out of memory reading a schema");
}

/* Copy a length-prefixed name at p (n bytes) to *names; returns it. */
static const char *take_name(const uint8_t *p, unsigned n, char **names)
{
    char *s = *names;
    memcpy(s, p, n);
    s[n] = 0;
    *names += n + 1;
    return s;
}

static int schema_decode(const char *ename, const uint8_t *b, size_t n, sschema *ss,
                         char *names)
{
    memset(ss, 0, sizeof *ss);
    const uint8_t *p = b, *end = b + n;
#define NEED(k)                                                                          \
    do {                                                                                 \
        if ((size_t)(end - p) < (size_t)(k))                                             \
            goto bad;                                                                    \
    } while (0)
    NEED(12);
    unsigned format = rd32(p);
    if (format < 1 || format > 8)
        return mote__err(MOTE_FORMAT, "entity %s: schema format %u unknown (written by a "
                         "newer MoteDB?)", ename, format);
    ss->format = format;
    ss->eid = rd32(p + 4);
    ss->next_pid = rd16(p + 8);
    ss->np = rd16(p + 10);
    p += 12;
    if (schema_alloc(ss, ss->np, 0))
        goto nomem;
    for (unsigned i = 0; i < ss->np; i++) {
        NEED(9);
        mprop *q = &ss->p[i];
        q->id = rd16(p);
        q->type = p[2];
        q->flags = p[3];
        q->dim = rd32(p + 4);
        unsigned nl = p[8];
        p += 9;
        NEED(nl);
        q->name = (char *)take_name(p, nl, &names);
        p += nl;
        if (q->type < MOTE_T_BOOL || q->type > MOTE_T_TOMANY || !nl)
            goto bad;
        if (type_is_rel(q->type)) {
            NEED(1);
            unsigned tl = p[0];
            NEED(1 + (size_t)tl);
            q->target = (char *)take_name(p + 1, tl, &names);
            p += 1 + tl;
        }
        if (format >= 2) {
            NEED(1);
            unsigned nf = *p++;
            if (nf > MAX_FORMER)
                goto bad;
            for (unsigned k = 0; k < nf; k++) {
                NEED(1);
                unsigned fl = p[0];
                NEED(1 + (size_t)fl);
                ss->former[i].s[k] = take_name(p + 1, fl, &names);
                p += 1 + fl;
            }
            ss->former[i].n = nf;
        }
        if ((q->flags & MOTE_P_FULLTEXT) && (format < 4 || q->type != MOTE_T_STRING))
            goto bad;
        if ((q->flags & MOTE_P_EXPIRES) && (format < 5 || q->type != MOTE_T_TIMESTAMP))
            goto bad;
        if ((q->flags & MOTE_P_STEM) && (format < 7 || !(q->flags & MOTE_P_FULLTEXT)))
            goto bad;
        q->jpath_text = NULL;
        q->jp = NULL;
        if (q->flags & MOTE_P_HNSW) { /* format 3 */
            NEED(5);
            q->hmetric = p[0];
            q->hm = rd16(p + 1);
            q->hefc = rd16(p + 3);
            p += 5;
            if (format < 3 || q->type != MOTE_T_VECTOR || q->hmetric < MOTE_DIST_COSINE ||
                q->hmetric > MOTE_DIST_DOT || q->hm < 2 || q->hm > 100 || q->hefc < q->hm)
                goto bad;
        }
        if (q->type == MOTE_T_JSON && (q->flags & MOTE_P_INDEXED)) { /* format 6: its path */
            NEED(2);
            unsigned pl = rd16(p);
            NEED(2 + (size_t)pl);
            q->jpath_text = (char *)take_name(p + 2, pl, &names);
            p += 2 + pl;
            if (format < 6 || memchr(q->jpath_text, 0, pl))
                goto bad;
        }
    }
    NEED(2);
    ss->nl = rd16(p);
    p += 2;
    mote__free(ss->l);
    ss->l = mote__calloc(ss->nl + 1, sizeof *ss->l);
    if (!ss->l)
        goto nomem;
    for (unsigned i = 0; i < ss->nl; i++) {
        NEED(2);
        unsigned k = rd16(p);
        p += 2;
        NEED(3 * (size_t)k);
        ss->l[i].n = k;
        ss->l[i].pid = mote__malloc(2 * (size_t)k + 2);
        ss->l[i].type = mote__malloc((size_t)k + 1);
        if (!ss->l[i].pid || !ss->l[i].type)
            goto nomem;
        for (unsigned j = 0; j < k; j++) {
            ss->l[i].pid[j] = rd16(p + 3 * j);
            ss->l[i].type[j] = p[3 * j + 2];
            if (ss->l[i].type[j] < MOTE_T_BOOL || ss->l[i].type[j] > MOTE_T_TOONE)
                goto bad;
        }
        p += 3 * (size_t)k;
    }
    NEED(8);
    ss->hash = rd64(p);
    if (ss->nl == 0)
        goto bad;
    return MOTE_OK;
#undef NEED
bad:
    schema_free(ss);
    return CORRUPT("entity %s: schema record is damaged", ename);
nomem:
    schema_free(ss);
    return mote__err(MOTE_NOMEM, "out of memory reading a schema");
}

static int schema_encode(const sschema *ss, uint8_t **out, size_t *len)
{
    size_t n = 12 + 2 + 8;
    /* 3 when a property has a vector index, 4 a full-text one, 5 an expiry
     * time, 6 an index on a JSON path, 7 a full-text index that stems, 8 a
     * full-text index in segments (text.c SEGMENTS; 4 and 7 had one block
     * chain per term: such an index is rebuilt, entity_open) (so that a
     * library that would not maintain the index, or would show expired
     * objects, refuses the entity) */
    unsigned format = 2;
    for (unsigned i = 0; i < ss->np; i++) {
        n += 9 + strlen(ss->p[i].name) + (ss->p[i].target ? 1 + strlen(ss->p[i].target) : 0);
        n += 1;
        if (ss->p[i].flags & MOTE_P_HNSW) {
            n += 5;
            format = format > 3 ? format : 3;
        }
        if (ss->p[i].flags & MOTE_P_FULLTEXT)
            format = 8;
        if (ss->p[i].flags & MOTE_P_EXPIRES)
            format = format > 5 ? format : 5;
        if (ss->p[i].jpath_text) {
            n += 2 + strlen(ss->p[i].jpath_text);
            format = format > 6 ? format : 6;
        }
        if (ss->p[i].flags & MOTE_P_STEM)
            format = format > 7 ? format : 7;
        for (unsigned k = 0; k < ss->former[i].n; k++)
            n += 1 + strlen(ss->former[i].s[k]);
    }
    for (unsigned i = 0; i < ss->nl; i++)
        n += 2 + 3 * (size_t)ss->l[i].n;
    uint8_t *b = mote__malloc(n), *p = b;
    if (!b)
        return mote__err(MOTE_NOMEM, "out of memory writing a schema");
    wr32(p, format);
    wr32(p + 4, ss->eid);
    wr16(p + 8, ss->next_pid);
    wr16(p + 10, (uint16_t)ss->np);
    p += 12;
    for (unsigned i = 0; i < ss->np; i++) {
        size_t nl = strlen(ss->p[i].name);
        wr16(p, ss->p[i].id);
        p[2] = ss->p[i].type;
        p[3] = ss->p[i].flags;
        wr32(p + 4, ss->p[i].dim);
        p[8] = (uint8_t)nl;
        memcpy(p + 9, ss->p[i].name, nl);
        p += 9 + nl;
        if (ss->p[i].target) {
            size_t tl = strlen(ss->p[i].target);
            p[0] = (uint8_t)tl;
            memcpy(p + 1, ss->p[i].target, tl);
            p += 1 + tl;
        }
        *p++ = (uint8_t)ss->former[i].n;
        for (unsigned k = 0; k < ss->former[i].n; k++) {
            size_t fl = strlen(ss->former[i].s[k]);
            p[0] = (uint8_t)fl;
            memcpy(p + 1, ss->former[i].s[k], fl);
            p += 1 + fl;
        }
        if (ss->p[i].flags & MOTE_P_HNSW) {
            p[0] = ss->p[i].hmetric;
            wr16(p + 1, ss->p[i].hm);
            wr16(p + 3, ss->p[i].hefc);
            p += 5;
        }
        if (ss->p[i].jpath_text) {
            size_t pl = strlen(ss->p[i].jpath_text);
            wr16(p, (uint16_t)pl);
            memcpy(p + 2, ss->p[i].jpath_text, pl);
            p += 2 + pl;
        }
    }
    wr16(p, (uint16_t)ss->nl);
    p += 2;
    for (unsigned i = 0; i < ss->nl; i++) {
        wr16(p, (uint16_t)ss->l[i].n);
        p += 2;
        for (unsigned j = 0; j < ss->l[i].n; j++) {
            wr16(p, ss->l[i].pid[j]);
            p[2] = ss->l[i].type[j];
            p += 3;
        }
    }
    wr64(p, ss->hash);
    *out = b;
    *len = n;
    return MOTE_OK;
}

/* ---- entity handles ------------------------------------------------------------ */

static void entity_free(mote_entity *e)
{
    if (!e)
        return;
    for (unsigned i = 0; e->props && i < e->nall; i++) {
        mote__free(e->props[i].name);
        mote__free(e->props[i].target);
        mote__free(e->props[i].jpath_text);
        mote__free(e->props[i].jp);
    }
    for (unsigned i = 0; e->layouts && i < e->nlayouts; i++) {
        mlayout *L = &e->layouts[i];
        mote__free(L->pid);
        mote__free(L->type);
        mote__free(L->off);
        mote__free(L->prev_var);
        mote__free(L->slot_of);
    }
    mote__free(e->layouts);
    mote__free(e->props);
    mote__free(e->name);
    mote__free(e);
}

void mote__entities_free(mote_store *s)
{
    for (mote_entity *e = OBJ(s)->entities, *nx; e; e = nx) {
        nx = e->next;
        entity_free(e);
    }
    OBJ(s)->entities = NULL;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = mote__malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

/* The store's entity handles are shared by its threads: the list and the
 * handles' pending/dead/stale state change under the store's mutex. A handle
 * fits if it was built for this definition (hash; 0: the stored one) from
 * these record bytes, and is usable in t. */
static mote_entity *find_handle(mote_txn *t, const char *name, uint64_t hash, uint64_t rh)
{
    mote_store *s = t->s;
    mote_entity *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (mote_entity *e = OBJ(s)->entities; e && !found; e = e->next)
        if (e->hash == hash && e->rec_hash == rh && !e->dead && !e->stale &&
            (!e->pending_txn || e->pending_txn == t) &&
            !(e->stale_serial && e->stale_serial == t->serial) && !strcmp(e->name, name))
            found = e;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static void add_handle(mote_store *s, mote_entity *e)
{
    pthread_mutex_lock(&s->mu);
    e->next = OBJ(s)->entities;
    OBJ(s)->entities = e;
    pthread_mutex_unlock(&s->mu);
}

/* A handle built in write transaction t after t changed some schema may
 * rest on a record that is not committed: it lives and dies with t. */
static void add_pending(mote_txn *t, mote_entity *e)
{
    e->pending_txn = t;
    e->pending_next = OTX(t)->new_entities;
    OTX(t)->new_entities = e;
    add_handle(t->s, e);
}

/* Write transaction t rewrote entity `name`'s record (keep: the new handle):
 * the other handles of it are unusable in t at once, and for everyone once t
 * commits (mote__objects_end). */
static void supersede(mote_txn *t, const char *name, const mote_entity *keep)
{
    mote_store *s = t->s;
    pthread_mutex_lock(&s->mu);
    for (mote_entity *e = OBJ(s)->entities; e; e = e->next) {
        if (e == keep || strcmp(e->name, name))
            continue;
        if (e->pending_txn == t)
            e->dead = 1;
        else if (!e->dead && !e->stale)
            e->stale_serial = t->serial;
    }
    pthread_mutex_unlock(&s->mu);
}

static int index_tree_name(char *buf, size_t n, uint32_t eid, uint16_t pid)
{
    return snprintf(buf, n, "@i:%u:%u", eid, pid);
}

static int link_tree_name(char *buf, size_t n, uint32_t eid, uint16_t pid)
{
    return snprintf(buf, n, "@l:%u:%u", eid, pid);
}

static int vindex_tree_name(char *buf, size_t n, uint32_t eid, uint16_t pid)
{
    return snprintf(buf, n, "@h:%u:%u", eid, pid);
}

static int text_tree_name(char *buf, size_t n, uint32_t eid, uint16_t pid)
{
    return snprintf(buf, n, "@t:%u:%u", eid, pid);
}

/* Build a handle from a schema whose first ndecl properties are the
 * definition's (hash: its hash, 0 for the stored view; rh: the record's). */
static int entity_build(mote_txn *t, const char *name, const sschema *ss, unsigned ndecl,
                        uint64_t hash, uint64_t rh, mote_entity **out)
{
    mote_entity *e = mote__calloc(1, sizeof *e);
    int rc = MOTE_OK;
    if (!e)
        return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    e->s = t->s;
    e->eid = ss->eid;
    e->expires = -1;
    e->hash = hash;
    e->rec_hash = rh;
    e->nprops = ndecl;
    e->nlayouts = ss->nl;
    e->name = dupstr(name);
    e->props = mote__calloc(ss->np + 1, sizeof *e->props);
    e->layouts = mote__calloc(ss->nl, sizeof *e->layouts);
    if (!e->name || !e->props || !e->layouts)
        goto nomem;
    for (unsigned i = 0; i < ss->np; i++) {
        e->nall = i + 1;
        e->props[i] = ss->p[i];
        e->props[i].index_tree = 0;
        e->props[i].link_tree = 0;
        e->props[i].vindex_tree = 0;
        e->props[i].text_tree = 0;
        e->props[i].target = NULL;
        e->props[i].tgt_serial = 0; /* no cached target id */
        e->props[i].jpath_text = NULL;
        e->props[i].jp = NULL;
        if (!(e->props[i].name = dupstr(ss->p[i].name)))
            goto nomem;
        if (ss->p[i].jpath_text) {
            const char *pt = ss->p[i].jpath_text;
            if (!(e->props[i].jpath_text = dupstr(pt)))
                goto nomem;
            if ((rc = mote__jpath_compile(pt, strlen(pt), &e->props[i].jp)))
                goto fail; /* checked when declared: out of memory, or a damaged record */
        }
        if (ss->p[i].target && !(e->props[i].target = dupstr(ss->p[i].target)))
            goto nomem;
        char tn[64];
        if (e->props[i].type == MOTE_T_TOMANY) {
            link_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].link_tree)) &&
                rc != MOTE_NOTFOUND)
                goto fail;
            rc = MOTE_OK;
        }
        if (e->props[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) {
            index_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].index_tree)))
                goto fail;
        }
        if (e->props[i].flags & MOTE_P_HNSW) {
            e->vindexes = 1;
            vindex_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].vindex_tree)))
                goto fail;
        }
        if ((e->props[i].flags & MOTE_P_EXPIRES) && e->expires < 0)
            e->expires = (int)i;
        if (e->props[i].flags & MOTE_P_FULLTEXT) {
            e->tindexes = 1;
            text_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].text_tree)))
                goto fail;
        }
    }
    for (unsigned li = 0; li < ss->nl; li++) {
        mlayout *L = &e->layouts[li];
        unsigned n = ss->l[li].n;
        L->n = n;
        L->pid = mote__malloc(2 * (size_t)n + 2);
        L->type = mote__malloc((size_t)n + 1);
        L->off = mote__malloc(4 * (size_t)n + 4);
        L->prev_var = mote__malloc(4 * (size_t)n + 4);
        L->slot_of = mote__malloc(4 * (size_t)ss->np + 4);
        if (!L->pid || !L->type || !L->off || !L->prev_var || !L->slot_of)
            goto nomem;
        int32_t last_var = -1;
        for (unsigned j = 0; j < n; j++) {
            L->pid[j] = ss->l[li].pid[j];
            L->type[j] = ss->l[li].type[j];
            L->off[j] = L->fixed;
            L->fixed += mote__type_size(L->type[j]);
            L->prev_var[j] = last_var;
            if (type_is_var(L->type[j]))
                last_var = (int32_t)j;
        }
        L->last_var = last_var;
        for (unsigned i = 0; i < ss->np; i++) {
            L->slot_of[i] = -1;
            for (unsigned j = 0; j < n; j++)
                if (L->pid[j] == e->props[i].id && L->type[j] == e->props[i].type)
                    L->slot_of[i] = (int32_t)j;
        }
    }
    rc = mote_kv_tree(t, "@seq", t->write ? MOTE_TREE_CREATE : 0, &e->seq_tree);
    if (rc == MOTE_NOTFOUND) /* read txn on a store that never assigned ids */
        rc = MOTE_OK;
    if (rc)
        goto fail;
    *out = e;
    return MOTE_OK;
nomem:
    rc = mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
fail:
    entity_free(e);
    return rc;
}

/* Call fn(t, e, prop, id, value) for each stored object of e, in id order,
 * with its value of property `prop`, until fn returns non-zero. */
static int each_value(mote_txn *t, mote_entity *e, unsigned prop,
                      int (*fn)(mote_txn *, mote_entity *, unsigned, uint64_t, mote_value *))
{
    mote_cursor *c;
    int rc = mote_cursor_open(t, e->eid, &c);
    if (rc)
        return rc;
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        mote_record r;
        mote_value val;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        if (k.size != 8) {
            rc = CORRUPT("%s: an object key of %zu bytes", e->name, k.size);
            break;
        }
        if ((rc = mote__record_init(&r, e, v.data, v.size, mote__be64(k.data))) ||
            (rc = mote_record_get(&r, prop, &val, NULL)) || (rc = fn(t, e, prop, r.id, &val)))
            break;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

static int index_one(mote_txn *t, mote_entity *e, unsigned prop, uint64_t id, mote_value *val)
{
    /* copy variable data: the index write may move the record's page */
    uint8_t *copy = NULL;
    if (type_is_var(e->props[prop].type) && !val->null) {
        copy = mote__malloc(val->v.s.n + 1);
        if (!copy)
            return mote__err(MOTE_NOMEM, "out of memory building an index");
        if (val->v.s.n) /* (an absent value has no bytes: p is NULL) */
            memcpy(copy, val->v.s.p, val->v.s.n);
        val->v.s.p = copy;
    }
    int rc = mote__index_add(t, e, &e->props[prop], val, id);
    mote__free(copy);
    if (rc == MOTE_UNIQUE)
        rc = mote__err(MOTE_SCHEMA, "%s.%s: cannot be unique, objects share a value", e->name,
                       e->props[prop].name);
    return rc;
}

/* Build the index of property `prop` from the existing objects. */
int mote__schema_build_index(mote_txn *t, mote_entity *e, unsigned prop)
{
    return each_value(t, e, prop, index_one);
}

/* ---- evolving the stored schema ---------------------------------------------------- */

/* What a definition changes in the stored schema, in words (a read
 * transaction's error names it). */
typedef struct ediff {
    int changed; /* the record must be rewritten */
    size_t len;
    char text[480];
} ediff;

static void diff_add(ediff *d, const char *fmt, ...)
{
    d->changed = 1;
    if (d->len + 8 >= sizeof d->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (d->len)
        d->len += (size_t)snprintf(d->text + d->len, sizeof d->text - d->len, "; ");
    if (d->len < sizeof d->text)
        d->len += (size_t)vsnprintf(d->text + d->len, sizeof d->text - d->len, fmt, ap);
    va_end(ap);
    if (d->len >= sizeof d->text) { /* cut: end with "..." */
        d->len = sizeof d->text - 1;
        memcpy(d->text + d->len - 3, "...", 4);
    }
}

static int is_former(const sformer *f, const char *name)
{
    for (unsigned k = 0; name && k < f->n; k++)
        if (!strcmp(f->s[k], name))
            return 1;
    return 0;
}

/* Remove `name` from a list of former names. */
static void former_drop(sformer *f, const char *name)
{
    unsigned k = 0;
    for (unsigned j = 0; j < f->n; j++)
        if (strcmp(f->s[j], name))
            f->s[k++] = f->s[j];
    f->n = k;
}

/* Props of `ss` that occupy a slot of the record, as a set, equal to layout L? */
static int layout_fits(const sschema *ss, const mlayout *L)
{
    unsigned nslots = 0;
    for (unsigned i = 0; i < ss->np; i++) {
        if (ss->p[i].type == MOTE_T_TOMANY)
            continue;
        nslots++;
        int found = 0;
        for (unsigned j = 0; j < L->n && !found; j++)
            found = L->pid[j] == ss->p[i].id && L->type[j] == ss->p[i].type;
        if (!found)
            return 0;
    }
    return nslots == L->n;
}

/* Copy the layouts of old into ns and append one for ns's slots if the last
 * one does not hold exactly them. */
static int evolve_layouts(const char *name, const sschema *old, sschema *ns, ediff *diff)
{
    ns->nl = old->nl;
    for (unsigned i = 0; i < old->nl; i++) {
        ns->l[i].n = old->l[i].n;
        ns->l[i].pid = mote__malloc(2 * (size_t)old->l[i].n + 2);
        ns->l[i].type = mote__malloc((size_t)old->l[i].n + 1);
        if (!ns->l[i].pid || !ns->l[i].type)
            return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
        memcpy(ns->l[i].pid, old->l[i].pid, 2 * (size_t)old->l[i].n);
        memcpy(ns->l[i].type, old->l[i].type, old->l[i].n);
    }
    if (old->nl && layout_fits(ns, &old->l[old->nl - 1]))
        return MOTE_OK;
    if (ns->nl >= 0xFFFF)
        return mote__err(MOTE_FULL, "entity %s: too many schema versions", name);
    diff->changed = 1;
    unsigned nslots = 0;
    for (unsigned i = 0; i < ns->np; i++)
        nslots += ns->p[i].type != MOTE_T_TOMANY;
    mlayout *L = &ns->l[ns->nl++];
    L->n = nslots;
    L->pid = mote__malloc(2 * (size_t)nslots + 2);
    L->type = mote__malloc((size_t)nslots + 1);
    if (!L->pid || !L->type)
        return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
    for (unsigned i = 0, j = 0; i < ns->np; i++) {
        if (ns->p[i].type == MOTE_T_TOMANY)
            continue;
        L->pid[j] = ns->p[i].id;
        L->type[j++] = ns->p[i].type;
    }
    return MOTE_OK;
}

static const char *flag_change(unsigned was, unsigned now)
{
    unsigned ix = MOTE_P_INDEXED | MOTE_P_UNIQUE;
    if ((was & MOTE_P_HNSW) != (now & MOTE_P_HNSW))
        return now & MOTE_P_HNSW ? "gains a vector index" : "loses its vector index";
    if ((was & MOTE_P_FULLTEXT) != (now & MOTE_P_FULLTEXT))
        return now & MOTE_P_FULLTEXT ? "gains a full-text index" : "loses its full-text index";
    if ((was & MOTE_P_STEM) != (now & MOTE_P_STEM))
        return now & MOTE_P_STEM ? "gains stemming (its full-text index is built again)"
                                 : "loses stemming (its full-text index is built again)";
    if ((was & MOTE_P_EXPIRES) != (now & MOTE_P_EXPIRES))
        return now & MOTE_P_EXPIRES ? "becomes an expiry time" : "is no longer an expiry time";
    if ((was & MOTE_P_UNIQUE) != (now & MOTE_P_UNIQUE))
        return now & MOTE_P_UNIQUE ? "becomes unique" : "is no longer unique";
    if ((was & ix) != (now & ix))
        return now & ix ? "gains an index" : "loses its index";
    return now & MOTE_P_NULLABLE ? "becomes nullable" : "is no longer nullable";
}

/*
 * The stored schema `old` as the definition d[0..n) sees it: ns holds the
 * definition's properties in its order (matched ones keep their ids), then
 * the kept ones in stored order. matched[i] is the stored index of d[i]
 * (-1: new). diff says whether the record must change, and how.
 */
static int evolve(const char *name, const sschema *old, const mote_prop_def *d, unsigned n,
                  uint64_t hash, sschema *ns, int *matched, ediff *diff)
{
    memset(ns, 0, sizeof *ns);
    memset(diff, 0, sizeof *diff);
    int *owner = mote__malloc((old->np + 1) * sizeof *owner);
    if (!owner)
        return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
    for (unsigned j = 0; j < old->np; j++)
        owner[j] = -1;
    /* by name first; then renamed_from naming a stored or former name, then
     * the definition's name being a former name, among the unmatched */
    for (unsigned pass = 0; pass < 3; pass++)
        for (unsigned i = 0; i < n; i++) {
            if (pass == 0)
                matched[i] = -1;
            else if (matched[i] >= 0)
                continue;
            for (unsigned j = 0; j < old->np && matched[i] < 0; j++) {
                const char *on = old->p[j].name, *rf = d[i].renamed_from;
                int hit = pass == 0   ? !strcmp(on, d[i].name)
                          : pass == 1 ? rf && (!strcmp(on, rf) || is_former(&old->former[j], rf))
                                      : is_former(&old->former[j], d[i].name);
                if (hit && owner[j] < 0) {
                    owner[j] = (int)i;
                    matched[i] = (int)j;
                }
            }
        }
    unsigned kept = 0;
    for (unsigned j = 0; j < old->np; j++)
        kept += owner[j] < 0;
    int rc = schema_alloc(ns, n + kept, old->nl + 1);
    ns->eid = old->eid;
    ns->next_pid = old->next_pid;
    ns->np = n + kept;
    ns->hash = hash;
    for (unsigned i = 0; !rc && i < n; i++) {
        mprop *q = &ns->p[i];
        q->name = (char *)d[i].name;
        q->type = (uint8_t)d[i].type;
        /* a to-one relation is always nullable and indexed */
        q->flags = (uint8_t)(d[i].type == MOTE_T_TOONE
                                 ? d[i].flags | MOTE_P_NULLABLE | MOTE_P_INDEXED
                                 : d[i].flags);
        q->dim = d[i].dim;
        q->target = (char *)d[i].target;
        q->jpath_text = (char *)d[i].json_path;
        q->jp = NULL;
        hnsw_params(&d[i], q);
        int m = matched[i];
        if (m < 0) {
            if (ns->next_pid == 0xFFFF)
                rc = mote__err(MOTE_FULL, "entity %s: too many property changes", name);
            q->id = ns->next_pid++;
            diff_add(diff, "new property %s", d[i].name);
            continue;
        }
        const mprop *op = &old->p[m];
        if (op->type != d[i].type || op->dim != d[i].dim ||
            (op->target && strcmp(op->target, d[i].target))) {
            rc = mote__err(MOTE_SCHEMA, "%s.%s: stored as %s%s%s, now declared %s%s%s: "
                           "changing a property's type is not supported (add a new "
                           "property instead)", name, d[i].name, mote__type_name(op->type),
                           op->target ? " of " : "", op->target ? op->target : "",
                           mote__type_name(d[i].type), d[i].target ? " of " : "",
                           d[i].target ? d[i].target : "");
            break;
        }
        q->id = op->id;
        ns->former[i] = old->former[m];
        if (strcmp(op->name, d[i].name)) {
            /* declared by another of its names: the stored one becomes a
             * former one (in the record if it is written; a name that is
             * new to the property is a rename, which is written) */
            if (!is_former(&old->former[m], d[i].name))
                diff_add(diff, "%s renamed from %s", d[i].name, op->name);
            former_drop(&ns->former[i], d[i].name);
            if (ns->former[i].n == MAX_FORMER)
                ns->former[i].n--;
            memmove(&ns->former[i].s[1], &ns->former[i].s[0],
                    ns->former[i].n * sizeof ns->former[i].s[0]);
            ns->former[i].s[0] = op->name;
            ns->former[i].n++;
        }
        if (q->flags != op->flags)
            diff_add(diff, "%s %s", d[i].name, flag_change(op->flags, q->flags));
        else if (!same_path(q, op))
            diff_add(diff, "%s's index moves to the path %s", d[i].name, q->jpath_text);
        else if (!same_hnsw(q, op))
            diff_add(diff, "%s's vector index changes parameters", d[i].name);
    }
    for (unsigned j = 0, k = n; !rc && j < old->np; j++)
        if (owner[j] < 0) { /* kept as it is */
            ns->p[k] = old->p[j];
            ns->former[k++] = old->former[j];
        }
    /* a name belongs to one property: a declared one takes it from the
     * former names of the others */
    for (unsigned i = 0; !rc && i < n; i++)
        for (unsigned j = 0; j < ns->np; j++)
            if (j != i && is_former(&ns->former[j], d[i].name)) {
                former_drop(&ns->former[j], d[i].name);
                diff->changed = 1;
            }
    if (!rc)
        rc = evolve_layouts(name, old, ns, diff);
    mote__free(owner);
    if (rc)
        schema_free(ns);
    return rc;
}

static int schema_tree(mote_txn *t, uint32_t *tree)
{
    return mote_kv_tree(t, "@schema", t->write ? MOTE_TREE_CREATE : 0, tree);
}

static int save_schema(mote_txn *t, uint32_t tree, const char *name, const sschema *ss,
                       uint64_t *rh)
{
    uint8_t *b = NULL;
    size_t n = 0;
    int rc = schema_encode(ss, &b, &n);
    if (rc)
        return rc;
    mote_val v = {b, n};
    *rh = rec_hash(&v);
    rc = mote_kv_put(t, tree, name, strlen(name), b, n, 0);
    mote__free(b);
    return rc;
}

/* The first n stored properties are exactly the definition's? (the record
 * was written for it: its hash matches) */
static int same_prefix(const sschema *ss, const mote_prop_def *d, unsigned n)
{
    if (ss->np < n)
        return 0;
    for (unsigned i = 0; i < n; i++)
        if (strcmp(ss->p[i].name, d[i].name) || ss->p[i].type != d[i].type)
            return 0;
    return 1;
}

static int note_one(mote_txn *t, mote_entity *e, unsigned prop, uint64_t id, mote_value *val)
{
    return has_vector(val) ? mote__hnsw_note(t, e, prop, id) : MOTE_OK;
}

/* Build the vector index of property `prop` from the existing objects: each
 * object with a vector is noted, and inserted at the flush. */
static int build_vindex(mote_txn *t, mote_entity *e, unsigned prop)
{
    return each_value(t, e, prop, note_one);
}

static int text_one(mote_txn *t, mote_entity *e, unsigned prop, uint64_t id, mote_value *val)
{
    int rc = mote__text_note_value(t, &e->props[prop], id, val, 1);
    return rc ? rc : mote__text_flush_big(t); /* (each_value reads val no more) */
}

/* The full-text index of e's property i after an evolution (had: the stored
 * property, NULL if new; had_format: its schema's format): built from the
 * objects when it is new, dropped when it goes (the notes made before were
 * written: mote__text_flush). */
static int evolve_tindex(mote_txn *t, mote_entity *e, unsigned i, const mprop *had,
                         unsigned had_format)
{
    mprop *p = &e->props[i];
    int was = had && (had->flags & MOTE_P_FULLTEXT), now = (p->flags & MOTE_P_FULLTEXT) != 0;
    /* another stemming, or the index of schema formats before 8 (one block
     * chain per term): built anew */
    int restem = was && now &&
                 ((had->flags & MOTE_P_STEM) != (p->flags & MOTE_P_STEM) || had_format < 8);
    if (was == now && !restem)
        return MOTE_OK;
    char tn[64];
    text_tree_name(tn, sizeof tn, e->eid, p->id);
    if (!now || restem) { /* another stemming: its words all change, built anew */
        int rc = mote_kv_drop(t, tn);
        if (rc && rc != MOTE_NOTFOUND)
            return rc;
        if (!now)
            return MOTE_OK;
        if ((rc = mote_kv_tree(t, tn, MOTE_TREE_CREATE, &p->text_tree)))
            return rc;
    }
    return each_value(t, e, i, text_one); /* entity_build made its tree */
}

/* The vector index of e's property i after an evolution (had: the stored
 * property, NULL if new): made again when it is new or its parameters
 * changed, dropped when it goes. */
static int evolve_vindex(mote_txn *t, mote_entity *e, unsigned i, const mprop *had)
{
    mprop *p = &e->props[i];
    int was = had && (had->flags & MOTE_P_HNSW), now = (p->flags & MOTE_P_HNSW) != 0;
    if ((!was && !now) || (was && now && same_hnsw(had, p)))
        return MOTE_OK;
    char tn[64];
    vindex_tree_name(tn, sizeof tn, e->eid, p->id);
    mote__hnsw_forget(t, e->eid, p->id);
    int rc = MOTE_OK;
    if (was) { /* entity_build opened it if still indexed: start afresh */
        rc = mote_kv_drop(t, tn);
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_OK;
        p->vindex_tree = 0;
    }
    if (!rc && now && !(rc = mote_kv_tree(t, tn, MOTE_TREE_CREATE, &p->vindex_tree)))
        rc = build_vindex(t, e, i);
    return rc;
}

/* Indexes after an evolution: drop those whose property lost its index or
 * changed uniqueness, build new ones (kept properties keep theirs). */
static int evolve_indexes(mote_txn *t, mote_entity *e, const sschema *old, const int *matched)
{
    const unsigned ix = MOTE_P_INDEXED | MOTE_P_UNIQUE;
    int rc = MOTE_OK;
    for (unsigned i = 0; !rc && i < e->nprops; i++) {
        int m = matched[i];
        if ((rc = evolve_vindex(t, e, i, m >= 0 ? &old->p[m] : NULL)) ||
            (rc = evolve_tindex(t, e, i, m >= 0 ? &old->p[m] : NULL, old->format)))
            break;
        unsigned had = m >= 0 ? old->p[m].flags & ix : 0, now = e->props[i].flags & ix;
        int same = had && now && (had & MOTE_P_UNIQUE) == (now & MOTE_P_UNIQUE) &&
                   same_path(&old->p[m], &e->props[i]);
        if (same || (!had && !now))
            continue;
        char tn[64];
        index_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
        if (had) { /* entity_build opened it if still indexed: start afresh */
            rc = mote_kv_drop(t, tn);
            if (rc == MOTE_NOTFOUND)
                rc = MOTE_OK;
            e->props[i].index_tree = 0;
        }
        if (!rc && now && !(rc = mote_kv_tree(t, tn, MOTE_TREE_CREATE, &e->props[i].index_tree)))
            rc = mote__schema_build_index(t, e, i);
    }
    return rc;
}

/* Create entity `name` (write transaction): its object tree, then the
 * schema of the definition. */
static int create_schema(mote_txn *t, const char *name, const mote_prop_def *props,
                         unsigned nprops, uint64_t hash, sschema *ns, int *matched)
{
    sschema seed;
    ediff diff;
    char tn[160];
    memset(&seed, 0, sizeof seed);
    snprintf(tn, sizeof tn, "@o:%s", name);
    seed.next_pid = 1;
    int rc = mote_kv_tree(t, tn, MOTE_TREE_CREATE, &seed.eid);
    if (!rc)
        rc = evolve(name, &seed, props, nprops, hash, ns, matched, &diff);
    return rc;
}

int mote_entity_open(mote_txn *t, const char *name, const mote_prop_def *props,
                     unsigned nprops, mote_entity **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_entity_open: out is NULL");
    *out = NULL;
    if (!t)
        return mote__err(MOTE_INVALID, "mote_entity_open: transaction is NULL");
    int rc = validate_defs(name, props, nprops);
    if (rc)
        return rc;
    uint64_t hash = def_hash(name, props, nprops), rh = 0;
    uint32_t stree;
    mote_val v;
    rc = schema_tree(t, &stree);
    if (!rc)
        rc = mote_kv_get(t, stree, name, strlen(name), &v);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    int exists = rc == MOTE_OK;
    mote_entity *e = NULL;
    rc = MOTE_OK;
    if (exists) {
        rh = rec_hash(&v);
        if ((e = find_handle(t, name, hash, rh))) {
            *out = e;
            return MOTE_OK;
        }
    } else if (!t->write) {
        return mote__err(MOTE_NOTFOUND, "entity %s does not exist", name);
    }
    sschema old, ns;
    memset(&old, 0, sizeof old);
    memset(&ns, 0, sizeof ns);
    ediff diff;
    memset(&diff, 0, sizeof diff);
    char *names = exists ? mote__malloc(v.size + 1) : NULL;
    int *matched = mote__calloc(nprops + 1, sizeof *matched);
    if ((exists && !names) || !matched)
        rc = mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    else if (exists)
        rc = schema_decode(name, v.data, v.size, &old, names);
    if (rc)
        goto out;
    /* a full-text index of an earlier layout (schema format < 8): a write
     * transaction rebuilds it (evolve_tindex), as it changes a schema */
    int relayout = 0;
    for (unsigned i = 0; exists && old.format < 8 && i < old.np; i++)
        relayout |= (old.p[i].flags & MOTE_P_FULLTEXT) != 0;
    if (relayout && !t->write) {
        rc = mote__err(MOTE_SCHEMA, "entity %s: its full-text index was made by an earlier "
                       "version of MoteDB; opening the entity in a write transaction rebuilds "
                       "it", name);
        goto out;
    }
    if (exists && old.hash == hash && same_prefix(&old, props, nprops) && !relayout) {
        rc = entity_build(t, name, &old, nprops, hash, rh, &e); /* as written */
    } else if (exists) {
        rc = evolve(name, &old, props, nprops, hash, &ns, matched, &diff);
        if (!rc && !diff.changed && !relayout) /* lacks or reorders properties: nothing to write */
            rc = entity_build(t, name, &ns, nprops, hash, rh, &e);
        else if (!rc && !t->write)
            rc = mote__err(MOTE_SCHEMA, "entity %s: the definition differs from the stored "
                           "schema (%s); it can be changed only in a write transaction",
                           name, diff.text);
    } else {
        rc = create_schema(t, name, props, nprops, hash, &ns, matched);
        diff.changed = 1;
    }
    if (rc || e)
        goto out;
    /* the record changes: apply the vector and full-text index notes made
     * under the old schema (they read records by it; an index may go), save
     * it, build the handle, then the indexes */
    rc = mote__text_flush(t);
    if (!rc)
        rc = mote__hnsw_flush(t);
    if (!rc)
        rc = save_schema(t, stree, name, &ns, &rh);
    if (!rc)
        rc = entity_build(t, name, &ns, nprops, hash, rh, &e);
    if (!rc && exists)
        rc = evolve_indexes(t, e, &old, matched);
    if (rc) {
        entity_free(e);
        e = NULL;
        t->failed = t->failed ? t->failed : rc;
        goto out;
    }
    supersede(t, name, e);
    add_pending(t, e);
    *out = e;
    e = NULL;
out:
    if (e) { /* built without a change to the record */
        if (t->write && OTX(t)->new_entities)
            add_pending(t, e); /* t changed a schema: its record may be t's own */
        else
            add_handle(t->s, e);
        *out = e;
    }
    schema_free(&ns);
    schema_free(&old);
    mote__free(matched);
    mote__free(names);
    return rc;
}

unsigned mote_entity_nprops(const mote_entity *e) { return e ? e->nprops : 0; }

int mote_entity_prop(const mote_entity *e, const char *name)
{
    for (unsigned i = 0; e && name && i < e->nprops; i++)
        if (!strcmp(e->props[i].name, name))
            return (int)i;
    return -1;
}

int mote_entity_prop_def(const mote_entity *e, unsigned i, mote_prop_def *def)
{
    if (!e || !def || i >= e->nprops)
        return mote__err(MOTE_INVALID, "mote_entity_prop_def: bad argument");
    def->name = e->props[i].name;
    def->type = e->props[i].type;
    def->flags = e->props[i].flags;
    def->dim = e->props[i].dim;
    def->renamed_from = NULL;
    def->target = e->props[i].target;
    def->json_path = e->props[i].jpath_text;
    memset(&def->hnsw, 0, sizeof def->hnsw);
    if (e->props[i].flags & MOTE_P_HNSW)
        def->hnsw = (mote_hnsw_def){e->props[i].hmetric, e->props[i].hm, e->props[i].hefc};
    return MOTE_OK;
}

const char *mote_entity_name(const mote_entity *e) { return e ? e->name : NULL; }

int mote_entity_pending(const mote_entity *e)
{
    if (!e)
        return 0;
    pthread_mutex_lock(&e->s->mu); /* (cleared at the transaction's end: objects_end) */
    int pending = e->pending_txn != NULL;
    pthread_mutex_unlock(&e->s->mu);
    return pending;
}

/* The stored schema of `name` decoded into *ss (names in *names, to free),
 * and the hash of its record bytes. */
static int read_schema(mote_txn *t, const char *name, sschema *ss, char **names, uint64_t *rh)
{
    uint32_t stree;
    mote_val v;
    *names = NULL;
    *rh = 0;
    int rc = mote_kv_tree(t, "@schema", 0, &stree);
    if (!rc)
        rc = mote_kv_get(t, stree, name, strlen(name), &v);
    if (rc)
        return rc == MOTE_NOTFOUND ? mote__err(rc, "entity %s does not exist", name) : rc;
    *rh = rec_hash(&v);
    if (!(*names = mote__malloc(v.size + 1)))
        return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    rc = schema_decode(name, v.data, v.size, ss, *names);
    if (rc) {
        mote__free(*names);
        *names = NULL;
    }
    return rc;
}

int mote_entity_stored(mote_txn *t, const char *name, mote_entity **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_entity_stored: out is NULL");
    *out = NULL;
    if (!t || !name)
        return mote__err(MOTE_INVALID, "mote_entity_stored: NULL argument");
    sschema ss;
    char *names;
    uint64_t rh;
    int rc = read_schema(t, name, &ss, &names, &rh);
    if (rc)
        return rc;
    if (!(*out = find_handle(t, name, 0, rh))) {
        mote_entity *e;
        if (!(rc = entity_build(t, name, &ss, ss.np, 0, rh, &e))) {
            if (t->write && OTX(t)->new_entities)
                add_pending(t, e);
            else
                add_handle(t->s, e);
            *out = e;
        }
    }
    schema_free(&ss);
    mote__free(names);
    return rc;
}

/*
 * Drop a stored property: out of the schema (a new layout without its slot),
 * its index tree, its links and their backlinks, and its value out of every
 * record (each object is written again, so no byte of it stays reachable).
 */
int mote_entity_drop_prop(mote_txn *t, const char *name, const char *prop)
{
    if (!t || !name || !prop)
        return mote__err(MOTE_INVALID, "mote_entity_drop_prop: NULL argument");
    if (!t->write)
        return mote__err(MOTE_READONLY, "mote_entity_drop_prop: a write transaction is needed");
    sschema old, ns;
    char *names;
    uint64_t rh;
    int rc = read_schema(t, name, &old, &names, &rh);
    if (rc)
        return rc;
    memset(&ns, 0, sizeof ns);
    int at = -1;
    for (unsigned j = 0; j < old.np && at < 0; j++)
        if (!strcmp(old.p[j].name, prop))
            at = (int)j;
    mote_entity *e = NULL;
    ediff diff;
    memset(&diff, 0, sizeof diff);
    if (at < 0)
        rc = mote__err(MOTE_NOTFOUND, "entity %s has no stored property %s", name, prop);
    if (!rc)
        rc = schema_alloc(&ns, old.np, old.nl + 1);
    if (!rc) {
        mprop gone = old.p[at];
        ns.eid = old.eid;
        ns.next_pid = old.next_pid;
        ns.hash = 0; /* no definition's properties come first any more */
        for (unsigned j = 0; j < old.np; j++)
            if ((int)j != at) {
                ns.p[ns.np] = old.p[j];
                ns.former[ns.np++] = old.former[j];
            }
        rc = evolve_layouts(name, &old, &ns, &diff);
        uint32_t stree;
        if (!rc)
            rc = mote__text_flush(t);
        if (!rc)
            rc = mote__hnsw_flush(t);
        if (!rc)
            rc = schema_tree(t, &stree);
        if (!rc)
            rc = save_schema(t, stree, name, &ns, &rh);
        if (!rc)
            rc = entity_build(t, name, &ns, ns.np, 0, rh, &e);
        if (!rc)
            rc = mote__drop_prop_data(t, e, &gone);
        if (!rc) {
            char tn[64];
            if (gone.flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE))
                index_tree_name(tn, sizeof tn, old.eid, gone.id);
            else if (gone.flags & MOTE_P_HNSW)
                vindex_tree_name(tn, sizeof tn, old.eid, gone.id);
            else if (gone.type == MOTE_T_TOMANY)
                link_tree_name(tn, sizeof tn, old.eid, gone.id);
            else
                tn[0] = 0;
            if (gone.flags & MOTE_P_HNSW)
                mote__hnsw_forget(t, old.eid, gone.id);
            if (tn[0] && (rc = mote_kv_drop(t, tn)) == MOTE_NOTFOUND)
                rc = MOTE_OK;
            if (!rc && (gone.flags & MOTE_P_FULLTEXT)) {
                text_tree_name(tn, sizeof tn, old.eid, gone.id);
                if ((rc = mote_kv_drop(t, tn)) == MOTE_NOTFOUND)
                    rc = MOTE_OK;
            }
        }
    }
    if (e && rc) {
        entity_free(e);
        e = NULL;
    }
    if (rc && at >= 0)
        t->failed = t->failed ? t->failed : rc;
    if (e) {
        supersede(t, name, e);
        add_pending(t, e);
    }
    schema_free(&ns);
    schema_free(&old);
    mote__free(names);
    return rc;
}

int mote_entity_list(mote_txn *t, int (*fn)(void *ctx, const char *name), void *ctx)
{
    if (!t || !fn)
        return mote__err(MOTE_INVALID, "mote_entity_list: NULL argument");
    uint32_t stree;
    int rc = mote_kv_tree(t, "@schema", 0, &stree);
    if (rc)
        return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
    mote_cursor *c;
    if ((rc = mote_cursor_open(t, stree, &c)))
        return rc;
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k;
        char name[256];
        if ((rc = mote_cursor_get(c, &k, NULL)))
            break;
        size_t n = k.size < sizeof name - 1 ? k.size : sizeof name - 1;
        memcpy(name, k.data, n);
        name[n] = 0;
        if ((rc = fn(ctx, name)))
            break;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}
