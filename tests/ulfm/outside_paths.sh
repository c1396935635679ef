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
# So does an ordinary MPI program's (heat3d, wrapped), whose checkpoints' metrics say the memory at each version.
REPRISE_RANKS_PER_NODE=2 bash scripts/mpirun.sh -n 4 --timeout 300 -- reprise-heat3d --nx 16 --ny 16 --nz 16 \
  --steps 20 --checkpoint-every 10 --json "$d/heat3d.json" > /dev/null || { echo "outside_paths: heat3d failed"; exit 1; }
python3 - "$d/heat3d.json" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
m, ck = j["memory"], j["checkpoint_metrics"]
ok = (m["budget_bytes"] > 0 and m["peak_bytes"] >= m["total_bytes"] > 0 and len(ck) >= 1 and
      all(0 < c["memory_bytes"] <= c["memory_peak_bytes"] <= m["peak_bytes"] and
          c["memory_budget_bytes"] == m["budget_bytes"] for c in ck) and j["checksum"].startswith("0x"))
print("outside_paths: heat3d's --json", "reported" if ok else json.dumps(j))
sys.exit(0 if ok else 1)
PY
[ -f "$d/ck/job.reprise" ] || { echo "outside_paths: no $d/ck/job.reprise"; ls -R "$d"; fail=1; }
[ "$fail" = 0 ] && echo "outside_paths: --json and REPRISE_DIR written under $d, outside the checkout"
exit "$fail"
