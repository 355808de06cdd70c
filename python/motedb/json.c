/*
 * json.c — JSON properties: the compact text json's encoder gives (written
 * here in C for the built-in types, else by json's encoder) and the values
 * json.loads gives (read here in C for the text this module writes, else by
 * json's scanner or json.loads). Part of the _core extension (_core.h).
 */
#include "_core.h"

/* ST.dumps is json's C encoder built once (it returns the text in chunks), or
 * any callable returning the text. */
static PyObject *json_dump(PyObject *v)
{
    PyObject *r = PyObject_CallFunction(ST.dumps, "Oi", v, 0);
    if (!r || PyUnicode_Check(r))
        return r;
    PyObject *sep = PyUnicode_FromStringAndSize(NULL, 0);
    PyObject *text = sep ? PyUnicode_Join(sep, r) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(r);
    return text;
}

/*
 * The usual JSON values are written here in C, straight into UTF-8: dicts
 * with str keys, lists, tuples, str, int (64-bit), float, bool and None of
 * the exact built-in types. The text is the one json_dump gives (compact
 * separators, non-ASCII kept, floats as repr, NaN/Infinity as json writes
 * them); json's encoder builds a list of string chunks and joins them,
 * which cost more than the rest of a put of an object with two small JSON
 * properties. Anything else (subclasses, other key types, big ints, lone
 * surrogates, nesting deeper than JB_DEPTH) returns JB_OTHER and the whole
 * value goes through json_dump, which also gives its errors.
 */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    char small[512];
} jbuf;

enum { JB_OK = 0, JB_ERR = -1, JB_OTHER = 1, JB_DEPTH = 64 };

static int jb_room(jbuf *b, size_t more)
{
    if (b->n + more <= b->cap)
        return JB_OK;
    size_t cap = b->cap * 2 > b->n + more ? b->cap * 2 : b->n + more;
    char *np = b->p == b->small ? PyMem_Malloc(cap) : PyMem_Realloc(b->p, cap);
    if (!np) {
        PyErr_NoMemory();
        return JB_ERR;
    }
    if (b->p == b->small)
        memcpy(np, b->small, b->n);
    b->p = np;
    b->cap = cap;
    return JB_OK;
}

static int jb_put(jbuf *b, const char *s, size_t n)
{
    if (jb_room(b, n))
        return JB_ERR;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return JB_OK;
}

static inline int jb_ch(jbuf *b, char c)
{
    if (b->n == b->cap && jb_room(b, 1))
        return JB_ERR;
    b->p[b->n++] = c;
    return JB_OK;
}

/* A 64-bit int in decimal, as json writes it (snprintf cost ~400
 * instructions a number: a third of a Test 3 object's JSON). */
static int jb_int(jbuf *b, long long x)
{
    char tmp[20];
    unsigned long long u = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (jb_room(b, n + 1))
        return JB_ERR;
    if (x < 0)
        b->p[b->n++] = '-';
    while (n)
        b->p[b->n++] = tmp[--n];
    return JB_OK;
}

static void jb_init(jbuf *b)
{
    b->p = b->small;
    b->n = 0;
    b->cap = sizeof b->small;
}

static void jb_free(jbuf *b)
{
    if (b->p != b->small)
        PyMem_Free(b->p);
}

/* A str as a JSON string: " \ and control characters escaped as json does. */
static int jb_str(jbuf *b, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) { /* lone surrogates: json_dump's text then fails the same way */
        PyErr_Clear();
        return JB_OTHER;
    }
    if (jb_room(b, (size_t)n * 6 + 2)) /* every byte may become \u00XX */
        return JB_ERR;
    char *o = b->p + b->n;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = "0123456789abcdef"[c >> 4];
            *o++ = "0123456789abcdef"[c & 15];
        }
    }
    *o++ = '"';
    b->n = (size_t)(o - b->p);
    return JB_OK;
}

