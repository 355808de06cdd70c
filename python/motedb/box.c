/*
 * box.c — Box: put/get/remove/count and relations of one entity. Part of
 * the _core extension (_core.h).
 */
#include "_core.h"

/* ---- Box ----------------------------------------------------------------------------------- */

/* An object of box b from a record; it remembers the store (relations). */
PyObject *box_build(BoxObject *b, const mote_record *r)
{
    PyObject *o = build_obj(b->cls, b->info, r);
    if (o && b->info->store_off >= 0)
        SLOT(o, b->info->store_off) = Py_NewRef((PyObject *)b->store);
    return o;
}

/* After a put of obj (new id `id`) in the thread's write transaction: write
 * its to-many links (motedb/_relations.py) and remember the store. */
int after_put(BoxObject *b, PyObject *obj, uint64_t id)
{
    if (b->info->store_off >= 0)
        Py_XSETREF(SLOT(obj, b->info->store_off), Py_NewRef((PyObject *)b->store));
    if (!b->info->has_tomany)
        return 0;
    /* links change only through a to-many attribute that holds a list
     * (unset or None: unchanged, as after_put in _schema.py reads them) */
    int lists = 0;
    for (Py_ssize_t i = 0; i < b->info->nf && !lists; i++) {
        const FieldInfo *f = &b->info->f[i];
        PyObject *v = f->kind == K_TOMANY ? SLOT(obj, f->offset) : NULL;
        lists = v && v != Py_None;
    }
    if (!lists)
        return 0;
    PyObject *idv = PyLong_FromUnsignedLongLong(id);
    PyObject *r = idv ? PyObject_CallFunctionObjArgs(ST.after_put, (PyObject *)b, obj, idv, NULL)
                      : NULL;
    Py_XDECREF(idv);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* The entity handle of a box, opened in ts if needed (pending in ts if that
 * created or changed the entity). A box whose entity another thread's write
 * transaction created or changed is waited for in a write transaction: this
 * one holds the writer lock, so that one has committed and is settling
 * (settle_boxes); once settled the handle is usable, or (rolled back) the
 * box is deferred and its entity opened here. A read transaction does not
 * wait: its snapshot was taken (an operation of its own waited before it
 * began: box_op_begin), and the library says the entity is not committed. */
int box_entity(BoxObject *b, TxnSlot *ts)
{
    double deadline = -1;
    while (ts->write && b->pending && b->pending != ts->txn)
        if (registering_wait(b, &deadline) < 0)
            return -1;
    if (b->e)
        return 0;
    mote_entity *e;
    int rc = mote_entity_open(ts->txn, b->info->cname, b->info->defs, (unsigned)b->info->nf,
                              &e);
    if (rc)
        return schema_error(b->store, rc);
    b->e = e;
    if (ts->write && mote_entity_pending(e)) {
        b->pending = ts->txn;
        b->store->npending++;
    } else { /* (stored as defined: by another process, if the box was deferred) */
        box_undefer(b);
    }
    return 0;
}

/* An operation on one box: op_begin, then the box's entity handle. Returns 0,
 * or -1 with an exception and nothing left to end. An operation in a
 * transaction of its own on a box whose entity another thread's write
 * transaction is creating or changing first waits for that one to end (up to
 * the store's timeout: BusyError), so that its snapshot has the entity. */
int box_op_begin(BoxObject *b, int write, Op *op)
{
    if (b->superseded) {
        PyErr_Format(ST.Schema, "this box of %s belongs to a class that was defined again "
                     "(same module and name): use store.box() of the new class",
                     b->info->cname);
        return -1;
    }
    double deadline = -1;
    while (b->pending && b->store->s && !find_txn(b->store)) /* (not this thread's) */
        if (registering_wait(b, &deadline) < 0)
            return -1;
    if (op_begin(b->store, write, op) < 0)
        return -1;
    if (box_entity(b, op->ts) == 0)
        return 0;
    op_end(b->store, op, OP_FAIL);
    return -1;
}


static int box_traverse(PyObject *self, visitproc visit, void *arg)
{
    BoxObject *b = (BoxObject *)self;
    Py_VISIT(b->store);
    Py_VISIT(b->cls);
    return 0;
}

/* The box is no longer deferred (store_box): registered, retired or closed. */
void box_undefer(BoxObject *b)
{
    if (b->deferred && b->store) {
        b->deferred = 0;
        b->store->ndeferred--;
    }
}

static int box_clear(PyObject *self)
{
    BoxObject *b = (BoxObject *)self;
    if (b->pending && b->store) {
        b->pending = NULL;
        b->store->npending--;
    }
    box_undefer(b);
    Py_CLEAR(b->store);
    Py_CLEAR(b->cls);
    return 0;
}

static void box_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    box_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static int box_check_obj(BoxObject *b, PyObject *obj)
{
    if (Py_TYPE(obj) == b->cls)
        return 0;
    PyErr_Format(PyExc_TypeError, "Box of %s: expected a %s object, got %.100s", b->info->cname,
                 b->info->cname, Py_TYPE(obj)->tp_name);
    return -1;
}

static int parse_id(BoxObject *b, PyObject *v, uint64_t *id)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: an object id is an int, got %.100s", b->info->cname,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: invalid object id %R (ids are 1 to 2**64-1)",
                     b->info->cname, v);
        return -1;
    }
    *id = x;
    return 0;
}

