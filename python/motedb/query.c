/*
 * query.c — Query: conditions, order, offset/limit, find/ids/count/remove,
 * tuples/dicts, aggregates. Part of the _core extension (_core.h).
 */
#include "_core.h"

/* ---- Query --------------------------------------------------------------------------------- */

static int cond_has_link(CondObject *c)
{
    if (c->kind != C_AND && c->kind != C_OR)
        return c->kind == C_LINK;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->kids); i++)
        if (cond_has_link((CondObject *)PyTuple_GET_ITEM(c->kids, i)))
            return 1;
    return 0;
}

static int q_set_values(QueryObject *q, Py_ssize_t prop, PyObject *vals);

static int q_build(QueryObject *q);

/* A value of a JSON path condition as mote_query_json takes it: its type
 * and value (bytes it points into kept alive in *keep, else NULL). */
static int json_arg(PyObject *v, int *type, mote_value *mv, PyObject **keep)
{
    memset(mv, 0, sizeof *mv);
    *keep = NULL;
    if (PyBool_Check(v)) {
        *type = MOTE_T_BOOL;
        mv->v.i = v == Py_True;
        return 0;
    }
    if (PyLong_Check(v)) {
        int over;
        long long x = PyLong_AsLongLongAndOverflow(v, &over);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (!over) {
            *type = MOTE_T_INT64;
            mv->v.i = x;
            return 0;
        } /* beyond int64: a JSON number */
    } else if (PyFloat_Check(v)) {
        *type = MOTE_T_FLOAT64;
        mv->v.f = PyFloat_AS_DOUBLE(v);
        return 0;
    } else if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (!s)
            return -1;
        *type = MOTE_T_STRING;
        mv->v.s.p = s;
        mv->v.s.n = (size_t)n;
        return 0;
    }
    PyObject *t = json_text(v); /* dict, list, tuple, a big int */
    if (!t)
        return -1;
    *keep = t;
    *type = MOTE_T_JSON;
    mv->v.s.p = PyBytes_AS_STRING(t);
    mv->v.s.n = (size_t)PyBytes_GET_SIZE(t);
    return 0;
}

/* A C_JSON condition: one mote_query_json leaf per type of value (values of
 * several types in in_() / not_in(): OR / AND of one leaf per type; a
 * between() of a number and a string compares as JSON). */
