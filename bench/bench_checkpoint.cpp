// reprise-bench-checkpoint: app-visible checkpoint time and bytes stored at dirty ratios 0, 1, 5, 25, 100% of one
// host region, against a blocking full copy of the same region measured in the same run.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "bench_common.hpp"
#include "reprise/reprise.hpp"

using namespace reprise;

int main(int argc, char** argv) {
  CLI::App app{"reprise-bench-checkpoint: app-visible checkpoint time vs dirty ratio (host memory)"};
  std::string bytes_text = "1G", json_path = "reprise-bench-checkpoint.json";
  std::vector<double> ratios = {0, 1, 5, 25, 100};
  int repeat = 5;
  unsigned threads = 2;
  app.add_option("--bytes", bytes_text, "region size (K/M/G suffixes)");
  app.add_option("--ratios", ratios, "dirty ratios in percent");
  app.add_option("--repeat", repeat, "repetitions per ratio (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "digest threads (REPRISE_DIGEST_THREADS)")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "output file");
  CLI11_PARSE(app, argc, argv);
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes");

  Config cfg;
  cfg.digest_threads = threads;
  // Versions alternate full / differential and one chain is kept: memory stays bounded, and every timed
  // checkpoint is a differential one taken right after an untimed full one.
  cfg.full_every = 2;
  cfg.keep_chains = 1;
  const std::size_t chunk = cfg.chunk_bytes, n_chunks = (bytes + chunk - 1) / chunk;

  std::vector<unsigned char> region(bytes), copy(bytes);
  for (std::size_t i = 0; i < bytes; ++i) region[i] = static_cast<unsigned char>(i * 2654435761u >> 11);
  std::memset(copy.data(), 0, bytes);  // touched: a first touch costs a page fault per 4 KiB here

  std::vector<double> base;
  for (int r = 0; r < repeat; ++r) {
    const auto t = bench::Clock::now();
    std::memcpy(copy.data(), region.data(), bytes);
    base.push_back(bench::since(t));
  }
  const double baseline = bench::median(base);

  Runtime rt(cfg);
  rt.protect("region", region.data(), bytes, MemorySpace::Host);
  std::uint64_t version = 0;
  rt.checkpoint(++version);
  rt.wait();
  unsigned char stamp = 1;
  nlohmann::json runs = nlohmann::json::array();
  std::printf("reprise-bench-checkpoint: %zu MiB host region, chunks of %zu KiB, %u digest threads, median of %d\n",
              bytes >> 20, chunk >> 10, threads, repeat);
  std::printf("  blocking full copy (baseline): %.3f ms\n", 1e3 * baseline);
  std::map<double, std::pair<double, std::uint64_t>> by_ratio;
  for (double ratio : ratios) {
    std::vector<double> visible, durable, digest, pack;
    std::uint64_t stored = 0;
    for (int r = 0; r < repeat; ++r) {
      if (version % 2 == 0) {  // the next version would be full: take it untimed
        rt.checkpoint(++version);
        rt.wait();
      }
      const std::size_t dirty = static_cast<std::size_t>(n_chunks * ratio / 100.0 + 0.5);
      ++stamp;
      for (std::size_t k = 0; k < dirty; ++k) region[(dirty == n_chunks ? k : k * n_chunks / dirty) * chunk] = stamp;
      const auto t = bench::Clock::now();
      rt.checkpoint(++version);
      visible.push_back(bench::since(t));
      rt.wait();
      const CheckpointMetrics m = rt.metrics().back();
      if (m.full) return 3;
      durable.push_back(m.durable_seconds);
      digest.push_back(m.digest.seconds);
      pack.push_back(m.pack.seconds);
      stored = m.bytes_dirty;
    }
    const double v = bench::median(visible);
    by_ratio[ratio] = {v, stored};
    runs.push_back({{"dirty_percent", ratio},
                    {"bytes_stored", stored},
                    {"visible_seconds", v},
                    {"visible_best_seconds", bench::minimum(visible)},
                    {"digest_seconds", bench::median(digest)},
                    {"pack_seconds", bench::median(pack)},
                    {"durable_seconds", bench::median(durable)},
                    {"visible_over_baseline", v / baseline}});
    std::printf(
        "  %5.1f%% dirty: visible %8.3f ms (digest %7.3f, pack %7.3f) durable %8.3f ms, stored %8.1f MiB, "
        "visible/baseline %.3f\n",
        ratio, 1e3 * v, 1e3 * bench::median(digest), 1e3 * bench::median(pack), 1e3 * bench::median(durable),
        stored / 1048576.0, v / baseline);
  }
  nlohmann::json out = {{"kind", "checkpoint"},
                        {"machine", bench::machine()},
                        {"bytes", bytes},
                        {"chunk_bytes", chunk},
                        {"digest_threads", threads},
                        {"repeat", repeat},
                        {"baseline_seconds", baseline},
                        {"runs", runs}};
  if (by_ratio.count(5) && by_ratio.count(100)) {
    out["visible_5pct_over_100pct"] = by_ratio[5].first / by_ratio[100].first;
    out["bytes_5pct_over_100pct"] = double(by_ratio[5].second) / double(by_ratio[100].second);
    out["visible_100pct_over_baseline"] = by_ratio[100].first / baseline;
    std::printf("visible_5pct_over_100pct %.3f\n", out["visible_5pct_over_100pct"].get<double>());
    std::printf("bytes_5pct_over_100pct %.3f\n", out["bytes_5pct_over_100pct"].get<double>());
    std::printf("visible_100pct_over_baseline %.3f\n", out["visible_100pct_over_baseline"].get<double>());
  }
  bench::write_json(json_path, out);
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
