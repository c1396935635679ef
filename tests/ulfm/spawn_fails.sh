#!/usr/bin/env bash
# spawn_fails.sh: the MPI cannot start a replacement. The stencil runs from a copy of its binary, which is deleted
# once the job runs (as a rebuild or a clean-up would do); then a rank is SIGKILLed. Every spawn of a replacement
# fails: the survivors must stop after a few attempts with an error that says so, not try again until the recovery
# timeout (before: about 11,500 attempts per survivor in 20 s).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
dir=build-test-files/spawn-fails-$$
out=$(mktemp)
mkdir -p "$dir"
trap 'rm -rf "$root/$dir"; [ -n "${KEEP_OUT:-}" ] || rm -f "$out"' EXIT
# The stencil as built for the MPI that scripts/mpirun.sh uses (--help: built, nothing run).
bash scripts/mpirun.sh -n 1 --timeout 600 -- reprise-stencil --help > /dev/null || { echo "spawn_fails: build failed"; exit 1; }
tree=$(bash scripts/mpirun.sh --tree | cut -d" " -f1)
cp "$tree/apps/reprise-stencil" "$dir/stencil"
REPRISE_RANKS_PER_NODE=2 REPRISE_RECOVERY_TIMEOUT_S=150 bash scripts/mpirun.sh -n 4 --timeout 240 -- \
  "$root/$dir/stencil" --nx 256 --ny 256 --steps 100000000 --checkpoint-every 100 --progress-every 100 > "$out" 2>&1 &
job=$!
descendants() { local c; for c in $(cat /proc/"$1"/task/*/children 2> /dev/null); do echo "$c"; descendants "$c"; done; }
for _ in $(seq 600); do grep -q "^step " "$out" && break; kill -0 "$job" 2> /dev/null || break; sleep 0.2; done
grep -q "^step " "$out" || { cat "$out"; echo "spawn_fails: the job printed no progress"; exit 1; }
rm -f "$dir/stencil"
victim=""
for p in $(descendants "$job"); do [ "$(cat /proc/"$p"/comm 2> /dev/null)" = stencil ] && { victim=$p; break; }; done
[ -n "$victim" ] || { cat "$out"; echo "spawn_fails: no rank process found"; exit 1; }
echo "spawn_fails: binary deleted; SIGKILL to rank process $victim"
kill -9 "$victim"
wait "$job"
rc=$?
grep -v "^step " "$out" | cut -c1-400
attempts=$(grep -o "recovering (attempt" "$out" | wc -l)  # (lines of several ranks may run together)
echo "spawn_fails: exit status $rc, $attempts 'recovering' lines"
fail=0
# The ranks exit 3; mpirun's own status is what the job returns (183 with Open MPI 5.0.7 after a failed launch; 125
# when scripts/mpirun.sh had to kill a prterun that hung). Not 0, and not 4 (the recovery timeout).
[ "$rc" != 0 ] && [ "$rc" != 4 ] || { echo "spawn_fails: exit status $rc, expected a failure other than 4"; fail=1; }
grep -q "the MPI could not start a working replacement for rank [0-3]: 3 attempts in a row failed .*(the last: MPI_Comm_spawn failed" "$out" ||
  { echo "spawn_fails: missing the error that says no replacement could be started"; fail=1; }
[ "$attempts" -le 9 ] || { echo "spawn_fails: $attempts recovery attempts (3 ranks x 3 at most)"; fail=1; }
exit $fail
