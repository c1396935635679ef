#!/usr/bin/env bash
# Builds Reprise with compiler sanitizers and runs its unit tests (the protocol simulator, the data path through
# the host twin with its deferred streams, the runtime's drain and buddy threads, the benchmarks' smoke runs):
#   scripts/sanitize.sh address,undefined   [ctest args]   -> build-sanitize-address-undefined
#   scripts/sanitize.sh thread              [ctest args]   -> build-sanitize-thread
# Any report fails the run (-fno-sanitize-recover=all, halt_on_error). CUDA and MPI are left out: nvcc takes no
# sanitizer, and the MPI programs get theirs from tests/ulfm/sanitized.sh (scripts/mpirun.sh REPRISE_SANITIZE).
# Needs scripts/setup.sh's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address,undefined|thread [ctest args]}
shift
build=${REPRISE_SANITIZE_BUILD_DIR:-build-sanitize-${kind//,/-}}
jobs=$(nproc 2>/dev/null || echo 2)

echo "[sanitize] configure $build (-fsanitize=$kind)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_WERROR=ON -DREPRISE_SANITIZE="$kind" \
  -DREPRISE_ENABLE_CUDA=OFF -DREPRISE_ENABLE_MPI=OFF > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
echo "[sanitize] build ($jobs jobs)"
cmake --build "$build" -j "$jobs" > "$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# hwloc's pci plugin leaks libpciaccess's tables and is unloaded before LeakSanitizer reports, so the report
# cannot be suppressed by name: leave PCI discovery out (these machines have no GPU for it to find).
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci}
# consumer_find_package builds a separate project against an install of this tree: not a sanitizer matter. The
# job simulator (tests/sim) runs on one thread: nothing for ThreadSanitizer to see, and its scale runs took 4 of
# the thread run's 6 minutes (AddressSanitizer keeps them).
exclude=consumer_find_package
[[ "$kind" != *thread* ]] || exclude+='|^Simulator\.|^sim_cli_'
echo "[sanitize] ctest -L unit -E '$exclude' $*"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L unit -E "$exclude" "$@"
