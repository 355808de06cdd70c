/*
 * values.c — motedb values: Python objects to mote_value (checked against
 * the field kind and range) and back. Part of the _core extension (_core.h).
 */
#include "_core.h"
#include <datetime.h>

int values_init(void)
{
    PyDateTime_IMPORT;
    return PyDateTimeAPI ? 0 : -1;
}

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
        PyObject *off = PyObject_CallMethodNoArgs(v, ST.str_utcoffset);
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

/* A C-contiguous buffer of float32 (in this machine's order) that v exports,
 * as a memoryview (a new reference) in *mv: 1; v is not one: 0; it is one
 * of the wrong length: -1 (raised). */
static int float32_buffer(const char *ent, const FieldInfo *f, PyObject *v, PyObject **mv)
{
    *mv = NULL;
    if (!PyObject_CheckBuffer(v) || PyBytes_Check(v) || PyUnicode_Check(v))
        return 0;
    PyObject *m = PyMemoryView_FromObject(v);
    if (!m) {
        PyErr_Clear();
        return 0;
    }
    const Py_buffer *b = PyMemoryView_GET_BUFFER(m);
    const char *fmt = b->format;
    if (!fmt || (strcmp(fmt, "f") && strcmp(fmt, "<f") && strcmp(fmt, "=f")) ||
        b->itemsize != 4 || !PyBuffer_IsContiguous(b, 'C')) {
        Py_DECREF(m);
        return 0;
    }
    if ((size_t)b->len != (size_t)f->dim * 4) {
        PyErr_Format(PyExc_ValueError, "%s.%s: vector of %zd floats, expected %u", ent,
                     f->cname, b->len / 4, f->dim);
        Py_DECREF(m);
        return -1;
    }
    *mv = m;
    return 1;
}

long vector_nonfinite(const char *p, unsigned n, const char **what)
{
    for (unsigned i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + 4 * (size_t)i, 4);
        if (!isfinite(x)) {
            *what = isnan(x) ? "NaN" : "infinite";
            return (long)i;
        }
    }
    return -1;
}

/* v, a sequence of numbers (not a float32 buffer), as float32 bytes. */
static PyObject *vector_of_seq(const char *ent, const FieldInfo *f, PyObject *v)
{
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
        if (isfinite(d) && fabs(d) > FLT_MAX) { /* (PyErr_Format has no %g) */
            char num[32];
            snprintf(num, sizeof num, "%g", d);
            PyErr_Format(PyExc_OverflowError, "%s.%s: vector element %zd (%s) is out of range "
                         "for float32", ent, f->cname, i, num);
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

PyObject *vector_of(const char *ent, const FieldInfo *f, PyObject *v)
{
    PyObject *mv;
    int is = float32_buffer(ent, f, v, &mv);
    if (!is)
        return vector_of_seq(ent, f, v);
    PyObject *b = is < 0 ? NULL
                         : PyBytes_FromStringAndSize(PyMemoryView_GET_BUFFER(mv)->buf,
                                                     PyMemoryView_GET_BUFFER(mv)->len);
    Py_XDECREF(mv);
    return b;
}

/* The current exception as an object (new reference, NULL if none); the
 * error indicator is cleared. */
static PyObject *take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    Py_XDECREF(et);
    Py_XDECREF(tb);
    return ev;
#endif
}

/* A str that UTF-8 cannot hold (a lone surrogate, e.g. from surrogateescape
 * or a JSON "\ud800"): the same UnicodeEncodeError, its reason naming the
 * entity and property. Returns -1. */
static int not_utf8(const char *ent, const FieldInfo *f)
{
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyObject *exc = take_exception();
    Py_ssize_t start = 0, end = 0;
    PyObject *obj = exc ? PyUnicodeEncodeError_GetObject(exc) : NULL;
    if (obj && PyUnicodeEncodeError_GetStart(exc, &start) == 0 &&
        PyUnicodeEncodeError_GetEnd(exc, &end) == 0) {
        char reason[300];
        snprintf(reason, sizeof reason, "%s.%s: a str with a lone surrogate cannot be stored "
                 "(UTF-8 has no encoding for it)", ent, f->cname);
        PyObject *e2 = PyObject_CallFunction(PyExc_UnicodeEncodeError, "sOnns", "utf-8", obj,
                                             start, end, reason);
        if (e2) {
            PyErr_SetObject(PyExc_UnicodeEncodeError, e2);
            Py_DECREF(e2);
        }
    } else {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s.%s: the str cannot be encoded as UTF-8", ent,
                     f->cname);
    }
    Py_XDECREF(obj);
    Py_XDECREF(exc);
    return -1;
}

