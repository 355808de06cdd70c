"""Run by `make test-python-asan`: the motedb imported is the ASan/UBSan build."""
import os

import pytest

import motedb


@pytest.mark.skipif("build-pyasan" not in motedb.__file__, reason="only in make test-python-asan")
def test_the_sanitized_extension_is_loaded():
    assert "build-pyasan" in motedb._core.__file__
    assert "libasan" in os.environ.get("LD_PRELOAD", "")
