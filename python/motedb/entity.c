/*
 * entity.c — entity classes: the metatype EntityMeta, the Entity base,
 * Property descriptors, Order and Condition objects. Part of the _core
 * extension (_core.h).
 */
#include "_core.h"

/* ---- Property: the descriptor of one field, and the start of conditions ------- */

/* The field of property p in its entity's info in (NULL for the id). */
static FieldInfo *field_in(EntityInfo *in, PropertyObject *p)
{
    return in && p->index >= 0 && p->index < in->nf ? &in->f[p->index] : NULL;
}

FieldInfo *prop_field(PropertyObject *p)
{
    return field_in(info_of_type(p->owner), p);
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
        return PyObject_CallFunctionObjArgs(ST.rel_get, self, obj, v, NULL);
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
    EntityInfo *in = info_of_type(p->owner);
    FieldInfo *f = field_in(in, p);
    if (value && f && f->target) { /* relations: check (motedb/_relations.py) */
        PyObject *v = PyObject_CallFunctionObjArgs(ST.rel_set, self, obj, value, NULL);
        if (!v)
            return -1;
        Py_XSETREF(*slot, v);
        return 0;
    }
    kept_slot(obj, in, f ? f->kind : K_ID, value);
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

/* ---- the metatype and the Entity base -------------------------------------------- */

/* ---- what the cyclic collector visits in an instance ---------------------------
 * A wide object is mostly ints, strings, floats, datetimes and Decimals: none
 * of them is a container the collector follows, yet the default traversal of
 * __slots__ hands each one to it, and every collection of the generations
 * an instance passes through visits it twice (T3 of bench/orm, 33 slots:
 * ~2.6 of the 4.9 µs an object got by id took, in gen0-2 collections). So an
 * instance is traversed by ent_traverse: its type, and only the slots whose
 * kind holds containers (dict, list and vector properties, relations, the
 * store it came from), unless any other slot was ever given an object of a
 * type the collector tracks (an application may put anything in an
 * attribute: kept_slot in _core.h marks the instance then, in its hidden
 * slot _motedb_gc, and every slot is visited from then on). Visiting fewer
 * references can only keep objects alive, never free a live one.
 *
 * The plan applies only to a class whose instances are exactly the slots
 * motedb made (no __dict__, no slots of a mixin): else the traversal stays
 * CPython's. gc.get_referents() of a planned instance lists only what is
 * visited. */
static int ent_traverse(PyObject *self, visitproc visit, void *arg)
{
    PyTypeObject *tp = Py_TYPE(self);
    const EntityInfo *in = ((EntityTypeObject *)tp)->info;
    Py_VISIT(tp);
    if (in && !SLOT(self, in->gc_off)) {
        for (Py_ssize_t i = 0; i < in->nvisit; i++)
            Py_VISIT(SLOT(self, in->visit[i]));
        return 0;
    }
    PyObject **p = (PyObject **)((char *)self + sizeof(PyObject));
    PyObject **end = (PyObject **)((char *)self + tp->tp_basicsize);
    for (; p < end; p++)
        Py_VISIT(*p);
    return 0;
}

/* Find the hidden slot (and hide it: its descriptor goes), list the slots
 * to visit, install ent_traverse when the layout is motedb's alone. */
static int gc_plan(PyTypeObject *type, EntityInfo *in)
{
    in->gc_off = -1;
    PyObject *gd = PyDict_GetItemString(type->tp_dict, "_motedb_gc");
    if (!gd || !Py_IS_TYPE(gd, &PyMemberDescr_Type))
        return 0;
    Py_ssize_t off = ((PyMemberDescrObject *)gd)->d_member->offset;
    if (PyObject_DelAttrString((PyObject *)type, "_motedb_gc") < 0)
        return -1;
    /* __slots__ as the class declared them (the hidden one is last); pickle
     * and copy learn the layout from __slotnames__, which keeps all (the
     * hidden one has no attribute: its value is not pickled, and the
     * attributes set when unpickling mark the new instance as needed) */
    PyObject *sl = PyDict_GetItemString(type->tp_dict, "__slots__");
    if (sl && PyTuple_Check(sl) && PyTuple_GET_SIZE(sl) > 0) {
        PyObject *shown = PyTuple_GetSlice(sl, 0, PyTuple_GET_SIZE(sl) - 1);
        PyObject *all = PySequence_List(sl);
        int rc = shown && all &&
                         !PyObject_SetAttrString((PyObject *)type, "__slotnames__", all)
                     ? PyObject_SetAttrString((PyObject *)type, "__slots__", shown)
                     : -1;
        Py_XDECREF(shown);
        Py_XDECREF(all);
        if (rc < 0)
            return -1;
    }
    Py_ssize_t nslots = in->nf + 2 + (in->store_off >= 0);
    if (type->tp_dictoffset || type->tp_itemsize || type->tp_traverse == NULL ||
        type->tp_basicsize != (Py_ssize_t)sizeof(PyObject) + nslots * (Py_ssize_t)sizeof(PyObject *))
        return 0; /* another layout: CPython's traversal */
    in->visit = PyMem_Calloc((size_t)nslots, sizeof *in->visit);
    if (!in->visit) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < in->nf; i++)
        if (in->f[i].kind > K_DECIMAL)
            in->visit[in->nvisit++] = in->f[i].offset;
    if (in->store_off >= 0)
        in->visit[in->nvisit++] = in->store_off;
    in->gc_off = off;
    type->tp_traverse = ent_traverse;
    return 0;
}

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
    in->gc_off = -1;
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
        PyObject *hnsw = Py_None, *jpath = Py_None;
        int kind, mtype;
        unsigned flags, dim;
        if (!PyArg_ParseTuple(spec, "UiiIIOOOO|OO", &fname, &kind, &mtype, &flags, &dim, &dflt,
                              &factory, &renamed, &target, &hnsw, &jpath))
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
        f->dflt = dflt == ST.missing ? NULL : Py_NewRef(dflt);
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
        if (jpath != Py_None) { /* checked by _schema.py */
            Py_ssize_t jl;
            const char *js = PyUnicode_AsUTF8AndSize(jpath, &jl);
            if (!js || !(f->json_path = PyMem_Malloc((size_t)jl + 1))) {
                if (!PyErr_Occurred())
                    PyErr_NoMemory();
                goto fail;
            }
            memcpy(f->json_path, js, (size_t)jl + 1);
        }
        mote_prop_def *d = &in->defs[i - 1];
        d->name = f->cname;
        d->json_path = f->json_path;
        d->type = mtype;
        d->flags = flags;
        d->dim = dim;
        d->renamed_from = f->renamed;
        if (hnsw != Py_None) { /* (distance, m, ef_construction), checked by _schema.py */
            if (!PyArg_ParseTuple(hnsw, "iII", &d->hnsw.distance, &d->hnsw.m,
                                  &d->hnsw.ef_construction))
                goto fail;
            f->hdist = d->hnsw.distance;
        }
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
    if (gc_plan(type, in) < 0)
        goto fail;
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
    if (!ST.prepare) {
        PyErr_SetString(PyExc_RuntimeError, "motedb is not initialised: import motedb");
        return NULL;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(ST.prepare, name, bases, ns, NULL);
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

PyTypeObject EntityMeta_Type = {
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

int set_slot(PyObject *o, const EntityInfo *in, Py_ssize_t off, int kind, PyObject *v)
{
    kept_slot(o, in, kind, v);
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
    PyObject *v = kwds ? PyDict_GetItemWithError(kwds, ST.str_id) : NULL;
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
    set_slot(self, in, in->id_off, K_ID, v);
    for (Py_ssize_t i = 0; i < in->nf; i++) {
        FieldInfo *f = &in->f[i];
        v = kwds ? PyDict_GetItemWithError(kwds, f->name) : NULL;
        if (v) {
            used++;
            set_slot(self, in, f->offset, f->kind, v);
            continue;
        }
        if (PyErr_Occurred())
            return -1;
        if (f->factory) {
            if (!(v = PyObject_CallNoArgs(f->factory)))
                return -1;
            kept_slot(self, in, f->kind, v);
            Py_XSETREF(SLOT(self, f->offset), v);
        } else if (f->dflt) {
            set_slot(self, in, f->offset, f->kind, f->dflt);
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
            int known = PyUnicode_Check(key) && PyUnicode_Compare(key, ST.str_id) == 0;
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
        PyObject *name = i < 0 ? ST.str_id : in->f[i].name;
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

PyTypeObject EntityBase_Type = {
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

PyTypeObject Order_Type = {
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

static const char *op_text[] = {"?", "==", "!=", "<", "<=", ">", ">=", "between", "in_",
                                "not_in", "is_null", "is_not_null", "startswith",
                                "endswith", "contains", "contains", "exists"};

static int cond_traverse(PyObject *self, visitproc visit, void *arg)
{
    CondObject *c = (CondObject *)self;
    Py_VISIT(c->prop);
    Py_VISIT(c->vals);
    Py_VISIT(c->kids);
    Py_VISIT(c->owner);
    Py_VISIT(c->path);
    Py_VISIT(c->shown);
    return 0;
}

static int cond_clear(PyObject *self)
{
    CondObject *c = (CondObject *)self;
    Py_CLEAR(c->prop);
    Py_CLEAR(c->vals);
    Py_CLEAR(c->kids);
    Py_CLEAR(c->owner);
    Py_CLEAR(c->path);
    Py_CLEAR(c->shown);
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
    c->k = 0;
    c->how = MOTE_NEAR_AUTO;
    c->ef = 0;
    c->path = NULL;
    c->shown = NULL;
    PyObject_GC_Track(c);
    return c;
}

int cond_ranked(const CondObject *c)
{
    if (c->kind == C_NEAR)
        return 1;
    if (c->kind == C_MATCH)
        return 2;
    if (c->kind != C_AND && c->kind != C_OR)
        return 0;
    int m = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->kids); i++)
        m |= cond_ranked((const CondObject *)PyTuple_GET_ITEM(c->kids, i));
    return m;
}

static int comparable(FieldInfo *f)
{
    return f->kind != K_DECIMAL && f->kind != K_DICT && f->kind != K_LIST && f->kind != K_VECTOR &&
           f->kind != K_TOMANY;
}

/* An id in a condition: an int in 0 .. 2**64-1, as v.i. */
int id_value(const char *ent, PyObject *v, mote_value *mv)
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

/*
 * An int property compared with floats compares numerically, as Python does:
 * the same condition on ints. x >= 4.5 is x >= 5, x < 4.5 is x < 5, x == 4.5
 * matches nothing (IN of no values) and x != 4.5 every non-NULL x (NOT NULL);
 * NaN compares false except with !=; bounds beyond int64 compare with every
 * or no int; IN / NOT IN keep the integral values. Returns the values to use
 * (a new reference: vals itself if it holds no float), *op possibly changed.
 */
enum { FB_INT, FB_NONE, FB_ALL }; /* a bound: this int, no int, every int */

/* x OP f for ints x, as x OP' k: FB_INT with k (OP' = OP), or FB_NONE /
 * FB_ALL when no / every int64 satisfies it. */
static int float_bound(int op, double f, long long *k)
{
    const double two63 = 9223372036854775808.0;
    if (isnan(f))
        return op == MOTE_NE ? FB_ALL : FB_NONE;
    int integral = f == floor(f) && f >= -two63 && f < two63;
    switch (op) {
    case MOTE_EQ:
    case MOTE_NE:
        if (!integral)
            return op == MOTE_EQ ? FB_NONE : FB_ALL;
        *k = (long long)f;
        return FB_INT;
    case MOTE_LT: /* x < f: x < ceil(f) */
    case MOTE_GE: /* x >= f: x >= ceil(f) */
        if (f > -two63 && f <= two63 - 1024) {
            *k = (long long)ceil(f);
            return FB_INT;
        }
        return (f <= -two63) == (op == MOTE_GE) ? FB_ALL : FB_NONE;
    default: /* LE: x <= floor(f); GT: x > floor(f) */
        if (f >= -two63 && f < two63) {
            *k = (long long)floor(f);
            return FB_INT;
        }
        return (f >= two63) == (op == MOTE_LE) ? FB_ALL : FB_NONE;
    }
}

static PyObject *int_vs_float(int *op, PyObject *vals)
{
    Py_ssize_t n = PyTuple_GET_SIZE(vals), nf = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        nf += PyFloat_Check(PyTuple_GET_ITEM(vals, i));
    if (!nf || *op == MOTE_IS_NULL || *op == MOTE_NOT_NULL)
        return Py_NewRef(vals);
    PyObject *out = PyList_New(0);
    int none = 0, all = 0;
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(vals, i);
        long long k = 0;
        int o = *op == MOTE_BETWEEN ? (i ? MOTE_LE : MOTE_GE)
                : *op == MOTE_IN || *op == MOTE_NOT_IN ? MOTE_EQ : *op;
        int b = PyFloat_Check(v) ? float_bound(o, PyFloat_AS_DOUBLE(v), &k) : -1;
        if (b == FB_INT || b < 0) {
            PyObject *x = b < 0 ? Py_NewRef(v) : PyLong_FromLongLong(k);
            if (!x || PyList_Append(out, x) < 0)
                Py_CLEAR(out);
            Py_XDECREF(x);
        } else if (*op == MOTE_BETWEEN) { /* an open end, or no int at all */
            if (b == FB_NONE)
                none = 1;
            else {
                PyObject *x = PyLong_FromLongLong(i ? LLONG_MAX : LLONG_MIN);
                if (!x || PyList_Append(out, x) < 0)
                    Py_CLEAR(out);
                Py_XDECREF(x);
            }
        } else if (*op != MOTE_IN && *op != MOTE_NOT_IN) {
            none = b == FB_NONE;
            all = b == FB_ALL;
        } /* IN / NOT IN: a value no int equals is left out */
    }
    if (!out)
        return NULL;
    if (none || all) { /* nothing (IN of no values), or every non-NULL value */
        *op = none ? MOTE_IN : MOTE_NOT_NULL;
        Py_DECREF(out);
        return PyTuple_New(0);
    }
    PyObject *t = PyList_AsTuple(out);
    Py_DECREF(out);
    return t;
}

static PyObject *leaf_checked(PropertyObject *p, int op, PyObject *vals, unsigned flags);

static PyObject *cond_leaf(PropertyObject *p, int op, PyObject *vals, unsigned flags)
{
    FieldInfo *f = prop_field(p);
    if (f && f->kind == K_INT) {
        PyObject *iv = int_vs_float(&op, vals);
        if (!iv)
            return NULL;
        PyObject *c = leaf_checked(p, op, iv, flags);
        Py_DECREF(iv);
        return c;
    }
    return leaf_checked(p, op, vals, flags);
}

/* A leaf condition whose values are checked here (TypeError early). */
static PyObject *leaf_checked(PropertyObject *p, int op, PyObject *vals, unsigned flags)
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

PyObject *cond_group(int kind, PyObject *a, PyObject *b)
{
    if (!PyObject_TypeCheck(a, &Cond_Type) || !PyObject_TypeCheck(b, &Cond_Type))
        Py_RETURN_NOTIMPLEMENTED;
    CondObject *x = (CondObject *)a, *y = (CondObject *)b;
    if (x->owner != y->owner) {
        PyErr_Format(PyExc_TypeError, "cannot combine conditions on %s and on %s",
                     x->owner->tp_name, y->owner->tp_name);
        return NULL;
    }
    int nx = cond_ranked(x), ny = cond_ranked(y);
    if ((nx || ny) && kind == C_OR) {
        PyErr_Format(PyExc_TypeError, "%R | %R: nearest() and matches() choose among the "
                     "objects the other conditions match; combine them with & only", a, b);
        return NULL;
    }
    if (nx & ny) {
        PyErr_Format(PyExc_TypeError, "%R & %R: one nearest() and one matches() per query at "
                     "most", a, b);
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

static PyObject *json_invert(CondObject *c);

static PyObject *cond_invert(PyObject *self)
{
    CondObject *c = (CondObject *)self;
    if (c->kind == C_LINK) {
        PyErr_Format(PyExc_TypeError, "~%R: a relation condition cannot be negated", self);
        return NULL;
    }
    if (cond_ranked(c)) {
        PyErr_Format(PyExc_TypeError, "~%R: nearest() and matches() cannot be negated", self);
        return NULL;
    }
    if (c->kind == C_JSON)
        return json_invert(c);
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
    if (c->kind == C_JSON && c->op >= MOTE_EQ && c->op <= MOTE_GE)
        return PyUnicode_FromFormat("%s.%U%U %s %R", prop_entity(c->prop), c->prop->name,
                                    c->shown, op_text[c->op], PyTuple_GET_ITEM(c->vals, 0));
    if (c->kind == C_JSON && PyTuple_GET_SIZE(c->vals) == 1 && c->op != MOTE_IN &&
        c->op != MOTE_NOT_IN)
        return PyUnicode_FromFormat("%s.%U%U.%s(%R)", prop_entity(c->prop), c->prop->name,
                                    c->shown, op_text[c->op], PyTuple_GET_ITEM(c->vals, 0));
    if (c->kind == C_JSON && (c->op == MOTE_IN || c->op == MOTE_NOT_IN))
        return PyUnicode_FromFormat("%s.%U%U.%s(%R)", prop_entity(c->prop), c->prop->name,
                                    c->shown, op_text[c->op], c->vals);
    if (c->kind == C_JSON)
        return PyUnicode_FromFormat("%s.%U%U.%s%R", prop_entity(c->prop), c->prop->name,
                                    c->shown, op_text[c->op], c->vals);
    if (c->kind == C_MATCH) {
        PyObject *pairs = PyTuple_GET_ITEM(c->vals, 2), *more = PyUnicode_FromString("");
        double w0 = PyFloat_AsDouble(PyTuple_GET_ITEM(PyTuple_GET_ITEM(pairs, 0), 1));
        if (more && w0 != 1)
            Py_SETREF(more, PyUnicode_FromFormat(", weight=%R",
                                                 PyTuple_GET_ITEM(PyTuple_GET_ITEM(pairs, 0), 1)));
        if (more && PyTuple_GET_SIZE(pairs) > 1) {
            PyObject *d = PyDict_New();
            for (Py_ssize_t i = 1; d && i < PyTuple_GET_SIZE(pairs); i++) {
                PyObject *pr = PyTuple_GET_ITEM(pairs, i);
                if (PyDict_SetItem(d, PyTuple_GET_ITEM(pr, 0), PyTuple_GET_ITEM(pr, 1)) < 0)
                    Py_CLEAR(d);
            }
            Py_SETREF(more, d ? PyUnicode_FromFormat("%U, also=%R", more, d) : NULL);
            Py_XDECREF(d);
        }
        if (!more)
            return NULL;
        PyObject *r = PyUnicode_FromFormat("%s.%U.matches(%R, k=%llu%s%U)",
                                           prop_entity(c->prop), c->prop->name,
                                           PyTuple_GET_ITEM(c->vals, 1), (unsigned long long)c->k,
                                           c->op & MOTE_MATCH_ALL ? ", all_terms=True" : "",
                                           more);
        Py_DECREF(more);
        return r;
    }
    if (c->kind == C_NEAR) {
        char ef[32] = "";
        if (c->ef)
            snprintf(ef, sizeof ef, ", ef=%u", c->ef);
        return PyUnicode_FromFormat("%s.%U.nearest(<%zd floats>, k=%llu, distance='%s'%s%s)",
                                    prop_entity(c->prop), c->prop->name,
                                    PyBytes_GET_SIZE(PyTuple_GET_ITEM(c->vals, 0)) / 4,
                                    (unsigned long long)c->k,
                                    c->op == MOTE_DIST_EUCLIDEAN ? "euclidean"
                                    : c->op == MOTE_DIST_DOT     ? "dot"
                                                                 : "cosine",
                                    ef,
                                    c->how == MOTE_NEAR_EXACT   ? ", exact=True"
                                    : c->how == MOTE_NEAR_INDEX ? ", exact=False"
                                                                : "");
    }
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

PyTypeObject Cond_Type = {
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

/* ---- JSON paths ----------------------------------------------------------------------- */

/*
 * Note.meta["user"]["age"] >= 18: a JsonPath (a property of a dict or list
 * kind and a path) makes C_JSON conditions, which the query turns into
 * mote_query_json leaves (query.c). Values are None (== / != None: is_null /
 * is_not_null), bool, int, float, str, or a dict / list / tuple (compared
 * structurally); they are checked here so that errors come early.
 */

static int json_value_ok(const CondObject *c, PyObject *v)
{
    if (PyBool_Check(v) || PyLong_Check(v) || PyFloat_Check(v) || PyUnicode_Check(v) ||
        PyDict_Check(v) || PyList_Check(v) || PyTuple_Check(v))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s.%U%U: a JSON value is a bool, int, float, str, dict or "
                 "list, not %.100s", prop_entity(c->prop), c->prop->name, c->shown,
                 Py_TYPE(v)->tp_name);
    return -1;
}

static PyObject *json_cond(PropertyObject *prop, PyObject *path, PyObject *shown, int op,
                           PyObject *vals)
{
    CondObject *c = cond_alloc(C_JSON, prop->owner);
    if (!c)
        return NULL;
    c->prop = (PropertyObject *)Py_NewRef(prop);
    c->op = op;
    c->vals = Py_NewRef(vals);
    c->path = Py_NewRef(path);
    c->shown = Py_NewRef(shown);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(vals); i++)
        if (json_value_ok(c, PyTuple_GET_ITEM(vals, i)) < 0) {
            Py_DECREF(c);
            return NULL;
        }
    if ((op == MOTE_STARTS_WITH || op == MOTE_ENDS_WITH) &&
        !PyUnicode_Check(PyTuple_GET_ITEM(vals, 0))) {
        PyErr_Format(PyExc_TypeError, "%s.%U%U: %s() takes a str", prop_entity(prop),
                     prop->name, shown, op_text[op]);
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static PyObject *json_cond_args(JsonPathObject *j, int op, Py_ssize_t n, PyObject *a,
                                PyObject *b)
{
    PyObject *vals = n == 0 ? PyTuple_New(0) : n == 1 ? PyTuple_Pack(1, a) : PyTuple_Pack(2, a, b);
    PyObject *c = vals ? json_cond(j->prop, j->path, j->shown, op, vals) : NULL;
    Py_XDECREF(vals);
    return c;
}

static PyObject *json_invert(CondObject *c)
{
    int neg;
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
    default:
        PyErr_Format(PyExc_TypeError, "~%R is not supported", (PyObject *)c);
        return NULL;
    }
    return json_cond(c->prop, c->path, c->shown, neg, c->vals);
}

static PyObject *jpath_new(PropertyObject *prop, PyObject *path, PyObject *shown)
{
    JsonPathObject *j = PyObject_GC_New(JsonPathObject, &JsonPath_Type);
    if (!j)
        return NULL;
    j->prop = (PropertyObject *)Py_NewRef(prop);
    j->path = Py_NewRef(path);
    j->shown = Py_NewRef(shown);
    PyObject_GC_Track(j);
    return (PyObject *)j;
}

/* path + one step: ["key"] (the key as a JSON string) or [n]. */
static PyObject *jpath_step(PropertyObject *prop, PyObject *path, PyObject *shown, PyObject *key)
{
    PyObject *step;
    if (PyUnicode_Check(key)) {
        PyObject *js = json_text(key);
        step = js ? PyUnicode_FromFormat("[%s]", PyBytes_AS_STRING(js)) : NULL;
        Py_XDECREF(js);
    } else if (PyLong_Check(key) && !PyBool_Check(key)) {
        long long n = PyLong_AsLongLong(key);
        if (n < 0 && !PyErr_Occurred())
            PyErr_Format(PyExc_IndexError, "%s.%U%U: an array index is 0 or more, not %lld",
                         prop_entity(prop), prop->name, shown, n);
        step = PyErr_Occurred() ? NULL : PyUnicode_FromFormat("[%lld]", n);
    } else {
        PyErr_Format(PyExc_TypeError, "%s.%U%U: a JSON path step is a str key or an int "
                     "index, not %.100s", prop_entity(prop), prop->name, shown,
                     Py_TYPE(key)->tp_name);
        return NULL;
    }
    PyObject *kr = step ? PyObject_Repr(key) : NULL;
    PyObject *p2 = kr ? PyUnicode_Concat(path, step) : NULL;
    PyObject *s2 = p2 ? PyUnicode_FromFormat("%U[%U]", shown, kr) : NULL;
    PyObject *j = s2 ? jpath_new(prop, p2, s2) : NULL;
    Py_XDECREF(step);
    Py_XDECREF(kr);
    Py_XDECREF(p2);
    Py_XDECREF(s2);
    return j;
}

static PyObject *jpath_getitem(PyObject *self, PyObject *key)
{
    JsonPathObject *j = (JsonPathObject *)self;
    return jpath_step(j->prop, j->path, j->shown, key);
}

static PyObject *jpath_richcompare(PyObject *self, PyObject *other, int op)
{
    JsonPathObject *j = (JsonPathObject *)self;
    static const int map[] = {MOTE_LT, MOTE_LE, MOTE_EQ, MOTE_NE, MOTE_GT, MOTE_GE};
    int mop = map[op];
    if (other == Py_None && (mop == MOTE_EQ || mop == MOTE_NE))
        return json_cond_args(j, mop == MOTE_EQ ? MOTE_IS_NULL : MOTE_NOT_NULL, 0, NULL, NULL);
    if (other == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s.%U%U: None does not order (use == None)",
                     prop_entity(j->prop), j->prop->name, j->shown);
        return NULL;
    }
    return json_cond_args(j, mop, 1, other, NULL);
}

static PyObject *jpath_in_op(PyObject *self, PyObject *values, int op)
{
    if (PyUnicode_Check(values) || PyBytes_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "in_() / not_in() take a collection of values, not a "
                        "string");
        return NULL;
    }
    PyObject *all = PySequence_Tuple(values), *kept = all ? PyList_New(0) : NULL;
    for (Py_ssize_t i = 0; kept && i < PyTuple_GET_SIZE(all); i++) /* None matches nothing */
        if (PyTuple_GET_ITEM(all, i) != Py_None && PyList_Append(kept, PyTuple_GET_ITEM(all, i)))
            Py_CLEAR(kept);
    PyObject *t = kept ? PyList_AsTuple(kept) : NULL;
    JsonPathObject *j = (JsonPathObject *)self;
    PyObject *c = t ? json_cond(j->prop, j->path, j->shown, op, t) : NULL;
    Py_XDECREF(all);
    Py_XDECREF(kept);
    Py_XDECREF(t);
    return c;
}

static PyObject *jpath_in(PyObject *self, PyObject *v) { return jpath_in_op(self, v, MOTE_IN); }
static PyObject *jpath_not_in(PyObject *self, PyObject *v)
{
    return jpath_in_op(self, v, MOTE_NOT_IN);
}

static PyObject *jpath_between(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "between(lo, hi) takes 2 arguments");
        return NULL;
    }
    return json_cond_args((JsonPathObject *)self, MOTE_BETWEEN, 2, args[0], args[1]);
}

#define JPATH_OP0(fn, op)                                                                     \
    static PyObject *fn(PyObject *self, PyObject *unused)                                     \
    {                                                                                         \
        (void)unused;                                                                         \
        return json_cond_args((JsonPathObject *)self, op, 0, NULL, NULL);                     \
    }
#define JPATH_OP1(fn, op)                                                                     \
    static PyObject *fn(PyObject *self, PyObject *v)                                          \
    {                                                                                         \
        return json_cond_args((JsonPathObject *)self, op, 1, v, NULL);                        \
    }
JPATH_OP0(jpath_is_null, MOTE_IS_NULL)
JPATH_OP0(jpath_is_not_null, MOTE_NOT_NULL)
JPATH_OP0(jpath_exists, MOTE_KEY_EXISTS)
JPATH_OP1(jpath_contains, MOTE_ARRAY_CONTAINS)
JPATH_OP1(jpath_startswith, MOTE_STARTS_WITH)
JPATH_OP1(jpath_endswith, MOTE_ENDS_WITH)

static PyObject *jpath_repr(PyObject *self)
{
    JsonPathObject *j = (JsonPathObject *)self;
    return PyUnicode_FromFormat("%s.%U%U", prop_entity(j->prop), j->prop->name, j->shown);
}

static int jpath_traverse(PyObject *self, visitproc visit, void *arg)
{
    JsonPathObject *j = (JsonPathObject *)self;
    Py_VISIT(j->prop);
    return 0;
}

static int jpath_clear(PyObject *self)
{
    JsonPathObject *j = (JsonPathObject *)self;
    Py_CLEAR(j->prop);
    Py_CLEAR(j->path);
    Py_CLEAR(j->shown);
    return 0;
}

static void jpath_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    jpath_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static int jpath_bool(PyObject *self)
{
    (void)self;
    PyErr_SetString(PyExc_TypeError, "a JSON path has no truth value: compare it "
                    "(meta['k'] == 1) or test it (meta['k'].exists())");
    return -1;
}

static PyMethodDef jpath_methods[] = {
    {"between", (PyCFunction)(void (*)(void))jpath_between, METH_FASTCALL,
     "lo <= value <= hi (numbers with numbers, strings with strings)."},
    {"in_", jpath_in, METH_O, "value equals one of the given values."},
    {"not_in", jpath_not_in, METH_O, "value is there (not null) and equals none of them."},
    {"is_null", jpath_is_null, METH_NOARGS, "no value there, or JSON null."},
    {"is_not_null", jpath_is_not_null, METH_NOARGS, "a value other than JSON null."},
    {"exists", jpath_exists, METH_NOARGS, "the path exists (JSON null counts)."},
    {"contains", jpath_contains, METH_O, "an array holding an element equal to the value."},
    {"startswith", jpath_startswith, METH_O, "a string that starts with s."},
    {"endswith", jpath_endswith, METH_O, "a string that ends with s."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods jpath_as_mapping = {.mp_subscript = jpath_getitem};
static PyNumberMethods jpath_as_number = {.nb_bool = jpath_bool};

PyTypeObject JsonPath_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "motedb.JsonPath",
    .tp_basicsize = sizeof(JsonPathObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A path into a dict or list property, Note.meta['user']['age']: the start of "
              "conditions on the value there (==, <, in_(), contains(), exists(), ...), "
              "with SQL's NULL rules (a missing value or JSON null is NULL).",
    .tp_dealloc = jpath_dealloc,
    .tp_traverse = jpath_traverse,
    .tp_clear = jpath_clear,
    .tp_repr = jpath_repr,
    .tp_richcompare = jpath_richcompare,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_methods = jpath_methods,
    .tp_as_mapping = &jpath_as_mapping,
    .tp_as_number = &jpath_as_number,
};

/* Property[key]: a JSON path into a dict or list property. */
static PyObject *prop_getitem(PyObject *self, PyObject *key)
{
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    if (!f || (f->kind != K_DICT && f->kind != K_LIST)) {
        PyErr_Format(PyExc_TypeError, "%s.%U: [] makes a JSON path, of dict or list "
                     "properties", prop_entity(p), p->name);
        return NULL;
    }
    PyObject *root = PyUnicode_FromString("$"), *empty = PyUnicode_FromString("");
    PyObject *j = root && empty ? jpath_step(p, root, empty, key) : NULL;
    Py_XDECREF(root);
    Py_XDECREF(empty);
    return j;
}

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
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    if (f && f->kind == K_LIST) { /* tags.contains(x): the list holds an element equal to x */
        PyObject *v;
        if (!PyArg_ParseTuple(args, "O", &v) || (kwds && PyDict_GET_SIZE(kwds))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "contains(value) of a list property takes "
                                                 "one value");
            return NULL;
        }
        PyObject *root = PyUnicode_FromString("$"), *empty = PyUnicode_FromString("");
        PyObject *vals = root && empty ? PyTuple_Pack(1, v) : NULL;
        PyObject *c = vals ? json_cond(p, root, empty, MOTE_ARRAY_CONTAINS, vals) : NULL;
        Py_XDECREF(root);
        Py_XDECREF(empty);
        Py_XDECREF(vals);
        return c;
    }
    return prop_strop(self, args, kwds, MOTE_CONTAINS);
}

PyObject *prop_order(PyObject *self, unsigned flags)
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

/* The k of nearest() and matches() (kobj NULL: 10): an int of at least 1. */
static int ranked_k(const char *ent, const FieldInfo *f, const char *method, PyObject *kobj,
                    unsigned long long *k)
{
    *k = 10;
    if (!kobj)
        return 0;
    if (!PyLong_Check(kobj) || PyBool_Check(kobj)) {
        PyErr_Format(PyExc_TypeError, "%s.%s.%s(): k is an int, got %.100s", ent, f->cname, method,
                     Py_TYPE(kobj)->tp_name);
        return -1;
    }
    *k = PyLong_AsUnsignedLongLong(kobj);
    if ((*k == (unsigned long long)-1 && PyErr_Occurred()) || *k == 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s.%s.%s(): k must be at least 1, got %R", ent, f->cname,
                     method, kobj);
        return -1;
    }
    return 0;
}

/* Memory.embedding.nearest(vector, k=10, distance=None, ef=None, exact=None):
 * the k objects nearest to vector (combined with & with other conditions:
 * the k nearest of the objects they match). distance None: the vector
 * index's, else cosine; exact None: the planner's choice (mote_query_search). */
static PyObject *prop_nearest(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"vector", "k", "distance", "ef", "exact", NULL};
    PyObject *vec, *kobj = NULL, *efobj = Py_None, *exobj = Py_None;
    const char *dist = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OzOO:nearest", kwlist, &vec, &kobj, &dist,
                                     &efobj, &exobj))
        return NULL;
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    const char *ent = prop_entity(p);
    if (!f || f->kind != K_VECTOR) {
        PyErr_Format(PyExc_TypeError, "%R.nearest(): not a vector property (motedb.Vector)",
                     self);
        return NULL;
    }
    unsigned long long k;
    if (ranked_k(ent, f, "nearest", kobj, &k) < 0)
        return NULL;
    int metric = !dist                        ? (f->hdist ? f->hdist : MOTE_DIST_COSINE)
                 : !strcmp(dist, "cosine")    ? MOTE_DIST_COSINE
                 : !strcmp(dist, "euclidean") ? MOTE_DIST_EUCLIDEAN
                 : !strcmp(dist, "dot")       ? MOTE_DIST_DOT
                                              : 0;
    if (!metric) {
        PyErr_Format(PyExc_ValueError, "%s.%s.nearest(): distance is 'cosine', 'euclidean' or "
                     "'dot', got '%s'", ent, f->cname, dist);
        return NULL;
    }
    unsigned long ef = 0;
    if (efobj != Py_None) {
        if (!PyLong_Check(efobj) || PyBool_Check(efobj)) {
            PyErr_Format(PyExc_TypeError, "%s.%s.nearest(): ef is an int, got %.100s", ent,
                         f->cname, Py_TYPE(efobj)->tp_name);
            return NULL;
        }
        ef = PyLong_AsUnsignedLong(efobj);
        if ((ef == (unsigned long)-1 && PyErr_Occurred()) || ef == 0 || ef > 100000) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s.%s.nearest(): ef must be from 1 to 100000, got %R",
                         ent, f->cname, efobj);
            return NULL;
        }
    }
    int how = MOTE_NEAR_AUTO;
    if (exobj != Py_None) {
        if (!PyBool_Check(exobj)) {
            PyErr_Format(PyExc_TypeError, "%s.%s.nearest(): exact is True, False or None, got "
                         "%.100s", ent, f->cname, Py_TYPE(exobj)->tp_name);
            return NULL;
        }
        how = exobj == Py_True ? MOTE_NEAR_EXACT : MOTE_NEAR_INDEX;
        if (how == MOTE_NEAR_INDEX && f->hdist != metric) {
            PyErr_Format(PyExc_ValueError, "%s.%s.nearest(exact=False): %s", ent, f->cname,
                         f->hdist ? "the vector index is for another distance"
                                  : "the property has no vector index (motedb.Vector(dim, "
                                    "index=motedb.Hnsw()))");
            return NULL;
        }
    }
    PyObject *bytes = vector_of(ent, f, vec);
    if (!bytes)
        return NULL;
    const char *what;
    long bad = vector_nonfinite(PyBytes_AS_STRING(bytes), f->dim, &what);
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "%s.%s.nearest(): component %ld of the vector is %s", ent,
                     f->cname, bad, what);
        Py_DECREF(bytes);
        return NULL;
    }
    CondObject *c = cond_alloc(C_NEAR, p->owner);
    if (!c) {
        Py_DECREF(bytes);
        return NULL;
    }
    c->prop = (PropertyObject *)Py_NewRef(self);
    c->op = metric;
    c->k = k;
    c->how = how;
    c->ef = (unsigned)ef;
    c->vals = PyTuple_Pack(1, bytes);
    Py_DECREF(bytes);
    if (!c->vals) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

