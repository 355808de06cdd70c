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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
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

static const char *kind_expect[] = {
    "int", "bool", "int", "float", "str", "bytes", "aware datetime", "date",
    "Decimal or int", "dict", "list", "sequence of floats", "object or id", "list of objects"};

/* ---- module globals --------------------------------------------------------- */

static PyObject *g_prepare, *g_Decimal, *g_dumps, *g_loads, *g_missing, *g_rel_get, *g_rel_set,
    *g_after_put;
static PyObject *E_Error, *E_Locked, *E_Corrupt, *E_Schema, *E_Unique, *E_Closed,
    *E_NotFound, *E_Exists, *E_ReadOnly, *E_Busy, *E_Txn;
static PyObject *s_id, *s_utcoffset, *s_code;

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
 * message), optionally prefixed. Returns -1. */
static int raise_code(int rc, const char *prefix, const char *msg)
{
    if (!msg || !*msg)
        msg = mote_errmsg(NULL);
    if (!msg || !*msg)
        msg = mote_strerror(rc);
    PyObject *cls = exc_for(rc);
    PyObject *text = prefix ? PyUnicode_FromFormat("%s%s", prefix, msg)
                            : PyUnicode_FromString(msg);
    if (!text)
        return -1;
    if (PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)E_Error)) {
        PyObject *exc = PyObject_CallOneArg(cls, text);
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

static int raise_rc(int rc) { return raise_code(rc, NULL, NULL); }

/* ---- entity info ------------------------------------------------------------- */

typedef struct FieldInfo {
    PyObject *name;      /* interned attribute name */
    PyObject *dflt;      /* default value, NULL if none */
    PyObject *factory;   /* default factory, NULL if none */
    Py_ssize_t offset;   /* slot offset in instances */
    int kind, mtype;
    unsigned flags, dim;
    int64_t imin, imax;  /* integer range of the property type */
    const char *cname;   /* UTF-8 of name (owned by name) */
    char *renamed;       /* renamed_from, PyMem, or NULL */
    PyObject *target;    /* relations: the target entity name (str), else NULL */
} FieldInfo;

typedef struct EntityInfo {
    PyObject *name;      /* the entity name (class __name__) */
    const char *cname;
    Py_ssize_t nf;       /* properties (without the id) */
    FieldInfo *f;
    Py_ssize_t id_off;   /* slot offset of the id */
    Py_ssize_t store_off; /* slot of the store an object was loaded from / put to; -1: none */
    int has_tomany;      /* relations: call g_after_put after a put */
    mote_prop_def *defs;
} EntityInfo;

typedef struct {
    PyHeapTypeObject ht;
    EntityInfo *info;
} EntityTypeObject;

static PyTypeObject EntityMeta_Type, EntityBase_Type, Property_Type, Cond_Type, Order_Type,
    Store_Type, Box_Type, Query_Type, Txn_Type;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static EntityInfo *info_of_type(PyTypeObject *tp)
{
    if (!PyObject_TypeCheck((PyObject *)tp, &EntityMeta_Type))
        return NULL;
    return ((EntityTypeObject *)tp)->info;
}

static void info_free(EntityInfo *in)
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

/* ---- Property: the descriptor of one field, and the start of conditions ------- */

typedef struct {
    PyObject_HEAD
    PyTypeObject *owner;  /* the entity class */
    PyObject *name;
    Py_ssize_t index;     /* field index; -1 = the id */
    Py_ssize_t offset;
} PropertyObject;

static FieldInfo *prop_field(PropertyObject *p)
{
    EntityInfo *in = info_of_type(p->owner);
    return in && p->index >= 0 && p->index < in->nf ? &in->f[p->index] : NULL;
}

static const char *prop_entity(PropertyObject *p)
{
    EntityInfo *in = info_of_type(p->owner);
    return in ? in->cname : "?";
}

static PyObject *prop_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    PropertyObject *p = (PropertyObject *)self;
    if (!obj || obj == Py_None)
        return Py_NewRef(self);
    if (!PyObject_TypeCheck(obj, p->owner)) {
        PyErr_Format(PyExc_TypeError, "property %s.%U used on a %.100s object",
                     prop_entity(p), p->name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *v = SLOT(obj, p->offset);
    if (!v) {
        PyErr_Format(PyExc_AttributeError, "%s.%U is not set", prop_entity(p), p->name);
        return NULL;
    }
    FieldInfo *f = prop_field(p);
    if (f && f->target) /* relations: lazy loading (motedb/_relations.py) */
        return PyObject_CallFunctionObjArgs(g_rel_get, self, obj, v, NULL);
    return Py_NewRef(v);
}

static int prop_set(PyObject *self, PyObject *obj, PyObject *value)
{
    PropertyObject *p = (PropertyObject *)self;
    if (!PyObject_TypeCheck(obj, p->owner)) {
        PyErr_Format(PyExc_TypeError, "property %s.%U used on a %.100s object",
                     prop_entity(p), p->name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject **slot = &SLOT(obj, p->offset);
    if (!value && !*slot) {
        PyErr_Format(PyExc_AttributeError, "%s.%U is not set", prop_entity(p), p->name);
        return -1;
    }
    FieldInfo *f = prop_field(p);
    if (value && f && f->target) { /* relations: check (motedb/_relations.py) */
        PyObject *v = PyObject_CallFunctionObjArgs(g_rel_set, self, obj, value, NULL);
        if (!v)
            return -1;
        Py_XSETREF(*slot, v);
        return 0;
    }
    Py_XSETREF(*slot, Py_XNewRef(value));
    return 0;
}

static int prop_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((PropertyObject *)self)->owner);
    return 0;
}

static int prop_clear(PyObject *self)
{
    Py_CLEAR(((PropertyObject *)self)->owner);
    return 0;
}

static void prop_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    prop_clear(self);
    Py_XDECREF(((PropertyObject *)self)->name);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *prop_repr(PyObject *self)
{
    PropertyObject *p = (PropertyObject *)self;
    return PyUnicode_FromFormat("%s.%U", prop_entity(p), p->name);
}

static Py_hash_t prop_hash(PyObject *self) { return (Py_hash_t)((uintptr_t)self >> 4); }

/* ---- values: Python -> mote_value -------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* A short repr of v for messages. New reference (never NULL unless no memory). */
static PyObject *short_repr(PyObject *v)
{
    PyObject *r = PyObject_Repr(v);
    if (!r) {
        PyErr_Clear();
        return PyUnicode_FromString("<unrepresentable>");
    }
    if (PyUnicode_GET_LENGTH(r) > 80) {
        PyObject *cut = PyUnicode_Substring(r, 0, 77);
        Py_DECREF(r);
        if (!cut)
            return NULL;
        r = PyUnicode_FromFormat("%U...", cut);
        Py_DECREF(cut);
    }
    return r;
}

static int wrong_type(const char *ent, const FieldInfo *f, PyObject *v)
{
    PyObject *r = short_repr(v);
    if (!r)
        return -1;
    PyErr_Format(PyExc_TypeError, "%s.%s: expected %s, got %.100s %U", ent, f->cname,
                 kind_expect[f->kind], Py_TYPE(v)->tp_name, r);
    Py_DECREF(r);
    return -1;
}

static const char *mtype_name(int t)
{
    switch (t) {
    case MOTE_T_INT8: return "Int8";
    case MOTE_T_INT16: return "Int16";
    case MOTE_T_INT32: return "Int32";
    case MOTE_T_INT64: return "int64";
    case MOTE_T_FLOAT32: return "Float32";
    default: return "this type";
    }
}

static int out_of_range(const char *ent, const FieldInfo *f, PyObject *v)
{
    PyObject *r = short_repr(v);
    if (!r)
        return -1;
    if (f->kind == K_INT)
        PyErr_Format(PyExc_OverflowError, "%s.%s: %U is out of range for %s (%lld..%lld)", ent,
                     f->cname, r, mtype_name(f->mtype), (long long)f->imin, (long long)f->imax);
    else
        PyErr_Format(PyExc_OverflowError, "%s.%s: %U is out of range for %s", ent, f->cname, r,
                     f->kind == K_DATETIME ? "a nanosecond timestamp (years 1677..2262)"
                                           : mtype_name(f->mtype));
    Py_DECREF(r);
    return -1;
}

static int dt_to_ns(const char *ent, const FieldInfo *f, PyObject *v, int64_t *out)
{
    PyObject *tz = PyDateTime_DATE_GET_TZINFO(v);
    int64_t off_us = 0;
    if (tz == Py_None)
        goto naive;
    if (tz != PyDateTime_TimeZone_UTC) {
        PyObject *off = PyObject_CallMethodNoArgs(v, s_utcoffset);
        if (!off)
            return -1;
        if (off == Py_None) {
            Py_DECREF(off);
            goto naive;
        }
        if (!PyDelta_Check(off)) {
            Py_DECREF(off);
            PyErr_Format(PyExc_TypeError, "%s.%s: utcoffset() did not return a timedelta", ent,
                         f->cname);
            return -1;
        }
        off_us = ((int64_t)PyDateTime_DELTA_GET_DAYS(off) * 86400 +
                  PyDateTime_DELTA_GET_SECONDS(off)) * 1000000 +
                 PyDateTime_DELTA_GET_MICROSECONDS(off);
        Py_DECREF(off);
    }
    int64_t days = days_from_civil(PyDateTime_GET_YEAR(v), (unsigned)PyDateTime_GET_MONTH(v),
                                   (unsigned)PyDateTime_GET_DAY(v));
    int64_t secs = days * 86400 + PyDateTime_DATE_GET_HOUR(v) * 3600 +
                   PyDateTime_DATE_GET_MINUTE(v) * 60 + PyDateTime_DATE_GET_SECOND(v);
    int64_t us = secs * 1000000 + PyDateTime_DATE_GET_MICROSECOND(v) - off_us;
    if (us > INT64_MAX / 1000 || us < INT64_MIN / 1000)
        return out_of_range(ent, f, v);
    *out = us * 1000;
    return 0;
naive: {
    PyObject *r = short_repr(v);
    if (r) {
        PyErr_Format(PyExc_TypeError, "%s.%s: naive datetime %U: motedb stores UTC timestamps "
                     "and needs an aware datetime, e.g. datetime.now(timezone.utc) or "
                     "dt.replace(tzinfo=timezone.utc)", ent, f->cname, r);
        Py_DECREF(r);
    }
    return -1;
}
}

static PyObject *vector_bytes(const char *ent, const FieldInfo *f, PyObject *v)
{
    if (PyObject_CheckBuffer(v) && !PyBytes_Check(v) && !PyUnicode_Check(v)) {
        Py_buffer view;
        if (PyObject_GetBuffer(v, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            int f32 = view.format && (!strcmp(view.format, "f") || !strcmp(view.format, "<f") ||
                                      !strcmp(view.format, "=f")) && view.itemsize == 4;
            if (f32) {
                PyObject *b = NULL;
                if ((size_t)view.len != (size_t)f->dim * 4)
                    PyErr_Format(PyExc_ValueError, "%s.%s: vector of %zd floats, expected %u",
                                 ent, f->cname, view.len / 4, f->dim);
                else
                    b = PyBytes_FromStringAndSize(view.buf, view.len);
                PyBuffer_Release(&view);
                return b;
            }
            PyBuffer_Release(&view);
        } else {
            PyErr_Clear();
        }
    }
    if (PyUnicode_Check(v) || PyBytes_Check(v) || PyDict_Check(v) || !PySequence_Check(v)) {
        wrong_type(ent, f, v);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(v, "vector");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != (Py_ssize_t)f->dim) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s.%s: vector of %zd floats, expected %u", ent,
                     f->cname, n, f->dim);
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, n * 4);
    if (!b) {
        Py_DECREF(seq);
        return NULL;
    }
    char *dst = PyBytes_AS_STRING(b);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = items[i];
        double d;
        if (PyFloat_CheckExact(x)) {
            d = PyFloat_AS_DOUBLE(x);
        } else if (PyUnicode_Check(x) || PyBytes_Check(x) || x == Py_None) {
            PyErr_Format(PyExc_TypeError, "%s.%s: vector element %zd is a %.100s, expected a "
                         "float", ent, f->cname, i, Py_TYPE(x)->tp_name);
            goto fail;
        } else {
            d = PyFloat_AsDouble(x);
            if (d == -1.0 && PyErr_Occurred())
                goto fail;
        }
        if (isfinite(d) && fabs(d) > FLT_MAX) {
            PyErr_Format(PyExc_OverflowError, "%s.%s: vector element %zd (%g) is out of range "
                         "for float32", ent, f->cname, i, d);
            goto fail;
        }
        float fl = (float)d;
        memcpy(dst + 4 * i, &fl, 4);
    }
    Py_DECREF(seq);
    return b;
fail:
    Py_DECREF(seq);
    Py_DECREF(b);
    return NULL;
}

/* Take the current exception's message (str of it) and clear the exception. */
static void exc_message(PyObject **msg)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    *msg = exc ? PyObject_Str(exc) : NULL;
    Py_XDECREF(exc);
#else
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    *msg = ev ? PyObject_Str(ev) : NULL;
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
#endif
    PyErr_Clear();
}

/*
 * Convert v, the value of field f, into *out. Every object whose memory *out
 * points into is stored, as a new reference, in keep[(*nk)++] (at most one per
 * call). `put` = 1 for stored values (range checks of the property type);
 * query values pass 0 and only need to fit int64 / float64.
 */
