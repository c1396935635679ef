// The program's collectives, built on reprise::Comm's point-to-point on the communicator's collective tag: logged
// between groups and replayed like any message, so they stay correct when only some groups roll back. The same
// trees every time: results are bit-reproducible (a reduction combines in rank order, as MPI requires of
// non-commutative operations; MPI_Reduce_local applies the operation, so every predefined and user operation
// works). Buffers of collectives are host memory, with contiguous datatypes (the neighbourhood collectives: any
// datatype).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "interpose/nonblocking.hpp"
#include "interpose/serve.hpp"
#include "interpose/wrapped.hpp"

namespace reprise::interpose {
namespace {

void send_to(VComm& c, int rank, const void* buf, std::size_t bytes) {
  Comm& m = Wrapped::get().comm();
  Comm::Request r = m.isend(buf, bytes, c.job_rank(rank), collective_tag(c));
  m.wait(r);
}

std::size_t recv_from(VComm& c, int rank, void* buf, std::size_t bytes) {
  Comm& m = Wrapped::get().comm();
  Comm::Request r = m.irecv(buf, bytes, c.job_rank(rank), collective_tag(c));
  return m.wait(r);
}

// Binomial tree from `root` (as reprise::Comm::bcast).
void bcast(VComm& c, void* buf, std::size_t bytes, int root) {
  const int n = c.size, vr = (c.rank - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      recv_from(c, (vr - mask + root) % n, buf, bytes);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n) send_to(c, (vr + mask + root) % n, buf, bytes);
}

// Reduces `acc` (this rank's contribution, replaced by the partial result) to rank 0 over a binomial tree: rank r
// combines the ranks [r, r + 2^k) in rank order (acc = acc op higher).
void reduce_to_zero(VComm& c, std::vector<std::byte>& acc, int count, MPI_Datatype type, MPI_Op op) {
  std::vector<std::byte> other(acc.size());
  for (int mask = 1; mask < c.size; mask <<= 1) {
    if (c.rank & mask) {
      send_to(c, c.rank - mask, acc.data(), acc.size());
      return;
    }
    if (c.rank + mask < c.size) {
      recv_from(c, c.rank + mask, other.data(), other.size());
      PMPI_Reduce_local(acc.data(), other.data(), count, type, op);  // other = acc op other
      acc.swap(other);
    }
  }
}

// Exchanges with `partner` at once: `out` sent, `in` received (both posted before either is waited for).
void exchange(VComm& c, int partner, const void* out, std::size_t out_bytes, void* in, std::size_t in_bytes) {
  Comm& m = Wrapped::get().comm();
  Comm::Request r = m.irecv(in, in_bytes, c.job_rank(partner), collective_tag(c));
  Comm::Request s = m.isend(out, out_bytes, c.job_rank(partner), collective_tag(c));
  m.wait(r);
  m.wait(s);
}

// `mine` = (lower rank's op higher rank's) of `mine` and `theirs` (`count` elements at `at` bytes of both): the
// same bits at both partners, whichever computes it.
void combine(std::byte* mine, std::byte* theirs, bool mine_lower, int count, MPI_Datatype type, MPI_Op op,
             std::size_t bytes) {
  if (count == 0) return;
  if (mine_lower) {
    PMPI_Reduce_local(mine, theirs, count, type, op);  // theirs = mine op theirs
    std::memcpy(mine, theirs, bytes);
  } else {
    PMPI_Reduce_local(theirs, mine, count, type, op);  // mine = theirs op mine
  }
}

// Allreduce of a commutative operation (every predefined one) from kSegmentedBytes on, the same steps every
// time (Rabenseifner's scheme): the ranks above the largest power of two p' fold into rank r - p' first and get
// the result from it last; among the p' others, a reduce-scatter by recursive halving (rank r ends with segment
// bit-reverse(r) reduced; each pair combines lower op higher) and an allgather by recursive doubling. Each rank sends 2
// (p'-1)/p' of the vector instead of the whole vector at each of the 2 log2 p' steps of a reduce and a broadcast on the
// critical path. (Side by side on the 2-core VM, 8 ranks: faster than the tree from 512 KiB, even at 256 KiB,
// slower at 128 KiB and below, where every rank working at once costs more than the shorter path saves; recursive
// doubling for small vectors measured 10% slower than the tree there too.)
constexpr std::size_t kSegmentedBytes = 256 * 1024;

int power_of_two_below(int n) {
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  return p2;
}

bool segmented(const VComm& c, int count, std::size_t bytes) {
  return c.size > 1 && bytes >= kSegmentedBytes && count >= power_of_two_below(c.size);
}

void allreduce_segmented(VComm& c, std::vector<std::byte>& acc, int count, MPI_Datatype type, MPI_Op op,
                         MPI_Aint extent) {
  const int n = c.size, me = c.rank, p2 = power_of_two_below(n);
  const std::size_t bytes = acc.size();
  std::vector<std::byte> other(bytes);
  if (me >= p2) {  // folded: contributes, then receives the result
    send_to(c, me - p2, acc.data(), bytes);
    recv_from(c, me - p2, acc.data(), bytes);
    return;
  }
  if (me + p2 < n) {
    recv_from(c, me + p2, other.data(), bytes);
    combine(acc.data(), other.data(), true, count, type, op, bytes);
  }
  // Segment s: elements [first(s), first(s + 1)); the bytes of segments [lo, hi) span the last element's true
  // extent, not its padding.
  const std::size_t tail = bytes - static_cast<std::size_t>(count - 1) * static_cast<std::size_t>(extent);
  auto first = [&](int seg) { return static_cast<int>(static_cast<long long>(count) * seg / p2); };
  auto at = [&](int seg) { return static_cast<std::size_t>(first(seg)) * static_cast<std::size_t>(extent); };
  auto length = [&](int lo, int hi) {
    const int elements = first(hi) - first(lo);
    return elements > 0 ? static_cast<std::size_t>(elements - 1) * static_cast<std::size_t>(extent) + tail : 0;
  };
  int lo = 0, hi = p2;  // the segments this rank still reduces
  // Nearest partners first while the halves are large, so the big exchanges stay on a node when ranks are placed
  // by blocks (as the runtime's groups are): between groups a message is also copied into the sender's log. With
  // 8 ranks in groups of 2 the logged bytes of a rank fall from 3/2 to 3/4 of the vector. Any order of the masks
  // halves the same way (partners made the same choices so far), and the allgather undoes them in reverse order.
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner = me ^ mask, mid = (lo + hi) / 2;
    const bool lower = (me & mask) == 0;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    exchange(c, partner, acc.data() + at(give_lo), length(give_lo, give_hi), other.data() + at(keep_lo),
             length(keep_lo, keep_hi));
    combine(acc.data() + at(keep_lo), other.data() + at(keep_lo), lower, first(keep_hi) - first(keep_lo), type, op,
            length(keep_lo, keep_hi));
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int mask = p2 / 2; mask > 0; mask >>= 1) {  // from one segment to [0, p2), the halvings undone
    const int partner = me ^ mask;
    const bool lower = (me & mask) == 0;
    const int their_lo = lower ? hi : lo - (hi - lo), their_hi = lower ? hi + (hi - lo) : lo;
    exchange(c, partner, acc.data() + at(lo), length(lo, hi), acc.data() + at(their_lo), length(their_lo, their_hi));
    lo = std::min(lo, their_lo);
    hi = std::max(hi, their_hi);
  }
  if (me + p2 < n) send_to(c, me + p2, acc.data(), bytes);
}

// The bytes a reduction's buffer spans: `count` elements of `type` laid out in memory as they are (gaps included,
// e.g. MPI_DOUBLE_INT's padding), which MPI_Reduce_local reads and writes in place.
std::size_t span_of(int count, MPI_Datatype type, const char* call) {
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  if (lb != 0 || true_lb != 0) refuse(call, "a datatype with a non-zero lower bound is not supported in reductions");
  return count > 0 ? static_cast<std::size_t>((count - 1) * extent + true_extent) : 0;
}

void require_contiguous(MPI_Datatype type, const char* call) {
  if (!contiguous(type))
    refuse(call,
           "collectives take contiguous datatypes under Reprise (a derived datatype with gaps is not "
           "supported yet)");
}

int check_root(const VComm& c, int root, const char* call) {
  if (root < 0 || root >= c.size) refuse(call, "root " + std::to_string(root) + " is not in the communicator");
  return root;
}

}  // namespace

