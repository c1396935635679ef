// MpiRuntime: the Runtime with a buddy level, group commits and ULFM recovery.
//
// Communicators (all duplicated from the job's, errors returned):
//   world  control: layout, recovery collectives, final barrier (main thread only)
//   app    handed to the application
//   group  the members of this rank's group: commit agreement at every checkpoint (main thread only)
//   data   owner -> buddy: version heads, payload pieces, releases (sent by the background thread, received by
//          the progress thread)
//   ack    buddy -> owner acknowledgements (sent by the progress thread, received by the background thread)
// Progress: a progress thread at every rank polls `data` (MPI_Iprobe; idle, it sleeps 0.5 ms, doubling up to
// 10 ms: see progress_loop) and stores what its wards ship, so a version reaches the buddy while the application
// computes without calling the runtime.
//
// Failure handling: whoever sees a process failure first (the application through check(), the background
// thread while shipping, the progress thread while receiving) marks the link down and revokes every
// communicator, so every rank's next MPI call fails too. The main thread then recovers (recover()): stop the
// progress thread, let the background thread finish its queue (shipping fails fast), shrink, find the failed
// ranks, plan the rollback from what the survivors hold, spawn replacements, merge, restore the rank numbering,
// send each replacement its chain (from its buddy, or from its files) and re-ship the chains its wards had
// stored there, then throw Rollback. Coordinated fallback: every rank rolls back to the planned version.
#include "reprise/mpi.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "coord/buddy_store.hpp"
#include "coord/comm_state.hpp"
#include "coord/polled_mpi.hpp"
#include "coord/failure_injection.hpp"
#include "coord/device_mpi.hpp"
#include "coord/group_barrier.hpp"
#include "coord/job_floor.hpp"
#include "coord/mpi_layout.hpp"
#include "coord/placement.hpp"
#include "coord/recovery_packet.hpp"
#include "coord/recovery_plan.hpp"
#include "core/bytes.hpp"
#include "core/format.hpp"
#include "core/version_store.hpp"
#include "coord/coordination.hpp"
#include "gpu/backend.hpp"


extern char** environ;

namespace reprise::detail {
namespace {

using Clock = std::chrono::steady_clock;
[[maybe_unused]] double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "rank 5" or "ranks 0 and 7", for messages.
[[maybe_unused]] std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() > 1 ? "ranks " : "rank ") + coord::list_ranks(ranks);
}

enum Tag : int {
  kPutHead = 11,
  kPutPiece = 12,
  kRelease = 13,
  kAck = 14,
  kFloorReport = 15,  // a group's first rank to rank 0: {group, committed version}
  kFloor = 16,        // rank 0 to every rank: the job floor (coord/job_floor.hpp)
  kMoveCount = 21,
  kMoveHead = 22,
  kMovePiece = 23,
  kMoveList = 24,
};
// A version travels as a head (manifest), pieces of kPieceBytes in order, and a trailer with the payload checksum
// (known only once a streamed payload is whole). Pieces small enough that the buddy transfer starts early.
constexpr std::size_t kPieceBytes = std::size_t{4} << 20;

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

bool is_failure(int rc) {
  if (rc == MPI_SUCCESS) return false;
#if REPRISE_HAVE_ULFM
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED
#ifdef MPIX_ERR_PROC_FAILED_PENDING
         || cls == MPIX_ERR_PROC_FAILED_PENDING
#endif
      ;
#else
  return false;
#endif
}

// What the MPI says at run time of CUDA device buffers (Open MPI's extension; MPICH 4's GPU query).
coord::MpiCudaSupport mpi_cuda_support() {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  return MPIX_Query_cuda_support() ? coord::MpiCudaSupport::Yes : coord::MpiCudaSupport::No;
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
  int supported = 0;
  if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) != MPI_SUCCESS) return coord::MpiCudaSupport::Unknown;
  return supported ? coord::MpiCudaSupport::Yes : coord::MpiCudaSupport::No;
#else
  return coord::MpiCudaSupport::Unknown;
#endif
}

// Thrown inside the runtime when an MPI call reports a process failure; turned into a recovery by the main
// thread, or into "link down" by the background threads.
struct PeerFailure {
  int rc;
};

void ok(int rc) {
  if (rc == MPI_SUCCESS) return;
  if (is_failure(rc)) throw PeerFailure{rc};
  throw Error("MPI error in the Reprise runtime: " + mpi_error(rc));
}

MPI_Comm dup_comm(MPI_Comm c) {
  MPI_Comm d = MPI_COMM_NULL;
  ok(MPI_Comm_dup(c, &d));
  MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
  return d;
}

void revoke(MPI_Comm c) {
  if (std::getenv("REPRISE_TRACE") && c != MPI_COMM_NULL) {
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    std::fprintf(stderr, "reprise: world rank %d revokes %p at %.6f\n", r, static_cast<void*>(c),
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
#if REPRISE_HAVE_ULFM
  if (c != MPI_COMM_NULL) MPIX_Comm_revoke(c);
#else
  (void)c;
#endif
}

// One version on the wire: head (header + manifest, format.hpp) then the payload in pieces.
void send_version(MPI_Comm comm, int dest, int head_tag, int piece_tag, const core::Manifest& m,
                  const core::HostBytes& payload, std::uint64_t checksum) {
  const std::vector<std::byte> head = core::encode_head(m, checksum);
  ok(polled::send(head.data(), static_cast<int>(head.size()), MPI_BYTE, dest, head_tag, comm));
  for (std::size_t off = 0; off < payload.size(); off += kPieceBytes) {
    const std::size_t n = std::min(kPieceBytes, payload.size() - off);
    ok(polled::send(payload.data() + off, static_cast<int>(n), MPI_BYTE, dest, piece_tag, comm));
  }
  ok(polled::send(&checksum, 1, MPI_UINT64_T, dest, piece_tag, comm));  // the trailer
}

struct Received {
  core::Manifest manifest;
  std::shared_ptr<core::HostBytes> payload;
  std::uint64_t checksum = 0;
};

// `pool`: the payload buffer comes from it (and goes back when the store drops the version); `reused` says
// whether it was one already touched.
Received recv_version(MPI_Comm comm, int src, int head_tag, int piece_tag, const std::string& where,
                      const std::shared_ptr<core::BufferPool>& pool = nullptr, bool* reused = nullptr) {
  MPI_Status st;
  ok(polled::probe(src, head_tag, comm, &st));
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  std::vector<std::byte> head(static_cast<std::size_t>(count));
  ok(polled::recv(head.data(), count, MPI_BYTE, src, head_tag, comm, MPI_STATUS_IGNORE));
  const core::Header h = core::decode_header(head.data(), head.size(), where);
  Received r;
  r.manifest = core::decode_head_manifest(h, head.data() + core::kHeaderBytes, where);
  r.payload =
      pool ? core::take_pooled(pool, h.payload_bytes, reused) : std::make_shared<core::HostBytes>(h.payload_bytes);
  for (std::size_t off = 0; off < h.payload_bytes; off += kPieceBytes) {
    const std::size_t n = std::min<std::size_t>(kPieceBytes, h.payload_bytes - off);
    ok(polled::recv(r.payload->data() + off, static_cast<int>(n), MPI_BYTE, src, piece_tag, comm, MPI_STATUS_IGNORE));
  }
  ok(polled::recv(&r.checksum, 1, MPI_UINT64_T, src, piece_tag, comm, MPI_STATUS_IGNORE));  // the trailer
  return r;
}

[[maybe_unused]] std::string executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error("cannot read /proc/self/exe to spawn a replacement process");
  return std::string(path, static_cast<std::size_t>(n));
}

[[maybe_unused]] std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string a;
  while (std::getline(in, a, '\0')) args.push_back(a);
  return args;
}

// Records flattened for MPI: (owner, version, base, full, where) per entry; where 0 = own store, 1 = at buddy.
void append_records(std::vector<std::uint64_t>& out, int owner, const std::vector<coord::VersionRecord>& rs,
                    int where) {
  for (const auto& r : rs) {
    out.push_back(static_cast<std::uint64_t>(owner));
    out.push_back(r.version);
    out.push_back(r.base);
    out.push_back(r.full ? 1 : 0);
    out.push_back(static_cast<std::uint64_t>(where));
  }
}

std::vector<std::uint64_t> allgather_u64(MPI_Comm comm, const std::vector<std::uint64_t>& mine) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  ok(polled::allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int i = 0; i < n; ++i) {
    displs[static_cast<std::size_t>(i)] = total;
    total += counts[static_cast<std::size_t>(i)];
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(total));
  ok(polled::allgatherv(mine.data(), count, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, comm));
  return all;
}

struct RecoveryRecord {
  std::vector<int> failed;
  std::uint64_t version = 0;
  bool replacement = false;
  bool from_start = false;  // nothing was committed: every rank started over
  double repair_seconds = 0, transfer_seconds = 0, total_seconds = 0;
  int attempts = 1;
  std::vector<int> rolled_back;
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  bool group = false;           // a group rollback: only `rolled_back` rolled back
  bool this_rank = true;        // this rank rolled back (or started over)
  bool interrupted = false;     // another process failed during it: a new recovery took over (its own record)
  std::vector<std::pair<int, int>> buddies_on_one_node;  // {rank, buddy} on one node after the repair
  double at = 0;                // when the recovery began (steady clock, seconds since its epoch)
};

// A recovery's stages are calls into the MPI library (shrink, spawn, merge, agreements) and point-to-point moves
// of checkpoints; one that hangs inside the library would say nothing. While a recovery lasts longer than
// `every` (Config::recovery_watch_ms), this says on stderr, every `every`, which stage the rank is in and for how
// long; one that lasts longer than `limit` (Config::recovery_timeout_s) stops the process with exit status 4 and
// says why, so that the job ends instead of hanging forever. A replacement process watches its own part (from the
// repaired communicator to its checkpoints). Zero turns either off.
class RecoveryWatch {
 public:
  /// Registers itself in `slot` (where recovery stages are reported) until destroyed. `who`: "rank 3".
  RecoveryWatch(RecoveryWatch*& slot, std::string who, std::chrono::milliseconds every, std::chrono::seconds limit)
      : slot_(slot), who_(std::move(who)), every_(every), limit_(limit), thread_([this] { run(); }) {
    slot_ = this;
  }
  ~RecoveryWatch() {
    slot_ = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  RecoveryWatch(const RecoveryWatch&) = delete;
  RecoveryWatch& operator=(const RecoveryWatch&) = delete;
  void stage(const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    stage_ = what;
    stage_since_ = Clock::now();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto t0 = Clock::now();
    const auto never = t0 + std::chrono::hours(24 * 365);  // (not time_point::max(): converted, it overflows)
    const auto give_up = limit_.count() > 0 ? t0 + limit_ : never;
    auto report = every_.count() > 0 ? t0 + every_ : never;
    for (;;) {
      if (cv_.wait_until(lock, std::min(report, give_up), [this] { return done_; })) return;
      const auto now = Clock::now();
      if (now >= give_up) {
        const bool shrink = std::strstr(stage_, "MPIX_Comm_shrink") != nullptr;
        std::fprintf(stderr, "reprise: %s: the recovery has not finished after %lld s (%s for %.1f s%s): this "
                     "process stops with exit status 4 so that the job ends instead of hanging. Checkpoint files "
                     "already written (REPRISE_DIR) are intact: relaunch the job. REPRISE_RECOVERY_TIMEOUT_S sets "
                     "the limit (0: none).\n", who_.c_str(), static_cast<long long>(limit_.count()), stage_,
                     since(stage_since_),
                     shrink ? "; a shrink that never returns while every survivor is in it is an Open MPI bug, "
                                     "open-mpi/ompi#13138"
                            : "");
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(4);
      }
      if (now >= report) {
        std::fprintf(stderr, "reprise: %s: recovery under way for %.1f s; %s for %.1f s\n", who_.c_str(), since(t0),
                     stage_, since(stage_since_));
        report += every_;
      }
    }
  }
  static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  RecoveryWatch*& slot_;
  const std::string who_;
  const std::chrono::milliseconds every_;
  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  const char* stage_ = "starting";
  Clock::time_point stage_since_ = Clock::now();
  std::thread thread_;  // last: started once the rest is initialised
};

}  // namespace