/* id or object of this box's class */
static int parse_id_or_obj(BoxObject *b, PyObject *v, uint64_t *id)
{
    if (Py_TYPE(v) == b->cls) {
        PyObject *idv = SLOT(v, b->info->id_off);
        if (!idv) {
            PyErr_Format(PyExc_AttributeError, "%s.id is not set", b->info->cname);
            return -1;
        }
        return parse_id(b, idv, id);
    }
    if (PyLong_Check(v))
        return parse_id(b, v, id);
    PyErr_Format(PyExc_TypeError, "Box of %s: expected an id or a %s object, got %.100s",
                 b->info->cname, b->info->cname, Py_TYPE(v)->tp_name);
    return -1;
}

/* The values of obj into vals (nf of them); references to keep. */
static int marshal(BoxObject *b, PyObject *obj, mote_value *vals, PyObject **keep,
                   Py_ssize_t *nk, uint64_t *id)
{
    const EntityInfo *in = b->info;
    PyObject *idv = SLOT(obj, in->id_off);
    if (!idv) {
        PyErr_Format(PyExc_AttributeError, "%s.id is not set", in->cname);
        return -1;
    }
    if (parse_id(b, idv, id) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < in->nf; i++) {
        const FieldInfo *f = &in->f[i];
        PyObject *v = SLOT(obj, f->offset);
        if (!v) {
            PyErr_Format(PyExc_AttributeError, "%s.%s is not set", in->cname, f->cname);
            return -1;
        }
        if (to_value(in->cname, f, v, &vals[i], keep, nk, 1) < 0)
            return -1;
    }
    return 0;
}

void release_keep(PyObject **keep, Py_ssize_t nk)
{
    for (Py_ssize_t i = 0; i < nk; i++)
        Py_DECREF(keep[i]);
}

static int parse_mode(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      Py_ssize_t npos, unsigned *mode, const char *fn)
{
    *mode = MOTE_PUT_UPSERT;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs != npos || nkw > 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument and an optional "
                     "mode=", fn, npos);
        return -1;
    }
    if (!nkw)
        return 0;
    PyObject *k = PyTuple_GET_ITEM(kwnames, 0), *v = args[nargs];
    if (!PyUnicode_Check(k) || PyUnicode_CompareWithASCIIString(k, "mode")) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fn, k);
        return -1;
    }
    if (PyUnicode_Check(v) && !PyUnicode_CompareWithASCIIString(v, "upsert"))
        *mode = MOTE_PUT_UPSERT;
    else if (PyUnicode_Check(v) && !PyUnicode_CompareWithASCIIString(v, "insert"))
        *mode = MOTE_PUT_INSERT;
    else if (PyUnicode_Check(v) && !PyUnicode_CompareWithASCIIString(v, "update"))
        *mode = MOTE_PUT_UPDATE;
    else {
        PyErr_Format(PyExc_ValueError, "%s(): mode must be 'upsert', 'insert' or 'update', "
                     "got %R", fn, v);
        return -1;
    }
    return 0;
}

#define STACK_VALS 32