static int q_add_json(QueryObject *q, CondObject *c, int *node)
{
    Py_ssize_t n = PyTuple_GET_SIZE(c->vals), plen, nk = 0;
    mote_value *vals = PyMem_Malloc(sizeof *vals * (size_t)(2 * n + 1));
    int *types = PyMem_Malloc(sizeof *types * (size_t)(n + 1)), *kids = NULL, res = -1, rc;
    PyObject **keep = PyMem_Malloc(sizeof *keep * (size_t)(n + 1));
    const char *path = PyUnicode_AsUTF8AndSize(c->path, &plen);
    if (!path)
        goto done;
    if (!vals || !types || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    for (; nk < n; nk++)
        if (json_arg(PyTuple_GET_ITEM(c->vals, nk), &types[nk], &vals[nk], &keep[nk]) < 0)
            goto done;
    if (c->op == MOTE_BETWEEN && types[0] != types[1])
        for (Py_ssize_t i = 0; i < 2; i++) {
            PyObject *t = json_text(PyTuple_GET_ITEM(c->vals, i));
            if (!t)
                goto done;
            Py_XSETREF(keep[i], t);
            types[i] = MOTE_T_JSON;
            vals[i].v.s.p = PyBytes_AS_STRING(t);
            vals[i].v.s.n = (size_t)PyBytes_GET_SIZE(t);
        }
    Py_ssize_t ngroups = 0;
    int seen[MOTE_T_TOMANY + 1] = {0};
    for (Py_ssize_t i = 0; i < n; i++)
        ngroups += !seen[types[i]]++;
    if (ngroups <= 1) {
        rc = mote_query_json(q->mq, (unsigned)c->prop->index, path, (size_t)plen, c->op,
                             n ? types[0] : 0, vals, (size_t)n, node);
        res = rc ? raise_rc(rc) : 0;
        goto done;
    }
    if (!(kids = PyMem_Malloc(sizeof *kids * (size_t)ngroups))) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t g = 0;
    for (int ty = 0; ty <= MOTE_T_TOMANY; ty++) {
        if (!seen[ty])
            continue;
        mote_value *grp = vals + n; /* the values of this type, after the others */
        size_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (types[i] == ty)
                grp[m++] = vals[i];
        if ((rc = mote_query_json(q->mq, (unsigned)c->prop->index, path, (size_t)plen, c->op,
                                  ty, grp, m, &kids[g++])))
            goto fail;
    }
    rc = c->op == MOTE_IN ? mote_query_or(q->mq, kids, (size_t)g, node)
                          : mote_query_and(q->mq, kids, (size_t)g, node);
fail:
    res = rc ? raise_rc(rc) : 0;
done:
    for (Py_ssize_t i = 0; keep && i < nk; i++)
        Py_XDECREF(keep[i]);
    PyMem_Free(vals);
    PyMem_Free(types);
    PyMem_Free(keep);
    PyMem_Free(kids);
    return res;
}

static int q_add_cond(QueryObject *q, CondObject *c, int *node)
{
    int rc;
    if (c->kind == C_JSON)
        return q_add_json(q, c, node);
    if (c->kind == C_LINK) { /* a query on the target entity, kept in q->subs */
        CondObject *sc = (CondObject *)PyTuple_GET_ITEM(c->kids, 0);
        PyObject *tb = store_box((PyObject *)q->box->store, (PyObject *)sc->owner);
        if (!tb)
            return -1;
        PyObject *args = PyTuple_Pack(1, (PyObject *)sc);
        QueryObject *sq = args ? (QueryObject *)query_new((BoxObject *)tb, args) : NULL;
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
    CondObject *root = (CondObject *)q->cond, *near = NULL, *match = NULL;
    if (root && root->kind == C_NEAR) { /* alone */
        near = root;
        root = NULL;
    } else if (root && root->kind == C_MATCH) {
        match = root;
        root = NULL;
    }
    if (root && root->kind == C_AND && cond_ranked(root)) {
        /* nearest() and/or matches() & the others: the others are the condition */
        Py_ssize_t n = PyTuple_GET_SIZE(root->kids), m = 0;
        int *kids = PyMem_Malloc(sizeof *kids * (size_t)n), node;
        if (!kids) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            CondObject *k = (CondObject *)PyTuple_GET_ITEM(root->kids, i);
            if (k->kind == C_NEAR)
                near = k;
            else if (k->kind == C_MATCH)
                match = k;
            else if (q_add_cond(q, k, &kids[m++]) < 0) {
                PyMem_Free(kids);
                goto fail;
            }
        }
        if (m == 1)
            rc = mote_query_where(q->mq, kids[0]);
        else if (m > 1 && !(rc = mote_query_and(q->mq, kids, (size_t)m, &node)))
            rc = mote_query_where(q->mq, node);
        PyMem_Free(kids);
        if (rc)
            goto fail_rc;
        root = NULL;
    }
    if (root) {
        int node;
        if (q_add_cond(q, root, &node) < 0)
            goto fail;
        if ((rc = mote_query_where(q->mq, node)))
            goto fail_rc;
    }
    if (match) { /* its properties and weights: (property, weight) pairs */
        PyObject *tb = PyTuple_GET_ITEM(match->vals, 0), *pairs = PyTuple_GET_ITEM(match->vals, 2);
        unsigned props[MOTE_MATCH_PROPS_MAX], n = (unsigned)PyTuple_GET_SIZE(pairs);
        double w[MOTE_MATCH_PROPS_MAX];
        for (unsigned i = 0; i < n; i++) {
            PyObject *pr = PyTuple_GET_ITEM(pairs, i);
            props[i] = (unsigned)((PropertyObject *)PyTuple_GET_ITEM(pr, 0))->index;
            w[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(pr, 1));
        }
        if ((rc = mote_query_match_in(q->mq, props, w, n, PyBytes_AS_STRING(tb),
                                      (size_t)PyBytes_GET_SIZE(tb), match->k,
                                      (unsigned)match->op)))
            goto fail_rc;
    }
    if (near) { /* (the bytes of a PyBytes are aligned for floats) */
        PyObject *vb = PyTuple_GET_ITEM(near->vals, 0);
        if ((rc = mote_query_nearest(q->mq, (unsigned)near->prop->index,
                                     (const float *)(const void *)PyBytes_AS_STRING(vb),
                                     (size_t)PyBytes_GET_SIZE(vb) / 4, near->k, near->op)) ||
            (rc = mote_query_search(q->mq, near->how, near->ef)))
            goto fail_rc;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(q->orders); i++) {
        OrderObject *o = (OrderObject *)PyList_GET_ITEM(q->orders, i);
        if ((rc = mote_query_order(q->mq, (unsigned)o->prop->index, o->flags)))
            goto fail_rc;
    }
    if ((rc = mote_query_limit(q->mq, q->offset, q->limit)) ||
        (rc = mote_query_fusion(q->mq, q->fuse, q->fuse_arg)))
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

PyObject *query_new(BoxObject *b, PyObject *args)
{
    PyObject *root = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *c = PyTuple_GET_ITEM(args, i);
        if (c == Py_None) /* no condition: an optional filter needs no if/else */
            continue;
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
    q->box = (BoxObject *)Py_NewRef((PyObject *)b);
    q->mq = NULL;
    q->mqe = NULL;
    q->cond = root;
    q->orders = PyList_New(0);
    q->offset = q->limit = 0;
    q->limit_zero = 0;
    q->fuse = MOTE_FUSE_RRF;
    q->fuse_arg = 0;
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
    if (q->cond && cond_ranked((CondObject *)q->cond)) {
        PyErr_Format(PyExc_TypeError, "order_by(): a query with nearest() or matches() comes "
                     "ordered by distance or score, best first");
        return NULL;
    }
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

static PyObject *query_fusion(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"rrf_k", "text_weight", NULL};
    QueryObject *q = (QueryObject *)self;
    PyObject *k = Py_None, *w = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OO:fusion", names, &k, &w) ||
        q_check_busy(q) < 0)
        return NULL;
    if ((k == Py_None) == (w == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "fusion() takes one of rrf_k= and text_weight=");
        return NULL;
    }
    PyObject *v = k != Py_None ? k : w;
    if (PyBool_Check(v) || !(PyLong_Check(v) || PyFloat_Check(v))) {
        PyErr_Format(PyExc_TypeError, "fusion(): %s is a number, got %R",
                     k != Py_None ? "rrf_k" : "text_weight", v);
        return NULL;
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    int how = k != Py_None ? MOTE_FUSE_RRF : MOTE_FUSE_WEIGHTED;
    if (k != Py_None ? !(x > 0 && x <= 1e9) : !(x >= 0 && x <= 1)) {
        PyErr_Format(PyExc_ValueError, k != Py_None
                                           ? "fusion(): rrf_k is a number above 0, at most "
                                             "1e9, got %R"
                                           : "fusion(): text_weight is a number from 0 to 1, "
                                             "got %R", v);
        return NULL;
    }
    q->fuse = how;
    q->fuse_arg = x;
    if (q->mq) {
        int rc = mote_query_fusion(q->mq, how, x);
        if (rc) {
            raise_rc(rc);
            return NULL;
        }
    }
    return Py_NewRef(self);
}

/* Start running: a transaction (op), the entity and the built query. */
static int q_start(QueryObject *q, int write, Op *op)
{
    if (q_check_busy(q) < 0)
        return -1;
    q->busy = 1; /* before op_begin, which may release the GIL */
    if (box_op_begin(q->box, write, op) < 0) {
        q->busy = 0;
        return -1;
    }
    q->ts = op->ts;
    int bad = q_build(q) < 0;
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

/* nearest(): [(object, distance), ...], nearest first; matches(): [(object,
 * score), ...], highest first */
static PyObject *q_project(PyObject *self, PyObject *args, int dicts, int scored);

static PyObject *query_find_with_scores(PyObject *self, PyObject *args)
{
    QueryObject *q = (QueryObject *)self;
    if (q->cond && cond_ranked((CondObject *)q->cond) && PyTuple_GET_SIZE(args))
        return q_project(self, args, 0, 1);
    if (!q->cond || !cond_ranked((CondObject *)q->cond)) {
        PyErr_Format(PyExc_TypeError, "find_with_scores(): the query has no nearest() or "
                     "matches() condition (%s.prop.nearest(vector, k=...), "
                     "%s.prop.matches(text, k=...))", q->box->info->cname, q->box->info->cname);
        return NULL;
    }
    if (q->limit_zero)
        return PyList_New(0);
    Op op;
    if (q_start(q, 0, &op) < 0)
        return NULL;
    uint64_t *ids = NULL;
    double *dist = NULL;
    size_t n = 0;
    int rc;
    mote_txn *t = op.ts->txn;
    mote_query *mq = q->mq;
    Py_BEGIN_ALLOW_THREADS
    rc = mote_query_scored(t, mq, &ids, &dist, &n);
    Py_END_ALLOW_THREADS
    PyObject *objs = NULL, *res = NULL;
    if (rc)
        raise_rc(rc);
    else
        objs = q_objects(q, &op, ids, n);
    if (objs && (res = PyList_New((Py_ssize_t)n)))
        for (size_t i = 0; i < n; i++) {
            PyObject *d = PyFloat_FromDouble(dist[i]);
            PyObject *pair = d ? PyTuple_Pack(2, PyList_GET_ITEM(objs, (Py_ssize_t)i), d) : NULL;
            Py_XDECREF(d);
            if (!pair) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, pair);
        }
    Py_XDECREF(objs);
    mote_free(ids);
    mote_free(dist);
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
        if (write)
            op_doom(&op);
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
            if (!PyUnicode_Compare(a, ST.str_id))
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

/* One projected field of record r (index -1: the id); a to-many relation
 * gives the list of its target ids. New reference. */
static PyObject *project_field(QueryObject *q, mote_txn *t, const mote_record *r,
                               Py_ssize_t i)
{
    const EntityInfo *in = q->box->info;
    if (i < 0 || in->f[i].kind != K_TOMANY)
        return record_field(in, r, i);
    uint64_t *ids = NULL;
    size_t n = 0;
    int rc = mote_links(t, q->box->e, (unsigned)i, r->id, &ids, &n);
    PyObject *l = rc ? NULL : PyList_New((Py_ssize_t)n);
    if (rc)
        raise_rc(rc);
    for (size_t k = 0; l && k < n; k++) {
        PyObject *x = PyLong_FromUnsignedLongLong(ids[k]);
        if (!x)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, (Py_ssize_t)k, x);
    }
    mote_free(ids);
    return l;
}

/* tuples() and dicts(); scored: find_with_scores(*props), (tuple, score)
 * pairs in the ranked order. */
static PyObject *q_project(PyObject *self, PyObject *args, int dicts, int scored)
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
    double *dist = NULL;
    size_t n = 0;
    PyObject *res = NULL;
    int got;
    if (scored) {
        mote_txn *t = op.ts->txn;
        mote_query *mq = q->mq;
        Py_BEGIN_ALLOW_THREADS
        got = mote_query_scored(t, mq, &ids, &dist, &n);
        Py_END_ALLOW_THREADS
        got = got ? raise_rc(got) : 0;
    } else {
        got = q_ids(q, &op, &ids, &n);
    }
    if (got == 0)
        res = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; res && i < n; i++) {
        mote_record r;
        int rc = mote_get(op.ts->txn, q->box->e, ids[i], &r);
        PyObject *row = rc ? NULL : dicts ? PyDict_New() : PyTuple_New(np);
        if (rc)
            raise_rc(rc);
        for (Py_ssize_t j = 0; row && j < np; j++) {
            PyObject *v = project_field(q, op.ts->txn, &r, idx[j]);
            if (!v) {
                Py_CLEAR(row);
                break;
            }
            if (dicts) {
                int e = PyDict_SetItem(row, idx[j] < 0 ? ST.str_id : in->f[idx[j]].name, v);
                Py_DECREF(v);
                if (e < 0)
                    Py_CLEAR(row);
            } else {
                PyTuple_SET_ITEM(row, j, v);
            }
        }
        if (row && scored) {
            PyObject *d = PyFloat_FromDouble(dist[i]);
            Py_SETREF(row, d ? PyTuple_Pack(2, row, d) : NULL);
            Py_XDECREF(d);
        }
        if (!row) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, (Py_ssize_t)i, row);
    }
    mote_free(ids);
    mote_free(dist);
    PyMem_Free(idx);
    q->busy = 0;
    if (op_end(q->box->store, &op, res ? OP_NOCHANGE : OP_FAIL) < 0)
        Py_CLEAR(res);
    return res;
}

