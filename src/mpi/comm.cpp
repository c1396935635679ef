// reprise::Comm (include/reprise/comm.hpp): the public face over CommState, its statistics, and the collectives.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>

#include "mpi/comm_state.hpp"
#include "protocol/grouping.hpp"
#include "reprise/errors.hpp"

namespace reprise {
namespace mpi {

void CommState::write_matrix_row(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/row-" + std::to_string(rank_) + ".matrix", tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    protocol::write_matrix_header(out, size());
    for (const auto& [peer, bytes] : sent_to_) out << rank_ << " " << peer << " " << bytes << "\n";
    if (!out.flush())
      throw ConfigError("REPRISE_COMM_MATRIX: cannot write " + tmp + " (is " + dir + " a writable directory?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw ConfigError("REPRISE_COMM_MATRIX: cannot rename " + tmp + " to " + path);
}

std::string CommState::stats_json() const {
  const logging::MessageLog& log = p_->log();
  nlohmann::json j = {{"intra_messages", stats_.intra_messages},
                      {"intra_bytes", stats_.intra_bytes},
                      {"inter_messages", stats_.inter_messages},
                      {"inter_bytes", stats_.inter_bytes},
                      {"received", stats_.received},
                      {"log_live_entries", log.live_entries()},
                      {"log_live_payload_bytes", log.live_payload_bytes()},
                      {"log_held_bytes", log.held_bytes()},
                      {"log_max_held_bytes", stats_.log_max_held},
                      {"log_pooled_bytes", log.pooled_bytes()},
                      {"log_segments_allocated", log.segments_allocated()},
                      {"log_segments_reused", log.segments_reused()},
                      {"log_entries_released", stats_.released},
                      {"views_sent", stats_.views_sent},
                      {"views_received", stats_.views_received},
                      {"channel_checks", stats_.channel_checks},
                      {"recoveries", stats_.recoveries},
                      {"replays_owed", stats_.replayed},
                      {"replays_sent", stats_.replayed_sent},
                      {"replayed_bytes", stats_.replayed_bytes},
                      {"orphans_notified", stats_.orphans_notified},
                      {"duplicates_dropped", stats_.duplicates_dropped},
                      {"duplicates_skipped", stats_.duplicates_skipped},
                      {"held_early", stats_.held_early},
                      {"stale_dropped", stats_.stale_dropped},
                      {"taken_ahead", stats_.taken_ahead},
                      {"restart_floors_received", stats_.restart_floors_received},
                      {"restart_floors_sent", stats_.restart_floors_sent},
                      {"device_messages", stats_.device_messages},
                      {"device_bytes", stats_.device_bytes},
                      {"device_direct", stats_.device_direct},
                      {"device_posted_later", stats_.device_posted_later},
                      {"log_bound_bytes", log_options_.bound_bytes},
                      {"log_segment_bytes", log_options_.segment_bytes},
                      {"log_over_bound", stats_.log_over_bound},
                      {"checkpoint_asks_sent", stats_.asks_sent},
                      {"checkpoint_asks_received", stats_.asks_received},
                      {"forced_checkpoints", stats_.forced_checkpoints},
                      {"log_over_bound_streak_max", stats_.over_bound_streak_max},
                      {"phase", p_->phase()}};
  if (device_mpi_) j["device_mpi"] = device_mpi_->reason;
  return j.dump();
}

}  // namespace mpi

Comm::Request::Request() = default;
Comm::Request::Request(std::unique_ptr<mpi::PendingMessage> p) : p_(std::move(p)) {}
Comm::Request::Request(Request&&) noexcept = default;
Comm::Request& Comm::Request::operator=(Request&&) noexcept = default;
Comm::Request::~Request() = default;

int Comm::rank() const {
  return s_->rank();
}
int Comm::size() const {
  return s_->size();
}
int Comm::tag_ub() const {
  return s_->tag_ub();
}
int Comm::group_of(int r) const {
  return s_->group_of(r);
}

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
Comm::Request Comm::issend(const void* buf, std::size_t bytes, int dest, int tag) {
  s_->check_tag(tag);
  return s_->isend(buf, bytes, dest, tag, std::nullopt, true);
}
Comm::Request Comm::irecv(void* buf, std::size_t bytes, int src, int tag) {
  s_->check_tag(tag);
  return s_->irecv(buf, bytes, src, tag);
}
Comm::Request Comm::irecv_any_size(std::vector<std::byte>& into, int src, int tag) {
  s_->check_tag(tag);
  return s_->irecv_any_size(into, src, tag);
}
Comm::Request Comm::irecv_range(void* buf, std::size_t bytes, int src, int tag_lo, int tag_hi, Match& match) {
  s_->check_range(tag_lo, tag_hi);
  return s_->irecv(buf, bytes, src, tag_lo, std::nullopt, tag_hi, &match);
}
Comm::Request Comm::irecv_any_size(std::vector<std::byte>& into, int src, int tag_lo, int tag_hi, Match* match) {
  s_->check_range(tag_lo, tag_hi);
  return s_->irecv_any_size(into, src, tag_lo, tag_hi, match);  // (tag_hi == tag_lo: one tag, matched as a range's)
}
bool Comm::cancel(Request& r) {
  return s_->cancel(r);
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
std::size_t Comm::wait(Request& r) {
  return s_->wait(r);
}
void Comm::waitall(std::vector<Request>& rs) {
  for (auto& r : rs)
    if (r.pending()) s_->wait(r);
}
void Comm::poll() {
  s_->poll();
}
bool Comm::reexecuting() {
  return s_->reexecuting_now();
}
bool Comm::test(Request& r) {
  return s_->test(r);
}
bool Comm::test(Request& r, std::size_t& bytes) {
  return s_->test(r, &bytes);
}

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
      Request r = s_->irecv(buf, bytes, (vr - mask + root) % n, mpi::CommState::kCollectiveTag);
      s_->wait(r);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) {
      Request r = s_->isend(buf, bytes, (vr + mask + root) % n, mpi::CommState::kCollectiveTag);
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
    case Comm::Op::Min:
      return std::min(a, b);
    default:
      return std::max(a, b);
  }
}

template <class T>
T tree_allreduce(Comm& c, mpi::CommState& s, T value, Comm::Op op) {
  const int n = c.size(), me = c.rank();
  for (int mask = 1; mask < n; mask <<= 1) {
    if (me & mask) {
      Comm::Request r = s.isend(&value, sizeof value, me - mask, mpi::CommState::kCollectiveTag);
      s.wait(r);
      break;
    }
    if (me + mask < n) {
      T other{};
      Comm::Request r = s.irecv(&other, sizeof other, me + mask, mpi::CommState::kCollectiveTag);
      s.wait(r);
      value = combine(value, other, op);
    }
  }
  c.bcast(&value, sizeof value, 0);
  return value;
}
}  // namespace

double Comm::allreduce(double value, Op op) {
  return tree_allreduce(*this, *s_, value, op);
}
std::int64_t Comm::allreduce(std::int64_t value, Op op) {
  return tree_allreduce(*this, *s_, value, op);
}
void Comm::barrier() {
  allreduce(std::int64_t{0}, Op::Sum);
}

std::string Comm::stats_json() const {
  return s_->stats_json();
}
std::size_t Comm::log_held_bytes() const {
  return s_->process().log().held_bytes();
}
void Comm::count_memory(const std::string& name, std::function<std::size_t()> held_bytes) {
  s_->count_memory(name, std::move(held_bytes));
}
void Comm::on_unreceived(std::function<bool(int, int)> take) {
  s_->on_unreceived(std::move(take));
}
std::size_t Comm::log_live_entries() const {
  return s_->process().log().live_entries();
}

}  // namespace reprise
