// reprise-bench-commit: how long a checkpoint takes to be committed in the buddies' host memory, against the bytes
// of the version (issue: memory budget and commit path, item 7).
//
//   REPRISE_RANKS_PER_NODE=2 scripts/mpirun.sh -n 4 -- reprise-bench-commit --bytes 256M --json commit.json
//
// Every rank protects --bytes of host memory. For each share of the data changed between checkpoints (--shares, in
// percent of the chunks), it takes --repeat back-to-back checkpoints, no compute between them, after --warm untimed
// ones (default: enough for the chains kept to be replaced once, full_every x keep_chains + 1, so that the pools hold
// buffers of every size the versions need: the steady state), and times for each, from a common start (a barrier),
// the app-visible part (the checkpoint() call) and when wait() returned, which under MpiRuntime is once the version
// is in the buddy's memory and the group committed it; both the slowest rank's. The commit latency is the second
// minus the first: committed minus visible, the time the commit took after the last rank's checkpoint() returned
// (ranks whose checkpoint() returns early wait for their group's others, which is app-visible time, not the commit
// path: 4 ranks on 2 cores returned up to 37 ms apart). `commit_wait_seconds`: the longest wait() of one rank,
// from its own checkpoint()'s return (the measure before 2026-11-29, skew included). Medians are reported. The
// transfer model of a version: its stored bytes over the MPI bandwidth between buddies measured in the same run (every
// rank sends --bytes to its buddy and receives from its ward at once, best of 3). Goal: commit latency at most the
// model plus 5 ms. Rank 0 prints `key value` lines (commit_latency_5pct_seconds, commit_latency_100pct_seconds,
// transfer_seconds_model, ...) and writes the JSON ("kind": "commit"; bench/plot.py draws it). --gap-ms G leaves the
// host idle G ms after each commit (an application computing on its GPU): REPRISE_DIR's files, written in the
// background, catch up there; with G = 0 (back to back) the disk's bandwidth bounds every checkpoint.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_mpi.hpp"