/* A property of `owner` for matches(): a string with a full-text index. */
static int fulltext_prop(PyObject *o, PyTypeObject *owner, const char *what)
{
    if (!PyObject_TypeCheck(o, &Property_Type) || ((PropertyObject *)o)->owner != owner) {
        PyErr_Format(PyExc_TypeError, "matches(%s=...): a property of %s, got %R", what,
                     owner->tp_name, o);
        return -1;
    }
    FieldInfo *f = prop_field((PropertyObject *)o);
    if (!f || f->kind != K_STR || !(f->flags & MOTE_P_FULLTEXT)) {
        PyErr_Format(PyExc_TypeError, "%R.matches(): the property has no full-text index "
                     "(Annotated[str, motedb.FullText])", o);
        return -1;
    }
    return 0;
}

/* A match weight: a real number from 0 to 1e9 (not a bool). */
static int match_weight(PyObject *o, PyObject *prop, double *w)
{
    *w = PyBool_Check(o) ? -1 : PyFloat_AsDouble(o);
    if (*w == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        *w = -1;
    }
    if (!(*w >= 0 && *w <= 1e9)) {
        PyErr_Format(PyExc_ValueError, "matches(): the weight of %R is a number from 0 to 1e9, "
                     "not %R", prop, o);
        return -1;
    }
    return 0;
}

