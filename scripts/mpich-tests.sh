#!/usr/bin/env bash
# Runs MPICH's MPI test suite through the interposition: each test of the chosen directories of test/mpi is built
# as an ordinary MPI program linked with libreprise_interpose.so (no Reprise lines in it) and run with the ranks its
# testlist names, through scripts/mpirun.sh (one rank: with REPRISE_DIR, as a job on one node needs). A test passes
# when it exits 0 and prints "No Errors".
#
#   scripts/mpich-tests.sh MPICH_SOURCE [DIR...] [-- FILTER]    default DIRs: pt2pt coll comm group topo datatype
#
# MPICH_SOURCE: an MPICH source tree (its test/mpi; e.g. `apt-get source mpich`, or a checkout): the project
# downloads nothing. Results: one line per test (ok; "refused" when the job stopped with the interposition's message
# naming a call or a use it does not serve, and why; FAIL rc=N otherwise: a wrong result, a crash or a hang), the
# logs in build-mpich-tests/logs, and a summary; the exit status is 1 when a test failed. Tests whose testlist entry
# names an MPICH variable (env=), an expected failure (xfail=) or a memory size (mem=) are left out; so are those
# that need MPICH's datatype pools (dtpools) or its MPIX calls (they do not build here: listed as "not built").
# Uses the tree scripts/mpirun.sh runs (REPRISE_BUILD_DIR, default build), built first.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/mpich-tests.sh MPICH_SOURCE [DIR...] [-- FILTER]" >&2; exit 2; }
suite=$1/test/mpi
shift
[ -f "$suite/util/mtest.c" ] || { echo "mpich-tests: no MPICH test suite in $suite (util/mtest.c)" >&2; exit 2; }
dirs=() filter=.
while [ $# -gt 0 ]; do
  [ "$1" = -- ] && { filter=${2:-.}; break; }
  dirs+=("$1"); shift
done
[ ${#dirs[@]} -gt 0 ] || dirs=(pt2pt coll comm group topo datatype)
log() { echo "[mpich-tests] $*"; }
tree=$(bash "$here/scripts/mpirun.sh" --tree | head -n 1 | cut -d" " -f1)
lib=$tree/src/libreprise_interpose.so
mpicc=$(bash "$here/scripts/openmpi.sh" 2> /dev/null | tail -n 1)/bin/mpicc
[ -x "$mpicc" ] || mpicc=$(command -v mpicc)
log "suite $suite, programs linked with $lib, compiled with $mpicc"
[ -f "$lib" ] || cmake --build "$tree" --target reprise_interpose -j "$(nproc)" > /dev/null
out=$here/build-mpich-tests
mkdir -p "$out/obj" "$out/bin" "$out/logs" "$out/include"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# What MPICH's configure would find on Debian 12 with an MPI-4 library (strict MPI: no MPIX tests).
cat > "$out/include/mpitestconf.h" << 'EOF'
#define HAVE_STDARG_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDINT_H 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE_MPI_IO 1
#define USE_STRICT_MPI 1
#define HAVE_PTHREAD_H 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
#define POINTERINT_t long
#define HAVE_GETRUSAGE 1
EOF
[ -f "$suite/include/mtest_mpix.h" ] || : > "$out/include/mtest_mpix.h"  # (generated inside MPICH's own build)
cflags=(-O1 -w -I"$out/include" -I"$suite/include")
for u in mtest mtest_common mtest_thread; do
  [ "$out/obj/$u.o" -nt "$suite/util/$u.c" ] || "$mpicc" "${cflags[@]}" -c -o "$out/obj/$u.o" "$suite/util/$u.c" || exit 1
done
ok=0 failed=0 refused=0 unbuilt=0 skipped=0
failures=()
for d in "${dirs[@]}"; do
  mkdir -p "$out/bin/$d" "$out/logs/$d"
  while read -r name np rest; do
    exe=$out/bin/$d/$name
    if [ ! -x "$exe" ] && [ ! -f "$exe.unbuilt" ]; then
      "$mpicc" "${cflags[@]}" -o "$exe" "$suite/$d/$name.c" "$out"/obj/*.o -Wl,--no-as-needed "$lib" -Wl,-rpath,"$(dirname "$lib")" \
        -lpthread -lm > "$out/logs/$d/$name.build" 2>&1 || : > "$exe.unbuilt"
    fi
    if [ -f "$exe.unbuilt" ]; then
      unbuilt=$((unbuilt + 1)); echo "not built $d/$name (build-mpich-tests/logs/$d/$name.build)"; continue
    fi
    args=$(tr ' ' '\n' <<< "$rest" | sed -n 's/^arg=//p' | tr '\n' ' ')
    logf=$out/logs/$d/$name-$np$(tr -c 'a-zA-Z0-9=\n' _ <<< "${args:+-$args}").log
    files=""
    [ "$np" = 1 ] && files=$(mktemp -d)  # (one rank: no buddy, checkpoints in files only)
    # shellcheck disable=SC2086
    REPRISE_DIR=$files REPRISE_RANKS_PER_NODE=${REPRISE_RANKS_PER_NODE:-1} timeout 150 \
      bash "$here/scripts/mpirun.sh" -n "$np" --timeout 120 -- "$exe" $args > "$logf" 2>&1
    rc=$?
    [ -n "$files" ] && rm -rf "$files"
    if [ $rc = 0 ] && grep -aqi "No Errors" "$logf"; then
      ok=$((ok + 1)); echo "ok        $d/$name $np $args"
    elif [ $rc = 0 ] && grep -aq "Test Skipped" "$logf"; then  # (the test's own choice: e.g. a strict MPI build)
      skipped=$((skipped + 1)); echo "skipped   $d/$name $np $args"
    elif grep -aq "The job stops here (MPI_Abort)" "$logf"; then  # (a call refused, with the reason: by design)
      refused=$((refused + 1))
      echo "refused   $d/$name $np $args: $(grep -a "The job stops here" "$logf" | head -n 1 | sed 's/^ *reprise: rank [0-9]*: //' | cut -c1-150)"
    else
      failed=$((failed + 1)); failures+=("$d/$name $np $args"); echo "FAIL rc=$rc $d/$name $np $args ($logf)"
    fi
  done < <(grep -hv '^#' "$suite/$d"/testlist* 2> /dev/null | awk 'NF >= 2' | grep -v 'env=\|xfail=\|mem=' |
           grep -E "$filter" | awk '!seen[$0]++')
done
echo "mpich-tests: $ok passed, $refused refused (a call or use the interposition does not serve, said), $failed failed," \
  "$skipped skipped by the test, $unbuilt not built"
for f in "${failures[@]}"; do echo "  failed: $f"; done
[ "$failed" = 0 ]
