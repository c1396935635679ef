// The state behind reprise::Comm (include/reprise/comm.hpp): the protocol core of this process over MPI, the
// channel counters that go into every checkpoint, the committed views announced to other groups.
// Main thread only (the application's thread); the runtime's hooks are called from it too.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mpi/check.hpp"
#include "protocol/capture_regions.hpp"
#include "protocol/coordinator.hpp"
#include "protocol/device_mpi.hpp"
#include "protocol/job_floor.hpp"
#include "protocol/process.hpp"
#include "protocol/restart_exchange.hpp"
#include "reprise/comm.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {

/// MPI_Iprobe(MPI_ANY_SOURCE, tag, comm). With ULFM a wildcard probe also reports, with flag set and no source
/// (negative), that this process learnt of a process failure *anywhere* since the communicator last
/// acknowledged one (MPI_ERR_PROC_FAILED_PENDING), e.g. the failure a repair already handled, learnt late. Then:
/// a failed member of `comm` gives MPI_ERR_PROC_FAILED; otherwise the notice is acknowledged and flag is 0.
int probe_any_source(MPI_Comm comm, int tag, int* flag, MPI_Status* st);

/// What CommState needs from the runtime that owns it.
class CommHost {
 public:
  virtual ~CommHost() = default;
  virtual MPI_Comm view_comm() const = 0;  ///< committed-view announcements
  /// The current recovery's control messages (Notify, restart floors) and the restart exchange; replaced by every
  /// repair.
  virtual MPI_Comm control_comm() const = 0;
  /// MPI_SUCCESS: nothing; a process failure: repair, then throw Rollback (or, at a survivor of a group
  /// rollback, return once the job is repaired); other errors: throw Error naming the call `at`.
  /// REPRISE_COMM_CHECK(call) calls it.
  virtual void check_mpi(int rc, const CallSite& at) = 0;
  /// A failure the runtime's threads detected: recover as check_mpi does.
  virtual void poll_failure() = 0;
  /// Called right before this process's restart exchange (failure injection: REPRISE_KILL's `exchange` point).
  virtual void before_restart_exchange() {}
  /// For the restart exchange: MPI_SUCCESS: nothing; a process failure: throw the runtime's internal PeerFailure
  /// (the caller starts a new repair attempt); other errors: throw Error. (REPRISE_MPI_CHECK's reading.)
  virtual void collective_ok(int rc, const CallSite& at) = 0;
  /// The device backend for Comm's device buffers (created on first use; DeviceError when there is none).
  virtual gpu::Backend& device() = 0;
  /// Whether a pointer may be device memory (CUDA with a usable GPU): only then is CUDA asked where it lives.
  virtual bool device_pointers_possible() = 0;
  /// Whether device buffers go to MPI as they are (a CUDA-aware MPI) or through pinned host memory, and why
  /// (protocol::choose_device_mpi). Asked once, at the first device message, after device().
  virtual protocol::DeviceMpiChoice device_mpi() = 0;
  /// A failure code from a blocking call although no process of the job failed and no communicator of this
  /// rank is revoked: Open MPI wakes every blocking wait of the process with such a code when it learns of any
  /// failure or revocation (e.g. a late notice of a failure already recovered from). The call is to be repeated.
  virtual bool spurious(int rc) = 0;
  /// A failure code with which MPI completed (and freed) a request of reprise::Comm. Never spurious, whatever
  /// ULFM's notices say yet: Open MPI fails a request only when its peer died or its communicator was revoked,
  /// and this process may learn it from the request before its failed-process group shows it (a stress run saw a
  /// receive completed this way taken for a message of 0 bytes). Recovers as check_mpi does; other errors throw.
  virtual void request_failed(int rc, const CallSite& at) = 0;
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
/// Header and payload go as one MPI message when together they fit in kPackedBytes, which stays within the
/// eager limit of shared-memory transports (Open MPI 5's sm BTL: about 4016 B, its own headers filling the rest of
/// a 4 KiB fragment), so a message raw MPI sends eagerly is not sent by rendezvous here. Above the limit the
/// payload is a second message. (The measurements behind the limit: bench/results/README.md, logging.)
constexpr std::size_t kPackedBytes = 4000;
constexpr std::size_t kPackLimit = kPackedBytes - sizeof(WireHeader);    // the largest payload packed: 3968 B
constexpr std::size_t kReceiveBuffer = sizeof(WireHeader) + kPackLimit;  // what every receive posts first
constexpr std::size_t kSpareReceiveBuffers = 16;                         // kept for reuse by later receives

class CommState;

struct PendingMessage {
  bool receive = false;
  int peer = -1;
  int tag = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  WireHeader header{};
  std::vector<std::byte> packed;           // header + small payload
  MPI_Request request = MPI_REQUEST_NULL;  // the header message
  MPI_Request payload = MPI_REQUEST_NULL;  // the separate payload of a large message
  bool done = false;
  std::size_t result = 0;
  int epoch = 0;  // the communicators its MPI requests are on (CommState::epochs_)
  // A device buffer. Staged (an MPI that is not CUDA-aware, or a payload packed behind its header): the host bytes
  // MPI sends or receives are `staged` (pinned), held by `hold` (a staging buffer, or the log segment a logged send
  // goes from). Direct (CommHost::device_mpi()): MPI sends or receives the device buffer itself, `staged` is null.
  bool device = false;
  std::byte* staged = nullptr;
  std::shared_ptr<void> hold;
  // A direct logged send: its payload's copy into the log entry (CommState::copy_into_log). The send completes
  // once MPI sent the device buffer and this copy is done: the application may then change the buffer.
  std::shared_ptr<gpu::Event> log_copy;
  // A send not posted yet (CommState::unposted_): a staged device payload whose D2H copy (`copied`) is enqueued on
  // Comm's stream, or any send behind such a one to the same peer (MPI matches a channel's messages in the order
  // they are posted). `from` is what MPI sends once posted.
  bool unposted = false;
  const void* from = nullptr;
  std::shared_ptr<gpu::Event> copied;
  CommState* owner = nullptr;  // pending messages are registered there (repairs reach them)
  bool held = false;           // arrived before an earlier message of its sender: held until that one is delivered
  std::vector<std::byte>* grow = nullptr;  // irecv_any_size: resized to the message's bytes when its header arrives
  // A receive of a tag range (Comm::irecv_range; tag_hi >= 0): the next message of its sender with a tag in
  // [tag_lo, tag_hi]. Posted on MPI once MPI_Iprobe finds such a message first among those of its sender that no
  // receive matched (bound: `tag` is then that message's; -1 before), unbound again when that was a duplicate it
  // dropped or its sender rolled back. A receive from the same sender posted after it, of a tag it could match,
  // is `deferred` (not posted on MPI) until it is bound: MPI matches receives in the order they were posted.
  int tag_lo = 0, tag_hi = -1;
  // A receive from any rank (MPI_ANY_SOURCE; one tag, or a range): a receive of a range whose sender is found
  // too. Unbound, `peer` is -1; MPI_Improbe(MPI_ANY_SOURCE, its tag or MPI_ANY_TAG) on each epoch's communicator in
  // use finds its message, and binding sets `peer` and `epoch` to that message's (unbound again as a range receive
  // is).
  bool any_source = false;
  bool deferred = false;
  bool synchronous = false;  // Comm::issend's: its header goes by MPI_Issend
  std::uint64_t order = 0;   // receives are numbered as they are made (MPI's matching order)
  Comm::Match* match = nullptr;
  bool ranged() const { return tag_hi >= 0; }
  bool unbound() const { return ranged() && tag < 0; }
  bool covers(int t) const { return ranged() && tag_lo <= t && t <= tag_hi; }
  ~PendingMessage();
};

class CommState {
 public:
  /// `log_options` and `log_memory`: the message log's bound and segment memory (pinned when a GPU exists).
  CommState(CommHost& host, int rank, protocol::GroupMap groups, logging::LogOptions log_options = {},
            logging::MessageLog::Allocate log_memory = nullptr);

