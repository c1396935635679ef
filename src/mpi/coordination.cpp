#include "mpi/coordination.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/memory_budget.hpp"
#include "mpi/layout.hpp"
#include "mpi/polled.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {
namespace {

// What the MPI says at run time of CUDA device buffers (Open MPI's extension; MPICH 4's GPU query). Open MPI with
// ULFM runs on its ob1 PML (the only one that tolerates failures), which copies device buffers through host memory.
protocol::MpiCudaSupport mpi_cuda_support() {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
  return MPIX_Query_cuda_support() ? protocol::MpiCudaSupport::ThroughHost : protocol::MpiCudaSupport::No;
#else
  return MPIX_Query_cuda_support() ? protocol::MpiCudaSupport::Yes : protocol::MpiCudaSupport::No;
#endif
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
  int supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) != MPI_SUCCESS)
    return protocol::MpiCudaSupport::Unknown;
  return supported ? protocol::MpiCudaSupport::Yes : protocol::MpiCudaSupport::No;
#else
  return protocol::MpiCudaSupport::Unknown;
#endif
}

}  // namespace

MpiCoordination::MpiCoordination(MPI_Comm user, Config& cfg) : cfg_(cfg) {
  int provided = 0;
  REPRISE_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    throw ConfigError(
        "reprise::MpiRuntime needs MPI initialised with MPI_THREAD_MULTIPLE (call MPI_Init_thread "
        "and check `provided`): its progress and background threads call MPI");
  kills_ = protocol::parse_kill_spec(std::getenv("REPRISE_KILL") ? std::getenv("REPRISE_KILL") : "");
  group_rollback_ = cfg.group_rollback;
  // REPRISE_CUDA_AWARE_MPI=yes where the MPI says it cannot take device buffers: refused now, on every rank,
  // rather than at the first device message.
  if (cfg.cuda_aware_mpi == CudaAwareMpi::Yes && device_pointers_possible())
    protocol::choose_device_mpi(cfg.cuda_aware_mpi, "cuda", mpi_cuda_support());
  // A write to the socket of a process that died raises SIGPIPE, whose default action kills this process too
  // (seen: a replacement of an abandoned recovery attempt, and survivors, killed by signal 13). With it
  // ignored the write fails with EPIPE, which the MPI library reports as the failure it is. An application's
  // own handler is left alone.
  struct sigaction old_action {};
  if (sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
  MPI_Comm parent = MPI_COMM_NULL;
  REPRISE_MPI_CHECK(MPI_Comm_get_parent(&parent));
  MPI_Comm app = MPI_COMM_NULL;
  if (parent == MPI_COMM_NULL) app = spares_.start(user, cfg.spares);  // REPRISE_SPARES: the job's last processes
  if (parent != MPI_COMM_NULL) {
    recovery_.join_as_replacement(parent, cfg);
  } else if (spares_.spare()) {  // waits here until a recovery takes it (or ends the process with the job)
    recovery_.join_as_replacement(spares_.wait_until_needed(), cfg, spares_.node_key());
  } else {
    adopt(app);
    cfg.rank = rank_;
    cfg_ = cfg;
    local_ = own_store();
    recovery_.agree_on_restart();
  }
  cfg = cfg_;
  logging::LogOptions log_options;
  log_options.bound_bytes = cfg.log_bound_bytes;
  log_options.segment_bytes = core::log_segment_bytes(cfg);
  // Before the log takes a new segment, the rank's memory kept for reuse goes first over its budget (make_room);
  // the segment counts at once in what the other threads sample (memory_now), not from the next reading only.
  logging::MessageLog::Allocate segments = log_memory();
  if (!segments) segments = logging::host_segment_memory;
  auto budgeted = [this, segments](std::size_t bytes) {
    struct Counted {  // what make_room allowed counts in the log's part from here (also when allocating threw)
      MpiCoordination& c;
      std::size_t n;
      ~Counted() {
        if (n) c.memory_counted(n);
      }
    } allowed{*this, make_room(bytes, false) ? bytes : 0};
    gpu::Buffer b = segments(bytes);
    if (allowed.n) memory_counted(std::exchange(allowed.n, 0));
    std::lock_guard<std::mutex> lock(comm_use_mutex_);
    log_new_ += b.size();
    return b;
  };
  comm_state_ = std::make_unique<CommState>(*this, rank_, layout_.group_map(), log_options, budgeted);
  comm_state_->gate_views_on_job_floor(commit_.holds_job_floor());
  if (!cfg.comm_matrix_dir.empty()) comm_state_->count_bytes_per_peer();
  comm_state_->add_epoch(msg_, payload_);
  recovery_.on_comm_created();
}

MpiCoordination::~MpiCoordination() {
  // Every owner's last version has reached its buddy. Not while an exception unwinds (a usage or protocol error
  // on some ranks): the others are not coming, and the application is about to report it and abort the job.
  if (!down_ && std::uncaught_exceptions() == 0) {
    last_barrier();
    spares_.release();  // (finish() released them already, unless the application never called it)
  } else if (down_ && std::uncaught_exceptions() == 0) {
    std::fprintf(stderr,
                 "reprise: rank %d: leaves without the job's last barrier: a failure was reported after "
                 "the last agreement\n",
                 rank_);
  }
  buddy_.stop();
  // Free every communicator, including those revoked by earlier recoveries: Open MPI's MPI_Finalize
  // disconnects each communicator that still spans several jobs (the spawned replacements), and doing so with
  // processes it never reached crashes inside its TCP transport.
  for (MPI_Comm* c : {&app_, &group_, &data_, &ack_, &msg_, &payload_, &view_, &ctl_, &world_}) retired_.push_back(*c);
  for (MPI_Comm& c : retired_)
    if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPI_Comm_free(&c));  // (leaving: nothing to do about an error)
}

