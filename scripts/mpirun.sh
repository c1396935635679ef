#!/usr/bin/env bash
# Runs a program with N ranks under an MPI whose ULFM works, with the flags that make failure handling reliable.
#
#   scripts/mpirun.sh -n N [--spares K] [--timeout S] -- PROGRAM [ARG...]
#   scripts/mpirun.sh --build PROGRAM...      only build the programs for the MPI that would run them: the tests'
#                                             fixture, so that no test pays for it within its own time limit
#   scripts/mpirun.sh --tree                  print the build tree whose programs it would run, and the MPI
#
# --spares K starts N + K processes with REPRISE_SPARES=K: the program sees N ranks, and K spare processes wait
# inside the Reprise runtime to take failed ranks' places (no MPI_Comm_spawn while one is left).
# PROGRAM is the name of a program this project builds (reprise-ulfm-probe, reprise-stencil, ...), built
# first if missing or stale in the build tree that matches the MPI used, or an absolute path.
# Which MPI, the first of:
#   built    Open MPI 5.0.7 with ULFM built on this host from Debian's source (scripts/openmpi.sh), when it has
#            been built; programs in the main tree (REPRISE_BUILD_DIR, default build) when it was configured
#            with -DMPI_HOME= that prefix (scripts/test.sh does it), else in build-openmpi
#   host     the host's mpirun, when a runtime probe (reprise-ulfm-probe: kill a rank, detect, shrink, respawn)
#            says its ULFM works; programs in build-host-mpi
# Neither: a message that says to run scripts/openmpi.sh, exit 2. REPRISE_MPI=built|host forces one. REPRISE_*
# variables (e.g. REPRISE_KILL) reach every rank.
# REPRISE_SANITIZE=address,undefined|thread: builds and runs the programs with those sanitizers, in a tree of their
# own (build-openmpi-sanitize-KIND; set ASAN_OPTIONS=detect_leaks=0: Open MPI does not
# free all it allocates).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
caller_path=$PATH
n=""; timeout_s=600; build_only=""; tree_only=""; main=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build_only=1; shift; break ;;
    --tree) tree_only=1; shift; break ;;
    -n|-np) n=$2; shift 2 ;;
    --spares) [[ "$2" =~ ^[0-9]+$ ]] || { echo "mpirun.sh: --spares takes a count, not '$2'" >&2; exit 2; }
              export REPRISE_SPARES=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: scripts/mpirun.sh -n N [--spares K] [--timeout S] -- PROGRAM [ARG...]" >&2; exit 2 ;;
  esac
done
if [ -n "$tree_only" ]; then
  program=""
