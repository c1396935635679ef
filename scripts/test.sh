#!/usr/bin/env bash
# The test command: installs dependencies (scripts/setup.sh), configures, builds, runs ctest.
#   scripts/test.sh              every test
#   scripts/test.sh -L unit      one label (unit, gpu, mpi, ulfm, sanitize: docs/TESTING.md)
# Extra arguments go to ctest. REPRISE_BUILD_DIR (default: build) picks the build tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${REPRISE_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)

echo "[test] setup"
bash scripts/setup.sh
echo "[test] configure $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_WERROR=ON
echo "[test] build ($jobs jobs)"
cmake --build "$build" -j "$jobs"
echo "[test] ctest $*"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