/* Take the current exception's message (str of it) and clear the exception. */
static void exc_message(PyObject **msg)
{
    PyObject *exc = take_exception();
    *msg = exc ? PyObject_Str(exc) : NULL;
    Py_XDECREF(exc);
    PyErr_Clear();
}

/* ---- values: Python -> mote_value, one function a kind ------------------------ */

/* A to-one relation given as an object of its target entity: its id. */
static int toone_obj(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out)
{
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
    out->v.i = (int64_t)x;
    return 0;
}

/* A to-one relation given as an id (0: none). */
static int toone_id(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out)
{
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

static int int_of(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out, int put)
{
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

static int float_of(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out, int put)
{
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

/* out points at bytes that obj owns: obj (a new reference) goes to keep. */
static int keep_bytes(PyObject *obj, const char *p, Py_ssize_t n, mote_value *out,
                      PyObject **keep, Py_ssize_t *nk)
{
    keep[(*nk)++] = obj;
    out->v.s.p = p;
    out->v.s.n = (size_t)n;
    return 0;
}

/* A str's UTF-8 (tmp: a new reference to the str, kept). */
static int text_of(const char *ent, const FieldInfo *f, PyObject *tmp, mote_value *out,
                   PyObject **keep, Py_ssize_t *nk)
{
    if (!tmp)
        return -1;
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(tmp, &n);
    if (!p) {
        Py_DECREF(tmp);
        return not_utf8(ent, f);
    }
    return keep_bytes(tmp, p, n, out, keep, nk);
}

static int bytes_of(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
                    PyObject **keep, Py_ssize_t *nk)
{
    PyObject *tmp;
    if (PyBytes_Check(v))
        tmp = Py_NewRef(v);
    else if (PyByteArray_Check(v) || PyMemoryView_Check(v))
        tmp = PyBytes_FromObject(v);
    else
        return wrong_type(ent, f, v);
    if (!tmp)
        return -1;
    return keep_bytes(tmp, PyBytes_AS_STRING(tmp), PyBytes_GET_SIZE(tmp), out, keep, nk);
}

static int decimal_of(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
                      PyObject **keep, Py_ssize_t *nk)
{
    if (Py_IS_TYPE(v, (PyTypeObject *)ST.Decimal)) {
        /* rows often put the same Decimal object (a default, a value read
         * back: memo_decimal): str() once for it. An exact Decimal only,
         * whose text its (immutable) value fixes; the reference held keeps
         * its address from being another's. */
        FieldInfo *mf = (FieldInfo *)f;
        if (v != mf->put_dec) {
            PyObject *t = PyObject_Str(v);
            if (!t)
                return -1;
            Py_XSETREF(mf->put_dec, Py_NewRef(v));
            Py_XSETREF(mf->put_text, t);
        }
        return text_of(ent, f, Py_NewRef(mf->put_text), out, keep, nk);
    }
    int ok = PyLong_Check(v) && !PyBool_Check(v);
    if (!ok && (ok = PyObject_IsInstance(v, ST.Decimal)) < 0)
        return -1;
    if (!ok)
        return wrong_type(ent, f, v);
    return text_of(ent, f, PyObject_Str(v), out, keep, nk);
}

/* dict / list: the C JSON writer's UTF-8 bytes, or json's encoder's str for
 * what it does not cover. */
static int json_of(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
                   PyObject **keep, Py_ssize_t *nk)
{
    if (f->kind == K_DICT ? !PyDict_Check(v) : !PyList_Check(v))
        return wrong_type(ent, f, v);
    PyObject *tmp = json_text(v);
    if (tmp && PyBytes_Check(tmp))
        return keep_bytes(tmp, PyBytes_AS_STRING(tmp), PyBytes_GET_SIZE(tmp), out, keep, nk);
    if (!tmp) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) &&
            !PyErr_ExceptionMatches(PyExc_ValueError) &&
            !PyErr_ExceptionMatches(PyExc_RecursionError)) /* circular */
            return -1;
        PyObject *why = NULL;
        exc_message(&why);
        PyErr_Format(PyExc_ValueError, "%s.%s: value is not JSON serialisable: %S", ent,
                     f->cname, why ? why : Py_None);
        Py_XDECREF(why);
        return -1;
    }
    return text_of(ent, f, tmp, out, keep, nk);
}

