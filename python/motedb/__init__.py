"""MoteDB: an embedded object database for Python, written in C.

    import motedb
    from typing import Annotated

    class Note(motedb.Entity):
        id: int = 0
        text: Annotated[str, motedb.Index]
        level: Annotated[int, motedb.Int16] = 0

    with motedb.open("notes.mote") as store:
        box = store.box(Note)
        box.put(Note(text="hello", level=3))
        box.query(Note.level >= 3).order_by(Note.text).find()

See docs/python.md for the whole API.
"""

from __future__ import annotations

import decimal as _decimal
import json as _json
import os as _os

from . import _core, _schema
from ._core import (  # noqa: F401  (re-exported)
    Box,
    BusyError,
    ClosedError,
    Condition,
    CorruptError,
    Entity,
    Error,
    ExistsError,
    FileSystemError,
    ForkedError,
    JsonPath,
    NotFoundError,
    Order,
    Property,
    Query,
    QueryIterator,
    ReadOnlyError,
    SchemaError,
    Store,
    StoreLockedError,
    Transaction,
    TransactionError,
    UniqueViolationError,
    WouldBlockError,
    apply_delta,
    tokenize,
)
from ._schema import (Expires, FullText, Float32, Hnsw, Index, Int8, Int16, Int32, ToMany, ToOne, Unique,
                      Vector, field)

__version__ = _core.version

# JSON properties: compact text, non-ASCII kept. json's C encoder and scanner
# are built once and called from C (json.dumps/loads would build them, and run
# Python code, on every call).
_json_encoder = _json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
if _json.encoder.c_make_encoder is not None:  # (circular values: RecursionError, refused)
    _dumps = _json.encoder.c_make_encoder(None, _json_encoder.default,
                                          _json.encoder.encode_basestring, None, ":", ",",
                                          False, False, True)
else:
    def _dumps(obj, _level):
        return _json_encoder.encode(obj)
_core._init(prepare=_schema.prepare, Decimal=_decimal.Decimal, dumps=_dumps,
            loads=_json.loads, scan=getattr(_json.decoder.JSONDecoder(), "scan_once", None),
            missing=_schema.MISSING, rel_get=_schema.rel_get, rel_set=_schema.rel_set,
            after_put=_schema.after_put)


def open(path: str | _os.PathLike, *, readonly: bool = False, create: bool = True,
         sync: bool = True, timeout: float | None = 5.0, exclusive: bool = False,
         page_size: int | None = None, repack: bool = False) -> Store:
    """Open the store file at ``path`` (created if missing unless ``create=False``).

    Any number of processes may have a store open at once (web workers, a CLI beside a
    service): they read without waiting for each other, and their writes take turns; a
    write waits up to ``timeout`` seconds (``None``: as long as it takes; 0: not at all)
    while another process writes, then raises ``BusyError`` naming it.
    ``exclusive=True`` keeps every other process out while this one has it open
    (``StoreLockedError`` for them). ``readonly=True`` opens it for reading only;
    ``sync=False`` makes commits fast but not durable (a crash of the process loses
    nothing committed; a crash of the machine may lose the latest commits or leave the
    file damaged). ``page_size`` (bytes, a power of two from 4096 to 65536; default 4096)
    applies when the file is created and is kept by it: an object of more than a quarter
    of a page is stored in pages of its own, so a store of objects of 1-2 KB (a vector of
    384 floats) takes about half the space with 8192. ``repack=True`` makes ``close()``
    repack a store of up to 8 MB that is a quarter free pages or more, when its objects
    would fill a quarter fewer pages: a smaller file (about half, for a store that many
    small commits wrote), at two more syncs when it runs, and the next session's first
    large commits extend the file instead of reusing free pages in it (slower syncs):
    for stores written mostly once and kept, as the LangGraph integrations' are. Use
    the store as a context manager or call ``close()``."""
    return Store(path, readonly=readonly, create=create, sync=sync, timeout=timeout,
                 exclusive=exclusive, page_size=page_size, repack=repack)


__all__ = [
    "Box", "BusyError", "ClosedError", "Condition", "CorruptError", "Entity", "Error",
    "ExistsError", "Expires", "FileSystemError", "Float32", "ForkedError", "FullText", "Hnsw", "Index", "Int8", "Int16", "Int32",
    "JsonPath", "NotFoundError", "Order", "Property", "Query", "QueryIterator", "ReadOnlyError",
    "SchemaError", "Store", "StoreLockedError", "ToMany", "ToOne", "Transaction",
    "TransactionError", "Unique", "UniqueViolationError", "Vector", "WouldBlockError", "__version__",
    "field",
    "apply_delta", "open", "tokenize",
]
