#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, builds tests/consumer against it with find_package(Reprise)
# and runs it; with MPI, also a program written for MpiRuntime and a wrapped MPI program (2 ranks each, the
# mpirun of the tree's MPI: no failure, so no ULFM flags).
# Usage: run_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd); src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DREPRISE_SOURCE_DIR="$src" \
  > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
if [ -n "$(find "$work/prefix" -name 'libreprise_interpose.so*' -print -quit)" ]; then
  # The mpirun of the MPI the tree was built with (find_package(Reprise) gives the consumer that MPI too).
  mpicc=$(sed -n 's/^MPI_C_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt")
  mpirun=$(dirname "$mpicc")/mpirun
  [ -x "$mpirun" ] || mpirun=mpirun
  for program in mpi_consumer wrapped_consumer; do
    [ -x "$work/build/$program" ] ||
      { echo "Reprise was installed with MPI, but find_package(Reprise) did not give what $program needs"; exit 1; }
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mca_base_component_show_load_errors=0 \
      REPRISE_RANKS_PER_NODE=1 LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" \
      timeout 120 "$mpirun" --oversubscribe -x REPRISE_RANKS_PER_NODE -x LD_LIBRARY_PATH -n 2 "$work/build/$program"
  done
  # heat3d built outside the tree (with Kokkos): the same checksum as the tree's plain MPI build.
  if [ -x "$work/build/heat3d_consumer" ] && [ -x "$build/apps/heat3d-plain" ]; then
    args=(--nx 16 --ny 8 --nz 8 --steps 20 --checkpoint-every 5)
    for program in "$work/build/heat3d_consumer" "$build/apps/heat3d-plain"; do
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mca_base_component_show_load_errors=0 \
        REPRISE_RANKS_PER_NODE=1 LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" \
        timeout 120 "$mpirun" --oversubscribe -x REPRISE_RANKS_PER_NODE -x LD_LIBRARY_PATH -n 2 "$program" "${args[@]}" \
        | grep -a '^checksum' >> "$work/checksums"
    done
    [ "$(sort -u "$work/checksums" | wc -l)" = 1 ] && [ "$(wc -l < "$work/checksums")" = 2 ] ||
      { echo "heat3d outside the tree and heat3d-plain differ:"; cat "$work/checksums"; exit 1; }
    echo "heat3d consumer: $(head -1 "$work/checksums"), as heat3d-plain"
  fi
fi
