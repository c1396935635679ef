// The group's side of a checkpoint: the commit agreement (MPI or NCCL), the job floor, waiting for the group
// while serving the protocol.
#include "mpi/group_commit.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "mpi/coordination.hpp"
#include "mpi/polled.hpp"
#include "mpi/version_wire.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {

// Log bound (Config::log_bound_bytes): at every log_check_every-th step the members of the group learn, in a
// group reduction, whether one of them wants a checkpoint (its log is over the bound, or another group asked).
// Every member calls step() with the same numbers, so they all decide alike.
bool GroupCommit::log_checkpoint_due(std::uint64_t s) {
  if (job_.cfg_.log_bound_bytes == 0 || s % job_.cfg_.log_check_every != 0) return false;
  int want = job_.comm_state_->checkpoint_wanted() ? 1 : 0;
  MPI_Request req = MPI_REQUEST_NULL;
  REPRISE_GROUP_COLLECTIVE(MPI_Iallreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MAX, job_.group_, &req), req,
                           "the group's log check");
  return want != 0;
}

// Said once, at the first agreement after the writer skipped, or at the job's end (MpiCoordination::finish) when
// it skipped only after the last agreement: a job must not end with versions missing from its files unsaid.
void GroupCommit::tell_skipping(const core::FilesProgress& files) {
  if (files.skipped_total == 0 || told_skipping_) return;
  told_skipping_ = true;
  std::fprintf(stderr,
               "reprise: rank %d: its REPRISE_DIR writes are slower than its checkpoints: versions that wait for "
               "the disk behind a newer full version are skipped there (%llu so far). A relaunch restarts from "
               "the newest version every rank has in files, which may be older than the newest commit; "
               "checkpoint less often or point REPRISE_DIR at a faster file system to have them all.\n",
               job_.rank_, static_cast<unsigned long long>(files.skipped_total));
}

