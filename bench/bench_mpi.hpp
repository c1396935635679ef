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
inline double buddy_bandwidth(MpiRuntime& rt, const std::vector<unsigned char>& data, int repeat) {
  const int mine = rt.buddy();
  std::vector<int> buddies(static_cast<std::size_t>(rt.size()));
  rt.check(MPI_Allgather(&mine, 1, MPI_INT, buddies.data(), 1, MPI_INT, rt.comm()));
  const int ward = static_cast<int>(std::find(buddies.begin(), buddies.end(), rt.rank()) - buddies.begin());
  std::vector<unsigned char> in = touched_buffer(data.size(), 7);
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    rt.check(MPI_Barrier(rt.comm()));
    const auto t0 = Clock::now();
    for (std::size_t off = 0; off < data.size(); off += std::size_t{1} << 30) {
      const int n = static_cast<int>(std::min<std::size_t>(std::size_t{1} << 30, data.size() - off));
      MPI_Request req[2];
      rt.check(MPI_Irecv(in.data() + off, n, MPI_BYTE, ward, 5, rt.comm(), &req[0]));
      rt.check(MPI_Isend(data.data() + off, n, MPI_BYTE, mine, 5, rt.comm(), &req[1]));
      rt.check(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    }
    best = std::min(best, slowest(rt, since(t0)));
  }
  return static_cast<double>(data.size()) / best;
}

}  // namespace reprise::bench
