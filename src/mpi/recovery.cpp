// Relaunch from files, and online recovery (ULFM): repair, the recovery plan, replacements, moving checkpoints.
#include "mpi/recovery.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "core/format.hpp"
#include "mpi/coordination.hpp"
#include "mpi/layout.hpp"
#include "mpi/polled.hpp"
#include "mpi/version_wire.hpp"
#include "protocol/placement.hpp"
#include "protocol/recovery_packet.hpp"
#include "reprise/errors.hpp"

extern char** environ;

namespace reprise::mpi {
namespace {

// `more` joins the ranks of `into`, which stays sorted, each rank once.
template <class Ranks>
void join_ranks(std::vector<int>& into, const Ranks& more) {
  into.insert(into.end(), more.begin(), more.end());
  std::sort(into.begin(), into.end());
  into.erase(std::unique(into.begin(), into.end()), into.end());
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

// MPI_Comm_spawn's info giving the replacements REPRISE_REPLACING=`value` in their environment (protocol::
// replacing_env): the key is "PMIX_ENVAR" in Open MPI 5 and later (which warns about its older name), "env" in
// Open MPI 4; an MPI that knows neither ignores it, and its replacements choose their GPU as a first start would.
[[maybe_unused]] MPI_Info replacement_info(const std::string& value) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  REPRISE_MPI_CHECK(MPI_Get_library_version(version, &len));
  const char* at = std::strstr(version, "Open MPI v");
  const bool pmix = at && std::atoi(at + std::strlen("Open MPI v")) >= 5;
  MPI_Info info = MPI_INFO_NULL;
  REPRISE_MPI_CHECK(MPI_Info_create(&info));
  REPRISE_MPI_CHECK(MPI_Info_set(info, pmix ? "PMIX_ENVAR" : "env", ("REPRISE_REPLACING=" + value).c_str()));
  return info;
}

// Every member's `mine` (any length, also none), concatenated in rank order at every member: an allgatherv
// whose counts are never gathered (an exclusive scan places each contribution, an allreduce sums the words into
// place), so a rank holds only what was contributed: sized by the contributors, not by the communicator.
std::vector<std::uint64_t> gather_words(MPI_Comm comm, const std::vector<std::uint64_t>& mine) {
  int me = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(comm, &me));
  std::uint64_t count = mine.size(), offset = 0, total = 0;
  REPRISE_MPI_CHECK(polled::exscan(&count, &offset, 1, MPI_UINT64_T, MPI_SUM, comm));
  if (me == 0) offset = 0;  // (MPI_Exscan leaves rank 0's result undefined)
  REPRISE_MPI_CHECK(polled::allreduce(&count, &total, 1, MPI_UINT64_T, MPI_SUM, comm));
  if (total > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw Error("recovery: " + std::to_string(total) + " words to exchange, more than one MPI call carries");
  std::vector<std::uint64_t> all(static_cast<std::size_t>(total), 0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(offset));
  if (total > 0)
    REPRISE_MPI_CHECK(
        polled::allreduce(MPI_IN_PLACE, all.data(), static_cast<int>(total), MPI_UINT64_T, MPI_SUM, comm));
  return all;
}

}  // namespace

// What this survivor contributes to a recovery plan: its own records, and those it holds for its wards, of the
// ranks of `groups` (the groups that roll back; every rank when null).
std::vector<std::uint64_t> Recovery::my_records(const std::vector<int>& files_of, const std::set<int>* groups) {
  const auto wanted = [&](int r) { return !groups || groups->count(job_.layout_.group_of(r)) > 0; };
  std::vector<std::uint64_t> out;
  core::VersionStore& own = job_.store_ ? job_.store_->local() : *job_.local_;
  if (wanted(job_.rank_))
    protocol::append_records(out, job_.rank_, protocol::records_of(own), protocol::RecordSource::Own);
  job_.buddy_.for_each_ward([&](int ward, core::VersionStore& s) {
    if (wanted(ward)) protocol::append_records(out, ward, protocol::records_of(s), protocol::RecordSource::AtBuddy);
  });
  // The files of `files_of` (failed ranks, interrupted replacements), read by the lowest survivor where it reaches
  // them (a shared file system, or the rank's node): a folder that is not there (node-local storage elsewhere)
  // proves nothing.
  if (!job_.cfg_.dir.empty() && lowest_survivor_)
    for (int f : files_of) {
      std::error_code absent;
      if (!std::filesystem::is_directory(core::rank_folder(job_.cfg_.dir, f), absent)) continue;
      protocol::append_records(out, f, protocol::records_of(*core::make_directory_store(job_.cfg_.dir, f)),
                               protocol::RecordSource::FilesRead);
    }
  return out;
}

// A launch on a REPRISE_DIR that holds files: every rank restarts from the newest version all of them hold in
// files, or, when the files hold none (the previous job ended before a version reached every rank's files, which
// its asynchronous writes make possible), the job starts from the beginning and sets the previous job's files
// aside (DIR/previous-<k>), so that no version of the old run mixes with the new one and nothing is deleted.
// DIR/job.reprise records the rank count: a launch with another count is refused, since each rank's data belong
// to the decomposition that wrote them.
void Recovery::agree_on_restart() {
  if (job_.cfg_.dir.empty()) return;
  const std::string& dir = job_.cfg_.dir;
  // Rank 0's record counts (DIR may be node-local); the set-aside index is free at every rank.
  std::int64_t job[2] = {-3, core::next_set_aside(dir, job_.rank_)};  // {recorded ranks (-1: none, -2: damaged), k}
  std::string damaged;
  if (job_.rank_ == 0) {
    try {
      const auto n = core::read_job_ranks(dir);
      job[0] = n ? *n : -1;
    } catch (const Error& e) {
      job[0] = -2;
      damaged = e.what();
    }
  }
  REPRISE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, job, 2, MPI_INT64_T, MPI_MAX, job_.world_));
  const std::int64_t recorded = job[0];
  if (recorded == -2)
    throw RestoreError(
        "relaunch from " + dir + ": " +
        (job_.rank_ == 0 ? damaged : std::string("rank 0 found its job record damaged (see its message)")));
  if (recorded > 0 && recorded != job_.size_) {
    // This job's ranks beyond the recorded count made empty folders: remove them (only if empty).
    std::error_code ignored;
    if (job_.rank_ >= recorded) std::filesystem::remove(core::rank_folder(dir, job_.rank_), ignored);
    REPRISE_MPI_CHECK(
        MPI_Barrier(job_.world_));  // every rank refuses: none aborts the job before the others cleaned up
    throw RestoreError("relaunch from " + dir + ": its files were written by a job of " + std::to_string(recorded) +
                       " ranks, and this job has " + std::to_string(job_.size_) +
                       " (each rank's data belong to the "
                       "decomposition that wrote them). Nothing was changed; relaunch with " +
                       std::to_string(recorded) + " ranks, or set REPRISE_DIR to another directory to start afresh.");
  }
  const std::vector<std::uint64_t> mine = [&] {
    std::vector<std::uint64_t> out;
    protocol::append_records(out, job_.rank_, protocol::records_of(*job_.local_), protocol::RecordSource::Own);
    return out;
  }();
  const auto all = gather_words(job_.world_, mine);
  auto holdings = protocol::holdings_from(all, job_.size_);
  std::vector<int> missing;
  for (int r = 0; r < job_.size_; ++r)
    if (protocol::complete_versions(protocol::holdings_of(holdings, r).own).empty()) missing.push_back(r);
  if (static_cast<int>(missing.size()) == job_.size_) {  // a fresh directory, or one whose job wrote nothing
    if (job_.rank_ == 0 && recorded < 0) core::write_job_ranks(dir, job_.size_);
    if (recorded < 0) return;
    // A job ran here (its record says so) and died before its first version reached any rank's files
    // (written behind the commit, after the buddy's acknowledgement): a start from the beginning, said as such.
    // Versions without the rest of their chain are set aside, so that none of the old run mixes with the new one.
    bool partial = false;
    for (int r = 0; r < job_.size_; ++r) partial = partial || !protocol::holdings_of(holdings, r).own.empty();
    if (partial) core::set_aside(dir, job_.rank_, static_cast<int>(job[1]));
    const std::string moved =
        partial ? "; the previous job's incomplete files were moved to " + dir + "/previous-" + std::to_string(job[1])
                : std::string();
    if (job_.rank_ == 0)
      std::fprintf(stderr,
                   "reprise: relaunch from %s: no rank holds a complete version (the previous job ended before its "
                   "first version reached the files): the job starts from the beginning%s\n",
                   dir.c_str(), moved.c_str());
    return;
  }
  std::string why;
  if (!missing.empty()) {
    why = "rank" + std::string(missing.size() > 1 ? "s " : " ") + protocol::list_ranks(missing) +
          (missing.size() > 1 ? " hold" : " holds") + " no complete version";
  } else {
    try {
      const protocol::RecoveryPlan plan = protocol::plan_recovery(job_.layout_, {}, holdings, true);
      target_ = plan.version;
      restarted_ = true;
      if (job_.rank_ == 0 && recorded < 0) core::write_job_ranks(dir, job_.size_);
      // Versions newer than the restart point (a rank's group had committed more before the job died) are
      // recomputed by this run; left in place, a fall-back to files before the new ones are written could
      // restore them. Set aside, like the rest of an old run.
      const auto newer = core::set_aside_newer(dir, job_.rank_, static_cast<int>(job[1]), plan.version);
      if (!newer.empty())
        std::fprintf(stderr,
                     "reprise: rank %d: relaunch from version %llu: its version%s %s of the previous job "
                     "moved to %s/previous-%lld (this run recomputes them)\n",
                     job_.rank_, static_cast<unsigned long long>(plan.version), newer.size() > 1 ? "s" : "",
                     protocol::list_numbers(newer).c_str(), dir.c_str(), static_cast<long long>(job[1]));
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
  core::set_aside(dir, job_.rank_, static_cast<int>(job[1]));
  if (job_.rank_ == 0)
    std::fprintf(stderr,
                 "reprise: relaunch from %s: %s, so no version restarts every rank (the previous job ended "
                 "before one reached every rank's files): the job starts from the beginning; the previous job's "
                 "files were moved to %s/previous-%lld\n",
                 dir.c_str(), why.c_str(), dir.c_str(), static_cast<long long>(job[1]));
}

// The stages are in recovery.hpp. Replacements of an abandoned attempt see their merge fail and exit.
void Recovery::recover(const std::string& why) {
#if !REPRISE_HAVE_ULFM
  job_.link_down("recover");
  throw UnrecoverableFailure("rank " + std::to_string(job_.rank_) + ": " + why +
                             "; this MPI has no ULFM, so the job cannot be repaired. Run through "
                             "scripts/mpirun.sh, which uses an MPI whose ULFM works.");
#else
  if (!job_.layout_.has_buddies()) {  // one node, files only (MpiCoordination::adopt said so at the start)
    job_.link_down("recover");
    throw UnrecoverableFailure(
        "rank " + std::to_string(job_.rank_) + ": " + why +
        "; the job's ranks all run on one node, so no rank has a buddy and its checkpoints are in files only: a "
        "failed rank cannot be recovered online. The files in " +
        job_.cfg_.dir +
        " were left intact: run the job again with the same REPRISE_DIR and it restarts from the newest version "
        "every rank has in files");
  }
  const auto t0 = Clock::now();
  // One watch for a recovery and the new ones that interrupt it (recover() is re-entered from inside).
  std::optional<RecoveryWatch> watch;
  if (!watch_ && (job_.cfg_.recovery_watch_ms > 0 || job_.cfg_.recovery_timeout_s > 0))
    watch.emplace(watch_, "rank " + std::to_string(job_.rank_), std::chrono::milliseconds(job_.cfg_.recovery_watch_ms),
                  std::chrono::seconds(job_.cfg_.recovery_timeout_s));
  stall_if_told(protocol::KillPoint::Stall, "in the recovery");  // REPRISE_KILL: a process hung in the recovery
  stage("stopping the background threads");
  job_.link_down("recover");
  job_.buddy_.stop();
  if (job_.quiesce_) job_.quiesce_();
  StartFailures starts;
  MPI_Comm base = job_.world_;
  for (Attempt a;; base = a.shrunk, ++a.number) {
    shrink_and_agree(base, why, a);
    if (plan_recovery(a) && replace(a, starts) && merge(a, starts)) return finish_repair(a, t0);
  }
#endif
}

#if REPRISE_HAVE_ULFM
// Shrink is uniform: every survivor gets the same communicator and sees the same failed ranks.
void Recovery::shrink_and_agree(MPI_Comm base, const std::string& why, Attempt& a) {
  const int number = a.number;
  a = Attempt();
  a.number = number;
  stage("in MPIX_Comm_shrink");
  if (const int rc = MPIX_Comm_shrink(base, &a.shrunk); rc != MPI_SUCCESS)
    throw UnrecoverableFailure("rank " + std::to_string(job_.rank_) + ": MPIX_Comm_shrink failed during recovery: " +
                               describe(rc, REPRISE_MPI_SITE(MPIX_Comm_shrink(base, &a.shrunk))));
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(a.shrunk, MPI_ERRORS_RETURN));
  job_.retired_.push_back(a.shrunk);
  a.failed = failed_ranks(a.shrunk);
  // Empty: a communicator was revoked, or an agreement failed, with every process alive (seen with Open MPI 5.0.7
  // under load). Spawning nobody fails, so retrying would spin forever: stop the job with a clear error instead
  // (its committed files stay as they are).
  if (a.failed.empty())
    throw UnrecoverableFailure("rank " + std::to_string(job_.rank_) + ": " + why +
                               ", yet no process of the job "
                               "failed (the MPI library reported a revoked communicator or a failed agreement "
                               "with every process alive). Reprise cannot tell what was lost, so the job stops "
                               "here; files already written were left intact: rerun the job (from REPRISE_DIR "
                               "if one was set).");
  std::fprintf(stderr, "reprise: rank %d: %s; failed %s; recovering (attempt %d)\n", job_.rank_, why.c_str(),
               ranks_phrase(a.failed).c_str(), a.number);
  if (job_.should_die(job_.current_step_, protocol::KillPoint::Recovery)) job_.die("recovery", job_.current_step_);
}

