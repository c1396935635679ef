#include "protocol/process.hpp"

#include <algorithm>
#include <string>

#include "reprise/errors.hpp"

namespace reprise::protocol {

namespace {
std::string channel_name(int a, int b) {
  return std::to_string(a) + "->" + std::to_string(b);
}
}  // namespace

Process::Process(int id, const std::vector<int>& group_of, logging::LogOptions log_options,
                 logging::MessageLog::Allocate allocate)
    : Process(id, GroupMap(group_of), log_options, std::move(allocate)) {}

Process::Process(int id, GroupMap groups, logging::LogOptions log_options, logging::MessageLog::Allocate allocate)
    : id_(id), groups_(std::move(groups)), group_(0), log_(log_options, std::move(allocate)) {
  if (id_ < 0 || static_cast<std::size_t>(id_) >= groups_.ranks())
    throw UsageError("protocol: process " + std::to_string(id_) + " outside 0.." + std::to_string(groups_.ranks() - 1));
  group_ = groups_(id_);
}

std::size_t Process::state_bytes() const {
  // A std::map node: three pointers and a colour word besides its value.
  constexpr std::size_t kNode = 4 * sizeof(void*);
  std::size_t b = sizeof(*this) + groups_.table_bytes();
  b += channels_.size() * (kNode + sizeof(Channels::value_type));
  for (const auto& [q, r] : orphan_record_) b += kNode + sizeof(OrphanRecord::value_type) + r.size() * 16;
  b += (orphan_limit_.size() + dup_limit_.size()) * (kNode + 16);
  for (const auto& [q, items] : outbox_) {
    b += kNode + sizeof(std::deque<Queued>) + items.size() * sizeof(Queued);
    for (const Queued& item : items) b += item.message.payload.size();
  }
  b += log_.live_entries() * sizeof(logging::Entry);
  return b;
}

Process::Send Process::send(int dest, std::int32_t tag, const void* payload, std::size_t bytes) {
  const std::uint64_t seq = ++channels_[dest].sent;
  Send r;
  r.header = Header{seq, phase_, group()};
  if (!inter(dest)) return r;
  // Re-executed sends already covered by the receiver's committed view are not logged again.
  if (seq > view(dest).delivered) {
    if (payload)
      log_.append_copy(dest, seq, phase_, tag, payload, bytes);
    else
      r.log_slot = log_.append(dest, seq, phase_, tag, bytes);
    r.logged = true;
  }
  const auto limit = orphan_limit_.find(dest);
  r.orphan = limit != orphan_limit_.end() && seq <= limit->second;
  const auto dup = dup_limit_.find(dest);
  r.duplicate = dup != dup_limit_.end() && seq <= dup->second;
  return r;
}

Process::Arrival Process::arrival(int src, const Header& h) const {
  const std::uint64_t d = delivered(src);
  if (h.seq <= d) return Arrival::Duplicate;
  if (h.seq > d + 1) return Arrival::Early;
  return Arrival::Deliver;
}

void Process::deliver(int src, const Header& h) {
  if (arrival(src, h) != Arrival::Deliver)
    throw ProtocolError("protocol: process " + std::to_string(id_) + " delivers seq " + std::to_string(h.seq) +
                        " on channel " + channel_name(src, id_) + " after seq " + std::to_string(delivered(src)) +
                        " (out of sequence)");
  channels_[src].delivered = h.seq;
  const bool from_other_group = h.group != group();
  phase_ = std::max(phase_, from_other_group ? h.phase + 1 : h.phase);
  if (from_other_group) orphan_record_[src].emplace_back(h.seq, h.phase);
}

std::optional<std::uint64_t> Process::orphan_phase(int q, std::uint64_t seq) const {
  const auto it = orphan_record_.find(q);
  if (it == orphan_record_.end()) return std::nullopt;
  const auto& r = it->second;
  const auto o = std::lower_bound(r.begin(), r.end(), std::make_pair(seq, std::uint64_t{0}));
  if (o == r.end() || o->first != seq) return std::nullopt;
  return o->second;
}

void Process::raise_phase(std::uint64_t group_max) {
  phase_ = std::max(phase_, group_max);
}

Capture Process::capture() {
  return Capture{phase_, channels_, orphan_record_, log_.snapshot()};
}

void Process::restore(const Capture& c) {
  phase_ = c.phase;
  channels_ = c.channels;
  // (a capture rebuilt from counters alone has none)
  orphan_record_ = c.orphan_record;
  log_.restore(c.log);
  reset_recovery_state();
}

void Process::reset_recovery_state() {
  orphan_limit_.clear();
  dup_limit_.clear();
  outbox_.clear();
  blocked_ = send_blocked_ = false;
  release_phase_ = INT64_MAX;
  new_limit_ = ~std::uint64_t{0};
}

void Process::apply_view(int q, const View& v) {
  if (v.delivered == 0 && v.sent == 0 && !channels_.count(q)) return;  // nothing to learn or release
  View& mine = channels_[q].view;
  mine.delivered = std::max(mine.delivered, v.delivered);
  mine.sent = std::max(mine.sent, v.sent);
  log_.release_through(q, mine.delivered);
  const auto it = orphan_record_.find(q);
  if (it == orphan_record_.end()) return;
  auto& r = it->second;
  while (!r.empty() && r.front().first <= mine.sent) r.pop_front();
  if (r.empty()) orphan_record_.erase(it);
}

RecoveryWork Process::recover(bool rolled_back, const std::vector<PeerCounts>& peers, bool gated) {
  RecoveryWork work;
  // Replays owed to rolled-back peers are recomputed from the log; queued ones may be stale.
  for (const PeerCounts& p : peers)
    if (p.rolled_back) outbox_.erase(p.peer);
  // Views learned in the exchange [model]: a rolled-back peer's restored counts are its committed view; a
  // rolled-back process learns every peer group's committed view.
  for (const PeerCounts& p : peers) {
    if (!inter(p.peer)) continue;
    if (p.rolled_back) apply_view(p.peer, View{p.delivered_from_me, p.sent_to_me});
    if (rolled_back) apply_view(p.peer, p.committed);
  }
  orphan_limit_.clear();
  dup_limit_.clear();
  for (const PeerCounts& p : peers) {
    if (!inter(p.peer)) continue;
    // Owed: (peer.delivered[me], sent[peer]] when either side rolled back [model: both directions].
    if (p.rolled_back || rolled_back) {
      const std::uint64_t lo = p.delivered_from_me, hi = sent(p.peer);
      if (lo < hi) {
        const auto entries = log_.range(p.peer, lo, hi);
        if (entries.size() != hi - lo)
          throw ProtocolError("protocol: process " + std::to_string(id_) + " owes " + channel_name(id_, p.peer) +
                              " seqs " + std::to_string(lo + 1) + ".." + std::to_string(hi) + " but its log holds " +
                              std::to_string(entries.size()) + " of them");
        auto& q = outbox_[p.peer];
        auto& list = work.replays[p.peer];
        for (const logging::Entry* e : entries) {
          q.push_back(Queued{true, e->seq, {}});
          list.push_back(e->seq);
          work.replay_bytes += e->bytes;
        }
      }
    }
    if (rolled_back && !p.rolled_back) orphan_limit_[p.peer] = p.delivered_from_me;
    if (rolled_back && p.rolled_back) dup_limit_[p.peer] = p.delivered_from_me;
    // Orphans held here: delivered from a rolled-back peer beyond what it has sent now (step 6).
    if (!rolled_back && p.rolled_back) {
      if (const auto it = orphan_record_.find(p.peer); it != orphan_record_.end())
        for (const auto& [seq, phase] : it->second)
          if (seq > p.sent_to_me) work.orphan_phases.push_back(phase);
    }
  }
  for (const auto& [dest, q] : outbox_)
    for (const Queued& item : q)
      if (item.replay) work.replay_phases.insert(log_.find(dest, item.seq)->phase);
  work.phase = phase_;
  blocked_ = gated && rolled_back;
  send_blocked_ = gated && !rolled_back;
  release_phase_ = gated ? -1 : INT64_MAX;
  return work;
}

bool Process::reexecuting() const {
  if (blocked_) return true;
  for (const auto* limits : {&orphan_limit_, &dup_limit_})
    for (const auto& [peer, limit] : *limits)
      if (sent(peer) < limit) return true;
  return false;
}

void Process::release(ItemKind kind, std::uint64_t phase) {
  if (kind == ItemKind::Block)
    blocked_ = send_blocked_ = false;
  else
    release_phase_ = std::max(release_phase_, static_cast<std::int64_t>(phase));
}

bool Process::has_queue(int dest) const {
  auto it = outbox_.find(dest);
  return it != outbox_.end() && !it->second.empty();
}

void Process::queue_new(int dest, const Header& h, std::int32_t tag, const void* payload, std::size_t bytes) {
  Outgoing m{h, false, tag, {}};
  const auto* p = static_cast<const std::byte*>(payload);
  m.payload.assign(p, p + bytes);
  outbox_[dest].push_back(Queued{false, 0, std::move(m)});
}

std::vector<Process::Outgoing> Process::ready(int dest) {
  std::vector<Outgoing> out;
  auto it = outbox_.find(dest);
  if (it == outbox_.end()) return out;
  auto& q = it->second;
  while (!q.empty()) {
    Queued& item = q.front();
    if (item.replay) {
      const logging::Entry* e = log_.find(dest, item.seq);
      if (!e)
        throw ProtocolError("protocol: process " + std::to_string(id_) + " lost log entry " + std::to_string(item.seq) +
                            " of channel " + channel_name(id_, dest) + " before replaying it");
      if (static_cast<std::int64_t>(e->phase) > release_phase_) break;
      Outgoing m{Header{e->seq, e->phase, group()}, true, e->tag, {}};
      m.payload.assign(e->data(), e->data() + e->bytes);
      out.push_back(std::move(m));
    } else {
      if (new_send_held(dest, item.message.header.phase)) break;
      out.push_back(std::move(item.message));
    }
    q.pop_front();
  }
  if (q.empty()) outbox_.erase(it);
  return out;
}

std::vector<int> Process::queued_dests() const {
  std::vector<int> d;
  for (const auto& [dest, q] : outbox_)
    if (!q.empty()) d.push_back(dest);
  return d;
}

}  // namespace reprise::protocol
