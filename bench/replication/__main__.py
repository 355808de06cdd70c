"""python3 -m bench.replication: creates/reuses .bench-venvs/replication/, then runs the benchmark inside it."""

import sys


def main():
    from bench.replication import VENV

    VENV.enter("bench.replication", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