// What the survivors hold, gathered; the plan every survivor computes from the same data; their agreement that
// no other process failed meanwhile (false: a new attempt). An unrecoverable plan ends the job at every survivor.
bool Recovery::plan_recovery(Attempt& a) {
  std::exception_ptr plan_error;
  a.max_step = job_.current_step_;
  int flag = 1;
  try {
    stage("gathering the survivors' checkpoints (shrunk communicator)");
    REPRISE_MPI_CHECK(polled::allreduce(MPI_IN_PLACE, &a.max_step, 1, MPI_UINT64_T, MPI_MAX, a.shrunk));
    // Groups with a member still re-executing after an earlier group rollback, or still inside the recovery
    // that rolled it back (this failure interrupted it), roll back again: the orphan and duplicate limits it
    // re-executes under are only valid in the recovery that computed them (cleared, it would send again what
    // its receivers already delivered, and nobody would receive it). A replacement whose data phase was
    // interrupted holds only part of its checkpoints and of its wards' (RankHoldings::replacing). Only such
    // ranks speak in this first round.
    std::set<int> also, replacing;
    const bool behind = data_pending_ || (job_.comm_state_ ? job_.comm_state_->reexecuting() : joined_group_recovery_);
    const auto flags = gather_words(
        a.shrunk, behind ? std::vector<std::uint64_t>{static_cast<std::uint64_t>(job_.rank_), data_pending_ ? 1u : 0u}
                         : std::vector<std::uint64_t>{});
    for (std::size_t i = 0; i + 1 < flags.size(); i += 2) {
      if (flags[i] >= static_cast<std::uint64_t>(job_.size_)) continue;
      const std::size_t r = static_cast<std::size_t>(flags[i]);
      if (job_.group_rollback_) also.insert(job_.layout_.group_of(static_cast<int>(r)));
      if (flags[i + 1]) replacing.insert(static_cast<int>(r));
    }
    // Then the version records of the ranks that roll back (their groups', or every rank's without group
    // rollback), from their own stores and their buddies': what the plan reads (protocol::rolled_back_groups).
    const std::set<int> groups = protocol::rolled_back_groups(job_.layout_, a.failed, also);
    // The files of the failed ranks are read, and those of the interrupted replacements: their own stores may
    // hold nothing yet, and their files say what the ranks they replace left there.
    std::vector<int> files_of = a.failed;
    join_ranks(files_of, replacing);
    auto holdings = protocol::holdings_from(
        gather_words(a.shrunk, my_records(files_of, job_.group_rollback_ ? &groups : nullptr)), job_.size_);
    for (int r : replacing) holdings[r].replacing = true;
    try {
      a.plan = job_.group_rollback_
                   ? protocol::plan_group_recovery(job_.layout_, a.failed, holdings, !job_.cfg_.dir.empty(), also)
                   : protocol::plan_recovery(job_.layout_, a.failed, holdings, !job_.cfg_.dir.empty());
    } catch (const UnrecoverableFailure&) {
      plan_error = std::current_exception();
    }
    if (!plan_error) plan_error = check_repeats(a);
  } catch (const PeerFailure&) {
    flag = 0;
  }
  stage("agreeing on the recovery plan");
  if (!agreed(a.shrunk, flag)) return false;
  if (plan_error) std::rethrow_exception(plan_error);  // every survivor decided on the same data
  return true;
}

