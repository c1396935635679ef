// The buddy level over MPI (a part of MpiCoordination with its own state): the owner ships each version to its
// buddy while the drain fills it; the progress thread receives its wards' versions, checks each against its
// checksum, stores and acknowledges it, so a version reaches the buddy while the application computes without
// calling the runtime. It also receives the job floor's messages for GroupCommit.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/bytes.hpp"
#include "core/version_store.hpp"
#include "protocol/buddy_store.hpp"

namespace reprise::mpi {

class MpiCoordination;

class BuddyLink {
 public:
  /// Before a ward's version is received into new memory, the rank's memory kept for reuse goes first over its
  /// budget (MpiCoordination::make_room).
  explicit BuddyLink(MpiCoordination& job);
  BuddyLink(const BuddyLink&) = delete;
  BuddyLink& operator=(const BuddyLink&) = delete;
  ~BuddyLink() { stop(); }

  /// This rank's store: `local` (memory or files) and, shipped through this link, its buddy's copy. Starts the
  /// progress thread.
  std::unique_ptr<protocol::BuddyStore> make_store(std::unique_ptr<core::VersionStore> local);
  /// The progress thread (stopped for a repair, started again on the repaired communicators).
  void start();
  void stop();
  /// Poll fast again: a checkpoint of this rank, whose ward normally checkpoints at the same step.
  void hurry();
  /// This rank's own version starts on its way: its ward, checkpointing at the same step, is about to ship its
  /// own. Polls every kPollMin until a ward's version comes, for at most kFastWindow.
  void expect_ward();

  /// What this rank holds for `ward` (created empty on first use).
  core::VersionStore& ward_store(int ward);
  /// f(ward, store) for every ward this rank holds versions of, under the wards' lock.
  void for_each_ward(const std::function<void(int, core::VersionStore&)>& f);
  /// Host memory the wards' copies hold, with the receive buffers kept for reuse.
  std::size_t memory_bytes();
  /// What the wards' stores hold, and a version arriving for one of them (memory_bytes() without the receive
  /// buffers kept for reuse).
  std::size_t copies_bytes();
  /// Frees receive buffers kept for reuse, up to `bytes`; returns how much. Any thread.
  std::size_t shed(std::size_t bytes);
  void drop_wards();
  /// "wards" and "receive_buffers" of MpiRuntime::buddy_json().
  nlohmann::json json();

 private:
  class Link;    // the owner side: ships this rank's versions to its buddy (drain thread)
  class Stream;  // one version on its way, piece by piece as the drain fills it
  void progress_loop();
  bool corrupt_due(int owner, std::uint64_t version);  // REPRISE_CORRUPT_SHIPPED (tests)
  void fit_budget();                                   // over the memory budget: fewer receive buffers kept

  // Idle, the progress thread polls less and less often: kPollMin after a message, doubling up to kPollMax while
  // nothing comes (each wake-up takes a core from the application for a moment; bench/results has the cost).
  // hurry() starts fast polling again: a version noticed up to kPollMax late commits late, and frees logs late.
  // expect_ward() keeps it fast for kFastWindow or until a ward's version comes: the ward ships once its own
  // checkpoint() returned, tens of milliseconds after hurry(), when polling had slowed to several ms (3-8 ms of
  // the 5% commit latency in bench/results/README.md). Ranks checkpointing at the same step return within tens of
  // ms of each other (1-37 ms in traced runs on the 2-core VM); a window that finds nothing costs 100 polls.
  static constexpr std::chrono::microseconds kPollMin{500}, kPollMax{10000};
  static constexpr std::chrono::milliseconds kFastWindow{50};

  MpiCoordination& job_;
  std::shared_ptr<protocol::Shipper> shipper_;  // a Link; FilesOnly without a buddy
  std::atomic<bool> stop_{false};
  std::mutex poll_mutex_;  // the progress thread's idle wait, cut short by hurry()
  std::condition_variable poll_cv_;
  bool poll_soon_ = false;
  bool fast_window_ = false;  // expect_ward() was called
  std::thread progress_;
  std::mutex wards_mutex_;
  std::map<int, std::unique_ptr<core::VersionStore>> wards_;
  // The buffer of a ward's version being received (recv_version): counted with the copies, so that the budget sees
  // it while it arrives, not from its store on only. Set to 0 under wards_mutex_ as the store takes it.
  std::atomic<std::size_t> arriving_{0};
  // Payload buffers of the versions held for wards, recycled: a version released goes back to the pool and the
  // next one is received into it, not into fresh memory first touched by the receive on the progress thread.
  std::shared_ptr<core::BufferPool> ward_pool_ = std::make_shared<core::BufferPool>(8);
  bool trim_warned_ = false;  // (the progress thread's)
  std::atomic<std::uint64_t> fresh_{0}, reused_{0};
  std::atomic<std::uint64_t> passed_over_{0};  // fresh although the pool kept buffers (all too large)
  // Per ward (progress thread): the sizes of its last full and differential versions, so that the buffer its next
  // version will need (a full one's after the last differential one of a chain) is touched before it arrives.
  std::map<int, std::pair<std::size_t, std::size_t>> ward_sizes_;
  int corrupted_ = 0;  // copies damaged on purpose (progress thread)
};

}  // namespace reprise::mpi