static PyObject *box_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    BoxObject *b = (BoxObject *)self;
    unsigned mode;
    if (parse_mode(args, nargs, kwnames, 1, &mode, "put") < 0)
        return NULL;
    PyObject *obj = args[0];
    if (box_check_obj(b, obj) < 0)
        return NULL;
    const EntityInfo *in = b->info;
    mote_value sv[STACK_VALS];
    PyObject *sk[STACK_VALS];
    mote_value *vals = in->nf <= STACK_VALS ? sv : PyMem_Malloc(sizeof *vals * (size_t)in->nf);
    PyObject **keep = in->nf <= STACK_VALS ? sk : PyMem_Malloc(sizeof *keep * (size_t)in->nf);
    Py_ssize_t nk = 0;
    PyObject *res = NULL;
    uint64_t id, newid = 0;
    if (!vals || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    if (marshal(b, obj, vals, keep, &nk, &id) < 0)
        goto done;
    if (mode == MOTE_PUT_UPDATE && !id) {
        PyErr_Format(ST.NotFound, "%s: put(mode='update') of an object without id", in->cname);
        goto done;
    }
    Op op;
    if (box_op_begin(b, 1, &op) < 0)
        goto done;
    int ok = 1, rc = mote_put(op.ts->txn, b->e, id, vals, mode, &newid);
    if (rc) {
        ok = raise_rc(rc) == 0;
    } else if (after_put(b, obj, newid) < 0) {
        ok = 0;
        op_doom(&op); /* the object is in the transaction, its links are not */
    }
    if (op_end(b->store, &op, ok ? OP_COMMIT : OP_FAIL) < 0)
        goto done;
    if (!(res = PyLong_FromUnsignedLongLong(newid)))
        goto done;
    if (newid != id)
        set_slot(obj, in, in->id_off, K_ID, res);
done:
    release_keep(keep, nk);
    if (vals != sv)
        PyMem_Free(vals);
    if (keep != sk)
        PyMem_Free(keep);
    return res;
}

/* The same instance more than once in a put_many is one object. If seq has
 * repeats, *useq gets each instance once (in order of first appearance),
 * at[i] the place of seq[i] in it and first[k] the first place of useq[k]
 * in seq; else *useq stays NULL. Returns -1 with an exception. */
static int put_many_repeats(PyObject *seq, PyObject **useq, Py_ssize_t **at,
                            Py_ssize_t **first)
{
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    *useq = NULL;
    *at = *first = NULL;
    if (n < 2)
        return 0;
    size_t cap = 4, mask;
    while (cap < (size_t)n * 2)
        cap *= 2;
    mask = cap - 1;
    Py_ssize_t *slot = PyMem_Malloc(cap * sizeof *slot); /* place in seq, -1: empty */
    if (!slot) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slot, 0xFF, cap * sizeof *slot);
    Py_ssize_t *where = NULL, nu = 0; /* where[i]: first place of seq[i]'s instance */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        size_t h = (size_t)(((uintptr_t)o >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask;
        while (slot[h] >= 0 && PyTuple_GET_ITEM(seq, slot[h]) != o)
            h = (h + 1) & mask;
        if (slot[h] < 0) {
            slot[h] = i;
            if (where)
                where[i] = i;
            continue;
        }
        if (!where) { /* the first repeat: from here on, note every place */
            where = PyMem_Malloc(sizeof *where * (size_t)n);
            if (!where) {
                PyMem_Free(slot);
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t k = 0; k < i; k++)
                where[k] = k;
        }
        where[i] = slot[h];
    }
    PyMem_Free(slot);
    if (!where)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        nu += where[i] == i;
    /* at[i] for first places is filled in order; repeats copy their first's */
    *useq = PyTuple_New(nu);
    *at = PyMem_Malloc(sizeof **at * (size_t)n);
    *first = PyMem_Malloc(sizeof **first * (size_t)nu);
    if (!*useq || !*at || !*first) {
        Py_CLEAR(*useq);
        PyMem_Free(*at);
        PyMem_Free(*first);
        *at = *first = NULL;
        PyMem_Free(where);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0, k = 0; i < n; i++) {
        if (where[i] == i) {
            PyTuple_SET_ITEM(*useq, k, Py_NewRef(PyTuple_GET_ITEM(seq, i)));
            (*first)[k] = i;
            (*at)[i] = k++;
        } else {
            (*at)[i] = (*at)[where[i]];
        }
    }
    PyMem_Free(where);
    return 0;
}

