#!/usr/bin/env bash
# expect.sh [--rc N] [--match REGEX]... [--twice REGEX]... [--absent REGEX]... [--record-checksum FILE]
#           [--same-checksum FILE] -- COMMAND ARGS...
# Runs COMMAND, prints its output, and fails unless its exit status matches N (default 0; a glob such as '[1-9]*'
# is allowed, and alternatives separated by '|' such as '3|125'), every --match REGEX occurs
# in the output, every --twice REGEX on two lines at least, and no --absent REGEX does. ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit status.
# --record-checksum writes the output's "checksum 0x..." to FILE; --same-checksum requires the one in FILE (a
# result that depends on the machine, e.g. on the BLAS kernels OpenBLAS picks for this CPU, compared between a
# failure-free run and runs with failures on the same machine).
# A process that crashed (SIGSEGV, SIGBUS, SIGABRT, SIGFPE: the MPI library prints "Caught signal N") always fails:
# mpirun --with-ft ulfm tolerates dead processes, so one that crashed after printing its result can exit 0. So does
# a REPRISE_KILL order that never fired (a test of a failure that injected none).
set -u
rc_expected=0
matches=()
twice=()
absents=()
record=
same=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --rc) rc_expected=$2; shift 2 ;;
    --match) matches+=("$2"); shift 2 ;;
    --twice) twice+=("$2"); shift 2 ;;
    --absent) absents+=("$2"); shift 2 ;;
    --record-checksum) record=$2; shift 2 ;;
    --same-checksum) same=$2; shift 2 ;;
    *) echo "expect.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" > "$out" 2>&1
rc=$?
cat -v "$out"
status=0
# shellcheck disable=SC2053
rc_ok=0
IFS='|' read -ra alternatives <<< "$rc_expected"
for a in "${alternatives[@]}"; do
  if [[ "$rc" == $a ]]; then rc_ok=1; fi
done
if [ $rc_ok -eq 0 ]; then echo "expect.sh: exit status $rc, expected $rc_expected"; status=1; fi
for m in "${matches[@]+"${matches[@]}"}"; do
  grep -aEq -- "$m" "$out" || { echo "expect.sh: missing in the output: $m"; status=1; }
done
for m in "${twice[@]+"${twice[@]}"}"; do
  [ "$(grep -acE -- "$m" "$out")" -ge 2 ] || { echo "expect.sh: not on two lines of the output: $m"; status=1; }
done
absents+=("Caught signal (4|6|7|8|11) |Segmentation fault \(core dumped\)")
# A REPRISE_KILL order that never fired (the runtime names it at the end): the run tested no failure there.
absents+=("warning: REPRISE_KILL order [^ ]+ never fired")
for m in "${absents[@]+"${absents[@]}"}"; do
  if grep -aEq -- "$m" "$out"; then echo "expect.sh: unexpected in the output: $m"; status=1; fi
done
checksum=$(grep -aoE 'checksum 0x[0-9a-f]{16}' "$out" | tail -n 1)
if [ -n "$record" ]; then
  if [ -n "$checksum" ] && [ $status -eq 0 ]; then echo "$checksum" > "$record"; echo "expect.sh: recorded $checksum"
  else echo "expect.sh: no checksum to record"; rm -f "$record"; status=1; fi
fi
if [ -n "$same" ]; then
  if [ ! -s "$same" ]; then echo "expect.sh: no reference checksum in $same (its failure-free run failed)"; status=1
  elif [ "$checksum" != "$(cat "$same")" ]; then
    echo "expect.sh: '$checksum' differs from the failure-free run's '$(cat "$same")'"; status=1
  fi
fi
[ $status -eq 0 ] && echo "expect.sh: ok"
exit $status
