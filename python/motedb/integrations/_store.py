"""What the integrations share: holding a store that was given or opened from a path, and
keys made of length-prefixed parts."""

from __future__ import annotations

import os
from typing import Any

import motedb


def key_part(s: str) -> str:
    """A part of a key, length-prefixed ("5:hello"): the parts of one key never read as
    another's, and a key made of parts is a prefix of exactly the keys that extend it."""
    return f"{len(s)}:{s}"


class StoreHolder:
    """Holds ``self.store``: an open ``motedb.Store`` it was given (which stays the
    caller's to close) or one it opened from a path with ``motedb.open``'s options and
    closes in ``close()`` or at the end of a ``with`` block. A store it opens is opened
    with ``repack=True`` unless the options say otherwise: checkpoints and memories are
    written once and kept, and a store that many small commits wrote closes at about
    half its size."""

    store: motedb.Store
    _owns: bool

    def _hold(self, store: motedb.Store | str | os.PathLike, open_kwargs: dict[str, Any]) -> None:
        if isinstance(store, motedb.Store):
            if open_kwargs:
                raise TypeError("open options are for a path, not an open store: "
                                f"{', '.join(sorted(open_kwargs))}")
            self.store, self._owns = store, False
        else:
            self.store, self._owns = motedb.open(store, **{"repack": True, **open_kwargs}), True

    def close(self) -> None:
        """Close the store if this object opened it (closing twice is fine)."""
        if self._owns:
            self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
