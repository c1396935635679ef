// reprise::MpiRuntime: the Runtime with MpiCoordination (mpi/coordination.hpp) as its coordination.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_name.hpp"
#include "gpu/backend.hpp"
#include "mpi/coordination.hpp"
#include "mpi/layout.hpp"
#include "mpi/recovery_watch.hpp"
#include "protocol/placement.hpp"
#include "reprise/mpi.hpp"

namespace reprise {
namespace {

// REPRISE_FINISH_RECORD=FILE (set by scripts/mpirun-watch.sh): each process appends "started RANK" once its runtime
// exists and "finished RANK" when the runtime finishes or is destroyed, so that a launcher that reports processes
// killed by a signal as a success (Open MPI 5.0.7 with --with-ft ulfm) can tell a job that did not end.
void record_finish_state(const char* what, int rank) {
  const char* path = std::getenv("REPRISE_FINISH_RECORD");
  if (path == nullptr || *path == '\0') return;
  if (std::FILE* f = std::fopen(path, "a")) {  // (one short line per write: appends of processes do not interleave)
    std::fprintf(f, "%s %d\n", what, rank);
    std::fclose(f);
  }
}

}  // namespace

struct MpiRuntime::Parts {
  Config config;
  std::unique_ptr<runtime::Coordination> owned;
  mpi::MpiCoordination* coord = nullptr;
};

MpiRuntime::MpiRuntime(MPI_Comm comm, Config config)
    : MpiRuntime([&] {
        Parts p;
        auto c = std::make_unique<mpi::MpiCoordination>(comm, config);
        p.coord = c.get();
        p.owned = std::move(c);
        p.config = config;
        return p;
      }()) {}

MpiRuntime::MpiRuntime(Parts parts) : Runtime(std::move(parts.config), std::move(parts.owned)), coord_(parts.coord) {
  // The channel counters of reprise::Comm are part of every version (restored with the application's data).
  mpi::CommState& c = coord_->comm_state();
  protect_resizable("reprise.channels",
                    [&c](std::optional<std::size_t> bytes) { return c.locate_counter_region(bytes); });
  // The message log snapshot and orphan record: a replacement replays from the log its predecessor checkpointed.
  // Its payloads go from the log's segments straight into the version, on the checkpoint's background thread, not
  // inside checkpoint().
  protect_deferred(
      "reprise.log",
      [&c] {
        protocol::LogRegion::Plan p = c.take_log_plan();
        return Deferred{p.bytes, std::move(p.changed), p.all, std::move(p.fill), p.used};
      },
      [&c](std::optional<std::size_t> bytes) { return c.locate_log_region(bytes); });
  record_finish_state("started", coord_->rank());
}

void MpiRuntime::on_restore(std::function<void()> hook) {
  coord_->on_restore(std::move(hook));
}
void MpiRuntime::before_checkpoint(std::function<void()> hook) {
  coord_->before_checkpoint(std::move(hook));
}

void MpiRuntime::collective_point() {
  coord_->collective_point();
}

Comm& MpiRuntime::messages() {
  return coord_->comm_state().comm();
}

MpiRuntime::~MpiRuntime() {
  if (!finished_) record_finish_state("finished", coord_->rank());
}

MPI_Comm MpiRuntime::comm() const {
  return coord_->app();
}
int MpiRuntime::rank() const {
  return coord_->rank();
}
int MpiRuntime::size() const {
  return coord_->size();
}
int MpiRuntime::group() const {
  return coord_->layout().group_of(coord_->rank());
}
int MpiRuntime::buddy() const {
  return coord_->layout().buddy_of(coord_->rank());
}
void MpiRuntime::finish() {
  finished_ = false;
  wait();
  coord_->finish();
  finished_ = true;
  record_finish_state("finished", coord_->rank());
  if (!config().comm_matrix_dir.empty()) coord_->comm_state().write_matrix_row(config().comm_matrix_dir);
}

void MpiRuntime::check(int mpi_result) {
  coord_->check(mpi_result);
}
void MpiRuntime::step(std::uint64_t s) {
  finished_ = false;
  coord_->step(s);
  // Log bound: the group checkpoints here when one of its members was asked to (see Config::log_bound_bytes).
  if (coord_->log_checkpoint_due(s) && forced_checkpoint(s)) coord_->comm_state().note_forced_checkpoint();
}
std::optional<std::uint64_t> MpiRuntime::acknowledged() const {
  return coord_->acknowledged();
}
std::optional<std::uint64_t> MpiRuntime::committed() const {
  return coord_->committed();
}
std::string MpiRuntime::buddy_json() const {
  return coord_->buddy_json();
}
std::string MpiRuntime::recovery_json() const {
  return coord_->recovery_json();
}
std::string MpiRuntime::placement_json() const {
  return coord_->placement_json();
}
std::string MpiRuntime::placements_json() {
  const std::string mine = placement_json();
  const int n = size();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(n)), offsets(static_cast<std::size_t>(n));
  check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm()));
  int total = 0;
  for (int i = 0; i < n; ++i) {
    offsets[static_cast<std::size_t>(i)] = total;
    total += lens[static_cast<std::size_t>(i)];
  }
  std::string all(static_cast<std::size_t>(total), ' ');
  check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, comm()));
  std::string out = "[";
  for (int i = 0; i < n; ++i)
    out += (i ? "," : "") + all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(i)]),
                                       static_cast<std::size_t>(lens[static_cast<std::size_t>(i)]));
  return out + "]";
}
bool MpiRuntime::own_thread() {
  return core::runtime_thread();
}

int MpiRuntime::init_within_recovery_limit(const std::function<int()>& init) {
  const char* replacing = std::getenv("REPRISE_REPLACING");
  if (!replacing || !*replacing) return init();
  unsigned limit = Config{}.recovery_timeout_s;
  try {
    limit = Config::from_env().recovery_timeout_s;
  } catch (const Error&) {  // (a bad setting is said by the runtime's start, after MPI_Init)
  }
  if (limit == 0) return init();
  mpi::RecoveryWatch* slot = nullptr;
  mpi::RecoveryWatch watch(slot, std::string("a replacement (REPRISE_REPLACING=") + replacing + ")",
                           std::chrono::milliseconds(0), std::chrono::seconds(limit));
  watch.stage("in MPI_Init (it returns once the survivors' MPI_Comm_spawn does)");
  return init();
}

int MpiRuntime::closest_gpu(MPI_Comm comm) {
  int rank = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm parent = MPI_COMM_NULL;
  REPRISE_MPI_CHECK(MPI_Comm_get_parent(&parent));
  const char* replacing = std::getenv("REPRISE_REPLACING");
  if (parent != MPI_COMM_NULL && replacing && *replacing) {
    // A replacement (every process of its spawned world is one): the GPU of the rank it replaces.
    const protocol::Replacing r = protocol::parse_replacing(replacing, rank);
    const int gpu = protocol::locate(r.local_index, gpu::cuda_pci_bus_ids()).gpu;
    std::fprintf(stderr, "reprise: replacement of rank %d: takes the GPU of local index %d on its node (%s)\n", r.rank,
                 r.local_index, gpu >= 0 ? ("CUDA device " + std::to_string(gpu)).c_str() : "no GPU usable here");
    return gpu;
  }
  mpi::TopologyConfig topology = mpi::TopologyConfig::from_env();
  topology.spec.files_only_allowed = true;  // only the ranks' places on their nodes matter here
  const protocol::Layout layout = mpi::discover_layout(comm, topology);
  return protocol::locate(layout.local_index(rank), gpu::cuda_pci_bus_ids()).gpu;
}

}  // namespace reprise
