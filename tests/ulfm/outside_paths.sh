#!/usr/bin/env bash
# outside_paths.sh: a program run through scripts/mpirun.sh writes where absolute paths outside the checkout say
# (--json /tmp/..., REPRISE_DIR=/tmp/...), as a user expects (the chroot the MPI tests once ran in saw only the
# source tree).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
d=$(mktemp -d /tmp/reprise-outside-XXXXXX)
trap 'rm -rf "$d"' EXIT
REPRISE_RANKS_PER_NODE=2 REPRISE_DIR=$d/ck bash scripts/mpirun.sh -n 4 --timeout 300 -- reprise-stencil --nx 64 \
  --ny 64 --steps 20 --checkpoint-every 10 --progress-every 0 --json "$d/run.json" || { echo "outside_paths: the run failed"; exit 1; }
fail=0
[ -s "$d/run.json" ] || { echo "outside_paths: no $d/run.json"; fail=1; }
[ -f "$d/ck/job.reprise" ] || { echo "outside_paths: no $d/ck/job.reprise"; ls -R "$d"; fail=1; }
[ "$fail" = 0 ] && echo "outside_paths: --json and REPRISE_DIR written under $d, outside the checkout"
exit "$fail"
