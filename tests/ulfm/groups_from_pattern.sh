#!/usr/bin/env bash
# groups_from_pattern.sh REPRISE_CLI CHECKSUM: groups chosen from the stencil's own communication pattern, then used.
#   1. 8 ranks on emulated nodes of 2 (a 4 x 2 process grid: a node is one row), REPRISE_COMM_MATRIX: every rank
#      writes the bytes its Comm sent to each peer;
#   2. `reprise groups --max-group-ranks 4` over those rows: groups of two nodes one above the other (ranks 0-3 and
#      4-7: only the halos between rows 1 and 2 cross groups);
#   3. the stencil run with those REPRISE_GROUPS and rank 5 killed at step 15: only group 1 (ranks 4 to 7) rolls
#      back, and the result is the failure-free checksum.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cli=$1
checksum=$2
dir=build-test-files/groups-$$  # relative to the root
trap 'rm -rf "$root/$dir"' EXIT
args=(--nx 64 --ny 64 --steps 40 --checkpoint-every 10)
export REPRISE_RANKS_PER_NODE=2
echo "== run 1: the communication matrix"
REPRISE_COMM_MATRIX=$dir bash tests/ulfm/expect.sh --match "checksum $checksum" -- \
  bash scripts/mpirun.sh -n 8 --timeout 300 -- reprise-stencil "${args[@]}" || exit 1
echo "== reprise groups"
out=$("$cli" groups --matrix "$dir" --ranks-per-node 2 --max-group-ranks 4) || { echo "$out"; exit 1; }
echo "$out"
groups=$(sed -n 's/^REPRISE_GROUPS=//p' <<< "$out")
[ "$groups" = "0,0,0,0,1,1,1,1" ] || { echo "groups_from_pattern.sh: expected REPRISE_GROUPS=0,0,0,0,1,1,1,1"; exit 1; }
grep -qE "^groups 2 logged_share 0\.[0-9]+ rolled_back_share 0\.5000$" <<< "$out" || exit 1
echo "== run 2: with those groups, rank 5 killed at step 15"
REPRISE_GROUPS=$groups REPRISE_KILL=5:15 bash tests/ulfm/expect.sh --match "checksum $checksum" \
  --match "only group 1 \(ranks 4, 5, 6 and 7\) rolls back, the other ranks go on" -- \
  bash scripts/mpirun.sh -n 8 --timeout 300 -- reprise-stencil "${args[@]}"