// A failed rank that failed before, after restoring the version it restores now: its count goes up, else it starts
// at 1. The counts are reduced over the survivors (a replacement has none), so every survivor decides alike.
std::exception_ptr Recovery::check_repeats(Attempt& a) {
  const auto version_of = [&](int r) {
    if (a.plan.from_start || (a.plan.partial && a.plan.starts_over[r])) return std::uint64_t{UINT64_MAX};
    return a.plan.partial ? a.plan.version_of[r] : a.plan.version;
  };
  std::vector<std::uint64_t> counts;
  for (int r : a.failed) {
    const auto it = repeats_.find(r);
    counts.push_back(it != repeats_.end() && it->second.version == version_of(r) ? it->second.count + 1 : 1);
  }
  if (!counts.empty())
    REPRISE_MPI_CHECK(polled::allreduce(MPI_IN_PLACE, counts.data(), static_cast<int>(counts.size()), MPI_UINT64_T,
                                        MPI_MAX, a.shrunk));
  a.repeats.clear();
  for (std::size_t i = 0; i < a.failed.size(); ++i) a.repeats.emplace_back(version_of(a.failed[i]), counts[i]);
  const unsigned limit = job_.cfg_.max_repeated_failures;
  for (std::size_t i = 0; i < a.failed.size(); ++i) {
    if (limit == 0 || counts[i] < limit) continue;
    const std::uint64_t v = version_of(a.failed[i]);
    return std::make_exception_ptr(UnrecoverableFailure(
        "rank " + std::to_string(a.failed[i]) + " failed " + std::to_string(counts[i]) + " times in a row after " +
        (v == UINT64_MAX ? std::string("starting over") : "restoring version " + std::to_string(v)) +
        " (its group committed nothing newer in between): such a failure follows the program (a bug, bad input, "
        "memory it runs out of), not a process or a node, and recovering again would repeat it. The job stops; "
        "its committed checkpoints are kept: find the cause in that rank's output, then run the job again (with "
        "REPRISE_DIR it restarts from its files). REPRISE_MAX_REPEATED_FAILURES=" +
        std::to_string(limit) + " (0: no limit)"));
  }
  return nullptr;
}

// The replacements: spares while enough are left (take_spares), else spawned with this program's command line
// (they run join_as_replacement()); false when that failed somewhere (a new attempt; the same at every survivor).
void Recovery::stall_if_told(protocol::KillPoint point, const char* where) const {
  if (!job_.should_die(job_.current_step_, point)) return;
  std::fprintf(stderr, "reprise: rank %d: REPRISE_KILL: stalls %s at step %llu\n", job_.rank_, where,
               static_cast<unsigned long long>(job_.current_step_));
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

bool Recovery::replace(Attempt& a, StartFailures& starts) {
  if (const std::optional<bool> taken = take_spares(a)) return *taken;
  if (!job_.cfg_.spawn)  // (the same configuration at every survivor: every one stops here)
    throw UnrecoverableFailure(
        "rank " + std::to_string(job_.rank_) + ": the failure of " + ranks_phrase(a.failed) + " needs " +
        std::to_string(a.failed.size()) + " replacement process" + (a.failed.size() > 1 ? "es" : "") +
        ", no spare process is left for " + (a.failed.size() > 1 ? "them" : "it") + " (REPRISE_SPARES=" +
        std::to_string(job_.cfg_.spares) + (job_.cfg_.spares > 0 ? ": too few left after the earlier recoveries" : "") +
        "), and REPRISE_SPAWN=0 forbids starting new ones, so the job stops here. Files already written were left "
        "intact: relaunch the job (from REPRISE_DIR if one was set) with more spares (scripts/mpirun.sh -n N "
        "--spares K), or allow spawning (REPRISE_SPAWN=1)");
  const std::vector<std::string> args = own_command_line();
  std::vector<char*> argv;
  for (std::size_t i = 1; i < args.size(); ++i) argv.push_back(const_cast<char*>(args[i].c_str()));
  argv.push_back(nullptr);
  std::vector<int> errcodes(a.failed.size());
  stage("in MPI_Comm_spawn (replacements)");
  stall_if_told(protocol::KillPoint::StallSpawn, "before MPI_Comm_spawn");  // REPRISE_KILL: the others wait in it
  // (replacement i replaces failed[i]: join_as_replacement; its GPU is the one of that rank's local index)
  MPI_Info info = replacement_info(protocol::replacing_env(a.plan.failed, job_.layout_));
  // (its result is agreed on below: a failed spawn is retried or ends the job with a clear error)
  const int rc = MPI_Comm_spawn(executable().c_str(), argv.data(), static_cast<int>(a.failed.size()), info, 0, a.shrunk,
                                &a.inter, errcodes.data());
  REPRISE_MPI_CHECK(MPI_Info_free(&info));
  const std::optional<bool> spawned = agreement(a.shrunk, rc == MPI_SUCCESS);
  if (!spawned || !*spawned) {
    if (rc == MPI_SUCCESS) revoke(a.inter);
    // No process failed and a spawn failed: the same at every survivor.
    if (spawned)
      start_failed(starts, a.failed,
                   "MPI_Comm_spawn failed: " + (rc != MPI_SUCCESS ? mpi_error(rc) : "at another rank"));
    return false;
  }
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(a.inter, MPI_ERRORS_RETURN));
  return true;
}

