#include "sim/simulator.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "protocol/coordinator.hpp"
#include "protocol/job_floor.hpp"
#include "protocol/process.hpp"
#include "protocol/recovery_plan.hpp"
#include "protocol/restart_exchange.hpp"
#include "protocol/topology.hpp"
#include "reprise/errors.hpp"

namespace reprise::sim {

namespace {

using protocol::Capture;
using protocol::Process;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t H(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  return mix(mix(mix(a) ^ b) ^ c);
}

// ---- patterns: what a rank sends and receives in a step, as rounds (sends, then named receives in order) --------

struct Round {
  std::vector<int> out, in;
  std::uint64_t bytes = 0;
};

// a x b with a <= b, a the largest divisor of n not above sqrt(n)
std::pair<int, int> grid2(int n) {
  int a = static_cast<int>(std::sqrt(static_cast<double>(n)));
  while (a > 1 && n % a) --a;
  return {a, n / a};
}

class Program {
 public:
  explicit Program(const Options& o) : o_(o), n_(o.ranks) {
    if (o.pattern == Pattern::Stencil3d) {
      int a = static_cast<int>(std::cbrt(static_cast<double>(n_)) + 1e-9);
      while (a > 1 && n_ % a) --a;
      const auto [b, c] = grid2(n_ / a);
      dims_ = {c, b, a};
    } else {
      const auto [a, b] = grid2(n_);
      dims_ = {b, a, 1};  // x (fastest) is the longer side
    }
  }

  /// The rounds of rank r in step s (the same for every step but cholesky's).
  void rounds(int r, int s, std::vector<Round>& out) const {
    out.clear();
    switch (o_.pattern) {
      case Pattern::Stencil2d:
      case Pattern::Stencil3d:
        out.push_back(halo(r));
        break;
      case Pattern::Cg:
        out.push_back(halo(r));
        for (long k = 1; k < n_; k <<= 1) {  // dissemination allreduce: ceil(log2 N) rounds of 8 bytes
          Round d;
          d.out.push_back(static_cast<int>((r + k) % n_));
          d.in.push_back(static_cast<int>((r - k % n_ + n_) % n_));
          d.bytes = 8;
          out.push_back(std::move(d));
        }
        break;
      case Pattern::Cholesky: {  // a P x Q grid; step s: column s%Q broadcasts along rows, row s%P along columns
        const int Q = dims_[0], P = dims_[1], i = r / Q, j = r % Q, c = s % Q, rr = s % P;
        Round row, col;
        row.bytes = col.bytes = o_.message_bytes;
        if (j == c) {
          for (int jj = 0; jj < Q; ++jj)
            if (jj != c) row.out.push_back(i * Q + jj);
        } else {
          row.in.push_back(i * Q + c);
        }
        if (i == rr) {
          for (int ii = 0; ii < P; ++ii)
            if (ii != rr) col.out.push_back(ii * Q + j);
        } else {
          col.in.push_back(rr * Q + j);
        }
        out.push_back(std::move(row));
        out.push_back(std::move(col));
        break;
      }
      case Pattern::Alltoall: {
        Round a;
        a.bytes = o_.message_bytes;
        for (int k = 1; k < n_; ++k) {
          a.out.push_back((r + k) % n_);
          a.in.push_back((r - k + n_) % n_);
        }
        out.push_back(std::move(a));
        break;
      }
    }
  }

 private:
  Round halo(int r) const {
    Round h;
    h.bytes = o_.message_bytes;
    const int X = dims_[0], Y = dims_[1], Z = dims_[2];
    const int x = r % X, y = (r / X) % Y, z = r / (X * Y);
    auto add = [&](int dx, int dy, int dz) {
      const int a = x + dx, b = y + dy, c = z + dz;
      if (a < 0 || a >= X || b < 0 || b >= Y || c < 0 || c >= Z) return;
      h.out.push_back((c * Y + b) * X + a);
    };
    add(-1, 0, 0), add(1, 0, 0), add(0, -1, 0), add(0, 1, 0);
    if (Z > 1) add(0, 0, -1), add(0, 0, 1);
    h.in = h.out;
    return h;
  }

