// The program's non-blocking collectives (MPI_Iallreduce, MPI_Ibcast, ...), carried out at points the protocol can
// replay. Messages from one rank are delivered, and replayed after a rollback, in the order it sent them whatever
// their tags (docs/MESSAGES.md), so a rank must send the same messages in the same order when it runs again.
// A collective progressed whenever its messages happen to arrive would interleave its sends with the program's
// by timing, and a rolled-back rank could interleave them otherwise. So a non-blocking collective starts nothing:
// it is kept, with its arguments, and carried out (as the blocking collective, the same trees and bits) by the
// program's next call that waits, tests, probes or makes a collective, or by its next rt.step() or rt.checkpoint()
// (so that no version holds one half done), in the order the program started them. Every rank carries it out at
// the same point of its own sequence of calls, in a first run and in a re-execution. What it overlaps is the
// program's work between the start and that call, not its communication.
#pragma once

#include <functional>
#include <memory>

namespace reprise::interpose {

class Collective;

/// Keeps `body` (a collective on the communicator of `context`; `barrier`: MPI_Ibarrier's) to be carried out later;
/// its request's part.
std::shared_ptr<Collective> start_collective(int context, std::function<void()> body, bool barrier = false);
/// Carries out the collectives started and not carried out yet, in the order they were started (blocking): all
/// of them, or with `upto` (a wait or a test of its request) those up to it. Inside one being carried out:
/// nothing (the call is its own).
void carry_out_collectives(const Collective* upto = nullptr);
/// Whether a collective started on the communicator of `context` is still to be carried out.
bool collectives_pending_on(int context);
/// Whether an MPI_Ibarrier started on the communicator of `context` is still to be carried out.
bool barrier_pending_on(int context);
/// A rollback: the collectives not carried out are dropped with the program's requests.
void abandon_collectives();

}  // namespace reprise::interpose
