"""Summary statistics of measured samples (median, nearest-rank percentile, geometric mean).

Each returns None for no samples, so an empty cell is recorded as null rather than NaN (which is not JSON).
"""

import math
import statistics


def median(values):
    """The median (the mean of the two middle values for an even count); None if there are none."""
    values = list(values)
    return statistics.median(values) if values else None


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100): the smallest value with at least p % of the values at or below
    it, so it is always one of the samples (statistics.quantiles interpolates). None if there are none."""
    s = sorted(values)
    if not s:
        return None
    rank = max(1, math.ceil(p / 100 * len(s)))
    return s[rank - 1]


def geomean(values):
    """The geometric mean of positive values (e.g. rates of several operations); None if there are none."""
    values = list(values)
    return statistics.geometric_mean(values) if values else None
