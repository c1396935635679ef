// reprise-bench-logging: what reprise::Comm costs over raw MPI, measured side by side in one run.
//
//   REPRISE_RANKS_PER_NODE=2 scripts/mpirun.sh -n 4 -- reprise-bench-logging --json logging.json
//
// Ranks 0 and 1 share a group, rank 2 is in another (rank 3 only takes part in the checkpoints). For every size,
// interleaved, repeated: ping-pong on the pair (0,1) with raw MPI_Send/MPI_Recv and with Comm (intra-group: header
// only), then on (0,2) raw and with Comm (inter-group: every message is also copied into the sender's log), and a
// memcpy of the same size. Between batches every rank checkpoints, so groups commit and the logs are released.
// One-way time = round trip / 2. With --device, the same two Comm ping-pongs on device buffers (CUDA memory when a
// GPU is usable; elsewhere host memory through the host-twin backend, REPRISE_DEVICE_BACKEND=host-twin): Comm
// stages them through pinned memory, and a logged message is staged straight into its log entry, so
// device_logged_over_unlogged_1MiB (inter-group / intra-group time) says what logging adds to a device message.
// Headlines (1 MiB, 8 B): intra_over_raw_bw_1MiB (goal >= 0.95), added_time_over_memcpy_1MiB = (logged - raw) /
// memcpy (goal <= 1.1; below 1 the log copy overlaps the transfer), logged_over_raw_bw_1MiB (reported),
// added_latency_us_8B (goal <= 0.5; the median of Comm - raw over adjacent batches), and the log bytes held at
// the end vs inter-group bytes sent.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "bench/bench_common.hpp"
#include "gpu/backend.hpp"
#include "reprise/mpi.hpp"