// Spares, when the job has some (every survivor is in their pool, or none is: spares.hpp): a round over the pool
// says how many live; with enough, the first ones are connected to the survivors as the replacements (true; false:
// a process failed meanwhile, a new attempt); with too few, the pool is dropped and the replacements are spawned
// (nullopt; the spares leave, having seen the same round).
std::optional<bool> Recovery::take_spares(Attempt& a) {
  if (!job_.spares_.active()) return std::nullopt;
  int me = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(a.shrunk, &me));
  stage("in a round with the spare processes");
  const int failed = static_cast<int>(a.failed.size());
  std::vector<long> failed_node;  // where each failed rank ran, as far as this survivor knows (its own node)
  const auto node_of = [&](int r) { return job_.layout_.node_of(r); };
  for (int f : a.failed)
    failed_node.push_back(job_.on_layout_node_ && node_of(f) == node_of(job_.rank_) ? job_.node_key_
                                                                                    : protocol::kUnknownNode);
  const std::optional<PoolRound> r = job_.spares_.survivors_round(failed_node, me == 0);
  if (!r) return false;
  if (r->spares < r->failed) {
    if (lowest_survivor_)
      std::fprintf(stderr, "reprise: %d spare process%s left for the failure of %s: %s replacement%s %s spawned%s\n",
                   r->spares, r->spares == 1 ? "" : "es", ranks_phrase(a.failed).c_str(), failed > 1 ? "their" : "its",
                   failed > 1 ? "s" : "", failed > 1 ? "are" : "is",
                   job_.cfg_.spawn ? (r->spares > 0 ? " (the spares leave)" : "") : " (REPRISE_SPAWN=0: no)");
    job_.spares_.retire();
    return std::nullopt;
  }
  stage("connecting to the spare processes");
  int flag = 1;
  try {
    a.inter = job_.spares_.take(a.shrunk, *r);  // (returns only a handle whose calls succeeded; else throws)
  } catch (const PeerFailure&) {
    flag = 0;
  }
  if (!agreed(a.shrunk, flag)) {
    revoke(a.inter);
    return false;
  }
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(a.inter, MPI_ERRORS_RETURN));
  a.from_spares = true;
  return true;
}

// Merges with the replacements, sends them the recovery packet, restores the rank numbering; agreed first among
// the survivors, then with the replacements (join_as_replacement), who learn either way: a revoked `merged`
// makes their agreement fail and they leave.
bool Recovery::merge(Attempt& a, StartFailures& starts) {
  // A failed rank that was itself a replacement (a spawned process): Open MPI 5.0.x's runtime mishandles such
  // failures, and the survivors' next communicator constructions can then hang (seen: every process in
  // MPI_Comm_split below, ompi_comm_nextcid). Said in the stage, so that a recovery timeout names the cause.
  bool spawned_failed = false;
  for (const RecoveryRecord& earlier : recoveries_)
    for (int r : earlier.failed)
      spawned_failed = spawned_failed || std::find(a.failed.begin(), a.failed.end(), r) != a.failed.end();
  const std::string known = spawned_failed
                                ? " (a failed rank was a spawned replacement: an Open MPI bug may hang this, "
                                  "open-mpi/ompi#13325)"
                                : "";
  const std::string merging = "merging with the replacements" + known;
  const std::string numbering = "restoring the rank numbering in MPI_Comm_split" + known;
  int flag = 1;
  try {
    stage(merging.c_str());
    // (Handles are taken only from calls that succeeded: a failed call leaves its output undefined, and
    // revoking such a handle below aborts the process.)
    MPI_Comm made = MPI_COMM_NULL;
    REPRISE_MPI_CHECK(MPI_Intercomm_merge(a.inter, 0, &made));
    a.merged = std::exchange(made, MPI_COMM_NULL);
    REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(a.merged, MPI_ERRORS_RETURN));
    int me = 0;
    REPRISE_MPI_CHECK(MPI_Comm_rank(a.merged, &me));
    std::vector<std::uint64_t> packet = me == 0 ? make_packet(a.plan, a.max_step) : std::vector<std::uint64_t>{};
    broadcast_packet(a.merged, packet);
    kill_floors_ = protocol::kill_floors(job_.kills_, kill_floors_, a.plan.failed, a.max_step);
    stage(numbering.c_str());
    REPRISE_MPI_CHECK(MPI_Comm_split(a.merged, 0, job_.rank_, &made));
    a.world = made;
  } catch (const PeerFailure&) {
    flag = 0;
  }
  stage("agreeing with the replacements");
  const std::optional<bool> survivors_merged = agreement(a.shrunk, flag);
  if (survivors_merged && *survivors_merged && agreed(a.merged, true)) {
    REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(a.world, MPI_ERRORS_RETURN));
    // (the new world is agreed on: a failure from here on is the next recovery's, not an error of these)
    REPRISE_MPI_DISCARD(MPI_Comm_free(&a.merged));
    REPRISE_MPI_DISCARD(MPI_Comm_free(&a.inter));
    return true;
  }
  for (MPI_Comm c : {a.inter, a.merged, a.world}) revoke(c);
  // No survivor failed: a replacement died before it joined (the same at every survivor).
  if (survivors_merged) start_failed(starts, a.failed, "a replacement process died before it joined the survivors");
  return false;
}

// Attempts that ended before the replacements joined, in a row for the same failed ranks with no survivor
// failing: the MPI cannot start a replacement (no free slot, the program's binary gone), or a replacement dies as
// it starts. Without this, recovery attempts went on until the recovery timeout. Tried again after 1 s and 2 s
// (the MPI may release a dead process's slot a little later), then the job stops.
void Recovery::start_failed(StartFailures& starts, const std::vector<int>& failed, const std::string& what) {
  constexpr int kStartTries = 3;
  starts.count = failed == starts.failed ? starts.count + 1 : 1;
  starts.failed = failed;
  if (starts.count >= kStartTries)
    throw UnrecoverableFailure("rank " + std::to_string(job_.rank_) +
                               ": the MPI could not start a working replacement for " + ranks_phrase(failed) + ": " +
                               std::to_string(starts.count) +
                               " attempts in a row failed with no other process failing (the last: " + what +
                               "; the MPI library's own message, if any, is above). Without a replacement the "
                               "job cannot be repaired, so it stops here; files already written were left "
                               "intact: relaunch the job (from REPRISE_DIR if one was set). Usual causes: no free "
                               "slot for a new process (a larger allocation, spare slots, or Open MPI's "
                               "--oversubscribe), the program cannot be started again (" +
                               executable() +
                               ": moved, deleted or rebuilt since the job started), or it cannot run where the "
                               "MPI started it.");
  std::this_thread::sleep_for(std::chrono::seconds(starts.count));
}

// The repaired job: the new communicators, then the rest of a group rollback (recover_group), or of the
// coordinated fallback where every rank rolls back to one version. Messages between groups that were in flight
// at that version's cut (sent before it, delivered after it) are not sent again by the re-execution: the
// restart exchange makes their senders replay them from the logs restored with that version.
void Recovery::finish_repair(Attempt& a, Clock::time_point t0) {
  for (std::size_t i = 0; i < a.repeats.size() && i < a.failed.size(); ++i)
    repeats_[a.failed[i]] = {a.repeats[i].first, a.repeats[i].second};
  const protocol::RecoveryPlan& plan = a.plan;
  const double repaired = since(t0);
  const bool rolls_back =
      !plan.partial || std::binary_search(plan.rolled_back.begin(), plan.rolled_back.end(), job_.rank_);
  if (rolls_back) job_.commit_.cancel_wait();
  job_.adopt(a.world, !rolls_back);  // the old communicators were revoked; they are freed at the end
  job_.down_ = false;
  RecoveryRecord rec = record_of(plan, t0);
  rec.repair_seconds = repaired;
  rec.attempts = a.number;
  (a.from_spares ? rec.spares_used : rec.spawned) = static_cast<int>(a.failed.size());
  if (plan.partial) return recover_group(plan, a.failed, rec, t0);
  std::set<int> everyone;
  for (int r = 0; r < job_.size_; ++r) everyone.insert(r);
  ++epoch_;
  begin_comm_recovery(everyone, -1);
  if (plan.from_start) {
    try {
      check_placement(rec);  // (nothing to move, but the ranks start over where they now run)
    } catch (const PeerFailure&) {
      join_ranks(interrupted_failed_, a.failed);
      recover("a process failed while the ranks compared where they run");  // a new recovery
    }
    start_over();
    rec.total_seconds = since(t0);
    recoveries_.push_back(rec);
    const std::string repaired_failures = repaired_phrase(a.failed);
    if (lowest_survivor_)
      std::fprintf(stderr,
                   "reprise: recovered from the failure of %s in %.3f s (%d attempt%s); no version is left to "
                   "restore, so every rank starts over from the beginning\n",
                   repaired_failures.c_str(), rec.total_seconds, a.number, a.number > 1 ? "s" : "");
    throw Rollback(0,
                   "rank " + std::to_string(job_.rank_) + " starts over after the failure of " +
                       ranks_phrase(a.failed) + " (no version is left to restore)",
                   true);
  }
  const auto t1 = Clock::now();
  try {
    stage("moving checkpoints to the replacements and buddies");
    move_data(plan, rec);
  } catch (const PeerFailure&) {
    join_ranks(interrupted_failed_, a.failed);
    recover("a process failed while checkpoints were moved to the replacements");  // a new recovery
  }
  rec.transfer_seconds = since(t1);
  finish_recovery(plan.version);
  rec.total_seconds = since(t0);
  recoveries_.push_back(rec);
  const std::string repaired_failures = repaired_phrase(a.failed);
  if (lowest_survivor_)
    std::fprintf(stderr,
                 "reprise: recovered from the failure of %s in %.3f s (repair %.3f s, data %.3f s, "
                 "%d attempt%s); every rank rolls back to version %llu\n",
                 repaired_failures.c_str(), rec.total_seconds, rec.repair_seconds, rec.transfer_seconds, a.number,
                 a.number > 1 ? "s" : "", static_cast<unsigned long long>(plan.version));
  throw Rollback(plan.version, "rank " + std::to_string(job_.rank_) + " rolls back to version " +
                                   std::to_string(plan.version) + " after the failure of " + ranks_phrase(a.failed));
}
#endif