// The job's last barrier, polled: a rank still in it after 30 s says so and what it waits for (a stress run
// once saw a job hang after its results were printed; this names the rank and its state next time).
void MpiCoordination::last_barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(world_, &req) != MPI_SUCCESS) return;
  const auto t0 = std::chrono::steady_clock::now();
  bool warned = false;
  for (unsigned spin = 0;; ++spin) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) return;  // a failure now: leave anyway
    if (!warned && std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) {
      std::fprintf(stderr, "reprise: rank %d: still in the job's last barrier after 30 s: %s\n", rank_,
                   comm_state_ ? comm_state_->debug_state().c_str() : "");
      warned = true;
    }
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void MpiCoordination::before_capture(std::uint64_t version) {
  current_step_ = std::max(current_step_, version);
  if (down_) recover("a failure was detected by the runtime's background threads");
  if (checkpoint_hook_) checkpoint_hook_();  // (a layer's messages owed to this version: before the group agrees)
  if (should_die(version, protocol::KillPoint::Checkpoint)) die("checkpoint", version);
  if (should_die(version, protocol::KillPoint::Commit)) die("commit", version);
  buddy_.hurry();  // the buddies of a group checkpoint together: this rank's ward ships its version now too
  comm_state_->enter();
  commit_.agree(version);
}

void MpiCoordination::after_wait() {
  if (down_) recover("a failure was detected by the runtime's background threads");
  commit_.agree();
}

gpu::Backend& MpiCoordination::device() {
  if (device_) return *device_;
  device_ = gpu::make_backend(cfg_.device_backend, "reprise::Comm was given a device buffer");
  return *device_;
}

bool MpiCoordination::device_pointers_possible() {
  if (!device_possible_)
    device_possible_ = cfg_.device_backend != DeviceBackendKind::HostTwin && gpu::cuda_device_count() > 0;
  return *device_possible_;
}

protocol::DeviceMpiChoice MpiCoordination::device_mpi() {
  return protocol::choose_device_mpi(cfg_.cuda_aware_mpi, device().name(), mpi_cuda_support());
}

// No process of the job failed and none of this rank's communicators is revoked.
bool MpiCoordination::no_failure() {
#if REPRISE_HAVE_ULFM
  for (MPI_Comm c : {world_, app_, data_, ack_, view_, ctl_, group_}) {
    int f = 0;
    if (c != MPI_COMM_NULL && MPIX_Comm_is_revoked(c, &f) != MPI_SUCCESS) return false;  // (cannot tell: say no)
    if (f) return false;
  }
  return polled::failed_in(world_) == 0;
#else
  return true;
#endif
}

