#!/usr/bin/env bash
# sanitized.sh KIND RUNS SEED: Comm, the protocol, the buddy store and ULFM recovery built with sanitizers KIND
# (scripts/mpirun.sh REPRISE_SANITIZE: a tree of its own) on real processes: a failure-free 2-rank
# run of reprise-mpi-comm-check (mpirun.sh builds the tree first, outside the launcher's timeout), the wrapped heat3d
# (libreprise_interpose.so) with a killed rank, the interposition's check program, then random_kills.sh RUNS SEED
# on 8 ranks. A sanitizer's report fails the test. Each run has 300 s (a few seconds here); mpirun.sh prints the
# processes' stacks 40 s before its timeout, and a failed run prints its last 200 lines.
set -u
kind=$1 runs=$2 seed=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
export REPRISE_SANITIZE=$kind
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}  # (Open MPI does not free all it allocates)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:report_signal_unsafe=0}
# expect WHAT ENV... -- EXPECT_OPTIONS... -- MPIRUN_ARGS...: tests/ulfm/expect.sh with EXPECT_OPTIONS (its --match
# patterns; exit 0, no crash, no REPRISE_KILL order that never fired) on a run through scripts/mpirun.sh, and no
# sanitizer report; otherwise the last 200 lines, and the test fails.
log=$(mktemp)
files=$(mktemp -d)
trap 'rm -rf "$log" "$files"' EXIT
expect() {
  local what=$1 envs=() opts=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  if ! env "${envs[@]}" bash "$here/tests/ulfm/expect.sh" "${opts[@]}" \
       --absent 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' -- \
       bash "$here/scripts/mpirun.sh" "$@" > "$log" 2>&1; then
    tail -n 200 "$log"
    echo "sanitized: the $what failed"
    exit 1
  fi
  echo "sanitized: $what ok (-fsanitize=$kind)"
}
expect "2-rank run" REPRISE_RANKS_PER_NODE=1 -- --match "^comm ok" -- -n 2 --timeout 300 -- reprise-mpi-comm-check
# The MPI interposition too: the wrapped heat3d, its energy by MPI_Iallreduce, rank 3 killed inside it (the program's
# thread and the runtime's threads both call MPI through the interposition), its output written by
# MPI_File_write_ordered to a file kept open (the last snapshot is the final field: its digest stands for the checksum).
# Step 16: with --overlap the reduction started at the end of step 14 is carried out by that step's output (under
# step 14's number) and step 15 enters no collective, so an order for step 15 never fired (from 48cf37a, which added
# the output, this run killed nothing, unseen until the runtime said so: MpiCoordination::finish). The kill, the
# spare and the group rollback are required.
# A spare takes rank 3's place: a spawned replacement can hang in Open MPI 5.0.7 (open-mpi/ompi#12585, #13325;
# docs/TESTING.md), and without a recovery limit such a hang would last until the launcher's timeout. Spawning under
# the sanitizers is random_kills.sh's part below, which gives each recovery a limit and runs such a hang once more.
expect "wrapped heat3d with a killed rank" \
  REPRISE_RANKS_PER_NODE=2 REPRISE_KILL=3:16:collective REPRISE_RECOVERY_TIMEOUT_S=120 -- \
  --match "^output 0xf5fdce322caaf790 bytes 2621440" --match "rank 3: REPRISE_KILL: SIGKILL at step 16 \(collective\)" \
  --match "spare process \(start rank [0-9]+\) is rank 3 now" --match "only group 1 \(ranks 2 and 3\) rolls back" -- \
  -n 8 --spares 1 --timeout 300 -- reprise-heat3d --nx 32 --ny 32 --nz 32 --steps 30 --checkpoint-every 10 --overlap \
  --output-every 3 --output "$files/heat3d.dat" --output-ordered
# Every call the interposition serves (tests/interpose/interpose_check.cpp: point-to-point, collectives of each kind,
# topologies, attributes with callbacks, persistent requests).
expect "interpose-check" REPRISE_RANKS_PER_NODE=2 -- --match "^interpose-check done" -- -n 6 --timeout 300 -- \
  reprise-interpose-check
bash "$here/tests/ulfm/random_kills.sh" "$runs" "$seed"
