// Intercommunicators (MPI_Intercomm_create, as coupled codes join two groups): a VComm whose `remote` lists the
// other group's job ranks, on a context free at every rank of both groups. Point-to-point on it names ranks of the
// remote group (p2p.cpp: peer()), logged and replayed as any message; MPI_Intercomm_merge makes the intracommunicator
// of both groups, MPI_Comm_dup another intercommunicator of the same groups. MPI_Barrier and MPI_Bcast on one are
// collectives.cpp's; the other collectives and new communicators on one are refused (Wrapped::intra).
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "interpose/serve.hpp"
#include "interpose/wrapped.hpp"

namespace reprise::interpose {
namespace {

// The two groups' leaders exchange lists of integers, and each leader hands the other group's list to the ranks of
// its own group: every rank of `group` gets the list the other group's leader sent. `leader`: this group's (a rank
// of `group`); at it, `other` and `wire`: the other leader's job rank and the wire tag between them; `mine`: this
// group's list (read at its leader). Within the group: `group`'s collective tag, in rank order.
std::vector<std::int64_t> across(VComm& group, int leader, int other, int wire, const std::vector<std::int64_t>& mine) {
  Comm& m = Wrapped::get().comm();
  std::vector<std::byte> got;
  if (group.rank == leader) {
    Comm::Request in = m.irecv_any_size(got, other, wire);
    Comm::Request out = m.isend(mine.data(), mine.size() * sizeof(std::int64_t), other, wire);
    m.wait(out);
    m.wait(in);
    for (int r = 0; r < group.size; ++r)
      if (r != leader) m.send(got.data(), got.size(), group.job_rank(r), collective_tag(group));
  } else {
    Comm::Request in = m.irecv_any_size(got, group.job_rank(leader), collective_tag(group));
    m.wait(in);
  }
  std::vector<std::int64_t> theirs(got.size() / sizeof(std::int64_t));
  if (!theirs.empty()) std::memcpy(theirs.data(), got.data(), theirs.size() * sizeof(std::int64_t));
  return theirs;
}

// A context free at every rank of both groups, and what the other group's leader sent besides: each group agrees on
// the contexts in use among its ranks, and the leaders exchange those, each followed by `extra` (read at this
// group's leader; `other` and `wire` as for across()), of at least `words` words at both leaders.
struct Agreed {
  int context = 0;
  std::vector<std::int64_t> extra;  // the other group's
};
Agreed agree(VComm& group, int leader, int other, int wire, std::vector<std::int64_t> extra, std::size_t words,
             const char* what) {
  Wrapped& w = Wrapped::get();
  ContextSet used = w.contexts_used();
  allreduce_bits(group, used.words.data(), used.words.size());
  constexpr auto kUsed = static_cast<std::ptrdiff_t>(ContextSet::kWords);
  extra.insert(extra.begin(), used.words.begin(), used.words.end());
  std::vector<std::int64_t> theirs =
      across(group, leader, other, wire, group.rank == leader ? extra : std::vector<std::int64_t>{});
  if (theirs.size() < words + ContextSet::kWords) throw Error(std::string("the remote group's leader sent no ") + what);
  ContextSet both;
  std::copy(theirs.begin(), theirs.begin() + kUsed, both.words.begin());
  both |= used;
  Agreed a;
  a.context = w.free_context(both);
  a.extra.assign(theirs.begin() + kUsed, theirs.end());
  return a;
}

// The job ranks of `c`'s (local) group, in its order.
std::vector<std::int64_t> job_ranks(const VComm& c) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(c.size));
  for (int r = 0; r < c.size; ++r) out[static_cast<std::size_t>(r)] = c.job_rank(r);
  return out;
}

}  // namespace

MPI_Comm dup_intercomm(VComm& c) {
  Wrapped& w = Wrapped::get();
  const Agreed a = agree(c, 0, c.remote.front(), collective_tag(c), {}, 0, "contexts");
  auto v = std::make_unique<VComm>();
  v->context = a.context;
  v->rank = c.rank;
  v->size = c.size;
  v->members = c.members;
  v->remote = c.remote;
  return w.add(std::move(v));
}

}  // namespace reprise::interpose

using reprise::interpose::ours;
using reprise::interpose::serving;
using reprise::interpose::VComm;
using reprise::interpose::Wrapped;
namespace ri = reprise::interpose;

