// The restart coordinator (../shared/PROTOCOL.md, recovery steps 6-7): the lowest surviving rank releases replays
// and blocked processes by phase, so that a replay never overtakes an orphan's notification.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "protocol/process.hpp"

namespace reprise::protocol {

/// The restart coordinator's release rule (steps 6-7, HydEE Algorithms 3-4 with the first notifications sent).
/// Items are blocked processes (released at their phase) and batches of replays (released at their phase). An
/// item is released once no orphan is outstanding at a strictly lower phase; a Notify removes one orphan.
class Coordinator {
 public:
  using Kind = ItemKind;
  struct Item {
    int process;
    Kind kind;
    std::uint64_t phase;
  };
  /// Starts epoch `epoch` with every report in: the items and the phases of every orphan.
  void begin(std::uint32_t epoch, std::vector<Item> items, const std::vector<std::uint64_t>& orphan_phases);
  /// Items releasable now (each returned once).
  std::vector<Item> release();
  /// A Notify(phase) of epoch `epoch`; stale epochs are ignored (returns false). A Notify matching no orphan is a
  /// ProtocolError (the application is not send-deterministic, or the counts are wrong).
  bool notify(std::uint32_t epoch, std::uint64_t phase);
  /// Every orphan notified and every item released: the epoch is over.
  bool done() const;
  std::uint32_t epoch() const { return epoch_; }
  /// The lowest phase with an outstanding orphan (none: no limit).
  std::optional<std::uint64_t> lowest_orphan_phase() const;

 private:
  std::uint32_t epoch_ = 0;
  std::vector<Item> items_;
  std::map<std::uint64_t, std::int64_t> orphans_;  // phase -> outstanding count
};

/// The restart coordinator of a recovery that rolls back `rolled_back`: the lowest rank of the `ranks` outside it
/// (-1 when every rank rolls back: then no coordinator orders the replays).
int restart_coordinator(int ranks, const std::set<int>& rolled_back);

}  // namespace reprise::protocol
