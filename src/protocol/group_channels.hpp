// The group checkpoint's barrier (PROTOCOL.md, "Group checkpoint and commit"): the members exchange their channel
// counters and check that every intra-group channel is empty, since a local "no pending request" check cannot see
// an eagerly completed send still in flight [model]; then every member takes the group's maximum phase.
#pragma once

#include <cstdint>
#include <vector>

#include "protocol/process.hpp"

namespace reprise::protocol {

/// What a member contributes to its group's barrier: its phase, then its sent[] and delivered[] counts for every
/// member of its group (`members`, in rank order): 1 + 2 * members.size() words.
std::vector<std::uint64_t> barrier_contribution(const Process& p, const std::vector<int>& members);

/// Every member's contribution (`member[i]` of members[i]) checked at the checkpoint of `version`: a channel a->b
/// of the group with a.sent[b] != b.delivered[a] is a ProtocolError that names it and says what the program must
/// do. Returns the group's maximum phase.
std::uint64_t check_group_channels(const std::vector<int>& members, const std::vector<const std::uint64_t*>& member,
                                   std::uint64_t version);

}  // namespace reprise::protocol
