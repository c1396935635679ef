// reprise::Comm's point-to-point path (PROTOCOL.md "Normal operation"): every message carries its sender's
// (seq, phase, group) in a header; a payload to another group is logged before the send completes; a receive is
// delivered only in channel order, and a duplicate of a re-executed send is dropped.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/polled.hpp"
#include "protocol/group_channels.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {
namespace {
// MPI_TAG_UB, the same at every process of the job (MPI-4.1 9.1.2); at least 32767.
int library_tag_ub() {
  int* ub = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) != MPI_SUCCESS || !flag || ub == nullptr ||
      *ub < CommState::kCollectiveTag)
    return CommState::kCollectiveTag;
  return *ub;
}
}  // namespace

int probe_any_source(MPI_Comm comm, int tag, int* flag, MPI_Status* st) {
  const int rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, flag, st);
  if (rc != MPI_SUCCESS) *flag = 0;  // the status means nothing then (a caller that goes on must not use it)
  if (rc != MPI_SUCCESS || !*flag || st->MPI_SOURCE >= 0) return rc;  // a message, or an error
  *flag = 0;
#if REPRISE_HAVE_ULFM
  if (polled::failed_in(comm) > 0) return MPIX_ERR_PROC_FAILED;
  return MPIX_Comm_failure_ack(comm);
#endif
  return MPI_SUCCESS;
}

PendingMessage::~PendingMessage() {
  CommState* const o = owner;  // (forget() clears it)
  // Freed before it was posted (MPI_Request_free semantics): it is sent all the same, unchecked (a repair, or a
  // Rollback, must not start in a destructor: the next runtime call detects the failure).
  if (o && unposted) o->post_unposted(true, false);
  if (o) o->forget(this);
  if (o && hold && (request != MPI_REQUEST_NULL || payload != MPI_REQUEST_NULL))
    o->keep(std::move(hold));  // staging MPI may still use
  // Abandoned (a Rollback unwound past it): a send completes or fails on its own; a receive is cancelled, so that
  // it cannot write into the application's memory later.
  for (MPI_Request* r : {&request, &payload}) {
    if (*r == MPI_REQUEST_NULL) continue;
    if (receive) REPRISE_MPI_DISCARD(MPI_Cancel(r));
    REPRISE_MPI_DISCARD(MPI_Request_free(r));  // (a destructor: whatever happened to it cannot be reported)
  }
}

CommState::CommState(CommHost& host, int rank, protocol::GroupMap groups, logging::LogOptions log_options,
                     logging::MessageLog::Allocate log_memory)
    : host_(host),
      rank_(rank),
      tag_ub_(library_tag_ub()),
      groups_(std::move(groups)),
      members_(groups_.members(rank)),
      log_options_(log_options),
      log_memory_(std::move(log_memory)),
      p_(std::make_unique<protocol::Process>(rank, groups_, log_options_, log_memory_)),
      counters_(groups_.ranks()),
      comm_(*this) {}

void CommState::add_epoch(MPI_Comm messages, MPI_Comm payloads) {
  epochs_.emplace_back(messages, payloads);
}

void CommState::check_tag(int tag) const {
  if (tag < 0 || tag > tag_ub_ || tag == kCollectiveTag)
    throw UsageError("reprise::Comm: tag " + std::to_string(tag) + " out of range: application tags are 0.." +
                     std::to_string(kCollectiveTag - 1) +
                     (tag_ub_ > kCollectiveTag ? " and " + std::to_string(kCollectiveTag + 1) + ".." +
                                                     std::to_string(tag_ub_) + " (MPI_TAG_UB)"
                                               : std::string()) +
                     "; " + std::to_string(kCollectiveTag) + " is reserved for Comm's collectives");
}

void CommState::check_range(int lo, int hi) const {
  check_tag(lo);
  check_tag(hi);
  if (lo > hi || (lo < kCollectiveTag && kCollectiveTag < hi))
    throw UsageError("reprise::Comm::irecv_range: tags " + std::to_string(lo) + ".." + std::to_string(hi) +
                     " are not a range of application tags (low end first, without " + std::to_string(kCollectiveTag) +
                     ", Comm's own)");
}

namespace {
void check_peer(int peer, int size, const char* what) {
  if (peer < 0 || peer >= size)
    throw UsageError(std::string("reprise::Comm::") + what + ": rank " + std::to_string(peer) + " outside 0.." +
                     std::to_string(size - 1));
}

}  // namespace