static PyObject *box_put_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    BoxObject *b = (BoxObject *)self;
    unsigned mode;
    if (parse_mode(args, nargs, kwnames, 1, &mode, "put_many") < 0)
        return NULL;
    PyObject *seq = PySequence_Tuple(args[0]), *given = NULL;
    if (!seq)
        return NULL;
    const EntityInfo *in = b->info;
    Py_ssize_t n = PyTuple_GET_SIZE(seq), nf = in->nf, nk = 0, *at = NULL, *first = NULL;
    mote_value *vals = NULL;
    PyObject **keep = NULL, *res = NULL;
    uint64_t *ids = NULL, *out = NULL;
    if (n == 0) {
        res = PyList_New(0);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (box_check_obj(b, PyTuple_GET_ITEM(seq, i)) < 0)
            goto done;
    PyObject *useq;
    if (put_many_repeats(seq, &useq, &at, &first) < 0)
        goto done;
    if (useq) { /* put each instance once; every place gets its id */
        given = seq;
        seq = useq;
        n = PyTuple_GET_SIZE(seq);
    }
    vals = PyMem_Malloc(sizeof *vals * (size_t)(n * nf + 1));
    keep = PyMem_Malloc(sizeof *keep * (size_t)(n * nf + 1));
    ids = PyMem_Malloc(sizeof *ids * (size_t)n);
    out = PyMem_Malloc(sizeof *out * (size_t)n);
    if (!vals || !keep || !ids || !out) {
        PyErr_NoMemory();
        goto done;
    }
    int any_id = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* a long list runs no Python code: let Ctrl-C in (see op_end) */
        if (!(i & 1023) && i && PyErr_CheckSignals() < 0)
            goto done;
        if (marshal(b, PyTuple_GET_ITEM(seq, i), vals + i * nf, keep, &nk, &ids[i]) < 0)
            goto done;
        any_id |= ids[i] != 0;
    }
    if (mode == MOTE_PUT_UPDATE) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (!ids[i]) {
                PyErr_Format(ST.NotFound, "%s: put_many(mode='update'): object %zd has no id",
                             in->cname, i);
                goto done;
            }
    }
    Op op;
    if (box_op_begin(b, 1, &op) < 0)
        goto done;
    int ok = 1, rc;
    size_t ndone = 0;
    mote_txn *t = op.ts->txn;
    mote_entity *e = b->e;
    const uint64_t *idp = any_id ? ids : NULL;
    if (n >= 64) {
        Py_BEGIN_ALLOW_THREADS
        rc = mote_put_many(t, e, (size_t)n, idp, vals, mode, out, &ndone);
        Py_END_ALLOW_THREADS
    } else {
        rc = mote_put_many(t, e, (size_t)n, idp, vals, mode, out, &ndone);
    }
    if (rc) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "put_many: object %zd of %zd: ",
                 first && (Py_ssize_t)ndone < n ? first[ndone] : (Py_ssize_t)ndone,
                 given ? PyTuple_GET_SIZE(given) : n);
        raise_code(rc, prefix, NULL);
        ok = 0;
        if (ndone > 0)
            op_doom(&op); /* the transaction holds a part of the objects */
    }
    for (Py_ssize_t i = 0; ok && i < n; i++)
        if (after_put(b, PyTuple_GET_ITEM(seq, i), out[i]) < 0) {
            ok = 0;
            op_doom(&op);
        }
    if (op_end(b->store, &op, ok ? OP_COMMIT : OP_FAIL) < 0)
        goto done;
    Py_ssize_t nres = given ? PyTuple_GET_SIZE(given) : n;
    if (!(res = PyList_New(nres)))
        goto done;
    for (Py_ssize_t i = 0; i < nres; i++) {
        Py_ssize_t k = at ? at[i] : i;
        PyObject *idv = PyLong_FromUnsignedLongLong(out[k]);
        if (!idv) {
            Py_CLEAR(res);
            goto done;
        }
        if (out[k] != ids[k] && (!at || first[k] == i))
            set_slot(PyTuple_GET_ITEM(seq, k), in, in->id_off, K_ID, idv);
        PyList_SET_ITEM(res, i, idv);
    }
done:
    if (keep)
        release_keep(keep, nk);
    PyMem_Free(vals);
    PyMem_Free(keep);
    PyMem_Free(ids);
    PyMem_Free(out);
    PyMem_Free(at);
    PyMem_Free(first);
    Py_DECREF(seq);
    Py_XDECREF(given);
    return res;
}

/* update(id_or_obj, **changes): a partial update (mote_update): only the
 * named properties change, in the stored object, whatever the other
 * properties hold in memory (two stale copies no longer overwrite each
 * other's fields). Given an object, its attributes take the new values too. */
