// The interposition's state, MPI_Init/MPI_Finalize, and the program's communicators.
#include "interpose/wrapped.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>
#include <tuple>
#include <utility>

#include "interpose/nonblocking.hpp"
#include "interpose/serve.hpp"
#include "reprise/errors.hpp"
#include "reprise/interpose.hpp"

namespace reprise::interpose {
namespace {

std::thread::id app_thread_id;

// The program's MPI calls reach this library only if it comes before the MPI library in the process's symbol
// lookup order (linked before it, or LD_PRELOAD). Loaded after it, every call would go to MPI directly, with no
// protection and no error: say so as the program loads, and stop.
__attribute__((constructor)) void check_lookup_order() {
  void* const first = dlsym(RTLD_DEFAULT, "MPI_Init");
  Dl_info theirs{};
  Dl_info mine{};
  if (first == nullptr || dladdr(first, &theirs) == 0 ||
      dladdr(reinterpret_cast<void*>(&check_lookup_order), &mine) == 0 || theirs.dli_fbase == mine.dli_fbase)
    return;
  std::fprintf(stderr,
               "reprise: %s is loaded after %s, whose MPI_Init the program would call: its MPI calls would bypass "
               "Reprise, unprotected. Link libreprise_interpose.so before the MPI library (a compiler may reorder "
               "libraries: check with `readelf -d PROGRAM | grep NEEDED`), or start the program with "
               "LD_PRELOAD=%s. The program stops here.\n",
               mine.dli_fname, theirs.dli_fname != nullptr ? theirs.dli_fname : "the MPI library", mine.dli_fname);
  std::_Exit(2);
}

}  // namespace

Wrapped& Wrapped::get() {
  static Wrapped w;
  return w;
}

bool Wrapped::app_thread() const {
  return std::this_thread::get_id() == app_thread_id;
}

// The thread first: the runtime's own threads call MPI too (the buddy's progress thread's MPI_Iprobe), and must
// not read what the program's thread writes (the runtime being made, `depth`). Another thread of the program was
// told at most MPI_THREAD_FUNNELED: its call would reach the library with the program's handles, unlogged (or with
// a handle the library does not know): refused.
bool serving(const char* call) {
  Wrapped& w = Wrapped::get();
  if (w.app_thread()) return w.depth == 0 && w.started();
  if (MpiRuntime::own_thread() || !w.running()) return false;
  refuse(call,
         "called by a thread other than the one that called MPI_Init. The program was told MPI_THREAD_FUNNELED at "
         "most (MPI_Init_thread's `provided`): under Reprise only that thread calls MPI, since the protocol "
         "replays one thread's calls in their order. Make the MPI calls on the thread that called MPI_Init");
}

bool ours(MPI_Comm c) {
  return c == MPI_COMM_WORLD || Wrapped::get().find(c) != nullptr;
}

bool ours(MPI_Request r) {
  return Wrapped::get().find(r) != nullptr;
}

void refuse(const char* call, const std::string& why) {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "reprise: rank %d: %s: %s. The job stops here (MPI_Abort); committed checkpoints are kept.\n",
               rank, call, why.c_str());
  std::fflush(nullptr);
  PMPI_Abort(MPI_COMM_WORLD, 2);
  std::_Exit(2);
}

void stop_unrecoverable(const UnrecoverableFailure& e) {
  // As the apps do: exit status 3 and no MPI_Finalize (it would wait for the lost ranks); files already written
  // stay.
  std::fprintf(stderr, "reprise: %s\n", e.what());
  std::fflush(nullptr);
  std::_Exit(3);
}

void Wrapped::start() {
  app_thread_id = std::this_thread::get_id();
  ++depth;  // the runtime's set-up calls MPI itself (MPI_Comm_dup(MPI_COMM_WORLD), ...): the library's
  try {
    // Every message of the program goes through Comm: only the failed ranks' groups roll back, unless
    // REPRISE_ROLLBACK says otherwise.
    Config config = Config::from_env();
    if (!std::getenv("REPRISE_ROLLBACK")) config.group_rollback = true;
    rt_ = std::make_unique<MpiRuntime>(MPI_COMM_WORLD, config);
    world_.context = 0;
    world_.rank = rt_->rank();
    world_.size = rt_->size();
    tags_ = TagLayout::for_library(rt_->messages().tag_ub());
    rt_->protect_resizable(kTableRegion, [this](std::optional<std::size_t> bytes) { return locate_table(bytes); });
    rt_->protect_resizable(kFilesRegion, locate_files);
    rt_->on_restore([this] { restored(); });
    rt_->messages().count_memory("interposition", [this] { return held_bytes(); });
    rt_->messages().on_unreceived([this](int src, int tag) { return take_unreceived(src, tag); });
    // The non-blocking collectives started before rt.step() or rt.checkpoint() are carried out there, so that a
    // version never has one half done (nonblocking.hpp).
    rt_->before_checkpoint([] {
      REPRISE_SERVE("a non-blocking collective carried out by rt.step() or rt.checkpoint()",
                    { carry_out_collectives(); });
    });
    own_regions_ = rt_->region_names();
    if (rt_->restarted()) begin_replay();  // a replacement, or a relaunch from files
    running_ = true;
  } catch (const UnrecoverableFailure& e) {  // e.g. a replacement whose data were lost with its buddy
    stop_unrecoverable(e);
  } catch (const std::exception& e) {
    --depth;
    refuse("MPI_Init", std::string("the Reprise runtime could not start: ") + e.what());
  }
  --depth;
}

void Wrapped::finish() {
  Serving guard;
  reap_freed(true);
  runtime().finish();
}

void Wrapped::stop() {
  if (!rt_) return;
  running_ = false;
  if (!rt_->finished_) {
    reap_freed(true);  // (their receivers wait for them)
    rt_->finish();     // uniform: every rank returns, or every rank takes part in a recovery
  }
  for (VRequest* r : requests_) delete r;  // (their Comm requests before Comm goes)
  requests_.clear();
  fortran_requests_.clear();
  freed_.clear();
  probed_.clear();
  ++depth;
  rt_.reset();
  --depth;
  for (VComm* c : comms_) delete c;
  comms_.clear();
}

Comm& Wrapped::comm() {
  if (replaying_)
    throw UsageError(
        "this rank runs the program again from its top after a rollback and has not restored yet; a message "
        "before rt.restore() would wait for ranks that did not roll back. Restore (`if (rt.restarted()) "
        "rt.restore();`) before the first message: only MPI_Comm_dup, MPI_Comm_split, MPI_Cart_create, "
        "MPI_Barrier and calls without messages may come before it");
  return runtime().messages();
}

MpiRuntime& Wrapped::runtime() {
  if (!rt_)
    throw UsageError(
        "the Reprise runtime is not running: call MPI_Init (or MPI_Init_thread) first, in a program "
        "linked with libreprise_interpose.so");
  return *rt_;
}

VComm* Wrapped::find(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return rt_ ? &world_ : nullptr;
  auto* v = reinterpret_cast<VComm*>(c);
  return comms_.count(v) ? v : nullptr;
}

