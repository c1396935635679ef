// The state behind reprise::Comm (include/reprise/comm.hpp): the protocol core of this process over MPI, the
// channel counters that go into every checkpoint, the committed views announced to other groups.
// Main thread only (the application's thread); the runtime's hooks are called from it too.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coord/protocol.hpp"
#include "reprise/comm.hpp"

namespace reprise::detail {

/// What CommState needs from the runtime that owns it.
class CommHost {
 public:
  virtual ~CommHost() = default;
  virtual MPI_Comm message_comm() const = 0;  ///< application messages (replaced by every recovery)
  virtual MPI_Comm payload_comm() const = 0;  ///< the payloads of large messages (tag: seq mod 32768)
  virtual MPI_Comm view_comm() const = 0;     ///< committed-view announcements
  /// MPI_SUCCESS: nothing; a process failure: repair, then throw Rollback; other errors: throw Error.
  virtual void check_mpi(int rc) = 0;
};

/// Sent before every payload. Small payloads (up to kPackLimit) travel in the same MPI message, packed behind it;
/// larger ones follow as a second, contiguous MPI message on the payload communicator, tagged with the message's
/// seq (mod 32768), so they are never copied and go through MPI's fastest path (single copy for large contiguous
/// messages); the receiver posts that receive when the header has told it the size. (With the payload on the
/// header's communicator and tag, a second receive posted for the same source and tag could match it.)
struct WireHeader {
  std::uint64_t seq;
  std::uint64_t phase;
  std::uint64_t bytes;
  std::int32_t group;
  std::uint32_t magic;
};
static_assert(sizeof(WireHeader) == 32);
constexpr std::size_t kPackLimit = 4096;

class CommState;

struct PendingMessage {
  bool receive = false;
  int peer = -1;
  int tag = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  WireHeader header{};
  std::vector<std::byte> packed;            // header + small payload
  MPI_Request request = MPI_REQUEST_NULL;   // the header message
  MPI_Request payload = MPI_REQUEST_NULL;   // the separate payload of a large message
  bool done = false;
  std::size_t result = 0;
  CommState* owner = nullptr;  // receives waiting for their header are registered there
  ~PendingMessage();
};

class CommState {
 public:
  CommState(CommHost& host, int rank, std::vector<int> group_of);

  Comm& comm() { return comm_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(group_of_.size()); }
  int group_of(int r) const { return group_of_.at(static_cast<std::size_t>(r)); }

  Comm::Request isend(const void* buf, std::size_t bytes, int dest, int tag);
  Comm::Request irecv(void* buf, std::size_t bytes, int src, int tag);
  std::size_t wait(Comm::Request& r);
  bool test(Comm::Request& r);

  // ---- the runtime's hooks ----------------------------------------------------------------------------------
  /// The protected region holding the channel counters of each version: phase, then sent[], delivered[],
  /// view.delivered[], view.sent[] (one uint64 per rank each).
  void* region() { return region_.data(); }
  std::size_t region_bytes() const { return region_.size() * sizeof(std::uint64_t); }
  /// What this member contributes to the group barrier of a checkpoint: its phase, then its sent[] and
  /// delivered[] counts for every member of its group (in rank order).
  std::vector<std::uint64_t> barrier_contribution();
  /// The group barrier's result, `member(i)` being member i's contribution: every intra-group channel must be
  /// empty (ProtocolError otherwise), the members take the group's maximum phase, then the state is captured into
  /// the region for `version`.
  void barrier_result(const std::vector<const std::uint64_t*>& member, std::uint64_t version);
  /// The group committed `version`: announce the delivered/sent counts of that version to every other group.
  void committed(std::uint64_t version);
  /// restore(version) rewrote the region: the protocol state comes back from it.
  void after_restore(std::uint64_t version);
  /// The run starts over from the beginning (nothing was committed before a failure).
  void start_over();
  /// The communicators were replaced by a recovery: forget requests on the old ones.
  void after_repair();

  std::string stats_json() const;
  const proto::Process& process() const { return *p_; }

 private:
  friend class reprise::Comm;
  void poll_views();
  void maybe_poll_views();
  /// Advances a pending message; `block`: until it completed. Returns whether it completed.
  bool progress(PendingMessage& m, bool block);
  /// Completes `r`: blocking, it keeps every registered receive moving meanwhile (a large payload's receive is
  /// posted when its header arrives, and its sender may be this rank's peer blocked in turn).
  bool finish(MPI_Request& r, MPI_Status* st, bool block, const PendingMessage* self);
  void header_arrived(PendingMessage& m, const MPI_Status& st);
  void advance_headers(const PendingMessage* except);
  void forget(PendingMessage* m);
  friend struct PendingMessage;
  void deliver(PendingMessage& m);
  void check_tag(int tag) const;

  CommHost& host_;
  int rank_;
  std::vector<int> group_of_;
  std::unique_ptr<proto::Process> p_;
  std::vector<std::uint64_t> region_;
  std::map<std::uint64_t, proto::Capture> captures_;  // versions not yet committed, and the newest committed
  std::optional<std::uint64_t> announced_;
  unsigned ops_since_poll_ = 0;
  std::vector<PendingMessage*> awaiting_header_;
  std::deque<std::pair<MPI_Request, std::array<std::uint64_t, 2>>> view_sends_;
  struct Stats {
    std::uint64_t intra_messages = 0, intra_bytes = 0, inter_messages = 0, inter_bytes = 0, received = 0;
    std::uint64_t views_sent = 0, views_received = 0, released = 0, channel_checks = 0;
    std::size_t log_max_held = 0;
  } stats_;
  Comm comm_;
};

}  // namespace reprise::detail
