#!/usr/bin/env bash
# A Debian trixie chroot with Open MPI 5.0.7, whose ULFM works (Debian 12's MPIs have none that works). Never
# installs trixie packages on the host.
#
#   scripts/ulfm-sandbox.sh create           create it once (reused when present; ~1-2 min, ~1.2 GB)
#   scripts/ulfm-sandbox.sh run CMD [ARG...] run CMD inside, in the source tree (bind-mounted at /src)
#   scripts/ulfm-sandbox.sh path             print the sandbox directory
#   scripts/ulfm-sandbox.sh destroy          delete it (refuses while anything is mounted under it)
#
# REPRISE_SANDBOX picks the directory (default /var/tmp/reprise-ulfm-trixie). Needs root.
# Every `run` mounts /proc, /sys, /dev, the source tree and /usr/local/cuda (when present) in a private mount
# namespace of its own (unshare -m): the mounts vanish with the command on every exit path, are never visible
# on the host, and two runs at once do not disturb each other.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
R=${REPRISE_SANDBOX:-/var/tmp/reprise-ulfm-trixie}
STAMP="$R/.reprise-sandbox-v1"
PACKAGES="openmpi-bin libopenmpi-dev g++ cmake make pkg-config libgtest-dev libhwloc-dev libxxhash-dev
  nlohmann-json3-dev libcli11-dev libtrilinos-kokkos-dev libopenblas-dev liblapacke-dev ca-certificates
  python3-minimal"

log() { echo "[ulfm-sandbox] $*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || { log "needs root (debootstrap, chroot, mounts)"; exit 2; }; }

create() {
  need_root
  if [ -f "$STAMP" ]; then
    # A sandbox made by an older version of this script may lack packages added since: install them.
    if [ "$(cat "$R/.reprise-packages" 2>/dev/null)" != "$(echo $PACKAGES)" ]; then
      log "installing packages added to the sandbox since it was created"
      in_namespace "$R" bash -c "apt-get -o DPkg::Lock::Timeout=600 update -q > /dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
          $(echo $PACKAGES) > /tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }; apt-get clean"
      echo $PACKAGES > "$R/.reprise-packages"
    fi
    log "present: $R"
    return 0
  fi
  local t0; t0=$(date +%s)
  if ! command -v debootstrap > /dev/null; then
    log "installing debootstrap on the host"
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends debootstrap > /dev/null \
      || { apt-get -o DPkg::Lock::Timeout=600 update -q > /dev/null;
           apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends debootstrap > /dev/null; }
  fi
  mkdir -p "$(dirname "$R")"
  local tmp="$R.partial"
  if findmnt -rn -o TARGET | grep -q "^$tmp"; then log "something is mounted under $tmp: not touching it"; exit 1; fi
  rm -rf "$tmp"
  log "debootstrap trixie into $tmp"
  debootstrap --variant=minbase trixie "$tmp" http://deb.debian.org/debian > "$tmp.log" 2>&1 \
    || { tail -20 "$tmp.log" >&2; log "debootstrap failed (log above)"; exit 1; }
  cp -L /etc/resolv.conf "$tmp/etc/resolv.conf"
  mkdir -p "$tmp/src" "$tmp/usr/local/cuda"
  log "installing Open MPI 5 and the build dependencies inside"
  in_namespace "$tmp" bash -c "apt-get -o DPkg::Lock::Timeout=600 update -q > /dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
      $(echo $PACKAGES) > /tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }; apt-get clean"
  echo $PACKAGES > "$tmp/.reprise-packages"
  touch "$tmp/.reprise-sandbox-v1"
  mv "$tmp" "$R"
  rm -f "$tmp.log"
  log "created $R in $(( $(date +%s) - t0 )) s ($(du -sxh "$R" | cut -f1)); $(chroot "$R" mpirun --version | head -n 1)"
}

# in_namespace ROOT CMD...: CMD chrooted in ROOT with /proc /sys /dev, a fresh /tmp (and /src, /usr/local/cuda)
# mounted in a private mount namespace.
in_namespace() {
  local root=$1; shift
  unshare --mount --propagation private -- bash -s "$root" "$here" "$@" <<'INNER'
set -e
root=$1; src=$2; shift 2
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# A /tmp of its own for every command: Open MPI's session directories (/tmp/prterun.HOST.PID.0) of a killed
# prterun would otherwise stay, and a later prterun that gets the same pid fails in prte_init ("Exists").
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
if [ -d "$root/src" ]; then mount --bind "$src" "$root/src"; fi
if [ -d /usr/local/cuda ] && [ -d "$root/usr/local/cuda" ]; then mount --bind -o ro /usr/local/cuda "$root/usr/local/cuda" 2>/dev/null || mount --bind /usr/local/cuda "$root/usr/local/cuda"; fi
exec chroot "$root" /usr/bin/env -C /src "$@"
INNER
}

case "${1:-}" in
  create) create ;;
  run)
    shift
    [ $# -gt 0 ] || { log "usage: $0 run CMD [ARG...]"; exit 2; }
    need_root
    create
    in_namespace "$R" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@"
    ;;
  path) echo "$R" ;;
  destroy)
    need_root
    if findmnt -rn -o TARGET | grep -q "^$R"; then log "something is mounted under $R: refusing to delete"; exit 1; fi
    rm -rf "$R" "$R.partial"
    log "removed $R"
    ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
