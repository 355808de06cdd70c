"""MoteDB plugged into agent frameworks.

- ``motedb.integrations.langgraph``: ``MoteSaver``, a LangGraph checkpointer (sync and
  async) on a MoteDB store (``pip install motedb[langgraph]``).
- ``motedb.integrations.langgraph_store``: ``MoteStore``, LangGraph's long-term memory
  store (``BaseStore``), with semantic search (``pip install motedb[langgraph]``).
- ``motedb.integrations.langchain``: ``MoteVectorStore``, a LangChain vector store
  (``pip install motedb[langchain]``).

Each module imports its framework; the core ``motedb`` package needs none of them.
See docs/integrations.md.
"""
