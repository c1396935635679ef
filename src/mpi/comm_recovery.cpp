// reprise::Comm in a recovery (PROTOCOL.md "Recovery after failures"): pending messages abandoned or re-posted by a
// repair, the restart exchange, the restart coordinator's Notify and Release messages, replays and held sends.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>

#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/polled.hpp"
#include "protocol/restart_exchange.hpp"

namespace reprise::mpi {

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
  unposted_.clear();  // (their copies are done: log_copies_done synchronised Comm's stream)
  for (PendingMessage* m : live_) {
    m->unposted = false;
    m->copied.reset();
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
  views_told_.clear();  // views in flight go with the old epoch's requests: the next commit sends them again
  log_copies_done();    // sends to R are completed below, and the exchange reads the log
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
    drop_unposted(*m);
    abandon(*m);
    if (m->receive) {
      m->result = 0;
      m->packed = std::vector<std::byte>();  // never the buffer of the abandoned request
      post_receive(*m);                      // on the new communicators; R sends (or replays) it again
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
  const MPI_Comm ctl = host_.control_comm();
  // Step 4: this process's counts now and its group's committed view of each channel, each to its peer.
  const protocol::Capture* committed = nullptr;
  if (!in_r_ && announced_) {
    auto it = captures_.find(*announced_);
    if (it != captures_.end()) committed = &it->second;
  }
  const std::vector<std::uint64_t> mine = protocol::exchange_counts(*p_, in_r_, committed);
  std::vector<std::uint64_t> received(4 * N);
  REPRISE_EXCHANGE_CHECK(polled::alltoall(mine.data(), 4, MPI_UINT64_T, received.data(), 4, MPI_UINT64_T, ctl));
  const bool gated = coordinator_rank_ >= 0;
  const protocol::RecoveryWork w =
      p_->recover(in_r_, protocol::peer_counts(received, group_of_, rank_, rolled_back_), gated);
  // Step 6: the reports, gathered everywhere, so every process computes the coordinator's first releases itself;
  // later ones come from the coordinator.
  const std::vector<std::uint64_t> report = protocol::encode_report(w);
  int count = static_cast<int>(report.size());
  std::vector<int> counts(N), displs(N);
  REPRISE_EXCHANGE_CHECK(polled::allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, ctl));
  int total = 0;
  for (std::size_t i = 0; i < N; ++i) displs[i] = std::exchange(total, total + counts[i]);
  std::vector<std::uint64_t> reports(static_cast<std::size_t>(total));
  REPRISE_EXCHANGE_CHECK(polled::allgatherv(report.data(), count, MPI_UINT64_T, reports.data(), counts.data(),
                                            displs.data(), MPI_UINT64_T, ctl));
#undef REPRISE_EXCHANGE_CHECK
  for (const auto& entry : w.replays) stats_.replayed += entry.second.size();
  stats_.replayed_bytes += w.replay_bytes;
  exchanging_ = false;
  if (!gated) {
    flush_outbox();
    return;
  }
  protocol::CoordinatorInput input = protocol::decode_reports(reports, displs);
  protocol::Coordinator c;
  c.begin(epoch_, std::move(input.items), input.orphan_phases);
  for (const auto& it : c.release())
    if (it.process == rank_) p_->release(it.kind, it.phase);
  if (rank_ == coordinator_rank_ && !c.done()) coordinator_ = std::move(c);
  flush_outbox();
}

void CommState::enter() {
  host_.poll_failure();
  if (!unposted_.empty()) post_unposted(false);
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
  if (!unposted_.empty()) post_unposted(false);  // (called while waiting: a peer may wait for them)
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
  if (!dests.empty()) {
    log_copies_done();    // replays read their log entries
    post_unposted(true);  // a queued send goes after the unposted ones of its channel
  }
  for (int d : dests)
    for (auto& m : p_->ready(d)) {
      auto o = std::make_unique<Outbound>();
      o->dest = d;
      o->payload = std::move(m.payload);
      o->header = WireHeader{m.header.seq, m.header.phase, o->payload.size(), m.header.group, kMagic};
      if (m.replay) ++stats_.replayed_sent;
      REPRISE_COMM_CHECK(
          post_send(d, m.tag, o->header, o->payload.data(), o->packed, o->request, o->payload_request, o->epoch));
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
    o << " " << (m->receive ? "recv<" : "send>") << m->peer << "#" << m->tag
      << (m->request != MPI_REQUEST_NULL ? "h" : "") << (m->payload != MPI_REQUEST_NULL ? "p" : "");
  o << " | sent/delivered";
  for (int q = 0; q < size(); ++q) o << " " << q << ":" << p_->sent(q) << "/" << p_->delivered(q);
  return o.str();
}

bool CommState::recovery_idle() const {
  return !coordinator_ && !p_->blocked() && !p_->send_blocked() && p_->queued_dests().empty() && background_.empty();
}

}  // namespace reprise::mpi
