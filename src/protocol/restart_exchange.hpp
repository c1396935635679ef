// The restart exchange (PROTOCOL.md recovery steps 4-7) as data: what each process tells every other about their
// channel, what the exchange tells it about its inter-group peers, and the reports from which the restart
// coordinator's first releases are computed (by every process alike, from the same gathered reports).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "protocol/coordinator.hpp"
#include "protocol/process.hpp"

namespace reprise::protocol {

/// What this process tells each other one, 4 words per rank q (at 4 q): its sent[q] and delivered[q] now, and its
/// group's committed view of the channel with q (delivered, sent). A process of R (`rolled_back`) gives its restored
/// counts as its view; a survivor gives the view of its group's newest announced commit (`committed`, none: 0).
/// The words for q go to q alone (an all-to-all: 4 N words sent and received per rank, not the 4 N^2 every rank
/// would receive were the counts gathered everywhere).
std::vector<std::uint64_t> exchange_counts(const Process& p, bool rolled_back, const Capture* committed);

/// From what every process sent this one (`received`, 4 words per rank, in rank order: q's counts of the channel
/// (q, me)): what this process (`me`) needs of each inter-group peer, R being `rolled_back`. ProtocolError when
/// `received` is not 4 words per rank.
std::vector<PeerCounts> peer_counts(const std::vector<std::uint64_t>& received, const std::vector<int>& group_of,
                                    int me, const std::set<int>& rolled_back);

/// A process's report to the coordinator (step 6): [phase, #replay phases, phases..., #orphans, orphan phases...].
std::vector<std::uint64_t> encode_report(const RecoveryWork& w);

/// The coordinator's items and orphan phases from every process's report (`reports`, that of process i starting
/// at `displs[i]`). ProtocolError when a report runs past the end.
struct CoordinatorInput {
  std::vector<Coordinator::Item> items;
  std::vector<std::uint64_t> orphan_phases;
};
CoordinatorInput decode_reports(const std::vector<std::uint64_t>& reports, const std::vector<int>& displs);

}  // namespace reprise::protocol
