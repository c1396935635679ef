#include "protocol/group_channels.hpp"

#include <algorithm>
#include <string>

#include "reprise/errors.hpp"

namespace reprise::protocol {

std::vector<std::uint64_t> barrier_contribution(const Process& p, const std::vector<int>& members) {
  const std::size_t G = members.size();
  std::vector<std::uint64_t> mine(1 + 2 * G);
  mine[0] = p.phase();
  for (std::size_t i = 0; i < G; ++i) {
    mine[1 + i] = p.sent(members[i]);
    mine[1 + G + i] = p.delivered(members[i]);
  }
  return mine;
}

std::uint64_t check_group_channels(const std::vector<int>& members, const std::vector<const std::uint64_t*>& member,
                                   std::uint64_t version) {
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
                            std::to_string(rb[1 + G + a]) +
                            " delivered. Every message sent inside a group must "
                            "be received before the group checkpoints (checkpoint() is a consistent cut).");
    }
  }
  return phase;
}

}  // namespace reprise::protocol
