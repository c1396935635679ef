#!/usr/bin/env bash
# stress_64_ranks.sh [RUNS] [SEED]: the stencil at 64 ranks (32 emulated nodes of 2, 256 x 256, 40 steps, a
# checkpoint every 10), each run with one rank killed at a random step, one run in three with a second one in
# another group. Every run must end with the failure-free checksum and a recovery line. Not in CI (64 processes on
# 2 cores: 5 to 10 s a run here): `cmake --build build --target stress-64-ranks`, or by hand.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
runs=${1:-5}
RANDOM=${2:-1}
checksum=0x1a537f9dfdcc48a5  # the same at any rank count (4 ranks give it)
export REPRISE_RANKS_PER_NODE=2
failed=0
for ((i = 1; i <= runs; i++)); do
  kill="$((RANDOM % 64)):$((RANDOM % 38 + 1))"
  if ((RANDOM % 3 == 0)); then
    other=$((RANDOM % 64))
    [ $((other / 2)) -ne $((${kill%%:*} / 2)) ] && kill="$kill,$other:$((RANDOM % 38 + 1))"
  fi
  echo "== run $i of $runs: REPRISE_KILL=$kill"
  REPRISE_KILL=$kill bash tests/ulfm/expect.sh --match "checksum $checksum" --match "recovered from the failure of" -- \
    bash scripts/mpirun.sh -n 64 --timeout 300 -- reprise-stencil --nx 256 --ny 256 --steps 40 \
    --checkpoint-every 10 | grep -E "^(checksum|reprise: recovered|expect.sh)" || failed=$((failed + 1))
done
echo "stress_64_ranks.sh: $((runs - failed)) of $runs runs passed"
[ "$failed" -eq 0 ]