  // Comm's own tags and the header's magic.
  static constexpr std::uint32_t kMagic = 0x52505231;  // "RPR1"
  static constexpr int kCollectiveTag = 32767;         // reserved: application tags are 0..tag_ub() but this one
  static constexpr int kViewTag = 1;                   // a committed view (on the view communicator)
  static constexpr int kAskTag = 4;                    // "your group, please checkpoint" (log bound; view comm.)
  static constexpr std::uint64_t kFloodAsk = 1;        // an ask's first word: pass it on to every group (flood_ask)
  static constexpr int kNotifyTag =
      2;                               // control: a rolled-back process re-executed an orphan send (to the coordinator)
  static constexpr int kFloorTag = 3;  // control: the restart floor, down the coordinator's tree
  static constexpr int kExchangeTag = 5;      // control: a process's words in the restart exchange (to its peer)
  static constexpr int kReportTag = 6;        // control: a process's report to the restart coordinator
  static constexpr unsigned kPollEvery = 64;  // views and control messages are polled every this many operations
  /// A large payload's tag on the payload communicator: its message's seq, mod 32768.
  static int payload_tag(std::uint64_t seq) { return static_cast<int>(seq & 0x7fff); }

  Comm& comm() { return comm_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(groups_.ranks()); }
  /// The largest tag: the MPI library's MPI_TAG_UB (at least 32767; Open MPI's is 2^31 - 1).
  int tag_ub() const { return tag_ub_; }
  int group_of(int r) const {
    if (r < 0 || r >= size())
      throw UsageError("reprise::Comm::group_of: " + std::to_string(r) + " is not a rank of this job of " +
                       std::to_string(size()) + " ranks");
    return groups_(r);
  }