static int jb_value(jbuf *b, PyObject *v, int depth)
{
    if (v == Py_None)
        return jb_put(b, "null", 4);
    if (v == Py_True)
        return jb_put(b, "true", 4);
    if (v == Py_False)
        return jb_put(b, "false", 5);
    if (PyUnicode_CheckExact(v))
        return jb_str(b, v);
    if (PyLong_CheckExact(v)) {
        int ov;
        long long x = PyLong_AsLongLongAndOverflow(v, &ov);
        if (ov)
            return JB_OTHER;
        return jb_int(b, x);
    }
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!isfinite(d))
            return isnan(d) ? jb_put(b, "NaN", 3)
                            : d > 0 ? jb_put(b, "Infinity", 8) : jb_put(b, "-Infinity", 9);
        char *r = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!r)
            return JB_ERR;
        int rc = jb_put(b, r, strlen(r));
        PyMem_Free(r);
        return rc;
    }
    if (depth >= JB_DEPTH)
        return JB_OTHER;
    int rc;
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
        int list = PyList_CheckExact(v);
        if ((rc = jb_ch(b, '[')))
            return rc;
        for (Py_ssize_t i = 0; i < (list ? PyList_GET_SIZE(v) : PyTuple_GET_SIZE(v)); i++) {
            if (i && (rc = jb_ch(b, ',')))
                return rc;
            if ((rc = jb_value(b, list ? PyList_GET_ITEM(v, i) : PyTuple_GET_ITEM(v, i),
                               depth + 1)))
                return rc;
        }
        return jb_ch(b, ']');
    }
    if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        if ((rc = jb_ch(b, '{')))
            return rc;
        for (int first = 1; PyDict_Next(v, &pos, &k, &x); first = 0) {
            if (!PyUnicode_CheckExact(k))
                return JB_OTHER; /* json turns int, float, bool, None keys into text */
            if ((!first && (rc = jb_ch(b, ','))) || (rc = jb_str(b, k)) ||
                (rc = jb_ch(b, ':')) || (rc = jb_value(b, x, depth + 1)))
                return rc;
        }
        return jb_ch(b, '}');
    }
    return JB_OTHER;
}

/* v (a dict or list) as JSON text: new bytes (UTF-8), or a str from json_dump
 * when the C writer does not cover it; NULL with an exception. */
PyObject *json_text(PyObject *v)
{
    jbuf b;
    jb_init(&b);
    int rc = jb_value(&b, v, 0);
    PyObject *r = rc == JB_OK ? PyBytes_FromStringAndSize(b.p, (Py_ssize_t)b.n)
                              : rc == JB_OTHER ? json_dump(v) : NULL;
    jb_free(&b);
    return r;
}

/*
 * The reader of that text: the compact JSON jb_value writes (no whitespace;
 * escapes \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogates;
 * NaN, Infinity, -Infinity as json reads them) becomes Python values in C,
 * as json.loads would build them. Anything else (whitespace, surrogate
 * escapes, bad text, nesting deeper than JB_DEPTH) sets *other and the whole
 * text goes to json_load, which also gives its errors.
 */
static PyObject *json_load(PyObject *s);

typedef struct jrd {
    const char *p, *end;
    int other;
} jrd;

static PyObject *jr_other(jrd *r)
{
    r->other = 1;
    return NULL;
}

static int jr_lit(jrd *r, const char *lit, size_t n)
{
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n))
        return 0;
    r->p += n;
    return 1;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Keys repeat from object to object (the same few in every record of a
 * property), so a short ASCII key is made once and handed out again, as
 * json's decoder memoizes keys within a document: no allocation, and a
 * string whose hash is already known to the dict it goes into. A small
 * direct-mapped table, for the life of the process (256 keys at most),
 * guarded by the GIL as the field memos of values.c are. */
#define KEY_MEMO 256
#define KEY_MEMO_MAX 32
static PyObject *key_memo[KEY_MEMO];