void allreduce_bits(VComm& c, std::uint64_t* words, std::size_t count) {
  carry_out_collectives();  // (the communicator calls: after the collectives started before them)
  std::vector<std::byte> acc(count * sizeof *words);
  std::memcpy(acc.data(), words, acc.size());
  reduce_to_zero(c, acc, static_cast<int>(count), MPI_UINT64_T, MPI_BOR);
  bcast(c, acc.data(), acc.size(), 0);
  std::memcpy(words, acc.data(), acc.size());
}

std::int64_t exscan_sum(VComm& c, std::int64_t mine, std::int64_t* total) {
  carry_out_collectives();
  std::int64_t before = 0;
  if (c.rank > 0) recv_from(c, c.rank - 1, &before, sizeof before);
  std::int64_t after = before + mine;
  if (c.rank + 1 < c.size) send_to(c, c.rank + 1, &after, sizeof after);
  bcast(c, &after, sizeof after, c.size - 1);
  *total = after;
  return before;
}

namespace {
// Records received as bytes, appended to `into`.
void append_records(const std::vector<std::byte>& got, std::vector<std::int64_t>& into) {
  const std::size_t at = into.size();
  into.resize(at + got.size() / sizeof(std::int64_t));
  if (!got.empty()) std::memcpy(into.data() + at, got.data(), got.size());
}

// Whatever `from` sends (records of words), appended to `into`.
void receive_records(VComm& c, int from, std::vector<std::int64_t>& into) {
  std::vector<std::byte> got;
  Comm& m = Wrapped::get().comm();
  Comm::Request r = m.irecv_any_size(got, c.job_rank(from), collective_tag(c));
  m.wait(r);
  append_records(got, into);
}

void send_records(VComm& c, int to, const std::vector<std::int64_t>& records) {
  send_to(c, to, records.data(), records.size() * sizeof(std::int64_t));
}

// Takes out of `all` (records of `words` words) those whose first word `away` accepts, and returns them.
template <class Away>
std::vector<std::int64_t> take_records(std::vector<std::int64_t>& all, std::size_t words, Away away) {
  std::vector<std::int64_t> taken, kept;
  const auto size = static_cast<std::ptrdiff_t>(words);
  for (auto at = all.begin(); all.end() - at >= size; at += size) {
    std::vector<std::int64_t>& into = away(*at) ? taken : kept;
    into.insert(into.end(), at, at + size);
  }
  all.swap(kept);
  return taken;
}
}  // namespace

// A butterfly: the ranks from p2 (the largest power of two up to the size) on fold into rank r - p2 first, which
// holds their records and hands them theirs at the end; among the p2 others, round k sends the partner that differs
// in bit k the records whose holder differs from this rank in bit k (one message each way, empty or not).
std::vector<std::int64_t> route(VComm& c, std::vector<std::int64_t> records, std::size_t words) {
  carry_out_collectives();  // (the communicator calls: after the collectives started before them)
  const int n = c.size, me = c.rank, p2 = power_of_two_below(n);
  if (me >= p2) {
    send_records(c, me - p2, records);
    records.clear();
    receive_records(c, me - p2, records);
    return records;
  }
  if (me + p2 < n) receive_records(c, me + p2, records);
  const auto holder = [p2](std::int64_t rank) { return rank >= p2 ? rank - p2 : rank; };
  for (int bit = 1; bit < p2; bit <<= 1) {
    const std::vector<std::int64_t> away =
        take_records(records, words, [&](std::int64_t to) { return (holder(to) & bit) != (me & bit); });
    Comm& m = Wrapped::get().comm();
    std::vector<std::byte> got;
    Comm::Request r = m.irecv_any_size(got, c.job_rank(me ^ bit), collective_tag(c));
    Comm::Request s = m.isend(away.data(), away.size() * sizeof(std::int64_t), c.job_rank(me ^ bit), collective_tag(c));
    m.wait(r);
    m.wait(s);
    append_records(got, records);
  }
  if (me + p2 < n) send_records(c, me + p2, take_records(records, words, [&](std::int64_t to) { return to != me; }));
  return records;
}

std::vector<std::int64_t> allgather_ints(VComm& c, const std::vector<std::int64_t>& mine) {
  carry_out_collectives();  // (the communicator calls: after the collectives started before them)
  const std::size_t each = mine.size() * sizeof(std::int64_t);
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(c.size));
  if (c.rank == 0) {
    std::copy(mine.begin(), mine.end(), all.begin());
    for (int r = 1; r < c.size; ++r) recv_from(c, r, all.data() + mine.size() * static_cast<std::size_t>(r), each);
  } else {
    send_to(c, 0, mine.data(), each);
  }
  bcast(c, all.data(), all.size() * sizeof(std::int64_t), 0);
  return all;
}

}  // namespace reprise::interpose

// ---- The program's collectives: each body serves the blocking call, and later the non-blocking one (nonblocking.hpp)
namespace reprise::interpose {
namespace {

// On an intercommunicator: each group's barrier, then their leaders (rank 0) exchange an empty message and each
// tells its group; no rank leaves before every rank of both groups came.
void barrier(MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call, true);
  // Run again before the program restored (Wrapped::replaying): nothing to wait for, its messages of the first
  // execution are in the version's channel counters.
  if (!Wrapped::get().replaying()) {
    std::uint64_t nothing = 0;
    allreduce_bits(c, &nothing, 1);
    if (!c.inter()) return;
    if (c.rank == 0)
      Wrapped::get().comm().sendrecv(nullptr, 0, c.remote.front(), collective_tag(c), nullptr, 0, c.remote.front(),
                                     collective_tag(c));
    bcast(c, nullptr, 0, 0);
  }
}

// On an intercommunicator, the job rank of the root the program names in the remote group (a collective's group
// without the root names it so).
int remote_root(const VComm& c, int root, const char* call) {
  if (root < 0 || static_cast<std::size_t>(root) >= c.remote.size())
    refuse(call, "root " + std::to_string(root) +
                     " is not a rank of the intercommunicator's remote group (nor MPI_ROOT or MPI_PROC_NULL)");
  return c.remote[static_cast<std::size_t>(root)];
}

void no_in_place_across(const void* sendbuf, const char* call) {
  if (sendbuf == MPI_IN_PLACE) refuse(call, "MPI_IN_PLACE on an intercommunicator (MPI: erroneous)");
}

// A side of a collective whose datatype has gaps (a struct with padding, a vector, ...), staged as bytes: the
// collectives move bytes, so its blocks (block i: counts[i] elements of `type` at displs[i] extents of the buffer)
// are packed one after the other into `bytes` before (what this rank sends) or unpacked from it after (what it
// received). `counts` and `displs` give the blocks in bytes, as the collective takes them with MPI_BYTE.
struct Staging {
  std::vector<std::byte> bytes;
  std::vector<int> counts, displs;
  Staging(int n, const int* elements, MPI_Datatype type) {
    std::size_t at = 0;
    for (int i = 0; i < n; ++i) {
      counts.push_back(static_cast<int>(bytes_of(elements[i], type)));
      displs.push_back(static_cast<int>(at));
      at += static_cast<std::size_t>(counts.back());
    }
    bytes.resize(at);
  }
  void pack(const void* buf, const int* elements, const int* at, MPI_Datatype type, int only = -1) {
    const MPI_Aint extent = extent_of(type);
    for (int i = 0; i < static_cast<int>(counts.size()); ++i) {
      if (only >= 0 && i != only) continue;
      int pos = displs[static_cast<std::size_t>(i)];
      PMPI_Pack(static_cast<const std::byte*>(buf) + at[i] * extent, elements[i], type, bytes.data(),
                static_cast<int>(bytes.size()), &pos, MPI_COMM_SELF);
    }
  }
  void unpack(void* buf, const int* elements, const int* at, MPI_Datatype type) const {
    const MPI_Aint extent = extent_of(type);
    for (int i = 0; i < static_cast<int>(counts.size()); ++i) {
      int pos = displs[static_cast<std::size_t>(i)];
      PMPI_Unpack(bytes.data(), static_cast<int>(bytes.size()), &pos, static_cast<std::byte*>(buf) + at[i] * extent,
                  elements[i], type, MPI_COMM_SELF);
    }
  }
};
constexpr int kAtZero = 0;

// On an intercommunicator: the root (MPI_ROOT; the others of its group MPI_PROC_NULL) sends to the other group's
// rank 0, which broadcasts in its group (the program names the root by its rank in the remote group).
void bcast_of(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call, true);
  if (!contiguous(type)) {  // (staged as bytes: the root's packed, the others' unpacked)
    const bool sends = c.inter() ? root == MPI_ROOT : c.rank == root;
    const bool receives = c.inter() ? root != MPI_ROOT && root != MPI_PROC_NULL : c.rank != root;
    Staging st(1, &count, type);
    if (sends) st.pack(buf, &count, &kAtZero, type);
    bcast_of(st.bytes.data(), st.counts[0], MPI_BYTE, root, comm, call);
    if (receives) st.unpack(buf, &count, &kAtZero, type);
    return;
  }
  const std::size_t bytes = bytes_of(count, type);
  if (!c.inter()) {
    bcast(c, buf, bytes, check_root(c, root, call));
    return;
  }
  if (root == MPI_PROC_NULL) return;
  Comm& m = Wrapped::get().comm();
  if (root == MPI_ROOT) {
    m.send(buf, bytes, c.remote.front(), collective_tag(c));
    return;
  }
  const int from = remote_root(c, root, call);
  if (c.rank == 0) m.recv(buf, bytes, from, collective_tag(c));
  bcast(c, buf, bytes, 0);
}

