"""bench.replication: MoteDB's replicator (motedb.replicate) against Litestream 0.5 replicating SQLite in WAL
mode, to one S3 API server (moto) on loopback, through a counting proxy.

Run from the repository root with ``python3 -m bench.replication``; see bench/replication/README.md.
"""

import os

from bench.common.venvs import Venv

# The benchmark runs in .bench-venvs/replication/ (requirements.txt, pinned), with this checkout's motedb.
VENV = Venv("replication", os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt"))
