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
 * FILES. This file: the module (init, _init, the test hooks). state.c: the
 * module's state (ST), errors, entity info. values.c: Python values <->
 * mote_value. json.c: JSON properties. entity.c: the metatype, Entity,
 * Property, Order and Condition. store.c: Store, transactions,
 * per-operation transactions (Op). box.c: Box. query.c: Query. _core.h: what
 * they share.
 */
#include "_core.h"

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
    Py_XSETREF(ST.scan, scan == Py_None ? NULL : Py_NewRef(scan));
    Py_XSETREF(ST.rel_get, Py_NewRef(rel_get));
    Py_XSETREF(ST.rel_set, Py_NewRef(rel_set));
    Py_XSETREF(ST.after_put, Py_NewRef(after_put));
    Py_XSETREF(ST.prepare, Py_NewRef(prepare));
    Py_XSETREF(ST.Decimal, Py_NewRef(dec));
    Py_XSETREF(ST.dumps, Py_NewRef(dumps));
    Py_XSETREF(ST.loads, Py_NewRef(loads));
    Py_XSETREF(ST.missing, Py_NewRef(missing));
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

/* motedb.tokenize: the tokens full-text search makes of a text. */
static int append_token(void *ctx, const char *token, size_t len, uint32_t pos, size_t start,
                        size_t end)
{
    (void)pos, (void)start, (void)end;
    PyObject *t = PyUnicode_DecodeUTF8(token, (Py_ssize_t)len, "strict");
    if (!t)
        return MOTE_NOMEM; /* not reached: tokens are valid UTF-8 */
    int rc = PyList_Append((PyObject *)ctx, t);
    Py_DECREF(t);
    return rc ? MOTE_NOMEM : 0;
}

static PyObject *mod_tokenize(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    static char *kwlist[] = {"text", "keep_diacritics", "stem", NULL};
    PyObject *text;
    int keep = 0, stem = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U|$pp:tokenize", kwlist, &text, &keep, &stem))
        return NULL;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (!s)
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    unsigned flags = (keep ? MOTE_TOKEN_KEEP_DIACRITICS : 0u) | (stem ? MOTE_TOKEN_STEM : 0u);
    int rc = mote_tokenize(s, (size_t)n, flags, append_token, out);
    if (rc) {
        Py_DECREF(out);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, mote_strerror(rc));
        return NULL;
    }
    return out;
}

/* The ends of the content-defined chunks of a bytes-like object (mote_chunk). */
static PyObject *mod_chunk_ends(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b;
    Py_ssize_t min, max;
    unsigned bits;
    if (!PyArg_ParseTuple(args, "y*nnI:_chunk_ends", &b, &min, &max, &bits))
        return NULL;
    PyObject *out = NULL;
    if (min < 1 || max < min || bits < 1 || bits > 63) {
        PyErr_SetString(PyExc_ValueError, "_chunk_ends: need 1 <= min <= max and 1 <= bits <= 63");
        goto done;
    }
    if (!(out = PyList_New(0)))
        goto done;
    for (size_t at = 0, n = (size_t)b.len; at < n;) {
        at += mote_chunk((const char *)b.buf + at, n - at, (size_t)min, (size_t)max, bits);
        PyObject *end = PyLong_FromSize_t(at);
        if (!end || PyList_Append(out, end)) {
            Py_XDECREF(end);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(end);
    }
done:
    PyBuffer_Release(&b);
    return out;
}

/* A full delta read as it comes from a Python binary stream (its
 * readinto), for mote_delta_apply_from, which runs with the GIL released:
 * each read takes the GIL back for the call. The stream's own exception,
 * the first, is kept and raised as it was. */
typedef struct pyreader {
    PyObject *stream;
    PyThreadState *ts;
    PyObject *type, *value, *tb; /* the stream's exception */
} pyreader;

static long long pyreader_read(void *ctx, void *buf, size_t n)
{
    pyreader *r = ctx;
    PyEval_RestoreThread(r->ts);
    long long got = -EIO;
    /* (a view of the C buffer for the call, dropped after it, as CPython's
     * own buffered reader does) */
    PyObject *view = PyMemoryView_FromMemory(buf, n > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX
                                                                      : (Py_ssize_t)n, PyBUF_WRITE);
    PyObject *res = view ? PyObject_CallMethod(r->stream, "readinto", "O", view) : NULL;
    if (res == Py_None)
        PyErr_SetString(PyExc_ValueError, "apply_delta: the stream's readinto returned None "
                        "(a non-blocking stream): give it a blocking one");
    else if (res) {
        Py_ssize_t k = PyLong_AsSsize_t(res);
        if (k >= 0 && (size_t)k <= n)
            got = k;
        else if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "apply_delta: the stream's readinto returned %zd "
                         "for a buffer of %zu bytes", k, n);
    }
    Py_XDECREF(res);
    Py_XDECREF(view);
    if (got < 0 && !r->type)
        PyErr_Fetch(&r->type, &r->value, &r->tb);
    PyErr_Clear();
    r->ts = PyEval_SaveThread();
    return got;
}

