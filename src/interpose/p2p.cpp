// The program's point-to-point calls, served by reprise::Comm: logged between groups, replayed after a failure.
// A non-contiguous datatype is packed (MPI_Pack) into a buffer of the request and unpacked when it completes.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "interpose/nonblocking.hpp"
#include "interpose/serve.hpp"
#include "interpose/wrapped.hpp"

namespace reprise::interpose {

namespace {

// What the served calls ask of a datatype, asked of MPI once per datatype (four queries a call cost more than the
// rest of a small message's path here). Only the program's thread uses it; MPI_Type_free forgets the handle.
struct TypeInfo {
  MPI_Datatype type;
  std::size_t size;
  bool contiguous;
  bool named = false;  // predefined: the program cannot free it, so nothing holds it
  int holders = 0;     // TypeHolds that hold it (requests and collectives under way)
  bool freed = false;  // the program freed it while held: MPI_Type_free is carried out with the last holder
};
std::vector<TypeInfo> known_types;

TypeInfo& info(MPI_Datatype type) {
  for (TypeInfo& t : known_types)
    if (t.type == type) return t;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  int size = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  PMPI_Type_size(type, &size);
  int integers = 0, addresses = 0, types = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  known_types.push_back({type, static_cast<std::size_t>(size),
                         lb == 0 && true_lb == 0 && extent == size && true_extent == size,
                         combiner == MPI_COMBINER_NAMED});
  return known_types.back();
}

TypeInfo* known(MPI_Datatype type) {
  for (TypeInfo& t : known_types)
    if (t.type == type) return &t;
  return nullptr;
}

void release_type(MPI_Datatype type) {
  TypeInfo* t = known(type);
  if (!t || --t->holders > 0 || !t->freed) return;
  forget_type(type);
  PMPI_Type_free(&type);
}

}  // namespace

TypeHolds::TypeHolds(std::initializer_list<MPI_Datatype> types) {
  for (MPI_Datatype t : types) add(t);
}
TypeHolds::TypeHolds(const TypeHolds& o) {
  for (MPI_Datatype t : o.types_) add(t);
}
TypeHolds::~TypeHolds() {
  for (MPI_Datatype t : types_) release_type(t);
}
void TypeHolds::add(MPI_Datatype type) {  // (a predefined type: nothing to hold, no allocation on a request's path)
  if (type == MPI_DATATYPE_NULL) return;
  TypeInfo& t = info(type);
  if (t.named) return;
  ++t.holders;
  types_.push_back(type);
}

void forget_type(MPI_Datatype type) {
  known_types.erase(
      std::remove_if(known_types.begin(), known_types.end(), [type](const TypeInfo& t) { return t.type == type; }),
      known_types.end());
}

std::size_t bytes_of(int count, MPI_Datatype type) {
  return static_cast<std::size_t>(count) * info(type).size;
}

bool contiguous(MPI_Datatype type) {
  return info(type).contiguous;
}

MPI_Aint extent_of(MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  return extent;
}

int peer(const VComm& c, int rank, const char* call, bool any_source) {
  if (rank == MPI_PROC_NULL) return MPI_PROC_NULL;
  if (rank == MPI_ANY_SOURCE && any_source) return MPI_ANY_SOURCE;
  if (rank == MPI_ANY_SOURCE)
    refuse(call, "MPI_ANY_SOURCE is supported by receives and probes, not here: name the source rank");
  if (c.inter()) {  // (a rank of the remote group)
    if (rank < 0 || static_cast<std::size_t>(rank) >= c.remote.size())
      refuse(call, "rank " + std::to_string(rank) + " is not in the intercommunicator's remote group (" +
                       std::to_string(c.remote.size()) + " ranks)");
    return c.remote[static_cast<std::size_t>(rank)];
  }
  if (rank < 0 || rank >= c.size)
    refuse(call, "rank " + std::to_string(rank) + " is not in the communicator (" + std::to_string(c.size) + " ranks)");
  return c.job_rank(rank);
}

int wire_tag(const VComm& c, int tag, const char* call) {
  if (tag == MPI_ANY_TAG) refuse(call, "MPI_ANY_TAG names no tag: only a receive or a probe may give it");
  const TagLayout& tags = Wrapped::get().tags();
  if (tag < 0 || tag > tags.tag_ub())
    refuse(call, "tag " + std::to_string(tag) + " is outside 0.." + std::to_string(tags.tag_ub()) +
                     " (MPI_TAG_UB under Reprise: each communicator takes a range of the library's tags)");
  return tags.wire(c.context, tag);
}

std::pair<int, int> wire_tags(const VComm& c, int tag, const char* call) {
  if (tag != MPI_ANY_TAG) {
    const int wire = wire_tag(c, tag, call);
    return {wire, wire};
  }
  const TagLayout& tags = Wrapped::get().tags();
  return {tags.wire(c.context, 0), tags.wire(c.context, tags.tag_ub())};
}

// MPI_ERROR is left as it was: MPI sets it only where a call of many requests returns MPI_ERR_IN_STATUS, and a
// served call that fails stops the job instead (MPICH's test suite checks that a probe or a receive leaves it).
void fill_status(MPI_Status* status, int source, int tag, std::size_t bytes) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  PMPI_Status_set_elements_x(status, MPI_BYTE, static_cast<MPI_Count>(bytes));
  PMPI_Status_set_cancelled(status, 0);
}

