#include "mpi/recovery_watch.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/thread_name.hpp"

namespace reprise::mpi {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

RecoveryWatch::RecoveryWatch(RecoveryWatch*& slot, std::string who, std::chrono::milliseconds every,
                             std::chrono::seconds limit)
    : slot_(slot),
      who_(std::move(who)),
      every_(every),
      limit_(limit),
      thread_(core::named_thread("reprise-watch", [this] { run(); })) {
  slot_ = this;
}

RecoveryWatch::~RecoveryWatch() {
  slot_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RecoveryWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto t0 = Clock::now();
  const auto never = t0 + std::chrono::hours(24 * 365);  // (not time_point::max(): converted, it overflows)
  const auto give_up = limit_.count() > 0 ? t0 + limit_ : never;
  auto report = every_.count() > 0 ? t0 + every_ : never;
  for (;;) {
    if (cv_.wait_until(lock, std::min(report, give_up), [this] { return done_; })) return;
    const auto now = Clock::now();
    if (now >= give_up) {
      // Stuck in a shrink or a spawn, not passing through one: a recovery that loops over attempts is in a shrink
      // now and then.
      const bool stuck = 2 * since(stage_since_) >= limit_.count();
      const bool shrink = stuck && std::strstr(stage_, "MPIX_Comm_shrink") != nullptr;
      const bool spawn = stuck && std::strstr(stage_, "MPI_Comm_spawn") != nullptr;
      std::fprintf(stderr,
                   "reprise: %s: the recovery has not finished after %lld s (%s for %.1f s%s): this "
                   "process stops with exit status 4 so that the job ends instead of hanging. Checkpoint files "
                   "already written (REPRISE_DIR) are intact: relaunch the job. REPRISE_RECOVERY_TIMEOUT_S sets "
                   "the limit (0: none).\n",
                   who_.c_str(), static_cast<long long>(limit_.count()), stage_, since(stage_since_),
                   shrink  ? "; a shrink that never returns while every survivor is in it is an Open MPI bug, "
                             "open-mpi/ompi#13138"
                   : spawn ? "; a spawn that never returns after failures is a known weakness of Open MPI 5.0.x's "
                             "ULFM (open-mpi/ompi#12585, open-mpi/ompi#13325): spare processes (REPRISE_SPARES, "
                             "scripts/mpirun.sh --spares K) take failed ranks' places without spawning"
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

}  // namespace reprise::mpi
