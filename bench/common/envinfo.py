"""What a run was measured on: CPU, memory, the file system holding a path, load average, git commit.

Linux readings (/proc, /sys); each returns None (or NaN for the load) where the machine does not tell,
and the suite decides what to record then. The suites' results.json fields are built from these.
"""

import os
import subprocess

# File systems that keep their data in memory: files on them do not measure a disk.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})


def _lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def cpu_model():
    """The CPU's model name from /proc/cpuinfo; None if it has none (not Linux, or e.g. arm64)."""
    for line in _lines("/proc/cpuinfo"):
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def cpu_governor():
    """cpu0's frequency governor (e.g. "performance"); None on machines without cpufreq (most VMs)."""
    lines = _lines("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return (lines[0].strip() or None) if lines else None


def mem_total_bytes():
    """Total memory (MemTotal of /proc/meminfo) in bytes; None if unknown."""
    for line in _lines("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def loadavg():
    """The (1, 5, 15)-minute load averages; NaNs where the system has none."""
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def filesystem(path):
    """The mount holding path (the longest mount point above its real path, from /proc/self/mountinfo):
    {"mount_point", "fstype", "source", "options"}; fstype "unknown" and None elsewhere if not found."""
    real = os.path.realpath(path)
    best = None
    for line in _lines("/proc/self/mountinfo"):
        fields = line.split()
        sep = fields.index("-")
        mount_point = fields[4].replace("\\040", " ")
        fstype, source = fields[sep + 1], fields[sep + 2]
        if real == mount_point or real.startswith(mount_point.rstrip("/") + "/"):
            if best is None or len(mount_point) >= len(best["mount_point"]):
                best = {"mount_point": mount_point, "fstype": fstype, "source": source, "options": fields[5]}
    return best or {"mount_point": None, "fstype": "unknown", "source": None, "options": None}


def git(repo, *args):
    """The output of `git <args>` run in repo, stripped (empty if git failed there, e.g. not a checkout);
    None if git could not be run at all."""
    try:
        r = subprocess.run(["git", *args], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip()