// On an intercommunicator: the group without the root reduces to its rank 0 (in rank order), which sends the result
// to the root (MPI_ROOT; the others of its group MPI_PROC_NULL), named by the program as a rank of the remote group.
void inter_reduce(VComm& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  const char* call) {
  const std::size_t bytes = span_of(count, type, call);
  Comm& m = Wrapped::get().comm();
  if (root == MPI_PROC_NULL) return;
  if (root == MPI_ROOT) {
    m.recv(recvbuf, bytes, c.remote.front(), collective_tag(c));
    return;
  }
  const int to = remote_root(c, root, call);
  no_in_place_across(sendbuf, call);
  std::vector<std::byte> acc(bytes);
  if (bytes) std::memcpy(acc.data(), sendbuf, bytes);
  reduce_to_zero(c, acc, count, type, op);
  if (c.rank == 0) m.send(acc.data(), bytes, to, collective_tag(c));
}

void reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
            const char* call) {
  VComm& c = Wrapped::get().collective(comm, call, true);
  if (c.inter()) {
    inter_reduce(c, sendbuf, recvbuf, count, type, op, root, call);
    return;
  }
  check_root(c, root, call);
  const std::size_t bytes = span_of(count, type, call);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  std::vector<std::byte> acc(bytes);
  if (bytes) std::memcpy(acc.data(), in, bytes);
  reduce_to_zero(c, acc, count, type, op);
  if (root != 0) {
    if (c.rank == 0) send_to(c, root, acc.data(), bytes);
    if (c.rank == root) recv_from(c, 0, acc.data(), bytes);
  }
  if (c.rank == root && bytes) std::memcpy(recvbuf, acc.data(), bytes);
}

void allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
               const char* call) {
  VComm& c = Wrapped::get().collective(comm, call, true);
  const std::size_t bytes = span_of(count, type, call);
  if (c.inter()) no_in_place_across(sendbuf, call);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  std::vector<std::byte> acc(bytes);
  if (bytes) std::memcpy(acc.data(), in, bytes);
  if (c.inter()) {  // each group reduces to its rank 0, the two exchange, each broadcasts the other group's result
    reduce_to_zero(c, acc, count, type, op);
    std::vector<std::byte> theirs(bytes);
    if (c.rank == 0)
      Wrapped::get().comm().sendrecv(acc.data(), bytes, c.remote.front(), collective_tag(c), theirs.data(), bytes,
                                     c.remote.front(), collective_tag(c));
    bcast(c, theirs.data(), bytes, 0);
    if (bytes) std::memcpy(recvbuf, theirs.data(), bytes);
    return;
  }
  int commutative = 0;
  PMPI_Op_commutative(op, &commutative);
  if (commutative && segmented(c, count, bytes)) {
    allreduce_segmented(c, acc, count, type, op, extent_of(type));
  } else {  // a reduction to rank 0 in rank order (as MPI requires of a non-commutative operation), a broadcast
    reduce_to_zero(c, acc, count, type, op);
    bcast(c, acc.data(), bytes, 0);
  }
  if (bytes) std::memcpy(recvbuf, acc.data(), bytes);
}

// MPI_Scan and MPI_Exscan: a chain in rank order, rank r receiving x0 op ... op x(r-1) from rank r - 1 (so every
// operation, commutative or not, combines as MPI requires). N - 1 steps: a prefix is rare in the programs this
// serves (offsets of variable-sized blocks), latency matters less than the same bits every time.
void prefix(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, bool exclusive,
            const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  const std::size_t bytes = span_of(count, type, call);
  std::vector<std::byte> acc(bytes), before(bytes);
  if (bytes) std::memcpy(acc.data(), sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, bytes);
  if (c.rank > 0) {
    recv_from(c, c.rank - 1, before.data(), bytes);  // x0 op ... op x(r-1)
    if (exclusive && bytes) std::memcpy(recvbuf, before.data(), bytes);
    if (count) PMPI_Reduce_local(before.data(), acc.data(), count, type, op);  // acc = before op mine
  }
  if (c.rank + 1 < c.size) send_to(c, c.rank + 1, acc.data(), bytes);
  if (!exclusive && bytes) std::memcpy(recvbuf, acc.data(), bytes);
}

// MPI_Reduce_scatter(_block): the whole vector reduced to rank 0 in rank order, then block r sent to rank r.
void reduce_scatter(const void* sendbuf, void* recvbuf, const int* recvcounts, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  require_contiguous(type, call);
  const MPI_Aint extent = extent_of(type);
  std::vector<std::size_t> at(static_cast<std::size_t>(c.size) + 1, 0);
  int total = 0;
  for (int r = 0; r < c.size; ++r) {
    total += recvcounts[r];
    at[static_cast<std::size_t>(r) + 1] = static_cast<std::size_t>(total) * static_cast<std::size_t>(extent);
  }
  const std::size_t bytes = span_of(total, type, call);
  std::vector<std::byte> acc(bytes);
  if (bytes) std::memcpy(acc.data(), sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, bytes);
  reduce_to_zero(c, acc, total, type, op);
  const std::size_t mine = bytes_of(recvcounts[c.rank], type);
  if (c.rank == 0) {
    for (int r = 1; r < c.size; ++r)
      send_to(c, r, acc.data() + at[static_cast<std::size_t>(r)], bytes_of(recvcounts[r], type));
    if (mine) std::memmove(recvbuf, acc.data(), mine);
  } else {
    recv_from(c, 0, recvbuf, mine);
  }
}

// Gathers each rank's block to `root` (rank order), at byte offsets `at` of recvbuf (root only).
void gather_blocks(VComm& c, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                   const std::vector<std::size_t>& bytes, const std::vector<std::size_t>& at, int root) {
  if (c.rank != root) {
    send_to(c, root, sendbuf, send_bytes);
    return;
  }
  auto* out = static_cast<std::byte*>(recvbuf);
  for (int r = 0; r < c.size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == root) {
      if (sendbuf != MPI_IN_PLACE && bytes[i]) std::memmove(out + at[i], sendbuf, bytes[i]);
    } else {
      recv_from(c, r, out + at[i], bytes[i]);
    }
  }
}

