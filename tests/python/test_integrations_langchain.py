"""motedb.integrations.langchain: MoteVectorStore, the LangChain vector store.

- langchain-tests' VectorStoreIntegrationTests (sync and async), each test on a new store.
- Filters (metadata equality) return k documents whenever k match, as an exact search
  over the matching documents would (random vectors, synthetic).
- Reopening a store, several collections in one store, errors.
"""

import random

import motedb
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests.vectorstores import VectorStoreIntegrationTests
from motedb.integrations.langchain import MoteVectorStore


class TestMoteVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        with MoteVectorStore.from_path(tmp_path / "vs.mote", self.get_embeddings()) as vs:
            yield vs


class Fixed:
    """Embeddings given by a table (text -> vector)."""

    def __init__(self, table):
        self.table = table

    def embed_documents(self, texts):
        return [self.table[t] for t in texts]

    def embed_query(self, text):
        return self.table[text]


def test_filtered_search_returns_k_whenever_k_match(tmp_path):
    rnd = random.Random(3)
    table = {f"doc {i}": [rnd.uniform(-1, 1) for _ in range(8)] for i in range(600)}
    kinds = {f"doc {i}": ("rare" if i % 50 == 0 else "common") for i in range(600)}
    with MoteVectorStore.from_path(tmp_path / "f.mote", Fixed(table), distance="euclidean") as vs:
        texts = list(table)
        vs.add_texts(texts, [{"kind": kinds[t], "n": i} for i, t in enumerate(texts)])
        for q in rnd.sample(texts, 20):
            got = vs.similarity_search_with_score(q, k=5, filter={"kind": "rare"})
            rare = [t for t in texts if kinds[t] == "rare"]
            want = sorted(rare, key=lambda t: (sum((a - b) ** 2 for a, b in zip(table[t], table[q])),
                                               texts.index(t)))[:5]
            assert [d.page_content for d, _ in got] == want
            assert all(d.metadata["kind"] == "rare" for d, _ in got)
            assert [s for _, s in got] == sorted(s for _, s in got)
        assert vs.similarity_search(texts[0], k=3, filter={"kind": "none"}) == []
        assert len(vs.similarity_search(texts[0], k=1000, filter={"kind": "rare"})) == 12
        rel = vs.similarity_search_with_relevance_scores(texts[0], k=3)
        assert rel[0][0].page_content == texts[0] and rel[0][1] == pytest.approx(1.0)


def test_reopen_and_collections(tmp_path):
    emb = DeterministicFakeEmbedding(size=16)
    with motedb.open(tmp_path / "c.mote") as store:
        notes = MoteVectorStore(store, emb, collection="notes")
        facts = MoteVectorStore(store, emb, collection="facts")
        ids = notes.add_texts(["tea", "coffee"], ids=["a", "b"])
        facts.add_texts(["water"])
        assert ids == ["a", "b"] and [d.page_content for d in notes.similarity_search("tea", k=5)] == [
            "tea", "coffee"]
        assert [d.page_content for d in facts.similarity_search("tea", k=5)] == ["water"]
    with MoteVectorStore.from_path(tmp_path / "c.mote", emb, collection="notes") as again:
        assert [d.id for d in again.get_by_ids(["b", "zz", "a"])] == ["b", "a"]
        again.delete(["a"])
        assert [d.page_content for d in again.similarity_search("tea", k=5)] == ["coffee"]
        with pytest.raises(ValueError, match="an embedding of 3 floats"):
            again.similarity_search_by_vector([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="collection 'a-b'"):
        MoteVectorStore(tmp_path / "x.mote", emb, collection="a-b")
    with pytest.raises(ValueError, match="distance 'manhattan'"):
        MoteVectorStore(tmp_path / "x.mote", emb, distance="manhattan")
    vs = MoteVectorStore.from_texts(["one", "two"], emb, path=tmp_path / "t.mote", ids=["1", "2"])
    assert [d.id for d in vs.similarity_search("two", k=1)] == ["2"]
    vs.close()
