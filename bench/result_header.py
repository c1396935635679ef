"""The fields every result of the bench/ scripts starts with: its kind, when, where, and the command that made it."""
import datetime
import os
import platform
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def result_header(kind):
    # (REPRISE_RANKS_PER_NODE only where it is set: scripts that set it per run, as files_commit.py, name it in their
    # own options or docstring.)
    rpn = os.environ.get("REPRISE_RANKS_PER_NODE")
    env = [] if rpn is None else [f"REPRISE_RANKS_PER_NODE={rpn}"]
    return {
        "kind": kind,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "command": " ".join(env + [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
    }