/* matches()'s properties and weights: self with `weight`, then also's
 * (a dict {property: weight} or an iterable of properties, weight 1):
 * a tuple of (property, weight) pairs, or NULL with an exception. */
static PyObject *match_props(PyObject *self, PyObject *weight, PyObject *also)
{
    PyObject *pairs = PyList_New(0), *items = NULL;
    double w = 1;
    PropertyObject *me = (PropertyObject *)self;
    if (!pairs || (weight && match_weight(weight, self, &w) < 0))
        goto fail;
    PyObject *pw = Py_BuildValue("(Od)", self, w);
    if (!pw || PyList_Append(pairs, pw) < 0) {
        Py_XDECREF(pw);
        goto fail;
    }
    Py_DECREF(pw);
    if (also && also != Py_None) {
        items = PyDict_Check(also) ? PyDict_Items(also) : PySequence_List(also);
        if (!items) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "matches(also=...): a dict {property: weight} or "
                             "an iterable of properties, got %.100s", Py_TYPE(also)->tp_name);
            }
            goto fail;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
            PyObject *it = PyList_GET_ITEM(items, i), *prop = it;
            w = 1;
            if (PyDict_Check(also)) {
                prop = PyTuple_GET_ITEM(it, 0);
                if (match_weight(PyTuple_GET_ITEM(it, 1), prop, &w) < 0)
                    goto fail;
            }
            if (fulltext_prop(prop, me->owner, "also") < 0)
                goto fail;
            for (Py_ssize_t j = 0; j < PyList_GET_SIZE(pairs); j++)
                if (PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, j), 0) == prop) {
                    PyErr_Format(PyExc_ValueError, "matches(): %R is named twice", prop);
                    goto fail;
                }
            if (PyList_GET_SIZE(pairs) == MOTE_MATCH_PROPS_MAX) {
                PyErr_Format(PyExc_ValueError, "matches(): at most %d properties",
                             MOTE_MATCH_PROPS_MAX);
                goto fail;
            }
            FieldInfo *f0 = prop_field(me), *f = prop_field((PropertyObject *)prop);
            if ((f0->flags & MOTE_P_STEM) != (f->flags & MOTE_P_STEM)) {
                PyErr_Format(PyExc_ValueError, "matches(): %R and %R: the properties of a match "
                             "either all stem their words (FullText(stem=True)) or none does",
                             self, prop);
                goto fail;
            }
            if (!(pw = Py_BuildValue("(Od)", prop, w)) || PyList_Append(pairs, pw) < 0) {
                Py_XDECREF(pw);
                goto fail;
            }
            Py_DECREF(pw);
        }
    }
    Py_XDECREF(items);
    PyObject *t = PyList_AsTuple(pairs);
    Py_DECREF(pairs);
    return t;
