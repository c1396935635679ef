#!/usr/bin/python3
"""Plots Reprise benchmark JSON as PNG files.

usage: /usr/bin/python3 bench/plot.py FILE.json [FILE.json ...] [-o OUTDIR]

Understands the JSON of reprise-bench-checkpoint ("kind": "checkpoint"), reprise-bench-dirty ("dirty"),
reprise-bench-d2h ("d2h") and reprise-bench-overhead ("overhead"); other kinds are skipped with a message. Needs Debian's python3-matplotlib (run it with
/usr/bin/python3: another python3 may come first on PATH).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_checkpoint(data, stem, outdir):
    runs = data["runs"]
    ratios = [r["dirty_percent"] for r in runs]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(ratios, [1e3 * r["visible_seconds"] for r in runs], "o-", label="app-visible checkpoint")
    a.plot(ratios, [1e3 * r["digest_seconds"] for r in runs], "s--", label="digest part")
    a.axhline(1e3 * data["baseline_seconds"], color="red", ls=":", label="blocking full copy")
    a.set_xlabel("dirty ratio (%)")
    a.set_ylabel("ms")
    a.set_title(f"app-visible time, {data['bytes'] >> 20} MiB host region")
    a.legend()
    b.plot(ratios, [r["bytes_stored"] / 2**20 for r in runs], "o-")
    b.set_xlabel("dirty ratio (%)")
    b.set_ylabel("MiB stored")
    b.set_title("bytes stored per version")
    return save(fig, outdir, stem + "-checkpoint.png")


def plot_dirty(data, stem, outdir):
    res = data["results"]
    names = list(res)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, [res[n]["gbps"] for n in names], color=["C0", "C3", "C1", "C2"][: len(names)])
    ax.set_ylabel("GB/s (buffer bytes per second)")
    ax.set_title(f"dirty tracking vs memcpy, {data['bytes'] >> 20} MiB; digest/memcpy = {data['digest_over_memcpy']:.2f}")
    ax.tick_params(axis="x", labelrotation=15)
    return save(fig, outdir, stem + "-dirty.png")


def plot_d2h(data, stem, outdir):
    runs = data["runs"]
    ceil = data["ceilings"]
    sizes = sorted({r["bytes"] for r in runs})
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for s in sizes:
        rs = [r for r in runs if r["bytes"] == s]
        a.plot([r["dirty_percent"] for r in rs], [1e3 * r["visible_seconds"] for r in rs], "o-", label=f"{s >> 20} MiB")
        b.plot([r["dirty_percent"] for r in rs if r["drain_seconds"] > 0],
               [r["d2h_gbps"] for r in rs if r["drain_seconds"] > 0], "o-", label=f"{s >> 20} MiB")
    a.set_yscale("log")
    a.set_xlabel("dirty ratio (%)")
    a.set_ylabel("app-visible ms (digest + pack)")
    a.set_title("app-visible checkpoint time")
    a.legend()
    b.axhline(ceil["pinned_d2h_gbps"], color="red", ls=":", label="pinned D2H ceiling")
    b.axhline(ceil["pageable_d2h_gbps"], color="gray", ls=":", label="pageable D2H")
    b.set_xlabel("dirty ratio (%)")
    b.set_ylabel("drain GB/s")
    b.set_title(f"D2H drain vs ceiling ({data['machine'].get('device', '')})", fontsize=9)
    b.legend(fontsize=8)
    return save(fig, outdir, stem + "-d2h.png")


def plot_overhead(data, stem, outdir):
    runs = data["runs"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["interval"] for r in runs], [100 * r["overhead"] for r in runs], "o-", label="measured")
    ax.axhline(2, color="red", ls=":", label="goal: 2%")
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint every N steps")
    ax.set_ylabel("overhead (%)")
    ax.set_title(f"stencil loop, {data['nx']}x{data['nx']} doubles in {data['memory']} memory", fontsize=10)
    ax.legend()
    return save(fig, outdir, stem + "-overhead.png")


def save(fig, outdir, name):
    fig.tight_layout()
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("-o", "--outdir", default=".")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    plotters = {"checkpoint": plot_checkpoint, "dirty": plot_dirty, "d2h": plot_d2h, "overhead": plot_overhead}
    status = 0
    for f in args.files:
        with open(f) as fh:
            data = json.load(fh)
        kind = data.get("kind")
        if kind not in plotters:
            print(f"{f}: kind {kind!r} has no plot, skipped")
            continue
        stem = os.path.splitext(os.path.basename(f))[0]
        try:
            print("wrote", plotters[kind](data, stem, args.outdir))
        except (KeyError, TypeError) as e:
            print(f"{f}: not a well-formed {kind} result ({e})", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
