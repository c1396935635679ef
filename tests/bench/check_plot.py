#!/usr/bin/python3
"""Runs bench/plot.py on benchmark JSON files and checks the PNG files it writes.

usage: /usr/bin/python3 tests/bench/check_plot.py OUTDIR FILE.json [FILE.json ...]

Every FILE must be of a kind plot.py draws: plot.py must exit 0 and write OUTDIR/STEM-KIND.png for each, a PNG
(signature, IHDR of at least 300x300 pixels, at least 10 KiB) in which the first data series was drawn (at least
200 pixels of matplotlib's first colour, C0: axes, titles and the red reference lines alone have none). Then
plot.py must refuse the first FILE with a field its plot needs removed (exit status 1, "not a well-formed", no
PNG) and skip a file of a kind it has no plot for. Needs Debian's python3-matplotlib (scripts/setup.sh): run it
with /usr/bin/python3.
"""
import json
import os
import struct
import subprocess
import sys

import matplotlib.image
import numpy

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "plot.py")
C0 = numpy.array([0x1F, 0x77, 0xB4]) / 255.0
# The field without which each kind's plot cannot be drawn.
NEEDED = {"checkpoint": "runs", "d2h": "runs", "dirty": "results", "overhead": "runs", "logging": "sizes",
          "interpose": "rows", "interpose_runs": "summary", "heat3d": "variants", "recovery_spares": "median",
          "commit": "shares", "log_snapshot": "rounds", "memory_budget": "cases",
          "files_commit": "summary"}
failures = []


def fail(message):
    failures.append(message)
    print("check_plot:", message)


def plot(outdir, files):
    print("check_plot: plot.py", " ".join(os.path.basename(f) for f in files), flush=True)
    p = subprocess.run([sys.executable, PLOT, *files, "-o", outdir], capture_output=True, text=True)
    sys.stdout.write(p.stdout + p.stderr)
    return p


def check_png(path):
    if not os.path.isfile(path):
        fail(f"{path} was not written")
        return
    with open(path, "rb") as f:
        head = f.read(24)
    size = os.path.getsize(path)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        fail(f"{path} is not a PNG file")
        return
    width, height = struct.unpack(">II", head[16:24])
    drawn = int((numpy.abs(matplotlib.image.imread(path)[..., :3] - C0).max(axis=-1) < 0.06).sum())
    print(f"check_plot: {os.path.basename(path)}: {width}x{height}, {size} bytes, {drawn} pixels of the data colour")
    if width < 300 or height < 300:
        fail(f"{path}: {width}x{height} pixels")
    if size < 10 * 1024:
        fail(f"{path}: {size} bytes, an empty picture")
    if drawn < 200:
        fail(f"{path}: {drawn} pixels of colour C0: no data series drawn")


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir, files = sys.argv[1], sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        if f.endswith(".png"):
            os.remove(os.path.join(outdir, f))  # no picture of an earlier run can pass for this one's
    kinds = []
    for f in files:
        with open(f) as fh:
            kinds.append(json.load(fh).get("kind"))
        if kinds[-1] not in NEEDED:
            fail(f"{f}: kind {kinds[-1]!r} is not one plot.py draws")
    p = plot(outdir, files)
    if p.returncode != 0:
        fail(f"plot.py exited with status {p.returncode}")
    for f, kind in zip(files, kinds):
        png = os.path.join(outdir, f"{os.path.splitext(os.path.basename(f))[0]}-{kind}.png")
        if f"wrote {png}" not in p.stdout:
            fail(f"plot.py did not say 'wrote {png}'")
        check_png(png)

    # A result that lacks a field its plot needs is refused, and a kind without a plot skipped, with no PNG.
    with open(files[0]) as fh:
        broken = json.load(fh)
    del broken[NEEDED[kinds[0]]]
    with open(os.path.join(outdir, "broken.json"), "w") as fh:
        json.dump(broken, fh)
    with open(os.path.join(outdir, "other.json"), "w") as fh:
        json.dump({"kind": "recovery"}, fh)
    p = plot(outdir, [os.path.join(outdir, "broken.json"), os.path.join(outdir, "other.json")])
    if p.returncode != 1:
        fail(f"plot.py exited with status {p.returncode} for a malformed result, expected 1")
    if "broken.json: not a well-formed" not in p.stderr:
        fail("plot.py did not report broken.json as not well-formed")
    if "other.json: kind 'recovery' has no plot, skipped" not in p.stdout:
        fail("plot.py did not say it skipped other.json")
    for png in os.listdir(outdir):
        if png.startswith(("broken", "other")) and png.endswith(".png"):
            fail(f"plot.py wrote {png}")
    print("check_plot:", f"{len(failures)} check(s) failed" if failures else f"{len(files)} plots ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