static PyObject *query_tuples(PyObject *self, PyObject *args)
{
    return q_project(self, args, 0, 0);
}
static PyObject *query_dicts(PyObject *self, PyObject *args) { return q_project(self, args, 1, 0); }

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

/* ---- group_count: {value: number of matches} ---- */

typedef struct {
    const FieldInfo *f;
    PyObject *d;
} GroupCtx;

static int group_cb(void *ctx, const mote_value *v, uint64_t n)
{
    GroupCtx *g = ctx;
    PyObject *k = from_value(g->f, v, 0), *c = k ? PyLong_FromUnsignedLongLong(n) : NULL;
    int rc = c ? PyDict_SetItem(g->d, k, c) : -1;
    Py_XDECREF(k);
    Py_XDECREF(c);
    return rc < 0 ? -1 : 0;
}

static PyObject *query_group_count(PyObject *self, PyObject *arg)
{
    QueryObject *q = (QueryObject *)self;
    const EntityInfo *in = q->box->info;
    if (!PyObject_TypeCheck(arg, &Property_Type) ||
        ((PropertyObject *)arg)->owner != q->box->cls || ((PropertyObject *)arg)->index < 0) {
        PyErr_Format(PyExc_TypeError, "group_count() takes a property of %s, got %R",
                     in->cname, arg);
        return NULL;
    }
    Py_ssize_t i = ((PropertyObject *)arg)->index;
    GroupCtx g = {&in->f[i], PyDict_New()};
    if (!g.d || q->limit_zero)
        return g.d;
    Op op;
    if (q_start(q, 0, &op) < 0) {
        Py_DECREF(g.d);
        return NULL;
    }
    int rc = mote_query_group_count(op.ts->txn, q->mq, (unsigned)i, group_cb, &g);
    if (rc > 0)
        raise_rc(rc);
    q->busy = 0;
    if (op_end(q->box->store, &op, rc ? OP_FAIL : OP_NOCHANGE) < 0)
        Py_CLEAR(g.d);
    return g.d;
}

