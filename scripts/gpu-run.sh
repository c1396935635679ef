#!/usr/bin/env bash
# Runs on the GPU machine, from a bundle made by scripts/gpu-bundle.sh (copied there as run.sh):
#
#   bash .device/run.sh [tests|sanitize|apps|bench|paths|commit|all]...   default all; results in $OUT (the device tool's), else DIR/results
#
# tests: every GPU test (each prints its seed and device); sanitize: compute-sanitizer memcheck of the kernel,
# data-path and tile tests and racecheck of the kernels when compute-sanitizer is there; bench: reprise-bench-d2h on the
# GPU (d2h.json; D2H_ARGS="--sizes 1G --repeat 1" for a short one); apps (a bundle made with KOKKOS): the MPI +
# Kokkos programs on the GPU under the carried MPI (4 and 8 ranks on the one GPU, 2 per emulated node): the stencil
# and Cholesky with device data, reprise-mpi-comm-check on device buffers (the checksum of the host runs; which
# path the device buffers took), reprise_kokkos_tests, and the logging and 2-rank overhead benchmarks (JSON).
# With Open MPI 5 + ULFM carried (scripts/openmpi.sh): a rank SIGKILLed mid-run in the stencil (halos through Comm
# and as plain MPI calls), Cholesky, heat3d (an ordinary MPI program, wrapped) and the Comm check, each recovered
# online with only the failed rank's group rolled back, ending with the failure-free checksum; the stencil and
# heat3d again with a spare process (REPRISE_SPARES=1) taking the killed rank's place. With an MPI without
# ULFM: a rank killed, then the job relaunched from REPRISE_DIR, the same checksum. QUICK=1 skips the second
# overhead run. paths (not in all): the logging benchmark with device buffers handed to MPI and staged, side by
# side, twice each. commit (not in all): reprise-bench-commit (host memory) with the machine's cores to spare: 2 and
# 4 ranks at 256 MiB, and 64 MiB back to back without and with REPRISE_DIR, twice each (about 2 minutes).
# gpu-validation.txt gets everything, with the device, driver, commit and a summary line at the end; the exit
# status is the number of failed steps. A test without a GPU skips and says so (then the summary says so too).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/bin" ] && [ -f "$here/payload.tgz" ]; then  # (the bundle's programs and libraries, compressed)
  tar xzf "$here/payload.tgz" -C "$here" 2> /dev/null || {
    mkdir -p "${TMPDIR:-/tmp}/reprise-bundle" && cp "$here"/run.sh "$here"/COMMIT "$here"/ARCHS "${TMPDIR:-/tmp}/reprise-bundle/" &&
      tar xzf "$here/payload.tgz" -C "${TMPDIR:-/tmp}/reprise-bundle" && here=${TMPDIR:-/tmp}/reprise-bundle; }
fi
what=" ${*:-all} "
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
  timeout "${STEP_TIMEOUT_S:-240}" "$@" > "$out/step.log" 2>&1
  rc=$?
  grep -aE "seed|OK \]|FAILED|SKIPPED|Skipped|PASSED|ERROR SUMMARY|RACECHECK SUMMARY|rror|no GPU|GB/s|over|checksum|residual|restarted|rolled|ranks [0-9]|comm ok|SIGKILL|[a-z_]+ [0-9.]+$" \
    "$out/step.log" | head -n 80 | tee -a "$report"
  if [ -n "${STEP_EXPECT_KILL:-}" ]; then  # a job one of whose ranks SIGKILLs itself (REPRISE_KILL)
    if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -aq "REPRISE_KILL: SIGKILL" "$out/step.log"; then
      say "-- $name: killed as asked (exit $rc)"
    else failed=$((failed + 1)); say "-- $name: FAILED (exit $rc, where a rank should have killed itself)"; fi
  elif [ "$rc" != 0 ]; then
    failed=$((failed + 1)); say "-- $name: FAILED (exit $rc); last lines:"; tail -n 20 "$out/step.log" | tee -a "$report"
  elif grep -aq "SKIPPED" "$out/step.log"; then
    skipped=$((skipped + 1)); say "-- $name: skipped"
  else
    passed=$((passed + 1)); say "-- $name: passed"
  fi
}