// Block sizes and offsets in bytes from counts and displacements (in elements of `type`).
void layout_of(int n, const int* counts, const int* displs, MPI_Datatype type, std::vector<std::size_t>& bytes,
               std::vector<std::size_t>& at) {
  const MPI_Aint extent = extent_of(type);
  bytes.resize(static_cast<std::size_t>(n));
  at.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    bytes[static_cast<std::size_t>(r)] = bytes_of(counts[r], type);
    at[static_cast<std::size_t>(r)] = static_cast<std::size_t>(displs[r] * extent);
  }
}

// Counts and displacements of blocks of `count` elements each, for the calls without a "v".
struct Uniform {
  std::vector<int> counts, displs;
  Uniform(int n, int count) : counts(static_cast<std::size_t>(n), count), displs(static_cast<std::size_t>(n)) {
    for (int r = 0; r < n; ++r) displs[static_cast<std::size_t>(r)] = r * count;
  }
};

void gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
             const int* displs, MPI_Datatype recvtype, int root, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  check_root(c, root, call);
  if (sendbuf != MPI_IN_PLACE && !contiguous(sendtype)) {
    Staging st(1, &sendcount, sendtype);
    st.pack(sendbuf, &sendcount, &kAtZero, sendtype);
    gatherv(st.bytes.data(), st.counts[0], MPI_BYTE, recvbuf, recvcounts, displs, recvtype, root, comm, call);
    return;
  }
  if (c.rank == root && !contiguous(recvtype)) {
    Staging st(c.size, recvcounts, recvtype);
    if (sendbuf == MPI_IN_PLACE) st.pack(recvbuf, recvcounts, displs, recvtype, c.rank);
    gatherv(sendbuf, sendcount, sendtype, st.bytes.data(), st.counts.data(), st.displs.data(), MPI_BYTE, root, comm,
            call);
    st.unpack(recvbuf, recvcounts, displs, recvtype);
    return;
  }
  if (sendbuf != MPI_IN_PLACE) require_contiguous(sendtype, call);
  std::vector<std::size_t> bytes, at;
  if (c.rank == root) {
    require_contiguous(recvtype, call);
    layout_of(c.size, recvcounts, displs, recvtype, bytes, at);
  }
  gather_blocks(c, sendbuf, sendbuf == MPI_IN_PLACE ? 0 : bytes_of(sendcount, sendtype), recvbuf, bytes, at, root);
}

// Gather to rank 0, then rank 0 broadcasts every block packed together.
void allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                const int* displs, MPI_Datatype recvtype, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  if (sendbuf != MPI_IN_PLACE && !contiguous(sendtype)) {
    Staging st(1, &sendcount, sendtype);
    st.pack(sendbuf, &sendcount, &kAtZero, sendtype);
    allgatherv(st.bytes.data(), st.counts[0], MPI_BYTE, recvbuf, recvcounts, displs, recvtype, comm, call);
    return;
  }
  if (!contiguous(recvtype)) {
    Staging st(c.size, recvcounts, recvtype);
    if (sendbuf == MPI_IN_PLACE) st.pack(recvbuf, recvcounts, displs, recvtype, c.rank);
    allgatherv(sendbuf, sendcount, sendtype, st.bytes.data(), st.counts.data(), st.displs.data(), MPI_BYTE, comm, call);
    st.unpack(recvbuf, recvcounts, displs, recvtype);
    return;
  }
  require_contiguous(recvtype, call);
  std::vector<std::size_t> bytes, at;
  layout_of(c.size, recvcounts, displs, recvtype, bytes, at);
  const void* mine = sendbuf;
  std::size_t mine_bytes = sendbuf == MPI_IN_PLACE ? 0 : bytes_of(sendcount, sendtype);
  if (sendbuf == MPI_IN_PLACE) {  // this rank's block is already in place
    mine = static_cast<std::byte*>(recvbuf) + at[static_cast<std::size_t>(c.rank)];
    mine_bytes = bytes[static_cast<std::size_t>(c.rank)];
  } else {
    require_contiguous(sendtype, call);
  }
  const std::size_t total = std::accumulate(bytes.begin(), bytes.end(), std::size_t{0});
  std::vector<std::byte> packed(total);
  std::vector<std::size_t> packed_at(bytes.size());
  for (std::size_t i = 1; i < bytes.size(); ++i) packed_at[i] = packed_at[i - 1] + bytes[i - 1];
  gather_blocks(c, mine, mine_bytes, packed.data(), bytes, packed_at, 0);
  bcast(c, packed.data(), total, 0);
  auto* out = static_cast<std::byte*>(recvbuf);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i]) std::memmove(out + at[i], packed.data() + packed_at[i], bytes[i]);
}

void scatterv(const void* sendbuf, const int* sendcounts, const int* displs, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  check_root(c, root, call);
  if (c.rank == root && !contiguous(sendtype)) {  // (every block packed; MPI_IN_PLACE: the root's stays where it is)
    Staging st(c.size, sendcounts, sendtype);
    st.pack(sendbuf, sendcounts, displs, sendtype);
    scatterv(st.bytes.data(), st.counts.data(), st.displs.data(), MPI_BYTE, recvbuf, recvcount, recvtype, root, comm,
             call);
    return;
  }
  if (recvbuf != MPI_IN_PLACE && !contiguous(recvtype)) {
    Staging st(1, &recvcount, recvtype);
    scatterv(sendbuf, sendcounts, displs, sendtype, st.bytes.data(), st.counts[0], MPI_BYTE, root, comm, call);
    st.unpack(recvbuf, &recvcount, &kAtZero, recvtype);
    return;
  }
  if (recvbuf != MPI_IN_PLACE) require_contiguous(recvtype, call);
  if (c.rank != root) {
    recv_from(c, root, recvbuf, bytes_of(recvcount, recvtype));
    return;
  }
  require_contiguous(sendtype, call);
  std::vector<std::size_t> bytes, at;
  layout_of(c.size, sendcounts, displs, sendtype, bytes, at);
  const auto* in = static_cast<const std::byte*>(sendbuf);
  for (int r = 0; r < c.size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r != root)
      send_to(c, r, in + at[i], bytes[i]);
    else if (recvbuf != MPI_IN_PLACE && bytes[i])
      std::memmove(recvbuf, in + at[i], bytes[i]);
  }
}

void alltoallv(const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype, void* recvbuf,
               const int* recvcounts, const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  const bool in_place = sendbuf == MPI_IN_PLACE;  // (what the receive buffer holds is sent: packed first)
  if (in_place || !contiguous(sendtype)) {
    const int* counts = in_place ? recvcounts : sendcounts;
    const int* displs = in_place ? rdispls : sdispls;
    const MPI_Datatype type = in_place ? recvtype : sendtype;
    Staging st(c.size, counts, type);
    st.pack(in_place ? recvbuf : sendbuf, counts, displs, type);
    alltoallv(st.bytes.data(), st.counts.data(), st.displs.data(), MPI_BYTE, recvbuf, recvcounts, rdispls, recvtype,
              comm, call);
    return;
  }
  if (!contiguous(recvtype)) {
    Staging st(c.size, recvcounts, recvtype);
    alltoallv(sendbuf, sendcounts, sdispls, sendtype, st.bytes.data(), st.counts.data(), st.displs.data(), MPI_BYTE,
              comm, call);
    st.unpack(recvbuf, recvcounts, rdispls, recvtype);
    return;
  }
  require_contiguous(sendtype, call);
  require_contiguous(recvtype, call);
  std::vector<std::size_t> sbytes, sat, rbytes, rat;
  layout_of(c.size, sendcounts, sdispls, sendtype, sbytes, sat);
  layout_of(c.size, recvcounts, rdispls, recvtype, rbytes, rat);
  Comm& m = Wrapped::get().comm();
  std::vector<Comm::Request> reqs;
  const auto* in = static_cast<const std::byte*>(sendbuf);
  auto* out = static_cast<std::byte*>(recvbuf);
  for (int r = 0; r < c.size; ++r)
    if (r != c.rank)
      reqs.push_back(m.irecv(out + rat[static_cast<std::size_t>(r)], rbytes[static_cast<std::size_t>(r)], c.job_rank(r),
                             collective_tag(c)));
  for (int r = 0; r < c.size; ++r)
    if (r != c.rank)
      reqs.push_back(m.isend(in + sat[static_cast<std::size_t>(r)], sbytes[static_cast<std::size_t>(r)], c.job_rank(r),
                             collective_tag(c)));
  const auto me = static_cast<std::size_t>(c.rank);
  if (sbytes[me]) std::memmove(out + rat[me], in + sat[me], std::min(sbytes[me], rbytes[me]));
  m.waitall(reqs);
}

