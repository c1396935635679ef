#!/usr/bin/env bash
# Whole-job loss and relaunch from the persistent level: every rank of a 4-rank stencil is SIGKILLed at step 25
# (REPRISE_DIR set), then the job is launched again on the same directory. It must restart from a committed version
# and end with the checksum of a run without failures. Files are written asynchronously after the commit, so the
# version of step 20 may or may not have reached every rank's file when the kill at step 25 comes (CI saw both);
# step 10's files are written long before (the commit of 20 waits for the buddy, not for files, so both are valid).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# Relative to the source root, so the same directory inside the sandbox (cwd /src) and on the host.
dir=build-test-files/relaunch-$$
trap 'rm -rf "$root/$dir"' EXIT
args=(--nx 64 --ny 64 --steps 40 --checkpoint-every 10)
echo "== run 1: every rank killed at step 25"
# (mpirun --with-ft ulfm may exit 0 when every rank is gone: what matters is that the run did not finish.)
REPRISE_DIR=$dir REPRISE_RANKS_PER_NODE=2 REPRISE_KILL=0:25,1:25,2:25,3:25 bash tests/ulfm/expect.sh --rc '[0-9]*' \
  --absent "^checksum" --match "rank 3: REPRISE_KILL: SIGKILL at step 25" -- \
  bash scripts/mpirun.sh -n 4 --timeout 300 -- reprise-stencil "${args[@]}" || exit 1
ls "$dir" > /dev/null 2>&1 || { echo "relaunch.sh: no checkpoint directory $dir after run 1"; exit 1; }
echo "== run 2: relaunch on the same directory"
REPRISE_DIR=$dir REPRISE_RANKS_PER_NODE=2 bash tests/ulfm/expect.sh \
  --match "restarted from step (10|20)$" --match "checksum $1" -- \
  bash scripts/mpirun.sh -n 4 --timeout 300 -- reprise-stencil "${args[@]}"
