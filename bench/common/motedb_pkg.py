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


def ensure_installed(python, venv_dir, log=print, repo=REPO):
    """Build and install motedb from `repo` (default this checkout) into the environment of `python` if its
    sources changed. Raises RuntimeError."""
    stamp = os.path.join(venv_dir, "motedb-stamp")
    want = source_hash(repo)
    try:
        with open(stamp) as f:
            if f.read().strip() == want:
                return
    except OSError:
        pass
    log("building motedb from " + ("this checkout" if repo == REPO else os.path.relpath(repo, REPO)) + " into "
        + os.path.relpath(venv_dir, REPO))
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--force-reinstall", repo],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("building motedb failed:\n" + "\n".join(r.stdout.splitlines()[-25:]))
    with open(stamp, "w") as f:
        f.write(want)


def baseline_tree(ref):
    """(directory, commit) of the sources of git revision `ref` of this repository, extracted (git archive)
    into .bench-tmp/motedb-<commit>/ unless already there: the tree a benchmark's baseline build comes from.
    Raises RuntimeError if git cannot resolve or extract it."""
    r = subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", ref + "^{commit}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git cannot resolve {ref!r}: {r.stderr.strip()}")
    commit = r.stdout.strip()
    path = os.path.join(REPO, ".bench-tmp", "motedb-" + commit[:12])
    if not os.path.exists(os.path.join(path, ".complete")):
        os.makedirs(path, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", REPO, "archive", commit], stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "-C", path], stdin=archive.stdout, stderr=subprocess.PIPE)
        archive.stdout.close()
        if archive.wait() != 0 or tar.returncode != 0:
            raise RuntimeError(f"extracting {commit} into {path} failed: {tar.stderr.decode().strip()}")
        open(os.path.join(path, ".complete"), "w").close()
    return path, commit
