#!/usr/bin/env bash
# Runs `mpirun ARG...` (Open MPI 5.0.7, the first mpirun on PATH) and works around two of its launcher's faults, so
# that a job's exit status is the ranks' own. Called by scripts/mpirun.sh:
#
#   scripts/mpirun-watch.sh ARG...
#
# - prterun sometimes deadlocks (a mutex in an event callback) after ranks exit abnormally, and waits forever
#   although every rank is gone (some left unreaped, as zombies); from then on it forwards no output, and the ranks
#   cannot spawn (a recovery then waits for its limit). When it has had no live child for 15 s
#   (REPRISE_WATCH_IDLE_S), its stacks, its zombies' exit status and what the ranks wrote that it never read
#   (scripts/unread_output.py) are printed, it is killed and this exits 125: the ranks' exit status is unknown.
# - prterun sometimes aborts on an assertion of its own after ranks die (glibc's "pthread_mutex_lock.c: ...
#   Assertion `e != ESRCH || !robust' failed": a robust mutex whose owner died; seen once in a fresh-clone CI, every
#   rank having printed its message and exited): this exits 125 as for the hang, the ranks' exit status unknown.
# - MPI_Abort does not end the other ranks when every job is recoverable (scripts/mpirun.sh): 5 s after the abort
#   banner this ends the job, with the abort's error code as its exit status.
# - With --with-ft ulfm it sometimes exits 0 after MPI_Abort (seen: 1 of 20 runs of a refused relaunch): its
#   stderr also goes to a file, and the abort banner says what the status must be.
# - With --with-ft ulfm it exits 0 when ranks die by a signal (every rank of a job killed by SIGABRT: exit 0).
#   Reprise's runtime appends "started RANK" and "finished RANK" to REPRISE_FINISH_RECORD (a file given to every
#   rank here): a rank that started and never finished (nor did a replacement of it) makes the exit status 1.
set -u
errs=$(mktemp)
record=$(mktemp)
fifo=$(mktemp -u)
mkfifo "$fifo"
tee "$errs" < "$fifo" >&2 &
tee_pid=$!
REPRISE_FINISH_RECORD=$record mpirun -x REPRISE_FINISH_RECORD "$@" 2> "$fifo" &
pid=$!
trap 'kill -9 $pid 2> /dev/null || true; rm -f "$errs" "$record" "$fifo"' EXIT
# hung_launcher PID: what can be learnt from a hung prterun before it is killed: its threads' stacks (where it
# waits), the exit status of the ranks it never reaped, and what the ranks wrote that it never read (a hung prterun
# no longer forwards output: the messages that say why a job ended would be lost with it).
hung_launcher() {
  local p=$1 c st
  if command -v gdb > /dev/null; then
    echo "[mpirun.sh] prterun's stacks:" >&2
    timeout 30 gdb -p "$p" -batch -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)' >&2 || true
  fi
  for c in $(cat /proc/"$p"/task/*/children 2> /dev/null); do
    st=$(sed -e "s/.*) //" /proc/"$c"/stat 2> /dev/null | awk '{print $1, $50}')  # state, exit code (waitpid's)
    [ "${st%% *}" = Z ] || continue
    st=${st##* }
    if [ $((st & 127)) = 0 ]; then echo "[mpirun.sh] process $c, never reaped, exited with status $((st >> 8))" >&2
    else echo "[mpirun.sh] process $c, never reaped, was killed by signal $((st & 127))" >&2; fi
  done
  echo "[mpirun.sh] what the ranks wrote and prterun never forwarded follows (stdout and stderr, unordered):" >&2
  python3 "$(dirname "$0")/unread_output.py" "$p" || true
  echo "[mpirun.sh] end of what prterun never forwarded" >&2
}
idle=0
idle_limit=${REPRISE_WATCH_IDLE_S:-15}
aborted=0
while kill -0 "$pid" 2> /dev/null; do
  sleep 1
  # MPI_Abort ends every process of the job, but not when every job of the launch is recoverable (scripts/mpirun.sh
  # sets PRRTE's state_base_recoverable, so that a spawned replacement killed in turn does not fail the launch):
  # the other ranks would then wait until the timeout. 5 s after the abort banner, the job is ended here.
  if grep -aq "MPI_ABORT was invoked" "$errs" 2> /dev/null; then
    aborted=$((aborted + 1))
    if [ "$aborted" -ge 5 ]; then
      echo "[mpirun.sh] MPI_Abort was called and ranks still run 5 s later: ending the job as MPI_Abort does" >&2
      for c in $(cat /proc/"$pid"/task/*/children 2> /dev/null); do kill -9 "$c" 2> /dev/null; done
      kill -9 "$pid" 2> /dev/null
      break
    fi
  fi
  alive=0  # children that are not zombies (a hung prterun does not reap its ranks)
  for c in $(cat /proc/"$pid"/task/*/children 2> /dev/null); do
    st=$(sed -e "s/.*) //" /proc/"$c"/stat 2> /dev/null | cut -d" " -f1)
    if [ -n "$st" ] && [ "$st" != Z ]; then alive=1; fi
  done
  if [ "$alive" = 1 ]; then idle=0; else idle=$((idle + 1)); fi
  if [ "$idle" -ge "$idle_limit" ] && kill -0 "$pid" 2> /dev/null; then
    echo "[mpirun.sh] every rank has exited but mpirun still runs after $idle_limit s (Open MPI 5.0.7 prterun hang); killed it, the ranks' exit status is unknown" >&2
    hung_launcher "$pid"
    kill -9 "$pid" 2> /dev/null
    wait "$pid"
    exit 125
  fi
done
wait "$pid"
rc=$?
for _ in $(seq 50); do kill -0 "$tee_pid" 2> /dev/null || break; sleep 0.1; done  # the last stderr bytes
kill "$tee_pid" 2> /dev/null
if [ "$rc" = 134 ] && grep -aqE "^prterun: .*Assertion .* failed" "$errs"; then  # prterun's SIGABRT, not a rank's
  echo "[mpirun.sh] mpirun (prterun) aborted on an assertion of its own after ranks exited (Open MPI 5.0.7): the" \
       "ranks' exit status is unknown" >&2
  rc=125
elif [ "$aborted" -ge 5 ] && grep -aq "MPI_ABORT was invoked" "$errs"; then  # ended above: the abort's error code
  rc=$(grep -aoE "Errorcode: [0-9]+" "$errs" | head -n 1 | grep -oE "[0-9]+$" || true)
  [ -n "$rc" ] && [ "$rc" != 0 ] || rc=1
elif [ "$rc" = 0 ] && grep -aq "MPI_ABORT was invoked" "$errs"; then
  rc=$(grep -aoE "Errorcode: [0-9]+" "$errs" | head -n 1 | grep -oE "[0-9]+$" || true)
  [ -n "$rc" ] && [ "$rc" != 0 ] || rc=1
  echo "[mpirun.sh] mpirun exited 0 after MPI_Abort (Open MPI 5.0.7 with --with-ft ulfm): exit $rc, the abort's error code" >&2
fi
if [ "$rc" = 0 ]; then
  unfinished=$(awk '$1 == "started" {s[$2] = 1} $1 == "finished" {f[$2] = 1}
                    END {for (r in s) if (!(r in f)) printf "%s ", r}' "$record")
  if [ -n "$unfinished" ]; then
    echo "[mpirun.sh] mpirun exited 0, but rank(s) ${unfinished}started and never finished: they died, most likely of" \
         "a signal, which Open MPI 5.0.7 with --with-ft ulfm reports as a success: exit 1" >&2
    rc=1
  fi
fi
exit "$rc"
