// RecoveryWatch: a recovery that hangs inside the MPI library is said, and ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace reprise::mpi {

// A recovery's stages are calls into the MPI library (shrink, spawn, merge, agreements) and point-to-point moves
// of checkpoints; one that hangs inside the library would say nothing. While a recovery lasts longer than
// `every` (Config::recovery_watch_ms), this says on stderr, every `every`, which stage the rank is in and for how
// long; one that lasts longer than `limit` (Config::recovery_timeout_s) stops the process with exit status 4 and
// says why, so that the job ends instead of hanging forever. A replacement process watches its own part (from the
// repaired communicator to its checkpoints). Zero turns either off.
class RecoveryWatch {
 public:
  /// Registers itself in `slot` (where recovery stages are reported) until destroyed. `who`: "rank 3".
  RecoveryWatch(RecoveryWatch*& slot, std::string who, std::chrono::milliseconds every, std::chrono::seconds limit);
  ~RecoveryWatch();
  RecoveryWatch(const RecoveryWatch&) = delete;
  RecoveryWatch& operator=(const RecoveryWatch&) = delete;
  void stage(const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    stage_ = what;
    stage_since_ = std::chrono::steady_clock::now();
  }

 private:
  void run();

  RecoveryWatch*& slot_;
  const std::string who_;
  const std::chrono::milliseconds every_;
  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  const char* stage_ = "starting";
  std::chrono::steady_clock::time_point stage_since_ = std::chrono::steady_clock::now();
  std::thread thread_;  // last: started once the rest is initialised
};

}  // namespace reprise::mpi