  const Options& o_;
  int n_;
  std::array<int, 3> dims_{};
};

// ---- the simulation --------------------------------------------------------------------------------------------

struct Op {
  char kind;  // 'K' checkpoint, 'W' compute, 'S' send, 'R' named receive
  int peer = -1;
  std::uint64_t bytes = 0;
};

struct Msg {
  protocol::Header h;
  std::uint64_t content = 0;
};

struct RankCapture {
  int step = 0;
  std::size_t pc = 0;
  std::uint64_t st = 0;
  std::shared_ptr<const Capture> core;
};

struct Rank {
  std::unique_ptr<Process> core;
  int step = 0;
  std::size_t pc = 0;
  std::vector<Op> ops;  // this step's
  std::uint64_t st = 0;
  std::map<int, std::deque<Msg>> inbox;
  std::map<int, protocol::View> views_told;
  // Captures kept until their views are announced (the newest announced one stays), as CommState keeps them.
  std::map<std::uint64_t, std::shared_ptr<const Capture>> captures;
  std::optional<std::uint64_t> announced, floor;  // floor: the job floor last received (--job-floor)
  std::uint32_t inc = 0;
  bool sched = false, done = false, dead = false, at_barrier = false;
  double busy_until = 0;  // computing, or in a checkpoint's app-visible part
  // counts
  std::size_t ctl_checkpoint = 0, checkpoints = 0, ctl_recovery = 0;
  // Steps 6-7 (CommState): the items held above the restart floor, and the floor.
  std::vector<protocol::Coordinator::Item> held;
  std::uint64_t restart_floor = 0;
};

enum class Kind : std::uint8_t { Run, Message, View, Commit, RestartFloor, Notify, Recover, FloorReport, Floor };

struct Event {
  double t;
  std::uint64_t n;
  Kind kind;
  int a = -1, b = -1;  // Message/View/RestartFloor: sender, receiver; Run: rank; Commit: group
  std::uint32_t inc_a = 0, inc_b = 0;
  std::uint64_t x = 0, y = 0, z = 0, w = 0;  // Message: seq, phase, content; View: delivered, sent; Commit: v, gep
  bool operator<(const Event& o) const { return std::tie(t, n) > std::tie(o.t, o.n); }
};

class Engine {
 public:
  Engine(const Options& o, bool with_failures)
      : o_(o),
        prog_(o),
        N(o.ranks),
        groups_(make_groups(o)),
        failures_(with_failures ? o.failures : std::vector<Failure>{}) {
    for (int r = 0; r < N; ++r) {
      const auto g = static_cast<std::size_t>(groups_(r));
      if (g >= members_.size()) members_.resize(g + 1);
      members_[g].push_back(r);
    }
    G = static_cast<int>(members_.size());
    floor_nodes_.resize(members_.size());
    for (int g = 0; g < G; ++g) floor_nodes_[static_cast<std::size_t>(g)].reset(g, G);
    gep_.assign(members_.size(), 0);
    committed_.resize(members_.size());
    link_free_.assign(static_cast<std::size_t>((N + o.ranks_per_node - 1) / o.ranks_per_node), 0.0);
    copy_free_.assign(static_cast<std::size_t>(N), 0.0);
    protocol::LayoutSpec spec;
    for (std::size_t r = 0; r < o.group_of.size(); ++r) spec.groups += (r ? "," : "") + std::to_string(o.group_of[r]);
    layout_ = protocol::make_regular_layout(N, o.ranks_per_node, spec);
    P.resize(static_cast<std::size_t>(N));
    // Log segments of 4 KiB: the simulated payloads are 8 bytes (the model's bytes are counted apart).
    const logging::LogOptions log{4096, 0, 0};
    for (int r = 0; r < N; ++r) {
      Rank& p = P[static_cast<std::size_t>(r)];
      p.core = std::make_unique<Process>(r, groups_, log);
      p.st = H(static_cast<std::uint64_t>(r), 12345);
      load_step(p, 0);
    }
    for (std::size_t g = 0; g < members_.size(); ++g) {
      auto caps = std::make_shared<std::vector<RankCapture>>();
      for (int r : members_[g]) caps->push_back(capture(P[static_cast<std::size_t>(r)]));
      committed_[g] = {0, caps};
    }
    for (int r = 0; r < N; ++r) sched_run(r, 0);
  }

  void run() {
    while (!heap_.empty()) {
      const Event e = heap_.top();
      heap_.pop();
      t_ = e.t;
      ++events_;
      switch (e.kind) {
        case Kind::Run:
          on_run(e);
          break;
        case Kind::Message:
          on_message(e);
          break;
        case Kind::View:
          on_view(e);
          break;
        case Kind::Commit:
          on_commit(e);
          break;
        case Kind::RestartFloor:
          on_restart_floor(e);
          break;
        case Kind::Notify:
          on_notify(e);
          break;
        case Kind::Recover:
          on_recover();
          break;
        case Kind::FloorReport:
          on_floor_report(e);
          break;
        case Kind::Floor:
          on_floor(e);
          break;
      }
    }
    for (int r = 0; r < N; ++r) sample(P[static_cast<std::size_t>(r)]);
  }

  std::vector<std::string> hangs() const {
    std::vector<std::string> out;
    int stuck = 0;
    std::string list;
    for (const Rank& p : P)
      if (!p.done) {
        if (++stuck <= 8)
          list += " rank " + std::to_string(p.core->id()) + " at step " + std::to_string(p.step) + " op " +
                  std::to_string(p.pc) +
                  (p.core->blocked()        ? " (blocked)"
                   : p.core->send_blocked() ? " (send-blocked)"
                                            : "");
      }
    if (stuck && !stopped_) out.push_back("hang: " + std::to_string(stuck) + " ranks did not finish:" + list);
    return out;
  }

  const Options& o_;
  Program prog_;
  int N, G = 0;
  protocol::GroupMap groups_;
  std::vector<Failure> failures_;
  std::vector<std::vector<int>> members_;
  std::vector<Rank> P;
  double t_ = 0;
  std::uint64_t events_ = 0, cnt_ = 0;
  // measured
  std::size_t state_max_ = 0, log_entries_max_ = 0;
  double sent_bytes_ = 0, logged_bytes_ = 0;
  std::size_t replayed_ = 0, orphans_ = 0, duplicates_ = 0, rolled_back_ = 0, coordinator_msgs_ = 0;
  int failed_ = 0, recoveries_ = 0;
  std::vector<std::string> problems_;
  std::map<std::string, int> notes_;

 private:
  static protocol::GroupMap make_groups(const Options& o) {
    if (o.group_of.empty()) return protocol::GroupMap::blocks(static_cast<std::size_t>(o.ranks), o.ranks_per_node);
    return protocol::GroupMap(o.group_of);
  }

  void note(const std::string& kind, const std::string& what) {
    if (notes_[kind]++ == 0) problems_.push_back(kind + ": " + what);
  }

  void push(double t, Event e) {
    e.t = t;
    e.n = cnt_++;
    heap_.push(e);
  }

  void sched_run(int r, double dt) {
    Rank& p = P[static_cast<std::size_t>(r)];
    if (p.sched || p.dead) return;
    p.sched = true;
    Event e{};
    e.kind = Kind::Run;
    e.a = r;
    e.inc_a = p.inc;
    push(t_ + dt, e);
  }

  void load_step(Rank& p, int s) {
    p.step = s;
    p.pc = 0;
    p.ops.clear();
    if (s >= o_.steps) return;
    if (s > 0 && o_.checkpoint_every > 0 && s % o_.checkpoint_every == 0) p.ops.push_back(Op{'K', -1, 0});
    p.ops.push_back(Op{'W', -1, 0});
    prog_.rounds(p.core->id(), s, rounds_);
    for (const Round& rd : rounds_) {
      for (int d : rd.out) p.ops.push_back(Op{'S', d, rd.bytes});
      for (int q : rd.in) p.ops.push_back(Op{'R', q, rd.bytes});
    }
  }

  RankCapture capture(Rank& p) {
    return RankCapture{p.step, p.pc, p.st, std::make_shared<const Capture>(p.core->capture())};
  }