// The group barrier: members agree on the newest version every member's buddy acknowledged (committed), and
// at a checkpoint (`capture`) they also exchange the channel counters of reprise::Comm in the same collective.
void GroupCommit::agree(std::optional<std::uint64_t> capture) {
  std::int64_t v = -1;
  if (const auto a = job_.store_->newest_acked_chain()) v = static_cast<std::int64_t>(*a);
  // How far this rank's files are (REPRISE_DIR written in the background): the group's floor report waits for the
  // slowest member's files, and says which versions some member skipped (a writer that lags) and which pin they
  // wrote (protocol/job_floor.hpp). w INT64_MAX: no such level; u INT64_MAX, s 0: nothing skipped; p 0: no pin
  // (else the pin + 1, its oldest po and newest pn over the members).
  const auto files = job_.store_->files_progress();
  std::int64_t w = files ? files->written : INT64_MAX;
  std::int64_t u =
      files ? static_cast<std::int64_t>(std::min<std::uint64_t>(files->skipped_oldest, INT64_MAX)) : INT64_MAX;
  std::int64_t s = files ? static_cast<std::int64_t>(files->skipped_newest) : 0;
  std::int64_t po = files && files->pin ? static_cast<std::int64_t>(*files->pin + 1) : 0, pn = po;
  if (files) tell_skipping(*files);
  std::vector<std::uint64_t> all;
  std::size_t stride = 0;
  const char* what = "the group's commit agreement";
  const bool nccl = nccl_group();
  if (nccl || capture) {  // an allgather (NCCL's collective, or MPI's at a checkpoint); the minimum is taken here
    std::vector<std::uint64_t> mine = capture ? job_.comm_state_->barrier_contribution() : std::vector<std::uint64_t>{};
    mine.insert(mine.begin(),
                {static_cast<std::uint64_t>(v), static_cast<std::uint64_t>(w), static_cast<std::uint64_t>(u),
                 static_cast<std::uint64_t>(s), static_cast<std::uint64_t>(po), static_cast<std::uint64_t>(pn)});
    stride = mine.size();
    if (nccl) {
      nccl_->start(mine);
      wait_nccl([this] { return nccl_->done(); });
      all = nccl_->result();
    } else {
      int gsize = 0;
      REPRISE_MPI_CHECK(MPI_Comm_size(job_.group_, &gsize));
      all.resize(stride * static_cast<std::size_t>(gsize));
      MPI_Request req = MPI_REQUEST_NULL;
      REPRISE_GROUP_COLLECTIVE(MPI_Iallgather(mine.data(), static_cast<int>(stride), MPI_UINT64_T, all.data(),
                                              static_cast<int>(stride), MPI_UINT64_T, job_.group_, &req),
                               req, what);
    }
    for (std::size_t i = 0; i * stride < all.size(); ++i) {
      v = std::min(v, static_cast<std::int64_t>(all[i * stride]));
      w = std::min(w, static_cast<std::int64_t>(all[i * stride + 1]));
      u = std::min(u, static_cast<std::int64_t>(all[i * stride + 2]));
      s = std::max(s, static_cast<std::int64_t>(all[i * stride + 3]));
      po = std::min(po, static_cast<std::int64_t>(all[i * stride + 4]));
      pn = std::max(pn, static_cast<std::int64_t>(all[i * stride + 5]));
    }
  } else {
    std::int64_t mins[6] = {v, w, u, -s, po, -pn};  // (a maximum as the minimum of its negation)
    MPI_Request req = MPI_REQUEST_NULL;
    REPRISE_GROUP_COLLECTIVE(MPI_Iallreduce(MPI_IN_PLACE, mins, 6, MPI_INT64_T, MPI_MIN, job_.group_, &req), req, what);
    v = mins[0];
    w = mins[1];
    u = mins[2];
    s = -mins[3];
    po = mins[4];
    pn = -mins[5];
  }
  files_written_ = w;
  files_skipped_oldest_ = static_cast<std::uint64_t>(u);
  files_skipped_newest_ = static_cast<std::uint64_t>(s);
  files_pin_oldest_ = static_cast<std::uint64_t>(po);
  files_pin_newest_ = static_cast<std::uint64_t>(pn);
  if (v >= 0) job_.store_->set_committed(static_cast<std::uint64_t>(v));
  report_commit();
  if (v >= 0) job_.comm_state_->committed(static_cast<std::uint64_t>(v));
  if (capture) {
    std::vector<const std::uint64_t*> member;
    for (std::size_t i = 0; i * stride < all.size(); ++i) member.push_back(&all[i * stride + 6]);
    job_.comm_state_->barrier_result(member, *capture);
  }
}

// At every checkpoint: the job floor last received applies to the message log's views and the files' pin mark (the
// store had it when it arrived: on_floor). At a group's first rank: its group's commit enters the groups'
// reduction tree when it is newer than the last one (after a repair every group reports again: the tree starts
// over).
void GroupCommit::report_commit() {
  if (!holds_job_floor()) return;
  if (const std::int64_t f = floor_received_; f >= 0) {
    job_.store_->set_job_floor(static_cast<std::uint64_t>(f));
    job_.comm_state_->job_floor(static_cast<std::uint64_t>(f));  // the views it allows go in committed(), below
    if (job_.cfg_.files_skip) job_.store_->set_pin_mark(mark_received_);  // (Config::files_skip)
  }
  // Skipping holds versions in memory until the floor passes them: over the memory budget the writer skips nothing,
  // and the checkpoints wait for the disk instead (said once, when it had skipped).
  if (job_.cfg_.files_skip && files_written_ != INT64_MAX) {
    const bool over = job_.over_budget();
    job_.store_->pause_skips(over);
    if (over && told_skipping_ && !told_skips_paused_) {
      told_skips_paused_ = true;
      std::fprintf(stderr,
                   "reprise: rank %d: warning: holds more than its memory budget of %zu MiB while its REPRISE_DIR "
                   "writes lag: its file writer skips no version while it does, so its checkpoints wait for the "
                   "disk (the versions skipped stay in memory until every rank has a newer one in files); raise "
                   "REPRISE_MEMORY_BUDGET or point REPRISE_DIR at a faster file system\n",
                   job_.rank_, static_cast<std::size_t>(job_.budget_) >> 20);
    }
  }
  if (!first_of_group_) return;
  auto c = job_.store_->committed();
  if (!c) return;
  // With files written in the background, the group reports no more than what all its members have in files, with
  // what they skipped and the pin they wrote: the job floor is then a version every rank can relaunch from, and no
  // rank releases a file another rank still needs.
  protocol::FloorSummary own{true, *c, -1, *c};
  if (files_written_ != INT64_MAX) {
    if (files_written_ < 0) return;
    own.version = std::min(*c, static_cast<std::uint64_t>(files_written_));
    own.skipped_oldest = files_skipped_oldest_;
    own.skipped_newest = files_skipped_newest_;
    own.pin_oldest = files_pin_oldest_;
    own.pin_newest = files_pin_newest_;
  }
  FloorStep step;
  {
    const std::lock_guard<std::mutex> lock(floor_mutex_);
    step = {floor_node_.own(own), floor_node_.group(), floor_parent_rank_};
  }
  const MPI_Comm data = job_.data_;
  try {
    floor_out(step);
  } catch (const PeerFailure&) {
    if (data == job_.data_) job_.link_down("job floor report");  // the next runtime call recovers
  }
}

