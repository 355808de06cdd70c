/*
 * _core.c — the CPython extension of motedb: entity classes, marshalling
 * between Python objects and records (all in C, no per-field Python loop),
 * stores, transactions, boxes and queries, on the C API of mote.h.
 *
 * ENTITY CLASSES. `class Note(motedb.Entity)` goes through the metatype
 * EntityMeta (a subclass of `type` with one extra C field, the EntityInfo):
 * motedb/_schema.py turns the annotations into field specs and __slots__;
 * here each slot's member descriptor is replaced by a Property (a data
 * descriptor on the same slot offset that also builds query conditions), and
 * the per-class property list (interned names, kinds, offsets, C property
 * definitions) is cached in the EntityInfo. Reading objects allocates the
 * instance through its type and stores the field values straight into the
 * slots.
 *
 * TRANSACTIONS. Each store keeps the list of transactions in progress, one
 * per thread at most (TxnSlot). An operation joins the calling thread's
 * transaction if it has one, else it runs in an implicit single-operation
 * transaction (writes: one durable commit). Everything here runs with the GIL
 * held, which also serialises the calls that the C API does not make thread
 * safe (mote_entity_open); the GIL is released around calls that may block or
 * take long and touch no Python object: mote_open, mote_close, beginning a
 * write transaction (waits for another writer), mote_commit (fdatasync),
 * mote_put_many, and running queries (mote_query_ids/count/remove).
 *
 * FILES. This file: the module, errors, entity info. values.c: Python values
 * <-> mote_value. entity.c: the metatype, Entity, Property, Order and
 * Condition. store.c: Store, transactions, per-operation transactions (Op).
 * box.c: Box. query.c: Query. _core.h: what they share.
 */
#include "_core.h"

const char *kind_expect[] = {
    "int", "bool", "int", "float", "str", "bytes", "aware datetime", "date",
    "Decimal or int", "dict", "list", "sequence of floats", "object or id", "list of objects"};

/* ---- module globals --------------------------------------------------------- */

PyObject *g_prepare, *g_Decimal, *g_dumps, *g_loads, *g_scan, *g_missing, *g_rel_get,
    *g_rel_set, *g_after_put;
PyObject *E_Error, *E_Locked, *E_Corrupt, *E_Schema, *E_Unique, *E_Closed,
    *E_NotFound, *E_Exists, *E_ReadOnly, *E_Busy, *E_Txn, *E_FileSystem;
PyObject *s_id, *s_utcoffset, *s_code;

/* ---- errors ------------------------------------------------------------------- */

static PyObject *exc_for(int rc)
{
    switch (rc) {
    case MOTE_LOCKED: return E_Locked;
    case MOTE_CORRUPT:
    case MOTE_FORMAT: return E_Corrupt;
    case MOTE_SCHEMA: return E_Schema;
    case MOTE_UNIQUE: return E_Unique;
    case MOTE_NOTFOUND: return E_NotFound;
    case MOTE_EXISTS: return E_Exists;
    case MOTE_READONLY: return E_ReadOnly;
    case MOTE_BUSY: return E_Busy;
    case MOTE_RANGE: return PyExc_OverflowError;
    case MOTE_TYPE: return PyExc_TypeError;
    case MOTE_NOMEM: return PyExc_MemoryError;
    default: return E_Error;
    }
}

/* Raise the exception of result code rc with `msg` (or the library's last
 * message), optionally prefixed. When the failure came from the operating
 * system (`os`: the caller knows that mote_last_oserror describes this
 * failure), the exception is a FileSystemError, an OSError too: errno,
 * strerror (the message) and filename (the file the operation was on).
 * Returns -1. */
static int raise_exc(int rc, const char *prefix, const char *msg, int os)
{
    if (!msg || !*msg)
        msg = mote_errmsg(NULL);
    if (!msg || !*msg)
        msg = mote_strerror(rc);
    const char *file = NULL;
    int err = os ? mote_last_oserror(&file) : 0;
    PyObject *cls = err ? E_FileSystem : exc_for(rc);
    PyObject *text = prefix ? PyUnicode_FromFormat("%s%s", prefix, msg)
                            : PyUnicode_FromString(msg);
    if (!text)
        return -1;
    if (PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)E_Error)) {
        PyObject *exc;
        if (err) {
            PyObject *fn = file ? PyUnicode_DecodeFSDefault(file) : Py_NewRef(Py_None);
            exc = fn ? PyObject_CallFunction(cls, "iOO", err, text, fn) : NULL;
            Py_XDECREF(fn);
        } else {
            exc = PyObject_CallOneArg(cls, text);
        }
        if (exc) {
            PyObject *code = PyLong_FromLong(rc);
            if (code && PyObject_SetAttr(exc, s_code, code) == 0)
                PyErr_SetObject(cls, exc);
            Py_XDECREF(code);
            Py_DECREF(exc);
        }
    } else {
        PyErr_SetObject(cls, text);
    }
    Py_DECREF(text);
    return -1;
}