VComm& Wrapped::vcomm(MPI_Comm c, const char* call) {
  if (VComm* v = find(c)) return *v;
  refuse(call, c == MPI_COMM_NULL ? "the communicator is MPI_COMM_NULL"
                                  : "the communicator is not MPI_COMM_WORLD or one derived from it with a call "
                                    "Reprise serves (MPI_Comm_dup, MPI_Comm_split, MPI_Comm_split_type, "
                                    "MPI_Comm_create, MPI_Cart_create)");
}

VComm& Wrapped::intra(MPI_Comm c, const char* call) {
  VComm& v = vcomm(c, call);
  if (v.inter())
    refuse(call,
           "the communicator is an intercommunicator: point-to-point, MPI_Barrier, MPI_Bcast, MPI_Comm_dup, "
           "MPI_Intercomm_merge and MPI_Comm_free are served on one, not this call (merge it with "
           "MPI_Intercomm_merge first)");
  return v;
}

VComm& Wrapped::collective(MPI_Comm c, const char* call, bool inter_too) {
  VComm& v = inter_too ? vcomm(c, call) : intra(c, call);
  carry_out_collectives();  // (this one after those the program started before it)
  rt_->collective_point();
  return v;
}

int Wrapped::free_context(const ContextSet& used) const {
  int context = 0;
  while (context < tags_.contexts && used.has(context)) ++context;
  if (context == tags_.contexts)
    throw UsageError("more than " + std::to_string(tags_.contexts - 1) +
                     " communicators derived from MPI_COMM_WORLD are alive at once (each takes a range of Comm's "
                     "tags, as many as this MPI library's MPI_TAG_UB leaves room for); free those no longer used "
                     "with MPI_Comm_free");
  return context;
}

MPI_Comm Wrapped::add(std::unique_ptr<VComm> v) {
  contexts_used_.add(v->context);
  VComm* raw = v.release();
  comms_.insert(raw);
  return handle(raw);
}

MPI_Comm Wrapped::derive(VComm& parent, const std::vector<int>& members, bool in_it) {
  // A context free at every member of the parent (disjoint communicators may share one: their messages never
  // meet).
  ContextSet used = contexts_used_;
  allreduce_bits(parent, used.words.data(), used.words.size());
  const int context = free_context(used);
  if (!in_it) return MPI_COMM_NULL;
  auto v = std::make_unique<VComm>();
  v->context = context;
  v->size = static_cast<int>(members.size());
  v->rank = -1;
  bool identity = parent.members.empty() && members.size() == static_cast<std::size_t>(parent.size);
  for (std::size_t i = 0; i < members.size(); ++i) {
    identity = identity && members[i] == static_cast<int>(i);
    v->members.push_back(parent.job_rank(members[i]));
    if (members[i] == parent.rank) v->rank = static_cast<int>(i);
  }
  if (identity) v->members.clear();
  return add(std::move(v));
}

MPI_Comm Wrapped::create(const VComm& parent, bool in_it, const char* call, const std::function<MPI_Comm()>& make) {
  const std::uint64_t seq = created_++;
  if (!replaying_) {
    const MPI_Comm c = make();
    if (VComm* v = find(c)) {
      v->seq = seq;
      v->errhandler = parent.errhandler;
    }
    return c;
  }
  if (!in_it) return MPI_COMM_NULL;
  for (const VComm& r : recorded_)
    if (r.seq == seq) {
      VComm* raw = new VComm(r);
      raw->errhandler = parent.errhandler;
      contexts_used_.add(raw->context);
      comms_.insert(raw);
      return handle(raw);
    }
  throw UsageError(std::string(call) + " runs again after a rollback, before rt.restore(), but the communicator it " +
                   "made the first time (the program's communicator creation number " + std::to_string(seq + 1) +
                   ") was no longer alive at the version restored, and only those are kept. Create the "
                   "communicators the set-up needs once and keep them (MPI_Comm_free at the end)");
}

void Wrapped::free(MPI_Comm* c) {
  VComm* v = find(*c);
  if (!v || v == &world_) throw UsageError("MPI_Comm_free of a communicator that is not one derived here");
  if (collectives_pending_on(v->context))
    throw UsageError(
        "MPI_Comm_free of a communicator with a non-blocking collective still under way on it: wait for "
        "its request first");
  delete_attributes(*c, *v);
  contexts_used_.remove(v->context);
  fortran_comms_.forget(v);
  comms_.erase(v);
  delete v;
  *c = MPI_COMM_NULL;
}

// What probes received ahead holds for a probe or a receive from `source` (MPI_ANY_SOURCE: from any rank) of the wire
// tags [lo, hi]. A probe's receive is posted on MPI only once its message is the first of its sender's that no
// receive matched (Comm's receives of a range; of any rank: the first of its tag), so one that matched a message of
// the range has the earliest this one could get: the first received (in its sender's order), else one on its way
// (waited for: it is here). Else a probe's receive of the same source and tags still unmatched gets what this one
// would. Other unmatched probes' receives that could take a message of the range (from that source, or from any
// rank) are cancelled: a probe that found nothing has no effect in MPI, and left before this one they would take a
// message MPI gives to it.
Probed* Wrapped::ahead(int source, int lo, int hi) {
  const bool any = source == MPI_ANY_SOURCE;
  for (;;) {
    Probed* first = nullptr;
    Probed* coming = nullptr;
    Probed* same = nullptr;
    for (const auto& p : probed_) {
      if (p->matched || (!any && p->source != source && p->source != MPI_ANY_SOURCE)) continue;
      // A receive ahead for tags this call cannot match is left alone: a test of it may deliver its message (and
      // raise this rank's phase) at a moment timing chose, which a re-execution need not repeat.
      if (p->hi < lo || hi < p->lo) continue;
      if (!p->done) p->done = comm().test(p->request);
      const bool from = any || p->sender() == source;
      const int t = p->match.tag;  // (-1: matched no message yet)
      const bool in = from && t >= 0 && lo <= t && t <= hi;
      if (p->done && in && (!first || (p->sender() == first->sender() && p->match.seq < first->match.seq)))
        first = p.get();
      if (!p->done && in && !coming) coming = p.get();
      if (!p->done && t < 0 && p->source == source && p->lo == lo && p->hi == hi && !same) same = p.get();
    }
    if (first) return first;
    if (coming) {
      settle(*coming, true);
      continue;
    }
    for (auto it = probed_.begin(); it != probed_.end();) {
      Probed& p = **it;
      if (&p != same && (any || p.source == source || p.source == MPI_ANY_SOURCE) && !p.matched && !p.done &&
          p.match.tag < 0 && p.lo <= hi && lo <= p.hi && comm().cancel(p.request))
        it = probed_.erase(it);
      else
        ++it;
    }
    return same;
  }
}

// A program's message that a wait needs to get past: one of its sender's earlier messages, which no receive posted
// can take (the receive comes later: an MPI_Isend, then a barrier, then the MPI_Recv; or receives of other tags
// first). MPI keeps such a message as unexpected; here it is received ahead as a probe would receive it, for the
// receive that will take it (Wrapped::take), and kept with a version until then. A collective's message is not
// taken (its receive comes with its call, which waits for it).
bool Wrapped::take_unreceived(int source, int wire) {
  if (!tags_.program_tag(wire)) return false;
  receive_ahead(source, wire, wire);
  return true;
}

