// reprise-bench-recovery: what a process failure costs, phase by phase, on real MPI processes and a real SIGKILL.
//
//   REPRISE_RANKS_PER_NODE=2 scripts/mpirun.sh -n 4 -- reprise-bench-recovery --bytes 256M --json recovery.json
//
// 1. Loopback MPI bandwidth between each rank and its buddy (Isend/Irecv of --bytes, best of --repeat): the
//    ceiling of a buddy transfer on this machine.
// 2. Buddy transfer: every rank protects --bytes of host memory, checkpoints, and waits until its buddy
//    acknowledged the version; GB/s = bytes / (checkpoint start -> acknowledgement).
// 3. Failure: rank --victim SIGKILLs itself after a barrier; the survivors time their next MPI call until it
//    reports the failure (detect), the runtime's repair (shrink, spawn, merge) and data phases (the replacement's
//    chain from its buddy, chains re-shipped to a replaced buddy), and restore().
// Rank 0 prints `key value` lines and writes the JSON. --victim must not be 0 (rank 0 reports).
#include <mpi.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "bench/bench_mpi.hpp"

namespace reprise::bench {
namespace {

double now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

int run(int argc, char** argv) {
  std::string bytes_text = "64M", json;
  int victim = 1, repeat = 3;
  CLI::App app{"reprise-bench-recovery: detection, repair, buddy fetch and restore times after a SIGKILL"};
  app.add_option("--bytes", bytes_text, "protected bytes per rank (K/M/G suffixes)");
  app.add_option("--victim", victim, "rank that SIGKILLs itself (not 0)");
  app.add_option("--repeat", repeat, "loopback bandwidth repeats (best is kept)");
  app.add_option("--json", json, "write the results here (rank 0)")->check(reprise::bench::kWritableFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    MpiRuntime rt(MPI_COMM_WORLD);
    const int rank = rt.rank(), size = rt.size();
    if (victim <= 0 || victim >= size) throw UsageError("--victim must be a rank other than 0");
    // A replacement starts from zeros: only restore() can give it back its pattern.
    std::vector<unsigned char> data =
        rt.restarted() ? std::vector<unsigned char>(bytes, 0) : touched_buffer(bytes, static_cast<unsigned>(rank) + 1);
    rt.protect("data", data.data(), data.size(), MemorySpace::Host);
    double loopback = 0, transfer = 0, detect = 0, restore_s = 0;
    std::uint64_t step = 0;
    rt.protect("step", &step);
    if (!rt.restarted()) {
      // 1. Loopback: every rank sends to its buddy and receives from its ward at once.
      loopback = buddy_bandwidth(rt, data, repeat) / 1e9;
      // 2. Buddy transfer of a full version.
      rt.check(MPI_Barrier(rt.comm()));
      step = 1;
      const double t0 = now();
      rt.checkpoint(1);
      while (rt.acknowledged() != 1u) std::this_thread::sleep_for(std::chrono::microseconds(100));
      double t = now() - t0;
      rt.check(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, rt.comm()));
      transfer = static_cast<double>(bytes) / t / 1e9;
      rt.wait();  // committed
      // 3. The failure.
      rt.check(MPI_Barrier(rt.comm()));
      if (rank == victim) raise(SIGKILL);
      const double t1 = now();
      const int brc = MPI_Barrier(rt.comm());
      detect = now() - t1;
      try {
        rt.check(brc);
        throw Error("the barrier after the kill succeeded: the failure was not detected");
      } catch (const Rollback&) {
        const double t2 = now();
        rt.restore();
        restore_s = now() - t2;
      }
    } else {
      const double t2 = now();
      rt.restore();
      restore_s = now() - t2;
    }
    // Everyone (the replacement too) meets here: gather the phases on rank 0.
    const nlohmann::json rec = nlohmann::json::parse(rt.recovery_json());
    double phases[4] = {detect, restore_s, 0, 0};
    double bytes_moved = 0;
    for (const auto& r : rec) {
      phases[2] = std::max(phases[2], r.value("repair_seconds", 0.0));
      phases[3] = std::max(phases[3], r.value("transfer_seconds", 0.0));
      bytes_moved += r.value("bytes_sent", 0.0);
    }
    rt.check(MPI_Allreduce(MPI_IN_PLACE, phases, 4, MPI_DOUBLE, MPI_MAX, rt.comm()));
    rt.check(MPI_Allreduce(MPI_IN_PLACE, &bytes_moved, 1, MPI_DOUBLE, MPI_SUM, rt.comm()));
    const bool intact = std::all_of(data.begin(), data.end(), [&, i = std::size_t{0}](unsigned char c) mutable {
      const std::size_t k = i++;
      return c == (k % 64 ? 0 : static_cast<unsigned char>((k >> 6) * 2654435761u >> ((rank + 1) % 24)));
    });
    int all_intact = intact ? 1 : 0;
    rt.check(MPI_Allreduce(MPI_IN_PLACE, &all_intact, 1, MPI_INT, MPI_MIN, rt.comm()));
    const std::string placements = rt.placements_json();  // every rank is here, the replacement too
    if (rank == 0) {
      nlohmann::json j = {{"benchmark", "recovery"},
                          {"machine", machine()},
                          {"ranks", size},
                          {"victim", victim},
                          {"bytes_per_rank", bytes},
                          {"loopback_mpi_gbps", loopback},
                          {"buddy_transfer_gbps", transfer},
                          {"buddy_over_loopback", loopback > 0 ? transfer / loopback : 0},
                          {"detect_seconds", phases[0]},
                          {"repair_seconds", phases[2]},
                          {"fetch_seconds", phases[3]},
                          {"restore_seconds", phases[1]},
                          {"bytes_moved", bytes_moved},
                          {"data_intact", all_intact == 1},
                          {"recoveries_rank0", rec},
                          {"placements", nlohmann::json::parse(placements)}};
      print_key("loopback_mpi_gbps", loopback);
      print_key("buddy_transfer_gbps", transfer);
      print_key("buddy_over_loopback", loopback > 0 ? transfer / loopback : 0);
      print_key("detect_seconds", phases[0]);
      print_key("repair_seconds", phases[2]);
      print_key("fetch_seconds", phases[3]);
      print_key("restore_seconds", phases[1]);
      print_key("bytes_moved_mib", bytes_moved / 1048576.0);
      std::printf("data_intact %s\n", all_intact ? "yes" : "NO");
      if (!json.empty()) write_json(json, j);
    }
    if (!all_intact) rc = 1;
  }
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace reprise::bench

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-recovery", reprise::bench::run, argc, argv);
}
