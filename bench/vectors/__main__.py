"""python3 -m bench.vectors: creates/reuses .bench-venvs/vectors/, then runs the benchmark inside it."""

import sys


def main():
    from bench.vectors import VENV

    VENV.enter("bench.vectors", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