static PyObject *box_update(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    BoxObject *b = (BoxObject *)self;
    const EntityInfo *in = b->info;
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, nk = 0;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "update() takes an id or a %s object, then the "
                     "changes as keywords: update(5, status='paid')", in->cname);
        return NULL;
    }
    uint64_t id;
    if (parse_id_or_obj(b, args[0], &id) < 0)
        return NULL;
    PyObject *obj = Py_TYPE(args[0]) == b->cls ? args[0] : NULL;
    unsigned *props = PyMem_Malloc(sizeof *props * (size_t)(n + 1));
    mote_value *vals = PyMem_Malloc(sizeof *vals * (size_t)(n + 1));
    PyObject **keep = PyMem_Malloc(sizeof *keep * (size_t)(n + 1)), *res = NULL;
    if (!props || !vals || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t j = 0;
        while (j < in->nf && PyUnicode_Compare(in->f[j].name, name))
            j++;
        if (j == in->nf) {
            PyErr_Format(PyExc_TypeError, "update(): %s has no property %R%s", in->cname, name,
                         PyUnicode_CompareWithASCIIString(name, "id") ? ""
                                                                       : " to update (ids "
                                                                         "do not change)");
            goto done;
        }
        if (in->f[j].kind == K_TOMANY) {
            PyErr_Format(PyExc_TypeError, "update(): %s.%s is a to-many relation: change the "
                         "object's list and put() it", in->cname, in->f[j].cname);
            goto done;
        }
        props[k] = (unsigned)j;
        if (to_value(in->cname, &in->f[j], args[1 + k], &vals[k], keep, &nk, 1) < 0)
            goto done;
    }
    Op op;
    if (box_op_begin(b, 1, &op) < 0)
        goto done;
    int rc = mote_update(op.ts->txn, b->e, id, props, vals, (unsigned)n);
    if (rc)
        raise_rc(rc);
    if (op_end(b->store, &op, rc ? OP_FAIL : OP_COMMIT) < 0)
        goto done;
    for (Py_ssize_t k = 0; obj && k < n; k++)
        if (PyObject_SetAttr(obj, PyTuple_GET_ITEM(kwnames, k), args[1 + k]) < 0)
            goto done;
    res = Py_NewRef(Py_None);
done:
    if (keep)
        release_keep(keep, nk);
    PyMem_Free(props);
    PyMem_Free(vals);
    PyMem_Free(keep);
    return res;
}

/* The object with this id, None if there is none, NULL with an exception on
 * error (WouldBlockError when txn is a MOTE_TXN_CACHED read that would read
 * the file: store.read(cached=True)); Ellipsis instead for `soft`. */
static PyObject *get_one(BoxObject *b, mote_txn *txn, uint64_t id, int soft)
{
    mote_record r;
    int rc = mote_get(txn, b->e, id, &r);
    if (rc == MOTE_NOTFOUND)
        return Py_NewRef(Py_None);
    if (rc == MOTE_WOULDBLOCK && soft)
        return Py_NewRef(Py_Ellipsis);
    if (rc) {
        raise_rc(rc);
        return NULL;
    }
    return box_build(b, &r);
}