namespace {

// A request of a served call: posted on Comm (host or device buffers: Comm finds out which), or done at once
// (MPI_PROC_NULL).
void post(VRequest* r, bool receive, const void* buf, int count, MPI_Datatype type, int rank, int tag, MPI_Comm comm,
          const char* call) {
  Wrapped& w = Wrapped::get();
  const VComm& c = w.vcomm(comm, call);
  r->done = false;  // (a persistent request posted again)
  r->result = 0;
  r->null_peer = false;
  r->cancelled = false;
  r->probed.reset();
  r->receive = receive;
  r->source = rank;
  r->tag = tag;
  r->buf = const_cast<void*>(buf);
  r->count = count;
  r->type = type;
  r->holds = TypeHolds{type};
  const int job = peer(c, rank, call, receive);
  const auto [wire, wire_hi] = receive ? wire_tags(c, tag, call) : std::pair{wire_tag(c, tag, call), 0};
  r->tag_base = w.tags().wire(c.context, 0);
  if (job == MPI_ANY_SOURCE) r->comm = comm;  // (its status names the sender's rank in it)
  if (job == MPI_PROC_NULL) {
    r->null_peer = true;
    return;
  }
  if (receive)
    if ((r->probed = w.take(job, wire, wire_hi))) return;  // a probe received it ahead: completes from it
  const std::size_t bytes = bytes_of(count, type);
  void* data = const_cast<void*>(buf);
  if (!contiguous(type) && bytes > 0) {
    r->packed.resize(bytes);
    data = r->packed.data();
    if (!receive) {
      int at = 0;
      PMPI_Pack(buf, count, type, data, static_cast<int>(bytes), &at, MPI_COMM_SELF);
    }
  }
  Comm& m = w.comm();
  if (!receive)
    r->request = r->synchronous ? m.issend(data, bytes, job, wire) : m.isend(data, bytes, job, wire);
  else if (wire != wire_hi || job == MPI_ANY_SOURCE)  // MPI_ANY_TAG: the next message from `job` of the
    r->request = m.irecv_range(data, bytes, job, wire, wire_hi, r->match);  // communicator's tags; or from anyone
  else
    r->request = m.irecv(data, bytes, job, wire);
  if (w.has_freed()) w.reap_freed(false);
}

std::unique_ptr<VRequest> post(bool receive, const void* buf, int count, MPI_Datatype type, int rank, int tag,
                               MPI_Comm comm, const char* call, bool synchronous = false) {
  auto r = std::make_unique<VRequest>();
  r->synchronous = synchronous;
  post(r.get(), receive, buf, count, type, rank, tag, comm, call);
  return r;
}

// The rank in its communicator of the sender of the message that a receive from MPI_ANY_SOURCE got.
int sender(const VRequest& r) {
  const VComm* c = Wrapped::get().find(r.comm);
  if (!c)
    throw UsageError(
        "a receive from MPI_ANY_SOURCE completed after its communicator was freed: its status cannot "
        "name the sender. Free the communicator once its receives completed");
  return c->rank_of_job(r.match.source);
}

// A non-contiguous receive's bytes into the program's buffer. A message shorter than the receive's room fills the
// elements it carries, and of a last element cut short the basic elements it carries (as MPI does): MPI_Unpack
// takes whole elements only, so that part goes through the library's own receive of the datatype, a message of
// its bytes to this process on MPI_COMM_SELF.
void unpack(VRequest& r, std::size_t bytes) {
  const std::size_t size = bytes_of(1, r.type);
  const std::size_t whole = size > 0 ? bytes / size : 0, rest = bytes - whole * size;
  int at = 0;
  PMPI_Unpack(r.packed.data(), static_cast<int>(bytes), &at, r.buf, static_cast<int>(whole), r.type, MPI_COMM_SELF);
  if (rest == 0) return;
  auto* last = static_cast<std::byte*>(r.buf) + static_cast<std::ptrdiff_t>(whole) * extent_of(r.type);
  PMPI_Sendrecv(r.packed.data() + at, static_cast<int>(rest), MPI_BYTE, 0, 0, last, 1, r.type, 0, 0, MPI_COMM_SELF,
                MPI_STATUS_IGNORE);
}

// The program's view of a completed request: unpacked, its status filled.
void complete(VRequest& r, std::size_t bytes, MPI_Status* status) {
  if (r.null_peer) {
    fill_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    return;
  }
  if (r.cancelled) {  // (MPI_Cancel: no message; the status says so, MPI_Test_cancelled reads it)
    fill_status(status, r.source, r.tag, 0);
    if (status != MPI_STATUS_IGNORE) PMPI_Status_set_cancelled(status, 1);
    return;
  }
  if (r.receive && !r.packed.empty()) unpack(r, bytes);
  if (r.receive) fill_status(status, r.source == MPI_ANY_SOURCE ? sender(r) : r.source, r.status_tag(), bytes);
}

// Whether MPI would wait for the request behind a handle: not null, and not an inactive persistent request.
bool active(MPI_Request h) {
  if (h == MPI_REQUEST_NULL) return false;
  if (!ours(h)) return true;
  const VRequest* r = Wrapped::get().find(h);
  return !r->persistent || r->active;
}

// A request that completed: the program's view of it (complete()), then its handle is released, or (a persistent
// request) kept, inactive, for the next MPI_Start.
void finish(MPI_Request* handle, std::size_t bytes, MPI_Status* status) {
  Wrapped& w = Wrapped::get();
  VRequest* r = w.find(*handle);
  if (!r->persistent) {
    std::unique_ptr<VRequest> done = w.release(handle);
    complete(*done, bytes, status);
    return;
  }
  complete(*r, bytes, status);
  r->active = false;
  r->request = Comm::Request();
  r->collective.reset();
}

// A receive of a probed message: complete once the probe's receive is (its bytes copied into the program's
// buffer, or into `packed` for a non-contiguous datatype).
bool from_probe(VRequest& r, bool block) {
  Probed& p = *r.probed;
  if (!Wrapped::get().settle(p, block)) return false;
  const std::size_t room = bytes_of(r.count, r.type);
  if (p.data.size() > room)
    throw UsageError("the probed message from rank " + std::to_string(r.source) + " (tag " + std::to_string(r.tag) +
                     ") has " + std::to_string(p.data.size()) + " bytes, the receive room for " + std::to_string(room) +
                     " (MPI_ERR_TRUNCATE)");
  if (!contiguous(r.type))
    r.packed = p.data;
  else if (!p.data.empty())
    std::memcpy(r.buf, p.data.data(), p.data.size());
  r.result = p.data.size();
  r.match = p.match;  // (the message's tag, for MPI_ANY_TAG's status)
  r.done = true;
  r.probed.reset();
  return true;
}

// A wait or a test first carries out the non-blocking collectives started before it (nonblocking.hpp): a test of
// one's request completes it.
std::size_t wait_one(VRequest& r) {
  carry_out_collectives(r.collective.get());
  if (r.partitions_pending())
    throw UsageError("a wait for a partitioned send (MPI_Psend_init) of which " + std::to_string(r.ready()) + " of " +
                     std::to_string(r.partitions) +
                     " partitions are marked ready: it would never complete. Mark every partition with MPI_Pready "
                     "(or _range, _list) first");
  if (r.send_half) {
    wait_one(*r.send_half);
    r.send_half.reset();
  }
  if (r.null_peer || r.done || r.collective) return r.result;
  if (r.probed) {
    from_probe(r, true);
    return r.result;
  }
  return Wrapped::get().comm().wait(r.request);
}

// Completes `r` on Comm if it can (its bytes kept in it).
bool test_one(VRequest& r) {
  carry_out_collectives(r.collective.get());
  if (r.collective) return true;
  if (r.partitions_pending()) return false;  // (sent once every partition is ready)
  if (r.send_half) {
    if (!test_one(*r.send_half)) return false;
    r.send_half.reset();
  }
  if (r.probed && !r.done) return from_probe(r, false);
  if (!r.null_peer && !r.done) r.done = Wrapped::get().comm().test(r.request, r.result);
  return r.null_peer || r.done;
}

// After a test that completed nothing: the protocol's progress (Comm::poll), since a program may test in a loop
// while a recovery needs this rank (a failure its threads detected, replays to send).
void idle() {
  Wrapped::get().comm().poll();
}

bool any_ours(int n, const MPI_Request* requests) {
  for (int i = 0; i < n; ++i)
    if (ours(requests[i])) return true;
  return false;
}

MPI_Status* status_at(MPI_Status* statuses, int i) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

void empty_status(MPI_Status* status) {
  fill_status(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0);
}

}  // namespace
}  // namespace reprise::interpose

