// reprise-bench-overhead: what checkpointing costs a compute loop. A Kokkos heat stencil (device memory with a
// CUDA Kokkos, host memory otherwise) runs the same steps without checkpoints and with a checkpoint every N
// steps, for several N, interleaved in one run; the overhead is the loop time with checkpoints over the best
// loop time without, minus one. The final fields must be bit-identical.
//
// reprise-bench-overhead-mpi is the same program over MpiRuntime: every rank runs its own stencil (no messages)
// and each checkpoint also goes to the rank's buddy (host memory, progress thread) and is committed by its group;
// loop times are the slowest rank's. Run it through scripts/mpirun.sh, e.g. 2 ranks on 2 emulated nodes:
//   REPRISE_RANKS_PER_NODE=1 scripts/mpirun.sh -n 2 -- reprise-bench-overhead-mpi --nx 2048 --steps 200
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <vector>

#ifndef REPRISE_BENCH_MPI
#define REPRISE_BENCH_MPI 0
#endif
#if REPRISE_BENCH_MPI
#include <mpi.h>
#endif

#include "../apps/heat_kernels.hpp"
#include "bench_common.hpp"
#include "reprise/kokkos.hpp"
#include "reprise/reprise.hpp"
#if REPRISE_BENCH_MPI
#include "reprise/mpi.hpp"
#endif

namespace {

struct Loop {
  double seconds;
  std::uint64_t checksum;
  std::vector<reprise::CheckpointMetrics> metrics;
};

// `every` = 0: no runtime at all.
Loop run(int nx, int steps, int every) {
  using reprise::heat::Field;
  Field u("u", nx, nx), scratch("scratch", nx, nx);
  reprise::heat::heat_source(u);
  Kokkos::fence();
  Loop out{};
  std::unique_ptr<reprise::Runtime> rt;
  if (every) {
#if REPRISE_BENCH_MPI
    rt = std::make_unique<reprise::MpiRuntime>(MPI_COMM_WORLD);
#else
    rt = std::make_unique<reprise::Runtime>(reprise::Config::from_env());
#endif
    rt->protect(u);
  }
#if REPRISE_BENCH_MPI
  MPI_Barrier(MPI_COMM_WORLD);
#endif
  const auto t0 = reprise::bench::Clock::now();
  for (int s = 1; s <= steps; ++s) {
    reprise::heat::step(u, scratch);
    if (every && s % every == 0) rt->checkpoint(static_cast<std::uint64_t>(s));
  }
  Kokkos::fence();
  out.seconds = reprise::bench::since(t0);
#if REPRISE_BENCH_MPI
  MPI_Allreduce(MPI_IN_PLACE, &out.seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
  if (rt) static_cast<reprise::MpiRuntime&>(*rt).finish();
#endif
  if (rt) {
    rt->wait();
    out.metrics = rt->metrics();
  }
  out.checksum = reprise::heat::fingerprint(u);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reprise-bench-overhead: compute-loop time with checkpoints every N steps vs without"};
  int nx = 4096, steps = 600, repeat = 3;
  std::vector<int> intervals = {25, 50, 100, 200};
  std::string json_path = "reprise-bench-overhead.json";
  app.add_option("--nx", nx, "grid is nx x nx doubles")->check(CLI::Range(16, 1 << 15));
  app.add_option("--steps", steps, "time steps per loop")->check(CLI::PositiveNumber);
  app.add_option("--intervals", intervals, "checkpoint every N steps, for each N")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "loops per configuration (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "output file");
  CLI11_PARSE(app, argc, argv);
#if REPRISE_BENCH_MPI
  int provided = 0, rank = 0, ranks = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank != 0) std::freopen("/dev/null", "w", stdout);  // rank 0 reports
  struct Finalize {
    ~Finalize() { MPI_Finalize(); }
  } finalize;
#else
  const int rank = 0, ranks = 1;
#endif
  Kokkos::ScopeGuard kokkos(argc, argv);
  const bool device = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, reprise::heat::Field::memory_space>::accessible;
  std::printf("reprise-bench-overhead: %dx%d doubles (%.0f MiB, %s memory) per rank, %d rank(s)%s, %d steps, "
              "median of %d\n", nx, nx, nx * double(nx) * 8 / (1 << 20), device ? "device" : "host", ranks,
              ranks > 1 ? " (checkpoints also to the buddy)" : "", steps, repeat);

  run(nx, steps / 10 + 1, 0);  // warm-up: first allocations, first kernel launches
  std::vector<double> base;
  std::vector<std::vector<double>> with(intervals.size());
  std::vector<Loop> last(intervals.size());
  std::uint64_t reference = 0;
  bool identical = true;
  for (int r = 0; r < repeat; ++r) {  // interleaved, so the machine's drifts hit every configuration alike
    const Loop b = run(nx, steps, 0);
    base.push_back(b.seconds);
    reference = b.checksum;
    for (std::size_t k = 0; k < intervals.size(); ++k) {
      last[k] = run(nx, steps, intervals[k]);
      with[k].push_back(last[k].seconds);
      identical = identical && last[k].checksum == reference;
    }
  }
  const double best_base = reprise::bench::minimum(base);
  nlohmann::json runs = nlohmann::json::array();
  std::printf("  no checkpoints: %.3f s (best of %d)\n", best_base, repeat);
  for (std::size_t k = 0; k < intervals.size(); ++k) {
    const double t = reprise::bench::median(with[k]);
    double visible = 0, durable_max = 0;
    std::uint64_t stored = 0;
    for (const auto& m : last[k].metrics) {
      visible += m.app_visible_seconds;
      durable_max = std::max(durable_max, m.durable_seconds);
      stored += m.bytes_dirty;
    }
    const double overhead = t / best_base - 1;
    std::printf(
        "  every %4d steps: %.3f s, overhead %+6.2f%%, %zu checkpoints, app-visible %.1f ms in all, "
        "%.0f MiB stored\n",
        intervals[k], t, 100 * overhead, last[k].metrics.size(), 1e3 * visible, stored / 1048576.0);
    runs.push_back({{"interval", intervals[k]},
                    {"seconds", t},
                    {"overhead", overhead},
                    {"checkpoints", last[k].metrics.size()},
                    {"app_visible_seconds", visible},
                    {"max_durable_seconds", durable_max},
                    {"bytes_stored", stored}});
  }
  nlohmann::json out = {{"kind", "overhead"},
                        {"ranks", ranks},
                        {"buddy_transfer", REPRISE_BENCH_MPI != 0},
                        {"machine", reprise::bench::machine()},
                        {"memory", device ? "device" : "host"},
                        {"nx", nx},
                        {"steps", steps},
                        {"repeat", repeat},
                        {"baseline_seconds", best_base},
                        {"identical_results", identical},
                        {"runs", runs}};
  if (rank == 0) reprise::bench::write_json(json_path, out);
  std::printf("results %s\n", identical ? "bit-identical to the loop without checkpoints" : "DIFFER");
  std::printf("wrote %s\n", json_path.c_str());
  return identical ? 0 : 1;
}