int CommState::post_send(int dest, int tag, WireHeader& header, const void* buf, std::vector<std::byte>& packed,
                         MPI_Request& request, MPI_Request& payload, int& epoch, bool synchronous) {
  epoch = chan_.of(dest);
  const auto& [comm, payload_comm] = epochs_.at(static_cast<std::size_t>(epoch));
  const std::size_t bytes = header.bytes;
  const auto send_header = synchronous ? MPI_Issend : MPI_Isend;  // (matched by the receiver's receive: Comm::issend)
  if (bytes <= kPackLimit) {
    packed.resize(sizeof(WireHeader) + bytes);
    std::memcpy(packed.data(), &header, sizeof(WireHeader));
    if (bytes) std::memcpy(packed.data() + sizeof(WireHeader), buf, bytes);
    return send_header(packed.data(), static_cast<int>(packed.size()), MPI_BYTE, dest, tag, comm, &request);
  }
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw UsageError("reprise::Comm: messages above 2 GiB are not supported; split them");
  int rc = send_header(&header, sizeof(WireHeader), MPI_BYTE, dest, tag, comm, &request);
  if (rc == MPI_SUCCESS)
    rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, payload_tag(header.seq), payload_comm, &payload);
  return rc;
}

Comm::Request CommState::isend(const void* buf, std::size_t bytes, int dest, int tag, std::optional<MemorySpace> space,
                               bool synchronous) {
  check_peer(dest, size(), "isend");
  enter();
  auto m = std::make_unique<PendingMessage>();
  m->peer = dest;
  m->tag = tag;
  m->bytes = bytes;
  m->result = bytes;
  m->synchronous = synchronous;
  m->device = bytes > 0 && on_device(buf, space);
  const protocol::Process::Send s = p_->send(dest, tag, nullptr, bytes);
  if (count_peers_ && !s.duplicate) sent_to_[dest] += bytes;
  if (s.logged) {
    ++stats_.inter_messages;
    stats_.inter_bytes += bytes;
    stats_.log_max_held = std::max(stats_.log_max_held, p_->log().held_bytes());
  } else {
    ++stats_.intra_messages;
    stats_.intra_bytes += bytes;
  }
  const bool now = !s.orphan && !s.duplicate && !p_->send_blocked() && !p_->has_queue(dest) &&
                   !p_->new_send_held(dest, s.header.phase);
  // A CUDA-aware MPI sends a device payload as it is, when it is sent now (a queued one is kept as a host copy).
  const bool direct = m->device && now && device_direct(bytes);
  const void* host = buf;              // what MPI sends
  std::shared_ptr<gpu::Event> copied;  // the staging copy the post waits for
  if (m->device) {
    // Staged: the payload goes D2H first. A logged message goes straight into its log entry (pinned when a GPU
    // exists) and is sent from there, so the log costs no copy beyond that staging; others go through a pinned
    // staging buffer. A message sent now is copied on Comm's stream and posted once the copy is done (isend
    // returns at once); one that is queued or not sent is copied before isend returns.
    ++stats_.device_messages;
    stats_.device_bytes += bytes;
    if (direct) {
      ++stats_.device_direct;
    } else if (s.log_slot) {
      auto segment = p_->log().find(dest, s.header.seq)->segment;
      if (now) {
        copy_into_log(*m, s.log_slot, buf, bytes, segment);
        copied = m->log_copy;
      } else {
        device_to_host(s.log_slot, buf, bytes);
      }
      m->hold = std::move(segment);
      host = s.log_slot;
    } else {
      auto staging = take_staging(bytes);
      if (now) {
        host_.device().copy_to_host(staging.get(), buf, bytes, stream());
        copied = host_.device().record(stream());
      } else {
        device_to_host(staging.get(), buf, bytes);
      }
      host = staging.get();
      m->hold = std::move(staging);
    }
  }
  if (!now) {
    if (s.log_slot && bytes && !m->device) std::memcpy(s.log_slot, buf, bytes);
    if (s.duplicate) {  // the rolled-back receiver already has it
      ++stats_.duplicates_skipped;
    } else if (s.orphan) {  // a re-executed send the receiver already has (group rollback): notify the coordinator
      control_send(coordinator_rank_, kNotifyTag, s.header.phase, 0);
      ++stats_.orphans_notified;
    } else {  // behind replays, or the coordinator has not released this survivor yet: buffered
      p_->queue_new(dest, s.header, tag, host, bytes);
      flush_outbox();
    }
    m->done = true;
    return Comm::Request(std::move(m));
  }
  m->header = WireHeader{s.header.seq, s.header.phase, bytes, s.header.group, kMagic};
  m->owner = this;
  live_.push_back(m.get());
  if (copied || unposted_to(dest)) {  // posted by post_unposted, in this channel's order
    if (copied) ++stats_.device_posted_later;
    m->unposted = true;
    m->from = host;
    m->copied = std::move(copied);
    unposted_.push_back(m.get());
    if (s.log_slot && bytes && !m->device) std::memcpy(s.log_slot, buf, bytes);
    if (s.log_slot && direct) copy_into_log(*m, s.log_slot, buf, bytes, p_->log().find(dest, s.header.seq)->segment);
    return Comm::Request(std::move(m));
  }
  const int posted = post_send(dest, tag, m->header, host, m->packed, m->request, m->payload, m->epoch, synchronous);
  // The log copy overlaps the transfer; it is done before the send can be reported complete.
  if (s.log_slot && bytes && !m->device) std::memcpy(s.log_slot, buf, bytes);
  if (s.log_slot && direct) copy_into_log(*m, s.log_slot, buf, bytes, p_->log().find(dest, s.header.seq)->segment);
  REPRISE_COMM_CHECK(posted);  // (after the message is registered: a repair reaches it)
  return Comm::Request(std::move(m));
}