static PyObject *memo_key(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    PyObject **e = &key_memo[(h ^ (h >> 16)) & (KEY_MEMO - 1)];
    if (*e && (size_t)PyUnicode_GET_LENGTH(*e) == n && !memcmp(PyUnicode_DATA(*e), s, n))
        return Py_NewRef(*e);
    PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "strict");
    if (u && PyUnicode_IS_ASCII(u) && PyObject_Hash(u) != -1)
        Py_XSETREF(*e, Py_NewRef(u));
    return u;
}

static PyObject *jr_str(jrd *r, int key)
{
    const char *s = ++r->p, *q = s;
    while (q < r->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (q < r->end && *q == '"') { /* no escapes: the bytes as they are */
        r->p = q + 1;
        PyObject *u = key && q - s <= KEY_MEMO_MAX ? memo_key(s, (size_t)(q - s))
                                                   : PyUnicode_DecodeUTF8(s, q - s, "strict");
        if (!u)
            PyErr_Clear();
        return u ? u : jr_other(r);
    }
    jbuf b;
    jb_init(&b);
    for (q = s;;) { /* again from the start, unescaping */
        if (jb_room(&b, 3)) { /* room for one more UTF-8 character */
            jb_free(&b);
            return NULL;
        }
        char *o = b.p + b.n;
        if (q >= r->end)
            break; /* unterminated */
        char c = *q++;
        if (c == '"') {
            r->p = q;
            PyObject *u = PyUnicode_DecodeUTF8(b.p, (Py_ssize_t)b.n, "strict");
            jb_free(&b);
            if (!u)
                PyErr_Clear();
            return u ? u : jr_other(r);
        }
        if ((unsigned char)c < 0x20)
            break; /* json refuses raw control characters */
        if (c == '\\') {
            if (q >= r->end)
                break;
            switch (c = *q++) {
            case '"': case '\\': case '/': break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                int u = 0;
                for (int i = 0; i < 4; i++) {
                    int h = q < r->end ? hexval(*q++) : -1;
                    if (h < 0)
                        u = -1;
                    if (u >= 0)
                        u = u * 16 + h;
                }
                if (u < 0 || (u >= 0xD800 && u <= 0xDFFF))
                    goto other; /* surrogates: json_load pairs them */
                if (u < 0x80) {
                    *o++ = (char)u;
                } else if (u < 0x800) {
                    *o++ = (char)(0xC0 | (u >> 6));
                    *o++ = (char)(0x80 | (u & 0x3F));
                } else {
                    *o++ = (char)(0xE0 | (u >> 12));
                    *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (u & 0x3F));
                }
                b.n = (size_t)(o - b.p);
                continue;
            }
            default:
                goto other; /* an escape this reader leaves to json */
            }
        }
        b.p[b.n++] = c;
    }
other:
    jb_free(&b);
    return jr_other(r);
}