// ---- Neighbourhood collectives (MPI_Neighbor_*): block i of the send side goes to out-neighbour i, block j of the
// receive side comes from in-neighbour j (VComm::neighbours: a Cartesian communicator's -1 then +1 neighbour of each
// dimension, a graph's lists). A block is any datatype: a non-contiguous one (a face of a grid as MPI_Type_vector)
// is packed and unpacked, as point-to-point does.
struct Block {
  std::byte* at = nullptr;  // (a send block is only read)
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
};

// Block i of `sends` to rank out[i], block j of `recvs` from rank in[j] (comm ranks; MPI_PROC_NULL: no message; this
// rank: copied). Messages between two ranks match in the order they were sent (one tag for a communicator's
// collectives), so a rank's blocks to one rank fill that rank's blocks from it in order; `cartesian` sends each pair
// of blocks (a dimension's -1 and +1 neighbours) the other way round (neighbor_exchange).
void exchange_blocks(VComm& c, const std::vector<int>& in, const std::vector<int>& out, const std::vector<Block>& sends,
                     const std::vector<Block>& recvs, bool cartesian, const char* call) {
  std::vector<std::size_t> send_order(out.size()), recv_order(in.size());
  std::iota(send_order.begin(), send_order.end(), std::size_t{0});
  std::iota(recv_order.begin(), recv_order.end(), std::size_t{0});
  if (cartesian)
    for (std::size_t d = 0; d + 1 < send_order.size(); d += 2) std::swap(send_order[d], send_order[d + 1]);
  std::vector<std::vector<std::byte>> packed_in(in.size()), packed_out(out.size());
  auto data_of = [](const Block& b, std::vector<std::byte>& packed, bool pack) -> std::byte* {
    if (contiguous(b.type) || b.count == 0) return b.at;
    packed.resize(bytes_of(b.count, b.type));
    int position = 0;
    if (pack)
      PMPI_Pack(b.at, b.count, b.type, packed.data(), static_cast<int>(packed.size()), &position, MPI_COMM_SELF);
    return packed.data();
  };
  Comm& m = Wrapped::get().comm();
  std::vector<Comm::Request> reqs;
  std::vector<std::size_t> from_self;  // receive blocks from this rank itself, in order
  for (const std::size_t j : recv_order) {
    if (in[j] == MPI_PROC_NULL) continue;
    if (in[j] == c.rank) {
      from_self.push_back(j);
      continue;
    }
    std::byte* data = data_of(recvs[j], packed_in[j], false);
    reqs.push_back(m.irecv(data, bytes_of(recvs[j].count, recvs[j].type), c.job_rank(in[j]), collective_tag(c)));
  }
  std::size_t next_self = 0;
  for (const std::size_t i : send_order) {
    if (out[i] == MPI_PROC_NULL) continue;
    const std::byte* data = data_of(sends[i], packed_out[i], true);
    const std::size_t bytes = bytes_of(sends[i].count, sends[i].type);
    if (out[i] != c.rank) {
      reqs.push_back(m.isend(data, bytes, c.job_rank(out[i]), collective_tag(c)));
      continue;
    }
    if (next_self == from_self.size()) refuse(call, "this rank sends itself more blocks than it receives from itself");
    const std::size_t j = from_self[next_self++];
    std::byte* to = data_of(recvs[j], packed_in[j], false);
    const std::size_t room = bytes_of(recvs[j].count, recvs[j].type);
    if (bytes > room) refuse(call, "a block this rank sends itself is larger than the block that receives it");
    if (bytes) std::memmove(to, data, bytes);
  }
  m.waitall(reqs);
  for (std::size_t j = 0; j < in.size(); ++j) {
    if (packed_in[j].empty()) continue;
    int position = 0;
    PMPI_Unpack(packed_in[j].data(), static_cast<int>(packed_in[j].size()), &position, recvs[j].at, recvs[j].count,
                recvs[j].type, MPI_COMM_SELF);
  }
}

// A collective's blocks; a neighbourhood collective's: block i of `sends` to out-neighbour out[i], block j of
// `recvs` from in-neighbour in[j] (VComm::neighbours, found once at the call).
struct Blocks {
  std::vector<Block> sends, recvs;
  std::vector<int> in, out;
};

// The datatypes of a kept collective's blocks, held until it was carried out (TypeHolds).
TypeHolds holds_of(const Blocks& b) {
  TypeHolds held;
  for (const std::vector<Block>* side : {&b.sends, &b.recvs})
    for (const Block& block : *side) held.add(block.type);
  return held;
}

// A neighbourhood collective. The order of the sends and of the receives makes a Cartesian dimension of 1 or 2
// periodic ranks, where both neighbours are one rank, come out as MPI defines it: what goes to the -1 neighbour
// arrives in its block from its +1 neighbour. So per dimension the +1 block is sent first and the -1 block received
// first; a graph's blocks go in the program's order (a repeated edge: its first block to the first).
void neighbor_exchange(MPI_Comm comm, const Blocks& b, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  exchange_blocks(c, b.in, b.out, b.sends, b.recvs, c.topology.kind == Topology::Kind::cartesian, call);
}

// MPI_Alltoallw: block r to and from every rank r, each with its own datatype.
void alltoallw(const std::vector<Block>& sends, const std::vector<Block>& recvs, MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().collective(comm, call);
  std::vector<int> all(static_cast<std::size_t>(c.size));
  std::iota(all.begin(), all.end(), 0);
  exchange_blocks(c, all, all, sends, recvs, false, call);
}

// The in- and out-neighbours of this rank (the blocks a neighbourhood collective's arguments describe).
void neighbours(MPI_Comm comm, std::vector<int>* in, std::vector<int>* out, const char* call) {
  const VComm& c = Wrapped::get().vcomm(comm, call);
  if (c.topology.kind == Topology::Kind::none)
    refuse(call, "the communicator has no topology (MPI_Cart_create, MPI_Dist_graph_create_adjacent)");
  c.neighbours(in, out);
}

// Blocks of `n` counts at displacements (`displs` in elements of the type, or `byte_displs`; null counts: `count`
// each, one after the other; null types: `type`).
std::vector<Block> blocks(const void* buf, int n, const int* counts, int count, const int* displs,
                          const MPI_Aint* byte_displs, const MPI_Datatype* types, MPI_Datatype type) {
  std::vector<Block> out(static_cast<std::size_t>(n));
  const auto base = reinterpret_cast<std::uintptr_t>(buf);  // (MPI_BOTTOM and absolute addresses: no null + offset)
  for (int i = 0; i < n; ++i) {
    Block& b = out[static_cast<std::size_t>(i)];
    b.type = types ? types[i] : type;
    b.count = counts ? counts[i] : count;
    const MPI_Aint at = byte_displs ? byte_displs[i]
                        : displs    ? displs[i] * extent_of(b.type)
                                    : static_cast<MPI_Aint>(i) * count * extent_of(b.type);
    // (An address as MPI defines it, MPI_Aint: MPI_BOTTOM plus an absolute address is one.)
    b.at = reinterpret_cast<std::byte*>(base + static_cast<std::uintptr_t>(at));  // NOLINT(performance-no-int-to-ptr)
  }
  return out;
}

// The same block (allgather's send side) to each of `n` neighbours.
std::vector<Block> same_block(const void* buf, int n, int count, MPI_Datatype type) {
  Block b;
  b.at = static_cast<std::byte*>(const_cast<void*>(buf));
  b.count = count;
  b.type = type;
  return std::vector<Block>(static_cast<std::size_t>(n), b);
}

