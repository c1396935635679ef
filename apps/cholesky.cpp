// reprise-cholesky: tiled Cholesky factorisation A = L L^T of a symmetric positive definite matrix (double), tiles
// as protected Kokkos views, 2D block-cyclic distribution. Tile kernels where the tiles live: LAPACKE/CBLAS
// (OpenBLAS, one thread) on host tiles, cuSOLVER/cuBLAS on device tiles (`--tiles device`, a CUDA-enabled Kokkos).
//
// Loop order: left-looking (seed 004, chapter 2). Panel k updates only the tiles of column k with the finished
// columns 0..k-1, factors the diagonal tile and solves the panel. So between two checkpoints only the columns
// processed since change: with differential versions a checkpoint stores those columns, never the whole trailing
// matrix that a right-looking order rewrites at every step. A checkpoint is taken every --checkpoint-every panels.
//
// Prints `residual <||A - L L^T||_F / ||A||_F>` and `checksum 0x<16 hex>` (XXH3 of L; independent of the rank
// count and of failures: every tile accumulates its updates in the same order, with the same kernels) and exits 1
// when the residual exceeds 1e-12. Host and device tiles give different checksums (different BLAS), each the
// same with and without failures.
//
//   REPRISE_RANKS_PER_NODE=2 REPRISE_KILL=3:5 scripts/mpirun.sh -n 8 -- reprise-cholesky --n 512 --tile 64
#include <cblas.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mpi_app_main.hpp"
#include "reprise/kokkos.hpp"
#include "reprise/mpi.hpp"
#include "tile_kernels.hpp"