  /// `space`: where the buffer lives; none: asked of CUDA (device_pointers_possible()), host otherwise.
  /// `synchronous`: Comm::issend's.
  Comm::Request isend(const void* buf, std::size_t bytes, int dest, int tag,
                      std::optional<MemorySpace> space = std::nullopt, bool synchronous = false);
  /// `tag_hi` >= 0: a receive of the tags `tag`..`tag_hi` (Comm::irecv_range: posted on MPI once its message is
  /// its sender's first unmatched one). `match`: see Comm::Match.
  Comm::Request irecv(void* buf, std::size_t bytes, int src, int tag, std::optional<MemorySpace> space = std::nullopt,
                      int tag_hi = -1, Comm::Match* match = nullptr);
  Comm::Request irecv_any_size(std::vector<std::byte>& into, int src, int tag, int tag_hi = -1,
                               Comm::Match* match = nullptr);
  bool cancel(Comm::Request& r);
  std::size_t wait(Comm::Request& r);
  bool test(Comm::Request& r, std::size_t* bytes = nullptr);  ///< bytes: received (or sent) once complete

  // ---- the runtime's hooks ----------------------------------------------------------------------------------
  /// The protected region holding the channel counters of each version (protocol::CounterRegion); `bytes`: the
  /// size recorded in a version about to be restored into it.
  std::pair<void*, std::size_t> locate_counter_region(std::optional<std::size_t> bytes);
  /// What this member contributes to the group barrier of a checkpoint: its phase, then its sent[] and
  /// delivered[] counts for every member of its group (in rank order).
  std::vector<std::uint64_t> barrier_contribution();
  /// The group barrier's result, `member(i)` being member i's contribution: every intra-group channel must be
  /// empty (ProtocolError otherwise), the members take the group's maximum phase, then the state is captured into
  /// the region for `version`.
  void barrier_result(const std::vector<const std::uint64_t*>& member, std::uint64_t version);
  /// The group committed `version`: announce the delivered/sent counts of that version to every other group
  /// (their senders release what those counts cover). Gated on the job floor (gate_views_on_job_floor), the
  /// announced version is the newest captured one not newer than the floor, and none until a floor is known.
  void committed(std::uint64_t version);
  /// Where every group restarts from one version (a coordinated rollback, REPRISE_ROLLBACK=all; a relaunch from
  /// REPRISE_DIR), a group that runs ahead must not release the senders' logs past that version: its newer
  /// commits would let a sender drop, before the sender's own checkpoint of the common version, messages the
  /// receiver needs again when it restarts from that version (a ProtocolError in the restart exchange: "owes ...
  /// but its log holds"). With the gate, a view announced is of a version <= the job floor <= the sender's
  /// newest commit, so older than any version the sender checkpoints afterwards: its log snapshot of a version v
  /// holds everything the receiver's version v lacks. The cost: logs are held while the slowest group lags.
  void gate_views_on_job_floor(bool on) { floor_gated_ = on; }
  /// The newest job floor (applied at each checkpoint, before committed(): the views it allows go then).
  void job_floor(std::uint64_t floor);
  /// The protected region holding the message log snapshot and the orphan record of the newest capture
  /// (protocol::LogRegion), so that they travel with the version to the buddy and come back with it (a
  /// replacement process gets the log it owes replays from). `bytes`: the size recorded in a version about to be
  /// restored.
  std::pair<void*, std::size_t> locate_log_region(std::optional<std::size_t> bytes);
  /// Where the newest capture goes in that region (protocol::LogRegion::plan, made at the group barrier); its fill
  /// runs on the checkpoint's background thread. A plan that changes nothing when no capture was taken since.
  protocol::LogRegion::Plan take_log_plan();
  /// restore(version) rewrote the regions: the protocol state comes back from them.
  void after_restore(std::uint64_t version);
  /// Log bound (Config::log_bound_bytes): whether this member wants its group to checkpoint now, because its
  /// log holds more than the bound (it then also asks, once per checkpoint, every process it holds log entries
  /// for: their groups' commits release those entries; gated on the job floor, every group, through the tree of
  /// the groups' first ranks: the floor must rise) or because a process of another group asked it. Clears
  /// the request. A log still over the bound at kBoundTooLowChecks checks in a row (each asked for a
  /// checkpoint) means the bound is below what the log must hold until receivers' groups commit: warned once.
  bool checkpoint_wanted();
  static constexpr std::uint64_t kBoundTooLowChecks = 32;
  void note_forced_checkpoint() { ++stats_.forced_checkpoints; }
  /// The run starts over from the beginning (nothing was committed before a failure).
  void start_over();
  /// A repair made new message communicators: channels moved to them use them from then on. The first call
  /// gives the initial ones.
  void add_epoch(MPI_Comm messages, MPI_Comm payloads);
  /// Coordinated rollback (every rank): every pending message is abandoned and every channel moves to the newest
  /// communicators.
  void after_repair();
  /// Group rollback. `rolled_back`: the ranks of R; `coordinator`: the lowest rank outside R (-1: none). At a
  /// process of R every pending message is abandoned and every channel moves; at a survivor only the channels to
  /// R move: sends to R count as done (they are logged and will be replayed), receives from R are posted again
  /// on the new communicators (a message from R that arrived only in part is dropped: R sends it again).
  /// Survivor-to-survivor channels stay on their communicators, which no repair revokes, so what is in flight
  /// there is delivered exactly once.
  void begin_recovery(std::uint32_t epoch, const std::set<int>& rolled_back, int coordinator);
  /// The restart exchange (steps 4-7): survivors call it at once, rolled-back processes once restored (at their
  /// next runtime call; exchange_pending()). Collective over the repaired job; may throw the host's PeerFailure.
  /// `in_recovery`: a failure throws the host's PeerFailure (collective_ok) instead of starting a recovery.
  void restart_exchange(bool in_recovery);
  bool exchange_pending() const { return exchange_pending_; }
  /// This process rolled back in an earlier recovery and has not caught up yet (see Process::reexecuting()).
  /// Also while it is in the recovery that rolled it back (its restart exchange not done or interrupted).
  bool reexecuting() const { return exchange_pending_ || exchanging_ || p_->reexecuting(); }
  /// Comm::reexecuting: after the pending restart exchange (which learns what the peers had delivered) and the
  /// coordinator's release.
  bool reexecuting_now() {
    enter();
    return reexecuting();
  }
  const std::vector<std::pair<MPI_Comm, MPI_Comm>>& epochs() const { return epochs_; }
  /// Runtime entry points of the application: the pending exchange, control messages, and a rolled-back process
  /// waits here for the coordinator's release before it re-executes.
  void enter();
  /// Comm::poll: what a blocking wait does between its tests (failures, headers, control messages, queued sends).
  void poll();
  /// Control messages (Notify at the coordinator, restart floors), replays and queued sends: called while waiting.
  void poll_control();
  /// Whether poll_control() has work now (a recovery under way here), or it is time for the occasional probe.
  bool control_due();
  /// The current recovery epoch is over here: no queued replay or send, nothing awaited from the coordinator.
  bool recovery_idle() const;
  /// One line on the protocol state (REPRISE_TRACE diagnostics of a wait that lasts).
  std::string debug_state() const;

