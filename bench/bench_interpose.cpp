// reprise-bench-interpose: an ordinary MPI program's calls served by libreprise_interpose.so against the same calls
// made on the MPI library directly (PMPI_*, which the interposition does not see), side by side in one run.
//
//   REPRISE_RANKS_PER_NODE=2 scripts/mpirun.sh -n 8 -- reprise-bench-interpose --json interpose.json
//
// Ranks 0 and 1 share a group, rank 2 is in another. For every size, interleaved and repeated: ping-pong (0,1)
// with PMPI_Send/PMPI_Recv and with MPI_Send/MPI_Recv (interposed: reprise::Comm, intra-group), the same on (0,2)
// (inter-group: logged), the (0,1) ping-pong received by MPI_Probe(MPI_ANY_TAG) then MPI_Recv of the status's tag
// (the interposition's probe receives ahead: Comm's receive of the communicator's tags), and an allreduce of doubles
// over every rank, PMPI_Allreduce against MPI_Allreduce (a binomial reduce and broadcast over Comm), and the same as
// MPI_Iallreduce + MPI_Wait (the interposition's carried out at the wait: nonblocking.hpp), and a halo exchange:
// MPI_Neighbor_alltoall of a block of the size to each neighbour on a periodic ring (MPI_Cart_create: the library's own
// against the interposition's). Between batches every rank checkpoints, so the logs are released, then every rank
// sleeps --settle-ms (100): the checkpoint's background work (the version's transfer to the buddy, its check there)
// still runs when rt.wait() returns, and without the pause it fell on the batch after it, always the library's
// intra-group ping-pong (1 MiB: 1.9 ms instead of 0.12; so interposed_intra_over_raw_bw_1MiB read 17 instead of 1.2 in
// one run). Headlines (at the smallest and largest sizes, 8 B and 1 MiB by default): interposed_added_latency_us_8B
// (intra-group; goal <= 0.5), interposed_intra_over_raw_bw_1MiB (goal >= 0.95), interposed_allreduce_over_library_1MiB
// (time; goal
// <= 1.5) and _8B, interposed_iallreduce_over_interposed_allreduce_1MiB, interposed_iallreduce_over_library_1MiB,
// interposed_neighbor_alltoall_over_library_1MiB and _8B, interposed_probe_added_latency_us_8B (the probed
// ping-pong's, interposed minus library).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <thread>

#include "bench/bench_common.hpp"
#include "reprise/interpose.hpp"