  void sample(const Rank& p) {
    const std::size_t views = p.views_told.size() * (4 * sizeof(void*) + sizeof(std::pair<const int, protocol::View>));
    std::size_t kept = p.captures.size() * sizeof(std::pair<const std::uint64_t, std::shared_ptr<const Capture>>);
    const int g = groups_(p.core->id());
    if (o_.job_floor && leader(g) == p.core->id()) kept += floor_nodes_[static_cast<std::size_t>(g)].state_bytes();
    state_max_ = std::max(state_max_, p.core->state_bytes() + views + kept);
    log_entries_max_ = std::max(log_entries_max_, p.core->log().live_entries());
  }

  int node(int r) const { return r / o_.ranks_per_node; }

  // The network: a node's link carries its ranks' sends one after the other, and a rank's copies within the node
  // go one after the other too; with one latency per kind, every channel is FIFO.
  double arrival(int a, int b, std::uint64_t bytes) {
    const bool intra = node(a) == node(b);
    double& free = intra ? copy_free_[static_cast<std::size_t>(a)] : link_free_[static_cast<std::size_t>(node(a))];
    if (intra) {
      free = std::max(t_, free) + static_cast<double>(bytes) / o_.intra_bandwidth;
      return free + o_.intra_latency_seconds;
    }
    const double start = std::max(t_, free);
    free = start + static_cast<double>(bytes) / o_.bandwidth;
    return free + o_.latency_seconds;
  }

  void transmit(int a, int b, const protocol::Header& h, std::uint64_t content, std::uint64_t bytes) {
    Event e{};
    e.kind = Kind::Message;
    e.a = a;
    e.b = b;
    e.inc_a = P[static_cast<std::size_t>(a)].inc;
    e.inc_b = P[static_cast<std::size_t>(b)].inc;
    e.x = h.seq;
    e.y = h.phase;
    e.z = content;
    e.w = bytes;
    push(arrival(a, b, bytes), e);
  }

  void control(Kind k, int a, int b, std::uint64_t x, std::uint64_t y) {
    Event e{};
    e.kind = k;
    e.a = a;
    e.b = b;
    e.inc_a = epoch_;
    e.x = x;
    e.y = y;
    push(t_ + o_.latency_seconds, e);
  }

  // ---- the application ----
  void on_run(const Event& e) {
    Rank& p = P[static_cast<std::size_t>(e.a)];
    if (e.inc_a != p.inc || p.dead) return;
    p.sched = false;
    if (p.at_barrier) return;  // the barrier's completion runs it
    if (t_ < p.busy_until) {
      sched_run(e.a, p.busy_until - t_);
      return;
    }
    while (!p.done && !p.core->blocked()) {
      if (p.pc >= p.ops.size()) {
        if (p.step + 1 >= o_.steps) {
          p.done = true;
          makespan_ = std::max(makespan_, t_);
          return;
        }
        load_step(p, p.step + 1);
        continue;
      }
      if (p.pc == 0 && strike(p)) return;
      const Op op = p.ops[p.pc];
      if (op.kind == 'W') {
        ++p.pc;
        const double jitter = 0.9 + 0.2 *
                                        static_cast<double>(H(o_.seed, static_cast<std::uint64_t>(p.core->id()),
                                                              static_cast<std::uint64_t>(p.step)) %
                                                            1000) /
                                        1000.0;
        p.busy_until = t_ + o_.compute_seconds * jitter;
        sched_run(p.core->id(), p.busy_until - t_);
        return;
      }
      if (op.kind == 'S') {
        if (p.core->send_blocked()) return;  // released by the coordinator
        send(p, op.peer, op.bytes);
      } else if (op.kind == 'R') {
        if (!receive(p, op.peer)) return;  // a message's arrival runs it again
      } else {
        arrive_at_barrier(p);
        return;
      }
      ++p.pc;
    }
  }

  bool strike(Rank& p) {
    const int r = p.core->id();
    for (auto it = failures_.begin(); it != failures_.end(); ++it)
      if (it->rank == r && it->step == p.step) {
        failures_.erase(it);
        p.dead = true;
        ++p.inc;
        ++failed_;
        dying_.insert(r);
        Event e{};
        e.kind = Kind::Recover;
        push(t_ + o_.detect_seconds, e);
        return true;
      }
    return false;
  }

  void send(Rank& p, int d, std::uint64_t bytes) {
    const int me = p.core->id();
    const std::uint64_t content =
        H(p.st, static_cast<std::uint64_t>(p.step) << 20 | p.pc, static_cast<std::uint64_t>(d));
    p.st = H(p.st, content);
    // The model's bytes travel as the tag (log entries and queued messages keep it for replays).
    const auto tag = static_cast<std::int32_t>(bytes);
    const Process::Send s = p.core->send(d, tag, &content, sizeof content);
    sent_bytes_ += static_cast<double>(bytes);
    if (s.logged) logged_bytes_ += static_cast<double>(bytes);
    if (s.orphan) {  // the receiver kept it: notify the coordinator instead
      ++orphans_;
      if (const auto it = outstanding_.find({me, d, s.header.seq}); it != outstanding_.end()) {
        outstanding_phases_.erase(outstanding_phases_.find(it->second));
        outstanding_.erase(it);
      }
      ++p.ctl_recovery;
      control(Kind::Notify, me, -1, s.header.phase, 0);
      return;
    }
    if (s.duplicate) {
      ++duplicates_;
      return;
    }
    if (!p.core->has_queue(d) && !p.core->new_send_held(d, s.header.phase)) {
      check_release_rule(p, d, s.header, false);
      transmit(me, d, s.header, content, bytes);
      return;
    }
    p.core->queue_new(d, s.header, tag, &content, sizeof content);
    flush(p, d);
  }

  void flush(Rank& p, int d) {
    const int me = p.core->id();
    for (const auto& m : p.core->ready(d)) {
      std::uint64_t content = 0;
      std::memcpy(&content, m.payload.data(), sizeof content);
      if (m.replay) {
        ++replayed_;
        check_release_rule(p, d, m.header, true);
        if (o_.sabotage == Options::Sabotage::DropReplays) continue;
      } else {
        check_release_rule(p, d, m.header, false);
      }
      transmit(me, d, m.header, content, static_cast<std::uint64_t>(m.tag));
    }
  }

