// reprise::Comm in a recovery (PROTOCOL.md "Recovery after failures"): pending messages abandoned or re-posted by a
// repair, the restart exchange, the restart coordinator's Notify messages and restart floors, replays and held sends.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi/check.hpp"
#include "mpi/comm_state.hpp"
#include "mpi/polled.hpp"
#include "protocol/restart_exchange.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {
namespace {

// One message of `tag` (MPI_ANY_TAG: any) on the control communicator, if one is there, with all its words. `rc`:
// the probe's error, or the receive's (`request`: MPI failed the request); `at` names the call.
struct ControlMessage {
  int rc = MPI_SUCCESS;
  bool request = false;
  CallSite at{};
  bool arrived = false;
  int source = -1, tag = -1;
  std::vector<std::uint64_t> words;
};

ControlMessage take_control(MPI_Comm ctl, int tag) {
  ControlMessage m;
  int flag = 0;
  MPI_Status st;
  m.rc = probe_any_source(ctl, tag, &flag, &st);
  m.at = REPRISE_MPI_SITE(probe_any_source(ctl, tag));
  if (m.rc != MPI_SUCCESS || !flag) return m;
  int n = 0;  // (every control message is of 64-bit words)
  REPRISE_MPI_CHECK(MPI_Get_count(&st, MPI_UINT64_T, &n));
  if (n == MPI_UNDEFINED)
    throw Error("reprise::Comm: a control message (tag " + std::to_string(st.MPI_TAG) + ") from rank " +
                std::to_string(st.MPI_SOURCE) + " is not made of 64-bit words");
  m.words.resize(static_cast<std::size_t>(n));
  m.rc = polled::recv(m.words.data(), n, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, ctl, MPI_STATUS_IGNORE);
  m.request = true;
  m.at = REPRISE_MPI_SITE(polled::recv(words, n, MPI_UINT64_T, source, tag, ctl));
  m.arrived = m.rc == MPI_SUCCESS;
  m.source = st.MPI_SOURCE;
  m.tag = st.MPI_TAG;
  return m;
}

}  // namespace

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
  unbound_.clear();
  chan_ = {static_cast<int>(epochs_.size()) - 1, {}};
  drop_stale_taken();
  coordinator_.reset();
  end_restart_floor();
  exchange_pending_ = false;
}