: > "$report"
say "# Reprise GPU validation: commit $(cat "$here/COMMIT" 2> /dev/null | tr '\n' ' ')(architectures $(cat "$here/ARCHS" 2> /dev/null)), $(date -u +%F' '%TZ)"
say "# device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null || echo 'no nvidia-smi')"
say "# command: bash run.sh$what"
nccl=$(ldconfig -p 2> /dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
[ -z "$nccl" ] && for d in ${cuda_dirs//:/ }; do [ -e "$d/libnccl.so.2" ] && nccl=$d/libnccl.so.2 && break; done
say "# libnccl.so.2: ${nccl:-not found (the NCCL barrier tests skip and say so)}"
say "# CUDA: $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo 'no nvcc'); cuBLAS: $(ls $(echo "$cuda_dirs" | tr ':' ' ') 2> /dev/null | grep -m1 -o 'libcublas\.so\.[0-9]*' || echo 'not found')"

wants() { [[ "$what" == *" $1 "* || "$what" == *" all "* ]]; }
if wants tests; then
  for t in reprise_kernel_cuda_tests reprise_cuda_runtime_tests reprise_tile_kernel_cuda_tests reprise_nccl_barrier_tests; do
    [ -x "$here/bin/$t" ] && step "$t" "$here/bin/$t"
  done
fi
if wants sanitize; then
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
if { wants apps || [[ "$what" == *" paths "* || "$what" == *" commit "* ]]; } && [ -x "$here/bin/reprise-stencil" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  shm_small=""  # (containers often give /dev/shm 64 MiB: too little for 8 ranks' shared-memory segments)
  if [ "$(df -Pk /dev/shm 2> /dev/null | awk 'NR == 2 {print $4}')" -lt 1048576 ] 2> /dev/null; then
    shm_small=1
    say "# /dev/shm has less than 1 GiB free: Open MPI's shared memory in ${TMPDIR:-/tmp}"
  fi
  ulfm=""
  if [ -f "$here/mpi/.reprise-openmpi" ]; then
    # Open MPI 5 with ULFM and CUDA (scripts/openmpi.sh): put back at the prefix it was built for (a symbolic link
    # to the bundle's copy), and run as scripts/mpirun.sh does, through its launcher watchdog.
    ulfm=1
    prefix=$(grep -o -- "--prefix=[^ ]*" "$here/mpi/.reprise-openmpi" | cut -d= -f2)
    if [ "$(readlink -f "$prefix" 2> /dev/null)" != "$(readlink -f "$here/mpi")" ]; then
      if [ -e "$prefix" ] && [ ! -L "$prefix" ]; then
        say "# $prefix exists and is not the bundle's Open MPI: moved aside to $prefix.before-reprise"
        mv "$prefix" "$prefix.before-reprise"
      fi
      mkdir -p "$(dirname "$prefix")" && ln -sfn "$here/mpi" "$prefix"
    fi
    export PATH="$prefix/bin:$PATH" OPAL_PREFIX="$prefix" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
    export PRTE_MCA_state_base_recoverable=1  # as scripts/mpirun.sh: a spawned replacement's death fails no launch
    launcher=(bash "$here/mpi/mpirun-watch.sh" --with-ft ulfm --oversubscribe --mca async_mpi_finalize true
      --mca btl self,sm,tcp --mca btl_tcp_if_include lo --mca coll ^han,cuda)
    [ -z "$shm_small" ] || launcher+=(--mca btl_sm_backing_directory "${TMPDIR:-/tmp}")
    say "# MPI: $("$prefix/bin/ompi_info" --version 2> /dev/null | head -n 1) with ULFM; CUDA: $("$prefix/bin/ompi_info" --parsable --all 2> /dev/null | grep -m1 'built_with_cuda_support:value' | cut -d: -f7)"
  else
    # The carried Open MPI 4, relocated (scripts/gpu-bundle.sh); no ULFM.
    export OPAL_PREFIX=$here/mpi PMIX_INSTALL_PREFIX=$here/pmix PMIX_MCA_mca_base_component_path=$here/pmix/lib/pmix
    export PMIX_MCA_pcompress_base_silence_warning=1
    export PMIX_MCA_mca_base_component_show_load_errors=0  # (a GPU machine with another PMIx: its plugins do not load)
    export OMPI_MCA_btl=self,vader OMPI_MCA_plm=isolated OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
    [ -z "$shm_small" ] || export OMPI_MCA_btl_vader_backing_directory=${TMPDIR:-/tmp}
    launcher=("$here/mpi/bin/mpirun")
  fi
  apps_env=(env LD_LIBRARY_PATH="$here/lib/apps:$LD_LIBRARY_PATH")
  # (2 ranks per emulated node = per group; the 2-rank benchmark needs 1, so its buddy is on the other "node")
  mpirun=("${apps_env[@]}" REPRISE_RANKS_PER_NODE=2 "${launcher[@]}" -x LD_LIBRARY_PATH -x REPRISE_RANKS_PER_NODE)
  mpirun1=("${apps_env[@]}" REPRISE_RANKS_PER_NODE=1 "${launcher[@]}" -x LD_LIBRARY_PATH -x REPRISE_RANKS_PER_NODE)
  checksum() { grep -ao "checksum 0x[0-9a-f]*" "$out/$1.log" | tail -n 1; }
  same() {  # same NAME A B [PATTERN...]: the two runs' checksums are equal (and there is one); B printed each PATTERN
    local name=$1 a b p missing=""
    a=$(checksum "$2") b=$(checksum "$3")
    for p in "${@:4}"; do grep -aq -- "$p" "$out/$3.log" || missing="$missing '$p'"; done
    if [ -n "$a" ] && [ "$a" = "$b" ] && [ -z "$missing" ]; then
      say "-- $name: passed ($a in both)"; passed=$((passed + 1))
    else say "-- $name: FAILED ('$a' vs '$b'${missing:+; not printed:$missing})"; failed=$((failed + 1)); fi
  }
  run_log() {  # run_log NAME COMMAND...: a step whose output is also kept as NAME.log
    step "$@"
    cp "$out/step.log" "$out/$1.log"
  }
  only_group2="only group 2 (ranks 4 and 5) rolls back, the other ranks go on"
  if [[ "$what" == *" commit "* ]] && [ -x "$here/bin/reprise-bench-commit" ]; then
    # The commit path where cores are to spare (the 2-core development VM has none: there the buddy's check of a
    # 256 MiB version and the transfers share both cores): commit latency against the transfer model, 2 ranks (one
    # a node) and 4 (two a node), 256 MiB of host memory each; then 64 MiB back to back without and with REPRISE_DIR
    # (the file writer's share of the commit). Two rounds, alternated: commit-*-{1,2}.json.
    for round in 1 2; do
      step "reprise-bench-commit, 2 ranks, 256 MiB, round $round" "${mpirun1[@]}" -n 2 \
        "$here/bin/reprise-bench-commit" --bytes 256M --json "$out/commit-2ranks-256M-$round.json"
      step "reprise-bench-commit, 4 ranks (2 a node), 256 MiB, round $round" "${mpirun[@]}" -n 4 \
        "$here/bin/reprise-bench-commit" --bytes 256M --json "$out/commit-4ranks-256M-$round.json"
      step "reprise-bench-commit, 2 ranks, 64 MiB back to back, no files, round $round" "${mpirun1[@]}" -n 2 \
        "$here/bin/reprise-bench-commit" --bytes 64M --gap-ms 0 --json "$out/commit-nodir-64M-$round.json"
      rm -rf "$out/ckpt-commit"
      step "reprise-bench-commit, 2 ranks, 64 MiB back to back, REPRISE_DIR, round $round" "${mpirun1[@]}" -n 2 \
        -x REPRISE_DIR="$out/ckpt-commit" "$here/bin/reprise-bench-commit" --bytes 64M --gap-ms 0 \
        --json "$out/commit-dir-64M-$round.json"
      rm -rf "$out/ckpt-commit"
    done
  fi
  if [[ "$what" == *" paths "* ]]; then
    # Device buffers handed to MPI (auto or yes: whichever the MPI takes) against staged through pinned memory
    # (REPRISE_CUDA_AWARE_MPI=no), side by side, twice each, alternating: logging-{yes,no}-{1,2}.json.
    for round in 1 2; do
      for mode in yes no; do
        step "reprise-bench-logging --device, REPRISE_CUDA_AWARE_MPI=$mode, round $round" "${mpirun[@]}" -n 4 \
          -x REPRISE_CUDA_AWARE_MPI="$mode" "$here/bin/reprise-bench-logging" --device --repeat 3 --sizes 8 4K 64K 1M 8M \
          --json "$out/logging-$mode-$round.json"
      done
    done
  fi
fi
if wants apps && [ -x "$here/bin/reprise-stencil" ]; then
  step reprise_kokkos_tests "${apps_env[@]}" "$here/bin/reprise_kokkos_tests"
  s_args=(--nx 4096 --ny 4096 --steps 200 --checkpoint-every 50 --progress-every 0)
  run_log stencil-4 "${mpirun[@]}" -n 4 "$here/bin/reprise-stencil" "${s_args[@]}" --json "$out/stencil-4.json"
  run_log stencil-8 "${mpirun[@]}" -n 8 "$here/bin/reprise-stencil" "${s_args[@]}"
  same "stencil on the GPU: 8 ranks give the 4-rank checksum" stencil-4 stencil-8
  if [ -n "$ulfm" ]; then
    # Online recovery: rank 5 SIGKILLed at step 160, detected by ULFM, replaced; only its group (ranks 4 and 5)
    # rolls back, from its buddies' host memory; the halos through Comm, then as plain MPI calls (interposition).
    run_log stencil-8-online "${mpirun[@]}" -n 8 -x REPRISE_KILL=5:160 "$here/bin/reprise-stencil" "${s_args[@]}" \
      --json "$out/stencil-8-online.json"
    same "stencil on the GPU, rank 5 killed: group rollback online gives the failure-free checksum" stencil-4 \
      stencil-8-online "$only_group2" '"rolled_back":\[4,5\]'
    run_log stencil-8-raw-online "${mpirun[@]}" -n 8 -x REPRISE_KILL=5:160 "$here/bin/reprise-stencil" "${s_args[@]}" \
      --messages mpi
    same "stencil on the GPU, halos as plain MPI calls, rank 5 killed: the same checksum" stencil-4 \
      stencil-8-raw-online "$only_group2"
    # The same failure with a spare process (9 processes, 8 ranks): the spare takes rank 5's place, no spawn.
    run_log stencil-8-spare-online "${mpirun[@]}" -n 9 -x REPRISE_SPARES=1 -x REPRISE_KILL=5:160 \
      "$here/bin/reprise-stencil" "${s_args[@]}" --json "$out/stencil-8-spare-online.json"
    same "stencil on the GPU, rank 5 killed, a spare takes its place: the same checksum" stencil-4 \
      stencil-8-spare-online "$only_group2" "spare process (start rank 8) is rank 5 now" '"spares_used":1,"spawned":0'
  else
    rm -rf "$out/ckpt-s"
    # A rank SIGKILLed at step 160 (without ULFM the MPI ends the job), then the job relaunched from the files.
    STEP_EXPECT_KILL=1 run_log stencil-4-killed "${mpirun[@]}" -n 4 -x REPRISE_DIR="$out/ckpt-s" -x REPRISE_KILL=1:160 \
      "$here/bin/reprise-stencil" "${s_args[@]}"
    run_log stencil-4-relaunched "${mpirun[@]}" -n 4 -x REPRISE_DIR="$out/ckpt-s" "$here/bin/reprise-stencil" "${s_args[@]}"
    same "stencil on the GPU: relaunch from files gives the failure-free checksum" stencil-4 stencil-4-relaunched \
      "restarted from step"
  fi
  if [ -n "$nccl" ]; then  # (NCCL takes one GPU per member of a communicator: groups of one rank on one GPU)
    run_log stencil-4-nccl "${mpirun1[@]}" -n 4 -x REPRISE_GROUP_BARRIER=nccl -x REPRISE_TRACE=1 \
      "$here/bin/reprise-stencil" "${s_args[@]}"
    same "stencil on the GPU, NCCL group barriers: the same checksum" stencil-4 stencil-4-nccl "barrier: NCCL"
  else
    say "# no libnccl.so.2: the stencil with NCCL group barriers not run"
  fi
  c_args=(--n 4096 --tile 256 --checkpoint-every 4)
  run_log cholesky-4 "${mpirun[@]}" -n 4 "$here/bin/reprise-cholesky" "${c_args[@]}" --json "$out/cholesky-4.json"
  if [ -n "$ulfm" ]; then
    run_log cholesky-8-online "${mpirun[@]}" -n 8 -x REPRISE_KILL=5:10 "$here/bin/reprise-cholesky" "${c_args[@]}"
    same "Cholesky with device tiles, rank 5 killed at panel 10: group rollback online, the same checksum" \
      cholesky-4 cholesky-8-online "$only_group2"
  else
    rm -rf "$out/ckpt-c"
    STEP_EXPECT_KILL=1 run_log cholesky-4-killed "${mpirun[@]}" -n 4 -x REPRISE_DIR="$out/ckpt-c" -x REPRISE_KILL=2:10 \
      "$here/bin/reprise-cholesky" "${c_args[@]}"
    run_log cholesky-4-relaunched "${mpirun[@]}" -n 4 -x REPRISE_DIR="$out/ckpt-c" "$here/bin/reprise-cholesky" "${c_args[@]}"
    same "Cholesky with device tiles: relaunch from files gives the failure-free checksum" cholesky-4 \
      cholesky-4-relaunched "restarted from panel"
  fi
  run_log cholesky-4-host "${mpirun[@]}" -n 4 "$here/bin/reprise-cholesky" "${c_args[@]}" --tiles host
  if [ -n "$ulfm" ] && [ -x "$here/bin/reprise-heat3d" ]; then
    # heat3d: an ordinary MPI + Kokkos program (device views handed to MPI_Isend/Irecv): as built against the MPI
    # (needs a CUDA-aware MPI), wrapped by the interposition, and wrapped with rank 5 killed.
    h_args=(--nx 256 --ny 256 --nz 256 --steps 100 --checkpoint-every 20)
    run_log heat3d-plain "${mpirun[@]}" -n 8 "$here/bin/heat3d-plain" "${h_args[@]}"
    run_log heat3d-wrapped "${mpirun[@]}" -n 8 "$here/bin/reprise-heat3d" "${h_args[@]}"
    same "heat3d on the GPU: wrapped gives the plain MPI program's checksum" heat3d-plain heat3d-wrapped
    run_log heat3d-online "${mpirun[@]}" -n 8 -x REPRISE_KILL=5:70 "$here/bin/reprise-heat3d" "${h_args[@]}"
    same "heat3d on the GPU, wrapped, rank 5 killed: group rollback online, the same checksum" heat3d-plain \
      heat3d-online "$only_group2" "rank 5 restored step"
    run_log heat3d-spare-online "${mpirun[@]}" -n 9 -x REPRISE_SPARES=1 -x REPRISE_KILL=5:70 \
      "$here/bin/reprise-heat3d" "${h_args[@]}"
    same "heat3d on the GPU, wrapped, rank 5 killed, a spare (waiting in MPI_Init) takes its place" heat3d-plain \
      heat3d-spare-online "$only_group2" "spare process (start rank 8) is rank 5 now"
  fi
  run_log comm-8-device "${mpirun[@]}" -n 8 "$here/bin/reprise-mpi-comm-check" --space device
  if grep -aq "checksum 0xb047a95ca8e3cbbe" "$out/comm-8-device.log"; then
    say "-- Comm on device buffers: passed (the host runs' checksum 0xb047a95ca8e3cbbe)"; passed=$((passed + 1))
  else say "-- Comm on device buffers: FAILED (not the host runs' checksum 0xb047a95ca8e3cbbe)"; failed=$((failed + 1)); fi
  say "# device_mpi: $(grep -ao '"device_mpi":"[^"]*"' "$out/comm-8-device.log" | head -n 1) $(grep -ao '"device_direct":[0-9]*' "$out/comm-8-device.log" | head -n 1)"
  if [ -n "$ulfm" ]; then
    run_log comm-8-device-online "${mpirun[@]}" -n 8 -x REPRISE_KILL=5:14 -x REPRISE_ROLLBACK=group \
      "$here/bin/reprise-mpi-comm-check" --space device
    same "Comm on device buffers, rank 5 killed: group rollback online, the host runs' checksum" comm-8-device \
      comm-8-device-online "only group 2 (ranks 4 and 5) rolls back"
  fi
  step reprise-bench-logging "${mpirun[@]}" -n 4 "$here/bin/reprise-bench-logging" --device --repeat 5 --json "$out/logging.json"
  step "reprise-bench-overhead-mpi (2 ranks, buddies)" "${mpirun1[@]}" -n 2 \
    "$here/bin/reprise-bench-overhead-mpi" --nx 8192 --steps 400 --intervals 50 100 200 --repeat 3 \
    --json "$out/overhead-2ranks.json"
  if [ -z "${QUICK:-}" ]; then
    step "reprise-bench-overhead-mpi (2 ranks, buddies, after 400 untimed steps: steady state)" "${mpirun1[@]}" -n 2 \
      "$here/bin/reprise-bench-overhead-mpi" --nx 8192 --steps 400 --intervals 25 100 --repeat 3 --warm-steps 400 \
      --json "$out/overhead-2ranks-warm.json"
  fi
  rm -rf "$out/ckpt-s" "$out/ckpt-c"
fi
if wants bench; then
  # (D2H_ARGS replaces the sizes; the default is the recorded H100 run's, bench/results/README.md)
  read -r -a d2h_args <<< "${D2H_ARGS:---sizes 256M 1G 4G 16G 20G --staging 20G --repeat 3}"
  step "reprise-bench-d2h" "$here/bin/reprise-bench-d2h" --backend cuda "${d2h_args[@]}" --json "$out/d2h.json"
fi
rm -f "$out/step.log"
say "gpu-validation: $passed passed, $failed failed, $skipped skipped"
exit "$failed"