// The reduction operations kept collectives still use: MPI lets a program free an operation while a non-blocking
// collective that uses it is pending (MPICH's coll/nonblocking2 does), so MPI_Op_free of a held one is carried out
// when its last holder (OpHold, in the kept body) lets it go. Only the program's thread uses them.
struct HeldOp {
  MPI_Op op;
  int holders;
  bool freed;
};
std::vector<HeldOp> held_ops;

HeldOp* held(MPI_Op op) {
  for (HeldOp& h : held_ops)
    if (h.op == op) return &h;
  return nullptr;
}

class OpHold {
 public:
  explicit OpHold(MPI_Op op) : op_(op) {
    if (HeldOp* h = held(op))
      ++h->holders;
    else
      held_ops.push_back({op, 1, false});
  }
  OpHold(const OpHold& o) : OpHold(o.op_) {}
  OpHold& operator=(const OpHold&) = delete;
  ~OpHold() {
    HeldOp* h = held(op_);
    if (!h || --h->holders > 0) return;
    const bool freed = h->freed;
    held_ops.erase(held_ops.begin() + (h - held_ops.data()));
    if (freed) PMPI_Op_free(&op_);
  }

 private:
  MPI_Op op_;
};

// A non-blocking collective: `body` (one of the above, with the arguments it keeps) kept to be carried out
// (nonblocking.hpp), its request the program's.
// Before the program restored after a rollback (Wrapped::replaying) only MPI_Ibarrier may come, with nothing to
// carry out (as MPI_Barrier); any other is refused now, as its blocking form is (Wrapped::comm).
int start(MPI_Comm comm, MPI_Request* request, const char* call, std::function<void()> body) {
  REPRISE_SERVE(call, {
    Wrapped& w = Wrapped::get();
    const VComm& c = w.intra(comm, call);
    const bool barrier = std::strcmp(call, "MPI_Ibarrier") == 0;
    if (w.replaying()) {
      if (!barrier) w.comm();
      body = [] {};
    }
    auto r = std::make_unique<VRequest>();
    r->collective = start_collective(c.context, std::move(body), barrier);
    *request = w.adopt(std::move(r));
  });
  return MPI_SUCCESS;
}

// A persistent collective (MPI_Allreduce_init, ...; MPI 4): `body` kept with its request; MPI_Start starts it as the
// non-blocking form (kept, carried out later: nonblocking.hpp), and a wait or a test leaves the request inactive for
// the next start (p2p.cpp). Making it sends nothing, so a set-up that makes it runs again before restore().
int init(MPI_Comm comm, MPI_Request* request, const char* call, std::function<void()> body) {
  REPRISE_SERVE(call, {
    Wrapped& w = Wrapped::get();
    w.intra(comm, call);
    auto r = std::make_unique<VRequest>();
    r->persistent = true;
    r->active = false;
    r->comm = comm;
    r->persistent_body = std::move(body);
    *request = w.adopt(std::move(r));
  });
  return MPI_SUCCESS;
}

// Started (`persistent` false) or persistent.
int keep(MPI_Comm comm, MPI_Request* request, const char* call, std::function<void()> body, bool persistent) {
  return persistent ? init(comm, request, call, std::move(body)) : start(comm, request, call, std::move(body));
}

int size_of(MPI_Comm comm, const char* call) {
  return Wrapped::get().intra(comm, call).size;
}

// A neighbourhood collective, blocking (`request` null) or started (kept, nonblocking.hpp): `make` describes its
// blocks for the communicator's in- and out-degree at the call, so a kept one reads the program's buffers when it
// is carried out, not its arrays of counts, displacements and types.
using SendsAndReceives = std::pair<std::vector<Block>, std::vector<Block>>;
int neighbor(MPI_Comm comm, MPI_Request* request, const char* call,
             const std::function<SendsAndReceives(int, int)>& make, bool persistent = false) {
  Blocks b;
  REPRISE_SERVE(call, {
    std::vector<int> in, out;
    neighbours(comm, &in, &out, call);
    std::tie(b.sends, b.recvs) = make(static_cast<int>(in.size()), static_cast<int>(out.size()));
    b.in = std::move(in);
    b.out = std::move(out);
    if (!request) neighbor_exchange(comm, b, call);
  });
  if (!request) return MPI_SUCCESS;
  TypeHolds held = holds_of(b);
  return keep(
      comm, request, call, [comm, call, held, b = std::move(b)] { neighbor_exchange(comm, b, call); }, persistent);
}

// MPI_Alltoallw and MPI_Ialltoallw (`request`): displacements in bytes, a datatype per block.
int alltoallw_call(const void* sendbuf, const int* sendcounts, const int* sdispls, const MPI_Datatype* sendtypes,
                   void* recvbuf, const int* recvcounts, const int* rdispls, const MPI_Datatype* recvtypes,
                   MPI_Comm comm, MPI_Request* request, const char* call, bool persistent = false) {
  Blocks b;
  REPRISE_SERVE(call, {
    const int n = size_of(comm, call);
    if (sendbuf == MPI_IN_PLACE) refuse(call, "MPI_IN_PLACE is not supported for all-to-all yet");
    const std::vector<MPI_Aint> sat(sdispls, sdispls + n), rat(rdispls, rdispls + n);
    b.sends = blocks(sendbuf, n, sendcounts, 0, nullptr, sat.data(), sendtypes, MPI_DATATYPE_NULL);
    b.recvs = blocks(recvbuf, n, recvcounts, 0, nullptr, rat.data(), recvtypes, MPI_DATATYPE_NULL);
    if (!request) alltoallw(b.sends, b.recvs, comm, call);
  });
  if (!request) return MPI_SUCCESS;
  TypeHolds held = holds_of(b);
  return keep(
      comm, request, call, [comm, call, held, b = std::move(b)] { alltoallw(b.sends, b.recvs, comm, call); },
      persistent);
}

}  // namespace
}  // namespace reprise::interpose

using reprise::interpose::ours;
using reprise::interpose::serving;
namespace ri = reprise::interpose;

// Not a call on a communicator: the library's, unless a kept collective still uses the operation (OpHold).
extern "C" int MPI_Op_free(MPI_Op* op) {
  if (ri::Wrapped::get().app_thread())
    if (ri::HeldOp* h = ri::held(*op)) {
      h->freed = true;
      *op = MPI_OP_NULL;
      return MPI_SUCCESS;
    }
  return PMPI_Op_free(op);
}

// Blocking collectives
#define REPRISE_COLLECTIVE(call, ...)      \
  do {                                     \
    REPRISE_SERVE(call, { __VA_ARGS__; }); \
    return MPI_SUCCESS;                    \
  } while (0)

extern "C" int MPI_Barrier(MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Barrier(comm);
  REPRISE_COLLECTIVE("MPI_Barrier", ri::barrier(comm, "MPI_Barrier"));
}

extern "C" int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Bcast(buf, count, type, root, comm);
  REPRISE_COLLECTIVE("MPI_Bcast", ri::bcast_of(buf, count, type, root, comm, "MPI_Bcast"));
}

extern "C" int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  REPRISE_COLLECTIVE("MPI_Reduce", ri::reduce(sendbuf, recvbuf, count, type, op, root, comm, "MPI_Reduce"));
}

extern "C" int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  REPRISE_COLLECTIVE("MPI_Allreduce", ri::allreduce(sendbuf, recvbuf, count, type, op, comm, "MPI_Allreduce"));
}

extern "C" int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  REPRISE_COLLECTIVE("MPI_Scan", ri::prefix(sendbuf, recvbuf, count, type, op, comm, false, "MPI_Scan"));
}

extern "C" int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
  REPRISE_COLLECTIVE("MPI_Exscan", ri::prefix(sendbuf, recvbuf, count, type, op, comm, true, "MPI_Exscan"));
}

extern "C" int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
  REPRISE_COLLECTIVE("MPI_Reduce_scatter",
                     ri::reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, "MPI_Reduce_scatter"));
}

