"""The benchmarks' virtual environments: .bench-venvs/<name>/ at the repository root, one per pinned
requirements file, created on first use and reused while current.

A stamp in the environment (bench-stamp.json) records the hash of the requirements file, the Python version
and the base interpreter it was made with; when any of them changes, the environment is made again from
scratch, so it holds exactly what the file pins. pip's output goes to install.log there. The motedb package of
this checkout is installed separately (install_motedb, through motedb_pkg: rebuilt when its sources change).
"""

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time

from bench.common import REPO

VENV_ROOT = os.path.join(REPO, ".bench-venvs")


def base_python():
    """The interpreter environments are made from: the base of the running one if that is a venv itself."""
    return getattr(sys, "_base_executable", None) or sys.executable


def python_env(env=None):
    """A copy of env (default os.environ) with the repository root first on PYTHONPATH, so that an
    interpreter of any environment imports bench.* from this checkout."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
    return env


def requirement_lines(path):
    """The requirements of a requirements file, without comments and blank lines."""
    with open(path) as f:
        return [ln for ln in (line.split("#", 1)[0].strip() for line in f) if ln]


def package_versions(python=None):
    """{distribution: version} installed in the environment of `python` (default: the running interpreter),
    without pip, setuptools and wheel, sorted by name; {} if that interpreter cannot tell."""
    if python is not None:
        code = "import json; from bench.common.venvs import package_versions; print(json.dumps(package_versions()))"
        r = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=python_env())
        return json.loads(r.stdout) if r.returncode == 0 else {}
    from importlib import metadata
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in ("pip", "setuptools", "wheel"):
            out[name] = dist.version
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


class Venv:
    """.bench-venvs/<name>/ with the packages pinned in `requirements` (a path)."""

    STAMP = "bench-stamp.json"
    LOG = "install.log"

    def __init__(self, name, requirements):
        self.name = name
        self.requirements = requirements
        self.dir = os.path.join(VENV_ROOT, name)
        self.python = os.path.join(self.dir, "bin", "python")

    def _rel(self, path):
        return os.path.relpath(path, REPO)

    def active(self):
        """Whether the running interpreter is this environment's."""
        return os.path.realpath(sys.prefix) == os.path.realpath(self.dir)

    def wanted(self):
        """What the stamp must say for the environment to be current."""
        with open(self.requirements, "rb") as f:
            req = hashlib.sha256(f.read()).hexdigest()
        return {"requirements_sha256": req, "python": platform.python_version(),
                "base_python": os.path.realpath(base_python())}

    def stamp(self):
        """The stamp of the last install: wanted() plus install_failures, installed_at, install_seconds;
        {} if there is none."""
        try:
            with open(os.path.join(self.dir, self.STAMP)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def current(self):
        stamp = self.stamp()
        return os.path.exists(self.python) and all(stamp.get(k) == v for k, v in self.wanted().items())

    def _pip(self, args):
        """pip install args in the environment; its output is appended to install.log. (returncode, output)"""
        cmd = [self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *args]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(os.path.join(self.dir, self.LOG), "a") as log:
            log.write(f"\n$ {' '.join(cmd)}\n{r.stdout}")
        return r.returncode, r.stdout

    def ensure(self, log=print, partial=False):
        """Make the environment unless it is current; returns its stamp. If pip fails: with partial, install
        the requirements one by one (without dependencies) and record those that fail in the stamp's
        install_failures (not retried until the requirements change); else raise RuntimeError (nothing
        recorded, so the next run tries again)."""
        if not os.path.exists(self.requirements):
            raise RuntimeError(f"no requirements file {self._rel(self.requirements)}")
        if self.current():
            return self.stamp()
        started = time.monotonic()
        wanted = self.wanted()
        if os.path.exists(self.dir):
            shutil.rmtree(self.dir)
        os.makedirs(VENV_ROOT, exist_ok=True)
        log(f"creating the virtual environment {self._rel(self.dir)}/ from {self._rel(self.requirements)} "
            f"(pip's output: {self._rel(os.path.join(self.dir, self.LOG))})")
        subprocess.run([base_python(), "-m", "venv", self.dir], check=True)
        rc, out = self._pip(["-r", self.requirements])
        failures = {}
        if rc != 0:
            if not partial:
                lines = [ln for ln in out.splitlines() if "is ignored: it is neither" not in ln]
                raise RuntimeError(f"pip install -r {os.path.basename(self.requirements)} failed:\n"
                                   + "\n".join(lines[-25:]))
            for req in requirement_lines(self.requirements):
                if self._pip(["--no-deps", req])[0] != 0:
                    failures[req] = f"pip install {req} failed (see {self._rel(os.path.join(self.dir, self.LOG))})"
            if failures:
                log(f"could not install into {self._rel(self.dir)}/: {', '.join(failures)}")
        stamp = dict(wanted, install_failures=failures, installed_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                     install_seconds=round(time.monotonic() - started, 1))
        with open(os.path.join(self.dir, self.STAMP), "w") as f:
            json.dump(stamp, f, indent=2)
        return stamp

    def install_motedb(self, log=print, repo=None):
        """Build and install the motedb package of this checkout (or of the source tree `repo`) unless its
        sources are unchanged since the last install here. Raises RuntimeError if the build fails."""
        from bench.common.motedb_pkg import ensure_installed
        ensure_installed(self.python, self.dir, log=log, repo=repo or REPO)

    def versions(self):
        """{distribution: version} installed here (see package_versions)."""
        return package_versions(self.python)

    def exec_module(self, module, argv, env=None):
        """Replace this process by `python -m module argv...` in the environment (bench.* from this checkout)."""
        os.execve(self.python, [self.python, "-m", module, *argv], python_env(env))

    def enter(self, module, argv):
        """A suite's `python3 -m module`: unless this process already runs in the environment, create or reuse it
        (a requirement that does not install makes only its engine unavailable, recorded in the stamp), build this
        checkout's motedb into it (a failed build makes MoteDB unavailable; its engine module says why) and replace
        this process by `python -m module argv` there. Returns only inside the environment."""
        if self.active():
            return

        def say(msg):
            print(f"{module}: {msg}", file=sys.stderr, flush=True)
        self.ensure(log=say, partial=True)
        try:
            self.install_motedb(log=say)
        except RuntimeError as e:
            say(str(e))
        self.exec_module(module, argv)