namespace reprise::bench {
namespace {

enum Variant { kRawIntra, kCommIntra, kRawInter, kCommInter, kDevIntra, kDevInter, kVariants };
const char* kNames[kVariants] = {"raw_intra",  "comm_intra",        "raw_inter",
                                 "comm_inter", "comm_intra_device", "comm_inter_device"};

double now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

int run(int argc, char** argv) {
  std::vector<std::string> size_texts = {"8", "64", "512", "4K", "32K", "256K", "1M", "8M"};
  int repeat = 7;
  std::string json;
  CLI::App app{"reprise-bench-logging: ping-pong raw MPI vs reprise::Comm intra-group and inter-group (logged)"};
  app.add_option("--sizes", size_texts, "message sizes (K/M suffixes)");
  app.add_option("--repeat", repeat, "interleaved repetitions (medians are reported)");
  app.add_option("--json", json, "write the results here (rank 0)")->check(reprise::bench::kWritableFile);
  bool device = false;
  app.add_flag("--device", device, "also ping-pong device buffers through Comm (host twin without a GPU)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::size_t> sizes;
  for (const auto& t : size_texts) sizes.push_back(parse_bytes(t, "--sizes"));
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    MpiRuntime rt(MPI_COMM_WORLD);
    Comm& c = rt.messages();
    const int me = rt.rank();
    if (rt.size() < 3 || c.group_of(0) != c.group_of(1) || c.group_of(0) == c.group_of(2))
      throw UsageError(
          "reprise-bench-logging needs ranks 0 and 1 in one group and rank 2 in another: run 4 ranks "
          "with REPRISE_RANKS_PER_NODE=2");
    std::uint64_t version = 0;
    rt.protect("version", &version);
    const std::size_t biggest = *std::max_element(sizes.begin(), sizes.end());
    auto out = touched_buffer(biggest, 1), in = touched_buffer(biggest, 2), dst = touched_buffer(biggest, 3);
    // Device buffers: the backend Comm uses (REPRISE_DEVICE_BACKEND), filled once so no first touch is timed.
    std::unique_ptr<gpu::Backend> be;
    gpu::Buffer dev_out, dev_in;
    if (device) {
      be = rt.config().device_backend == DeviceBackendKind::HostTwin ? gpu::make_host_twin_backend()
                                                                     : gpu::make_cuda_backend();
      dev_out = be->alloc_device(biggest);
      dev_in = be->alloc_device(biggest);
      auto s = be->create_stream(false);
      be->copy_to_device(dev_out.data(), out.data(), biggest, *s);
      be->copy_to_device(dev_in.data(), in.data(), biggest, *s);
      be->synchronize(*s);
    }
    const int variants = device ? kVariants : kDevIntra;
    nlohmann::json rows = nlohmann::json::array();
    std::map<std::size_t, std::vector<double>> per[kVariants];
    std::map<std::size_t, std::vector<double>> copy;
    auto pingpong = [&](Variant v, std::size_t bytes, int iters) {
      const int peer = v == kRawIntra || v == kCommIntra || v == kDevIntra ? 1 : 2;
      const bool raw = v == kRawIntra || v == kRawInter;
      const bool dev = v == kDevIntra || v == kDevInter;
      const MemorySpace sp = dev ? MemorySpace::Device : MemorySpace::Host;
      void* o = dev ? dev_out.data() : out.data();
      void* i_ = dev ? dev_in.data() : in.data();
      rt.check(MPI_Barrier(rt.comm()));
      // The other ranks sleep until the pair is done (on 2 cores, spinning ranks would take the pair's CPU).
      auto idle_barrier = [&] {
        MPI_Request b;
        rt.check(MPI_Ibarrier(rt.comm(), &b));
        for (int done = 0; !done;) {
          rt.check(MPI_Test(&b, &done, MPI_STATUS_IGNORE));
          if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      };
      if (me != 0 && me != peer) {
        idle_barrier();
        return 0.0;
      }
      const double t0 = now();
      for (int i = 0; i < iters; ++i) {
        if (me == 0) {
          if (raw) {
            rt.check(MPI_Send(out.data(), static_cast<int>(bytes), MPI_BYTE, peer, 5, rt.comm()));
            rt.check(MPI_Recv(in.data(), static_cast<int>(bytes), MPI_BYTE, peer, 5, rt.comm(), MPI_STATUS_IGNORE));
          } else {
            c.send(o, bytes, peer, 5, sp);
            c.recv(i_, bytes, peer, 5, sp);
          }
        } else {
          if (raw) {
            rt.check(MPI_Recv(in.data(), static_cast<int>(bytes), MPI_BYTE, 0, 5, rt.comm(), MPI_STATUS_IGNORE));
            rt.check(MPI_Send(out.data(), static_cast<int>(bytes), MPI_BYTE, 0, 5, rt.comm()));
          } else {
            c.recv(i_, bytes, 0, 5, sp);
            c.send(o, bytes, 0, 5, sp);
          }
        }
      }
      const double t = (now() - t0) / (2.0 * iters);
      idle_barrier();
      return t;
    };
    std::size_t inter_bytes_sent = 0;
    std::map<std::size_t, std::size_t> allocated_before, allocated_during;  // log segments allocated while timed
    for (std::size_t bytes : sizes) {
      // Logged bytes per batch stay around 32 MiB so freed log segments are reused (no page faults in timing).
      const int iters =
          static_cast<int>(std::clamp<std::size_t>((std::size_t{32} << 20) / std::max<std::size_t>(bytes, 1), 4, 2000));
      // Five untimed warm-up batches: the log reaches its steady state, where segments released by the commits
      // are reused (first use of memory costs a page fault per 4 KiB on this kind of VM).
      for (int r = -5; r < repeat; ++r) {
        for (int v = 0; v < variants; ++v) {
          const double t = pingpong(static_cast<Variant>(v), bytes, iters);
          if (r >= 0 && me == 0) per[v][bytes].push_back(t);
          if ((v == kCommInter || v == kDevInter) && (me == 0 || me == 2))
            inter_bytes_sent += bytes * static_cast<std::size_t>(iters);
        }
        if (me == 0) {
          const double t0 = now();
          for (int i = 0; i < iters; ++i) {
            std::memcpy(dst.data(), out.data(), bytes);
            out[i % bytes] ^= dst[(i * 7) % bytes];  // keep the copies from being optimised away
          }
          if (r >= 0) copy[bytes].push_back((now() - t0) / iters);
        }
        rt.checkpoint(++version);  // commits the previous batch's version: views go out, logs are released
        // Durable before the next timed batch: the version carries this batch's log entries to the buddy (tens
        // of MiB here), and that background transfer is checkpoint cost, not the cost of a message.
        rt.wait();
        if (r == -1) allocated_before[bytes] = nlohmann::json::parse(c.stats_json())["log_segments_allocated"];
      }
      allocated_during[bytes] =
          nlohmann::json::parse(c.stats_json())["log_segments_allocated"].get<std::size_t>() - allocated_before[bytes];
    }
    rt.checkpoint(++version);
    rt.wait();
    rt.checkpoint(++version);  // the commit of the previous one is agreed here and announced
    rt.wait();
    c.barrier();  // views delivered and applied (Comm polls them at every call)
    c.barrier();
    const std::string stats = c.stats_json();
    rt.finish();
    if (me == 0) {
      auto med = [&](int v, std::size_t b) { return median(per[v][b]); };
      for (std::size_t b : sizes) {
        nlohmann::json row = {{"bytes", b},
                              {"memcpy_seconds", median(copy[b])},
                              {"log_segments_allocated_while_timed", allocated_during[b]}};
        for (int v = 0; v < variants; ++v) {
          row[std::string(kNames[v]) + "_seconds"] = med(v, b);
          row[std::string(kNames[v]) + "_gbps"] = static_cast<double>(b) / med(v, b) / 1e9;
        }
        rows.push_back(row);
      }
      auto pick = [&](std::size_t want) {
        std::size_t best = sizes.front();
        for (std::size_t b : sizes)
          if (std::llabs(static_cast<long long>(b) - static_cast<long long>(want)) <
              std::llabs(static_cast<long long>(best) - static_cast<long long>(want)))
            best = b;
        return best;
      };
      const std::size_t m = pick(std::size_t{1} << 20), s = pick(8);
      const double intra_ratio = med(kRawIntra, m) / med(kCommIntra, m);
      const double logged_ratio = med(kRawInter, m) / med(kCommInter, m);
      const double added = (med(kCommInter, m) - med(kRawInter, m)) / median(copy[m]);
      // Added latency: the median of the differences between adjacent batches (Comm right after raw MPI, same
      // repetition), so the slow drifts of this kind of shared VM cancel out of each difference.
      auto paired = [&](int comm, int raw, std::size_t b) {
        std::vector<double> d;
        for (std::size_t i = 0; i < per[comm][b].size(); ++i) d.push_back(per[comm][b][i] - per[raw][b][i]);
        return median(d);
      };
      const double lat_inter = paired(kCommInter, kRawInter, s) * 1e6;
      const double lat_intra = paired(kCommIntra, kRawIntra, s) * 1e6;
      const auto st = nlohmann::json::parse(stats);
      nlohmann::json j = {{"kind", "logging"},
                          {"machine", machine()},
                          {"ranks", rt.size()},
                          {"repeat", repeat},
                          {"sizes", rows},
                          {"intra_over_raw_bw_1MiB", intra_ratio},
                          {"logged_over_raw_bw_1MiB", logged_ratio},
                          {"added_time_over_memcpy_1MiB", added},
                          {"added_latency_us_8B", lat_inter},
                          {"added_latency_us_8B_intra", lat_intra},
                          {"inter_bytes_sent_rank0", inter_bytes_sent},
                          {"comm_stats_rank0", st}};
      double dev_ratio = 0;
      if (device) {
        dev_ratio = med(kDevInter, m) / med(kDevIntra, m);
        j["device_backend"] = be->name();
        j["device_logged_over_unlogged_1MiB"] = dev_ratio;
      }
      std::printf("%10s %12s %12s %12s %12s %12s  (one-way microseconds, medians of %d)\n", "bytes", "raw_intra",
                  "comm_intra", "raw_inter", "comm_inter", "memcpy", repeat);
      for (std::size_t b : sizes)
        std::printf("%10zu %12.2f %12.2f %12.2f %12.2f %12.2f\n", b, med(kRawIntra, b) * 1e6, med(kCommIntra, b) * 1e6,
                    med(kRawInter, b) * 1e6, med(kCommInter, b) * 1e6, median(copy[b]) * 1e6);
      print_key("intra_over_raw_bw_1MiB", intra_ratio);
      print_key("logged_over_raw_bw_1MiB", logged_ratio);
      print_key("added_time_over_memcpy_1MiB", added);
      print_key("added_latency_us_8B", lat_inter);
      print_key("added_latency_us_8B_intra", lat_intra);
      if (device) {
        std::printf("%10s %12s %12s  (device buffers, %s backend)\n", "bytes", "intra_dev", "inter_dev", be->name());
        for (std::size_t b : sizes)
          std::printf("%10zu %12.2f %12.2f\n", b, med(kDevIntra, b) * 1e6, med(kDevInter, b) * 1e6);
        print_key("device_logged_over_unlogged_1MiB", dev_ratio);
      }
      std::printf("log_held_bytes %zu log_live_entries %zu inter_bytes_sent %zu log_entries_released %zu\n",
                  st["log_held_bytes"].get<std::size_t>(), st["log_live_entries"].get<std::size_t>(), inter_bytes_sent,
                  st["log_entries_released"].get<std::size_t>());
      if (!json.empty()) write_json(json, j);
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace reprise::bench

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-logging", reprise::bench::run, argc, argv);
}
