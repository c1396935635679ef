#!/usr/bin/env bash
# Builds what a GPU machine needs to validate Reprise's device code, as one folder to carry there (the lent GPU
# machines have CUDA but no MPI, Kokkos, hwloc or OpenBLAS; docs/GPU.md):
#
#   scripts/gpu-bundle.sh [DIR] [ARCHS]     DIR default .device (git-ignored), ARCHS default 90
#
# DIR/bin: the GPU tests (CUDA kernels against their host twins, the data path on device memory, cuSOLVER/cuBLAS
# tiles against LAPACKE, the NCCL barrier) and the D2H benchmark; DIR/lib: libreprise and the libraries they need
# that are not glibc or CUDA's; DIR/run.sh runs them there (see its header). No MPI: the MPI programs need an MPI
# on the GPU machine. Prints what it does; the build tree is build-gpu-bundle.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$here/.device}
archs=${2:-90}
build=$here/build-gpu-bundle
log() { echo "[gpu-bundle] $*"; }

[ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null || { log "no nvcc: CUDA is needed to build the bundle"; exit 2; }
targets=(reprise_kernel_cuda_tests reprise_cuda_runtime_tests reprise_tile_kernel_cuda_tests reprise-bench-d2h)
log "configure $build (Release, CUDA architectures $archs, no MPI)"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DREPRISE_ENABLE_CUDA=ON -DREPRISE_CUDA_ARCHITECTURES="$archs" \
  -DREPRISE_ENABLE_MPI=OFF -DREPRISE_WERROR=OFF > "$build.configure.log" 2>&1 \
  || { tail -n 30 "$build.configure.log"; log "configure failed"; exit 1; }
if grep -q "Reprise: NCCL ON" "$build.configure.log"; then targets+=(reprise_nccl_barrier_tests); fi
log "build ${targets[*]} ($(nproc) jobs; a few minutes)"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" > "$build.build.log" 2>&1 \
  || { tail -n 30 "$build.build.log"; log "build failed"; exit 1; }

rm -rf "$dir/bin" "$dir/lib"
mkdir -p "$dir/bin" "$dir/lib"
for t in "${targets[@]}"; do cp "$(find "$build" -type f -perm -u+x -name "$t" | head -n 1)" "$dir/bin/"; done
cp -P "$build"/src/libreprise.so* "$dir/lib/"
# Every shared library the programs load, except glibc's own and CUDA's (the GPU machine's CUDA provides those):
# hwloc, udev, OpenBLAS/LAPACKE and their Fortran runtime, and GCC 12's libstdc++ (newer than some machines').
for f in "$dir"/bin/* "$dir"/lib/libreprise.so.*; do ldd "$f"; done 2> /dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
  while read -r so; do
    case "$so" in
      "$dir"/*|*/libc.so.*|*/libm.so.*|*/libpthread.so.*|*/libdl.so.*|*/librt.so.*|*/ld-linux*) ;;
      /usr/local/cuda*|*/libcu*|*/libnv*|*/libnccl*) ;;
      *) cp -L "$so" "$dir/lib/" ;;
    esac
  done
cp "$here/scripts/gpu-run.sh" "$dir/run.sh"
git -C "$here" rev-parse --short HEAD > "$dir/COMMIT" 2> /dev/null || echo unknown > "$dir/COMMIT"
git -C "$here" diff --quiet 2> /dev/null || echo "(with uncommitted changes)" >> "$dir/COMMIT"
echo "$archs" > "$dir/ARCHS"
size=$(du -sm "$dir" | cut -f1)
log "bundle in $dir: $(ls "$dir/bin" | wc -l) programs, $(ls "$dir/lib" | wc -l) libraries, ${size} MiB"
[ "$size" -le 64 ] || log "warning: over the 64 MiB a device call carries"
log "on the GPU machine: bash $(basename "$dir")/run.sh   (with the device tool: run(command=\"bash .device/run.sh\", carry=[\".device\"]))"
