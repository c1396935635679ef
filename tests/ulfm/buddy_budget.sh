#!/usr/bin/env bash
# buddy_budget.sh: a rank whose memory budget its wards' copies fill (REPRISE_MEMORY_BUDGET on rank 0 only, as on
# a node with less memory or more ranks than its buddy's): it trims the buffers kept to receive them and tells its
# ward, which keeps one chain instead of REPRISE_KEEP_CHAINS, so that rank 0 ends within its budget plus one
# version (without this, a budget of 14 MiB held 18.7). Same checksum as without a budget, also with rank 1 killed
# after that and restored from rank 0's copies. Rank 0 keeps one chain of its own from the start, so that what
# fills its budget is its ward's copies: with 8 of its own as well, which of the two it trims first is a race (its
# own, then the ward told between steps 50 and 80: a fresh-clone CI saw the kill at 77 come first).
#   buddy_budget.sh                                      the test
#   buddy_budget.sh --rank RANK BUDGET PROGRAM ARGS...   (through mpirun) PROGRAM, with the budget and one chain
#                                                        on RANK only
set -u
if [ "${1:-}" = --rank ]; then
  [ "${OMPI_COMM_WORLD_RANK:-}" = "$2" ] && export REPRISE_MEMORY_BUDGET=$3 REPRISE_KEEP_CHAINS=1
  shift 3
  exec "$@"
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# The stencil of the tree scripts/mpirun.sh runs programs from (built there if stale), by its path: the wrapper
# above is what mpirun starts.
bash scripts/mpirun.sh --build reprise-stencil > /dev/null || { echo "buddy_budget: reprise-stencil not built"; exit 1; }
stencil=$(bash scripts/mpirun.sh --tree | cut -d' ' -f1)/apps/reprise-stencil
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
args=(--nx 512 --ny 512 --steps 100 --checkpoint-every 5 --progress-every 0)
export REPRISE_RANKS_PER_NODE=1 REPRISE_KEEP_CHAINS=8 REPRISE_FULL_EVERY=2
run() {  # run NAME [ENV...]: rank 0 with a budget of 10 MiB
  env "${@:2}" bash scripts/mpirun.sh -n 2 --timeout 300 -- "$root/tests/ulfm/buddy_budget.sh" --rank 0 10M \
    "$stencil" "${args[@]}" --json "$d/$1.json" > "$d/$1.out" 2>&1
}
bash scripts/mpirun.sh -n 2 --timeout 300 -- "$stencil" "${args[@]}" > "$d/free.out" 2>&1 ||
  { echo "buddy_budget: the run without a budget failed"; cat "$d/free.out"; exit 1; }
want=$(grep -o '^checksum 0x[0-9a-f]*' "$d/free.out")
fail=0
run budget || { echo "buddy_budget: the run with a budget failed"; cat "$d/budget.out"; exit 1; }
# Rank 1 says it keeps one chain between steps 40 and 57 here (11 runs, idle or beside two busy loops): the kill
# comes at 97, after the checkpoint of step 95.
run killed REPRISE_KILL=1:97 || { echo "buddy_budget: the run with rank 1 killed failed"; cat "$d/killed.out"; exit 1; }
for r in budget killed; do
  got=$(grep -o '^checksum 0x[0-9a-f]*' "$d/$r.out")
  [ "$got" = "$want" ] || { echo "buddy_budget: $r: '$got', without a budget '$want'"; fail=1; }
  grep -q "rank 1: warning: keeping 1 chain instead of 8 (REPRISE_KEEP_CHAINS): its buddy holds more than its own" \
    "$d/$r.out" || { echo "buddy_budget: $r: rank 1 did not say it keeps one chain"; cat "$d/$r.out"; fail=1; }
done
grep -q "recovered from the failure of rank 1 " "$d/killed.out" || { echo "buddy_budget: rank 1 was not killed and recovered"; fail=1; }
python3 - "$d/budget.json" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
version = 2 << 20  # more than any one version here (the whole 512 x 512 grid of doubles)
ok = m["budget_bytes"] == 10 << 20 and m["total_bytes"] <= m["budget_bytes"] + version
print("buddy_budget: rank 0 holds", m["total_bytes"], "bytes against its budget of", m["budget_bytes"],
      "(wards' copies", m["components"]["wards"], "bytes)", "" if ok else "- more than one version over", )
sys.exit(0 if ok else 1)
PY
exit "$fail"