  std::string stats_json() const;
  /// Host memory of the message log (segments held and pooled), its region and the staging pool.
  std::map<std::string, std::size_t> memory_use() const;
  void count_memory(const std::string& name, std::function<std::size_t()> held_bytes) {
    counted_.emplace_back(name, std::move(held_bytes));
  }
  /// Comm::on_unreceived.
  void on_unreceived(std::function<bool(int, int)> take) { take_unreceived_ = std::move(take); }
  /// Over the memory budget by `excess` bytes: the memory kept only for reuse (the log's free segments, then the
  /// staging pool's) is limited to what leaves room, for good. Returns the bytes released.
  std::size_t release_pools(std::size_t excess);
  /// Before new memory passes the budget (the runtime's make_room, any thread): the log's free segments kept for
  /// reuse are released, at least `bytes` where it keeps them (the pool's cap stays). Returns the bytes released.
  std::size_t shed_log_pool(std::size_t bytes);
  /// REPRISE_MEMORY_BUDGET without REPRISE_LOG_BOUND: the log is bounded at `bytes` (MpiCoordination::memory_budget),
  /// and says once when it first reaches it.
  void bound_log_by_budget(std::size_t bytes);
  std::size_t log_segment_bytes() const { return log_options_.segment_bytes; }
  /// The next capture's version is a full one: the log's region is rewritten compactly and sized to it
  /// (LogRegion::fit_next).
  void fit_log_region_next() { log_region_.fit_next(); }
  /// Counts the bytes sent to each peer (REPRISE_COMM_MATRIX; off by default: a map update per message).
  void count_bytes_per_peer() { count_peers_ = true; }
  /// The bytes sent to each peer so far, as `row-<rank>.matrix` in `dir` (created): REPRISE_COMM_MATRIX.
  void write_matrix_row(const std::string& dir) const;
  const protocol::Process& process() const { return *p_; }

