// Spare processes: the pool, its rounds, a spare's wait (spares.hpp).
#include "mpi/spares.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mpi/check.hpp"
#include "mpi/layout.hpp"
#include "mpi/polled.hpp"
#include "protocol/failure_injection.hpp"
#include "protocol/placement.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {
namespace {

constexpr int kConnectTag = 7711;  // MPI_Intercomm_create between the survivors and the spares they take

// A barrier on `pool` completed by polling every millisecond: a spare may wait for the whole job.
int slow_barrier(MPI_Comm pool) {
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(pool, &r);
  while (rc == MPI_SUCCESS) {
    int done = 0;
    rc = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return rc;
}

}  // namespace

SparePool::~SparePool() {
  retired_.push_back(pool_);
  for (MPI_Comm& c : retired_)
    if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPI_Comm_free(&c));  // (leaving: nothing to do about an error)
}

MPI_Comm SparePool::start(MPI_Comm user, unsigned k) {
  int size = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(user, &start_rank_));
  REPRISE_MPI_CHECK(MPI_Comm_size(user, &size));
  if (k == 0) return dup_comm(user);
  const int n = size - static_cast<int>(k);
  if (n < 1)
    throw ConfigError("REPRISE_SPARES=" + std::to_string(k) + " leaves no application rank in a job of " +
                      std::to_string(size) + " processes: start the job with N + " + std::to_string(k) +
                      " processes for N ranks (scripts/mpirun.sh -n N --spares " + std::to_string(k) + ")");
  pool_ = dup_comm(user);
  spare_ = start_rank_ >= n;
  const TopologyConfig topology = TopologyConfig::from_env();
  if (!topology.spare_nodes.empty() && topology.spare_nodes.size() != k)
    throw ConfigError("REPRISE_SPARE_NODES names " + std::to_string(topology.spare_nodes.size()) +
                      " nodes for REPRISE_SPARES=" + std::to_string(k) + " spares: give one per spare");
  long emulated = topology.ranks_per_node > 0 ? start_rank_ / topology.ranks_per_node : 0;
  if (start_rank_ >= n && !topology.spare_nodes.empty())
    emulated = topology.spare_nodes[static_cast<std::size_t>(start_rank_ - n)];
  node_key_ = own_node_key(topology, emulated);
  MPI_Comm app = MPI_COMM_NULL;
  REPRISE_MPI_CHECK(MPI_Comm_split(pool_, spare_ ? MPI_UNDEFINED : 0, start_rank_, &app));
  if (app == MPI_COMM_NULL) return app;
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(app, MPI_ERRORS_RETURN));
  return app;
}

std::optional<PoolRound> SparePool::round(int failed, bool leader, const std::vector<long>& failed_node) {
#if !REPRISE_HAVE_ULFM
  (void)failed;
  (void)leader;
  (void)failed_node;
  throw UnrecoverableFailure("spare processes need an MPI with ULFM");
#else
  revoke(pool_);  // the spares' barrier ends (revoked already: nothing changes)
  MPI_Comm shrunk = MPI_COMM_NULL;
  if (const int rc = MPIX_Comm_shrink(pool_, &shrunk); rc != MPI_SUCCESS)
    throw UnrecoverableFailure("start rank " + std::to_string(start_rank_) +
                               ": MPIX_Comm_shrink of the spare processes' pool failed: " +
                               describe(rc, REPRISE_MPI_SITE(MPIX_Comm_shrink(pool_, &shrunk))));
  REPRISE_MPI_CHECK(MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN));
  retired_.push_back(pool_);
  pool_ = shrunk;
  int me = 0;
  REPRISE_MPI_CHECK(MPI_Comm_rank(pool_, &me));
  PoolRound r;
  bool fine = true;
  try {
    const int one = spare_ ? 1 : 0;
    int before = 0;  // spares of lower pool rank (MPI_Exscan leaves rank 0's result undefined)
    REPRISE_MPI_CHECK(polled::exscan(&one, &before, 1, MPI_INT, MPI_SUM, pool_));
    if (me == 0) before = 0;
    int v[5] = {failed, spare_ ? 0 : 1, leader ? me : -1, spare_ && before == 0 ? me : -1, spare_ ? before + 1 : 0};
    REPRISE_MPI_CHECK(polled::allreduce(MPI_IN_PLACE, v, 5, MPI_INT, MPI_MAX, pool_));
    r.failed = v[0];
    r.application = v[1] != 0;
    r.survivors_leader = v[2];
    r.spares_leader = v[3];
    r.spares = v[4];
    r.spare_index = spare_ ? before : -1;
    if (r.failed > 0 && r.spares >= r.failed) {
      // Where the failed ranks ran (said by the survivors that ran there too) and where each spare runs: every
      // member then computes the same assignment. (Sizes: the failed ranks and the spares, never the job's.)
      const std::size_t f = static_cast<std::size_t>(r.failed), k = static_cast<std::size_t>(r.spares);
      std::vector<long> w(f + 2 * k, protocol::kUnknownNode);
      for (std::size_t i = 0; i < f && i < failed_node.size(); ++i) w[i] = failed_node[i];
      if (spare_) {
        w[f + static_cast<std::size_t>(before)] = node_key_;
        w[f + k + static_cast<std::size_t>(before)] = me;
      }
      REPRISE_MPI_CHECK(
          polled::allreduce(MPI_IN_PLACE, w.data(), static_cast<int>(w.size()), MPI_LONG, MPI_MAX, pool_));
      r.spare_of = protocol::assign_spares(
          std::vector<long>(w.begin(), w.begin() + static_cast<long>(f)),
          std::vector<long>(w.begin() + static_cast<long>(f), w.begin() + static_cast<long>(f + k)));
      r.spare_pool_rank.assign(w.begin() + static_cast<long>(f + k), w.end());
    }
  } catch (const PeerFailure&) {
    fine = false;
  }
  const std::optional<bool> agreed = polled::agreement(pool_, fine);
  if (!agreed || !*agreed) return std::nullopt;
  return r;