/* apply_delta(copy, delta): mote_delta_apply (or, from a stream,
 * mote_delta_apply_from), the GIL released. */
static PyObject *mod_apply_delta(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"copy", "delta", "sync", NULL};
    PyObject *copy, *delta, *bc = NULL, *bd = NULL;
    int sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$p:apply_delta", kwlist, &copy, &delta, &sync))
        return NULL;
    int stream = !PyUnicode_Check(delta) && !PyBytes_Check(delta) &&
                 PyObject_HasAttrString(delta, "readinto");
    if (!PyUnicode_FSConverter(copy, &bc) || (!stream && !PyUnicode_FSConverter(delta, &bd))) {
        Py_XDECREF(bc);
        return NULL;
    }
    int rc;
    mote_options o = {sync ? 0u : MOTE_NOSYNC, 0, 0, NULL};
    pyreader r = {delta, NULL, NULL, NULL, NULL};
    if (stream) {
        r.ts = PyEval_SaveThread();
        rc = mote_delta_apply_from(PyBytes_AS_STRING(bc), pyreader_read, &r, &o);
        PyEval_RestoreThread(r.ts);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = mote_delta_apply(PyBytes_AS_STRING(bc), PyBytes_AS_STRING(bd), &o);
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(bc);
    Py_XDECREF(bd);
    if (r.type) { /* the stream failed: its error, not the read's MOTE_IO */
        PyErr_Restore(r.type, r.value, r.tb);
        return NULL;
    }
    if (rc) {
        raise_rc(rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"apply_delta", (PyCFunction)(void (*)(void))mod_apply_delta, METH_VARARGS | METH_KEYWORDS,
     "apply_delta(copy, delta, *, sync=True) -> None\n\n"
     "Put the delta file `delta` (made by Store.delta) into the copy at `copy`: a full\n"
     "delta (since=0) makes a new copy (ExistsError if the file exists); any other needs\n"
     "a copy at exactly the delta's `since` commit. A damaged or cut short delta raises\n"
     "CorruptError and writes nothing. The copy must not be open anywhere meanwhile.\n"
     "sync=False syncs nothing: for a file of your own that you sync once at the end\n"
     "(a crash may leave it at another commit). `delta` may also be a binary stream (an\n"
     "object with readinto, read to its end) of a full delta, applied as it comes: no\n"
     "delta file; a damaged or cut short one leaves no copy, and an error of the stream's\n"
     "is raised as it is. A delta from a commit needs a file (motedb.Error otherwise):\n"
     "it is checked whole before the copy is touched."},
    {"_chunk_ends", mod_chunk_ends, METH_VARARGS,
     "_chunk_ends(data, min, max, bits) -> list[int]\n\n"
     "The end offsets of data's content-defined chunks (mote.h, mote_chunk)."},
    {"tokenize", (PyCFunction)(void (*)(void))mod_tokenize, METH_VARARGS | METH_KEYWORDS,
     "tokenize(text, *, keep_diacritics=False, stem=False) -> list[str]\n\n"
     "The tokens full-text search makes of text, in order: runs of letters, digits\n"
     "and marks, case folded, Latin and Greek letters without their diacritics\n"
     "unless keep_diacritics; each Han, Hiragana and Katakana character a token of\n"
     "its own; tokens cut to 255 UTF-8 bytes (mote.h, \"Full-text tokens\"). With\n"
     "stem, each token of 3 to 64 bytes then stemmed as English by the Porter\n"
     "algorithm, as SQLite FTS5's porter tokenizer does (\"connections\": \"connect\")."},
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
/* The field kinds (_core.h) and the C API's property types and flags
 * (mote.h) as module constants: _schema.py builds its specs from these. */
static int add_constants(PyObject *m)
{
#define C(name, value) {name, value}
    static const struct {
        const char *name;
        long value;
    } consts[] = {
        C("K_ID", K_ID), C("K_BOOL", K_BOOL), C("K_INT", K_INT), C("K_FLOAT", K_FLOAT),
        C("K_STR", K_STR), C("K_BYTES", K_BYTES), C("K_DATETIME", K_DATETIME),
        C("K_DATE", K_DATE), C("K_DECIMAL", K_DECIMAL), C("K_DICT", K_DICT),
        C("K_LIST", K_LIST), C("K_VECTOR", K_VECTOR), C("K_TOONE", K_TOONE),
        C("K_TOMANY", K_TOMANY),
        C("T_BOOL", MOTE_T_BOOL), C("T_INT8", MOTE_T_INT8), C("T_INT16", MOTE_T_INT16),
        C("T_INT32", MOTE_T_INT32), C("T_INT64", MOTE_T_INT64),
        C("T_FLOAT32", MOTE_T_FLOAT32), C("T_FLOAT64", MOTE_T_FLOAT64),
        C("T_STRING", MOTE_T_STRING), C("T_BYTES", MOTE_T_BYTES),
        C("T_TIMESTAMP", MOTE_T_TIMESTAMP), C("T_DATE", MOTE_T_DATE),
        C("T_DECIMAL", MOTE_T_DECIMAL), C("T_JSON", MOTE_T_JSON), C("T_VECTOR", MOTE_T_VECTOR),
        C("T_TOONE", MOTE_T_TOONE), C("T_TOMANY", MOTE_T_TOMANY),
        C("P_NULLABLE", MOTE_P_NULLABLE), C("P_INDEXED", MOTE_P_INDEXED),
        C("P_UNIQUE", MOTE_P_UNIQUE), C("P_HNSW", MOTE_P_HNSW), C("P_FULLTEXT", MOTE_P_FULLTEXT), C("P_STEM", MOTE_P_STEM),
        C("P_EXPIRES", MOTE_P_EXPIRES),
    };
#undef C
    for (size_t i = 0; i < sizeof consts / sizeof *consts; i++)
        if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
            return -1;
    return 0;
}

PyMODINIT_FUNC PyInit__core(void)
{
    if (values_init() < 0)
        return NULL;
    EntityMeta_Type.tp_base = &PyType_Type;
    PyTypeObject *types[] = {&EntityMeta_Type, &EntityBase_Type, &Property_Type, &Cond_Type,
                             &Order_Type, &Store_Type, &Box_Type, &Query_Type, &Txn_Type,
                             &QueryIter_Type, &JsonPath_Type};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "version", MOTE_VERSION_STRING) < 0 ||
        add_constants(m) < 0)
        goto fail;
    if (!(ST.str_id = PyUnicode_InternFromString("id")) ||
        !(ST.str_utcoffset = PyUnicode_InternFromString("utcoffset")) ||
        !(ST.str_code = PyUnicode_InternFromString("code")))
        goto fail;
    const char *names[] = {"EntityMeta", "EntityBase", "Property", "Condition", "Order",
                           "Store", "Box", "Query", "Transaction", "QueryIterator",
                           "JsonPath"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    if (state_exceptions(m) < 0)
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
