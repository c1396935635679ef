// reprise-stencil: a Kokkos 2D heat equation (5-point Jacobi, double) on a 2D process grid, halo exchange through
// reprise::Comm (--messages reprise, the default) or plain MPI calls on MPI_COMM_WORLD (--messages mpi), the field
// and the step protected by Reprise. It is linked with the MPI interposition (libreprise_interpose.so: MPI_Init
// starts the runtime), so its plain MPI calls go through the protocol too: either way the halos to another group
// are logged by their sender and only the groups of failed ranks roll back. It catches reprise::Rollback itself
// and restores in place (a wrapped program may instead run its body through reprise::run: apps/heat3d.cpp). Ranks
// killed with REPRISE_KILL are replaced, their groups roll back to their last version and go on; the final
// checksum is the same as without failures, and does not depend on the rank count.
//
//   scripts/mpirun.sh -n 8 -- reprise-stencil --nx 512 --ny 512 --steps 200 --checkpoint-every 20
//   REPRISE_RANKS_PER_NODE=2 REPRISE_KILL=3:90 scripts/mpirun.sh -n 8 -- reprise-stencil ...
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mpi_app_main.hpp"
#include "reprise/interpose.hpp"
#include "reprise/kokkos.hpp"
#include "reprise/mpi.hpp"

