/*
 * store.c — Store objects, transactions (store.write()/read() and the
 * per-operation Op), the Box registry. Part of the _core extension (_core.h).
 */
#include <limits.h>

#include "_core.h"

/* ---- Store and transactions ------------------------------------------------------------ */

static int closed_error(StoreObject *st)
{
    PyErr_Format(ST.Closed, "store %U is closed", st->path);
    return -1;
}

TxnSlot *find_txn(StoreObject *st)
{
    if (!st->txns)
        return NULL;
    unsigned long tid = PyThread_get_thread_ident();
    for (TxnSlot *t = st->txns; t; t = t->next)
        if (t->tid == tid)
            return t;
    return NULL;
}

static void unlink_txn(StoreObject *st, TxnSlot *ts)
{
    for (TxnSlot **pp = &st->txns; *pp; pp = &(*pp)->next)
        if (*pp == ts) {
            *pp = ts->next;
            return;
        }
}

/* After a write transaction ended: boxes opened in it keep their entity if it
 * committed, and open it again on next use if it rolled back. */
static void settle_boxes(StoreObject *st, mote_txn *t, int committed)
{
    if (!st->npending || !st->boxes)
        return;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(st->boxes, &pos, &k, &v)) {
        BoxObject *b = (BoxObject *)v;
        if (b->pending == t) {
            b->pending = NULL;
            st->npending--;
            if (committed) { /* registered, if it was deferred */
                box_undefer(b);
            } else { /* its entity is as before t: registered again by its next use */
                b->e = NULL;
                if (!b->deferred && !b->superseded) {
                    b->deferred = 1;
                    st->ndeferred++;
                }
            }
        }
    }
}

static int register_deferred(StoreObject *st);

/* write: 0 read, 1 write, 2 write with MOTE_TXN_LAZY (registering an entity);
 * rflags: a read's flags beside MOTE_TXN_RDONLY */
static int begin_txn(StoreObject *st, int write, unsigned rflags, mote_txn **t)
{
    int rc;
    /* (a write of the thread that defers its syncs becomes visible only once
     * synced: deferred boxes are registered before it, see register_deferred) */
    int defers = write == 1 && st->defer_tid == PyThread_get_thread_ident();
    if (st->ndeferred && (!write || defers) && register_deferred(st) < 0)
        return -1;
    if (write) {
        unsigned flags = write == 2 ? MOTE_TXN_LAZY : 0;
        Py_BEGIN_ALLOW_THREADS
        rc = mote_begin(st->s, flags, t);
        Py_END_ALLOW_THREADS
    } else {
        rc = mote_begin(st->s, MOTE_TXN_RDONLY | rflags, t);
    }
    return rc ? raise_rc(rc) : 0;
}

/* Commit (write: GIL released around the sync) or abort t. On the thread
 * that defers the store's syncs (_defer_sync) a commit is left to
 * _wait_synced: a single operation's and a write transaction's alike. */
static int end_txn(StoreObject *st, mote_txn *t, int write, int commit)
{
    int rc = 0;
    if (write && commit && st->defer_tid == PyThread_get_thread_ident()) {
        if (st->ntickets == st->cap_tickets) {
            Py_ssize_t cap = st->cap_tickets ? 2 * st->cap_tickets : 64;
            mote_ticket **k = PyMem_Realloc(st->tickets, (size_t)cap * sizeof *k);
            if (!k) {
                mote_abort(t);
                PyErr_NoMemory();
                return -1;
            }
            st->tickets = k;
            st->cap_tickets = cap;
        }
        mote_ticket *k = NULL;
        Py_BEGIN_ALLOW_THREADS
        rc = mote_commit_nowait(t, &k);
        Py_END_ALLOW_THREADS
        if (k)
            st->tickets[st->ntickets++] = k;
    } else if (write && commit) {
        Py_BEGIN_ALLOW_THREADS
        rc = mote_commit(t);
        Py_END_ALLOW_THREADS
    } else {
        mote_abort(t);
    }
    if (write)
        settle_boxes(st, t, commit && !rc);
    return rc ? raise_rc(rc) : 0;
}

/* One operation: joins the thread's transaction or runs in its own (a read
 * of its own with rflags beside MOTE_TXN_RDONLY). */