Probed& Wrapped::probe(int source, int lo, int hi) {
  if (Probed* p = ahead(source, lo, hi)) return *p;
  return receive_ahead(source, lo, hi);
}

Probed& Wrapped::receive_ahead(int source, int lo, int hi) {
  auto p = std::make_shared<Probed>();
  p->source = source;
  p->lo = lo;
  p->hi = hi;
  p->request = comm().irecv_any_size(p->data, source, lo, hi, &p->match);
  probed_.push_back(p);
  return *p;
}

bool Wrapped::settle(Probed& p, bool block) {
  if (!p.done) {
    carry_out_collectives();
    if (block)
      comm().wait(p.request);
    else
      p.done = comm().test(p.request);
    p.done = p.done || block;
  }
  return p.done;
}

std::shared_ptr<Probed> Wrapped::take(int source, int lo, int hi) {
  Probed* found = ahead(source, lo, hi);
  if (!found) return nullptr;
  const auto it =
      std::find_if(probed_.begin(), probed_.end(), [&](const std::shared_ptr<Probed>& p) { return p.get() == found; });
  std::shared_ptr<Probed> p = *it;
  probed_.erase(it);
  return p;
}

std::shared_ptr<Probed> Wrapped::take_matched(MPI_Message m) {
  for (auto it = probed_.begin(); it != probed_.end(); ++it)
    if ((*it)->matched && message(it->get()) == m) {
      std::shared_ptr<Probed> p = *it;
      probed_.erase(it);
      return p;
    }
  return nullptr;
}

bool Wrapped::ours_message(MPI_Message m) const {
  return std::any_of(probed_.begin(), probed_.end(), [&](const std::shared_ptr<Probed>& p) {
    return p->matched && reinterpret_cast<MPI_Message>(p.get()) == m;
  });
}

std::size_t Wrapped::held_bytes() const {
  std::size_t n = 0;
  for (const auto& p : probed_) n += p->data.capacity();
  for (const VRequest* r : requests_) n += r->packed.capacity();
  for (const auto& r : freed_) n += r->packed.capacity();
  return n;
}

VRequest* Wrapped::find(MPI_Request r) {
  auto* v = reinterpret_cast<VRequest*>(r);
  return requests_.count(v) ? v : nullptr;
}

MPI_Request Wrapped::adopt(std::unique_ptr<VRequest> r) {
  VRequest* raw = r.release();
  requests_.insert(raw);
  return handle(raw);
}

void Wrapped::keep_freed(std::unique_ptr<VRequest> r) {
  freed_.push_back(std::move(r));
  reap_freed(false);
}

void Wrapped::reap_freed(bool block) {
  // Taken out first: a rollback inside wait() abandons every request (abandon_requests), and unwinds through here.
  std::vector<std::unique_ptr<VRequest>> pending;
  pending.swap(freed_);
  for (auto& r : pending) {
    const bool done = block ? (comm().wait(r->request), true) : comm().test(r->request);
    if (!done) freed_.push_back(std::move(r));
  }
}

std::unique_ptr<VRequest> Wrapped::release(MPI_Request* r) {
  VRequest* v = find(*r);
  if (v) requests_.erase(v);
  fortran_requests_.forget(v);
  *r = MPI_REQUEST_NULL;
  return std::unique_ptr<VRequest>(v);
}

// ---- The communicators at a version (region kTableRegion) and rollback --------------------------------------
// Words of 64 bits: magic, the tag layout (base, tags per context), creation calls so far, the contexts in use
// (ContextSet::kWords), count; per communicator seq, context, rank, size, the number of members and the members,
// the number of remote members (an intercommunicator's) and those, then its topology (Topology::write); then the
// count of probed messages, and per message its source, wire tag, bytes and the bytes themselves (padded to a word).

namespace {
// "RPRTCBL4"; format 1 had no topology kind, format 2 no remote group and the topology's counts among the
// communicator's, format 3 no tag layout and one word of contexts (at most 15).
constexpr std::int64_t kTableMagic = 0x5250525443424c34;
}  // namespace

// Kind, the number of dimensions, sources and destinations, weighted; then the dimensions, the periods, the
// sources, the destinations and (weighted) their weights.
void Topology::write(std::vector<std::int64_t>* words) const {
  words->insert(words->end(), {static_cast<std::int64_t>(kind), static_cast<std::int64_t>(dims.size()),
                               static_cast<std::int64_t>(sources.size()),
                               static_cast<std::int64_t>(destinations.size()), weighted ? 1 : 0});
  for (const std::vector<int>* list : {&dims, &periods, &sources, &destinations})
    words->insert(words->end(), list->begin(), list->end());
  if (weighted) {
    words->insert(words->end(), source_weights.begin(), source_weights.end());
    words->insert(words->end(), destination_weights.begin(), destination_weights.end());
  }
}

void Topology::read(const std::function<std::int64_t()>& next) {
  kind = static_cast<Kind>(next());
  const std::int64_t ndims = next(), nsources = next(), ndestinations = next();
  weighted = next() != 0;
  auto list = [&](std::vector<int>& out, std::int64_t n) {
    out.clear();
    for (std::int64_t k = 0; k < n; ++k) out.push_back(static_cast<int>(next()));
  };
  list(dims, ndims);
  list(periods, ndims);
  list(sources, nsources);
  list(destinations, ndestinations);
  list(source_weights, weighted ? nsources : 0);
  list(destination_weights, weighted ? ndestinations : 0);
}

std::pair<void*, std::size_t> Wrapped::locate_table(std::optional<std::size_t> bytes) {
  if (bytes) {
    table_.resize(*bytes);
    return {table_.data(), table_.size()};
  }
  std::vector<const VComm*> live(comms_.begin(), comms_.end());
  std::sort(live.begin(), live.end(), [](const VComm* a, const VComm* b) { return a->seq < b->seq; });
  std::vector<std::int64_t> w{kTableMagic, tags_.base, tags_.per_context, static_cast<std::int64_t>(created_)};
  for (const std::uint64_t word : contexts_used_.words) w.push_back(static_cast<std::int64_t>(word));
  w.push_back(static_cast<std::int64_t>(live.size()));
  for (const VComm* c : live) {
    w.insert(w.end(), {static_cast<std::int64_t>(c->seq), c->context, c->rank, c->size,
                       static_cast<std::int64_t>(c->members.size())});
    w.insert(w.end(), c->members.begin(), c->members.end());
    w.push_back(static_cast<std::int64_t>(c->remote.size()));
    w.insert(w.end(), c->remote.begin(), c->remote.end());
    c->topology.write(&w);
  }
  // The messages probes received that no receive took yet: delivered, so kept with the version, each sender's in
  // the order it sent them (restored, that order is all a receive of MPI_ANY_TAG needs of them: Wrapped::ahead).
  std::vector<const Probed*> done;
  for (const auto& p : probed_)
    if (p->done) done.push_back(p.get());
  std::stable_sort(done.begin(), done.end(),
                   [](const Probed* a, const Probed* b) { return a->match.seq < b->match.seq; });
  w.push_back(static_cast<std::int64_t>(done.size()));
  for (const Probed* p : done) {
    w.insert(w.end(), {p->sender(), p->wire_tag(), static_cast<std::int64_t>(p->data.size())});
    const std::size_t at = w.size();
    w.resize(at + (p->data.size() + sizeof(std::int64_t) - 1) / sizeof(std::int64_t));
    if (!p->data.empty()) std::memcpy(w.data() + at, p->data.data(), p->data.size());
  }
  table_.resize(w.size() * sizeof(std::int64_t));  // (the same size: the same place, and the version differential)
  std::memcpy(table_.data(), w.data(), table_.size());
  return {table_.data(), table_.size()};
}