namespace {

using HostTile = Kokkos::View<double**, Kokkos::LayoutLeft, Kokkos::HostSpace>;
// Device tiles: the default execution space's memory (CudaSpace with a CUDA-enabled Kokkos).
using DeviceSpace = Kokkos::DefaultExecutionSpace::memory_space;
constexpr bool kKokkosHasDevice = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, DeviceSpace>::accessible;
using Index = std::pair<int, int>;  // (row, column) of a tile, row >= column

struct Options {
  int n = 512, tile = 64;
  std::uint64_t checkpoint_every = 2;
  std::string json;
  bool progress = false;
  std::string messages = "reprise";
  std::string tiles = kKokkosHasDevice ? "device" : "host";
};

struct Grid {
  int p = 1, q = 1, tiles = 0;
  int owner(int i, int j) const { return (i % p) * q + (j % q); }
};

// Entry (r, c) of the matrix: a symmetric pseudo-random value in [0, 1), plus n on the diagonal (diagonally
// dominant, hence positive definite). A function of the global indices only.
double entry(int r, int c, int n) {
  const std::uint64_t a = static_cast<std::uint64_t>(std::max(r, c)), b = static_cast<std::uint64_t>(std::min(r, c));
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull + b + 1;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53 + (r == c ? n : 0.0);
}

template <class Tile>
void fill_tile(const Tile& t, int i, int j, int b, int n) {
  auto h = Kokkos::create_mirror_view(t);  // the tile itself when it is in host memory
  for (int c = 0; c < b; ++c)
    for (int r = 0; r < b; ++r) h(r, c) = entry(i * b + r, j * b + c, n);
  Kokkos::deep_copy(t, h);
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Tiles in memory space Space: HostSpace (LAPACKE/CBLAS) or the device's (cuSOLVER/cuBLAS).
template <class Space>
class Factorization {
 public:
  using Tile = Kokkos::View<double**, Kokkos::LayoutLeft, Space>;
  static constexpr bool kHostTiles = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible;

  Factorization(reprise::MpiRuntime& rt, const Options& o)
      : rt_(rt),
        o_(o),
        b_(o.tile),
        kernels_(kHostTiles ? reprise::apps::make_host_tile_kernels(o.tile)
                            : reprise::apps::make_cuda_tile_kernels(o.tile)) {
    int dims[2] = {0, 0};
    MPI_Dims_create(rt.size(), 2, dims);
    g_.p = dims[0];
    g_.q = dims[1];
    g_.tiles = o.n / o.tile;
    for (int j = 0; j < g_.tiles; ++j)
      for (int i = j; i < g_.tiles; ++i)
        if (g_.owner(i, j) == rt.rank()) {
          Tile& t = mine_[{i, j}];  // followed by the runtime: a map's elements stay where they are
          t = Tile("A_" + std::to_string(i) + "_" + std::to_string(j), b_, b_);
          rt.protect(t);
        }
    reset();
    rt.protect("panels_done", &done_);
  }

  std::uint64_t& done() { return done_; }

  // The state before the first panel: every tile of A as generated, no panel done.
  void reset() {
    for (auto& [x, t] : mine_) fill_tile(t, x.first, x.second, b_, o_.n);
    Kokkos::fence();
    done_ = 0;
  }
  int tiles() const { return g_.tiles; }
  const char* kernels() const { return kernels_->name(); }

  // Panel k: update column k with columns 0..k-1, factor the diagonal tile, solve the panel.
  void panel(int k) {
    const int T = g_.tiles;
    // 1. The finished tiles the updates of column k need: L(i, j) and L(k, j) for every tile (i, k) and j < k.
    auto needs = [&](int rank) {
      std::set<Index> s;
      for (int i = k; i < T; ++i)
        if (g_.owner(i, k) == rank)
          for (int j = 0; j < k; ++j) {
            s.insert({i, j});
            s.insert({k, j});
          }
      return s;
    };
    std::map<Index, Tile> remote;
    exchange(needs, remote);
    auto tile = [&](Index x) -> const Tile& {
      auto it = mine_.find(x);
      return it != mine_.end() ? it->second : remote.at(x);
    };
    for (int i = k; i < T; ++i) {
      if (g_.owner(i, k) != rt_.rank()) continue;
      Tile& a = mine_.at({i, k});
      for (int j = 0; j < k; ++j) {
        const Tile& lk = tile({k, j});
        if (i == k)
          kernels_->syrk(lk.data(), a.data());
        else
          kernels_->gemm(tile({i, j}).data(), lk.data(), a.data());
      }
    }
    // 2. Factor the diagonal tile; 3. send it to the owners of the panel; 4. solve the panel.
    if (g_.owner(k, k) == rt_.rank()) {
      const int info = kernels_->potrf(mine_.at({k, k}).data());  // waits for the updates
      if (info != 0)
        throw reprise::Error("dpotrf failed on tile (" + std::to_string(k) + "," + std::to_string(k) + "): info " +
                             std::to_string(info) + " (the matrix is not positive definite)");
    }
    std::map<Index, Tile> diag;
    exchange(
        [&](int rank) {
          std::set<Index> s;
          for (int i = k + 1; i < T; ++i)
            if (g_.owner(i, k) == rank) s.insert({k, k});
          return s;
        },
        diag);
    for (int i = k + 1; i < T; ++i) {
      if (g_.owner(i, k) != rt_.rank()) continue;
      const Tile& lkk = mine_.count({k, k}) ? mine_.at({k, k}) : diag.at({k, k});
      kernels_->trsm(lkk.data(), mine_.at({i, k}).data());
    }
    kernels_->synchronize();  // the panel is in the tiles before a checkpoint digests them
  }

  // L gathered on rank 0 (column-major n x n, upper part zero); empty elsewhere.
  std::vector<double> gather_l() {
    const int n = o_.n, T = g_.tiles;
    std::vector<double> l;
    if (rt_.rank() == 0) l.assign(static_cast<std::size_t>(n) * n, 0.0);
    std::vector<MPI_Request> reqs;
    std::vector<reprise::Comm::Request> creqs;  // through reprise::Comm: survives a group rollback meanwhile
    const bool via_comm = o_.messages == "reprise";
    reprise::Comm& c = rt_.messages();
    const std::size_t bytes = static_cast<std::size_t>(b_) * static_cast<std::size_t>(b_) * sizeof(double);
    // This rank's tiles in host memory (the tiles themselves when they are host tiles).
    std::map<Index, HostTile> own;
    for (const auto& [x, t] : mine_) own[x] = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), t);
    std::vector<HostTile> inbox;
    for (int j = 0; j < T; ++j)
      for (int i = j; i < T; ++i) {
        const int o = g_.owner(i, j);
        if (rt_.rank() == 0 && o != 0) {
          inbox.emplace_back("in", b_, b_);
          if (via_comm) {
            creqs.push_back(c.irecv(inbox.back().data(), bytes, o, 2, reprise::MemorySpace::Host));
          } else {
            reqs.emplace_back();
            rt_.check(MPI_Irecv(inbox.back().data(), b_ * b_, MPI_DOUBLE, o, i * T + j, rt_.comm(), &reqs.back()));
          }
        } else if (o == rt_.rank() && o != 0) {
          if (via_comm)
            c.send(static_cast<const void*>(own.at({i, j}).data()), bytes, 0, 2, reprise::MemorySpace::Host);
          else
            rt_.check(MPI_Send(own.at({i, j}).data(), b_ * b_, MPI_DOUBLE, 0, i * T + j, rt_.comm()));
        }
      }
    c.waitall(creqs);
    for (auto& r : reqs) rt_.check(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rt_.rank() != 0) return l;
    std::size_t next = 0;
    for (int j = 0; j < T; ++j)
      for (int i = j; i < T; ++i) {
        const HostTile& t = g_.owner(i, j) == 0 ? own.at({i, j}) : inbox[next++];
        for (int c = 0; c < b_; ++c)
          for (int r = 0; r < b_; ++r)
            if (i * b_ + r >= j * b_ + c) l[static_cast<std::size_t>(j * b_ + c) * n + (i * b_ + r)] = t(r, c);
      }
    return l;
  }

