// The interposition's state (libreprise_interpose.so): the runtime MPI_Init started, the program's communicators
// and requests, and the rule that decides who serves a call. A program linked with it (or with it in LD_PRELOAD)
// calls our MPI_* functions; each serves the call when it comes from the program's thread with one of the
// program's handles (MPI_COMM_WORLD, a communicator derived from it, a request made by a call served here), and
// otherwise calls the library (PMPI_*): the runtime's own MPI calls, on its own communicators and threads, reach the
// library unchanged. Served point-to-point goes through reprise::Comm (logged between groups, replayed after a
// failure); collectives are built on it. What cannot be served correctly is refused at the call (refused.cpp).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "interpose/tags.hpp"
#include "reprise/comm.hpp"
#include "reprise/errors.hpp"
#include "reprise/mpi.hpp"

namespace reprise::interpose {

/// A communicator's topology (MPI_Cart_create, MPI_Cart_sub, MPI_Dist_graph_create_adjacent; kept by MPI_Comm_dup):
/// a Cartesian one's dimensions (row-major, as MPI numbers it), or a distributed graph's neighbours of this rank
/// (comm ranks, in the program's order; their weights when it gave them). Nothing here grows with the job: a grid's
/// dimensions and this rank's own edges.
struct Topology {
  enum class Kind : int { none = 0, cartesian = 1, graph = 2 };
  Kind kind = Kind::none;
  std::vector<int> dims, periods;
  std::vector<int> sources, destinations;
  bool weighted = false;
  std::vector<int> source_weights, destination_weights;
  /// Its words in the communicator table kept with a version (Wrapped::locate_table), and back from them.
  void write(std::vector<std::int64_t>* words) const;
  void read(const std::function<std::int64_t()>& next);
};

/// A communicator of the program: its ranks are a list of the job's (Comm's) ranks; messages on it carry its
/// context in their tags (TagLayout).
struct VComm {
  static constexpr std::uint64_t kMagic = 0x52505256434f4d4dull;  // "RPRVCOMM"
  std::uint64_t magic = kMagic;
  int context = 0;
  int rank = 0;
  int size = 0;
  std::vector<int> members;  // comm rank -> job rank; empty: the identity (MPI_COMM_WORLD and its duplicates)
  // An intercommunicator's remote group (MPI_Intercomm_create): its job ranks, which a rank of point-to-point names;
  // empty for an intracommunicator.
  std::vector<int> remote;
  bool inter() const { return !remote.empty(); }
  Topology topology;
  // What the program hangs on it (attributes.cpp): its name (MPI_Comm_set_name) and attributes (keyval, value) in
  // the order they were set. Not kept with a version: the set-up that sets them runs again after a rollback.
  std::string name;
  std::vector<std::pair<int, void*>> attributes;
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;  // MPI_Comm_set_errhandler's (inherited by derived communicators)
  std::uint64_t seq = 0;                             // made by the program's seq-th communicator creation call (from 0)
  int job_rank(int r) const { return members.empty() ? r : members[static_cast<std::size_t>(r)]; }
  /// The rank in this communicator (of its remote group, for an intercommunicator) of job rank `job` (a search:
  /// for the status of a receive from MPI_ANY_SOURCE); -1 when it is not there.
  int rank_of_job(int job) const {
    const std::vector<int>& ranks = inter() ? remote : members;
    if (ranks.empty()) return job;
    const auto it = std::find(ranks.begin(), ranks.end(), job);
    return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  }
  /// The neighbours of this rank (comm ranks, MPI_PROC_NULL where a Cartesian dimension ends) in MPI's order: a
  /// Cartesian communicator's two per dimension (the -1 then the +1 one), a graph's as the program gave them.
  void neighbours(std::vector<int>* in, std::vector<int>* out) const;
};

/// A message a probe received ahead of the program's receive (MPI_Probe, MPI_Iprobe): the next receive of its
/// source and tag on its communicator takes it. One received (`done`) is delivered as far as the protocol is
/// concerned, so it is part of the checkpointed state (the region kTableRegion) until a receive takes it.
struct Probed {
  int source = 0;               // Comm's (job) rank, or MPI_ANY_SOURCE (a probe of any rank, of one tag)
  int lo = 0, hi = 0;           // the wire tags it receives: one, or its communicator's range (a probe of MPI_ANY_TAG)
  std::vector<std::byte> data;  // (declared before the request: destroyed after it, once its receive is cancelled)
  Comm::Match match;            // its message's wire tag once matched, its place in its sender's order once here
  Comm::Request request;
  bool done = false;
  // Matched by MPI_Mprobe or MPI_Improbe (the program holds it as an MPI_Message until MPI_Mrecv or MPI_Imrecv takes
  // it): later probes and receives pass it by. `program_source` and `program_tag`: as the program named them.
  bool matched = false;
  int program_source = 0, program_tag = 0;
  int wire_tag() const { return match.tag; }  ///< -1: no message matched yet
  /// The job rank of its message's sender (-1: a probe of any rank that matched no message yet).
  int sender() const { return source == MPI_ANY_SOURCE ? match.source : source; }
};

/// The datatypes a request or a collective under way still uses. MPI lets a program free a datatype while
/// communication that uses it is pending ("it completes normally"): MPI_Type_free of a held one is carried out when
/// the last holder lets it go (p2p.cpp), so that an unpack or a collective carried out later never meets a freed
/// handle.
class TypeHolds {
 public:
  TypeHolds() = default;
  TypeHolds(std::initializer_list<MPI_Datatype> types);
  TypeHolds(const TypeHolds& o);
  TypeHolds(TypeHolds&& o) noexcept : types_(std::move(o.types_)) {}
  TypeHolds& operator=(TypeHolds o) noexcept {
    types_.swap(o.types_);
    return *this;
  }
  ~TypeHolds();
  void add(MPI_Datatype type);

