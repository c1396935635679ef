#!/usr/bin/env bash
# The main demo: reprise-stencil (Kokkos heat equation, 2D process grid) on 8 ranks = 4 emulated nodes of 2 ranks
# = 4 groups, once without failure and once with rank 5 SIGKILLed mid-run. The killed rank is detected by ULFM,
# replaced by a new process that fetches its checkpoint from its buddy's host memory, its group (ranks 4 and 5)
# rolls back to its last committed version while the other ranks go on, and the job finishes. The two checksums must be equal. Prints a short report and writes a
# plot of the time per step with checkpoint and failure marks (build-demo/stencil.png).
# Extra arguments go to reprise-stencil (see its --help), e.g. --nx 2048 --ny 2048.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-demo
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.txt "$out"/*.png

echo "[demo] setup (Debian packages)"
bash scripts/setup.sh
echo "[demo] Open MPI 5 with ULFM, built once from Debian's source package (scripts/openmpi.sh; about 11 min on 2 cores)"
bash scripts/openmpi.sh > /dev/null ||
  { echo "[demo] building Open MPI 5 failed (its log is named above): the demo needs an MPI with ULFM" >&2; exit 1; }
args=(--nx 2048 --ny 2048 --steps 400 --checkpoint-every 25 --progress-every 100 "$@")
export REPRISE_RANKS_PER_NODE=2

echo "[demo] run 1: 8 ranks, no failure (the first run also builds reprise-stencil)"
bash scripts/mpirun.sh -n 8 --timeout 900 -- reprise-stencil "${args[@]}" --json "$out/clean.json" \
  2>&1 | tee "$out/clean.txt"
echo
echo "[demo] run 2: 8 ranks, rank 5 SIGKILLed at step 210 (REPRISE_KILL=5:210)"
REPRISE_KILL=5:210 bash scripts/mpirun.sh -n 8 --timeout 900 -- reprise-stencil "${args[@]}" --json "$out/kill.json" \
  2>&1 | tee "$out/kill.txt"
echo

clean=$(grep -a '^checksum ' "$out/clean.txt" | awk '{print $2}')
killed=$(grep -a '^checksum ' "$out/kill.txt" | awk '{print $2}')
/usr/bin/python3 scripts/demo_report.py "$out/clean.json" "$out/kill.json" --out "$out/stencil.png" || true
if [ -n "$clean" ] && [ "$clean" = "$killed" ]; then
  echo "[demo] checksums identical: $clean (failure-free) = $killed (rank 5 killed)"
else
  echo "[demo] CHECKSUMS DIFFER: '$clean' (failure-free) vs '$killed' (rank 5 killed)"
  exit 1
fi