/*
 * Convert v, the value of field f, into *out. Every object whose memory *out
 * points into is stored, as a new reference, in keep[(*nk)++] (at most one per
 * call). `put` = 1 for stored values (range checks of the property type);
 * query values pass 0 and only need to fit int64 / float64.
 */
int to_value(const char *ent, const FieldInfo *f, PyObject *v, mote_value *out,
             PyObject **keep, Py_ssize_t *nk, int put)
{
    if (f->kind == K_TOMANY) { /* links are written by ST.after_put */
        out->null = 1;
        return 0;
    }
    out->null = 0;
    if (f->kind == K_TOONE && v != Py_None && !PyLong_Check(v))
        return toone_obj(ent, f, v, out);
    if (v == Py_None) {
        if (f->flags & MOTE_P_NULLABLE) {
            out->null = 1;
            return 0;
        }
        PyErr_Format(PyExc_TypeError, "%s.%s: None is not allowed (declare the property as "
                     "'%s | None' to allow it)", ent, f->cname, kind_expect[f->kind]);
        return -1;
    }
    switch (f->kind) {
    case K_BOOL:
        if (v != Py_True && v != Py_False)
            return wrong_type(ent, f, v);
        out->v.i = v == Py_True;
        return 0;
    case K_INT:
        return int_of(ent, f, v, out, put);
    case K_TOONE:
        return toone_id(ent, f, v, out);
    case K_FLOAT:
        return float_of(ent, f, v, out, put);
    case K_STR: {
        if (!PyUnicode_Check(v))
            return wrong_type(ent, f, v);
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(v, &n);
        if (!p)
            return not_utf8(ent, f);
        return keep_bytes(Py_NewRef(v), p, n, out, keep, nk);
    }
    case K_BYTES:
        return bytes_of(ent, f, v, out, keep, nk);
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
    case K_DECIMAL:
        return decimal_of(ent, f, v, out, keep, nk);
    case K_DICT:
    case K_LIST:
        return json_of(ent, f, v, out, keep, nk);
    case K_VECTOR: {
        /* a float32 buffer (NumPy) is read in place, else the floats are
         * gathered into a bytes; either is kept until the put is done */
        PyObject *tmp;
        int is = float32_buffer(ent, f, v, &tmp);
        if (is < 0 || (!is && !(tmp = vector_of_seq(ent, f, v))))
            return -1;
        const char *p = is ? PyMemoryView_GET_BUFFER(tmp)->buf : PyBytes_AS_STRING(tmp);
        Py_ssize_t n = is ? PyMemoryView_GET_BUFFER(tmp)->len : PyBytes_GET_SIZE(tmp);
        const char *what;
        long bad = f->hdist ? vector_nonfinite(p, f->dim, &what) : -1;
        if (bad >= 0) { /* (the C layer would say MOTE_RANGE) */
            PyErr_Format(PyExc_ValueError, "%s.%s: component %ld of the vector is %s: an indexed "
                         "vector must be finite", ent, f->cname, bad, what);
            Py_DECREF(tmp);
            return -1;
        }
        return keep_bytes(tmp, p, n, out, keep, nk);
    }
    default:
        PyErr_SetString(PyExc_SystemError, "motedb: unknown field kind");
        return -1;
    }
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

static inline PyObject *value_obj(const FieldInfo *f, const mote_value *v);

/* A value the object does not have (mote_record_get's *absent): the
 * property's default, else zero or empty (None if nullable). Out of line,
 * so that the conversion (value_obj) stays inlined into build_obj. */
__attribute__((noinline)) static PyObject *from_absent(const FieldInfo *f, const mote_value *v)
{
    if (f->factory)
        return PyObject_CallNoArgs(f->factory);
    if (f->dflt)
        return Py_NewRef(f->dflt);
    mote_value zero;
    memset(&zero, 0, sizeof zero);
    return value_obj(f, v->null && !(f->flags & MOTE_P_NULLABLE) ? &zero : v);
}

PyObject *from_value(const FieldInfo *f, const mote_value *v, int absent)
{
    return absent ? from_absent(f, v) : value_obj(f, v);
}

/* Rows often repeat a value (a status, a category, a default), so a str or
 * Decimal property hands out its last value read again while the stored
 * text is the same, as pyarrow's to_pandas deduplicates strings: a compare
 * instead of a decode, an allocation and (for a Decimal) a call that
 * parses its text. Short ASCII strings only (their characters are their
 * UTF-8 bytes). A property whose values differ (names, text) stops trying
 * after MEMO_MISSES misses in a row, for MEMO_REST values: a miss costs
 * the compare and moving the reference (T1's get of bench/orm, a unique
 * text per object, ~0.41 µs: within the noise between runs, ten pairs).
 * The field info is the cache's home, not its definition; the GIL guards
 * it (the module does not declare itself free-threading safe, so a
 * free-threaded CPython keeps the GIL on while it is loaded). */
#define MEMO_STR_MAX 64
#define MEMO_MISSES 8
#define MEMO_REST 256

/* Is the memo to be tried for this value? */
static inline int memo_try(FieldInfo *f)
{
    if (!f->memo_skip)
        return 1;
    f->memo_skip--;
    return 0;
}

/* The value read missed the memo: keep it as the memo (keep != 0), or give
 * up for a while after too many misses in a row. */
static void memo_missed(FieldInfo *f, PyObject *v, int keep)
{
    if (++f->memo_miss >= MEMO_MISSES) {
        f->memo_miss = 0;
        f->memo_skip = MEMO_REST;
        Py_CLEAR(f->memo);
    } else if (keep) {
        Py_XSETREF(f->memo, Py_NewRef(v));
    }
}

__attribute__((noinline)) static PyObject *memo_str(const FieldInfo *cf, const char *p, size_t n)
{
    FieldInfo *f = (FieldInfo *)cf;
    if (n > MEMO_STR_MAX || !memo_try(f))
        return PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "surrogateescape");
    if (f->memo && (size_t)PyUnicode_GET_LENGTH(f->memo) == n &&
        (!n || !memcmp(PyUnicode_DATA(f->memo), p, n))) { /* (p: NULL when empty) */
        f->memo_miss = 0;
        return Py_NewRef(f->memo);
    }
    PyObject *u = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "surrogateescape");
    if (u)
        memo_missed(f, u, PyUnicode_IS_ASCII(u));
    return u;
}