static int op_begin_as(StoreObject *st, int write, unsigned rflags, Op *op)
{
    if (!st->s)
        return closed_error(st);
    TxnSlot *cur = find_txn(st);
    if (cur) {
        if (write && !cur->write) {
            PyErr_SetString(ST.Txn, "cannot write inside store.read(): use store.write()");
            return -1;
        }
        op->ts = cur;
        op->own = 0;
        return 0;
    }
    mote_txn *t = NULL;
    st->nimplicit++;
    if (begin_txn(st, write, rflags, &t) < 0) {
        st->nimplicit--;
        return -1;
    }
    memset(&op->slot, 0, sizeof op->slot);
    op->slot.tid = PyThread_get_thread_ident();
    op->slot.txn = t;
    op->slot.write = write != 0;
    op->slot.depth = 1;
    op->slot.next = st->txns;
    st->txns = &op->slot;
    op->ts = &op->slot;
    op->own = 1;
    return 0;
}

int op_begin(StoreObject *st, int write, Op *op) { return op_begin_as(st, write, 0, op); }

int op_begin_cached(StoreObject *st, Op *op)
{
    if (st->s && find_txn(st))
        return 0;
    return op_begin_as(st, 0, MOTE_TXN_CACHED, op) < 0 ? -1 : 1;
}

/* End an operation: OP_COMMIT commits its own write transaction, OP_NOCHANGE
 * ends it without a commit, OP_FAIL rolls it back (an exception is set).
 * Returns 0, or -1 with an exception.
 *
 * Interrupts: a signal (Ctrl-C) that arrived while C code ran is handled
 * here, just before the commit: its exception rolls the operation back. Once
 * the commit has started the operation returns normally, and a signal that
 * comes during it is delivered at the next bytecode: never both committed
 * and raised by the call. */
int op_end(StoreObject *st, Op *op, int how)
{
    if (how == OP_COMMIT && op->own && op->slot.write && PyErr_CheckSignals() < 0)
        how = OP_FAIL;
    if (!op->own)
        return how == OP_FAIL ? -1 : 0;
    unlink_txn(st, &op->slot);
    int rc = end_txn(st, op->slot.txn, op->slot.write, how == OP_COMMIT && op->slot.write);
    st->nimplicit--;
    return how == OP_FAIL || rc < 0 ? -1 : 0;
}

/* The boxes of entity `cname` open their entity again on next use (its
 * stored schema changed). */
static void reopen_boxes(StoreObject *st, const char *cname)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (st->boxes && PyDict_Next(st->boxes, &pos, &k, &v)) {
        BoxObject *o = (BoxObject *)v;
        if (strcmp(o->info->cname, cname))
            continue;
        o->e = NULL;
        if (o->pending) {
            o->pending = NULL;
            st->npending--;
        }
    }
}

/* SchemaError for a class that does not match the stored schema, said in
 * Python terms: what differs (the library's message) and what to do. */
int schema_error(StoreObject *st, int rc)
{
    static const char tail[] = "; it can be changed only in a write transaction";
    const char *msg = mote_errmsg(NULL);
    size_t n = strlen(msg), tl = sizeof tail - 1;
    if (rc != MOTE_SCHEMA || n < tl || strcmp(msg + n - tl, tail))
        return raise_code(rc == MOTE_NOTFOUND ? MOTE_SCHEMA : rc, NULL, NULL);
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s; %s", (int)(n - tl), msg,
             st->readonly ? "the store is open read-only: open it once with readonly=False "
                            "to update the stored schema"
                          : "call store.box() outside store.read() (or inside store.write()) "
                            "to update the stored schema");
    return raise_code(MOTE_SCHEMA, NULL, buf);
}