  // The release rule (PROTOCOL.md): no replay goes out while an orphan of a lower phase is outstanding; nor a new
  // message to another group (Process::limit_new_sends: a survivor that computed and received while orphans were
  // outstanding may have a phase above them).
  void check_release_rule(const Rank& p, int d, const protocol::Header& h, bool replay) {
    if (outstanding_phases_.empty() || *outstanding_phases_.begin() >= h.phase || (!replay && !p.core->inter(d)))
      return;
    note("release-rule", "rank " + std::to_string(p.core->id()) + (replay ? " replays #" : " sends new message #") +
                             std::to_string(h.seq) + " to rank " + std::to_string(d) + " at phase " +
                             std::to_string(h.phase) + " while an orphan at phase " +
                             std::to_string(*outstanding_phases_.begin()) + " is outstanding");
  }

  bool receive(Rank& p, int src) {
    auto it = p.inbox.find(src);
    if (it == p.inbox.end()) return false;
    auto& q = it->second;
    while (!q.empty() && p.core->arrival(src, q.front().h) == Process::Arrival::Duplicate) q.pop_front();
    if (q.empty()) {
      p.inbox.erase(it);
      return false;
    }
    const Msg m = q.front();
    if (p.core->arrival(src, m.h) == Process::Arrival::Early) {
      note("gap", "rank " + std::to_string(p.core->id()) + " got #" + std::to_string(m.h.seq) + " from rank " +
                      std::to_string(src) + " after #" + std::to_string(p.core->delivered(src)));
      return false;
    }
    q.pop_front();
    if (q.empty()) p.inbox.erase(it);
    p.core->deliver(src, m.h);
    p.st = H(p.st, static_cast<std::uint64_t>(src), m.content);
    return true;
  }

  void on_message(const Event& e) {
    Rank& b = P[static_cast<std::size_t>(e.b)];
    if (e.inc_a != P[static_cast<std::size_t>(e.a)].inc || e.inc_b != b.inc || b.dead) return;  // lost in a repair
    b.inbox[e.a].push_back(Msg{protocol::Header{e.x, e.y, groups_(e.a)}, e.z});
    if (!b.done) sched_run(e.b, 0);
  }

  // ---- group checkpoints ----
  void arrive_at_barrier(Rank& p) {
    const int g = groups_(p.core->id());
    auto& waiting = barrier_[{g, p.step}];
    waiting.push_back(p.core->id());
    p.at_barrier = true;
    if (waiting.size() < members_[static_cast<std::size_t>(g)].size()) return;
    barrier_.erase({g, p.step});
    const auto& mem = members_[static_cast<std::size_t>(g)];
    std::uint64_t mx = 0;
    for (int i : mem) mx = std::max(mx, P[static_cast<std::size_t>(i)].core->phase());
    // The group's agreement (phase maximum, channel check) by recursive doubling; the version goes to the buddy and
    // comes back acknowledged.
    const auto rounds = static_cast<std::size_t>(std::ceil(std::log2(static_cast<double>(mem.size()))));
    const double agree = static_cast<double>(2 * rounds) * o_.latency_seconds;
    const double visible = static_cast<double>(o_.state_bytes) / o_.checkpoint_bandwidth;
    const double ship = static_cast<double>(o_.state_bytes) / o_.bandwidth + 2 * o_.latency_seconds;
    auto caps = std::make_shared<std::vector<RankCapture>>();
    for (int i : mem) {
      Rank& m = P[static_cast<std::size_t>(i)];
      m.core->raise_phase(mx);
      ++m.pc;
      sample(m);
      caps->push_back(capture(m));
      m.captures[static_cast<std::uint64_t>(p.step)] = caps->back().core;
      m.ctl_checkpoint += 3 * rounds + 2;
      ++m.checkpoints;
      m.at_barrier = false;
      m.busy_until = t_ + agree + visible;
      sched_run(i, agree + visible);
    }
    const auto version = static_cast<std::uint64_t>(p.step);
    pending_[{g, version}] = caps;
    Event c{};
    c.kind = Kind::Commit;
    c.a = g;
    c.x = version;
    c.y = gep_[static_cast<std::size_t>(g)];
    push(t_ + agree + visible + ship, c);
  }

  void on_commit(const Event& e) {
    const auto g = static_cast<std::size_t>(e.a);
    const auto it = pending_.find({e.a, e.x});
    if (it == pending_.end()) return;
    const auto caps = it->second;
    pending_.erase(it);
    if (e.y != gep_[g] || e.x <= committed_[g].first) return;  // rolled back meanwhile, or an older version
    committed_[g] = {e.x, caps};
    for (int i : members_[g]) committed_view(i);
    if (o_.job_floor)  // the commit enters the groups' reduction tree at its first rank (GroupCommit::report_commit)
      floor_step(e.a, floor_nodes_[g].own(e.x), false);
  }

  // CommState::committed: the views of the group's newest commit, or with a job floor of the newest version at or
  // below the floor (a group's views must not release log entries a coordinated rollback to the floor needs).
  void committed_view(int i) {
    Rank& m = P[static_cast<std::size_t>(i)];
    const std::uint64_t v = committed_[static_cast<std::size_t>(groups_(i))].first;
    if (!o_.job_floor)
      announce(i, v);
    else if (m.floor)
      announce(i, std::min(v, *m.floor));
  }

  // CommState::announce: the views of the newest capture at or below `through`, to the peers whose view changed.
  void announce(int i, std::uint64_t through) {
    Rank& m = P[static_cast<std::size_t>(i)];
    auto it = m.captures.upper_bound(through);
    if (it == m.captures.begin()) return;
    --it;
    if (m.announced && it->first <= *m.announced) return;
    for (const auto& [q, ch] : it->second->channels) {
      if (groups_(q) == groups_(i) || (ch.delivered == 0 && ch.sent == 0)) continue;
      auto& told = m.views_told[q];
      if (told.delivered == ch.delivered && told.sent == ch.sent) continue;
      told = protocol::View{ch.delivered, ch.sent};
      ++m.ctl_checkpoint;
      Event v{};
      v.kind = Kind::View;
      v.a = i;
      v.b = q;
      v.inc_a = m.inc;
      v.inc_b = P[static_cast<std::size_t>(q)].inc;
      v.x = ch.delivered;
      v.y = ch.sent;
      push(t_ + (node(i) == node(q) ? o_.intra_latency_seconds : o_.latency_seconds), v);
    }
    m.announced = it->first;
    m.captures.erase(m.captures.begin(), it);
  }

