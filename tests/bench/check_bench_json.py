#!/usr/bin/env python3
"""Runs a benchmark and checks the JSON it wrote against what its command line asked for.

usage: python3 tests/bench/check_bench_json.py KIND [--no-run] -- BENCHMARK ARGS...

KIND is d2h, dirty, checkpoint or overhead (reprise-bench-d2h, -dirty, -checkpoint, -overhead). The file that
BENCHMARK's --json names is removed, BENCHMARK runs (its output passes through) and must exit 0; then the file must
hold what ARGS asked for (the benchmark's defaults where an argument is left out): the kind, the sizes, ratios,
intervals and counts requested, the dirty chunks and bytes stored that each ratio implies, the checkpoints each
interval implies, times > 0, summary figures equal to the quotients of the fields they summarise, and time ratios
in (0, RATIO_MAX]. With --no-run the file is only checked (e.g. a result in bench/results, given the arguments of
its run). Exit status 0 when everything holds, 1 (one line per failed check) when not, 2 for a usage error.
Python 3 standard library only.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

# A time over another time of the same run. Single-repeat smoke runs on a loaded 2-core machine stray far from the
# usual 0.1..10, so the bound only catches a unit slip (milliseconds for seconds and the like).
RATIO_MAX = 1000.0
FULL_AT_DIRTY_PERCENT = 90  # Config::full_at_dirty_percent's default: a version this dirty is stored as a full one
DEFAULT_RATIOS = [0.0, 1.0, 5.0, 25.0, 100.0]


class Malformed(Exception):
    """A field is missing or has the wrong type: nothing below it can be checked."""


def parse_bytes(text):
    """reprise::parse_bytes: a count with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB (powers of 1024)."""
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    units = {"": 0, "B": 0, "K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20, "G": 30, "GB": 30, "GIB": 30}
    if not m or m.group(2).upper() not in units:
        raise argparse.ArgumentTypeError(f"not a size: {text}")
    return int(m.group(1)) << units[m.group(2).upper()]


def bench_arguments(kind, args):
    """The benchmark's options with its defaults (bench/*.cpp); an option the checker does not know is an error,
    so a smoke command that gains one gets a check for it too."""
    p = argparse.ArgumentParser(prog=f"check_bench_json.py {kind} -- BENCHMARK", allow_abbrev=False)
    p.add_argument("--json", required=True)
    if kind == "d2h":
        p.add_argument("--sizes", nargs="+", type=parse_bytes, action="extend")
        p.add_argument("--ratios", nargs="+", type=float, action="extend")
        p.add_argument("--repeat", type=int, default=3)
        p.add_argument("--chunk", type=int, default=64 * 1024)
        p.add_argument("--staging", type=parse_bytes)
        p.add_argument("--backend", default="auto", choices=["auto", "cuda", "host-twin"])
    elif kind == "dirty":
        p.add_argument("--bytes", type=parse_bytes, default=parse_bytes("1G"))
        p.add_argument("--chunk", type=parse_bytes, default=parse_bytes("64K"))
        p.add_argument("--repeat", type=int, default=5)
        p.add_argument("--threads", type=int, default=2)
    elif kind == "checkpoint":
        p.add_argument("--bytes", type=parse_bytes, default=parse_bytes("1G"))
        p.add_argument("--ratios", nargs="+", type=float, action="extend")
        p.add_argument("--repeat", type=int, default=5)
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--full-every", type=int, default=1000)
        p.add_argument("--keep-chains", type=int, default=1)
    elif kind == "overhead":
        p.add_argument("--nx", type=int, default=4096)
        p.add_argument("--steps", type=int, default=600)
        p.add_argument("--intervals", nargs="+", type=int, action="extend")
        p.add_argument("--repeat", type=int, default=3)
        p.add_argument("--warm-steps", type=int, default=0)
    a = p.parse_args(args)
    if hasattr(a, "ratios") and a.ratios is None:
        a.ratios = DEFAULT_RATIOS
    if hasattr(a, "intervals") and a.intervals is None:
        a.intervals = [25, 50, 100, 200]
    return a


class Checks:
    def __init__(self, data):
        self.data = data
        self.failures = []
        self.count = 0

    def at(self, path):
        """The value at a path such as 'runs[2].bytes_stored'; Malformed when it is not there."""
        v = self.data
        for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
            if name:
                if not isinstance(v, dict) or name not in v:
                    raise Malformed(f"missing field {path}")
                v = v[name]
            else:
                if not isinstance(v, list) or int(index) >= len(v):
                    raise Malformed(f"missing {path}")
                v = v[int(index)]
        return v

    def expect(self, ok, message):
        self.count += 1
        if not ok:
            self.failures.append(message)

    def number(self, path):
        v = self.at(path)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise Malformed(f"{path} = {v!r} is not a finite number")
        return v

    def integer(self, path):
        v = self.at(path)
        if isinstance(v, bool) or not isinstance(v, int):
            raise Malformed(f"{path} = {v!r} is not an integer")
        return v

    def text(self, path):
        v = self.at(path)
        if not isinstance(v, str) or not v:
            raise Malformed(f"{path} = {v!r} is not a non-empty string")
        return v

    def array(self, path):
        v = self.at(path)
        if not isinstance(v, list):
            raise Malformed(f"{path} is not an array")
        return v

    def equal(self, path, want):
        v = self.number(path) if isinstance(want, (int, float)) and not isinstance(want, bool) else self.at(path)
        self.expect(v == want and isinstance(v, bool) == isinstance(want, bool), f"{path} = {v!r}, expected {want!r}")
        return v

    def positive(self, path):
        v = self.number(path)
        self.expect(v > 0, f"{path} = {v!r}, expected > 0")
        return v

    def at_least(self, path, low):
        v = self.number(path)
        self.expect(v >= low, f"{path} = {v!r}, expected >= {low!r}")
        return v

    def ratio(self, path):
        v = self.number(path)
        self.expect(0 < v <= RATIO_MAX, f"{path} = {v!r}, expected in (0, {RATIO_MAX:g}]")
        return v

    def close(self, path, want, what):
        v = self.number(path)
        self.expect(math.isclose(v, want, rel_tol=1e-9, abs_tol=1e-300), f"{path} = {v!r}, expected {what} = {want!r}")
        return v

    def machine(self, with_build=True):
        self.text("machine.hostname")
        if with_build:
            self.expect(self.integer("machine.nproc") >= 1, "machine.nproc < 1")
            self.text("machine.compiler")
            d = self.text("machine.date")
            self.expect(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d) is not None, f"machine.date = {d!r}")


def dirty_chunks(n_chunks, ratio):
    """The chunks bench_checkpoint.cpp and bench_d2h.cpp change for a ratio: round(n * ratio / 100), spread evenly."""
    dirty = n_chunks if ratio >= 100 else int(n_chunks * ratio / 100.0 + 0.5)
    return [k if dirty == n_chunks else k * n_chunks // dirty for k in range(dirty)]


def stored_bytes(size, chunk, chosen):
    """Bytes a differential version of those chunks stores; a version this dirty is stored as a full one."""
    changed = sum(min(chunk, size - c * chunk) for c in chosen)
    return size if changed * 100 >= size * FULL_AT_DIRTY_PERCENT else changed


def check_d2h(c, a):
    c.equal("kind", "d2h")
    c.machine(with_build=False)
    c.text("machine.device")
    backend = c.text("machine.backend")
    if a.backend != "auto":
        c.expect(backend == a.backend, f"machine.backend = {backend!r}, --backend {a.backend} was asked")
    chunk = c.equal("chunk_bytes", a.chunk)
    runs = c.array("runs")
    sizes = a.sizes or sorted({c.integer(f"runs[{i}].bytes") for i in range(len(runs))})
    c.expect(len(sizes) > 0, "no sizes")
    c.equal("ceilings.bytes", min(max(sizes), 1 << 30))
    pinned = c.positive("ceilings.pinned_d2h_gbps")
    c.positive("ceilings.pageable_d2h_gbps")
    d2d = c.positive("ceilings.d2d_gbps")
    c.expect(len(runs) == len(sizes) * len(a.ratios),
             f"{len(runs)} runs, expected {len(sizes)} sizes x {len(a.ratios)} ratios")
    i = 0
    for size in sizes:
        for ratio in a.ratios:
            r = f"runs[{i}]"
            i += 1
            c.equal(r + ".bytes", size)
            c.equal(r + ".dirty_percent", ratio)
            n_chunks = (size + chunk - 1) // chunk
            stored = c.equal(r + ".bytes_stored", stored_bytes(size, chunk, dirty_chunks(n_chunks, ratio)))
            staging = c.positive(r + ".staging_bytes")
            if a.staging is not None:
                c.equal(r + ".staging_bytes", a.staging)
            rounds = c.integer(r + ".pack_rounds")
            c.expect(rounds >= 0, f"{r}.pack_rounds = {rounds}")
            if staging >= size:
                c.expect(rounds <= 1, f"{r}.pack_rounds = {rounds} with a staging budget that holds the region")
            visible = c.positive(r + ".visible_seconds")
            digest = c.positive(r + ".digest_seconds")
            c.at_least(r + ".pack_seconds", 0)
            c.positive(r + ".durable_seconds")
            baseline = c.positive(r + ".baseline_seconds")
            drain = c.at_least(r + ".drain_seconds", 0)
            if isinstance(stored, int) and stored > 0:
                c.expect(drain > 0, f"{r}.drain_seconds = 0 with {stored} bytes stored")
            gbps = c.close(r + ".d2h_gbps", stored / drain * 1e-9 if drain > 0 else 0.0, "bytes_stored / drain_seconds")
            c.close(r + ".d2h_over_pinned_ceiling", gbps / pinned, "d2h_gbps / ceilings.pinned_d2h_gbps")
            if gbps > 0:
                c.ratio(r + ".d2h_over_pinned_ceiling")
            dg = c.close(r + ".digest_gbps", size / digest * 1e-9, "bytes / digest_seconds")
            c.close(r + ".digest_over_d2d", dg / d2d, "digest_gbps / ceilings.d2d_gbps")
            c.ratio(r + ".digest_over_d2d")
            c.close(r + ".visible_over_baseline", visible / baseline, "visible_seconds / baseline_seconds")
            c.ratio(r + ".visible_over_baseline")
    # Headline figures: the last size, 100% dirty for the drain, 0% for the digest pass.
    last = [k for k in range(len(runs)) if k // len(a.ratios) == len(sizes) - 1]
    for k in last:
        if a.ratios[k % len(a.ratios)] == 100:
            c.equal("d2h_over_pinned_ceiling", c.at(f"runs[{k}].d2h_over_pinned_ceiling"))
            c.equal("visible_100pct_over_baseline", c.at(f"runs[{k}].visible_over_baseline"))
        if a.ratios[k % len(a.ratios)] == 0:
            c.equal("digest_over_d2d", c.at(f"runs[{k}].digest_over_d2d"))
    return f"{len(runs)} runs"


def check_dirty(c, a):
    c.equal("kind", "dirty")
    c.machine()
    size = c.equal("bytes", a.bytes)
    c.equal("chunk_bytes", a.chunk)
    c.equal("repeat", a.repeat)
    c.equal("threads", a.threads)
    c.text("note")
    results = c.at("results")
    want = {"xxh3_1thread", "memcpy_1thread", "lanes64_twin_1thread",
            f"xxh3_{a.threads}thread" + ("" if a.threads == 1 else "s")}
    got = set(results) if isinstance(results, dict) else set()
    c.expect(got == want, f"results has {sorted(got)}, expected {sorted(want)}")
    for name in sorted(want & got):
        r = f"results.{name}"
        median = c.positive(r + ".median_s")
        best = c.positive(r + ".min_s")
        c.expect(best <= median, f"{r}.min_s = {best} > median_s = {median}")
        c.close(r + ".gbps", size / median * 1e-9, "bytes / median_s")
        c.close(r + ".gbps_best", size / best * 1e-9, "bytes / min_s")
    digest, copy = c.number("results.xxh3_1thread.median_s"), c.number("results.memcpy_1thread.median_s")
    c.close("digest_over_memcpy", digest / copy, "xxh3_1thread.median_s / memcpy_1thread.median_s")
    c.ratio("digest_over_memcpy")
    return f"{len(got)} results"


def check_checkpoint(c, a):
    c.equal("kind", "checkpoint")
    c.machine()
    size = c.equal("bytes", a.bytes)
    chunk = c.integer("chunk_bytes")
    c.expect(0 < chunk <= size, f"chunk_bytes = {chunk} for {size} bytes")
    c.equal("digest_threads", a.threads)
    c.equal("full_every", a.full_every)
    c.equal("keep_chains", a.keep_chains)
    c.equal("store", "memory")
    c.equal("repeat", a.repeat)
    c.text("note")
    baseline = c.positive("baseline_seconds")
    c.expect(0 < c.number("baseline_min_seconds") <= baseline, "baseline_min_seconds not in (0, baseline_seconds]")
    c.at_least("peak_rss_bytes", size)
    runs = c.array("runs")
    c.expect(len(runs) == len(a.ratios), f"{len(runs)} runs, expected one per ratio ({len(a.ratios)})")
    n_chunks = (size + chunk - 1) // chunk
    by_ratio = {}
    for i, ratio in enumerate(a.ratios[:len(runs)]):
        r = f"runs[{i}]"
        c.equal(r + ".dirty_percent", ratio)
        chosen = dirty_chunks(n_chunks, ratio)
        c.equal(r + ".chunks_dirty", len(chosen))
        stored = c.equal(r + ".bytes_stored", stored_bytes(size, chunk, chosen))
        visible = c.positive(r + ".visible_seconds")
        c.expect(0 < c.number(r + ".visible_min_seconds") <= visible, f"{r}.visible_min_seconds not in (0, visible]")
        c.positive(r + ".digest_seconds")
        c.at_least(r + ".pack_seconds", 0)
        c.at_least(r + ".store_seconds", 0)
        c.positive(r + ".durable_seconds")
        c.close(r + ".visible_over_baseline", visible / baseline, "visible_seconds / baseline_seconds")
        c.ratio(r + ".visible_over_baseline")
        by_ratio[ratio] = (visible, stored)
    if 5 in by_ratio and 100 in by_ratio:
        c.close("visible_5pct_over_100pct", by_ratio[5][0] / by_ratio[100][0], "visible 5% / visible 100%")
        c.ratio("visible_5pct_over_100pct")
        c.close("bytes_5pct_over_100pct", by_ratio[5][1] / by_ratio[100][1], "bytes_stored 5% / bytes_stored 100%")
    if 100 in by_ratio:
        c.close("visible_100pct_over_baseline", by_ratio[100][0] / baseline, "visible 100% / baseline_seconds")
    return f"{len(runs)} runs"


def check_overhead(c, a):
    c.equal("kind", "overhead")
    c.machine()
    ranks = c.integer("ranks")
    c.expect(ranks >= 1, f"ranks = {ranks}")
    buddy = c.at("buddy_transfer")
    c.expect(isinstance(buddy, bool), f"buddy_transfer = {buddy!r} is not a boolean")
    memory = c.text("memory")
    c.expect(memory in ("host", "device"), f"memory = {memory!r}")
    nx = c.equal("nx", a.nx)
    c.equal("steps", a.steps)
    c.equal("warm_steps", a.warm_steps)
    c.equal("repeat", a.repeat)
    baseline = c.positive("baseline_seconds")
    c.at_least("baseline_cpu_seconds_per_rank", 0)
    c.at_least("baseline_page_faults_per_rank", 0)
    c.positive("first_touch_seconds_per_page")
    c.expect(c.at("identical_results") is True, "identical_results is not true")
    runs = c.array("runs")
    c.expect(len(runs) == len(a.intervals), f"{len(runs)} runs, expected one per interval ({len(a.intervals)})")
    for i, every in enumerate(a.intervals[:len(runs)]):
        r = f"runs[{i}]"
        c.equal(r + ".interval", every)
        # bench_overhead.cpp checkpoints at the timed steps s with (s + every / 2) % every == 0
        want = sum(1 for s in range(a.warm_steps + 1, a.warm_steps + a.steps + 1) if (s + every // 2) % every == 0)
        checkpoints = c.equal(r + ".checkpoints", want)
        seconds = c.positive(r + ".seconds")
        rounds = c.array(r + ".overhead_rounds")
        c.expect(len(rounds) == a.repeat, f"{r}.overhead_rounds has {len(rounds)} values, expected {a.repeat}")
        for k in range(len(rounds)):
            c.expect(c.number(f"{r}.overhead_rounds[{k}]") > -1, f"{r}.overhead_rounds[{k}] <= -1")
        if rounds:
            c.close(r + ".overhead", sorted(rounds)[len(rounds) // 2], "the median of overhead_rounds")
        if a.repeat == 1:
            c.close(r + ".overhead", seconds / baseline - 1, "seconds / baseline_seconds - 1")
        if want > 0:
            c.positive(r + ".app_visible_seconds")
            c.positive(r + ".max_durable_seconds")
            stored = c.positive(r + ".bytes_stored")
            c.expect(stored <= want * nx * nx * 8, f"{r}.bytes_stored = {stored}: more than {want} whole fields")
        warm = c.integer(r + ".warm_payloads_rank0")
        c.expect(0 <= warm <= (checkpoints if isinstance(checkpoints, int) else 0),
                 f"{r}.warm_payloads_rank0 = {warm} of {checkpoints} checkpoints")
        c.number(r + ".extra_cpu_seconds_per_rank")
        c.number(r + ".extra_page_faults_per_rank")
        for key in ("ward_buffers_reused_rank0", "ward_buffers_fresh_rank0"):
            n = c.integer(f"{r}.{key}")
            c.expect(n >= 0 if buddy else n == 0, f"{r}.{key} = {n}" + ("" if buddy else " without buddy transfer"))
    return f"{len(runs)} runs"


CHECKS = {"d2h": check_d2h, "dirty": check_dirty, "checkpoint": check_checkpoint, "overhead": check_overhead}


def main():
    argv = sys.argv[1:]
    if "--" not in argv or len(argv) < 3 or argv[0] not in CHECKS:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    kind, options, command = argv[0], argv[1:argv.index("--")], argv[argv.index("--") + 1:]
    if options not in ([], ["--no-run"]) or not command:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    a = bench_arguments(kind, command[1:])
    if not options:
        if os.path.exists(a.json):
            os.remove(a.json)  # a stale file must not pass for this run's
        sys.stdout.flush()
        rc = subprocess.run(command).returncode
        if rc != 0:
            print(f"check_bench_json: {os.path.basename(command[0])} exited with status {rc}")
            return 1
    name = os.path.basename(a.json)
    try:
        with open(a.json) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_bench_json: {name}: cannot read JSON ({e})")
        return 1
    c = Checks(data)
    try:
        if not isinstance(data, dict):
            raise Malformed("not a JSON object")
        summary = CHECKS[kind](c, a)
    except Malformed as e:
        c.failures.append(str(e))
    for f in c.failures:
        print(f"check_bench_json: {name}: {f}")
    if c.failures:
        print(f"check_bench_json: {name}: {len(c.failures)} check(s) failed")
        return 1
    print(f"check_bench_json: {name}: {kind}, {summary}, {c.count} checks ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
