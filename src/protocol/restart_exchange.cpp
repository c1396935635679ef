#include "protocol/restart_exchange.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "protocol/job_floor.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {

std::vector<ChannelWords> exchange_counts(const Process& p, const std::set<int>& rolled_back,
                                          const Capture* committed) {
  const bool in_r = rolled_back.count(p.id()) > 0;
  std::set<int> peers;  // every process this one has a count, a view or a queued message with
  for (const auto& [q, channel] : p.channels()) peers.insert(q);
  if (committed && !in_r)
    for (const auto& [q, channel] : committed->channels) peers.insert(q);
  for (int q : p.queued_dests()) peers.insert(q);
  std::vector<ChannelWords> out;
  for (int q : peers) {
    if (!p.inter(q) || (!in_r && !rolled_back.count(q))) continue;
    ChannelWords c{q,
                   {p.sent(q), p.delivered(q),
                    in_r        ? p.delivered(q)
                    : committed ? committed->delivered(q)
                                : 0,
                    in_r        ? p.sent(q)
                    : committed ? committed->sent(q)
                                : 0}};
    if (c.words != std::array<std::uint64_t, 4>{} || p.has_queue(q)) out.push_back(c);
  }
  return out;
}

std::vector<PeerCounts> peer_counts(const Process& p, const std::vector<ChannelWords>& received,
                                    const std::vector<ChannelWords>& mine, const std::set<int>& rolled_back) {
  const bool in_r = rolled_back.count(p.id()) > 0;
  std::map<int, std::array<std::uint64_t, 4>> from;  // q's sent[me], delivered[me], view (delivered, sent)
  for (const ChannelWords& c : received) {
    const std::string who =
        "restart exchange: process " + std::to_string(p.id()) + " received words from " + std::to_string(c.peer);
    if (c.peer < 0 || static_cast<std::size_t>(c.peer) >= p.ranks() || !p.inter(c.peer))
      throw ProtocolError(who + ", which is not a process of another group");
    if (!in_r && !rolled_back.count(c.peer))
      throw ProtocolError(who + " about a channel between two survivors (neither rolled back)");
    if (!from.emplace(c.peer, c.words).second) throw ProtocolError(who + " twice");
  }
  for (const ChannelWords& c : mine) from.emplace(c.peer, std::array<std::uint64_t, 4>{});
  std::vector<PeerCounts> peers;
  for (const auto& [q, x] : from)
    peers.push_back(PeerCounts{q, rolled_back.count(q) > 0, x[1], x[0], View{x[2], x[3]}});
  return peers;
}

std::uint64_t lowest_orphan(const RecoveryWork& w) {
  return w.orphan_phases.empty() ? kNoOrphan : *std::min_element(w.orphan_phases.begin(), w.orphan_phases.end());
}

FirstRelease first_release(int process, const RecoveryWork& w, std::uint64_t low) {
  FirstRelease out;
  const auto sort = [&](ItemKind kind, std::uint64_t phase) {
    (phase <= low ? out.released : out.held).push_back({process, kind, phase});
  };
  sort(ItemKind::Block, w.phase);
  for (std::uint64_t phase : w.replay_phases) sort(ItemKind::Replay, phase);
  out.report = w.orphan_phases;
  return out;
}

std::vector<Coordinator::Item> release_held(std::vector<Coordinator::Item>& held, std::uint64_t floor) {
  std::vector<Coordinator::Item> out;
  const auto keep = std::stable_partition(held.begin(), held.end(), [&](const auto& it) { return it.phase > floor; });
  out.assign(keep, held.end());
  held.erase(keep, held.end());
  return out;
}

std::vector<int> restart_floor_children(int rank, int ranks, int coordinator) {
  const auto from_root = [&](int r) { return (r - coordinator + ranks) % ranks; };
  std::vector<int> children = floor_children(from_root(rank), ranks);
  for (int& c : children) c = (c + coordinator) % ranks;
  return children;
}

}  // namespace reprise::protocol