// The table in table_ (restored): its communicators into `comms`; created_ and contexts_used_ as they were.
void Wrapped::read_table(std::vector<VComm>* comms) {
  std::vector<std::int64_t> w(table_.size() / sizeof(std::int64_t));
  std::memcpy(w.data(), table_.data(), w.size() * sizeof(std::int64_t));
  std::size_t at = 0;
  auto next = [&]() -> std::int64_t {
    if (at >= w.size()) throw Error("the interposition's communicator table in the checkpoint is truncated");
    return w[at++];
  };
  const std::int64_t magic = next();
  if (magic >= kTableMagic - 3 && magic < kTableMagic)
    throw Error("the interposition's communicator table in the checkpoint was written by an earlier Reprise (format " +
                std::to_string(4 - (kTableMagic - magic)) +
                "): run the program from its beginning, or with the Reprise that wrote the checkpoint");
  if (magic != kTableMagic) throw Error("the interposition's communicator table in the checkpoint is not one");
  const std::int64_t base = next(), per_context = next();
  if (base != tags_.base || per_context != tags_.per_context)
    throw Error("the checkpoint's messages carry tags laid out for an MPI library whose MPI_TAG_UB gave " +
                std::to_string(per_context) + " tags to each communicator from " + std::to_string(base) +
                "; this one's gives " + std::to_string(tags_.per_context) + " from " + std::to_string(tags_.base) +
                ": relaunch with the MPI library that wrote the checkpoint");
  created_ = static_cast<std::uint64_t>(next());
  for (std::uint64_t& word : contexts_used_.words) word = static_cast<std::uint64_t>(next());
  const std::int64_t count = next();
  for (std::int64_t i = 0; i < count; ++i) {
    VComm c;
    c.seq = static_cast<std::uint64_t>(next());
    c.context = static_cast<int>(next());
    c.rank = static_cast<int>(next());
    c.size = static_cast<int>(next());
    for (std::int64_t members = next(); members > 0; --members) c.members.push_back(static_cast<int>(next()));
    for (std::int64_t remote = next(); remote > 0; --remote) c.remote.push_back(static_cast<int>(next()));
    c.topology.read(next);
    if (comms) comms->push_back(std::move(c));
  }
  probed_.clear();  // (pending ones: their receives are abandoned; the version's received ones come back)
  const std::int64_t probes = next();
  std::map<int, std::uint64_t> order;  // each sender's, from 0: before any message received from here on
  for (std::int64_t i = 0; i < probes; ++i) {
    auto p = std::make_shared<Probed>();
    p->source = static_cast<int>(next());
    p->lo = p->hi = p->match.tag = static_cast<int>(next());
    p->match.seq = order[p->source]++;
    p->match.source = p->source;
    p->data.resize(static_cast<std::size_t>(next()));
    const std::size_t words = (p->data.size() + sizeof(std::int64_t) - 1) / sizeof(std::int64_t);
    if (at + words > w.size()) throw Error("the interposition's communicator table in the checkpoint is truncated");
    if (!p->data.empty()) std::memcpy(p->data.data(), w.data() + at, p->data.size());
    at += words;
    p->done = true;
    probed_.push_back(std::move(p));
  }
}

void Wrapped::begin_replay() {
  recorded_.clear();
  replaying_ = false;
  if (rt_->restore_own({kTableRegion}) == 0) return;  // a version without it: the program's restore says so
  read_table(&recorded_);
  created_ = 0;  // counted again as the set-up runs again
  replaying_ = true;
}

void Wrapped::restored() {
  read_table(nullptr);
  files_restored();
  for (const VComm* c : comms_) contexts_used_.add(c->context);  // (a program that kept its handles)
  replaying_ = false;
  recorded_.clear();
}

void Wrapped::abandon_requests() {
  abandon_collectives();
  for (VRequest* r : requests_) delete r;  // Comm cancels their receives
  requests_.clear();
  fortran_requests_.clear();
  freed_.clear();
}

void Wrapped::rolled_back(bool from_start) {
  abandon_requests();
  close_files_after_rollback();
  probed_.clear();
  for (VComm* c : comms_) delete c;  // (their attributes without their delete callbacks: attributes.cpp)
  comms_.clear();
  fortran_comms_.clear();
  world_.attributes.clear();
  world_.name.clear();
  world_.errhandler = MPI_ERRORS_ARE_FATAL;
  contexts_used_ = ContextSet::world();
  for (const std::string& name : rt_->region_names())
    if (std::find(own_regions_.begin(), own_regions_.end(), name) == own_regions_.end()) rt_->unprotect(name);
  created_ = 0;
  if (from_start) {
    replaying_ = false;
    recorded_.clear();
  } else {
    begin_replay();
  }
}

}  // namespace reprise::interpose

namespace reprise {

MpiRuntime& wrapped_runtime() {
  return interpose::Wrapped::get().runtime();
}

int run(int argc, char** argv, const std::function<int(int, char**)>& body) {
  interpose::Wrapped& w = interpose::Wrapped::get();
  for (;;) {
    try {
      const int rc = body(argc, argv);
      if (w.started()) w.finish();
      return rc;
    } catch (const Rollback& r) {
      if (!w.started()) throw;
      try {
        w.rolled_back(r.from_start());
      } catch (const std::exception& e) {
        interpose::refuse("reprise::run", std::string("after a rollback: ") + e.what());
      }
    } catch (const UnrecoverableFailure& e) {
      interpose::stop_unrecoverable(e);
    } catch (const Error& e) {  // the runtime's (ProtocolError, UsageError, ...): the job cannot go on
      interpose::refuse("reprise::run", e.what());
    }
  }
}

}  // namespace reprise

using reprise::interpose::serving;
using reprise::interpose::Topology;
using reprise::interpose::VComm;
using reprise::interpose::VRequest;
using reprise::interpose::Wrapped;

namespace {
int told_level = MPI_THREAD_SINGLE;  // the thread level the program was told (MPI_Init_thread, MPI_Query_thread)
}  // namespace