bool CommState::unposted_to(int dest) const {
  return std::any_of(unposted_.begin(), unposted_.end(), [&](const PendingMessage* m) { return m->peer == dest; });
}

void CommState::post_unposted(bool block, bool checked) {
  std::vector<int> waiting;  // peers whose first unposted send waits for its copy (few: a short scan)
  for (auto it = unposted_.begin(); it != unposted_.end();) {
    PendingMessage& m = **it;
    if (std::find(waiting.begin(), waiting.end(), m.peer) != waiting.end()) {
      ++it;
      continue;
    }
    if (m.copied) {
      if (block) {
        host_.device().wait(*m.copied);
      } else if (!host_.device().query(*m.copied)) {
        waiting.push_back(m.peer);
        ++it;
        continue;
      }
      m.copied.reset();
    }
    it = unposted_.erase(it);
    m.unposted = false;
    const auto recoveries = stats_.recoveries;
    const int rc = post_send(m.peer, m.tag, m.header, m.from, m.packed, m.request, m.payload, m.epoch, m.synchronous);
    if (!checked) continue;
    host_.check_mpi(rc, REPRISE_MPI_SITE(post_send(m.peer, m.tag, m.header, m.from)));
    if (stats_.recoveries != recoveries) return;  // a repair changed the queue (and invalidated `it`)
  }
}

void CommState::drop_unposted(PendingMessage& m) {
  if (!m.unposted) return;
  unposted_.erase(std::remove(unposted_.begin(), unposted_.end(), &m), unposted_.end());
  m.unposted = false;
  m.copied.reset();
}

Comm::Request CommState::irecv(void* buf, std::size_t bytes, int src, int tag, std::optional<MemorySpace> space,
                               int tag_hi, Comm::Match* match) {
  const bool any_source = src == MPI_ANY_SOURCE;
  if (!any_source) check_peer(src, size(), "irecv");
  enter();
  auto m = std::make_unique<PendingMessage>();
  m->receive = true;
  m->peer = src;
  m->tag = tag;
  m->tag_lo = tag;
  m->tag_hi = any_source && tag_hi < 0 ? tag : tag_hi;  // (a receive from any rank is bound as a range's)
  m->any_source = any_source;
  m->match = match;
  m->order = ++receives_made_;
  m->buf = buf;
  m->bytes = bytes;
  m->device = bytes > 0 && on_device(buf, space);
  m->owner = this;
  live_.push_back(m.get());
  post_receive(*m);
  return Comm::Request(std::move(m));
}

Comm::Request CommState::irecv_any_size(std::vector<std::byte>& into, int src, int tag, int tag_hi,
                                        Comm::Match* match) {
  // (whatever comes: the buffer grows to it when its header arrives, in header_arrived)
  Comm::Request r =
      irecv(into.data(), std::numeric_limits<std::size_t>::max(), src, tag, MemorySpace::Host, tag_hi, match);
  r.p_->grow = &into;
  return r;
}

bool CommState::cancel(Comm::Request& r) {
  if (!r.p_) return false;
  PendingMessage& m = *r.p_;
  if (!m.receive) throw UsageError("reprise::Comm::cancel of a send: only a receive can be cancelled");
  if (m.done) return false;
  if (m.request != MPI_REQUEST_NULL) {  // its header is not here yet (or MPI has it and nobody tested)
    MPI_Status st;
    REPRISE_COMM_CHECK(MPI_Cancel(&m.request));
    REPRISE_COMM_CHECK(MPI_Wait(&m.request, &st));  // (a cancelled receive completes at once; a matched one soon)
    int cancelled = 0;
    REPRISE_COMM_CHECK(MPI_Test_cancelled(&st, &cancelled));
    if (!cancelled) {
      header_arrived(m, st);
      return false;
    }
  } else if (!m.unbound() && !m.deferred) {
    return false;  // its header arrived: the message is coming
  }
  const int peer = m.peer;
  forget(&m);
  r.p_.reset();
  release_deferred(peer);  // receives it held back may go now
  return true;
}

