"""What the workers measure besides time: the process' memory (/proc/self/smaps_rollup), the disk's cost of
a durable file creation (the sync probe), and reading files once to warm the page cache."""

import os
import time

from bench.common.stats import median


def smaps_rollup():
    """The process' memory totals in bytes (Rss, Pss, Anonymous, ...) from /proc/self/smaps_rollup."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def probe_once(dir_fd: int, path: str, block: bytes) -> tuple:
    """One sample of the probe: create `path` in the directory of `dir_fd`, write `block`, fsync it, close it,
    fsync the directory. Returns perf_counter_ns at the start, after the file's fsync and at the end."""
    t0 = time.perf_counter_ns()
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, block)
    os.fsync(fd)
    t1 = time.perf_counter_ns()
    os.close(fd)
    os.fsync(dir_fd)
    return t0, t1, time.perf_counter_ns()


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
            t0, t1, t2 = probe_once(dir_fd, os.path.join(probe_dir, f"p{k}"), block)
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