bool MpiCoordination::spurious(int rc) {
#if REPRISE_HAVE_ULFM
  if (!is_failure(rc) || down_ || !no_failure()) return false;
  if (trace_) std::fprintf(stderr, "reprise: rank %d: spurious %s ignored\n", rank_, mpi_error(rc).c_str());
  return true;
#else
  (void)rc;
  return false;
#endif
}

void MpiCoordination::check_mpi(int rc, const CallSite& at) {
  if (rc == MPI_SUCCESS || spurious(rc)) return;
  request_failed(rc, at);
}

void MpiCoordination::request_failed(int rc, const CallSite& at) {
  trace_revoked("check_mpi");
  if (is_failure(rc)) {
    recover("an MPI call of reprise::Comm reported: " + mpi_error(rc));
    return;  // a survivor of a group rollback: the repair re-posted what involved the rolled-back ranks
  }
  throw Error("MPI error in reprise::Comm: " + describe(rc, at));
}

void MpiCoordination::before_restart_exchange() {
  if (should_die(current_step_, protocol::KillPoint::Exchange)) die("exchange", current_step_);
}

void MpiCoordination::poll_failure() {
  if (down_) trace_revoked("poll_failure");
  if (down_) recover("a failure was detected by the runtime's background threads");
}

// The end of the job, uniform over every survivor: all return, or all recover and throw Rollback. A group's
// commit only involves the group, so without this a rank whose group is done could leave while another group
// is still to detect a failure and roll back, and the recovery would wait for it forever.
void MpiCoordination::finish() {
  if (store_) {
    store_->flush();  // the files hold every version before the job ends (a write's error is said here)
    if (const auto files = store_->files_progress()) commit_.tell_skipping(*files);  // (after the last agreement)
  }
  agree_to_finish();
  spares_.release();  // every rank is done: the spares leave
  // A REPRISE_KILL order this process outlived never fired: a run that was to test a failure tested none.
  const auto unfired =
      protocol::unfired_orders(kills_, rank_, replacement_ ? std::optional<std::uint64_t>(kill_floor_) : std::nullopt);
  for (const protocol::KillOrder& k : unfired)
    std::fprintf(stderr,
                 "reprise: rank %d: warning: REPRISE_KILL order %s never fired: this rank did not pass its %s point "
                 "at step %llu (no failure was injected there)\n",
                 rank_, protocol::to_string(k).c_str(), protocol::to_string(k.point),
                 static_cast<unsigned long long>(k.step));
}