void CommState::post_receive(PendingMessage& m) {
  m.held = false;
  // The header, and the payload when it is small: a buffer of an earlier receive when there is one (a new one
  // costs an allocation and zeroing 4000 bytes, a good part of a small message's time).
  if (m.packed.size() != kReceiveBuffer && !spare_receive_buffers_.empty()) {
    m.packed = std::move(spare_receive_buffers_.back());
    spare_receive_buffers_.pop_back();
  }
  m.packed.resize(kReceiveBuffer);
  if (m.any_source) m.peer = -1;  // (whoever sends its tag first)
  m.epoch = m.any_source ? -1 : chan_.of(m.peer);
  awaiting_header_.push_back(&m);
  if (m.ranged()) {  // its tag is the one of the message it will find first
    m.tag = -1;
    if (m.match) m.match->tag = -1, m.match->source = m.peer;
    if (std::find(unbound_.begin(), unbound_.end(), &m) == unbound_.end()) unbound_.push_back(&m);
    bind(m);
    return;
  }
  if (behind_unbound(m)) {
    m.deferred = true;
    return;
  }
  post_header(m);
}

void CommState::post_header(PendingMessage& m) {
  m.deferred = false;
  if (!taken_.empty()) {  // (taken ahead by a receive from any rank of a range: earlier than any MPI holds)
    const auto it = find_taken(m.peer, m.epoch, m.tag, m.tag);
    if (it != taken_.end()) return receive_taken(m, it);
  }
  REPRISE_COMM_CHECK(MPI_Irecv(m.packed.data(), static_cast<int>(m.packed.size()), MPI_BYTE, m.peer, m.tag,
                               epochs_.at(static_cast<std::size_t>(m.epoch)).first, &m.request));
}

bool CommState::behind_unbound(const PendingMessage& m) const {
  for (const PendingMessage* o : unbound_)
    if (o->order < m.order && (o->peer == m.peer || o->any_source) &&
        (m.ranged() ? o->tag_lo <= m.tag_hi && m.tag_lo <= o->tag_hi : o->covers(m.tag)))
      return true;
  return false;
}

bool CommState::bind(PendingMessage& m, int* front) {
  if (front) *front = -1;
  if (m.any_source) return bind_any_source(m);
  // (a failure: the repair posts m again, or this process rolls back)
  const int tag = first_unmatched_tag(m.peer, m.epoch);
  if (tag < 0) return false;
  PendingMessage* first = owner(m.peer, m.epoch, tag);
  if (!first) {  // a message for a receive not posted yet
    if (front) *front = tag;
    return false;
  }
  const bool mine = first == &m;
  bind_to(*first, m.peer, m.epoch, tag);
  return mine;
}

PendingMessage* CommState::owner(int peer, int epoch, int tag) const {
  PendingMessage* first = nullptr;  // MPI's order: the earliest posted receive that matches it
  for (PendingMessage* o : unbound_)
    if (((o->peer == peer && o->epoch == epoch) || o->any_source) && o->covers(tag) &&
        (!first || o->order < first->order))
      first = o;
  return first;
}

void CommState::bind_to(PendingMessage& m, int peer, int epoch, int tag, MPI_Message* message) {
  const bool any_source = m.any_source;
  m.peer = peer;
  m.epoch = epoch;
  m.tag = tag;
  if (m.match) m.match->tag = tag, m.match->source = peer;
  unbound_.erase(std::find(unbound_.begin(), unbound_.end(), &m));
  if (message) {  // taken from MPI already (MPI_Improbe): received as it is
    m.deferred = false;
    REPRISE_COMM_CHECK(MPI_Imrecv(m.packed.data(), static_cast<int>(m.packed.size()), MPI_BYTE, message, &m.request));
  } else {
    post_header(m);
  }
  release_deferred(any_source ? -1 : peer);  // (one from any rank held back receives from every rank)
}

std::vector<int> CommState::epochs_in_use() const {
  std::vector<int> in_use{chan_.all};
  for (const auto& [peer, epoch] : chan_.moved)
    if (std::find(in_use.begin(), in_use.end(), epoch) == in_use.end()) in_use.push_back(epoch);
  return in_use;
}

int CommState::first_unmatched_tag(int peer, int epoch) {
  if (!taken_.empty()) {
    const auto it = find_taken(peer, epoch, 0, INT_MAX);
    if (it != taken_.end()) return it->status.MPI_TAG;
  }
  int flag = 0;
  MPI_Status st;
  const MPI_Comm comm = epochs_.at(static_cast<std::size_t>(epoch)).first;
  const int rc = MPI_Iprobe(peer, MPI_ANY_TAG, comm, &flag, &st);
  if (rc != MPI_SUCCESS) host_.check_mpi(rc, REPRISE_MPI_SITE(MPI_Iprobe(peer, MPI_ANY_TAG, comm)));
  return rc == MPI_SUCCESS && flag ? st.MPI_TAG : -1;
}

