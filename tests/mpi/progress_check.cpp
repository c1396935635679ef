// reprise-mpi-progress-check: a checkpoint reaches the buddy while every rank computes for a long time without
// calling the runtime (the progress thread does the receiving). Each rank protects 32 MiB, checkpoints, then
// computes for up to 20 s polling only acknowledged() (a read of state, no progress). Prints
// "progress ok: N ranks, acknowledged after S s" and exits 0 when every rank's version reached its buddy during
// the computation.
// `--device`: the 32 MiB are a device region (REPRISE_DEVICE_BACKEND=host-twin without a GPU), so the version is
// drained to host memory in parts and streamed to the buddy during the drain; also prints "streamed B bytes" and
// fails unless part of every rank's version was on its way to the buddy before the drain's last part landed.
// Then every rank changes all its data and checkpoints seven more times, waiting for each commit: the buddy must
// receive versions into recycled buffers (those of the versions it released), not into fresh memory each time
// (the first three or four are fresh: versions are released two or three commits later). Prints "buddy buffers:
// F fresh, R reused" (most fresh, least reused over the ranks) and fails when F > 4 (8 without recycling).
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "reprise/mpi.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    const bool device = argc > 1 && std::strcmp(argv[1], "--device") == 0;
    reprise::MpiRuntime rt(MPI_COMM_WORLD);
    std::vector<double> data(std::size_t{4} << 20, 1.0);
    // With the host-twin backend "device" memory is host memory; with CUDA this would be cudaMalloc'd.
    rt.protect("data", data.data(), data.size() * sizeof(double),
               device ? reprise::MemorySpace::Device : reprise::MemorySpace::Host);
    rt.check(MPI_Barrier(rt.comm()));
    rt.checkpoint(1);
    const auto t0 = std::chrono::steady_clock::now();
    double seconds = 0, x = 0;
    bool acked = false;
    while (seconds < 20) {
      for (int i = 0; i < 200000; ++i) x += std::sqrt(static_cast<double>(i) + x * 1e-9);  // compute, no MPI
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rt.acknowledged() == 1u) {
        acked = true;
        break;
      }
    }
    double worst = acked ? seconds : 1e9;
    rt.check(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, rt.comm()));
    if (rt.rank() == 0) {
      if (worst < 1e9)
        std::printf("progress ok: %d ranks, acknowledged after %.3f s (x=%g)\n", rt.size(), worst, x);
      else
        std::printf("progress FAILED: a version did not reach its buddy within 20 s of computation\n");
    }
    rc = worst < 1e9 ? 0 : 1;
    rt.wait();
    if (rt.committed() != 1u) {
      std::printf("rank %d: version 1 not committed after wait()\n", rt.rank());
      rc = 1;
    }
    if (device) {
      const auto m = rt.metrics();
      double least = m.empty() ? 0 : static_cast<double>(m.back().streamed_bytes);
      rt.check(MPI_Allreduce(MPI_IN_PLACE, &least, 1, MPI_DOUBLE, MPI_MIN, rt.comm()));
      if (rt.rank() == 0)
        std::printf("streamed %.0f bytes (least over the ranks) to the buddy before the drain ended\n", least);
      if (least <= 0) rc = 1;
    }
    for (std::uint64_t v = 2; v <= 8; ++v) {
      for (double& d : data) d += 1.0;  // every chunk changes: each version is as large as the first
      rt.checkpoint(v);
      rt.wait();
    }
    const auto buffers = nlohmann::json::parse(rt.buddy_json()).at("receive_buffers");
    int counts[2] = {buffers.at("fresh").get<int>(), -buffers.at("reused").get<int>()};
    rt.check(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_MAX, rt.comm()));
    if (rt.rank() == 0) std::printf("buddy buffers: %d fresh, %d reused\n", counts[0], -counts[1]);
    if (counts[0] > 4) rc = 1;
  }
  MPI_Finalize();
  return rc;
}
