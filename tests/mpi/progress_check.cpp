// reprise-mpi-progress-check: a checkpoint reaches the buddy while every rank computes for a long time without
// calling the runtime (the progress thread does the receiving). Each rank protects 32 MiB, checkpoints, then
// computes for up to 20 s polling only acknowledged() (a read of state, no progress). Prints
// "progress ok: N ranks, acknowledged after S s" and exits 0 when every rank's version reached its buddy during
// the computation.
// `--device`: the 32 MiB are a device region (REPRISE_DEVICE_BACKEND=host-twin without a GPU), so the version is
// drained to host memory in parts and streamed to the buddy during the drain; also prints "streamed B bytes" and
// fails unless part of every rank's version was on its way to the buddy before the drain's last part landed.
// Then every rank changes all its data and checkpoints again, waiting for each commit, until every buddy has
// received a version into a recycled buffer (that of a version it released) or 24 versions were taken. When a
// version is released depends on when the job floor reaches its owner (a load-dependent race with the progress
// threads), so how many versions go into fresh memory is not asserted; what the design guarantees is: a released
// version's buffer takes a later version (at least one reuse at every buddy), and no version goes into fresh memory
// while the pool keeps a released buffer (all versions have one size). Prints "buddy buffers: F fresh, R reused,
// P fresh while kept after V versions" (F and P the most, R the least over the ranks) and fails unless R >= 1 and
// P == 0.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

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
    // counts[0]: fresh, counts[1]: -reused, counts[2]: fresh while the pool kept buffers (max over the ranks)
    int counts[3] = {0, 0, 0};
    std::uint64_t v = 1;
    const auto tally = [&] {
      // After the barrier every rank's wait() has returned, so every buddy counted the version it acknowledged.
      rt.check(MPI_Barrier(rt.comm()));
      const auto buffers = nlohmann::json::parse(rt.buddy_json()).at("receive_buffers");
      counts[0] = buffers.at("fresh").get<int>();
      counts[1] = -buffers.at("reused").get<int>();
      counts[2] = buffers.at("fresh_while_pool_kept").get<int>();
      rt.check(MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT, MPI_MAX, rt.comm()));
    };
    do {
      ++v;
      for (double& d : data) d += 1.0;  // every chunk changes: each version is as large as the first
      rt.checkpoint(v);
      rt.wait();
      tally();
    } while (-counts[1] < 1 && v < 24);
    if (rt.rank() == 0)
      std::printf("buddy buffers: %d fresh, %d reused, %d fresh while kept after %llu versions\n", counts[0],
                  -counts[1], counts[2], static_cast<unsigned long long>(v));
    if (-counts[1] < 1 || counts[2] != 0) rc = 1;
  }
  MPI_Finalize();
  return rc;
}