int CommState::take_any(MPI_Comm comm, int tag, int* flag, MPI_Message* message, MPI_Status* st) {
  int rc = MPI_Improbe(MPI_ANY_SOURCE, tag, comm, flag, message, st);
  bool notice = rc == MPI_SUCCESS && *flag && st->MPI_SOURCE < 0;
#ifdef MPIX_ERR_PROC_FAILED_PENDING
  notice = notice || rc == MPIX_ERR_PROC_FAILED_PENDING;
#endif
  if (rc != MPI_SUCCESS || notice) *flag = 0;  // (the status means nothing then)
  if (!notice) return rc;
#if REPRISE_HAVE_ULFM
  rc = MPIX_Comm_failure_ack(comm);
#endif
  host_.poll_failure();  // a failure not recovered from yet is the runtime's to detect
  return rc;
}

void CommState::drop_stale(MPI_Message& message, const MPI_Status& st) {
  int count = 0;
  REPRISE_COMM_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
  std::vector<std::byte> scratch(static_cast<std::size_t>(std::max(count, 1)));
  // (its sender failed: what MPI says of receiving from it changes nothing, the message is gone either way)
  REPRISE_MPI_DISCARD(MPI_Mrecv(scratch.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE));
  ++stats_.stale_dropped;
}

std::deque<CommState::Taken>::iterator CommState::find_taken(int peer, int epoch, int lo, int hi) {
  return std::find_if(taken_.begin(), taken_.end(), [&](const Taken& t) {
    return (peer < 0 || t.status.MPI_SOURCE == peer) && (epoch < 0 || t.epoch == epoch) && lo <= t.status.MPI_TAG &&
           t.status.MPI_TAG <= hi;
  });
}

void CommState::receive_taken(PendingMessage& m, const std::deque<Taken>::iterator& it) {
  MPI_Message message = it->message;
  taken_.erase(it);
  m.deferred = false;
  REPRISE_COMM_CHECK(MPI_Imrecv(m.packed.data(), static_cast<int>(m.packed.size()), MPI_BYTE, &message, &m.request));
}

void CommState::drop_stale_taken() {
  for (auto it = taken_.begin(); it != taken_.end();) {
    if (chan_.of(it->status.MPI_SOURCE) == it->epoch) {
      ++it;
      continue;
    }
    drop_stale(it->message, it->status);
    it = taken_.erase(it);
  }
}

// A receive from any rank takes its message (MPI_Improbe of its tag from any source, or of any tag for a range) on
// the communicator of each epoch in use (after a recovery that this process survived, the ranks it rolled back are
// on a newer one), and gives it to the earliest unbound receive that may take it (MPI's order), which receives it
// (MPI_Imrecv). A message from a rank whose channel moved to a newer epoch is stale: dropped. Of a range, a message
// that no receive posted can take is kept (taken_) for the receive that will, and the search goes on; messages kept
// so are looked at first. While a receive of a range from one rank, posted before m and unbound, could take one of
// m's tags, m waits until that one is matched (it takes its sender's first message by its own rule; MPI would give
// it the message m could take from that rank).
bool CommState::bind_any_source(PendingMessage& m) {
  const int lo = m.tag_lo, hi = m.tag_hi;
  for (PendingMessage* o : std::vector<PendingMessage*>(unbound_))
    if (!o->any_source && o->order < m.order && o->tag_lo <= hi && lo <= o->tag_hi) {
      const auto recoveries = stats_.recoveries;
      bind(*o);
      if (stats_.recoveries != recoveries) return false;  // (a repair meanwhile)
      if (!m.unbound() || o->unbound()) return !m.unbound();
    }
  for (auto it = find_taken(-1, -1, lo, hi); it != taken_.end(); it = find_taken(-1, -1, lo, hi)) {
    const int source = it->status.MPI_SOURCE, epoch = it->epoch, tag = it->status.MPI_TAG;
    PendingMessage* first = owner(source, epoch, tag);  // (m, or a receive before it)
    if (!first) break;
    const bool mine = first == &m;
    bind_to(*first, source, epoch, tag);  // (its post_header receives the taken message)
    if (mine) return true;
  }
  const int probe_tag = lo == hi ? lo : MPI_ANY_TAG;
  for (int epoch : epochs_in_use()) {
    const MPI_Comm comm = epochs_.at(static_cast<std::size_t>(epoch)).first;
    for (;;) {
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status st;
      const auto recoveries = stats_.recoveries;
      const int rc = take_any(comm, probe_tag, &flag, &message, &st);
      if (rc != MPI_SUCCESS) {  // a failure: the repair posts m again, or this process rolls back
        host_.check_mpi(rc, REPRISE_MPI_SITE(MPI_Improbe(MPI_ANY_SOURCE, probe_tag, comm)));
        return false;
      }
      if (!flag && stats_.recoveries != recoveries) return false;  // (a repair meanwhile: the epochs changed)
      if (!flag) break;
      if (chan_.of(st.MPI_SOURCE) != epoch) {
        drop_stale(message, st);
        continue;
      }
      // (those of a range from that rank posted before m were bound above)
      PendingMessage* first = owner(st.MPI_SOURCE, epoch, st.MPI_TAG);
      if (!first) {  // another tag's, or m is bound already (a repair meanwhile re-posts, binds none): kept
        taken_.push_back({message, st, epoch});
        ++stats_.taken_ahead;
        continue;
      }
      const bool mine = first == &m;
      bind_to(*first, st.MPI_SOURCE, epoch, st.MPI_TAG, &message);
      if (mine) return true;
    }
  }
  return false;
}