// What a report made this group's node do: its subtree's summary goes to the parent group's first rank as
// {group, sequence number, complete, version, group named}; at the root (group 0, whose first rank is rank 0) a
// floor that rose goes down the tree to every rank, and a group that holds it back is named once.
void GroupCommit::floor_out(const FloorStep& step) {
  const protocol::FloorNode::Out& out = step.out;
  if (out.up) {
    const protocol::FloorSummary& u = *out.up;
    const std::uint64_t report[kFloorReportWords] = {static_cast<std::uint64_t>(step.group),
                                                     out.seq,
                                                     u.complete ? 1u : 0u,
                                                     u.version,
                                                     static_cast<std::uint64_t>(u.group),
                                                     u.committed,
                                                     u.skipped_oldest,
                                                     u.skipped_newest,
                                                     u.pin_oldest,
                                                     u.pin_newest};
    REPRISE_MPI_CHECK(
        polled::send(report, kFloorReportWords, MPI_UINT64_T, step.parent_rank, kFloorReport, job_.data_));
  }
  std::optional<protocol::FloorNode::Lag> lag;
  if (job_.rank_ == 0) {
    const std::lock_guard<std::mutex> lock(floor_mutex_);
    lag = floor_node_.lag();
  }
  if (lag) {
    // (With files written behind the commit, a group reports the oldest of its commit and its members' files.)
    const bool files = files_written_ != INT64_MAX;
    const std::string what =
        !lag->committed ? std::string(files ? "it has nothing committed in every member's files yet"
                                            : "it has committed nothing yet")
        : files
            ? "the newest version it committed and has in every member's files is " + std::to_string(*lag->committed)
            : "its newest commit is version " + std::to_string(*lag->committed);
    std::fprintf(stderr,
                 "reprise: rank %d: group %d (%s) holds the job floor back: %s, while group 0 committed %u times "
                 "since the floor last rose. Every rank keeps its versions from there on (%s) until that group "
                 "%s.\n",
                 job_.rank_, lag->group, ranks_phrase(job_.layout_.members_of_group(lag->group)).c_str(), what.c_str(),
                 lag->rounds,
                 job_.group_rollback_    ? "its files"
                 : job_.cfg_.dir.empty() ? "memory"
                                         : "memory and files",
                 files ? "commits again and its files catch up" : "commits again");
  }
  if (!out.floor) return;
  if (job_.trace_)
    std::fprintf(stderr, "reprise: rank %d: job floor %llu\n", job_.rank_, static_cast<unsigned long long>(*out.floor));
  on_floor(*out.floor, out.mark);
}