static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "readonly", "create", "sync", "timeout", "exclusive",
                             "page_size", "repack", NULL};
    PyObject *path, *timeout = NULL, *psobj = Py_None;
    int readonly = 0, create = 1, sync = 1, exclusive = 0, repack = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$pppOpOp:Store", kwlist, &path, &readonly,
                                     &create, &sync, &timeout, &exclusive, &psobj, &repack))
        return NULL;
    long page_size = 0; /* at creation; 0: the library's default */
    if (psobj != Py_None) {
        page_size = PyLong_Check(psobj) && !PyBool_Check(psobj) ? PyLong_AsLong(psobj) : -1;
        if (page_size < 4096 || page_size > 65536 || (page_size & (page_size - 1))) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "page_size must be a power of two from 4096 to 65536, "
                         "not %R", psobj);
            return NULL;
        }
    }
    int busy_ms = 5000; /* timeout: seconds to wait for another process's writer */
    if (timeout && timeout != Py_None) {
        double sec = PyFloat_AsDouble(timeout);
        if (sec == -1.0 && PyErr_Occurred())
            return NULL;
        if (!(sec >= 0)) {
            PyErr_Format(PyExc_ValueError, "timeout must be a number of seconds >= 0 or None, "
                         "not %R", timeout);
            return NULL;
        }
        busy_ms = sec * 1000.0 >= INT_MAX ? INT_MAX : (int)(sec * 1000.0);
    } else if (timeout == Py_None) {
        busy_ms = INT_MAX; /* wait as long as it takes */
    }
    PyObject *bpath = NULL;
    if (!PyUnicode_FSConverter(path, &bpath))
        return NULL;
    StoreObject *st = (StoreObject *)type->tp_alloc(type, 0);
    if (!st) {
        Py_DECREF(bpath);
        return NULL;
    }
    st->path = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(bpath));
    st->boxes = PyDict_New();
    st->readonly = readonly;
    if (!st->path || !st->boxes)
        goto fail;
    mote_options o;
    memset(&o, 0, sizeof o);
    o.flags = (readonly ? MOTE_RDONLY : 0) | (create && !readonly ? MOTE_CREATE : 0) |
              (sync ? 0 : MOTE_NOSYNC) | (exclusive ? MOTE_EXCLUSIVE : 0) |
              (repack ? MOTE_REPACK : 0);
    o.page_size = (unsigned)page_size;
    mote_store *s = NULL;
    int rc;
    const char *cpath = PyBytes_AS_STRING(bpath);
    Py_BEGIN_ALLOW_THREADS
    rc = mote_open(cpath, &o, &s);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_open_error(rc);
        goto fail;
    }
    st->s = s;
    st->readonly = mote_store_readonly(s); /* also when the file may not be written */
    mote_busy_timeout(s, busy_ms);
    st->busy_ms = busy_ms;
    Py_DECREF(bpath);
    return (PyObject *)st;
fail:
    Py_DECREF(bpath);
    Py_DECREF(st);
    return NULL;
}

/* Wait for every deferred commit (one sync covers them all): 0, or -1 with
 * the first failure raised (each ticket is waited for and freed anyway). */
static int wait_tickets(StoreObject *st)
{
    int first = 0;
    while (st->ntickets) { /* the newest first: its sync covers the older */
        mote_ticket *k = st->tickets[--st->ntickets];
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = mote_commit_wait(k);
        Py_END_ALLOW_THREADS
        if (rc && !first)
            first = rc;
    }
    return first ? raise_rc(first) : 0;
}

static PyObject *store_defer_sync(PyObject *self, PyObject *on)
{
    StoreObject *st = (StoreObject *)self;
    int v = PyObject_IsTrue(on);
    if (v < 0)
        return NULL;
    unsigned long me = PyThread_get_thread_ident();
    if (v && st->defer_tid && st->defer_tid != me) {
        PyErr_SetString(ST.Busy, "another thread defers this store's syncs");
        return NULL;
    }
    if (!v && st->defer_tid == me && st->ntickets) {
        PyErr_SetString(ST.Txn, "_defer_sync(False) with commits not waited for: "
                        "_wait_synced() first");
        return NULL;
    }
    if (v || st->defer_tid == me)
        st->defer_tid = v ? me : 0;
    Py_RETURN_NONE;
}

static PyObject *store_wait_synced(PyObject *self, PyObject *unused)
{
    (void)unused;
    return wait_tickets((StoreObject *)self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *store_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    StoreObject *st = (StoreObject *)self;
    if (!st->s)
        Py_RETURN_NONE;
    if (find_txn(st)) {
        PyErr_SetString(ST.Txn, "close() inside a transaction of this store: end it first");
        return NULL;
    }
    if (st->nexplicit) {
        PyErr_Format(ST.Busy, "store %U: cannot close, %d transaction(s) are still open in "
                     "other threads", st->path, st->nexplicit);
        return NULL;
    }
    while (st->nimplicit && st->s) { /* single operations of other threads: short */
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    if (!st->s)
        Py_RETURN_NONE;
    /* boxes never used: their entities registered as box() did before (best
     * effort, like the lazy commit: work redone when found missing) */
    if (st->ndeferred && register_deferred(st) < 0)
        PyErr_Clear();
    PyObject *et = NULL, *ev = NULL, *etb = NULL; /* a deferred sync's failure: raised */
    if (wait_tickets(st) < 0)                     /* after the close */
        PyErr_Fetch(&et, &ev, &etb);
    iter_end_all(st); /* iterations release their snapshots */
    mote_store *s = st->s;
    st->s = NULL;
    if (st->boxes) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(st->boxes, &pos, &k, &v)) {
            ((BoxObject *)v)->e = NULL;
            box_undefer((BoxObject *)v);
        }
        PyDict_Clear(st->boxes);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_close(s);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(etb);
        st->s = s;
        raise_rc(rc);
        return NULL;
    }
    if (et) {
        PyErr_Restore(et, ev, etb);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int store_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((StoreObject *)self)->boxes);
    return 0;
}

