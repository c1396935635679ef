#!/usr/bin/env bash
# Installs Reprise's build and test dependencies from Debian 12 packages. Idempotent: packages already present
# are not reinstalled, and apt is not touched at all when nothing is missing. Prints what it does.
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libtrilinos-kokkos-dev
  libhwloc-dev libhwloc-plugins libopenblas-dev liblapacke-dev
  libxxhash-dev nlohmann-json3-dev libcli11-dev
  libmetis-dev  # `reprise groups`: groups from the communication pattern
  libopenmpi-dev openmpi-bin
  python3-matplotlib
  clang-format clang-tidy  # scripts/check-sources.sh (ctest: sources_formatted, clang_tidy_clean)
  gdb  # scripts/mpirun.sh prints a hung job's stacks
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[setup] all ${#PACKAGES[@]} Debian packages already installed"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "[setup] installing: ${missing[*]}"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}"
  echo "[setup] installed ${#missing[@]} package(s)"
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "[setup] CUDA found: $(/usr/local/cuda/bin/nvcc --version | tail -n 2 | head -n 1) (CUDA code will be compiled)"
else
  echo "[setup] no CUDA under /usr/local/cuda: building the host backend only"
fi
