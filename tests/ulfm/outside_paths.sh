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
# The run's JSON carries rank 0's memory against its budget (the default: half the node's memory over its ranks).
[ -s "$d/run.json" ] && ! python3 - "$d/run.json" <<'PY' && fail=1
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
c = m["components"]
ok = m["budget_bytes"] > 0 and m["peak_bytes"] >= m["total_bytes"] > 0 and c["own_versions"] > 0 and c["wards"] > 0
print("outside_paths: memory", json.dumps(m) if not ok else "reported")
sys.exit(0 if ok else 1)
PY
[ -f "$d/ck/job.reprise" ] || { echo "outside_paths: no $d/ck/job.reprise"; ls -R "$d"; fail=1; }
[ "$fail" = 0 ] && echo "outside_paths: --json and REPRISE_DIR written under $d, outside the checkout"
exit "$fail"