static int to_value(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
                    PyObject **keep, Py_ssize_t *nk, int put)
{
    if (f->kind == K_TOMANY) { /* links are written by g_after_put */
        out->null = 1;
        return 0;
    }
    if (f->kind == K_TOONE && v != Py_None && !PyLong_Check(v)) {
        EntityInfo *ti = info_of_type(Py_TYPE(v));
        if (!ti)
            return wrong_type(ent, f, v);
        if (PyUnicode_Compare(ti->name, f->target) != 0) {
            PyErr_Format(PyExc_TypeError, "%s.%s: expected a %U object (or its id), got a %U "
                         "object", ent, f->cname, f->target, ti->name);
            return -1;
        }
        PyObject *idv = SLOT(v, ti->id_off);
        unsigned long long x = idv && PyLong_Check(idv) ? PyLong_AsUnsignedLongLong(idv) : 0;
        if (x == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        if (!x) {
            PyErr_Format(PyExc_ValueError, "%s.%s: the %U object has no id yet: put it first",
                         ent, f->cname, f->target);
            return -1;
        }
        out->null = 0;
        out->v.i = (int64_t)x;
        return 0;
    }
    if (v == Py_None) {
        if (f->flags & MOTE_P_NULLABLE) {
            out->null = 1;
            return 0;
        }
        PyErr_Format(PyExc_TypeError, "%s.%s: None is not allowed (declare the property as "
                     "'%s | None' to allow it)", ent, f->cname, kind_expect[f->kind]);
        return -1;
    }
    out->null = 0;
    const char *p;
    Py_ssize_t n;
    PyObject *tmp;
    switch (f->kind) {
    case K_BOOL:
        if (v == Py_True)
            out->v.i = 1;
        else if (v == Py_False)
            out->v.i = 0;
        else
            return wrong_type(ent, f, v);
        return 0;
    case K_INT: {
        if (PyLong_Check(v)) {
            Py_INCREF(v);
        } else if (!PyFloat_Check(v) && PyIndex_Check(v)) {
            if (!(v = PyNumber_Index(v)))
                return -1;
        } else {
            return wrong_type(ent, f, v);
        }
        int ov, rc = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &ov);
        if (x == -1 && PyErr_Occurred())
            rc = -1;
        else if (ov || (put && (x < f->imin || x > f->imax)))
            rc = out_of_range(ent, f, v);
        Py_DECREF(v);
        out->v.i = x;
        return rc;
    }
    case K_TOONE: {
        if (PyBool_Check(v))
            return wrong_type(ent, f, v);
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return out_of_range(ent, f, v);
        }
        out->null = x == 0;
        out->v.i = (int64_t)x;
        return 0;
    }
    case K_FLOAT: {
        double d;
        if (PyFloat_Check(v)) {
            d = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_Check(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return out_of_range(ent, f, v);
            }
        } else if (!PyUnicode_Check(v) && !PyBytes_Check(v) && Py_TYPE(v)->tp_as_number &&
                   Py_TYPE(v)->tp_as_number->nb_float) {
            d = PyFloat_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred())
                return -1;
        } else {
            return wrong_type(ent, f, v);
        }
        if (put && f->mtype == MOTE_T_FLOAT32 && isfinite(d) && fabs(d) > FLT_MAX)
            return out_of_range(ent, f, v);
        out->v.f = d;
        return 0;
    }
    case K_STR:
        if (!PyUnicode_Check(v))
            return wrong_type(ent, f, v);
        if (!(p = PyUnicode_AsUTF8AndSize(v, &n)))
            return -1;
        keep[(*nk)++] = Py_NewRef(v);
        out->v.s.p = p;
        out->v.s.n = (size_t)n;
        return 0;
    case K_BYTES:
        if (PyBytes_Check(v))
            tmp = Py_NewRef(v);
        else if (PyByteArray_Check(v) || PyMemoryView_Check(v))
            tmp = PyBytes_FromObject(v);
        else
            return wrong_type(ent, f, v);
        if (!tmp)
            return -1;
        keep[(*nk)++] = tmp;
        out->v.s.p = PyBytes_AS_STRING(tmp);
        out->v.s.n = (size_t)PyBytes_GET_SIZE(tmp);
        return 0;
    case K_DATETIME:
        if (!PyDateTime_Check(v))
            return wrong_type(ent, f, v);
        return dt_to_ns(ent, f, v, &out->v.i);
    case K_DATE:
        if (!PyDate_Check(v) || PyDateTime_Check(v))
            return wrong_type(ent, f, v);
        out->v.i = days_from_civil(PyDateTime_GET_YEAR(v), (unsigned)PyDateTime_GET_MONTH(v),
                                   (unsigned)PyDateTime_GET_DAY(v));
        return 0;
    case K_DECIMAL: {
        int ok = PyLong_Check(v) && !PyBool_Check(v);
        if (!ok) {
            ok = PyObject_IsInstance(v, g_Decimal);
            if (ok < 0)
                return -1;
        }
        if (!ok)
            return wrong_type(ent, f, v);
        tmp = PyObject_Str(v);
        goto text;
    }
    case K_DICT:
    case K_LIST:
        if (f->kind == K_DICT ? !PyDict_Check(v) : !PyList_Check(v))
            return wrong_type(ent, f, v);
        tmp = PyObject_CallOneArg(g_dumps, v);
        if (!tmp) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError) &&
                !PyErr_ExceptionMatches(PyExc_ValueError))
                return -1;
            PyObject *why = NULL;
            exc_message(&why);
            PyErr_Format(PyExc_ValueError, "%s.%s: value is not JSON serialisable: %S", ent,
                         f->cname, why ? why : Py_None);
            Py_XDECREF(why);
            return -1;
        }
        goto text;
    case K_VECTOR:
        if (!(tmp = vector_bytes(ent, f, v)))
            return -1;
        keep[(*nk)++] = tmp;
        out->v.s.p = PyBytes_AS_STRING(tmp);
        out->v.s.n = (size_t)PyBytes_GET_SIZE(tmp);
        return 0;
    default:
        PyErr_SetString(PyExc_SystemError, "motedb: unknown field kind");
        return -1;
    }
text:
    if (!tmp)
        return -1;
    if (!(p = PyUnicode_AsUTF8AndSize(tmp, &n))) {
        Py_DECREF(tmp);
        return -1;
    }
    keep[(*nk)++] = tmp;
    out->v.s.p = p;
    out->v.s.n = (size_t)n;
    return 0;
}

/* ---- values: mote_value -> Python --------------------------------------------- */

static PyObject *ns_to_datetime(int64_t ns)
{
    int64_t us = floor_div(ns, 1000), secs = floor_div(us, 1000000);
    int usec = (int)(us - secs * 1000000);
    int64_t days = floor_div(secs, 86400);
    int sod = (int)(secs - days * 86400);
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    return PyDateTimeAPI->DateTime_FromDateAndTime((int)y, (int)m, (int)d, sod / 3600,
                                                   sod / 60 % 60, sod % 60, usec,
                                                   PyDateTime_TimeZone_UTC,
                                                   PyDateTimeAPI->DateTimeType);
}

static PyObject *from_value(const FieldInfo *f, const mote_value *v, int absent)
{
    if (absent) { /* the record predates the property: its default */
        if (f->factory)
            return PyObject_CallNoArgs(f->factory);
        if (f->dflt)
            return Py_NewRef(f->dflt);
    }
    if (v->null)
        Py_RETURN_NONE;
    switch (f->kind) {
    case K_BOOL: return PyBool_FromLong(v->v.i != 0);
    case K_INT: return PyLong_FromLongLong(v->v.i);
    case K_TOONE:
        if (!v->v.i)
            Py_RETURN_NONE;
        return PyLong_FromUnsignedLongLong((uint64_t)v->v.i);
    case K_TOMANY: Py_RETURN_NONE;
    case K_FLOAT: return PyFloat_FromDouble(v->v.f);
    case K_STR: return PyUnicode_DecodeUTF8(v->v.s.p, (Py_ssize_t)v->v.s.n, "surrogateescape");
    case K_BYTES: return PyBytes_FromStringAndSize(v->v.s.p, (Py_ssize_t)v->v.s.n);
    case K_DATETIME: return ns_to_datetime(v->v.i);
    case K_DATE: {
        int64_t y;
        unsigned m, d;
        civil_from_days(v->v.i, &y, &m, &d);
        if (y < 1 || y > 9999) {
            PyErr_Format(PyExc_OverflowError, "%s: stored date (day %lld) is outside the range "
                         "of datetime.date", f->cname, (long long)v->v.i);
            return NULL;
        }
        return PyDate_FromDate((int)y, (int)m, (int)d);
    }
    case K_DECIMAL: {
        PyObject *s = v->v.s.n ? PyUnicode_DecodeUTF8(v->v.s.p, (Py_ssize_t)v->v.s.n, "strict")
                               : PyUnicode_FromString("0");
        if (!s)
            return NULL;
        PyObject *r = PyObject_CallOneArg(g_Decimal, s);
        Py_DECREF(s);
        return r;
    }
    case K_DICT:
    case K_LIST: {
        if (!v->v.s.n)
            return f->kind == K_DICT ? PyDict_New() : PyList_New(0);
        PyObject *s = PyUnicode_DecodeUTF8(v->v.s.p, (Py_ssize_t)v->v.s.n, "strict");
        if (!s)
            return NULL;
        PyObject *r = PyObject_CallOneArg(g_loads, s);
        Py_DECREF(s);
        return r;
    }
    case K_VECTOR: {
        Py_ssize_t n = (Py_ssize_t)(v->v.s.n / 4);
        if (n == 0)
            n = f->dim; /* absent: zeros */
        PyObject *l = PyList_New(n);
        if (!l)
            return NULL;
        const char *src = v->v.s.p;
        for (Py_ssize_t i = 0; i < n; i++) {
            float fl = 0;
            if (v->v.s.n)
                memcpy(&fl, src + 4 * i, 4);
            PyObject *x = PyFloat_FromDouble(fl);
            if (!x) {
                Py_DECREF(l);
                return NULL;
            }
            PyList_SET_ITEM(l, i, x);
        }
        return l;
    }
    }
    PyErr_SetString(PyExc_SystemError, "motedb: unknown field kind");
    return NULL;
}

/* Build an instance of `cls` from a record. New reference. */
static PyObject *build_obj(PyTypeObject *cls, const EntityInfo *in, const mote_record *r)
{
    PyObject *o = cls->tp_alloc(cls, 0);
    if (!o)
        return NULL;
    PyObject *idv = PyLong_FromUnsignedLongLong(r->id);
    if (!idv)
        goto fail;
    SLOT(o, in->id_off) = idv;
    for (Py_ssize_t i = 0; i < in->nf; i++) {
        const FieldInfo *f = &in->f[i];
        mote_value v;
        int absent = 0, rc = mote_record_get(r, (unsigned)i, &v, &absent);
        if (rc) {
            raise_rc(rc);
            goto fail;
        }
        PyObject *x = from_value(f, &v, absent);
        if (!x)
            goto fail;
        SLOT(o, f->offset) = x;
    }
    return o;
fail:
    Py_DECREF(o);
    return NULL;
}

/* One field of a record (index -1: the id). New reference. */
static PyObject *record_field(const EntityInfo *in, const mote_record *r, Py_ssize_t i)
{
    if (i < 0)
        return PyLong_FromUnsignedLongLong(r->id);
    mote_value v;
    int absent = 0, rc = mote_record_get(r, (unsigned)i, &v, &absent);
    if (rc) {
        raise_rc(rc);
        return NULL;
    }
    return from_value(&in->f[i], &v, absent);
}

/* ---- the metatype and the Entity base -------------------------------------------- */

static EntityInfo *build_info(PyTypeObject *type, PyObject *name, PyObject *specs)
{
    if (!PyList_Check(specs) || PyList_GET_SIZE(specs) < 1) {
        PyErr_SetString(PyExc_SystemError, "motedb: bad field specs");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(specs) - 1;
    EntityInfo *in = PyMem_Calloc(1, sizeof *in);
    if (!in)
        return (EntityInfo *)PyErr_NoMemory();
    in->name = Py_NewRef(name);
    in->cname = PyUnicode_AsUTF8(name);
    in->f = PyMem_Calloc((size_t)n + 1, sizeof *in->f);
    in->defs = PyMem_Calloc((size_t)n + 1, sizeof *in->defs);
    if (!in->cname || !in->f || !in->defs) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        info_free(in);
        return NULL;
    }
    for (Py_ssize_t i = 0; i <= n; i++) {
        PyObject *spec = PyList_GET_ITEM(specs, i), *fname, *dflt, *factory, *renamed, *target;
        int kind, mtype;
        unsigned flags, dim;
        if (!PyArg_ParseTuple(spec, "UiiIIOOOO", &fname, &kind, &mtype, &flags, &dim, &dflt,
                              &factory, &renamed, &target))
            goto fail;
        PyObject *descr = PyDict_GetItemWithError(type->tp_dict, fname);
        if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "entity %U: no slot for property %U", name, fname);
            goto fail;
        }
        Py_ssize_t off = ((PyMemberDescrObject *)descr)->d_member->offset;
        PropertyObject *p = PyObject_GC_New(PropertyObject, &Property_Type);
        if (!p)
            goto fail;
        p->owner = (PyTypeObject *)Py_NewRef(type);
        p->name = Py_NewRef(fname);
        p->index = i - 1;
        p->offset = off;
        PyObject_GC_Track(p);
        int rc = PyObject_SetAttr((PyObject *)type, fname, (PyObject *)p);
        Py_DECREF(p);
        if (rc < 0)
            goto fail;
        if (i == 0) {
            in->id_off = off;
            continue;
        }
        FieldInfo *f = &in->f[i - 1];
        in->nf = i;
        Py_INCREF(fname);
        PyUnicode_InternInPlace(&fname);
        f->name = fname;
        f->cname = PyUnicode_AsUTF8(fname);
        if (!f->cname)
            goto fail;
        f->offset = off;
        f->kind = kind;
        f->mtype = mtype;
        f->flags = flags;
        f->dim = dim;
        f->dflt = dflt == g_missing ? NULL : Py_NewRef(dflt);
        f->factory = factory == Py_None ? NULL : Py_NewRef(factory);
        f->imin = INT64_MIN;
        f->imax = INT64_MAX;
        if (mtype == MOTE_T_INT8) {
            f->imin = INT8_MIN;
            f->imax = INT8_MAX;
        } else if (mtype == MOTE_T_INT16) {
            f->imin = INT16_MIN;
            f->imax = INT16_MAX;
        } else if (mtype == MOTE_T_INT32) {
            f->imin = INT32_MIN;
            f->imax = INT32_MAX;
        }
        if (renamed != Py_None) {
            Py_ssize_t rl;
            const char *rs = PyUnicode_AsUTF8AndSize(renamed, &rl);
            if (!rs || !(f->renamed = PyMem_Malloc((size_t)rl + 1))) {
                if (!PyErr_Occurred())
                    PyErr_NoMemory();
                goto fail;
            }
            memcpy(f->renamed, rs, (size_t)rl + 1);
        }
        mote_prop_def *d = &in->defs[i - 1];
        d->name = f->cname;
        d->type = mtype;
        d->flags = flags;
        d->dim = dim;
        d->renamed_from = f->renamed;
        if (target != Py_None) {
            if (!PyUnicode_Check(target) || !(d->target = PyUnicode_AsUTF8(target)))
                goto fail;
            f->target = Py_NewRef(target);
            in->has_tomany |= kind == K_TOMANY;
        }
    }
    in->store_off = -1;
    PyObject *sd = PyDict_GetItemString(type->tp_dict, "_motedb_store");
    if (sd && Py_IS_TYPE(sd, &PyMemberDescr_Type))
        in->store_off = ((PyMemberDescrObject *)sd)->d_member->offset;
    return in;
fail:
    info_free(in);
    return NULL;
}

