#!/usr/bin/env bash
# watch_prterun_abort.sh: scripts/mpirun-watch.sh given an mpirun that aborts on an assertion of its own (as
# Open MPI 5.0.7's prterun once did in CI after the ranks had exited): exit 125 and a line that says so, not 134 as
# if a rank had aborted. A stand-in mpirun (no MPI needed) prints prterun's message and raises SIGABRT.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat > "$d/mpirun" <<'SH'
#!/usr/bin/env bash
echo "reprise-stencil: unrecoverable failure of ranks 0 and 2" >&2
echo "prterun: pthread_mutex_lock.c:450: __pthread_mutex_lock_full: Assertion \`e != ESRCH || !robust' failed." >&2
kill -ABRT $$
SH
chmod +x "$d/mpirun"
PATH="$d:$PATH" bash "$root/scripts/mpirun-watch.sh" -n 2 true > "$d/out" 2>&1
rc=$?
cat "$d/out"
[ "$rc" = 125 ] || { echo "watch_prterun_abort: exit $rc, expected 125"; exit 1; }
grep -q "aborted on an assertion of its own" "$d/out" || { echo "watch_prterun_abort: not said"; exit 1; }
echo "watch_prterun_abort: ok"
