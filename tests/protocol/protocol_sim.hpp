// An in-process deterministic transport and discrete-event simulator for the protocol core (src/protocol/process):
// a C++ twin of ../shared/reference/protocol_model.py driving the real protocol::Process / protocol::Coordinator.
// Programs are send-deterministic by construction (send, named receive, wildcard receive, group checkpoint);
// channels are FIFO with random delays; failures restore the failed groups' committed captures and run the
// recovery exactly as PROTOCOL.md says (repair drops what was in flight to and from R, survivor-to-survivor
// traffic is kept). check() compares with a failure-free run of the same program: delivered sequences, final
// states, hangs, and the release-rule invariant (no replay overtakes an orphan of a lower phase).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "protocol/coordinator.hpp"
#include "protocol/process.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol::sim {

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline std::uint64_t H(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0) {
  return mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
}

struct Op {
  char kind;              // 'S' send, 'R' named receive, 'A' wildcard receive, 'C' group checkpoint
  int peer = -1;          // S: dest, R: source
  std::vector<int> srcs;  // A
  std::uint64_t version = 0;
};

struct Program {
  std::vector<int> group;
  std::vector<std::vector<Op>> ops;
  int n() const { return static_cast<int>(group.size()); }
  int groups() const { return *std::max_element(group.begin(), group.end()) + 1; }
  std::size_t size() const {
    std::size_t s = 0;
    for (const auto& o : ops) s += o.size();
    return s;
  }
};

/// Same construction as the model's gen_program: every failure-free run is deadlock-free.
inline Program generate(std::mt19937_64& rng, int N, int G, int rounds, double pck = 0.35) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  Program p;
  for (int i = 0; i < N; ++i) p.group.push_back(i * G / N);
  p.ops.resize(static_cast<std::size_t>(N));
  std::vector<std::tuple<int, int, int>> pend;  // (round due, src, dst)
  std::vector<std::uint64_t> ver(static_cast<std::size_t>(G), 0);
  for (int rd = 0; rd < rounds; ++rd) {
    std::vector<std::pair<int, int>> pairs;
    switch (pick(5)) {
      case 0: {  // ring
        const int ks[3] = {1, 2, N - 1};
        const int k = ks[pick(3)];
        for (int i = 0; i < N; ++i) pairs.push_back({i, (i + k) % N});
        break;
      }
      case 1:  // stencil
        for (int i = 0; i < N; ++i) pairs.push_back({i, (i + 1) % N});
        for (int i = 0; i < N; ++i) pairs.push_back({i, (i + N - 1) % N});
        break;
      case 2:  // intra
        for (int i = 0; i < N; ++i)
          for (int j = 0; j < N; ++j)
            if (i != j && p.group[i] == p.group[j] && uni(0, 1) < .5) pairs.push_back({i, j});
        break;
      case 3:  // cross
        for (int i = 0; i < N; ++i)
          for (int j = 0; j < N; ++j)
            if (p.group[i] != p.group[j] && uni(0, 1) < .3) pairs.push_back({i, j});
        break;
      default:  // random
        for (int i = 0; i < N; ++i)
          for (int j = 0; j < N; ++j)
            if (i != j && uni(0, 1) < .25) pairs.push_back({i, j});
    }
    std::shuffle(pairs.begin(), pairs.end(), rng);
    for (auto [s, d] : pairs) {
      p.ops[static_cast<std::size_t>(s)].push_back(Op{'S', d, {}, 0});
      const int lags[4] = {0, 0, 1, 2};
      const int lag = p.group[s] != p.group[d] ? lags[pick(4)] : 0;
      pend.push_back({rd + lag, s, d});
    }
    std::vector<std::tuple<int, int, int>> due, later;
    for (auto& x : pend) (std::get<0>(x) <= rd ? due : later).push_back(x);
    pend = later;
    std::shuffle(due.begin(), due.end(), rng);
    for (auto [r, s, d] : due) p.ops[static_cast<std::size_t>(d)].push_back(Op{'R', s, {}, 0});
    for (int g = 0; g < G; ++g)
      if (uni(0, 1) < pck) {
        ++ver[static_cast<std::size_t>(g)];
        for (int i = 0; i < N; ++i)
          if (p.group[i] == g)
            p.ops[static_cast<std::size_t>(i)].push_back(Op{'C', -1, {}, ver[static_cast<std::size_t>(g)]});
      }
  }
  for (auto [r, s, d] : pend) p.ops[static_cast<std::size_t>(d)].push_back(Op{'R', s, {}, 0});
  return p;
}

