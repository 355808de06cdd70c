"""Helpers shared by the orchestrator and the workers (standard library only)."""

import math
import os
import random
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# File systems that keep the data in memory: stores on them would not measure a disk.
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}


# --- statistics -------------------------------------------------------------------------------------------------

def median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return float("nan")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100): the smallest value with at least p % of the values at or below it."""
    s = sorted(values)
    if not s:
        return float("nan")
    rank = max(1, math.ceil(p / 100 * len(s)))
    return s[rank - 1]


# --- the workload's data ----------------------------------------------------------------------------------------

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


# --- /proc readings -----------------------------------------------------------------------------------------------

def smaps_rollup():
    """The process' memory totals in bytes (Rss, Pss, Anonymous, ...) from /proc/self/smaps_rollup."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def loadavg_1m() -> float:
    return os.getloadavg()[0]


def load_gate(max_load: float, timeout_s: float, poll_s: float = 2.0) -> dict:
    """Waits until the 1-minute load average is below max_load, at most timeout_s; says what happened."""
    start = time.monotonic()
    before = loadavg_1m()
    load = before
    while load >= max_load and time.monotonic() - start < timeout_s:
        time.sleep(min(poll_s, max(0.0, timeout_s - (time.monotonic() - start))))
        load = loadavg_1m()
    return {
        "max_load": max_load,
        "load_1m_before": round(before, 2),
        "load_1m_after": round(load, 2),
        "waited_s": round(time.monotonic() - start, 1),
        "timed_out": load >= max_load,
    }


def mount_of(path) -> dict:
    """The mount that holds path: mount point, file system type, source (from /proc/self/mountinfo)."""
    real = os.path.realpath(path)
    best = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            mount_point = fields[4].replace("\\040", " ")
            fstype, source = fields[sep + 1], fields[sep + 2]
            if real == mount_point or real.startswith(mount_point.rstrip("/") + "/"):
                if best is None or len(mount_point) >= len(best["mount_point"]):
                    best = {"mount_point": mount_point, "fstype": fstype, "source": source,
                            "options": fields[5]}
    return best or {"mount_point": None, "fstype": "unknown", "source": None, "options": None}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def mem_total_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --- disk ---------------------------------------------------------------------------------------------------------

def sync_probe(directory: str, iterations: int) -> dict:
    """The disk's cost of what a durable store creation needs at least: create a file, write 4 KB, fsync it,
    fsync its directory. Median over iterations (ms); also the file sync alone and the directory sync alone."""
    probe_dir = os.path.join(directory, "sync-probe")
    os.makedirs(probe_dir, exist_ok=True)
    block = os.urandom(4096)
    both, file_only, dir_only = [], [], []
    dir_fd = os.open(probe_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for k in range(iterations):
            t0 = time.perf_counter_ns()
            fd = os.open(os.path.join(probe_dir, f"p{k}"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, block)
            os.fsync(fd)
            t1 = time.perf_counter_ns()
            os.close(fd)
            os.fsync(dir_fd)
            t2 = time.perf_counter_ns()
            both.append((t2 - t0) / 1e6)
            file_only.append((t1 - t0) / 1e6)
            dir_only.append((t2 - t1) / 1e6)
    finally:
        os.close(dir_fd)
        for name in os.listdir(probe_dir):
            os.unlink(os.path.join(probe_dir, name))
        os.rmdir(probe_dir)
    return {
        "what": "create file, write 4 KB, fsync file, fsync directory",
        "iterations": iterations,
        "file_and_dir_sync_median_ms": median(both),
        "file_sync_median_ms": median(file_only),
        "dir_sync_median_ms": median(dir_only),
    }


def read_files(paths) -> int:
    """Reads the files once (warms the page cache); returns the bytes read."""
    total = 0
    for p in paths:
        try:
            with open(p, "rb", buffering=0) as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
        except (FileNotFoundError, IsADirectoryError):
            pass
    return total