void MpiCoordination::agree_to_finish() {
  if (down_) recover("a failure was detected by the runtime's background threads");
  comm_state_->enter();  // a rolled-back rank that goes straight to finish() still owes the restart exchange
#if REPRISE_HAVE_ULFM
  // Every rank passes 1: the agreement's return code is the decision (MPI_SUCCESS: nobody failed, all leave), and
  // its flag says nothing more. Open MPI 5.0.7 sometimes returns flag 0 with MPI_SUCCESS after a recovery, and not
  // at every rank: in CI runs of an 8-rank group rollback, ranks 1, 3, 4 and 7 (the subtree of rank 1 in ERA's
  // binary tree) got 0 while ranks 0, 2, 5 and 6 got 1 and left. Agreeing again on 0 then waited forever for the
  // ranks that had left; the flag is only reported now.
  // Tests: REPRISE_FALSE_AGREEMENT=RANK,... makes those ranks see flag 0, as that fault does.
  const bool falsified = protocol::rank_listed_in_env("REPRISE_FALSE_AGREEMENT", rank_);
  const auto agreed = [&](int rc, int flag) {
    if (rc != MPI_SUCCESS) return false;
    if (falsified) flag = 0;
    if (flag != 1)
      std::fprintf(stderr,
                   "reprise: rank %d: the final agreement returned flag %d with MPI_SUCCESS although every rank "
                   "passed 1 (an Open MPI agreement fault); taken as agreed, since no rank failed\n",
                   rank_, flag);
    return true;
  };
  if (group_rollback_) {
    // Survivors of a group rollback wait here for the re-executing groups while serving their replays and
    // the coordinator's work: a non-blocking agreement, polled.
    for (;;) {
      int flag = 1;
      MPI_Request req = MPI_REQUEST_NULL;
      int rc = MPIX_Comm_iagree(world_, &flag, &req);
      auto since = std::chrono::steady_clock::now();
      for (unsigned spin = 0; rc == MPI_SUCCESS;) {
        if (trace_ && std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
          since = std::chrono::steady_clock::now();
          std::fprintf(stderr, "reprise: rank %d: waiting in finish: %s\n", rank_, comm_state_->debug_state().c_str());
        }
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done || down_) break;
        comm_state_->poll_control();
        if (++spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (!down_ && agreed(rc, flag)) return;
      if (req != MPI_REQUEST_NULL) {
        revoke(world_);
        REPRISE_MPI_DISCARD(MPI_Wait(&req, MPI_STATUS_IGNORE));  // (revoked: it ends, with an error)
      }
      recover("the job's final agreement failed: " + mpi_error(rc));  // a survivor agrees again
    }
  }
  for (;;) {
    int flag = 1;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPIX_Comm_iagree(world_, &flag, &req);  // uniform: the same rc at every survivor
    if (rc == MPI_SUCCESS) rc = polled::wait(req);   // polled: see mpi/polled.hpp
    if (agreed(rc, flag)) return;
    recover("the job's final agreement failed: " + mpi_error(rc));
  }
#else
  const int rc = MPI_Barrier(world_);
  if (is_failure(rc)) recover("the job's final barrier failed: " + mpi_error(rc));
  mpi::check(rc, REPRISE_MPI_SITE(MPI_Barrier(world_)));
#endif
}

void MpiCoordination::check(int rc) {
  if (rc == MPI_SUCCESS) return;
  if (is_failure(rc)) {
    recover("an MPI call of the application reported: " + mpi_error(rc));
    throw Error("rank " + std::to_string(rank_) +
                ": a raw MPI call on rt.comm() failed because of a process "
                "failure; with REPRISE_ROLLBACK=group this rank does not roll back and the call cannot be "
                "repeated: send the application's messages through rt.messages() (reprise::Comm)");
  }
  throw Error("MPI error on the application's communicator: " + mpi_error(rc));
}

void MpiCoordination::trace_revoked(const char* where) {
#if REPRISE_HAVE_ULFM
  if (!trace_) return;
  std::string out;
  const char* names[] = {"world", "app", "data", "ack", "msg", "payload", "view", "ctl", "group"};
  int i = 0;
  for (MPI_Comm c : {world_, app_, data_, ack_, msg_, payload_, view_, ctl_, group_}) {
    int f = 0;
    if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPIX_Comm_is_revoked(c, &f));  // (a trace)
    if (f) out += std::string(" ") + names[i];
    ++i;
  }
  if (comm_state_) {
    int e = 0;
    for (const auto& [m, pl] : comm_state_->epochs()) {
      int f1 = 0, f2 = 0;
      REPRISE_MPI_DISCARD(MPIX_Comm_is_revoked(m, &f1));  // (a trace)
      REPRISE_MPI_DISCARD(MPIX_Comm_is_revoked(pl, &f2));
      if (f1 || f2) out += " msg-epoch" + std::to_string(e) + (f1 ? "m" : "") + (f2 ? "p" : "");
      ++e;
    }
  }
  int nret = 0;
  for (MPI_Comm c : retired_) {
    int f = 0;
    if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPIX_Comm_is_revoked(c, &f));  // (a trace)
    nret += f;
  }
  if (!out.empty())
    std::fprintf(stderr, "reprise: rank %d: %s: revoked now:%s (retired revoked %d/%zu) at %.6f\n", rank_, where,
                 out.c_str(), nret, retired_.size(),
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
#else
  (void)where;
#endif
}