extern "C" int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  if (Wrapped::get().started() && Wrapped::get().app_thread()) {  // the program's top again (reprise::run)
    *provided = told_level;
    return MPI_SUCCESS;
  }
  // The runtime's progress and drain threads call MPI: the library is asked for MPI_THREAD_MULTIPLE whatever the
  // program asked for. The program is told at most MPI_THREAD_FUNNELED: only the thread that called MPI_Init is
  // served (calls of other threads would reach the library unprotected).
  // (A replacement that a repair started waits in it for the survivors' MPI_Comm_spawn: within the recovery limit.)
  const int rc = reprise::MpiRuntime::init_within_recovery_limit(
      [&] { return PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, provided); });
  if (rc != MPI_SUCCESS) return rc;
  if (*provided < MPI_THREAD_MULTIPLE)
    reprise::interpose::refuse("MPI_Init",
                               "this MPI library does not provide MPI_THREAD_MULTIPLE, which the Reprise "
                               "runtime's threads need");
  told_level = required < MPI_THREAD_FUNNELED ? required : MPI_THREAD_FUNNELED;
  *provided = told_level;
  Wrapped::get().start();
  return MPI_SUCCESS;
}

extern "C" int MPI_Query_thread(int* provided) {  // (any thread of the program may ask)
  const Wrapped& w = Wrapped::get();
  const bool runtime_asks = !w.running() || reprise::MpiRuntime::own_thread() || (w.app_thread() && w.depth > 0);
  if (runtime_asks) return PMPI_Query_thread(provided);
  *provided = told_level;
  return MPI_SUCCESS;
}

extern "C" int MPI_Init(int* argc, char*** argv) {
  int provided = 0;
  return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

extern "C" int MPI_Finalize() {
  if (!Wrapped::get().app_thread()) serving();  // another thread of the program, while the runtime runs: refused
  if (Wrapped::get().started() && Wrapped::get().app_thread()) {
    REPRISE_SERVE("MPI_Finalize", { Wrapped::get().stop(); });
  }
  return PMPI_Finalize();
}

extern "C" int MPI_Abort(MPI_Comm comm, int code) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Abort(comm, code);
  return PMPI_Abort(Wrapped::get().runtime().comm(), code);
}

// MPI_Comm_rank and MPI_Comm_size of MPI_COMM_WORLD are answered on any thread of the program (logging code asks
// them on its threads); every other call there is refused (serving()).
extern "C" int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  if (comm == MPI_COMM_WORLD && Wrapped::get().other_thread_asks()) {
    *rank = Wrapped::get().world().rank;
    return MPI_SUCCESS;
  }
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_rank(comm, rank);
  *rank = Wrapped::get().vcomm(comm, "MPI_Comm_rank").rank;
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_size(MPI_Comm comm, int* size) {
  if (comm == MPI_COMM_WORLD && Wrapped::get().other_thread_asks()) {
    *size = Wrapped::get().world().size;
    return MPI_SUCCESS;
  }
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_size(comm, size);
  *size = Wrapped::get().vcomm(comm, "MPI_Comm_size").size;
  return MPI_SUCCESS;
}

namespace reprise::interpose {
namespace {
// MPI_Comm_dup's body: the same ranks, topology and (through their copy callbacks) attributes.
void dup(MPI_Comm comm, MPI_Comm* out, const char* call) {
  Wrapped& w = Wrapped::get();
  VComm& parent = w.vcomm(comm, call);
  *out = w.create(parent, true, call, [&] {
    if (parent.inter()) return dup_intercomm(parent);
    std::vector<int> all(static_cast<std::size_t>(parent.size));
    std::iota(all.begin(), all.end(), 0);
    const MPI_Comm c = w.derive(parent, all, true);
    w.find(c)->topology = parent.topology;
    return c;
  });
  copy_attributes(comm, parent, *w.find(*out));
}

// MPI_Comm_idup: a non-blocking collective (nonblocking.hpp), the communicator made when it is carried out (*out
// written then, as MPI lets the program read it only once the request completed). Before the program restored after
// a rollback it is made at once, from the version, with no message.
int idup(MPI_Comm comm, MPI_Comm* out, MPI_Request* request, const char* call) {
  REPRISE_SERVE(call, {
    Wrapped& w = Wrapped::get();
    const VComm& c = w.vcomm(comm, call);
    auto r = std::make_unique<VRequest>();
    if (w.replaying()) {
      dup(comm, out, call);
      r->collective = start_collective(c.context, [] {});
    } else {
      r->collective = start_collective(c.context, [comm, out, call] { dup(comm, out, call); });
    }
    *request = w.adopt(std::move(r));
  });
  return MPI_SUCCESS;
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_dup(comm, out);
  REPRISE_SERVE("MPI_Comm_dup", { reprise::interpose::dup(comm, out, "MPI_Comm_dup"); });
  return MPI_SUCCESS;
}

// Info hints change nothing here (attributes.cpp): the same as MPI_Comm_dup.
extern "C" int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_dup_with_info(comm, info, out);
  REPRISE_SERVE("MPI_Comm_dup_with_info", { reprise::interpose::dup(comm, out, "MPI_Comm_dup_with_info"); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* out, MPI_Request* request) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_idup(comm, out, request);
  return reprise::interpose::idup(comm, out, request, "MPI_Comm_idup");
}

#if REPRISE_MPI_4
extern "C" int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* out, MPI_Request* request) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_idup_with_info(comm, info, out, request);
  return reprise::interpose::idup(comm, out, request, "MPI_Comm_idup_with_info");
}
#endif

namespace reprise::interpose {
namespace {
// MPI_Comm_split's body: each colour's ranks ordered by (key, parent rank).
void split(MPI_Comm comm, int color, int key, MPI_Comm* out, const char* call) {
  Wrapped& w = Wrapped::get();
  VComm& parent = w.intra(comm, call);
  *out = w.create(parent, color != MPI_UNDEFINED, call, [&] {
    const std::vector<std::int64_t> mine{color, key};
    const std::vector<std::int64_t> all = allgather_ints(parent, mine);
    std::vector<std::pair<std::int64_t, int>> same;  // (key, parent rank) of this rank's colour
    for (int r = 0; r < parent.size; ++r)
      if (color != MPI_UNDEFINED && all[2 * static_cast<std::size_t>(r)] == color)
        same.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r);
    std::sort(same.begin(), same.end());
    std::vector<int> members;
    for (const auto& [k, r] : same) members.push_back(r);
    return w.derive(parent, members, color != MPI_UNDEFINED);
  });
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_split(comm, color, key, out);
  REPRISE_SERVE("MPI_Comm_split", { reprise::interpose::split(comm, color, key, out, "MPI_Comm_split"); });
  return MPI_SUCCESS;
}

// MPI_COMM_TYPE_SHARED: the ranks of this rank's node as the runtime sees nodes (the ones a node failure takes
// together; REPRISE_RANKS_PER_NODE included), so a node communicator and a group of the protocol agree. Other
// split types are refused (the runtime knows nodes, not finer hardware levels).
extern "C" int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_split_type(comm, split_type, key, info, out);
  REPRISE_SERVE("MPI_Comm_split_type", {
    if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED)
      reprise::interpose::refuse("MPI_Comm_split_type",
                                 "split type " + std::to_string(split_type) +
                                     " is not supported under Reprise (MPI_COMM_TYPE_SHARED is: the ranks of a node)");
    int color = MPI_UNDEFINED;
    if (split_type == MPI_COMM_TYPE_SHARED)
      color = nlohmann::json::parse(Wrapped::get().runtime().placement_json()).at("node").get<int>();
    reprise::interpose::split(comm, color, key, out, "MPI_Comm_split_type");
  });
  return MPI_SUCCESS;
}

