#!/usr/bin/env bash
# scripts/mpirun.sh configures its host-MPI tree with REPRISE_BUILD_TESTS=OFF (a host whose ULFM works need not
# have GoogleTest) and the mpi/ulfm tests run the MPI check programs through it: such a tree must still have them.
# Configures a scratch tree that way (configure only) and checks each program is a target.
# Usage: check_programs_without_tests.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$src" -B "$work" -DREPRISE_ENABLE_MPI=ON -DREPRISE_BUILD_TESTS=OFF -DREPRISE_ENABLE_CUDA=OFF \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
targets=$(cmake --build "$work" --target help)
missing=0
for p in reprise-mpi-layout-check reprise-mpi-progress-check reprise-mpi-comm-check reprise-ulfm-probe \
         reprise-stencil reprise-cholesky reprise-bench-logging interpose-check-plain reprise-interpose-check \
         heat3d-plain reprise-heat3d; do
  if grep -q -- "\.\.\. $p\$" <<< "$targets"; then echo "target $p"; else echo "MISSING target $p"; missing=1; fi
done
[ "$missing" = 0 ] && echo "every program mpirun.sh may build is a target without the tests"
