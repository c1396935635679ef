#!/usr/bin/env bash
# same_output.sh RANKS PLAIN WRAPPED [ARG...]: runs both programs through scripts/mpirun.sh with the same arguments
# and compares their results (the lines named in results(): interpose-check's digests and heat3d's checksum; a new
# digest of interpose-check needs its name there); both must end well.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
ranks=$1 plain=$2 wrapped=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bash "$here/scripts/mpirun.sh" -n "$ranks" --timeout 120 -- "$plain" "$@" > "$out/plain" 2> "$out/plain.err"
rc_plain=$?
bash "$here/scripts/mpirun.sh" -n "$ranks" --timeout 120 -- "$wrapped" "$@" > "$out/wrapped" 2> "$out/wrapped.err"
rc_wrapped=$?
echo "--- $plain (exit $rc_plain)"; cat "$out/plain"
echo "--- $wrapped (exit $rc_wrapped)"; cat "$out/wrapped"
if [ "$rc_plain" != 0 ] || [ "$rc_wrapped" != 0 ]; then
  echo "--- stderr"; tail -n 20 "$out/plain.err" "$out/wrapped.err"
  echo "FAIL: a run did not end well"; exit 1
fi
# (NULs removed: the launcher sometimes writes one into the output, even at the start of a line)
results() {
  tr -d '\000' < "$1" |
    grep -E '^(checksum|output|file io|ranks |thread level|send|isend|sendrecv|derived|allreduce|bcast|scan|probes|matched|persistent|nonblocking|communicators|groups|neighbors|topologies|attributes|packed|buffered|alltoallw|error handlers|intercommunicators|any tag|any source|synchronous send|types freed|derived collectives)|^interpose-check done'
}
if ! diff <(results "$out/plain") <(results "$out/wrapped"); then
  echo "FAIL: the wrapped program's results differ from the plain one's"; exit 1
fi
[ -n "$(results "$out/plain")" ] || { echo "FAIL: no results printed"; exit 1; }
uncompared=$(tr -d '\000' < "$out/plain" | grep -E ' 0x[0-9a-f]{16}$' | grep -vxF -f <(results "$out/plain"))
[ -z "$uncompared" ] || { echo "FAIL: digests not compared (name them in results()): $uncompared"; exit 1; }
if tr -d '\000' < "$out/wrapped" | grep -q '^wrapped:' &&
   ! tr -d '\000' < "$out/wrapped" | grep -Eq '^wrapped: [1-9][0-9]* messages'; then
  echo "FAIL: no message went through reprise::Comm"; exit 1
fi
echo "same results: $(results "$out/plain" | wc -l) lines"
