// reprise::Comm over MPI: see include/reprise/comm.hpp and comm_state.hpp.
#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>
#include <string>

#include "coord/comm_state.hpp"
#include "reprise/errors.hpp"

namespace reprise {
namespace detail {

namespace {
constexpr std::uint32_t kMagic = 0x52505231;  // "RPR1"
constexpr int kCollectiveTag = 32767;         // reserved: application tags are 0..32766
constexpr int kViewTag = 1;
static int payload_tag(std::uint64_t seq) { return static_cast<int>(seq & 0x7fff); }
constexpr unsigned kPollEvery = 64;  // committed views are polled every this many operations (and at checkpoints)
}  // namespace

PendingMessage::~PendingMessage() {
  if (owner) owner->forget(this);
  // Abandoned (a Rollback unwound past it): the message completes or fails on its own.
  if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  if (payload != MPI_REQUEST_NULL) MPI_Request_free(&payload);
}

CommState::CommState(CommHost& host, int rank, std::vector<int> group_of)
    : host_(host),
      rank_(rank),
      group_of_(std::move(group_of)),
      p_(std::make_unique<proto::Process>(rank, group_of_)),
      region_(1 + 4 * group_of_.size(), 0),
      comm_(*this) {}

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

Comm::Request CommState::isend(const void* buf, std::size_t bytes, int dest, int tag) {
  check_peer(dest, size(), "isend");
  maybe_poll_views();
  auto m = std::make_unique<PendingMessage>();
  m->peer = dest;
  m->tag = tag;
  m->bytes = bytes;
  const proto::Process::Send s = p_->send(dest, tag, nullptr, bytes);
  if (s.orphan) {  // a re-executed send the receiver already has (partial rollback only)
    if (s.log_slot && bytes) std::memcpy(s.log_slot, buf, bytes);
    m->done = true;
    m->result = bytes;
    return Comm::Request(std::move(m));
  }
  m->header = WireHeader{s.header.seq, s.header.phase, bytes, s.header.group, kMagic};
  MPI_Comm comm = host_.message_comm();
  int rc;
  if (bytes <= kPackLimit) {
    m->packed.resize(sizeof(WireHeader) + bytes);
    std::memcpy(m->packed.data(), &m->header, sizeof(WireHeader));
    if (bytes) std::memcpy(m->packed.data() + sizeof(WireHeader), buf, bytes);
    rc = MPI_Isend(m->packed.data(), static_cast<int>(m->packed.size()), MPI_BYTE, dest, tag, comm, &m->request);
  } else {
    if (bytes > static_cast<std::size_t>(INT_MAX))
      throw UsageError("reprise::Comm: messages above 2 GiB are not supported; split them");
    rc = MPI_Isend(&m->header, sizeof(WireHeader), MPI_BYTE, dest, tag, comm, &m->request);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, payload_tag(s.header.seq), host_.payload_comm(),
                     &m->payload);
  }
  // The log copy overlaps the transfer; it is done before the send can be reported complete.
  if (s.log_slot && bytes) std::memcpy(s.log_slot, buf, bytes);
  if (s.logged) {
    ++stats_.inter_messages;
    stats_.inter_bytes += bytes;
    stats_.log_max_held = std::max(stats_.log_max_held, p_->log().held_bytes());
  } else {
    ++stats_.intra_messages;
    stats_.intra_bytes += bytes;
  }
  host_.check_mpi(rc);
  m->result = bytes;
  return Comm::Request(std::move(m));
}

Comm::Request CommState::irecv(void* buf, std::size_t bytes, int src, int tag) {
  check_peer(src, size(), "irecv");
  maybe_poll_views();
  auto m = std::make_unique<PendingMessage>();
  m->receive = true;
  m->peer = src;
  m->tag = tag;
  m->buf = buf;
  m->bytes = bytes;
  m->packed.resize(sizeof(WireHeader) + kPackLimit);  // the header, and the payload when it is small
  host_.check_mpi(MPI_Irecv(m->packed.data(), static_cast<int>(m->packed.size()), MPI_BYTE, src, tag,
                            host_.message_comm(), &m->request));
  m->owner = this;
  awaiting_header_.push_back(m.get());
  return Comm::Request(std::move(m));
}

void CommState::forget(PendingMessage* m) {
  awaiting_header_.erase(std::remove(awaiting_header_.begin(), awaiting_header_.end(), m), awaiting_header_.end());
  m->owner = nullptr;
}

bool CommState::finish(MPI_Request& r, MPI_Status* st, bool block, const PendingMessage* self) {
  for (;;) {
    int flag = 0;
    host_.check_mpi(MPI_Test(&r, &flag, st));
    if (flag || !block) return flag != 0;
    advance_headers(self);
  }
}

void CommState::advance_headers(const PendingMessage* except) {
  for (std::size_t i = 0; i < awaiting_header_.size();) {
    PendingMessage* p = awaiting_header_[i];
    int flag = 0;
    MPI_Status st;
    if (p != except && p->request != MPI_REQUEST_NULL) {
      host_.check_mpi(MPI_Test(&p->request, &flag, &st));
      if (flag) {
        header_arrived(*p, st);  // deregisters it
        continue;
      }
    }
    ++i;
  }
}

void CommState::header_arrived(PendingMessage& m, const MPI_Status& st) {
  forget(&m);
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
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
    if (m.result) std::memcpy(m.buf, m.packed.data() + sizeof(WireHeader), m.result);
  } else {
    host_.check_mpi(MPI_Irecv(m.buf, static_cast<int>(m.header.bytes), MPI_BYTE, st.MPI_SOURCE,
                              payload_tag(m.header.seq), host_.payload_comm(), &m.payload));
  }
}

