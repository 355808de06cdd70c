"""bench.common: what the Python benchmark suites (bench/orm, bench/stores, ...) share.

Standard library only: the orchestrators import it under the system python3, before any virtual
environment exists, and the workers import it inside theirs.

    envinfo     what a run was measured on: CPU, memory, file system of a path, load average, git
    venvs       the virtual environments under .bench-venvs/: created from a pinned requirements file,
                rebuilt when it changes; running a module of this checkout in one
    motedb_pkg  builds the motedb package of this checkout into an environment, again when its sources change
    stats       median, nearest-rank percentile, geometric mean
    loadgate    waiting until the machine is quiet before a measurement
    args        the command line a suite starts from: one flag per profile
    output      results.json and results.md of a run

Each suite keeps its own record formats (the fields of its results.json); these modules return plain
values for it to record.
"""

import os

# The repository root: .bench-venvs/, .bench-tmp/ and results/ live here.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