// Every rank's progress thread: a floor from its parent in the tree (protocol::floor_children), passed on to its
// children and applied to the store now: the chains before it go here and at the buddy without waiting for the
// next checkpoint (with every checkpoint forced by the log bound, that wait kept about one more version on both
// sides). The message log's views and the writers' mark take it at the next agreement (report_commit). (A floor
// lost with a failed rank only leaves its subtree with an older one, which keeps more versions, never fewer; after
// the repair every group reports again.)
void GroupCommit::on_floor(std::uint64_t floor, std::uint64_t mark) {
  mark_received_ = std::max<std::uint64_t>(mark_received_, mark);  // (before the floor: the main thread reads both)
  floor_received_ = static_cast<std::int64_t>(floor);
  const std::uint64_t both[2] = {floor, mark};
  for (int r : protocol::floor_children(job_.rank_, job_.size_))
    REPRISE_MPI_CHECK(polled::send(both, 2, MPI_UINT64_T, r, kFloor, job_.data_));
  const std::lock_guard<std::mutex> lock(job_.store_mutex_);  // (the Runtime may be destroying it: release_store)
  if (job_.store_) job_.store_->set_job_floor(floor);
}

// A group's first rank, on the progress thread: a child group's report.
void GroupCommit::on_floor_report(int src) {
  std::uint64_t report[kFloorReportWords] = {};
  REPRISE_MPI_CHECK(
      polled::recv(report, kFloorReportWords, MPI_UINT64_T, src, kFloorReport, job_.data_, MPI_STATUS_IGNORE));
  protocol::FloorSummary s{report[2] != 0, report[3], static_cast<int>(report[4])};
  s.committed = report[5];
  s.skipped_oldest = report[6];
  s.skipped_newest = report[7];
  s.pin_oldest = report[8];
  s.pin_newest = report[9];
  FloorStep step;
  {
    const std::lock_guard<std::mutex> lock(floor_mutex_);
    step = {floor_node_.report(static_cast<int>(report[0]), report[1], s), floor_node_.group(), floor_parent_rank_};
  }
  floor_out(step);
}

// Whether this group's barrier runs on NCCL (Config::group_barrier). Chosen with the group at its first barrier
// after the group communicator was (re)built: the members' devices are gathered over MPI, every member applies
// protocol::choose_group_barrier to the same data, and an NCCL group creates its communicator (unique id from its
// first member over MPI).
bool GroupCommit::nccl_group() {
  if (job_.cfg_.group_barrier == GroupBarrierKind::Mpi) return false;
  if (!barrier_) {
    int gsize = 0, grank = 0;
    REPRISE_MPI_CHECK(MPI_Comm_size(job_.group_, &gsize));
    REPRISE_MPI_CHECK(MPI_Comm_rank(job_.group_, &grank));
    struct Record {
      std::uint64_t host;
      char gpu[40];
    } mine{protocol::host_identity(), {}};
    const std::string bus = gpu::current_gpu_bus_id();
    std::strncpy(mine.gpu, bus.c_str(), sizeof mine.gpu - 1);
    std::vector<Record> records(static_cast<std::size_t>(gsize));
    MPI_Request req = MPI_REQUEST_NULL;
    REPRISE_GROUP_COLLECTIVE(
        MPI_Iallgather(&mine, sizeof(Record), MPI_BYTE, records.data(), sizeof(Record), MPI_BYTE, job_.group_, &req),
        req, "the group's barrier choice");
    std::vector<protocol::MemberDevice> devices;
    for (const Record& r : records) devices.push_back({r.host, std::string(r.gpu, strnlen(r.gpu, sizeof r.gpu))});
    const std::vector<int> members = job_.layout_.members_of_group(job_.layout_.group_of(job_.rank_));
    barrier_ = protocol::choose_group_barrier(job_.cfg_.group_barrier, gpu::nccl_problem(), members, devices);
    if (barrier_->kind == GroupBarrierKind::Nccl) {
      gpu::NcclId id{};
      if (grank == 0) id = gpu::nccl_unique_id();
      REPRISE_GROUP_COLLECTIVE(MPI_Ibcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, job_.group_, &req), req,
                               "the group's NCCL set-up");
      nccl_ = std::make_unique<gpu::NcclBarrier>(id, gsize, grank);
      wait_nccl([this] { return nccl_->ready(); });
    }
    if (grank == 0 && (job_.trace_ || barrier_->kind != GroupBarrierKind::Nccl))
      std::fprintf(stderr, "reprise: group %d barrier: %s (%s)\n", job_.layout_.group_of(job_.rank_),
                   barrier_->kind == GroupBarrierKind::Nccl ? "NCCL" : "MPI", barrier_->reason.c_str());
  }
  return barrier_->kind == GroupBarrierKind::Nccl;
}