elif [ -n "$build_only" ]; then
  [ $# -gt 0 ] || { echo "usage: scripts/mpirun.sh --build PROGRAM..." >&2; exit 2; }
  program=$1
else
  [ -n "$n" ] && [ $# -gt 0 ] || { echo "usage: scripts/mpirun.sh -n N [--spares K] [--timeout S] -- PROGRAM [ARG...]" >&2; exit 2; }
  program=$1; shift
  n=$((n + ${REPRISE_SPARES:-0}))  # the spares are processes of the job (REPRISE_SPARES also set by the caller)
fi

FLAGS=(--with-ft ulfm --oversubscribe --mca async_mpi_finalize true --mca btl self,sm,tcp --mca btl_tcp_if_include lo)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Every job of the launch recoverable, the spawned replacements' too: --with-ft ulfm makes only the first job so,
# and prterun then reports a replacement killed in turn as a failed launch (exit 137) although the job recovered
# and finished. (PRRTE's state_base_recoverable; a job that does not finish still fails: scripts/mpirun-watch.sh.)
export PRTE_MCA_state_base_recoverable=${PRTE_MCA_state_base_recoverable:-1}
# AddressSanitizer's shadow memory takes the address where PMIx's gds/shmem2 maps its segment in a spawned
# process: the replacement aborts in MPI_Init and the survivors wait in MPI_Comm_spawn forever.
[ -z "${REPRISE_SANITIZE:-}" ] || export PMIX_MCA_gds=${PMIX_MCA_gds:-hash}
passthrough=()
for v in $(compgen -e | grep '^REPRISE_' || true); do passthrough+=(-x "$v"); done

log() { echo "[mpirun.sh] $*" >&2; }

configure_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_ENABLE_MPI=ON -DREPRISE_BUILD_BENCH=ON)

# configure_and_build BUILD TARGET LOG [CMAKE_ARG...]: configures BUILD (log in BUILD/configure.log; not the main
# tree, built as it is: main_tree below) and builds TARGET (log in LOG) with the host's tools. Every launch does
# this, so one launch at a time per build tree holds a flock on BUILD.lock: two configures in one tree (jobs
# launched side by side, e.g. the demo beside tests) break each other's try_compile. The runs are not serialised.
configure_and_build() {
  local b=$1 target=$2 logf=$3
  shift 3
  mkdir -p "$b"
  # (with the caller's PATH, not the one the job runs with: a main tree that cmake --build configures again must
  # see what its own builds see, e.g. the host's mpirun that tests/mpi probes)
  (flock 9 &&
     { [ "$b" = "$main" ] || cmake -S "$here" -B "$b" "${configure_args[@]}" "$@" > "$b/configure.log" 2>&1; } &&
     PATH=$caller_path cmake --build "$b" -j "$(nproc)" --target "$target" > "$logf" 2>&1) 9> "$b.lock"
}

# main_tree PREFIX: the main build tree (REPRISE_BUILD_DIR, default build) when it found its MPI in PREFIX
# (-DMPI_HOME=PREFIX): its programs are built for that MPI, so the tests use them rather than building every
# program a second time in build-openmpi (8 of a CI run's minutes). It is built as it is, never reconfigured.
main_tree() {
  local b=${REPRISE_BUILD_DIR:-build}
  [[ "$b" == /* ]] || b=$here/$b
  grep -qxF "MPI_mpi_LIBRARY:FILEPATH=$1/lib/libmpi.so" "$b/CMakeCache.txt" 2> /dev/null && echo "$b"
}

# The probe configures build-host-mpi without tests (a host whose ULFM works need not have GoogleTest); the MPI
# check programs the tests run are built there all the same (CMakeLists.txt).
host_probe() {
  local b="$here/build-host-mpi" cache="$here/build-host-mpi/.ulfm-probe"
  if [ -f "$cache" ]; then cat "$cache"; return; fi
  if ! command -v mpirun > /dev/null ||
     ! configure_and_build "$b" reprise-ulfm-probe "$b/build.log" -DREPRISE_BUILD_TESTS=OFF; then
    echo no | tee "$cache"; return
  fi
  if timeout 120 mpirun "${FLAGS[@]}" -n 3 "$b/apps/reprise-ulfm-probe" 2>/dev/null | grep -q "ULFM works"; then
    echo yes | tee "$cache"
  else
    echo no | tee "$cache"
  fi
}

# A job still running near its timeout is most likely hung: just before the timeout kills it, print every rank's
# stacks (gdb, when installed), so that a hang in a test or a stress run says where each process waits. Ranks and
# replacements are the descendants of this script named
# like PROGRAM.
hang_stacks() {  # hang_stacks ROOT_PID NAME
  local root=$1 name=${2##*/} after=$((timeout_s >= 80 ? timeout_s - 40 : timeout_s * 90 / 100)) p procs=() state
  [ "$after" -ge 20 ] || return 0
  local end=$((SECONDS + after))
  while [ "$SECONDS" -lt "$end" ]; do  # (gone within a second of the job: it holds the job's stderr open)
    sleep 1
    # Ended: gone, or a zombie (a caller reading our output through pipes reaps the job only after their end,
    # which this watchdog would otherwise hold off until the timeout).
    state=$(sed 's/.*) //' /proc/"$root"/stat 2> /dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] || return 0
  done
  descendants() { local c; for c in $(cat /proc/"$1"/task/*/children 2> /dev/null); do echo "$c"; descendants "$c"; done; }
  for p in $(descendants "$root"); do
    [ "$(cat /proc/"$p"/comm 2> /dev/null)" = "${name:0:15}" ] && procs+=("$p")
  done
  log "still running after $after s of $timeout_s: the stacks of its ${#procs[@]} $name processes follow"
  # Only replacements left (processes of a spawned job, PMIX_NAMESPACE ...@2 and on), none of the job's own
  # (...@1): their spawn never completed (seen: both in PMIx_Init), and the survivors, whose recovery limit ended
  # them inside MPI_Comm_spawn, could not say so through a launcher that no longer forwards their output.
  local own=0 ns
  for p in "${procs[@]}"; do
    ns=$(tr '\0' '\n' < /proc/"$p"/environ 2> /dev/null | sed -n 's/^PMIX_NAMESPACE=//p')
    [[ "$ns" == *@1 ]] && own=$((own + 1))
  done
  if [ "${#procs[@]}" -gt 0 ] && [ "$own" -eq 0 ]; then
    log "only replacements spawned after a failure are left (${#procs[@]} processes), none of the job's own;" \
        "a spawn that never returns after failures is a known weakness of Open MPI 5.0.x's ULFM" \
        "(open-mpi/ompi#12585, open-mpi/ompi#13325): spare processes (REPRISE_SPARES) take failed ranks' places" \
        "without spawning"
  fi
  command -v gdb > /dev/null || { log "no gdb here: no stacks (scripts/setup.sh installs it)"; return 0; }
  for p in "${procs[@]}"; do
    log "--- pid $p ($(tr '\0' '\n' < /proc/"$p"/environ 2> /dev/null | grep -E '^OMPI_COMM_WORLD_RANK=|^PMIX_NAMESPACE=' |
      tr '\n' ' '))"
    timeout 60 gdb -p "$p" -batch -ex "set sysroot /proc/$p/root" -ex "thread apply all bt" 2>&1 |
      grep -E '^(Thread|#)|[Ee]rror|[Cc]annot|[Cc]ould not|[Cc]ouldn' >&2 || true  # (a stack gdb failed to read says why)
  done
}
# on_host BUILD CMAKE_ARG...: the programs built in BUILD (configured with those arguments) and run by the first
# mpirun on PATH (through scripts/mpirun-watch.sh: Open MPI 5.0.7's launcher faults); --build and --tree here too.
on_host() {
  local build=$1 p
  shift
  local cmake_args=("$@")
  if [ -n "$tree_only" ]; then echo "$build $mpi $(command -v mpirun)"; exit 0; fi
  build_one() {  # build_one PROGRAM: configured and built in BUILD, or the logs' tails and exit 1
    configure_and_build "$build" "$1" "$build/build-$1.log" "${cmake_args[@]}" \
      || { tail -n 30 "$build/configure.log" "$build/build-$1.log" 2> /dev/null || true; log "building $1 failed"; exit 1; }
  }
  if [ -n "$build_only" ]; then
    for p in "${rest[@]}"; do
      log "building $p ($mpi MPI: $(command -v mpirun))"
      build_one "$p"
    done
    log "built: ${rest[*]}"
    exit 0
  fi
  if [[ "$program" != /* ]]; then
    build_one "$program"
    # (where the project puts its programs: the main tree holds other trees, e.g. the sanitizers', further down)
    program=$(find "$build/apps" "$build/bench" "$build/tests/mpi" "$build/tests/interpose" -maxdepth 1 -type f \
                -perm -u+x -name "$program" 2> /dev/null | head -n 1)
  fi
  hang_stacks $$ "$program" > /dev/null &
  exec timeout --signal=KILL "$timeout_s" bash "$here/scripts/mpirun-watch.sh" "${FLAGS[@]}" "${passthrough[@]}" \
    -n "$n" "$program" "${rest[@]}"
}
rest=("$@")

mpi=${REPRISE_MPI:-}
built=$(bash "$here/scripts/openmpi.sh" prefix 2> /dev/null || true)
if [ -z "$mpi" ]; then
  if [ -n "$built" ]; then mpi=built
  elif [ -z "${REPRISE_SANITIZE:-}" ] && [ "$(host_probe)" = yes ]; then mpi=host
  else mpi=none; fi
fi

case "$mpi" in
  built)
    [ -n "$built" ] || { log "REPRISE_MPI=built, but Open MPI 5 has not been built here: run scripts/openmpi.sh"; exit 2; }
    export PATH="$built/bin:$PATH"
    # The collective components that crash after a revoke (han; cuda, which also needs a GPU) are left out. Where
    # no GPU is present, the components that need the CUDA driver stay closed (each would print that it cannot load
    # libcuda.so.1).
    FLAGS+=(--mca coll ^han,cuda)
    [ -e /dev/nvidiactl ] || FLAGS+=(--mca accelerator ^cuda --mca rcache ^gpusm,rgpusm)
    main=$(main_tree "$built" || true)
    build=${main:-$here/build-openmpi} sanitize=()
    if [ -n "${REPRISE_SANITIZE:-}" ]; then  # a tree of its own, built with these sanitizers
      build=$here/build-openmpi-sanitize-${REPRISE_SANITIZE//,/-} sanitize=(-DREPRISE_SANITIZE="$REPRISE_SANITIZE")
      if [[ "$REPRISE_SANITIZE" == *thread* ]]; then  # (Open MPI is not instrumented: its libraries suppressed)
        export TSAN_OPTIONS="suppressions=$here/tests/ulfm/tsan-openmpi.supp ${TSAN_OPTIONS:-}"
      fi
    fi
    on_host "$build" -DMPI_HOME="$built" -DREPRISE_BUILD_TESTS=OFF -DREPRISE_ENABLE_CUDA=OFF "${sanitize[@]}"
    ;;
  host)
    # (Forced with REPRISE_MPI=host: say so when that mpirun has no ULFM at all, rather than its usage error.)
    if [ -n "${REPRISE_MPI:-}" ] && ! mpirun --with-ft ulfm --version > /dev/null 2>&1; then
      log "REPRISE_MPI=host, but the host's mpirun ($(mpirun --version 2>&1 | head -n 1)) does not take" \
          "--with-ft ulfm: it has no ULFM. Unset REPRISE_MPI to use the Open MPI scripts/openmpi.sh builds"
      exit 2
    fi
    if [ -n "${REPRISE_SANITIZE:-}" ]; then
      log "REPRISE_SANITIZE builds sanitized programs with the built Open MPI only: unset REPRISE_MPI=host"
      exit 2
    fi
    on_host "$here/build-host-mpi"
    ;;
  none)
    log "no MPI here has a ULFM that works: scripts/openmpi.sh builds Open MPI 5.0.7 with ULFM from Debian's source" \
        "(about 11 minutes on 2 cores, once; scripts/test.sh and scripts/demo.sh run it), or put an Open MPI 5 with" \
        "ULFM first on PATH"
    exit 2
    ;;
  *) log "REPRISE_MPI=$mpi: use built or host"; exit 2 ;;
esac