 private:
  friend class reprise::Comm;
  void poll_views();
  void send_ask(int q, std::uint64_t kind);
  void flood_ask(int from);  // -1: from this rank's own log
  void maybe_poll_views();
  /// Advances a pending message; `block`: until it completed. Returns whether it completed.
  bool progress(PendingMessage& m, bool block);
  /// Completes `r`: blocking, it keeps every registered receive moving meanwhile (a large payload's receive is
  /// posted when its header arrives, and its sender may be this rank's peer blocked in turn).
  bool finish(MPI_Request& r, MPI_Status* st, bool block, const PendingMessage* self);
  void header_arrived(PendingMessage& m, const MPI_Status& st);
  void advance_headers(const PendingMessage* except);
  /// The result `rc` of MPI_Test on `r`: an error that left `r` pending is check_mpi's (perhaps spurious); one
  /// that freed it is request_failed's. REPRISE_COMM_TESTED(call, r) calls it.
  void tested(int rc, const MPI_Request& r, const CallSite& at);
  void forget(PendingMessage* m);
  friend struct PendingMessage;
  /// What became of an arrived message: delivered; a duplicate of one already delivered (a re-executed send after
  /// a group rollback), dropped; or early (an earlier message of its sender is not delivered yet), held.
  enum class Delivery { Delivered, Duplicate, Early };
  Delivery deliver(PendingMessage& m);
  /// Blocks until another receive of m's sender delivers the message before m (m is held). None is posted: a
  /// ProtocolError (the program waits for a message before receiving the ones its sender sent first).
  void fill_gap_before(PendingMessage& m);
  void post_receive(PendingMessage& m);
  /// Posts m's header receive on MPI (its tag known, no unbound receive of a range before it).
  void post_header(PendingMessage& m);
  /// Whether an unbound receive of a tag range from m's sender, posted before m, could match m's message.
  bool behind_unbound(const PendingMessage& m) const;
  /// The earliest unbound receive that may take `peer`'s message of `tag` on `epoch` (a range receive from that
  /// rank, or one from any rank); null: none.
  PendingMessage* owner(int peer, int epoch, int tag) const;
  /// Binds the unbound m to its sender's message of `tag` and posts it (MPI holds that message unmatched, or
  /// `message`: taken already by MPI_Improbe), then the receives deferred behind it that may go.
  void bind_to(PendingMessage& m, int peer, int epoch, int tag, MPI_Message* message = nullptr);
  /// Posts the deferred receives from `peer` (-1: from every rank) that no unbound receive holds back any more.
  void release_deferred(int peer);
  /// bind() of a receive from any rank: the first message of its tags that is not a receive's yet (a taken one,
  /// else one taken from the communicator of each epoch in use) goes to the earliest unbound receive that may take
  /// it. Of a range, a message found that no receive posted can take is kept in taken_.
  bool bind_any_source(PendingMessage& m);
  /// A message taken from MPI by a receive from any rank of a tag range (MPI_Improbe of MPI_ANY_TAG) that no receive
  /// posted could take (of another tag; under the interposition, another communicator's): kept unreceived, as MPI
  /// would keep it unmatched, until a receive that can take it is posted. Each is earlier than every message of its
  /// sender that MPI still holds, so post_header, first_unmatched_tag and bind_any_source look here first. A
  /// recovery drops those whose sender's channels moved to a newer epoch (drop_stale_taken). Few: the messages that
  /// arrived before their receives while such a receive waited; nothing here grows with the job's size.
  struct Taken {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    int epoch = 0;
  };
  /// The first taken message from `peer` (-1: from any rank) on `epoch` (-1: any) with a tag in [lo, hi].
  std::deque<Taken>::iterator find_taken(int peer, int epoch, int lo, int hi);
  /// Receives the message taken at `it` into m's header buffer (MPI_Imrecv) and forgets it there.
  void receive_taken(PendingMessage& m, const std::deque<Taken>::iterator& it);
  /// Drops the taken messages of ranks whose channels are now on another epoch (a recovery): their senders send
  /// them again, or the protocol replays them, on the new one.
  void drop_stale_taken();
  /// MPI_Improbe(MPI_ANY_SOURCE, tag, comm). A notice of a process failure (ULFM reports one to a wildcard probe of
  /// every communicator until it is acknowledged there, also a failure recovered from already: the communicators
  /// of an older epoch hold the failed ranks) is acknowledged on `comm` and left to the runtime's own detection
  /// (poll_failure); the probe then took nothing.
  int take_any(MPI_Comm comm, int tag, int* flag, MPI_Message* message, MPI_Status* st);
  /// Receives and drops a message taken from MPI that nobody is to receive: one that a rank a recovery moved to a
  /// newer epoch sent on an older epoch's communicator before it rolled back (it sends the message again, or the
  /// protocol replays it, on its new epoch; no receive is ever posted for it here).
  void drop_stale(MPI_Message& message, const MPI_Status& st);
  /// The tag of the first message from `peer` on `epoch`'s communicator that MPI holds unmatched; -1: none.
  int first_unmatched_tag(int peer, int epoch);
  /// The epochs (indexes in epochs_) that channels are on: where a receive from any rank looks (few: the one most
  /// peers are on, and the recoveries').
  std::vector<int> epochs_in_use() const;
  /// Binds (and posts) the earliest unbound receive of a range from m's sender whose range has the tag of that
  /// sender's first message MPI holds unmatched, and posts the receives deferred behind it that may go; true when
  /// m was bound so. `front`: that message's tag when it stays unmatched (none fits it), else -1.
  bool bind(PendingMessage& m, int* front = nullptr);
  /// A wait for an unbound receive whose sender's first unmatched message (`tag`) no receive posted here can
  /// take: it would never end (ProtocolError).
  [[noreturn]] void unmatched_first(const PendingMessage& m, int tag) const;
  /// One round of the progress a blocked wait makes (sends to post, headers arrived, failures, control messages).
  /// `headers`: also tests the headers awaited by receives other than `except` (a test leaves them to their own).
  void progress_others(const PendingMessage* except, bool headers = true);
  /// `synchronous`: the header (with a small payload) goes by MPI_Issend.
  int post_send(int dest, int tag, WireHeader& header, const void* buf, std::vector<std::byte>& packed,
                MPI_Request& request, MPI_Request& payload, int& epoch, bool synchronous = false);
  void abandon(PendingMessage& m);
  /// Posts the unposted sends whose copies are done (`block`: waits for them), each peer's in order. `checked`:
  /// a failed post starts the repair here; unchecked (a destructor), the next runtime call detects the failure.
  void post_unposted(bool block, bool checked = true);
  bool unposted_to(int dest) const;
  /// A repair: `m` is not sent by this process any more (abandoned, or replayed from the log).
  void drop_unposted(PendingMessage& m);
  void flush_outbox();
  template <class Queue>
  void pop_completed(Queue& sends);
  void control_send(int dest, int tag, std::uint64_t a, std::uint64_t b);
  void raise_restart_floor(std::uint64_t floor);
  /// What the restart floor (restart_floor_, just set) allows: the items held at or below it released, new messages
  /// to other groups up to it let go.
  void apply_restart_floor();
  /// Forgets the restart floor and the items held for it (a new recovery).
  void end_restart_floor() {
    held_.clear();
    restart_floor_ = 0;
    floor_open_ = false;
    if (p_) p_->limit_new_sends(protocol::kNoOrphan);
  }
  /// An MPI error `rc` in the restart exchange: a failure throws (`in_recovery`: the host's PeerFailure; else it
  /// starts a recovery, which throws Rollback) or, at a survivor of the recovery it started, returns true once that
  /// recovery's exchange ran here (the one in progress is over); a spurious error returns false. `request`: MPI
  /// failed a request (never spurious). `recoveries`: stats_.recoveries when the exchange began.
  bool exchange_error(int rc, const CallSite& at, bool request, bool in_recovery, std::uint64_t recoveries);
  /// The restart exchange's words: `mine` to their peers, what the peers sent into `received`. False when a
  /// failure meanwhile started a recovery that this process survived (its exchange then ran in there).
  bool sparse_exchange(const std::vector<protocol::ChannelWords>& mine, std::vector<protocol::ChannelWords>& received,
                       bool in_recovery);
  MPI_Comm messages_of(int peer) const { return epochs_.at(static_cast<std::size_t>(chan_.of(peer))).first; }
  void check_tag(int tag) const;
  /// A range of application tags (Comm::irecv_range): both ends tags, lo <= hi, not Comm's own 32767 between them.
  void check_range(int lo, int hi) const;