static PyObject *meta_new(PyTypeObject *meta, PyObject *args, PyObject *kwds)
{
    PyObject *name, *bases, *ns;
    if (!PyArg_ParseTuple(args, "UO!O!:EntityMeta", &name, &PyTuple_Type, &bases, &PyDict_Type,
                          &ns))
        return NULL;
    PyObject *root = PyDict_GetItemString(ns, "__motedb_root__");
    if (root)
        return PyType_Type.tp_new(meta, args, kwds);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bases); i++) {
        PyObject *b = PyTuple_GET_ITEM(bases, i);
        if (PyType_Check(b) && info_of_type((PyTypeObject *)b)) {
            PyErr_Format(PyExc_TypeError, "entity %U: subclassing the entity class %s is not "
                         "supported; derive entity classes from motedb.Entity directly",
                         name, ((PyTypeObject *)b)->tp_name);
            return NULL;
        }
    }
    if (!g_prepare) {
        PyErr_SetString(PyExc_RuntimeError, "motedb is not initialised: import motedb");
        return NULL;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(g_prepare, name, bases, ns, NULL);
    if (!res)
        return NULL;
    PyObject *ns2, *specs;
    if (!PyArg_ParseTuple(res, "O!O!", &PyDict_Type, &ns2, &PyList_Type, &specs)) {
        Py_DECREF(res);
        return NULL;
    }
    PyObject *nargs = PyTuple_Pack(3, name, bases, ns2);
    PyObject *type = nargs ? PyType_Type.tp_new(meta, nargs, kwds) : NULL;
    Py_XDECREF(nargs);
    if (type) {
        EntityInfo *in = build_info((PyTypeObject *)type, name, specs);
        if (!in)
            Py_CLEAR(type);
        else
            ((EntityTypeObject *)type)->info = in;
    }
    Py_DECREF(res);
    return type;
}

static int meta_traverse(PyObject *self, visitproc visit, void *arg)
{
    EntityInfo *in = ((EntityTypeObject *)self)->info;
    for (Py_ssize_t i = 0; in && i < in->nf; i++) {
        Py_VISIT(in->f[i].dflt);
        Py_VISIT(in->f[i].factory);
    }
    return PyType_Type.tp_traverse(self, visit, arg);
}

static int meta_clear(PyObject *self)
{
    EntityInfo *in = ((EntityTypeObject *)self)->info;
    for (Py_ssize_t i = 0; in && i < in->nf; i++) {
        Py_CLEAR(in->f[i].dflt);
        Py_CLEAR(in->f[i].factory);
    }
    return PyType_Type.tp_clear(self);
}

static void meta_dealloc(PyObject *self)
{
    EntityInfo *in = ((EntityTypeObject *)self)->info;
    ((EntityTypeObject *)self)->info = NULL;
    info_free(in);
    PyType_Type.tp_dealloc(self);
}

static PyTypeObject EntityMeta_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb._core.EntityMeta",
    .tp_basicsize = sizeof(EntityTypeObject),
    .tp_itemsize = sizeof(PyMemberDef),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE |
                Py_TPFLAGS_TYPE_SUBCLASS,
    .tp_doc = "Metaclass of motedb entity classes.",
    .tp_new = meta_new,
    .tp_traverse = meta_traverse,
    .tp_clear = meta_clear,
    .tp_dealloc = meta_dealloc,
};

static EntityInfo *entity_info_or_raise(PyTypeObject *tp)
{
    EntityInfo *in = info_of_type(tp);
    if (!in)
        PyErr_Format(PyExc_TypeError, "%.100s is not an entity class: derive it from "
                     "motedb.Entity", tp->tp_name);
    return in;
}

static int set_slot(PyObject *o, Py_ssize_t off, PyObject *v)
{
    Py_XSETREF(SLOT(o, off), Py_NewRef(v));
    return 0;
}

static int ent_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    EntityInfo *in = entity_info_or_raise(Py_TYPE(self));
    if (!in)
        return -1;
    if (PyTuple_GET_SIZE(args)) {
        PyErr_Format(PyExc_TypeError, "%s() takes keyword arguments only (got %zd positional)",
                     in->cname, PyTuple_GET_SIZE(args));
        return -1;
    }
    Py_ssize_t used = 0;
    PyObject *v = kwds ? PyDict_GetItemWithError(kwds, s_id) : NULL;
    if (v)
        used++;
    else if (PyErr_Occurred())
        return -1;
    if (!v) {
        static PyObject *zero;
        if (!zero && !(zero = PyLong_FromLong(0)))
            return -1;
        v = zero;
    }
    set_slot(self, in->id_off, v);
    for (Py_ssize_t i = 0; i < in->nf; i++) {
        FieldInfo *f = &in->f[i];
        v = kwds ? PyDict_GetItemWithError(kwds, f->name) : NULL;
        if (v) {
            used++;
            set_slot(self, f->offset, v);
            continue;
        }
        if (PyErr_Occurred())
            return -1;
        if (f->factory) {
            if (!(v = PyObject_CallNoArgs(f->factory)))
                return -1;
            Py_XSETREF(SLOT(self, f->offset), v);
        } else if (f->dflt) {
            set_slot(self, f->offset, f->dflt);
        } else {
            PyErr_Format(PyExc_TypeError, "%s() missing required keyword argument '%s'",
                         in->cname, f->cname);
            return -1;
        }
    }
    if (kwds && used < PyDict_GET_SIZE(kwds)) {
        PyObject *key, *val;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwds, &pos, &key, &val)) {
            int known = PyUnicode_Check(key) && PyUnicode_Compare(key, s_id) == 0;
            for (Py_ssize_t i = 0; !known && i < in->nf; i++)
                known = PyUnicode_Check(key) && PyUnicode_Compare(key, in->f[i].name) == 0;
            if (!known) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S' "
                             "(not a property of %s)", in->cname, key, in->cname);
                return -1;
            }
        }
    }
    return 0;
}

static PyObject *ent_repr(PyObject *self)
{
    EntityInfo *in = info_of_type(Py_TYPE(self));
    if (!in)
        return PyUnicode_FromFormat("<%s object>", Py_TYPE(self)->tp_name);
    int r = Py_ReprEnter(self);
    if (r)
        return r > 0 ? PyUnicode_FromFormat("%s(...)", in->cname) : NULL;
    PyObject *parts = PyList_New(0), *res = NULL;
    if (!parts)
        goto done;
    for (Py_ssize_t i = -1; i < in->nf; i++) {
        PyObject *v = SLOT(self, i < 0 ? in->id_off : in->f[i].offset);
        PyObject *name = i < 0 ? s_id : in->f[i].name;
        if (i >= 0 && in->f[i].kind == K_TOMANY)
            continue; /* relations: links are not shown */
        if (i >= 0 && in->f[i].kind == K_TOONE && v && info_of_type(Py_TYPE(v))) {
            EntityInfo *ti = info_of_type(Py_TYPE(v)); /* a loaded target: its id */
            v = SLOT(v, ti->id_off);
        }
        PyObject *part = v ? PyUnicode_FromFormat("%U=%R", name, v)
                           : PyUnicode_FromFormat("%U=<unset>", name);
        if (!part || PyList_Append(parts, part) < 0) {
            Py_XDECREF(part);
            goto done;
        }
        Py_DECREF(part);
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *body = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    if (body)
        res = PyUnicode_FromFormat("%s(%U)", in->cname, body);
    Py_XDECREF(body);
done:
    Py_XDECREF(parts);
    Py_ReprLeave(self);
    return res;
}

static PyObject *ent_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    EntityInfo *in = info_of_type(Py_TYPE(a));
    if (!in)
        Py_RETURN_NOTIMPLEMENTED;
    int eq = 1;
    for (Py_ssize_t i = -1; eq && i < in->nf; i++) {
        Py_ssize_t off = i < 0 ? in->id_off : in->f[i].offset;
        PyObject *x = SLOT(a, off), *y = SLOT(b, off);
        if (i >= 0 && in->f[i].kind == K_TOMANY)
            continue;
        if (i >= 0 && in->f[i].kind == K_TOONE && x && y) { /* compare the ids */
            mote_value vx, vy;
            if (to_value(in->cname, &in->f[i], x, &vx, NULL, NULL, 0) < 0 ||
                to_value(in->cname, &in->f[i], y, &vy, NULL, NULL, 0) < 0) {
                PyErr_Clear(); /* e.g. an unsaved object: the same object or not */
                eq = x == y;
                continue;
            }
            eq = vx.null == vy.null && (vx.null || vx.v.i == vy.v.i);
            continue;
        }
        if (!x || !y) {
            eq = x == y;
            continue;
        }
        eq = PyObject_RichCompareBool(x, y, Py_EQ);
        if (eq < 0)
            return NULL;
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyTypeObject EntityBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb._core.EntityBase",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Base of motedb.Entity: keyword constructor, repr and equality in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = ent_init,
    .tp_repr = ent_repr,
    .tp_richcompare = ent_richcompare,
    .tp_hash = PyObject_HashNotImplemented,
};

/* ---- Order ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PropertyObject *prop;
    unsigned flags; /* MOTE_Q_DESC | MOTE_Q_NULLS_LAST */
} OrderObject;

static PyObject *order_new(PropertyObject *p, unsigned flags)
{
    OrderObject *o = PyObject_New(OrderObject, &Order_Type);
    if (!o)
        return NULL;
    o->prop = (PropertyObject *)Py_NewRef(p);
    o->flags = flags;
    return (PyObject *)o;
}

static void order_dealloc(PyObject *self)
{
    Py_XDECREF(((OrderObject *)self)->prop);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *order_desc(PyObject *self, PyObject *unused)
{
    (void)unused;
    OrderObject *o = (OrderObject *)self;
    return order_new(o->prop, o->flags | MOTE_Q_DESC);
}

static PyObject *order_asc(PyObject *self, PyObject *unused)
{
    (void)unused;
    OrderObject *o = (OrderObject *)self;
    return order_new(o->prop, o->flags & ~MOTE_Q_DESC);
}

static PyObject *order_nulls_last(PyObject *self, PyObject *unused)
{
    (void)unused;
    OrderObject *o = (OrderObject *)self;
    return order_new(o->prop, o->flags | MOTE_Q_NULLS_LAST);
}

static PyObject *order_nulls_first(PyObject *self, PyObject *unused)
{
    (void)unused;
    OrderObject *o = (OrderObject *)self;
    return order_new(o->prop, o->flags & ~MOTE_Q_NULLS_LAST);
}

static PyObject *order_repr(PyObject *self)
{
    OrderObject *o = (OrderObject *)self;
    return PyUnicode_FromFormat("%s.%U%s%s", prop_entity(o->prop), o->prop->name,
                                o->flags & MOTE_Q_DESC ? ".desc()" : ".asc()",
                                o->flags & MOTE_Q_NULLS_LAST ? ".nulls_last()" : "");
}

static PyMethodDef order_methods[] = {
    {"desc", order_desc, METH_NOARGS, "Descending."},
    {"asc", order_asc, METH_NOARGS, "Ascending."},
    {"nulls_last", order_nulls_last, METH_NOARGS, "NULLs after the values."},
    {"nulls_first", order_nulls_first, METH_NOARGS, "NULLs before the values (default)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Order_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Order",
    .tp_basicsize = sizeof(OrderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An ordering of query results: Note.level.desc(), Note.text.nulls_last().",
    .tp_dealloc = order_dealloc,
    .tp_repr = order_repr,
    .tp_methods = order_methods,
};

/* ---- Condition ------------------------------------------------------------------------ */

enum { C_LEAF, C_AND, C_OR, C_LINK };

typedef struct {
    PyObject_HEAD
    int kind;
    PropertyObject *prop; /* leaves */
    int op;
    unsigned flags;
    PyObject *vals;       /* leaves: tuple of values */
    PyObject *kids;       /* and/or: tuple of conditions */
    PyTypeObject *owner;  /* the entity class */
} CondObject;

static const char *op_text[] = {"?", "==", "!=", "<", "<=", ">", ">=", "between", "in_",
                                "not_in", "is_null", "is_not_null", "startswith",
                                "endswith", "contains"};

static int cond_traverse(PyObject *self, visitproc visit, void *arg)
{
    CondObject *c = (CondObject *)self;
    Py_VISIT(c->prop);
    Py_VISIT(c->vals);
    Py_VISIT(c->kids);
    Py_VISIT(c->owner);
    return 0;
}

static int cond_clear(PyObject *self)
{
    CondObject *c = (CondObject *)self;
    Py_CLEAR(c->prop);
    Py_CLEAR(c->vals);
    Py_CLEAR(c->kids);
    Py_CLEAR(c->owner);
    return 0;
}

static void cond_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    cond_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static CondObject *cond_alloc(int kind, PyTypeObject *owner)
{
    CondObject *c = PyObject_GC_New(CondObject, &Cond_Type);
    if (!c)
        return NULL;
    c->kind = kind;
    c->prop = NULL;
    c->op = 0;
    c->flags = 0;
    c->vals = NULL;
    c->kids = NULL;
    c->owner = (PyTypeObject *)Py_NewRef(owner);
    PyObject_GC_Track(c);
    return c;
}

static int comparable(FieldInfo *f)
{
    return f->kind != K_DECIMAL && f->kind != K_DICT && f->kind != K_LIST && f->kind != K_VECTOR &&
           f->kind != K_TOMANY;
}

/* A leaf condition; steals nothing. Values are checked now (TypeError early). */
/* An id in a condition: an int in 0 .. 2**64-1, as v.i. */
static int id_value(const char *ent, PyObject *v, mote_value *mv)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s.id: ids are ints, got %.100s", ent, Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s.id: %R is not an id (0 .. 2**64-1)", ent, v);
        return -1;
    }
    memset(mv, 0, sizeof *mv);
    mv->v.i = (int64_t)x;
    return 0;
}