 private:
  std::vector<MPI_Datatype> types_;
};

class Collective;  // a non-blocking collective under way (nonblocking.hpp)

/// A request made by a served call.
struct VRequest {
  static constexpr std::uint64_t kMagic = 0x5250525652455155ull;  // "RPRVREQU"
  std::uint64_t magic = kMagic;
  std::vector<std::byte> packed;  // a non-contiguous datatype's bytes (before the request: destroyed after it)
  Comm::Request request;
  bool receive = false;
  bool null_peer = false;               // MPI_PROC_NULL: complete at once
  int source = MPI_PROC_NULL, tag = 0;  // as the program knows them (its communicator's rank, its tag)
  void* buf = nullptr;                  // the program's buffer (a non-contiguous type: unpacked into it)
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  TypeHolds holds;                 // `type` (and a collective's), held while the request lives
  bool done = false;               // completed on Comm (by a test that could not yet complete all it was given)
  std::size_t result = 0;          // then, the bytes received or sent
  std::shared_ptr<Probed> probed;  // a receive of a message a probe received: completes from it
  // MPI_ANY_TAG: the message's wire tag (Comm's), and the wire tag of the program's tag 0 on its communicator.
  Comm::Match match;
  int tag_base = 0;
  bool cancelled = false;    // MPI_Cancel took it back before its message came
  bool synchronous = false;  // MPI_Ssend, _Issend, _Ssend_init: complete once the receive matched (Comm::issend)
  /// The tag its status gives (the message's, for a receive of MPI_ANY_TAG).
  int status_tag() const { return tag == MPI_ANY_TAG ? match.tag - tag_base : tag; }
  // A persistent request (MPI_Send_init, MPI_Recv_init): its handle stays the program's until MPI_Request_free, and
  // MPI_Start posts it again with the arguments above and `comm`. Inactive (never started, or completed since): a
  // wait or test on it returns at once with an empty status.
  bool persistent = false;
  bool active = true;
  MPI_Comm comm = MPI_COMM_NULL;  // (also a receive's from MPI_ANY_SOURCE: its status names the sender's rank in it)
  std::shared_ptr<Collective> collective;  // a non-blocking collective's: completes when its body ended
  std::function<void()> persistent_body;   // a persistent collective's (MPI_Allreduce_init, ...): MPI_Start starts it
  bool buffered = false;                   // MPI_Bsend_init's: each MPI_Start sends a copy (complete at once)
  // A partitioned request (MPI_Psend_init, MPI_Precv_init): its partitions, and for a send those marked ready since
  // its MPI_Start (MPI_Pready): the message goes once every one is.
  int partitions = 0;
  std::vector<bool> marked;
  int ready() const { return static_cast<int>(std::count(marked.begin(), marked.end(), true)); }
  /// A partitioned send not posted yet: a partition is not marked ready.
  bool partitions_pending() const { return partitions > 0 && !receive && ready() < partitions; }
  std::unique_ptr<VRequest> send_half;  // MPI_Sendrecv's (and its forms') send: complete when both halves are
};

inline constexpr int kFortranBase = 1 << 24;
inline constexpr const char* kTableRegion = "reprise.communicators";  // the program's communicators at a version
inline constexpr const char* kFilesRegion = "reprise.files";          // the files it holds open at a version

/// Numbers for the interposition's handles (MPI_Comm_c2f, MPI_Request_c2f; converted back by the _f2c calls): from
/// kFortranBase, above those the library gives its own handles (from 0), the lowest free one first. Only handles
/// the program converted take one, until they are freed.
template <class T>
class FortranNumbers {
 public:
  int number(T* v) {
    auto at = std::find(slots_.begin(), slots_.end(), v);
    if (at == slots_.end()) at = std::find(slots_.begin(), slots_.end(), nullptr);
    if (at == slots_.end()) at = slots_.insert(slots_.end(), nullptr);
    *at = v;
    return kFortranBase + static_cast<int>(at - slots_.begin());
  }
  /// std::nullopt: not one of these numbers; a null pointer: its handle was freed since.
  std::optional<T*> find(int number) const {
    if (number < kFortranBase || static_cast<std::size_t>(number - kFortranBase) >= slots_.size()) return std::nullopt;
    return slots_[static_cast<std::size_t>(number - kFortranBase)];
  }
  void forget(const T* v) {
    for (T*& slot : slots_)
      if (slot == v) slot = nullptr;
  }
  void clear() { slots_.clear(); }

