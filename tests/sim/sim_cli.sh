#!/usr/bin/env bash
# reprise-sim as a user runs it: 10,000 ranks of stencil2d, one rank killed; exit 0, every field the JSON promises,
# the matrix written, the plot drawn; bad options exit 2 with the reason.
set -euo pipefail
sim=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$sim" --pattern stencil2d --ranks 10000 --ranks-per-node 4 --steps 20 --checkpoint-every 5 --fail 17:12 \
  --json "$out/sim.json" --write-matrix "$out/m.matrix"
python3 - "$out/sim.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "sim", d
r = d["runs"][0]
for k in ["ranks", "per_rank_state_bytes_max", "control_messages_per_rank_per_checkpoint_max",
          "recovery_messages_per_rank_max", "logged_share", "rolled_back_share", "recovery_seconds_model",
          "wall_seconds"]:
    assert k in r, k
assert r["ok"] and r["ranks"] == 10000 and r["failures_struck"] == 1, r
assert 0 < r["logged_share"] < 1 and r["rolled_back_share"] == 4 / 10000, r
print("sim json ok:", {k: r[k] for k in ["per_rank_state_bytes_max", "logged_share", "wall_seconds"]})
PY
head -2 "$out/m.matrix" | grep -qx "ranks 10000"
[ "$(wc -l < "$out/m.matrix")" -eq $((2 + 2 * 2 * 99 * 100)) ]  # 100 x 100 ranks, 4 neighbours inside
/usr/bin/python3 "$src/bench/plot.py" "$out/sim.json" -o "$out" | grep -q "wrote"
set +e
"$sim" --ranks 100 --fail 100:3 2> "$out/err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "outside ranks 0..99" "$out/err"
echo "sim cli ok"