void CommState::release_deferred(int peer) {
  for (PendingMessage* o : std::vector<PendingMessage*>(live_))
    if (o->deferred && (peer < 0 || o->peer == peer) && !behind_unbound(*o)) post_header(*o);
}

void CommState::forget(PendingMessage* m) {
  drop_unposted(*m);
  awaiting_header_.erase(std::remove(awaiting_header_.begin(), awaiting_header_.end(), m), awaiting_header_.end());
  unbound_.erase(std::remove(unbound_.begin(), unbound_.end(), m), unbound_.end());
  live_.erase(std::remove(live_.begin(), live_.end(), m), live_.end());
  m->owner = nullptr;
}

bool CommState::finish(MPI_Request& r, MPI_Status* st, bool block, const PendingMessage* self) {
  static const bool trace = std::getenv("REPRISE_TRACE") != nullptr;
  auto since = std::chrono::steady_clock::now();
  for (;;) {
    if (trace && block && std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
      since = std::chrono::steady_clock::now();
      std::fprintf(stderr, "reprise: rank %d: waiting: %s\n", rank_, debug_state().c_str());
    }
    int flag = 0;
    const int rc = MPI_Test(&r, &flag, st);
    if (rc != MPI_SUCCESS) {  // a failure: the repair re-posted or completed the request (or threw Rollback)
      tested(rc, r, REPRISE_MPI_SITE(MPI_Test(&r, &flag, st)));
      // A request MPI freed with a failure that the repair neither re-posted nor completed: its message is lost
      // (its peer survived and its communicator was not revoked, which Open MPI never does): say so, rather
      // than complete it empty.
      if (self && !self->done && self->request == MPI_REQUEST_NULL && self->payload == MPI_REQUEST_NULL)
        throw ProtocolError("reprise::Comm: rank " + std::to_string(rank_) + ": MPI failed a " +
                            (self->receive ? "receive from" : "send to") + " rank " + std::to_string(self->peer) +
                            " (tag " + std::to_string(self->tag) + ") although that rank survived the repair");
      continue;
    }
    if (flag || !block) return flag != 0;
    progress_others(self);
  }
}

void CommState::progress_others(const PendingMessage* except, bool headers) {
  if (!unposted_.empty()) post_unposted(false);  // a peer may wait for them to send what this one waits for
  if (headers) advance_headers(except);
  host_.poll_failure();
  if (control_due()) poll_control();
}

void CommState::advance_headers(const PendingMessage* except) {
  for (std::size_t i = 0; i < awaiting_header_.size();) {
    PendingMessage* p = awaiting_header_[i];
    int flag = 0;
    MPI_Status st;
    if (p != except && p->unbound()) {  // it may find its message now
      const auto recoveries = stats_.recoveries;
      bind(*p);
      if (stats_.recoveries != recoveries) return;  // a repair changed the list
    }
    if (p != except && p->request != MPI_REQUEST_NULL) {
      const int rc = MPI_Test(&p->request, &flag, &st);
      if (rc != MPI_SUCCESS) {  // the repair re-posted it, or this process rolls back
        tested(rc, p->request, REPRISE_MPI_SITE(MPI_Test(&p->request, &flag, &st)));
        return;
      }
      if (flag) {
        header_arrived(*p, st);  // deregisters it
        continue;
      }
    }
    ++i;
  }
}

void CommState::tested(int rc, const MPI_Request& r, const CallSite& at) {
  if (rc == MPI_SUCCESS) return;
  if (r == MPI_REQUEST_NULL)
    host_.request_failed(rc, at);
  else
    host_.check_mpi(rc, at);
}

