"""Creates and reuses the benchmark's virtual environment .bench-venvs/stores/ (standard library only)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .common import REPO_ROOT

VENV_DIR = REPO_ROOT / ".bench-venvs" / "stores"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
STAMP = VENV_DIR / "bench-stamp.json"
LOG = VENV_DIR / "install.log"


def venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def in_venv() -> bool:
    return os.path.realpath(sys.prefix) == os.path.realpath(VENV_DIR)


def _wanted() -> dict:
    return {
        "requirements_sha256": hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest(),
        "python": ".".join(map(str, sys.version_info[:3])),
    }


def _requirement_lines():
    out = []
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def _pip(args, log):
    cmd = [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"] + args
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode


def ensure_venv(say=print) -> dict:
    """Makes sure the venv exists with the pinned requirements; returns its stamp (what was installed, failures)."""
    wanted = _wanted()
    if venv_python().exists() and STAMP.exists():
        try:
            stamp = json.loads(STAMP.read_text())
            if all(stamp.get(k) == v for k, v in wanted.items()):
                _motedb(say)
                return stamp
        except (OSError, ValueError):
            pass
    started = time.monotonic()
    if VENV_DIR.exists() and not _same_python():
        shutil.rmtree(VENV_DIR)
    if not venv_python().exists():
        say(f"bench.stores: creating the virtual environment {VENV_DIR.relative_to(REPO_ROOT)}/ ...")
        VENV_DIR.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
    say(f"bench.stores: installing {REQUIREMENTS.relative_to(REPO_ROOT)} (log: {LOG.relative_to(REPO_ROOT)}) ...")
    failures = {}
    with open(LOG, "a") as log:
        if _pip(["-r", str(REQUIREMENTS)], log) != 0:
            # Install what can be installed, one requirement at a time, and record what could not.
            for req in _requirement_lines():
                if _pip(["--no-deps", req], log) != 0:
                    failures[req] = f"pip install {req} failed (see {LOG.relative_to(REPO_ROOT)})"
    stamp = dict(wanted, install_failures=failures, installed_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                 install_seconds=round(time.monotonic() - started, 1))
    STAMP.write_text(json.dumps(stamp, indent=2))
    if failures:
        say(f"bench.stores: could not install: {', '.join(failures)}")
    _motedb(say)
    return stamp


def _motedb(say):
    """The motedb package of this checkout, rebuilt when its sources changed; a failure only makes MoteDB
    unavailable (its engine module reports why)."""
    from bench.common.motedb_pkg import ensure_installed
    try:
        ensure_installed(str(venv_python()), str(VENV_DIR), log=say)
    except RuntimeError as e:
        say(f"bench.stores: {e}")


def _same_python() -> bool:
    py = venv_python()
    if not py.exists():
        return False
    try:
        out = subprocess.run([str(py), "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out == _wanted()["python"]


def stamp() -> dict:
    try:
        return json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}
