"""What the results were measured on: machine, kernel, file system, Python, SQLite."""

import datetime
import os
import platform
import sqlite3
import subprocess
import sys


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def cpu_model():
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def governor():
    g = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").strip()
    return g or "n/a"


def mem_total():
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return line.split(":", 1)[1].strip()
    return "n/a"


def filesystem(path):
    """(type, device) of the file system holding path."""
    try:
        out = subprocess.run(["df", "-T", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout.splitlines()
        if len(out) >= 2:
            f = out[1].split()
            return f[1], f[0]
    except OSError:
        pass
    return "unknown", "unknown"


def loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def git_commit(repo):
    r = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() or "none"


def collect(db_dir, repo):
    fs_type, fs_dev = filesystem(db_dir)
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory": mem_total(),
        "cpu_governor": governor(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "db_dir": db_dir,
        "filesystem": fs_type,
        "filesystem_device": fs_dev,
        "loadavg_start": loadavg(),
        "git_commit": git_commit(repo),
    }