// Collective over both groups: each group's ranks agree on the contexts in use among them, the leaders exchange those
// and their groups' job ranks over `peer` (a message of the program's `tag`, logged as any), and every rank takes the
// lowest context free in both groups.
extern "C" int MPI_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag,
                                    MPI_Comm* out) {
  if (!serving() || !(ours(local) || ours(peer)))
    return PMPI_Intercomm_create(local, local_leader, peer, remote_leader, tag, out);
  REPRISE_SERVE("MPI_Intercomm_create", {
    Wrapped& w = Wrapped::get();
    if (!ours(local))  // (MPI_COMM_SELF: the library's, so would be the intercommunicator and its messages)
      ri::refuse("MPI_Intercomm_create",
                 "the local communicator is not MPI_COMM_WORLD or one derived from it (MPI_COMM_SELF is the "
                 "library's, and so would be the intercommunicator: its messages would not be logged). Make the "
                 "local group with MPI_Comm_split of MPI_COMM_WORLD");
    VComm& group = w.intra(local, "MPI_Intercomm_create");
    if (local_leader < 0 || local_leader >= group.size)
      throw reprise::UsageError("local leader " + std::to_string(local_leader) + " is not a rank of the local group");
    *out = w.create(group, true, "MPI_Intercomm_create", [&] {
      int other = -1, wire = -1;
      std::vector<std::int64_t> mine;
      if (group.rank == local_leader) {
        const VComm& p = w.vcomm(peer, "MPI_Intercomm_create");
        other = ri::peer(p, remote_leader, "MPI_Intercomm_create");
        wire = ri::wire_tag(p, tag, "MPI_Intercomm_create");
        mine = ri::job_ranks(group);
      }
      const ri::Agreed a = ri::agree(group, local_leader, other, wire, std::move(mine), 1, "group");
      auto v = std::make_unique<VComm>();
      v->context = a.context;
      v->rank = group.rank;
      v->size = group.size;
      v->members = group.members;
      v->remote.assign(a.extra.begin(), a.extra.end());
      return w.add(std::move(v));
    });
  });
  return MPI_SUCCESS;
}

// Collective over both groups: the group that gave `high` false comes first (both the same: the group whose rank 0
// has the higher job rank, as Open MPI 5 orders them; MPI leaves it open); the context as for MPI_Intercomm_create, the
// leaders (rank 0 of each group) exchanging on the intercommunicator's collective tag.
extern "C" int MPI_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm* out) {
  if (!serving() || !ours(inter)) return PMPI_Intercomm_merge(inter, high, out);
  REPRISE_SERVE("MPI_Intercomm_merge", {
    Wrapped& w = Wrapped::get();
    VComm& c = w.vcomm(inter, "MPI_Intercomm_merge");
    if (!c.inter()) ri::refuse("MPI_Intercomm_merge", "the communicator is not an intercommunicator");
    *out = w.create(c, true, "MPI_Intercomm_merge", [&] {
      // (over the local group, on the intercommunicator's context)
      const ri::Agreed a =
          ri::agree(c, 0, c.remote.front(), ri::collective_tag(c), {high ? 1 : 0, c.job_rank(0)}, 2, "merge request");
      const bool first = (high != 0) != (a.extra[0] != 0) ? high == 0 : c.job_rank(0) > a.extra[1];
      auto v = std::make_unique<VComm>();
      v->context = a.context;
      std::vector<int> order;  // job ranks: this group's then the other's, or the other way round
      for (int r = 0; r < c.size; ++r) order.push_back(c.job_rank(r));
      order.insert(first ? order.end() : order.begin(), c.remote.begin(), c.remote.end());
      v->size = static_cast<int>(order.size());
      v->rank = first ? c.rank : static_cast<int>(c.remote.size()) + c.rank;
      bool identity = true;
      for (std::size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int>(i);
      if (!identity) v->members = std::move(order);
      return w.add(std::move(v));
    });
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  if (!serving() || !ours(comm)) return PMPI_Comm_test_inter(comm, flag);
  *flag = Wrapped::get().vcomm(comm, "MPI_Comm_test_inter").inter() ? 1 : 0;
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_remote_size(MPI_Comm comm, int* size) {
  if (!serving() || !ours(comm)) return PMPI_Comm_remote_size(comm, size);
  const VComm& c = Wrapped::get().vcomm(comm, "MPI_Comm_remote_size");
  if (!c.inter()) ri::refuse("MPI_Comm_remote_size", "the communicator is not an intercommunicator");
  *size = static_cast<int>(c.remote.size());
  return MPI_SUCCESS;
}

// The library's group of the remote ranks (as MPI_Comm_group gives the local ones: wrapped.cpp).
extern "C" int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  if (!serving() || !ours(comm)) return PMPI_Comm_remote_group(comm, group);
  REPRISE_SERVE("MPI_Comm_remote_group", {
    Wrapped& w = Wrapped::get();
    const VComm& c = w.vcomm(comm, "MPI_Comm_remote_group");
    if (!c.inter()) ri::refuse("MPI_Comm_remote_group", "the communicator is not an intercommunicator");
    MPI_Group all = MPI_GROUP_NULL;
    PMPI_Comm_group(w.runtime().comm(), &all);
    PMPI_Group_incl(all, static_cast<int>(c.remote.size()), c.remote.data(), group);
    PMPI_Group_free(&all);
  });
  return MPI_SUCCESS;
}