#endif
}

MPI_Comm SparePool::take(MPI_Comm survivors, const PoolRound& r) {
  MPI_Comm none = MPI_COMM_NULL;  // (the spares taken make their own communicator in this split)
  REPRISE_MPI_CHECK(MPI_Comm_split(pool_, MPI_UNDEFINED, 0, &none));
  MPI_Comm inter = MPI_COMM_NULL;
  const int first = static_cast<int>(r.spare_pool_rank.at(static_cast<std::size_t>(r.spare_of.at(0))));
  REPRISE_MPI_CHECK(MPI_Intercomm_create(survivors, 0, pool_, first, kConnectTag, &inter));
  return inter;
}

void SparePool::retire() {
  retired_.push_back(pool_);
  pool_ = MPI_COMM_NULL;
}

void SparePool::release() {
  while (active()) {
    if (slow_barrier(pool_) == MPI_SUCCESS) return retire();
    // A spare died (or another process after the job's last agreement): the pool again without it.
    const std::optional<PoolRound> r = round(0, false);
    if (r && r->spares == 0) return retire();
  }
}

MPI_Comm SparePool::wait_until_needed() {
  // Tests: REPRISE_KILL_SPARE=START_RANK,... makes those spares die as they begin to wait (a spare lost while the
  // job runs: the others and the application's ranks go on without it).
  if (protocol::rank_listed_in_env("REPRISE_KILL_SPARE", start_rank_)) {
    std::fprintf(stderr, "reprise: spare process (start rank %d): REPRISE_KILL_SPARE: SIGKILL as it waits\n",
                 start_rank_);
    std::fflush(stderr);
    raise(SIGKILL);
  }
  for (;;) {
    if (slow_barrier(pool_) == MPI_SUCCESS) leave(true, "");
    // A process of the pool failed, or a recovery's survivors revoked it: rounds until this spare is needed or
    // may wait again (a new round whenever one is interrupted by another failure).
    for (;;) {
      const std::optional<PoolRound> r = round(0, false);
      if (!r) continue;
      if (!r->application) leave(false, "no application rank is left (the job failed)");
      if (r->failed == 0) break;  // only spares failed, or the end of the job came after one did
      if (r->spares < r->failed)
        leave(false, "the recovery of " + std::to_string(r->failed) + " failed rank(s) needs more than the " +
                         std::to_string(r->spares) +
                         " spare(s) left: its replacements are spawned (or, with REPRISE_SPAWN=0, the job stops)");
      const auto at = std::find(r->spare_of.begin(), r->spare_of.end(), r->spare_index);
      const bool taken = at != r->spare_of.end();
      MPI_Comm mine = MPI_COMM_NULL;  // the spares taken, in the order of the ranks they replace
      if (MPI_Comm_split(pool_, taken ? 1 : MPI_UNDEFINED, static_cast<int>(at - r->spare_of.begin()), &mine) !=
          MPI_SUCCESS)
        continue;
      if (!taken) break;
      REPRISE_MPI_DISCARD(MPI_Comm_set_errhandler(mine, MPI_ERRORS_RETURN));  // (a default handler aborts)
      MPI_Comm inter = MPI_COMM_NULL;
      const int rc = MPI_Intercomm_create(mine, 0, pool_, r->survivors_leader, kConnectTag, &inter);
      if (rc == MPI_SUCCESS) {
        retired_.push_back(mine);
        spare_ = false;  // an application rank from now on (in later rounds too)
        std::fprintf(stderr, "reprise: spare process (start rank %d) replaces a failed rank\n", start_rank_);
        return inter;
      }
      // The survivors abandoned this attempt (another process failed): the others taken learn it here, and all
      // take part in the next attempt's round.
      revoke(mine);
      retired_.push_back(mine);
    }
  }
}

void SparePool::leave(bool job_ended, const std::string& why) {
  if (!job_ended) std::fprintf(stderr, "reprise: spare process (start rank %d) leaves: %s\n", start_rank_, why.c_str());
  std::fflush(nullptr);
  if (job_ended) {
    retire();
    for (MPI_Comm& c : retired_)
      if (c != MPI_COMM_NULL) REPRISE_MPI_DISCARD(MPI_Comm_free(&c));  // (leaving)
    REPRISE_MPI_DISCARD(MPI_Finalize());                               // (leaving)
  }
  // Not through main(): the program's own code after the runtime's set-up is the application's, not a spare's.
  _exit(0);
}

}  // namespace reprise::mpi