extern "C" int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  REPRISE_COLLECTIVE("MPI_Reduce_scatter_block", {
    const ri::Uniform u(ri::size_of(comm, "MPI_Reduce_scatter_block"), recvcount);
    ri::reduce_scatter(sendbuf, recvbuf, u.counts.data(), type, op, comm, "MPI_Reduce_scatter_block");
  });
}

extern "C" int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
  REPRISE_COLLECTIVE("MPI_Gatherv", ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                                                root, comm, "MPI_Gatherv"));
}

extern "C" int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  REPRISE_COLLECTIVE("MPI_Gather", {
    const ri::Uniform u(ri::size_of(comm, "MPI_Gather"), recvcount);
    ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, root, comm,
                "MPI_Gather");
  });
}

extern "C" int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  REPRISE_COLLECTIVE("MPI_Allgatherv", ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                                      recvtype, comm, "MPI_Allgatherv"));
}

extern "C" int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  REPRISE_COLLECTIVE("MPI_Allgather", {
    const ri::Uniform u(ri::size_of(comm, "MPI_Allgather"), recvcount);
    ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, comm,
                   "MPI_Allgather");
  });
}

extern "C" int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
  REPRISE_COLLECTIVE("MPI_Scatterv", ri::scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                                                  root, comm, "MPI_Scatterv"));
}

extern "C" int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  REPRISE_COLLECTIVE("MPI_Scatter", {
    const ri::Uniform u(ri::size_of(comm, "MPI_Scatter"), sendcount);
    ri::scatterv(sendbuf, u.counts.data(), u.displs.data(), sendtype, recvbuf, recvcount, recvtype, root, comm,
                 "MPI_Scatter");
  });
}

extern "C" int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  REPRISE_COLLECTIVE("MPI_Alltoallv", ri::alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                    rdispls, recvtype, comm, "MPI_Alltoallv"));
}

extern "C" int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  REPRISE_COLLECTIVE("MPI_Alltoall", {
    const int n = ri::size_of(comm, "MPI_Alltoall");
    const ri::Uniform s(n, sendcount), r(n, recvcount);
    ri::alltoallv(sendbuf, s.counts.data(), s.displs.data(), sendtype, recvbuf, r.counts.data(), r.displs.data(),
                  recvtype, comm, "MPI_Alltoall");
  });
}

// Non-blocking collectives (nonblocking.hpp): the bodies above, each with the arguments it needs kept (MPI lets
// the program reuse its count and displacement arrays only once the request completed; the uniform ones are ours).
extern "C" int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ibarrier(comm, request);
  return ri::start(comm, request, "MPI_Ibarrier", [=] { ri::barrier(comm, "MPI_Ibarrier"); });
}

extern "C" int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ibcast(buf, count, type, root, comm, request);
  return ri::start(comm, request, "MPI_Ibcast",
                   [=, held = ri::TypeHolds{type}] { ri::bcast_of(buf, count, type, root, comm, "MPI_Ibcast"); });
}

extern "C" int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                           MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request);
  return ri::start(comm, request, "MPI_Ireduce", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::reduce(sendbuf, recvbuf, count, type, op, root, comm, "MPI_Ireduce");
  });
}

extern "C" int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
  return ri::start(comm, request, "MPI_Iallreduce", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::allreduce(sendbuf, recvbuf, count, type, op, comm, "MPI_Iallreduce");
  });
}

extern "C" int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                         MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request);
  return ri::start(comm, request, "MPI_Iscan", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::prefix(sendbuf, recvbuf, count, type, op, comm, false, "MPI_Iscan");
  });
}

extern "C" int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                           MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request);
  return ri::start(comm, request, "MPI_Iexscan", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::prefix(sendbuf, recvbuf, count, type, op, comm, true, "MPI_Iexscan");
  });
}

extern "C" int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                   MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request);
  return ri::start(comm, request, "MPI_Ireduce_scatter", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, "MPI_Ireduce_scatter");
  });
}

extern "C" int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                                         MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Ireduce_scatter_block"), recvcount);
  return ri::start(comm, request, "MPI_Ireduce_scatter_block",
                   [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
                     ri::reduce_scatter(sendbuf, recvbuf, u.counts.data(), type, op, comm, "MPI_Ireduce_scatter_block");
                   });
}

extern "C" int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                            MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request);
  return ri::start(comm, request, "MPI_Igatherv", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, "MPI_Igatherv");
  });
}

extern "C" int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Igather"), recvcount);
  return ri::start(comm, request, "MPI_Igather", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, root, comm,
                "MPI_Igather");
  });
}

extern "C" int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                               MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
  return ri::start(comm, request, "MPI_Iallgatherv", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, "MPI_Iallgatherv");
  });
}

extern "C" int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Iallgather"), recvcount);
  return ri::start(comm, request, "MPI_Iallgather", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, comm,
                   "MPI_Iallgather");
  });
}

extern "C" int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                             MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  return ri::start(comm, request, "MPI_Iscatterv", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, "MPI_Iscatterv");
  });
}

extern "C" int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Iscatter"), sendcount);
  return ri::start(comm, request, "MPI_Iscatter", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::scatterv(sendbuf, u.counts.data(), u.displs.data(), sendtype, recvbuf, recvcount, recvtype, root, comm,
                 "MPI_Iscatter");
  });
}

extern "C" int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                              void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                              MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           request);
  return ri::start(comm, request, "MPI_Ialltoallv", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                  "MPI_Ialltoallv");
  });
}

extern "C" int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  const int n = ri::size_of(comm, "MPI_Ialltoall");
  const ri::Uniform s(n, sendcount), r(n, recvcount);
  return ri::start(comm, request, "MPI_Ialltoall", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::alltoallv(sendbuf, s.counts.data(), s.displs.data(), sendtype, recvbuf, r.counts.data(), r.displs.data(),
                  recvtype, comm, "MPI_Ialltoall");
  });
}

extern "C" int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                             const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                             const MPI_Datatype recvtypes[], MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  return ri::alltoallw_call(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                            nullptr, "MPI_Alltoallw");
}

extern "C" int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                              const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                              const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                              MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                           request);
  return ri::alltoallw_call(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                            request, "MPI_Ialltoallw");
}

// Neighbourhood collectives (blocking, non-blocking and persistent as the others): the two families' blocks.
namespace reprise::interpose {
namespace {
int neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                       int recvcount, const int* displs, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request,
                       const char* call, bool persistent = false) {
  return neighbor(
      comm, request, call,
      [&](int in, int out) {
        return std::pair{same_block(sendbuf, out, sendcount, sendtype),
                         blocks(recvbuf, in, recvcounts, recvcount, displs, nullptr, nullptr, recvtype)};
      },
      persistent);
}
// Counts (or one count), displacements in elements or bytes, types (or one type), each side.
struct Side {
  const void* buf;
  const int* counts;
  int count;
  const int* displs;
  const MPI_Aint* bytes;
  const MPI_Datatype* types;
  MPI_Datatype type;
};
int neighbor_alltoall(const Side& send, const Side& recv, MPI_Comm comm, MPI_Request* request, const char* call,
                      bool persistent = false) {
  return neighbor(
      comm, request, call,
      [&](int in, int out) {
        return std::pair{blocks(send.buf, out, send.counts, send.count, send.displs, send.bytes, send.types, send.type),
                         blocks(recv.buf, in, recv.counts, recv.count, recv.displs, recv.bytes, recv.types, recv.type)};
      },
      persistent);
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, nullptr, recvtype, comm,
                                nullptr, "MPI_Neighbor_allgather");
}

extern "C" int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, nullptr, recvtype, comm,
                                request, "MPI_Ineighbor_allgather");
}

extern "C" int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                       const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                       MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcounts, 0, displs, recvtype, comm, nullptr,
                                "MPI_Neighbor_allgatherv");
}

extern "C" int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                        const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                        MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                                     request);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcounts, 0, displs, recvtype, comm, request,
                                "MPI_Ineighbor_allgatherv");
}

extern "C" int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return ri::neighbor_alltoall({sendbuf, nullptr, sendcount, nullptr, nullptr, nullptr, sendtype},
                               {recvbuf, nullptr, recvcount, nullptr, nullptr, nullptr, recvtype}, comm, nullptr,
                               "MPI_Neighbor_alltoall");
}

