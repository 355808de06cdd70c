"""python3 -m bench.stores: creates/reuses .bench-venvs/stores/, then runs the benchmark inside it."""

import os
import sys


def main():
    from .venv import ensure_venv, in_venv, venv_python
    from .common import REPO_ROOT

    if not in_venv():
        ensure_venv(say=lambda msg: print(msg, file=sys.stderr, flush=True))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
        py = str(venv_python())
        os.execve(py, [py, "-m", "bench.stores"] + sys.argv[1:], env)
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