// The message log's segments: pinned memory when a GPU is usable (device payloads are then copied D2H straight
// into the log, and a log replayed from it needs no staging), plain host memory otherwise.
logging::MessageLog::Allocate MpiCoordination::log_memory() {
  if (gpu::cuda_device_count() <= 0) return nullptr;
  try {
    std::shared_ptr<gpu::Backend> be = gpu::make_cuda_backend();
    return [be](std::size_t bytes) { return be->alloc_pinned(bytes); };
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reprise: warning: the message log uses pageable memory (%s)\n", e.what());
    return nullptr;
  }
}

void MpiCoordination::collective_point() {
  if (should_die(current_step_, protocol::KillPoint::Collective)) die("collective", current_step_);
}

void MpiCoordination::step(std::uint64_t s) {
  trace_revoked("step");
  current_step_ = s;
  if (should_die(s, protocol::KillPoint::Compute)) die("compute", s);
  if (down_) recover("a failure was detected by the runtime's background threads");
  if (checkpoint_hook_) checkpoint_hook_();  // (every step: also where the log bound may make it checkpoint)
  comm_state_->enter();
}

std::string MpiCoordination::placement_json() const {
  if (!placement_)  // hwloc's topology is loaded once, on first use
    placement_ = protocol::locate(layout_.local_index(rank_), gpu::cuda_pci_bus_ids());
  return nlohmann::json{{"rank", rank_},
                        {"node", layout_.node_of(rank_)},
                        {"local_index", layout_.local_index(rank_)},
                        {"group", layout_.group_of(rank_)},
                        {"buddy", layout_.buddy_of(rank_)},
                        {"numa_node", placement_->numa_node},
                        {"cpuset", placement_->cpuset},
                        {"gpu", placement_->gpu},
                        {"gpu_numa_node", placement_->gpu_numa_node}}
      .dump();
}

unsigned MpiCoordination::ranks_on_node() const {
  if (layout_.ranks_per_node() > 0) return static_cast<unsigned>(layout_.ranks_per_node());
  unsigned n = 0;  // a table layout (once, at start)
  for (int r = 0; r < layout_.size(); ++r) n += layout_.node_of(r) == layout_.node_of(rank_) ? 1 : 0;
  return n;
}

std::map<std::string, std::size_t> MpiCoordination::memory_use() {
  {
    std::lock_guard<std::mutex> lock(comm_use_mutex_);
    comm_use_ = comm_state_->memory_use();
    log_new_ = 0;  // (in the reading now)
  }
  return memory_now();
}

std::map<std::string, std::size_t> MpiCoordination::memory_now() {
  std::map<std::string, std::size_t> use;
  {
    std::lock_guard<std::mutex> lock(comm_use_mutex_);
    use = comm_use_;
    if (log_new_) use["message_log"] += log_new_;
  }
  // The wards' copies, and the buffers kept to receive their next versions.
  const std::size_t copies = buddy_.copies_bytes(), all = buddy_.memory_bytes();
  use["wards"] = copies;
  use["ward_buffers"] = all > copies ? all - copies : 0;
  wards_sampled_ = all;
  return use;
}

// Buffers kept for reuse, freed for new memory: the wards' receive buffers first (as large as versions), then the
// message log's free segments.
// The log's part of memory_now() stays the application thread's last reading (its segments move between the log
// and the pool on that thread), plus the new segments taken since, less what was freed here since.
std::size_t MpiCoordination::shed(std::size_t bytes) {
  std::size_t freed = buddy_.shed(bytes);
  if (freed >= bytes) return freed;
  const std::size_t segments = comm_state_->shed_log_pool(bytes - freed);
  if (segments) {
    std::lock_guard<std::mutex> lock(comm_use_mutex_);
    std::size_t& pooled = comm_use_["log_pool"];
    pooled -= std::min(pooled, segments);
  }
  return freed + segments;
}

void MpiCoordination::memory_sampled(std::size_t bytes) {
  const std::size_t wards = wards_sampled_;
  held_besides_wards_ = bytes > wards ? bytes - wards : 0;
}

std::size_t MpiCoordination::room_for_wards() const {
  const std::size_t budget = budget_, rest = held_besides_wards_;
  return budget > rest ? budget - rest : 0;
}

