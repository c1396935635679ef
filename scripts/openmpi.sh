#!/usr/bin/env bash
# Open MPI 5.0.7 with ULFM (and CUDA when /usr/local/cuda exists), built on this Debian 12 host from Debian's
# source package of the trixie release. Only a deb-src line is added (a sources file of its own): no trixie binary
# package is ever installed on the host.
#
#   scripts/openmpi.sh          build it once (about 20-25 min on 2 cores) or find it; prints the prefix last
#   scripts/openmpi.sh prefix   print the prefix if it is built (exit 1 if not), build nothing
#
# REPRISE_OPENMPI_PREFIX picks the install prefix (default /opt/reprise/openmpi-5.0.7); the sources and the build
# go to REPRISE_OPENMPI_SRC (default /var/tmp/reprise-openmpi-src). Idempotent: a prefix whose stamp matches this
# script's configuration and patches is reused as it is. Needs root (apt-get) unless the prefix is already built.
#
# scripts/openmpi-patches/*.patch are applied to the sources (fixes of Open MPI bugs that Reprise's tests hit; each
# says why). A change of the patches alone recompiles only what they touch where the configured build is still
# there (the sources are unpacked again with the tarball's times).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=5.0.7
prefix=${REPRISE_OPENMPI_PREFIX:-/opt/reprise/openmpi-$VERSION}
src=${REPRISE_OPENMPI_SRC:-/var/tmp/reprise-openmpi-src}
log() { echo "[openmpi] $*" >&2; }

cuda_args=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  # The CUDA accelerator component: libcuda.so.1 is loaded at run time (the stubs only satisfy the link), so the
  # same build runs where there is no GPU (the component then says it cannot load libcuda and steps aside).
  cuda_args=(--with-cuda=/usr/local/cuda --with-cuda-libdir=/usr/local/cuda/lib64/stubs)
fi
configure_args=(--prefix="$prefix" --with-ft=ulfm --disable-mpi-fortran --with-pmix=internal --with-prrte=internal
  --with-hwloc=external --with-libevent=external --enable-mca-no-build=btl-uct,pml-ucx,osc-ucx
  "${cuda_args[@]}")
stamp="$prefix/.reprise-openmpi"
patches=("$here"/openmpi-patches/*.patch)
patch_sum=$(cat "${patches[@]}" | sha256sum | cut -c1-16)
want="$VERSION ${configure_args[*]} patches=$patch_sum"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$prefix/bin/mpirun" ]; then
  [ "${1:-}" = prefix ] || log "present: $prefix ($("$prefix/bin/ompi_info" --version 2> /dev/null | head -n 1))"
  echo "$prefix"
  exit 0
fi
if [ "${1:-}" = prefix ]; then exit 1; fi
[ "$(id -u)" -eq 0 ] || { log "not built yet, and building it needs root (apt-get, $prefix)"; exit 2; }

t0=$(date +%s)
# Build dependencies from Debian 12 (hwloc and libevent are the host's; PMIx and PRRTE come in the tarball).
need=(build-essential dpkg-dev patch libevent-dev libhwloc-dev zlib1g-dev flex perl python3)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -q > /dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
    "${missing[@]}" > /dev/null
fi

tree="$src/openmpi-$VERSION"
mkdir -p "$src"  # (find fails on a missing folder, and pipefail would end the script here without a word)
orig=$(find "$src" -maxdepth 1 -name "openmpi_$VERSION.orig.tar.*" | head -n 1)
if [ -z "$orig" ]; then
  list=/etc/apt/sources.list.d/reprise-trixie-src.list
  if [ ! -f "$list" ]; then
    log "adding $list (deb-src only: trixie's source packages, never its binaries)"
    echo "deb-src http://deb.debian.org/debian trixie main" > "$list"
  fi
  log "apt-get update (with the trixie source index)"
  apt-get -o DPkg::Lock::Timeout=600 update -q > /dev/null
  rm -rf "$src" && mkdir -p "$src"
  log "apt-get source --download-only openmpi/trixie (the $VERSION tarball, about 25 MB; PMIx and PRRTE inside)"
  (cd "$src" && apt-get source --download-only -q "openmpi/trixie" > "$src/source.log" 2>&1) ||
    { tail -n 20 "$src/source.log" >&2; log "apt-get source openmpi failed"; exit 1; }
  orig=$(find "$src" -maxdepth 1 -name "openmpi_$VERSION.orig.tar.*" | head -n 1)
  [ -n "$orig" ] || { cat "$src/source.log" >&2; log "no openmpi_$VERSION.orig.tar.* in $src"; exit 1; }
fi
if [ ! -f "$tree/configure" ] || [ "$(cat "$tree/.reprise-patches" 2> /dev/null)" != "$patch_sum" ]; then
  # The upstream tarball as Debian ships it (the orig tarball), without Debian's patches: those change
  # configure.ac and Makefile.am, which would need the autotools to regenerate the build system. Ours touch C
  # sources only.
  log "unpacking $(basename "$orig")"
  rm -rf "$tree"
  tar xf "$orig" -C "$src"
  [ -f "$tree/configure" ] || { log "no $tree/configure after unpacking $orig"; exit 1; }
  for p in "${patches[@]}"; do
    log "patch: $(basename "$p")"
    patch -d "$tree" -p1 --forward -s < "$p" || { log "$p does not apply to $tree"; exit 1; }
  done
  echo "$patch_sum" > "$tree/.reprise-patches"
fi

build="$src/build"
if [ -x "$build/config.status" ] && [ "$("$build/config.status" --config)" = "${configure_args[*]}" ]; then
  log "configured already with these arguments: $build (make recompiles what changed)"
else
  rm -rf "$build" && mkdir -p "$build"
  log "configure (about 3 min): ${configure_args[*]}"
  (cd "$build" && "$tree/configure" "${configure_args[@]}" > "$build/configure.log" 2>&1) ||
    { tail -n 30 "$build/configure.log" >&2; log "configure failed: $build/configure.log"; exit 1; }
fi
log "make -j $(nproc) (about 13 min on 2 cores from scratch)"
make -C "$build" -j "$(nproc)" > "$build/make.log" 2>&1 ||
  { tail -n 30 "$build/make.log" >&2; log "make failed: $build/make.log"; exit 1; }
rm -rf "$prefix"
make -C "$build" install > "$build/install.log" 2>&1 ||
  { tail -n 30 "$build/install.log" >&2; log "make install failed: $build/install.log"; exit 1; }
echo "$want" > "$stamp"
log "built in $(($(date +%s) - t0)) s: $prefix ($(du -sh "$prefix" | cut -f1)); $("$prefix/bin/ompi_info" --version | head -n 1)"
echo "$prefix"
