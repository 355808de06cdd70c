"""A LangChain vector store on a MoteDB store: ``MoteVectorStore``.

    from motedb.integrations.langchain import MoteVectorStore

    with MoteVectorStore.from_path("memories.mote", embedding=embeddings) as vs:
        vs.add_texts(["likes tea", "lives in Lyon"], metadatas=[{"kind": "taste"}, {}])
        vs.similarity_search("what does the user drink?", k=1)

Documents are objects of an entity of their own in the store (``LangChain_<collection>``:
its text, its metadata as JSON, its id as a unique string and its embedding as a
``motedb.Vector`` property with an HNSW index), so a store can hold several collections
beside the application's own objects. The entity is declared when the embedding's
dimension is known: at the first ``add_texts`` or search (or from ``dimension=``), and
the collection's dimension and distance are kept in the store (``LangChainCollection``)
with its first documents, so a reopened collection needs neither.
Searches are MoteDB's nearest-neighbour queries (``distance``: "cosine" (default),
"euclidean" or "dot"); ``similarity_search_with_score`` gives that distance (lower is
nearer), ``similarity_search_with_relevance_scores`` a relevance in [0, 1] for cosine
and euclidean. A ``filter`` is a dict of metadata values that a document's metadata
must equal; a filtered search returns ``k`` documents whenever ``k`` match. The async
methods are LangChain's defaults, which run these on a worker thread (MoteDB releases
the GIL while it syncs and searches).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, Callable

import motedb

from ._store import StoreHolder

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("motedb.integrations.langchain needs LangChain: "
                      "pip install 'motedb[langchain]'") from e

__all__ = ["MoteVectorStore", "LangChainCollection"]

_DISTANCES = ("cosine", "euclidean", "dot")


class LangChainCollection(motedb.Entity):
    """A collection's settings, kept when its first documents are: how to reopen it."""
    id: int = 0
    name: Annotated[str, motedb.Unique]
    dimension: int = 0
    distance: str = "cosine"

_classes: dict[tuple[str, int, str], type] = {}  # one class per (collection, dimension, distance)


def _document_class(collection: str, dim: int, distance: str) -> type:
    """The entity class of a collection's documents (made once per process: a store
    keeps one class per entity name)."""
    key = (collection, dim, distance)
    cls = _classes.get(key)
    if cls is None:
        name = f"LangChain_{collection}"
        ns = {
            "__annotations__": {
                "id": int,
                "doc_id": Annotated[str, motedb.Unique],
                "text": str,
                "metadata": dict,
                "embedding": Annotated[list[float], motedb.Vector(dim, index=motedb.Hnsw(
                    distance=distance))],
            },
            "id": 0, "text": "", "metadata": motedb.field(default_factory=dict),
            "__module__": __name__, "__qualname__": name,
        }
        cls = _classes[key] = type(name, (motedb.Entity,), ns)
    return cls