class Sim {
 public:
  struct Msg {
    Header h;
    std::uint64_t content;
  };
  struct ProcCapture {
    std::size_t pc;
    std::uint64_t st;
    std::map<int, std::vector<std::uint64_t>> dseq;
    std::shared_ptr<Capture> core;
  };
  struct Proc {
    std::unique_ptr<Process> core;
    std::size_t pc = 0;
    std::uint64_t st = 0;
    std::map<int, std::vector<std::uint64_t>> dseq;
    std::map<int, std::deque<std::pair<std::uint64_t, Msg>>> inbox;
    int inc = 0;
    bool sched = false, done = false;
    std::string waiting;
  };

  Sim(Program prog, std::uint64_t seed, const Sim* oracle = nullptr)
      : prog_(std::move(prog)), rng_(seed), oracle_(oracle), N(prog_.n()), G(prog_.groups()) {
    members_.resize(static_cast<std::size_t>(G));
    for (int i = 0; i < N; ++i) members_[static_cast<std::size_t>(prog_.group[i])].push_back(i);
    for (int i = 0; i < N; ++i) {
      P.emplace_back();
      P.back().core = std::make_unique<Process>(i, prog_.group, logging::LogOptions{4096, 0});
      P.back().st = H(static_cast<std::uint64_t>(i), 12345);
    }
    gep_.assign(static_cast<std::size_t>(G), 0);
    for (int g = 0; g < G; ++g) {
      std::map<int, ProcCapture> caps;
      for (int i : members_[static_cast<std::size_t>(g)]) caps[i] = capture(P[static_cast<std::size_t>(i)]);
      committed_[g] = {0, caps};
    }
    for (auto& p : P) sched_run(p, 0);
  }

  // ---- scenario hooks and failures ----
  std::function<void(Sim&, int, std::uint64_t)> on_barrier, on_commit;
  std::function<void(Sim&)> on_recovery;
  void fail_at(double t, std::vector<int> procs) { push_at(t, Fail{std::move(procs)}); }
  double now() const { return t_; }
  int failures() const { return nfail_; }
  const std::vector<std::vector<int>>& members() const { return members_; }
  std::mt19937_64& rng() { return rng_; }

  Sim& run(std::size_t max_events = 400000) {
    std::size_t n = 0;
    while (!heap_.empty() && n < max_events) {
      Event ev = heap_.top();
      heap_.pop();
      t_ = ev.t;
      ++n;
      std::visit([&](auto& e) { handle(e); }, *ev.what);
    }
    return *this;
  }

  /// Problems found, empty when the run matches the failure-free one `ref`.
  std::vector<std::string> check(const Sim& ref) const {
    std::vector<std::string> res;
    std::string stuck;
    for (const Proc& p : P)
      if (!p.done)
        stuck += " P" + std::to_string(p.core->id()) + "@" + std::to_string(p.pc) + "(" + p.waiting +
                 (p.core->blocked()        ? ",blocked"
                  : p.core->send_blocked() ? ",send-blocked"
                                           : "") +
                 ")";
    if (!stuck.empty()) res.push_back("hang:" + stuck);
    for (std::size_t i = 0; i < P.size(); ++i) {
      if (stuck.empty() && P[i].st != ref.P[i].st) res.push_back("final-state P" + std::to_string(i));
      for (const auto& [src, seq] : P[i].dseq) {
        const auto it = ref.P[i].dseq.find(src);
        const std::vector<std::uint64_t> empty;
        const auto& b = it == ref.P[i].dseq.end() ? empty : it->second;
        const bool prefix = seq.size() <= b.size() && std::equal(seq.begin(), seq.end(), b.begin());
        if (!prefix || (stuck.empty() && seq != b))
          res.push_back("dseq P" + std::to_string(i) + "<-P" + std::to_string(src));
      }
    }
    for (const auto& [k, v] : violations_) res.push_back(k + " x" + std::to_string(v) + ": " + first_.at(k));
    return res;
  }