static int store_clear(PyObject *self)
{
    Py_CLEAR(((StoreObject *)self)->boxes);
    return 0;
}

static void store_dealloc(PyObject *self)
{
    StoreObject *st = (StoreObject *)self;
    PyObject_GC_UnTrack(self);
    if (st->weakrefs)
        PyObject_ClearWeakRefs(self);
    if (st->s && !st->txns && !st->nexplicit && !st->nimplicit) {
        for (Py_ssize_t i = st->ntickets; i-- > 0;)
            mote_commit_wait(st->tickets[i]);
        st->ntickets = 0;
        iter_end_all(st);
        mote_close(st->s);
        st->s = NULL;
    }
    PyMem_Free(st->tickets);
    store_clear(self);
    Py_XDECREF(st->path);
    Py_TYPE(self)->tp_free(self);
}

/* Is the entity of class `cls` in use here by another class? Two classes
 * cannot share one entity (each would write the objects its way): an error,
 * except for the same class defined again (same module and qualified name,
 * e.g. a notebook cell run twice), whose old box is retired. */
static int same_name_box(StoreObject *st, PyTypeObject *cls, const EntityInfo *in)
{
    PyObject *k, *v, *retire = NULL;
    Py_ssize_t pos = 0;
    int rc = 0;
    while (PyDict_Next(st->boxes, &pos, &k, &v)) {
        BoxObject *o = (BoxObject *)v;
        if (o->cls == cls || strcmp(o->info->cname, in->cname))
            continue;
        PyObject *m1 = PyObject_GetAttrString((PyObject *)o->cls, "__module__");
        PyObject *m2 = m1 ? PyObject_GetAttrString((PyObject *)cls, "__module__") : NULL;
        int again = -1;
        if (m2)
            again = PyObject_RichCompareBool(m1, m2, Py_EQ);
        if (again > 0)
            again = PyUnicode_Compare(((PyHeapTypeObject *)o->cls)->ht_qualname,
                                      ((PyHeapTypeObject *)cls)->ht_qualname) == 0;
        if (again > 0) {
            retire = k;
        } else if (again == 0) {
            char msg[600];
            snprintf(msg, sizeof msg, "store.box(%s.%s): entity %s is already used in this "
                     "store by the class %s.%s; two classes cannot map to one entity (rename "
                     "one of them)", m2 && PyUnicode_Check(m2) ? PyUnicode_AsUTF8(m2) : "?",
                     cls->tp_name, in->cname,
                     m1 && PyUnicode_Check(m1) ? PyUnicode_AsUTF8(m1) : "?",
                     o->cls->tp_name);
            if (!PyErr_Occurred())
                raise_code(MOTE_SCHEMA, NULL, msg);
            rc = -1;
        } else {
            rc = -1;
        }
        Py_XDECREF(m1);
        Py_XDECREF(m2);
        break;
    }
    if (retire) {
        BoxObject *o = (BoxObject *)PyDict_GetItem(st->boxes, retire);
        o->superseded = 1;
        o->e = NULL;
        box_undefer(o);
        if (o->pending) {
            o->pending = NULL;
            st->npending--;
        }
        Py_INCREF(retire);
        rc = PyDict_DelItem(st->boxes, retire);
        Py_DECREF(retire);
    }
    return rc;
}

