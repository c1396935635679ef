#!/usr/bin/env bash
# sanitized.sh KIND RUNS SEED: Comm, the protocol, the buddy store and ULFM recovery built with sanitizers KIND
# (scripts/mpirun.sh REPRISE_SANITIZE: a tree of its own) on real processes: a failure-free 2-rank
# run of reprise-mpi-comm-check (which also builds it, under a timeout that allows for that), the wrapped heat3d
# (libreprise_interpose.so) with a killed rank, the interposition's check program, then random_kills.sh RUNS SEED
# on 8 ranks. A sanitizer's report fails the test.
set -u
kind=$1 runs=$2 seed=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
export REPRISE_SANITIZE=$kind
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}  # (Open MPI does not free all it allocates)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:report_signal_unsafe=0}
# expect WHAT PATTERN ENV... -- MPIRUN_ARGS...: a run through scripts/mpirun.sh that must exit 0, print a line matching
# PATTERN and no sanitizer report; otherwise its tail, and the test fails.
expect() {
  local what=$1 pattern=$2 out rc
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  out=$(env "${envs[@]}" bash "$here/scripts/mpirun.sh" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -aq "$pattern" <<< "$out" ||
     grep -aqE 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' <<< "$out"; then
    tail -n 40 <<< "$out"
    echo "sanitized: the $what failed (exit $rc)"
    exit 1
  fi
  echo "sanitized: $what ok (-fsanitize=$kind)"
}
expect "2-rank run" "^comm ok" REPRISE_RANKS_PER_NODE=1 -- -n 2 --timeout 1200 -- reprise-mpi-comm-check
# The MPI interposition too: the wrapped heat3d, its energy by MPI_Iallreduce, rank 3 killed inside it (the program's
# thread and the runtime's threads both call MPI through the interposition), its output written by
# MPI_File_write_ordered to a file kept open (the last snapshot is the final field: its digest stands for the checksum).
files=$(mktemp -d)
trap 'rm -rf "$files"' EXIT
expect "wrapped heat3d with a killed rank" "^output 0xf5fdce322caaf790 bytes 2621440" REPRISE_RANKS_PER_NODE=2 \
  REPRISE_KILL=3:15:collective -- -n 8 --timeout 1200 -- reprise-heat3d --nx 32 --ny 32 --nz 32 --steps 30 \
  --checkpoint-every 10 --overlap --output-every 3 --output "$files/heat3d.dat" --output-ordered
# Every call the interposition serves (tests/interpose/interpose_check.cpp: point-to-point, collectives of each kind,
# topologies, attributes with callbacks, persistent requests).
expect "interpose-check" "^interpose-check done" REPRISE_RANKS_PER_NODE=2 -- -n 6 --timeout 1200 -- \
  reprise-interpose-check
bash "$here/tests/ulfm/random_kills.sh" "$runs" "$seed"