// Polls a step of the NCCL barrier while serving the protocol, as wait_group does. NCCL never ends a collective
// whose member died: when the recovery of a failure takes this rank's group down (job_.recover() throws), the NCCL
// communicator is aborted first. NCCL may see a dead peer (ncclRemoteError) before ULFM does: the failure
// detector gets a few seconds to confirm it before the error is reported as such.
void GroupCommit::wait_nccl(const std::function<bool()>& finished) {
  for (unsigned spin = 0;; ++spin) {
    try {
      if (!nccl_) throw Error("the group's NCCL barrier was dropped by a repair during the barrier");
      if (finished()) return;
    } catch (const DeviceError&) {
      for (int i = 0; i < 1000 && !job_.down_; ++i) {
        job_.comm_state_->poll_control();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!job_.down_) throw;
      reset_barrier();
    }
    if (job_.down_) {
      try {
        job_.recover("a failure was detected by the runtime's background threads");
      } catch (...) {
        reset_barrier();
        throw;
      }
    }
    job_.comm_state_->poll_control();
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void GroupCommit::reset_barrier() {
  nccl_.reset();  // aborts the NCCL communicator (never waits for the other members)
  barrier_.reset();
}

// Completes a collective of the group whose start returned `started`: waits (wait_group), reads libnbc's
// MPI_ERR_OTHER for a lost member as the failure it is (polled::collective_result), and recovers from a failure
// (`what` names the collective in the message, `at` the call). Called by REPRISE_GROUP_COLLECTIVE(call, req, what).
void GroupCommit::group_collective(int started, MPI_Request& req, const char* what, const CallSite& at) {
  const int rc = polled::collective_result(started == MPI_SUCCESS ? wait_group(req) : started, job_.group_);
  if (is_failure(rc) || job_.down_) job_.recover(std::string(what) + " failed: " + mpi_error(rc));
  if (rc != MPI_SUCCESS) throw Error(std::string("MPI error in ") + what + ": " + describe(rc, at));
}

// Waits for a collective of the group while serving the protocol (a survivor may be the restart coordinator, or
// owe replays) and noticing failures: a survivor of a group rollback goes on waiting after the repair (its
// group is intact); elsewhere the recovery cancels the collective (revokes the group's communicator).
int GroupCommit::wait_group(MPI_Request& req) {
  pending_ = &req;
  struct Clear {
    MPI_Request** p;
    ~Clear() { *p = nullptr; }
  } clear{&pending_};
  auto since = std::chrono::steady_clock::now();
  for (unsigned spin = 0;; ++spin) {
    if (job_.trace_ && std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
      since = std::chrono::steady_clock::now();
      std::fprintf(stderr, "reprise: rank %d: waiting for the group: %s\n", job_.rank_,
                   job_.comm_state_->debug_state().c_str());
    }
    int flag = 0;
    const int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (job_.down_) job_.recover("a failure was detected by the runtime's background threads");
    job_.comm_state_->poll_control();
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A recovery abandons the group collective this rank waits for (its group is rebuilt).
void GroupCommit::cancel_wait() {
  if (!pending_) return;
  revoke(job_.group_);
  REPRISE_MPI_DISCARD(MPI_Wait(pending_, MPI_STATUS_IGNORE));  // (revoked: it ends, with an error)
  pending_ = nullptr;
}

bool GroupCommit::holds_job_floor() const {
  return !job_.group_rollback_ || !job_.cfg_.dir.empty();
}

// The groups' reduction tree starts over: this rank's group, whether it is the group's first rank, and the first
// rank of the parent group (one pass over the job's layout, at the start and at each repair).
void GroupCommit::new_communicators(int groups) {
  const int group = job_.layout_.group_of(job_.rank_);
  const protocol::GroupTreeRanks tree = protocol::group_tree_ranks(job_.layout_.group_map(), job_.rank_);
  const std::lock_guard<std::mutex> lock(floor_mutex_);
  floor_node_.reset(group, groups);
  first_of_group_ = tree.first;
  floor_parent_rank_ = tree.parent;
}

}  // namespace reprise::mpi