/* ---- iteration: for obj in query ---- */

static void iter_unlink(QueryIterObject *it)
{
    StoreObject *st = it->box ? it->box->store : NULL;
    for (QueryIterObject **pp = st ? &st->iters : NULL; pp && *pp; pp = &(*pp)->link)
        if (*pp == it) {
            *pp = it->link;
            break;
        }
    it->link = NULL;
}

/* Done: release the snapshot (if its own) and the ids. */
static void iter_end(QueryIterObject *it)
{
    if (it->own) {
        iter_unlink(it);
        mote_abort(it->own);
        it->own = NULL;
    }
    mote_free(it->ids);
    it->ids = NULL;
    it->n = it->next = 0;
}

void iter_end_all(StoreObject *st)
{
    while (st->iters) {
        st->iters->closed = 1;
        iter_end(st->iters);
    }
}

static PyObject *query_iter(PyObject *self)
{
    QueryObject *q = (QueryObject *)self;
    StoreObject *st = q->box->store;
    QueryIterObject *it = PyObject_GC_New(QueryIterObject, &QueryIter_Type);
    if (!it)
        return NULL;
    it->box = (BoxObject *)Py_NewRef(q->box);
    it->e = NULL;
    it->own = NULL;
    it->serial = 0;
    it->ids = NULL;
    it->n = it->next = 0;
    it->link = NULL;
    it->closed = 0;
    PyObject_GC_Track(it);
    if (q->limit_zero)
        return (PyObject *)it;
    Op op;
    if (q_start(q, 0, &op) < 0) /* the entity and the built query */
        goto fail;
    TxnSlot *cur = op.own ? NULL : op.ts;
    int rc = MOTE_OK;
    if (!cur) { /* a snapshot of its own, kept while the iteration lasts */
        if (!(rc = mote_begin(st->s, MOTE_TXN_RDONLY, &it->own))) {
            it->link = st->iters;
            st->iters = it;
        }
    }
    if (!rc)
        rc = mote_query_ids(it->own ? it->own : cur->txn, q->mq, &it->ids, &it->n);
    if (rc)
        raise_rc(rc);
    it->e = q->box->e;
    it->serial = cur ? cur->serial : 0;
    q->busy = 0;
    if (op_end(st, &op, rc ? OP_FAIL : OP_NOCHANGE) < 0)
        goto fail;
    return (PyObject *)it;
fail:
    Py_DECREF(it);
    return NULL;
}

