// reprise-bench-overhead: what checkpointing costs a compute loop. A Kokkos heat stencil (device memory with a
// CUDA Kokkos, host memory otherwise) runs the same steps without checkpoints and with a checkpoint every N
// steps, for several N, interleaved in one run. Each round runs every configuration once, one after the other;
// the overhead of an interval is the median over the rounds of (loop time with checkpoints / loop time without,
// same round) - 1, so a drift of the machine between rounds cancels. The final fields must be bit-identical.
//
// Where the time goes: each loop also counts the process's CPU seconds (every thread: the compute loop, the
// runtime's background and progress threads) and its minor page faults, and the run measures what a first touch
// of a page costs on this machine. On a node whose cores are all busy computing (2 ranks on this 2-core VM) the
// extra CPU of background work is extra loop time; first touches of the memory that stores new versions are
// part of it (1.5 to 9 us per 4 KiB page on this VM, depending on its host: 118 MiB is 0.05 to 0.27 s of a core).
//
// reprise-bench-overhead-mpi is the same program over MpiRuntime: every rank runs its own stencil (no messages)
// and each checkpoint also goes to the rank's buddy (host memory, progress thread) and is committed by its group;
// loop times are the slowest rank's. Run it through scripts/mpirun.sh, e.g. 2 ranks on 2 emulated nodes:
//   REPRISE_RANKS_PER_NODE=1 scripts/mpirun.sh -n 2 -- reprise-bench-overhead-mpi --nx 2048 --steps 200
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
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
  double cpu_seconds;  // of the whole process (mean over the ranks)
  double page_faults;  // minor faults of the whole process (mean over the ranks)
  std::uint64_t checksum;
  std::vector<reprise::CheckpointMetrics> metrics;
  // Where the versions' memory came from (rank 0): own versions packed into memory touched before, and (MPI)
  // the buddy's versions received into recycled buffers rather than fresh ones, counted over the timed loop.
  int warm_payloads = 0;
  long ward_reused = 0, ward_fresh = 0;
};

struct Usage {
  double cpu, faults;
};
Usage usage_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return {sec(u.ru_utime) + sec(u.ru_stime), double(u.ru_minflt)};
}

// Seconds per 4 KiB page of a first touch: a fresh 64 MiB allocation written once, page by page.
double first_touch_seconds_per_page() {
  constexpr std::size_t bytes = std::size_t(64) << 20, page = 4096;
  auto* p = static_cast<volatile unsigned char*>(std::aligned_alloc(page, bytes));
  if (!p) return 0;
  const auto t0 = reprise::bench::Clock::now();
  for (std::size_t off = 0; off < bytes; off += page) p[off] = 1;
  const double s = reprise::bench::since(t0);
  std::free(const_cast<unsigned char*>(p));
  const std::size_t pages = bytes / page;  // whole pages: the loop touched one byte of each
  return s / static_cast<double>(pages);
}