/* The library's calls return MOTE_IO and MOTE_NOSPACE only for failures of
 * the operating system, and MOTE_POISONED with the OS cause on the commit
 * whose write or sync failed (and without one after that). Other codes may
 * find an older failure's message and OS error still in place (a
 * MOTE_NOTFOUND answer sets none), so they are never taken for OS errors. */
int raise_code(int rc, const char *prefix, const char *msg)
{
    return raise_exc(rc, prefix, msg,
                     rc == MOTE_IO || rc == MOTE_NOSPACE || rc == MOTE_POISONED);
}

/* A failed mote_open sets the message and the OS error (or clears it) on
 * every path, so any code may be an OS error: MOTE_NOTFOUND is ENOENT for a
 * missing store file. */
int raise_open_error(int rc) { return raise_exc(rc, NULL, mote_last_open_error(), 1); }

int raise_rc(int rc) { return raise_code(rc, NULL, NULL); }

/* ---- entity info ------------------------------------------------------------- */

EntityInfo *info_of_type(PyTypeObject *tp)
{
    if (!PyObject_TypeCheck((PyObject *)tp, &EntityMeta_Type))
        return NULL;
    return ((EntityTypeObject *)tp)->info;
}

void info_free(EntityInfo *in)
{
    if (!in)
        return;
    for (Py_ssize_t i = 0; i < in->nf; i++) {
        Py_XDECREF(in->f[i].name);
        Py_XDECREF(in->f[i].dflt);
        Py_XDECREF(in->f[i].factory);
        PyMem_Free(in->f[i].renamed);
        Py_XDECREF(in->f[i].target);
    }
    Py_XDECREF(in->name);
    PyMem_Free(in->f);
    PyMem_Free(in->defs);
    PyMem_Free(in);
}

/* ---- module --------------------------------------------------------------------------------- */

static PyObject *mod_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    static char *kwlist[] = {"prepare", "Decimal", "dumps", "loads", "missing", "rel_get",
                             "rel_set", "after_put", "scan", NULL};
    PyObject *prepare, *dec, *dumps, *loads, *missing, *rel_get, *rel_set, *after_put,
        *scan = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO|O", kwlist, &prepare, &dec, &dumps,
                                     &loads, &missing, &rel_get, &rel_set, &after_put, &scan))
        return NULL;
    Py_XSETREF(g_scan, scan == Py_None ? NULL : Py_NewRef(scan));
    Py_XSETREF(g_rel_get, Py_NewRef(rel_get));
    Py_XSETREF(g_rel_set, Py_NewRef(rel_set));
    Py_XSETREF(g_after_put, Py_NewRef(after_put));
    Py_XSETREF(g_prepare, Py_NewRef(prepare));
    Py_XSETREF(g_Decimal, Py_NewRef(dec));
    Py_XSETREF(g_dumps, Py_NewRef(dumps));
    Py_XSETREF(g_loads, Py_NewRef(loads));
    Py_XSETREF(g_missing, Py_NewRef(missing));
    Py_RETURN_NONE;
}

/* For the tests: the JSON text a put stores for v (bytes from the C
 * writer, or str from json's encoder where the C writer does not cover v). */
static PyObject *mod_json_text(PyObject *self, PyObject *v)
{
    (void)self;
    return json_text(v);
}

