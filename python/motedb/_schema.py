"""Entity class definitions: annotations -> property specs for the C core.

Runs once per entity class (at class creation). Everything per-object happens
in C (``_core.c``); this module only turns type annotations into a list of
field specs and strips the defaults from the class namespace (the fields become
``__slots__``).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import re
import sys
import json
import types
import typing

from . import _core

# Kinds (how a Python value is marshalled: _core.h) and the C API's property
# types and flags (mote.h), as the extension exports them.
from ._core import (
    K_BOOL, K_BYTES, K_DATE, K_DATETIME, K_DECIMAL, K_DICT, K_FLOAT, K_ID, K_INT, K_LIST, K_STR,
    K_TOMANY, K_TOONE, K_VECTOR, P_EXPIRES, P_FULLTEXT, P_HNSW, P_INDEXED, P_NULLABLE, P_STEM,
    P_UNIQUE, T_BOOL, T_BYTES, T_DATE, T_DECIMAL, T_FLOAT32, T_FLOAT64, T_INT8, T_INT16, T_INT32,
    T_INT64, T_JSON, T_STRING, T_TIMESTAMP, T_TOMANY, T_TOONE, T_VECTOR,
)

MISSING = object()


class _Marker:
    """A marker for ``typing.Annotated`` (motedb.Index, motedb.Int16, ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"motedb.{self.name}"


class _IndexMarker(_Marker):
    """motedb.Index: a value index; called with a path, ``motedb.Index(path="user.id")``,
    an index on the value at that path inside a dict or list property."""

    __slots__ = ()

    def __call__(self, *, path: str | tuple | list) -> IndexPath:
        return IndexPath(path)


class IndexPath(_Marker):
    """``motedb.Index(path=...)``: the path (JSON-path text such as ``"user.id"`` or
    ``"tags[0]"``, or a sequence of keys and positions) whose value the index holds."""

    __slots__ = ("path",)

    def __init__(self, path: str | tuple | list) -> None:
        super().__init__("Index")
        if isinstance(path, (tuple, list)):
            steps = []
            for s in path:
                if isinstance(s, bool) or not isinstance(s, (str, int)) or (isinstance(s, int) and s < 0):
                    raise TypeError(f"motedb.Index(path=...): a step is a str key or an int >= 0, "
                                    f"not {s!r}")
                steps.append(f"[{json.dumps(s)}]")
            path = "$" + "".join(steps)
        if not isinstance(path, str) or not path:
            raise TypeError(f"motedb.Index(path=...) takes a JSON path, not {path!r}")
        self.path = path

    def __repr__(self) -> str:
        return f"motedb.Index(path={self.path!r})"


class _FullTextMarker(_Marker):
    """motedb.FullText: a full-text index; ``motedb.FullText(stem=True)``, one whose words
    (stored and searched) are stemmed as English, as SQLite FTS5's porter tokenizer does."""

    __slots__ = ()

    def __call__(self, *, stem: bool = False) -> _Marker:
        if not isinstance(stem, bool):
            raise TypeError(f"motedb.FullText(stem=...) takes a bool, not {stem!r}")
        return FullTextStem if stem else self


Index = _IndexMarker("Index")
FullText = _FullTextMarker("FullText")
FullTextStem = _Marker("FullText(stem=True)")
Expires = _Marker("Expires")
Unique = _Marker("Unique")
Int8 = _Marker("Int8")
Int16 = _Marker("Int16")
Int32 = _Marker("Int32")
Float32 = _Marker("Float32")
_INT_MARKERS = {Int8: T_INT8, Int16: T_INT16, Int32: T_INT32}


_DISTANCES = {"cosine": 1, "euclidean": 2, "dot": 3}  # MOTE_DIST_*


class Hnsw:
    """A vector index for ``motedb.Vector(dim, index=motedb.Hnsw(...))``: an HNSW graph.

    ``distance``: the distance its searches use, ``"cosine"`` (the default), ``"euclidean"``
    or ``"dot"``; a ``nearest()`` with another distance is answered by exact search.
    ``m``: links per node and level (2 to 100, default 16; twice as many at the bottom level):
    more finds more of the true nearest at a higher cost per vector.
    ``ef_construction``: the breadth of the search that places a new vector (m to 4096,
    default 200). Both are kept in the store; declaring other values rebuilds the index.
    """

    __slots__ = ("distance", "m", "ef_construction")

    def __init__(self, distance: str = "cosine", m: int = 16, ef_construction: int = 200) -> None:
        if distance not in _DISTANCES:
            raise ValueError(f"motedb.Hnsw: distance is 'cosine', 'euclidean' or 'dot', got {distance!r}")
        if not isinstance(m, int) or isinstance(m, bool) or not 2 <= m <= 100:
            raise ValueError(f"motedb.Hnsw: m must be an int from 2 to 100, got {m!r}")
        if (not isinstance(ef_construction, int) or isinstance(ef_construction, bool)
                or not m <= ef_construction <= 4096):
            raise ValueError(f"motedb.Hnsw: ef_construction must be an int from m ({m}) to 4096, "
                             f"got {ef_construction!r}")
        self.distance = distance
        self.m = m
        self.ef_construction = ef_construction

    def __repr__(self) -> str:
        return f"motedb.Hnsw(distance={self.distance!r}, m={self.m}, ef_construction={self.ef_construction})"


class Vector:
    """``Annotated[list[float], motedb.Vector(dim)]``: a float32 vector of ``dim`` floats.

    ``index=motedb.Hnsw(...)`` keeps a vector index over the property, which
    ``nearest()`` uses on large stores (see :class:`Hnsw`).
    """

    __slots__ = ("dim", "index")

    def __init__(self, dim: int, index: Hnsw | None = None) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 65536:
            raise ValueError(f"motedb.Vector: dimension must be an int from 1 to 65536, got {dim!r}")
        if index is Hnsw:
            index = Hnsw()
        if index is not None and not isinstance(index, Hnsw):
            raise TypeError(f"motedb.Vector: index is motedb.Hnsw(...) or None, got {index!r}")
        self.dim = dim
        self.index = index

    def __repr__(self) -> str:
        if self.index is None:
            return f"motedb.Vector({self.dim})"
        return f"motedb.Vector({self.dim}, index={self.index!r})"


class Field:
    """Returned by :func:`field`: a default and schema options for one property."""

    __slots__ = ("default", "default_factory", "renamed_from")

    def __init__(self, default, default_factory, renamed_from) -> None:
        self.default = default
        self.default_factory = default_factory
        self.renamed_from = renamed_from

    def __repr__(self) -> str:
        return (f"motedb.field(default={self.default!r}, default_factory={self.default_factory!r}, "
                f"renamed_from={self.renamed_from!r})")


def field(*, default=MISSING, default_factory=MISSING, renamed_from: str | None = None):
    """Options of one property: ``default``, ``default_factory`` (called for each new
    object) and ``renamed_from`` (the property's old name: its stored data is kept)."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("motedb.field: give default or default_factory, not both")
    if default_factory is not MISSING and not callable(default_factory):
        raise TypeError("motedb.field: default_factory must be callable")
    if renamed_from is not None and (not isinstance(renamed_from, str) or not renamed_from):
        raise TypeError("motedb.field: renamed_from must be a non-empty str")
    return Field(default, default_factory, renamed_from)


class _Relation:
    __slots__ = ("kind", "target")

    def __init__(self, kind, target):
        self.kind = kind
        self.target = target

    def __repr__(self):
        return f"motedb.{self.kind}[{self.target!r}]"

    def __or__(self, other):  # ToOne["X"] | None: to-one relations are always nullable
        if other is None and self.kind == "ToOne":
            return self
        raise TypeError(f"{self!r} | {other!r}: only a to-one relation can be '| None'")

    __ror__ = __or__


def _target_name(kind, target) -> str:
    if isinstance(target, type):
        target = target.__name__
    elif isinstance(target, typing.ForwardRef):
        target = target.__forward_arg__
    if not isinstance(target, str) or not target.isidentifier():
        raise TypeError(f"motedb.{kind}[...]: the target must be an entity class or its name, "
                        f"got {target!r}")
    return target


class ToOne:
    """``motedb.ToOne["Other"]``: a to-one relation (reads as the related object or None)."""

    def __class_getitem__(cls, target):
        return _Relation("ToOne", _target_name("ToOne", target))


class ToMany:
    """``motedb.ToMany["Other"]``: a to-many relation (reads as a list of related objects)."""

    def __class_getitem__(cls, target):
        return _Relation("ToMany", _target_name("ToMany", target))


_REL_RE = re.compile(r"^\s*(?:\w+\.)*(ToOne|ToMany)\[\s*(['\"]?)(\w+)\2\s*\]\s*(\|\s*None\s*)?$")


_MUTABLE = (list, dict, set, bytearray)
_NONE = type(None)


def _is_relation(tp) -> bool:
    if isinstance(tp, _Relation) or tp is ToOne or tp is ToMany:
        return True
    return isinstance(tp, str) and (tp.startswith("ToOne[") or tp.startswith("ToMany[")
                                    or tp.startswith("motedb.ToOne[") or tp.startswith("motedb.ToMany["))


def _annotations(ns: dict) -> dict:
    ann = ns.get("__annotations__")
    if ann is None and "__annotate__" in ns:  # Python 3.14: lazily evaluated annotations
        try:
            ann = ns["__annotate__"](1)
        except NameError:
            ann = ns["__annotate__"](2)  # forward references: keep them as strings
    return dict(ann or {})


def _evaluate(where: str, tp, globalns: dict, localns: dict):
    if isinstance(tp, str):
        m = _REL_RE.match(tp)
        if m:
            return _Relation(m.group(1), m.group(3))
        if _is_relation(tp):
            raise TypeError(f"{where}: cannot read the relation annotation {tp!r} (write "
                            f"motedb.ToOne[\"Other\"] or motedb.ToMany[\"Other\"])")
        try:
            return eval(tp, globalns, localns)  # noqa: S307 (annotations are code)
        except Exception as e:
            raise TypeError(f"{where}: cannot evaluate the annotation {tp!r}: {e}") from None
    return tp


def _split(where: str, tp):
    """-> (base type, nullable, markers)."""
    markers: list = []
    nullable = False
    for _ in range(3):
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            markers.extend(tp.__metadata__)
            tp = tp.__origin__
            continue
        if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(tp, types.UnionType)):
            args = [a for a in typing.get_args(tp) if a is not _NONE]
            if len(args) != len(typing.get_args(tp)) - 1 or len(args) != 1:
                raise TypeError(f"{where}: unions are not supported (only X | None), got {tp!r}")
            nullable = True
            tp = args[0]
            continue
        break
    return tp, nullable, markers


def _kind_of(where: str, tp, markers):
    """-> (kind, mote type, dim, vector index or None)."""
    vec = [m for m in markers if isinstance(m, Vector)]
    ints = [m for m in markers if m in _INT_MARKERS]
    f32 = Float32 in markers
    if len(vec) + len(ints) + f32 > 1:
        raise TypeError(f"{where}: conflicting markers {markers!r}")
    origin = typing.get_origin(tp) or tp
    if vec:
        if origin not in (list, tuple) and tp is not typing.Any:
            raise TypeError(f"{where}: motedb.Vector needs a list[float] annotation, got {tp!r}")
        return K_VECTOR, T_VECTOR, vec[0].dim, vec[0].index
    if ints and tp is not int:
        raise TypeError(f"{where}: {ints[0]!r} needs an int annotation, got {tp!r}")
    if f32 and tp is not float:
        raise TypeError(f"{where}: motedb.Float32 needs a float annotation, got {tp!r}")
    if tp is bool:
        return K_BOOL, T_BOOL, 0, None
    if tp is int:
        return K_INT, _INT_MARKERS[ints[0]] if ints else T_INT64, 0, None
    if tp is float:
        return K_FLOAT, T_FLOAT32 if f32 else T_FLOAT64, 0, None
    if tp is str:
        return K_STR, T_STRING, 0, None
    if tp is bytes:
        return K_BYTES, T_BYTES, 0, None
    if tp is _dt.datetime:
        return K_DATETIME, T_TIMESTAMP, 0, None
    if tp is _dt.date:
        return K_DATE, T_DATE, 0, None
    if tp is _decimal.Decimal:
        return K_DECIMAL, T_DECIMAL, 0, None
    if origin is dict:
        return K_DICT, T_JSON, 0, None
    if origin is list:
        return K_LIST, T_JSON, 0, None
    raise TypeError(f"{where}: type {tp!r} is not supported (bool, int, float, str, bytes, datetime, "
                    f"date, Decimal, dict, list, and X | None of those)")


def prepare(name: str, bases: tuple, ns: dict):
    """Called by the entity metaclass: -> (namespace with __slots__, field specs).

    A spec is (name, kind, mote type, flags, dim, default, default_factory, renamed_from,
    relation target entity name or None[, vector index: (distance, m, ef_construction)]);
    the first one is the id."""
    if "__slots__" in ns:
        raise TypeError(f"entity {name}: do not declare __slots__ (motedb makes them from the annotations)")
    try:  # the namespace of the class statement (prepare is called from the metaclass in C)
        globalns = sys._getframe(1).f_globals
    except (AttributeError, ValueError):
        module = sys.modules.get(ns.get("__module__", ""), None)
        globalns = vars(module) if module else {}
    localns = dict(ns)
    localns.setdefault(name, None)
    ann = _annotations(ns)
    specs = []
    names = []
    ns = dict(ns)
    id_seen = False
    rels: dict = {}
    for attr, tp in ann.items():
        where = f"{name}.{attr}"
        tp = _evaluate(where, tp, globalns, localns)
        if typing.get_origin(tp) is typing.ClassVar or tp is typing.ClassVar:
            continue
        if attr.startswith("__"):
            raise TypeError(f"{where}: property names must not start with '__'")
        raw = ns.pop(attr, MISSING)
        default, factory, renamed = raw, MISSING, None
        if isinstance(raw, Field):
            default, factory, renamed = raw.default, raw.default_factory, raw.renamed_from
        base, nullable, markers = _split(where, tp)
        if any(_is_relation(m) for m in markers) or base is ToOne or base is ToMany:
            raise TypeError(f"{where}: write a relation as motedb.ToOne[\"Other\"] or "
                            f"motedb.ToMany[\"Other\"]")
        if isinstance(base, _Relation):
            if markers:
                raise TypeError(f"{where}: a relation takes no markers (to-one relations are "
                                f"always indexed)")
            if base.kind == "ToMany" and nullable:
                raise TypeError(f"{where}: a to-many relation cannot be None (it is a list)")
            if factory is not MISSING or default not in (MISSING, None):
                raise TypeError(f"{where}: a relation has no default (to-one: None, to-many: "
                                f"an empty list)")
            if attr == "id":
                raise TypeError(f"{where}: the id must be declared as 'id: int = 0'")
            if base.kind == "ToOne":
                specs.append((attr, K_TOONE, T_TOONE, P_NULLABLE | P_INDEXED, 0, None, None,
                              renamed, base.target))
            else:
                specs.append((attr, K_TOMANY, T_TOMANY, 0, 0, None, None, renamed, base.target))
            names.append(attr)
            rels[attr] = (base.kind, base.target)
            continue
        if attr == "id":
            if base is not int or nullable or markers:
                raise TypeError(f"{where}: the id must be declared as 'id: int = 0'")
            if factory is not MISSING or renamed is not None or default not in (MISSING, 0):
                raise TypeError(f"{where}: the id must be declared as 'id: int = 0'")
            id_seen = True
            specs.insert(0, ("id", K_ID, 0, 0, 0, 0, None, None, None))
            names.insert(0, "id")
            continue
        for m in markers:
            if not isinstance(m, (_Marker, Vector)):
                raise TypeError(f"{where}: unknown annotation marker {m!r}")
        kind, mtype, dim, vindex = _kind_of(where, base, markers)
        flags = P_NULLABLE if nullable else 0
        if vindex is not None:
            flags |= P_HNSW
        paths = [m.path for m in markers if isinstance(m, IndexPath)]
        if Unique in markers:
            flags |= P_UNIQUE | P_INDEXED
        elif Index in markers or paths:
            flags |= P_INDEXED
        if paths and (kind not in (K_DICT, K_LIST) or len(paths) > 1 or Unique in markers):
            raise TypeError(f"{where}: motedb.Index(path=...) is one index on a dict or list "
                            f"property (not unique)")
        if flags & P_INDEXED and kind in (K_DECIMAL, K_DICT, K_LIST, K_VECTOR) and not paths:
            raise TypeError(f"{where}: {base!r} properties cannot be indexed"
                            + (" (a dict or list property: on a path, motedb.Index(path=\"a.b\"))"
                               if kind in (K_DICT, K_LIST) else ""))
        if FullText in markers or FullTextStem in markers:
            if kind != K_STR:
                raise TypeError(f"{where}: a full-text index (motedb.FullText) is for str "
                                f"properties, not {base!r}")
            flags |= P_FULLTEXT | (P_STEM if FullTextStem in markers else 0)
        if Expires in markers:
            if kind != K_DATETIME:
                raise TypeError(f"{where}: an expiry time (motedb.Expires) is a datetime "
                                f"property, not {base!r}")
            if Unique in markers:
                raise TypeError(f"{where}: an expiry time cannot be unique")
            flags |= P_EXPIRES | P_INDEXED
        if isinstance(default, _MUTABLE):
            raise ValueError(f"{where}: mutable default {default!r}: use "
                             f"motedb.field(default_factory={type(default).__name__})")
        if default is MISSING and factory is MISSING and nullable:
            default = None  # X | None fields default to None
        specs.append((attr, kind, mtype, flags, dim, default,
                      None if factory is MISSING else factory, renamed, None,
                      None if vindex is None else
                      (_DISTANCES[vindex.distance], vindex.m, vindex.ef_construction),
                      paths[0] if paths else None))
        names.append(attr)
    for attr, v in ns.items():
        if isinstance(v, Field):
            raise TypeError(f"{name}.{attr}: motedb.field() without a type annotation")
    if not id_seen:
        raise TypeError(f"entity {name}: declare the object id as 'id: int = 0'")
    if len(specs) > 1000:
        raise TypeError(f"entity {name}: at most 1000 properties")
    if rels:
        names.append("_motedb_store")
        ns["_motedb_relations"] = Relations(rels)
        for attr, (kind, _target) in rels.items():
            if kind != "ToOne":
                continue
            raw = f"{attr}_id"
            if raw in ann or raw in ns:
                raise TypeError(f"{name}.{raw}: the to-one relation {name}.{attr} provides "
                                f"{raw} (its target's id, readable and settable); do not "
                                f"declare it, or rename one of the two")
            ns[raw] = RawId(attr)
    names.append("_motedb_gc")  # hidden: marks an instance whose slots all need visiting (entity.c)
    ns["__slots__"] = tuple(names)
    return ns, specs


# ---- relations: the Python side --------------------------------------------------
#
# The C core stores a to-one relation as the id of the target object (its slot
# holds an id, the loaded object, or None) and a to-many relation as link
# records (its slot holds None until loaded or assigned, then a plain list of
# objects). Reading and setting these attributes calls rel_get / rel_set;
# box.put calls after_put in its transaction to make the stored links of each
# loaded or assigned to-many list equal to that list.


TO_ONE, TO_MANY = "ToOne", "ToMany"


class Relations:
    """``_motedb_relations`` of an entity class with relations: attribute ->
    (kind, target entity name); also keeps the raw slot descriptors."""

    __slots__ = ("rels", "raw")

    def __init__(self, rels: dict) -> None:
        self.rels = rels
        self.raw: dict = {}

    def __set_name__(self, owner, name) -> None:
        # Called while the class is created, before the C core replaces the slot
        # descriptors by motedb.Property objects: keep them for raw access.
        for attr in self.rels:
            self.raw[attr] = owner.__dict__[attr]

    def __repr__(self) -> str:
        return f"<motedb relations {self.rels!r}>"


class RawId:
    """``obj.<relation>_id``: the id a to-one relation holds (None: unset)."""

    __slots__ = ("attr", "member")

    def __init__(self, attr: str) -> None:
        self.attr = attr
        self.member = None

    def __set_name__(self, owner, name) -> None:
        self.member = owner.__dict__[self.attr]

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        raw = self.member.__get__(obj, type(obj))
        if isinstance(raw, _core.Entity):
            return raw.id or None
        return raw or None

    def __set__(self, obj, value) -> None:
        setattr(obj, self.attr, value)


def resolve(name: str, src: type, store=None) -> type:
    """The entity class named ``name``: ``src`` itself for a self-reference; else
    the class whose box holds that entity in ``store``; else the one of that name in
    ``src``'s module; else the most recently defined entity class with that name."""
    if src.__name__ == name:
        return src
    if store is not None:
        cls = store._boxed_class(name)
        if cls is not None:
            return cls
    cls = getattr(sys.modules.get(src.__module__), name, None)
    if isinstance(cls, type) and issubclass(cls, _core.Entity) and cls.__name__ == name:
        return cls
    for cls in reversed(_core.Entity.__subclasses__()):
        if cls.__name__ == name:
            return cls
    raise LookupError(f"{src.__name__}: no entity class named {name!r} (relation target)")


def _store(obj, where: str):
    store = getattr(obj, "_motedb_store", None)
    if store is None:
        raise RuntimeError(f"{where}: the object was not loaded from or put to a store, so "
                           f"its relation cannot be loaded")
    return store


def rel_get(prop, obj, raw):
    cls = type(obj)
    kind, target = cls._motedb_relations.rels[prop.name]
    where = f"{cls.__name__}.{prop.name}"
    if kind == TO_ONE:
        if raw is None or isinstance(raw, _core.Entity):
            return raw
        store = _store(obj, where)
        other = store.box(resolve(target, cls, store)).get(raw)
        if other is not None:
            setattr(obj, prop.name, other)  # cache it (put writes its id)
        return other
    if raw is not None:
        return raw
    objs: list = []
    if obj.id:
        store = _store(obj, where)
        ids = store.box(cls)._links(prop, obj.id)
        if ids:
            objs = [o for o in store.box(resolve(target, cls, store)).get_many(ids)
                    if o is not None]
    setattr(obj, prop.name, objs)
    return cls._motedb_relations.raw[prop.name].__get__(obj, cls)


def _check_target(where: str, target: str, v) -> None:
    if not isinstance(v, _core.Entity):
        raise TypeError(f"{where}: expected a {target} object, got {type(v).__name__}")
    if type(v).__name__ != target:
        raise TypeError(f"{where}: expected a {target} object, got a {type(v).__name__} object")


def rel_set(prop, obj, value):
    cls = type(obj)
    kind, target = cls._motedb_relations.rels[prop.name]
    where = f"{cls.__name__}.{prop.name}"
    if kind == TO_ONE:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                raise ValueError(f"{where}: invalid object id {value!r}")
            return value or None
        _check_target(where, target, value)
        if not value.id:
            raise ValueError(f"{where}: the {target} object has no id yet: put it first")
        return value
    if value is None or isinstance(value, (str, bytes, _core.Entity)):
        raise TypeError(f"{where}: expected a list of {target} objects, got {type(value).__name__}")
    items = list(value)
    for v in items:
        _check_target(where, target, v)
    return items


def after_put(box, obj, new_id) -> None:
    """Inside box.put's transaction: write the to-many links of obj."""
    cls = type(obj)
    rels = cls._motedb_relations
    for attr, (kind, target) in rels.rels.items():
        if kind != TO_MANY:
            continue
        try:
            items = rels.raw[attr].__get__(obj, cls)
        except AttributeError:
            continue
        if items is None:  # not loaded nor assigned: links unchanged
            continue
        where = f"{cls.__name__}.{attr}"
        want: list = []
        for v in items:
            _check_target(where, target, v)
            if not v.id:
                raise ValueError(f"{where}: a {target} object in the list has no id yet: "
                                 f"put it first")
            want.append(v.id)
        prop = cls.__dict__[attr]
        have = box._links(prop, new_id)
        hs, ws = set(have), set(want)
        add = [i for i in dict.fromkeys(want) if i not in hs]
        remove = [i for i in have if i not in ws]
        if add or remove:
            box._relink(prop, new_id, add, remove)
