// The restart exchange (PROTOCOL.md recovery steps 4-7) as data: what each process tells its peers about their
// channel, what the exchange tells it about its inter-group peers, and the restart floor that releases what each
// process holds (the coordinator gathers only the orphans' phases).
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

/// Steps 6-7 without gathering every item. An item is released once no orphan is outstanding at a lower phase
/// (Coordinator::release's rule), so each process holds its own items and releases them from the lowest phase of any
/// outstanding orphan alone (the restart floor): first the minimum over the processes of lowest_orphan (an
/// allreduce), then each rise of it, which the coordinator sends down a tree of the processes
/// (restart_floor_children) as the orphans are notified; kNoOrphan, the last floor, releases everything. Only the
/// processes that hold orphans report to the coordinator (their orphans' phases). Without orphans nobody reports and
/// no floor is sent; with them, the coordinator hears the orphans and sends at most kFloorFanIn messages per rise,
/// and so does every process: what anyone sends follows the orphans' phases, not the job's size.
inline constexpr std::uint64_t kNoOrphan = ~std::uint64_t{0};

/// The lowest phase of the orphans this process holds (kNoOrphan: none).
std::uint64_t lowest_orphan(const RecoveryWork& w);

/// This process's items (its Block at its phase, a batch of replays at each of their phases): those at or below
/// `low`, which it releases at once, and the rest, which it holds for the floors to come; and its report to the
/// coordinator: the phases of its orphans (empty: no report).
struct FirstRelease {
  std::vector<Coordinator::Item> released;
  std::vector<Coordinator::Item> held;
  std::vector<std::uint64_t> report;
};
FirstRelease first_release(int process, const RecoveryWork& w, std::uint64_t low);

/// Removes from `held` and returns the items at or below the restart floor `floor`.
std::vector<Coordinator::Item> release_held(std::vector<Coordinator::Item>& held, std::uint64_t floor);

/// The processes `rank` passes a restart floor on to: floor_children's tree (fan-out kFloorFanIn) over the `ranks`
/// processes renumbered from `coordinator`, its root. No process sends more than kFloorFanIn per rise of the floor.
std::vector<int> restart_floor_children(int rank, int ranks, int coordinator);

}  // namespace reprise::protocol