  // ---- the job floor (--job-floor): each group's first rank keeps a protocol::FloorNode of the groups' reduction
  // tree; the floor goes down protocol::floor_children from rank 0
  int leader(int g) const { return members_[static_cast<std::size_t>(g)].front(); }

  // What a report made group g's node do (GroupCommit::floor_out): a report to the parent group's first rank, or at
  // the root a floor that rose.
  void floor_step(int g, const protocol::FloorNode::Out& out, bool recovery) {
    if (out.up) {
      Rank& p = P[static_cast<std::size_t>(leader(g))];
      ++(recovery ? p.ctl_recovery : p.ctl_checkpoint);
      const int parent = protocol::floor_parent_group(g);
      Event r{};
      r.kind = Kind::FloorReport;
      r.a = g;
      r.b = parent;
      r.inc_a = epoch_;
      r.x = out.up->version;
      r.y = out.seq;
      r.z = out.up->complete ? 1 : 0;
      r.w = static_cast<std::uint64_t>(out.up->group);
      push(t_ + (node(leader(g)) == node(leader(parent)) ? o_.intra_latency_seconds : o_.latency_seconds), r);
    }
    if (out.floor) floor_at(0, *out.floor);
  }

  void on_floor_report(const Event& e) {
    Rank& p = P[static_cast<std::size_t>(leader(e.b))];
    if (e.inc_a != epoch_ || p.dead) return;  // an older tree's (every group reports again after the repair)
    ++p.ctl_checkpoint;
    const protocol::FloorSummary s{e.z != 0, e.x, static_cast<int>(e.w)};
    floor_step(e.b, floor_nodes_[static_cast<std::size_t>(e.b)].report(e.a, e.y, s), false);
  }

  void floor_at(int r, std::uint64_t f) {
    Rank& p = P[static_cast<std::size_t>(r)];
    if (!p.floor || f > *p.floor) p.floor = f;
    committed_view(r);
    for (int c : protocol::floor_children(r, N)) {
      ++p.ctl_checkpoint;
      Event d{};
      d.kind = Kind::Floor;
      d.a = r;
      d.b = c;
      d.inc_b = P[static_cast<std::size_t>(c)].inc;
      d.x = f;
      push(t_ + (node(r) == node(c) ? o_.intra_latency_seconds : o_.latency_seconds), d);
    }
  }

  void on_floor(const Event& e) {
    Rank& p = P[static_cast<std::size_t>(e.b)];
    if (e.inc_b != p.inc || p.dead) return;  // its subtree keeps an older floor (more versions, never fewer)
    ++p.ctl_checkpoint;
    floor_at(e.b, e.x);
  }

  void on_view(const Event& e) {
    Rank& b = P[static_cast<std::size_t>(e.b)];
    if (e.inc_a != P[static_cast<std::size_t>(e.a)].inc || e.inc_b != b.inc || b.dead) return;
    b.core->apply_view(e.a, protocol::View{e.x, e.y});
  }

