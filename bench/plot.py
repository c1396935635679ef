#!/usr/bin/python3
"""Plots Reprise benchmark JSON as PNG files.

usage: /usr/bin/python3 bench/plot.py FILE.json [FILE.json ...] [-o OUTDIR]

Understands the JSON of reprise-bench-checkpoint ("kind": "checkpoint"), reprise-bench-dirty ("dirty"),
reprise-bench-d2h ("d2h"), reprise-bench-overhead ("overhead"), bench/recovery_spares.py ("recovery_spares"),
reprise-sim ("sim"), reprise-bench-commit ("commit"), reprise-bench-log-snapshot ("log_snapshot"),
bench/memory_budget.py ("memory_budget"), bench/interpose_runs.py ("interpose_runs"), bench/files_commit.py
("files_commit") and others
(the plotters below); other kinds are skipped with a message, and a file that is not JSON, or lacks a field its
plot needs, is reported and skipped (exit status 1). Needs Debian's python3-matplotlib: run it with
/usr/bin/python3 (another python3 may come first on PATH).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_checkpoint(data, stem, outdir):
    runs = sorted(data["runs"], key=lambda r: r["dirty_percent"])
    ratios = [r["dirty_percent"] for r in runs]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(ratios, [1e3 * r["visible_seconds"] for r in runs], "o-", label="app-visible checkpoint()")
    if all("digest_seconds" in r for r in runs):
        a.plot(ratios, [1e3 * r["digest_seconds"] for r in runs], "s--", label="of which digest")
    if all("pack_seconds" in r for r in runs):
        a.plot(ratios, [1e3 * r["pack_seconds"] for r in runs], "^--", label="of which pack")
    a.axhline(1e3 * data["baseline_seconds"], color="red", ls=":", label="blocking full copy (baseline)")
    a.set_xlabel("dirty ratio (%)")
    a.set_ylabel("ms")
    extra = f", full_every {data['full_every']}" if "full_every" in data else ""
    a.set_title(f"app-visible time, {data['bytes'] / 2**20:g} MiB host region{extra}", fontsize=10)
    a.legend(fontsize=8)
    b.plot(ratios, [r["bytes_stored"] / 2**20 for r in runs], "o-")
    b.set_xlabel("dirty ratio (%)")
    b.set_ylabel("MiB stored")
    b.set_title("bytes stored per version")
    return save(fig, outdir, stem + "-checkpoint.png")


def plot_dirty(data, stem, outdir):
    res = data["results"]
    # The compared pair first (JSON objects come back with their keys sorted), then the references.
    first = [n for n in ("xxh3_1thread", "memcpy_1thread") if n in res]
    names = first + sorted(n for n in res if n not in first)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    others = iter(["C0", "C1", "C2", "C4", "C5", "C6", "C7"])
    colors = ["C3" if n.startswith("memcpy") else next(others, "C7") for n in names]
    bars = ax.bar(names, [res[n]["gbps"] for n in names], color=colors)
    ax.bar_label(bars, fmt="%.1f")
    ax.set_ylabel("GB/s (bytes digested / bytes copied per s)")
    ratio = data.get("digest_over_memcpy")
    title = f"chunk digest vs memcpy, {data['bytes'] / 2**20:g} MiB"
    if ratio is not None:
        title += f"; digest/memcpy time = {ratio:.2f}"
    ax.set_title(title, fontsize=10)
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
    x = [r["interval"] for r in runs]
    y = [100 * r["overhead"] for r in runs]
    if all("overhead_rounds" in r for r in runs):  # median of the rounds, bars from the lowest to the highest
        lo = [y[i] - 100 * min(r["overhead_rounds"]) for i, r in enumerate(runs)]
        hi = [100 * max(r["overhead_rounds"]) - y[i] for i, r in enumerate(runs)]
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", capsize=3, label="measured (median, range of the rounds)")
    else:
        ax.plot(x, y, "o-", label="measured")
    ax.axhline(2, color="red", ls=":", label="goal: 2%")
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint every N steps")
    ax.set_ylabel("overhead (%)")
    ranks = f", {data['ranks']} ranks with buddy transfer" if data.get("ranks", 1) > 1 else ""
    ax.set_title(f"stencil loop, {data['nx']}x{data['nx']} doubles in {data['memory']} memory{ranks}", fontsize=10)
    ax.legend()
    return save(fig, outdir, stem + "-overhead.png")


def plot_logging(data, stem, outdir):
    rows = data["sizes"]
    sizes = [r["bytes"] for r in rows]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label, style in [("raw_intra", "raw MPI, same group", "o-"), ("comm_intra", "Comm, same group", "s--"),
                              ("raw_inter", "raw MPI, other group", "o-"),
                              ("comm_inter", "Comm, other group (logged)", "s--")]:
        ax.plot(sizes, [1e6 * r[key + "_seconds"] for r in rows], style, label=label)
    ax.plot(sizes, [1e6 * r["memcpy_seconds"] for r in rows], ":", color="gray", label="memcpy")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message bytes")
    ax.set_ylabel("one-way time (us)")
    ax.legend(fontsize=8)
    ax2.plot(sizes, [r["raw_intra_seconds"] / r["comm_intra_seconds"] for r in rows], "o-", label="same group")
    ax2.plot(sizes, [r["raw_inter_seconds"] / r["comm_inter_seconds"] for r in rows], "s-",
             label="other group (logged)")
    ax2.axhline(0.95, color="red", ls=":", label="goal (same group): 0.95")
    ax2.set_xscale("log", base=2)
    ax2.set_ylim(0, 1.2)
    ax2.set_xlabel("message bytes")
    ax2.set_ylabel("Comm bandwidth / raw MPI bandwidth")
    ax2.legend(fontsize=8)
    fig.suptitle(f"reprise::Comm ping-pong vs raw MPI, {data['ranks']} ranks", fontsize=10)
    return save(fig, outdir, stem + "-logging.png")


def plot_interpose(data, stem, outdir):
    rows = data["rows"]
    sizes = [r["bytes"] for r in rows]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label, style in [("raw_intra", "library, same group", "o-"),
                              ("interposed_intra", "interposed, same group", "s--"),
                              ("raw_inter", "library, other group", "o-"),
                              ("interposed_inter", "interposed, other group (logged)", "s--"),
                              ("raw_probe", "library, MPI_Probe(ANY_TAG) + MPI_Recv", "d-"),
                              ("interposed_probe", "interposed, MPI_Probe(ANY_TAG) + MPI_Recv", "d--"),
                              ("library_allreduce", "MPI_Allreduce, library", "^-"),
                              ("interposed_allreduce", "MPI_Allreduce, interposed", "v--")]:
        if key + "_seconds" in rows[0]:  # (results written before the probed ping-pong have none)
            ax.plot(sizes, [1e6 * r[key + "_seconds"] for r in rows], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message bytes")
    ax.set_ylabel("time (us): one-way, or one allreduce")
    ax.legend(fontsize=7)
    ax2.plot(sizes, [r["interposed_intra_seconds"] / r["raw_intra_seconds"] for r in rows], "o-",
             label="ping-pong, same group")
    ax2.plot(sizes, [r["interposed_inter_seconds"] / r["raw_inter_seconds"] for r in rows], "s-",
             label="ping-pong, other group (logged)")
    ax2.plot(sizes, [r["interposed_allreduce_seconds"] / r["library_allreduce_seconds"] for r in rows], "^-",
             label="allreduce")
    ax2.axhline(1.5, color="red", ls=":", label="goal (allreduce, 1 MiB): 1.5")
    ax2.set_xscale("log", base=2)
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("message bytes")
    ax2.set_ylabel("interposed time / library time")
    ax2.legend(fontsize=7)
    fig.suptitle(f"MPI calls through libreprise_interpose.so vs the library, {data['ranks']} ranks", fontsize=10)
    return save(fig, outdir, stem + "-interpose.png")


def plot_interpose_runs(data, stem, outdir):
    summary = data["summary"]
    keys = list(summary)
    fig, axes = plt.subplots(1, len(keys), figsize=(3 * len(keys), 4), squeeze=False)
    for ax, k in zip(axes[0], keys):
        s = summary[k]
        values = [r[k] for r in data["runs"] if k in r]
        ax.plot(range(1, len(values) + 1), values, "k.", ms=5, label="runs")
        ax.axhline(s["median"], color="C0", label=f"median {s['median']:.3f}")
        if "goal" in s:
            ax.axhline(float(s["goal"].split()[1]), color="red", ls=":",
                       label=f"goal {s['goal']}: {s['runs_meeting_goal']}/{len(values)} runs")
        ax.set_title(k.replace("interposed_", ""), fontsize=8)
        ax.set_xlabel("run")
        ax.legend(fontsize=6)
    fig.suptitle(f"libreprise_interpose.so vs the library, {data['ranks']} ranks, {data['runs_count']} runs "
                 f"({data['machine']}, {data['date'][:10]})", fontsize=9)
    return save(fig, outdir, stem + "-interpose_runs.png")


def plot_heat3d(data, stem, outdir):
    variants = data["variants"]
    fig, ax = plt.subplots(figsize=(6, 4))
    names = [v["name"].replace("_", " ") for v in variants]
    ax.bar(names, [1e3 * v["median_seconds_per_step"] for v in variants], color="C0")
    for i, v in enumerate(variants):
        ax.plot([i] * len(v["seconds_per_step"]), [1e3 * x for x in v["seconds_per_step"]], "k.", ms=4)
        ax.annotate(f"{v['over_plain']:.3f}", (i, 1e3 * v["median_seconds_per_step"]), ha="center", va="bottom")
    ax.set_ylabel("ms per step (slowest rank; median, dots: runs)")
    ax.set_title(f"heat3d {data['grid']}^3, {data['ranks']} ranks: plain MPI vs wrapped (ratio to plain)", fontsize=9)
    return save(fig, outdir, stem + "-heat3d.png")


def plot_recovery_spares(data, stem, outdir):
    keys = ["detect_seconds", "repair_seconds", "fetch_seconds", "restore_seconds", "total_seconds"]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for j, name in enumerate(["spawned", "spare"]):
        xs = [i + (j - 0.5) * width for i in range(len(keys))]
        ax.bar(xs, [1e3 * data["median"][name][k] for k in keys], width, label=f"replacement {name}")
        for x, k in zip(xs, keys):
            ax.plot([x] * len(data["samples"][name]), [1e3 * s[k] for s in data["samples"][name]], "k.", ms=3)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([k.replace("_seconds", "") for k in keys])
    ax.set_ylabel("ms (median; dots: runs)")
    ax.set_title(f"a SIGKILLed rank of {data['ranks']}, {data['bytes_per_rank']} per rank: spawned vs spare "
                 f"({data['pairs']} pairs)", fontsize=9)
    ax.legend(fontsize=8)
    return save(fig, outdir, stem + "-recovery_spares.png")


def plot_sim(data, stem, outdir):
    runs = sorted(data["runs"], key=lambda r: (r["pattern"], r["ranks"]))
    patterns = sorted({r["pattern"] for r in runs})
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = [("per_rank_state_bytes_max", "protocol state per rank, max (B)"),
              ("control_messages_per_rank_per_checkpoint_max", "control messages per rank per checkpoint, max"),
              ("recovery_messages_per_rank_max_others", "recovery messages per rank, max; dotted: the coordinator")]
    for ax, (key, title) in zip(axes, panels):
        for p in patterns:
            rs = [r for r in runs if r["pattern"] == p]
            line, = ax.plot([r["ranks"] for r in rs], [r[key] for r in rs], "o-", label=p)
            if key.startswith("recovery"):
                ax.plot([r["ranks"] for r in rs], [r["recovery_messages_coordinator"] for r in rs], ":x",
                        color=line.get_color(), label=f"{p}: the coordinator")
        ax.set_xscale("log")
        ax.set_xlabel("ranks")
        ax.set_title(title, fontsize=9)
        if key.startswith("recovery"):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle("reprise-sim: the protocol core per rank against the job's size", fontsize=10)
    return save(fig, outdir, stem + "-sim.png")


def plot_commit(data, stem, outdir):
    shares = data["shares"]
    fig, ax = plt.subplots(figsize=(6, 4))
    keys = [("visible_seconds", "app-visible"), ("commit_latency_seconds", "commit latency (after checkpoint())"),
            ("transfer_seconds_model", "transfer model (bytes / MPI bandwidth at the start)")]
    if all("transfer_seconds" in s for s in shares):  # (2026-12-06 on: the same bytes by MPI alone, beside them)
        keys.append(("transfer_seconds", "the same bytes by MPI alone, after them"))
    width = 0.8 / len(keys)
    for j, (key, label) in enumerate(keys):
        xs = [i + (j - (len(keys) - 1) / 2) * width for i in range(len(shares))]
        ax.bar(xs, [1e3 * s[key + "_median"] for s in shares], width, label=label)
        for x, s in zip(xs, shares):
            ax.plot([x] * len(s[key]), [1e3 * v for v in s[key]], "k.", ms=3)
    ax.set_xticks(range(len(shares)))
    ax.set_xticklabels([f"{s['share_percent']}% changed" for s in shares])
    ax.set_ylabel("ms, slowest rank (median; dots: checkpoints)")
    ax.set_title(f"back-to-back checkpoints, {data['ranks']} ranks x {data['bytes_per_rank'] / 2**20:.0f} MiB: "
                 f"commit latency vs transfer", fontsize=9)
    ax.legend(fontsize=7)
    return save(fig, outdir, stem + "-commit.png")


def plot_log_snapshot(data, stem, outdir):
    rounds = data["rounds"]
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(rounds))
    ax.bar(xs, [1e3 * r["visible_seconds_median"] for r in rounds], 0.6, label="app-visible checkpoint() (median)")
    for x, r in zip(xs, rounds):
        ax.plot([x] * len(r["visible_seconds"]), [1e3 * v for v in r["visible_seconds"]], "k.", ms=3)
    base = next(r["visible_seconds_median"] for r in rounds if r["logged_bytes"] == 0)
    ax.axhline(1e3 * base * 1.1, color="red", lw=1, ls="--", label="goal: nothing logged + 10%")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['logged_bytes'] / 2**20:g} MiB" for r in rounds])
    ax.set_xlabel("bytes logged by rank 0 since its last checkpoint")
    ax.set_ylabel("ms, rank 0 (dots: checkpoints)")
    ax.set_title(f"log snapshot vs checkpoint, {data['ranks']} ranks x {data['bytes_per_rank'] / 2**20:.0f} MiB "
                 f"protected", fontsize=9)
    ax.legend(fontsize=7)
    return save(fig, outdir, stem + "-log_snapshot.png")


def plot_memory_budget(data, stem, outdir):
    cases = data["cases"]
    budgets = list(dict.fromkeys(c["budget"] for c in cases))
    series = list(dict.fromkeys((c["log_bound"], c["variant"]) for c in cases))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(series)
    for j, (bound, variant) in enumerate(series):
        xs, ys = [], []
        for i, b in enumerate(budgets):
            c = next(c for c in cases if (c["budget"], c["log_bound"], c["variant"]) == (b, bound, variant))
            x = i + (j - (len(series) - 1) / 2) * width
            xs.append(x)
            ys.append(c["max_peak_over_budget_median"])
            ax.plot([x] * len(c["max_peak_over_budget"]), c["max_peak_over_budget"], "k.", ms=3)
            ax.plot([x - width / 2, x + width / 2], [c["mean_peak_over_budget_median"]] * 2, "w-", lw=2)
        label = f"log bound {bound}" + ("" if variant == "this build" else f", {variant}")
        ax.bar(xs, ys, width, label=label)
    ax.axhline(1.0, color="red", lw=1, ls="--", label="the budget")
    ax.set_xticks(range(len(budgets)))
    ax.set_xticklabels([f"budget {b}" for b in budgets])
    ax.set_ylabel("peak / budget")
    ax.set_title(f"{data['ranks']} ranks, {data['program']}\nbars: the heaviest rank (median of runs); white: the "
                 f"mean rank; dots: runs", fontsize=8)
    ax.legend(fontsize=7)
    names = sorted({k for c in cases for k, v in c["heaviest_peak_components_mean"].items() if v})
    bottoms = [0.0] * len(cases)
    for k in names:
        vals = [c["heaviest_peak_components_mean"].get(k, 0) / 2**20 for c in cases]
        bx.bar(range(len(cases)), vals, 0.6, bottom=bottoms, label=k)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, c in enumerate(cases):
        bx.plot([i - 0.3, i + 0.3], [c["budget_bytes"] / 2**20] * 2, "r-", lw=1.5)
    bx.set_xticks(range(len(cases)))
    bx.set_xticklabels([f"{c['budget']}\n{c['log_bound']}" + ("" if c["variant"] == "this build" else
                                                             f"\n{c['variant']}") for c in cases], fontsize=7)
    bx.set_ylabel("MiB")
    bx.set_title("the heaviest rank at its peak, by component (mean of runs); red: the budget", fontsize=8)
    bx.legend(fontsize=7)
    return save(fig, outdir, stem + "-memory_budget.png")


def plot_files_commit(data, stem, outdir):
    summary = data["summary"]
    intervals = list(summary)
    fig, axes = plt.subplots(1, len(intervals), figsize=(5 * len(intervals), 4), squeeze=False)
    for ax, interval in zip(axes[0], intervals):
        for j, (variant, label) in enumerate([("nodir", "no REPRISE_DIR"), ("dir", "REPRISE_DIR")]):
            values = [1e3 * r["intervals"][interval]["median_durable_seconds"] for r in data["runs"]
                      if r["variant"] == variant]
            med = 1e3 * summary[interval][variant]["median_durable_seconds"]["median"]
            ax.bar(j, med, 0.6, color=f"C{j}", label=f"{label}: median {med:.1f} ms")
            ax.plot([j] * len(values), values, "k.", ms=4)
        ax.set_xticks([0, 1])
        ax.set_xticklabels(["no files", "REPRISE_DIR"])
        ax.set_ylabel("checkpoint() + commit, ms (dots: runs)")
        ax.set_title(f"a checkpoint every {interval} steps", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{data['ranks']} ranks, {data['nx']}x{data['nx']} stencil each, {data['rounds']} rounds "
                 f"({data['machine']}, {data['date'][:10]})", fontsize=9)
    return save(fig, outdir, stem + "-files_commit.png")


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
    plotters = {"checkpoint": plot_checkpoint, "dirty": plot_dirty, "d2h": plot_d2h, "overhead": plot_overhead,
                "logging": plot_logging, "interpose": plot_interpose, "interpose_runs": plot_interpose_runs,
                "heat3d": plot_heat3d,
                "recovery_spares": plot_recovery_spares, "sim": plot_sim, "commit": plot_commit,
                "log_snapshot": plot_log_snapshot, "memory_budget": plot_memory_budget,
                "files_commit": plot_files_commit}
    status = 0
    for f in args.files:
        try:
            with open(f) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"{f}: cannot read JSON ({e}), skipped", file=sys.stderr)
            status = 1
            continue
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind not in plotters:
            print(f"{f}: kind {kind!r} has no plot, skipped")
            continue
        stem = os.path.splitext(os.path.basename(f))[0]
        try:
            print("wrote", plotters[kind](data, stem, args.outdir))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            print(f"{f}: not a well-formed {kind} result ({e!r}), skipped", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