static PyObject *cond_leaf(PropertyObject *p, int op, PyObject *vals, unsigned flags)
{
    FieldInfo *f = prop_field(p);
    const char *ent = prop_entity(p);
    if (!f) { /* the id: comparisons, between, in_, not_in with ints >= 0 */
        if (op == MOTE_IS_NULL || op == MOTE_NOT_NULL || op >= MOTE_STARTS_WITH || flags) {
            PyErr_Format(PyExc_TypeError, "%s.id: ids take ==, !=, <, <=, >, >=, between(), "
                         "in_() and not_in()", ent);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(vals); i++) {
            mote_value mv;
            if (id_value(ent, PyTuple_GET_ITEM(vals, i), &mv) < 0)
                return NULL;
        }
    } else if ((flags & MOTE_Q_NOCASE) && f->kind != K_STR && f->kind != K_BYTES) {
        PyErr_Format(PyExc_TypeError, "%s.%s: case_sensitive=False needs a str or bytes "
                     "property", ent, f->cname);
        return NULL;
    }
    int str_op = op == MOTE_STARTS_WITH || op == MOTE_ENDS_WITH || op == MOTE_CONTAINS;
    if (!f)
        goto make;
    if (str_op && f->kind != K_STR && f->kind != K_BYTES) {
        PyErr_Format(PyExc_TypeError, "%s.%s: %s() needs a str or bytes property", ent,
                     f->cname, op_text[op]);
        return NULL;
    }
    if (op != MOTE_IS_NULL && op != MOTE_NOT_NULL && !comparable(f)) {
        PyErr_Format(PyExc_TypeError, "%s.%s: %s properties cannot be compared in queries "
                     "(only is_null() / is_not_null())", ent, f->cname, kind_expect[f->kind]);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(vals);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(vals, i), *keep[1];
        Py_ssize_t nk = 0;
        mote_value mv;
        if (v == Py_None) {
            PyErr_Format(PyExc_TypeError, "%s.%s: cannot compare with None: use is_null() / "
                         "is_not_null()", ent, f->cname);
            return NULL;
        }
        if (to_value(ent, f, v, &mv, keep, &nk, 0) < 0)
            return NULL;
        if (nk)
            Py_DECREF(keep[0]);
    }
make:;
    CondObject *c = cond_alloc(C_LEAF, p->owner);
    if (!c)
        return NULL;
    c->prop = (PropertyObject *)Py_NewRef(p);
    c->op = op;
    c->flags = flags;
    c->vals = Py_NewRef(vals);
    return (PyObject *)c;
}

static PyObject *cond_leaf_args(PropertyObject *p, int op, unsigned flags, Py_ssize_t n, ...)
{
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    va_list ap;
    va_start(ap, n);
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(va_arg(ap, PyObject *)));
    va_end(ap);
    PyObject *c = cond_leaf(p, op, t, flags);
    Py_DECREF(t);
    return c;
}

static PyObject *cond_group(int kind, PyObject *a, PyObject *b)
{
    if (!PyObject_TypeCheck(a, &Cond_Type) || !PyObject_TypeCheck(b, &Cond_Type))
        Py_RETURN_NOTIMPLEMENTED;
    CondObject *x = (CondObject *)a, *y = (CondObject *)b;
    if (x->owner != y->owner) {
        PyErr_Format(PyExc_TypeError, "cannot combine conditions on %s and on %s",
                     x->owner->tp_name, y->owner->tp_name);
        return NULL;
    }
    PyObject *kids = PyList_New(0);
    if (!kids)
        return NULL;
    CondObject *parts[2] = {x, y};
    for (int i = 0; i < 2; i++) {
        int rc;
        if (parts[i]->kind == kind) {
            rc = PyList_SetSlice(kids, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, parts[i]->kids);
        } else {
            rc = PyList_Append(kids, (PyObject *)parts[i]);
        }
        if (rc < 0) {
            Py_DECREF(kids);
            return NULL;
        }
    }
    CondObject *c = cond_alloc(kind, x->owner);
    if (!c) {
        Py_DECREF(kids);
        return NULL;
    }
    c->kids = PyList_AsTuple(kids);
    Py_DECREF(kids);
    if (!c->kids) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static PyObject *cond_and(PyObject *a, PyObject *b) { return cond_group(C_AND, a, b); }
static PyObject *cond_or(PyObject *a, PyObject *b) { return cond_group(C_OR, a, b); }

static PyObject *cond_invert(PyObject *self)
{
    CondObject *c = (CondObject *)self;
    if (c->kind == C_LINK) {
        PyErr_Format(PyExc_TypeError, "~%R: a relation condition cannot be negated", self);
        return NULL;
    }
    if (c->kind != C_LEAF) { /* De Morgan */
        Py_ssize_t n = PyTuple_GET_SIZE(c->kids);
        PyObject *res = NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *k = cond_invert(PyTuple_GET_ITEM(c->kids, i));
            if (!k) {
                Py_XDECREF(res);
                return NULL;
            }
            if (!res) {
                res = k;
                continue;
            }
            PyObject *g = cond_group(c->kind == C_AND ? C_OR : C_AND, res, k);
            Py_DECREF(res);
            Py_DECREF(k);
            if (!(res = g))
                return NULL;
        }
        return res;
    }
    int neg = 0;
    switch (c->op) {
    case MOTE_EQ: neg = MOTE_NE; break;
    case MOTE_NE: neg = MOTE_EQ; break;
    case MOTE_LT: neg = MOTE_GE; break;
    case MOTE_LE: neg = MOTE_GT; break;
    case MOTE_GT: neg = MOTE_LE; break;
    case MOTE_GE: neg = MOTE_LT; break;
    case MOTE_IN: neg = MOTE_NOT_IN; break;
    case MOTE_NOT_IN: neg = MOTE_IN; break;
    case MOTE_IS_NULL: neg = MOTE_NOT_NULL; break;
    case MOTE_NOT_NULL: neg = MOTE_IS_NULL; break;
    case MOTE_BETWEEN: {
        PyObject *lo = cond_leaf_args(c->prop, MOTE_LT, 0, 1, PyTuple_GET_ITEM(c->vals, 0));
        PyObject *hi = lo ? cond_leaf_args(c->prop, MOTE_GT, 0, 1, PyTuple_GET_ITEM(c->vals, 1))
                          : NULL;
        PyObject *r = hi ? cond_group(C_OR, lo, hi) : NULL;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return r;
    }
    default:
        PyErr_Format(PyExc_TypeError, "~ of %s() is not supported", op_text[c->op]);
        return NULL;
    }
    return cond_leaf(c->prop, neg, c->vals, c->flags);
}

static int cond_bool(PyObject *self)
{
    (void)self;
    PyErr_SetString(PyExc_TypeError, "a motedb condition has no truth value: combine "
                    "conditions with & and | (not 'and' / 'or'), and write 'a < x < b' as "
                    "x.between(a, b)");
    return -1;
}

static PyObject *cond_repr(PyObject *self)
{
    CondObject *c = (CondObject *)self;
    if (c->kind == C_LINK)
        return PyUnicode_FromFormat("%R.has(%R)", (PyObject *)c->prop,
                                    PyTuple_GET_ITEM(c->kids, 0));
    if (c->kind != C_LEAF) {
        PyObject *sep = PyUnicode_FromString(c->kind == C_AND ? " & " : " | ");
        PyObject *parts = PyList_New(0), *res = NULL;
        for (Py_ssize_t i = 0; sep && parts && i < PyTuple_GET_SIZE(c->kids); i++) {
            CondObject *k = (CondObject *)PyTuple_GET_ITEM(c->kids, i);
            PyObject *r = PyObject_Repr((PyObject *)k);
            if (r && k->kind == C_LEAF && k->op >= MOTE_EQ && k->op <= MOTE_GE)
                Py_SETREF(r, PyUnicode_FromFormat("(%U)", r));
            if (!r || PyList_Append(parts, r) < 0) {
                Py_XDECREF(r);
                goto out;
            }
            Py_DECREF(r);
        }
        if (sep && parts) {
            PyObject *body = PyUnicode_Join(sep, parts);
            if (body)
                res = PyUnicode_FromFormat("(%U)", body);
            Py_XDECREF(body);
        }
    out:
        Py_XDECREF(sep);
        Py_XDECREF(parts);
        return res;
    }
    const char *ent = prop_entity(c->prop);
    if (c->op >= MOTE_EQ && c->op <= MOTE_GE)
        return PyUnicode_FromFormat("%s.%U %s %R", ent, c->prop->name, op_text[c->op],
                                    PyTuple_GET_ITEM(c->vals, 0));
    if (c->op == MOTE_IN || c->op == MOTE_NOT_IN)
        return PyUnicode_FromFormat("%s.%U.%s(%R)", ent, c->prop->name, op_text[c->op],
                                    c->vals);
    PyObject *args = PyObject_Repr(c->vals), *res;
    if (!args)
        return NULL;
    /* "(a, b)" -> "a, b" */
    PyObject *inner = PyUnicode_Substring(args, 1, PyUnicode_GET_LENGTH(args) -
                                                       (PyTuple_GET_SIZE(c->vals) == 1 ? 2 : 1));
    Py_DECREF(args);
    if (!inner)
        return NULL;
    res = PyUnicode_FromFormat("%s.%U.%s(%U%s)", ent, c->prop->name, op_text[c->op], inner,
                               c->flags & MOTE_Q_NOCASE ? ", case_sensitive=False" : "");
    Py_DECREF(inner);
    return res;
}

static PyNumberMethods cond_as_number = {
    .nb_and = cond_and,
    .nb_or = cond_or,
    .nb_invert = cond_invert,
    .nb_bool = cond_bool,
};

static PyTypeObject Cond_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Condition",
    .tp_basicsize = sizeof(CondObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A query condition: Note.level == 10, Note.text.startswith('a'), c1 & c2, c1 | c2.",
    .tp_dealloc = cond_dealloc,
    .tp_traverse = cond_traverse,
    .tp_clear = cond_clear,
    .tp_repr = cond_repr,
    .tp_as_number = &cond_as_number,
};

/* ---- Property methods ------------------------------------------------------------------ */

static PyObject *prop_richcompare(PyObject *self, PyObject *other, int op)
{
    PropertyObject *p = (PropertyObject *)self;
    if (PyObject_TypeCheck(other, &Property_Type))
        Py_RETURN_NOTIMPLEMENTED; /* property vs property: identity */
    static const int map[] = {MOTE_LT, MOTE_LE, MOTE_EQ, MOTE_NE, MOTE_GT, MOTE_GE};
    int mop = map[op];
    if (other == Py_None && (mop == MOTE_EQ || mop == MOTE_NE))
        return cond_leaf_args(p, mop == MOTE_EQ ? MOTE_IS_NULL : MOTE_NOT_NULL, 0, 0);
    return cond_leaf_args(p, mop, 0, 1, other);
}

static PyObject *prop_between(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "between(lo, hi) takes 2 arguments");
        return NULL;
    }
    return cond_leaf_args((PropertyObject *)self, MOTE_BETWEEN, 0, 2, args[0], args[1]);
}

static PyObject *prop_in_op(PyObject *self, PyObject *values, int op)
{
    if (PyUnicode_Check(values) || PyBytes_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "in_() / not_in() take a collection of values, not a "
                        "string");
        return NULL;
    }
    PyObject *t = PySequence_Tuple(values);
    if (!t)
        return NULL;
    PyObject *c = cond_leaf((PropertyObject *)self, op, t, 0);
    Py_DECREF(t);
    return c;
}

static PyObject *prop_in(PyObject *self, PyObject *v) { return prop_in_op(self, v, MOTE_IN); }
static PyObject *prop_not_in(PyObject *self, PyObject *v)
{
    return prop_in_op(self, v, MOTE_NOT_IN);
}

static PyObject *prop_is_null(PyObject *self, PyObject *unused)
{
    (void)unused;
    return cond_leaf_args((PropertyObject *)self, MOTE_IS_NULL, 0, 0);
}

static PyObject *prop_is_not_null(PyObject *self, PyObject *unused)
{
    (void)unused;
    return cond_leaf_args((PropertyObject *)self, MOTE_NOT_NULL, 0, 0);
}

static PyObject *prop_strop(PyObject *self, PyObject *args, PyObject *kwds, int op)
{
    static char *kwlist[] = {"value", "case_sensitive", NULL};
    PyObject *v;
    int cs = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p", kwlist, &v, &cs))
        return NULL;
    return cond_leaf_args((PropertyObject *)self, op, cs ? 0 : MOTE_Q_NOCASE, 1, v);
}

static PyObject *prop_equals(PyObject *self, PyObject *args, PyObject *kwds)
{
    return prop_strop(self, args, kwds, MOTE_EQ);
}

static PyObject *prop_not_equals(PyObject *self, PyObject *args, PyObject *kwds)
{
    return prop_strop(self, args, kwds, MOTE_NE);
}

static PyObject *prop_startswith(PyObject *self, PyObject *args, PyObject *kwds)
{
    return prop_strop(self, args, kwds, MOTE_STARTS_WITH);
}

static PyObject *prop_endswith(PyObject *self, PyObject *args, PyObject *kwds)
{
    return prop_strop(self, args, kwds, MOTE_ENDS_WITH);
}

static PyObject *prop_contains(PyObject *self, PyObject *args, PyObject *kwds)
{
    return prop_strop(self, args, kwds, MOTE_CONTAINS);
}

static PyObject *prop_order(PyObject *self, unsigned flags)
{
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    if (!f) {
        PyErr_Format(PyExc_TypeError, "%s.id: results are in id order unless ordered by a "
                     "property; ordering by the id is not needed", prop_entity(p));
        return NULL;
    }
    if (!comparable(f)) {
        PyErr_Format(PyExc_TypeError, "%s.%s: cannot order by a %s property", prop_entity(p),
                     f->cname, kind_expect[f->kind]);
        return NULL;
    }
    return order_new(p, flags);
}

static PyObject *prop_desc(PyObject *self, PyObject *unused)
{
    (void)unused;
    return prop_order(self, MOTE_Q_DESC);
}

static PyObject *prop_asc(PyObject *self, PyObject *unused)
{
    (void)unused;
    return prop_order(self, 0);
}

static PyObject *prop_nulls_last(PyObject *self, PyObject *unused)
{
    (void)unused;
    return prop_order(self, MOTE_Q_NULLS_LAST);
}

static PyObject *prop_get_name(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((PropertyObject *)self)->name);
}

static PyObject *prop_get_entity(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef((PyObject *)((PropertyObject *)self)->owner);
}

/* Note.parent.has(cond): objects whose to-one target, or any of whose to-many
 * targets, match cond (a condition on the target entity). */