  /// Log entries still held although the receiver's group committed a version that delivered them.
  std::size_t stale_log_entries() const {
    std::size_t stale = 0;
    for (const Proc& p : P)
      for (int q = 0; q < N; ++q) {
        if (prog_.group[q] == prog_.group[p.core->id()]) continue;
        const auto& cap = committed_.at(prog_.group[q]).second.at(q);
        stale += p.core->log().range(q, 0, cap.core->delivered(p.core->id())).size();
      }
    return stale;
  }
  std::size_t max_log_entries() const { return max_log_; }
  std::size_t replayed() const { return replayed_; }
  std::size_t skipped() const { return skipped_; }
  std::size_t rollbacks() const { return rolled_back_; }
  /// A message by (sender, receiver, seq on their channel), for the journals below.
  using MsgId = std::tuple<int, int, std::uint64_t>;
  /// The processes each failure (each recovery) rolled back, in order.
  const std::vector<std::set<int>>& rolled_back_sets() const { return rolled_back_sets_; }
  /// Messages sent again from a log (replays), re-executed sends suppressed as orphans (the receiver kept them;
  /// the coordinator was notified), and re-executed sends skipped as duplicates (a rolled-back receiver had them).
  const std::vector<MsgId>& replay_journal() const { return replays_; }
  const std::vector<MsgId>& orphan_journal() const { return orphans_; }
  const std::vector<MsgId>& duplicate_journal() const { return duplicates_; }

  std::vector<Proc> P;

 private:
  struct Run {
    int p, inc;
  };
  struct Arrive {
    int a, b;
    std::uint64_t gen;
    bool view;
    Msg m;
    View v;
  };
  struct CommitEv {
    int g;
    std::uint64_t v, gep;
    std::map<int, ProcCapture> caps;
  };
  struct Ctl {
    std::uint32_t epoch;
    bool notify;
    int proc;
    ItemKind kind;
    std::uint64_t phase;
  };
  struct Fail {
    std::vector<int> procs;
  };
  struct Event {
    double t;
    std::uint64_t n;
    std::shared_ptr<std::variant<Run, Arrive, CommitEv, Ctl, Fail>> what;
    bool operator<(const Event& o) const { return std::tie(t, n) > std::tie(o.t, o.n); }
  };