std::string Recovery::repaired_phrase(const std::vector<int>& failed) {
  join_ranks(interrupted_failed_, failed);
  std::vector<int> all;
  all.swap(interrupted_failed_);
  return ranks_phrase(all);
}

// What this rank records of a recovery, from the plan (survivors and replacements alike): the failed ranks, the
// ranks that roll back, its own group's version (at a survivor of a group rollback: the first rolled-back
// group's) and whether that group starts over.
RecoveryRecord Recovery::record_of(const protocol::RecoveryPlan& plan, Clock::time_point t0) const {
  RecoveryRecord rec;
  rec.failed = plan.failed;
  rec.rolled_back = plan.rolled_back;
  rec.group = plan.partial;
  rec.this_rank = !plan.partial || std::binary_search(plan.rolled_back.begin(), plan.rolled_back.end(), job_.rank_);
  rec.at = std::chrono::duration<double>(t0.time_since_epoch()).count();
  if (plan.partial) {
    const std::size_t r = static_cast<std::size_t>(rec.this_rank ? job_.rank_ : plan.rolled_back.front());
    rec.version = plan.version_of[r];
    rec.from_start = plan.starts_over[r] != 0;
  } else {
    rec.version = plan.version;
    rec.from_start = plan.from_start;
  }
  return rec;
}

// The rest of a group rollback, after the repair: data to the replacements and the buddies, then either this
// rank rolls back (throws Rollback; its restart exchange runs at its next runtime call, once restored) or it
// survives: it takes part in the restart exchange at once and returns to the application.
void Recovery::recover_group(const protocol::RecoveryPlan& plan, const std::vector<int>& failed, RecoveryRecord& rec,
                             Clock::time_point t0) {
  const bool rolls_back = rec.this_rank;
  const int attempt = rec.attempts;
  ++epoch_;
  const std::set<int> R(plan.rolled_back.begin(), plan.rolled_back.end());
  const int coordinator = protocol::restart_coordinator(job_.size_, R);
  begin_comm_recovery(R, coordinator);
  const std::size_t me = static_cast<std::size_t>(job_.rank_);
  const auto t1 = Clock::now();
  try {
    stage("moving checkpoints to the replacements and buddies");
    move_data(plan, rec);
    rec.transfer_seconds = since(t1);
    stage("in the restart exchange");
    if (!rolls_back) {
      if (job_.store_) {
        job_.store_->resync_after_recovery();
        job_.buddy_.start();
      }
      if (job_.comm_state_) job_.comm_state_->restart_exchange(true);
    }
  } catch (const PeerFailure&) {
    // Another process failed during the data phase or the restart exchange: a new recovery takes over. The
    // groups of this one roll back again (their members report they are still recovering), with the union of
    // the failures; survivors that are not in them take part in its restart exchange and go on.
    rec.interrupted = true;
    rec.total_seconds = since(t0);
    recoveries_.push_back(rec);
    join_ranks(interrupted_failed_, failed);
    recover("a process failed while the job recovered from the failure of " + ranks_phrase(failed));
    return;  // a survivor of the new recovery (a rank that rolls back left with Rollback)
  }
  rec.total_seconds = since(t0);
  recoveries_.push_back(rec);
  const std::string repaired = repaired_phrase(failed);
  std::vector<int> groups;
  for (int r : plan.rolled_back) groups.push_back(job_.layout_.group_of(r));
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  // Groups with no version left to restore (none committed, or, with files, none in every member's files): they
  // start over from the beginning.
  std::vector<int> fresh;
  for (int g : groups)
    for (int r : plan.rolled_back)
      if (job_.layout_.group_of(r) == g && plan.starts_over[static_cast<std::size_t>(r)]) {
        fresh.push_back(g);
        break;
      }
  if (job_.rank_ == coordinator)
    std::fprintf(stderr,
                 "reprise: recovered from the failure of %s in %.3f s (repair %.3f s, data %.3f s%s); only "
                 "group%s %s (ranks %s) roll%s back, the other ranks go on; restart coordinator: rank %d%s%s%s%s\n",
                 repaired.c_str(), rec.total_seconds, rec.repair_seconds, rec.transfer_seconds,
                 attempt > 1 ? (", " + std::to_string(attempt) + " attempts").c_str() : "",
                 groups.size() > 1 ? "s" : "", protocol::list_ranks(groups).c_str(),
                 protocol::list_ranks(plan.rolled_back).c_str(), groups.size() > 1 ? "" : "s", coordinator,
                 fresh.empty()      ? ""
                 : fresh.size() > 1 ? "; groups "
                                    : "; group ",
                 fresh.empty() ? "" : protocol::list_ranks(fresh).c_str(),
                 fresh.empty()      ? ""
                 : fresh.size() > 1 ? " have no version left to restore and start"
                                    : " has no version left to restore and starts",
                 fresh.empty() ? "" : " over from the beginning");
  if (!rolls_back) return;
  if (plan.starts_over[me]) {
    start_over();
    throw Rollback(0,
                   "rank " + std::to_string(job_.rank_) + " starts over after the failure of " + ranks_phrase(failed) +
                       " (its group has no version left to restore)",
                   true);
  }
  finish_recovery(plan.version_of[me]);
  throw Rollback(plan.version_of[me], "rank " + std::to_string(job_.rank_) + " rolls back to version " +
                                          std::to_string(plan.version_of[me]) + " after the failure of " +
                                          ranks_phrase(failed));
}

// A replacement's part of Comm's recovery, deferred until Comm exists. A relaunch from files: every rank
// restores the version the job agreed on and then runs the restart exchange (at its next runtime call), which
// replays from the senders' restored log snapshots the messages between groups that were sent before that
// version and received after it: the re-execution does not send them again.
void Recovery::on_comm_created() {
  if (joined_group_recovery_) job_.comm_state_->begin_recovery(epoch_, joined_rolled_back_, joined_coordinator_);
  if (restarted_ && !job_.replacement_) {
    std::set<int> everyone;
    for (int r = 0; r < job_.size_; ++r) everyone.insert(r);
    job_.comm_state_->begin_recovery(epoch_, everyone, -1);
  }
}

nlohmann::json Recovery::json() const {
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
                 {"buddies_on_one_node", r.buddies_on_one_node},
                 {"spares_used", r.spares_used},
                 {"spawned", r.spawned},
                 {"replaced_on", r.replaced_on}});
  return j;
}