static PyObject *prop_has(PyObject *self, PyObject *sub)
{
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    if (!f || !f->target) {
        PyErr_Format(PyExc_TypeError, "%R.has(): not a relation (motedb.ToOne / motedb.ToMany)",
                     self);
        return NULL;
    }
    if (!PyObject_TypeCheck(sub, &Cond_Type)) {
        PyErr_Format(PyExc_TypeError, "%R.has() takes a condition on %U, got %.100s", self,
                     f->target, Py_TYPE(sub)->tp_name);
        return NULL;
    }
    EntityInfo *ti = info_of_type(((CondObject *)sub)->owner);
    if (!ti || PyUnicode_Compare(ti->name, f->target) != 0) {
        PyErr_Format(PyExc_TypeError, "%R.has(): the condition %R is not on %U", self, sub,
                     f->target);
        return NULL;
    }
    CondObject *c = cond_alloc(C_LINK, p->owner);
    if (!c)
        return NULL;
    c->prop = (PropertyObject *)Py_NewRef(self);
    if (!(c->kids = PyTuple_Pack(1, sub))) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static PyObject *prop_get_target(PyObject *self, void *closure)
{
    (void)closure;
    FieldInfo *f = prop_field((PropertyObject *)self);
    return Py_NewRef(f && f->target ? f->target : Py_None);
}

static PyMethodDef prop_methods[] = {
    {"has", prop_has, METH_O,
     "Relations: has(cond) matches objects whose related object(s) match cond."},
    {"between", (PyCFunction)(void (*)(void))prop_between, METH_FASTCALL,
     "lo <= value <= hi."},
    {"in_", prop_in, METH_O, "value is one of the given values."},
    {"not_in", prop_not_in, METH_O, "value is none of the given values (and not NULL)."},
    {"is_null", prop_is_null, METH_NOARGS, "value is NULL (None)."},
    {"is_not_null", prop_is_not_null, METH_NOARGS, "value is not NULL."},
    {"equals", (PyCFunction)(void (*)(void))prop_equals, METH_VARARGS | METH_KEYWORDS,
     "equals(value, case_sensitive=True): ==, or case-insensitive for str and bytes."},
    {"not_equals", (PyCFunction)(void (*)(void))prop_not_equals, METH_VARARGS | METH_KEYWORDS,
     "not_equals(value, case_sensitive=True): !=, or case-insensitive for str and bytes."},
    {"startswith", (PyCFunction)(void (*)(void))prop_startswith, METH_VARARGS | METH_KEYWORDS,
     "startswith(s, case_sensitive=True)."},
    {"endswith", (PyCFunction)(void (*)(void))prop_endswith, METH_VARARGS | METH_KEYWORDS,
     "endswith(s, case_sensitive=True)."},
    {"contains", (PyCFunction)(void (*)(void))prop_contains, METH_VARARGS | METH_KEYWORDS,
     "contains(s, case_sensitive=True): substring."},
    {"desc", prop_desc, METH_NOARGS, "Order by this property, descending."},
    {"asc", prop_asc, METH_NOARGS, "Order by this property, ascending."},
    {"nulls_last", prop_nulls_last, METH_NOARGS, "Order ascending with NULLs last."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef prop_getset[] = {
    {"name", prop_get_name, NULL, "The property name.", NULL},
    {"entity", prop_get_entity, NULL, "The entity class.", NULL},
    {"target", prop_get_target, NULL, "Relations: the name of the related entity, else None.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Property_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Property",
    .tp_basicsize = sizeof(PropertyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A property of an entity class: the attribute of its objects, and the start "
              "of query conditions (Note.level == 10) and orderings (Note.level.desc()).",
    .tp_dealloc = prop_dealloc,
    .tp_traverse = prop_traverse,
    .tp_clear = prop_clear,
    .tp_repr = prop_repr,
    .tp_hash = prop_hash,
    .tp_richcompare = prop_richcompare,
    .tp_methods = prop_methods,
    .tp_getset = prop_getset,
    .tp_descr_get = prop_get,
    .tp_descr_set = prop_set,
};

/* ---- Store and transactions ------------------------------------------------------------ */

typedef struct TxnSlot {
    struct TxnSlot *next;
    unsigned long tid;
    mote_txn *txn;
    int write;
    int depth;   /* entered blocks (explicit transactions) */
    int doomed;  /* a nested block failed: roll back at the end */
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
    int readonly;
    PyObject *weakrefs;
} StoreObject;

typedef struct {
    PyObject_HEAD
    StoreObject *store;
    PyTypeObject *cls;
    EntityInfo *info;
    mote_entity *e;     /* NULL: open it again (its transaction rolled back) */
    mote_txn *pending;  /* opened in this uncommitted write transaction */
} BoxObject;

/* An object of box b from a record; it remembers the store (relations). */
static PyObject *box_build(BoxObject *b, const mote_record *r)
{
    PyObject *o = build_obj(b->cls, b->info, r);
    if (o && b->info->store_off >= 0)
        SLOT(o, b->info->store_off) = Py_NewRef((PyObject *)b->store);
    return o;
}

/* After a put of obj (new id `id`) in the thread's write transaction: write
 * its to-many links (motedb/_relations.py) and remember the store. */
static int after_put(BoxObject *b, PyObject *obj, uint64_t id)
{
    if (b->info->store_off >= 0)
        Py_XSETREF(SLOT(obj, b->info->store_off), Py_NewRef((PyObject *)b->store));
    if (!b->info->has_tomany)
        return 0;
    PyObject *idv = PyLong_FromUnsignedLongLong(id);
    PyObject *r = idv ? PyObject_CallFunctionObjArgs(g_after_put, (PyObject *)b, obj, idv, NULL)
                      : NULL;
    Py_XDECREF(idv);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static int closed_error(StoreObject *st)
{
    PyErr_Format(E_Closed, "store %U is closed", st->path);
    return -1;
}

static TxnSlot *find_txn(StoreObject *st)
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
            if (!committed)
                b->e = NULL;
        }
    }
}

static int begin_txn(StoreObject *st, int write, mote_txn **t)
{
    int rc;
    if (write) {
        Py_BEGIN_ALLOW_THREADS
        rc = mote_begin(st->s, 0, t);
        Py_END_ALLOW_THREADS
    } else {
        rc = mote_begin(st->s, MOTE_TXN_RDONLY, t);
    }
    return rc ? raise_rc(rc) : 0;
}

/* Commit (write: GIL released around the sync) or abort t. */
static int end_txn(StoreObject *st, mote_txn *t, int write, int commit)
{
    int rc = 0;
    if (write && commit) {
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

/* One operation: joins the thread's transaction or runs in its own. */
typedef struct {
    TxnSlot slot;
    TxnSlot *ts;
    int own;
} Op;

static int op_begin(StoreObject *st, int write, Op *op)
{
    if (!st->s)
        return closed_error(st);
    TxnSlot *cur = find_txn(st);
    if (cur) {
        if (write && !cur->write) {
            PyErr_SetString(E_Txn, "cannot write inside store.read(): use store.write()");
            return -1;
        }
        op->ts = cur;
        op->own = 0;
        return 0;
    }
    mote_txn *t = NULL;
    st->nimplicit++;
    if (begin_txn(st, write, &t) < 0) {
        st->nimplicit--;
        return -1;
    }
    memset(&op->slot, 0, sizeof op->slot);
    op->slot.tid = PyThread_get_thread_ident();
    op->slot.txn = t;
    op->slot.write = write;
    op->slot.depth = 1;
    op->slot.next = st->txns;
    st->txns = &op->slot;
    op->ts = &op->slot;
    op->own = 1;
    return 0;
}

enum { OP_FAIL = 0, OP_COMMIT = 1, OP_NOCHANGE = 2 };

/* End an operation: OP_COMMIT commits its own write transaction, OP_NOCHANGE
 * ends it without a commit, OP_FAIL rolls it back (an exception is set).
 * Returns 0, or -1 with an exception. */
static int op_end(StoreObject *st, Op *op, int how)
{
    if (!op->own)
        return how == OP_FAIL ? -1 : 0;
    unlink_txn(st, &op->slot);
    int rc = end_txn(st, op->slot.txn, op->slot.write, how == OP_COMMIT && op->slot.write);
    st->nimplicit--;
    return how == OP_FAIL || rc < 0 ? -1 : 0;
}

/* Another class of the same entity name was opened: the handles of the
 * other boxes of that name may not know its layout; they open it again. */
static void invalidate_same_name(BoxObject *b)
{
    StoreObject *st = b->store;
    if (!st->boxes)
        return;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(st->boxes, &pos, &k, &v)) {
        BoxObject *o = (BoxObject *)v;
        if (o != b && o->cls != b->cls && o->e && !strcmp(o->info->cname, b->info->cname))
            o->e = NULL;
    }
}

/* The entity handle of a box, opened in ts if needed. */
static int box_entity(BoxObject *b, TxnSlot *ts)
{
    if (b->e)
        return 0;
    invalidate_same_name(b);
    mote_entity *e;
    int rc = mote_entity_open(ts->txn, b->info->cname, b->info->defs, (unsigned)b->info->nf,
                              &e);
    if (rc) {
        if (rc == MOTE_NOTFOUND)
            rc = MOTE_SCHEMA;
        return raise_code(rc, NULL, NULL);
    }
    b->e = e;
    if (ts->write) {
        b->pending = ts->txn;
        b->store->npending++;
    }
    return 0;
}

static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "readonly", "create", "sync", NULL};
    PyObject *path;
    int readonly = 0, create = 1, sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$ppp:Store", kwlist, &path, &readonly,
                                     &create, &sync))
        return NULL;
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
              (sync ? 0 : MOTE_NOSYNC);
    mote_store *s = NULL;
    int rc;
    const char *cpath = PyBytes_AS_STRING(bpath);
    Py_BEGIN_ALLOW_THREADS
    rc = mote_open(cpath, &o, &s);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_code(rc, NULL, mote_last_open_error());
        goto fail;
    }
    st->s = s;
    Py_DECREF(bpath);
    return (PyObject *)st;
fail:
    Py_DECREF(bpath);
    Py_DECREF(st);
    return NULL;
}

static PyObject *store_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    StoreObject *st = (StoreObject *)self;
    if (!st->s)
        Py_RETURN_NONE;
    if (find_txn(st)) {
        PyErr_SetString(E_Txn, "close() inside a transaction of this store: end it first");
        return NULL;
    }
    if (st->nexplicit) {
        PyErr_Format(E_Busy, "store %U: cannot close, %d transaction(s) are still open in "
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
    mote_store *s = st->s;
    st->s = NULL;
    if (st->boxes) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(st->boxes, &pos, &k, &v))
            ((BoxObject *)v)->e = NULL;
        PyDict_Clear(st->boxes);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_close(s);
    Py_END_ALLOW_THREADS
    if (rc) {
        st->s = s;
        raise_rc(rc);
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
        mote_close(st->s);
        st->s = NULL;
    }
    store_clear(self);
    Py_XDECREF(st->path);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *store_box(PyObject *self, PyObject *cls)
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
    BoxObject *box = PyObject_GC_New(BoxObject, &Box_Type);
    if (!box)
        return NULL;
    box->store = (StoreObject *)Py_NewRef(self);
    box->cls = (PyTypeObject *)Py_NewRef(cls);
    box->info = in;
    box->e = NULL;
    box->pending = NULL;
    PyObject_GC_Track(box);
    TxnSlot *cur = find_txn(st);
    if (cur) {
        if (box_entity(box, cur) < 0)
            goto fail;
    } else {
        /* unchanged schema: a read transaction is enough */
        mote_txn *t;
        if (begin_txn(st, 0, &t) < 0)
            goto fail;
        mote_entity *e;
        int rc = mote_entity_open(t, in->cname, in->defs, (unsigned)in->nf, &e);
        mote_abort(t);
        if (!rc) {
            invalidate_same_name(box);
            box->e = e;
        } else if ((rc == MOTE_NOTFOUND || rc == MOTE_SCHEMA) && !st->readonly) {
            Op op; /* create or evolve it */
            if (op_begin(st, 1, &op) < 0)
                goto fail;
            int ok = box_entity(box, op.ts) == 0;
            if (op_end(st, &op, ok ? OP_COMMIT : OP_FAIL) < 0)
                goto fail;
            if (box->pending) { /* committed (the box was not in st->boxes yet) */
                box->pending = NULL;
                st->npending--;
            }
        } else {
            if (rc == MOTE_NOTFOUND)
                raise_code(MOTE_SCHEMA, NULL, NULL);
            else
                raise_rc(rc);
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

/* Transactions: store.write() / store.read() */

typedef struct {
    PyObject_HEAD
    StoreObject *store;
    TxnSlot *slot;
    int write;
    int state;   /* 0 new, 1 entered, 2 exited */
    int joined;  /* entered inside another transaction of the thread */
    unsigned long tid;
} TxnObject;

static PyObject *store_txn(PyObject *self, int write)
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
    t->state = 0;
    t->joined = 0;
    t->tid = 0;
    return (PyObject *)t;
}

static PyObject *store_write(PyObject *self, PyObject *unused)
{
    (void)unused;
    return store_txn(self, 1);
}

static PyObject *store_read(PyObject *self, PyObject *unused)
{
    (void)unused;
    return store_txn(self, 0);
}

static PyObject *txn_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    TxnObject *t = (TxnObject *)self;
    StoreObject *st = t->store;
    if (t->state != 0) {
        PyErr_SetString(E_Txn, "this transaction was already used: call store.write() or "
                        "store.read() again for a new one");
        return NULL;
    }
    if (!st->s) {
        closed_error(st);
        return NULL;
    }
    TxnSlot *cur = find_txn(st);
    if (cur) {
        if (t->write && !cur->write) {
            PyErr_SetString(E_Txn, "cannot start store.write() inside store.read()");
            return NULL;
        }
        cur->depth++;
        t->slot = cur;
        t->joined = 1;
    } else {
        TxnSlot *ts = PyMem_Calloc(1, sizeof *ts);
        if (!ts)
            return PyErr_NoMemory();
        st->nexplicit++;
        if (begin_txn(st, t->write, &ts->txn) < 0) {
            st->nexplicit--;
            PyMem_Free(ts);
            return NULL;
        }
        ts->tid = PyThread_get_thread_ident();
        ts->write = t->write;
        ts->depth = 1;
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
    int doomed = ts->doomed, rc;
    rc = end_txn(st, ts->txn, ts->write, ts->write && !exc && !doomed);
    PyMem_Free(ts);
    if (rc < 0)
        return -1;
    if (doomed && !exc && t->write) {
        PyErr_SetString(E_Txn, "transaction rolled back: an operation or a nested block in "
                        "it failed");
        return -1;
    }
    return 0;
}

static PyObject *txn_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    TxnObject *t = (TxnObject *)self;
    if (t->state != 1) {
        PyErr_SetString(E_Txn, t->state == 0 ? "transaction was not entered"
                                              : "transaction already ended");
        return NULL;
    }
    if (t->tid != PyThread_get_thread_ident()) {
        PyErr_SetString(E_Txn, "a transaction must end on the thread that started it");
        return NULL;
    }
    if (t->slot->depth > 1 && !t->joined) {
        PyErr_SetString(E_Txn, "transaction ended before the blocks nested in it");
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

static PyTypeObject Txn_Type = {
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

static PyMethodDef store_methods[] = {
    {"box", store_box, METH_O, "box(EntityClass) -> Box: the objects of one entity class."},
    {"write", store_write, METH_NOARGS, "A write transaction (context manager)."},
    {"read", store_read, METH_NOARGS, "A read transaction, a snapshot (context manager)."},
    {"close", store_close, METH_NOARGS, "Close the store (idempotent)."},
    {"__enter__", store_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))store_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"path", store_get_path, NULL, "The store file.", NULL},
    {"closed", store_get_closed, NULL, "True after close().", NULL},
    {"readonly", store_get_readonly, NULL, "True if opened read-only.", NULL},
    {"in_transaction", store_get_in_txn, NULL,
     "True if the calling thread is inside store.write() / store.read().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Store_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Store(path, *, readonly=False, create=True, sync=True): one open store file.",
    .tp_new = store_new,
    .tp_dealloc = store_dealloc,
    .tp_traverse = store_traverse,
    .tp_clear = store_clear,
    .tp_repr = store_repr,
    .tp_methods = store_methods,
    .tp_getset = store_getset,
    .tp_weaklistoffset = offsetof(StoreObject, weakrefs),
};

/* ---- Box ----------------------------------------------------------------------------------- */

static int box_traverse(PyObject *self, visitproc visit, void *arg)
{
    BoxObject *b = (BoxObject *)self;
    Py_VISIT(b->store);
    Py_VISIT(b->cls);
    return 0;
}

static int box_clear(PyObject *self)
{
    BoxObject *b = (BoxObject *)self;
    if (b->pending && b->store) {
        b->pending = NULL;
        b->store->npending--;
    }
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

static void release_keep(PyObject **keep, Py_ssize_t nk)
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
        PyErr_Format(E_NotFound, "%s: put(mode='update') of an object without id", in->cname);
        goto done;
    }
    Op op;
    if (op_begin(b->store, 1, &op) < 0)
        goto done;
    int ok = box_entity(b, op.ts) == 0;
    if (ok) {
        int rc = mote_put(op.ts->txn, b->e, id, vals, mode, &newid);
        if (rc)
            ok = raise_rc(rc) == 0;
        else if (after_put(b, obj, newid) < 0) {
            ok = 0;
            if (!op.own)
                op.ts->doomed = 1; /* the object is in the transaction, its links are not */
        }
    }
    if (op_end(b->store, &op, ok ? OP_COMMIT : OP_FAIL) < 0)
        goto done;
    if (!(res = PyLong_FromUnsignedLongLong(newid)))
        goto done;
    if (newid != id)
        set_slot(obj, in->id_off, res);
done:
    release_keep(keep, nk);
    if (vals != sv)
        PyMem_Free(vals);
    if (keep != sk)
        PyMem_Free(keep);
    return res;
}

static PyObject *box_put_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    BoxObject *b = (BoxObject *)self;
    unsigned mode;
    if (parse_mode(args, nargs, kwnames, 1, &mode, "put_many") < 0)
        return NULL;
    PyObject *seq = PySequence_Tuple(args[0]);
    if (!seq)
        return NULL;
    const EntityInfo *in = b->info;
    Py_ssize_t n = PyTuple_GET_SIZE(seq), nf = in->nf, nk = 0;
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
        if (marshal(b, PyTuple_GET_ITEM(seq, i), vals + i * nf, keep, &nk, &ids[i]) < 0)
            goto done;
        any_id |= ids[i] != 0;
    }
    if (mode == MOTE_PUT_UPDATE) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (!ids[i]) {
                PyErr_Format(E_NotFound, "%s: put_many(mode='update'): object %zd has no id",
                             in->cname, i);
                goto done;
            }
    }
    Op op;
    if (op_begin(b->store, 1, &op) < 0)
        goto done;
    int ok = box_entity(b, op.ts) == 0;
    if (ok) {
        size_t ndone = 0;
        int rc;
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
            snprintf(prefix, sizeof prefix, "put_many: object %zu of %zd: ", ndone, n);
            raise_code(rc, prefix, NULL);
            ok = 0;
            if (!op.own && ndone > 0)
                op.ts->doomed = 1; /* the transaction holds a part of the objects */
        }
        for (Py_ssize_t i = 0; ok && i < n; i++)
            if (after_put(b, PyTuple_GET_ITEM(seq, i), out[i]) < 0) {
                ok = 0;
                if (!op.own)
                    op.ts->doomed = 1;
            }
    }
    if (op_end(b->store, &op, ok ? OP_COMMIT : OP_FAIL) < 0)
        goto done;
    if (!(res = PyList_New(n)))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *idv = PyLong_FromUnsignedLongLong(out[i]);
        if (!idv) {
            Py_CLEAR(res);
            goto done;
        }
        if (out[i] != ids[i])
            set_slot(PyTuple_GET_ITEM(seq, i), in->id_off, idv);
        PyList_SET_ITEM(res, i, idv);
    }
