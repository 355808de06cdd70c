import sys

from bench.orm.cli import main

sys.exit(main())