// Comm's part of a recovery; deferred to the creation of Comm in a replacement still being constructed.
void Recovery::begin_comm_recovery(const std::set<int>& rolled_back, int coordinator) {
  if (job_.comm_state_) {
    job_.comm_state_->begin_recovery(epoch_, rolled_back, coordinator);
    return;
  }
  joined_group_recovery_ = true;
  joined_rolled_back_ = rolled_back;
  joined_coordinator_ = coordinator;
}

#if REPRISE_HAVE_ULFM
std::optional<bool> Recovery::agreement(MPI_Comm comm, bool mine) {
  return polled::agreement(comm, mine);  // polled: see mpi/polled.hpp
}

bool Recovery::agreed(MPI_Comm comm, bool mine) {
  const std::optional<bool> a = agreement(comm, mine);
  return a && *a;
}
#endif

// Ranks of the current world that are not in `shrunk` (ascending): the MPI's group difference, translated (as
// many as failed; shrunk keeps the world's order, so its first rank is the lowest survivor).
std::vector<int> Recovery::failed_ranks(MPI_Comm shrunk) {
  MPI_Group gw, gs, gf;
  REPRISE_MPI_CHECK(MPI_Comm_group(job_.world_, &gw));
  REPRISE_MPI_CHECK(MPI_Comm_group(shrunk, &gs));
  REPRISE_MPI_CHECK(MPI_Group_difference(gw, gs, &gf));
  int nf = 0, me = 0;
  REPRISE_MPI_CHECK(MPI_Group_size(gf, &nf));
  std::vector<int> in(static_cast<std::size_t>(nf)), failed(static_cast<std::size_t>(nf));
  for (int i = 0; i < nf; ++i) in[static_cast<std::size_t>(i)] = i;
  REPRISE_MPI_CHECK(MPI_Group_translate_ranks(gf, nf, in.data(), gw, failed.data()));
  std::sort(failed.begin(), failed.end());
  REPRISE_MPI_CHECK(MPI_Comm_rank(shrunk, &me));
  lowest_survivor_ = me == 0;
  for (MPI_Group* g : {&gw, &gs, &gf}) REPRISE_MPI_CHECK(MPI_Group_free(g));
  return failed;
}

// Recovery to the initial state: every stored version of this rank and of its wards is dropped (none was
// committed), and the Runtime forgets its timeline at its next checkpoint (take_start_over).
void Recovery::start_over() {
  if (job_.comm_state_) job_.comm_state_->start_over();
  job_.commit_.forget_floor();  // the store forgets its floor too (drop_everything)
  data_pending_ = false;        // nothing to hold
  target_.reset();
  restarted_ = false;
  start_over_ = true;
  if (!job_.group_rollback_) {  // every rank starts over; with a group rollback, wards of other groups go on
    job_.buddy_.drop_wards();
  }
  if (job_.store_) {
    job_.store_->drop_everything();
    job_.buddy_.start();
  } else if (job_.local_) {
    for (std::uint64_t v : job_.local_->list()) job_.local_->release(v);
  }
}

void Recovery::finish_recovery(std::uint64_t version) {
  target_ = version;
  restarted_ = true;  // restarted(): there is a version to restore (a program run again from its top restores it)
  if (job_.store_) {
    job_.store_->reset_after_recovery(version);
    job_.buddy_.start();
  }
}

// What the survivors' first process sends the replacements (protocol/recovery_packet.hpp).
std::vector<std::uint64_t> Recovery::make_packet(const protocol::RecoveryPlan& plan, std::uint64_t max_step) {
  protocol::RecoveryPacket k;
  k.plan = plan;
  k.layout = job_.layout_;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "REPRISE_", 8) == 0) k.env.emplace_back(*e);
  k.epoch = epoch_ + 1;  // the epoch the recovery starts (recover_group(), or every rank's restart exchange)
  k.kill_floors = protocol::kill_floors(job_.kills_, kill_floors_, plan.failed, max_step);
  return protocol::encode_packet(k);
}

// A broadcast over the merged communicator from its rank 0 (the survivors' first process, which alone builds the
// packet) to the replacements and the other survivors. The packet is a few words per rank that failed or rolls
// back, with the layout as its rule (docs/SCALING.md). (Over the intercommunicator, with MPI_ROOT and
// MPI_PROC_NULL, the next recovery's MPIX_Comm_shrink hung in ompi_comm_nextcid in some runs under load:
// Open MPI 5.0.7.)
void Recovery::broadcast_packet(MPI_Comm merged, std::vector<std::uint64_t>& p) {
  std::uint64_t n = p.size();
  REPRISE_MPI_CHECK(polled::bcast(&n, 1, MPI_UINT64_T, 0, merged));
  if (n > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw Error("the recovery packet from the survivors announces " + std::to_string(n) +
                " words: damaged, or sent by another Reprise build");
  p.resize(static_cast<std::size_t>(n));
  REPRISE_MPI_CHECK(polled::bcast(p.data(), static_cast<int>(n), MPI_UINT64_T, 0, merged));
}

void Recovery::join_as_replacement(MPI_Comm parent, Config& cfg, std::optional<long> spare_node) {
#if !REPRISE_HAVE_ULFM
  (void)parent;
  (void)cfg;
  (void)spare_node;
  throw UnrecoverableFailure("a replacement process was started, but this MPI has no ULFM");
#else
  const auto t0 = Clock::now();
  job_.replacement_ = true;
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN));
  MPI_Comm merged = MPI_COMM_NULL, world = MPI_COMM_NULL;
  int mrank = 0, msize = 0, nremote = 0;
  protocol::RecoveryPacket k;
  bool fine = true;
  try {
    MPI_Comm made = MPI_COMM_NULL;  // (handles only from calls that succeeded: see recover())
    REPRISE_MPI_CHECK(MPI_Intercomm_merge(parent, 1, &made));
    merged = std::exchange(made, MPI_COMM_NULL);
    REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN));
    REPRISE_MPI_CHECK(MPI_Comm_rank(merged, &mrank));
    REPRISE_MPI_CHECK(MPI_Comm_size(merged, &msize));
    REPRISE_MPI_CHECK(MPI_Comm_remote_size(parent, &nremote));
    std::vector<std::uint64_t> packet;
    broadcast_packet(merged, packet);
    k = protocol::decode_packet(packet);
    if (k.layout.size() != msize)
      throw Error("the recovery packet describes a job of " + std::to_string(k.layout.size()) +
                  " ranks, but the repaired communicator has " + std::to_string(msize));
    const int key = k.plan.failed.at(static_cast<std::size_t>(mrank - nremote));
    REPRISE_MPI_CHECK(MPI_Comm_split(merged, 0, key, &made));
    world = made;
    // (After the split: killed inside MPI_Intercomm_merge's window, a replacement can leave a survivor waiting in
    // the merge, which Open MPI 5.0.7 does not end on a process failure; the recovery timeout ends that.)
    for (const std::string& e : k.env)  // REPRISE_KILL "join": a replacement that dies as it joins, every time
      if (e.rfind("REPRISE_KILL=", 0) == 0 &&
          protocol::kill_due(protocol::parse_kill_spec(e.substr(13)), key, protocol::kill_floor(k.kill_floors, key),
                             protocol::KillPoint::Join)) {
        std::fprintf(stderr, "reprise: replacement of rank %d: REPRISE_KILL: SIGKILL as it joins\n", key);
        std::fflush(stderr);
        raise(SIGKILL);
      }
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
  job_.kills_ = protocol::parse_kill_spec(std::getenv("REPRISE_KILL") ? std::getenv("REPRISE_KILL") : "");
  kill_floors_ = k.kill_floors;
  data_pending_ = true;  // until its data phase completes (see RankHoldings::replacing)
  job_.group_rollback_ = Config::from_env(cfg).group_rollback;  // the job's REPRISE_* environment is set now
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
  REPRISE_MPI_DISCARD(MPI_Comm_free(&merged));  // (agreed on: a failure from here on is the next recovery's)
  // Watched from here (the job's REPRISE_* environment has just arrived; the survivors watch the merge).
  std::optional<RecoveryWatch> watch;
  if (const Config job = Config::from_env(cfg); job.recovery_watch_ms > 0 || job.recovery_timeout_s > 0)
    watch.emplace(
        watch_,
        "rank " + std::to_string(k.plan.failed.at(static_cast<std::size_t>(mrank - nremote))) + " (replacement)",
        std::chrono::milliseconds(job.recovery_watch_ms), std::chrono::seconds(job.recovery_timeout_s));
  stage("building the repaired communicators");
  job_.layout_ = k.layout;  // the job's layout, wherever this process was started
  job_.adopt(world);
  {
    const mpi::TopologyConfig topology = mpi::TopologyConfig::from_env();
    job_.on_layout_node_ = !spare_node && topology.replacement_node < 0;
    job_.node_key_ =
        spare_node ? *spare_node
                   : mpi::own_node_key(topology, topology.replacement_node >= 0 ? topology.replacement_node
                                                                                : job_.layout_.node_of(job_.rank_));
  }
  if (spare_node)
    std::fprintf(stderr, "reprise: spare process (start rank %d) is rank %d now, on node %ld\n",
                 job_.spares_.start_rank(), job_.rank_, job_.node_key_);
  job_.kill_floor_ = protocol::kill_floor(kill_floors_, job_.rank_);  // (rank_ from adopt)
  cfg = Config::from_env(cfg);
  cfg.rank = job_.rank_;
  job_.cfg_ = cfg;
  job_.local_ = job_.own_store();
  RecoveryRecord rec = record_of(k.plan, t0);
  rec.replacement = true;
  (spare_node ? rec.spares_used : rec.spawned) = static_cast<int>(k.plan.failed.size());
  k.plan.version = rec.version;  // (a group rollback: its own group's; the data phase reads these two)
  k.plan.from_start = rec.from_start;
  // Every rank of R (here: of its group, or of the job) takes part in the restart exchange once restored.
  epoch_ = k.epoch;
  joined_group_recovery_ = true;
  joined_rolled_back_ = std::set<int>(rec.rolled_back.begin(), rec.rolled_back.end());
  joined_coordinator_ = protocol::restart_coordinator(job_.size_, joined_rolled_back_);
  rec.repair_seconds = since(t0);
  if (k.plan.partial && k.plan.from_start) {
    // Its group starts over, the others go on: it still takes part in the data exchange with its buddies
    // (it holds nothing for its own group's sake, but its wards re-ship what they have).
    const auto t1 = Clock::now();
    move_data_or_recover(k.plan, rec, t0, t1);
    return;
  }
  if (k.plan.from_start) {  // nothing committed: this process starts from the beginning like the others
    data_pending_ = false;  // every rank starts over: nobody holds anything
    move_data_or_recover(k.plan, rec, t0, Clock::now());
    return;
  }
  const auto t1 = Clock::now();
  target_ = k.plan.version;
  restarted_ = true;
  move_data_or_recover(k.plan, rec, t0, t1);