bool CommState::progress(PendingMessage& m, bool block) {
  if (!m.receive) {
    if (m.request != MPI_REQUEST_NULL && !finish(m.request, MPI_STATUS_IGNORE, block, &m)) return false;
    if (m.payload != MPI_REQUEST_NULL && !finish(m.payload, MPI_STATUS_IGNORE, block, &m)) return false;
    m.done = true;
    return true;
  }
  if (m.request != MPI_REQUEST_NULL) {  // stage 1: the header (and a small payload)
    MPI_Status st;
    if (!finish(m.request, &st, block, &m)) return false;
    header_arrived(m, st);
  }
  if (m.payload != MPI_REQUEST_NULL && !finish(m.payload, MPI_STATUS_IGNORE, block, &m)) return false;
  deliver(m);
  m.done = true;
  return true;
}

void CommState::deliver(PendingMessage& m) {
  const proto::Header h{m.header.seq, m.header.phase, m.header.group};
  if (p_->arrival(m.peer, h) != proto::Process::Arrival::Deliver)
    throw ProtocolError("reprise::Comm: rank " + std::to_string(rank_) + " completed message " +
                        std::to_string(h.seq) + " from rank " + std::to_string(m.peer) + " after " +
                        std::to_string(p_->delivered(m.peer)) + " of its messages: messages from one rank must be "
                        "received (completed) in the order it sent them, whatever their tags, because the protocol "
                        "replays each channel in order");
  p_->deliver(m.peer, h);
  ++stats_.received;
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

void CommState::maybe_poll_views() {
  if (++ops_since_poll_ >= kPollEvery) poll_views();
}

void CommState::poll_views() {
  ops_since_poll_ = 0;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    host_.check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, kViewTag, host_.view_comm(), &flag, &st));
    if (!flag) break;
    std::uint64_t v[2];
    host_.check_mpi(MPI_Recv(v, 2, MPI_UINT64_T, st.MPI_SOURCE, kViewTag, host_.view_comm(), MPI_STATUS_IGNORE));
    const std::size_t before = p_->log().live_entries();
    p_->apply_view(st.MPI_SOURCE, proto::View{v[0], v[1]});
    stats_.released += before - p_->log().live_entries();
    ++stats_.views_received;
  }
  while (!view_sends_.empty()) {
    int flag = 0;
    host_.check_mpi(MPI_Test(&view_sends_.front().first, &flag, MPI_STATUS_IGNORE));
    if (!flag) break;
    view_sends_.pop_front();
  }
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
  p_->raise_phase(phase);
  // Capture into the region (counters and views) and keep the log snapshot in memory.
  const std::size_t N = group_of_.size();
  region_[0] = p_->phase();
  for (std::size_t q = 0; q < N; ++q) {
    region_[1 + q] = p_->sent(static_cast<int>(q));
    region_[1 + N + q] = p_->delivered(static_cast<int>(q));
    region_[1 + 2 * N + q] = p_->view(static_cast<int>(q)).delivered;
    region_[1 + 3 * N + q] = p_->view(static_cast<int>(q)).sent;
  }
  captures_[version] = p_->capture();
}

