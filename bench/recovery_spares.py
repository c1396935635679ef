#!/usr/bin/env python3
"""What a spare process saves in a recovery: reprise-bench-recovery (a rank SIGKILLed, its replacement repaired in
and given its checkpoints back) with the replacement spawned (MPI_Comm_spawn) and taken from a spare
(REPRISE_SPARES=1), interleaved in one session (spawn, spare, spawn, spare, ...): medians of each phase and the
spare/spawn ratios, as JSON (kind "recovery_spares") that bench/plot.py draws.

    REPRISE_RANKS_PER_NODE=2 bench/recovery_spares.py --ranks 8 --pairs 5 --json recovery-spares.json

Each run goes through scripts/mpirun.sh; every run must say `data_intact yes`, and the spare runs' record must say
that a spare replaced the rank (spares_used 1, spawned 0), the spawn runs' the opposite, or the script fails.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from result_header import result_header

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PHASES = ["detect_seconds", "repair_seconds", "fetch_seconds", "restore_seconds"]


def run(ranks, spares, args):
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "recovery.json")
        cmd = ["bash", os.path.join(ROOT, "scripts", "mpirun.sh"), "-n", str(ranks), "--spares", str(spares),
               "--timeout", "600", "--", "reprise-bench-recovery", *args, "--json", out_json]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        out = p.stdout.replace("\0", "")
        if p.returncode != 0 or not re.search(r"^data_intact yes$", out, flags=re.M) or not os.path.exists(out_json):
            sys.stderr.write(out + p.stderr[-3000:])
            raise SystemExit(f"recovery_spares: {' '.join(cmd)} failed (exit {p.returncode})")
        with open(out_json) as f:
            data = json.load(f)
    rec = data["recoveries_rank0"][-1]
    want = (1, 0) if spares else (0, 1)
    if (rec.get("spares_used"), rec.get("spawned")) != want:
        raise SystemExit(f"recovery_spares: expected spares_used, spawned = {want}, the record says {rec}")
    sample = {k: data[k] for k in PHASES}
    sample["total_seconds"] = rec["total_seconds"]
    return sample


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--bytes", default="16M", help="protected bytes per rank")
    p.add_argument("--victim", type=int, default=3)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    args = ["--bytes", a.bytes, "--victim", str(a.victim)]
    samples = {"spawned": [], "spare": []}
    run(a.ranks, 1, args)  # builds the program, warms the page cache (not kept)
    for i in range(a.pairs):
        for name, spares in (("spawned", 0), ("spare", 1)):
            s = run(a.ranks, spares, args)
            samples[name].append(s)
            print(f"pair {i + 1} {name}: repair {s['repair_seconds']:.3f} s, total {s['total_seconds']:.3f} s",
                  flush=True)
    keys = PHASES + ["total_seconds"]
    med = {n: {k: statistics.median(x[k] for x in v) for k in keys} for n, v in samples.items()}
    result = {
        **result_header("recovery_spares"),
        "ranks": a.ranks,
        "bytes_per_rank": a.bytes,
        "pairs": a.pairs,
        "samples": samples,
        "median": med,
        "spare_over_spawned": {k: (med["spare"][k] / med["spawned"][k] if med["spawned"][k] else None) for k in keys},
    }
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    for k in keys:
        print(f"{k}: spawned {med['spawned'][k]:.3f} s, spare {med['spare'][k]:.3f} s, "
              f"ratio {result['spare_over_spawned'][k] or 0:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