class MoteVectorStore(StoreHolder, VectorStore):
    """A LangChain ``VectorStore`` on a MoteDB store.

    ``store`` is an open ``motedb.Store`` (the caller's to close) or a path, opened with
    ``open_kwargs`` and closed by ``close()`` or the ``with`` block. ``collection``
    names the entity (letters, digits and ``_``); ``dimension`` the embeddings' length if
    known before the first add or search."""

    def __init__(self, store: motedb.Store | str | os.PathLike, embedding: Embeddings, *,
                 collection: str = "documents", distance: str = "cosine",
                 dimension: int | None = None, **open_kwargs: Any) -> None:
        if not collection.isidentifier():
            raise ValueError(f"collection {collection!r}: letters, digits and _ only")
        if distance not in _DISTANCES:
            raise ValueError(f"distance {distance!r}: one of {', '.join(_DISTANCES)}")
        self._hold(store, open_kwargs)
        self._embedding, self.collection, self.distance = embedding, collection, distance
        self._box: motedb.Box | None = None
        self._cls: type | None = None
        self._dimension = 0
        self._settings = self.store.box(LangChainCollection)
        kept = self._settings.query(LangChainCollection.name == collection).first()
        if kept is not None:
            if kept.distance != distance:
                raise ValueError(f"collection {collection!r} is kept with distance "
                                 f"{kept.distance!r}, not {distance!r}")
            dimension = dimension or kept.dimension
        if dimension is not None:
            self._open_box(dimension)

    @classmethod
    @contextmanager
    def from_path(cls, path: str | os.PathLike, embedding: Embeddings,
                  **kwargs: Any) -> Iterator[MoteVectorStore]:
        """``with MoteVectorStore.from_path(path, embedding) as vs:`` opens, then closes."""
        vs = cls(path, embedding, **kwargs)
        try:
            yield vs
        finally:
            vs.close()


    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def _open_box(self, dim: int) -> motedb.Box:
        if self._box is None:
            self._cls = _document_class(self.collection, dim, self.distance)
            self._box, self._dimension = self.store.box(self._cls), dim
        elif dim != self._dimension:
            raise ValueError(f"an embedding of {dim} floats for collection {self.collection!r}, "
                             f"whose embeddings have {self._dimension}")
        return self._box

    # ---- writing ------------------------------------------------------------------------

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Embed and store texts (one commit); a text whose id is stored replaces it.
        Returns the ids (new ones are uuid4 strings)."""
        texts = list(texts)
        if not texts:
            return []
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        ids = [str(i) if i is not None else str(uuid.uuid4())
               for i in (ids if ids is not None else [None] * len(texts))]
        if not (len(metadatas) == len(ids) == len(texts)):
            raise ValueError(f"{len(texts)} texts, {len(metadatas)} metadatas, {len(ids)} ids")
        vectors = self._embedding.embed_documents(texts)
        box = self._open_box(len(vectors[0]))
        cls = self._cls
        with self.store.write():
            if not self._settings.query(LangChainCollection.name == self.collection).count():
                self._settings.put(LangChainCollection(name=self.collection,
                                                       dimension=self._dimension,
                                                       distance=self.distance))
            stored = dict(box.query(cls.doc_id.in_(ids)).tuples(cls.doc_id, "id"))
            box.put_many([cls(id=stored.get(i, 0), doc_id=i, text=t, metadata=dict(m or {}),
                              embedding=v)
                          for i, t, m, v in zip(ids, texts, metadatas, vectors)])
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove the documents with these ids (missing ones are ignored); one commit."""
        if ids is None:
            raise ValueError("delete() needs the ids of the documents to remove")
        if self._box is None or not ids:
            return True
        self._box.query(self._cls.doc_id.in_([str(i) for i in ids])).remove()
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents with these ids, in that order (missing ones left out)."""
        if self._box is None or not ids:
            return []
        found = {o.doc_id: o for o in self._box.query(self._cls.doc_id.in_(list(ids))).find()}
        return [self._document(found[i]) for i in ids if i in found]

    # ---- searching ------------------------------------------------------------------------

    def _document(self, o: Any) -> Document:
        return Document(page_content=o.text, metadata=o.metadata, id=o.doc_id)

    def _nearest(self, vector: list[float], k: int, filter: dict | None) -> list[tuple[Any, float]]:
        box = self._open_box(len(vector))
        if k <= 0:
            return []
        cls = self._cls
        cond = cls.embedding.nearest(vector, k=k)
        for key, v in (filter or {}).items():  # conditions on the metadata's JSON, in C
            cond = cond & (cls.metadata[key] == v)
        return box.query(cond).find_with_scores()

    def similarity_search_with_score(self, query: str, k: int = 4, filter: dict | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The k documents nearest to the query's embedding, with their distance."""
        return self.similarity_search_with_score_by_vector(
            self._embedding.embed_query(query), k, filter=filter)

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               filter: dict | None = None,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        return [(self._document(o), d) for o, d in self._nearest(list(embedding), k, filter)]

    def similarity_search(self, query: str, k: int = 4, filter: dict | None = None,
                          **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4,
                                    filter: dict | None = None, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score_by_vector(embedding, k,
                                                                          filter=filter)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        if self.distance == "cosine":  # 1 - cos, in [0, 2]
            return lambda d: 1.0 - d / 2.0
        if self.distance == "euclidean":
            return self._euclidean_relevance_score_fn
        return self._max_inner_product_relevance_score_fn

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None,
                   *, ids: list[str] | None = None, path: str | os.PathLike | None = None,
                   store: motedb.Store | None = None, **kwargs: Any) -> MoteVectorStore:
        """A vector store (on ``store``, or on the store at ``path``) holding these texts."""
        if (path is None) == (store is None):
            raise TypeError("from_texts needs path= or store=")
        vs = cls(store if store is not None else path, embedding, **kwargs)
        vs.add_texts(texts, metadatas, ids=ids)
        return vs
