"""bench.agents: MoteDB's LangGraph checkpointer (MoteSaver) against LangGraph's SQLite checkpointers
(SqliteSaver, AsyncSqliteSaver) on a LangGraph-like chat workload, and MoteDB's asyncio API (motedb.aio) against
aiosqlite with 100 coroutines doing gets and small durable writes (asyncapi.py).

Run from the repository root with ``python3 -m bench.agents``; see bench/agents/README.md.
"""

import os

from bench.common.venvs import Venv

# The benchmark runs in .bench-venvs/agents/ (requirements.txt, pinned), with this checkout's motedb.
VENV = Venv("agents", os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt"))
