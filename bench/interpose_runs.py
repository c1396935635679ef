#!/usr/bin/env python3
"""The interposition's headline figures over many runs of reprise-bench-interpose: each run's figures, their
medians and spread, and how many runs meet each goal, as JSON (kind "interpose_runs") that bench/plot.py draws.

    REPRISE_RANKS_PER_NODE=2 bench/interpose_runs.py --ranks 8 --runs 20 --json interpose-runs.json

One run compares, inside itself, the library's calls (PMPI_*) with the interposed ones (reprise-bench-interpose
alternates them), so each run gives one sample of every ratio; on a machine whose cores the ranks share, those
samples swing from run to run by more than the goals' margins, hence many runs and their median. Each run goes
through scripts/mpirun.sh; a run that fails or writes no JSON stops the script.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from result_header import result_header

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The headline figures, and the goals of the issue on wrapping applications ("<=" or ">=" a bound), where it has one.
HEADLINES = {
    "interposed_added_latency_us_8B": ("<=", 0.5),
    "interposed_intra_over_raw_bw_1MiB": (">=", 0.95),
    "interposed_allreduce_over_library_1MiB": ("<=", 1.5),
    "interposed_inter_over_raw_bw_1MiB": None,
    "interposed_allreduce_over_library_8B": None,
    "interposed_iallreduce_over_interposed_allreduce_1MiB": None,
    "interposed_iallreduce_over_library_1MiB": None,
    "interposed_neighbor_alltoall_over_library_1MiB": None,
    "interposed_neighbor_alltoall_over_library_8B": None,
}


def meets(value, goal):
    op, bound = goal
    return value <= bound if op == "<=" else value >= bound


def run(a, path):
    sizes = ["--sizes", *a.sizes] if a.sizes else []
    cmd = ["bash", os.path.join(ROOT, "scripts", "mpirun.sh"), "-n", str(a.ranks), "--timeout", "600", "--",
           "reprise-bench-interpose", *sizes, "--iters", str(a.iters), "--repeat", str(a.repeat), "--json", path]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    if p.returncode != 0 or data is None:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"interpose_runs: {' '.join(cmd)} failed (exit {p.returncode}) or wrote no JSON")
    return {k: data[k] for k in HEADLINES if k in data} | {"rows": data["rows"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--iters", type=int, default=200, help="reprise-bench-interpose --iters")
    p.add_argument("--repeat", type=int, default=5, help="reprise-bench-interpose --repeat")
    p.add_argument("--sizes", nargs="+", help="reprise-bench-interpose --sizes (default: its own)")
    p.add_argument("--json", required=True)
    a = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.runs):
            runs.append(run(a, os.path.join(d, f"run{i}.json")))
            print(f"run {i + 1}: " + ", ".join(f"{k} {runs[-1][k]:.3f}" for k in HEADLINES if k in runs[-1]),
                  flush=True)
    summary = {}
    for k, goal in HEADLINES.items():
        values = [r[k] for r in runs if k in r]
        if not values:
            continue
        s = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        if goal:
            s["goal"] = f"{goal[0]} {goal[1]}"
            s["runs_meeting_goal"] = sum(meets(v, goal) for v in values)
            s["median_meets_goal"] = meets(s["median"], goal)
        summary[k] = s
    result = result_header("interpose_runs") | {"ranks": a.ranks, "runs_count": len(runs), "iters": a.iters,
                                                 "repeat": a.repeat, "summary": summary, "runs": runs}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    for k, s in summary.items():
        goal = f"; goal {s['goal']}: {s['runs_meeting_goal']} of {len(runs)} runs" if "goal" in s else ""
        print(f"{k}: median {s['median']:.3f} (min {s['min']:.3f}, max {s['max']:.3f}){goal}")


if __name__ == "__main__":
    main()