class MpiCoordination : public Coordination, public CommHost {
 public:
  MpiCoordination(MPI_Comm user, Config& cfg) : cfg_(cfg) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw ConfigError("reprise::MpiRuntime needs MPI initialised with MPI_THREAD_MULTIPLE (call MPI_Init_thread "
                        "and check `provided`): its progress and background threads call MPI");
    kills_ = coord::parse_kill_spec(std::getenv("REPRISE_KILL") ? std::getenv("REPRISE_KILL") : "");
    group_rollback_ = cfg.group_rollback;
    // REPRISE_CUDA_AWARE_MPI=yes where the MPI says it cannot take device buffers: refused now, on every rank,
    // rather than at the first device message.
    if (cfg.cuda_aware_mpi == CudaAwareMpi::Yes && device_pointers_possible())
      coord::choose_device_mpi(cfg.cuda_aware_mpi, "cuda", mpi_cuda_support());
    // A write to the socket of a process that died raises SIGPIPE, whose default action kills this process too
    // (seen: a replacement of an abandoned recovery attempt, and survivors, killed by signal 13). With it
    // ignored the write fails with EPIPE, which the MPI library reports as the failure it is. An application's
    // own handler is left alone.
    struct sigaction old_action {};
    if (sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL)
      std::signal(SIGPIPE, SIG_IGN);
    MPI_Comm parent = MPI_COMM_NULL;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
      join_as_replacement(parent, cfg);
    } else {
      adopt(dup_comm(user));
      cfg.rank = rank_;
      cfg_ = cfg;
      local_ = cfg.dir.empty() ? core::make_memory_store() : core::make_directory_store(cfg.dir, rank_);
      agree_on_restart();
    }
    cfg = cfg_;
    logging::LogOptions log_options;
    log_options.bound_bytes = cfg.log_bound_bytes;
    comm_state_ = std::make_unique<CommState>(*this, rank_, layout_.group_of, log_options, log_memory());
    comm_state_->gate_views_on_job_floor(holds_job_floor());
    comm_state_->add_epoch(msg_, payload_);
    if (joined_group_recovery_) comm_state_->begin_recovery(epoch_, joined_rolled_back_, joined_coordinator_);
    // A relaunch from files: every rank restores the version the job agreed on and then runs the restart exchange
    // (at its next runtime call), which replays from the senders' restored log snapshots the messages between
    // groups that were sent before that version and received after it: the re-execution does not send them again.
    if (restarted_ && !replacement_) {
      std::set<int> everyone;
      for (int r = 0; r < size_; ++r) everyone.insert(r);
      comm_state_->begin_recovery(epoch_, everyone, -1);
    }
  }


  ~MpiCoordination() override {
    // Every owner's last version has reached its buddy. Not while an exception unwinds (a usage or protocol error
    // on some ranks): the others are not coming, and the application is about to report it and abort the job.
    if (!down_ && std::uncaught_exceptions() == 0) {
      last_barrier();
    } else if (down_ && std::uncaught_exceptions() == 0) {
      std::fprintf(stderr, "reprise: rank %d: leaves without the job's last barrier: a failure was reported after "
                   "the last agreement\n", rank_);
    }
    stop_progress();
    // Free every communicator, including those revoked by earlier recoveries: Open MPI's MPI_Finalize
    // disconnects each communicator that still spans several jobs (the spawned replacements), and doing so with
    // processes it never reached crashes inside its TCP transport.
    for (MPI_Comm* c : {&app_, &group_, &data_, &ack_, &msg_, &payload_, &view_, &ctl_, &world_}) retired_.push_back(*c);
    for (MPI_Comm& c : retired_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }

  // The job's last barrier, polled: a rank still in it after 30 s says so and what it waits for (a stress run
  // once saw a job hang after its results were printed; this names the rank and its state next time).
  void last_barrier() {
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

  // ---- Coordination hooks ----------------------------------------------------------------------------------
  std::unique_ptr<core::VersionStore> make_store(const Config&) override {
    shipper_ = std::make_shared<Link>(*this);
    auto store = std::make_unique<coord::BuddyStore>(std::move(local_), shipper_);
    store_ = store.get();
    // A version common to every rank must survive the groups' own releases where something restores one: the
    // files of a relaunch (REPRISE_DIR), and with a coordinated rollback also the buddies' copies.
    store_->hold_for_job(holds_job_floor(), !group_rollback_);
    if (target_) store_->reset_after_recovery(*target_);
    start_progress();
    return store;
  }

  void attach(std::function<void()> quiesce) override { quiesce_ = std::move(quiesce); }

  void before_capture(std::uint64_t version) override {
    current_step_ = std::max(current_step_, version);
    if (down_) recover("a failure was detected by the runtime's background threads");
    if (should_die(version, coord::KillPoint::Checkpoint)) die("checkpoint", version);
    if (should_die(version, coord::KillPoint::Commit)) die("commit", version);
    hurry_progress();  // the buddies of a group checkpoint together: this rank's ward ships its version now too
    comm_state_->enter();
    commit_agreement(version);
  }

  void after_wait() override {
    if (down_) recover("a failure was detected by the runtime's background threads");
    commit_agreement();
  }

  void after_restore(std::uint64_t version) override { comm_state_->after_restore(version); }
  std::optional<std::uint64_t> restore_target() const override { return target_; }
  bool restarted() const override { return restarted_; }
  bool take_start_over() override { return std::exchange(start_over_, false); }

  // ---- CommHost ---------------------------------------------------------------------------------------------
  gpu::Backend& device() override {
    if (device_) return *device_;
    device_ = gpu::make_backend(cfg_.device_backend, "reprise::Comm was given a device buffer");
    return *device_;
  }
  bool device_pointers_possible() override {
    if (!device_possible_)
      device_possible_ = cfg_.device_backend != DeviceBackendKind::HostTwin && gpu::cuda_device_count() > 0;
    return *device_possible_;
  }
  coord::DeviceMpiChoice device_mpi() override {
    return coord::choose_device_mpi(cfg_.cuda_aware_mpi, device().name(), mpi_cuda_support());
  }
  MPI_Comm view_comm() const override { return view_; }
  MPI_Comm control_comm() const override { return ctl_; }
  // No process of the job failed and none of this rank's communicators is revoked.
  bool no_failure() {
#if REPRISE_HAVE_ULFM
    for (MPI_Comm c : {world_, app_, data_, ack_, view_, ctl_, group_}) {
      int f = 0;
      if (c != MPI_COMM_NULL) MPIX_Comm_is_revoked(c, &f);
      if (f) return false;
    }
    MPI_Group g = MPI_GROUP_NULL;
    int n = 0;
    if (MPIX_Comm_get_failed(world_, &g) == MPI_SUCCESS && g != MPI_GROUP_NULL) {
      MPI_Group_size(g, &n);
      MPI_Group_free(&g);
    }
    return n == 0;
#else
    return true;
#endif
  }

  bool spurious(int rc) override {
#if REPRISE_HAVE_ULFM
    if (!is_failure(rc) || down_ || !no_failure()) return false;
    if (trace_) std::fprintf(stderr, "reprise: rank %d: spurious %s ignored\n", rank_, mpi_error(rc).c_str());
    return true;
#else
    (void)rc;
    return false;
#endif
  }


  void check_mpi(int rc) override {
    if (rc == MPI_SUCCESS || spurious(rc)) return;
    request_failed(rc);
  }
  void request_failed(int rc) override {
    trace_revoked("check_mpi");
    if (is_failure(rc)) {
      recover("an MPI call of reprise::Comm reported: " + mpi_error(rc));
      return;  // a survivor of a group rollback: the repair re-posted what involved the rolled-back ranks
    }
    throw Error("MPI error in reprise::Comm: " + mpi_error(rc));
  }
  void before_restart_exchange() override {
    if (should_die(current_step_, coord::KillPoint::Exchange)) die("exchange", current_step_);
  }
  void poll_failure() override {
    if (down_) trace_revoked("poll_failure");
    if (down_) recover("a failure was detected by the runtime's background threads");
  }
  void collective_ok(int rc) override { ok(rc); }

  // ---- MpiRuntime API --------------------------------------------------------------------------------------
  MPI_Comm app() const { return app_; }
  CommState& comm_state() { return *comm_state_; }
  std::optional<std::uint64_t> acknowledged() const { return store_ ? store_->newest_acked_chain() : std::nullopt; }
  std::optional<std::uint64_t> committed() const { return store_ ? store_->committed() : std::nullopt; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const coord::Layout& layout() const { return layout_; }

  // The end of the job, uniform over every survivor: all return, or all recover and throw Rollback. A group's
  // commit only involves the group, so without this a rank whose group is done could leave while another group
  // is still to detect a failure and roll back, and the recovery would wait for it forever.
  void finish() {
    if (down_) recover("a failure was detected by the runtime's background threads");
    comm_state_->enter();  // a rolled-back rank that goes straight to finish() still owes the restart exchange
#if REPRISE_HAVE_ULFM
    if (group_rollback_) {
      // Survivors of a group rollback wait here for the re-executing groups while serving their replays and
      // the coordinator's work: a non-blocking agreement, polled.
      int false_agreements = 0;
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
        if (rc == MPI_SUCCESS && !down_ && flag == 1) return;
        if (rc == MPI_SUCCESS && !down_ && no_failure() && ++false_agreements < 8) continue;  // see below
        if (req != MPI_REQUEST_NULL) {
          revoke(world_);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        recover("the job's final agreement failed: " + mpi_error(rc));  // a survivor agrees again
      }
    }
    // Open MPI 5.0.7 sometimes returns flag 0 with MPI_SUCCESS although every rank passed 1 and nobody failed
    // (seen after a recovery). The agreement is uniform, so every rank sees it and all agree again together.
    for (int false_agreements = 0;; ++false_agreements) {
      int flag = 1;
      MPI_Request req = MPI_REQUEST_NULL;
      int rc = MPIX_Comm_iagree(world_, &flag, &req);  // uniform: the same rc and flag at every survivor
      if (rc == MPI_SUCCESS) rc = polled::wait(req);     // polled: see coord/polled_mpi.hpp
      if (rc == MPI_SUCCESS && flag == 1) return;
      if (rc == MPI_SUCCESS && !down_ && no_failure() && false_agreements < 8) {
        std::fprintf(stderr, "reprise: rank %d: the final agreement returned 0 with no failure; agreeing again\n",
                     rank_);
        continue;
      }
      recover("the job's final agreement failed: " + mpi_error(rc));
    }
#else
    const int rc = MPI_Barrier(world_);
    if (is_failure(rc)) recover("the job's final barrier failed: " + mpi_error(rc));
    ok(rc);
#endif
  }

  void check(int rc) {
    if (rc == MPI_SUCCESS) return;
    if (is_failure(rc)) {
      recover("an MPI call of the application reported: " + mpi_error(rc));
      throw Error("rank " + std::to_string(rank_) + ": a raw MPI call on rt.comm() failed because of a process "
                  "failure; with REPRISE_ROLLBACK=group this rank does not roll back and the call cannot be "
                  "repeated: send the application's messages through rt.messages() (reprise::Comm)");
    }
    throw Error("MPI error on the application's communicator: " + mpi_error(rc));
  }

  void trace_revoked(const char* where) {
#if REPRISE_HAVE_ULFM
    if (!trace_) return;
    std::string out;
    const char* names[] = {"world", "app", "data", "ack", "msg", "payload", "view", "ctl", "group"};
    int i = 0;
    for (MPI_Comm c : {world_, app_, data_, ack_, msg_, payload_, view_, ctl_, group_}) {
      int f = 0;
      if (c != MPI_COMM_NULL) MPIX_Comm_is_revoked(c, &f);
      if (f) out += std::string(" ") + names[i];
      ++i;
    }
    if (comm_state_) {
      int e = 0;
      for (const auto& [m, pl] : comm_state_->epochs()) {
        int f1 = 0, f2 = 0;
        MPIX_Comm_is_revoked(m, &f1);
        MPIX_Comm_is_revoked(pl, &f2);
        if (f1 || f2) out += " msg-epoch" + std::to_string(e) + (f1 ? "m" : "") + (f2 ? "p" : "");
        ++e;
      }
    }
    int nret = 0;
    for (MPI_Comm c : retired_) {
      int f = 0;
      if (c != MPI_COMM_NULL) MPIX_Comm_is_revoked(c, &f);
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
  static logging::MessageLog::Allocate log_memory() {
    if (gpu::cuda_device_count() <= 0) return nullptr;
    try {
      std::shared_ptr<gpu::Backend> be = gpu::make_cuda_backend();
      return [be](std::size_t bytes) { return be->alloc_pinned(bytes); };
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprise: warning: the message log uses pageable memory (%s)\n", e.what());
      return nullptr;
    }
  }

  // Log bound (Config::log_bound_bytes): at every log_check_every-th step the members of the group learn, in a
  // group reduction, whether one of them wants a checkpoint (its log is over the bound, or another group asked).
  // Every member calls step() with the same numbers, so they all decide alike.
  bool log_checkpoint_due(std::uint64_t s) {
    if (cfg_.log_bound_bytes == 0 || s % cfg_.log_check_every != 0) return false;
    int want = comm_state_->checkpoint_wanted() ? 1 : 0;
    MPI_Request req = MPI_REQUEST_NULL;
    group_collective(MPI_Iallreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MAX, group_, &req), req,
                     "the group's log check");
    return want != 0;
  }

  void step(std::uint64_t s) {
    trace_revoked("step");
    current_step_ = s;
    if (should_die(s, coord::KillPoint::Compute)) die("compute", s);
    if (down_) recover("a failure was detected by the runtime's background threads");
    comm_state_->enter();
  }

  std::string placement_json() const {
    if (!placement_)  // hwloc's topology is loaded once, on first use
      placement_ = coord::locate(layout_.local_index.at(static_cast<std::size_t>(rank_)), gpu::cuda_pci_bus_ids());
    const auto r = static_cast<std::size_t>(rank_);
    return nlohmann::json{{"rank", rank_},
                          {"node", layout_.node_of.at(r)},
                          {"local_index", layout_.local_index.at(r)},
                          {"group", layout_.group_of.at(r)},
                          {"buddy", layout_.buddy_of.at(r)},
                          {"numa_node", placement_->numa_node},
                          {"cpuset", placement_->cpuset},
                          {"gpu", placement_->gpu},
                          {"gpu_numa_node", placement_->gpu_numa_node}}
        .dump();
  }

  std::string buddy_json() {
    nlohmann::json wards = nlohmann::json::object();
    {
      std::lock_guard<std::mutex> lock(wards_mutex_);
      for (auto& [ward, store] : wards_) wards[std::to_string(ward)] = store->list();
    }
    return nlohmann::json{{"wards", wards},
                          {"receive_buffers",
                           {{"fresh", ward_buffers_fresh_.load()},
                            {"reused", ward_buffers_reused_.load()},
                            {"pooled_bytes", ward_pool_->held_bytes()}}}}
        .dump();
  }

  std::string recovery_json() const {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : recoveries_)
      j.push_back({{"failed", r.failed},
                   {"version", r.version},
                   {"replacement", r.replacement},
                   {"from_start", r.from_start},
                   {"attempts", r.attempts},
                   {"rolled_back", r.rolled_back},
                   {"repair_seconds", r.repair_seconds},
                   {"transfer_seconds", r.transfer_seconds},
                   {"total_seconds", r.total_seconds},
                   {"bytes_sent", r.bytes_sent},
                   {"bytes_received", r.bytes_received},
                   {"group_rollback", r.group},
                   {"at_steady_seconds", r.at},
                   {"this_rank_rolled_back", r.this_rank},
                   {"interrupted", r.interrupted},
                   {"buddies_on_one_node", r.buddies_on_one_node}});
    return j.dump();
  }

 private:
  // The owner side of the buddy link (background thread).
  class Link : public coord::Shipper {
   public:
    explicit Link(MpiCoordination& c) : c_(c) {}
    // A whole version: streamed with every byte ready (the payload outlives the call; not owned here).
    bool ship(const core::Manifest& m, const core::HostBytes& payload, std::uint64_t checksum) override {
      Stream st(c_, m, std::shared_ptr<const core::HostBytes>(std::shared_ptr<void>(), &payload));
      st.ready(0, payload.size());
      st.finish(checksum);
      return st.acknowledged();
    }
    std::unique_ptr<coord::ShipStream> stream(const core::Manifest& m,
                                              std::shared_ptr<const core::HostBytes> payload) override {
      return std::make_unique<Stream>(c_, m, std::move(payload));
    }
    void release(std::uint64_t version) override {
      if (c_.down_) return;
      try {
        const int buddy = c_.layout_.buddy_of[static_cast<std::size_t>(c_.rank_)];
        const MPI_Comm data = c_.data_;
        try {
          ok(polled::send(&version, 1, MPI_UINT64_T, buddy, kRelease, data));
        } catch (const PeerFailure&) {
          if (data == c_.data_) c_.link_down("buddy release");
        }
      } catch (const PeerFailure&) {
      }
    }

   private:
    MpiCoordination& c_;
  };

  // A version streamed to the buddy while the drain fills it: the head at once, each piece (in order) as soon
  // as it and every piece before it are in host memory, non-blocking so the drain goes on; the trailer with the
  // checksum and the wait for the acknowledgement at finish().
  class Stream : public coord::ShipStream {
   public:
    Stream(MpiCoordination& c, const core::Manifest& m, std::shared_ptr<const core::HostBytes> payload)
        : c_(c),
          m_(m),
          payload_(std::move(payload)),
          data_(c.data_),
          buddy_(c.layout_.buddy_of[static_cast<std::size_t>(c.rank_)]),
          frontier_(payload_->size(), kPieceBytes),
          die_mid_(c.should_die(m.version, coord::KillPoint::Drain)) {
      if (c_.down_) {
        dead_ = true;
        return;
      }
      guarded([&] {
        const std::vector<std::byte> head = core::encode_head(m_, 0);  // the checksum follows in the trailer
        ok(polled::send(head.data(), static_cast<int>(head.size()), MPI_BYTE, buddy_, kPutHead, data_));
      });
    }
    ~Stream() override { abandon(); }

    void ready(std::size_t offset, std::size_t bytes) override {
      const std::size_t go = frontier_.add(offset, bytes);
      guarded([&] {
        post(go);
        while (!requests_.empty()) {  // progress for what is in flight; pieces complete in order
          int flag = 0;
          ok(MPI_Test(&requests_.front(), &flag, MPI_STATUS_IGNORE));
          if (!flag) break;
          requests_.pop_front();
        }
      });
    }

    void finish(std::uint64_t checksum) override {
      guarded([&] {
        post(frontier_.pieces());
        if (posted_ < frontier_.pieces())
          throw Error("version " + std::to_string(m_.version) + " was finished before its payload was whole");
        for (auto& r : requests_) ok(polled::wait(r));
        requests_.clear();
        if (die_mid_) c_.die("drain", m_.version);  // (a version without pieces)
        ok(polled::send(&checksum, 1, MPI_UINT64_T, buddy_, kPutPiece, data_));
        std::uint64_t v = 0;
        ok(polled::recv(&v, 1, MPI_UINT64_T, buddy_, kAck, c_.ack_, MPI_STATUS_IGNORE));
        acked_ = v == m_.version;
      });
    }

    bool acknowledged() const override { return acked_; }
    std::size_t handed_on() const override { return handed_; }
    bool streams() const override { return true; }

   private:
    template <class F>
    void guarded(F&& f) {
      if (dead_) return;
      try {
        f();
      } catch (const PeerFailure&) {
        dead_ = true;
        if (data_ == c_.data_) c_.link_down("buddy ship");  // old news when a repair replaced the communicator
        abandon();
      }
    }
    void post(std::size_t upto) {
      for (; posted_ < upto; ++posted_) {
        const std::size_t n = frontier_.piece_bytes(posted_);
        MPI_Request r = MPI_REQUEST_NULL;
        ok(MPI_Isend(payload_->data() + frontier_.piece_offset(posted_), static_cast<int>(n), MPI_BYTE, buddy_,
                     kPutPiece, data_, &r));
        requests_.push_back(r);
        handed_ += n;
        if (die_mid_) {  // drain: die once part of the version reached the buddy
          ok(polled::wait(requests_.back()));
          c_.die("drain", m_.version);
        }
      }
    }
    // After a failure: sends still in flight on the revoked communicator complete with an error; one that does
    // not keeps the payload alive for good (MPI may still read it).
    void abandon() {
      for (auto& r : requests_) {
        for (int i = 0; i < 20000 && r != MPI_REQUEST_NULL; ++i) {
          int flag = 0;
          if (MPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) r = MPI_REQUEST_NULL;
        }
        if (r != MPI_REQUEST_NULL) {
          static std::mutex m;
          static std::vector<std::shared_ptr<const core::HostBytes>> kept;
          std::lock_guard<std::mutex> lock(m);
          kept.push_back(payload_);
        }
      }
      requests_.clear();
    }

    MpiCoordination& c_;
    core::Manifest m_;
    std::shared_ptr<const core::HostBytes> payload_;
    MPI_Comm data_;
    int buddy_;
    core::PieceFrontier frontier_;
    bool die_mid_;
    bool dead_ = false, acked_ = false;
    std::size_t posted_ = 0, handed_ = 0;
    std::deque<MPI_Request> requests_;  // pieces in flight, oldest first
  };

  bool should_die(std::uint64_t step, coord::KillPoint point) const {
    if (replacement_ && step <= kill_floor_) return false;  // that order already killed this rank's predecessor
    return coord::kill_due(kills_, rank_, step, point);
  }

  [[noreturn]] void die(const char* point, std::uint64_t step) {
    std::fprintf(stderr, "reprise: rank %d: REPRISE_KILL: SIGKILL at step %llu (%s)\n", rank_,
                 static_cast<unsigned long long>(step), point);
    std::fflush(stderr);
    raise(SIGKILL);
    _exit(137);
  }

  // The failure reaches every survivor through the revoked communicators (their progress threads see it). With a
  // group rollback, the message communicators and the group's stay intact: survivors keep their traffic (and a
  // group without failed ranks its commit agreements) across the repair.
  void link_down(const char* who) {
    if (down_.exchange(true)) return;
    if (trace_)
      std::fprintf(stderr, "reprise: rank %d: link down (%s) at %.6f\n", rank_, who,
                   std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    for (MPI_Comm c : {app_, data_, ack_, view_, ctl_, world_}) revoke(c);
    if (!group_rollback_)
      for (MPI_Comm c : {group_, msg_, payload_}) revoke(c);
  }

  // `keep_group`: a survivor of a group rollback keeps its group's communicator (no member failed).
  void adopt(MPI_Comm world, bool keep_group = false) {
    for (MPI_Comm c : {app_, data_, ack_, msg_, payload_, view_, ctl_, world_})
      if (c != MPI_COMM_NULL) retired_.push_back(c);  // revoked (or, group rollback: the old channels); freed at the end
    MPI_Comm old_group = group_;
    world_ = world;
    MPI_Comm_rank(world_, &rank_);
    MPI_Comm_size(world_, &size_);
    // The layout (nodes, groups, buddies) is the job's: discovered when it starts, kept by the survivors of a
    // repair and given to the replacements in the recovery packet, wherever the MPI started them. Discovered
    // again, a replacement started on another node would move ranks between groups and buddies mid-run.
    if (layout_.size() == 0) {
      const coord::TopologyConfig topology = coord::TopologyConfig::from_env();
      layout_ = coord::discover_layout(world_, topology);
      node_key_ = coord::own_node_key(topology, layout_.node_of.at(static_cast<std::size_t>(rank_)));
    } else if (layout_.size() != size_) {
      throw Error("rank " + std::to_string(rank_) + ": the repaired communicator has " + std::to_string(size_) +
                  " ranks, the job's layout " + std::to_string(layout_.size()));
    }
    floor_table_.reset(layout_.groups());  // every group reports again on the new communicators
    floor_reported_.reset();
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
    ok(MPI_Comm_split(world_, layout_.group_of[static_cast<std::size_t>(rank_)], rank_, &group_));
    MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN);
    if (keep_group) std::swap(group_, old_group);
    if (old_group != MPI_COMM_NULL) retired_.push_back(old_group);
    if (!keep_group) reset_group_barrier();  // a new group communicator: the barrier is chosen (and built) again
  }

  void start_progress() {
    stop_ = false;
    progress_ = std::thread([this] { progress_loop(); });
  }

  void stop_progress() {
    stop_ = true;
    hurry_progress();
    if (progress_.joinable()) progress_.join();
  }

  core::VersionStore& ward_store(int ward) {
    std::lock_guard<std::mutex> lock(wards_mutex_);
    auto& s = wards_[ward];
    if (!s) s = core::make_memory_store();
    return *s;
  }

  // Idle, the progress thread polls less and less often: kPollMin after a message, doubling up to kPollMax while
  // nothing comes. Each wake-up takes a core from the application for a moment (on a VM a timer is a VM exit):
  // with a fixed 0.5 ms poll an idle runtime made a 2-rank host stencil on 2 cores 20% slower
  // (reprise-bench-overhead-mpi, no checkpoint in the loop), with a 20 ms poll 7-10%. A checkpoint of this rank
  // starts fast polling again (hurry_progress): its ward normally checkpoints at the same step and ships its
  // version now, and a version noticed up to kPollMax late commits late, and frees logs late.
  static constexpr std::chrono::microseconds kPollMin{500}, kPollMax{10000};

  void hurry_progress() {
    {
      std::lock_guard<std::mutex> lock(poll_mutex_);
      poll_soon_ = true;
    }
    poll_cv_.notify_one();
  }

  void progress_loop() {
    auto poll = kPollMin;
    for (;;) try {
      while (!stop_) {
        int flag = 0;
        MPI_Status st;
        ok(probe_any_source(data_, MPI_ANY_TAG, &flag, &st));
        if (!flag) {
          std::unique_lock<std::mutex> lock(poll_mutex_);
          if (poll_cv_.wait_for(lock, poll, [this] { return poll_soon_; })) {
            poll_soon_ = false;
            poll = kPollMin;
          } else {
            poll = std::min(poll * 2, kPollMax);
          }
          continue;
        }
        poll = kPollMin;
        const int src = st.MPI_SOURCE;
        if (st.MPI_TAG == kRelease) {
          std::uint64_t v = 0;
          ok(polled::recv(&v, 1, MPI_UINT64_T, src, kRelease, data_, MPI_STATUS_IGNORE));
          ward_store(src).release(v);
        } else if (st.MPI_TAG == kFloorReport) {
          on_floor_report(src);
        } else if (st.MPI_TAG == kFloor) {
          std::uint64_t floor = 0;
          ok(polled::recv(&floor, 1, MPI_UINT64_T, src, kFloor, data_, MPI_STATUS_IGNORE));
          floor_received_ = static_cast<std::int64_t>(floor);  // applied by the main thread (report_commit)
        } else if (st.MPI_TAG == kPutHead) {
          bool reused = false;
          Received r = recv_version(data_, src, kPutHead, kPutPiece, "version shipped by rank " + std::to_string(src),
                                    ward_pool_, &reused);
          ++(reused ? ward_buffers_reused_ : ward_buffers_fresh_);
          const std::uint64_t v = r.manifest.version;
          ward_store(src).put(r.manifest, std::move(r.payload), r.checksum);
          ok(polled::send(&v, 1, MPI_UINT64_T, src, kAck, ack_));
        } else {
          // A piece without its head cannot happen on a FIFO channel; drop it loudly.
          std::fprintf(stderr, "reprise: rank %d: unexpected message tag %d from rank %d\n", rank_, st.MPI_TAG, src);
          char sink;
          polled::recv(&sink, 0, MPI_BYTE, src, st.MPI_TAG, data_, MPI_STATUS_IGNORE);
        }
      }
      return;
    } catch (const PeerFailure& f) {
      if (spurious(f.rc) && !stop_) continue;  // a spurious wake-up of a blocking call: go on polling
      if (trace_)
        std::fprintf(stderr, "reprise: rank %d: progress thread: %s (epoch %u)\n", rank_, mpi_error(f.rc).c_str(),
                     epoch_);
      link_down("progress thread");
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprise: rank %d: buddy progress thread stopped: %s\n", rank_, e.what());
      link_down("progress thread error");
      return;
    }
  }

  // The group barrier: members agree on the newest version every member's buddy acknowledged (committed), and
  // at a checkpoint (`capture`) they also exchange the channel counters of reprise::Comm in the same collective.
  void commit_agreement(std::optional<std::uint64_t> capture = std::nullopt) {
    std::int64_t v = -1;
    if (const auto a = store_->newest_acked_chain()) v = static_cast<std::int64_t>(*a);
    std::vector<std::uint64_t> all;
    std::size_t stride = 0;
    const char* what = "the group's commit agreement";
    const bool nccl = nccl_group();
    if (nccl || capture) {  // an allgather (NCCL's collective, or MPI's at a checkpoint); the minimum is taken here
      std::vector<std::uint64_t> mine = capture ? comm_state_->barrier_contribution() : std::vector<std::uint64_t>{};
      mine.insert(mine.begin(), static_cast<std::uint64_t>(v));
      stride = mine.size();
      if (nccl) {
        nccl_->start(mine);
        wait_nccl([this] { return nccl_->done(); });
        all = nccl_->result();
      } else {
        int gsize = 0;
        MPI_Comm_size(group_, &gsize);
        all.resize(stride * static_cast<std::size_t>(gsize));
        MPI_Request req = MPI_REQUEST_NULL;
        group_collective(MPI_Iallgather(mine.data(), static_cast<int>(stride), MPI_UINT64_T, all.data(),
                                        static_cast<int>(stride), MPI_UINT64_T, group_, &req),
                         req, what);
      }
      for (std::size_t i = 0; i * stride < all.size(); ++i) v = std::min(v, static_cast<std::int64_t>(all[i * stride]));
    } else {
      MPI_Request req = MPI_REQUEST_NULL;
      group_collective(MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MIN, group_, &req), req, what);
    }
    if (v >= 0) store_->set_committed(static_cast<std::uint64_t>(v));
    report_commit();
    if (v >= 0) comm_state_->committed(static_cast<std::uint64_t>(v));
    if (capture) {
      std::vector<const std::uint64_t*> member;
      for (std::size_t i = 0; i * stride < all.size(); ++i) member.push_back(&all[i * stride + 1]);
      comm_state_->barrier_result(member, *capture);
    }
  }

  // ---- job floor (coord/job_floor.hpp) ---------------------------------------------------------------------
  bool holds_job_floor() const { return !group_rollback_ || !cfg_.dir.empty(); }

  // At every checkpoint: the job floor last received applies (here, on the main thread: the store belongs to the
  // Runtime, which destroys it while the progress thread may still run). At a group's first rank: its group's
  // commit goes to rank 0 when it is newer than the last report (after a repair every group reports again: rank
  // 0's table starts over).
  void report_commit() {
    if (!holds_job_floor()) return;
    if (const std::int64_t f = floor_received_; f >= 0) {
      store_->set_job_floor(static_cast<std::uint64_t>(f));
      comm_state_->job_floor(static_cast<std::uint64_t>(f));  // the views it allows go in committed(), below
    }
    if (layout_.members_of_group(layout_.group_of[static_cast<std::size_t>(rank_)]).front() != rank_) return;
    const auto c = store_->committed();
    if (!c || (floor_reported_ && *c <= *floor_reported_)) return;
    floor_reported_ = *c;
    const std::uint64_t report[2] = {static_cast<std::uint64_t>(layout_.group_of[static_cast<std::size_t>(rank_)]), *c};
    const MPI_Comm data = data_;
    try {
      ok(polled::send(report, 2, MPI_UINT64_T, 0, kFloorReport, data));
    } catch (const PeerFailure&) {
      if (data == data_) link_down("job floor report");  // the next runtime call recovers
    }
  }

  // Rank 0's progress thread: a group's commit; a floor that rose goes to every rank.
  void on_floor_report(int src) {
    std::uint64_t report[2] = {0, 0};
    ok(polled::recv(report, 2, MPI_UINT64_T, src, kFloorReport, data_, MPI_STATUS_IGNORE));
    const auto floor = floor_table_.report(static_cast<int>(report[0]), report[1]);
    if (const auto lag = floor_table_.lag()) {
      const std::string what = lag->committed ? "its newest commit is version " + std::to_string(*lag->committed)
                                              : std::string("it has committed nothing yet");
      std::fprintf(stderr, "reprise: rank %d: group %d (%s) holds the job floor back: %s, while the other groups "
                   "committed %u times since the floor last rose. Every rank keeps its versions from there on (%s) "
                   "until that group commits again.\n", rank_, lag->group,
                   ranks_phrase(layout_.members_of_group(lag->group)).c_str(), what.c_str(), lag->others,
                   group_rollback_ ? "its files" : cfg_.dir.empty() ? "memory" : "memory and files");
    }
    if (!floor) return;
    if (trace_) std::fprintf(stderr, "reprise: rank %d: job floor %llu\n", rank_, static_cast<unsigned long long>(*floor));
    for (int r = 0; r < size_; ++r) ok(polled::send(&*floor, 1, MPI_UINT64_T, r, kFloor, data_));
  }

  // Whether this group's barrier runs on NCCL (Config::group_barrier). Chosen with the group at its first barrier
  // after the group communicator was (re)built: the members' devices are gathered over MPI, every member applies
  // coord::choose_group_barrier to the same data, and an NCCL group creates its communicator (unique id from its
  // first member over MPI).
  bool nccl_group() {
    if (cfg_.group_barrier == GroupBarrierKind::Mpi) return false;
    if (!barrier_) {
      int gsize = 0, grank = 0;
      MPI_Comm_size(group_, &gsize);
      MPI_Comm_rank(group_, &grank);
      struct Record {
        std::uint64_t host;
        char gpu[40];
      } mine{coord::host_identity(), {}};
      const std::string bus = coord::current_gpu_bus_id();
      std::strncpy(mine.gpu, bus.c_str(), sizeof mine.gpu - 1);
      std::vector<Record> records(static_cast<std::size_t>(gsize));
      MPI_Request req = MPI_REQUEST_NULL;
      group_collective(
          MPI_Iallgather(&mine, sizeof(Record), MPI_BYTE, records.data(), sizeof(Record), MPI_BYTE, group_, &req), req,
          "the group's barrier choice");
      std::vector<coord::MemberDevice> devices;
      for (const Record& r : records) devices.push_back({r.host, std::string(r.gpu, strnlen(r.gpu, sizeof r.gpu))});
      const std::vector<int> members = layout_.members_of_group(layout_.group_of[static_cast<std::size_t>(rank_)]);
      barrier_ = coord::choose_group_barrier(cfg_.group_barrier, coord::nccl_problem(), members, devices);
      if (barrier_->kind == GroupBarrierKind::Nccl) {
        coord::NcclId id{};
        if (grank == 0) id = coord::nccl_unique_id();
        group_collective(MPI_Ibcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, group_, &req), req,
                         "the group's NCCL set-up");
        nccl_ = std::make_unique<coord::NcclBarrier>(id, gsize, grank);
        wait_nccl([this] { return nccl_->ready(); });
      }
      if (grank == 0 && (trace_ || barrier_->kind != GroupBarrierKind::Nccl))
        std::fprintf(stderr, "reprise: group %d barrier: %s (%s)\n",
                     layout_.group_of[static_cast<std::size_t>(rank_)],
                     barrier_->kind == GroupBarrierKind::Nccl ? "NCCL" : "MPI", barrier_->reason.c_str());
    }
    return barrier_->kind == GroupBarrierKind::Nccl;
  }

  // Polls a step of the NCCL barrier while serving the protocol, as wait_group does. NCCL never ends a collective
  // whose member died: when the recovery of a failure takes this rank's group down (recover() throws), the NCCL
  // communicator is aborted first. NCCL may see a dead peer (ncclRemoteError) before ULFM does: the failure
  // detector gets a few seconds to confirm it before the error is reported as such.
  void wait_nccl(const std::function<bool()>& finished) {
    for (unsigned spin = 0;; ++spin) {
      try {
        if (!nccl_) throw Error("the group's NCCL barrier was dropped by a repair during the barrier");
        if (finished()) return;
      } catch (const DeviceError&) {
        for (int i = 0; i < 1000 && !down_; ++i) {
          comm_state_->poll_control();
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (!down_) throw;
        reset_group_barrier();
      }
      if (down_) {
        try {
          recover("a failure was detected by the runtime's background threads");
        } catch (...) {
          reset_group_barrier();
          throw;
        }
      }
      comm_state_->poll_control();
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void reset_group_barrier() {
    nccl_.reset();  // aborts the NCCL communicator (never waits for the other members)
    barrier_.reset();
  }

  // Completes a collective of the group whose start returned `started`: waits (wait_group), reads libnbc's
  // MPI_ERR_OTHER for a lost member as the failure it is (polled::collective_result), and recovers from a failure
  // (`what` names the collective in the message).
  void group_collective(int started, MPI_Request& req, const char* what) {
    const int rc = polled::collective_result(started == MPI_SUCCESS ? wait_group(req) : started, group_);
    if (is_failure(rc) || down_) recover(std::string(what) + " failed: " + mpi_error(rc));
    ok(rc);
  }

  // Waits for a collective of the group while serving the protocol (a survivor may be the restart coordinator, or
  // owe replays) and noticing failures: a survivor of a group rollback goes on waiting after the repair (its
  // group is intact); elsewhere the recovery cancels the collective (revokes the group's communicator).
  int wait_group(MPI_Request& req) {
    pending_group_ = &req;
    struct Clear {
      MPI_Request** p;
      ~Clear() { *p = nullptr; }
    } clear{&pending_group_};
    auto since = std::chrono::steady_clock::now();
    for (unsigned spin = 0;; ++spin) {
      if (trace_ && std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
        since = std::chrono::steady_clock::now();
        std::fprintf(stderr, "reprise: rank %d: waiting for the group: %s\n", rank_, comm_state_->debug_state().c_str());
      }
      int flag = 0;
      const int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) return rc;
      if (down_) recover("a failure was detected by the runtime's background threads");
      comm_state_->poll_control();
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // A recovery abandons the group collective this rank waits for (its group is rebuilt).
  void cancel_group_wait() {
    if (!pending_group_) return;
    revoke(group_);
    MPI_Wait(pending_group_, MPI_STATUS_IGNORE);
    pending_group_ = nullptr;
  }

  // What this survivor contributes to a recovery plan: its own records, and those it holds for its wards.
  std::vector<std::uint64_t> my_records(const std::vector<int>& failed_ranks) {
    std::vector<std::uint64_t> out;
    core::VersionStore& own = store_ ? store_->local() : *local_;
    append_records(out, rank_, coord::records_of(own), 0);
    {
      std::lock_guard<std::mutex> lock(wards_mutex_);
      for (auto& [ward, s] : wards_) append_records(out, ward, coord::records_of(*s), 1);
    }
    // The files of failed ranks (a persistent level on a shared file system), read by the lowest survivor.
    if (!cfg_.dir.empty() && lowest_survivor_)
      for (int f : failed_ranks) append_records(out, f, coord::records_of(*core::make_directory_store(cfg_.dir, f)), 0);
    return out;
  }

  static std::vector<coord::RankHoldings> holdings_from(const std::vector<std::uint64_t>& all, int n) {
    std::vector<coord::RankHoldings> h(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i + 5 <= all.size(); i += 5) {
      const int owner = static_cast<int>(all[i]);
      if (owner < 0 || owner >= n) continue;
      coord::VersionRecord r{all[i + 1], all[i + 2], all[i + 3] != 0};
      auto& list = all[i + 4] ? h[static_cast<std::size_t>(owner)].at_buddy : h[static_cast<std::size_t>(owner)].own;
      if (std::find(list.begin(), list.end(), r) == list.end()) list.push_back(r);
    }
    return h;
  }

  // A launch on a REPRISE_DIR that holds files: every rank restarts from the newest version all of them hold in
  // files, or, when the files hold none (the previous job ended before a version reached every rank's files, which
  // its asynchronous writes make possible), the job starts from the beginning and sets the previous job's files
  // aside (DIR/previous-<k>), so that no version of the old run mixes with the new one and nothing is deleted.
  // DIR/job.reprise records the rank count: a launch with another count is refused, since each rank's data belong
  // to the decomposition that wrote them.
  void agree_on_restart() {
    if (cfg_.dir.empty()) return;
    const std::string& dir = cfg_.dir;
    // Rank 0's record counts (DIR may be node-local); the set-aside index is free at every rank.
    std::int64_t job[2] = {-3, core::next_set_aside(dir, rank_)};  // {recorded ranks (-1: none, -2: damaged), k}
    std::string damaged;
    if (rank_ == 0) {
      try {
        const auto n = core::read_job_ranks(dir);
        job[0] = n ? *n : -1;
      } catch (const Error& e) {
        job[0] = -2;
        damaged = e.what();
      }
    }
    ok(MPI_Allreduce(MPI_IN_PLACE, job, 2, MPI_INT64_T, MPI_MAX, world_));
    const std::int64_t recorded = job[0];
    if (recorded == -2)
      throw RestoreError("relaunch from " + dir + ": " +
                         (rank_ == 0 ? damaged : std::string("rank 0 found its job record damaged (see its message)")));
    if (recorded > 0 && recorded != size_) {
      // This job's ranks beyond the recorded count made empty folders: remove them (only if empty).
      std::error_code ignored;
      if (rank_ >= recorded) std::filesystem::remove(core::rank_folder(dir, rank_), ignored);
      MPI_Barrier(world_);  // every rank refuses: none aborts the job before the others cleaned up
      throw RestoreError("relaunch from " + dir + ": its files were written by a job of " + std::to_string(recorded) +
                         " ranks, and this job has " + std::to_string(size_) + " (each rank's data belong to the "
                         "decomposition that wrote them). Nothing was changed; relaunch with " +
                         std::to_string(recorded) + " ranks, or set REPRISE_DIR to another directory to start afresh.");
    }
    const std::vector<std::uint64_t> mine = [&] {
      std::vector<std::uint64_t> out;
      append_records(out, rank_, coord::records_of(*local_), 0);
      return out;
    }();
    const auto all = allgather_u64(world_, mine);
    auto holdings = holdings_from(all, size_);
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (coord::complete_versions(holdings[static_cast<std::size_t>(r)].own).empty()) missing.push_back(r);
    if (static_cast<int>(missing.size()) == size_) {  // a fresh directory (or one whose job wrote nothing)
      if (rank_ == 0 && recorded < 0) core::write_job_ranks(dir, size_);
      return;
    }
    std::string why;
    if (!missing.empty()) {
      why = "rank" + std::string(missing.size() > 1 ? "s " : " ") + coord::list_ranks(missing) +
            (missing.size() > 1 ? " hold" : " holds") + " no complete version";
    } else {
      try {
        const coord::RecoveryPlan plan = coord::plan_recovery(layout_, {}, holdings, true);
        target_ = plan.version;
        restarted_ = true;
        if (rank_ == 0 && recorded < 0) core::write_job_ranks(dir, size_);
        // Versions newer than the restart point (a rank's group had committed more before the job died) are
        // recomputed by this run; left in place, a fall-back to files before the new ones are written could
        // restore them. Set aside, like the rest of an old run.
        const auto newer = core::set_aside_newer(dir, rank_, static_cast<int>(job[1]), plan.version);
        if (!newer.empty())
          std::fprintf(stderr, "reprise: rank %d: relaunch from version %llu: its version%s %s of the previous job "
                       "moved to %s/previous-%lld (this run recomputes them)\n", rank_,
                       static_cast<unsigned long long>(plan.version), newer.size() > 1 ? "s" : "",
                       coord::list_numbers(newer).c_str(), dir.c_str(),
                       static_cast<long long>(job[1]));
        return;
      } catch (const UnrecoverableFailure& e) {
        why = e.what();
      }
    }
    // Files of a job that wrote no record (an older Reprise) may be of another rank count: do not guess.
    if (recorded < 0)
      throw RestoreError("relaunch from " + dir + ": " + why + " while others hold versions, and " + dir +
                         " has no job record (job.reprise) to tell the rank count that wrote it. Nothing was changed; "
                         "relaunch with the rank count that wrote the files, or set REPRISE_DIR to another directory "
                         "to start afresh.");
    core::set_aside(dir, rank_, static_cast<int>(job[1]));
    if (rank_ == 0)
      std::fprintf(stderr, "reprise: relaunch from %s: %s, so no version restarts every rank (the previous job ended "
                   "before one reached every rank's files): the job starts from the beginning; the previous job's "
                   "files were moved to %s/previous-%lld\n", dir.c_str(), why.c_str(), dir.c_str(),
                   static_cast<long long>(job[1]));
  }

  // ---- recovery ----------------------------------------------------------------------------------------------
  // Throws Rollback at every rank that rolls back; returns at a survivor of a group rollback (REPRISE_ROLLBACK=
  // group), once the job is repaired and the restart exchange done.
  void recover(const std::string& why) {
#if !REPRISE_HAVE_ULFM
    link_down("recover");
    throw UnrecoverableFailure("rank " + std::to_string(rank_) + ": " + why +
                               "; this MPI has no ULFM, so the job cannot be repaired. Run through "
                               "scripts/mpirun.sh, which uses an MPI whose ULFM works.");
#else
    const auto t0 = Clock::now();
    // One watch for a recovery and the new ones that interrupt it (recover() is re-entered from inside).
    std::optional<RecoveryWatch> watch;
    if (!watch_ && (cfg_.recovery_watch_ms > 0 || cfg_.recovery_timeout_s > 0))
      watch.emplace(watch_, "rank " + std::to_string(rank_), std::chrono::milliseconds(cfg_.recovery_watch_ms),
                    std::chrono::seconds(cfg_.recovery_timeout_s));
    if (should_die(current_step_, coord::KillPoint::Stall)) {  // REPRISE_KILL: a process hung in the recovery
      std::fprintf(stderr, "reprise: rank %d: REPRISE_KILL: stalls in the recovery at step %llu\n", rank_,
                   static_cast<unsigned long long>(current_step_));
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    stage("stopping the background threads");
    link_down("recover");
    stop_progress();
    if (quiesce_) quiesce_();
    // Each attempt shrinks the communicator of the previous one; a failure during an attempt (a survivor or a
    // replacement dies) makes every survivor agree to start a new attempt with the union of the failures.
    // Replacements of an abandoned attempt see their merge fail and exit.
    MPI_Comm base = world_;
    for (int attempt = 1;; ++attempt) {
      MPI_Comm shrunk = MPI_COMM_NULL;
      stage("in MPIX_Comm_shrink");
      if (MPIX_Comm_shrink(base, &shrunk) != MPI_SUCCESS)
        throw UnrecoverableFailure("rank " + std::to_string(rank_) + ": MPIX_Comm_shrink failed during recovery");
      MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
      retired_.push_back(shrunk);
      const std::vector<int> failed = failed_ranks(shrunk);
      // Shrink is uniform: every survivor sees the same set. Empty: a communicator was revoked, or an agreement
      // failed, with every process alive (seen with Open MPI 5.0.7 under load). Spawning nobody fails, so retrying
      // would spin forever: stop the job with a clear error instead (its committed files stay as they are).
      if (failed.empty())
        throw UnrecoverableFailure("rank " + std::to_string(rank_) + ": " + why + ", yet no process of the job "
                                   "failed (the MPI library reported a revoked communicator or a failed agreement "
                                   "with every process alive). Reprise cannot tell what was lost, so the job stops "
                                   "here; files already written were left intact: rerun the job (from REPRISE_DIR "
                                   "if one was set).");
      std::fprintf(stderr, "reprise: rank %d: %s; failed %s; recovering (attempt %d)\n", rank_, why.c_str(),
                   ranks_phrase(failed).c_str(), attempt);
      if (should_die(current_step_, coord::KillPoint::Recovery)) die("recovery", current_step_);
      coord::RecoveryPlan plan;
      std::exception_ptr plan_error;
      std::uint64_t max_step = current_step_;
      MPI_Comm inter = MPI_COMM_NULL, merged = MPI_COMM_NULL, world = MPI_COMM_NULL;
      int flag = 1;
      try {
        stage("gathering the survivors' checkpoints (shrunk communicator)");
        ok(polled::allreduce(MPI_IN_PLACE, &max_step, 1, MPI_UINT64_T, MPI_MAX, shrunk));
        const auto all = allgather_u64(shrunk, my_records(failed));
        auto holdings = holdings_from(all, size_);
        // Groups with a member still re-executing after an earlier group rollback, or still inside the recovery
        // that rolled it back (this failure interrupted it), roll back again: the orphan and duplicate limits it
        // re-executes under are only valid in the recovery that computed them (cleared, it would send again what
        // its receivers already delivered, and nobody would receive it). A replacement whose data phase was
        // interrupted holds only part of its checkpoints and of its wards' (RankHoldings::replacing).
        std::set<int> also;
        const bool behind = data_pending_ || (comm_state_ ? comm_state_->reexecuting() : joined_group_recovery_);
        const auto flags = allgather_u64(
            shrunk, {static_cast<std::uint64_t>(rank_), behind ? 1u : 0u, data_pending_ ? 1u : 0u});
        for (std::size_t i = 0; i + 2 < flags.size(); i += 3) {
          if (flags[i] >= static_cast<std::uint64_t>(size_)) continue;
          const std::size_t r = static_cast<std::size_t>(flags[i]);
          if (flags[i + 1] && group_rollback_) also.insert(layout_.group_of[r]);
          if (flags[i + 2]) holdings[r].replacing = true;
        }
        try {
          plan = group_rollback_
                     ? coord::plan_group_recovery(layout_, failed, holdings, !cfg_.dir.empty(), also)
                     : coord::plan_recovery(layout_, failed, holdings, !cfg_.dir.empty());
        } catch (const UnrecoverableFailure&) {
          plan_error = std::current_exception();
        }
      } catch (const PeerFailure&) {
        flag = 0;
      }
      stage("agreeing on the recovery plan");
      if (!agreed(shrunk, flag)) {
        base = shrunk;
        continue;
      }
      if (plan_error) std::rethrow_exception(plan_error);  // every survivor decided on the same data
      // Spawn the replacements with this program's command line; they run join_as_replacement().
      const std::vector<std::string> args = own_command_line();
      std::vector<char*> argv;
      for (std::size_t i = 1; i < args.size(); ++i) argv.push_back(const_cast<char*>(args[i].c_str()));
      argv.push_back(nullptr);
      std::vector<int> errcodes(failed.size());
      stage("in MPI_Comm_spawn (replacements)");
      int rc = MPI_Comm_spawn(executable().c_str(), argv.data(), static_cast<int>(failed.size()), MPI_INFO_NULL, 0,
                              shrunk, &inter, errcodes.data());
      if (!agreed(shrunk, rc == MPI_SUCCESS)) {
        if (rc == MPI_SUCCESS) revoke(inter);
        base = shrunk;
        continue;
      }
      MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
      flag = 1;
      try {
        stage("merging with the replacements");
        ok(MPI_Intercomm_merge(inter, 0, &merged));
        MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
        std::vector<std::uint64_t> packet = make_packet(plan, max_step);
        broadcast_packet(merged, packet);
        kill_floors_ = kill_floors(plan.failed, max_step);
        ok(MPI_Comm_split(merged, 0, rank_, &world));
      } catch (const PeerFailure&) {
        flag = 0;
      }
      // First among the survivors, then with the replacements (join_as_replacement), who learn either way: a
      // revoked `merged` makes their agreement fail and they leave.
      stage("agreeing with the replacements");
      bool merged_ok = agreed(shrunk, flag);
      if (merged_ok) merged_ok = agreed(merged, true);
      if (!merged_ok) {
        for (MPI_Comm c : {inter, merged, world}) revoke(c);
        base = shrunk;
        continue;
      }
      MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
      MPI_Comm_free(&merged);
      MPI_Comm_free(&inter);
      const double repaired = since(t0);
      const bool rolls_back = !plan.partial || std::binary_search(plan.rolled_back.begin(), plan.rolled_back.end(), rank_);
      if (rolls_back) cancel_group_wait();
      adopt(world, !rolls_back);  // the old communicators were revoked; they are freed at the end
      down_ = false;
      if (plan.partial) {
        recover_group(plan, failed, rolls_back, t0, repaired, attempt);
        return;
      }
      // Coordinated fallback: every rank rolls back, to one version. Messages between groups that were in flight
      // at that version's cut (sent before it, delivered after it) are not sent again by the re-execution: the
      // restart exchange makes their senders replay them from the logs restored with that version.
      std::set<int> everyone;
      for (int r = 0; r < size_; ++r) everyone.insert(r);
      ++epoch_;
      begin_comm_recovery(everyone, -1);
      RecoveryRecord rec;
      rec.failed = failed;
      rec.version = plan.version;
      rec.at = std::chrono::duration<double>(t0.time_since_epoch()).count();
      rec.repair_seconds = repaired;
      rec.attempts = attempt;
      rec.rolled_back = plan.rolled_back;
      if (plan.from_start) {
        rec.from_start = true;
        start_over();
        rec.total_seconds = since(t0);
        recoveries_.push_back(rec);
        if (lowest_survivor_)
          std::fprintf(stderr,
                       "reprise: recovered from the failure of %s in %.3f s (%d attempt%s); nothing was "
                       "committed before it, so every rank starts over from the beginning\n",
                       ranks_phrase(failed).c_str(), rec.total_seconds, attempt, attempt > 1 ? "s" : "");
        throw Rollback(0,
                       "rank " + std::to_string(rank_) + " starts over after the failure of " +
                           ranks_phrase(failed) + " (no version was committed before it)",
                       true);
      }
      const auto t1 = Clock::now();
      try {
        stage("moving checkpoints to the replacements and buddies");
        move_data(plan, rec);
      } catch (const PeerFailure&) {
        recover("a process failed while checkpoints were moved to the replacements");  // a new recovery
      }
      rec.transfer_seconds = since(t1);
      finish_recovery(plan.version);
      rec.total_seconds = since(t0);
      recoveries_.push_back(rec);
      if (lowest_survivor_)
        std::fprintf(stderr,
                     "reprise: recovered from the failure of %s in %.3f s (repair %.3f s, data %.3f s, "
                     "%d attempt%s); every rank rolls back to version %llu\n",
                     ranks_phrase(failed).c_str(), rec.total_seconds,
                     rec.repair_seconds, rec.transfer_seconds, attempt, attempt > 1 ? "s" : "",
                     static_cast<unsigned long long>(plan.version));
      throw Rollback(plan.version, "rank " + std::to_string(rank_) + " rolls back to version " +
                                       std::to_string(plan.version) + " after the failure of " +
                                       ranks_phrase(failed));
    }
#endif
  }

  // The rest of a group rollback, after the repair: data to the replacements and the buddies, then either this
  // rank rolls back (throws Rollback; its restart exchange runs at its next runtime call, once restored) or it
  // survives: it takes part in the restart exchange at once and returns to the application.
  void recover_group(const coord::RecoveryPlan& plan, const std::vector<int>& failed, bool rolls_back,
                     Clock::time_point t0, double repaired, int attempt) {
    ++epoch_;
    const std::set<int> R(plan.rolled_back.begin(), plan.rolled_back.end());
    int coordinator = -1;
    for (int r = 0; r < size_ && coordinator < 0; ++r)
      if (!R.count(r)) coordinator = r;
    begin_comm_recovery(R, coordinator);
    RecoveryRecord rec;
    rec.failed = failed;
    rec.repair_seconds = repaired;
    rec.attempts = attempt;
    rec.rolled_back = plan.rolled_back;
    rec.group = true;
    rec.at = std::chrono::duration<double>(t0.time_since_epoch()).count();
    rec.this_rank = rolls_back;
    const std::size_t me = static_cast<std::size_t>(rank_);
    // At a survivor: the version the (first) rolled-back group went back to.
    rec.version = plan.version_of[static_cast<std::size_t>(rolls_back ? rank_ : plan.rolled_back.front())];
    rec.from_start = plan.starts_over[static_cast<std::size_t>(rolls_back ? rank_ : plan.rolled_back.front())] != 0;
    const auto t1 = Clock::now();
    try {
      stage("moving checkpoints to the replacements and buddies");
      move_data(plan, rec);
      rec.transfer_seconds = since(t1);
      stage("in the restart exchange");
      if (!rolls_back) {
        if (store_) {
          store_->resync_after_recovery();
          start_progress();
        }
        if (comm_state_) comm_state_->restart_exchange(true);
      }
    } catch (const PeerFailure&) {
      // Another process failed during the data phase or the restart exchange: a new recovery takes over. The
      // groups of this one roll back again (their members report they are still recovering), with the union of
      // the failures; survivors that are not in them take part in its restart exchange and go on.
      rec.interrupted = true;
      rec.total_seconds = since(t0);
      recoveries_.push_back(rec);
      recover("a process failed while the job recovered from the failure of " + ranks_phrase(failed));
      return;  // a survivor of the new recovery (a rank that rolls back left with Rollback)
    }
    rec.total_seconds = since(t0);
    recoveries_.push_back(rec);
    std::vector<int> groups;
    for (int r : plan.rolled_back) groups.push_back(layout_.group_of[static_cast<std::size_t>(r)]);
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    std::vector<int> fresh;  // groups that committed nothing: they start over from the beginning
    for (int g : groups)
      for (int r : plan.rolled_back)
        if (layout_.group_of[static_cast<std::size_t>(r)] == g && plan.starts_over[static_cast<std::size_t>(r)]) {
          fresh.push_back(g);
          break;
        }
    if (rank_ == coordinator)
      std::fprintf(stderr,
                   "reprise: recovered from the failure of %s in %.3f s (repair %.3f s, data %.3f s%s); only "
                   "group%s %s (ranks %s) roll%s back, the other ranks go on; restart coordinator: rank %d%s%s%s\n",
                   ranks_phrase(failed).c_str(), rec.total_seconds, rec.repair_seconds, rec.transfer_seconds,
                   attempt > 1 ? (", " + std::to_string(attempt) + " attempts").c_str() : "",
                   groups.size() > 1 ? "s" : "", coord::list_ranks(groups).c_str(),
                   coord::list_ranks(plan.rolled_back).c_str(), groups.size() > 1 ? "" : "s", coordinator,
                   fresh.empty() ? "" : "; group ", fresh.empty() ? "" : coord::list_ranks(fresh).c_str(),
                   fresh.empty() ? "" : " committed nothing before it and starts over from the beginning");
    if (!rolls_back) return;
    if (plan.starts_over[me]) {
      start_over();
      throw Rollback(0,
                     "rank " + std::to_string(rank_) + " starts over after the failure of " + ranks_phrase(failed) +
                         " (its group committed no version before it)",
                     true);
    }
    finish_recovery(plan.version_of[me]);
    throw Rollback(plan.version_of[me], "rank " + std::to_string(rank_) + " rolls back to version " +
                                            std::to_string(plan.version_of[me]) + " after the failure of " +
                                            ranks_phrase(failed));
  }

  // Comm's part of a recovery; deferred to the creation of Comm in a replacement still being constructed.
  void begin_comm_recovery(const std::set<int>& rolled_back, int coordinator) {
    if (comm_state_) {
      comm_state_->begin_recovery(epoch_, rolled_back, coordinator);
      return;
    }
    joined_group_recovery_ = true;
    joined_rolled_back_ = rolled_back;
    joined_coordinator_ = coordinator;
  }

#if REPRISE_HAVE_ULFM
  // Uniform decision over `comm`: true when every live member passed true and nobody failed meanwhile.
  static bool agreed(MPI_Comm comm, bool mine) {
    int flag = mine ? 1 : 0;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPIX_Comm_iagree(comm, &flag, &r);  // polled: see coord/polled_mpi.hpp
    if (rc == MPI_SUCCESS) rc = polled::wait(r);
    return rc == MPI_SUCCESS && flag == 1;
  }
#endif

  // Ranks of the current world that are not in `shrunk` (ascending).
  std::vector<int> failed_ranks(MPI_Comm shrunk) {
    MPI_Group gw, gs;
    MPI_Comm_group(world_, &gw);
    MPI_Comm_group(shrunk, &gs);
    int ns = 0;
    MPI_Group_size(gs, &ns);
    std::vector<int> in(static_cast<std::size_t>(ns)), out(static_cast<std::size_t>(ns));
    for (int i = 0; i < ns; ++i) in[static_cast<std::size_t>(i)] = i;
    MPI_Group_translate_ranks(gs, ns, in.data(), gw, out.data());
    std::set<int> alive(out.begin(), out.end());
    std::vector<int> failed;
    for (int r = 0; r < size_; ++r)
      if (!alive.count(r)) failed.push_back(r);
    lowest_survivor_ = !out.empty() && *std::min_element(out.begin(), out.end()) == rank_;
    MPI_Group_free(&gw);
    MPI_Group_free(&gs);
    return failed;
  }

  // Recovery to the initial state: every stored version of this rank and of its wards is dropped (none was
  // committed), and the Runtime forgets its timeline at its next checkpoint (take_start_over).
  void start_over() {
    if (comm_state_) comm_state_->start_over();
    floor_received_ = -1;  // the store forgets its floor too (drop_everything)
    data_pending_ = false;  // nothing to hold
    target_.reset();
    restarted_ = false;
    start_over_ = true;
    if (!group_rollback_) {  // every rank starts over; with a group rollback, wards of other groups go on
      std::lock_guard<std::mutex> lock(wards_mutex_);
      wards_.clear();
    }
    if (store_) {
      store_->drop_everything();
      start_progress();
    } else if (local_) {
      for (std::uint64_t v : local_->list()) local_->release(v);
    }
  }

  void finish_recovery(std::uint64_t version) {
    target_ = version;
    if (store_) {
      store_->reset_after_recovery(version);
      start_progress();
    }
  }

  // Broadcast from the merged communicator's rank 0 to the replacements (coord/recovery_packet.hpp).
  std::vector<std::uint64_t> make_packet(const coord::RecoveryPlan& plan, std::uint64_t max_step) {
    coord::RecoveryPacket k;
    k.plan = plan;
    k.layout = layout_;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "REPRISE_", 8) == 0) k.env.emplace_back(*e);
    k.epoch = epoch_ + 1;  // the epoch the recovery starts (recover_group(), or every rank's restart exchange)
    k.kill_floors = kill_floors(plan.failed, max_step);
    return coord::encode_packet(k);
  }

  // Failure injection across replacements: per rank, the step up to which REPRISE_KILL orders already fired. A
  // failed rank's order fired at the first of its kill steps above its previous floor, which may be ahead of every
  // survivor (max_step): its replacement must not fire it again when it re-executes that step.
  std::vector<std::uint64_t> kill_floors(const std::vector<int>& failed, std::uint64_t max_step) const {
    std::vector<std::uint64_t> floors = kill_floors_;
    floors.resize(static_cast<std::size_t>(size_), 0);
    for (int f : failed) {
      std::uint64_t& floor = floors[static_cast<std::size_t>(f)];
      std::uint64_t fired = 0;
      for (const auto& k : kills_)
        if (k.rank == f && k.step > floor && (fired == 0 || k.step < fired)) fired = k.step;
      floor = std::max({floor, max_step, fired});
    }
    return floors;
  }

  static void broadcast_packet(MPI_Comm merged, std::vector<std::uint64_t>& p) {
    std::uint64_t n = p.size();
    ok(polled::bcast(&n, 1, MPI_UINT64_T, 0, merged));
    p.resize(n);
    ok(polled::bcast(p.data(), static_cast<int>(n), MPI_UINT64_T, 0, merged));
  }

  void join_as_replacement(MPI_Comm parent, Config& cfg) {
#if !REPRISE_HAVE_ULFM
    (void)parent;
    (void)cfg;
    throw UnrecoverableFailure("a replacement process was started, but this MPI has no ULFM");
#else
    const auto t0 = Clock::now();
    replacement_ = true;
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm merged = MPI_COMM_NULL, world = MPI_COMM_NULL;
    int mrank = 0, msize = 0, nremote = 0;
    coord::RecoveryPacket k;
    bool fine = true;
    try {
      ok(MPI_Intercomm_merge(parent, 1, &merged));
      MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
      MPI_Comm_rank(merged, &mrank);
      MPI_Comm_size(merged, &msize);
      MPI_Comm_remote_size(parent, &nremote);
      std::vector<std::uint64_t> p;
      broadcast_packet(merged, p);
      k = coord::decode_packet(p);
      if (k.layout.size() != msize)
        throw Error("the recovery packet describes a job of " + std::to_string(k.layout.size()) + " ranks, but the "
                    "repaired communicator has " + std::to_string(msize));
      const int key = k.plan.failed.at(static_cast<std::size_t>(mrank - nremote));
      ok(MPI_Comm_split(merged, 0, key, &world));
    } catch (const PeerFailure&) {
      fine = false;
    }
    if (merged == MPI_COMM_NULL || !agreed(merged, fine)) {
      // The survivors abandoned this recovery attempt (another process failed); a later attempt spawns anew.
      // SIGKILL, not exit: ULFM detects a killed process, and the survivors may be waiting for this one.
      std::fprintf(stderr, "reprise: a replacement process of an abandoned recovery attempt leaves\n");
      std::fflush(stderr);
      raise(SIGKILL);
    }
    for (const std::string& e : k.env) {
      const auto eq = e.find('=');
      if (eq != std::string::npos) setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    kills_ = coord::parse_kill_spec(std::getenv("REPRISE_KILL") ? std::getenv("REPRISE_KILL") : "");
    kill_floors_ = k.kill_floors;
    data_pending_ = true;  // until its data phase completes (see RankHoldings::replacing)
    group_rollback_ = Config::from_env(cfg).group_rollback;  // the job's REPRISE_* environment is set now
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    MPI_Comm_free(&merged);
    // Watched from here (the job's REPRISE_* environment has just arrived; the survivors watch the merge).
    std::optional<RecoveryWatch> watch;
    if (const Config job = Config::from_env(cfg); job.recovery_watch_ms > 0 || job.recovery_timeout_s > 0)
      watch.emplace(watch_, "rank " + std::to_string(k.plan.failed.at(static_cast<std::size_t>(mrank - nremote))) +
                                " (replacement)",
                    std::chrono::milliseconds(job.recovery_watch_ms), std::chrono::seconds(job.recovery_timeout_s));
    stage("building the repaired communicators");
    layout_ = k.layout;  // the job's layout, wherever this process was started
    adopt(world);
    {
      const coord::TopologyConfig topology = coord::TopologyConfig::from_env();
      node_key_ = coord::own_node_key(topology, topology.replacement_node >= 0
                                                    ? topology.replacement_node
                                                    : layout_.node_of.at(static_cast<std::size_t>(rank_)));
    }
    kill_floor_ = kill_floors_.at(static_cast<std::size_t>(rank_));  // rank_: set by adopt; includes max_step
    cfg = Config::from_env(cfg);
    cfg.rank = rank_;
    cfg_ = cfg;
    local_ = cfg.dir.empty() ? core::make_memory_store() : core::make_directory_store(cfg.dir, rank_);
    RecoveryRecord rec;
    rec.failed = k.plan.failed;
    rec.version = k.plan.version;
    rec.replacement = true;
    if (k.plan.partial) {
      rec.rolled_back = k.plan.rolled_back;
      rec.group = true;
      rec.version = k.plan.version_of.at(static_cast<std::size_t>(rank_));
      k.plan.version = rec.version;
      k.plan.from_start = k.plan.starts_over.at(static_cast<std::size_t>(rank_)) != 0;
    } else {
      for (int r = 0; r < size_; ++r) rec.rolled_back.push_back(r);  // coordinated fallback: every rank
    }
    // Every rank of R (here: of its group, or of the job) takes part in the restart exchange once restored.
    epoch_ = k.epoch;
    joined_group_recovery_ = true;
    joined_rolled_back_ = std::set<int>(rec.rolled_back.begin(), rec.rolled_back.end());
    for (int r = 0; r < size_ && joined_coordinator_ < 0; ++r)
      if (!joined_rolled_back_.count(r)) joined_coordinator_ = r;
    rec.repair_seconds = since(t0);
    if (k.plan.partial && k.plan.from_start) {
      // Its group starts over, the others go on: it still takes part in the data exchange with its buddies
      // (it holds nothing for its own group's sake, but its wards re-ship what they have).
      rec.from_start = true;
      const auto t1 = Clock::now();
      move_data_or_recover(k.plan, rec, t0, t1);
      return;
    }
    if (k.plan.from_start) {  // nothing committed: this process starts from the beginning like the others
      rec.from_start = true;
      data_pending_ = false;  // every rank starts over: nobody holds anything
      rec.total_seconds = since(t0);
      recoveries_.push_back(rec);
      return;
    }
    const auto t1 = Clock::now();
    target_ = k.plan.version;
    restarted_ = true;
    move_data_or_recover(k.plan, rec, t0, t1);
#endif
  }

#if REPRISE_HAVE_ULFM
  // A replacement's data phase. When another process fails during it, the replacement takes part in the new
  // recovery like a survivor (reporting that it holds only part of its data); that recovery rolls its group back
  // again and sets target_ (or starts it over); the application restores at start either way.
  void move_data_or_recover(const coord::RecoveryPlan& plan, RecoveryRecord& rec, Clock::time_point t0,
                            Clock::time_point t1) {
    stage("getting its checkpoints (replacement)");
    try {
      move_data(plan, rec);
    } catch (const PeerFailure&) {
      rec.interrupted = true;
      rec.total_seconds = since(t0);
      recoveries_.push_back(rec);
      try {
        recover("a process failed while checkpoints were moved to the replacements");
      } catch (const Rollback&) {
      }
      return;
    }
    rec.transfer_seconds = since(t1);
    rec.total_seconds = since(t0);
    recoveries_.push_back(rec);
  }
#endif

  // After the repair: (1) each replacement gets its chain for the planned version from its buddy (unless it reads
  // its own files); (2) every rank makes sure its buddy holds that chain: the buddy says what it holds, the owner
  // sends what is missing (everything when the buddy is a replacement). One pair at a time, in rank order, so the
  // rendezvous sends cannot form a cycle.
  void move_data(const coord::RecoveryPlan& plan, RecoveryRecord& rec) {
    check_placement(rec);
    core::VersionStore& own = store_ ? store_->local() : *local_;
    auto send_versions = [&](int dest, core::VersionStore& from, const std::vector<std::uint64_t>& versions) {
      if (should_die(current_step_, coord::KillPoint::Transfer)) die("transfer", current_step_);
      const std::uint64_t n = versions.size();
      ok(polled::send(&n, 1, MPI_UINT64_T, dest, kMoveCount, world_));
      for (std::uint64_t v : versions) {
        const core::StoredVersion sv = from.load(v);
        send_version(world_, dest, kMoveHead, kMovePiece, sv.manifest, *sv.payload,
                     core::payload_checksum(sv.payload->data(), sv.payload->size(), cfg_.digest_threads));
        rec.bytes_sent += sv.payload->size();
      }
    };
    auto recv_versions = [&](int src, core::VersionStore& into) {
      std::uint64_t n = 0;
      ok(polled::recv(&n, 1, MPI_UINT64_T, src, kMoveCount, world_, MPI_STATUS_IGNORE));
      for (std::uint64_t i = 0; i < n; ++i) {
        Received r = recv_version(world_, src, kMoveHead, kMovePiece, "version sent by rank " + std::to_string(src));
        rec.bytes_received += r.payload->size();
        into.put(r.manifest, std::move(r.payload), r.checksum);
      }
    };
    // What rank w restores (group rollback: survivors restore nothing, groups that start over neither).
    auto target = [&](int w) -> std::optional<std::uint64_t> {
      if (!plan.partial) return plan.version;
      const std::size_t i = static_cast<std::size_t>(w);
      if (!std::binary_search(plan.rolled_back.begin(), plan.rolled_back.end(), w) || plan.starts_over[i])
        return std::nullopt;
      return plan.version_of[i];
    };
    auto survivor = [&](int w) {
      return plan.partial && !std::binary_search(plan.rolled_back.begin(), plan.rolled_back.end(), w);
    };
    // The ranks whose chain comes from their buddy: failed ones, and replacements of an interrupted recovery.
    for (int f = 0; f < size_; ++f) {
      if (plan.source[static_cast<std::size_t>(f)] != coord::DataSource::Buddy || !target(f)) continue;
      const int b = layout_.buddy_of[static_cast<std::size_t>(f)];
      if (rank_ == b) {
        core::VersionStore& held = ward_store(f);
        send_versions(f, held, coord::chain_of(coord::records_of(held), *target(f)));
      }
      if (rank_ == f) recv_versions(b, own);
    }
    for (int w = 0; w < size_; ++w) {
      const int b = layout_.buddy_of[static_cast<std::size_t>(w)];
      if (rank_ == b) {
        const std::vector<std::uint64_t> held = ward_store(w).list();
        const std::uint64_t n = held.size();
        ok(polled::send(&n, 1, MPI_UINT64_T, w, kMoveList, world_));
        ok(polled::send(held.data(), static_cast<int>(n), MPI_UINT64_T, w, kMoveList, world_));
        recv_versions(w, ward_store(w));
      }
      if (rank_ == w) {
        std::uint64_t n = 0;
        ok(polled::recv(&n, 1, MPI_UINT64_T, b, kMoveList, world_, MPI_STATUS_IGNORE));
        std::vector<std::uint64_t> held(n);
        ok(polled::recv(held.data(), static_cast<int>(n), MPI_UINT64_T, b, kMoveList, world_, MPI_STATUS_IGNORE));
        // A survivor of a group rollback: every version it has (it goes on from the newest); a rank that rolls
        // back: the chain of its version; a rank that starts over: nothing.
        std::vector<std::uint64_t> wanted;
        if (survivor(w)) {
          for (const auto& r : coord::records_of(own)) wanted.push_back(r.version);
        } else if (target(w)) {
          wanted = coord::chain_of(coord::records_of(own), *target(w));
        }
        std::vector<std::uint64_t> missing;
        for (std::uint64_t v : wanted)
          if (std::find(held.begin(), held.end(), v) == held.end()) missing.push_back(v);
        send_versions(b, own, missing);
      }
    }
    trim_wards([&](int ward) -> std::optional<std::uint64_t> {
      if (survivor(ward)) return UINT64_MAX;  // keeps all
      return target(ward);
    });
    data_pending_ = false;  // a replacement holds its chain and its wards' now
  }

  // Where the ranks run after a repair (every rank of the repaired job, first in move_data). The MPI starts a
  // replacement where it has a free slot: after a node failure that is another node, maybe the one of its buddy
  // or of its ward, and a failure of that node would then lose both copies of a checkpoint. The layout stays the
  // job's (groups and buddies do not move); the lowest survivor says so, and the recovery's metrics record it.
  void check_placement(RecoveryRecord& rec) {
    std::vector<long> keys(static_cast<std::size_t>(size_));
    ok(polled::allgather(&node_key_, 1, MPI_LONG, keys.data(), 1, MPI_LONG, world_));
    rec.buddies_on_one_node = coord::buddies_sharing_a_node(layout_, keys);
    if (!lowest_survivor_) return;
    for (const auto& [r, b] : rec.buddies_on_one_node)
      std::fprintf(stderr, "reprise: warning: rank %d and its buddy rank %d now run on one node (a replacement was "
                   "started there): a failure of that node would lose both copies of rank %d's checkpoints. "
                   "REPRISE_DIR adds a level that survives it.\n", r, b, r);
  }

  // Per ward: the version whose chain it keeps (UINT64_MAX: all; none: nothing).
  void trim_wards(const std::function<std::optional<std::uint64_t>(int)>& keep_of) {
    std::lock_guard<std::mutex> lock(wards_mutex_);
    for (auto& [ward, s] : wards_) {
      const auto records = coord::records_of(*s);
      const auto version = keep_of(ward);
      if (version && *version == UINT64_MAX) continue;
      std::vector<std::uint64_t> keep;
      try {
        if (version) keep = coord::chain_of(records, *version);
      } catch (const RestoreError&) {
      }
      for (const auto& r : records)
        if (std::find(keep.begin(), keep.end(), r.version) == keep.end()) s->release(r.version);
    }
  }

  Config cfg_;
  coord::Layout layout_;
  int rank_ = 0, size_ = 0;
  MPI_Comm world_ = MPI_COMM_NULL, app_ = MPI_COMM_NULL, group_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL,
           ack_ = MPI_COMM_NULL, msg_ = MPI_COMM_NULL, payload_ = MPI_COMM_NULL, view_ = MPI_COMM_NULL,
           ctl_ = MPI_COMM_NULL;
  std::unique_ptr<CommState> comm_state_;  // reprise::Comm (after the layout is known)
  std::vector<coord::KillOrder> kills_;
  bool replacement_ = false;
  bool lowest_survivor_ = false;
  bool group_rollback_ = false;      // REPRISE_ROLLBACK=group
  bool trace_ = std::getenv("REPRISE_TRACE") != nullptr;  // diagnostics of failures and revocations on stderr
  RecoveryWatch* watch_ = nullptr;  // of the recovery under way (recover()), set by the watch itself
  void stage(const char* what) {
    if (watch_) watch_->stage(what);
  }
  std::uint32_t epoch_ = 0;          // recoveries of the job so far (group rollback)
  std::unique_ptr<gpu::Backend> device_;      // reprise::Comm's device buffers
  std::optional<bool> device_possible_;
  bool joined_group_recovery_ = false;  // a replacement of a group rollback: begin_recovery once Comm exists
  bool data_pending_ = false;  // a replacement whose recovery's data phase has not completed yet
  std::set<int> joined_rolled_back_;
  int joined_coordinator_ = -1;
  mutable std::optional<coord::Placement> placement_;  // placement_json(): hwloc, on first use
  MPI_Request* pending_group_ = nullptr;  // the group collective this rank waits for (wait_group)
  std::optional<coord::BarrierChoice> barrier_;  // the group barrier's kind, chosen with the group (nccl_group)
  std::unique_ptr<coord::NcclBarrier> nccl_;     // an NCCL group's communicator
  std::uint64_t kill_floor_ = 0;
  long node_key_ = 0;  // the node this process runs on (coord::own_node_key; for a replacement, where it started)
  std::vector<std::uint64_t> kill_floors_;  // per rank (see kill_floors())
  std::uint64_t current_step_ = 0;
  std::atomic<bool> down_{false};
  std::atomic<bool> stop_{false};
  std::mutex poll_mutex_;  // the progress thread's idle wait, cut short by hurry_progress()
  std::condition_variable poll_cv_;
  bool poll_soon_ = false;
  std::thread progress_;
  std::unique_ptr<core::VersionStore> local_;  // until make_store() wraps it
  coord::BuddyStore* store_ = nullptr;         // owned by the Runtime
  std::shared_ptr<Link> shipper_;
  coord::JobFloor floor_table_;                  // rank 0 (progress thread): each group's newest commit
  std::optional<std::uint64_t> floor_reported_;  // a group's first rank: the last commit reported
  std::atomic<std::int64_t> floor_received_{-1};  // the newest job floor from rank 0 (-1: none yet)
  std::mutex wards_mutex_;
  std::map<int, std::unique_ptr<core::VersionStore>> wards_;
  // Payload buffers of the versions held for wards, recycled: a version released goes back to the pool and the
  // next one is received into it, instead of into fresh memory first touched by the receive (a page fault per
  // 4 KiB on the progress thread: 74 ms for 32 MiB on this project's VMs).
  std::shared_ptr<core::BufferPool> ward_pool_ = std::make_shared<core::BufferPool>(8);
  std::atomic<std::uint64_t> ward_buffers_fresh_{0}, ward_buffers_reused_{0};
  std::function<void()> quiesce_;
  std::optional<std::uint64_t> target_;
  bool restarted_ = false;
  bool start_over_ = false;
  std::vector<RecoveryRecord> recoveries_;
  std::vector<MPI_Comm> retired_;  // communicators of earlier epochs
};

}  // namespace reprise::detail

namespace reprise {

struct MpiRuntime::Parts {
  Config config;
  std::unique_ptr<detail::Coordination> owned;
  detail::MpiCoordination* coord = nullptr;
};

MpiRuntime::MpiRuntime(MPI_Comm comm, Config config) : MpiRuntime([&] {
  Parts p;
  auto c = std::make_unique<detail::MpiCoordination>(comm, config);
  p.coord = c.get();
  p.owned = std::move(c);
  p.config = config;
  return p;
}()) {}

MpiRuntime::MpiRuntime(Parts parts) : Runtime(std::move(parts.config), std::move(parts.owned)), coord_(parts.coord) {
  // The channel counters of reprise::Comm are part of every version (restored with the application's data).
  detail::CommState& c = coord_->comm_state();
  protect("reprise.channels", c.region(), c.region_bytes(), MemorySpace::Host);
  // The message log snapshot and orphan record: a replacement replays from the log its predecessor checkpointed.
  protect_resizable("reprise.log", [&c](std::optional<std::size_t> bytes) { return c.locate_log_region(bytes); });
}

Comm& MpiRuntime::messages() {
  return coord_->comm_state().comm();
}

MpiRuntime::~MpiRuntime() = default;

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
  return coord_->layout().group_of[static_cast<std::size_t>(coord_->rank())];
}
int MpiRuntime::buddy() const {
  return coord_->layout().buddy_of[static_cast<std::size_t>(coord_->rank())];
}
void MpiRuntime::finish() {
  wait();
  coord_->finish();
}

void MpiRuntime::check(int mpi_result) {
  coord_->check(mpi_result);
}
void MpiRuntime::step(std::uint64_t s) {
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
int MpiRuntime::closest_gpu(MPI_Comm comm) {
  const coord::Layout layout = coord::discover_layout(comm, coord::TopologyConfig::from_env());
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return coord::locate(layout.local_index.at(static_cast<std::size_t>(rank)), gpu::cuda_pci_bus_ids()).gpu;
}

}  // namespace reprise
