// The hierarchical protocol's core (../shared/PROTOCOL.md: HydEE, seed 000 section 5, with its gaps closed): the
// state of one process and the restart coordinator's release rule, as plain state and decisions over no
// transport at all. The driver moves the messages: an in-process deterministic transport in the tests
// (tests/protocol/protocol_sim.hpp), MPI in the runtime. What the driver must do is said at each call.
//
// Vocabulary: channel p->q carries p's messages to q in FIFO order; `seq` numbers them from 1. R = the processes
// of the groups that roll back after a failure, S = the others (survivors).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "logging/message_log.hpp"
#include "protocol/group_map.hpp"

namespace reprise::protocol {

/// Piggybacked on every application message: the sender's sequence number on the channel, its phase when it
/// sent, its group. (Recovery control messages carry the recovery epoch besides; see Coordinator.)
struct Header {
  std::uint64_t seq = 0;
  std::uint64_t phase = 0;
  std::int32_t group = -1;
};

/// A group's committed view of one channel, as announced after a commit: q's committed delivered[p] and sent[p].
struct View {
  std::uint64_t delivered = 0;
  std::uint64_t sent = 0;
};

/// One channel pair with a peer q as this process counts it: sent[q], delivered[q] and q's group's committed view.
struct Channel {
  std::uint64_t sent = 0;
  std::uint64_t delivered = 0;
  View view;
};
/// The peers a process has exchanged messages with (or learned a view from), ascending. Sparse: a process of a
/// job of N ranks holds one entry per peer, not N (docs/SCALING.md).
using Channels = std::map<int, Channel>;

/// What a process knows about a peer after the restart exchange (PROTOCOL.md recovery step 4).
struct PeerCounts {
  int peer = -1;
  bool rolled_back = false;             ///< the peer is in R
  std::uint64_t delivered_from_me = 0;  ///< peer's current delivered[me] (restored value if it rolled back)
  std::uint64_t sent_to_me = 0;         ///< peer's current sent[me]
  View committed;                       ///< peer's group's committed view of the channel (GC)
};

/// What a rolled-back or surviving process must do in a recovery (steps 5-6), from Process::recover().
struct RecoveryWork {
  std::map<int, std::vector<std::uint64_t>> replays;  ///< dest -> seqs to replay from the log, ascending
  std::vector<std::uint64_t> orphan_phases;           ///< phases of the orphans this process holds (one per orphan)
  std::set<std::uint64_t> replay_phases;              ///< distinct phases of the replays (coordinator items)
  std::uint64_t phase = 0;                            ///< the process's phase (its block item)
  std::size_t replay_bytes = 0;
};

/// Per peer: (seq, sender's phase) of the inter-group messages delivered from it that its group's committed view
/// does not cover yet, seq ascending (deliveries on a channel are in seq order). Only peers with such messages
/// have an entry (a map, not one queue per rank of the job: an empty std::deque alone takes about 600 bytes).
using OrphanRecord = std::map<int, std::deque<std::pair<std::uint64_t, std::uint64_t>>>;

/// A coordinator item: a blocked process, or a batch of replays, released at its phase.
enum class ItemKind { Block, Replay };

/// Everything a group checkpoint captures of the protocol state besides the application's data [model].
struct Capture {
  std::uint64_t phase = 0;
  Channels channels;
  OrphanRecord orphan_record;
  logging::Snapshot log;
  std::uint64_t sent(int q) const { return at(q).sent; }
  std::uint64_t delivered(int q) const { return at(q).delivered; }
  View view(int q) const { return at(q).view; }
  Channel at(int q) const {
    const auto it = channels.find(q);
    return it == channels.end() ? Channel{} : it->second;
  }
};

class Process {
 public:
  /// `group_of[q]` is q's group, for every process q.
  Process(int id, const std::vector<int>& group_of, logging::LogOptions log_options = {},
          logging::MessageLog::Allocate allocate = nullptr);
  Process(int id, GroupMap groups, logging::LogOptions log_options = {},
          logging::MessageLog::Allocate allocate = nullptr);

