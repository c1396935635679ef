// reprise::Comm over MPI: see include/reprise/comm.hpp and comm_state.hpp.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/polled.hpp"
#include "reprise/errors.hpp"

namespace reprise {
namespace mpi {

namespace {
constexpr std::uint32_t kMagic = 0x52505231;  // "RPR1"
constexpr int kCollectiveTag = 32767;         // reserved: application tags are 0..32766
constexpr int kViewTag = 1;
constexpr int kNotifyTag = 2;   // control: a rolled-back process re-executed an orphan send (to the coordinator)
constexpr int kReleaseTag = 3;  // control: the coordinator released an item of the receiving process
constexpr int kAskTag = 4;      // on the view communicator: "your group, please checkpoint" (log bound)
static int payload_tag(std::uint64_t seq) { return static_cast<int>(seq & 0x7fff); }
constexpr unsigned kPollEvery = 64;  // committed views are polled every this many operations (and at checkpoints)
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
  if (owner) owner->forget(this);
  if (owner && hold && (request != MPI_REQUEST_NULL || payload != MPI_REQUEST_NULL))
    owner->keep(std::move(hold));  // staging MPI may still use
  // Abandoned (a Rollback unwound past it): a send completes or fails on its own; a receive is cancelled, so that
  // it cannot write into the application's memory later.
  for (MPI_Request* r : {&request, &payload}) {
    if (*r == MPI_REQUEST_NULL) continue;
    if (receive) REPRISE_MPI_DISCARD(MPI_Cancel(r));
    REPRISE_MPI_DISCARD(MPI_Request_free(r));  // (a destructor: whatever happened to it cannot be reported)
  }
}

CommState::CommState(CommHost& host, int rank, std::vector<int> group_of, logging::LogOptions log_options,
                     logging::MessageLog::Allocate log_memory)
    : host_(host),
      rank_(rank),
      group_of_(std::move(group_of)),
      log_options_(log_options),
      log_memory_(std::move(log_memory)),
      p_(std::make_unique<protocol::Process>(rank, group_of_, log_options_, log_memory_)),
      region_(1 + 4 * group_of_.size(), 0),
      chan_(group_of_.size(), 0),
      comm_(*this) {}

void CommState::add_epoch(MPI_Comm messages, MPI_Comm payloads) { epochs_.emplace_back(messages, payloads); }

void CommState::check_tag(int tag) const {
  if (tag < 0 || tag >= kCollectiveTag)
    throw UsageError("reprise::Comm: tag " + std::to_string(tag) + " out of range: application tags are 0.." +
                     std::to_string(kCollectiveTag - 1) + " (" + std::to_string(kCollectiveTag) +
                     " is reserved for Comm's collectives)");
}

namespace {
void check_peer(int peer, int size, const char* what) {
  if (peer == MPI_ANY_SOURCE)
    throw UsageError(std::string("reprise::Comm::") + what +
                     ": MPI_ANY_SOURCE is not supported: the order in which a wildcard receive matches messages "
                     "depends on timing, so a replay after a failure could deliver them in another order (the "
                     "protocol assumes send-determinism). Name the source; for several sources post one receive "
                     "each.");
  if (peer < 0 || peer >= size)
    throw UsageError(std::string("reprise::Comm::") + what + ": rank " + std::to_string(peer) + " outside 0.." +
                     std::to_string(size - 1));
}

}  // namespace

int CommState::post_send(int dest, int tag, WireHeader& header, const void* buf, std::vector<std::byte>& packed,
                         MPI_Request& request, MPI_Request& payload, int& epoch) {
  epoch = chan_.at(static_cast<std::size_t>(dest));
  const auto& [comm, payload_comm] = epochs_.at(static_cast<std::size_t>(epoch));
  const std::size_t bytes = header.bytes;
  if (bytes <= kPackLimit) {
    packed.resize(sizeof(WireHeader) + bytes);
    std::memcpy(packed.data(), &header, sizeof(WireHeader));
    if (bytes) std::memcpy(packed.data() + sizeof(WireHeader), buf, bytes);
    return MPI_Isend(packed.data(), static_cast<int>(packed.size()), MPI_BYTE, dest, tag, comm, &request);
  }
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw UsageError("reprise::Comm: messages above 2 GiB are not supported; split them");
  int rc = MPI_Isend(&header, sizeof(WireHeader), MPI_BYTE, dest, tag, comm, &request);
  if (rc == MPI_SUCCESS)
    rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, payload_tag(header.seq), payload_comm, &payload);
  return rc;
}

Comm::Request CommState::isend(const void* buf, std::size_t bytes, int dest, int tag,
                               std::optional<MemorySpace> space) {
  check_peer(dest, size(), "isend");
  enter();
  auto m = std::make_unique<PendingMessage>();
  m->peer = dest;
  m->tag = tag;
  m->bytes = bytes;
  m->result = bytes;
  m->device = bytes > 0 && on_device(buf, space);
  const protocol::Process::Send s = p_->send(dest, tag, nullptr, bytes);
  if (s.logged) {
    ++stats_.inter_messages;
    stats_.inter_bytes += bytes;
    stats_.log_max_held = std::max(stats_.log_max_held, p_->log().held_bytes());
  } else {
    ++stats_.intra_messages;
    stats_.intra_bytes += bytes;
  }
  const bool now = !s.orphan && !s.duplicate && !p_->send_blocked() && !p_->has_queue(dest);
  // A CUDA-aware MPI sends a device payload as it is, when it is sent now (a queued one is kept as a host copy).
  const bool direct = m->device && now && device_direct(bytes);
  const void* host = buf;  // what MPI sends
  if (m->device) {
    // Staged: the payload goes D2H first. A logged message goes straight into its log entry (pinned when a GPU
    // exists) and is sent from there, so the log costs no copy beyond that staging; others go through a pinned
    // staging buffer.
    ++stats_.device_messages;
    stats_.device_bytes += bytes;
    if (direct) {
      ++stats_.device_direct;
    } else if (s.log_slot) {
      device_to_host(s.log_slot, buf, bytes);
      m->hold = p_->log().find(dest, s.header.seq)->segment;
      host = s.log_slot;
    } else {
      auto staging = take_staging(bytes);
      device_to_host(staging.get(), buf, bytes);
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
  const int posted = post_send(dest, tag, m->header, host, m->packed, m->request, m->payload, m->epoch);
  // The log copy overlaps the transfer; it is done before the send can be reported complete.
  if (s.log_slot && bytes && !m->device) std::memcpy(s.log_slot, buf, bytes);
  if (s.log_slot && direct) copy_into_log(*m, s.log_slot, buf, bytes, p_->log().find(dest, s.header.seq)->segment);
  m->owner = this;
  live_.push_back(m.get());
  REPRISE_COMM_CHECK(posted);  // (after the message is registered: a repair reaches it)
  return Comm::Request(std::move(m));
}

bool CommState::on_device(const void* buf, std::optional<MemorySpace> space) {
  if (space) return *space == MemorySpace::Device;
  return host_.device_pointers_possible() && host_.device().is_device_pointer(buf);
}

bool CommState::device_direct(std::size_t bytes) {
  if (bytes <= kPackLimit) return false;
  if (!device_mpi_) device_mpi_ = host_.device_mpi();
  return device_mpi_->direct;
}

std::shared_ptr<std::byte> CommState::take_staging(std::size_t bytes) {
  gpu::Buffer b = staging_pool_->take(bytes);
  if (!b) {
    b = host_.device().alloc_pinned(bytes);
    std::memset(b.data(), 0, b.size());  // first touch now (see logging::MessageLog::room_for)
  }
  auto* p = static_cast<std::byte*>(b.data());
  auto owned = std::make_shared<gpu::Buffer>(std::move(b));
  std::weak_ptr<logging::SegmentPool> pool = staging_pool_;
  return std::shared_ptr<std::byte>(p, [owned, pool](std::byte*) {
    if (auto q = pool.lock()) q->give(std::move(*owned));
  });
}

gpu::Stream& CommState::stream() {
  if (!stream_) stream_ = host_.device().create_stream(false);
  return *stream_;
}

void CommState::device_to_host(void* dst, const void* src, std::size_t bytes) {
  gpu::Backend& be = host_.device();
  be.copy_to_host(dst, src, bytes, stream());
  be.synchronize(stream());
}

void CommState::host_to_device(void* dst, const void* src, std::size_t bytes) {
  gpu::Backend& be = host_.device();
  be.copy_to_device(dst, src, bytes, stream());
  be.synchronize(stream());
}

void CommState::copy_into_log(PendingMessage& m, void* slot, const void* buf, std::size_t bytes,
                              std::shared_ptr<logging::Segment> segment) {
  gpu::Backend& be = host_.device();
  while (!log_copies_.empty() && be.query(*log_copies_.front().done)) log_copies_.pop_front();
  be.copy_to_host(slot, buf, bytes, stream());
  m.log_copy = be.record(stream());
  log_copies_.push_back(LogCopy{m.log_copy, std::move(segment)});
}

void CommState::log_copies_done() {
  if (log_copies_.empty()) return;
  host_.device().synchronize(stream());  // the copies are in order on it
  log_copies_.clear();
}

Comm::Request CommState::irecv(void* buf, std::size_t bytes, int src, int tag, std::optional<MemorySpace> space) {
  check_peer(src, size(), "irecv");
  enter();
  auto m = std::make_unique<PendingMessage>();
  m->receive = true;
  m->peer = src;
  m->tag = tag;
  m->buf = buf;
  m->bytes = bytes;
  m->device = bytes > 0 && on_device(buf, space);
  m->owner = this;
  live_.push_back(m.get());
  post_receive(*m);
  return Comm::Request(std::move(m));
}

void CommState::post_receive(PendingMessage& m) {
  // The header, and the payload when it is small: a buffer of an earlier receive when there is one (a new one
  // costs an allocation and zeroing 4000 bytes, a good part of a small message's time).
  if (m.packed.size() != kReceiveBuffer && !spare_receive_buffers_.empty()) {
    m.packed = std::move(spare_receive_buffers_.back());
    spare_receive_buffers_.pop_back();
  }
  m.packed.resize(kReceiveBuffer);
  m.epoch = chan_.at(static_cast<std::size_t>(m.peer));
  awaiting_header_.push_back(&m);
  REPRISE_COMM_CHECK(MPI_Irecv(m.packed.data(), static_cast<int>(m.packed.size()), MPI_BYTE, m.peer, m.tag,
                               epochs_.at(static_cast<std::size_t>(m.epoch)).first, &m.request));
}

void CommState::forget(PendingMessage* m) {
  awaiting_header_.erase(std::remove(awaiting_header_.begin(), awaiting_header_.end(), m), awaiting_header_.end());
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
    advance_headers(self);
    host_.poll_failure();
    if (control_due()) poll_control();
  }
}

void CommState::advance_headers(const PendingMessage* except) {
  for (std::size_t i = 0; i < awaiting_header_.size();) {
    PendingMessage* p = awaiting_header_[i];
    int flag = 0;
    MPI_Status st;
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
    if (m.request != MPI_REQUEST_NULL) {  // stage 1: the header (and a small payload)
      MPI_Status st;
      if (!finish(m.request, &st, block, &m)) return false;
      if (m.request != MPI_REQUEST_NULL) continue;  // a repair posted it again
      header_arrived(m, st);
    }
    if (m.payload != MPI_REQUEST_NULL && !finish(m.payload, MPI_STATUS_IGNORE, block, &m)) return false;
    if (m.request != MPI_REQUEST_NULL) continue;  // a repair posted it again
    if (deliver(m)) {
      if (m.device && m.result && m.staged) host_to_device(m.buf, m.staged, m.result);  // (null: direct)
      break;
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

bool CommState::deliver(PendingMessage& m) {
  const protocol::Header h{m.header.seq, m.header.phase, m.header.group};
  const auto arrival = p_->arrival(m.peer, h);
  if (arrival == protocol::Process::Arrival::Duplicate) {
    ++stats_.duplicates_dropped;
    return false;
  }
  if (arrival != protocol::Process::Arrival::Deliver)
    throw ProtocolError("reprise::Comm: rank " + std::to_string(rank_) + " completed message " +
                        std::to_string(h.seq) + " from rank " + std::to_string(m.peer) + " after " +
                        std::to_string(p_->delivered(m.peer)) + " of its messages: messages from one rank must be "
                        "received (completed) in the order it sent them, whatever their tags, because the protocol "
                        "replays each channel in order");
  p_->deliver(m.peer, h);
  ++stats_.received;
  return true;
}

std::size_t CommState::wait(Comm::Request& r) {
  if (!r.p_) throw UsageError("reprise::Comm::wait on a request that is not pending");
  PendingMessage& m = *r.p_;
  if (!m.done) progress(m, true);
  const std::size_t n = m.result;
  r.p_.reset();
  return n;
}

bool CommState::test(Comm::Request& r) {
  if (!r.p_) return true;
  if (!r.p_->done && !progress(*r.p_, false)) return false;
  r.p_.reset();
  return true;
}

// Small sends complete in order: the completed ones at the front are dropped. An error leaves the queue as it
// is (spurious: tested again later; a repair replaced the queue).
template <class Queue>
void CommState::pop_completed(Queue& sends) {
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

void CommState::maybe_poll_views() {
  if (++ops_since_poll_ >= kPollEvery) poll_views();
}

void CommState::poll_views() {
  ops_since_poll_ = 0;
  // One wildcard probe per message: committed views (kViewTag) and checkpoint asks of the log bound (kAskTag).
  for (;;) {
    int flag = 0;
    MPI_Status st;
    REPRISE_COMM_CHECK(probe_any_source(host_.view_comm(), MPI_ANY_TAG, &flag, &st));
    if (!flag) break;
    if (st.MPI_SOURCE < 0 || st.MPI_SOURCE >= size() || (st.MPI_TAG != kViewTag && st.MPI_TAG != kAskTag)) {
      std::fprintf(stderr, "reprise: rank %d: a message from rank %d on the view communicator (tag %d, error %d) "
                   "ignored\n", rank_, st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR);
      break;
    }
    std::uint64_t v[2];
    const int rc = polled::recv(v, 2, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, host_.view_comm(), MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {  // spurious (probe again) or a repair (the communicators changed)
      host_.check_mpi(rc, REPRISE_MPI_SITE(polled::recv(v, 2, MPI_UINT64_T, src, tag, view_comm)));
      continue;
    }
    if (st.MPI_TAG == kAskTag) {
      asked_ = true;
      ++stats_.asks_received;
      continue;
    }
    const std::size_t before = p_->log().live_entries();
    p_->apply_view(st.MPI_SOURCE, protocol::View{v[0], v[1]});
    stats_.released += before - p_->log().live_entries();
    ++stats_.views_received;
  }
  pop_completed(view_sends_);
}

static std::vector<int> group_members(const std::vector<int>& group_of, int rank) {
  std::vector<int> members;
  for (int r = 0; r < static_cast<int>(group_of.size()); ++r)
    if (group_of[static_cast<std::size_t>(r)] == group_of[static_cast<std::size_t>(rank)]) members.push_back(r);
  return members;
}

std::vector<std::uint64_t> CommState::barrier_contribution() {
  poll_views();
  const std::vector<int> members = group_members(group_of_, rank_);
  const std::size_t G = members.size();
  std::vector<std::uint64_t> mine(1 + 2 * G);
  mine[0] = p_->phase();
  for (std::size_t i = 0; i < G; ++i) {
    mine[1 + i] = p_->sent(members[i]);
    mine[1 + G + i] = p_->delivered(members[i]);
  }
  return mine;
}

void CommState::barrier_result(const std::vector<const std::uint64_t*>& member, std::uint64_t version) {
  const std::vector<int> members = group_members(group_of_, rank_);
  const std::size_t G = members.size();
  std::uint64_t phase = 0;
  for (std::size_t a = 0; a < G; ++a) {
    const std::uint64_t* ra = member[a];
    phase = std::max(phase, ra[0]);
    for (std::size_t b = 0; b < G; ++b) {
      const std::uint64_t* rb = member[b];
      if (a != b && ra[1 + b] != rb[1 + G + a])
        throw ProtocolError("checkpoint " + std::to_string(version) + ": the channel from rank " +
                            std::to_string(members[a]) + " to rank " + std::to_string(members[b]) +
                            " (same group) is not empty: " + std::to_string(ra[1 + b]) + " sent, " +
                            std::to_string(rb[1 + G + a]) + " delivered. Every message sent inside a group must "
                            "be received before the group checkpoints (checkpoint() is a consistent cut).");
    }
  }
  ++stats_.channel_checks;
  asks_sent_ = false;
  p_->raise_phase(phase);
  log_copies_done();  // the snapshot's payloads are read below
  // Capture into the region (counters and views) and keep the log snapshot in memory.
  const std::size_t N = group_of_.size();
  region_[0] = p_->phase();
  for (std::size_t q = 0; q < N; ++q) {
    region_[1 + q] = p_->sent(static_cast<int>(q));
    region_[1 + N + q] = p_->delivered(static_cast<int>(q));
    region_[1 + 2 * N + q] = p_->view(static_cast<int>(q)).delivered;
    region_[1 + 3 * N + q] = p_->view(static_cast<int>(q)).sent;
  }
  write_log_region(captures_[version] = p_->capture());
}

std::pair<void*, std::size_t> CommState::locate_log_region(std::optional<std::size_t> bytes) {
  if (bytes) {
    log_region_.assign(*bytes, std::byte{0});  // restore() writes all of it
    region_compact_ = true;
  }
  return {log_region_.data(), log_region_.size()};
}

namespace {
constexpr std::uint64_t kRegionMagic = 0x31474552474f4c50ull;  // "PLOGREG1"
constexpr std::size_t kRegionHeader = 64, kIndexEntry = 48;
std::size_t align64(std::size_t n) { return (n + 63) & ~std::size_t{63}; }
}  // namespace

void CommState::write_log_region(const protocol::Capture& c) {
  const std::vector<logging::Entry>& live = c.log.entries;
  // Released entries leave the map (their bytes stay, unchanged); new ones need room behind the others.
  std::set<std::pair<int, std::uint64_t>> keys;
  for (const auto& e : live) keys.insert({e.dest, e.seq});
  for (auto it = region_offset_.begin(); it != region_offset_.end();)
    it = keys.count(it->first) ? std::next(it) : region_offset_.erase(it);
  std::size_t tail = 8;  // index and orphan record
  for (const auto& r : c.orphan_record) tail += 8 + 16 * r.size();
  tail += kIndexEntry * live.size();
  auto added = [&] {
    std::size_t n = 0;
    for (const auto& e : live)
      if (!region_offset_.count({e.dest, e.seq})) n += align64(e.bytes);
    return n;
  };
  std::size_t add = added();
  if (region_compact_ || region_bump_ + add + tail > log_region_.size()) {
    region_offset_.clear();  // rewrite compactly from the start
    region_bump_ = kRegionHeader;
    region_compact_ = false;
    add = added();
  }
  const std::size_t need = region_bump_ + add + tail;
  if (need > log_region_.size()) {
    // Room for growth (each change of size makes a full version): half as much again, in 64 KiB steps.
    constexpr std::size_t kStep = std::size_t{64} << 10;
    const std::size_t want = std::max(need + need / 2, 2 * log_region_.size());
    log_region_.resize((want + kStep - 1) / kStep * kStep, std::byte{0});
  }
  std::byte* const base = log_region_.data();
  for (const auto& e : live) {
    auto [it, fresh] = region_offset_.try_emplace({e.dest, e.seq}, region_bump_);
    if (!fresh) continue;
    if (e.bytes) std::memcpy(base + region_bump_, e.data(), e.bytes);
    region_bump_ += align64(e.bytes);
  }
  std::byte* p = base + region_bump_;
  auto put = [&p](std::uint64_t v) {
    std::memcpy(p, &v, 8);
    p += 8;
  };
  for (const auto& e : live) {
    put(static_cast<std::uint64_t>(e.dest));
    put(e.seq);
    put(e.phase);
    put(static_cast<std::uint64_t>(static_cast<std::int64_t>(e.tag)));
    put(e.bytes);
    put(region_offset_.at({e.dest, e.seq}));
  }
  put(c.orphan_record.size());
  for (const auto& r : c.orphan_record) {
    put(r.size());
    for (const auto& [seq, phase] : r) {
      put(seq);
      put(phase);
    }
  }
  const std::uint64_t end = static_cast<std::uint64_t>(p - base);
  const std::uint64_t header[6] = {kRegionMagic, region_bump_, live.size(), end,
                                   XXH3_64bits(base + region_bump_, end - region_bump_), 0};
  std::memcpy(base, header, sizeof header);
}

void CommState::read_log_region(protocol::Capture& c) {
  const std::byte* const base = log_region_.data();
  const std::size_t size = log_region_.size();
  auto corrupt = [&](const std::string& what) {
    return CorruptCheckpointError("region 'reprise.log'", what + " (region of " + std::to_string(size) + " bytes)");
  };
  std::uint64_t h[6] = {};
  if (size < kRegionHeader) throw corrupt("truncated header");
  std::memcpy(h, base, sizeof h);
  if (h[0] != kRegionMagic) throw corrupt("not a message log region (bad magic)");
  const std::uint64_t index = h[1], count = h[2], end = h[3];
  if (index < kRegionHeader || end > size || index > end || (end - index) / kIndexEntry < count)
    throw corrupt("index out of bounds");
  if (XXH3_64bits(base + index, end - index) != h[4]) throw corrupt("index checksum mismatch");
  std::size_t at = index;
  auto get = [&]() {
    if (end - at < 8) throw corrupt("truncated index");
    std::uint64_t v = 0;
    std::memcpy(&v, base + at, 8);
    at += 8;
    return v;
  };
  c.log.entries.clear();
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto dest = static_cast<int>(get());
    const std::uint64_t seq = get(), phase = get();
    const auto tag = static_cast<std::int32_t>(static_cast<std::int64_t>(get()));
    const std::uint64_t bytes = get(), offset = get();
    if (offset < kRegionHeader || offset > index || bytes > index - offset)
      throw corrupt("entry " + std::to_string(i) + " outside the payload area");
    c.log.entries.push_back(p_->log().copy_in(dest, seq, phase, tag, base + offset, static_cast<std::size_t>(bytes)));
  }
  const std::uint64_t ranks = get();
  if (ranks != group_of_.size())
    throw corrupt("an orphan record for " + std::to_string(ranks) + " ranks in a job of " +
                  std::to_string(group_of_.size()) + " (a version of another job?)");
  c.orphan_record.assign(group_of_.size(), {});
  for (auto& r : c.orphan_record) {
    const std::uint64_t k = get();
    if (k > (end - at) / 16) throw corrupt("an orphan record of " + std::to_string(k) + " entries does not fit");
    for (std::uint64_t i = 0; i < k; ++i) {
      const std::uint64_t seq = get();
      r.emplace_back(seq, get());
    }
  }
}

void CommState::committed(std::uint64_t version) {
  if (!floor_gated_) {
    announce(version);
  } else if (floor_) {
    announce(std::min(version, *floor_));
  }
}

void CommState::job_floor(std::uint64_t floor) {
  if (!floor_ || floor > *floor_) floor_ = floor;
}

void CommState::announce(std::uint64_t through) {
  auto it = captures_.upper_bound(through);
  if (it == captures_.begin()) return;  // none that old (committed before this process used Comm's checkpoints)
  --it;
  const std::uint64_t version = it->first;
  if (announced_ && version <= *announced_) return;
  const protocol::Capture& c = it->second;
  for (int q = 0; q < size(); ++q) {
    if (group_of(q) == group_of(rank_)) continue;
    const std::size_t i = static_cast<std::size_t>(q);
    view_sends_.push_back({MPI_REQUEST_NULL, {c.delivered[i], c.sent[i]}});
    auto& back = view_sends_.back();
    REPRISE_COMM_CHECK(MPI_Isend(back.second.data(), 2, MPI_UINT64_T, q, kViewTag, host_.view_comm(), &back.first));
    ++stats_.views_sent;
  }
  announced_ = version;
  captures_.erase(captures_.begin(), it);  // older ones are obsolete
}

bool CommState::checkpoint_wanted() {
  poll_views();
  const bool over = p_->log().over_bound();
  stats_.over_bound_streak = over ? stats_.over_bound_streak + 1 : 0;
  stats_.over_bound_streak_max = std::max(stats_.over_bound_streak_max, stats_.over_bound_streak);
  if (stats_.over_bound_streak == kBoundTooLowChecks) {
    const std::string segments =
        log_options_.bound_bytes <= log_options_.segment_bytes
            ? " (the log takes memory in segments of " + std::to_string(log_options_.segment_bytes) +
                  " bytes: a bound of one segment is passed whenever an entry is live)"
            : std::string();
    std::fprintf(stderr,
                 "reprise: warning: rank %d: its message log held %zu bytes, over the log bound (REPRISE_LOG_BOUND, "
                 "%zu bytes), at %llu log checks in a row although each asked for a checkpoint: entries wait until "
                 "their receivers' groups commit%s, and what this rank sends to other groups meanwhile needs more "
                 "than the bound, so its group now checkpoints at every check%s. Raise the bound above %zu bytes (the "
                 "most its log has held).\n",
                 rank_, p_->log().held_bytes(), log_options_.bound_bytes,
                 static_cast<unsigned long long>(kBoundTooLowChecks),
                 floor_gated_ ? " and every group committed again (the job floor)" : "",
                 segments.c_str(), stats_.log_max_held);
  }
  if (over) {
    ++stats_.log_over_bound;
    if (!asks_sent_) {
      asks_sent_ = true;
      // Gated on the job floor, the views release nothing until every group committed again: ask them all (a
      // group that exchanges nothing and never checkpoints on its own would otherwise hold every log forever).
      std::vector<int> ask;
      if (floor_gated_) {
        for (int q = 0; q < size(); ++q)
          if (group_of(q) != group_of(rank_)) ask.push_back(q);
      } else {
        ask = p_->log().dests();
      }
      for (int q : ask) {
        view_sends_.push_back({MPI_REQUEST_NULL, {0, 0}});
        auto& back = view_sends_.back();
        REPRISE_COMM_CHECK(MPI_Isend(back.second.data(), 2, MPI_UINT64_T, q, kAskTag, host_.view_comm(), &back.first));
        ++stats_.asks_sent;
      }
    }
  }
  return over || std::exchange(asked_, false);
}

void CommState::after_restore(std::uint64_t version) {
  const std::size_t N = group_of_.size();
  protocol::Capture c;
  c.phase = region_[0];
  c.sent.assign(region_.begin() + 1, region_.begin() + 1 + static_cast<std::ptrdiff_t>(N));
  c.delivered.assign(region_.begin() + 1 + static_cast<std::ptrdiff_t>(N),
                     region_.begin() + 1 + 2 * static_cast<std::ptrdiff_t>(N));
  c.view.resize(N);
  for (std::size_t q = 0; q < N; ++q) c.view[q] = protocol::View{region_[1 + 2 * N + q], region_[1 + 3 * N + q]};
  // The log snapshot and orphan record of that version: still in memory when this process took it, otherwise (a
  // replacement, a relaunch) from the version's own region.
  auto it = captures_.find(version);
  if (it != captures_.end()) {
    c.log = it->second.log;
    c.orphan_record = it->second.orphan_record;
  } else {
    read_log_region(c);
  }
  captures_.erase(captures_.upper_bound(version), captures_.end());
  region_compact_ = true;  // the restored region's offsets are not this process's map
  if (announced_ && *announced_ > version) announced_ = version;
  p_->restore(c);
}

void CommState::start_over() {
  p_ = std::make_unique<protocol::Process>(rank_, group_of_, log_options_, log_memory_);
  std::fill(region_.begin(), region_.end(), 0);
  captures_.clear();
  announced_.reset();
  floor_.reset();
  region_compact_ = true;
}

// ---- repairs and recovery --------------------------------------------------------------------------------------

// A receive is cancelled and then completed before its buffer may be reused or freed: a cancel does nothing to
// a receive already matched, whose data may still be arriving (a large message). One that does not complete
// within a short bound keeps its buffer in the graveyard (the request is never freed, the memory never reused).
void CommState::abandon(PendingMessage& m) {
  for (MPI_Request* r : {&m.request, &m.payload}) {
    if (*r == MPI_REQUEST_NULL) continue;
    if (!m.receive) {  // a send: it completes or fails on its own (its buffers outlive it: see after_repair)
      REPRISE_MPI_DISCARD(MPI_Request_free(r));
      continue;
    }
    REPRISE_MPI_DISCARD(MPI_Cancel(r));  // (completed below, or buried)
    bool done = false;
    for (int i = 0; i < 20000 && !done; ++i) {
      int flag = 0;
      done = MPI_Test(r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
    }
    if (!done) {
      graveyard_.emplace_back(*r, r == &m.request ? std::move(m.packed) : std::vector<std::byte>{});
      *r = MPI_REQUEST_NULL;
    }
  }
  awaiting_header_.erase(std::remove(awaiting_header_.begin(), awaiting_header_.end(), &m), awaiting_header_.end());
  if (m.hold) kept_.push_back(std::move(m.hold));  // MPI may still read (a send) or write (a receive) it
  m.staged = nullptr;
}

void CommState::after_repair() {
  log_copies_done();  // before the sends they belong to are abandoned (and their buffers perhaps freed)
  for (auto& [req, buf] : view_sends_)
    if (req != MPI_REQUEST_NULL) REPRISE_MPI_DISCARD(MPI_Request_free(&req));  // (an epoch a failure ended)
  view_sends_.clear();
  for (auto& [req, buf] : control_sends_)
    if (req != MPI_REQUEST_NULL) REPRISE_MPI_DISCARD(MPI_Request_free(&req));  // (an epoch a failure ended)
  control_sends_.clear();
  for (auto& o : background_) buried_.push_back(std::move(o));  // MPI may still read their buffers
  background_.clear();
  for (PendingMessage* m : live_) {
    abandon(*m);
    m->done = true;
    m->owner = nullptr;
  }
  live_.clear();
  std::fill(chan_.begin(), chan_.end(), static_cast<int>(epochs_.size()) - 1);
  coordinator_.reset();
  exchange_pending_ = false;
}

void CommState::begin_recovery(std::uint32_t epoch, const std::set<int>& rolled_back, int coordinator) {
  ++stats_.recoveries;
  epoch_ = epoch;
  rolled_back_ = rolled_back;
  coordinator_rank_ = coordinator;
  coordinator_.reset();
  exchanging_ = false;
  in_r_ = rolled_back.count(rank_) > 0;
  log_copies_done();  // sends to R are completed below, and the exchange reads the log
  if (in_r_) {
    after_repair();  // everything of this process is redone from its group's version
    exchange_pending_ = true;
    return;
  }
  // Control messages and committed views of older epochs went over revoked communicators.
  for (auto& [req, buf] : view_sends_)
    if (req != MPI_REQUEST_NULL) REPRISE_MPI_DISCARD(MPI_Request_free(&req));  // (an epoch a failure ended)
  view_sends_.clear();
  for (auto& [req, buf] : control_sends_)
    if (req != MPI_REQUEST_NULL) REPRISE_MPI_DISCARD(MPI_Request_free(&req));  // (an epoch a failure ended)
  control_sends_.clear();
  const int newest = static_cast<int>(epochs_.size()) - 1;
  for (int r : rolled_back) chan_.at(static_cast<std::size_t>(r)) = newest;
  // Replays and queued sends to R are recomputed by the exchange (Process::recover); those to survivors stay.
  for (auto it = background_.begin(); it != background_.end();) {
    Outbound& o = **it;
    if (!rolled_back.count(o.dest)) {
      ++it;
      continue;
    }
    buried_.push_back(std::move(*it));  // never received on the old communicators; MPI may still read it
    it = background_.erase(it);
  }
  for (PendingMessage* m : std::vector<PendingMessage*>(live_)) {
    if (!rolled_back.count(m->peer)) continue;
    abandon(*m);
    if (m->receive) {
      m->result = 0;
      m->packed = std::vector<std::byte>();  // never the buffer of the abandoned request
      post_receive(*m);  // on the new communicators; R sends (or replays) it again
    } else {
      m->done = true;  // logged (R is another group): the exchange makes this process replay what R lacks
    }
  }
}

void CommState::restart_exchange(bool in_recovery) {
  host_.before_restart_exchange();
  exchange_pending_ = false;
  exchanging_ = in_r_;  // until it completes: a failure during it rolls this group back again
  // In a recovery a failure starts a new repair attempt (the caller's); otherwise it starts the repair here.
  const auto check = [&](int rc, const CallSite& at) {
    in_recovery ? host_.collective_ok(rc, at) : host_.check_mpi(rc, at);
  };
#define REPRISE_EXCHANGE_CHECK(call) check((call), REPRISE_MPI_SITE(call))
  const std::size_t N = group_of_.size();
  // This process's counts now, and its group's committed view of each channel (restored state in R).
  std::vector<std::uint64_t> mine(4 * N, 0);
  const protocol::Capture* committed = nullptr;
  if (!in_r_ && announced_) {
    auto it = captures_.find(*announced_);
    if (it != captures_.end()) committed = &it->second;
  }
  for (std::size_t q = 0; q < N; ++q) {
    mine[q] = p_->sent(static_cast<int>(q));
    mine[N + q] = p_->delivered(static_cast<int>(q));
    mine[2 * N + q] = in_r_ ? p_->delivered(static_cast<int>(q)) : committed ? committed->delivered[q] : 0;
    mine[3 * N + q] = in_r_ ? p_->sent(static_cast<int>(q)) : committed ? committed->sent[q] : 0;
  }
  std::vector<std::uint64_t> all(4 * N * N);
  MPI_Comm ctl = host_.control_comm();
  REPRISE_EXCHANGE_CHECK(polled::allgather(mine.data(), static_cast<int>(4 * N), MPI_UINT64_T, all.data(),
                                           static_cast<int>(4 * N), MPI_UINT64_T, ctl));
  const std::size_t me = static_cast<std::size_t>(rank_);
  std::vector<protocol::PeerCounts> peers;
  for (std::size_t q = 0; q < N; ++q) {
    if (group_of_[q] == group_of_[me]) continue;
    const std::uint64_t* x = &all[q * 4 * N];
    peers.push_back(protocol::PeerCounts{static_cast<int>(q), rolled_back_.count(static_cast<int>(q)) > 0, x[N + me],
                                      x[me], protocol::View{x[2 * N + me], x[3 * N + me]}});
  }
  const bool gated = coordinator_rank_ >= 0;
  const protocol::RecoveryWork w = p_->recover(in_r_, peers, gated);
  // Reports (step 6): [phase, #replay phases, phases..., #orphans, orphan phases...], gathered everywhere, so
  // every process computes the coordinator's first releases itself; later ones come from the coordinator.
  std::vector<std::uint64_t> report{w.phase, w.replay_phases.size()};
  report.insert(report.end(), w.replay_phases.begin(), w.replay_phases.end());
  report.push_back(w.orphan_phases.size());
  report.insert(report.end(), w.orphan_phases.begin(), w.orphan_phases.end());
  const int n = static_cast<int>(N);
  int count = static_cast<int>(report.size());
  std::vector<int> counts(N), displs(N);
  REPRISE_EXCHANGE_CHECK(polled::allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, ctl));
  int total = 0;
  for (int i = 0; i < n; ++i) displs[static_cast<std::size_t>(i)] = std::exchange(total, total + counts[static_cast<std::size_t>(i)]);
  std::vector<std::uint64_t> reports(static_cast<std::size_t>(total));
  REPRISE_EXCHANGE_CHECK(polled::allgatherv(report.data(), count, MPI_UINT64_T, reports.data(), counts.data(),
                                            displs.data(), MPI_UINT64_T, ctl));
#undef REPRISE_EXCHANGE_CHECK
  for (const auto& [dest, seqs] : w.replays) {
    stats_.replayed += seqs.size();
    (void)dest;
  }
  stats_.replayed_bytes += w.replay_bytes;
  exchanging_ = false;
  if (!gated) {
    flush_outbox();
    return;
  }
  std::vector<protocol::Coordinator::Item> items;
  std::vector<std::uint64_t> orphans;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t* r = &reports[static_cast<std::size_t>(displs[static_cast<std::size_t>(i)])];
    items.push_back({i, protocol::ItemKind::Block, r[0]});
    const std::size_t nrep = r[1];
    for (std::size_t k = 0; k < nrep; ++k) items.push_back({i, protocol::ItemKind::Replay, r[2 + k]});
    const std::size_t norph = r[2 + nrep];
    orphans.insert(orphans.end(), r + 3 + nrep, r + 3 + nrep + norph);
  }
  protocol::Coordinator c;
  c.begin(epoch_, std::move(items), orphans);
  const auto first = c.release();
  for (const auto& it : first)
    if (it.process == rank_) p_->release(it.kind, it.phase);
  if (rank_ == coordinator_rank_ && !c.done()) coordinator_ = std::move(c);
  flush_outbox();
}

void CommState::enter() {
  host_.poll_failure();
  if (exchange_pending_) restart_exchange(false);
  if (control_due()) poll_control();
  while (p_->blocked()) {  // a rolled-back process waits for the coordinator's release (step 6)
    host_.poll_failure();
    poll_control();
  }
  maybe_poll_views();
}

// Control messages (Notify, Release) and background sends matter only while a recovery is under way here: the
// coordinator's, a release this process waits for, replays or held sends on their way. Otherwise only stale
// messages of older attempts can come: probed every kPollEvery calls (a wildcard probe costs about as much as
// the rest of a small message's path, and a blocking wait would otherwise make one per spin).
bool CommState::control_due() {
  if (coordinator_ || p_->awaiting_release() || !control_sends_.empty() || !background_.empty() ||
      ++ops_since_control_ >= kPollEvery) {
    ops_since_control_ = 0;
    return true;
  }
  return false;
}

void CommState::control_send(int dest, int tag, std::uint64_t a, std::uint64_t b) {
  control_sends_.push_back({MPI_REQUEST_NULL, {epoch_, a, b}});
  auto& back = control_sends_.back();
  REPRISE_COMM_CHECK(MPI_Isend(back.second.data(), 3, MPI_UINT64_T, dest, tag, host_.control_comm(), &back.first));
}

void CommState::release_items(const std::vector<protocol::Coordinator::Item>& items) {
  for (const auto& it : items) {
    if (it.process == rank_) {
      p_->release(it.kind, it.phase);
    } else {
      control_send(it.process, kReleaseTag, it.kind == protocol::ItemKind::Block ? 0 : 1, it.phase);
    }
  }
  flush_outbox();
}

void CommState::poll_control() {
  if (epochs_.empty()) return;
  for (;;) {
    const MPI_Comm ctl = host_.control_comm();  // again after a repair
    int flag = 0;
    MPI_Status st;
    REPRISE_COMM_CHECK(probe_any_source(ctl, MPI_ANY_TAG, &flag, &st));
    if (!flag) break;
    std::uint64_t v[3];
    const int rc = polled::recv(v, 3, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, ctl, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {  // spurious (probe again) or a repair (the communicators changed)
      host_.check_mpi(rc, REPRISE_MPI_SITE(polled::recv(v, 3, MPI_UINT64_T, src, tag, ctl)));
      continue;
    }
    if (v[0] != epoch_) continue;  // stale: an older recovery attempt
    if (st.MPI_TAG == kNotifyTag) {
      if (!coordinator_) continue;
      coordinator_->notify(static_cast<std::uint32_t>(v[0]), v[1]);
      release_items(coordinator_->release());
      if (coordinator_->done()) coordinator_.reset();
    } else if (st.MPI_TAG == kReleaseTag) {
      p_->release(v[1] == 0 ? protocol::ItemKind::Block : protocol::ItemKind::Replay, v[2]);
      flush_outbox();
    }
  }
  pop_completed(control_sends_);
  const auto recoveries = stats_.recoveries;
  for (auto it = background_.begin(); it != background_.end();) {
    Outbound& o = **it;
    int flag = 0;
    for (MPI_Request* r : {&o.request, &o.payload_request})
      if (*r != MPI_REQUEST_NULL) REPRISE_COMM_TESTED(MPI_Test(r, &flag, MPI_STATUS_IGNORE), *r);
    if (stats_.recoveries != recoveries) return;  // a repair rebuilt the queue (and invalidated `it`)
    it = o.request == MPI_REQUEST_NULL && o.payload_request == MPI_REQUEST_NULL ? background_.erase(it) : std::next(it);
  }
}

void CommState::flush_outbox() {
  const std::vector<int> dests = p_->queued_dests();
  if (!dests.empty()) log_copies_done();  // replays read their log entries
  for (int d : dests)
    for (auto& m : p_->ready(d)) {
      auto o = std::make_unique<Outbound>();
      o->dest = d;
      o->payload = std::move(m.payload);
      o->header = WireHeader{m.header.seq, m.header.phase, o->payload.size(), m.header.group, kMagic};
      if (m.replay) ++stats_.replayed_sent;
      REPRISE_COMM_CHECK(post_send(d, m.tag, o->header, o->payload.data(), o->packed, o->request, o->payload_request,
                                   o->epoch));
      background_.push_back(std::move(o));
    }
}

std::string CommState::debug_state() const {
  std::ostringstream o;
  o << "epoch " << epoch_ << " phase " << p_->phase() << (p_->blocked() ? " BLOCKED" : "")
    << (p_->send_blocked() ? " SEND-BLOCKED" : "") << " coordinator " << coordinator_rank_
    << (coordinator_ ? " (outstanding)" : "") << " background " << background_.size() << " outbox";
  for (int d : p_->queued_dests()) o << " " << d;
  o << " | pending";
  for (const PendingMessage* m : live_)
    o << " " << (m->receive ? "recv<" : "send>") << m->peer << "#" << m->tag << (m->request != MPI_REQUEST_NULL ? "h" : "")
      << (m->payload != MPI_REQUEST_NULL ? "p" : "");
  o << " | sent/delivered";
  for (int q = 0; q < size(); ++q) o << " " << q << ":" << p_->sent(q) << "/" << p_->delivered(q);
  return o.str();
}

bool CommState::recovery_idle() const {
  return !coordinator_ && !p_->blocked() && !p_->send_blocked() && p_->queued_dests().empty() && background_.empty();
}

std::string CommState::stats_json() const {
  std::ostringstream o;
  o << "{\"intra_messages\":" << stats_.intra_messages << ",\"intra_bytes\":" << stats_.intra_bytes
    << ",\"inter_messages\":" << stats_.inter_messages << ",\"inter_bytes\":" << stats_.inter_bytes
    << ",\"received\":" << stats_.received << ",\"log_live_entries\":" << p_->log().live_entries()
    << ",\"log_live_payload_bytes\":" << p_->log().live_payload_bytes()
    << ",\"log_held_bytes\":" << p_->log().held_bytes() << ",\"log_max_held_bytes\":" << stats_.log_max_held
    << ",\"log_pooled_bytes\":" << p_->log().pooled_bytes()
    << ",\"log_segments_allocated\":" << p_->log().segments_allocated()
    << ",\"log_segments_reused\":" << p_->log().segments_reused()
    << ",\"log_entries_released\":" << stats_.released << ",\"views_sent\":" << stats_.views_sent
    << ",\"views_received\":" << stats_.views_received << ",\"channel_checks\":" << stats_.channel_checks
    << ",\"recoveries\":" << stats_.recoveries << ",\"replays_owed\":" << stats_.replayed
    << ",\"replays_sent\":" << stats_.replayed_sent << ",\"replayed_bytes\":" << stats_.replayed_bytes
    << ",\"orphans_notified\":" << stats_.orphans_notified << ",\"duplicates_dropped\":" << stats_.duplicates_dropped
    << ",\"duplicates_skipped\":" << stats_.duplicates_skipped
    << ",\"device_messages\":" << stats_.device_messages << ",\"device_bytes\":" << stats_.device_bytes
    << ",\"device_direct\":" << stats_.device_direct;
  if (device_mpi_) o << ",\"device_mpi\":\"" << device_mpi_->reason << "\"";
  o << ",\"log_bound_bytes\":" << log_options_.bound_bytes << ",\"log_over_bound\":" << stats_.log_over_bound
    << ",\"checkpoint_asks_sent\":" << stats_.asks_sent << ",\"checkpoint_asks_received\":" << stats_.asks_received
    << ",\"forced_checkpoints\":" << stats_.forced_checkpoints
    << ",\"log_over_bound_streak_max\":" << stats_.over_bound_streak_max
    << ",\"phase\":" << p_->phase() << "}";
  return o.str();
}

}  // namespace mpi

// ---- the public face -------------------------------------------------------------------------------------------

Comm::Request::Request() = default;
Comm::Request::Request(std::unique_ptr<mpi::PendingMessage> p) : p_(std::move(p)) {}
Comm::Request::Request(Request&&) noexcept = default;
Comm::Request& Comm::Request::operator=(Request&&) noexcept = default;
Comm::Request::~Request() = default;

int Comm::rank() const { return s_->rank(); }
int Comm::size() const { return s_->size(); }
int Comm::group_of(int r) const { return s_->group_of(r); }

void Comm::send(const void* buf, std::size_t bytes, int dest, int tag) {
  s_->check_tag(tag);
  Request r = s_->isend(buf, bytes, dest, tag);
  s_->wait(r);
}
std::size_t Comm::recv(void* buf, std::size_t bytes, int src, int tag) {
  s_->check_tag(tag);
  Request r = s_->irecv(buf, bytes, src, tag);
  return s_->wait(r);
}
Comm::Request Comm::isend(const void* buf, std::size_t bytes, int dest, int tag) {
  s_->check_tag(tag);
  return s_->isend(buf, bytes, dest, tag);
}
Comm::Request Comm::irecv(void* buf, std::size_t bytes, int src, int tag) {
  s_->check_tag(tag);
  return s_->irecv(buf, bytes, src, tag);
}
Comm::Request Comm::isend(const void* buf, std::size_t bytes, int dest, int tag, MemorySpace space) {
  s_->check_tag(tag);
  return s_->isend(buf, bytes, dest, tag, space);
}
Comm::Request Comm::irecv(void* buf, std::size_t bytes, int src, int tag, MemorySpace space) {
  s_->check_tag(tag);
  return s_->irecv(buf, bytes, src, tag, space);
}
void Comm::send(const void* buf, std::size_t bytes, int dest, int tag, MemorySpace space) {
  Request r = isend(buf, bytes, dest, tag, space);
  s_->wait(r);
}
std::size_t Comm::recv(void* buf, std::size_t bytes, int src, int tag, MemorySpace space) {
  Request r = irecv(buf, bytes, src, tag, space);
  return s_->wait(r);
}
std::size_t Comm::wait(Request& r) { return s_->wait(r); }
void Comm::waitall(std::vector<Request>& rs) {
  for (auto& r : rs)
    if (r.pending()) s_->wait(r);
}
bool Comm::test(Request& r) { return s_->test(r); }

void Comm::sendrecv(const void* send_buf, std::size_t send_bytes, int dest, int send_tag, void* recv_buf,
                    std::size_t recv_bytes, int src, int recv_tag) {
  s_->check_tag(send_tag);
  s_->check_tag(recv_tag);
  Request r = s_->irecv(recv_buf, recv_bytes, src, recv_tag);
  Request s = s_->isend(send_buf, send_bytes, dest, send_tag);
  s_->wait(s);
  s_->wait(r);
}

// Collectives: binomial trees over point-to-point messages, always the same tree (results are reproducible and
// replayable like any other message).
void Comm::bcast(void* buf, std::size_t bytes, int root) {
  const int n = size(), vr = (rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      Request r = s_->irecv(buf, bytes, (vr - mask + root) % n, mpi::kCollectiveTag);
      s_->wait(r);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) {
      Request r = s_->isend(buf, bytes, (vr + mask + root) % n, mpi::kCollectiveTag);
      s_->wait(r);
    }
}

namespace {
template <class T>
T combine(T a, T b, Comm::Op op) {
  switch (op) {
    case Comm::Op::Sum:
      if constexpr (std::is_integral_v<T>)  // wraps modulo 2^64 (signed overflow would be undefined)
        return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
      else
        return a + b;
    case Comm::Op::Min: return std::min(a, b);
    default: return std::max(a, b);
  }
}

template <class T>
T tree_allreduce(Comm& c, mpi::CommState& s, T value, Comm::Op op) {
  const int n = c.size(), me = c.rank();
  for (int mask = 1; mask < n; mask <<= 1) {
    if (me & mask) {
      Comm::Request r = s.isend(&value, sizeof value, me - mask, mpi::kCollectiveTag);
      s.wait(r);
      break;
    }
    if (me + mask < n) {
      T other{};
      Comm::Request r = s.irecv(&other, sizeof other, me + mask, mpi::kCollectiveTag);
      s.wait(r);
      value = combine(value, other, op);
    }
  }
  c.bcast(&value, sizeof value, 0);
  return value;
}
}  // namespace

double Comm::allreduce(double value, Op op) { return tree_allreduce(*this, *s_, value, op); }
std::int64_t Comm::allreduce(std::int64_t value, Op op) { return tree_allreduce(*this, *s_, value, op); }
void Comm::barrier() { allreduce(std::int64_t{0}, Op::Sum); }

std::string Comm::stats_json() const { return s_->stats_json(); }
std::size_t Comm::log_held_bytes() const { return s_->process().log().held_bytes(); }
std::size_t Comm::log_live_entries() const { return s_->process().log().live_entries(); }

}  // namespace reprise