PyObject *store_box(PyObject *self, PyObject *cls)
{
    StoreObject *st = (StoreObject *)self;
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    PyObject *b = PyDict_GetItemWithError(st->boxes, cls);
    if (b)
        return Py_NewRef(b);
    if (PyErr_Occurred())
        return NULL;
    EntityInfo *in = PyType_Check(cls) ? info_of_type((PyTypeObject *)cls) : NULL;
    if (!in) {
        PyErr_Format(PyExc_TypeError, "store.box() takes an entity class (a subclass of "
                     "motedb.Entity), got %R", cls);
        return NULL;
    }
    if (same_name_box(st, (PyTypeObject *)cls, in) < 0)
        return NULL;
    BoxObject *box = PyObject_GC_New(BoxObject, &Box_Type);
    if (!box)
        return NULL;
    box->store = (StoreObject *)Py_NewRef(self);
    box->cls = (PyTypeObject *)Py_NewRef(cls);
    box->info = in;
    box->e = NULL;
    box->pending = NULL;
    box->superseded = 0;
    box->deferred = 0;
    PyObject_GC_Track(box);
    TxnSlot *cur = find_txn(st);
    if (cur) {
        if (box_entity(box, cur) < 0)
            goto fail;
    } else {
        /* unchanged schema: a read transaction is enough (and needs no
         * deferred box registered: several new classes ride on their writes) */
        mote_txn *t;
        int brc = mote_begin(st->s, MOTE_TXN_RDONLY, &t);
        if (brc) {
            raise_rc(brc);
            goto fail;
        }
        mote_entity *e;
        int rc = mote_entity_open(t, in->cname, in->defs, (unsigned)in->nf, &e);
        mote_abort(t);
        if (!rc) {
            box->e = e;
        } else if (rc == MOTE_NOTFOUND && !st->readonly) {
            /* a new entity: registered by the first single write that uses the box
             * (creating a store, box() and put_many() then make one commit),
             * or first in a commit of its own (register_deferred) */
            box->deferred = 1;
            st->ndeferred++;
        } else if (rc == MOTE_SCHEMA && !st->readonly) {
            Op op; /* evolve it (on a new store, durable with the first write) */
            if (box_op_begin(box, 2, &op) < 0 || op_end(st, &op, OP_COMMIT) < 0)
                goto fail;
            if (box->pending) { /* committed (the box was not in st->boxes yet) */
                box->pending = NULL;
                st->npending--;
            }
        } else {
            schema_error(st, rc);
            goto fail;
        }
    }
    if (PyDict_SetItem(st->boxes, cls, (PyObject *)box) < 0)
        goto fail;
    return (PyObject *)box;
fail:
    Py_DECREF(box);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Another thread's write transaction is creating or changing the entity of
 * box b (registering a deferred box, or a box() inside it; its end settles
 * the box: settle_boxes): 0.1 ms passes, the GIL released; -1 with BusyError
 * once the store's timeout is over since the first wait (*deadline < 0:
 * none yet), or ClosedError. */
int registering_wait(BoxObject *b, double *deadline)
{
    StoreObject *st = b->store;
    if (*deadline < 0)
        *deadline = st->busy_ms == INT_MAX ? INFINITY : now_ms() + st->busy_ms;
    if (now_ms() > *deadline) {
        PyErr_Format(ST.Busy, "store %U: another thread's write is creating or changing "
                     "entity %s (waited %d ms)", st->path, b->info->cname, st->busy_ms);
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    Py_END_ALLOW_THREADS
    return st->s ? 0 : closed_error(st);
}

/* Register the entities of deferred boxes (store_box), all in one commit
 * (MOTE_TXN_LAZY: on a new store, durable with the first write), ahead of a
 * transaction that must find them committed: a read (its snapshot), an
 * explicit store.write() (which may last, and a registration inside it would
 * keep other threads' reads waiting), a write of the thread that defers its
 * syncs (motedb.aio's writer: its commit is seen only once synced). Only a
 * single write operation of this thread registers one in its own commit. A
 * box that another thread's write is registering is waited for (up to the
 * store's timeout): once that commit is durable the box is settled, or it
 * rolled back and is registered here. */
static int register_deferred(StoreObject *st)
{
    double deadline = -1;
    for (;;) {
        BoxObject *b = NULL, *busy = NULL;
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (!b && PyDict_Next(st->boxes, &pos, &k, &v)) {
            BoxObject *o = (BoxObject *)v;
            if (o->deferred && o->pending)
                busy = o;
            else if (o->deferred)
                b = o;
        }
        if (!b && !busy)
            return 0;
        if (!b) { /* (this thread has no transaction: the pending one is another's) */
            if (registering_wait(busy, &deadline) < 0)
                return -1;
            continue;
        }
        Op op;
        Py_INCREF(b);
        /* synced before it returns, also on the thread that defers its syncs:
         * settled, the box is used by every thread at once */
        unsigned long defer = st->defer_tid;
        st->defer_tid = 0;
        int rc = box_op_begin(b, 2, &op);
        /* every other deferred box that no write is registering, in the same
         * commit (a new saver's three entities: one commit, not three) */
        pos = 0;
        while (!rc && PyDict_Next(st->boxes, &pos, &k, &v)) {
            BoxObject *o = (BoxObject *)v;
            if (o != b && o->deferred && !o->pending && box_entity(o, op.ts) < 0) {
                op_end(st, &op, OP_FAIL);
                rc = -1;
            }
        }
        if (!rc && op_end(st, &op, OP_COMMIT) < 0)
            rc = -1;
        st->defer_tid = defer;
        if (!rc) /* (settle_boxes did it: its commit opened the entity) */
            box_undefer(b);
        Py_DECREF(b);
        if (rc < 0)
            return -1;
    }
}

/* _boxed_class(name): the class whose box holds entity `name` here, or None
 * (relations resolve their target entity through it). */
static PyObject *store_boxed_class(PyObject *self, PyObject *name)
{
    StoreObject *st = (StoreObject *)self;
    const char *cname = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (!cname)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "expected a str");
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (st->boxes && PyDict_Next(st->boxes, &pos, &k, &v))
        if (!strcmp(((BoxObject *)v)->info->cname, cname))
            return Py_NewRef(k);
    Py_RETURN_NONE;
}

