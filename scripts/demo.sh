#!/usr/bin/env bash
# The main demo: one Kokkos rank checkpoints a diffusing field into a directory, destroys its own data, restores,
# finishes bit-identical to an undisturbed run, and prints the timing report; then `reprise inspect` and
# `reprise verify` look at the files it wrote. Extra arguments go to reprise-demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${REPRISE_BUILD_DIR:-build}

echo "[demo] setup"
bash scripts/setup.sh
echo "[demo] configure + build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target reprise-demo reprise-cli

dir=$(mktemp -d /tmp/reprise-demo-XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "[demo] running reprise-demo with REPRISE_DIR=$dir"
REPRISE_DIR="$dir" "$build/apps/reprise-demo" --json "$dir/metrics.json" "$@"
echo
echo "[demo] reprise inspect (first lines)"
"$build/apps/reprise" inspect "$dir" | head -n 12
echo "[demo] reprise verify"
"$build/apps/reprise" verify "$dir" | tail -n 1
