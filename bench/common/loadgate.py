"""The load gate: wait until the machine is quiet (1-minute load average below a limit) before measuring.

Each suite records what the gate saw in its own format; wait_until_quiet() returns the raw readings.
"""

import time
from dataclasses import dataclass

from bench.common.envinfo import loadavg


@dataclass(frozen=True)
class Gate:
    max_load: float
    timeout_s: float
    before: tuple   # (1, 5, 15)-minute load averages when the wait began
    after: tuple    # and when it ended
    waited_s: float
    timed_out: bool  # the 1-minute load was still at or above max_load when the wait ended


def wait_until_quiet(max_load: float, timeout_s: float, poll_s: float = 2.0) -> Gate:
    """Wait until the 1-minute load average is below max_load, at most timeout_s seconds (0: do not wait),
    reading it every poll_s seconds."""
    start = time.monotonic()
    before = after = loadavg()
    while after[0] >= max_load and time.monotonic() - start < timeout_s:
        time.sleep(min(poll_s, max(0.0, timeout_s - (time.monotonic() - start))))
        after = loadavg()
    return Gate(max_load=max_load, timeout_s=timeout_s, before=before, after=after,
                waited_s=time.monotonic() - start, timed_out=after[0] >= max_load)