static PyObject *store_drop_property(PyObject *self, PyObject *args)
{
    StoreObject *st = (StoreObject *)self;
    PyObject *ent, *prop;
    if (!PyArg_ParseTuple(args, "OU:drop_property", &ent, &prop))
        return NULL;
    const char *cname = NULL, *cprop = PyUnicode_AsUTF8(prop);
    EntityInfo *in = PyType_Check(ent) ? info_of_type((PyTypeObject *)ent) : NULL;
    if (in) {
        cname = in->cname;
        for (Py_ssize_t i = 0; cprop && i < in->nf; i++)
            if (!strcmp(in->f[i].cname, cprop)) {
                PyErr_Format(PyExc_ValueError, "drop_property: %s.%s is declared by the "
                             "class; remove it from the class first", cname, cprop);
                return NULL;
            }
    } else if (PyUnicode_Check(ent)) {
        cname = PyUnicode_AsUTF8(ent);
    } else {
        PyErr_Format(PyExc_TypeError, "drop_property() takes an entity class or its name, "
                     "got %.100s", Py_TYPE(ent)->tp_name);
        return NULL;
    }
    if (!cname || !cprop)
        return NULL;
    Op op;
    if (op_begin(st, 1, &op) < 0)
        return NULL;
    int rc = mote_entity_drop_prop(op.ts->txn, cname, cprop);
    if (rc) {
        raise_code(rc == MOTE_NOTFOUND ? MOTE_SCHEMA : rc, NULL, NULL);
        if (rc != MOTE_NOTFOUND)
            op_doom(&op);
    } else {
        reopen_boxes(st, cname);
    }
    if (op_end(st, &op, rc ? OP_FAIL : OP_COMMIT) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Transactions: store.write() / store.read() */

static PyObject *store_txn(PyObject *self, int write, int cached)
{
    StoreObject *st = (StoreObject *)self;
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    TxnObject *t = PyObject_New(TxnObject, &Txn_Type);
    if (!t)
        return NULL;
    t->store = (StoreObject *)Py_NewRef(self);
    t->slot = NULL;
    t->write = write;
    t->cached = cached;
    t->state = 0;
    t->joined = 0;
    t->tid = 0;
    return (PyObject *)t;
}

static PyObject *store_write(PyObject *self, PyObject *unused)
{
    (void)unused;
    return store_txn(self, 1, 0);
}

static PyObject *store_read(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cached", NULL};
    int cached = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:read", kwlist, &cached))
        return NULL;
    return store_txn(self, 0, cached);
}

static PyObject *txn_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    TxnObject *t = (TxnObject *)self;
    StoreObject *st = t->store;
    if (t->state != 0) {
        PyErr_SetString(ST.Txn, "this transaction was already used: call store.write() or "
                        "store.read() again for a new one");
        return NULL;
    }
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    TxnSlot *cur = find_txn(st);
    if (cur && t->cached) { /* it would join a transaction that may read the file */
        raise_code(MOTE_WOULDBLOCK, NULL, "store.read(cached=True) inside another "
                   "transaction of this thread");
        return NULL;
    }
    if (cur) {
        if (t->write && !cur->write) {
            PyErr_SetString(ST.Txn, "cannot start store.write() inside store.read()");
            return NULL;
        }
        cur->depth++;
        t->slot = cur;
        t->joined = 1;
    } else {
        /* (deferred boxes are registered before a write block: register_deferred) */
        if (t->write && st->ndeferred && register_deferred(st) < 0)
            return NULL;
        TxnSlot *ts = PyMem_Calloc(1, sizeof *ts);
        if (!ts)
            return PyErr_NoMemory();
        st->nexplicit++;
        if (begin_txn(st, t->write, t->cached ? MOTE_TXN_CACHED : 0, &ts->txn) < 0) {
            st->nexplicit--;
            PyMem_Free(ts);
            return NULL;
        }
        ts->tid = PyThread_get_thread_ident();
        ts->write = t->write;
        ts->depth = 1;
        ts->serial = ++st->txn_serial;
        ts->next = st->txns;
        st->txns = ts;
        t->slot = ts;
    }
    t->tid = PyThread_get_thread_ident();
    t->state = 1;
    return Py_NewRef(self);
}

/* End an entered transaction; exc = 1 if its block raised. */
static int txn_finish(TxnObject *t, int exc)
{
    StoreObject *st = t->store;
    TxnSlot *ts = t->slot;
    t->state = 2;
    t->slot = NULL;
    ts->depth--;
    if (t->joined) {
        if (exc)
            ts->doomed = 1;
        return 0;
    }
    unlink_txn(st, ts);
    st->nexplicit--;
    if (ts->write && !exc && PyErr_CheckSignals() < 0)
        exc = 1; /* interrupted before the commit: roll back, raise (op_end) */
    int doomed = ts->doomed, rc;
    rc = end_txn(st, ts->txn, ts->write, ts->write && !exc && !doomed);
    PyMem_Free(ts);
    if (rc < 0)
        return -1;
    if (doomed && !exc && t->write) {
        PyErr_SetString(ST.Txn, "transaction rolled back: an operation or a nested block in "
                        "it failed");
        return -1;
    }
    return 0;
}

static PyObject *txn_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    TxnObject *t = (TxnObject *)self;
    if (t->state != 1) {
        PyErr_SetString(ST.Txn, t->state == 0 ? "transaction was not entered"
                                              : "transaction already ended");
        return NULL;
    }
    if (t->tid != PyThread_get_thread_ident()) {
        PyErr_SetString(ST.Txn, "a transaction must end on the thread that started it");
        return NULL;
    }
    if (t->slot->depth > 1 && !t->joined) {
        PyErr_SetString(ST.Txn, "transaction ended before the blocks nested in it");
        return NULL;
    }
    int exc = nargs > 0 && args[0] != Py_None;
    if (txn_finish(t, exc) < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static void txn_dealloc(PyObject *self)
{
    TxnObject *t = (TxnObject *)self;
    if (t->state == 1 && t->slot && t->store) { /* entered and dropped: roll back */
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *saved = PyErr_GetRaisedException();
#else
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
#endif
        if (t->joined || t->slot->depth <= 1) {
            if (txn_finish(t, 1) < 0)
                PyErr_Clear();
        }
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(saved);
#else
        PyErr_Restore(et, ev, tb);
#endif
    }
    Py_XDECREF(t->store);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *txn_get_active(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((TxnObject *)self)->state == 1);
}

static PyObject *txn_get_write(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((TxnObject *)self)->write);
}

static PyMethodDef txn_methods[] = {
    {"__enter__", txn_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))txn_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef txn_getset[] = {
    {"active", txn_get_active, NULL, "True inside the with block.", NULL},
    {"write", txn_get_write, NULL, "True for store.write().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Txn_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Transaction",
    .tp_basicsize = sizeof(TxnObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A transaction: use as a context manager (with store.write(): ...). Commits on "
              "success, rolls back on an exception; nested blocks join the outer one.",
    .tp_dealloc = txn_dealloc,
    .tp_methods = txn_methods,
    .tp_getset = txn_getset,
};

static PyObject *store_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    StoreObject *st = (StoreObject *)self;
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    return Py_NewRef(self);
}

static PyObject *store_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    PyObject *r = store_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *store_get_path(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((StoreObject *)self)->path);
}

static PyObject *store_get_closed(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((StoreObject *)self)->s == NULL);
}