// Groups are the library's: MPI_Comm_group gives a real MPI group of the communicator's job ranks (taken from the
// runtime's communicator, numbered as the job), in the communicator's order, so every group call (MPI_Group_incl,
// _excl, _translate_ranks, _rank, _size, _free, ...) is the library's own. MPI_Comm_create maps a group back to
// ranks of its parent and derives the communicator as MPI_Comm_split does. An intercommunicator's group is its local
// group (MPI_Comm_remote_group: intercomm.cpp).
MPI_Group reprise::interpose::job_group(const VComm& c) {
  std::vector<int> job(static_cast<std::size_t>(c.size));
  for (int r = 0; r < c.size; ++r) job[static_cast<std::size_t>(r)] = c.job_rank(r);
  MPI_Group all = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  PMPI_Comm_group(Wrapped::get().runtime().comm(), &all);
  PMPI_Group_incl(all, c.size, job.data(), &group);
  PMPI_Group_free(&all);
  return group;
}

extern "C" int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_group(comm, group);
  REPRISE_SERVE("MPI_Comm_group",
                { *group = reprise::interpose::job_group(Wrapped::get().vcomm(comm, "MPI_Comm_group")); });
  return MPI_SUCCESS;
}

namespace reprise::interpose {
namespace {
// The members of `group` (a group of the library: job ranks) as ranks of `parent`, in the group's order.
std::vector<int> members_of(const VComm& parent, MPI_Group group, const char* call) {
  int n = 0;
  PMPI_Group_size(group, &n);
  std::vector<int> in_group(static_cast<std::size_t>(n)), job(static_cast<std::size_t>(n));
  std::iota(in_group.begin(), in_group.end(), 0);
  MPI_Group all = MPI_GROUP_NULL;
  PMPI_Comm_group(Wrapped::get().runtime().comm(), &all);
  PMPI_Group_translate_ranks(group, n, in_group.data(), all, job.data());
  PMPI_Group_free(&all);
  std::vector<int> members;
  for (int j : job) {
    int at = -1;
    for (int r = 0; r < parent.size && at < 0; ++r)
      if (parent.job_rank(r) == j) at = r;
    if (at < 0) refuse(call, "the group has a process that is not in the communicator");
    members.push_back(at);
  }
  return members;
}
}  // namespace
}  // namespace reprise::interpose

extern "C" int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_create(comm, group, out);
  REPRISE_SERVE("MPI_Comm_create", {
    Wrapped& w = Wrapped::get();
    VComm& parent = w.intra(comm, "MPI_Comm_create");
    const std::vector<int> members = reprise::interpose::members_of(parent, group, "MPI_Comm_create");
    const bool in_it = std::find(members.begin(), members.end(), parent.rank) != members.end();
    *out = w.create(parent, in_it, "MPI_Comm_create", [&] { return w.derive(parent, members, in_it); });
  });
  return MPI_SUCCESS;
}

// MPI_Comm_create_group: collective over the group alone, so the context is agreed among its ranks (on the
// parent's collective tag: their messages to each other come in the order they make their calls). A rank outside
// the group gets MPI_COMM_NULL with no message. (`tag` tells apart calls that MPI lets threads make at once; the
// program's calls here come from one thread, in order.)
extern "C" int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Comm_create_group(comm, group, tag, out);
  REPRISE_SERVE("MPI_Comm_create_group", {
    Wrapped& w = Wrapped::get();
    VComm& parent = w.intra(comm, "MPI_Comm_create_group");
    const std::vector<int> members = reprise::interpose::members_of(parent, group, "MPI_Comm_create_group");
    const auto me = std::find(members.begin(), members.end(), parent.rank);
    const bool in_it = me != members.end();
    *out = w.create(parent, in_it, "MPI_Comm_create_group", [&] {
      if (!in_it) return MPI_COMM_NULL;
      VComm among;  // the group's ranks on the parent's context: derive()'s agreement among them alone
      among.context = parent.context;
      among.size = static_cast<int>(members.size());
      among.rank = static_cast<int>(me - members.begin());
      for (int r : members) among.members.push_back(parent.job_rank(r));
      std::vector<int> all(members.size());
      std::iota(all.begin(), all.end(), 0);
      return w.derive(among, all, true);
    });
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_free(MPI_Comm* comm) {
  if (!serving() || !reprise::interpose::ours(*comm)) return PMPI_Comm_free(comm);
  REPRISE_SERVE("MPI_Comm_free", { Wrapped::get().free(comm); });
  return MPI_SUCCESS;
}

extern "C" int MPI_Comm_compare(MPI_Comm a, MPI_Comm b, int* result) {
  if (!serving() || !(reprise::interpose::ours(a) || reprise::interpose::ours(b)))
    return PMPI_Comm_compare(a, b, result);
  REPRISE_SERVE("MPI_Comm_compare", {
    Wrapped& w = Wrapped::get();
    const VComm& x = w.vcomm(a, "MPI_Comm_compare");
    const VComm& y = w.vcomm(b, "MPI_Comm_compare");
    bool same = x.size == y.size && x.remote == y.remote;  // (intercommunicators: both groups)
    for (int r = 0; same && r < x.size; ++r) same = x.job_rank(r) == y.job_rank(r);
    *result = &x == &y ? MPI_IDENT : same ? MPI_CONGRUENT : MPI_UNEQUAL;
  });
  return MPI_SUCCESS;
}

// A communicator derived here has a number of the interposition's (MPI_COMM_WORLD the library's): what a program
// hands to Fortran code or uses as a key, converted back by MPI_Comm_f2c.
extern "C" int MPI_Comm_c2f(MPI_Comm comm) {
  if (!serving() || comm == MPI_COMM_WORLD || !reprise::interpose::ours(comm)) return PMPI_Comm_c2f(comm);
  Wrapped& w = Wrapped::get();
  return w.fortran_comms().number(w.find(comm));
}

extern "C" MPI_Comm MPI_Comm_f2c(int number) {
  if (!serving()) return PMPI_Comm_f2c(number);
  Wrapped& w = Wrapped::get();
  const std::optional<VComm*> c = w.fortran_comms().find(number);
  return !c ? PMPI_Comm_f2c(number) : *c ? w.handle(*c) : MPI_COMM_NULL;
}

extern "C" int MPI_Request_c2f(MPI_Request request) {
  if (!serving() || !reprise::interpose::ours(request)) return PMPI_Request_c2f(request);
  Wrapped& w = Wrapped::get();
  return w.fortran_requests().number(w.find(request));
}

extern "C" MPI_Request MPI_Request_f2c(int number) {
  if (!serving()) return PMPI_Request_f2c(number);
  Wrapped& w = Wrapped::get();
  const std::optional<VRequest*> r = w.fortran_requests().find(number);
  return !r ? PMPI_Request_f2c(number) : *r ? w.handle(*r) : MPI_REQUEST_NULL;
}

// ---- Cartesian communicators (row-major: the last dimension varies fastest, as MPI numbers them) ----------------

namespace {

std::vector<int> coords_of(const VComm& c, int rank) {
  std::vector<int> out(c.topology.dims.size());
  for (std::size_t d = c.topology.dims.size(); d-- > 0;) {
    out[d] = rank % c.topology.dims[d];
    rank /= c.topology.dims[d];
  }
  return out;
}

// MPI_PROC_NULL: outside a non-periodic dimension.
int rank_of(const VComm& c, std::vector<int> coords) {
  int rank = 0;
  for (std::size_t d = 0; d < c.topology.dims.size(); ++d) {
    int x = coords[d];
    if (x < 0 || x >= c.topology.dims[d]) {
      if (!c.topology.periods[d]) return MPI_PROC_NULL;
      x = ((x % c.topology.dims[d]) + c.topology.dims[d]) % c.topology.dims[d];
    }
    rank = rank * c.topology.dims[d] + x;
  }
  return rank;
}

VComm& cartesian(MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().vcomm(comm, call);
  if (c.topology.kind != Topology::Kind::cartesian)
    reprise::interpose::refuse(call, "the communicator has no Cartesian topology");
  return c;
}

VComm& graph(MPI_Comm comm, const char* call) {
  VComm& c = Wrapped::get().vcomm(comm, call);
  if (c.topology.kind != Topology::Kind::graph)
    reprise::interpose::refuse(call, "the communicator has no distributed graph topology");
  return c;
}

}  // namespace

extern "C" int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                               MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_create(comm, ndims, dims, periods, reorder, out);
  REPRISE_SERVE("MPI_Cart_create", {
    Wrapped& w = Wrapped::get();
    VComm& parent = w.intra(comm, "MPI_Cart_create");
    int cells = 1;
    for (int d = 0; d < ndims; ++d) {
      if (dims[d] <= 0)
        throw reprise::UsageError("dimension " + std::to_string(d) + " has size " + std::to_string(dims[d]) +
                                  " (MPI_Dims_create fills zeros)");
      cells *= dims[d];
    }
    if (cells > parent.size)
      throw reprise::UsageError("the grid has " + std::to_string(cells) + " cells, the communicator " +
                                std::to_string(parent.size) + " ranks");
    *out = w.create(parent, parent.rank < cells, "MPI_Cart_create", [&] {
      std::vector<int> members(static_cast<std::size_t>(cells));
      std::iota(members.begin(), members.end(), 0);  // (reorder ignored: ranks keep their numbers)
      const MPI_Comm c = w.derive(parent, members, parent.rank < cells);
      if (VComm* v = w.find(c)) {
        v->topology.kind = Topology::Kind::cartesian;
        v->topology.dims.assign(dims, dims + ndims);
        v->topology.periods.assign(periods, periods + ndims);
      }
      return c;
    });
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cartdim_get(comm, ndims);
  *ndims = static_cast<int>(cartesian(comm, "MPI_Cartdim_get").topology.dims.size());
  return MPI_SUCCESS;
}

extern "C" int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_get(comm, maxdims, dims, periods, coords);
  const VComm& c = cartesian(comm, "MPI_Cart_get");
  const std::vector<int> mine = coords_of(c, c.rank);
  for (std::size_t d = 0; d < c.topology.dims.size() && static_cast<int>(d) < maxdims; ++d) {
    dims[d] = c.topology.dims[d];
    periods[d] = c.topology.periods[d];
    coords[d] = mine[d];
  }
  return MPI_SUCCESS;
}

extern "C" int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_coords(comm, rank, maxdims, coords);
  const VComm& c = cartesian(comm, "MPI_Cart_coords");
  const std::vector<int> out = coords_of(c, rank);
  for (std::size_t d = 0; d < out.size() && static_cast<int>(d) < maxdims; ++d) coords[d] = out[d];
  return MPI_SUCCESS;
}

extern "C" int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_rank(comm, coords, rank);
  const VComm& c = cartesian(comm, "MPI_Cart_rank");
  *rank = rank_of(c, std::vector<int>(coords, coords + c.topology.dims.size()));
  if (*rank == MPI_PROC_NULL)
    reprise::interpose::refuse("MPI_Cart_rank", "the coordinates are outside a non-periodic dimension");
  return MPI_SUCCESS;
}