namespace {

using Field = Kokkos::View<double**, Kokkos::LayoutRight>;
using Line = Kokkos::View<double*>;

struct Options {
  int nx = 256, ny = 256;
  std::uint64_t steps = 100, checkpoint_every = 10, progress_every = 0;
  std::string json;
  std::string messages = "reprise";
};

// The block of the global grid this rank owns (rows x0.., columns y0..), and its neighbours.
struct Block {
  int px = 1, py = 1, cx = 0, cy = 0;
  int x0 = 0, y0 = 0, lnx = 0, lny = 0;
  int north = MPI_PROC_NULL, south = MPI_PROC_NULL, west = MPI_PROC_NULL, east = MPI_PROC_NULL;
};

void split(int n, int parts, int index, int& start, int& count) {
  const int base = n / parts, extra = n % parts;
  count = base + (index < extra ? 1 : 0);
  start = index * base + std::min(index, extra);
}

Block make_block(const Options& o, int rank, int size) {
  Block b;
  int dims[2] = {0, 0};
  MPI_Dims_create(size, 2, dims);
  b.px = dims[0];
  b.py = dims[1];
  b.cx = rank / b.py;
  b.cy = rank % b.py;
  split(o.nx, b.px, b.cx, b.x0, b.lnx);
  split(o.ny, b.py, b.cy, b.y0, b.lny);
  auto at = [&](int cx, int cy) { return cx * b.py + cy; };
  if (b.cx > 0) b.north = at(b.cx - 1, b.cy);
  if (b.cx + 1 < b.px) b.south = at(b.cx + 1, b.cy);
  if (b.cy > 0) b.west = at(b.cx, b.cy - 1);
  if (b.cy + 1 < b.py) b.east = at(b.cx, b.cy + 1);
  return b;
}

// Kernels are free functions (nvcc rejects KOKKOS_LAMBDA in some enclosing scopes).
void jacobi(const Field& in, const Field& out, int lnx, int lny) {
  Kokkos::parallel_for(
      "jacobi", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({1, 1}, {lnx + 1, lny + 1}),
      KOKKOS_LAMBDA(int i, int j) { out(i, j) = 0.25 * (in(i - 1, j) + in(i + 1, j) + in(i, j - 1) + in(i, j + 1)); });
}

// The hot spot: global cells [nx/2-2, nx/2+2) x [ny/2-2, ny/2+2) held at 100.
void source(const Field& u, const Block& b, const Options& o) {
  const int gx0 = std::max(o.nx / 2 - 2, b.x0), gx1 = std::min(o.nx / 2 + 2, b.x0 + b.lnx);
  const int gy0 = std::max(o.ny / 2 - 2, b.y0), gy1 = std::min(o.ny / 2 + 2, b.y0 + b.lny);
  if (gx0 >= gx1 || gy0 >= gy1) return;
  const int ox = 1 - b.x0, oy = 1 - b.y0;
  Kokkos::parallel_for(
      "source", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({gx0 + ox, gy0 + oy}, {gx1 + ox, gy1 + oy}),
      KOKKOS_LAMBDA(int i, int j) { u(i, j) = 100.0; });
}

void copy_column(const Field& u, const Line& line, int j, bool to_line) {
  const int n = static_cast<int>(line.extent(0));
  if (to_line)
    Kokkos::parallel_for(
        "pack", n, KOKKOS_LAMBDA(int i) { line(i) = u(i + 1, j); });
  else
    Kokkos::parallel_for(
        "unpack", n, KOKKOS_LAMBDA(int i) { u(i + 1, j) = line(i); });
}

void copy_row(const Field& u, const Line& line, int i, bool to_line) {
  const int n = static_cast<int>(line.extent(0));
  if (to_line)
    Kokkos::parallel_for(
        "pack", n, KOKKOS_LAMBDA(int j) { line(j) = u(i, j + 1); });
  else
    Kokkos::parallel_for(
        "unpack", n, KOKKOS_LAMBDA(int j) { u(i, j + 1) = line(j); });
}

// Halo exchange: pack into lines where the field lives, then reprise::Comm moves them as they are (a device line
// is staged through pinned memory by Comm, or handed to a CUDA-aware MPI), or plain MPI calls through host
// mirrors, as a program written without Reprise for an MPI that is not CUDA-aware does (served by the
// interposition: the same protocol underneath).
struct Halo {
  Line send, recv;
  Line::HostMirror hsend, hrecv;
  explicit Halo(int n) : send("send", n), recv("recv", n) {
    hsend = Kokkos::create_mirror_view(send);
    hrecv = Kokkos::create_mirror_view(recv);
  }
  void exchange(reprise::MpiRuntime& rt, int to, int from, int tag, bool through_comm) {
    const int n = static_cast<int>(send.extent(0));
    if (through_comm) {
      reprise::Comm& c = rt.messages();
      const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(double);
      const reprise::MemorySpace space = reprise::memory_space_of(send);
      Kokkos::fence();  // the pack kernel wrote `send` (Comm reads it on its own stream, or MPI does)
      reprise::Comm::Request rr, sr;
      if (from != MPI_PROC_NULL) rr = c.irecv(recv.data(), bytes, from, tag, space);
      if (to != MPI_PROC_NULL) sr = c.isend(send.data(), bytes, to, tag, space);
      if (sr.pending()) c.wait(sr);
      if (rr.pending()) c.wait(rr);
      return;
    }
    Kokkos::deep_copy(hsend, send);
    // Irecv + Isend + two waits rather than MPI_Sendrecv: Open MPI 5.0.7's MPI_Sendrecv can crash when its peer
    // has just failed (seen with ULFM here); the separate requests report MPI_ERR_PROC_FAILED instead.
    MPI_Request rr = MPI_REQUEST_NULL, sr = MPI_REQUEST_NULL;
    rt.check(MPI_Irecv(hrecv.data(), n, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, &rr));
    rt.check(MPI_Isend(hsend.data(), n, MPI_DOUBLE, to, tag, MPI_COMM_WORLD, &sr));
    rt.check(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    rt.check(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    Kokkos::deep_copy(recv, hrecv);
  }
};

void halo_exchange(reprise::MpiRuntime& rt, const Field& u, const Block& b, Halo& rows, Halo& cols, bool comm) {
  // North/south: send my first row north, receive my bottom ghost from the south; then the other way.
  copy_row(u, rows.send, 1, true);
  rows.exchange(rt, b.north, b.south, 1, comm);
  if (b.south != MPI_PROC_NULL) copy_row(u, rows.recv, b.lnx + 1, false);
  copy_row(u, rows.send, b.lnx, true);
  rows.exchange(rt, b.south, b.north, 2, comm);
  if (b.north != MPI_PROC_NULL) copy_row(u, rows.recv, 0, false);
  copy_column(u, cols.send, 1, true);
  cols.exchange(rt, b.west, b.east, 3, comm);
  if (b.east != MPI_PROC_NULL) copy_column(u, cols.recv, b.lny + 1, false);
  copy_column(u, cols.send, b.lny, true);
  cols.exchange(rt, b.east, b.west, 4, comm);
  if (b.west != MPI_PROC_NULL) copy_column(u, cols.recv, 0, false);
}

// XXH3-64 of the global field in row-major order, gathered on rank 0 (the same for every rank count).
std::uint64_t global_checksum(reprise::MpiRuntime& rt, const Field& u, const Block& b, const Options& o) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), u);
  std::vector<double> mine(static_cast<std::size_t>(b.lnx) * static_cast<std::size_t>(b.lny));
  for (int i = 0; i < b.lnx; ++i)
    for (int j = 0; j < b.lny; ++j) mine[static_cast<std::size_t>(i) * b.lny + j] = h(i + 1, j + 1);
  const int size = rt.size();
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    const Block rb = make_block(o, r, size);
    counts[static_cast<std::size_t>(r)] = rb.lnx * rb.lny;
    displs[static_cast<std::size_t>(r)] = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  std::vector<double> all(rt.rank() == 0 ? static_cast<std::size_t>(total) : 0);
  if (o.messages == "reprise") {
    // Through reprise::Comm (as MPI_Gatherv below, served by the interposition): it goes on across a group
    // rollback of other ranks meanwhile.
    reprise::Comm& c = rt.messages();
    if (rt.rank() != 0) {
      c.send(mine.data(), mine.size(), 0, 9);
    } else {
      std::copy(mine.begin(), mine.end(), all.begin());
      std::vector<reprise::Comm::Request> reqs;
      for (int r = 1; r < size; ++r)
        reqs.push_back(c.irecv(all.data() + displs[static_cast<std::size_t>(r)],
                               static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]) * sizeof(double), r, 9));
      c.waitall(reqs);
    }
  } else {
    rt.check(MPI_Gatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), counts.data(),
                         displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD));
  }
  std::uint64_t sum = 0;
  if (rt.rank() == 0) {
    std::vector<double> global(static_cast<std::size_t>(o.nx) * static_cast<std::size_t>(o.ny));
    for (int r = 0; r < size; ++r) {
      const Block rb = make_block(o, r, size);
      const double* src = all.data() + displs[static_cast<std::size_t>(r)];
      for (int i = 0; i < rb.lnx; ++i)
        for (int j = 0; j < rb.lny; ++j)
          global[static_cast<std::size_t>(rb.x0 + i) * o.ny + (rb.y0 + j)] =
              src[static_cast<std::size_t>(i) * rb.lny + j];
    }
    sum = XXH3_64bits(global.data(), global.size() * sizeof(double));
  }
  return sum;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run(const Options& o) {
  // Started by MPI_Init (the interposition): every message goes through reprise::Comm, so only the groups of
  // failed ranks roll back unless REPRISE_ROLLBACK=all says otherwise.
  reprise::MpiRuntime& rt = reprise::wrapped_runtime();
  const int rank = rt.rank(), size = rt.size();
  if (o.nx < 4 * size || o.ny < 4 * size) {
    if (rank == 0) std::fprintf(stderr, "reprise-stencil: --nx and --ny must be at least 4 x the rank count\n");
    return 2;
  }
  const Block b = make_block(o, rank, size);
  Field u("u", b.lnx + 2, b.lny + 2), next("next", b.lnx + 2, b.lny + 2);
  std::uint64_t step = 0;
  rt.protect(u);  // followed: checkpoints read the buffer `u` refers to at the time (it is swapped every step)
  rt.protect("step", &step);
  if (rt.restarted()) {
    rt.restore();
    if (rank == 0) std::printf("restarted from step %" PRIu64 "\n", step);
  }
  Halo rows(b.lny), cols(b.lnx);
  std::vector<double> step_seconds(o.steps, 0.0);
  std::vector<double> checkpoint_seconds;
  std::vector<std::uint64_t> rollback_to;
  // Every step executed, in order (re-executed ones too): seconds since start, step, duration, event.
  struct Event {
    double at;
    std::uint64_t step;
    double seconds;
    const char* what;
  };
  std::vector<Event> timeline;
  const double start = now();
  std::uint64_t checksum = 0;
  for (;;) {
    try {
      while (step < o.steps) {
        const double t0 = now();
        rt.step(step);
        halo_exchange(rt, u, b, rows, cols, o.messages == "reprise");
        jacobi(u, next, b.lnx, b.lny);
        // No copy: the runtime follows `u` (protect(View&)). Its ghosts are then two steps old; the next exchange
        // refreshes those it reads (the global boundary's stay 0 in both buffers).
        std::swap(u, next);
        source(u, b, o);
        Kokkos::fence();
        ++step;  // protected: a checkpoint holds the number of steps done
        const char* what = "";
        if (step % o.checkpoint_every == 0) {
          const double c0 = now();
          rt.checkpoint(step);
          checkpoint_seconds.push_back(now() - c0);
          what = "checkpoint";
        }
        step_seconds[step - 1] = now() - t0;
        timeline.push_back({t0 - start, step, now() - t0, what});
        if (rank == 0 && o.progress_every && step % o.progress_every == 0)
          std::printf("step %" PRIu64 "/%" PRIu64 "\n", step, o.steps), std::fflush(stdout);
      }
      checksum = global_checksum(rt, u, b, o);
      rt.finish();  // every rank got here without a failure (else all roll back together)
      break;
    } catch (const reprise::Rollback& rb) {
      const double r0 = now();
      if (rb.from_start()) {  // no checkpoint was committed before the failure: the initial state
        Kokkos::deep_copy(u, 0.0);
        step = 0;
      } else {
        rt.restore();
      }
      timeline.push_back({r0 - start, step, now() - r0, "rollback"});
      rollback_to.push_back(step);
      if (rank == 0) std::printf("rolled back to step %" PRIu64 "\n", step), std::fflush(stdout);
    }
  }
  // Where every rank ran (hwloc: NUMA node, closest GPU): a raw collective, after finish() (every rank is there).
  const std::string placements = rt.placements_json();
  if (rank == 0) {
    std::printf("ranks %d grid %dx%d steps %" PRIu64 " checkpoints %zu rollbacks %zu\n", size, o.nx, o.ny, o.steps,
                checkpoint_seconds.size(), rollback_to.size());
    std::printf("checksum 0x%016" PRIx64 "\n", checksum);
    if (o.messages == "reprise") std::printf("messages rank 0 %s\n", rt.messages().stats_json().c_str());
    std::printf("recoveries rank 0 %s\n", rt.recovery_json().c_str());
    std::printf("placements %s\n", placements.c_str());
    if (!o.json.empty()) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "%" PRIx64, checksum);
      nlohmann::ordered_json timeline_json = nlohmann::ordered_json::array();
      for (const auto& t : timeline)
        timeline_json.push_back({{"at", t.at}, {"step", t.step}, {"seconds", t.seconds}, {"event", t.what}});
      const nlohmann::ordered_json j = {
          {"ranks", size},
          {"nx", o.nx},
          {"ny", o.ny},
          {"steps", o.steps},
          {"checkpoint_every", o.checkpoint_every},
          {"checksum", hex},
          {"step_seconds", step_seconds},
          {"checkpoint_seconds", checkpoint_seconds},
          {"rollback_versions", rollback_to},
          {"timeline", timeline_json},
          {"wall_seconds", now() - start},
          {"messages", o.messages},
          {"message_stats_rank0", nlohmann::ordered_json::parse(rt.messages().stats_json())},
          {"start_steady_seconds", start},
          {"placements", nlohmann::ordered_json::parse(placements)},
          {"recoveries", nlohmann::ordered_json::parse(rt.recovery_json())},
          {"memory", nlohmann::ordered_json::parse(rt.memory_json())},  // rank 0's, against its budget
          {"checkpoint_metrics", nlohmann::ordered_json::parse(rt.metrics_json())}};
      std::ofstream(o.json) << j.dump() << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"reprise-stencil: Kokkos heat equation on a 2D process grid, protected by Reprise"};
  app.add_option("--nx", o.nx, "global rows")->check(CLI::PositiveNumber);
  app.add_option("--ny", o.ny, "global columns")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "time steps");
  app.add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints")->check(CLI::PositiveNumber);
  app.add_option("--progress-every", o.progress_every, "print a progress line every N steps (0: none)");
  app.add_option("--json", o.json, "write steps, timings and recoveries as JSON (rank 0)");
  app.add_option("--messages", o.messages, "halo exchange through reprise::Comm (logged between groups) or raw MPI")
      ->check(CLI::IsMember({"reprise", "mpi"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return reprise::apps::mpi_app_main("reprise-stencil", argc, argv, [&] { return run(o); });
}