  int id() const { return id_; }
  /// The job's size: the number of processes this state can count channels with.
  std::size_t ranks() const { return groups_.ranks(); }
  int group() const { return group_; }
  int group_of(int q) const { return groups_(q); }
  bool inter(int q) const { return group_of(q) != group(); }
  std::uint64_t phase() const { return phase_; }
  std::uint64_t sent(int q) const { return channel(q).sent; }
  std::uint64_t delivered(int q) const { return channel(q).delivered; }
  View view(int q) const { return channel(q).view; }
  /// Every peer with a count or a view, ascending.
  const Channels& channels() const { return channels_; }
  /// Bytes of protocol state this process holds besides log payloads: channels, orphan record, recovery limits,
  /// the outbox's queued items, the group table (an estimate from the containers' node sizes).
  std::size_t state_bytes() const;
  /// The sender's phase of orphan-record entry (q, seq), if this process holds it.
  std::optional<std::uint64_t> orphan_phase(int q, std::uint64_t seq) const;
  const logging::MessageLog& log() const { return log_; }
  logging::MessageLog& log() { return log_; }

  // ---- normal operation ------------------------------------------------------------------------------------
  struct Send {
    Header header;
    bool logged = false;            ///< appended to the log (inter-group and not yet covered by the receiver's view)
    bool orphan = false;            ///< a re-executed send the receiver already delivered: do NOT send it; send
                                    ///< Notify(header.phase) to the coordinator instead (step 5)
    std::byte* log_slot = nullptr;  ///< logged with payload == nullptr: where the caller copies the payload
    bool duplicate = false;         ///< a re-executed send another rolled-back receiver had already delivered (its
                                    ///< restored counts say so): do not send it (it would only be dropped there, and
                                    ///< over MPI a large message nobody receives never completes); no Notify either
  };
  /// The application sends `bytes` at `payload` (host memory) to `dest`: counts it, logs it when inter-group.
  /// The driver sends the message with the header unless `orphan`, queued behind pending replays (outbox()).
  /// With `payload` == nullptr the entry is reserved and `log_slot` says where to copy the payload (so the copy
  /// can overlap the transfer; it must be done before the send is reported complete).
  Send send(int dest, std::int32_t tag, const void* payload, std::size_t bytes);

  enum class Arrival { Deliver, Duplicate, Early };
  /// How an arriving message from `src` must be treated: Duplicate (seq already delivered: drop it), Early (a gap
  /// before it: hold it until the gap fills; a gap that never fills is a ProtocolError), Deliver.
  Arrival arrival(int src, const Header& h) const;
  /// The application receives the message (arrival() said Deliver): counts, phase, orphan record.
  void deliver(int src, const Header& h);

  // ---- group checkpoint and GC ----------------------------------------------------------------------------
  /// The group barrier's maximum phase (every member takes it before capture) [model].
  void raise_phase(std::uint64_t group_max);
  /// Capture for a group checkpoint: counters, phase, orphan record, views, and a copy-on-write log snapshot.
  Capture capture();
  /// Roll back to a capture (the group's committed version).
  void restore(const Capture& c);
  /// q's group committed a version in which q had delivered `delivered` messages from this process and sent
  /// `sent` to it: log entries to q up to `delivered` and orphan records from q up to `sent` are released.
  void apply_view(int q, const View& v);