done:
    if (keep)
        release_keep(keep, nk);
    PyMem_Free(vals);
    PyMem_Free(keep);
    PyMem_Free(ids);
    PyMem_Free(out);
    Py_DECREF(seq);
    return res;
}

static PyObject *box_get(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id(b, arg, &id) < 0)
        return NULL;
    Op op;
    if (op_begin(b->store, 0, &op) < 0)
        return NULL;
    PyObject *res = NULL;
    if (box_entity(b, op.ts) == 0) {
        mote_record r;
        int rc = mote_get(op.ts->txn, b->e, id, &r);
        if (rc == MOTE_NOTFOUND)
            res = Py_NewRef(Py_None);
        else if (rc)
            raise_rc(rc);
        else
            res = box_build(b, &r);
    }
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
    if (!res || op_begin(b->store, 0, &op) < 0) {
        Py_XDECREF(res);
        Py_DECREF(seq);
        return NULL;
    }
    int ok = box_entity(b, op.ts) == 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        uint64_t id;
        PyObject *o = NULL;
        mote_record r;
        if (parse_id(b, PySequence_Fast_GET_ITEM(seq, i), &id) < 0) {
            ok = 0;
            break;
        }
        int rc = mote_get(op.ts->txn, b->e, id, &r);
        if (rc == MOTE_NOTFOUND)
            o = Py_NewRef(Py_None);
        else if (rc)
            raise_rc(rc);
        else
            o = box_build(b, &r);
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
    if (!c.list || op_begin(b->store, 0, &op) < 0) {
        Py_XDECREF(c.list);
        return NULL;
    }
    int ok = box_entity(b, op.ts) == 0;
    if (ok) {
        int rc = mote_scan(op.ts->txn, b->e, scan_cb, &c);
        if (rc) {
            if (rc != -1)
                raise_rc(rc);
            ok = 0;
        }
    }
    if (op_end(b->store, &op, ok ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(c.list);
    return c.list;
}

static PyObject *box_count(PyObject *self, PyObject *unused)
{
    (void)unused;
    BoxObject *b = (BoxObject *)self;
    Op op;
    if (op_begin(b->store, 0, &op) < 0)
        return NULL;
    uint64_t n = 0;
    int ok = box_entity(b, op.ts) == 0;
    if (ok) {
        int rc = mote_count(op.ts->txn, b->e, &n);
        if (rc)
            ok = raise_rc(rc) == 0;
    }
    if (op_end(b->store, &op, ok ? OP_NOCHANGE : OP_FAIL) < 0)
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
    if (op_begin(b->store, 0, &op) < 0)
        return NULL;
    int ok = box_entity(b, op.ts) == 0, found = 0;
    if (ok) {
        int rc = mote_get(op.ts->txn, b->e, id, NULL);
        if (rc == MOTE_OK)
            found = 1;
        else if (rc != MOTE_NOTFOUND)
            ok = raise_rc(rc) == 0;
    }
    if (op_end(b->store, &op, ok ? OP_NOCHANGE : OP_FAIL) < 0)
        return NULL;
    return PyBool_FromLong(found);
}

static PyObject *box_remove(PyObject *self, PyObject *arg)
{
    BoxObject *b = (BoxObject *)self;
    uint64_t id;
    if (parse_id_or_obj(b, arg, &id) < 0)
        return NULL;
    Op op;
    if (op_begin(b->store, 1, &op) < 0)
        return NULL;
    int ok = box_entity(b, op.ts) == 0, found = 0;
    if (ok) {
        int rc = mote_remove(op.ts->txn, b->e, id);
        if (rc == MOTE_OK)
            found = 1;
        else if (rc != MOTE_NOTFOUND)
            ok = raise_rc(rc) == 0;
    }
    if (op_end(b->store, &op, !ok ? OP_FAIL : found ? OP_COMMIT : OP_NOCHANGE) < 0)
        return NULL;
    return PyBool_FromLong(found);
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
        if (parse_id_or_obj(b, PySequence_Fast_GET_ITEM(seq, i), &ids[i]) < 0) {
            Py_DECREF(seq);
            PyMem_Free(ids);
            return NULL;
        }
    Py_DECREF(seq);
    Op op;
    if (op_begin(b->store, 1, &op) < 0) {
        PyMem_Free(ids);
        return NULL;
    }
    uint64_t removed = 0;
    int ok = box_entity(b, op.ts) == 0, rc = MOTE_OK;
    if (ok) {
        mote_txn *t = op.ts->txn;
        mote_entity *e = b->e;
        Py_BEGIN_ALLOW_THREADS
        rc = mote_remove_many(t, e, ids, (size_t)n, &removed);
        Py_END_ALLOW_THREADS
        if (rc != MOTE_OK) {
            ok = raise_rc(rc) == 0;
            if (!op.own) /* a failed batch may have written part of it */
                op.ts->doomed = 1;
        }
    }
    PyMem_Free(ids);
    if (op_end(b->store, &op, !ok ? OP_FAIL : removed ? OP_COMMIT : OP_NOCHANGE) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(removed);
}

static PyObject *box_remove_all(PyObject *self, PyObject *unused)
{
    (void)unused;
    BoxObject *b = (BoxObject *)self;
    Op op;
    if (op_begin(b->store, 1, &op) < 0)
        return NULL;
    uint64_t removed = 0;
    int ok = box_entity(b, op.ts) == 0;
    if (ok) {
        int rc;
        mote_txn *t = op.ts->txn;
        mote_entity *e = b->e;
        Py_BEGIN_ALLOW_THREADS
        rc = mote_remove_all(t, e, &removed);
        Py_END_ALLOW_THREADS
        if (rc)
            ok = raise_rc(rc) == 0;
    }
    if (op_end(b->store, &op, !ok ? OP_FAIL : removed ? OP_COMMIT : OP_NOCHANGE) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(removed);
}

static PyObject *box_query(PyObject *self, PyObject *args);

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
    if (op_begin(b->store, 0, &op) < 0)
        return NULL;
    PyObject *res = NULL;
    uint64_t *ids = NULL;
    size_t n = 0;
    if (box_entity(b, op.ts) == 0) {
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
    }
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
    int ok = op_begin(b->store, 1, &op) == 0;
    if (ok) {
        unsigned prop = (unsigned)((PropertyObject *)args[0])->index;
        ok = box_entity(b, op.ts) == 0;
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
        if (!ok && !op.own)
            op.ts->doomed = 1;
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
    {"get", box_get, METH_O, "get(id) -> object or None."},
    {"get_many", box_get_many, METH_O, "get_many(ids) -> [object or None]."},
    {"all", box_all, METH_NOARGS, "all() -> [objects] in id order."},
    {"count", box_count, METH_NOARGS, "count() -> number of objects."},
    {"contains", box_contains, METH_O, "contains(id) -> bool."},
    {"remove", box_remove, METH_O, "remove(id or obj) -> True if it existed."},
    {"remove_many", box_remove_many, METH_O, "remove_many(ids or objs) -> number removed."},
    {"remove_all", box_remove_all, METH_NOARGS, "remove_all() -> number removed."},
    {"query", box_query, METH_VARARGS, "query(*conditions) -> Query (several: AND)."},
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

static PyTypeObject Box_Type = {
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

/* ---- Query --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    BoxObject *box;
    mote_query *mq;
    mote_entity *mqe;  /* the entity mq was built for */
    PyObject *cond;    /* root condition or NULL */
    PyObject *orders;  /* list of Order */
    uint64_t offset, limit;
    int limit_zero;
    int busy;
    Py_ssize_t *leaf_prop; /* the leaves of the built query: property index */
    int *leaf_node;        /* and node id */
    Py_ssize_t nleaves, capleaves;
    PyObject *params;      /* property index -> values given to set_parameter() */
    int has_link;          /* relation conditions: built in each run's transaction */
    TxnSlot *ts;           /* the transaction q_build runs in (relation conditions) */
    PyObject *subs;        /* list of the Query objects of relation conditions */
} QueryObject;

static int cond_has_link(CondObject *c)
{
    if (c->kind == C_LINK)
        return 1;
    if (c->kind == C_LEAF)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->kids); i++)
        if (cond_has_link((CondObject *)PyTuple_GET_ITEM(c->kids, i)))
            return 1;
    return 0;
}

static int q_set_values(QueryObject *q, Py_ssize_t prop, PyObject *vals);

static int q_build(QueryObject *q);

static int q_add_cond(QueryObject *q, CondObject *c, int *node)
{
    int rc;
    if (c->kind == C_LINK) { /* a query on the target entity, kept in q->subs */
        CondObject *sc = (CondObject *)PyTuple_GET_ITEM(c->kids, 0);
        PyObject *tb = store_box((PyObject *)q->box->store, (PyObject *)sc->owner);
        if (!tb)
            return -1;
        PyObject *args = PyTuple_Pack(1, (PyObject *)sc);
        QueryObject *sq = args ? (QueryObject *)box_query(tb, args) : NULL;
        Py_XDECREF(args);
        Py_DECREF(tb);
        if (!sq)
            return -1;
        rc = PyList_Append(q->subs, (PyObject *)sq);
        Py_DECREF(sq);
        if (rc < 0)
            return -1;
        sq->ts = q->ts;
        rc = box_entity(sq->box, q->ts) < 0 || q_build(sq) < 0;
        sq->ts = NULL;
        if (rc)
            return -1;
        rc = mote_query_link(q->mq, (unsigned)c->prop->index, sq->mq, node);
        return rc ? raise_rc(rc) : 0;
    }
    if (c->kind != C_LEAF) {
        Py_ssize_t n = PyTuple_GET_SIZE(c->kids);
        int *kids = PyMem_Malloc(sizeof *kids * (size_t)(n + 1));
        if (!kids) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (q_add_cond(q, (CondObject *)PyTuple_GET_ITEM(c->kids, i), &kids[i]) < 0) {
                PyMem_Free(kids);
                return -1;
            }
        rc = c->kind == C_AND ? mote_query_and(q->mq, kids, (size_t)n, node)
                              : mote_query_or(q->mq, kids, (size_t)n, node);
        PyMem_Free(kids);
        return rc ? raise_rc(rc) : 0;
    }
    FieldInfo *f = prop_field(c->prop);
    Py_ssize_t n = PyTuple_GET_SIZE(c->vals), nk = 0;
    mote_value *vals = PyMem_Malloc(sizeof *vals * (size_t)(n + 1));
    PyObject **keep = PyMem_Malloc(sizeof *keep * (size_t)(n + 1));
    int res = -1;
    if (!vals || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if ((f ? to_value(q->box->info->cname, f, PyTuple_GET_ITEM(c->vals, i), &vals[i], keep,
                          &nk, 0)
               : id_value(q->box->info->cname, PyTuple_GET_ITEM(c->vals, i), &vals[i])) < 0)
            goto done;
    rc = mote_query_cond(q->mq, f ? (unsigned)c->prop->index : MOTE_PROP_ID, c->op, vals,
                         (size_t)n, c->flags, node);
    res = rc ? raise_rc(rc) : 0;
    if (!f) /* set_parameter() names properties, not the id */
        goto done;
    if (!res && q->nleaves == q->capleaves) {
        Py_ssize_t cap = q->capleaves ? q->capleaves * 2 : 4;
        Py_ssize_t *lp = PyMem_Realloc(q->leaf_prop, sizeof *lp * (size_t)cap);
        if (lp)
            q->leaf_prop = lp;
        int *ln = lp ? PyMem_Realloc(q->leaf_node, sizeof *ln * (size_t)cap) : NULL;
        if (ln) {
            q->leaf_node = ln;
            q->capleaves = cap;
        } else {
            PyErr_NoMemory();
            res = -1;
        }
    }
    if (!res) {
        q->leaf_prop[q->nleaves] = c->prop->index;
        q->leaf_node[q->nleaves++] = *node;
    }
done:
    if (keep)
        release_keep(keep, nk);
    PyMem_Free(vals);
    PyMem_Free(keep);
    return res;
}

/* Build (or rebuild for a new entity handle) the C query. */
static int q_build(QueryObject *q)
{
    BoxObject *b = q->box;
    if (q->has_link && !q->ts)
        return 0; /* built when run */
    if (q->mq && q->mqe == b->e && !q->has_link)
        return 0;
    if (q->mq) {
        mote_query_free(q->mq);
        q->mq = NULL;
    }
    if (q->subs && PyList_SetSlice(q->subs, 0, PyList_GET_SIZE(q->subs), NULL) < 0)
        return -1;
    int rc = mote_query_new(b->e, &q->mq);
    if (rc)
        return raise_rc(rc);
    q->mqe = b->e;
    q->nleaves = 0;
    if (q->cond) {
        int node;
        if (q_add_cond(q, (CondObject *)q->cond, &node) < 0)
            goto fail;
        if ((rc = mote_query_where(q->mq, node)))
            goto fail_rc;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(q->orders); i++) {
        OrderObject *o = (OrderObject *)PyList_GET_ITEM(q->orders, i);
        if ((rc = mote_query_order(q->mq, (unsigned)o->prop->index, o->flags)))
            goto fail_rc;
    }
    if ((rc = mote_query_limit(q->mq, q->offset, q->limit)))
        goto fail_rc;
    if (q->params) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(q->params, &pos, &k, &v))
            if (q_set_values(q, PyLong_AsSsize_t(k), v) < 0)
                goto fail;
    }
    return 0;
fail_rc:
    raise_rc(rc);
fail:
    mote_query_free(q->mq);
    q->mq = NULL;
    q->mqe = NULL;
    return -1;
}

static int q_check_busy(QueryObject *q)
{
    if (q->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this Query is being run by another thread; use "
                        "one Query object per thread");
        return -1;
    }
    return 0;
}

