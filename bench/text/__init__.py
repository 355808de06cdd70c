"""bench.text: full-text search, MoteDB against SQLite FTS5 (issue 19).

Run from the repository root with ``python3 -m bench.text``; see bench/text/README.md.
"""

import os

from bench.common.venvs import Venv

# The benchmark runs in .bench-venvs/text/ (requirements.txt, pinned), with this checkout's motedb.
VENV = Venv("text", os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt"))