 private:
  std::vector<T*> slots_;  // number - kFortranBase -> handle (null: free)
};

/// True when the calling thread is the program's (the one that called MPI_Init) outside a served call: only then
/// is a call the program's own. Refuses `call` (the MPI function calling this) on another thread of the program.
bool serving(const char* call = __builtin_FUNCTION());
/// Whether a handle is the program's (served here).
bool ours(MPI_Comm c);
bool ours(MPI_Request r);
/// Stops the job: `call` is refused on the program's handles, and why (MPI_Abort, exit status 2).
[[noreturn]] void refuse(const char* call, const std::string& why);
/// Stops this process after an unrecoverable failure: the message, exit status 3, no MPI_Finalize.
[[noreturn]] void stop_unrecoverable(const UnrecoverableFailure& e);

class Wrapped {
 public:
  static Wrapped& get();
  /// After PMPI_Init_thread: starts the runtime (a replacement process joins the job here).
  void start();
  /// MPI_Finalize: the runtime's uniform end (MpiRuntime::finish), then the runtime goes.
  void stop();
  bool started() const { return rt_ != nullptr; }
  /// From MPI_Init's end to MPI_Finalize (read by any thread).
  bool running() const { return running_; }
  /// A question another thread of the program may ask (its rank or the size of MPI_COMM_WORLD: fixed from MPI_Init
  /// on), rather than a call refused.
  bool other_thread_asks() const { return running() && !app_thread() && !MpiRuntime::own_thread(); }
  const VComm& world() const { return world_; }
  MpiRuntime& runtime();
  /// Comm, for a served call that communicates; refused while replaying (after a rollback, before the program
  /// restored: the ranks that did not roll back would never answer).
  Comm& comm();

  VComm* find(MPI_Comm c);
  /// The program's communicator `c`, or a refusal naming `call` (a handle not derived from MPI_COMM_WORLD).
  VComm& vcomm(MPI_Comm c, const char* call);
  /// vcomm() refusing an intercommunicator (collectives and communicator calls on one are not served).
  VComm& intra(MPI_Comm c, const char* call);
  /// intra() for a collective call (vcomm() where it is served on an intercommunicator: `inter_too`); first the
  /// failure injection's `collective` point (REPRISE_KILL).
  VComm& collective(MPI_Comm c, const char* call, bool inter_too = false);
  MPI_Comm handle(VComm* v) { return reinterpret_cast<MPI_Comm>(v); }
  /// A new communicator of `parent`'s members `members` (parent ranks, in the new order); collective over
  /// `parent` (every member calls it, `members` empty where this rank is not in it). Agrees on a free context.
  MPI_Comm derive(VComm& parent, const std::vector<int>& members, bool in_it);
  /// The lowest context not in `used` (contexts in use at the members of a new communicator), or an error.
  int free_context(const ContextSet& used) const;
  /// A new communicator of the program (its context taken here).
  MPI_Comm add(std::unique_ptr<VComm> v);
  const ContextSet& contexts_used() const { return contexts_used_; }
  const TagLayout& tags() const { return tags_; }
  /// A communicator creation call of the program (MPI_Comm_dup, MPI_Comm_split, MPI_Cart_create) on `parent`;
  /// `in_it`: this rank gets a communicator. Live, `make` derives it (collective). While replaying, the communicator
  /// this call made at its first execution is rebuilt from the checkpoint, with no message. Either way it inherits
  /// the parent's error handler.
  MPI_Comm create(const VComm& parent, bool in_it, const char* call, const std::function<MPI_Comm()>& make);
  void free(MPI_Comm* c);
  /// MPI_Comm_c2f and MPI_Comm_f2c for the communicators derived here.
  FortranNumbers<VComm>& fortran_comms() { return fortran_comms_; }