static PyObject *box_query(PyObject *self, PyObject *args)
{
    BoxObject *b = (BoxObject *)self;
    PyObject *root = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *c = PyTuple_GET_ITEM(args, i);
        if (!PyObject_TypeCheck(c, &Cond_Type)) {
            PyErr_Format(PyExc_TypeError, "query() takes conditions such as %s.prop == value, "
                         "got %.100s", b->info->cname, Py_TYPE(c)->tp_name);
            Py_XDECREF(root);
            return NULL;
        }
        if (((CondObject *)c)->owner != b->cls) {
            PyErr_Format(PyExc_TypeError, "condition %R is on %s, not on %s", c,
                         ((CondObject *)c)->owner->tp_name, b->info->cname);
            Py_XDECREF(root);
            return NULL;
        }
        if (!root) {
            root = Py_NewRef(c);
        } else {
            PyObject *g = cond_group(C_AND, root, c);
            Py_DECREF(root);
            if (!(root = g))
                return NULL;
        }
    }
    QueryObject *q = PyObject_GC_New(QueryObject, &Query_Type);
    if (!q) {
        Py_XDECREF(root);
        return NULL;
    }
    q->box = (BoxObject *)Py_NewRef(self);
    q->mq = NULL;
    q->mqe = NULL;
    q->cond = root;
    q->orders = PyList_New(0);
    q->offset = q->limit = 0;
    q->limit_zero = 0;
    q->busy = 0;
    q->leaf_prop = NULL;
    q->leaf_node = NULL;
    q->nleaves = q->capleaves = 0;
    q->params = NULL;
    q->has_link = root ? cond_has_link((CondObject *)root) : 0;
    q->ts = NULL;
    q->subs = PyList_New(0);
    PyObject_GC_Track(q);
    if (!q->orders || !q->subs) {
        Py_DECREF(q);
        return NULL;
    }
    if (b->store->s && b->e && q_build(q) < 0) {
        Py_DECREF(q);
        return NULL;
    }
    return (PyObject *)q;
}

static int query_traverse(PyObject *self, visitproc visit, void *arg)
{
    QueryObject *q = (QueryObject *)self;
    Py_VISIT(q->box);
    Py_VISIT(q->cond);
    Py_VISIT(q->orders);
    Py_VISIT(q->params);
    Py_VISIT(q->subs);
    return 0;
}

static int query_clear(PyObject *self)
{
    QueryObject *q = (QueryObject *)self;
    Py_CLEAR(q->box);
    Py_CLEAR(q->cond);
    Py_CLEAR(q->orders);
    Py_CLEAR(q->params);
    Py_CLEAR(q->subs);
    return 0;
}

static void query_dealloc(PyObject *self)
{
    QueryObject *q = (QueryObject *)self;
    PyObject_GC_UnTrack(self);
    if (q->mq)
        mote_query_free(q->mq);
    PyMem_Free(q->leaf_prop);
    PyMem_Free(q->leaf_node);
    query_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *query_order_by(PyObject *self, PyObject *args)
{
    QueryObject *q = (QueryObject *)self;
    if (q_check_busy(q) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i), *o;
        if (PyObject_TypeCheck(a, &Property_Type))
            o = prop_order(a, 0);
        else if (PyObject_TypeCheck(a, &Order_Type))
            o = Py_NewRef(a);
        else {
            PyErr_Format(PyExc_TypeError, "order_by() takes properties or orderings such as "
                         "%s.prop.desc(), got %.100s", q->box->info->cname, Py_TYPE(a)->tp_name);
            return NULL;
        }
        if (!o)
            return NULL;
        if (((OrderObject *)o)->prop->owner != q->box->cls) {
            PyErr_Format(PyExc_TypeError, "order_by(%R): not a property of %s", o,
                         q->box->info->cname);
            Py_DECREF(o);
            return NULL;
        }
        int rc = PyList_Append(q->orders, o);
        if (rc == 0 && q->mq) {
            int mrc = mote_query_order(q->mq, (unsigned)((OrderObject *)o)->prop->index,
                                       ((OrderObject *)o)->flags);
            if (mrc)
                rc = raise_rc(mrc);
        }
        Py_DECREF(o);
        if (rc < 0)
            return NULL;
    }
    return Py_NewRef(self);
}

/* Give the leaf on property `prop` of the built query new values. */
static int q_set_values(QueryObject *q, Py_ssize_t prop, PyObject *vals)
{
    const EntityInfo *in = q->box->info;
    int node = -1;
    for (Py_ssize_t i = 0; i < q->nleaves; i++)
        if (q->leaf_prop[i] == prop) {
            if (node >= 0) {
                PyErr_Format(PyExc_ValueError, "set_parameter(): the query has several "
                             "conditions on %s.%s", in->cname, in->f[prop].cname);
                return -1;
            }
            node = q->leaf_node[i];
        }
    if (node < 0) {
        PyErr_Format(PyExc_ValueError, "set_parameter(): the query has no condition on %s.%s",
                     in->cname, in->f[prop].cname);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(vals), nk = 0;
    mote_value sv[4], *mv = n <= 4 ? sv : PyMem_Malloc(sizeof *mv * (size_t)n);
    PyObject *sk[4], **keep = n <= 4 ? sk : PyMem_Malloc(sizeof *keep * (size_t)n);
    int res = -1;
    if (!mv || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(vals, i);
        if (v == Py_None) {
            PyErr_Format(PyExc_TypeError, "%s.%s: cannot compare with None", in->cname,
                         in->f[prop].cname);
            goto done;
        }
        if (to_value(in->cname, &in->f[prop], v, &mv[i], keep, &nk, 0) < 0)
            goto done;
    }
    int rc = mote_query_set(q->mq, node, mv, (size_t)n);
    res = rc ? raise_rc(rc) : 0;
done:
    if (keep)
        release_keep(keep, nk);
    if (mv != sv)
        PyMem_Free(mv);
    if (keep != sk)
        PyMem_Free(keep);
    return res;
}

static PyObject *query_set_parameter(PyObject *self, PyObject *args)
{
    QueryObject *q = (QueryObject *)self;
    if (PyTuple_GET_SIZE(args) < 1 || !PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0),
                                                           &Property_Type)) {
        PyErr_SetString(PyExc_TypeError, "set_parameter(Entity.prop, value, ...) takes a "
                        "property and its new value(s)");
        return NULL;
    }
    PropertyObject *p = (PropertyObject *)PyTuple_GET_ITEM(args, 0);
    if (p->owner != q->box->cls || p->index < 0) {
        PyErr_Format(PyExc_ValueError, "set_parameter(): %R is not a property of %s",
                     (PyObject *)p, q->box->info->cname);
        return NULL;
    }
    if (q_check_busy(q) < 0)
        return NULL;
    PyObject *vals = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (!vals)
        return NULL;
    PyObject *key = PyLong_FromSsize_t(p->index);
    int rc = -1;
    if (key && (q->params || (q->params = PyDict_New()))) {
        if (!q->mq && q->box->e && q->box->store->s && q_build(q) < 0)
            rc = -1;
        else if (q->mq && q->mqe == q->box->e)
            rc = q_set_values(q, p->index, vals);
        else
            rc = 0; /* applied when the query is built */
        if (rc == 0)
            rc = PyDict_SetItem(q->params, key, vals);
    }
    Py_XDECREF(key);
    Py_DECREF(vals);
    return rc < 0 ? NULL : Py_NewRef(self);
}

static int q_count_arg(PyObject *v, uint64_t *out, const char *what)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s() takes an int, got %.100s", what, Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s() takes a non-negative int, got %R", what, v);
        return -1;
    }
    *out = x;
    return 0;
}

static PyObject *query_offset(PyObject *self, PyObject *arg)
{
    QueryObject *q = (QueryObject *)self;
    if (q_check_busy(q) < 0 || q_count_arg(arg, &q->offset, "offset") < 0)
        return NULL;
    if (q->mq)
        mote_query_limit(q->mq, q->offset, q->limit);
    return Py_NewRef(self);
}

static PyObject *query_limit(PyObject *self, PyObject *arg)
{
    QueryObject *q = (QueryObject *)self;
    uint64_t n;
    if (q_check_busy(q) < 0 || q_count_arg(arg, &n, "limit") < 0)
        return NULL;
    q->limit_zero = n == 0;
    q->limit = n;
    if (q->mq)
        mote_query_limit(q->mq, q->offset, q->limit);
    return Py_NewRef(self);
}

/* Start running: a transaction (op), the entity and the built query. */
static int q_start(QueryObject *q, int write, Op *op)
{
    if (q_check_busy(q) < 0)
        return -1;
    q->busy = 1; /* before op_begin, which may release the GIL */
    if (op_begin(q->box->store, write, op) < 0) {
        q->busy = 0;
        return -1;
    }
    q->ts = op->ts;
    int bad = box_entity(q->box, op->ts) < 0 || q_build(q) < 0;
    q->ts = NULL;
    if (bad) {
        q->busy = 0;
        op_end(q->box->store, op, OP_FAIL);
        return -1;
    }
    return 0;
}

static int q_ids(QueryObject *q, Op *op, uint64_t **ids, size_t *n)
{
    int rc;
    mote_txn *t = op->ts->txn;
    mote_query *mq = q->mq;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_query_ids(t, mq, ids, n);
    Py_END_ALLOW_THREADS
    return rc ? raise_rc(rc) : 0;
}

static PyObject *q_objects(QueryObject *q, Op *op, uint64_t *ids, size_t n)
{
    BoxObject *b = q->box;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        mote_record r;
        int rc = mote_get(op->ts->txn, b->e, ids[i], &r);
        PyObject *o = rc ? NULL : box_build(b, &r);
        if (rc)
            raise_rc(rc);
        if (!o) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, o);
    }
    return list;
}