__attribute__((noinline)) static PyObject *memo_decimal(const FieldInfo *cf, const char *p, size_t n)
{
    FieldInfo *f = (FieldInfo *)cf;
    int try = n <= sizeof f->memo_text && memo_try(f);
    if (try && f->memo && f->memo_n == n && (!n || !memcmp(f->memo_text, p, n))) {
        f->memo_miss = 0;
        return Py_NewRef(f->memo);
    }
    PyObject *s = n ? PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "strict")
                    : PyUnicode_FromString("0");
    if (!s)
        return NULL;
    PyObject *r = PyObject_CallOneArg(ST.Decimal, s);
    Py_DECREF(s);
    if (r && try) {
        memo_missed(f, r, 1);
        if (n)
            memcpy(f->memo_text, p, n);
        f->memo_n = (uint8_t)n;
    }
    return r;
}

/* The Python object of a stored value. */
static inline PyObject *value_obj(const FieldInfo *f, const mote_value *v)
{
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
    case K_STR: return memo_str(f, v->v.s.p, v->v.s.n);
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
    case K_DECIMAL: return memo_decimal(f, v->v.s.p, v->v.s.n);
    case K_DICT:
    case K_LIST: {
        if (!v->v.s.n)
            return f->kind == K_DICT ? PyDict_New() : PyList_New(0);
        return json_value(v->v.s.p, v->v.s.n);
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
PyObject *build_obj(PyTypeObject *cls, const EntityInfo *in, const mote_record *r)
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
        PyObject *x = absent ? from_absent(f, &v) : value_obj(f, &v);
        if (!x)
            goto fail;
        if (absent) /* (a default factory may return anything) */
            kept_slot(o, in, f->kind, x);
        SLOT(o, f->offset) = x;
    }
    return o;
fail:
    Py_DECREF(o);
    return NULL;
}

/* One field of a record (index -1: the id). New reference. */
PyObject *record_field(const EntityInfo *in, const mote_record *r, Py_ssize_t i)
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
