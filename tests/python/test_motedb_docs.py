"""The examples of docs/python.md, docs/integrations.md and docs/replication.md run as written, in order, in a
scratch directory."""

import os
import re

import pytest

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")


@pytest.mark.parametrize("doc,min_blocks", [("python.md", 10), ("integrations.md", 4),
                                            ("replication.md", 1)])
def test_docs_examples(tmp_path, monkeypatch, doc, min_blocks):
    if doc == "replication.md":  # runs against moto's S3 server (the integrations' venv)
        pytest.importorskip("boto3")
        pytest.importorskip("moto.server")
    with open(os.path.join(DOCS, doc), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= min_blocks
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "motedb_docs"}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/{doc} block {i + 1}", "exec")
        exec(code, ns)
