"""python3 -m bench.agents: creates/reuses .bench-venvs/agents/, then runs the benchmark inside it."""

import sys


def main():
    from bench.agents import VENV

    VENV.enter("bench.agents", sys.argv[1:])
    from .cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