namespace reprise::bench {
namespace {

enum Variant {
  kRawIntra,
  kWrapIntra,
  kRawInter,
  kWrapInter,
  kRawProbe,
  kWrapProbe,
  kRawAllreduce,
  kWrapAllreduce,
  kRawIallreduce,
  kWrapIallreduce,
  kRawNeighbor,
  kWrapNeighbor,
  kVariants
};
const char* kNames[kVariants] = {"raw_intra",
                                 "interposed_intra",
                                 "raw_inter",
                                 "interposed_inter",
                                 "raw_probe",
                                 "interposed_probe",
                                 "library_allreduce",
                                 "interposed_allreduce",
                                 "library_iallreduce",
                                 "interposed_iallreduce",
                                 "library_neighbor_alltoall",
                                 "interposed_neighbor_alltoall"};

double now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The ranks not in a ping-pong sleep until it is done (on 2 cores, spinning ranks would take the pair's CPU).
void idle_barrier() {
  MPI_Request b;
  PMPI_Ibarrier(MPI_COMM_WORLD, &b);
  for (int done = 0; !done;) {
    PMPI_Test(&b, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

int run(int argc, char** argv) {
  std::vector<std::string> size_texts = {"8", "4K", "64K", "1M"};
  int repeat = 7;
  std::string json;
  CLI::App app{"reprise-bench-interpose: MPI calls through libreprise_interpose.so vs the library directly"};
  app.add_option("--sizes", size_texts, "message sizes (K/M suffixes)");
  app.add_option("--repeat", repeat, "interleaved repetitions (medians are reported)");
  int max_iters = 1000;
  app.add_option("--iters", max_iters, "at most this many operations per batch (fewer for large sizes)")
      ->check(CLI::PositiveNumber);
  int settle_ms = 100;
  app.add_option("--settle-ms", settle_ms, "pause after each checkpoint between batches (its background work)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", json, "write the results here (rank 0)")->check(kWritableFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::size_t> sizes;
  for (const auto& t : size_texts) sizes.push_back(parse_bytes(t, "--sizes"));
  MPI_Init(&argc, &argv);  // interposed: starts the runtime
  MpiRuntime& rt = wrapped_runtime();
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  Comm& c = rt.messages();
  if (n < 3 || c.group_of(0) != c.group_of(1) || c.group_of(0) == c.group_of(2))
    throw UsageError(
        "reprise-bench-interpose needs ranks 0 and 1 in one group and rank 2 in another: run 4 or more "
        "ranks with REPRISE_RANKS_PER_NODE=2");
  std::uint64_t version = 0;
  rt.protect("version", &version);
  const std::size_t biggest = *std::max_element(sizes.begin(), sizes.end());
  auto out = touched_buffer(2 * biggest, 1), in = touched_buffer(2 * biggest, 2);
  // A periodic ring of every rank, the library's (PMPI_: a communicator the interposition does not see) and the
  // interposition's.
  int ring_size[1] = {n}, periodic[1] = {1};
  MPI_Comm raw_ring = MPI_COMM_NULL, ring = MPI_COMM_NULL;
  PMPI_Cart_create(MPI_COMM_WORLD, 1, ring_size, periodic, 0, &raw_ring);
  MPI_Cart_create(MPI_COMM_WORLD, 1, ring_size, periodic, 0, &ring);
  std::map<std::size_t, std::vector<double>> per[kVariants];

  auto pingpong = [&](Variant v, std::size_t bytes, int iters) {
    const bool probed = v == kRawProbe || v == kWrapProbe;
    const int peer = v == kRawInter || v == kWrapInter ? 2 : 1;
    const bool raw = v == kRawIntra || v == kRawInter || v == kRawProbe;
    auto send = raw ? PMPI_Send : MPI_Send;
    auto plain_recv = raw ? PMPI_Recv : MPI_Recv;
    auto probe = raw ? PMPI_Probe : MPI_Probe;
    auto recv = [&](void* buf, int n, MPI_Datatype type, int from, int tag, MPI_Comm comm, MPI_Status* status) {
      MPI_Status st;
      if (probed) {  // whatever tag comes next from `from`
        probe(from, MPI_ANY_TAG, comm, &st);
        tag = st.MPI_TAG;
      }
      return plain_recv(buf, n, type, from, tag, comm, status);
    };
    const int count = static_cast<int>(bytes);
    PMPI_Barrier(MPI_COMM_WORLD);
    if (me != 0 && me != peer) {
      idle_barrier();
      return 0.0;
    }
    const double t0 = now();
    for (int i = 0; i < iters; ++i) {
      if (me == 0) {
        send(out.data(), count, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        recv(in.data(), count, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        recv(in.data(), count, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        send(out.data(), count, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
      }
    }
    const double t = (now() - t0) / (2.0 * iters);
    idle_barrier();
    return t;
  };
  auto allreduce = [&](Variant v, std::size_t bytes, int iters) {
    auto reduce = v == kRawAllreduce ? PMPI_Allreduce : MPI_Allreduce;
    auto ireduce = v == kRawIallreduce ? PMPI_Iallreduce : MPI_Iallreduce;
    auto wait = v == kRawIallreduce ? PMPI_Wait : MPI_Wait;
    const bool nonblocking = v == kRawIallreduce || v == kWrapIallreduce;
    const int count = static_cast<int>(std::max<std::size_t>(bytes / sizeof(double), 1));
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    for (int i = 0; i < iters; ++i) {
      if (!nonblocking) {
        reduce(out.data(), in.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        continue;
      }
      MPI_Request r;  // (started and waited for at once: what it costs, not what it could overlap)
      ireduce(out.data(), in.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
      wait(&r, MPI_STATUS_IGNORE);
    }
    const double t = (now() - t0) / iters;
    PMPI_Barrier(MPI_COMM_WORLD);
    return t;
  };
  auto neighbor = [&](Variant v, std::size_t bytes, int iters) {
    auto exchange = v == kRawNeighbor ? PMPI_Neighbor_alltoall : MPI_Neighbor_alltoall;
    const MPI_Comm comm = v == kRawNeighbor ? raw_ring : ring;
    const int count = static_cast<int>(bytes);
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    for (int i = 0; i < iters; ++i) exchange(out.data(), count, MPI_BYTE, in.data(), count, MPI_BYTE, comm);
    const double t = (now() - t0) / iters;
    PMPI_Barrier(MPI_COMM_WORLD);
    return t;
  };
  for (std::size_t bytes : sizes) {
    const int iters =
        static_cast<int>(std::clamp<std::size_t>((std::size_t{16} << 20) / std::max<std::size_t>(bytes, 1), 4,
                                                 static_cast<std::size_t>(std::max(max_iters, 4))));
    for (int r = -3; r < repeat; ++r) {  // three untimed batches first: buffers, pools and logs warm
      for (int v = 0; v < kVariants; ++v) {
        const auto var = static_cast<Variant>(v);
        const double t = v < kRawAllreduce  ? pingpong(var, bytes, iters)
                         : v < kRawNeighbor ? allreduce(var, bytes, iters)
                                            : neighbor(var, bytes, iters);
        if (r >= 0 && me == 0) per[v][bytes].push_back(t);
      }
      rt.checkpoint(++version);  // the previous batch's version commits: logs are released
      rt.wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
    }
  }
  if (me == 0) {
    auto med = [&](int v, std::size_t b) { return median(per[v][b]); };
    nlohmann::json rows = nlohmann::json::array();
    std::printf("%10s", "bytes");
    for (const char* name : kNames) std::printf(" %20s", name);
    std::printf("  (microseconds: one-way for ping-pong; medians of %d)\n", repeat);
    for (std::size_t b : sizes) {
      nlohmann::json row = {{"bytes", b}};
      std::printf("%10zu", b);
      for (int v = 0; v < kVariants; ++v) {
        row[std::string(kNames[v]) + "_seconds"] = med(v, b);
        std::printf(" %20.2f", med(v, b) * 1e6);
      }
      std::printf("\n");
      rows.push_back(row);
    }
    const std::size_t small = *std::min_element(sizes.begin(), sizes.end());
    // Added latency: the median of the differences between adjacent batches (interposed right after raw).
    std::vector<double> d;
    for (std::size_t i = 0; i < per[kRawIntra][small].size(); ++i)
      d.push_back(per[kWrapIntra][small][i] - per[kRawIntra][small][i]);
    std::vector<double> dp;
    for (std::size_t i = 0; i < per[kRawProbe][small].size(); ++i)
      dp.push_back(per[kWrapProbe][small][i] - per[kRawProbe][small][i]);
    nlohmann::json j = {
        {"kind", "interpose"},
        {"ranks", n},
        {"repeat", repeat},
        {"settle_ms", settle_ms},
        {"machine", machine()},
        {"rows", rows},
        {"interposed_added_latency_us_8B", median(d) * 1e6},
        {"interposed_intra_over_raw_bw_1MiB", med(kRawIntra, biggest) / med(kWrapIntra, biggest)},
        {"interposed_inter_over_raw_bw_1MiB", med(kRawInter, biggest) / med(kWrapInter, biggest)},
        {"interposed_allreduce_over_library_1MiB", med(kWrapAllreduce, biggest) / med(kRawAllreduce, biggest)},
        {"interposed_allreduce_over_library_8B", med(kWrapAllreduce, small) / med(kRawAllreduce, small)},
        {"interposed_iallreduce_over_interposed_allreduce_1MiB",
         med(kWrapIallreduce, biggest) / med(kWrapAllreduce, biggest)},
        {"interposed_iallreduce_over_library_1MiB", med(kWrapIallreduce, biggest) / med(kRawIallreduce, biggest)},
        {"interposed_neighbor_alltoall_over_library_1MiB", med(kWrapNeighbor, biggest) / med(kRawNeighbor, biggest)},
        {"interposed_neighbor_alltoall_over_library_8B", med(kWrapNeighbor, small) / med(kRawNeighbor, small)},
        {"interposed_probe_added_latency_us_8B", median(dp) * 1e6}};
    for (const char* key :
         {"interposed_added_latency_us_8B", "interposed_intra_over_raw_bw_1MiB", "interposed_inter_over_raw_bw_1MiB",
          "interposed_allreduce_over_library_1MiB", "interposed_allreduce_over_library_8B",
          "interposed_iallreduce_over_interposed_allreduce_1MiB", "interposed_iallreduce_over_library_1MiB",
          "interposed_neighbor_alltoall_over_library_1MiB", "interposed_neighbor_alltoall_over_library_8B",
          "interposed_probe_added_latency_us_8B"})
      print_key(key, j[key].get<double>());
    if (!json.empty()) write_json(json, j);
  }
  MPI_Comm_free(&ring);
  PMPI_Comm_free(&raw_ring);
  MPI_Finalize();  // interposed: the runtime's uniform end
  return 0;
}

}  // namespace
}  // namespace reprise::bench

int main(int argc, char** argv) {
  return reprise::bench::guarded_main("reprise-bench-interpose", reprise::bench::run, argc, argv);
}