#endif
}

// A replacement's data phase (when every rank starts over, nothing moves: only where the ranks now run is
// compared, with the survivors). When another process fails during it, the replacement takes part in the new
// recovery like a survivor (reporting that it holds only part of its data); that recovery rolls its group back
// again and sets target_ (or starts it over); the application restores at start either way.
#if REPRISE_HAVE_ULFM
void Recovery::move_data_or_recover(const protocol::RecoveryPlan& plan, RecoveryRecord& rec, Clock::time_point t0,
                                    Clock::time_point t1) {
  const bool nothing_moves = !plan.partial && plan.from_start;
  stage(nothing_moves ? "comparing where the ranks run (replacement)" : "getting its checkpoints (replacement)");
  try {
    if (nothing_moves)
      check_placement(rec);
    else
      move_data(plan, rec);
  } catch (const PeerFailure&) {
    rec.interrupted = true;
    rec.total_seconds = since(t0);
    recoveries_.push_back(rec);
    try {
      recover(nothing_moves ? "a process failed while the ranks compared where they run"
                            : "a process failed while checkpoints were moved to the replacements");
    } catch (const Rollback&) {
    }
    return;
  }
  if (!nothing_moves) rec.transfer_seconds = since(t1);
  rec.total_seconds = since(t0);
  recoveries_.push_back(rec);
}
#endif

