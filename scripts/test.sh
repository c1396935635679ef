#!/usr/bin/env bash
# The test command: installs dependencies (scripts/setup.sh), builds Open MPI 5 with ULFM once (scripts/openmpi.sh,
# about 10-20 min the first time), configures, builds, runs ctest.
#   scripts/test.sh              every test
#   scripts/test.sh -L unit      one label (unit, gpu, mpi, ulfm, sanitize: docs/TESTING.md)
# Extra arguments go to ctest. REPRISE_BUILD_DIR (default: build) picks the build tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${REPRISE_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)

echo "[test] setup"
bash scripts/setup.sh
# The MPI the ULFM tests run on (scripts/mpirun.sh takes it). If its build fails, the MPI tests fail too, each
# saying that no MPI with ULFM is there: say why here, loudly, and go on with the others.
if [ "${REPRISE_MPI:-}" != host ]; then
  echo "[test] Open MPI 5 with ULFM (scripts/openmpi.sh)"
  if ! bash scripts/openmpi.sh; then
    echo "[test] ERROR: scripts/openmpi.sh failed (its log is named above): the MPI and ULFM tests cannot run" >&2
  fi
fi
# The tree is built for the MPI the tests run on, so scripts/mpirun.sh runs its programs (no second tree).
mpi_home=()
if [ "${REPRISE_MPI:-}" != host ] && prefix=$(bash scripts/openmpi.sh prefix 2> /dev/null); then
  mpi_home=(-DMPI_HOME="$prefix")
fi
echo "[test] configure $build ${mpi_home[*]}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_WERROR=ON "${mpi_home[@]}"
echo "[test] build ($jobs jobs)"
cmake --build "$build" -j "$jobs"
echo "[test] ctest $*"
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@" || status=$?
if [ "$status" != 0 ]; then
  # Each failed test's output is printed where it failed, among hundreds of others: its last lines again here, at
  # the end of the log, where a reader of a failed CI looks first.
  echo "[test] ctest failed (exit $status); the last 100 lines of each failed test's output follow"
  bash scripts/failed-tests.sh "$build" 100 || true
fi
exit "$status"