  /// The message the next receive from `source` of a wire tag in [lo, hi] (one tag, or a communicator's range:
  /// MPI_ANY_TAG) gets, received ahead by a probe (a receive posted on Comm when none is under way). settle()
  /// completes it, blocking or not; take() hands it to a receive (null: no probe has it).
  Probed& probe(int source, int lo, int hi);
  /// Comm::on_unreceived: a program's message (wire tag `wire`) from `source` that no receive posted takes, in the
  /// way of a wait: received ahead as a probe's, for the receive that comes later. False: not a program's message.
  bool take_unreceived(int source, int wire);
  bool settle(Probed& p, bool block);
  std::shared_ptr<Probed> take(int source, int lo, int hi);
  MPI_Message message(Probed* p) { return reinterpret_cast<MPI_Message>(p); }
  /// The matched message behind a handle the program holds, taken out of the probed list (null: not ours).
  std::shared_ptr<Probed> take_matched(MPI_Message m);
  bool ours_message(MPI_Message m) const;

  /// The copies of the program's messages held here (rt.memory_json()'s "interposition"): messages probes received
  /// ahead, and the packed bytes of requests under way (non-contiguous datatypes, buffered sends, freed sends).
  std::size_t held_bytes() const;
  /// MPI_Request_c2f and MPI_Request_f2c for the requests made here.
  FortranNumbers<VRequest>& fortran_requests() { return fortran_requests_; }
  VRequest* find(MPI_Request r);
  MPI_Request handle(VRequest* r) { return reinterpret_cast<MPI_Request>(r); }
  MPI_Request adopt(std::unique_ptr<VRequest> r);
  std::unique_ptr<VRequest> release(MPI_Request* r);
  /// MPI_Request_free of a send still under way: the message goes all the same (MPI's semantics), so the request is
  /// kept until Comm completed it: tested at each served post (reap_freed(false)), waited for at the end.
  void keep_freed(std::unique_ptr<VRequest> r);
  void reap_freed(bool block);
  bool has_freed() const { return !freed_.empty(); }

  bool app_thread() const;
  int depth = 0;  // served calls under way on the program's thread (their own MPI calls go to the library)

  // Rollback without rewriting the program (reprise::run). After a rollback to a version (and in a replacement or
  // a relaunch) the program runs again from its top; its set-up re-creates its communicators before it restores.
  // Those calls are served from the checkpoint (replaying) until the program's restore(); every communicating call
  // before it is refused, MPI_Barrier excepted (nothing to return: its messages are in the version's counters).
  bool replaying() const { return replaying_; }
  /// reprise::run caught a Rollback: the program's requests and communicators died with its stack and its
  /// regions are unprotected (it protects them again); then replaying from the version's communicators, or, when
  /// it starts over, live from MPI_COMM_WORLD alone.
  void rolled_back(bool from_start);
  /// A Rollback leaves a served call: the program's requests are dropped (receives cancelled) before its buffers.
  void abandon_requests();
  /// reprise::run, after the program's body: the runtime's uniform end (MpiRuntime::finish); MPI_Finalize then
  /// does not repeat it.
  void finish();

 private:
  void begin_replay();
  void restored();
  std::pair<void*, std::size_t> locate_table(std::optional<std::size_t> bytes);
  void read_table(std::vector<VComm>* comms);

  std::unique_ptr<MpiRuntime> rt_;
  std::atomic<bool> running_{false};
  std::vector<std::byte> table_;          // the region "reprise.communicators": the live communicators at a version
  std::vector<VComm> recorded_;           // while replaying: the version's communicators
  std::vector<std::string> own_regions_;  // the runtime's and ours (not unprotected at a rollback)
  std::uint64_t created_ = 0;             // the program's communicator creation calls so far
  bool replaying_ = false;
  VComm world_;
  std::unordered_set<VComm*> comms_;
  FortranNumbers<VComm> fortran_comms_;
  FortranNumbers<VRequest> fortran_requests_;
  std::unordered_set<VRequest*> requests_;
  std::vector<std::unique_ptr<VRequest>> freed_;  // sends the program freed before they completed
  std::vector<std::shared_ptr<Probed>> probed_;   // in the order the probes came
  /// What probes received ahead holds for a probe or a receive from `source` of [lo, hi] (Wrapped::probe).
  Probed* ahead(int source, int lo, int hi);
  /// A receive ahead posted on Comm for the next message from `source` of [lo, hi] (probe, take_unreceived).
  Probed& receive_ahead(int source, int lo, int hi);
  ContextSet contexts_used_ = ContextSet::world();  // in use here (0: MPI_COMM_WORLD)
  TagLayout tags_;                                  // from the library's MPI_TAG_UB (start())
};

/// Inside a served call: the runtime's MPI calls go to the library.
class Serving {
 public:
  Serving() { ++Wrapped::get().depth; }
  ~Serving() { --Wrapped::get().depth; }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
};

}  // namespace reprise::interpose
