#!/usr/bin/env python3
"""checkpoint() + commit with and without REPRISE_DIR on the 2-rank overhead benchmark, side by side: rounds of
reprise-bench-overhead-mpi, each running both variants one after the other (which goes first alternates), every
figure per interval read back from its JSON, as JSON (kind "files_commit") that bench/plot.py draws.

    bench/files_commit.py --rounds 10 --json files-commit-2ranks.json

2 ranks on 2 emulated nodes (REPRISE_RANKS_PER_NODE=1, so each rank's buddy is the other), each its own stencil
with compute between checkpoints. Per interval and run: `median_durable_seconds` (a checkpoint of rank 0, from
checkpoint()'s entry until the buddy held and checked the version: what a job waits for before a failure loses
nothing), `median_app_visible_seconds` and the loop's `overhead`; REPRISE_DIR's folder is emptied before each run
(--dir, default a temporary folder). The summary gives each variant's median and range over the runs and the
difference of the medians. Each run goes through scripts/mpirun.sh; a run that fails, writes no JSON or whose
results differ from the loop without checkpoints stops the script.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from result_header import result_header

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIGURES = ("median_durable_seconds", "median_app_visible_seconds", "overhead")
VARIANTS = ("nodir", "dir")


def run(a, variant, files, path):
    env = dict(os.environ, REPRISE_RANKS_PER_NODE="1")
    env.pop("REPRISE_DIR", None)
    if variant == "dir":
        shutil.rmtree(files, ignore_errors=True)
        os.makedirs(files)
        env["REPRISE_DIR"] = files
    cmd = ["bash", os.path.join(ROOT, "scripts", "mpirun.sh"), "-n", "2", "--timeout", "600", "--",
           "reprise-bench-overhead-mpi", "--nx", str(a.nx), "--steps", str(a.steps), "--intervals",
           *map(str, a.intervals), "--repeat", str(a.repeat), "--warm-steps", str(a.warm_steps), "--json", path]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    if p.returncode != 0 or data is None or not data.get("identical_results"):
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"files_commit: {variant}: {' '.join(cmd)} failed (exit {p.returncode}), wrote no JSON "
                         "or its results differ from the loop without checkpoints")
    if variant == "dir":
        shutil.rmtree(files, ignore_errors=True)
    return {str(r["interval"]): {k: r[k] for k in FIGURES} | {"checkpoints": r["checkpoints"]} for r in data["runs"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--nx", type=int, default=2048, help="reprise-bench-overhead-mpi --nx")
    p.add_argument("--steps", type=int, default=300, help="reprise-bench-overhead-mpi --steps")
    p.add_argument("--intervals", type=int, nargs="+", default=[100, 25])
    p.add_argument("--repeat", type=int, default=3, help="reprise-bench-overhead-mpi --repeat")
    p.add_argument("--warm-steps", type=int, default=50, help="reprise-bench-overhead-mpi --warm-steps")
    p.add_argument("--dir", help="REPRISE_DIR of the `dir` runs (emptied before each; default a temporary folder)")
    p.add_argument("--json", required=True)
    a = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as d:
        files = a.dir or os.path.join(d, "files")
        for i in range(a.rounds):
            for variant in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
                runs.append({"round": i + 1, "variant": variant,
                             "intervals": run(a, variant, files, os.path.join(d, f"{variant}-{i}.json"))})
                print(f"round {i + 1} {variant}: " + "; ".join(
                    f"every {k}: commit {1e3 * v['median_durable_seconds']:.1f} ms, visible "
                    f"{1e3 * v['median_app_visible_seconds']:.2f} ms, overhead {100 * v['overhead']:+.1f}%"
                    for k, v in runs[-1]["intervals"].items()), flush=True)
    summary = {}
    for interval in map(str, a.intervals):
        s = {}
        for variant in VARIANTS:
            s[variant] = {}
            for k in FIGURES:
                values = [r["intervals"][interval][k] for r in runs if r["variant"] == variant]
                s[variant][k] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        s["dir_minus_nodir_median_durable_seconds"] = (s["dir"]["median_durable_seconds"]["median"] -
                                                       s["nodir"]["median_durable_seconds"]["median"])
        summary[interval] = s
    result = result_header("files_commit") | {
        "ranks": 2, "nx": a.nx, "steps": a.steps, "repeat": a.repeat, "warm_steps": a.warm_steps,
        "rounds": a.rounds, "summary": summary, "runs": runs}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    for interval, s in summary.items():
        d, n = s["dir"]["median_durable_seconds"], s["nodir"]["median_durable_seconds"]
        print(f"every {interval} steps: checkpoint() + commit {1e3 * n['median']:.1f} ms [{1e3 * n['min']:.1f}-"
              f"{1e3 * n['max']:.1f}] without REPRISE_DIR, {1e3 * d['median']:.1f} ms [{1e3 * d['min']:.1f}-"
              f"{1e3 * d['max']:.1f}] with it (medians of {a.rounds} runs each)")


if __name__ == "__main__":
    main()