  double uni(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  template <class E>
  void push_at(double t, E e) {
    heap_.push(Event{t, cnt_++, std::make_shared<std::variant<Run, Arrive, CommitEv, Ctl, Fail>>(std::move(e))});
  }
  template <class E>
  void push(double dt, E e) {
    push_at(t_ + dt, std::move(e));
  }
  void note(const std::string& kind, const std::string& msg) {
    if (violations_[kind]++ == 0) first_[kind] = msg;
  }
  void sched_run(Proc& p, double dt) {
    if (!p.sched) {
      p.sched = true;
      push(dt, Run{p.core->id(), p.inc});
    }
  }
  ProcCapture capture(Proc& p) { return ProcCapture{p.pc, p.st, p.dseq, std::make_shared<Capture>(p.core->capture())}; }
  void xmit(int a, int b, Arrive e) {
    double& last = clast_[{a, b}];
    const double arr = std::max(t_ + uni(0.1, 2.0), last + 1e-6);
    last = arr;
    e.a = a;
    e.b = b;
    e.gen = cgen_[{a, b}];
    push_at(arr, std::move(e));
  }
  void ctl(Ctl c) {
    c.epoch = epoch_;
    push(uni(0.1, 2.0), c);
  }

  // ---- application + normal operation ----
  void handle(Run& e) {
    Proc& p = P[static_cast<std::size_t>(e.p)];
    if (e.inc != p.inc) return;
    p.sched = false;
    if (p.done || p.core->blocked()) return;
    const auto& ops = prog_.ops[static_cast<std::size_t>(e.p)];
    if (p.pc >= ops.size()) {
      p.done = true;
      p.waiting.clear();
      return;
    }
    const Op& op = ops[p.pc];
    if (op.kind == 'S') {
      if (p.core->send_blocked()) {
        p.waiting = "send-blocked";
        return;
      }
      do_send(p, op.peer);
    } else if (op.kind == 'R' || op.kind == 'A') {
      if (!try_recv(p, op.kind == 'R' ? std::vector<int>{op.peer} : op.srcs)) {
        p.waiting = "recv";
        return;
      }
    } else {
      const int g = prog_.group[e.p];
      p.waiting = "checkpoint";
      auto& b = barrier_[{g, op.version}];
      b.insert(e.p);
      if (b.size() == members_[static_cast<std::size_t>(g)].size()) complete_barrier(g, op.version);
      return;
    }
    ++p.pc;
    p.waiting.clear();
    sched_run(p, uni(0.05, 0.3));
  }

  void do_send(Proc& p, int d) {
    const int me = p.core->id();
    const std::uint64_t content = H(p.st, p.pc, static_cast<std::uint64_t>(d), 1);
    p.st = H(p.st, content);
    const Process::Send s = p.core->send(d, 0, &content, sizeof content);
    max_log_ = std::max(max_log_, p.core->log().live_entries());
    if (s.orphan) {
      orphans_.push_back({me, d, s.header.seq});
      if (oracle_) {
        const auto& od = oracle_->P[static_cast<std::size_t>(d)].dseq.at(me);
        if (od[s.header.seq - 1] != content) note("diverged", "orphan re-executed with different content");
      }
      truth_.erase({me, d, s.header.seq});
      ctl(Ctl{0, true, me, ItemKind::Block, s.header.phase});
      return;
    }
    if (s.duplicate) {  // the rolled-back receiver delivered it before its checkpoint: not sent at all
      ++skipped_;
      duplicates_.push_back({me, d, s.header.seq});
      return;
    }
    p.core->queue_new(d, s.header, 0, &content, sizeof content);
    flush(p, d);
  }

  void flush(Proc& p, int d) {
    for (const auto& m : p.core->ready(d)) {
      std::uint64_t content = 0;
      std::memcpy(&content, m.payload.data(), sizeof content);
      if (m.replay) {
        ++replayed_;
        replays_.push_back({p.core->id(), d, m.header.seq});
        for (const auto& [k, ph] : truth_)
          if (ph < static_cast<std::int64_t>(m.header.phase)) {
            note("inv3", "P" + std::to_string(p.core->id()) + " replays to P" + std::to_string(d) + " #" +
                             std::to_string(m.header.seq) + " at phase " + std::to_string(m.header.phase) +
                             " while an orphan at phase " + std::to_string(ph) + " is outstanding");
            break;
          }
      }
      Arrive a{};
      a.m = Msg{m.header, content};
      xmit(p.core->id(), d, a);
    }
  }

  bool try_recv(Proc& p, const std::vector<int>& srcs) {
    int best = -1;
    std::uint64_t best_order = 0;
    for (int q : srcs) {
      auto& ib = p.inbox[q];
      while (!ib.empty() && p.core->arrival(q, ib.front().second.h) == Process::Arrival::Duplicate) ib.pop_front();
      if (!ib.empty() && (best < 0 || ib.front().first < best_order)) {
        best = q;
        best_order = ib.front().first;
      }
    }
    if (best < 0) return false;
    const Msg m = p.inbox[best].front().second;
    if (p.core->arrival(best, m.h) == Process::Arrival::Early) {
      note("gap", "P" + std::to_string(p.core->id()) + " got #" + std::to_string(m.h.seq) + " from P" +
                      std::to_string(best) + " after #" + std::to_string(p.core->delivered(best)));
      return false;
    }
    p.inbox[best].pop_front();
    if (oracle_) {
      const auto& od = oracle_->P[static_cast<std::size_t>(p.core->id())].dseq;
      const auto it = od.find(best);
      if (it == od.end() || m.h.seq > it->second.size() || it->second[m.h.seq - 1] != m.content)
        note("diverged", "P" + std::to_string(p.core->id()) + " delivered wrong content #" + std::to_string(m.h.seq) +
                             " from P" + std::to_string(best));
    }
    p.core->deliver(best, m.h);
    p.dseq[best].push_back(m.content);
    p.st = H(p.st, static_cast<std::uint64_t>(best), m.content);
    return true;
  }

  void complete_barrier(int g, std::uint64_t v) {
    barrier_.erase({g, v});
    const auto& mem = members_[static_cast<std::size_t>(g)];
    std::uint64_t mx = 0;
    for (int i : mem) mx = std::max(mx, P[static_cast<std::size_t>(i)].core->phase());
    std::map<int, ProcCapture> caps;
    for (int i : mem) {
      Proc& p = P[static_cast<std::size_t>(i)];
      p.core->raise_phase(mx);
      ++p.pc;
      p.waiting.clear();
      caps[i] = capture(p);
      sched_run(p, uni(0.05, 0.3));
    }
    push(uni(0.5, 3.0), CommitEv{g, v, gep_[static_cast<std::size_t>(g)], std::move(caps)});
    if (on_barrier) on_barrier(*this, g, v);
  }

  void handle(CommitEv& e) {
    if (e.gep != gep_[static_cast<std::size_t>(e.g)]) return;  // the group rolled back meanwhile
    if (e.v <= committed_[e.g].first) return;                  // obsolete: a newer version committed first
    committed_[e.g] = {e.v, e.caps};
    for (int i : members_[static_cast<std::size_t>(e.g)])
      for (int q = 0; q < N; ++q)
        if (prog_.group[q] != e.g) {
          Arrive a{};
          a.view = true;
          a.v = View{e.caps[i].core->delivered(q), e.caps[i].core->sent(q)};
          xmit(i, q, a);
        }
    if (on_commit) on_commit(*this, e.g, e.v);
  }

  void handle(Arrive& e) {
    if (e.gen != cgen_[{e.a, e.b}]) return;  // dropped by a repair
    Proc& b = P[static_cast<std::size_t>(e.b)];
    if (e.view) {
      b.core->apply_view(e.a, e.v);
      return;
    }
    b.inbox[e.a].push_back({arrivals_++, e.m});
    sched_run(b, 0);
  }

  // ---- recovery ----
  void handle(Fail& e) {
    ++nfail_;
    std::set<int> F(e.procs.begin(), e.procs.end());
    if (active_) F.insert(F_.begin(), F_.end());
    std::set<int> Rg, R;
    for (int f : F) Rg.insert(prog_.group[f]);
    for (int i = 0; i < N; ++i)
      if (Rg.count(prog_.group[i])) R.insert(i);
    std::vector<int> S;
    for (int i = 0; i < N; ++i)
      if (!R.count(i)) S.push_back(i);
    ++epoch_;
    rolled_back_ += R.size();
    rolled_back_sets_.push_back(R);
    // 1. Repair: what was in flight to or from R is lost; survivor-to-survivor traffic is delivered.
    for (int a = 0; a < N; ++a)
      for (int b = 0; b < N; ++b)
        if (a != b && (R.count(a) || R.count(b))) {
          ++cgen_[{a, b}];
          P[static_cast<std::size_t>(b)].inbox[a].clear();
        }
    for (int g : Rg) {
      ++gep_[static_cast<std::size_t>(g)];
      for (auto it = barrier_.begin(); it != barrier_.end();)
        it = it->first.first == g ? barrier_.erase(it) : std::next(it);
    }
    // 3. Restore R to its groups' committed captures.
    for (int r : R) {
      Proc& p = P[static_cast<std::size_t>(r)];
      const ProcCapture& c = committed_.at(prog_.group[r]).second.at(r);
      ++p.inc;
      p.sched = false;
      p.done = false;
      p.waiting.clear();
      p.pc = c.pc;
      p.st = c.st;
      p.dseq = c.dseq;
      p.inbox.clear();
      p.core->restore(*c.core);
    }
    // 4.-6. Restart exchange, owed replays, orphans, reports.
    const bool gated = !S.empty();
    std::vector<Coordinator::Item> items;
    std::vector<std::uint64_t> orphans;
    truth_.clear();
    for (int i = 0; i < N; ++i) {
      Proc& p = P[static_cast<std::size_t>(i)];
      std::vector<PeerCounts> peers;
      for (int q = 0; q < N; ++q) {
        if (prog_.group[q] == prog_.group[i]) continue;
        const Process& c = *P[static_cast<std::size_t>(q)].core;
        const Capture& cq = *committed_.at(prog_.group[q]).second.at(q).core;
        peers.push_back(PeerCounts{q, R.count(q) > 0, c.delivered(i), c.sent(i), View{cq.delivered(i), cq.sent(i)}});
      }
      RecoveryWork w;
      try {
        w = p.core->recover(R.count(i) > 0, peers, gated);
      } catch (const ProtocolError& err) {
        note("unrecoverable", err.what());
        continue;
      }
      orphans.insert(orphans.end(), w.orphan_phases.begin(), w.orphan_phases.end());
      if (!R.count(i)) {  // oracle of step 6: the orphans x really holds from each r
        std::size_t real = 0;
        for (int r : R) {
          if (prog_.group[r] == prog_.group[i]) continue;
          const std::uint64_t lo = P[static_cast<std::size_t>(r)].core->sent(i), hi = p.core->delivered(r);
          for (std::uint64_t k = lo + 1; k <= hi; ++k, ++real) {
            const auto ph = p.core->orphan_phase(r, k);
            truth_[{r, i, k}] = ph ? static_cast<std::int64_t>(*ph) : -1;
          }
        }
        if (real != w.orphan_phases.size())
          note("orphan-count", "P" + std::to_string(i) + " reports " + std::to_string(w.orphan_phases.size()) +
                                   " orphans, holds " + std::to_string(real));
      }
      if (gated) {
        items.push_back({i, ItemKind::Block, w.phase});
        for (std::uint64_t ph : w.replay_phases) items.push_back({i, ItemKind::Replay, ph});
      }
    }
    F_ = F;
    coordinator_.begin(epoch_, items, orphans);
    active_ = !items.empty() || !truth_.empty();
    if (on_recovery) on_recovery(*this);
    coord_release();
    for (Proc& p : P) {
      for (int d : p.core->queued_dests()) flush(p, d);
      sched_run(p, 0);
    }
  }

  void coord_release() {
    for (const auto& it : coordinator_.release()) ctl(Ctl{0, false, it.process, it.kind, it.phase});
    if (coordinator_.done()) active_ = false;
  }

  void handle(Ctl& c) {
    if (c.epoch != epoch_) return;  // stale: an older recovery epoch
    if (c.notify) {
      try {
        coordinator_.notify(c.epoch, c.phase);
      } catch (const ProtocolError& e) {
        note("notify-unmatched", e.what());
      }
      coord_release();
      return;
    }
    Proc& p = P[static_cast<std::size_t>(c.proc)];
    p.core->release(c.kind, c.phase);
    for (int d : p.core->queued_dests()) flush(p, d);
    sched_run(p, 0);
  }

  Program prog_;
  std::mt19937_64 rng_;
  const Sim* oracle_;
  int N, G;
  std::vector<std::vector<int>> members_;
  double t_ = 0;
  std::uint64_t cnt_ = 0, arrivals_ = 0;
  std::priority_queue<Event> heap_;
  std::map<int, std::pair<std::uint64_t, std::map<int, ProcCapture>>> committed_;
  std::map<std::pair<int, std::uint64_t>, std::set<int>> barrier_;
  std::vector<std::uint64_t> gep_;
  std::map<std::pair<int, int>, double> clast_;
  std::map<std::pair<int, int>, std::uint64_t> cgen_;
  std::uint32_t epoch_ = 0;
  bool active_ = false;
  std::set<int> F_;
  Coordinator coordinator_;
  std::map<std::tuple<int, int, std::uint64_t>, std::int64_t> truth_;
  std::map<std::string, int> violations_;
  std::map<std::string, std::string> first_;
  int nfail_ = 0;
  std::size_t max_log_ = 0, replayed_ = 0, rolled_back_ = 0, skipped_ = 0;
  std::vector<std::set<int>> rolled_back_sets_;
  std::vector<MsgId> replays_, orphans_, duplicates_;
};

}  // namespace reprise::protocol::sim
