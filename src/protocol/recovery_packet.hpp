// What the survivors of a repair tell the replacement processes they spawned, in one broadcast of 64-bit words:
// the recovery plan, the job's layout (as its rule where it has one), the REPRISE_* environment, the recovery epoch and
// the failure-injection floors. MPI-free, so the encoding is unit-tested; a malformed packet is an error, never a
// guess.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/failure_injection.hpp"
#include "protocol/recovery_plan.hpp"
#include "protocol/topology.hpp"

namespace reprise::protocol {

struct RecoveryPacket {
  RecoveryPlan plan;
  /// The job's layout as the job started. A replacement takes it as it is: where it was started (another node
  /// after a node failure) changes neither its group nor its buddy.
  Layout layout;
  std::vector<std::string> env;  ///< "REPRISE_NAME=value" (spawned processes may not inherit the environment)
  std::uint32_t epoch = 0;       ///< the recovery epoch the repair starts
  KillFloors kill_floors;        ///< per rank that failed: REPRISE_KILL orders up to this step already fired
};

std::vector<std::uint64_t> encode_packet(const RecoveryPacket& packet);

/// Throws Error saying what is wrong when `words` is not a packet encode_packet() wrote (truncated, trailing
/// words, ranks or sizes out of range).
RecoveryPacket decode_packet(const std::vector<std::uint64_t>& words);

}  // namespace reprise::protocol
