#!/usr/bin/env bash
# Builds what a GPU machine needs to validate Reprise's device code, as one folder to carry there (the lent GPU
# machines have CUDA but no MPI, Kokkos, hwloc or OpenBLAS; docs/GPU.md):
#
#   scripts/gpu-bundle.sh [DIR] [ARCHS] [KOKKOS]     DIR default .device (git-ignored), ARCHS default 90
#
# DIR/bin: the GPU tests (CUDA kernels against their host twins, the data path on device memory, cuSOLVER/cuBLAS
# tiles against LAPACKE, the NCCL barrier) and the D2H benchmark; DIR/lib: libreprise and the libraries they need
# that are not glibc or CUDA's; DIR/run.sh runs them there (see its header). No MPI: the MPI programs need an MPI
# on the GPU machine, unless KOKKOS is given: the install folder of a Kokkos 4.x built with CUDA (docs/GPU.md; its
# bin/nvcc_wrapper is the compiler). Then DIR/bin also gets the MPI + Kokkos programs (the stencil, Cholesky and
# heat3d apps, reprise-mpi-comm-check, the overhead, logging and commit benchmarks, reprise_kokkos_tests), and
# DIR/mpi the MPI they were built against: Open MPI 5 with ULFM and CUDA when scripts/openmpi.sh has built it (tree
# build-gpu-apps-ompi5; run.sh puts it back at its prefix and checks online recovery on the GPU), otherwise this
# machine's Open MPI (build-gpu-apps; its runtime relocated with OPAL_PREFIX; no ULFM, so those runs show the data
# path on the GPU and relaunches from files, not online recovery).
# Prints what it does; the build tree is build-gpu-bundle.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/.device}
archs=${2:-90}
kokkos=${3:-}
build=$here/build-gpu-bundle
log() { echo "[gpu-bundle] $*"; }
logged() {  # logged LOG WHAT COMMAND...: runs COMMAND into LOG; on failure its tail and "WHAT failed", exit 1
  local out=$1 what=$2
  shift 2
  "$@" > "$out" 2>&1 || { tail -n 30 "$out"; log "$what failed"; exit 1; }
}
copy_programs() {  # copy_programs BUILD TARGET...: the targets' executables into DIR/bin
  local from=$1 t
  shift
  for t in "$@"; do cp "$(find "$from" -type f -perm -u+x -name "$t" | head -n 1)" "$dir/bin/"; done
}

[ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null || { log "no nvcc: CUDA is needed to build the bundle"; exit 2; }
targets=(reprise_kernel_cuda_tests reprise_cuda_runtime_tests reprise_tile_kernel_cuda_tests reprise-bench-d2h)
log "configure $build (Release, CUDA architectures $archs, no MPI)"
logged "$build.configure.log" configure cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DREPRISE_ENABLE_CUDA=ON -DREPRISE_CUDA_ARCHITECTURES="$archs" -DREPRISE_ENABLE_MPI=OFF -DREPRISE_WERROR=OFF
if grep -q "Reprise: NCCL ON" "$build.configure.log"; then targets+=(reprise_nccl_barrier_tests); fi
log "build ${targets[*]} ($(nproc) jobs; a few minutes)"
logged "$build.build.log" build cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

app_targets=()
ompi5=""
if [ -n "$kokkos" ]; then
  [ -x "$kokkos/bin/nvcc_wrapper" ] || { log "$kokkos/bin/nvcc_wrapper missing: KOKKOS must be a CUDA Kokkos install"; exit 2; }
  # The MPI: Open MPI 5 with ULFM and CUDA built here by scripts/openmpi.sh when it is (online recovery on the GPU
  # machine), else this machine's Open MPI (no ULFM: the apps are checked there by relaunch from files).
  ompi5=$(bash "$here/scripts/openmpi.sh" prefix 2> /dev/null || true)
  mpi_args=()
  if [ -n "$ompi5" ]; then
    export PATH=$ompi5/bin:$PATH
    mpi_args=(-DMPI_HOME="$ompi5")
  fi
  command -v ompi_info > /dev/null || { log "ompi_info missing: the apps bundle carries this machine's Open MPI"; exit 2; }
  apps=$here/build-gpu-apps${ompi5:+-ompi5}
  app_targets=(reprise-stencil reprise-cholesky reprise-mpi-comm-check reprise-bench-overhead-mpi reprise-bench-logging
    reprise-bench-commit reprise_kokkos_tests reprise-demo heat3d-plain reprise-heat3d)
  log "configure $apps (Kokkos $kokkos, its nvcc_wrapper, $(ompi_info --version 2> /dev/null | head -n 1))"
  export PATH=/usr/local/cuda/bin:$PATH  # (nvcc_wrapper calls nvcc)
  logged "$apps.configure.log" configure cmake -S "$here" -B "$apps" -DCMAKE_BUILD_TYPE=Release \
    -DREPRISE_ENABLE_CUDA=ON -DREPRISE_CUDA_ARCHITECTURES="$archs" -DKokkos_ROOT="$kokkos" \
    -DCMAKE_CXX_COMPILER="$kokkos/bin/nvcc_wrapper" -DREPRISE_ENABLE_MPI=ON -DREPRISE_ENABLE_KOKKOS=ON -DREPRISE_WERROR=OFF \
    "${mpi_args[@]}"
  log "build ${app_targets[*]} (nvcc_wrapper compiles every file: 15-20 min on 2 cores)"
  logged "$apps.build.log" build cmake --build "$apps" -j "$(nproc)" --target "${app_targets[@]}"
fi

rm -rf "$dir/bin" "$dir/lib" "$dir/mpi" "$dir/pmix" "$dir/payload.tgz"
mkdir -p "$dir/bin" "$dir/lib"
copy_programs "$build" "${targets[@]}"
cp -P "$build"/src/libreprise.so* "$dir/lib/"
if [ -n "$kokkos" ]; then
  # The apps' build has its own libreprise (compiled by nvcc_wrapper, with MPI): in DIR/lib/apps, which run.sh
  # puts first on LD_LIBRARY_PATH for them.
  mkdir -p "$dir/lib/apps"
  copy_programs "$apps" "${app_targets[@]}"
  cp -P "$apps"/src/libreprise*.so* "$dir/lib/apps/"
  if [ -n "$ompi5" ]; then
    # Open MPI 5 (its PMIx and PRRTE inside) as installed, without headers, manuals and libtool files; run.sh puts
    # it back at its own prefix with a symbolic link (it is not relocatable by environment alone).
    log "bundle $(ompi_info --version 2> /dev/null | head -n 1) with ULFM from $ompi5"
    mkdir -p "$dir/mpi"
    (cd "$ompi5" && tar cf - --exclude=./include --exclude=./share/man --exclude=./share/doc --exclude="*.la" \
      --exclude=./lib/pkgconfig --exclude="./bin/mpi*cc" --exclude="./bin/mpic++" --exclude="./bin/mpiCC" .) |
      tar xf - -C "$dir/mpi"
    cp "$here/scripts/mpirun-watch.sh" "$dir/mpi/"
  else
    # Open MPI relocated: OPAL_PREFIX=DIR/mpi finds the components and help files at their paths under the prefix;
    # its PMIx (Debian: a separate prefix) with PMIX_INSTALL_PREFIX=DIR/pmix. Components that need network
    # libraries a single machine does not use (UCX, libfabric, verbs, PSM) stay behind.
    path_of() { ompi_info --path all --parsable | awk -F: -v k="$1" '$1 == "path" && $2 == k {print $3; exit}'; }
    prefix=$(path_of prefix) pkglib=$(path_of pkglibdir) pkgdata=$(path_of pkgdatadir)
    log "bundle $(ompi_info --version 2> /dev/null | head -n 1) from $prefix"
    mkdir -p "$dir/mpi/bin" "$dir/mpi${pkglib#"$prefix"}" "$dir/mpi${pkgdata#"$prefix"}"
    cp -L "$(command -v orterun)" "$dir/mpi/bin/mpirun"
    cp -L "$(command -v orted)" "$dir/mpi/bin/orted"
    cp -r "$pkgdata"/. "$dir/mpi${pkgdata#"$prefix"}/"
    skip='libuc[mpst]|libpsm|libfabric|libibverbs|librdmacm|libinfinipath|libefa|libnl-|liboshmem'
    for c in "$pkglib"/*.so; do
      ldd "$c" 2> /dev/null | grep -qE "$skip" || cp "$c" "$dir/mpi${pkglib#"$prefix"}/"
    done
    pmix_lib=$(ldd "$pkglib"/mca_pmix_ext*.so 2> /dev/null | awk '/libpmix/ {print $3; exit}')
    if [ -n "$pmix_lib" ]; then
      pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
      [ -d "$pmix_prefix/lib/pmix" ] && mkdir -p "$dir/pmix/lib" && cp -r "$pmix_prefix/lib/pmix" "$dir/pmix/lib/"
      [ -d "$pmix_prefix/share" ] && cp -r "$pmix_prefix/share" "$dir/pmix/"
    fi
  fi
fi
# Every shared library the programs load, except glibc's own and CUDA's (the GPU machine's CUDA provides those):
# hwloc, udev, OpenBLAS/LAPACKE and their Fortran runtime, and GCC 12's libstdc++ (newer than some machines').
for f in "$dir"/bin/* "$dir"/lib/libreprise.so.* $(find "$dir/lib/apps" "$dir/mpi" "$dir/pmix" -type f \
  \( -name "*.so*" -o -perm -u+x \) 2> /dev/null); do ldd "$f"; done 2> /dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
  while read -r so; do
    case "$so" in
      "$dir"/*|*/libc.so.*|*/libm.so.*|*/libpthread.so.*|*/libdl.so.*|*/librt.so.*|*/ld-linux*) ;;
      /usr/local/cuda*|*/libcu*|*/libnv*|*/libnccl*) ;;
      "${ompi5:-/nonexistent}"/*) ;;  # (carried in DIR/mpi)
      *) cp -L "$so" "$dir/lib/" ;;
    esac
  done
cp "$here/scripts/gpu-run.sh" "$dir/run.sh"
git -C "$here" rev-parse --short HEAD > "$dir/COMMIT" 2> /dev/null || echo unknown > "$dir/COMMIT"
git -C "$here" diff --quiet 2> /dev/null || echo "(with uncommitted changes)" >> "$dir/COMMIT"
echo "$archs" > "$dir/ARCHS"
# One compressed payload (run.sh unpacks it where it runs): the device tool carries 64 MiB at most, and the
# libraries, OpenBLAS above all, compress to a third.
programs=$(ls "$dir/bin" | wc -l) libraries=$(find "$dir/lib" -name "*.so*" | wc -l) unpacked=$(du -sm "$dir" | cut -f1)
rm -f "$dir/payload.tgz"
tar czf "$dir/payload.tgz" -C "$dir" $(cd "$dir" && ls -d bin lib mpi pmix 2> /dev/null)
rm -rf "$dir/bin" "$dir/lib" "$dir/mpi" "$dir/pmix"
size=$(du -sm "$dir" | cut -f1)
log "bundle in $dir: $programs programs, $libraries libraries, ${unpacked} MiB unpacked, ${size} MiB as carried"
[ "$size" -le 64 ] || log "warning: over the 64 MiB a device call carries"
log "on the GPU machine: bash $(basename "$dir")/run.sh   (with the device tool: run(command=\"bash .device/run.sh\", carry=[\".device\"]))"