  // ---- recovery (PROTOCOL.md steps 1-8) ----
  void on_recover() {
    if (dying_.empty()) return;  // handled with an earlier failure's event
    const std::vector<int> failed(dying_.begin(), dying_.end());
    dying_.clear();
    outstanding_.clear();  // the new recovery recomputes them
    outstanding_phases_.clear();
    // 2. The recovery plan every survivor computes (protocol::plan_group_recovery) from what the survivors hold: a
    // dead rank's memory is lost, its buddy's copy of its group's committed version is not; groups with a member
    // still re-executing after an earlier recovery roll back again (as src/mpi/recovery.cpp asks). As there, only
    // the records of the ranks of the groups that roll back are gathered.
    std::vector<char> dead(static_cast<std::size_t>(N), 0);
    for (int f : failed) dead[static_cast<std::size_t>(f)] = 1;
    std::set<int> also;
    for (int r = 0; r < N; ++r)
      if (!dead[static_cast<std::size_t>(r)] && P[static_cast<std::size_t>(r)].core->reexecuting())
        also.insert(groups_(r));
    protocol::Holdings holdings;
    for (int g : protocol::rolled_back_groups(layout_, failed, also))
      for (int r : members_[static_cast<std::size_t>(g)]) {
        const auto i = static_cast<std::size_t>(r);
        const std::uint64_t v = committed_[static_cast<std::size_t>(groups_(r))].first;
        if (v == 0) continue;  // nothing committed: the group starts over
        const protocol::VersionRecord rec{v, v, true};
        if (!dead[i]) holdings[r].own.push_back(rec);
        const int buddy = layout_.buddy_of(r);
        if (buddy >= 0 && !dead[static_cast<std::size_t>(buddy)]) holdings[r].at_buddy.push_back(rec);
      }
    protocol::RecoveryPlan plan;
    try {
      plan = protocol::plan_group_recovery(layout_, failed, holdings, false, also);
    } catch (const UnrecoverableFailure& e) {
      note("unrecoverable", e.what());  // the job ends here, with this error at every survivor
      heap_ = {};
      stopped_ = true;
      return;
    }
    std::set<int> Rg;
    std::vector<char> inR(static_cast<std::size_t>(N), 0);
    const std::size_t nR = plan.rolled_back.size();
    for (int r : plan.rolled_back) {
      const auto g = static_cast<std::size_t>(groups_(r));
      Rg.insert(static_cast<int>(g));
      inR[static_cast<std::size_t>(r)] = 1;
      const std::uint64_t want = committed_[g].first, got = plan.version_of[static_cast<std::size_t>(r)];
      if (plan.starts_over[static_cast<std::size_t>(r)] ? want != 0 : got != want)
        note("plan", "rank " + std::to_string(r) + " restores version " + std::to_string(got) +
                         " but its group committed " + std::to_string(want));
    }
    ++epoch_;
    ++recoveries_;
    rolled_back_ += nR;
    // Who exchanges with whom: the inter-group peers of each rank (either direction), before the restore.
    std::vector<std::vector<int>> peers(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i)
      for (const auto& [q, ch] : P[static_cast<std::size_t>(i)].core->channels())
        if (groups_(q) != groups_(i)) {
          peers[static_cast<std::size_t>(i)].push_back(q);
          peers[static_cast<std::size_t>(q)].push_back(i);
        }
    for (auto& v : peers) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    // 1. Repair: what was in flight to or from R is lost (incarnations), arrived but undelivered messages of R too.
    for (int g : Rg) {
      ++gep_[static_cast<std::size_t>(g)];
      for (auto it = barrier_.begin(); it != barrier_.end();)
        it = it->first.first == g ? barrier_.erase(it) : std::next(it);
    }
    for (int r = 0; r < N; ++r) {
      if (!inR[static_cast<std::size_t>(r)]) continue;
      for (const auto& [q, ch] : P[static_cast<std::size_t>(r)].core->channels())
        P[static_cast<std::size_t>(q)].inbox.erase(r);
    }
    if (o_.sabotage == Options::Sabotage::RepairDropsSurvivorTraffic)
      for (Rank& p : P) {
        p.inbox.clear();
        ++p.inc;
        p.sched = false;
      }
    // 3. R restores its groups' committed captures.
    for (int g : Rg) {
      const auto& caps = *committed_[static_cast<std::size_t>(g)].second;
      const auto& mem = members_[static_cast<std::size_t>(g)];
      for (std::size_t k = 0; k < mem.size(); ++k) {
        Rank& p = P[static_cast<std::size_t>(mem[k])];
        const RankCapture& c = caps[k];
        ++p.inc;
        p.sched = p.done = p.dead = p.at_barrier = false;
        p.busy_until = t_;
        p.inbox.clear();
        // CommState::after_restore (a replacement's CommState is new: nothing kept, no floor)
        p.views_told.clear();
        if (dead[static_cast<std::size_t>(mem[k])]) {
          p.captures.clear();
          p.announced.reset();
          p.floor.reset();
        } else {
          const auto version = committed_[static_cast<std::size_t>(g)].first;
          p.captures.erase(p.captures.upper_bound(version), p.captures.end());
          if (p.announced && *p.announced > version) p.announced = version;
        }
        load_step(p, c.step);
        p.pc = c.pc;
        p.st = c.st;
        p.core->restore(*c.core);
      }
    }
    // 4.-6. The restart exchange (each rank with its inter-group peers), owed replays, orphans, the reports.
    const bool gated = nR < static_cast<std::size_t>(N);
    std::vector<protocol::RecoveryWork> works(static_cast<std::size_t>(N));
    std::uint64_t low = protocol::kNoOrphan;
    // The words each rank sends (protocol::exchange_counts, as CommState's exchange), delivered to their peers.
    std::set<int> R;
    for (int r = 0; r < N; ++r)
      if (inR[static_cast<std::size_t>(r)]) R.insert(r);
    std::vector<std::vector<protocol::ChannelWords>> mine(static_cast<std::size_t>(N)),
        received(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) {
      const auto gi = static_cast<std::size_t>(groups_(i));
      const auto& mem = members_[gi];
      const std::size_t k = static_cast<std::size_t>(std::lower_bound(mem.begin(), mem.end(), i) - mem.begin());
      const Capture& committed = *(*committed_[gi].second)[k].core;
      mine[static_cast<std::size_t>(i)] =
          protocol::exchange_counts(*P[static_cast<std::size_t>(i)].core, R, &committed);
      for (const auto& c : mine[static_cast<std::size_t>(i)])
        received[static_cast<std::size_t>(c.peer)].push_back({i, c.words});
    }
    for (int i = 0; i < N; ++i) {
      Rank& p = P[static_cast<std::size_t>(i)];
      const auto& sent = mine[static_cast<std::size_t>(i)];
      const auto& got = received[static_cast<std::size_t>(i)];
      p.ctl_recovery += sent.size() + got.size();  // the exchange's messages both ways
      protocol::RecoveryWork& w = works[static_cast<std::size_t>(i)];
      try {
        w = p.core->recover(inR[static_cast<std::size_t>(i)] != 0, protocol::peer_counts(*p.core, got, sent, R), gated);
      } catch (const ProtocolError& err) {
        note("unrecoverable", err.what());
        continue;
      }
      low = std::min(low, protocol::lowest_orphan(w));
      if (!inR[static_cast<std::size_t>(i)]) {  // what the survivor really holds from each rolled-back peer
        std::size_t held = 0;
        for (int r : peers[static_cast<std::size_t>(i)]) {
          if (!inR[static_cast<std::size_t>(r)]) continue;
          const std::uint64_t lo = P[static_cast<std::size_t>(r)].core->sent(i), hi = p.core->delivered(r);
          for (std::uint64_t k = lo + 1; k <= hi; ++k, ++held)
            if (const auto ph = p.core->orphan_phase(r, k)) {
              outstanding_[{r, i, k}] = *ph;
              outstanding_phases_.insert(*ph);
            }
        }
        if (held != w.orphan_phases.size())
          note("orphan-count", "rank " + std::to_string(i) + " reports " + std::to_string(w.orphan_phases.size()) +
                                   " orphans and holds " + std::to_string(held));
      }
    }
    // 6. Each rank releases its items at or below the lowest orphan's phase (an allreduce) and holds the rest; the
    // ranks that hold orphans report their phases to the coordinator (CommState::restart_exchange).
    std::vector<std::uint64_t> orphans;
    restart_root_ = protocol::restart_coordinator(N, R);
    for (int i = 0; i < N; ++i) {
      Rank& p = P[static_cast<std::size_t>(i)];
      p.held.clear();
      p.restart_floor = 0;
      p.core->limit_new_sends(protocol::kNoOrphan);
      if (!gated) continue;
      protocol::FirstRelease first = protocol::first_release(i, works[static_cast<std::size_t>(i)], low);
      for (const auto& it : first.released) p.core->release(it.kind, it.phase);
      p.held = std::move(first.held);
      p.restart_floor = low;
      p.core->limit_new_sends(low);
      if (o_.sabotage == Options::Sabotage::NoGating) {
        p.core->limit_new_sends(protocol::kNoOrphan);
        for (const auto& it : p.held) p.core->release(it.kind, it.phase);
        p.held.clear();
      }
      if (first.report.empty()) continue;
      orphans.insert(orphans.end(), first.report.begin(), first.report.end());
      if (i == restart_root_) continue;
      ++p.ctl_recovery;
      ++coordinator_msgs_;
    }
    if (o_.job_floor) {  // after a repair every group reports again (GroupCommit::new_communicators)
      for (int g = 0; g < G; ++g) floor_nodes_[static_cast<std::size_t>(g)].reset(g, G);
      for (int g = 0; g < G; ++g)
        if (const std::uint64_t v = committed_[static_cast<std::size_t>(g)].first)
          floor_step(g, floor_nodes_[static_cast<std::size_t>(g)].own(v), true);
    }
    coordinator_.begin(epoch_, {}, orphans);
    for (int i = 0; i < N; ++i) {
      Rank& p = P[static_cast<std::size_t>(i)];
      sample(p);
      for (int d : p.core->queued_dests()) flush(p, d);
      if (!p.done) sched_run(i, 0);
    }
  }