extern "C" int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* source, int* dest) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_shift(comm, direction, disp, source, dest);
  const VComm& c = cartesian(comm, "MPI_Cart_shift");
  if (direction < 0 || direction >= static_cast<int>(c.topology.dims.size()))
    reprise::interpose::refuse("MPI_Cart_shift", "direction " + std::to_string(direction) + " is not a dimension");
  std::vector<int> at = coords_of(c, c.rank);
  at[static_cast<std::size_t>(direction)] += disp;
  *dest = rank_of(c, at);
  at[static_cast<std::size_t>(direction)] -= 2 * disp;
  *source = rank_of(c, at);
  return MPI_SUCCESS;
}

// MPI_Cart_sub: the ranks that share this rank's coordinates in the dimensions dropped, in the order of the ones
// kept (row-major: the parent's order). Every rank knows the grid, so no message decides who is in which.
extern "C" int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_sub(comm, remain_dims, out);
  REPRISE_SERVE("MPI_Cart_sub", {
    Wrapped& w = Wrapped::get();
    VComm& parent = cartesian(comm, "MPI_Cart_sub");
    *out = w.create(parent, true, "MPI_Cart_sub", [&] {
      const std::vector<int> mine = coords_of(parent, parent.rank);
      std::vector<int> members;
      for (int r = 0; r < parent.size; ++r) {
        const std::vector<int> at = coords_of(parent, r);
        bool same = true;
        for (std::size_t d = 0; d < at.size() && same; ++d) same = remain_dims[d] || at[d] == mine[d];
        if (same) members.push_back(r);
      }
      const MPI_Comm c = w.derive(parent, members, true);
      VComm* v = w.find(c);
      v->topology.kind = Topology::Kind::cartesian;
      for (std::size_t d = 0; d < parent.topology.dims.size(); ++d)
        if (remain_dims[d]) {
          v->topology.dims.push_back(parent.topology.dims[d]);
          v->topology.periods.push_back(parent.topology.periods[d]);
        }
      return c;
    });
  });
  return MPI_SUCCESS;
}

// MPI_Cart_map: where MPI_Cart_create would put this rank (ranks keep their numbers).
extern "C" int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Cart_map(comm, ndims, dims, periods, newrank);
  const VComm& c = Wrapped::get().vcomm(comm, "MPI_Cart_map");
  long cells = 1;
  for (int d = 0; d < ndims; ++d) cells *= dims[d];
  *newrank = c.rank < cells ? c.rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

extern "C" int MPI_Topo_test(MPI_Comm comm, int* status) {
  if (!serving() || !reprise::interpose::ours(comm)) return PMPI_Topo_test(comm, status);
  switch (Wrapped::get().vcomm(comm, "MPI_Topo_test").topology.kind) {
    case Topology::Kind::cartesian:
      *status = MPI_CART;
      break;
    case Topology::Kind::graph:
      *status = MPI_DIST_GRAPH;
      break;
    default:
      *status = MPI_UNDEFINED;
  }
  return MPI_SUCCESS;
}

