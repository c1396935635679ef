"""Report and plot for scripts/demo.sh: reads the --json of two reprise-stencil runs (without and with a failure).

Prints the checkpoint share of the run time, the recovery time, the rolled-back ranks, and writes a PNG of the
time per executed step (re-executed steps included) with checkpoint and failure marks. Run with /usr/bin/python3
(Debian's python3-matplotlib).
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("clean")
    p.add_argument("killed")
    p.add_argument("--out", default="stencil.png")
    a = p.parse_args()
    clean, killed = load(a.clean), load(a.killed)

    def visible(run):
        return sum(run["checkpoint_seconds"])

    wall = clean["wall_seconds"]
    share = 100.0 * visible(clean) / max(wall - visible(clean), 1e-12)
    print(f"[report] {clean['ranks']} ranks, {clean['nx']}x{clean['ny']}, {clean['steps']} steps, "
          f"a checkpoint every {clean['checkpoint_every']} steps")
    print(f"[report] failure-free run: {wall:.2f} s; checkpoints ({len(clean['checkpoint_seconds'])}) took "
          f"{visible(clean):.3f} s of application time = {share:.2f}% of the compute time "
          f"(digest + pack; drain and buddy transfer run in the background)")
    print(f"[report] run with a failure: {killed['wall_seconds']:.2f} s "
          f"({killed['wall_seconds'] - wall:+.2f} s: detection, repair, re-executed steps)")
    m = clean.get("message_stats_rank0")
    if m and clean.get("messages") == "reprise":
        print(f"[report] halos through reprise::Comm (rank 0): {m['inter_messages']} messages to other groups "
              f"logged ({m['inter_bytes'] / 2**20:.1f} MiB), {m['intra_messages']} inside its group not logged; "
              f"{m['log_entries_released']} log entries released after the receivers' commits, "
              f"{m['log_live_entries']} held at the end ({m['log_held_bytes'] / 2**20:.1f} MiB of log memory)")
    for r in killed.get("recoveries", []):
        who = (f"only ranks {r['rolled_back']} (the failed group) rolled back, to version {r['version']}; "
               f"the other {killed['ranks'] - len(r['rolled_back'])} ranks went on"
               if r.get("group_rollback") else
               f"every rank rolled back, to version {r['version']}")
        print(f"[report] recovery from the failure of rank(s) {r['failed']}: {r['total_seconds']:.3f} s "
              f"(repair {r['repair_seconds']:.3f} s, checkpoints moved {r['transfer_seconds']:.3f} s, "
              f"{r['attempts']} attempt(s)); {who}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[report] matplotlib missing: no plot (install python3-matplotlib, run with /usr/bin/python3)")
        return 0
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for run, label, color in ((clean, "no failure", "tab:blue"), (killed, "rank 5 killed", "tab:red")):
        t = run["timeline"]
        steps = [e for e in t if e["event"] != "rollback"]
        ax.plot([e["at"] for e in steps], [1e3 * e["seconds"] for e in steps], ".", ms=3, color=color, label=label)
        cps = [e for e in steps if e["event"] == "checkpoint"]
        ax.plot([e["at"] for e in cps], [1e3 * e["seconds"] for e in cps], "^", ms=5, color=color,
                label=f"{label}: checkpoint steps")
        for i, e in enumerate(t):
            if e["event"] == "rollback":
                # From the end of the last step before the failure to the end of the restore: detection,
                # repair and the restore itself.
                before = t[i - 1]["at"] + t[i - 1]["seconds"] if i else e["at"]
                ax.axvspan(before, e["at"] + e["seconds"], color=color, alpha=0.15, lw=0)
                ax.axvline(e["at"], color=color, ls="--", lw=1)
                ax.annotate(f"failure: rolled back to step {e['step']}", (e["at"], ax.get_ylim()[1] * 0.9),
                            color=color, fontsize=8, rotation=90, va="top", ha="right")
        # A group rollback leaves rank 0 running when its group did not fail: mark the failure from the
        # recovery record (when the recovery began on rank 0).
        for r in run.get("recoveries", []):
            if r.get("group_rollback") and not r.get("this_rank_rolled_back") and "start_steady_seconds" in run:
                at = r["at_steady_seconds"] - run["start_steady_seconds"]
                ax.axvline(at, color=color, ls=":", lw=1)
                ax.annotate(f"failure of rank(s) {r['failed']}: ranks {r['rolled_back']} roll back, rank 0 goes on",
                            (at, ax.get_ylim()[1] * 0.9), color=color, fontsize=8, rotation=90, va="top",
                            ha="right")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("time per step (ms), rank 0")
    ax.set_title("reprise-stencil: time per executed step")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"[report] plot: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