// `every` = 0: no runtime at all. `warm` steps run first, untimed (with the loop's checkpoints, their background
// work finished before the clock starts): what is left is the steady state of a long job, without the first
// chains' new memory.
Loop run(int nx, int steps, int every, int warm = 0) {
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
  // Checkpoints half an interval off the loop's ends (steps 13, 38, ... for every 25: steps / every of them), and
  // the clock stops once the last is durable: every checkpoint's background work (drain, buddy transfer, commit)
  // is inside the timed loop, as in a long job, not left to run after the clock stopped.
  auto steps_from = [&](int first, int last) {
    for (int s = first; s <= last; ++s) {
      reprise::heat::step(u, scratch);
      if (every && (s + every / 2) % every == 0) rt->checkpoint(static_cast<std::uint64_t>(s));
    }
  };
  steps_from(1, warm);
  Kokkos::fence();
  if (rt) rt->wait();
  const std::size_t warm_checkpoints = rt ? rt->metrics().size() : 0;
#if REPRISE_BENCH_MPI
  auto ward_buffers = [&] {  // {reused, fresh} so far
    if (!rt) return std::pair<long, long>{0, 0};
    const auto j = nlohmann::json::parse(static_cast<reprise::MpiRuntime&>(*rt).buddy_json())["receive_buffers"];
    return std::pair<long, long>{j["reused"].get<long>(), j["fresh"].get<long>()};
  };
  const auto ward0 = ward_buffers();
#endif
#if REPRISE_BENCH_MPI
  MPI_Barrier(MPI_COMM_WORLD);
#endif
  const Usage u0 = usage_now();
  const auto t0 = reprise::bench::Clock::now();
  steps_from(warm + 1, warm + steps);
  Kokkos::fence();
  if (rt) rt->wait();
  out.seconds = reprise::bench::since(t0);
  const Usage u1 = usage_now();
  out.cpu_seconds = u1.cpu - u0.cpu;
  out.page_faults = u1.faults - u0.faults;
#if REPRISE_BENCH_MPI
  MPI_Allreduce(MPI_IN_PLACE, &out.seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
  double per_rank[2] = {out.cpu_seconds, out.page_faults};
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Allreduce(MPI_IN_PLACE, per_rank, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  out.cpu_seconds = per_rank[0] / ranks;
  out.page_faults = per_rank[1] / ranks;
  const auto ward1 = ward_buffers();
  out.ward_reused = ward1.first - ward0.first;
  out.ward_fresh = ward1.second - ward0.second;
  if (rt) static_cast<reprise::MpiRuntime&>(*rt).finish();
#endif
  if (rt) {
    out.metrics = rt->metrics();
    out.metrics.erase(out.metrics.begin(), out.metrics.begin() + static_cast<std::ptrdiff_t>(warm_checkpoints));
    for (const auto& m : out.metrics) out.warm_payloads += m.payload_warm ? 1 : 0;
  }
  out.checksum = reprise::heat::fingerprint(u);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reprise-bench-overhead: compute-loop time with checkpoints every N steps vs without"};
  int nx = 4096, steps = 600, repeat = 3, warm = 0;
  std::vector<int> intervals = {25, 50, 100, 200};
  std::string json_path = "reprise-bench-overhead.json";
  app.add_option("--nx", nx, "grid is nx x nx doubles")->check(CLI::Range(16, 1 << 15));
  app.add_option("--steps", steps, "time steps per loop")->check(CLI::PositiveNumber);
  app.add_option("--intervals", intervals, "checkpoint every N steps, for each N")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "rounds; each runs every configuration once (medians reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warm-steps", warm,
                 "steps each loop runs first, untimed, with its checkpoints (the steady state of a long job: the "
                 "first versions' new memory is not timed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", json_path, "output file")->check(reprise::bench::kWritableFile);
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
  std::printf(
      "reprise-bench-overhead: %dx%d doubles (%.0f MiB, %s memory) per rank, %d rank(s)%s, %d steps, "
      "%d rounds%s\n",
      nx, nx, nx * double(nx) * 8 / (1 << 20), device ? "device" : "host", ranks,
      ranks > 1 ? " (checkpoints also to the buddy)" : "", steps, repeat,
      warm ? (", each after " + std::to_string(warm) + " untimed steps").c_str() : "");

  run(nx, steps / 10 + 1, 0);  // warm-up: first allocations, first kernel launches
  double touch = first_touch_seconds_per_page();
#if REPRISE_BENCH_MPI
  MPI_Allreduce(MPI_IN_PLACE, &touch, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  touch /= ranks;
#endif
  std::vector<Loop> base;
  std::vector<std::vector<Loop>> with(intervals.size());
  bool identical = true;
  for (int r = 0; r < repeat; ++r) {  // interleaved, so the machine's drifts hit every configuration alike
    base.push_back(run(nx, steps, 0, warm));
    for (std::size_t k = 0; k < intervals.size(); ++k) {
      with[k].push_back(run(nx, steps, intervals[k], warm));
      identical = identical && with[k].back().checksum == base.back().checksum;
    }
  }
  using reprise::bench::median;
  auto field = [](const std::vector<Loop>& loops, double Loop::*f) {
    std::vector<double> v;
    for (const Loop& l : loops) v.push_back(l.*f);
    return v;
  };
  const auto base_times = field(base, &Loop::seconds);
  const double base_seconds = median(base_times);
  const double base_cpu = median(field(base, &Loop::cpu_seconds));
  const double base_faults = median(field(base, &Loop::page_faults));
  std::printf("  first touch of a page: %.2f us\n", 1e6 * touch);
  std::printf("  no checkpoints: %.3f s (rounds %.3f..%.3f s); per rank %.2f s CPU, %.0f page faults\n", base_seconds,
              reprise::bench::minimum(base_times), *std::max_element(base_times.begin(), base_times.end()), base_cpu,
              base_faults);
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t k = 0; k < intervals.size(); ++k) {
    std::vector<double> ratios;  // same round: loop with checkpoints / loop without
    for (std::size_t r = 0; r < base.size(); ++r) ratios.push_back(with[k][r].seconds / base[r].seconds - 1);
    const double overhead = median(ratios);
    const double lo = reprise::bench::minimum(ratios), hi = *std::max_element(ratios.begin(), ratios.end());
    const double t = median(field(with[k], &Loop::seconds));
    const double extra_cpu = median(field(with[k], &Loop::cpu_seconds)) - base_cpu;
    const double extra_faults = median(field(with[k], &Loop::page_faults)) - base_faults;
    const Loop& last = with[k].back();
    double visible = 0, durable_max = 0;
    std::uint64_t stored = 0;
    for (const auto& m : last.metrics) {
      visible += m.app_visible_seconds;
      durable_max = std::max(durable_max, m.durable_seconds);
      stored += m.bytes_dirty;
    }
    // Per checkpoint, over every round (rank 0): the time checkpoint() blocked the loop, and from its entry until
    // the version was durable (with a buddy: held and checked by the buddy), what a job waits for before a
    // failure loses nothing.
    std::vector<double> visible_each, durable_each;
    for (const Loop& l : with[k])
      for (const auto& m : l.metrics) {
        visible_each.push_back(m.app_visible_seconds);
        durable_each.push_back(m.durable_seconds);
      }
    std::printf(
        "  every %4d steps: %.3f s, overhead %+6.2f%% (rounds %+.2f..%+.2f%%), %zu checkpoints, app-visible %.1f ms "
        "in all, %.0f MiB stored\n"
        "      per rank, over the loop without: %+.3f s CPU, %+.0f page faults (%.3f s of first touches)\n"
        "      per checkpoint (rank 0, every round): app-visible %.2f ms, durable after %.2f ms (medians)\n"
        "      memory (rank 0, last round): %d of %zu versions packed into memory touched before%s\n",
        intervals[k], t, 100 * overhead, 100 * lo, 100 * hi, last.metrics.size(), 1e3 * visible, stored / 1048576.0,
        extra_cpu, extra_faults, extra_faults * touch, 1e3 * median(visible_each), 1e3 * median(durable_each),
        last.warm_payloads, last.metrics.size(),
        REPRISE_BENCH_MPI ? ("; the buddy's received into " + std::to_string(last.ward_reused) + " recycled and " +
                             std::to_string(last.ward_fresh) + " new buffers")
                                .c_str()
                          : "");
    runs.push_back({{"interval", intervals[k]},
                    {"seconds", t},
                    {"overhead", overhead},
                    {"overhead_rounds", ratios},
                    {"checkpoints", last.metrics.size()},
                    {"app_visible_seconds", visible},
                    {"max_durable_seconds", durable_max},
                    {"median_app_visible_seconds", median(visible_each)},
                    {"median_durable_seconds", median(durable_each)},
                    {"bytes_stored", stored},
                    {"extra_cpu_seconds_per_rank", extra_cpu},
                    {"extra_page_faults_per_rank", extra_faults},
                    {"warm_payloads_rank0", last.warm_payloads},
                    {"ward_buffers_reused_rank0", last.ward_reused},
                    {"ward_buffers_fresh_rank0", last.ward_fresh}});
  }
  nlohmann::json out = {{"kind", "overhead"},
                        {"ranks", ranks},
                        {"buddy_transfer", REPRISE_BENCH_MPI != 0},
                        {"machine", reprise::bench::machine()},
                        {"memory", device ? "device" : "host"},
                        {"nx", nx},
                        {"steps", steps},
                        {"warm_steps", warm},
                        {"repeat", repeat},
                        {"baseline_seconds", base_seconds},
                        {"baseline_cpu_seconds_per_rank", base_cpu},
                        {"baseline_page_faults_per_rank", base_faults},
                        {"first_touch_seconds_per_page", touch},
                        {"identical_results", identical},
                        {"runs", runs}};
  if (rank == 0) reprise::bench::write_json(json_path, out);
  std::printf("results %s\n", identical ? "bit-identical to the loop without checkpoints" : "DIFFER");
  std::printf("wrote %s\n", json_path.c_str());
  return identical ? 0 : 1;
}