static PyObject *box_get(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id(b, arg, &id) < 0)
        return NULL;
    Op op;
    if (box_op_begin(b, 0, &op) < 0)
        return NULL;
    PyObject *res = get_one(b, op.ts->txn, id, 0);
    if (op_end(b->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

/* get(id) for motedb.aio on the event loop's thread, which must not wait for
 * the disk: the object or None when the read finds every page it needs in
 * the store's cache (MOTE_TXN_CACHED), else Ellipsis, having read nothing
 * (the caller runs get() on a thread): also when the thread is in a
 * transaction or the box's entity is not open and committed yet. */
static PyObject *box_get_cached(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id(b, arg, &id) < 0)
        return NULL;
    Op op;
    int began = op_begin_cached(b->store, &op);
    if (began <= 0)
        return began < 0 ? NULL : Py_NewRef(Py_Ellipsis);
    PyObject *res = !b->e || b->pending || b->superseded ? Py_NewRef(Py_Ellipsis)
                                                         : get_one(b, op.ts->txn, id, 1);
    if (op_end(b->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *box_get_many(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    PyObject *seq = PySequence_Fast(arg, "get_many() takes a sequence of ids");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *res = PyList_New(n);
    Op op;
    if (!res || box_op_begin(b, 0, &op) < 0) {
        Py_XDECREF(res);
        Py_DECREF(seq);
        return NULL;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        uint64_t id;
        if (parse_id(b, PySequence_Fast_GET_ITEM(seq, i), &id) < 0) {
            ok = 0;
            break;
        }
        PyObject *o = get_one(b, op.ts->txn, id, 0);
        if (!o)
            ok = 0;
        else
            PyList_SET_ITEM(res, i, o);
    }
    Py_DECREF(seq);
    if (op_end(b->store, &op, ok ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

typedef struct {
    BoxObject *b;
    PyObject *list;
} ScanCtx;

static int scan_cb(void *ctx, const mote_record *r)
{
    ScanCtx *c = ctx;
    PyObject *o = box_build(c->b, r);
    if (!o)
        return -1;
    int rc = PyList_Append(c->list, o);
    Py_DECREF(o);
    return rc < 0 ? -1 : 0;
}

static PyObject *box_all(PyObject *self, PyObject *unused)
{
    (void)unused;
    BoxObject *b = (BoxObject *)self;
    ScanCtx c = {b, PyList_New(0)};
    Op op;
    if (!c.list || box_op_begin(b, 0, &op) < 0) {
        Py_XDECREF(c.list);
        return NULL;
    }
    int rc = mote_scan(op.ts->txn, b->e, scan_cb, &c);
    if (rc > 0)
        raise_rc(rc);
    if (op_end(b->store, &op, rc ? OP_FAIL : OP_NOCHANGE) < 0)
        Py_CLEAR(c.list);
    return c.list;
}

static PyObject *box_count(PyObject *self, PyObject *unused)
{
    (void)unused;
    BoxObject *b = (BoxObject *)self;
    Op op;
    if (box_op_begin(b, 0, &op) < 0)
        return NULL;
    uint64_t n = 0;
    int rc = mote_count(op.ts->txn, b->e, &n);
    if (rc)
        raise_rc(rc);
    if (op_end(b->store, &op, rc ? OP_FAIL : OP_NOCHANGE) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(n);
}

static PyObject *box_contains(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id(b, arg, &id) < 0)
        return NULL;
    Op op;
    if (box_op_begin(b, 0, &op) < 0)
        return NULL;
    int rc = mote_get(op.ts->txn, b->e, id, NULL);
    if (rc && rc != MOTE_NOTFOUND)
        raise_rc(rc);
    if (op_end(b->store, &op, rc && rc != MOTE_NOTFOUND ? OP_FAIL : OP_NOCHANGE) < 0)
        return NULL;
    return PyBool_FromLong(rc == MOTE_OK);
}

static PyObject *box_remove(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id_or_obj(b, arg, &id) < 0)
        return NULL;
    Op op;
    if (box_op_begin(b, 1, &op) < 0)
        return NULL;
    int rc = mote_remove(op.ts->txn, b->e, id), how = OP_COMMIT;
    if (rc == MOTE_NOTFOUND) {
        how = OP_NOCHANGE;
    } else if (rc) {
        raise_rc(rc);
        op_doom(&op); /* the object may be gone without its index entries */
        how = OP_FAIL;
    }
    if (op_end(b->store, &op, how) < 0)
        return NULL;
    return PyBool_FromLong(rc == MOTE_OK);
}

/* End a batch remove that returned rc after removing `removed` objects: a
 * failed batch may have removed a part (the transaction is doomed); nothing
 * removed needs no commit. */
static int op_end_removed(BoxObject *b, Op *op, int rc, uint64_t removed)
{
    if (rc) {
        raise_rc(rc);
        op_doom(op);
    }
    return op_end(b->store, op, rc ? OP_FAIL : removed ? OP_COMMIT : OP_NOCHANGE);
}

static PyObject *box_remove_many(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    PyObject *seq = PySequence_Fast(arg, "remove_many() takes a sequence of ids or objects");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *ids = PyMem_Malloc(sizeof *ids * (size_t)(n + 1));
    if (!ids) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if ((!(i & 1023) && i && PyErr_CheckSignals() < 0) ||
            parse_id_or_obj(b, PySequence_Fast_GET_ITEM(seq, i), &ids[i]) < 0) {
            Py_DECREF(seq);
            PyMem_Free(ids);
            return NULL;
        }
    Py_DECREF(seq);
    Op op;
    if (box_op_begin(b, 1, &op) < 0) {
        PyMem_Free(ids);
        return NULL;
    }
    uint64_t removed = 0;
    int rc;
    mote_txn *t = op.ts->txn;
    mote_entity *e = b->e;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_remove_many(t, e, ids, (size_t)n, &removed);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    if (op_end_removed(b, &op, rc, removed) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(removed);
}

/* remove_all and sweep: fn(txn, entity, &removed) in a write operation. */
static PyObject *remove_with(BoxObject *b, int (*fn)(mote_txn *, mote_entity *, uint64_t *))
{
    Op op;
    if (box_op_begin(b, 1, &op) < 0)
        return NULL;
    uint64_t removed = 0;
    int rc;
    mote_txn *t = op.ts->txn;
    mote_entity *e = b->e;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(t, e, &removed);
    Py_END_ALLOW_THREADS
    if (op_end_removed(b, &op, rc, removed) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(removed);
}

static PyObject *box_remove_all(PyObject *self, PyObject *unused)
{
    (void)unused;
    return remove_with((BoxObject *)self, mote_remove_all);
}

static PyObject *box_sweep(PyObject *self, PyObject *unused)
{
    (void)unused;
    return remove_with((BoxObject *)self, mote_sweep);
}

static PyObject *box_query(PyObject *self, PyObject *args)
{
    return query_new((BoxObject *)self, args);
}

/* ---- Box: relations -------------------------------------------------------------- */

static FieldInfo *rel_prop(BoxObject *b, PyObject *prop)
{
    FieldInfo *f = NULL;
    if (PyObject_TypeCheck(prop, &Property_Type) && ((PropertyObject *)prop)->owner == b->cls)
        f = prop_field((PropertyObject *)prop);
    if (!f || !f->target) {
        PyErr_Format(PyExc_TypeError, "Box of %s: expected a relation property of %s "
                     "(motedb.ToOne / motedb.ToMany), got %R", b->info->cname, b->info->cname,
                     prop);
        return NULL;
    }
    return f;
}

/* An id, or an object of entity `name` with an id. */
static int rel_id(const char *ent, PyObject *name, PyObject *v, uint64_t *id)
{
    EntityInfo *ti = info_of_type(Py_TYPE(v));
    if (ti) {
        if (PyUnicode_Compare(ti->name, name) != 0) {
            PyErr_Format(PyExc_TypeError, "%s: expected a %U object or id, got a %U object", ent,
                         name, ti->name);
            return -1;
        }
        v = SLOT(v, ti->id_off);
        if (!v) {
            PyErr_Format(PyExc_AttributeError, "%U.id is not set", name);
            return -1;
        }
    } else if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a %U object or id, got %.100s", ent, name,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (!x) {
        PyErr_Format(PyExc_ValueError, "%s: the %U object has no id yet: put it first", ent,
                     name);
        return -1;
    }
    *id = x;
    return 0;
}

static PyObject *ids_to_list(const uint64_t *ids, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(ids[i]);
        if (!x) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, x);
    }
    return l;
}

/* _links(prop, id) -> ids of the targets; backlinks: the sources pointing at id. */
static PyObject *box_links_common(BoxObject *b, PyObject *const *args, Py_ssize_t nargs,
                                  int back)
{
    const char *fn = back ? "backlinks" : "_links";
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments: a relation property and an "
                     "object or id", fn);
        return NULL;
    }
    FieldInfo *f = rel_prop(b, args[0]);
    if (!f)
        return NULL;
    uint64_t id;
    if (rel_id(b->info->cname, back ? f->target : b->info->name, args[1], &id) < 0)
        return NULL;
    Op op;
    if (box_op_begin(b, 0, &op) < 0)
        return NULL;
    PyObject *res = NULL;
    uint64_t *ids = NULL;
    size_t n = 0;
    unsigned prop = (unsigned)((PropertyObject *)args[0])->index;
    int rc = back ? mote_backlinks(op.ts->txn, b->e, prop, id, &ids, &n)
                  : mote_links(op.ts->txn, b->e, prop, id, &ids, &n);
    if (rc == MOTE_NOTFOUND) {
        res = PyList_New(0);
    } else if (rc) {
        raise_rc(rc);
    } else if (!back) {
        res = ids_to_list(ids, n);
    } else {
        res = PyList_New((Py_ssize_t)n);
        for (size_t i = 0; res && i < n; i++) {
            mote_record r;
            PyObject *o = NULL;
            if ((rc = mote_get(op.ts->txn, b->e, ids[i], &r)))
                raise_rc(rc);
            else
                o = box_build(b, &r);
            if (!o) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, o);
        }
    }
    mote_free(ids);
    if (op_end(b->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *box_links(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return box_links_common((BoxObject *)self, args, nargs, 0);
}

static PyObject *box_backlinks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return box_links_common((BoxObject *)self, args, nargs, 1);
}

/* _relink(prop, id, add_ids, remove_ids): to-many links, in one write operation. */
static PyObject *box_relink(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BoxObject *b = (BoxObject *)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_relink(prop, id, add, remove)");
        return NULL;
    }
    FieldInfo *f = rel_prop(b, args[0]);
    uint64_t id;
    if (!f || rel_id(b->info->cname, b->info->name, args[1], &id) < 0)
        return NULL;
    if (f->kind != K_TOMANY) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a to-many relation", b->info->cname,
                     f->cname);
        return NULL;
    }
    PyObject *add = PySequence_Fast(args[2], "_relink: add must be a sequence");
    PyObject *rem = add ? PySequence_Fast(args[3], "_relink: remove must be a sequence") : NULL;
    if (!rem) {
        Py_XDECREF(add);
        return NULL;
    }
    Op op;
    int ok = box_op_begin(b, 1, &op) == 0;
    if (ok) {
        unsigned prop = (unsigned)((PropertyObject *)args[0])->index;
        for (int pass = 0; ok && pass < 2; pass++) {
            PyObject *seq = pass ? add : rem;
            for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(seq); i++) {
                uint64_t dst;
                if (rel_id(b->info->cname, f->target, PySequence_Fast_GET_ITEM(seq, i), &dst)) {
                    ok = 0;
                    break;
                }
                int rc = pass ? mote_link(op.ts->txn, b->e, prop, id, dst)
                              : mote_unlink(op.ts->txn, b->e, prop, id, dst);
                if (rc && !(rc == MOTE_NOTFOUND && !pass))
                    ok = raise_rc(rc) == 0;
            }
        }
        if (!ok)
            op_doom(&op);
        ok = op_end(b->store, &op, ok ? OP_COMMIT : OP_FAIL) == 0;
    }
    Py_DECREF(add);
    Py_DECREF(rem);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *box_repr(PyObject *self)
{
    BoxObject *b = (BoxObject *)self;
    return PyUnicode_FromFormat("<motedb.Box of %s in %R>", b->info->cname,
                                b->store ? b->store->path : Py_None);
}

static PyObject *box_get_entity(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef((PyObject *)((BoxObject *)self)->cls);
}

static PyObject *box_get_store(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef((PyObject *)((BoxObject *)self)->store);
}

static PyMethodDef box_methods[] = {
    {"put", (PyCFunction)(void (*)(void))box_put, METH_FASTCALL | METH_KEYWORDS,
     "put(obj, *, mode='upsert') -> id. A new object (id 0) gets the next id, set on obj."},
    {"put_many", (PyCFunction)(void (*)(void))box_put_many, METH_FASTCALL | METH_KEYWORDS,
     "put_many(objs, *, mode='upsert') -> [ids]. One transaction; new objects get "
     "contiguous ids, set on the objects."},
    {"update", (PyCFunction)(void (*)(void))box_update, METH_FASTCALL | METH_KEYWORDS,
     "update(id_or_obj, **changes): change only the named properties of the stored object "
     "(NotFoundError if there is none); given an object, its attributes follow."},
    {"get", box_get, METH_O, "get(id) -> object or None."},
    {"_get_cached", box_get_cached, METH_O,
     "_get_cached(id) -> object, None, or Ellipsis: get(id) if every page it reads is in the "
     "store's cache, else Ellipsis (nothing read; motedb.aio then runs get() on a thread)."},
    {"get_many", box_get_many, METH_O, "get_many(ids) -> [object or None]."},
    {"all", box_all, METH_NOARGS, "all() -> [objects] in id order."},
    {"count", box_count, METH_NOARGS, "count() -> number of objects."},
    {"contains", box_contains, METH_O, "contains(id) -> bool."},
    {"remove", box_remove, METH_O, "remove(id or obj) -> True if it existed."},
    {"remove_many", box_remove_many, METH_O, "remove_many(ids or objs) -> number removed."},
    {"remove_all", box_remove_all, METH_NOARGS, "remove_all() -> number removed."},
    {"sweep", box_sweep, METH_NOARGS,
     "sweep() -> number removed: remove the expired objects (motedb.Expires), which "
     "reads already leave out."},
    {"query", box_query, METH_VARARGS,
     "query(*conditions) -> Query (several: AND; None: no condition)."},
    {"backlinks", (PyCFunction)(void (*)(void))box_backlinks, METH_FASTCALL,
     "backlinks(prop, obj_or_id) -> [objects of this box whose relation prop (to-one or "
     "to-many) points at obj], in id order."},
    {"_links", (PyCFunction)(void (*)(void))box_links, METH_FASTCALL,
     "_links(prop, obj_or_id) -> [target ids]."},
    {"_relink", (PyCFunction)(void (*)(void))box_relink, METH_FASTCALL,
     "_relink(prop, id, add, remove): write to-many links."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef box_getset[] = {
    {"entity", box_get_entity, NULL, "The entity class.", NULL},
    {"store", box_get_store, NULL, "The store.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Box_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Box",
    .tp_basicsize = sizeof(BoxObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The objects of one entity class in a store: store.box(Note).",
    .tp_dealloc = box_dealloc,
    .tp_traverse = box_traverse,
    .tp_clear = box_clear,
    .tp_repr = box_repr,
    .tp_methods = box_methods,
    .tp_getset = box_getset,
};
