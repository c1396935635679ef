#!/usr/bin/env bash
# sanitized.sh KIND RUNS SEED: Comm, the protocol, the buddy store and ULFM recovery built with sanitizers KIND
# (scripts/mpirun.sh REPRISE_SANITIZE: a tree of its own) on real processes: a failure-free 2-rank
# run of reprise-mpi-comm-check (which also builds it, under a timeout that allows for that), the wrapped heat3d
# (libreprise_interpose.so) with a killed rank, then random_kills.sh RUNS SEED on 8 ranks. A sanitizer's report
# fails the test.
set -u
kind=$1 runs=$2 seed=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
export REPRISE_SANITIZE=$kind
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}  # (Open MPI does not free all it allocates)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:report_signal_unsafe=0}
out=$(REPRISE_RANKS_PER_NODE=1 bash "$here/scripts/mpirun.sh" -n 2 --timeout 1200 -- reprise-mpi-comm-check 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -aq "^comm ok" <<< "$out" ||
   grep -aqE 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' <<< "$out"; then
  tail -n 40 <<< "$out"
  echo "sanitized: the 2-rank run failed (exit $rc)"
  exit 1
fi
echo "sanitized: 2-rank run ok (-fsanitize=$kind)"
# The MPI interposition too: the wrapped heat3d, its energy by MPI_Iallreduce, rank 3 killed inside it (the program's
# thread and the runtime's threads both call MPI through the interposition).
out=$(REPRISE_RANKS_PER_NODE=2 REPRISE_KILL=3:15:collective bash "$here/scripts/mpirun.sh" -n 8 --timeout 1200 -- \
        reprise-heat3d --nx 32 --ny 32 --nz 32 --steps 30 --checkpoint-every 10 --overlap 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -aq "^checksum 0xf4fc7efdddcc4496" <<< "$out" ||
   grep -aqE 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' <<< "$out"; then
  tail -n 40 <<< "$out"
  echo "sanitized: the wrapped heat3d run failed (exit $rc)"
  exit 1
fi
echo "sanitized: wrapped heat3d with a killed rank ok (-fsanitize=$kind)"
exec bash "$here/tests/ulfm/random_kills.sh" "$runs" "$seed"