void CommState::committed(std::uint64_t version) {
  if (announced_ && version <= *announced_) return;
  auto it = captures_.find(version);
  if (it == captures_.end()) return;  // committed before this process used Comm's checkpoints (or restored)
  const proto::Capture& c = it->second;
  for (int q = 0; q < size(); ++q) {
    if (group_of(q) == group_of(rank_)) continue;
    const std::size_t i = static_cast<std::size_t>(q);
    view_sends_.push_back({MPI_REQUEST_NULL, {c.delivered[i], c.sent[i]}});
    auto& back = view_sends_.back();
    host_.check_mpi(
        MPI_Isend(back.second.data(), 2, MPI_UINT64_T, q, kViewTag, host_.view_comm(), &back.first));
    ++stats_.views_sent;
  }
  announced_ = version;
  captures_.erase(captures_.begin(), captures_.lower_bound(version));  // older ones are obsolete
}

void CommState::after_restore(std::uint64_t version) {
  const std::size_t N = group_of_.size();
  proto::Capture c;
  c.phase = region_[0];
  c.sent.assign(region_.begin() + 1, region_.begin() + 1 + static_cast<std::ptrdiff_t>(N));
  c.delivered.assign(region_.begin() + 1 + static_cast<std::ptrdiff_t>(N),
                     region_.begin() + 1 + 2 * static_cast<std::ptrdiff_t>(N));
  c.view.resize(N);
  for (std::size_t q = 0; q < N; ++q) c.view[q] = proto::View{region_[1 + 2 * N + q], region_[1 + 3 * N + q]};
  // The log snapshot of that version, when this process took it (a replacement starts with an empty log: with
  // every rank rolling back to the same version nothing is replayed from it).
  auto it = captures_.find(version);
  if (it != captures_.end()) c.log = it->second.log;
  captures_.erase(captures_.upper_bound(version), captures_.end());
  if (announced_ && *announced_ > version) announced_ = version;
  p_->restore(c);
}

void CommState::start_over() {
  p_ = std::make_unique<proto::Process>(rank_, group_of_);
  std::fill(region_.begin(), region_.end(), 0);
  captures_.clear();
  announced_.reset();
}

void CommState::after_repair() {
  for (auto& [req, buf] : view_sends_)
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
  view_sends_.clear();
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
    << ",\"phase\":" << p_->phase() << "}";
  return o.str();
}

}  // namespace detail

// ---- the public face -------------------------------------------------------------------------------------------

Comm::Request::Request() = default;
Comm::Request::Request(std::unique_ptr<detail::PendingMessage> p) : p_(std::move(p)) {}
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
      Request r = s_->irecv(buf, bytes, (vr - mask + root) % n, detail::kCollectiveTag);
      s_->wait(r);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) {
      Request r = s_->isend(buf, bytes, (vr + mask + root) % n, detail::kCollectiveTag);
      s_->wait(r);
    }
}

namespace {
template <class T>
T combine(T a, T b, Comm::Op op) {
  switch (op) {
    case Comm::Op::Sum: return a + b;
    case Comm::Op::Min: return std::min(a, b);
    default: return std::max(a, b);
  }
}

template <class T>
T tree_allreduce(Comm& c, detail::CommState& s, T value, Comm::Op op) {
  const int n = c.size(), me = c.rank();
  for (int mask = 1; mask < n; mask <<= 1) {
    if (me & mask) {
      Comm::Request r = s.isend(&value, sizeof value, me - mask, detail::kCollectiveTag);
      s.wait(r);
      break;
    }
    if (me + mask < n) {
      T other{};
      Comm::Request r = s.irecv(&other, sizeof other, me + mask, detail::kCollectiveTag);
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
