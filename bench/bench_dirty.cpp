// reprise-bench-dirty: host dirty-tracking throughput. On the same buffer, side by side in one run: the XXH3
// chunk digest with one thread against memcpy with one thread into a second buffer (the cost of simply copying
// everything), plus the digest with several threads and the Lanes64 host twin for reference.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "bench_common.hpp"
#include "core/host_tracker.hpp"
#include "core/work_pool.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/config.hpp"
#include "reprise/errors.hpp"

namespace {

using namespace reprise;

int run(int argc, char** argv) {
  CLI::App app{"reprise-bench-dirty: host chunk digest throughput vs memcpy on the same buffer"};
  std::string bytes_text = "1G", chunk_text = "64K", json_path = "reprise-bench-dirty.json";
  int repeat = 5;
  unsigned threads = 2;
  app.add_option("--bytes", bytes_text, "buffer size (suffixes K, M, G: 64M, 1G)")->capture_default_str();
  app.add_option("--chunk", chunk_text, "chunk size")->capture_default_str();
  app.add_option("--repeat", repeat, "repetitions (median and min reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "threads of the multi-threaded digest (the runtime's digest_threads)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", json_path, "output file")->capture_default_str()->check(reprise::bench::kWritableFile);
  CLI11_PARSE(app, argc, argv);
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes"), chunk = parse_bytes(chunk_text, "--chunk");
  if (bytes == 0 || chunk == 0) throw ConfigError("--bytes and --chunk must be positive");
  const std::size_t n = kernels::chunk_count(bytes, chunk);

  std::printf("reprise-bench-dirty: %.1f MiB, chunks of %zu KiB, %d repetitions; touching the buffers...\n",
              bytes / 1048576.0, chunk >> 10, repeat);
  std::fflush(stdout);
  const std::vector<unsigned char> src = bench::touched_buffer(bytes, 13);
  std::vector<unsigned char> dst = bench::touched_buffer(bytes, 7);
  std::vector<std::uint64_t> digests(n);
  core::WorkPool one(1), many(threads);

  std::vector<double> t_digest1, t_memcpy, t_digest_n, t_lanes;
  auto time_digest1 = [&] {
    const auto t = bench::Clock::now();
    core::xxh3_chunk_digests(src.data(), bytes, chunk, digests.data(), one);
    t_digest1.push_back(bench::since(t));
  };
  auto time_memcpy = [&] {
    const auto t = bench::Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    t_memcpy.push_back(bench::since(t));
  };
  for (int r = 0; r < repeat; ++r) {
    // The two compared passes alternate which goes first, so neither always finds the other's cache state.
    if (r % 2 == 0) {
      time_digest1();
      time_memcpy();
    } else {
      time_memcpy();
      time_digest1();
    }
    auto t = bench::Clock::now();
    core::xxh3_chunk_digests(src.data(), bytes, chunk, digests.data(), many);
    t_digest_n.push_back(bench::since(t));
    t = bench::Clock::now();
    kernels::digest_chunks_host(src.data(), bytes, chunk, digests.data());
    t_lanes.push_back(bench::since(t));
  }
  if (std::memcmp(dst.data(), src.data(), bytes) != 0) throw std::runtime_error("memcpy produced a different buffer");

  struct Row {
    std::string name, label;
    const std::vector<double>* t;
  };
  const std::string many_name = "xxh3_" + std::to_string(threads) + (threads == 1 ? "thread" : "threads");
  const std::vector<Row> rows = {{"xxh3_1thread", "xxh3 digest, 1 thread", &t_digest1},
                                 {"memcpy_1thread", "memcpy, 1 thread", &t_memcpy},
                                 {many_name, "xxh3 digest, " + std::to_string(threads) + " threads", &t_digest_n},
                                 {"lanes64_twin_1thread", "lanes64 host twin, 1 thread", &t_lanes}};
  auto gbps = [&](double seconds) { return seconds > 0 ? double(bytes) / seconds * 1e-9 : 0.0; };
  nlohmann::json results = nlohmann::json::object();
  for (const Row& row : rows) {
    const double med = bench::median(*row.t), best = bench::minimum(*row.t);
    results[row.name] = {{"median_s", med}, {"min_s", best}, {"gbps", gbps(med)}, {"gbps_best", gbps(best)}};
    std::printf("  %-30s %8.2f GB/s median (%7.2f best), %8.2f ms\n", row.label.c_str(), gbps(med), gbps(best),
                1e3 * med);
  }
  const double ratio = bench::median(t_digest1) / bench::median(t_memcpy);
  const nlohmann::json out = {
      {"kind", "dirty"},
      {"machine", bench::machine()},
      {"bytes", bytes},
      {"chunk_bytes", chunk},
      {"repeat", repeat},
      {"threads", threads},
      {"note",
       "GB/s = buffer bytes per second: bytes digested, and for memcpy bytes copied (not read + written). "
       "Both buffers are written once before any timing. digest_over_memcpy = median xxh3 1-thread time over "
       "median memcpy 1-thread time, measured alternately in the same run."},
      {"results", results},
      {"digest_over_memcpy", ratio}};
  bench::write_json(json_path, out);
  bench::print_key("digest_over_memcpy", ratio);
  bench::print_key("xxh3_1thread_gbps", gbps(bench::median(t_digest1)));
  bench::print_key("memcpy_1thread_gbps", gbps(bench::median(t_memcpy)));
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-dirty", run, argc, argv);
}