// On the progress thread, a ward's version arrived: whether the rank holds more than half its budget.
bool MpiCoordination::over_half_budget_with_wards(std::size_t wards) const {
  const std::size_t budget = budget_;
  return budget != 0 && held_besides_wards_ + wards > budget / 2;
}

// On the progress thread, a ward's version stored: whether the rank now holds more than its budget.
bool MpiCoordination::over_budget_with_wards(std::size_t wards) const {
  const std::size_t budget = budget_;
  return budget != 0 && held_besides_wards_ + wards > budget;
}

// An explicit REPRISE_MEMORY_BUDGET without REPRISE_LOG_BOUND bounds the log at a sixteenth of it, at least two log
// segments (the default budget does not: a bound adds a group reduction every REPRISE_LOG_CHECK_EVERY steps to every
// job); its segments are then a 64th of the budget (core::log_segment_bytes), so a small budget's bound is not two
// 1 MiB segments. A sixteenth, because a logged byte is held many times over: in the log, in its region (the
// capture), in each of this rank's versions that carries it (a chain, and the version in flight) and in the buddy's
// copies of them; an eighth left the heaviest ranks at 1.1 to 1.2 times a 32 MiB budget and 2.7 to 3.1 times an 8 MiB
// one (bench/memory_budget.py, docs/MEMORY.md). Below two segments a bound is passed whenever an entry is live
// (every step forced).
void MpiCoordination::memory_budget(std::size_t bytes) {
  budget_ = bytes;
  if (cfg_.memory_budget_bytes == 0 || cfg_.log_bound_bytes != 0 || bytes < 8) return;
  const std::size_t bound = std::max(bytes / 16, 2 * comm_state_->log_segment_bytes());
  cfg_.log_bound_bytes = bound;
  comm_state_->bound_log_by_budget(bound);
}

std::string MpiCoordination::buddy_json() {
  return buddy_.json().dump();
}

std::string MpiCoordination::recovery_json() const {
  return recovery_.json().dump();
}

bool MpiCoordination::should_die(std::uint64_t step, protocol::KillPoint point) const {
  if (replacement_ && step <= kill_floor_) return false;  // that order already killed this rank's predecessor
  return protocol::kill_due(kills_, rank_, step, point);
}

void MpiCoordination::die(const char* point, std::uint64_t step) {
  std::fprintf(stderr, "reprise: rank %d: REPRISE_KILL: SIGKILL at step %llu (%s)\n", rank_,
               static_cast<unsigned long long>(step), point);
  std::fflush(stderr);
  raise(SIGKILL);
  _exit(137);
}