using reprise::interpose::ours;
using reprise::interpose::serving;
using reprise::interpose::VRequest;
using reprise::interpose::Wrapped;
namespace ri = reprise::interpose;

// Probes of a source (or MPI_ANY_SOURCE) and a tag (or MPI_ANY_TAG): the message is received ahead into the
// interposition (Wrapped::probe), and the next receive of that source and tag takes it; the status gives its source,
// tag and size (MPI_Get_count).
namespace reprise::interpose {
namespace {
// A probe of (source, tag) on the program's communicator: whether its message is here (waiting for it when
// `block`), the status then filled. `message` (MPI_Mprobe, MPI_Improbe): the message found is matched and its
// handle goes there (MPI_MESSAGE_NO_PROC for MPI_PROC_NULL).
bool probe(int source, int tag, MPI_Comm comm, MPI_Status* status, bool block, const char* call,
           MPI_Message* message = nullptr) {
  Wrapped& w = Wrapped::get();
  const VComm& c = w.vcomm(comm, call);
  const int job = peer(c, source, call, true);
  if (job == MPI_PROC_NULL) {
    if (message) *message = MPI_MESSAGE_NO_PROC;
    fill_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    return true;
  }
  const auto [lo, hi] = wire_tags(c, tag, call);
  // NBX (the sparse exchange: MPI_Issend to ranks only the sender knows, then MPI_Iprobe until an MPI_Ibarrier begun
  // once those sends completed completes) needs the barrier to progress while the program probes. Here it is carried
  // out, blocking, at this probe, while ranks whose synchronous sends to this one are unmatched never enter it: a
  // hang. Refused instead (docs/WRAPPING.md, "What is not done yet").
  if (!block && barrier_pending_on(c.context))
    refuse(call,
           "a non-blocking probe while an MPI_Ibarrier of the same communicator is under way (the sparse exchange "
           "NBX: the barrier would have to progress while the program probes, and a barrier kept until the "
           "program's next call is carried out blocking here, so ranks whose synchronous sends to this one are not "
           "received yet never reach it). Exchange the counts first instead (MPI_Alltoall of the number of "
           "messages each rank sends to each, or MPI_Reduce_scatter_block of 0/1 flags), then receive that many");
  Probed& p = w.probe(job, lo, hi);
  if (!w.settle(p, block)) return false;
  const int found = p.wire_tag() - w.tags().wire(c.context, 0);  // (the program's tag: MPI_ANY_TAG gets it)
  const int from = job == MPI_ANY_SOURCE ? c.rank_of_job(p.sender()) : source;  // (MPI_ANY_SOURCE gets it)
  if (message) {
    p.matched = true;
    p.program_source = from;
    p.program_tag = found;
    *message = w.message(&p);
  }
  fill_status(status, from, found, p.data.size());
  return true;
}
}  // namespace
}  // namespace reprise::interpose

