"""The command line a suite's cli.py starts from."""

import argparse


def profile_parser(prog, doc, profiles):
    """An ArgumentParser for `prog` described by the first paragraph of `doc`, with one flag per profile
    (--smoke, --quick, --full, ...) that sets args.profile (None when none is given)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    prof = ap.add_mutually_exclusive_group()
    for p in profiles:
        prof.add_argument(f"--{p}", dest="profile", action="store_const", const=p)
    return ap
