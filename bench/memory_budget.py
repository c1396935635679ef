#!/usr/bin/env python3
"""What a rank holds against REPRISE_MEMORY_BUDGET when its message log is large: the comm check of
comm_8_ranks_log_bound_by_memory_budget (every checkpoint forced by the log bound, a few MiB logged per rank) run for
each budget and log bound, every rank's rt.memory_json() read back (its peak and the components at the peak), as
JSON (kind "memory_budget") that bench/plot.py draws.

    REPRISE_RANKS_PER_NODE=2 bench/memory_budget.py --budgets 8M 16M 32M --log-bounds budget 2M \\
        --repeat 3 --json memory-budget.json

--log-bounds: "budget" leaves REPRISE_LOG_BOUND unset (the bound the budget sets); a size sets it. --libs NAME=DIR
(repeatable) runs each variant of the libraries side by side, interleaved (LD_LIBRARY_PATH=DIR: a copy of
build/src/libreprise*.so* of another commit, whose headers match this one's); --trees NAME=DIR does the same with
another checkout's own scripts/mpirun.sh, program and libraries (a commit whose public headers differ, e.g. a
`git worktree` whose build tree was configured like this one's); without either, this build's. Each run goes
through scripts/mpirun.sh; every run must print a checksum, the same for all, and one memory line per rank, or the
script fails.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from result_header import result_header

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_bytes(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise SystemExit(f"memory_budget: {text!r} is not a size (digits with an optional K, M or G)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def run(a, budget, bound, lib, tree=ROOT):
    env = dict(os.environ, REPRISE_MEMORY_BUDGET=budget)
    env.pop("REPRISE_LOG_BOUND", None)
    if bound != "budget":
        env["REPRISE_LOG_BOUND"] = bound
    if lib:
        env["LD_LIBRARY_PATH"] = lib
    cmd = ["bash", os.path.join(tree, "scripts", "mpirun.sh"), "-n", str(a.ranks), "--timeout", "300", "--",
           "reprise-mpi-comm-check", "--checkpoint-every", str(a.checkpoint_every), "--words", str(a.words)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, env=env)
    out = p.stdout.replace("\0", "")
    checksum = re.search(r"^checksum (0x[0-9a-f]{16})$", out, flags=re.M)
    ranks = {}
    for m in re.finditer(r"^memory rank (\d+) (\{.*\})$", out, flags=re.M):
        j = json.loads(m.group(2))
        ranks[int(m.group(1))] = {k: j[k] for k in ("budget_bytes", "peak_bytes", "total_bytes", "peak_components")}
        for k in ("reuse_freed_bytes", "budget_told_bytes"):  # (libraries of 2026-12-02 on)
            if k in j:
                ranks[int(m.group(1))][k] = j[k]
    if p.returncode != 0 or not checksum or sorted(ranks) != list(range(a.ranks)):
        sys.stderr.write(out[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"memory_budget: {' '.join(cmd)} (budget {budget}, log bound {bound}) failed "
                         f"(exit {p.returncode}, {len(ranks)} of {a.ranks} memory lines)")
    return {"checksum": checksum.group(1), "ranks": [ranks[r] for r in range(a.ranks)]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--budgets", nargs="+", default=["8M", "16M", "32M"])
    p.add_argument("--log-bounds", nargs="+", default=["budget"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--words", type=int, default=8192, help="the comm check's --words")
    p.add_argument("--checkpoint-every", type=int, default=1000, help="the comm check's (the log bound forces more)")
    p.add_argument("--libs", nargs="*", action="extend", default=[], metavar="NAME=DIR")
    p.add_argument("--trees", nargs="*", action="extend", default=[], metavar="NAME=DIR")
    p.add_argument("--json", required=True)
    a = p.parse_args()
    for b in a.log_bounds:
        if b != "budget":
            parse_bytes(b)
    if a.libs and a.trees:
        raise SystemExit("memory_budget: --libs or --trees, not both")
    variants = ([(n, d, ROOT) for n, d in (x.split("=", 1) for x in a.libs)] +
                [(n, "", os.path.abspath(d)) for n, d in (x.split("=", 1) for x in a.trees)])
    variants = variants or [("this build", "", ROOT)]
    for name, _, tree in variants:
        if not os.path.isfile(os.path.join(tree, "scripts", "mpirun.sh")):
            raise SystemExit(f"memory_budget: --trees {name}={tree}: no scripts/mpirun.sh there (a checkout?)")
    runs = []
    for r in range(a.repeat):
        for budget in a.budgets:
            for bound in a.log_bounds:
                for name, lib, tree in variants:
                    s = run(a, budget, bound, lib, tree)
                    peaks = [x["peak_bytes"] for x in s["ranks"]]
                    heaviest = max(s["ranks"], key=lambda x: x["peak_bytes"])
                    runs.append({"variant": name, "budget": budget, "budget_bytes": parse_bytes(budget),
                                 "log_bound": bound, "repeat": r, "checksum": s["checksum"], "ranks": s["ranks"],
                                 "max_peak_bytes": max(peaks), "mean_peak_bytes": statistics.mean(peaks),
                                 "heaviest_peak_components": heaviest["peak_components"]})
                    print(f"run {r + 1} budget {budget} log bound {bound} {name}: peak max "
                          f"{max(peaks) / 2**20:.1f} MiB, mean {statistics.mean(peaks) / 2**20:.1f} MiB "
                          f"({s['checksum']})", flush=True)
    checksums = {x["checksum"] for x in runs}
    if len(checksums) != 1:
        raise SystemExit(f"memory_budget: the runs' checksums differ: {sorted(checksums)}")
    cases = []
    for budget in a.budgets:
        for bound in a.log_bounds:
            for name, _, _ in variants:
                rs = [x for x in runs if (x["budget"], x["log_bound"], x["variant"]) == (budget, bound, name)]
                b = rs[0]["budget_bytes"]
                keys = sorted({k for x in rs for k in x["heaviest_peak_components"]})
                seg = min(max(b // 64, 64 << 10), 1 << 20)  # the log segment an explicit budget sets
                over = [k for x in rs for k in x["ranks"] if k["peak_bytes"] > b + seg]
                told = [k for k in over if "budget_told_bytes" in k]
                cases.append({
                    "variant": name, "budget": budget, "budget_bytes": b, "log_bound": bound,
                    "max_peak_over_budget": [x["max_peak_bytes"] / b for x in rs],
                    "mean_peak_over_budget": [x["mean_peak_bytes"] / b for x in rs],
                    "max_peak_over_budget_median": statistics.median(x["max_peak_bytes"] / b for x in rs),
                    "mean_peak_over_budget_median": statistics.median(x["mean_peak_bytes"] / b for x in rs),
                    "runs_within_budget_and_segment": sum(all(k["peak_bytes"] <= b + seg for k in x["ranks"])
                                                          for x in rs),
                    # Ranks over the budget and a segment that said nothing (None: libraries without the count).
                    "ranks_over_untold": (sum(k["budget_told_bytes"] == 0 for k in told)
                                          if len(told) == len(over) else None),
                    "heaviest_peak_components_mean": {
                        k: statistics.mean(x["heaviest_peak_components"].get(k, 0) for x in rs) for k in keys},
                })
    result = {
        **result_header("memory_budget"),
        "program": f"reprise-mpi-comm-check --checkpoint-every {a.checkpoint_every} --words {a.words}",
        "ranks": a.ranks,
        "repeat": a.repeat,
        "checksum": checksums.pop(),
        "cases": cases,
        "runs": runs,
    }
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    for c in cases:
        comps = ", ".join(f"{k} {v / 2**20:.1f}" for k, v in c["heaviest_peak_components_mean"].items() if v)
        print(f"budget {c['budget']} log bound {c['log_bound']} {c['variant']}: peak / budget, max over ranks "
              f"{c['max_peak_over_budget_median']:.2f}, mean {c['mean_peak_over_budget_median']:.2f} (medians); "
              f"within it and a log segment in {c['runs_within_budget_and_segment']} of {a.repeat} runs; ranks over "
              f"it that said nothing: {c['ranks_over_untold']}; the heaviest rank at its peak (MiB, mean): {comps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
