/*
 * schema.c — entities: the schema record stored in the "@schema" tree,
 * opening an entity (create, unchanged, or evolve), building the layouts
 * that make record access O(1), and building indexes for existing objects.
 * Formats: see object.h.
 *
 * An unchanged definition costs one lookup and a hash compare. A changed
 * one (in a write transaction) maps new properties to stored ones by name
 * or renamed_from, refuses type changes, appends a layout if the list of
 * (property id, type) changed, and creates, rebuilds or drops index trees.
 * Handles created or evolved by a transaction become usable by others only
 * when it commits; if it aborts they report MOTE_SCHEMA.
 */
#include <stdio.h>
#include <stdlib.h>

#include "checksum.h"
#include "object.h"

typedef struct sschema {
    uint32_t eid;
    uint16_t next_pid;
    unsigned np;
    mprop *p;            /* names point into the decoded buffer or defs */
    unsigned nl;
    mlayout *l;          /* n, pid, type only */
    uint64_t hash;
} sschema;

static uint64_t def_hash(const char *name, const mote_prop_def *d, unsigned n)
{
    uint64_t h = mote__hash64(name, strlen(name), 0x5343484D41ull);
    for (unsigned i = 0; i < n; i++) {
        uint8_t rec[12];
        wr32(rec, (uint32_t)d[i].type);
        wr32(rec + 4, d[i].flags);
        wr32(rec + 8, d[i].dim);
        h = mote__hash64(d[i].name, strlen(d[i].name), h) ^ mote__hash64(rec, 12, h);
        if (d[i].target)
            h ^= mote__hash64(d[i].target, strlen(d[i].target), h + 1);
    }
    return h;
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
        if (d[i].flags & ~(MOTE_P_NULLABLE | MOTE_P_INDEXED | MOTE_P_UNIQUE))
            return mote__err(MOTE_INVALID, "%s.%s: unknown flags 0x%x", name,
                             d[i].name, d[i].flags);
        if ((d[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) && !type_indexable(d[i].type))
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
    for (unsigned i = 0; i < ss->nl; i++) {
        mote__free(ss->l[i].pid);
        mote__free(ss->l[i].type);
    }
    mote__free(ss->l);
    mote__free(ss->p);
    memset(ss, 0, sizeof *ss);
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
    if (rd32(p) != 1)
        return mote__err(MOTE_FORMAT, "entity %s: schema format %u unknown", ename, rd32(p));
    ss->eid = rd32(p + 4);
    ss->next_pid = rd16(p + 8);
    ss->np = rd16(p + 10);
    p += 12;
    ss->p = mote__calloc(ss->np + 1, sizeof *ss->p);
    if (!ss->p)
        return mote__err(MOTE_NOMEM, "out of memory reading a schema");
    for (unsigned i = 0; i < ss->np; i++) {
        NEED(9);
        ss->p[i].id = rd16(p);
        ss->p[i].type = p[2];
        ss->p[i].flags = p[3];
        ss->p[i].dim = rd32(p + 4);
        unsigned nl = p[8];
        p += 9;
        NEED(nl);
        memcpy(names, p, nl);
        names[nl] = 0;
        ss->p[i].name = names;
        names += nl + 1;
        p += nl;
        if (type_is_rel(ss->p[i].type)) {
            NEED(1);
            unsigned tl = p[0];
            NEED(1 + (size_t)tl);
            memcpy(names, p + 1, tl);
            names[tl] = 0;
            ss->p[i].target = names;
            names += tl + 1;
            p += 1 + tl;
        }
        if (ss->p[i].type < MOTE_T_BOOL || ss->p[i].type > MOTE_T_TOMANY)
            goto bad;
    }
    NEED(2);
    ss->nl = rd16(p);
    p += 2;
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
    for (unsigned i = 0; i < ss->np; i++)
        n += 9 + strlen(ss->p[i].name) + (ss->p[i].target ? 1 + strlen(ss->p[i].target) : 0);
    for (unsigned i = 0; i < ss->nl; i++)
        n += 2 + 3 * (size_t)ss->l[i].n;
    uint8_t *b = mote__malloc(n), *p = b;
    if (!b)
        return mote__err(MOTE_NOMEM, "out of memory writing a schema");
    wr32(p, 1);
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
    for (unsigned i = 0; i < e->nprops; i++) {
        mote__free(e->props[i].name);
        mote__free(e->props[i].target);
    }
    for (unsigned i = 0; i < e->nlayouts; i++) {
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
    for (mote_entity *e = s->entities, *nx; e; e = nx) {
        nx = e->next;
        entity_free(e);
    }
    s->entities = NULL;
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
 * handles' pending/dead state change under the store's mutex. */
static mote_entity *find_handle(mote_store *s, const char *name, uint64_t hash, uint32_t eid,
                                unsigned nlayouts)
{
    mote_entity *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (mote_entity *e = s->entities; e && !found; e = e->next)
        if (e->hash == hash && e->eid == eid && e->nlayouts == nlayouts && !e->pending_txn &&
            !e->dead && !strcmp(e->name, name))
            found = e;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static void add_handle(mote_store *s, mote_entity *e)
{
    pthread_mutex_lock(&s->mu);
    e->next = s->entities;
    s->entities = e;
    pthread_mutex_unlock(&s->mu);
}

static int index_tree_name(char *buf, size_t n, uint32_t eid, uint16_t pid)
{
    return snprintf(buf, n, "@i:%u:%u", eid, pid);
}

/* Build a handle from a stored schema (whose props are the current ones). */
static int entity_build(mote_txn *t, const char *name, const sschema *ss, mote_entity **out)
{
    mote_entity *e = mote__calloc(1, sizeof *e);
    int rc = MOTE_OK;
    if (!e)
        return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    e->s = t->s;
    e->eid = ss->eid;
    e->hash = ss->hash;
    e->nprops = ss->np;
    e->nlayouts = ss->nl;
    e->name = dupstr(name);
    e->props = mote__calloc(ss->np + 1, sizeof *e->props);
    e->layouts = mote__calloc(ss->nl, sizeof *e->layouts);
    if (!e->name || !e->props || !e->layouts)
        goto nomem;
    for (unsigned i = 0; i < ss->np; i++) {
        e->props[i] = ss->p[i];
        e->props[i].index_tree = 0;
        e->props[i].link_tree = 0;
        e->props[i].target = NULL;
        e->props[i].tgt_serial = 0; /* no cached target id */
        if (!(e->props[i].name = dupstr(ss->p[i].name)))
            goto nomem;
        if (ss->p[i].target && !(e->props[i].target = dupstr(ss->p[i].target)))
            goto nomem;
        if (e->props[i].type == MOTE_T_TOMANY) {
            char tn[64];
            snprintf(tn, sizeof tn, "@l:%u:%u", e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].link_tree)) &&
                rc != MOTE_NOTFOUND)
                goto fail;
            rc = MOTE_OK;
        }
        if (e->props[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) {
            char tn[64];
            index_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if ((rc = mote_kv_tree(t, tn, t->write ? MOTE_TREE_CREATE : 0,
                                   &e->props[i].index_tree)))
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
    char sn[16];
    snprintf(sn, sizeof sn, "@seq");
    rc = mote_kv_tree(t, sn, t->write ? MOTE_TREE_CREATE : 0, &e->seq_tree);
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

/* Build the index of property `prop` from the existing objects. */
int mote__schema_build_index(mote_txn *t, mote_entity *e, unsigned prop)
{
    mote_cursor *c;
    int rc = mote_cursor_open(t, e->eid, &c);
    if (rc)
        return rc;
    for (rc = mote_cursor_first(c); rc == MOTE_OK; rc = mote_cursor_next(c)) {
        mote_val k, v;
        if ((rc = mote_cursor_get(c, &k, &v)))
            break;
        mote_record r;
        mote_value val;
        uint64_t id = 0;
        for (int i = 0; i < 8 && i < (int)k.size; i++)
            id = id << 8 | ((const uint8_t *)k.data)[i];
        if ((rc = mote__record_init(&r, e, v.data, v.size, id)) ||
            (rc = mote_record_get(&r, prop, &val, NULL)))
            break;
        /* copy variable data: the index write may move the record's page */
        uint8_t *copy = NULL;
        if (type_is_var(e->props[prop].type) && !val.null) {
            copy = mote__malloc(val.v.s.n + 1);
            if (!copy) {
                rc = mote__err(MOTE_NOMEM, "out of memory building an index");
                break;
            }
            memcpy(copy, val.v.s.p, val.v.s.n);
            val.v.s.p = copy;
        }
        rc = mote__index_add(t, e, &e->props[prop], &val, r.id);
        mote__free(copy);
        if (rc == MOTE_UNIQUE)
            rc = mote__err(MOTE_SCHEMA, "%s.%s: cannot be unique, objects share "
                           "a value", e->name, e->props[prop].name);
        if (rc)
            break;
    }
    mote_cursor_close(c);
    return rc == MOTE_NOTFOUND ? MOTE_OK : rc;
}

/* Compute the evolved schema `ns` from the stored one and the new defs. */
static int evolve(const char *name, const sschema *old, const mote_prop_def *d, unsigned n,
                  uint64_t hash, sschema *ns, int *matched)
{
    memset(ns, 0, sizeof *ns);
    ns->eid = old->eid;
    ns->next_pid = old->next_pid;
    ns->np = n;
    ns->hash = hash;
    ns->p = mote__calloc(n + 1, sizeof *ns->p);
    ns->l = mote__calloc(old->nl + 1, sizeof *ns->l);
    if (!ns->p || !ns->l) {
        schema_free(ns);
        return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
    }
    for (unsigned i = 0; i < n; i++) {
        int m = -1;
        for (unsigned j = 0; j < old->np && m < 0; j++)
            if (!strcmp(old->p[j].name, d[i].name))
                m = (int)j;
        for (unsigned j = 0; j < old->np && m < 0 && d[i].renamed_from; j++)
            if (!strcmp(old->p[j].name, d[i].renamed_from))
                m = (int)j;
        matched[i] = m;
        ns->p[i].name = (char *)d[i].name;
        ns->p[i].type = (uint8_t)d[i].type;
        /* a to-one relation is always nullable and indexed */
        ns->p[i].flags = (uint8_t)(d[i].type == MOTE_T_TOONE
                                       ? d[i].flags | MOTE_P_NULLABLE | MOTE_P_INDEXED
                                       : d[i].flags);
        ns->p[i].dim = d[i].dim;
        ns->p[i].target = (char *)d[i].target;
        if (m >= 0) {
            const mprop *op = &old->p[m];
            if (op->type != d[i].type || op->dim != d[i].dim ||
                (op->target && strcmp(op->target, d[i].target))) {
                int rc = mote__err(MOTE_SCHEMA, "%s.%s: stored as %s, now declared %s: "
                                   "changing a property's type is not supported (add a "
                                   "new property instead)", name, d[i].name,
                                   mote__type_name(op->type), mote__type_name(d[i].type));
                schema_free(ns);
                return rc;
            }
            ns->p[i].id = op->id;
        } else {
            if (ns->next_pid == 0xFFFF) {
                schema_free(ns);
                return mote__err(MOTE_FULL, "entity %s: too many property changes", name);
            }
            ns->p[i].id = ns->next_pid++;
        }
    }
    /* layouts: the old ones, plus the current list if it differs from the last */
    ns->nl = old->nl;
    for (unsigned i = 0; i < old->nl; i++) {
        ns->l[i].n = old->l[i].n;
        ns->l[i].pid = mote__malloc(2 * (size_t)old->l[i].n + 2);
        ns->l[i].type = mote__malloc((size_t)old->l[i].n + 1);
        if (!ns->l[i].pid || !ns->l[i].type) {
            schema_free(ns);
            return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
        }
        memcpy(ns->l[i].pid, old->l[i].pid, 2 * (size_t)old->l[i].n);
        memcpy(ns->l[i].type, old->l[i].type, old->l[i].n);
    }
    /* the record layout: the properties with a slot (to-many have none) */
    unsigned nslots = 0;
    for (unsigned i = 0; i < n; i++)
        nslots += ns->p[i].type != MOTE_T_TOMANY;
    const mlayout *last = &old->l[old->nl - 1];
    int same = last->n == nslots;
    for (unsigned i = 0, j = 0; same && i < n; i++) {
        if (ns->p[i].type == MOTE_T_TOMANY)
            continue;
        same = last->pid[j] == ns->p[i].id && last->type[j] == ns->p[i].type;
        j++;
    }
    if (!same) {
        if (ns->nl >= 0xFFFF) {
            schema_free(ns);
            return mote__err(MOTE_FULL, "entity %s: too many schema versions", name);
        }
        mlayout *L = &ns->l[ns->nl++];
        L->n = nslots;
        L->pid = mote__malloc(2 * (size_t)nslots + 2);
        L->type = mote__malloc((size_t)nslots + 1);
        if (!L->pid || !L->type) {
            schema_free(ns);
            return mote__err(MOTE_NOMEM, "out of memory evolving entity %s", name);
        }
        for (unsigned i = 0, j = 0; i < n; i++) {
            if (ns->p[i].type == MOTE_T_TOMANY)
                continue;
            L->pid[j] = ns->p[i].id;
            L->type[j++] = ns->p[i].type;
        }
    }
    return MOTE_OK;
}

static int schema_tree(mote_txn *t, uint32_t *tree)
{
    return mote_kv_tree(t, "@schema", t->write ? MOTE_TREE_CREATE : 0, tree);
}

static int save_schema(mote_txn *t, uint32_t tree, const char *name, const sschema *ss)
{
    uint8_t *b = NULL;
    size_t n = 0;
    int rc = schema_encode(ss, &b, &n);
    if (rc)
        return rc;
    rc = mote_kv_put(t, tree, name, strlen(name), b, n, 0);
    mote__free(b);
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
    uint64_t hash = def_hash(name, props, nprops);
    uint32_t stree;
    mote_val v;
    rc = schema_tree(t, &stree);
    if (!rc)
        rc = mote_kv_get(t, stree, name, strlen(name), &v);
    if (rc && rc != MOTE_NOTFOUND)
        return rc;
    sschema old, ns;
    char *names = NULL;
    int exists = rc == MOTE_OK;
    memset(&old, 0, sizeof old);
    if (exists) {
        names = mote__malloc(v.size + 1);
        if (!names)
            return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
        rc = schema_decode(name, v.data, v.size, &old, names);
        if (rc) {
            mote__free(names);
            return rc;
        }
        if (old.hash == hash) { /* unchanged: reuse a handle if we have one */
            mote_entity *e = find_handle(t->s, name, hash, old.eid, old.nl);
            if (!e && !(rc = entity_build(t, name, &old, &e)))
                add_handle(t->s, e);
            schema_free(&old);
            mote__free(names);
            if (rc)
                return rc;
            *out = e;
            return MOTE_OK;
        }
    }
    if (!t->write) {
        schema_free(&old);
        mote__free(names);
        return exists ? mote__err(MOTE_SCHEMA, "entity %s: the stored schema differs; "
                                  "open it in a write transaction to change it", name)
                      : mote__err(MOTE_NOTFOUND, "entity %s does not exist", name);
    }
    int *matched = mote__calloc(nprops + 1, sizeof *matched);
    if (!matched) {
        schema_free(&old);
        mote__free(names);
        return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    }
    if (exists) {
        rc = evolve(name, &old, props, nprops, hash, &ns, matched);
    } else { /* create: the object tree's id is the entity id */
        char tn[160];
        snprintf(tn, sizeof tn, "@o:%s", name);
        memset(&old, 0, sizeof old);
        old.nl = 1;
        old.l = mote__calloc(1, sizeof *old.l);
        old.l[0].pid = mote__malloc(2);
        old.l[0].type = mote__malloc(1);
        old.next_pid = 1;
        rc = old.l && old.l[0].pid && old.l[0].type
                 ? mote_kv_tree(t, tn, MOTE_TREE_CREATE, &old.eid)
                 : mote__err(MOTE_NOMEM, "out of memory creating entity %s", name);
        if (!rc)
            rc = evolve(name, &old, props, nprops, hash, &ns, matched);
        if (!rc && ns.nl == 2) { /* drop the empty seed layout */
            mote__free(ns.l[0].pid);
            mote__free(ns.l[0].type);
            ns.l[0] = ns.l[1];
            ns.nl = 1;
        }
    }
    mote_entity *e = NULL;
    if (!rc)
        rc = save_schema(t, stree, name, &ns);
    if (!rc)
        rc = entity_build(t, name, &ns, &e);
    /* indexes: drop those of removed or no longer indexed properties, build
     * new ones (and rebuild when uniqueness changed) */
    for (unsigned j = 0; !rc && exists && j < old.np; j++) {
        unsigned had = old.p[j].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE);
        if (!had)
            continue;
        int keep = 0;
        for (unsigned i = 0; i < nprops; i++)
            if (matched[i] == (int)j && (e->props[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) &&
                ((e->props[i].flags & MOTE_P_UNIQUE) == (old.p[j].flags & MOTE_P_UNIQUE)))
                keep = 1;
        if (!keep) {
            char tn[64];
            index_tree_name(tn, sizeof tn, ns.eid, old.p[j].id);
            rc = mote_kv_drop(t, tn);
            if (rc == MOTE_NOTFOUND)
                rc = MOTE_OK;
        }
    }
    for (unsigned i = 0; !rc && exists && i < nprops; i++) {
        if (!(e->props[i].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)))
            continue;
        int m = matched[i];
        int kept = m >= 0 && (old.p[m].flags & (MOTE_P_INDEXED | MOTE_P_UNIQUE)) &&
                   (e->props[i].flags & MOTE_P_UNIQUE) == (old.p[m].flags & MOTE_P_UNIQUE);
        if (!kept) {
            char tn[64]; /* the handle created it; it may hold stale keys if dropped above */
            index_tree_name(tn, sizeof tn, e->eid, e->props[i].id);
            if (!(rc = mote_kv_tree(t, tn, MOTE_TREE_CREATE, &e->props[i].index_tree)))
                rc = mote__schema_build_index(t, e, i);
        }
    }
    mote__free(matched);
    schema_free(&ns);
    if (exists)
        schema_free(&old);
    else
        schema_free(&old);
    mote__free(names);
    if (rc) {
        entity_free(e);
        t->failed = t->failed ? t->failed : rc;
        return rc;
    }
    e->pending_txn = t;
    e->pending_next = t->new_entities;
    t->new_entities = e;
    add_handle(t->s, e);
    *out = e;
    return MOTE_OK;
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
    return MOTE_OK;
}

const char *mote_entity_name(const mote_entity *e) { return e ? e->name : NULL; }

int mote_entity_stored(mote_txn *t, const char *name, mote_entity **out)
{
    if (!out)
        return mote__err(MOTE_INVALID, "mote_entity_stored: out is NULL");
    *out = NULL;
    if (!t || !name)
        return mote__err(MOTE_INVALID, "mote_entity_stored: NULL argument");
    uint32_t stree;
    mote_val v;
    int rc = mote_kv_tree(t, "@schema", 0, &stree);
    if (!rc)
        rc = mote_kv_get(t, stree, name, strlen(name), &v);
    if (rc)
        return rc == MOTE_NOTFOUND ? mote__err(rc, "entity %s does not exist", name) : rc;
    char *names = mote__malloc(v.size + 1);
    if (!names)
        return mote__err(MOTE_NOMEM, "out of memory opening entity %s", name);
    sschema ss;
    if ((rc = schema_decode(name, v.data, v.size, &ss, names))) {
        mote__free(names);
        return rc;
    }
    *out = find_handle(t->s, name, ss.hash, ss.eid, ss.nl);
    if (!*out) {
        mote_entity *e;
        if (!(rc = entity_build(t, name, &ss, &e))) {
            add_handle(t->s, e);
            *out = e;
        }
    }
    schema_free(&ss);
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