// After the repair: (1) each replacement gets its chain for the planned version from its buddy (unless it reads
// its own files); (2) every rank makes sure its buddy holds that chain: the buddy says what it holds, the owner
// sends what is missing (everything when the buddy is a replacement). One pair at a time, in rank order, so the
// rendezvous sends cannot form a cycle.
void Recovery::move_data(const protocol::RecoveryPlan& plan, RecoveryRecord& rec) {
  check_placement(rec);
  core::VersionStore& own = job_.store_ ? job_.store_->local() : *job_.local_;
  auto send_versions = [&](int dest, core::VersionStore& from, const std::vector<std::uint64_t>& versions) {
    if (job_.should_die(job_.current_step_, protocol::KillPoint::Transfer)) job_.die("transfer", job_.current_step_);
    const std::uint64_t n = versions.size();
    REPRISE_MPI_CHECK(polled::send(&n, 1, MPI_UINT64_T, dest, kMoveCount, job_.world_));
    for (std::uint64_t v : versions) {
      const core::StoredVersion sv = from.load(v);
      send_version(job_.world_, dest, kMoveHead, kMovePiece, sv.manifest, *sv.payload,
                   core::payload_checksum(sv.manifest));
      rec.bytes_sent += sv.payload->size();
    }
  };
  auto recv_versions = [&](int src, core::VersionStore& into) {
    std::uint64_t n = 0;
    REPRISE_MPI_CHECK(polled::recv(&n, 1, MPI_UINT64_T, src, kMoveCount, job_.world_, MPI_STATUS_IGNORE));
    for (std::uint64_t i = 0; i < n; ++i) {
      Received r = recv_version(job_.world_, src, kMoveHead, kMovePiece, "version sent by rank " + std::to_string(src));
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
  // (Both loops visit, in rank order, only the pairs this rank is part of: the order of the job-wide loop over
  // every rank they replace, at the cost of this rank's wards.)
  for (const auto& [fi, from] : plan.source.entries()) {
    const int f = static_cast<int>(fi);
    if (from != protocol::DataSource::Buddy || !target(f)) continue;
    const int b = job_.layout_.buddy_of(f);
    if (job_.rank_ == b) {
      core::VersionStore& held = job_.buddy_.ward_store(f);
      send_versions(f, held, protocol::chain_of(protocol::records_of(held), *target(f)));
    }
    if (job_.rank_ == f) recv_versions(b, own);
  }
  std::vector<int> pairs = job_.layout_.wards_of(job_.rank_);  // this rank as a buddy, and as a ward
  pairs.insert(std::upper_bound(pairs.begin(), pairs.end(), job_.rank_), job_.rank_);
  for (int w : pairs) {
    const int b = job_.layout_.buddy_of(w);
    if (job_.rank_ == b) {
      const std::vector<std::uint64_t> held = job_.buddy_.ward_store(w).list();
      const std::uint64_t n = held.size();
      REPRISE_MPI_CHECK(polled::send(&n, 1, MPI_UINT64_T, w, kMoveList, job_.world_));
      REPRISE_MPI_CHECK(polled::send(held.data(), static_cast<int>(n), MPI_UINT64_T, w, kMoveList, job_.world_));
      recv_versions(w, job_.buddy_.ward_store(w));
    }
    if (job_.rank_ == w) {
      std::uint64_t n = 0;
      REPRISE_MPI_CHECK(polled::recv(&n, 1, MPI_UINT64_T, b, kMoveList, job_.world_, MPI_STATUS_IGNORE));
      std::vector<std::uint64_t> held(n);
      REPRISE_MPI_CHECK(
          polled::recv(held.data(), static_cast<int>(n), MPI_UINT64_T, b, kMoveList, job_.world_, MPI_STATUS_IGNORE));
      // A survivor of a group rollback: every version it has (it goes on from the newest); a rank that rolls
      // back: the chain of its version; a rank that starts over: nothing.
      std::vector<std::uint64_t> wanted;
      if (survivor(w)) {
        for (const auto& r : protocol::records_of(own)) wanted.push_back(r.version);
      } else if (target(w)) {
        wanted = protocol::chain_of(protocol::records_of(own), *target(w));
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
// job's (groups and buddies do not move); the rank of each such pair that was replaced says so, and the
// recovery's metrics record it.
//
// Only the pairs {ward, buddy} with a replacement in them can have moved onto one node: their two ranks send
// each other the node they run on (point to point, no collective on the repaired world: docs/SCALING.md), and
// each replacement sends rank 0 its node and its pairs on one node. So a rank exchanges with at most its buddy
// and its wards, rank 0 receives one message per replaced rank, and rank 0's record lists every replacement's
// node and every pair on one node (another rank's record, the pairs it is part of).
void Recovery::check_placement(RecoveryRecord& rec) {
  std::vector<int> replaced = rec.failed;
  std::sort(replaced.begin(), replaced.end());
  const auto is_replaced = [&](int r) { return std::binary_search(replaced.begin(), replaced.end(), r); };
  const int me = job_.rank_;
  const int buddy = job_.layout_.buddy_of(me);
  const std::vector<int> wards = job_.layout_.wards_of(me);
  std::vector<int> partners;  // the other rank of each of this rank's pairs that has a replacement in it
  if (buddy >= 0 && buddy != me && (is_replaced(me) || is_replaced(buddy))) partners.push_back(buddy);
  for (int w : wards)
    if (w != me && (is_replaced(me) || is_replaced(w))) partners.push_back(w);
  std::sort(partners.begin(), partners.end());  // (with two nodes a rank's buddy is also its ward)
  partners.erase(std::unique(partners.begin(), partners.end()), partners.end());
  std::vector<long> keys(partners.size());
  std::vector<MPI_Request> sends(partners.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < partners.size(); ++i)
    REPRISE_MPI_CHECK(MPI_Isend(&job_.node_key_, 1, MPI_LONG, partners[i], kPlacement, job_.world_, &sends[i]));
  for (std::size_t i = 0; i < partners.size(); ++i)
    REPRISE_MPI_CHECK(polled::recv(&keys[i], 1, MPI_LONG, partners[i], kPlacement, job_.world_, MPI_STATUS_IGNORE));
  for (MPI_Request& r : sends) REPRISE_MPI_CHECK(polled::wait(r));
  const auto key_of = [&](int r) {
    return keys[static_cast<std::size_t>(std::lower_bound(partners.begin(), partners.end(), r) - partners.begin())];
  };
  const auto on_my_node = [&](int r) {
    return std::binary_search(partners.begin(), partners.end(), r) && key_of(r) == job_.node_key_;
  };
  rec.buddies_on_one_node.clear();
  if (buddy >= 0 && on_my_node(buddy)) rec.buddies_on_one_node.emplace_back(me, buddy);
  for (int w : wards)
    if (on_my_node(w)) rec.buddies_on_one_node.emplace_back(w, me);
  rec.replaced_on.clear();
  if (is_replaced(me)) rec.replaced_on.emplace_back(me, job_.node_key_);
  // Each pair's warning once: by its ward when the ward was replaced, else by its buddy.
  for (const auto& [w, b] : rec.buddies_on_one_node)
    if ((is_replaced(w) ? w : b) == me)
      std::fprintf(stderr,
                   "reprise: warning: rank %d and its buddy rank %d now run on one node (a replacement was "
                   "started there): a failure of that node would lose both copies of rank %d's checkpoints. "
                   "REPRISE_DIR adds a level that survives it.\n",
                   w, b, w);
  greet_replacements(replaced);
  // Rank 0's record: every replacement's node and pairs ({node, ward, buddy, ward, buddy, ...} in one message).
  if (me != 0 && is_replaced(me)) {
    std::vector<long> report{job_.node_key_};
    for (const auto& [w, b] : rec.buddies_on_one_node) report.insert(report.end(), {w, b});
    REPRISE_MPI_CHECK(
        polled::send(report.data(), static_cast<int>(report.size()), MPI_LONG, 0, kPlacement, job_.world_));
  }
  if (me != 0) return;
  for (int f : replaced) {
    if (f == 0) continue;
    MPI_Status st;
    REPRISE_MPI_CHECK(polled::probe(f, kPlacement, job_.world_, &st));
    int n = 0;
    REPRISE_MPI_CHECK(MPI_Get_count(&st, MPI_LONG, &n));
    std::vector<long> from(static_cast<std::size_t>(n));
    REPRISE_MPI_CHECK(polled::recv(from.data(), n, MPI_LONG, f, kPlacement, job_.world_, MPI_STATUS_IGNORE));
    if (from.empty() || from.size() % 2 == 0)
      throw ProtocolError("rank " + std::to_string(f) + " sent rank 0 a placement report of " + std::to_string(n) +
                          " words (expected its node and pairs of ranks)");
    rec.replaced_on.emplace_back(f, from[0]);
    for (std::size_t i = 1; i + 1 < from.size(); i += 2)
      rec.buddies_on_one_node.emplace_back(static_cast<int>(from[i]), static_cast<int>(from[i + 1]));
  }
  std::sort(rec.replaced_on.begin(), rec.replaced_on.end());
  std::sort(rec.buddies_on_one_node.begin(), rec.buddies_on_one_node.end());
  rec.buddies_on_one_node.erase(std::unique(rec.buddies_on_one_node.begin(), rec.buddies_on_one_node.end()),
                                rec.buddies_on_one_node.end());
}

// Each replacement sends every other rank an empty message, and each rank receives one from every replacement.
// Not a protocol step: with Open MPI 5.0.7, a later failure's MPIX_Comm_shrink hung in its agreement
// (mca_coll_ftagree_era) whenever a replacement had not yet exchanged a message with every other rank
// (interpose_probes_across_checkpoints_2_at_15_5_at_25: every run without these messages, never with them). The
// agreement sends through the transport (BTL) directly, not through the point-to-point layer; why a first message
// between the two processes makes the difference is not understood. It costs a replacement N - 1 empty sends, and
// any other rank one receive per replacement.
void Recovery::greet_replacements(const std::vector<int>& replaced) {
  const int me = job_.rank_;
  if (std::binary_search(replaced.begin(), replaced.end(), me)) {
    constexpr int kWindow = 64;  // sends in flight at once (so nothing here is sized by the job)
    std::array<MPI_Request, kWindow> sends{};
    for (int first = 0; first < job_.size_; first += kWindow) {
      int n = 0;
      for (int r = first; r < std::min(first + kWindow, job_.size_); ++r)
        if (r != me) REPRISE_MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, r, kGreeting, job_.world_, &sends[n++]));
      for (int i = 0; i < n; ++i) REPRISE_MPI_CHECK(polled::wait(sends[static_cast<std::size_t>(i)]));
    }
  }
  for (int f : replaced)
    if (f != me) REPRISE_MPI_CHECK(polled::recv(nullptr, 0, MPI_BYTE, f, kGreeting, job_.world_, MPI_STATUS_IGNORE));
}

// Per ward: the version whose chain it keeps (UINT64_MAX: all; none: nothing).
void Recovery::trim_wards(const std::function<std::optional<std::uint64_t>(int)>& keep_of) {
  job_.buddy_.for_each_ward([&](int ward, core::VersionStore& s) {
    const auto records = protocol::records_of(s);
    const auto version = keep_of(ward);
    if (version && *version == UINT64_MAX) return;
    std::vector<std::uint64_t> keep;
    try {
      if (version) keep = protocol::chain_of(records, *version);
    } catch (const RestoreError&) {
    }
    for (const auto& r : records)
      if (std::find(keep.begin(), keep.end(), r.version) == keep.end()) s.release(r.version);
  });
}

}  // namespace reprise::mpi