// Matched probes: the message a probe received ahead is marked matched (MPI_Message: later probes and receives
// pass it by) and the matched receive completes from it. Kept in the probed list until then, so a checkpoint keeps it
// with the version, unmatched: after a rollback the program's probe runs again and finds it.
namespace reprise::interpose {
namespace {
// A receive of a matched message, as a request (complete: from_probe).
std::unique_ptr<VRequest> matched_receive(void* buf, int count, MPI_Datatype type, MPI_Message* message) {
  auto r = std::make_unique<VRequest>();
  r->receive = true;
  r->buf = buf;
  r->count = count;
  r->type = type;
  r->holds = TypeHolds{type};
  if (*message == MPI_MESSAGE_NO_PROC) {
    r->null_peer = true;
  } else {
    r->probed = Wrapped::get().take_matched(*message);
    r->source = r->probed->program_source;
    r->tag = r->probed->program_tag;
  }
  *message = MPI_MESSAGE_NULL;
  return r;
}

bool ours_or_no_proc(MPI_Message m) {
  return m == MPI_MESSAGE_NO_PROC || Wrapped::get().ours_message(m);
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  if (!serving() || !ours(comm)) return PMPI_Mprobe(source, tag, comm, message, status);
  REPRISE_SERVE("MPI_Mprobe", { ri::probe(source, tag, comm, status, true, "MPI_Mprobe", message); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  if (!serving() || !ours(comm)) return PMPI_Improbe(source, tag, comm, flag, message, status);
  REPRISE_SERVE("MPI_Improbe",
                { *flag = ri::probe(source, tag, comm, status, false, "MPI_Improbe", message) ? 1 : 0; });
  return MPI_SUCCESS;
}

extern "C" int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (!serving() || !ri::ours_or_no_proc(*message)) return PMPI_Mrecv(buf, count, type, message, status);
  REPRISE_SERVE("MPI_Mrecv", {
    std::unique_ptr<VRequest> r = ri::matched_receive(buf, count, type, message);
    ri::complete(*r, ri::wait_one(*r), status);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  if (!serving() || !ri::ours_or_no_proc(*message)) return PMPI_Imrecv(buf, count, type, message, request);
  REPRISE_SERVE("MPI_Imrecv", { *request = Wrapped::get().adopt(ri::matched_receive(buf, count, type, message)); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  if (!serving() || !ours(comm)) return PMPI_Probe(source, tag, comm, status);
  REPRISE_SERVE("MPI_Probe", { ri::probe(source, tag, comm, status, true, "MPI_Probe"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  if (!serving() || !ours(comm)) return PMPI_Iprobe(source, tag, comm, flag, status);
  REPRISE_SERVE("MPI_Iprobe", { *flag = ri::probe(source, tag, comm, status, false, "MPI_Iprobe") ? 1 : 0; });
  return MPI_SUCCESS;
}

// Not a call on a communicator: the library's, once the handle (which MPI may give to a new datatype) is forgotten.
extern "C" int MPI_Type_free(MPI_Datatype* type) {
  if (Wrapped::get().app_thread()) {
    if (ri::TypeInfo* t = ri::known(*type); t && t->holders > 0) {  // in use: freed with its last holder
      t->freed = true;
      *type = MPI_DATATYPE_NULL;
      return MPI_SUCCESS;
    }
    ri::forget_type(*type);
  }
  return PMPI_Type_free(type);
}

extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Send(buf, count, type, dest, tag, comm);
  REPRISE_SERVE("MPI_Send", {
    VRequest r;  // (blocking: never the program's, no handle)
    ri::post(&r, false, buf, count, type, dest, tag, comm, "MPI_Send");
    ri::wait_one(r);
  });
  return MPI_SUCCESS;
}

// A synchronous send completes once its receive has started: Comm::issend (its header by MPI_Issend).
extern "C" int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  REPRISE_SERVE("MPI_Ssend", {
    VRequest r;
    r.synchronous = true;
    ri::post(&r, false, buf, count, type, dest, tag, comm, "MPI_Ssend");
    ri::wait_one(r);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Isend(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Isend",
                { *request = Wrapped::get().adopt(ri::post(false, buf, count, type, dest, tag, comm, "MPI_Isend")); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Issend(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Issend", {
    *request = Wrapped::get().adopt(ri::post(false, buf, count, type, dest, tag, comm, "MPI_Issend", true));
  });
  return MPI_SUCCESS;
}

// A ready send may be a standard send (MPI says so: a correct program cannot tell).
extern "C" int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  return MPI_Send(buf, count, type, dest, tag, comm);
}

extern "C" int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
  return MPI_Isend(buf, count, type, dest, tag, comm, request);
}

// A buffered send: the message is copied at the call (into the interposition's memory, not the buffer the program
// attached: host memory only) and goes as a send the program freed would (kept until Comm completed it);
// MPI_Buffer_detach waits for those, as MPI says it waits for the buffered messages. MPI_Ibsend's request is
// complete at once (the copy is made).
namespace reprise::interpose {
namespace {
// A send of a copy of the message (made at the call: MPI_Bsend, MPI_Sendrecv_replace).
std::unique_ptr<VRequest> send_copy(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    const char* call) {
  auto r = std::make_unique<VRequest>();
  const std::size_t bytes = bytes_of(count, type);
  r->packed.resize(bytes);
  if (bytes && contiguous(type)) {
    std::memcpy(r->packed.data(), buf, bytes);
  } else if (bytes) {
    int at = 0;
    PMPI_Pack(buf, count, type, r->packed.data(), static_cast<int>(bytes), &at, MPI_COMM_SELF);
  }
  post(r.get(), false, r->packed.data(), static_cast<int>(bytes), MPI_BYTE, dest, tag, comm, call);
  return r;
}

void buffered(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, const char* call) {
  auto r = send_copy(buf, count, type, dest, tag, comm, call);
  if (!r->null_peer) Wrapped::get().keep_freed(std::move(r));
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Bsend(buf, count, type, dest, tag, comm);
  REPRISE_SERVE("MPI_Bsend", { ri::buffered(buf, count, type, dest, tag, comm, "MPI_Bsend"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Ibsend", {
    ri::buffered(buf, count, type, dest, tag, comm, "MPI_Ibsend");
    auto done = std::make_unique<VRequest>();
    done->done = true;
    *request = Wrapped::get().adopt(std::move(done));
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Buffer_detach(void* buffer, int* size) {
  if (serving() && Wrapped::get().started() && Wrapped::get().has_freed())
    REPRISE_SERVE("MPI_Buffer_detach", { Wrapped::get().reap_freed(true); });
  return PMPI_Buffer_detach(buffer, size);
}

extern "C" int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        MPI_Status* status) {
  if (!serving() || !ours(comm)) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  REPRISE_SERVE("MPI_Recv", {
    VRequest r;
    ri::post(&r, true, buf, count, type, source, tag, comm, "MPI_Recv");
    ri::complete(r, ri::wait_one(r), status);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  REPRISE_SERVE("MPI_Irecv",
                { *request = Wrapped::get().adopt(ri::post(true, buf, count, type, source, tag, comm, "MPI_Irecv")); });
  return MPI_SUCCESS;
}

// MPI_Sendrecv and its forms: a receive and a send as one request, both posted at the call (for a `_replace` form
// the send goes from a copy made first, so the receive may overwrite the buffer); it completes when both did, with
// the receive's status. MPI 4's MPI_Isendrecv returns it to the program.
namespace reprise::interpose {
namespace {
std::unique_ptr<VRequest> exchange(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                                   MPI_Comm comm, bool replace, const char* call) {
  std::unique_ptr<VRequest> s;
  if (replace) s = send_copy(recvbuf, recvcount, recvtype, dest, sendtag, comm, call);
  auto r = post(true, recvbuf, recvcount, recvtype, source, recvtag, comm, call);
  r->send_half = replace ? std::move(s) : post(false, sendbuf, sendcount, sendtype, dest, sendtag, comm, call);
  return r;
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                            MPI_Status* status) {
  if (!serving() || !ours(comm))
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                         comm, status);
  REPRISE_SERVE("MPI_Sendrecv", {
    auto r = ri::exchange(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, false, "MPI_Sendrecv");
    ri::complete(*r, ri::wait_one(*r), status);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                    int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (!serving() || !ours(comm))
    return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  REPRISE_SERVE("MPI_Sendrecv_replace", {
    auto r = ri::exchange(buf, count, type, dest, sendtag, buf, count, type, source, recvtag, comm, true,
                          "MPI_Sendrecv_replace");
    ri::complete(*r, ri::wait_one(*r), status);
  });
  return MPI_SUCCESS;
}

#if REPRISE_MPI_4
extern "C" int MPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                             MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Isendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, request);
  REPRISE_SERVE("MPI_Isendrecv", {
    *request = Wrapped::get().adopt(ri::exchange(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                                 recvtype, source, recvtag, comm, false, "MPI_Isendrecv"));
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Isendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                     int recvtag, MPI_Comm comm, MPI_Request* request) {
  if (!serving() || !ours(comm))
    return PMPI_Isendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, request);
  REPRISE_SERVE("MPI_Isendrecv_replace", {
    *request = Wrapped::get().adopt(ri::exchange(buf, count, type, dest, sendtag, buf, count, type, source, recvtag,
                                                 comm, true, "MPI_Isendrecv_replace"));
  });
  return MPI_SUCCESS;
}
#endif

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (!serving() || !ours(*request)) return PMPI_Wait(request, status);
  REPRISE_SERVE("MPI_Wait", {
    if (!ri::active(*request)) {
      ri::empty_status(status);
    } else {
      ri::finish(request, ri::wait_one(*Wrapped::get().find(*request)), status);
    }
  });
  return MPI_SUCCESS;
}

// A send freed before it completed still goes (the program may not touch its buffer until something else tells it
// the message arrived): the interposition keeps it until Comm completed it. A receive freed while pending would
// write into the program's memory at a time it cannot know, and a replay after a failure could not redo that:
// refused.
extern "C" int MPI_Request_free(MPI_Request* request) {
  if (!serving() || !ours(*request)) return PMPI_Request_free(request);
  REPRISE_SERVE("MPI_Request_free", {
    Wrapped& w = Wrapped::get();
    VRequest& pending = *w.find(*request);
    const bool under_way = ri::active(*request) && !pending.done && !pending.null_peer;
    if (pending.collective)
      ri::refuse("MPI_Request_free",
                 "the request of a non-blocking collective cannot be freed under Reprise: wait for it or test it "
                 "until it completes");
    if (pending.receive && under_way)
      ri::refuse("MPI_Request_free",
                 "a receive still under way cannot be freed under Reprise (its message would land at a time the "
                 "program cannot know, which a replay could not redo): wait for it or test it until it completes");
    std::unique_ptr<VRequest> r = w.release(request);
    if (!r->receive && under_way) w.keep_freed(std::move(r));
  });
  return MPI_SUCCESS;
}

// A receive whose message has not begun to arrive is taken back (its status then says cancelled); one whose message
// is arriving completes as usual. The next message of its sender goes to the next receive that matches it, now and
// in a replay, so a program that cancels a receive of a message that may yet come depends on timing, as with MPI
// (the usual use, a receive posted ahead for a message that never comes, does not). A send cannot be taken back:
// it may be logged and received already (and MPI 4.1 deprecates it).
extern "C" int MPI_Cancel(MPI_Request* request) {
  if (!serving() || !ours(*request)) return PMPI_Cancel(request);
  REPRISE_SERVE("MPI_Cancel", {
    VRequest& r = *Wrapped::get().find(*request);
    if (r.collective || r.persistent_body)
      ri::refuse("MPI_Cancel", "a non-blocking or persistent collective cannot be cancelled (MPI: erroneous)");
    if (!r.receive)
      ri::refuse("MPI_Cancel",
                 "a send cannot be cancelled under Reprise: it may be logged and received already (MPI 4.1 "
                 "deprecates cancelling sends). Cancel receives only");
    if (r.partitions > 0) ri::refuse("MPI_Cancel", "a partitioned receive cannot be cancelled under Reprise");
    if (ri::active(*request) && !r.done && !r.null_peer) {
      const bool taken_back =
          r.probed ? Wrapped::get().comm().cancel(r.probed->request) : Wrapped::get().comm().cancel(r.request);
      if (taken_back) {
        r.probed.reset();
        r.cancelled = r.done = true;
        r.result = 0;
      }
    }
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (!serving() || !ours(*request)) return PMPI_Test(request, flag, status);
  REPRISE_SERVE("MPI_Test", {
    if (!ri::active(*request)) {
      *flag = 1;
      ri::empty_status(status);
    } else {
      VRequest& r = *Wrapped::get().find(*request);
      *flag = ri::test_one(r) ? 1 : 0;
      if (*flag)
        ri::finish(request, r.result, status);
      else
        ri::idle();
    }
  });
  return MPI_SUCCESS;
}

// MPI_Test that leaves the request as it is: completed on Comm (its bytes kept in it) and shown to the program
// (a receive unpacked, its status filled), its handle the program's until it waits, tests or frees it.
extern "C" int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (!serving() || !ours(request)) return PMPI_Request_get_status(request, flag, status);
  REPRISE_SERVE("MPI_Request_get_status", {
    if (!ri::active(request)) {
      *flag = 1;
      ri::empty_status(status);
    } else {
      VRequest& r = *Wrapped::get().find(request);
      *flag = ri::test_one(r) ? 1 : 0;
      if (*flag)
        ri::complete(r, r.result, status);
      else
        ri::idle();
    }
  });
  return MPI_SUCCESS;
}

// The packing calls take a communicator only for the data representation of its processes: one library, one
// machine type, so the program's handles are packed as MPI_COMM_SELF (as the interposition packs a datatype).
extern "C" int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize, int* position,
                        MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Pack(inbuf, incount, type, outbuf, outsize, position, comm);
  return PMPI_Pack(inbuf, incount, type, outbuf, outsize, position, MPI_COMM_SELF);
}

extern "C" int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype type,
                          MPI_Comm comm) {
  if (!serving() || !ours(comm)) return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
  return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, type, MPI_COMM_SELF);
}

extern "C" int MPI_Pack_size(int incount, MPI_Datatype type, MPI_Comm comm, int* size) {
  if (!serving() || !ours(comm)) return PMPI_Pack_size(incount, type, comm, size);
  return PMPI_Pack_size(incount, type, MPI_COMM_SELF, size);
}

// Requests of the library and of Reprise in one call: each is completed by its own (one after the other).
extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (!serving() || !ri::any_ours(count, requests)) return PMPI_Waitall(count, requests, statuses);
  REPRISE_SERVE("MPI_Waitall", {
    for (int i = 0; i < count; ++i) {
      MPI_Status* st = ri::status_at(statuses, i);
      if (!ri::active(requests[i])) {
        ri::empty_status(st);
      } else if (!ours(requests[i])) {
        const int rc = PMPI_Wait(&requests[i], st);
        if (rc != MPI_SUCCESS) return rc;
      } else {
        ri::finish(&requests[i], ri::wait_one(*Wrapped::get().find(requests[i])), st);
      }
    }
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (!serving() || !ri::any_ours(count, requests)) return PMPI_Testall(count, requests, flag, statuses);
  REPRISE_SERVE("MPI_Testall", {
    // A request that completes keeps its bytes in its VRequest until all did (MPI_Testall completes all or none).
    Wrapped& w = Wrapped::get();
    bool all = true;
    for (int i = 0; i < count; ++i) {
      if (!ri::active(requests[i])) continue;
      if (!ours(requests[i]))
        ri::refuse("MPI_Testall", "a request of the MPI library and one of Reprise's in one call");
      all = ri::test_one(*w.find(requests[i])) && all;
    }
    *flag = all ? 1 : 0;
    if (!all) ri::idle();
    if (all)
      for (int i = 0; i < count; ++i) {
        MPI_Status* st = ri::status_at(statuses, i);
        if (!ri::active(requests[i])) {
          ri::empty_status(st);
          continue;
        }
        ri::finish(&requests[i], w.find(requests[i])->result, st);
      }
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (!serving() || !ri::any_ours(count, requests)) return PMPI_Waitany(count, requests, index, status);
  REPRISE_SERVE("MPI_Waitany", {
    for (int i = 0; i < count; ++i)
      if (requests[i] != MPI_REQUEST_NULL && !ours(requests[i]))
        ri::refuse("MPI_Waitany", "a request of the MPI library and one of Reprise's in one call");
    *index = MPI_UNDEFINED;
    ri::empty_status(status);
    bool any = false;
    for (int i = 0; i < count; ++i) any = any || ri::active(requests[i]);
    while (any) {
      for (int i = 0; i < count; ++i) {
        if (!ri::active(requests[i])) continue;
        VRequest& r = *Wrapped::get().find(requests[i]);
        if (ri::test_one(r)) {
          ri::finish(&requests[i], r.result, status);
          *index = i;
          return MPI_SUCCESS;
        }
      }
      ri::idle();
    }
  });
  return MPI_SUCCESS;
}

namespace reprise::interpose {
namespace {

// One pass over `requests` (all Reprise's): completes those done, writing their indices; the number done, or
// MPI_UNDEFINED when none is active.
int some_done(int count, MPI_Request requests[], int indices[], MPI_Status statuses[], const char* call) {
  bool active = false;
  int done = 0;
  for (int i = 0; i < count; ++i) {
    if (!ri::active(requests[i])) continue;
    if (!ours(requests[i])) ri::refuse(call, "a request of the MPI library and one of Reprise's in one call");
    active = true;
    VRequest& r = *Wrapped::get().find(requests[i]);
    if (ri::test_one(r)) {
      ri::finish(&requests[i], r.result, ri::status_at(statuses, done));
      indices[done++] = i;
    }
  }
  if (active && done == 0) idle();
  return active ? done : MPI_UNDEFINED;
}

}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!serving() || !ri::any_ours(incount, requests))
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
  REPRISE_SERVE("MPI_Testsome", { *outcount = ri::some_done(incount, requests, indices, statuses, "MPI_Testsome"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!serving() || !ri::any_ours(incount, requests))
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  REPRISE_SERVE("MPI_Waitsome", {
    do *outcount = ri::some_done(incount, requests, indices, statuses, "MPI_Waitsome");
    while (*outcount == 0);
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (!serving() || !ri::any_ours(count, requests)) return PMPI_Testany(count, requests, index, flag, status);
  REPRISE_SERVE("MPI_Testany", {
    *index = MPI_UNDEFINED;
    *flag = 1;  // (also when no request is active)
    ri::empty_status(status);
    for (int i = 0; i < count; ++i) {
      if (!ri::active(requests[i])) continue;
      if (!ours(requests[i]))
        ri::refuse("MPI_Testany", "a request of the MPI library and one of Reprise's in one call");
      *flag = 0;
      VRequest& r = *Wrapped::get().find(requests[i]);
      if (ri::test_one(r)) {
        ri::finish(&requests[i], r.result, status);
        *index = i;
        *flag = 1;
        break;
      }
    }
    if (!*flag) ri::idle();
  });
  return MPI_SUCCESS;
}

// Persistent requests: MPI_Send_init (MPI_Ssend_init synchronous, MPI_Rsend_init as a standard send) and MPI_Recv_init
// keep the arguments (rank and tag checked now, as MPI does), MPI_Start posts them as MPI_Isend or MPI_Irecv would
// (MPI_Bsend_init's as MPI_Ibsend), and a wait or test leaves the handle inactive for the next start. After a rollback
// the program's set-up makes them again (reprise::run).
namespace reprise::interpose {
namespace {
VRequest& init(bool receive, const void* buf, int count, MPI_Datatype type, int rank, int tag, MPI_Comm comm,
               MPI_Request* request, const char* call) {
  Wrapped& w = Wrapped::get();
  const VComm& c = w.vcomm(comm, call);
  peer(c, rank, call, receive);
  if (tag != MPI_ANY_TAG || !receive) wire_tag(c, tag, call);
  auto r = std::make_unique<VRequest>();
  r->persistent = true;
  r->active = false;
  r->receive = receive;
  r->buf = const_cast<void*>(buf);
  r->count = count;
  r->type = type;
  r->holds = TypeHolds{type};
  r->source = rank;
  r->tag = tag;
  r->comm = comm;
  VRequest& made = *r;
  *request = w.adopt(std::move(r));
  return made;
}

void start(MPI_Request* request, const char* call) {
  VRequest& r = *Wrapped::get().find(*request);
  if (!r.persistent)
    refuse(call, "the request is not persistent (MPI_Send_init, MPI_Recv_init and MPI_Allreduce_init, ... make one)");
  if (r.active) refuse(call, "the request is already active: wait for it or test it until it completes first");
  if (r.persistent_body) {  // a persistent collective: started as its non-blocking form (nonblocking.hpp)
    Wrapped& w = Wrapped::get();
    w.comm();  // (refused before the program restored after a rollback, as any communicating call)
    r.collective = start_collective(w.vcomm(r.comm, call).context, r.persistent_body);
    r.done = false;
  } else if (r.partitions > 0 && !r.receive) {  // MPI_Psend_init: sent once every partition is ready (MPI_Pready)
    r.marked.assign(static_cast<std::size_t>(r.partitions), false);
    r.done = false;
    r.request = Comm::Request();
  } else if (r.buffered) {  // MPI_Bsend_init: a copy sent, complete at once (as MPI_Ibsend)
    buffered(r.buf, r.count, r.type, r.source, r.tag, r.comm, call);
    r.done = true;
  } else {
    post(&r, r.receive, r.buf, r.count, r.type, r.source, r.tag, r.comm, call);
  }
  r.active = true;
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                             MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Send_init(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Send_init", { ri::init(false, buf, count, type, dest, tag, comm, request, "MPI_Send_init"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Ssend_init(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Ssend_init",
                { ri::init(false, buf, count, type, dest, tag, comm, request, "MPI_Ssend_init").synchronous = true; });
  return MPI_SUCCESS;
}

extern "C" int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Rsend_init(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Rsend_init", { ri::init(false, buf, count, type, dest, tag, comm, request, "MPI_Rsend_init"); });
  return MPI_SUCCESS;
}

// Partitioned communication (MPI 4): a persistent request whose message is the partitions together. The send goes
// as one message once the program marked every partition ready (MPI_Pready, _range, _list: at the call that marks
// the last, so in the program's order, as the protocol replays it); MPI_Parrived of any partition is true once the
// whole message arrived (MPI lets partitions arrive together). Only the thread that called MPI_Init marks them.
namespace reprise::interpose {
namespace {
void partitioned_init(bool receive, const void* buf, int partitions, MPI_Count count, MPI_Datatype type, int rank,
                      int tag, MPI_Comm comm, MPI_Request* request, const char* call) {
  if (partitions < 1 || count < 0 || static_cast<long double>(partitions) * static_cast<long double>(count) > INT_MAX)
    refuse(call, std::to_string(partitions) + " partitions of " + std::to_string(count) +
                     " elements: the partitions must be at least 1 and their elements together at most " +
                     std::to_string(INT_MAX) + " under Reprise");
  VRequest& r = init(receive, buf, static_cast<int>(partitions * count), type, rank, tag, comm, request, call);
  r.partitions = partitions;
}

VRequest& partitioned(MPI_Request request, bool receive, const char* call) {
  VRequest& r = *Wrapped::get().find(request);
  if (r.partitions == 0 || r.receive != receive)
    refuse(call, std::string("the request is not a partitioned ") +
                     (receive ? "receive (MPI_Precv_init)" : "send (MPI_Psend_init)"));
  if (!r.active) refuse(call, "the partitioned request is not active: MPI_Start it first");
  return r;
}

void check_partition(const VRequest& r, int partition, const char* call) {
  if (partition < 0 || partition >= r.partitions)
    refuse(call,
           "partition " + std::to_string(partition) + " is not one of the request's " + std::to_string(r.partitions));
}

void mark_ready(VRequest& r, int partition, const char* call) {
  check_partition(r, partition, call);
  if (r.marked[static_cast<std::size_t>(partition)])
    refuse(call, "partition " + std::to_string(partition) + " is already marked ready since the request started");
  r.marked[static_cast<std::size_t>(partition)] = true;
  if (!r.partitions_pending()) post(&r, false, r.buf, r.count, r.type, r.source, r.tag, r.comm, call);
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Psend_init(const void* buf, int partitions, MPI_Count count, MPI_Datatype type, int dest, int tag,
                              MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Psend_init(buf, partitions, count, type, dest, tag, comm, info, request);
  REPRISE_SERVE("MPI_Psend_init", {
    ri::partitioned_init(false, buf, partitions, count, type, dest, tag, comm, request, "MPI_Psend_init");
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Precv_init(void* buf, int partitions, MPI_Count count, MPI_Datatype type, int source, int tag,
                              MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Precv_init(buf, partitions, count, type, source, tag, comm, info, request);
  REPRISE_SERVE("MPI_Precv_init", {
    ri::partitioned_init(true, buf, partitions, count, type, source, tag, comm, request, "MPI_Precv_init");
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Pready(int partition, MPI_Request request) {
  if (!serving() || !ours(request)) return PMPI_Pready(partition, request);
  REPRISE_SERVE("MPI_Pready",
                { ri::mark_ready(ri::partitioned(request, false, "MPI_Pready"), partition, "MPI_Pready"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Pready_range(int low, int high, MPI_Request request) {
  if (!serving() || !ours(request)) return PMPI_Pready_range(low, high, request);
  REPRISE_SERVE("MPI_Pready_range", {
    VRequest& r = ri::partitioned(request, false, "MPI_Pready_range");
    for (int p = low; p <= high; ++p) ri::mark_ready(r, p, "MPI_Pready_range");
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Pready_list(int length, int partitions[], MPI_Request request) {
  if (!serving() || !ours(request)) return PMPI_Pready_list(length, partitions, request);
  REPRISE_SERVE("MPI_Pready_list", {
    VRequest& r = ri::partitioned(request, false, "MPI_Pready_list");
    for (int i = 0; i < length; ++i) ri::mark_ready(r, partitions[i], "MPI_Pready_list");
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Parrived(MPI_Request request, int partition, int* flag) {
  if (!serving() || !ours(request)) return PMPI_Parrived(request, partition, flag);
  REPRISE_SERVE("MPI_Parrived", {
    VRequest& r = ri::partitioned(request, true, "MPI_Parrived");
    ri::check_partition(r, partition, "MPI_Parrived");
    *flag = ri::test_one(r) ? 1 : 0;  // (the request stays the program's: its wait or test completes it)
    if (!*flag) ri::idle();
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                              MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Bsend_init(buf, count, type, dest, tag, comm, request);
  REPRISE_SERVE("MPI_Bsend_init",
                { ri::init(false, buf, count, type, dest, tag, comm, request, "MPI_Bsend_init").buffered = true; });
  return MPI_SUCCESS;
}

extern "C" int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                             MPI_Request* request) {
  if (!serving() || !ours(comm)) return PMPI_Recv_init(buf, count, type, source, tag, comm, request);
  REPRISE_SERVE("MPI_Recv_init", { ri::init(true, buf, count, type, source, tag, comm, request, "MPI_Recv_init"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Start(MPI_Request* request) {
  if (!serving() || !ours(*request)) return PMPI_Start(request);
  REPRISE_SERVE("MPI_Start", { ri::start(request, "MPI_Start"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Startall(int count, MPI_Request requests[]) {
  if (!serving() || !ri::any_ours(count, requests)) return PMPI_Startall(count, requests);
  REPRISE_SERVE("MPI_Startall", {
    for (int i = 0; i < count; ++i) {
      if (!ours(requests[i]))
        ri::refuse("MPI_Startall", "a request of the MPI library and one of Reprise's in one call");
      ri::start(&requests[i], "MPI_Startall");
    }
  });
  return MPI_SUCCESS;
}