/* For the tests: JSON text (bytes) read as a get reads a JSON property. */
static PyObject *mod_json_value(PyObject *self, PyObject *b)
{
    (void)self;
    if (!PyBytes_Check(b))
        return PyErr_Format(PyExc_TypeError, "expected bytes");
    return json_value(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
}

static PyMethodDef module_methods[] = {
    {"_init", (PyCFunction)(void (*)(void))mod_init, METH_VARARGS | METH_KEYWORDS,
     "Set the Python helpers (called by motedb/__init__.py)."},
    {"_json_value", mod_json_value, METH_O,
     "JSON text (bytes) read as a get reads a JSON property."},
    {"_json_text", mod_json_text, METH_O,
     "The JSON text a put stores for a value (bytes: written in C; str: by json)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "motedb._core", "MoteDB's C core.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

/* FileSystemError.__str__: OSError's "[Errno N] text", without OSError's
 * ": 'filename'" suffix, since the text names the file already. */
static PyObject *fserr_str(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *no = PyObject_GetAttrString(self, "errno"), *text = NULL, *r = NULL;
    if (no && (text = PyObject_GetAttrString(self, "strerror"))) {
        if (no != Py_None && text != Py_None)
            r = PyUnicode_FromFormat("[Errno %S] %S", no, text);
        else
            r = ((PyTypeObject *)PyExc_OSError)->tp_str(self);
    }
    Py_XDECREF(no);
    Py_XDECREF(text);
    return r;
}

static PyMethodDef fserr_str_def = {"__str__", fserr_str, METH_NOARGS, NULL};

static PyObject *new_exc(PyObject *m, const char *name, PyObject *base, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "motedb.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
    if (!e || PyModule_AddObjectRef(m, name, e) < 0) {
        Py_XDECREF(e);
        return NULL;
    }
    return e;
}

PyMODINIT_FUNC PyInit__core(void)
{
    if (values_init() < 0)
        return NULL;
    EntityMeta_Type.tp_base = &PyType_Type;
    PyTypeObject *types[] = {&EntityMeta_Type, &EntityBase_Type, &Property_Type, &Cond_Type,
                             &Order_Type, &Store_Type, &Box_Type, &Query_Type, &Txn_Type,
                             &QueryIter_Type};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "version", MOTE_VERSION_STRING) < 0)
        goto fail;
    if (!(s_id = PyUnicode_InternFromString("id")) ||
        !(s_utcoffset = PyUnicode_InternFromString("utcoffset")) ||
        !(s_code = PyUnicode_InternFromString("code")))
        goto fail;
    const char *names[] = {"EntityMeta", "EntityBase", "Property", "Condition", "Order",
                           "Store", "Box", "Query", "Transaction", "QueryIterator"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    if (!(E_Error = new_exc(m, "Error", PyExc_Exception,
                            "Base of MoteDB's errors; `code` is the MOTE_* result code.")) ||
        !(E_Locked = new_exc(m, "StoreLockedError", E_Error,
                             "The store is open for writing in another process.")) ||
        !(E_Corrupt = new_exc(m, "CorruptError", E_Error,
                              "The store file is damaged or not a MoteDB file.")) ||
        !(E_Schema = new_exc(m, "SchemaError", E_Error,
                             "The entity class does not match the stored schema.")) ||
        !(E_Unique = new_exc(m, "UniqueViolationError", E_Error,
                             "A unique property already holds the value.")) ||
        !(E_Closed = new_exc(m, "ClosedError", E_Error, "The store is closed.")) ||
        !(E_NotFound = new_exc(m, "NotFoundError", E_Error,
                               "No object with that id (put with mode='update').")) ||
        !(E_Exists = new_exc(m, "ExistsError", E_Error,
                             "An object with that id exists (put with mode='insert').")) ||
        !(E_ReadOnly = new_exc(m, "ReadOnlyError", E_Error,
                               "A write on a read-only store.")) ||
        !(E_Busy = new_exc(m, "BusyError", E_Error,
                           "The store is in use: open in this process already, or "
                           "transactions are open.")) ||
        !(E_Txn = new_exc(m, "TransactionError", E_Error,
                          "A transaction used wrongly: after its end, a write inside "
                          "store.read(), or rolled back because a nested block failed.")))
        goto fail;
    PyObject *fs_bases = PyTuple_Pack(2, E_Error, PyExc_OSError);
    if (!fs_bases)
        goto fail;
    E_FileSystem = new_exc(m, "FileSystemError", fs_bases,
                           "The operating system refused an operation on the store file "
                           "(missing directory or file, permission, read-only file system, "
                           "disk full, I/O error): an OSError too, with errno, strerror "
                           "(the message) and filename.");
    Py_DECREF(fs_bases);
    if (!E_FileSystem)
        goto fail;
    PyObject *str = PyDescr_NewMethod((PyTypeObject *)E_FileSystem, &fserr_str_def);
    int bad = !str || PyObject_SetAttrString(E_FileSystem, "__str__", str) < 0;
    Py_XDECREF(str);
    if (bad)
        goto fail;
    /* motedb.Entity: the root entity class (no properties) */
    PyObject *ns = Py_BuildValue("{s:O,s:s,s:s}", "__motedb_root__", Py_True, "__module__", "motedb",
                                 "__doc__", "Base class of entity classes: declare the "
                                 "properties as annotated class attributes.");
    if (!ns)
        goto fail;
    PyObject *empty = PyTuple_New(0);
    if (!empty || PyDict_SetItemString(ns, "__slots__", empty) < 0) {
        Py_XDECREF(empty);
        Py_DECREF(ns);
        goto fail;
    }
    Py_DECREF(empty);
    PyObject *entity = PyObject_CallFunction((PyObject *)&EntityMeta_Type, "s(O)O", "Entity",
                                             (PyObject *)&EntityBase_Type, ns);
    Py_DECREF(ns);
    if (!entity || PyModule_AddObject(m, "Entity", entity) < 0) {
        Py_XDECREF(entity);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
