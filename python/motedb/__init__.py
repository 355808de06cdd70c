"""MoteDB: an embedded object database for Python, written in C."""

from ._core import version as __version__

__all__ = ["__version__"]
