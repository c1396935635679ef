// reprise::Comm: the application's messages under the hierarchical protocol (../shared/PROTOCOL.md). Take it from
// MpiRuntime::messages(). Every message carries its sender's (seq, phase, group) in a header: packed with payloads
// up to 3968 B (within shared-memory MPI's eager limit); before a larger payload a separate header message, the
// payload following on its own communicator (MPI's single-copy path, never copied by Comm). Messages to another
// group are also appended to the sender's log, overlapped with the transfer; messages inside a group are not
// logged. At each group checkpoint the group checks that every intra-group channel is empty and takes the maximum
// phase; the channel counters are part of every checkpoint version, and after a group commits, its members
// announce their delivered counts so senders release the log entries no rollback can need.
//
// The log lives in pinned memory when a GPU is usable, in plain host memory otherwise; its snapshot and the
// orphan record travel with every checkpoint version (region "reprise.log"), so a replacement process replays
// what its predecessor owed. Config::log_bound_bytes bounds it (a process over the bound makes the groups it
// logs for checkpoint; see MpiRuntime::step). Buffers are host or device memory (see the overloads taking a
// MemorySpace); collectives take host memory.
// A receive names its source or takes MPI_ANY_SOURCE, with one tag or a range (the first message of its tags that
// no receive matched, whoever sent it: Match::source says who; the program must not depend on which). Messages from one
// rank are delivered in the order it sent them: a receive that completes first holds its message until the earlier ones
// are delivered by receives the program posted (waiting with none posted is a ProtocolError). Collectives (barrier,
// bcast, allreduce) are built on these point-to-point messages, so they follow the same rules. A process failure
// surfaces as the runtime's Rollback exception from any call, as with MpiRuntime::check(); with group rollback
// (Config::group_rollback) only in the groups of the failed ranks: elsewhere the call completes once the job is
// repaired. The protocol assumes the program is send-deterministic (it sends the same messages whenever it
// delivered the same ones on each channel, whatever the order across channels): see docs/MESSAGES.md, "What the
// protocol assumes". A UsageError or ProtocolError is a bug of the program (a message left unreceived inside a
// group at a checkpoint): report it and stop the whole job with MPI_Abort, since the other ranks may be waiting
// for this one.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reprise/memory_space.hpp"

namespace reprise {

namespace mpi {
class CommState;
struct PendingMessage;
}  // namespace mpi

class Comm {
 public:
  /// A pending isend/irecv; complete it with wait(), waitall() or test(). Movable; destroying a pending request
  /// cancels nothing (the message still completes), it only forgets it.
  class Request {
   public:
    Request();
    Request(Request&&) noexcept;
    Request& operator=(Request&&) noexcept;
    ~Request();
    bool pending() const { return p_ != nullptr; }

   private:
    friend class mpi::CommState;
    explicit Request(std::unique_ptr<mpi::PendingMessage> p);
    std::unique_ptr<mpi::PendingMessage> p_;
  };

  enum class Op { Sum, Min, Max };

  int rank() const;
  int size() const;
  /// The largest tag: the MPI library's MPI_TAG_UB (at least 32767). Tags are 0..tag_ub() but 32767, which is
  /// Comm's own (its collectives).
  int tag_ub() const;
  int group_of(int rank) const;