static PyObject *iter_next(PyObject *self)
{
    QueryIterObject *it = (QueryIterObject *)self;
    StoreObject *st = it->box->store;
    if (it->closed) {
        PyErr_Format(ST.Closed, "store %U was closed during this iteration", st->path);
        return NULL;
    }
    if (it->next >= it->n) {
        iter_end(it);
        return NULL; /* StopIteration */
    }
    mote_txn *t = it->own;
    if (!t) {
        TxnSlot *cur = st->s ? find_txn(st) : NULL;
        if (!cur || cur->serial != it->serial) {
            iter_end(it);
            if (!st->s)
                PyErr_Format(ST.Closed, "store %U is closed", st->path);
            else
                PyErr_SetString(ST.Txn, "this iteration began inside a transaction that has "
                                "ended (or on another thread): iterate inside it");
            return NULL;
        }
        t = cur->txn;
    }
    while (it->next < it->n) {
        mote_record r;
        int rc = mote_get(t, it->e, it->ids[it->next++], &r);
        if (rc == MOTE_NOTFOUND) /* removed by its own transaction meanwhile */
            continue;
        if (rc) {
            raise_rc(rc);
            return NULL;
        }
        return box_build(it->box, &r);
    }
    iter_end(it);
    return NULL;
}

static PyObject *iter_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    iter_end((QueryIterObject *)self);
    Py_RETURN_NONE;
}