namespace reprise::bench {
namespace {

int run(int argc, char** argv) {
  std::string bytes_text = "64M", json;
  std::vector<int> shares{5, 100};
  int repeat = 10, warm = -1, gap_ms = 0;
  CLI::App app{"reprise-bench-commit: commit latency of back-to-back checkpoints against the version's bytes"};
  app.add_option("--bytes", bytes_text, "protected bytes per rank (K/M/G suffixes)");
  app.add_option("--shares", shares, "percent of the chunks changed between checkpoints")->check(CLI::Range(1, 100));
  app.add_option("--repeat", repeat, "timed checkpoints per share")->check(CLI::PositiveNumber);
  app.add_option("--warm", warm, "untimed checkpoints per share first (default: full_every x keep_chains + 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gap-ms", gap_ms,
                 "milliseconds between a commit and the next checkpoint, the host idle (the application computing on "
                 "its GPU): background work such as REPRISE_DIR's files catches up there")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", json, "write the results here (rank 0)")->check(kWritableFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    MpiRuntime rt(MPI_COMM_WORLD);
    if (rt.restarted()) throw UsageError("reprise-bench-commit measures a failure-free run: start it afresh");
    const std::size_t chunk = rt.config().chunk_bytes, chunks = (bytes + chunk - 1) / chunk;
    if (warm < 0) warm = static_cast<int>(rt.config().full_every * std::max(1u, rt.config().keep_chains) + 1);
    std::vector<unsigned char> data = touched_buffer(bytes, static_cast<unsigned>(rt.rank()) + 1);
    rt.protect("data", data.data(), data.size(), MemorySpace::Host);
    std::vector<unsigned char> in = touched_buffer(bytes, 7);  // (buddy transfers: what the ward sends)
    const double bandwidth = buddy_bandwidth(rt, data, 3, &in);
    nlohmann::json results = nlohmann::json::array();
    std::uint64_t version = 0;
    unsigned char stamp = 0;
    for (const int share : shares) {
      std::vector<double> visible, committed, waited, model, stored;
      int cold = 0;
      for (int i = 0; i < warm + repeat; ++i) {
        // `share` percent of the chunks, spread over the region, changed by one byte each.
        const std::size_t changed = std::max<std::size_t>(1, chunks * static_cast<std::size_t>(share) / 100);
        ++stamp;
        for (std::size_t k = 0; k < changed; ++k) data[(k * chunks / changed) * chunk] = stamp;
        rt.check(MPI_Barrier(rt.comm()));
        const auto t0 = Clock::now();
        rt.checkpoint(++version);
        const double v = since(t0);
        const auto t1 = Clock::now();
        rt.wait();
        const double c = since(t1), committed_at = since(t0);
        const double v_max = slowest(rt, v), c_max = slowest(rt, c), committed_max = slowest(rt, committed_at);
        if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
        if (i < warm) continue;
        const CheckpointMetrics m = rt.metrics().back();
        double s = static_cast<double>(m.store.bytes);
        rt.check(MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, rt.comm()));
        visible.push_back(v_max);
        committed.push_back(committed_max - v_max);
        waited.push_back(c_max);
        stored.push_back(s);
        model.push_back(s / bandwidth);
        cold += m.payload_warm ? 0 : 1;
      }
      rt.check(MPI_Allreduce(MPI_IN_PLACE, &cold, 1, MPI_INT, MPI_SUM, rt.comm()));
      // The same bytes moved by MPI alone, right after the checkpoints they are compared with (the machine's
      // bandwidth moves from minute to minute): `repeat` transfers of the median version's bytes, every rank to
      // its buddy at once, each timed on the slowest rank, after the runtime finished its background work.
      rt.wait();
      std::vector<double> transfer;
      const std::size_t moved = std::min(data.size(), static_cast<std::size_t>(median(stored)));
      for (int i = 0; i < repeat; ++i) transfer.push_back(buddy_transfer_seconds(rt, data, moved, in));
      results.push_back({{"share_percent", share},
                         {"visible_seconds", visible},
                         {"commit_latency_seconds", committed},
                         {"commit_wait_seconds", waited},
                         {"transfer_seconds_model", model},
                         {"transfer_seconds", transfer},
                         {"transfer_seconds_median", median(transfer)},
                         {"commit_over_transfer_seconds", median(committed) - median(transfer)},
                         {"stored_bytes", stored},
                         {"visible_seconds_median", median(visible)},
                         {"commit_latency_seconds_median", median(committed)},
                         {"commit_wait_seconds_median", median(waited)},
                         {"transfer_seconds_model_median", median(model)},
                         {"stored_bytes_median", median(stored)},
                         {"cold_payloads", cold}});
    }
    if (rt.rank() == 0) {
      for (const auto& r : results) {
        const std::string pct = std::to_string(r["share_percent"].get<int>()) + "pct";
        print_key(("visible_" + pct + "_seconds").c_str(), r["visible_seconds_median"].get<double>());
        print_key(("commit_latency_" + pct + "_seconds").c_str(), r["commit_latency_seconds_median"].get<double>());
        print_key(("commit_wait_" + pct + "_seconds").c_str(), r["commit_wait_seconds_median"].get<double>());
        print_key(("transfer_seconds_model_" + pct).c_str(), r["transfer_seconds_model_median"].get<double>());
        print_key(("transfer_" + pct + "_seconds").c_str(), r["transfer_seconds_median"].get<double>());
        print_key(("commit_over_transfer_" + pct + "_seconds").c_str(),
                  r["commit_over_transfer_seconds"].get<double>());
        std::printf("cold_payloads_%s %d\n", pct.c_str(), r["cold_payloads"].get<int>());
      }
      // The largest version's model: the headline the issue names.
      double model_max = 0;
      for (const auto& r : results) model_max = std::max(model_max, r["transfer_seconds_model_median"].get<double>());
      print_key("transfer_seconds_model", model_max);
      print_key("buddy_mpi_gbps", bandwidth / 1e9);
      if (!json.empty())
        write_json(json, {{"kind", "commit"},
                          {"ranks", rt.size()},
                          {"bytes_per_rank", bytes},
                          {"chunk_bytes", chunk},
                          {"repeat", repeat},
                          {"warm", warm},
                          {"gap_ms", gap_ms},
                          {"persistent_dir", !rt.config().dir.empty()},
                          {"buddy_mpi_gbps", bandwidth / 1e9},
                          {"transfer_seconds_model", model_max},
                          {"shares", results},
                          {"machine", machine()}});
    }
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace reprise::bench

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-commit", reprise::bench::run, argc, argv);
}
