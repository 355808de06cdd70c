"""python3 -m bench.text: creates/reuses .bench-venvs/text/, then runs the benchmark inside it."""

import sys


def main():
    from bench.text import VENV

    VENV.enter("bench.text", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
