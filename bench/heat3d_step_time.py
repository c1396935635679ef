#!/usr/bin/env python3
"""heat3d's time per step, plain MPI against wrapped (libreprise_interpose.so) with a checkpoint every K steps,
interleaved in one session (plain, wrapped every K1, wrapped every K2, ... repeated): medians and the ratios to
plain, as JSON (kind "heat3d") that bench/plot.py draws.

    REPRISE_RANKS_PER_NODE=2 bench/heat3d_step_time.py --ranks 8 --every 10 100 --json heat3d.json
    REPRISE_RANKS_PER_NODE=2 bench/heat3d_step_time.py --ranks 8 --flags=--neighbor --json heat3d-neighbor.json

--flags: heat3d's own flags for every run, plain and wrapped (--neighbor, --persistent, --overlap, --graph).

Each run goes through scripts/mpirun.sh; its last line `seconds per step S` (the slowest rank's) is the sample.
Every run must print the same checksum (the wrapped runs' results are the plain run's), or the script fails.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(ranks, program, args):
    cmd = ["bash", os.path.join(ROOT, "scripts", "mpirun.sh"), "-n", str(ranks), "--timeout", "600", "--", program,
           *args]
    with tempfile.TemporaryFile("w+") as o, tempfile.TemporaryFile("w+") as e:
        p = subprocess.run(cmd, stdout=o, stderr=e, text=True, cwd=ROOT)
        o.seek(0)
        e.seek(0)
        out, err = o.read().replace("\0", ""), e.read()
    seconds = re.search(r"^seconds per step ([0-9.]+)$", out, flags=re.M)
    checksum = re.search(r"^checksum (0x[0-9a-f]{16})$", out, flags=re.M)
    if p.returncode != 0 or not seconds or not checksum:
        sys.stderr.write(out + err[-3000:])
        raise SystemExit(f"heat3d_step_time: {' '.join(cmd)} failed (exit {p.returncode})")
    return float(seconds.group(1)), checksum.group(1)


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--ranks", type=int, default=8)
    a.add_argument("--n", type=int, default=64, help="global grid n^3")
    a.add_argument("--steps", type=int, default=200)
    a.add_argument("--every", type=int, nargs="+", default=[10, 100], help="checkpoint intervals of the wrapped runs")
    a.add_argument("--repeat", type=int, default=5)
    a.add_argument("--flags", default="", help="heat3d flags for every run, e.g. --flags=--neighbor")
    a.add_argument("--json", required=True)
    o = a.parse_args()
    grid = ["--nx", str(o.n), "--ny", str(o.n), "--nz", str(o.n), "--steps", str(o.steps), *o.flags.split()]
    variants = [("plain", "heat3d-plain", [])] + [
        (f"wrapped_every_{k}", "reprise-heat3d", ["--checkpoint-every", str(k)]) for k in o.every]
    samples = {name: [] for name, _, _ in variants}
    checksums = set()
    for r in range(o.repeat + 1):  # the first round warms the machine and is not counted
        for name, program, extra in variants:
            s, c = run(o.ranks, program, grid + extra)
            checksums.add(c)
            if r > 0:
                samples[name].append(s)
            print(f"round {r} {name}: {s * 1e3:.3f} ms/step", flush=True)
    if len(checksums) != 1:
        raise SystemExit(f"heat3d_step_time: the runs printed different checksums: {sorted(checksums)}")
    plain = statistics.median(samples["plain"])
    result = {
        "kind": "heat3d",
        "ranks": o.ranks,
        "grid": o.n,
        "steps": o.steps,
        "flags": o.flags,
        "repeat": o.repeat,
        "ranks_per_node": os.environ.get("REPRISE_RANKS_PER_NODE"),
        "checksum": checksums.pop(),
        "machine": {"hostname": platform.node(), "nproc": os.cpu_count(),
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "variants": [{"name": name, "seconds_per_step": samples[name],
                      "median_seconds_per_step": statistics.median(samples[name]),
                      "over_plain": statistics.median(samples[name]) / plain} for name, _, _ in variants],
    }
    with open(o.json, "w") as f:
        json.dump(result, f, indent=1)
    for v in result["variants"]:
        print(f"{v['name']}: median {v['median_seconds_per_step'] * 1e3:.3f} ms/step, {v['over_plain']:.3f} of plain")


if __name__ == "__main__":
    main()