static PyObject *query_find(PyObject *self, PyObject *unused)
{
    (void)unused;
    QueryObject *q = (QueryObject *)self;
    if (q->limit_zero)
        return PyList_New(0);
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    uint64_t *ids = NULL;
    size_t n = 0;
    PyObject *res = q_ids(q, &op, &ids, &n) < 0 ? NULL : q_objects(q, &op, ids, n);
    mote_free(ids);
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *query_first(PyObject *self, PyObject *unused)
{
    (void)unused;
    QueryObject *q = (QueryObject *)self;
    if (q->limit_zero)
        Py_RETURN_NONE;
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    mote_query_limit(q->mq, q->offset, 1);
    uint64_t *ids = NULL;
    size_t n = 0;
    PyObject *res = NULL;
    if (q_ids(q, &op, &ids, &n) == 0) {
        if (n == 0) {
            res = Py_NewRef(Py_None);
        } else {
            mote_record r;
            int rc = mote_get(op.ts->txn, q->box->e, ids[0], &r);
            if (rc)
                raise_rc(rc);
            else
                res = box_build(q->box, &r);
        }
    }
    mote_query_limit(q->mq, q->offset, q->limit);
    mote_free(ids);
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

/* Run a C query call that answers a number (count, or objects removed)
 * without the GIL; a write (remove) commits when it changed something and
 * dooms an outer transaction when it fails. */
static PyObject *q_run_number(QueryObject *q, int write,
                              int (*fn)(mote_txn *, mote_query *, uint64_t *))
{
    if (q->limit_zero)
        return PyLong_FromLong(0);
    Op op;
    if (q_start(q, write, &op) < 0)
        return NULL;
    uint64_t n = 0;
    int rc;
    mote_txn *t = op.ts->txn;
    mote_query *mq = q->mq;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(t, mq, &n);
    Py_END_ALLOW_THREADS
    q->busy = 0;
    if (rc) {
        raise_rc(rc);
        if (write && !op.own)
            op.ts->doomed = 1;
    }
    int outcome = rc ? OP_FAIL : write && n ? OP_COMMIT : OP_NOCHANGE;
    if (op_end(q->box->store, &op, outcome) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(n);
}

static PyObject *query_count(PyObject *self, PyObject *unused)
{
    (void)unused;
    return q_run_number((QueryObject *)self, 0, mote_query_count);
}

static PyObject *query_ids(PyObject *self, PyObject *unused)
{
    (void)unused;
    QueryObject *q = (QueryObject *)self;
    if (q->limit_zero)
        return PyList_New(0);
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    uint64_t *ids = NULL;
    size_t n = 0;
    PyObject *res = NULL;
    if (q_ids(q, &op, &ids, &n) == 0 && (res = PyList_New((Py_ssize_t)n))) {
        for (size_t i = 0; i < n; i++) {
            PyObject *x = PyLong_FromUnsignedLongLong(ids[i]);
            if (!x) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, x);
        }
    }
    mote_free(ids);
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *query_remove(PyObject *self, PyObject *unused)
{
    (void)unused;
    return q_run_number((QueryObject *)self, 1, mote_query_remove);
}

/* Field indexes (-1 = id) of projection arguments; all fields if none. */
static Py_ssize_t *q_projection(QueryObject *q, PyObject *args, Py_ssize_t *np)
{
    const EntityInfo *in = q->box->info;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (!n)
        n = in->nf + 1;
    Py_ssize_t *idx = PyMem_Malloc(sizeof *idx * (size_t)(n + 1));
    if (!idx) {
        PyErr_NoMemory();
        return NULL;
    }
    if (!PyTuple_GET_SIZE(args)) {
        for (Py_ssize_t i = 0; i < n; i++)
            idx[i] = i - 1;
        *np = n;
        return idx;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        Py_ssize_t k = -2;
        if (PyObject_TypeCheck(a, &Property_Type) &&
            ((PropertyObject *)a)->owner == q->box->cls) {
            k = ((PropertyObject *)a)->index;
        } else if (PyUnicode_Check(a)) {
            if (!PyUnicode_Compare(a, s_id))
                k = -1;
            for (Py_ssize_t j = 0; k == -2 && j < in->nf; j++)
                if (!PyUnicode_Compare(a, in->f[j].name))
                    k = j;
        }
        if (k == -2) {
            PyErr_Format(PyExc_ValueError, "%R is not a property of %s", a, in->cname);
            PyMem_Free(idx);
            return NULL;
        }
        idx[i] = k;
    }
    *np = n;
    return idx;
}

static PyObject *q_project(PyObject *self, PyObject *args, int dicts)
{
    QueryObject *q = (QueryObject *)self;
    Py_ssize_t np;
    Py_ssize_t *idx = q_projection(q, args, &np);
    if (!idx)
        return NULL;
    if (q->limit_zero) {
        PyMem_Free(idx);
        return PyList_New(0);
    }
    Op op;
    if (q_start(q, 0, &op) < 0) {
        PyMem_Free(idx);
        return NULL;
    }
    const EntityInfo *in = q->box->info;
    uint64_t *ids = NULL;
    size_t n = 0;
    PyObject *res = NULL;
    if (q_ids(q, &op, &ids, &n) == 0)
        res = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; res && i < n; i++) {
        mote_record r;
        int rc = mote_get(op.ts->txn, q->box->e, ids[i], &r);
        PyObject *row = rc ? NULL : dicts ? PyDict_New() : PyTuple_New(np);
        if (rc)
            raise_rc(rc);
        for (Py_ssize_t j = 0; row && j < np; j++) {
            PyObject *v = record_field(in, &r, idx[j]);
            if (!v) {
                Py_CLEAR(row);
                break;
            }
            if (dicts) {
                int e = PyDict_SetItem(row, idx[j] < 0 ? s_id : in->f[idx[j]].name, v);
                Py_DECREF(v);
                if (e < 0)
                    Py_CLEAR(row);
            } else {
                PyTuple_SET_ITEM(row, j, v);
            }
        }
        if (!row) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, (Py_ssize_t)i, row);
    }
    mote_free(ids);
    PyMem_Free(idx);
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *query_tuples(PyObject *self, PyObject *args) { return q_project(self, args, 0); }
static PyObject *query_dicts(PyObject *self, PyObject *args) { return q_project(self, args, 1); }

/* ---- aggregates: min, max, sum, avg (NULLs ignored) ---- */

enum { AGG_MIN, AGG_MAX, AGG_SUM, AGG_AVG };

typedef struct {
    int which, kind, mtype;
    unsigned prop;
    uint64_t n;           /* non-NULL values seen */
    __int128 isum;
    double fsum;
    mote_value best;      /* min / max; variable bytes in buf */
    char *buf;
    size_t cap;
    int rc;
} AggState;

static int agg_better(const AggState *a, const mote_value *v)
{
    int c;
    if (a->kind == K_FLOAT) {
        double x = v->v.f, y = a->best.v.f;
        int xn = isnan(x), yn = isnan(y); /* NaN sorts last */
        c = xn || yn ? xn - yn : (x > y) - (x < y);
    } else if (a->kind == K_STR || a->kind == K_BYTES) {
        size_t m = v->v.s.n < a->best.v.s.n ? v->v.s.n : a->best.v.s.n;
        c = m ? memcmp(v->v.s.p, a->best.v.s.p, m) : 0;
        if (!c)
            c = (v->v.s.n > a->best.v.s.n) - (v->v.s.n < a->best.v.s.n);
    } else {
        c = (v->v.i > a->best.v.i) - (v->v.i < a->best.v.i);
    }
    return a->which == AGG_MIN ? c < 0 : c > 0;
}

/* Runs without the GIL: only C calls and malloc. */
static void agg_run(AggState *a, mote_txn *t, mote_entity *e, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mote_record r;
        mote_value v;
        int rc = mote_get(t, e, ids[i], &r);
        if (!rc)
            rc = mote_record_get(&r, a->prop, &v, NULL);
        if (rc) {
            a->rc = rc;
            return;
        }
        if (v.null)
            continue;
        if (a->which == AGG_SUM || a->which == AGG_AVG) {
            if (a->kind == K_FLOAT)
                a->fsum += v.v.f;
            else
                a->isum += v.v.i;
        } else if (!a->n || agg_better(a, &v)) {
            a->best = v;
            if (a->kind == K_STR || a->kind == K_BYTES) {
                if (v.v.s.n > a->cap) {
                    char *nb = realloc(a->buf, v.v.s.n);
                    if (!nb) {
                        a->rc = MOTE_NOMEM;
                        return;
                    }
                    a->buf = nb;
                    a->cap = v.v.s.n;
                }
                if (v.v.s.n)
                    memcpy(a->buf, v.v.s.p, v.v.s.n);
                a->best.v.s.p = a->buf;
            }
        }
        a->n++;
    }
}

static PyObject *int128_to_py(__int128 x)
{
    if (x >= INT64_MIN && x <= INT64_MAX)
        return PyLong_FromLongLong((long long)x);
    int neg = x < 0;
    unsigned __int128 u = neg ? -(unsigned __int128)x : (unsigned __int128)x;
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(u >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)u);
    PyObject *sh = PyLong_FromLong(64), *r = NULL;
    if (hi && lo && sh) {
        PyObject *a = PyNumber_Lshift(hi, sh);
        PyObject *b = a ? PyNumber_Or(a, lo) : NULL;
        r = b && neg ? PyNumber_Negative(b) : Py_XNewRef(b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(sh);
    return r;
}

static PyObject *q_aggregate(PyObject *self, PyObject *arg, int which)
{
    static const char *names[] = {"min", "max", "sum", "avg"};
    QueryObject *q = (QueryObject *)self;
    const EntityInfo *in = q->box->info;
    if (!PyObject_TypeCheck(arg, &Property_Type) ||
        ((PropertyObject *)arg)->owner != q->box->cls || ((PropertyObject *)arg)->index < 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes a property of %s, got %R", names[which],
                     in->cname, arg);
        return NULL;
    }
    const FieldInfo *f = &in->f[((PropertyObject *)arg)->index];
    int numeric = f->kind == K_INT || f->kind == K_FLOAT;
    int ordered = numeric || f->kind == K_BOOL || f->kind == K_STR || f->kind == K_BYTES ||
                  f->kind == K_DATETIME || f->kind == K_DATE;
    if ((which >= AGG_SUM && !numeric) || !ordered) {
        PyErr_Format(PyExc_TypeError, "%s.%s: %s() of a %s property is not supported",
                     in->cname, f->cname, names[which], kind_expect[f->kind]);
        return NULL;
    }
    AggState a;
    memset(&a, 0, sizeof a);
    a.which = which;
    a.kind = f->kind;
    a.mtype = f->mtype;
    a.prop = (unsigned)((PropertyObject *)arg)->index;
    if (q->limit_zero)
        goto result;
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    uint64_t *ids = NULL;
    size_t n = 0;
    int ok = q_ids(q, &op, &ids, &n) == 0;
    if (ok) {
        mote_txn *t = op.ts->txn;
        mote_entity *e = q->box->e;
        Py_BEGIN_ALLOW_THREADS
        agg_run(&a, t, e, ids, n);
        Py_END_ALLOW_THREADS
        if (a.rc)
            ok = raise_rc(a.rc) == 0;
    }
    mote_free(ids);
    q->busy = 0;
    if (op_end(q->box->store, &op, ok ? OP_NOCHANGE : OP_FAIL) < 0) {
        free(a.buf);
        return NULL;
    }
result:;
    PyObject *res;
    if (which == AGG_SUM)
        res = f->kind == K_FLOAT ? PyFloat_FromDouble(a.fsum) : int128_to_py(a.isum);
    else if (!a.n)
        res = Py_NewRef(Py_None);
    else if (which == AGG_AVG)
        res = PyFloat_FromDouble(f->kind == K_FLOAT ? a.fsum / (double)a.n
                                                    : (double)a.isum / (double)a.n);
    else
        res = from_value(f, &a.best, 0);
    free(a.buf);
    return res;
}

static PyObject *query_min(PyObject *self, PyObject *arg) { return q_aggregate(self, arg, AGG_MIN); }
static PyObject *query_max(PyObject *self, PyObject *arg) { return q_aggregate(self, arg, AGG_MAX); }
static PyObject *query_sum(PyObject *self, PyObject *arg) { return q_aggregate(self, arg, AGG_SUM); }
static PyObject *query_avg(PyObject *self, PyObject *arg) { return q_aggregate(self, arg, AGG_AVG); }

static PyObject *query_plan(PyObject *self, PyObject *unused)
{
    (void)unused;
    QueryObject *q = (QueryObject *)self;
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    PyObject *res = PyUnicode_FromString(mote_query_plan(op.ts->txn, q->mq));
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *query_repr(PyObject *self)
{
    QueryObject *q = (QueryObject *)self;
    return PyUnicode_FromFormat("<motedb.Query on %s where %R order_by %R offset %llu limit "
                                "%llu>", q->box->info->cname, q->cond ? q->cond : Py_None,
                                q->orders, (unsigned long long)q->offset,
                                (unsigned long long)q->limit);
}

static PyMethodDef query_methods[] = {
    {"order_by", query_order_by, METH_VARARGS,
     "order_by(Note.a, Note.b.desc(), ...) -> self. Ties are in id order."},
    {"offset", query_offset, METH_O, "offset(n) -> self: skip n results."},
    {"limit", query_limit, METH_O, "limit(n) -> self: at most n results."},
    {"find", query_find, METH_NOARGS, "find() -> [objects]."},
    {"first", query_first, METH_NOARGS, "first() -> object or None."},
    {"count", query_count, METH_NOARGS, "count() -> int (after offset / limit)."},
    {"ids", query_ids, METH_NOARGS, "ids() -> [ids]."},
    {"remove", query_remove, METH_NOARGS, "remove() -> number of objects removed."},
    {"tuples", query_tuples, METH_VARARGS,
     "tuples(*props) -> [tuple]: the given properties (all, with the id first, if none)."},
    {"dicts", query_dicts, METH_VARARGS,
     "dicts(*props) -> [dict]: the given properties (all, with the id, if none)."},
    {"min", query_min, METH_O, "min(prop): smallest non-NULL value, or None."},
    {"max", query_max, METH_O, "max(prop): largest non-NULL value, or None."},
    {"sum", query_sum, METH_O, "sum(prop): sum of the non-NULL values (int or float)."},
    {"avg", query_avg, METH_O, "avg(prop): mean of the non-NULL values (float), or None."},
    {"set_parameter", query_set_parameter, METH_VARARGS,
     "set_parameter(Entity.prop, value, ...) -> self: new value(s) for the query's condition "
     "on that property (reuses the built query)."},
    {"plan", query_plan, METH_NOARGS, "plan() -> str: how the query runs (index or scan)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Query_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.Query",
    .tp_basicsize = sizeof(QueryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A query: box.query(conditions).order_by(...).offset(n).limit(n), then find(), "
              "first(), count(), ids(), remove(), tuples() or dicts(). Built once; run it as "
              "often as needed.",
    .tp_dealloc = query_dealloc,
    .tp_traverse = query_traverse,
    .tp_clear = query_clear,
    .tp_repr = query_repr,
    .tp_methods = query_methods,
};

/* ---- module --------------------------------------------------------------------------------- */

static PyObject *mod_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)self;
    static char *kwlist[] = {"prepare", "Decimal", "dumps", "loads", "missing", "rel_get",
                             "rel_set", "after_put", NULL};
    PyObject *prepare, *dec, *dumps, *loads, *missing, *rel_get, *rel_set, *after_put;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO", kwlist, &prepare, &dec, &dumps,
                                     &loads, &missing, &rel_get, &rel_set, &after_put))
        return NULL;
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

static PyMethodDef module_methods[] = {
    {"_init", (PyCFunction)(void (*)(void))mod_init, METH_VARARGS | METH_KEYWORDS,
     "Set the Python helpers (called by motedb/__init__.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "motedb._core", "MoteDB's C core.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

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
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI)
        return NULL;
    EntityMeta_Type.tp_base = &PyType_Type;
    PyTypeObject *types[] = {&EntityMeta_Type, &EntityBase_Type, &Property_Type, &Cond_Type,
                             &Order_Type, &Store_Type, &Box_Type, &Query_Type, &Txn_Type};
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
                           "Store", "Box", "Query", "Transaction"};
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
