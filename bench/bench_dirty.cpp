// reprise-bench-dirty: host dirty-tracking throughput. On the same buffer, side by side in one run: the XXH3
// chunk digest with one thread against memcpy with one thread (the cost of simply copying everything), plus
// the digest with the runtime's two threads and the Lanes64 host twin for reference.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_common.hpp"
#include "core/host_tracker.hpp"
#include "core/work_pool.hpp"
#include "kernels/chunk_kernels.hpp"
#include "reprise/config.hpp"

using namespace reprise;

int main(int argc, char** argv) {
  CLI::App app{"reprise-bench-dirty: host digest throughput vs memcpy on the same buffer"};
  std::string bytes_text = "1G", chunk_text = "64K", json_path = "reprise-bench-dirty.json";
  int repeat = 5;
  app.add_option("--bytes", bytes_text, "buffer size (K/M/G suffixes)");
  app.add_option("--chunk", chunk_text, "chunk size");
  app.add_option("--repeat", repeat, "repetitions (median and best reported)")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "output file");
  CLI11_PARSE(app, argc, argv);
  const std::size_t bytes = parse_bytes(bytes_text, "--bytes"), chunk = parse_bytes(chunk_text, "--chunk");
  const std::size_t n = kernels::chunk_count(bytes, chunk);

  // First touch costs a page fault per 4 KiB on this kind of VM: write every byte of both buffers first.
  std::vector<unsigned char> src(bytes), dst(bytes);
  for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  std::memset(dst.data(), 0, bytes);
  std::vector<std::uint64_t> digests(n);
  core::WorkPool one(1), two(2);

  std::vector<double> t_digest1, t_memcpy, t_digest2, t_lanes;
  for (int r = 0; r < repeat; ++r) {  // interleaved, so drifts of the machine hit both alike
    auto t = bench::Clock::now();
    core::xxh3_chunk_digests(src.data(), bytes, chunk, digests.data(), one);
    t_digest1.push_back(bench::since(t));
    t = bench::Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    t_memcpy.push_back(bench::since(t));
    t = bench::Clock::now();
    core::xxh3_chunk_digests(src.data(), bytes, chunk, digests.data(), two);
    t_digest2.push_back(bench::since(t));
    t = bench::Clock::now();
    kernels::digest_chunks_host(src.data(), bytes, chunk, digests.data());
    t_lanes.push_back(bench::since(t));
  }
  if (dst[bytes / 2] != src[bytes / 2]) return 3;  // keeps the copy from being optimised away

  auto gbps = [&](const std::vector<double>& t) { return bytes / bench::median(t) * 1e-9; };
  const double ratio = bench::median(t_digest1) / bench::median(t_memcpy);
  nlohmann::json out = {
      {"kind", "dirty"},
      {"machine", bench::machine()},
      {"bytes", bytes},
      {"chunk_bytes", chunk},
      {"repeat", repeat},
      {"note", "GB/s = bytes of the buffer per second (memcpy: bytes copied, not read + written)"},
      {"results",
       {{"xxh3_1thread",
         {{"median_s", bench::median(t_digest1)}, {"best_s", bench::minimum(t_digest1)}, {"gbps", gbps(t_digest1)}}},
        {"memcpy_1thread",
         {{"median_s", bench::median(t_memcpy)}, {"best_s", bench::minimum(t_memcpy)}, {"gbps", gbps(t_memcpy)}}},
        {"xxh3_2threads",
         {{"median_s", bench::median(t_digest2)}, {"best_s", bench::minimum(t_digest2)}, {"gbps", gbps(t_digest2)}}},
        {"lanes64_twin_1thread",
         {{"median_s", bench::median(t_lanes)}, {"best_s", bench::minimum(t_lanes)}, {"gbps", gbps(t_lanes)}}}}},
      {"digest_over_memcpy", ratio}};
  bench::write_json(json_path, out);
  std::printf("reprise-bench-dirty: %zu MiB, chunks of %zu KiB, median of %d\n", bytes >> 20, chunk >> 10, repeat);
  std::printf("  xxh3 digest, 1 thread   %7.2f GB/s\n", gbps(t_digest1));
  std::printf("  memcpy, 1 thread        %7.2f GB/s\n", gbps(t_memcpy));
  std::printf("  xxh3 digest, 2 threads  %7.2f GB/s\n", gbps(t_digest2));
  std::printf("  lanes64 twin, 1 thread  %7.2f GB/s\n", gbps(t_lanes));
  std::printf("digest_over_memcpy %.3f\n", ratio);
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