  // 7. The restart floor rose to `floor` at rank `r` (CommState::raise_restart_floor): it releases what it holds at
  // or below it and passes it on down the coordinator's tree.
  void raise_restart_floor(int r, std::uint64_t floor) {
    Rank& p = P[static_cast<std::size_t>(r)];
    if (floor <= p.restart_floor) return;
    p.restart_floor = floor;
    if (o_.sabotage != Options::Sabotage::NoGating) p.core->limit_new_sends(floor);
    for (const auto& it : protocol::release_held(p.held, floor)) p.core->release(it.kind, it.phase);
    for (int c : protocol::restart_floor_children(r, N, restart_root_)) {
      ++(r == restart_root_ ? coordinator_msgs_ : p.ctl_recovery);
      control(Kind::RestartFloor, r, c, floor, 0);
    }
    for (int d : p.core->queued_dests()) flush(p, d);
    if (!p.done && !p.dead) sched_run(r, 0);
  }

  void on_notify(const Event& e) {
    if (e.inc_a != epoch_) return;  // an older recovery's
    ++coordinator_msgs_;            // a Notify received
    try {
      coordinator_.notify(e.inc_a, e.x);
    } catch (const ProtocolError& err) {
      note("notify-unmatched", err.what());
    }
    raise_restart_floor(restart_root_, coordinator_.lowest_orphan_phase().value_or(protocol::kNoOrphan));
  }

  void on_restart_floor(const Event& e) {
    if (e.inc_a != epoch_) return;
    ++P[static_cast<std::size_t>(e.b)].ctl_recovery;
    raise_restart_floor(e.b, e.x);
  }

 public:
  double makespan_ = 0;

 private:
  std::priority_queue<Event> heap_;
  std::vector<Round> rounds_;
  std::vector<double> link_free_, copy_free_;
  std::vector<std::uint64_t> gep_;
  std::vector<std::pair<std::uint64_t, std::shared_ptr<std::vector<RankCapture>>>> committed_;
  std::map<std::pair<int, std::uint64_t>, std::shared_ptr<std::vector<RankCapture>>> pending_;
  std::map<std::pair<int, int>, std::vector<int>> barrier_;
  std::set<int> dying_;
  // The orphans survivors hold (sender, receiver, seq -> phase) until their re-execution is notified.
  std::map<std::tuple<int, int, std::uint64_t>, std::uint64_t> outstanding_;
  std::multiset<std::uint64_t> outstanding_phases_;
  protocol::Layout layout_;
  std::vector<protocol::FloorNode> floor_nodes_;  // each group's first rank's (--job-floor)
  bool stopped_ = false;
  std::uint32_t epoch_ = 0;
  protocol::Coordinator coordinator_;
  int restart_root_ = -1;  // the restart coordinator: the lowest rank outside R
};

void validate(const Options& o) {
  auto bad = [](const std::string& why) { return ConfigError("reprise-sim: " + why); };
  if (o.ranks < 2) throw bad("--ranks " + std::to_string(o.ranks) + ": at least 2 ranks");
  if (o.ranks_per_node < 1 || o.ranks_per_node >= o.ranks)
    throw bad("--ranks-per-node " + std::to_string(o.ranks_per_node) + " for " + std::to_string(o.ranks) +
              " ranks: at least two nodes (a rank's buddy is on another node)");
  if (o.steps < 1) throw bad("--steps must be at least 1");
  if (o.message_bytes > (1u << 30)) throw bad("--message-bytes above 1 GiB");
  if (o.pattern == Pattern::Alltoall && o.ranks > 4096)
    throw bad("alltoall at " + std::to_string(o.ranks) + " ranks: every rank talks to every other, at most 4096");
  if (!o.group_of.empty()) {
    if (static_cast<int>(o.group_of.size()) != o.ranks)
      throw bad("--groups lists " + std::to_string(o.group_of.size()) + " ranks for a job of " +
                std::to_string(o.ranks));
    std::set<int> seen(o.group_of.begin(), o.group_of.end());
    if (*seen.begin() != 0 || *seen.rbegin() != static_cast<int>(seen.size()) - 1)
      throw bad("--groups must number groups 0..G-1 without gaps");
  }
  for (const Failure& f : o.failures)
    if (f.rank < 0 || f.rank >= o.ranks || f.step < 0 || f.step >= o.steps)
      throw bad("--fail " + std::to_string(f.rank) + ":" + std::to_string(f.step) + " outside ranks 0.." +
                std::to_string(o.ranks - 1) + ", steps 0.." + std::to_string(o.steps - 1));
}

}  // namespace

Pattern parse_pattern(const std::string& name) {
  for (Pattern p : {Pattern::Stencil2d, Pattern::Stencil3d, Pattern::Cg, Pattern::Cholesky, Pattern::Alltoall})
    if (name == pattern_name(p)) return p;
  throw ConfigError("reprise-sim: --pattern " + name + ": one of stencil2d, stencil3d, cg, cholesky, alltoall");
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::Stencil2d:
      return "stencil2d";
    case Pattern::Stencil3d:
      return "stencil3d";
    case Pattern::Cg:
      return "cg";
    case Pattern::Cholesky:
      return "cholesky";
    case Pattern::Alltoall:
      return "alltoall";
  }
  return "?";
}

