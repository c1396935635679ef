// The MPI runtime's messages on its own communicators: their tags, and a checkpoint version on the wire (a head
// with the manifest, the payload in pieces in order, a trailer with the payload checksum).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/bytes.hpp"
#include "core/manifest.hpp"

namespace reprise::mpi {

enum Tag : int {
  kPutHead = 11,      // owner -> buddy (data): a version's head
  kPutPiece = 12,     // owner -> buddy (data): its payload pieces and trailer
  kRelease = 13,      // owner -> buddy (data): a version no chain needs any more
  kAck = 14,          // buddy -> owner (ack): the version is stored (or kRefused)
  kFloorReport = 15,  // a group's first rank to its parent group's: its subtree's oldest commit (job_floor.hpp)
  kFloor = 16,        // rank 0 to every rank: the job floor and the writers' mark (protocol/job_floor.hpp)
  kMoveCount = 21,    // recovery (world): how many versions follow
  kMoveHead = 22,
  kMovePiece = 23,
  kMoveList = 24,   // recovery (world): the versions a buddy holds for its ward
  kPlacement = 25,  // recovery (world): the node a rank runs on, to the other rank of its pair and to rank 0
  kGreeting = 26,   // recovery (world): a replacement's empty message to every rank (Recovery::greet_replacements)
};

/// The acknowledgement of a version whose payload did not match its chunk digests at the buddy: not stored.
constexpr std::uint64_t kRefused = ~std::uint64_t{0};
/// A kFloorReport: {group, sequence number, complete, version, group named, committed, skipped oldest and newest,
/// pin oldest and newest} (protocol::FloorSummary).
constexpr int kFloorReportWords = 10;
/// Set in the acknowledgement of a stored version (beside its number) when the buddy holds more than its memory
/// budget: the owner keeps one chain, so that the buddy's copies of it shrink too.
constexpr std::uint64_t kOverBudget = std::uint64_t{1} << 62;

// The trailer repeats the payload checksum (core::payload_checksum, read off the manifest) after the last piece:
// the version's end on the wire. Pieces small enough that the buddy transfer starts early.
constexpr std::size_t kPieceBytes = std::size_t{4} << 20;

/// One whole version to `dest`: head, pieces, trailer (blocking, polled). Throws PeerFailure on a process failure.
void send_version(MPI_Comm comm, int dest, int head_tag, int piece_tag, const core::Manifest& m,
                  const core::HostBytes& payload, std::uint64_t checksum);

struct Received {
  core::Manifest manifest;
  std::shared_ptr<core::HostBytes> payload;
  std::uint64_t checksum = 0;  ///< the sender's (the trailer)
  /// With ReceiveCheck::verify: empty when every stored chunk matched its manifest's digest as it arrived (each
  /// piece checked right after it came) and the trailer matches the manifest; else what was damaged.
  std::string damage;
};

/// What recv_version checks as the version arrives.
struct ReceiveCheck {
  bool verify = false;  ///< fill Received::damage
  /// Tests (REPRISE_CORRUPT_SHIPPED): true for a version whose payload is damaged on arrival (one byte of its
  /// middle piece flipped before it is checked), as a faulty link would.
  std::function<bool(const core::Manifest&)> damage;
};

/// The next version from `src`. `pool`: the payload buffer comes from it (and goes back when the store drops
/// the version); `reused` says whether it was one already touched, `passed_over` whether it is new although the
/// pool kept buffers (BufferPool::take). `where` names the sender in errors. `arriving`: set to the payload
/// buffer's bytes once it is taken (memory that no pool nor store counts while the version arrives); the caller
/// sets it back to 0 when a store holds the version or it is dropped.
Received recv_version(MPI_Comm comm, int src, int head_tag, int piece_tag, const std::string& where,
                      const std::shared_ptr<core::BufferPool>& pool = nullptr, bool* reused = nullptr,
                      bool* passed_over = nullptr, const ReceiveCheck& check = {},
                      std::atomic<std::size_t>* arriving = nullptr);

}  // namespace reprise::mpi
