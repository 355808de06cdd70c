"""Virtual environments per dependency group, created on first use and reused.

.bench-venvs/<group>/ at the repository root, from bench/orm/requirements-<group>.txt
(pinned). A stamp file holds a hash of the requirements file and the base
interpreter: when either changes, the environment is rebuilt.
Standard library only (runs under the system python3 before anything is installed).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
VENV_ROOT = os.path.join(REPO, ".bench-venvs")
STAMP = ".bench-orm-stamp"


def requirements_file(group):
    return os.path.join(HERE, f"requirements-{group}.txt")


def venv_dir(group):
    return os.path.join(VENV_ROOT, group)


def venv_python(group):
    return os.path.join(venv_dir(group), "bin", "python")


def base_python():
    """The interpreter the environments are made from: the base of a venv, if we run in one."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _stamp_value(group):
    with open(requirements_file(group), "rb") as f:
        req = f.read()
    h = hashlib.sha256(req)
    h.update(os.path.realpath(base_python()).encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def is_ready(group):
    try:
        with open(os.path.join(venv_dir(group), STAMP)) as f:
            return f.read().strip() == _stamp_value(group) and os.path.exists(venv_python(group))
    except OSError:
        return False


def ensure(group, log=print):
    """Create (or reuse) the group's environment; returns its python. Raises RuntimeError."""
    req = requirements_file(group)
    if not os.path.exists(req):
        raise RuntimeError(f"no requirements file {os.path.relpath(req, REPO)}")
    if is_ready(group):
        _motedb(group, log)
        return venv_python(group)
    d = venv_dir(group)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(VENV_ROOT, exist_ok=True)
    log(f"creating virtual environment .bench-venvs/{group} (requirements-{group}.txt)")
    subprocess.run([base_python(), "-m", "venv", d], check=True)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([venv_python(group), "-m", "pip", "install", "-q", "-r", req],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        lines = [ln for ln in r.stdout.splitlines() if "is ignored: it is neither" not in ln]
        raise RuntimeError(f"pip install -r requirements-{group}.txt failed:\n" + "\n".join(lines[-25:]))
    with open(os.path.join(d, STAMP), "w") as f:
        f.write(_stamp_value(group))
    _motedb(group, log)
    return venv_python(group)


def _motedb(group, log):
    """The motedb group gets the package of this checkout, rebuilt when its sources changed."""
    if group == "motedb":
        sys.path.insert(0, REPO)
        from bench.motedb_pkg import ensure_installed
        ensure_installed(venv_python(group), venv_dir(group), log=log)


def installed_versions(group):
    """{distribution: version} of the group's environment (pip's view)."""
    py = venv_python(group)
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
    r = subprocess.run([py, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode != 0:
        return {}
    vers = json.loads(r.stdout)
    for k in ("pip", "setuptools", "wheel"):
        vers.pop(k, None)
    return dict(sorted(vers.items(), key=lambda kv: kv[0].lower()))