/* store.commit: the id of the commit a read sees now (the thread's own
 * transaction's, inside one). */
static PyObject *store_get_commit(PyObject *self, void *closure)
{
    (void)closure;
    StoreObject *st = (StoreObject *)self;
    Op op;
    if (op_begin(st, 0, &op) < 0)
        return NULL;
    uint64_t id = mote_txn_id(op.ts->txn);
    if (op_end(st, &op, OP_NOCHANGE) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *store_get_ident(PyObject *self, void *closure)
{
    (void)closure;
    StoreObject *st = (StoreObject *)self;
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    uint64_t id = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_store_ident(st->s, &id);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_rc(rc);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *store_get_readonly(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((StoreObject *)self)->readonly);
}

static PyObject *store_get_in_txn(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(find_txn((StoreObject *)self) != NULL);
}

static PyObject *store_repr(PyObject *self)
{
    StoreObject *st = (StoreObject *)self;
    return PyUnicode_FromFormat("<motedb.Store %R%s>", st->path, st->s ? "" : " (closed)");
}

/* store.delta(path, since=0) -> int: mote_delta, the GIL released; counted
 * as a single operation, so close() waits for it. */
static PyObject *store_delta(PyObject *self, PyObject *args, PyObject *kw)
{
    StoreObject *st = (StoreObject *)self;
    static char *kwlist[] = {"path", "since", "sync", NULL};
    PyObject *path, *bpath = NULL;
    unsigned long long since = 0;
    int sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|K$p:delta", kwlist, &path, &since, &sync))
        return NULL;
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    if (find_txn(st)) {
        PyErr_SetString(ST.Txn, "delta() inside a transaction of this store: end it first");
        return NULL;
    }
    if (!PyUnicode_FSConverter(path, &bpath))
        return NULL;
    uint64_t to = 0;
    int rc;
    st->nimplicit++;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_delta(st->s, since, PyBytes_AS_STRING(bpath), sync ? 0 : MOTE_NOSYNC, &to);
    Py_END_ALLOW_THREADS
    st->nimplicit--;
    Py_DECREF(bpath);
    if (rc) {
        raise_rc(rc);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(to);
}

static PyMethodDef store_methods[] = {
    {"box", store_box, METH_O, "box(EntityClass) -> Box: the objects of one entity class. "
     "The first call for a class registers it in the store: a new entity with the first "
     "write that uses the box (or, before a read, in one commit with the other new ones), "
     "a changed one at once; on a new store neither costs a sync of its own. Inside "
     "store.write() it registers it in that transaction: other threads that use the box "
     "wait for it to end (up to the store's timeout), and if it rolls back the box reads "
     "empty until a write registers it."},
    {"_boxed_class", store_boxed_class, METH_O,
     "_boxed_class(name) -> the entity class whose box holds entity `name` here, or None."},
    {"drop_property", store_drop_property, METH_VARARGS,
     "drop_property(EntityClass or name, prop): remove a stored property's data from every "
     "object (the only way stored data goes; the class must not declare it)."},
    {"delta", (PyCFunction)(void (*)(void))store_delta, METH_VARARGS | METH_KEYWORDS,
     "delta(path, since=0, *, sync=True) -> int: write to `path` (which must not exist) "
     "what a copy of this store as of commit `since` lacks to be the store as of its "
     "latest commit, and return that commit (the latest durable one); since=0 gives a full "
     "copy. Reads a snapshot: writers and readers go on, and a read-only store makes "
     "deltas too. sync=False leaves the file unsynced (one to upload and delete). Apply "
     "with motedb.apply_delta."},
    {"write", store_write, METH_NOARGS, "A write transaction (context manager)."},
    {"read", (PyCFunction)(void (*)(void))store_read, METH_VARARGS | METH_KEYWORDS,
     "read(*, cached=False): a read transaction, a snapshot (context manager). cached=True: "
     "one that never waits for the disk; an operation in it that needs a page the store's "
     "cache does not hold raises WouldBlockError, having read nothing."},
    {"close", store_close, METH_NOARGS, "Close the store (idempotent)."},
    {"_defer_sync", store_defer_sync, METH_O,
     "_defer_sync(on): the calling thread's commits (single operations and write "
     "transactions) return without waiting for their sync until _wait_synced(), and "
     "other threads see them only then (motedb.aio's writer thread and MoteSaver's: "
     "many commits, one fdatasync). One thread per store; another gets BusyError."},
    {"_wait_synced", store_wait_synced, METH_NOARGS,
     "_wait_synced(): return once every commit deferred by _defer_sync is durable; raises "
     "the failure that poisoned the store if the sync failed."},
    {"__enter__", store_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))store_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"path", store_get_path, NULL, "The store file.", NULL},
    {"closed", store_get_closed, NULL, "True after close().", NULL},
    {"readonly", store_get_readonly, NULL, "True if opened read-only.", NULL},
    {"commit", store_get_commit, NULL,
     "The id of the store's latest durable commit, the one a read sees now (inside "
     "store.read(), the one it reads; inside store.write(), the id its commit will have). "
     "Grows with every commit of any process.",
     NULL},
    {"ident", store_get_ident, NULL,
     "The store's identity: a random 64-bit number given by its first write, kept by "
     "its copies (deltas), new in a compacted copy; 0 until the first write. Tells a "
     "store from another at the same path (motedb.replicate starts a new base).",
     NULL},
    {"in_transaction", store_get_in_txn, NULL,
     "True if the calling thread is inside store.write() / store.read().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Store_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Store(path, *, readonly=False, create=True, sync=True, timeout=5.0, "
              "exclusive=False, page_size=None, repack=False): one open store file.",
    .tp_new = store_new,
    .tp_dealloc = store_dealloc,
    .tp_traverse = store_traverse,
    .tp_clear = store_clear,
    .tp_repr = store_repr,
    .tp_methods = store_methods,
    .tp_getset = store_getset,
    .tp_weaklistoffset = offsetof(StoreObject, weakrefs),
};