Result simulate(const Options& o) {
  validate(o);
  const auto start = std::chrono::steady_clock::now();
  Result r;
  r.ranks = o.ranks;
  r.ranks_per_node = o.ranks_per_node;
  std::vector<std::uint64_t> reference;
  {
    Engine ref(o, false);
    ref.run();
    r.problems = ref.hangs();
    for (auto& p : ref.problems_) r.problems.push_back("failure-free run: " + p);
    r.failure_free_makespan_seconds_model = ref.makespan_;
    r.logged_share = ref.sent_bytes_ > 0 ? ref.logged_bytes_ / ref.sent_bytes_ : 0;
    reference.reserve(static_cast<std::size_t>(o.ranks));
    for (const Rank& p : ref.P) reference.push_back(p.st);
    r.events += ref.events_;
    r.groups = ref.G;
    for (const auto& m : ref.members_) r.max_group_ranks = std::max(r.max_group_ranks, static_cast<int>(m.size()));
    double per_ckpt = 0;
    for (const Rank& p : ref.P) {
      r.peers_max = std::max(r.peers_max, p.core->channels().size());
      if (p.checkpoints)
        per_ckpt = std::max(per_ckpt, static_cast<double>(p.ctl_checkpoint) / static_cast<double>(p.checkpoints));
    }
    r.control_messages_per_rank_per_checkpoint_max = per_ckpt;
    r.per_rank_state_bytes_max = ref.state_max_;
    r.per_rank_log_entries_max = ref.log_entries_max_;
  }
  if (!o.failures.empty()) {
    Engine run(o, true);
    run.run();
    for (auto& h : run.hangs()) r.problems.push_back(h);
    for (auto& p : run.problems_) r.problems.push_back(p);
    std::size_t differ = 0;
    std::string first;
    for (std::size_t i = 0; i < run.P.size(); ++i)
      if (run.P[i].done && run.P[i].st != reference[i] && differ++ == 0) first = std::to_string(i);
    if (differ)
      r.problems.push_back("final state: " + std::to_string(differ) +
                           " ranks differ from the failure-free run (first: rank " + first + ")");
    r.failures = run.failed_;
    r.makespan_seconds_model = run.makespan_;
    if (r.problems.empty()) r.recovery_seconds_model = run.makespan_ - r.failure_free_makespan_seconds_model;
    r.rolled_back_share = run.recoveries_ ? static_cast<double>(run.rolled_back_) / run.recoveries_ / o.ranks : 0;
    r.replayed_messages = run.replayed_;
    r.orphan_sends = run.orphans_;
    r.duplicate_sends = run.duplicates_;
    r.recovery_messages_coordinator = run.coordinator_msgs_;
    for (const Rank& p : run.P)
      r.recovery_messages_per_rank_max_others = std::max(r.recovery_messages_per_rank_max_others, p.ctl_recovery);
    r.recovery_messages_per_rank_max =
        std::max(r.recovery_messages_per_rank_max_others, r.recovery_messages_coordinator);
    r.per_rank_state_bytes_max = std::max(r.per_rank_state_bytes_max, run.state_max_);
    r.per_rank_log_entries_max = std::max(r.per_rank_log_entries_max, run.log_entries_max_);
    r.events += run.events_;
  } else {
    r.makespan_seconds_model = r.failure_free_makespan_seconds_model;
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  r.peak_rss_bytes = static_cast<std::size_t>(u.ru_maxrss) * 1024;
  return r;
}

protocol::CommMatrix matrix(const Options& o) {
  validate(o);
  Program prog(o);
  std::map<std::pair<int, int>, std::uint64_t> bytes;
  std::vector<Round> rounds;
  const int steps = o.pattern == Pattern::Cholesky ? o.steps : 1;  // the others repeat every step
  for (int r = 0; r < o.ranks; ++r)
    for (int s = 0; s < steps; ++s) {
      prog.rounds(r, s, rounds);
      for (const Round& rd : rounds)
        for (int d : rd.out) bytes[{r, d}] += rd.bytes * static_cast<std::uint64_t>(o.steps / steps);
    }
  protocol::CommMatrix m;
  m.ranks = o.ranks;
  for (const auto& [k, b] : bytes) m.entries.push_back({k.first, k.second, b});
  return m;
}

std::string to_json(const Options& o, const Result& r) {
  nlohmann::json j;
  j["pattern"] = pattern_name(o.pattern);
  j["ranks"] = r.ranks;
  j["ranks_per_node"] = r.ranks_per_node;
  j["groups"] = r.groups;
  j["max_group_ranks"] = r.max_group_ranks;
  j["steps"] = o.steps;
  j["checkpoint_every"] = o.checkpoint_every;
  j["job_floor"] = o.job_floor;
  j["message_bytes"] = o.message_bytes;
  j["state_bytes"] = o.state_bytes;
  auto& f = j["failures"] = nlohmann::json::array();
  for (const Failure& x : o.failures) f.push_back({{"rank", x.rank}, {"step", x.step}});
  j["failures_struck"] = r.failures;
  j["peers_max"] = r.peers_max;
  j["per_rank_state_bytes_max"] = r.per_rank_state_bytes_max;
  j["per_rank_log_entries_max"] = r.per_rank_log_entries_max;
  j["control_messages_per_rank_per_checkpoint_max"] = r.control_messages_per_rank_per_checkpoint_max;
  j["recovery_messages_per_rank_max"] = r.recovery_messages_per_rank_max;
  j["recovery_messages_per_rank_max_others"] = r.recovery_messages_per_rank_max_others;
  j["recovery_messages_coordinator"] = r.recovery_messages_coordinator;
  j["logged_share"] = r.logged_share;
  j["rolled_back_share"] = r.rolled_back_share;
  j["replayed_messages"] = r.replayed_messages;
  j["orphan_sends"] = r.orphan_sends;
  j["duplicate_sends"] = r.duplicate_sends;
  j["makespan_seconds_model"] = r.makespan_seconds_model;
  j["failure_free_makespan_seconds_model"] = r.failure_free_makespan_seconds_model;
  j["recovery_seconds_model"] = r.recovery_seconds_model;
  j["events"] = r.events;
  j["wall_seconds"] = r.wall_seconds;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["ok"] = r.problems.empty();
  j["problems"] = r.problems;
  return j.dump();
}

}  // namespace reprise::sim
