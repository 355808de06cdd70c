"""python3 -m bench.stores: creates/reuses .bench-venvs/stores/, then runs the benchmark inside it."""

import sys


def main():
    from bench.stores import VENV

    VENV.enter("bench.stores", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