  void send(const void* buf, std::size_t bytes, int dest, int tag);
  /// Receives at most `bytes` from `src` (a rank, or MPI_ANY_SOURCE: irecv_range says who sent it); returns the bytes
  /// received.
  std::size_t recv(void* buf, std::size_t bytes, int src, int tag);
  Request isend(const void* buf, std::size_t bytes, int dest, int tag);
  Request irecv(void* buf, std::size_t bytes, int src, int tag);
  /// A synchronous send (MPI_Issend): it completes once the receiver's receive matched it (its header goes by
  /// MPI_Issend), not when MPI took the message. One that is not sent now completes at once: a re-executed send the
  /// receiver already has, or, during a recovery, one queued behind the replays of its channel.
  Request issend(const void* buf, std::size_t bytes, int dest, int tag);
  /// A receive whose size is not known beforehand: `into` (host memory) is resized to the message's bytes when it
  /// arrives (the MPI interposition's probes). `into` must outlive the request.
  Request irecv_any_size(std::vector<std::byte>& into, int src, int tag);
  /// What a receive got, written when it is matched (`tag`) and delivered (`seq`): the message's tag (-1 while a
  /// receive of a tag range has none) and its number among its sender's messages to this rank (from 1, in the order
  /// that rank sent them: the order Comm delivers them in).
  struct Match {
    int tag = -1;
    std::uint64_t seq = 0;
    int source = -1;  ///< the sender (-1 while a receive from any rank has none)
  };
  /// A receive of the next message from `src` whose tag is in [tag_lo, tag_hi] (MPI_ANY_TAG on a communicator of
  /// the MPI interposition, whose tags are a range of Comm's; never 32767). It is posted on MPI only once such a
  /// message is the first of that sender's that no receive matched (MPI_Iprobe), so until then it takes nothing
  /// and cancel() always takes it back; a receive from `src` of a tag in the range posted after it waits until it
  /// matched one, as MPI matches receives in the order they were posted. `match` (which must outlive the request)
  /// says which. A wait for it while that sender's first message is one no receive posted can take is a
  /// ProtocolError (messages from one rank are delivered in the order it sent them). `src` may be MPI_ANY_SOURCE:
  /// the first message of the range that no receive matched, from whichever rank (match.source); a named receive of
  /// a tag in the range posted after it waits until it matched. Messages of other tags it finds first (MPI_Improbe
  /// of any tag) are kept, unreceived, for the receives that will take them.
  Request irecv_range(void* buf, std::size_t bytes, int src, int tag_lo, int tag_hi, Match& match);
  /// irecv_any_size of a tag range (tag_hi == tag_lo: one tag), matched as irecv_range's (the interposition's
  /// probes: one that found nothing leaves no trace); `match`, when given, says what it got.
  Request irecv_any_size(std::vector<std::byte>& into, int src, int tag_lo, int tag_hi, Match* match);
  /// Cancels a receive whose message has not begun to arrive: true, the request is over and no message was taken
  /// (its sender's next message goes to the next receive that matches it); false, its message is arriving (or
  /// arrived): complete it as usual. A send cannot be cancelled (a UsageError).
  bool cancel(Request& request);
  /// Returns the bytes received (irecv) or sent.
  std::size_t wait(Request& request);
  void waitall(std::vector<Request>& requests);
  bool test(Request& request);
  /// The same, with the bytes received (irecv) or sent once it completed.
  bool test(Request& request, std::size_t& bytes);
  void sendrecv(const void* send_buf, std::size_t send_bytes, int dest, int send_tag, void* recv_buf,
                std::size_t recv_bytes, int src, int recv_tag);
  /// The protocol's progress while the caller polls test() in a loop (wait() makes it itself): a failure the
  /// runtime's threads detected (may throw Rollback), a recovery's control messages, replays and held sends on
  /// their way. Without it such a loop could wait for ranks that wait for this one.
  void poll();
  /// Whether this rank rolled back and runs again where its first execution had been: a rank of another group
  /// already has a message this one is yet to send (it is not sent again). An effect outside the messages made
  /// from here on (the interposition's MPI_File_set_size, which rank 0 makes for all and then tells them of) was
  /// made the first time, and those told may have acted on it since.
  bool reexecuting();

  /// The same with the buffer's memory space said (MemorySpace::Device: CUDA device memory; without it Comm asks
  /// CUDA where a buffer lives when a GPU is usable). With a CUDA-aware MPI (Config::cuda_aware_mpi) a device
  /// payload above 3968 B goes to MPI as it is (one to another group is also copied D2H into its log entry,
  /// asynchronously: the request completes once MPI sent the buffer and that copy is done).
  /// Otherwise device buffers are staged through pinned host memory: a message to another group is copied D2H
  /// straight into its log entry and sent from there; a received one is copied H2D once delivered. As with MPI,
  /// a buffer belongs to Comm until its request completes (a staged send happens not to read it after isend).
  void send(const void* buf, std::size_t bytes, int dest, int tag, MemorySpace space);
  std::size_t recv(void* buf, std::size_t bytes, int src, int tag, MemorySpace space);
  Request isend(const void* buf, std::size_t bytes, int dest, int tag, MemorySpace space);
  Request irecv(void* buf, std::size_t bytes, int src, int tag, MemorySpace space);

  void barrier();
  void bcast(void* buf, std::size_t bytes, int root);
  double allreduce(double value, Op op);
  std::int64_t allreduce(std::int64_t value, Op op);  ///< Sum wraps modulo 2^64 on overflow

  template <class T>
  void send(const T* buf, std::size_t count, int dest, int tag) {
    send(static_cast<const void*>(buf), count * sizeof(T), dest, tag);
  }
  template <class T>
  void recv(T* buf, std::size_t count, int src, int tag) {
    recv(static_cast<void*>(buf), count * sizeof(T), src, tag);
  }

  /// Counters since the start (JSON object): messages and bytes intra/inter group, log entries and bytes held
  /// now and at most, entries released by committed views, recoveries (replays, orphans, duplicates), device
  /// messages (`device_direct`: those MPI moved itself; `device_mpi`: why direct or staged), the log bound.
  std::string stats_json() const;
  /// Memory a layer on top of Comm holds for the program's messages (the MPI interposition: messages probes
  /// received ahead, copies of non-contiguous and buffered sends), read with Comm's own on the application's thread
  /// whenever the runtime adds up its memory: a component `name` of rt.memory_json(), counted against the budget.
  void count_memory(const std::string& name, std::function<std::size_t()> held_bytes);
  /// For a layer on top of Comm that serves MPI's matching (the MPI interposition): a wait that needs a message of
  /// rank `src` while that sender's first message not received yet (of tag `tag`) is one no receive posted can take
  /// calls `take(src, tag)`, which may post a receive that takes it (and return true) as MPI would keep it
  /// unexpected; otherwise (false, or no `take`) such a wait is a ProtocolError, since messages from one rank are
  /// delivered in the order it sent them.
  void on_unreceived(std::function<bool(int src, int tag)> take);
  std::size_t log_held_bytes() const;
  std::size_t log_live_entries() const;

 private:
  friend class mpi::CommState;
  explicit Comm(mpi::CommState& state) : s_(&state) {}
  mpi::CommState* s_;
};

}  // namespace reprise