fail:
    Py_XDECREF(items);
    Py_XDECREF(pairs);
    return NULL;
}

/* Memory.text.matches(text, k=10, all_terms=False, weight=1.0, also=None):
 * the k objects whose text (a property with a full-text index) holds
 * text's words (all of them with all_terms), best BM25 score first; with
 * also, over several properties at once, each match weighted (FTS5's
 * bm25() with column weights); & with other conditions: the k best of the
 * objects they match. */
static PyObject *prop_matches(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "k", "all_terms", "weight", "also", NULL};
    PyObject *text, *kobj = NULL, *weight = NULL, *also = NULL;
    int all = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OpOO:matches", kwlist, &text, &kobj, &all,
                                     &weight, &also))
        return NULL;
    PropertyObject *p = (PropertyObject *)self;
    FieldInfo *f = prop_field(p);
    const char *ent = prop_entity(p);
    if (fulltext_prop(self, p->owner, "self") < 0)
        return NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s.%s.matches(): the text is a str, got %.100s", ent,
                     f->cname, Py_TYPE(text)->tp_name);
        return NULL;
    }
    unsigned long long k;
    if (ranked_k(ent, f, "matches", kobj, &k) < 0)
        return NULL;
    PyObject *pairs = match_props(self, weight, also);
    if (!pairs)
        return NULL;
    PyObject *utf8 = PyUnicode_AsUTF8String(text);
    if (!utf8) {
        Py_DECREF(pairs);
        return NULL;
    }
    if (mote_match_check(PyBytes_AS_STRING(utf8), (size_t)PyBytes_GET_SIZE(utf8),
                         all ? MOTE_MATCH_ALL : 0)) {
        PyErr_Format(PyExc_ValueError, "%s.%s.matches(%R): %s", ent, f->cname, text,
                     mote_errmsg(NULL));
        Py_DECREF(utf8);
        Py_DECREF(pairs);
        return NULL;
    }
    CondObject *c = cond_alloc(C_MATCH, p->owner);
    if (!c) {
        Py_DECREF(utf8);
        Py_DECREF(pairs);
        return NULL;
    }
    c->prop = (PropertyObject *)Py_NewRef(self);
    c->op = all ? MOTE_MATCH_ALL : 0;
    c->k = k;
    c->vals = PyTuple_Pack(3, utf8, text, pairs);
    Py_DECREF(utf8);
    Py_DECREF(pairs);
    if (!c->vals) {
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
     "contains(s, case_sensitive=True): substring of a str or bytes property; "
     "contains(x) of a list property: an element equal to x (as a JSON path's contains())."},
    {"matches", (PyCFunction)(void (*)(void))prop_matches, METH_VARARGS | METH_KEYWORDS,
     "matches(text, *, k=10, all_terms=False, weight=1.0, also=None): the k objects whose "
     "text (a property with a full-text index, motedb.FullText) holds any of text's words "
     "(every one with all_terms), best BM25 score first; & with other conditions for the k "
     "best of their matches. also: more full-text properties of the entity searched at once, "
     "a dict {property: weight} or an iterable of properties (weight 1), as the columns of "
     "one SQLite FTS5 table ranked by bm25() with column weights (this property's: weight). "
     "find_with_scores() gives the scores."},
    {"nearest", (PyCFunction)(void (*)(void))prop_nearest, METH_VARARGS | METH_KEYWORDS,
     "nearest(vector, *, k=10, distance=None, ef=None, exact=None): the k objects whose "
     "vector is nearest (distance 'cosine', 'euclidean' or 'dot'; None: the vector index's, "
     "else 'cosine'); & with other conditions for the k nearest of their matches. With a "
     "vector index (motedb.Hnsw): exact=None lets the planner choose (exact search for small "
     "stores and small candidate sets), True compares every match, False searches the index; "
     "ef is the index search's breadth (default 64, or k if larger). "
     "Query.find_with_scores() gives the distances."},
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

static PyMappingMethods prop_as_mapping = {.mp_subscript = prop_getitem};

PyTypeObject Property_Type = {
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
    .tp_as_mapping = &prop_as_mapping,
};