 private:
  // Every rank sends the tiles it owns that `needs(rank)` names, and receives those it needs but does not own.
  // Receives first, then sends, then one wait per request (a failure throws Rollback). Through reprise::Comm
  // (default; tiles sent to another group are logged by their sender; device tiles are staged by Comm) or raw MPI
  // (device tiles staged through host mirrors here: no Debian MPI is CUDA-aware). Each pair of ranks sends and
  // receives its tiles in the same (sorted) order, so a channel's messages complete in the order they were sent.
  template <class Needs>
  void exchange(Needs needs, std::map<Index, Tile>& into) {
    const int T = g_.tiles, me = rt_.rank();
    const reprise::MemorySpace space = kHostTiles ? reprise::MemorySpace::Host : reprise::MemorySpace::Device;
    if (o_.messages == "reprise") {
      reprise::Comm& c = rt_.messages();
      const std::size_t bytes = static_cast<std::size_t>(b_) * static_cast<std::size_t>(b_) * sizeof(double);
      std::vector<reprise::Comm::Request> reqs;
      for (const Index& x : needs(me)) {
        const int o = g_.owner(x.first, x.second);
        if (o == me) continue;
        Tile t("remote", b_, b_);
        into[x] = t;
        reqs.push_back(c.irecv(t.data(), bytes, o, 1, space));  // one tag: each channel in sorted order
      }
      for (int d = 0; d < rt_.size(); ++d) {
        if (d == me) continue;
        for (const Index& x : needs(d))
          if (g_.owner(x.first, x.second) == me) reqs.push_back(c.isend(mine_.at(x).data(), bytes, d, 1, space));
      }
      c.waitall(reqs);
      return;
    }
    std::vector<MPI_Request> reqs;
    std::vector<std::pair<Tile, typename Tile::HostMirror>> landed;  // (tile, the host memory it arrives in)
    std::vector<HostTile> outgoing;                                  // host copies of device tiles being sent
    for (const Index& x : needs(me)) {
      const int o = g_.owner(x.first, x.second);
      if (o == me) continue;
      Tile t("remote", b_, b_);
      into[x] = t;
      landed.emplace_back(t, Kokkos::create_mirror_view(t));
      reqs.emplace_back();
      rt_.check(MPI_Irecv(landed.back().second.data(), b_ * b_, MPI_DOUBLE, o, x.first * T + x.second, rt_.comm(),
                          &reqs.back()));
    }
    for (int d = 0; d < rt_.size(); ++d) {
      if (d == me) continue;
      for (const Index& x : needs(d)) {
        if (g_.owner(x.first, x.second) != me) continue;
        outgoing.push_back(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), mine_.at(x)));
        reqs.emplace_back();
        rt_.check(MPI_Isend(outgoing.back().data(), b_ * b_, MPI_DOUBLE, d, x.first * T + x.second, rt_.comm(),
                            &reqs.back()));
      }
    }
    for (auto& r : reqs) rt_.check(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (auto& [t, h] : landed) Kokkos::deep_copy(t, h);  // no copy for host tiles (h is t)
  }

  reprise::MpiRuntime& rt_;
  const Options& o_;
  int b_;
  Grid g_;
  std::map<Index, Tile> mine_;
  std::uint64_t done_ = 0;
  std::unique_ptr<reprise::apps::TileKernels> kernels_;
};