static int iter_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((QueryIterObject *)self)->box);
    return 0;
}

static int iter_clear(PyObject *self)
{
    QueryIterObject *it = (QueryIterObject *)self;
    iter_end(it);
    Py_CLEAR(it->box);
    return 0;
}

static void iter_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    iter_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef iter_methods[] = {
    {"close", iter_close, METH_NOARGS,
     "close(): end the iteration now (releases its snapshot)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject QueryIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.QueryIterator",
    .tp_basicsize = sizeof(QueryIterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An iteration over a query's matches (for obj in query, or query.iter()): the "
              "ids are taken when it starts, the objects built one at a time from the same "
              "snapshot. Outside a transaction it holds a read snapshot until it ends, is "
              "closed (close()) or is collected; store.close() ends it.",
    .tp_dealloc = iter_dealloc,
    .tp_traverse = iter_traverse,
    .tp_clear = iter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = iter_next,
    .tp_methods = iter_methods,
};

static PyObject *query_iter_method(PyObject *self, PyObject *unused)
{
    (void)unused;
    return query_iter(self);
}

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
    {"fusion", (PyCFunction)(void (*)(void))query_fusion, METH_VARARGS | METH_KEYWORDS,
     "fusion(*, rrf_k=None, text_weight=None) -> self: how a hybrid query (matches() & "
     "nearest()) fuses its two lists. rrf_k: Reciprocal Rank Fusion with that constant (the "
     "default, 60): 1 / (rrf_k + rank) summed over the lists. text_weight (0 to 1): each "
     "list's scores scaled to 0..1 over the list (its best 1, its worst 0), text_weight "
     "times the match's plus (1 - text_weight) times the nearest's."},
    {"find", query_find, METH_NOARGS, "find() -> [objects]."},
    {"find_with_scores", query_find_with_scores, METH_VARARGS,
     "find_with_scores(*props) -> [(object, distance)], nearest first: a query with "
     "nearest(); [(object, score)], highest BM25 score first: a query with matches(). With "
     "properties, (tuple of those properties, score) pairs instead of objects, as tuples() "
     "gives them."},
    {"first", query_first, METH_NOARGS, "first() -> object or None."},
    {"count", query_count, METH_NOARGS, "count() -> int (after offset / limit)."},
    {"ids", query_ids, METH_NOARGS, "ids() -> [ids]."},
    {"remove", query_remove, METH_NOARGS, "remove() -> number of objects removed."},
    {"tuples", query_tuples, METH_VARARGS,
     "tuples(*props) -> [tuple]: the given properties (all, with the id first, if none); "
     "relations as ids (to-many: a list of ids)."},
    {"dicts", query_dicts, METH_VARARGS,
     "dicts(*props) -> [dict]: the given properties (all, with the id, if none); relations "
     "as ids (to-many: a list of ids)."},
    {"min", query_min, METH_O, "min(prop): smallest non-NULL value, or None."},
    {"max", query_max, METH_O, "max(prop): largest non-NULL value, or None."},
    {"sum", query_sum, METH_O, "sum(prop): sum of the non-NULL values (int or float)."},
    {"avg", query_avg, METH_O, "avg(prop): mean of the non-NULL values (float), or None."},
    {"set_parameter", query_set_parameter, METH_VARARGS,
     "set_parameter(Entity.prop, value, ...) -> self: new value(s) for the query's condition "
     "on that property (reuses the built query)."},
    {"plan", query_plan, METH_NOARGS, "plan() -> str: how the query runs (index or scan)."},
    {"group_count", query_group_count, METH_O,
     "group_count(prop) -> {value: count}: the number of matches per value of prop, in value "
     "order (None first); one pass over its index when the query has no condition, offset or "
     "limit and prop is indexed."},
    {"iter", query_iter_method, METH_NOARGS,
     "iter() -> iterator of the matching objects, built one at a time from one snapshot "
     "(also: for obj in query)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject Query_Type = {
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
    .tp_iter = query_iter,
};
