"""python3 -m bench.stores: creates/reuses .bench-venvs/stores/, then runs the benchmark inside it."""

import sys


def main():
    from bench.stores import VENV

    if not VENV.active():
        def say(msg):
            print(f"bench.stores: {msg}", file=sys.stderr, flush=True)
        # A requirement that does not install makes only its engine unavailable (recorded in the stamp).
        VENV.ensure(log=say, partial=True)
        try:
            VENV.install_motedb(log=say)
        except RuntimeError as e:  # MoteDB is then unavailable; its engine module says why
            say(str(e))
        VENV.exec_module("bench.stores", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