namespace reprise::interpose {
namespace {
// A communicator of `parent`'s ranks in their order (a graph's reorder is ignored) with this rank's edges.
MPI_Comm graph_communicator(VComm& parent, Topology topology) {
  Wrapped& w = Wrapped::get();
  std::vector<int> all(static_cast<std::size_t>(parent.size));
  std::iota(all.begin(), all.end(), 0);
  const MPI_Comm c = w.derive(parent, all, true);
  topology.kind = Topology::Kind::graph;
  w.find(c)->topology = std::move(topology);
  return c;
}

void check_neighbour(const VComm& c, int r) {
  if (r < 0 || r >= c.size)
    throw UsageError("neighbour " + std::to_string(r) + " is not a rank of the communicator (" +
                     std::to_string(c.size) + " ranks)");
}
}  // namespace
}  // namespace reprise::interpose

// MPI_Dist_graph_create_adjacent: every rank gives its own edges, so the communicator is the parent's ranks in
// their order (reorder ignored) with this rank's neighbours; the neighbourhood collectives use them
// (collectives.cpp).
extern "C" int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                              const int sourceweights[], int outdegree, const int destinations[],
                                              const int destweights[], MPI_Info info, int reorder, MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm))
    return PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations, destweights,
                                           info, reorder, out);
  REPRISE_SERVE("MPI_Dist_graph_create_adjacent", {
    Wrapped& w = Wrapped::get();
    VComm& parent = w.intra(comm, "MPI_Dist_graph_create_adjacent");
    if (indegree < 0 || outdegree < 0) throw reprise::UsageError("a negative degree");
    for (int i = 0; i < indegree + outdegree; ++i)
      reprise::interpose::check_neighbour(parent, i < indegree ? sources[i] : destinations[i - indegree]);
    *out = w.create(parent, true, "MPI_Dist_graph_create_adjacent", [&] {
      Topology t;
      t.sources.assign(sources, sources + indegree);
      t.destinations.assign(destinations, destinations + outdegree);
      t.weighted = sourceweights != MPI_UNWEIGHTED;
      if (t.weighted) {
        if (indegree) t.source_weights.assign(sourceweights, sourceweights + indegree);
        if (outdegree) t.destination_weights.assign(destweights, destweights + outdegree);
      }
      return reprise::interpose::graph_communicator(parent, std::move(t));
    });
  });
  return MPI_SUCCESS;
}

// MPI_Dist_graph_create: a rank may give any edges, so each edge (s, d) goes to s as an out-edge and to d as an
// in-edge by a sparse exchange (route(): log2(size) rounds, nothing held per rank of the communicator, so a rank
// ends with its own edges only, as with the adjacent form). A rank's edges come in the order of the rank that gave
// them, then of its list (MPI leaves the order to the library; Open MPI's may differ).
extern "C" int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                                     const int destinations[], const int weights[], MPI_Info info, int reorder,
                                     MPI_Comm* out) {
  if (!serving() || !reprise::interpose::ours(comm))
    return PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, out);
  REPRISE_SERVE("MPI_Dist_graph_create", {
    Wrapped& w = Wrapped::get();
    VComm& parent = w.intra(comm, "MPI_Dist_graph_create");
    if (n < 0) throw reprise::UsageError("a negative number of sources");
    const bool weighted = weights != MPI_UNWEIGHTED;
    // A record: the rank it is for, in (0) or out (1), the other end, the weight, the rank that gave it, its index.
    constexpr std::size_t kWords = 6;
    std::vector<std::int64_t> records;
    for (int i = 0, edge = 0; i < n; ++i) {
      reprise::interpose::check_neighbour(parent, sources[i]);
      if (degrees[i] < 0) throw reprise::UsageError("a negative degree");
      for (int k = 0; k < degrees[i]; ++k, ++edge) {
        const int s = sources[i], d = destinations[edge];
        reprise::interpose::check_neighbour(parent, d);
        const std::int64_t weight = weighted ? weights[edge] : 0;
        records.insert(records.end(), {s, 1, d, weight, parent.rank, edge});
        records.insert(records.end(), {d, 0, s, weight, parent.rank, edge});
      }
    }
    *out = w.create(parent, true, "MPI_Dist_graph_create", [&] {
      const std::vector<std::int64_t> mine = reprise::interpose::route(parent, std::move(records), kWords);
      std::vector<const std::int64_t*> edges;
      for (std::size_t i = 0; i + kWords <= mine.size(); i += kWords) edges.push_back(mine.data() + i);
      std::sort(edges.begin(), edges.end(), [](const std::int64_t* a, const std::int64_t* b) {
        return std::tie(a[4], a[5], a[1]) < std::tie(b[4], b[5], b[1]);
      });
      Topology t;
      t.weighted = weighted;
      for (const std::int64_t* e : edges) {
        (e[1] ? t.destinations : t.sources).push_back(static_cast<int>(e[2]));
        if (weighted) (e[1] ? t.destination_weights : t.source_weights).push_back(static_cast<int>(e[3]));
      }
      return reprise::interpose::graph_communicator(parent, std::move(t));
    });
  });
  return MPI_SUCCESS;
}

extern "C" int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
  if (!serving() || !reprise::interpose::ours(comm))
    return PMPI_Dist_graph_neighbors_count(comm, indegree, outdegree, weighted);
  const VComm& c = graph(comm, "MPI_Dist_graph_neighbors_count");
  *indegree = static_cast<int>(c.topology.sources.size());
  *outdegree = static_cast<int>(c.topology.destinations.size());
  *weighted = c.topology.weighted ? 1 : 0;
  return MPI_SUCCESS;
}

extern "C" int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[],
                                        int maxoutdegree, int destinations[], int destweights[]) {
  if (!serving() || !reprise::interpose::ours(comm))
    return PMPI_Dist_graph_neighbors(comm, maxindegree, sources, sourceweights, maxoutdegree, destinations,
                                     destweights);
  const VComm& c = graph(comm, "MPI_Dist_graph_neighbors");
  const bool weights = c.topology.weighted && sourceweights != MPI_UNWEIGHTED;
  for (std::size_t i = 0; i < c.topology.sources.size() && static_cast<int>(i) < maxindegree; ++i) {
    sources[i] = c.topology.sources[i];
    if (weights) sourceweights[i] = c.topology.source_weights[i];
  }
  for (std::size_t i = 0; i < c.topology.destinations.size() && static_cast<int>(i) < maxoutdegree; ++i) {
    destinations[i] = c.topology.destinations[i];
    if (weights && destweights != MPI_UNWEIGHTED) destweights[i] = c.topology.destination_weights[i];
  }
  return MPI_SUCCESS;
}

void reprise::interpose::VComm::neighbours(std::vector<int>* in, std::vector<int>* out) const {
  in->clear();
  out->clear();
  if (topology.kind == Topology::Kind::graph) {
    *in = topology.sources;
    *out = topology.destinations;
    return;
  }
  std::vector<int> at = coords_of(*this, rank);
  for (std::size_t d = 0; d < topology.dims.size(); ++d) {
    for (int step : {-1, +1}) {
      at[d] += step;
      in->push_back(rank_of(*this, at));
      at[d] -= step;
    }
  }
  *out = *in;
}
