// reprise-bench-log-snapshot: what the bytes logged since the last checkpoint add to the checkpoint's app-visible
// time (issue: memory budget and commit path, item 4).
//
//   REPRISE_RANKS_PER_NODE=1 scripts/mpirun.sh -n 2 -- reprise-bench-log-snapshot --json log-snapshot.json
//
// Ranks 0 and 1 are in different groups (rank 1 is also rank 0's buddy and ward on this layout). Every rank protects
// --bytes of host memory and changes every chunk of it between checkpoints. Before each checkpoint rank 0 sends
// --logged bytes to rank 1 in messages of --message bytes through reprise::Comm: inter-group, so every byte goes
// into rank 0's log and its log snapshot travels with rank 0's next version. The logged amounts are interleaved
// (one round of each, --repeat rounds, after --warm untimed ones: the log's segments and the version buffers reach
// their steady state), and each checkpoint waits for the previous one to be committed, so every round starts from
// the same state. Rank 0 reports the median app-visible time (the checkpoint() call) per amount and its ratio to
// the round without logged bytes: `visible_over_nolog_<amount>` (goal: at most 1.10). JSON "kind": "log_snapshot".
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_mpi.hpp"

namespace reprise::bench {
namespace {

int run(int argc, char** argv) {
  std::string bytes_text = "32M", message_text = "1M", json;
  std::vector<std::string> logged_texts = {"0", "1M", "16M", "64M"};
  int repeat = 7, warm = 6;
  CLI::App app{"reprise-bench-log-snapshot: checkpoint app-visible time against the bytes logged since the last one"};
  app.add_option("--bytes", bytes_text, "protected host bytes per rank, all changed between checkpoints (K/M/G)");
  app.add_option("--logged", logged_texts, "bytes rank 0 logs between checkpoints, one round each (K/M/G)");
  app.add_option("--message", message_text, "bytes per message (K/M)");
  app.add_option("--repeat", repeat, "timed rounds (medians are reported)")->check(CLI::PositiveNumber);
  app.add_option("--warm", warm, "untimed rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--json", json, "write the results here (rank 0)")->check(kWritableFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes"), message = parse_bytes(message_text, "--message");
  if (message == 0) throw UsageError("--message: must be at least 1 byte");
  std::vector<std::size_t> logged;
  for (const auto& t : logged_texts) logged.push_back(parse_bytes(t, "--logged"));
  if (std::find(logged.begin(), logged.end(), 0) == logged.end())
    throw UsageError("--logged: include 0, the round the others are compared with");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    MpiRuntime rt(MPI_COMM_WORLD);
    if (rt.restarted()) throw UsageError("reprise-bench-log-snapshot measures a failure-free run: start it afresh");
    Comm& c = rt.messages();
    const int me = rt.rank();
    if (rt.size() < 2 || c.group_of(0) == c.group_of(1))
      throw UsageError(
          "reprise-bench-log-snapshot needs ranks 0 and 1 in different groups: run 2 ranks with "
          "REPRISE_RANKS_PER_NODE=1");
    std::vector<unsigned char> data = touched_buffer(bytes, static_cast<unsigned>(me) + 1);
    rt.protect("data", data.data(), data.size(), MemorySpace::Host);
    std::vector<unsigned char> out = touched_buffer(message, 3), in = touched_buffer(message, 4);
    std::uint64_t version = 0;
    unsigned char stamp = 0;
    std::map<std::size_t, std::vector<double>> visible;
    std::map<std::size_t, std::vector<double>> held;  // rank 0's live logged bytes at its checkpoint
    for (int r = -warm; r < repeat; ++r) {
      for (const std::size_t amount : logged) {
        for (std::size_t sent = 0; sent < amount; sent += message) {
          const std::size_t n = std::min(message, amount - sent);
          out[sent / message % n] = static_cast<unsigned char>(sent / message);
          if (me == 0) c.send(out.data(), n, 1, 7);
          if (me == 1) c.recv(in.data(), n, 0, 7);
        }
        ++stamp;
        for (std::size_t k = 0; k < bytes; k += 4096) data[k] = stamp;  // every 4 KiB: every chunk changes
        const double held_now =
            static_cast<double>(nlohmann::json::parse(c.stats_json())["log_live_payload_bytes"].get<std::size_t>());
        rt.check(MPI_Barrier(rt.comm()));
        const auto t0 = Clock::now();
        rt.checkpoint(++version);
        const double v = since(t0);
        rt.wait();
        if (r < 0) continue;
        visible[amount].push_back(v);
        held[amount].push_back(held_now);
      }
    }
    if (me == 0) {
      const double base = median(visible[0]);
      nlohmann::json rows = nlohmann::json::array();
      double worst = 0;
      std::printf("%12s %14s %14s %10s  (rank 0, medians of %d)\n", "logged", "log_live", "visible_ms", "over_nolog",
                  repeat);
      for (const std::size_t amount : logged) {
        const double v = median(visible[amount]), ratio = v / base;
        worst = std::max(worst, ratio);
        std::printf("%12zu %14.0f %14.3f %10.3f\n", amount, median(held[amount]), v * 1e3, ratio);
        rows.push_back({{"logged_bytes", amount},
                        {"visible_seconds", visible[amount]},
                        {"visible_seconds_median", v},
                        {"log_live_payload_bytes_median", median(held[amount])},
                        {"visible_over_nolog", ratio}});
        if (amount > 0) print_key(("visible_over_nolog_" + std::to_string(amount >> 20) + "MiB").c_str(), ratio);
      }
      print_key("visible_over_nolog_max", worst);
      if (!json.empty())
        write_json(json, {{"kind", "log_snapshot"},
                          {"ranks", rt.size()},
                          {"bytes_per_rank", bytes},
                          {"message_bytes", message},
                          {"repeat", repeat},
                          {"warm", warm},
                          {"rounds", rows},
                          {"visible_over_nolog_max", worst},
                          {"machine", machine()}});
    }
    rt.finish();
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace reprise::bench

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-log-snapshot", reprise::bench::run, argc, argv);
}