void CommState::header_arrived(PendingMessage& m, const MPI_Status& st) {
  awaiting_header_.erase(std::remove(awaiting_header_.begin(), awaiting_header_.end(), &m), awaiting_header_.end());
  int count = 0;
  REPRISE_COMM_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
  if (count < static_cast<int>(sizeof(WireHeader)))
    throw ProtocolError("reprise::Comm: rank " + std::to_string(rank_) + " received " + std::to_string(count) +
                        " bytes without a Reprise header from rank " + std::to_string(m.peer) +
                        " (a raw MPI message on Comm's communicator?)");
  std::memcpy(&m.header, m.packed.data(), sizeof(WireHeader));
  if (m.header.magic != kMagic)
    throw ProtocolError("reprise::Comm: rank " + std::to_string(rank_) + " received a message from rank " +
                        std::to_string(m.peer) + " with a damaged header");
  if (m.grow) {  // a receive of any size: its buffer takes the message's
    m.grow->resize(m.header.bytes);
    m.buf = m.grow->data();
  }
  if (m.header.bytes > m.bytes)
    throw UsageError("reprise::Comm: rank " + std::to_string(rank_) + " received a message of " +
                     std::to_string(m.header.bytes) + " bytes from rank " + std::to_string(m.peer) + " (tag " +
                     std::to_string(st.MPI_TAG) + ") into a receive of " + std::to_string(m.bytes) + " bytes");
  m.result = m.header.bytes;
  if (m.header.bytes <= kPackLimit) {
    // (a device buffer gets its bytes once the message is delivered, not a dropped duplicate: see progress())
    if (m.result && !m.device) std::memcpy(m.buf, m.packed.data() + sizeof(WireHeader), m.result);
    if (m.device) m.staged = m.packed.data() + sizeof(WireHeader);
  } else {
    void* into = m.buf;
    if (m.device && device_direct(m.header.bytes)) {
      ++stats_.device_direct;
    } else if (m.device) {
      auto staging = take_staging(m.header.bytes);
      m.staged = staging.get();
      m.hold = std::move(staging);
      into = m.staged;
    }
    REPRISE_COMM_CHECK(MPI_Irecv(into, static_cast<int>(m.header.bytes), MPI_BYTE, st.MPI_SOURCE,
                                 payload_tag(m.header.seq), epochs_.at(static_cast<std::size_t>(m.epoch)).second,
                                 &m.payload));
  }
}

// A repair (inside finish(), through check_mpi or poll_failure) may complete a pending message (a send to a
// rolled-back process) or post its receive again: every stage re-checks the message's state.
bool CommState::progress(PendingMessage& m, bool block) {
  if (!m.receive) {
    while (!m.done && m.unposted) {  // its staging copy first (a repair may drop it meanwhile)
      post_unposted(block);
      if (m.unposted && !block) return false;
    }
    while (!m.done && m.request != MPI_REQUEST_NULL)
      if (!finish(m.request, MPI_STATUS_IGNORE, block, &m)) return false;
    while (!m.done && m.payload != MPI_REQUEST_NULL)
      if (!finish(m.payload, MPI_STATUS_IGNORE, block, &m)) return false;
    if (!m.done && m.log_copy) {  // (done by a repair: that completed every copy)
      if (block)
        host_.device().wait(*m.log_copy);
      else if (!host_.device().query(*m.log_copy))
        return false;
    }
    m.log_copy.reset();
    m.done = true;
    forget(&m);
    return true;
  }
  for (;;) {
    if (m.unbound()) {
      int front = -1;
      bind(m, &front);
      if (m.unbound() && block && front >= 0) {  // (never for one from any rank)
        if (!take_unreceived_ || !take_unreceived_(m.peer, front)) unmatched_first(m, front);
        continue;  // (a receive of the layer above took that message: m's may be next)
      }
    }
    if (m.unbound() || m.deferred) {  // stage 0: a receive of a range finds its message, one behind it waits
      if (!block) return false;
      progress_others(&m);
      continue;
    }
    if (m.request != MPI_REQUEST_NULL) {  // stage 1: the header (and a small payload)
      MPI_Status st;
      if (!finish(m.request, &st, block, &m)) return false;
      if (m.request != MPI_REQUEST_NULL) continue;  // a repair posted it again
      header_arrived(m, st);
    }
    if (m.payload != MPI_REQUEST_NULL && !finish(m.payload, MPI_STATUS_IGNORE, block, &m)) return false;
    if (m.request != MPI_REQUEST_NULL) continue;  // a repair posted it again
    const Delivery d = deliver(m);
    if (d == Delivery::Delivered) {
      if (m.match) *m.match = Comm::Match{m.tag, m.header.seq, m.peer};
      if (m.device && m.result && m.staged) host_to_device(m.buf, m.staged, m.result);  // (null: direct)
      break;
    }
    if (d == Delivery::Early) {  // held: delivered once the receive of the sender's earlier message completes
      if (!block) return false;
      fill_gap_before(m);
      continue;
    }
    post_receive(m);  // a duplicate was dropped: receive again
    if (!block) return false;
  }
  m.done = true;
  forget(&m);
  // Delivered, and no MPI request uses the buffer any more: it serves a later receive.
  if (m.packed.size() == kReceiveBuffer && spare_receive_buffers_.size() < kSpareReceiveBuffers)
    spare_receive_buffers_.push_back(std::move(m.packed));
  return true;
}

