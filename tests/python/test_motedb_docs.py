"""The examples of docs/python.md run as written, in order, in a scratch directory."""

import os
import re

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_docs_examples(tmp_path, monkeypatch):
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 10
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "motedb_docs"}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/python.md block {i + 1}", "exec")
        exec(code, ns)
