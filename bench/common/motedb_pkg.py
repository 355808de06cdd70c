"""Installs the motedb package of this checkout into a benchmark's virtual environment (Venv.install_motedb).

The benchmarks must measure the code in the working tree, so the package is (re)built from the repository root
whenever its sources changed since the last install into that environment: a hash of src/, include/, python/
and the build files is kept in the environment (motedb-stamp). Building needs meson-python, meson and ninja in
the environment (the requirements files pin them). Standard library only.
"""

import hashlib
import os
import subprocess

from bench.common import REPO

SOURCES = ["src", "include", "python", "meson.build", "meson.options", "pyproject.toml"]


def source_hash(repo=REPO):
    """A hash of the package's sources (SOURCES below repo): what the stamp compares."""
    h = hashlib.sha256()
    for top in SOURCES:
        path = os.path.join(repo, top)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, _dirs, fs in os.walk(path) for f in fs
            if not f.endswith((".pyc", ".so")) and "__pycache__" not in d)
        for f in files:
            h.update(os.path.relpath(f, repo).encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def ensure_installed(python, venv_dir, log=print):
    """Build and install motedb into the environment of `python` if its sources changed. Raises RuntimeError."""
    stamp = os.path.join(venv_dir, "motedb-stamp")
    want = source_hash()
    try:
        with open(stamp) as f:
            if f.read().strip() == want:
                return
    except OSError:
        pass
    log("building motedb from this checkout into " + os.path.relpath(venv_dir, REPO))
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--force-reinstall", REPO],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("building motedb failed:\n" + "\n".join(r.stdout.splitlines()[-25:]))
    with open(stamp, "w") as f:
        f.write(want)