  CommHost& host_;
  int rank_;
  int tag_ub_;                 // MPI_TAG_UB of the library
  protocol::GroupMap groups_;  // shared with the Process (one table for a REPRISE_GROUPS list, else O(1))
  std::vector<int> members_;   // this rank's group, ascending
  logging::LogOptions log_options_;
  bool log_bound_by_budget_ = false, budget_warned_ = false;
  logging::MessageLog::Allocate log_memory_;
  bool asked_ = false;      // a process of another group asked this one's group to checkpoint (log bound)
  bool asks_sent_ = false;  // since the last checkpoint
  bool flooded_ = false;    // a group's first rank passed an ask for every group on since the last checkpoint
  std::optional<protocol::GroupTreeRanks> tree_;  // this rank's place among the groups' first ranks (flood_ask)
  std::unique_ptr<protocol::Process> p_;
  /// Held while p_ is replaced (start_over) and by other threads reaching its log's pool (shed_log_pool); the
  /// application thread, the only one that replaces p_, reads it without.
  std::mutex process_mutex_;
  protocol::CounterRegion counters_;
  bool on_device(const void* buf, std::optional<MemorySpace> space);
  /// Whether a device payload of `bytes` goes to MPI as it is: a payload above kPackLimit (a smaller one travels
  /// packed behind its header, in host memory) with CommHost::device_mpi() direct.
  bool device_direct(std::size_t bytes);
  std::optional<protocol::DeviceMpiChoice> device_mpi_;
  void keep(std::shared_ptr<void> memory) { kept_.push_back(std::move(memory)); }
  /// Pinned host memory for a device buffer's bytes, from a pool (pinning is slow); back to it when released.
  std::shared_ptr<std::byte> take_staging(std::size_t bytes);
  void device_to_host(void* dst, const void* src, std::size_t bytes);
  void host_to_device(void* dst, const void* src, std::size_t bytes);
  gpu::Stream& stream();
  std::unique_ptr<gpu::Stream> stream_;
  /// A logged device payload that MPI sends as it is (direct) reaches its log entry by a D2H copy on stream_,
  /// enqueued right after the send was posted: the copy overlaps the transfer and isend returns without waiting
  /// for it (a staged payload is copied into its entry first and sent from there, so it has no second copy).
  /// The copy holds the entry's segment, which a commit may release meanwhile. Until log_copies_done() no entry's
  /// bytes may be read: the capture of a checkpoint, replays and repairs call it first.
  void copy_into_log(PendingMessage& m, void* slot, const void* buf, std::size_t bytes,
                     std::shared_ptr<logging::Segment> segment);
  void log_copies_done();
  struct LogCopy {
    std::shared_ptr<gpu::Event> done;
    std::shared_ptr<logging::Segment> segment;
  };
  std::deque<LogCopy> log_copies_;        // oldest first
  std::deque<PendingMessage*> unposted_;  // sends waiting for their staging copies (PendingMessage::unposted)
  std::shared_ptr<logging::SegmentPool> staging_pool_ = std::make_shared<logging::SegmentPool>(std::size_t{64} << 20);
  std::vector<std::shared_ptr<void>> kept_;  // staging that MPI may still use after its request was abandoned
  protocol::LogRegion log_region_;
  std::optional<protocol::LogRegion::Plan> log_plan_;    // made at the barrier, taken by the checkpoint right after
  void drop_log_plan();                                  // one the checkpoint never took
  std::map<std::uint64_t, protocol::Capture> captures_;  // versions not yet announced, and the newest announced
  std::optional<std::uint64_t> announced_;
  // The committed view last sent to each peer of another group (its channels with traffic only): announce() sends
  // a view only when it changed, so a commit costs messages to the peers, not to every rank of other groups. A
  // repair forgets it (views in flight on revoked communicators may be lost): the next commit tells them again.
  std::map<int, protocol::View> views_told_;
  void announce(std::uint64_t through);  // the newest capture not newer than `through`, when newer than announced_
  bool floor_gated_ = false;
  std::optional<std::uint64_t> floor_;
  unsigned ops_since_poll_ = 0;
  unsigned ops_since_control_ = 0;  // control probes are throttled like views while no recovery needs them
  std::vector<PendingMessage*> awaiting_header_;
  std::vector<PendingMessage*> live_;     // every pending message
  std::vector<PendingMessage*> unbound_;  // receives of a tag range not matched yet (few)
  std::deque<Taken> taken_;               // in the order they were taken (Taken)
  std::vector<std::pair<std::string, std::function<std::size_t()>>> counted_;  // count_memory's
  // A layer above that takes a sender's first message no receive posted can take (Comm::on_unreceived): null, none.
  std::function<bool(int, int)> take_unreceived_;
  std::uint64_t receives_made_ = 0;
  std::vector<std::pair<MPI_Comm, MPI_Comm>> epochs_;  // message and payload communicators, oldest first
  // Per peer: the epoch (index in epochs_) its channels are on. Every peer's is `all` but for the ranks a recovery
  // that this process survived rolled back, moved to that recovery's epoch; a rollback of this process puts
  // every peer on the newest. Sized by the ranks rolled back since this process last was, not by the job.
  struct ChannelEpochs {
    int all = 0;
    std::map<int, int> moved;
    int of(int peer) const {
      const auto it = moved.find(peer);
      return it == moved.end() ? all : it->second;
    }
  };
  ChannelEpochs chan_;
  // Recovery (group rollback)
  std::uint32_t epoch_ = 0;
  std::set<int> rolled_back_;
  bool in_r_ = false;
  bool exchange_pending_ = false;
  std::vector<std::pair<int, std::array<std::uint64_t, 5>>> exchange_inbox_;  // (source, words) poll_control kept
  bool exchanging_ = false;  // a rolled-back process in its restart exchange (cleared once it completed)
  int coordinator_rank_ = -1;
  std::optional<protocol::Coordinator> coordinator_;  // at the coordinator, during an epoch
  // Steps 6-7: this process's items above the restart floor, the floor, and whether more floors are to come (to
  // release its items and to pass on to its children in the coordinator's tree).
  std::vector<protocol::Coordinator::Item> held_;
  std::uint64_t restart_floor_ = 0;
  bool floor_open_ = false;
  struct Outbound {
    WireHeader header{};
    std::vector<std::byte> payload, packed;
    MPI_Request request = MPI_REQUEST_NULL, payload_request = MPI_REQUEST_NULL;
    int epoch = 0;
    int dest = -1;
  };
  std::deque<std::unique_ptr<Outbound>> background_;           // replays and queued sends on their way
  std::vector<std::unique_ptr<Outbound>> buried_;              // abandoned by a repair: kept, MPI may still read them
  std::vector<std::vector<std::byte>> spare_receive_buffers_;  // of delivered receives (post_receive)
  std::vector<std::pair<MPI_Request, std::vector<std::byte>>> graveyard_;  // receives a cancel did not stop
  std::deque<std::pair<MPI_Request, std::array<std::uint64_t, 3>>> control_sends_;
  std::deque<std::pair<MPI_Request, std::array<std::uint64_t, 2>>> view_sends_;  // committed views, checkpoint asks
  struct Stats {
    std::uint64_t intra_messages = 0, intra_bytes = 0, inter_messages = 0, inter_bytes = 0, received = 0;
    std::uint64_t views_sent = 0, views_received = 0, released = 0, channel_checks = 0;
    std::size_t log_max_held = 0;
    std::uint64_t device_messages = 0, device_bytes = 0;
    std::uint64_t device_direct = 0;        // device payloads sent or received by MPI itself (no staging copy)
    std::uint64_t device_posted_later = 0;  // staged sends isend returned from before their D2H copy was done
    std::uint64_t log_over_bound = 0, asks_sent = 0, asks_received = 0, forced_checkpoints = 0;
    std::uint64_t over_bound_streak = 0, over_bound_streak_max = 0;  // log checks over the bound in a row
    std::uint64_t replayed = 0, replayed_sent = 0, replayed_bytes = 0, orphans_notified = 0, duplicates_dropped = 0,
                  duplicates_skipped = 0, recoveries = 0;
    std::uint64_t held_early = 0;     // messages that arrived before an earlier one of their sender (held)
    std::uint64_t stale_dropped = 0;  // on an older epoch's communicator, found by a receive from any rank
    std::uint64_t taken_ahead = 0;    // found by a receive from any rank of a range, kept for another (taken_)
    std::uint64_t restart_floors_received = 0, restart_floors_sent = 0;  // steps 6-7, down the coordinator's tree
  } stats_;
  std::map<int, std::uint64_t> sent_to_;  // peer -> bytes the application sent it (its peers only: sparse)
  bool count_peers_ = false;
  Comm comm_;
};

// Small sends complete in order: the completed ones at the front are dropped. An error leaves the queue as it
// is (spurious: tested again later; a repair replaced the queue).
template <class Queue>
inline void CommState::pop_completed(Queue& sends) {
  while (!sends.empty()) {
    int flag = 0;
    const int rc = MPI_Test(&sends.front().first, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      tested(rc, sends.front().first, REPRISE_MPI_SITE(MPI_Test(&sends.front().first, &flag, MPI_STATUS_IGNORE)));
      return;
    }
    if (!flag) return;
    sends.pop_front();
  }
}

}  // namespace reprise::mpi

/// Inside CommState: an MPI call's result read by CommHost::check_mpi (see mpi/check.hpp).
#define REPRISE_COMM_CHECK(call) host_.check_mpi((call), REPRISE_MPI_SITE(call))
/// Inside CommState: the result of MPI_Test on request `r` (CommState::tested).
#define REPRISE_COMM_TESTED(call, r) tested((call), (r), REPRISE_MPI_SITE(call))
