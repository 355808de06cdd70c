/*
 * state.c — the bottom of the _core extension: the module's state (ST: the
 * Python helpers, the exception classes, interned names), raising motedb's
 * exceptions from the C library's result codes, and the entity information
 * kept per entity class. Every other file of the extension reads ST; only
 * this file and _core.c (module init, _init) set it.
 */
#include "_core.h"

motedb_state ST;

const char *kind_expect[] = {
    "int", "bool", "int", "float", "str", "bytes", "aware datetime", "date",
    "Decimal or int", "dict", "list", "sequence of floats", "object or id", "list of objects"};

/* ---- errors ------------------------------------------------------------------- */

static PyObject *exc_for(int rc)
{
    switch (rc) {
    case MOTE_LOCKED: return ST.Locked;
    case MOTE_CORRUPT:
    case MOTE_FORMAT: return ST.Corrupt;
    case MOTE_SCHEMA: return ST.Schema;
    case MOTE_UNIQUE: return ST.Unique;
    case MOTE_NOTFOUND: return ST.NotFound;
    case MOTE_EXISTS: return ST.Exists;
    case MOTE_READONLY: return ST.ReadOnly;
    case MOTE_BUSY: return ST.Busy;
    case MOTE_FORKED: return ST.Forked;
    case MOTE_WOULDBLOCK: return ST.WouldBlock;
    case MOTE_RANGE: return PyExc_OverflowError;
    case MOTE_TYPE: return PyExc_TypeError;
    case MOTE_NOMEM: return PyExc_MemoryError;
    default: return ST.Error;
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
    PyObject *cls = err ? ST.FileSystem : exc_for(rc);
    PyObject *text = prefix ? PyUnicode_FromFormat("%s%s", prefix, msg)
                            : PyUnicode_FromString(msg);
    if (!text)
        return -1;
    if (PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)ST.Error)) {
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
            if (code && PyObject_SetAttr(exc, ST.str_code, code) == 0)
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
        PyMem_Free(in->f[i].json_path);
        Py_XDECREF(in->f[i].target);
        Py_XDECREF(in->f[i].memo);
        Py_XDECREF(in->f[i].put_dec);
        Py_XDECREF(in->f[i].put_text);
    }
    Py_XDECREF(in->name);
    PyMem_Free(in->f);
    PyMem_Free(in->defs);
    PyMem_Free(in->visit);
    PyMem_Free(in);
}

/* ---- exception classes ------------------------------------------------------------ */

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

/* The exception classes, as attributes of module m. 0 or -1. */
int state_exceptions(PyObject *m)
{
    if (!(ST.Error = new_exc(m, "Error", PyExc_Exception,
                            "Base of MoteDB's errors; `code` is the MOTE_* result code.")) ||
        !(ST.Locked = new_exc(m, "StoreLockedError", ST.Error,
                             "The store is open exclusively in another process.")) ||
        !(ST.Corrupt = new_exc(m, "CorruptError", ST.Error,
                              "The store file is damaged or not a MoteDB file.")) ||
        !(ST.Schema = new_exc(m, "SchemaError", ST.Error,
                             "The entity class does not match the stored schema.")) ||
        !(ST.Unique = new_exc(m, "UniqueViolationError", ST.Error,
                             "A unique property already holds the value.")) ||
        !(ST.Closed = new_exc(m, "ClosedError", ST.Error, "The store is closed.")) ||
        !(ST.NotFound = new_exc(m, "NotFoundError", ST.Error,
                               "No object with that id (put with mode='update').")) ||
        !(ST.Exists = new_exc(m, "ExistsError", ST.Error,
                             "An object with that id exists (put with mode='insert').")) ||
        !(ST.ReadOnly = new_exc(m, "ReadOnlyError", ST.Error,
                               "A write on a read-only store.")) ||
        !(ST.Busy = new_exc(m, "BusyError", ST.Error,
                           "The store is in use: open in this process already, or "
                           "transactions are open.")) ||
        !(ST.Txn = new_exc(m, "TransactionError", ST.Error,
                          "A transaction used wrongly: after its end, a write inside "
                          "store.read(), or rolled back because a nested block failed.")) ||
        !(ST.Forked = new_exc(m, "ForkedError", ST.Error,
                             "The store was opened in the parent of this process (before a "
                             "fork): open it again in this process.")) ||
        !(ST.WouldBlock = new_exc(m, "WouldBlockError", ST.Error,
                                 "An operation in store.read(cached=True) needs a page that "
                                 "is not in the store's cache (it read nothing): run it "
                                 "outside such a transaction, where it may wait for the "
                                 "disk.")))
        return -1;
    PyObject *fs_bases = PyTuple_Pack(2, ST.Error, PyExc_OSError);
    if (!fs_bases)
        return -1;
    ST.FileSystem = new_exc(m, "FileSystemError", fs_bases,
                           "The operating system refused an operation on the store file "
                           "(missing directory or file, permission, read-only file system, "
                           "disk full, I/O error): an OSError too, with errno, strerror "
                           "(the message) and filename.");
    Py_DECREF(fs_bases);
    if (!ST.FileSystem)
        return -1;
    PyObject *str = PyDescr_NewMethod((PyTypeObject *)ST.FileSystem, &fserr_str_def);
    int bad = !str || PyObject_SetAttrString(ST.FileSystem, "__str__", str) < 0;
    Py_XDECREF(str);
    if (bad)
        return -1;
    return 0;
}