extern "C" int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return ri::neighbor_alltoall({sendbuf, nullptr, sendcount, nullptr, nullptr, nullptr, sendtype},
                               {recvbuf, nullptr, recvcount, nullptr, nullptr, nullptr, recvtype}, comm, request,
                               "MPI_Ineighbor_alltoall");
}

extern "C" int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                      MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                      MPI_Datatype recvtype, MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                   comm);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, sdispls, nullptr, nullptr, sendtype},
                               {recvbuf, recvcounts, 0, rdispls, nullptr, nullptr, recvtype}, comm, nullptr,
                               "MPI_Neighbor_alltoallv");
}

extern "C" int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                       MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                                       const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                                       MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                    comm, request);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, sdispls, nullptr, nullptr, sendtype},
                               {recvbuf, recvcounts, 0, rdispls, nullptr, nullptr, recvtype}, comm, request,
                               "MPI_Ineighbor_alltoallv");
}

extern "C" int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                      const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                      const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                   comm);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, nullptr, sdispls, sendtypes, MPI_DATATYPE_NULL},
                               {recvbuf, recvcounts, 0, nullptr, rdispls, recvtypes, MPI_DATATYPE_NULL}, comm, nullptr,
                               "MPI_Neighbor_alltoallw");
}

extern "C" int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                       const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                       const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                       MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                    comm, request);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, nullptr, sdispls, sendtypes, MPI_DATATYPE_NULL},
                               {recvbuf, recvcounts, 0, nullptr, rdispls, recvtypes, MPI_DATATYPE_NULL}, comm, request,
                               "MPI_Ineighbor_alltoallw");
}

#if REPRISE_MPI_4
// Persistent collectives (MPI 4): the bodies above, kept with the request at the call and started by each MPI_Start
// (ri::init). MPI lets the program change none of their arguments while the request lives.
extern "C" int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Barrier_init(comm, info, request);
  return ri::init(comm, request, "MPI_Barrier_init", [=] { ri::barrier(comm, "MPI_Barrier_init"); });
}

extern "C" int MPI_Bcast_init(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                              MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Bcast_init(buf, count, type, root, comm, info, request);
  return ri::init(comm, request, "MPI_Bcast_init",
                  [=, held = ri::TypeHolds{type}] { ri::bcast_of(buf, count, type, root, comm, "MPI_Bcast_init"); });
}

extern "C" int MPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                               MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Reduce_init(sendbuf, recvbuf, count, type, op, root, comm, info, request);
  return ri::init(comm, request, "MPI_Reduce_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::reduce(sendbuf, recvbuf, count, type, op, root, comm, "MPI_Reduce_init");
  });
}

extern "C" int MPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Allreduce_init(sendbuf, recvbuf, count, type, op, comm, info, request);
  return ri::init(comm, request, "MPI_Allreduce_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::allreduce(sendbuf, recvbuf, count, type, op, comm, "MPI_Allreduce_init");
  });
}

extern "C" int MPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                             MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Scan_init(sendbuf, recvbuf, count, type, op, comm, info, request);
  return ri::init(comm, request, "MPI_Scan_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::prefix(sendbuf, recvbuf, count, type, op, comm, false, "MPI_Scan_init");
  });
}

extern "C" int MPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                               MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Exscan_init(sendbuf, recvbuf, count, type, op, comm, info, request);
  return ri::init(comm, request, "MPI_Exscan_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::prefix(sendbuf, recvbuf, count, type, op, comm, true, "MPI_Exscan_init");
  });
}

extern "C" int MPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                       MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Reduce_scatter_init(sendbuf, recvbuf, recvcounts, type, op, comm, info, request);
  return ri::init(comm, request, "MPI_Reduce_scatter_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
    ri::reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, "MPI_Reduce_scatter_init");
  });
}

extern "C" int MPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, type, op, comm, info, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Reduce_scatter_block_init"), recvcount);
  return ri::init(
      comm, request, "MPI_Reduce_scatter_block_init", [=, held = ri::TypeHolds{type}, op_held = ri::OpHold(op)] {
        ri::reduce_scatter(sendbuf, recvbuf, u.counts.data(), type, op, comm, "MPI_Reduce_scatter_block_init");
      });
}

extern "C" int MPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                                MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Gatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, info,
                             request);
  return ri::init(comm, request, "MPI_Gatherv_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, "MPI_Gatherv_init");
  });
}

extern "C" int MPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                               MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Gather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Gather_init"), recvcount);
  return ri::init(comm, request, "MPI_Gather_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::gatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, root, comm,
                "MPI_Gather_init");
  });
}

extern "C" int MPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                   MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, info,
                                request);
  return ri::init(comm, request, "MPI_Allgatherv_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, "MPI_Allgatherv_init");
  });
}

extern "C" int MPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Allgather_init"), recvcount);
  return ri::init(comm, request, "MPI_Allgather_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::allgatherv(sendbuf, sendcount, sendtype, recvbuf, u.counts.data(), u.displs.data(), recvtype, comm,
                   "MPI_Allgather_init");
  });
}

extern "C" int MPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                 MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Scatterv_init(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, info,
                              request);
  return ri::init(comm, request, "MPI_Scatterv_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, "MPI_Scatterv_init");
  });
}

extern "C" int MPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Scatter_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
  const ri::Uniform u(ri::size_of(comm, "MPI_Scatter_init"), sendcount);
  return ri::init(comm, request, "MPI_Scatter_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::scatterv(sendbuf, u.counts.data(), u.displs.data(), sendtype, recvbuf, recvcount, recvtype, root, comm,
                 "MPI_Scatter_init");
  });
}

extern "C" int MPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                               info, request);
  return ri::init(comm, request, "MPI_Alltoallv_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                  "MPI_Alltoallv_init");
  });
}

extern "C" int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
  const int n = ri::size_of(comm, "MPI_Alltoall_init");
  const ri::Uniform s(n, sendcount), r(n, recvcount);
  return ri::init(comm, request, "MPI_Alltoall_init", [=, held = ri::TypeHolds{sendtype, recvtype}] {
    ri::alltoallv(sendbuf, s.counts.data(), s.displs.data(), sendtype, recvbuf, r.counts.data(), r.displs.data(),
                  recvtype, comm, "MPI_Alltoall_init");
  });
}

extern "C" int MPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Alltoallw_init(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                               info, request);
  return ri::alltoallw_call(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                            request, "MPI_Alltoallw_init", true);
}

extern "C" int MPI_Neighbor_allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                           MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                                        request);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, nullptr, recvtype, comm,
                                request, "MPI_Neighbor_allgather_init", true);
}

extern "C" int MPI_Neighbor_allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                            const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                            MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                                         info, request);
  return ri::neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcounts, 0, displs, recvtype, comm, request,
                                "MPI_Neighbor_allgatherv_init", true);
}

extern "C" int MPI_Neighbor_alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                          MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
  return ri::neighbor_alltoall({sendbuf, nullptr, sendcount, nullptr, nullptr, nullptr, sendtype},
                               {recvbuf, nullptr, recvcount, nullptr, nullptr, nullptr, recvtype}, comm, request,
                               "MPI_Neighbor_alltoall_init", true);
}

extern "C" int MPI_Neighbor_alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                           MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                        comm, info, request);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, sdispls, nullptr, nullptr, sendtype},
                               {recvbuf, recvcounts, 0, rdispls, nullptr, nullptr, recvtype}, comm, request,
                               "MPI_Neighbor_alltoallv_init", true);
}

extern "C" int MPI_Neighbor_alltoallw_init(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                           MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Neighbor_alltoallw_init(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                        recvtypes, comm, info, request);
  return ri::neighbor_alltoall({sendbuf, sendcounts, 0, nullptr, sdispls, sendtypes, MPI_DATATYPE_NULL},
                               {recvbuf, recvcounts, 0, nullptr, rdispls, recvtypes, MPI_DATATYPE_NULL}, comm, request,
                               "MPI_Neighbor_alltoallw_init", true);
}
#endif