void CommState::begin_recovery(std::uint32_t epoch, const std::set<int>& rolled_back, int coordinator) {
  ++stats_.recoveries;
  epoch_ = epoch;
  rolled_back_ = rolled_back;
  coordinator_rank_ = coordinator;
  coordinator_.reset();
  end_restart_floor();
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
  for (int r : rolled_back) chan_.moved[r] = newest;
  drop_stale_taken();  // (before receives from R are posted again below)
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

bool CommState::exchange_error(int rc, const CallSite& at, bool request, bool in_recovery, std::uint64_t recoveries) {
  if (in_recovery)
    host_.collective_ok(rc, at);
  else if (request)
    host_.request_failed(rc, at);  // a request MPI failed: never spurious
  else
    host_.check_mpi(rc, at);
  return stats_.recoveries != recoveries;
}

// The exchange's words travel as a sparse exchange (Hoefler et al.'s NBX, PPoPP 2010): a synchronous send to each
// peer, receives of whatever comes, and a non-blocking barrier entered once every send was matched: when the
// barrier completes, every process's words were received. Each process sends and receives one message per peer
// with whom R has a channel, whatever the job's size (the all-to-all it replaces: N - 1 each). Words that arrived
// before this process began its exchange were kept by poll_control (exchange_inbox_).
bool CommState::sparse_exchange(const std::vector<protocol::ChannelWords>& mine,
                                std::vector<protocol::ChannelWords>& received, bool in_recovery) {
  const MPI_Comm ctl = host_.control_comm();
  const std::uint64_t recoveries = stats_.recoveries;
  const auto failed = [&](int rc, const CallSite& at, bool request) {
    return exchange_error(rc, at, request, in_recovery, recoveries);
  };
  // MPI may read the words and the requests after an error took this call away: freed and kept (see abandon).
  struct Sends {
    CommState& self;
    std::shared_ptr<std::vector<std::array<std::uint64_t, 5>>> words;
    std::vector<MPI_Request> requests;
    ~Sends() {
      bool pending = false;
      for (MPI_Request& r : requests) {
        if (r == MPI_REQUEST_NULL) continue;
        pending = true;
        REPRISE_MPI_DISCARD(MPI_Request_free(&r));  // (an epoch a failure ended)
      }
      if (pending) self.keep(words);
    }
  } sends{*this, std::make_shared<std::vector<std::array<std::uint64_t, 5>>>(), {}};
  sends.words->reserve(mine.size());
  sends.requests.assign(mine.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto& x = mine[i].words;
    sends.words->push_back({epoch_, x[0], x[1], x[2], x[3]});
    for (;;) {  // (a spurious error: posted again)
      const int rc =
          MPI_Issend(sends.words->back().data(), 5, MPI_UINT64_T, mine[i].peer, kExchangeTag, ctl, &sends.requests[i]);
      if (rc == MPI_SUCCESS) break;
      if (failed(rc, REPRISE_MPI_SITE(MPI_Issend(words, 5, MPI_UINT64_T, peer, tag, ctl)), false)) return false;
    }
  }
  for (const auto& [source, w] : exchange_inbox_)
    if (w[0] == epoch_) received.push_back({source, {w[1], w[2], w[3], w[4]}});
  exchange_inbox_.clear();
  MPI_Request barrier = MPI_REQUEST_NULL;  // (left to MPI when an error ends this call: a barrier has no buffer)
  bool all_sent = false;
  for (unsigned spin = 0;; ++spin) {
    const ControlMessage m = take_control(ctl, kExchangeTag);
    if (m.rc != MPI_SUCCESS && failed(m.rc, m.at, m.request)) return false;
    if (m.arrived) {
      const auto& w = m.words;
      if (w.size() == 5 && w[0] == epoch_) received.push_back({m.source, {w[1], w[2], w[3], w[4]}});
      spin = 0;
      continue;
    }
    int flag = 0;
    int rc = MPI_SUCCESS;
    if (!all_sent) {
      all_sent = true;
      for (MPI_Request& r : sends.requests) {
        if (r == MPI_REQUEST_NULL) continue;
        rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS && failed(rc, REPRISE_MPI_SITE(MPI_Test(send)), true)) return false;
        all_sent = all_sent && r == MPI_REQUEST_NULL;
      }
      if (all_sent) {
        rc = MPI_Ibarrier(ctl, &barrier);
        if (rc != MPI_SUCCESS) {
          if (failed(rc, REPRISE_MPI_SITE(MPI_Ibarrier(ctl)), false)) return false;
          all_sent = false;  // a spurious error: posted again
        }
      }
    } else {
      rc = MPI_Test(&barrier, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) rc = polled::collective_result(rc, ctl);
      if (rc != MPI_SUCCESS && failed(rc, REPRISE_MPI_SITE(MPI_Test(barrier)), true)) return false;
      if (flag) return true;
    }
    if (spin > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void CommState::restart_exchange(bool in_recovery) {
  host_.before_restart_exchange();
  exchange_pending_ = false;
  exchanging_ = in_r_;  // until it completes: a failure during it rolls this group back again
  const MPI_Comm ctl = host_.control_comm();
  const std::uint64_t recoveries = stats_.recoveries;
  const auto failed = [&](int rc, const CallSite& at, bool request) {
    return exchange_error(rc, at, request, in_recovery, recoveries);
  };
  // Step 4: this process's counts now and its group's committed view of each channel R has, each to its peer.
  const protocol::Capture* committed = nullptr;
  if (!in_r_ && announced_) {
    auto it = captures_.find(*announced_);
    if (it != captures_.end()) committed = &it->second;
  }
  const std::vector<protocol::ChannelWords> mine = protocol::exchange_counts(*p_, rolled_back_, committed);
  std::vector<protocol::ChannelWords> received;
  if (!sparse_exchange(mine, received, in_recovery)) return;
  const bool gated = coordinator_rank_ >= 0;  // (the same at every rank)
  const protocol::RecoveryWork w = p_->recover(in_r_, protocol::peer_counts(*p_, received, mine, rolled_back_), gated);
  for (const auto& entry : w.replays) stats_.replayed += entry.second.size();
  stats_.replayed_bytes += w.replay_bytes;
  if (!gated) {  // every rank rolled back: nothing to order
    exchanging_ = false;
    flush_outbox();
    return;
  }
  // Step 6: each process releases its items at or below the lowest phase of any orphan (an allreduce) and holds the
  // rest for the restart floors to come; the processes that hold orphans report their phases to the coordinator (how
  // many: an allreduce).
  std::uint64_t low = protocol::lowest_orphan(w);
  int rc = polled::allreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, ctl);
  if (rc != MPI_SUCCESS && failed(rc, REPRISE_MPI_SITE(polled::allreduce(low, MPI_MIN, ctl)), false)) return;
  protocol::FirstRelease first = protocol::first_release(rank_, w, low);
  if (low == protocol::kNoOrphan) {  // no orphan anywhere: every item goes now, no report, no floor
    for (const auto& it : first.released) p_->release(it.kind, it.phase);
    exchanging_ = false;
    flush_outbox();
    return;
  }
  std::uint64_t reports = first.report.empty() ? 0 : 1;
  rc = polled::allreduce(MPI_IN_PLACE, &reports, 1, MPI_UINT64_T, MPI_SUM, ctl);
  if (rc != MPI_SUCCESS && failed(rc, REPRISE_MPI_SITE(polled::allreduce(reports, MPI_SUM, ctl)), false)) return;
  for (const auto& it : first.released) p_->release(it.kind, it.phase);
  held_ = std::move(first.held);
  restart_floor_ = std::max(restart_floor_, low);
  floor_open_ = restart_floor_ != protocol::kNoOrphan;  // until the last floor (step 7)
  // (A higher floor can only have come already if this process took its time before step 6.)
  apply_restart_floor();
  if (rank_ != coordinator_rank_) {
    if (!first.report.empty()) {
      rc = polled::send(first.report.data(), static_cast<int>(first.report.size()), MPI_UINT64_T, coordinator_rank_,
                        kReportTag, ctl);
      if (rc != MPI_SUCCESS && failed(rc, REPRISE_MPI_SITE(polled::send(report, coordinator, kReportTag, ctl)), true))
        return;
    }
    exchanging_ = false;
    flush_outbox();
    return;
  }
  std::vector<std::uint64_t> orphans = std::move(first.report);
  for (std::uint64_t left = reports - (orphans.empty() ? 0 : 1); left > 0;) {
    const ControlMessage m = take_control(ctl, kReportTag);
    if (m.rc != MPI_SUCCESS && failed(m.rc, m.at, m.request)) return;
    if (!m.arrived) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    orphans.insert(orphans.end(), m.words.begin(), m.words.end());
    --left;
  }
  exchanging_ = false;
  protocol::Coordinator c;
  c.begin(epoch_, {}, orphans);  // (its lowest orphan is `low`: every orphan was reported)
  if (!c.done()) coordinator_ = std::move(c);
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

void CommState::poll() {
  progress_others(nullptr);
}

// Control messages (Notify, restart floors) and background sends matter only while a recovery is under way here: the
// coordinator's, a release this process waits for, replays or held sends on their way. Otherwise only stale
// messages of older attempts can come: probed every kPollEvery calls (a wildcard probe costs about as much as
// the rest of a small message's path, and a blocking wait would otherwise make one per spin).
bool CommState::control_due() {
  if (coordinator_ || floor_open_ || p_->awaiting_release() || !control_sends_.empty() || !background_.empty() ||
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

void CommState::apply_restart_floor() {
  p_->limit_new_sends(restart_floor_);  // (new messages to other groups above it wait: Process::limit_new_sends)
  for (const auto& it : protocol::release_held(held_, restart_floor_)) p_->release(it.kind, it.phase);
}

// Step 7: the restart floor rose to `floor` (at the coordinator: a Notify; elsewhere: from its parent in the
// coordinator's tree): this process releases what it holds at or below it and passes it on to its children.
void CommState::raise_restart_floor(std::uint64_t floor) {
  if (floor <= restart_floor_) return;  // (the allreduce's, or an older attempt's)
  restart_floor_ = floor;
  apply_restart_floor();
  for (int c : protocol::restart_floor_children(rank_, size(), coordinator_rank_)) {
    control_send(c, kFloorTag, floor, 0);
    ++stats_.restart_floors_sent;
  }
  if (floor == protocol::kNoOrphan) floor_open_ = false;
  flush_outbox();
}

void CommState::poll_control() {
  if (epochs_.empty()) return;
  if (!unposted_.empty()) post_unposted(false);  // (called while waiting: a peer may wait for them)
  // The restart floor from the messages that are in, raised once: one rise passed on for several Notify.
  std::uint64_t floor = 0;
  const std::uint32_t floor_epoch = epoch_;
  for (;;) {
    const MPI_Comm ctl = host_.control_comm();  // again after a repair
    const ControlMessage m = take_control(ctl, MPI_ANY_TAG);
    if (m.rc != MPI_SUCCESS) {  // a repair (the communicators changed) or spurious: a failed receive probes again
      host_.check_mpi(m.rc, m.at);
      if (m.request) continue;
    }
    if (!m.arrived) break;
    const auto& v = m.words;
    // A restart exchange's words, kept for it: their sender began its exchange before this process did.
    if (m.tag == kExchangeTag && v.size() == 5)
      exchange_inbox_.emplace_back(m.source, std::array<std::uint64_t, 5>{v[0], v[1], v[2], v[3], v[4]});
    // Otherwise only Notify and restart floors (3 words) of this epoch; the rest is stale (an older attempt's).
    if ((m.tag != kNotifyTag && m.tag != kFloorTag) || v.size() != 3 || v[0] != epoch_) continue;
    if (m.tag == kNotifyTag) {
      if (!coordinator_) continue;
      coordinator_->notify(static_cast<std::uint32_t>(v[0]), v[1]);
      floor = std::max(floor, coordinator_->lowest_orphan_phase().value_or(protocol::kNoOrphan));
      if (coordinator_->done()) coordinator_.reset();
    } else {
      floor = std::max(floor, v[1]);
      ++stats_.restart_floors_received;
    }
  }
  if (floor && epoch_ == floor_epoch) raise_restart_floor(floor);
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
    << (coordinator_ ? " (outstanding)" : "") << " restart floor " << restart_floor_ << (floor_open_ ? " (open)" : "")
    << " held " << held_.size() << " background " << background_.size() << " outbox";
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
  return !coordinator_ && !floor_open_ && !p_->blocked() && !p_->send_blocked() && p_->queued_dests().empty() &&
         background_.empty();
}

}  // namespace reprise::mpi
