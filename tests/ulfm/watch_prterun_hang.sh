#!/usr/bin/env bash
# watch_prterun_hang.sh: scripts/mpirun-watch.sh given an mpirun that hangs once its ranks are gone (as Open MPI
# 5.0.7's prterun does now and then after failures), neither reading their output nor reaping them: exit 125, and
# what the ranks wrote that the launcher never read (a pipe for stderr, a pty for stdout, as prterun's) is printed,
# with their exit status. A stand-in mpirun (no MPI needed) starts one such rank and then sleeps.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat > "$d/mpirun" <<'PY'
#!/usr/bin/env python3
import os, pty, time
err_r, err_w = os.pipe()
out_m, out_s = pty.openpty()
if os.fork() == 0:
    os.dup2(out_s, 1)
    os.dup2(err_w, 2)
    os.write(2, b"reprise: rank 3: the recovery has not finished after 120 s (in MPI_Comm_spawn)\n")
    os.write(1, b"checksum 0x0123456789abcdef\n")
    os._exit(4)
os.close(err_w)
os.close(out_s)
time.sleep(600)
PY
chmod +x "$d/mpirun"
PATH="$d:$PATH" REPRISE_WATCH_IDLE_S=2 timeout 120 bash "$root/scripts/mpirun-watch.sh" -n 1 true > "$d/out" 2>&1
rc=$?
cat "$d/out"
status=0
[ "$rc" = 125 ] || { echo "watch_prterun_hang: exit $rc, expected 125"; status=1; }
for m in "prterun hang" "the recovery has not finished after 120 s \(in MPI_Comm_spawn\)" "^checksum 0x0123456789abcdef" \
         "never reaped, exited with status 4"; do
  grep -aqE "$m" "$d/out" || { echo "watch_prterun_hang: missing in the output: $m"; status=1; }
done
[ $status = 0 ] && echo "watch_prterun_hang: ok"
exit $status