template <class Space>
int run(const Options& o) {
  // Every message goes through reprise::Comm (the default): only the groups of failed ranks roll back.
  const std::optional<reprise::Config> config = reprise::apps::app_config("reprise-cholesky", o.messages);
  if (!config) return 2;
  reprise::MpiRuntime rt(MPI_COMM_WORLD, *config);
  const int rank = rt.rank();
  Factorization<Space> f(rt, o);
  if (rt.restarted()) {
    rt.restore();
    if (rank == 0) std::printf("restarted from panel %" PRIu64 "\n", f.done());
  }
  const double t0 = now();
  std::size_t checkpoints = 0, rollbacks = 0;
  std::vector<double> l;
  for (;;) {
    try {
      while (f.done() < static_cast<std::uint64_t>(f.tiles())) {
        rt.step(f.done());
        f.panel(static_cast<int>(f.done()));
        ++f.done();
        if (f.done() % o.checkpoint_every == 0) {
          rt.checkpoint(f.done());
          ++checkpoints;
        }
        if (rank == 0 && o.progress) std::printf("panel %" PRIu64 "/%d\n", f.done(), f.tiles()), std::fflush(stdout);
      }
      l = f.gather_l();
      rt.finish();  // every rank got here without a failure (else all roll back together)
      break;
    } catch (const reprise::Rollback& rb) {
      if (rb.from_start())
        f.reset();  // no checkpoint was committed before the failure: the initial matrix
      else
        rt.restore();
      ++rollbacks;
      if (rank == 0) std::printf("rolled back to panel %" PRIu64 "\n", f.done()), std::fflush(stdout);
    }
  }
  const double seconds = now() - t0;
  // Where every rank ran (hwloc: NUMA node, closest GPU): a raw collective, after finish() (every rank is there).
  const std::string placements = rt.placements_json();
  int rc = 0;
  if (rank == 0) {
    const int n = o.n;
    // Residual: C = A - L L^T on the lower triangle (dsyrk), Frobenius norms counting the upper half by symmetry.
    std::vector<double> c(static_cast<std::size_t>(n) * n);
    for (int col = 0; col < n; ++col)
      for (int r = col; r < n; ++r) c[static_cast<std::size_t>(col) * n + r] = entry(r, col, n);
    double a2 = 0;
    for (int col = 0; col < n; ++col)
      for (int r = col; r < n; ++r)
        a2 += (r == col ? 1 : 2) * c[static_cast<std::size_t>(col) * n + r] * c[static_cast<std::size_t>(col) * n + r];
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, n, -1.0, l.data(), n, 1.0, c.data(), n);
    double r2 = 0;
    for (int col = 0; col < n; ++col)
      for (int r = col; r < n; ++r)
        r2 += (r == col ? 1 : 2) * c[static_cast<std::size_t>(col) * n + r] * c[static_cast<std::size_t>(col) * n + r];
    const double residual = std::sqrt(r2 / a2);
    const std::uint64_t checksum = XXH3_64bits(l.data(), l.size() * sizeof(double));
    std::printf("ranks %d n %d tile %d panels %d checkpoints %zu rollbacks %zu seconds %.3f tiles %s\n", rt.size(), n,
                o.tile, f.tiles(), checkpoints, rollbacks, seconds, f.kernels());
    std::printf("residual %.3e\n", residual);
    std::printf("checksum 0x%016" PRIx64 "\n", checksum);
    if (o.messages == "reprise") std::printf("messages rank 0 %s\n", rt.messages().stats_json().c_str());
    std::printf("placements %s\n", placements.c_str());
    if (!(residual <= 1e-12)) {
      std::printf("residual above 1e-12: the factorisation is wrong\n");
      rc = 1;
    }
    if (!o.json.empty()) {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%016" PRIx64, checksum);
      const nlohmann::ordered_json j = {{"ranks", rt.size()},
                                        {"n", n},
                                        {"tile", o.tile},
                                        {"tiles", o.tiles},
                                        {"checkpoint_every", o.checkpoint_every},
                                        {"checkpoints", checkpoints},
                                        {"rollbacks", rollbacks},
                                        {"seconds", seconds},
                                        {"residual", residual},
                                        {"checksum", hex},
                                        {"placements", nlohmann::ordered_json::parse(placements)},
                                        {"recoveries", nlohmann::ordered_json::parse(rt.recovery_json())},
                                        {"memory", nlohmann::ordered_json::parse(rt.memory_json())},  // rank 0's
                                        {"checkpoint_metrics", nlohmann::ordered_json::parse(rt.metrics_json())}};
      std::ofstream(o.json) << j.dump() << "\n";
    }
  }
  return rc;  // rank 0's verdict becomes mpirun's exit status
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"reprise-cholesky: tiled left-looking Cholesky on a 2D block-cyclic grid, protected by Reprise"};
  app.add_option("--n", o.n, "matrix order")->check(CLI::PositiveNumber);
  app.add_option("--tile", o.tile, "tile order (--n must be a multiple)")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-every", o.checkpoint_every, "panels between checkpoints")->check(CLI::PositiveNumber);
  app.add_option("--json", o.json, "write timings, residual, checksum and recoveries as JSON (rank 0)");
  app.add_flag("--progress", o.progress, "print a line per panel");
  app.add_option("--messages", o.messages, "tile exchange through reprise::Comm (logged between groups) or raw MPI")
      ->check(CLI::IsMember({"reprise", "mpi"}));
  app.add_option("--tiles", o.tiles,
                 "where the tiles live: host (LAPACKE/CBLAS) or device (cuSOLVER/cuBLAS; needs a CUDA-enabled Kokkos); "
                 "default: device when Kokkos has one")
      ->check(CLI::IsMember({"host", "device"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.n % o.tile != 0) {
    std::fprintf(stderr, "reprise-cholesky: --n (%d) must be a multiple of --tile (%d); see --help\n", o.n, o.tile);
    return 2;
  }
  if (o.tiles == "device" && !kKokkosHasDevice) {
    std::fprintf(stderr,
                 "reprise-cholesky: --tiles device needs a Kokkos with a device backend; this one (%s) has host "
                 "memory only: build against a CUDA-enabled Kokkos (docs/GPU.md) or use --tiles host (see --help)\n",
                 Kokkos::DefaultExecutionSpace::name());
    return 2;
  }
  openblas_set_num_threads(1);  // bit-identical results whatever the rank count
  return reprise::apps::mpi_app_main("reprise-cholesky", argc, argv, [&] {
    return o.tiles == "device" ? run<DeviceSpace>(o) : run<Kokkos::HostSpace>(o);
  });
}