static PyObject *jr_num(jrd *r)
{
    const char *s = r->p, *q = s;
    int is_float = 0;
    if (q < r->end && *q == '-')
        q++;
    if (q < r->end && *q == '0')
        q++;
    else if (q < r->end && *q >= '1' && *q <= '9')
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    else
        return jr_other(r);
    if (q < r->end && *q == '.') {
        is_float = 1;
        if (++q >= r->end || *q < '0' || *q > '9')
            return jr_other(r);
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        is_float = 1;
        if (++q < r->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return jr_other(r);
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    size_t n = (size_t)(q - s);
    if (!is_float && n <= 18) { /* fits an int64: no text round trip */
        const char *d = s + (*s == '-');
        long long v = 0;
        for (; d < q; d++)
            v = v * 10 + (*d - '0');
        r->p = q;
        return PyLong_FromLongLong(*s == '-' ? -v : v);
    }
    char num[64];
    if (n >= sizeof num)
        return jr_other(r); /* long numbers: json_load */
    memcpy(num, s, n);
    num[n] = 0;
    r->p = q;
    if (!is_float)
        return PyLong_FromString(num, NULL, 10);
    double d = PyOS_string_to_double(num, NULL, NULL);
    return d == -1.0 && PyErr_Occurred() ? NULL : PyFloat_FromDouble(d);
}

static PyObject *jr_value(jrd *r, int depth)
{
    if (r->p >= r->end)
        return jr_other(r);
    switch (*r->p) {
    case '"':
        return jr_str(r, 0);
    case 'n':
        return jr_lit(r, "null", 4) ? Py_NewRef(Py_None) : jr_other(r);
    case 't':
        return jr_lit(r, "true", 4) ? Py_NewRef(Py_True) : jr_other(r);
    case 'f':
        return jr_lit(r, "false", 5) ? Py_NewRef(Py_False) : jr_other(r);
    case 'N':
        return jr_lit(r, "NaN", 3) ? PyFloat_FromDouble(Py_NAN) : jr_other(r);
    case 'I':
        return jr_lit(r, "Infinity", 8) ? PyFloat_FromDouble(Py_HUGE_VAL) : jr_other(r);
    case '-':
        if (jr_lit(r, "-Infinity", 9))
            return PyFloat_FromDouble(-Py_HUGE_VAL);
        return jr_num(r);
    case '[': case '{':
        break;
    default:
        return *r->p >= '0' && *r->p <= '9' ? jr_num(r) : jr_other(r);
    }
    if (depth >= JB_DEPTH)
        return jr_other(r);
    int dict = *r->p++ == '{';
    char close = dict ? '}' : ']';
    PyObject *c = dict ? PyDict_New() : PyList_New(0);
    if (!c)
        return NULL;
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return c;
    }
    for (;;) {
        PyObject *k = NULL, *v;
        if (dict) {
            if (r->p >= r->end || *r->p != '"' || !(k = jr_str(r, 1)))
                goto fail;
            if (r->p >= r->end || *r->p++ != ':') {
                r->other = 1;
                goto fail;
            }
        }
        if (!(v = jr_value(r, depth + 1)))
            goto fail;
        int rc = dict ? PyDict_SetItem(c, k, v) : PyList_Append(c, v);
        Py_XDECREF(k);
        Py_DECREF(v);
        k = NULL;
        if (rc)
            goto fail;
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return c;
        }
        r->other = 1;
    fail:
        Py_XDECREF(k);
        Py_DECREF(c);
        if (!PyErr_Occurred())
            r->other = 1;
        return NULL;
    }
}

/* JSON text (UTF-8) as Python values: the C reader, else json_load. */
PyObject *json_value(const char *p, size_t n)
{
    jrd r = {p, p + n, 0};
    PyObject *v = jr_value(&r, 0);
    if (v && r.p != r.end) {
        Py_DECREF(v);
        v = NULL;
        r.other = 1;
    }
    if (v || !r.other)
        return v;
    PyErr_Clear();
    PyObject *s = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "strict");
    if (!s)
        return NULL;
    v = json_load(s);
    Py_DECREF(s);
    return v;
}

/* ST.scan (json's C scanner, may be NULL) reads text written by json_dump
 * directly; anything else (other whitespace, invalid text) goes through
 * ST.loads (json.loads), which also gives the proper error. */
static PyObject *json_load(PyObject *s)
{
    if (ST.scan) {
        PyObject *r = PyObject_CallFunction(ST.scan, "On", s, (Py_ssize_t)0);
        if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2 &&
            PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 1)) == PyUnicode_GET_LENGTH(s)) {
            PyObject *obj = Py_NewRef(PyTuple_GET_ITEM(r, 0));
            Py_DECREF(r);
            return obj;
        }
        Py_XDECREF(r);
        PyErr_Clear();
    }
    return PyObject_CallOneArg(ST.loads, s);
}

