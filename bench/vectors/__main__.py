"""python3 -m bench.vectors: creates/reuses .bench-venvs/vectors/, then runs the benchmark inside it."""

import sys


def main():
    from bench.vectors import VENV

    if not VENV.active():
        def say(msg):
            print(f"bench.vectors: {msg}", file=sys.stderr, flush=True)
        # A requirement that does not install makes only its engine unavailable (recorded in the stamp).
        VENV.ensure(log=say, partial=True)
        try:
            VENV.install_motedb(log=say)
        except RuntimeError as e:  # MoteDB is then unavailable; its engine module says why
            say(str(e))
        VENV.exec_module("bench.vectors", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
