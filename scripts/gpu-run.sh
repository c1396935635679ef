#!/usr/bin/env bash
# Runs on the GPU machine, from a bundle made by scripts/gpu-bundle.sh (copied there as run.sh):
#
#   bash .device/run.sh [tests|bench|all]       default all; results in $OUT (the device tool's), else DIR/results
#
# tests: every GPU test (each prints its seed and device), then compute-sanitizer memcheck of the kernel and
# data-path tests and racecheck of the kernels when compute-sanitizer is there; bench: reprise-bench-d2h on the
# GPU (d2h.json; D2H_ARGS="--sizes 1G --repeat 1" for a short one).
# gpu-validation.txt gets everything, with the device, driver, commit and a summary line at the end; the exit
# status is the number of failed steps. A test without a GPU skips and says so (then the summary says so too).
set -u
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-all}
out=${OUT:-$here/results}
mkdir -p "$out"
report=$out/gpu-validation.txt
cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
  [ -d "$d" ] && cuda_dirs="$cuda_dirs:$d"
done
export LD_LIBRARY_PATH="$here/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
failed=0 passed=0 skipped=0

say() { echo "$*" | tee -a "$report"; }
step() {  # step NAME COMMAND...: runs it, output to the report, counts the result
  local name=$1 rc
  shift
  say "== $name: $*"
  "$@" > "$out/step.log" 2>&1
  rc=$?
  grep -E "seed|OK \]|FAILED|SKIPPED|Skipped|PASSED|ERROR SUMMARY|RACECHECK SUMMARY|error|no GPU|GB/s|over" \
    "$out/step.log" | head -n 80 | tee -a "$report"
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1)); say "-- $name: FAILED (exit $rc); last lines:"; tail -n 20 "$out/step.log" | tee -a "$report"
  elif grep -q "SKIPPED" "$out/step.log"; then
    skipped=$((skipped + 1)); say "-- $name: skipped"
  else
    passed=$((passed + 1)); say "-- $name: passed"
  fi
}

: > "$report"
say "# Reprise GPU validation: commit $(cat "$here/COMMIT" 2> /dev/null | tr '\n' ' ')(architectures $(cat "$here/ARCHS" 2> /dev/null)), $(date -u +%F' '%TZ)"
say "# device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null || echo 'no nvidia-smi')"
say "# command: bash run.sh $what"
nccl=$(ldconfig -p 2> /dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
[ -z "$nccl" ] && for d in ${cuda_dirs//:/ }; do [ -e "$d/libnccl.so.2" ] && nccl=$d/libnccl.so.2 && break; done
say "# libnccl.so.2: ${nccl:-not found (the NCCL barrier tests skip and say so)}"

if [ "$what" = tests ] || [ "$what" = all ]; then
  for t in reprise_kernel_cuda_tests reprise_cuda_runtime_tests reprise_tile_kernel_cuda_tests reprise_nccl_barrier_tests; do
    [ -x "$here/bin/$t" ] && step "$t" "$here/bin/$t"
  done
  if command -v compute-sanitizer > /dev/null; then
    # (the kernel tests' deliberate cudaMalloc failure is an API error, not a memory error)
    step "memcheck kernels" compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
      "$here/bin/reprise_kernel_cuda_tests"
    step "memcheck data path" compute-sanitizer --tool memcheck --error-exitcode 9 "$here/bin/reprise_cuda_runtime_tests"
    step "memcheck tiles" compute-sanitizer --tool memcheck --error-exitcode 9 "$here/bin/reprise_tile_kernel_cuda_tests"
    step "racecheck kernels" compute-sanitizer --tool racecheck --error-exitcode 9 \
      "$here/bin/reprise_kernel_cuda_tests" --gtest_filter=-*FailedCall*
  else
    say "# no compute-sanitizer: sanitizer steps not run"
  fi
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # (D2H_ARGS replaces the sizes; the default is the recorded H100 run's, bench/results/README.md)
  read -r -a d2h_args <<< "${D2H_ARGS:---sizes 256M 1G 4G 16G 20G --staging 20G --repeat 3}"
  step "reprise-bench-d2h" "$here/bin/reprise-bench-d2h" --backend cuda "${d2h_args[@]}" --json "$out/d2h.json"
fi
rm -f "$out/step.log"
say "gpu-validation: $passed passed, $failed failed, $skipped skipped"
exit "$failed"
