// The restart exchange (PROTOCOL.md recovery steps 4-7) as data: what each process tells its peers about their
// channel, what the exchange tells it about its inter-group peers, and the reports from which the restart
// coordinator computes its first releases (it alone gathers them).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include "protocol/coordinator.hpp"
#include "protocol/process.hpp"

namespace reprise::protocol {

/// A process's words about its channel with `peer`: its sent[peer] and delivered[peer] now, and its group's
/// committed view of the channel (delivered, sent).
struct ChannelWords {
  int peer = -1;
  std::array<std::uint64_t, 4> words{};
};

/// What this process (`p`) tells its peers in the exchange: one entry per process of another group with which it
/// has a count, a view or a queued message, where this process or that one is in R (`rolled_back`), ascending.
/// Nothing about a channel between two survivors (the recovery leaves it as it is) nor an empty one (its words
/// are zeros, which the receiver assumes for a peer that sent none): the exchange's messages follow the
/// channels that R has, not the job's size. A process of R gives its restored counts as its view; a survivor the
/// view of its group's newest announced commit (`committed`, none: 0).
std::vector<ChannelWords> exchange_counts(const Process& p, const std::set<int>& rolled_back, const Capture* committed);

/// From the words the other processes sent this one (`received`: each entry's `peer` is its sender, the words its
/// counts of the channel with `p`) and those this process sent (`mine`, exchange_counts): the counts of every peer
/// either side has words for, ascending (a peer that sent none has zeros). ProtocolError for words from this
/// process's own group, about a channel between two survivors, or twice from one process.
std::vector<PeerCounts> peer_counts(const Process& p, const std::vector<ChannelWords>& received,
                                    const std::vector<ChannelWords>& mine, const std::set<int>& rolled_back);

/// Step 6 without gathering every report: the items at or below the lowest phase of any orphan are released at
/// once (Coordinator::release's rule before any Notify), so each process releases its own from that phase alone
/// (the minimum over the processes of lowest_orphan, an allreduce), and only what is left goes to the coordinator.
inline constexpr std::uint64_t kNoOrphan = ~std::uint64_t{0};

/// The lowest phase of the orphans this process holds (kNoOrphan: none).
std::uint64_t lowest_orphan(const RecoveryWork& w);

/// This process's items (its Block at its phase, a batch of replays at each of their phases) at or below `low`,
/// which it releases itself, and its report to the coordinator of the rest and of its orphans: [#items, (kind,
/// phase)..., #orphans, orphan phases...] (kind 0: Block, 1: Replay); empty when it has nothing to report.
struct FirstRelease {
  std::vector<Coordinator::Item> released;
  std::vector<std::uint64_t> report;
};
FirstRelease first_release(int process, const RecoveryWork& w, std::uint64_t low);

/// The coordinator's items and orphan phases, from the reports of the processes that sent one.
struct CoordinatorInput {
  std::vector<Coordinator::Item> items;
  std::vector<std::uint64_t> orphan_phases;
};
/// Adds `process`'s report (first_release) to `in`. ProtocolError when it is truncated, too long or names an
/// unknown kind.
void decode_report(int process, const std::vector<std::uint64_t>& report, CoordinatorInput& in);

}  // namespace reprise::protocol
