"""Where a suite's run goes: results.json and results.md in its output directory."""

import json
import os


def save(out, res, md):
    """Write res as out/results.json and md as out/results.md (out is created if missing), and print md."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write(md)
    print(md)