  // ---- recovery -------------------------------------------------------------------------------------------
  /// Steps 4-6 at this process once the restart exchange told it every inter-group peer's counts. `rolled_back`:
  /// this process is in R (it restored its group's committed version first). Queues the owed replays in the
  /// outbox, sets the orphan limits (R only), applies the views learned, and returns the coordinator's inputs.
  /// Throws ProtocolError when the log lacks an owed entry (it can only be lost with the data of its sender).
  /// `gated`: the coordinator orders the replays (S is not empty). Then a survivor may compute and receive but
  /// sends nothing new until its Block item is released (send_blocked()), a rolled-back process does not run
  /// until then (blocked()), and replays wait for their Replay item.
  RecoveryWork recover(bool rolled_back, const std::vector<PeerCounts>& peers, bool gated);
  /// The coordinator released one of this process's items.
  void release(ItemKind kind, std::uint64_t phase);
  bool blocked() const { return blocked_; }
  /// Still re-executing after a rollback: waiting for the coordinator's release, or not yet past the sends its
  /// receivers had already delivered (orphans and duplicates it must not send again). A new recovery must roll
  /// such a process back again: its limits are only valid in the recovery that computed them.
  bool reexecuting() const;
  bool send_blocked() const { return send_blocked_; }
  /// During a recovery with orphans outstanding, the highest phase a new message to another group may have now:
  /// the restart floor (the lowest phase of an orphan not yet notified; ~0: none). A new message at a higher phase
  /// may depend on such an orphan (phases grow along every causal chain that crosses groups): sent now, a
  /// rolled-back receiver could deliver it before its re-execution reaches that orphan's send (a receive from any
  /// rank takes it in place of the message it took the first time), so it is queued until the floor reaches its
  /// phase. HydEE keeps a survivor blocked until the notification of its current phase; here a survivor computes
  /// and receives meanwhile (step 6), so its phase, and that of what it sends once released, may pass the floor.
  void limit_new_sends(std::uint64_t floor) { new_limit_ = floor; }
  /// Whether a new message to `dest` at `phase` must wait (limit_new_sends).
  bool new_send_held(int dest, std::uint64_t phase) const { return phase > new_limit_ && inter(dest); }
  /// A restart coordinator's release is still to come for this process (its block, or queued replays).
  bool awaiting_release() const {
    return blocked_ || send_blocked_ ||
           ((release_phase_ != INT64_MAX || new_limit_ != ~std::uint64_t{0}) && !outbox_.empty());
  }
  /// What repair discards at a process of R: the outbox (its replays are recomputed) and any gating.
  void reset_recovery_state();

  // ---- the outbox: per channel, replays first (in seq order), new messages behind them (step 8) -----------
  struct Outgoing {
    Header header;
    bool replay = false;
    std::int32_t tag = 0;
    std::vector<std::byte> payload;
  };
  /// New messages must go through here while a channel has queued items (has_queue); otherwise they may be
  /// sent at once.
  bool has_queue(int dest) const;
  void queue_new(int dest, const Header& h, std::int32_t tag, const void* payload, std::size_t bytes);
  /// Pops what may be sent on `dest` now: replays with phase <= the released phase, and new messages behind them
  /// that new_send_held() does not hold.
  std::vector<Outgoing> ready(int dest);
  std::vector<int> queued_dests() const;

 private:
  Channel channel(int q) const {
    const auto it = channels_.find(q);
    return it == channels_.end() ? Channel{} : it->second;
  }

  int id_;
  GroupMap groups_;
  int group_;
  std::uint64_t phase_ = 0;
  Channels channels_;
  OrphanRecord orphan_record_;
  std::map<int, std::uint64_t> orphan_limit_;  // R only, during a recovery: x -> x.delivered[me], x in S
  std::map<int, std::uint64_t> dup_limit_;     // R only, during a recovery: x -> x.delivered[me], x in R
  bool blocked_ = false, send_blocked_ = false;
  std::int64_t release_phase_ = INT64_MAX;       // replays with phase <= this may go; -1: none yet
  std::uint64_t new_limit_ = ~std::uint64_t{0};  // new messages to other groups with phase <= this may go
  logging::MessageLog log_;
  struct Queued {
    bool replay;
    std::uint64_t seq;  // replay: the log entry
    Outgoing message;   // new message
  };
  std::map<int, std::deque<Queued>> outbox_;
};

}  // namespace reprise::protocol