// The failure reaches every survivor through the revoked communicators (their progress threads see it). With a
// group rollback, the message communicators and the group's stay intact: survivors keep their traffic (and a
// group without failed ranks its commit agreements) across the repair.
void MpiCoordination::link_down(const char* who) {
  if (down_.exchange(true)) return;
  if (trace_)
    std::fprintf(stderr, "reprise: rank %d: link down (%s) at %.6f\n", rank_, who,
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  for (MPI_Comm c : {app_, data_, ack_, view_, ctl_, world_}) revoke(c);
  if (!group_rollback_)
    for (MPI_Comm c : {group_, msg_, payload_}) revoke(c);
}

// `keep_group`: a survivor of a group rollback keeps its group's communicator (no member failed).
void MpiCoordination::adopt(MPI_Comm world, bool keep_group) {
  for (MPI_Comm c : {app_, data_, ack_, msg_, payload_, view_, ctl_, world_})
    if (c != MPI_COMM_NULL) retired_.push_back(c);  // revoked (or, group rollback: the old channels); freed at the end
  MPI_Comm old_group = group_;
  world_ = world;
  REPRISE_MPI_CHECK(MPI_Comm_rank(world_, &rank_));
  REPRISE_MPI_CHECK(MPI_Comm_size(world_, &size_));
  // The layout (nodes, groups, buddies) is the job's: discovered when it starts, kept by the survivors of a
  // repair and given to the replacements in the recovery packet, wherever the MPI started them. Discovered
  // again, a replacement started on another node would move ranks between groups and buddies mid-run.
  if (layout_.size() == 0) {
    mpi::TopologyConfig topology = mpi::TopologyConfig::from_env();
    topology.spec.files_only_allowed = !cfg_.dir.empty();
    layout_ = mpi::discover_layout(world_, topology);
    node_key_ = mpi::own_node_key(topology, layout_.node_of(rank_));
    if (!layout_.has_buddies() && rank_ == 0)
      std::fprintf(stderr,
                   "reprise: all %d ranks run on one node: no rank has a buddy on another node, so checkpoints are "
                   "kept in files only (%s). A failed rank cannot be recovered online: the job stops, and run "
                   "again with the same REPRISE_DIR it restarts from the newest version every rank has in files. "
                   "Keep REPRISE_DIR on storage that outlives the node; run on two or more nodes for online "
                   "recovery.\n",
                   size_, cfg_.dir.c_str());
  } else if (layout_.size() != size_) {
    throw Error("rank " + std::to_string(rank_) + ": the repaired communicator has " + std::to_string(size_) +
                " ranks, the job's layout " + std::to_string(layout_.size()));
  }
  commit_.new_communicators(layout_.groups());  // every group reports again on the new communicators
  app_ = dup_comm(world_);
  data_ = dup_comm(world_);
  ack_ = dup_comm(world_);
  msg_ = dup_comm(world_);
  payload_ = dup_comm(world_);
  view_ = dup_comm(world_);
  ctl_ = dup_comm(world_);
  if (comm_state_) {
    comm_state_->add_epoch(msg_, payload_);
    if (!group_rollback_) comm_state_->after_repair();
  }
  REPRISE_MPI_CHECK(MPI_Comm_split(world_, layout_.group_of(rank_), rank_, &group_));
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN));
  if (keep_group) std::swap(group_, old_group);
  if (old_group != MPI_COMM_NULL) retired_.push_back(old_group);
  if (!keep_group) commit_.reset_barrier();  // a new group communicator: the barrier is chosen (and built) again
}

// This rank's own versions: host memory; with REPRISE_DIR files too, written in the background where a buddy holds
// a copy (the commit waits for the buddy, not for the disk; the job floor follows the files: GroupCommit::agree),
// and before the commit where the files are the only copy (every rank on one node: protocol::FilesOnly).
std::unique_ptr<core::VersionStore> MpiCoordination::own_store() const {
  if (cfg_.dir.empty()) return core::make_memory_store();
  if (!layout_.has_buddies()) return core::make_directory_store(cfg_.dir, rank_);
  // REPRISE_KILL's stall_files and slow_files (the first process of the rank only).
  std::optional<std::uint64_t> hold, slow;
  for (const protocol::KillOrder& k : kills_) {
    if (replacement_ || k.rank != rank_) continue;
    if (k.point == protocol::KillPoint::StallFiles) hold = std::min(hold.value_or(k.step), k.step);
    if (k.point == protocol::KillPoint::SlowFiles) slow = std::min(slow.value_or(k.step), k.step);
  }
  return core::make_write_behind_store(core::make_directory_store(cfg_.dir, rank_), 2, hold, slow);
}

// The Runtime destroys its store next: the progress thread stops applying job floors to it (GroupCommit::on_floor).
void MpiCoordination::release_store() {
  const std::lock_guard<std::mutex> lock(store_mutex_);
  store_ = nullptr;
}

// The store of this rank's versions: its own (memory or files) and, through the buddy link, its buddy's copy.
std::unique_ptr<core::VersionStore> MpiCoordination::make_store(const Config&) {
  auto store = buddy_.make_store(std::move(local_));
  {
    const std::lock_guard<std::mutex> lock(store_mutex_);
    store_ = store.get();
  }
  // A version common to every rank must survive the groups' own releases where something restores one: the
  // files of a relaunch (REPRISE_DIR), and with a coordinated rollback also the buddies' copies.
  store_->hold_for_job(commit_.holds_job_floor(), !group_rollback_);
  if (const auto target = recovery_.target()) store_->reset_after_recovery(*target);
  buddy_.start();
  return store;
}

}  // namespace reprise::mpi
