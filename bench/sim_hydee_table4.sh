#!/usr/bin/env bash
# The shares of HydEE's Table 4 (seed 000) for the simulator's patterns: 1024 ranks, 4 per node, groups chosen by
# `reprise groups` (METIS) from the pattern's matrix with at most M ranks per group, then a run with a failure.
set -euo pipefail
bin=${1:-build/apps}; out=${2:-bench/results}; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
runs=()
for spec in stencil2d:64 stencil3d:128 cg:32 cholesky:128; do
  p=${spec%:*} m=${spec#*:}
  "$bin/reprise-sim" --pattern "$p" --ranks 1024 --ranks-per-node 4 --steps 20 --write-matrix "$tmp/$p.matrix" \
    > /dev/null
  "$bin/reprise" groups --matrix "$tmp/$p.matrix" --ranks-per-node 4 --max-group-ranks "$m" > "$tmp/$p.groups"
  tail -1 "$tmp/$p.groups"
  "$bin/reprise-sim" --pattern "$p" --ranks 1024 --ranks-per-node 4 --steps 20 --checkpoint-every 5 \
    --groups "$tmp/$p.groups" --fail 517:12 --json "$tmp/$p.json"
  runs+=("$tmp/$p.json")
done
python3 - "$out/sim-hydee-table4.json" "${runs[@]}" <<'PY'
import json, sys
runs = [r for f in sys.argv[2:] for r in json.load(open(f))["runs"]]
json.dump({"kind": "sim", "runs": runs}, open(sys.argv[1], "w"), indent=1)
print("wrote", sys.argv[1])
PY
