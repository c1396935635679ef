// reprise-bench-checkpoint: app-visible checkpoint time and bytes stored at dirty ratios 0, 1, 5, 25, 100% of one
// host region (memory store), against a blocking full copy of the same region measured in the same run.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <vector>

#include "bench_common.hpp"
#include "reprise/reprise.hpp"

namespace {

using namespace reprise;

std::uint64_t peak_rss_bytes() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return std::uint64_t(u.ru_maxrss) * 1024;
}

// Changes one byte in `dirty` chunks spread evenly over the region (every chunk when dirty == n_chunks). Each
// byte gets a value it did not hold, so each chosen chunk's digest differs from the previous version's.
void dirty_chunks(std::vector<unsigned char>& region, std::size_t chunk, std::size_t n_chunks, std::size_t dirty) {
  for (std::size_t k = 0; k < dirty; ++k) {
    const std::size_t c = k * n_chunks / dirty;
    unsigned char& b = region[c * chunk + (k * 977) % std::min(chunk, region.size() - c * chunk)];
    b = static_cast<unsigned char>(b + 1);
  }
}

struct RatioResult {
  double visible = 0;
  std::uint64_t bytes = 0;
};

int run(int argc, char** argv) {
  CLI::App app{"reprise-bench-checkpoint: app-visible checkpoint time vs dirty ratio (host memory)"};
  std::string bytes_text = "1G", json_path = "reprise-bench-checkpoint.json";
  std::vector<double> ratios = {0, 1, 5, 25, 100};
  int repeat = 5;
  unsigned threads = 2, full_every = 1000, keep_chains = 1;
  app.add_option("--bytes", bytes_text, "region size (suffixes K, M, G: 64M, 1G)")->capture_default_str();
  app.add_option("--ratios", ratios, "dirty ratios in percent")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  app.add_option("--repeat", repeat, "timed checkpoints per ratio, and baseline copies (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "Config::digest_threads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--full-every", full_every, "Config::full_every (a due full version is taken untimed)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--keep-chains", keep_chains, "Config::keep_chains")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", json_path, "output file")->capture_default_str()->check(reprise::bench::kWritableFile);
  CLI11_PARSE(app, argc, argv);
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes");
  if (full_every < 2) throw ConfigError("--full-every must be at least 2: the timed checkpoints are differential");

  Config cfg;  // memory store (dir empty), default chunk size
  cfg.digest_threads = threads;
  cfg.full_every = full_every;
  cfg.keep_chains = keep_chains;
  cfg.validate();
  const std::size_t chunk = cfg.chunk_bytes, n_chunks = (bytes + chunk - 1) / chunk;
  if (bytes < chunk) throw ConfigError("--bytes must be at least one chunk (" + std::to_string(chunk) + " bytes)");

  std::printf(
      "reprise-bench-checkpoint: %.1f MiB host region, chunks of %zu KiB, %u digest threads, full_every %u, "
      "keep_chains %u, median of %d\n",
      bytes / 1048576.0, chunk >> 10, threads, full_every, keep_chains, repeat);
  std::fflush(stdout);
  std::vector<unsigned char> region = bench::touched_buffer(bytes, 11);

  // Baseline: what a blocking checkpoint costs at least, one copy of the region into memory already touched.
  std::vector<double> base;
  {
    std::vector<unsigned char> copy = bench::touched_buffer(bytes, 5);
    for (int r = 0; r < repeat; ++r) {
      const auto t = bench::Clock::now();
      std::memcpy(copy.data(), region.data(), bytes);
      base.push_back(bench::since(t));
    }
    if (std::memcmp(copy.data(), region.data(), bytes) != 0) throw std::runtime_error("baseline copy differs");
  }  // released: the versions below need the memory
  const double baseline = bench::median(base);
  std::printf("  blocking full copy (baseline): %8.3f ms median, %8.3f ms min\n", 1e3 * baseline,
              1e3 * bench::minimum(base));

  nlohmann::json runs = nlohmann::json::array();
  std::map<double, RatioResult> by_ratio;
  for (double ratio : ratios) {
    // One Runtime per ratio: its memory store holds one chain (a full version and `repeat` differentials), so
    // memory stays bounded by (2 + repeat) region sizes (at 100% dirty every version is a full one of its own, and
    // keep_chains of them are kept). Warm-up: one full version, untimed.
    Runtime rt(cfg);
    rt.protect("region", region.data(), bytes, MemorySpace::Host);
    std::uint64_t version = 0;
    rt.checkpoint(++version);
    rt.wait();
    unsigned since_full = 0;  // differentials since the last full version (the runtime's chain index)
    const std::size_t dirty = ratio >= 100 ? n_chunks : static_cast<std::size_t>(std::lround(n_chunks * ratio / 100.0));

    std::vector<double> visible, durable, digest, pack, store;
    std::uint64_t stored = 0;
    for (int r = 0; r < repeat; ++r) {
      if (since_full + 1 >= full_every) {  // the next version would be full: take it untimed
        rt.checkpoint(++version);
        rt.wait();
        since_full = 0;
      }
      dirty_chunks(region, chunk, n_chunks, dirty);
      const auto t = bench::Clock::now();
      rt.checkpoint(++version);
      visible.push_back(bench::since(t));
      rt.wait();
      const CheckpointMetrics m = rt.metrics().back();
      // A version in which nearly every chunk changed is stored as a full one (Config::full_at_dirty_percent): its
      // chain starts over.
      if (m.version != version || m.full != m.promoted)
        throw std::runtime_error("version " + std::to_string(version) + " was expected to be differential");
      since_full = m.full ? 0 : since_full + 1;
      durable.push_back(m.durable_seconds);
      digest.push_back(m.digest.seconds);
      pack.push_back(m.pack.seconds);
      store.push_back(m.store.seconds);
      stored = m.bytes_dirty;
      if (m.chunks_dirty != (m.promoted ? n_chunks : dirty))
        throw std::runtime_error(std::to_string(m.chunks_dirty) + " chunks found dirty, " + std::to_string(dirty) +
                                 " were modified");
    }
    const double v = bench::median(visible);
    by_ratio[ratio] = {v, stored};
    runs.push_back({{"dirty_percent", ratio},
                    {"chunks_dirty", dirty},
                    {"bytes_stored", stored},
                    {"visible_seconds", v},
                    {"visible_min_seconds", bench::minimum(visible)},
                    {"digest_seconds", bench::median(digest)},
                    {"pack_seconds", bench::median(pack)},
                    {"store_seconds", bench::median(store)},
                    {"durable_seconds", bench::median(durable)},
                    {"visible_over_baseline", v / baseline}});
    std::printf(
        "  %5.1f%% dirty: visible %8.3f ms (digest %7.3f, pack %7.3f), durable %8.3f ms, stored %8.1f MiB, "
        "visible/baseline %.3f\n",
        ratio, 1e3 * v, 1e3 * bench::median(digest), 1e3 * bench::median(pack), 1e3 * bench::median(durable),
        stored / 1048576.0, v / baseline);
    std::fflush(stdout);
  }

  nlohmann::json out = {{"kind", "checkpoint"},
                        {"machine", bench::machine()},
                        {"bytes", bytes},
                        {"chunk_bytes", chunk},
                        {"digest_threads", threads},
                        {"full_every", full_every},
                        {"keep_chains", keep_chains},
                        {"store", "memory"},
                        {"repeat", repeat},
                        {"baseline_seconds", baseline},
                        {"baseline_min_seconds", bench::minimum(base)},
                        {"peak_rss_bytes", peak_rss_bytes()},
                        {"note",
                         "visible = wall time of checkpoint(); durable, digest, pack, store from the runtime's "
                         "metrics; medians over `repeat` differential checkpoints per ratio, each ratio in its own "
                         "Runtime after an untimed full one; baseline = memcpy of the region into a touched buffer"},
                        {"runs", runs}};
  auto headline = [&](const char* key, double value) {
    out[key] = value;
    bench::print_key(key, value);
  };
  if (by_ratio.count(5) && by_ratio.count(100)) {
    headline("visible_5pct_over_100pct", by_ratio[5].visible / by_ratio[100].visible);
    headline("bytes_5pct_over_100pct", double(by_ratio[5].bytes) / double(by_ratio[100].bytes));
  } else {
    std::printf("(5%% and 100%% are not both in --ratios: no 5%%/100%% ratios)\n");
  }
  if (by_ratio.count(100)) headline("visible_100pct_over_baseline", by_ratio[100].visible / baseline);
  bench::write_json(json_path, out);
  std::printf("peak memory %.2f GiB; wrote %s\n", peak_rss_bytes() / 1073741824.0, json_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-checkpoint", run, argc, argv);
}