// Each channel is delivered in the order its sender sent, as the protocol replays it after a failure; the
// program's receives may complete in another order (two tags from one neighbour, waited for in any order, or
// MPI_Waitall): a message that arrives early is held, and delivered once the earlier ones are.
CommState::Delivery CommState::deliver(PendingMessage& m) {
  const protocol::Header h{m.header.seq, m.header.phase, m.header.group};
  const auto arrival = p_->arrival(m.peer, h);
  if (arrival == protocol::Process::Arrival::Duplicate) {
    m.held = false;
    ++stats_.duplicates_dropped;
    return Delivery::Duplicate;
  }
  if (arrival == protocol::Process::Arrival::Early) {
    if (!m.held) ++stats_.held_early;
    m.held = true;
    return Delivery::Early;
  }
  m.held = false;
  p_->deliver(m.peer, h);
  ++stats_.received;
  return Delivery::Delivered;
}

void CommState::unmatched_first(const PendingMessage& m, int tag) const {
  throw ProtocolError(
      "reprise::Comm: rank " + std::to_string(rank_) + " waits for the next message from rank " +
      std::to_string(m.peer) + " with a tag in " + std::to_string(m.tag_lo) + ".." + std::to_string(m.tag_hi) +
      ", but the first message of that rank not received yet has tag " + std::to_string(tag) +
      " and no receive posted can take it: messages from one rank are delivered in the order it sent them, "
      "whatever their tags, because the protocol replays each channel in that order. Post the receive of that "
      "message before waiting for this one (waiting for them together, as MPI_Waitall does, is fine)");
}

void CommState::fill_gap_before(PendingMessage& m) {
  const std::uint64_t before = p_->delivered(m.peer);
  for (;;) {
    bool posted = false;
    int front = -2;  // the tag of the first message of m's sender that MPI holds unmatched (-1: none; -2: not asked)
    for (PendingMessage* o : std::vector<PendingMessage*>(live_)) {
      if (o == &m || !o->receive || o->done) continue;
      if (o->peer != m.peer) {  // a receive from any rank may take that message too, if it is of its tag
        if (!o->any_source || !o->unbound()) continue;
        if (front == -2) front = first_unmatched_tag(m.peer, m.epoch);
        if (front >= 0 && !o->covers(front)) continue;
      }
      posted = true;
      progress(*o, false);
    }
    // (a repair may have posted m again, or completed it)
    if (p_->delivered(m.peer) != before || m.done || m.request != MPI_REQUEST_NULL || !m.held) return;
    if (!posted && take_unreceived_) {  // the layer above may take the first message (as MPI keeps it unexpected)
      if (front == -2) front = first_unmatched_tag(m.peer, m.epoch);
      if (front < 0 || take_unreceived_(m.peer, front)) {  // (not arrived yet: sent before m's, so on its way)
        advance_headers(&m);
        host_.poll_failure();
        continue;
      }
    }
    if (!posted)
      throw ProtocolError(
          "reprise::Comm: rank " + std::to_string(rank_) + " waits for message " + std::to_string(m.header.seq) +
          " from rank " + std::to_string(m.peer) + " (tag " + std::to_string(m.tag) + "), but has received only " +
          std::to_string(before) + " of the " + std::to_string(m.header.seq - 1) +
          " that rank sent before it, and posts no receive for the next: "
          "messages from one rank are delivered in the order it sent them, whatever their tags, because the "
          "protocol replays each channel in that order. Post the receives of the earlier messages before waiting "
          "for this one (waiting for them together, as MPI_Waitall does, is fine)");
    advance_headers(&m);
    host_.poll_failure();
    if (control_due()) poll_control();
  }
}

std::size_t CommState::wait(Comm::Request& r) {
  if (!r.p_) throw UsageError("reprise::Comm::wait on a request that is not pending");
  PendingMessage& m = *r.p_;
  if (!m.done) progress(m, true);
  const std::size_t n = m.result;
  r.p_.reset();
  return n;
}

bool CommState::test(Comm::Request& r, std::size_t* bytes) {
  if (!r.p_) return true;
  if (!r.p_->done && !progress(*r.p_, false)) {
    // What a wait does between its tests, but for the other receives' headers (a program that tests many requests
    // would test each of them at each one's test): a failure detected meanwhile is recovered from, replays and sends
    // queued behind them go, restart floors pass on. A program that tests in a loop for a message from a rank
    // waiting in a recovery would otherwise wait for it forever, and it for this one.
    progress_others(r.p_.get(), false);
    return false;
  }
  if (bytes) *bytes = r.p_->result;
  r.p_.reset();
  return true;
}

}  // namespace reprise::mpi
