// reprise-bench-d2h: checkpoint D2H overhead of protected device data, against ceilings measured in the same run.
//   ceilings: pinned D2H (large async copy), pageable D2H, device-to-device copy (memory bandwidth)
//   per size and dirty ratio: app-visible seconds (digest + pack), drain seconds and GB/s (device staging ->
//   pinned -> version buffer), digest GB/s; baseline: blocking full copy to pageable host memory.
// Without a GPU (or with --backend host-twin) the same measurements run on host memory through the kernels'
// host twins, so the JSON schema is exercised in CI.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "bench_common.hpp"
#include "gpu/backend.hpp"
#include "reprise/reprise.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Ceilings {
  double pinned_d2h_gbps, pageable_d2h_gbps, d2d_gbps;
};

Ceilings measure_ceilings(reprise::gpu::Backend& be, std::size_t bytes, int repeat) {
  auto stream = be.create_stream(false);
  auto dev = be.alloc_device(bytes), dev2 = be.alloc_device(bytes);
  auto pinned = be.alloc_pinned(bytes);
  std::vector<unsigned char> pageable(bytes, 1);  // touched: first-touch page faults are not part of a copy
  std::memset(pinned.data(), 1, bytes);
  be.copy_to_device(dev.data(), pageable.data(), bytes, *stream);
  be.copy_device(dev2.data(), dev.data(), bytes, *stream);
  be.synchronize(*stream);
  std::vector<double> p, g, d;
  for (int r = 0; r < repeat; ++r) {
    auto t = Clock::now();
    be.copy_to_host(pinned.data(), dev.data(), bytes, *stream);
    be.synchronize(*stream);
    p.push_back(since(t));
    t = Clock::now();
    be.copy_to_host(pageable.data(), dev.data(), bytes, *stream);
    be.synchronize(*stream);
    g.push_back(since(t));
    t = Clock::now();
    be.copy_device(dev2.data(), dev.data(), bytes, *stream);
    be.synchronize(*stream);
    d.push_back(since(t));
  }
  // A ceiling is the best the machine did (fastest of the repeats). D2D moves bytes twice through device memory
  // (read + write): count both, as a memory bandwidth.
  auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  return {bytes / best(p) * 1e-9, bytes / best(g) * 1e-9, 2.0 * bytes / best(d) * 1e-9};
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"reprise-bench-d2h: checkpoint D2H overhead of device data vs measured ceilings"};
  std::vector<std::string> sizes_text;
  std::string json_path = "reprise-bench-d2h.json", backend_name = "auto";
  std::vector<double> ratios = {0, 1, 5, 25, 100};
  int repeat = 3;
  std::size_t chunk = 64 * 1024;
  app.add_option("--sizes", sizes_text, "region sizes (default 256M 1G 4G and a quarter of device memory)");
  app.add_option("--ratios", ratios, "dirty ratios in percent");
  app.add_option("--repeat", repeat, "repetitions (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--chunk", chunk, "chunk bytes");
  std::string staging_text;
  app.add_option("--staging", staging_text,
                 "device staging budget (REPRISE_STAGING_BYTES; default: the Config default)");
  app.add_option("--backend", backend_name, "auto, cuda or host-twin")
      ->check(CLI::IsMember({"auto", "cuda", "host-twin"}));
  app.add_option("--json", json_path, "output file")->check(reprise::bench::kWritableFile);
  CLI11_PARSE(app, argc, argv);

  const bool cuda = backend_name == "cuda" || (backend_name == "auto" && reprise::gpu::cuda_device_count() > 0);
  auto be = cuda ? reprise::gpu::make_cuda_backend() : reprise::gpu::make_host_twin_backend();
  std::printf("reprise-bench-d2h on %s (%s)\n", be->device_description().c_str(), be->name());

  std::vector<std::size_t> sizes;
  for (auto& s : sizes_text) sizes.push_back(reprise::parse_bytes(s, "--sizes"));
  if (sizes.empty())
    sizes = cuda ? std::vector<std::size_t>{256u << 20, 1u << 30, std::size_t(4) << 30}
                 : std::vector<std::size_t>{64u << 20};

  const std::size_t ceiling_bytes = std::min<std::size_t>(*std::max_element(sizes.begin(), sizes.end()), 1u << 30);
  const Ceilings ceil = measure_ceilings(*be, ceiling_bytes, repeat);
  std::printf("ceilings (%zu MiB): pinned D2H %.1f GB/s, pageable D2H %.1f GB/s, D2D %.1f GB/s (read+write)\n",
              ceiling_bytes >> 20, ceil.pinned_d2h_gbps, ceil.pageable_d2h_gbps, ceil.d2d_gbps);

  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  nlohmann::json out = {
      {"kind", "d2h"},
      {"machine", {{"hostname", host}, {"device", be->device_description()}, {"backend", be->name()}}},
      {"chunk_bytes", chunk},
      {"ceilings",
       {{"bytes", ceiling_bytes},
        {"pinned_d2h_gbps", ceil.pinned_d2h_gbps},
        {"pageable_d2h_gbps", ceil.pageable_d2h_gbps},
        {"d2d_gbps", ceil.d2d_gbps}}},
      {"runs", nlohmann::json::array()}};

  auto stream = be->create_stream(false);
  std::mt19937_64 rng(12345);
  for (std::size_t bytes : sizes) {
    const std::size_t n_chunks = (bytes + chunk - 1) / chunk;
    auto dev = be->alloc_device(bytes);
    {
      std::vector<unsigned char> init(std::min<std::size_t>(bytes, 64u << 20));
      for (auto& b : init) b = static_cast<unsigned char>(rng());
      for (std::size_t off = 0; off < bytes; off += init.size())
        be->copy_to_device(dev.as<unsigned char>() + off, init.data(), std::min(init.size(), bytes - off), *stream);
      be->synchronize(*stream);
    }
    // Baseline: the naive checkpoint, a blocking full copy to pageable memory (pre-touched).
    std::vector<unsigned char> pageable(bytes, 0);
    std::vector<double> base;
    for (int r = 0; r < repeat; ++r) {
      const auto t = Clock::now();
      be->copy_to_host(pageable.data(), dev.data(), bytes, *stream);
      be->synchronize(*stream);
      base.push_back(since(t));
    }
    const double baseline = median(base);
    pageable.clear();
    pageable.shrink_to_fit();

    reprise::Config cfg;
    cfg.chunk_bytes = chunk;
    // Versions alternate full / differential and only the newest chain is kept, so memory stays bounded: every
    // timed checkpoint is a differential one taken right after an untimed full one (nearly 100% dirty: stored
    // as a full one itself, Config::full_at_dirty_percent).
    cfg.full_every = 2;
    cfg.keep_chains = 1;
    cfg.device_backend = cuda ? reprise::DeviceBackendKind::Cuda : reprise::DeviceBackendKind::HostTwin;
    if (!staging_text.empty()) cfg.staging_bytes = reprise::parse_bytes(staging_text, "--staging");
    reprise::Runtime rt(cfg);
    rt.protect("field", dev.data(), bytes, reprise::MemorySpace::Device);
    std::uint64_t version = 0;
    rt.checkpoint(++version);  // the first (full) version; also warms the pools
    rt.wait();
    bool after_full = true;  // the last version was a full one: the next is differential
    std::uint32_t stamp = 1;
    for (double ratio : ratios) {
      std::vector<double> visible, drain, digest, durable, pack;
      std::uint64_t stored = 0;
      unsigned rounds = 0;
      for (int r = 0; r < repeat; ++r) {
        if (!after_full) {  // the next version would be full: take it untimed, then time a differential
          rt.checkpoint(++version);
          rt.wait();
        }
        // Change `ratio` % of the chunks, spread evenly: 4 bytes in each.
        const std::size_t dirty = static_cast<std::size_t>(std::lround(n_chunks * ratio / 100.0));
        ++stamp;
        for (std::size_t k = 0; k < dirty; ++k) {
          const std::size_t c = dirty == n_chunks ? k : k * n_chunks / dirty;
          be->copy_to_device(dev.as<unsigned char>() + c * chunk, &stamp, sizeof stamp, *stream);
        }
        be->synchronize(*stream);
        const auto t = Clock::now();
        rt.checkpoint(++version);
        visible.push_back(since(t));
        rt.wait();
        const auto m = rt.metrics().back();
        if (m.full != m.promoted) {  // (promoted: nearly every chunk changed, Config::full_at_dirty_percent)
          std::fprintf(stderr, "internal: timed version %llu is full\n", static_cast<unsigned long long>(version));
          return 3;
        }
        after_full = m.full;
        drain.push_back(m.drain.seconds);
        digest.push_back(m.digest.seconds);
        pack.push_back(m.pack.seconds);
        durable.push_back(m.durable_seconds);
        stored = m.bytes_dirty;
        rounds = m.pack_rounds;
      }
      const double dr = median(drain), dg = median(digest);
      const double d2h_gbps = dr > 0 ? stored / dr * 1e-9 : 0.0;
      const double digest_gbps = dg > 0 ? bytes / dg * 1e-9 : 0.0;
      nlohmann::json run = {{"bytes", bytes},
                            {"dirty_percent", ratio},
                            {"bytes_stored", stored},
                            {"pack_rounds", rounds},
                            {"staging_bytes", cfg.staging_bytes},
                            {"visible_seconds", median(visible)},
                            {"digest_seconds", dg},
                            {"pack_seconds", median(pack)},
                            {"drain_seconds", dr},
                            {"durable_seconds", median(durable)},
                            {"d2h_gbps", d2h_gbps},
                            {"d2h_over_pinned_ceiling", d2h_gbps / ceil.pinned_d2h_gbps},
                            {"digest_gbps", digest_gbps},
                            {"digest_over_d2d", digest_gbps / ceil.d2d_gbps},
                            {"baseline_seconds", baseline},
                            {"visible_over_baseline", median(visible) / baseline}};
      std::printf(
          "%6zu MiB %5.1f%% dirty: visible %8.3f ms (digest %7.3f) | drain %8.3f ms %6.1f GB/s = %4.2f of pinned | "
          "digest %6.1f GB/s = %4.2f of D2D | visible/baseline %.3f%s\n",
          bytes >> 20, ratio, 1e3 * median(visible), 1e3 * dg, 1e3 * dr, d2h_gbps, d2h_gbps / ceil.pinned_d2h_gbps,
          digest_gbps, digest_gbps / ceil.d2d_gbps, median(visible) / baseline,
          rounds > 1 ? " (staging short: packed and drained in rounds)" : "");
      out["runs"].push_back(run);
    }
  }
  // Headline figures: the largest size, 100% dirty for the drain, 0% for the digest pass.
  for (const auto& run : out["runs"]) {
    if (run["bytes"] != sizes.back()) continue;
    if (run["dirty_percent"] == 100.0) {
      out["d2h_over_pinned_ceiling"] = run["d2h_over_pinned_ceiling"];
      out["visible_100pct_over_baseline"] = run["visible_over_baseline"];
    }
    if (run["dirty_percent"] == 0.0) out["digest_over_d2d"] = run["digest_over_d2d"];
  }
  for (const char* key : {"d2h_over_pinned_ceiling", "digest_over_d2d", "visible_100pct_over_baseline"})
    if (out.contains(key)) std::printf("%s %.3f\n", key, out[key].get<double>());
  std::ofstream(json_path) << out.dump(2) << "\n";
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}

// (a missing GPU with --backend cuda, a size the device cannot hold: a message and exit 1)
int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-d2h", run, argc, argv);
}
