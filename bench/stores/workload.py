"""The workload's data: which objects each store holds (the same in every run and for every engine)."""

import random

SMALL_OBJECTS = 10
LARGE_OBJECTS = 1000
LARGE_TEXT_CHARS = 300
BASE_TIME_MS = 1_790_000_000_000  # a fixed timestamp (ms since the epoch): the data is the same in every run


class Workload:
    """Which objects each store holds. Rows are tuples (text, value, created_ms); the ids are the engine's own
    (assigned 1..n on insert)."""

    def __init__(self, name: str, seed: int = 42):
        if name not in ("small", "large"):
            raise ValueError(f"unknown workload {name!r}")
        self.name = name
        self.objects = SMALL_OBJECTS if name == "small" else LARGE_OBJECTS
        if name == "large":
            rnd = random.Random(seed)
            alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789     "
            # A pool of random 300-character texts (letters, digits, spaces); store i uses a rotating window of it.
            self._pool = ["".join(rnd.choice(alphabet) for _ in range(LARGE_TEXT_CHARS)) for _ in range(1021)]

    def rows(self, store_index: int):
        i = store_index
        base = BASE_TIME_MS + i * 10_000
        if self.name == "small":
            return [(f"agent {i} note {j}", i * 100 + j, base + j) for j in range(self.objects)]
        pool = self._pool
        n = len(pool)
        return [(pool[(i * 7 + j) % n], i * 1000 + j, base + j) for j in range(self.objects)]
