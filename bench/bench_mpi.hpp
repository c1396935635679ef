// Helpers shared by the MPI benchmarks (they include reprise/mpi.hpp; bench_common.hpp stays MPI-free).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "bench/bench_common.hpp"
#include "reprise/mpi.hpp"

namespace reprise::bench {

/// `t` on the slowest rank (an allreduce of the maximum).
inline double slowest(MpiRuntime& rt, double t) {
  rt.check(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, rt.comm()));
  return t;
}

/// MPI bandwidth between each rank and its buddy, every rank sending `data` to its buddy and receiving as much
/// from its ward at once (in pieces of at most 1 GiB): bytes per second of the slowest rank, best of `repeat`. The
/// ceiling of a buddy transfer on this machine.
/// One transfer of the first `bytes` of `data` from every rank to its buddy at once, each receiving as much from its
/// ward into `in` (in pieces of at most 1 GiB): seconds of the slowest rank, from a barrier.
inline double buddy_transfer_seconds(MpiRuntime& rt, const std::vector<unsigned char>& data, std::size_t bytes,
                                     std::vector<unsigned char>& in) {
  const int mine = rt.buddy();
  std::vector<int> buddies(static_cast<std::size_t>(rt.size()));
  rt.check(MPI_Allgather(&mine, 1, MPI_INT, buddies.data(), 1, MPI_INT, rt.comm()));
  const int ward = static_cast<int>(std::find(buddies.begin(), buddies.end(), rt.rank()) - buddies.begin());
  rt.check(MPI_Barrier(rt.comm()));
  const auto t0 = Clock::now();
  for (std::size_t off = 0; off < bytes; off += std::size_t{1} << 30) {
    const int n = static_cast<int>(std::min<std::size_t>(std::size_t{1} << 30, bytes - off));
    MPI_Request req[2];
    rt.check(MPI_Irecv(in.data() + off, n, MPI_BYTE, ward, 5, rt.comm(), &req[0]));
    rt.check(MPI_Isend(data.data() + off, n, MPI_BYTE, mine, 5, rt.comm(), &req[1]));
    rt.check(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
  }
  return slowest(rt, since(t0));
}

/// MPI bandwidth between each rank and its buddy, every rank sending `data` to its buddy and receiving as much
/// from its ward at once: bytes per second of the slowest rank, best of `repeat`. The ceiling of a buddy transfer
/// on this machine. `in`: where the ward's bytes go (a buffer of data.size() made here without it).
inline double buddy_bandwidth(MpiRuntime& rt, const std::vector<unsigned char>& data, int repeat,
                              std::vector<unsigned char>* in = nullptr) {
  std::vector<unsigned char> own;
  if (!in) in = &(own = touched_buffer(data.size(), 7));
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) best = std::min(best, buddy_transfer_seconds(rt, data, data.size(), *in));
  return static_cast<double>(data.size()) / best;
}

}  // namespace reprise::bench
