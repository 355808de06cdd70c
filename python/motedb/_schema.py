"""Entity class definitions: annotations -> property specs for the C core.

Runs once per entity class (at class creation). Everything per-object happens
in C (``_core.c``); this module only turns type annotations into a list of
field specs and strips the defaults from the class namespace (the fields become
``__slots__``).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import sys
import types
import typing

# Kinds: how a Python value is marshalled (shared with _core.c).
K_ID, K_BOOL, K_INT, K_FLOAT, K_STR, K_BYTES, K_DATETIME, K_DATE, K_DECIMAL, K_DICT, K_LIST, \
    K_VECTOR = range(12)

# Property types and flags of the C API (mote.h).
T_BOOL, T_INT8, T_INT16, T_INT32, T_INT64, T_FLOAT32, T_FLOAT64, T_STRING, T_BYTES, \
    T_TIMESTAMP, T_DATE, T_DECIMAL, T_JSON, T_VECTOR = range(1, 15)
P_NULLABLE, P_INDEXED, P_UNIQUE = 0x1, 0x2, 0x4

MISSING = object()


class _Marker:
    """A marker for ``typing.Annotated`` (motedb.Index, motedb.Int16, ...)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"motedb.{self.name}"


Index = _Marker("Index")
Unique = _Marker("Unique")
Int8 = _Marker("Int8")
Int16 = _Marker("Int16")
Int32 = _Marker("Int32")
Float32 = _Marker("Float32")
_INT_MARKERS = {Int8: T_INT8, Int16: T_INT16, Int32: T_INT32}


class Vector:
    """``Annotated[list[float], motedb.Vector(dim)]``: a float32 vector of ``dim`` floats."""

    __slots__ = ("dim",)

    def __init__(self, dim: int) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 65536:
            raise ValueError(f"motedb.Vector: dimension must be an int from 1 to 65536, got {dim!r}")
        self.dim = dim

    def __repr__(self) -> str:
        return f"motedb.Vector({self.dim})"


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


class ToOne:
    """``motedb.ToOne["Other"]``: a to-one relation (not supported yet)."""

    def __class_getitem__(cls, target):
        return _Relation("ToOne", target)


class ToMany:
    """``motedb.ToMany["Other"]``: a to-many relation (not supported yet)."""

    def __class_getitem__(cls, target):
        return _Relation("ToMany", target)


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
        if _is_relation(tp):
            return _Relation("ToOne", tp)
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
    """-> (kind, mote type, dim)."""
    vec = [m for m in markers if isinstance(m, Vector)]
    ints = [m for m in markers if m in _INT_MARKERS]
    f32 = Float32 in markers
    if len(vec) + len(ints) + f32 > 1:
        raise TypeError(f"{where}: conflicting markers {markers!r}")
    origin = typing.get_origin(tp) or tp
    if vec:
        if origin not in (list, tuple) and tp is not typing.Any:
            raise TypeError(f"{where}: motedb.Vector needs a list[float] annotation, got {tp!r}")
        return K_VECTOR, T_VECTOR, vec[0].dim
    if ints and tp is not int:
        raise TypeError(f"{where}: {ints[0]!r} needs an int annotation, got {tp!r}")
    if f32 and tp is not float:
        raise TypeError(f"{where}: motedb.Float32 needs a float annotation, got {tp!r}")
    if tp is bool:
        return K_BOOL, T_BOOL, 0
    if tp is int:
        return K_INT, _INT_MARKERS[ints[0]] if ints else T_INT64, 0
    if tp is float:
        return K_FLOAT, T_FLOAT32 if f32 else T_FLOAT64, 0
    if tp is str:
        return K_STR, T_STRING, 0
    if tp is bytes:
        return K_BYTES, T_BYTES, 0
    if tp is _dt.datetime:
        return K_DATETIME, T_TIMESTAMP, 0
    if tp is _dt.date:
        return K_DATE, T_DATE, 0
    if tp is _decimal.Decimal:
        return K_DECIMAL, T_DECIMAL, 0
    if origin is dict:
        return K_DICT, T_JSON, 0
    if origin is list:
        return K_LIST, T_JSON, 0
    raise TypeError(f"{where}: type {tp!r} is not supported (bool, int, float, str, bytes, datetime, "
                    f"date, Decimal, dict, list, and X | None of those)")


def prepare(name: str, bases: tuple, ns: dict):
    """Called by the entity metaclass: -> (namespace with __slots__, field specs).

    A spec is (name, kind, mote type, flags, dim, default, default_factory, renamed_from);
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
        if _is_relation(base) or any(_is_relation(m) for m in markers):
            raise TypeError(f"{where}: relations (motedb.ToOne / motedb.ToMany) are not supported yet")
        if attr == "id":
            if base is not int or nullable or markers:
                raise TypeError(f"{where}: the id must be declared as 'id: int = 0'")
            if factory is not MISSING or renamed is not None or default not in (MISSING, 0):
                raise TypeError(f"{where}: the id must be declared as 'id: int = 0'")
            id_seen = True
            specs.insert(0, ("id", K_ID, 0, 0, 0, 0, None, None))
            names.insert(0, "id")
            continue
        for m in markers:
            if not isinstance(m, (_Marker, Vector)):
                raise TypeError(f"{where}: unknown annotation marker {m!r}")
        kind, mtype, dim = _kind_of(where, base, markers)
        flags = P_NULLABLE if nullable else 0
        if Unique in markers:
            flags |= P_UNIQUE | P_INDEXED
        elif Index in markers:
            flags |= P_INDEXED
        if flags & P_INDEXED and kind in (K_DECIMAL, K_DICT, K_LIST, K_VECTOR):
            raise TypeError(f"{where}: {base!r} properties cannot be indexed")
        if isinstance(default, _MUTABLE):
            raise ValueError(f"{where}: mutable default {default!r}: use "
                             f"motedb.field(default_factory={type(default).__name__})")
        if default is MISSING and factory is MISSING and nullable:
            default = None  # X | None fields default to None
        specs.append((attr, kind, mtype, flags, dim, default,
                      None if factory is MISSING else factory, renamed))
        names.append(attr)
    for attr, v in ns.items():
        if isinstance(v, Field):
            raise TypeError(f"{name}.{attr}: motedb.field() without a type annotation")
    if not id_seen:
        raise TypeError(f"entity {name}: declare the object id as 'id: int = 0'")
    if len(specs) > 1000:
        raise TypeError(f"entity {name}: at most 1000 properties")
    ns["__slots__"] = tuple(names)
    return ns, specs
