// reprise-mpi-comm-check: reprise::Comm on real processes. Every step each rank sends a block of its state to the
// next rank (ring) and, every 3rd step, to every other rank (all pairs), receives the same, and folds what it got
// into its state; a checkpoint every --checkpoint-every steps. Messages between groups are logged and released
// once the receiving group commits. Prints `checksum 0x...` (independent of failures), the Comm counters of rank
// 0, and `comm ok` when the log was garbage-collected (entries released, few held at the end).
//   REPRISE_RANKS_PER_NODE=2 scripts/mpirun.sh -n 4 -- reprise-mpi-comm-check [--steps N] [--mode MODE]
//       [--checkpoint-every K] [--words W] [--space host|device] [--bound held|too-low]
// MODE: normal; late-receive (each rank also sends one message that its receiver takes only two checkpoints
// later: a failure in between needs it replayed from the log the sender checkpointed); dirty-channel (rank 0 leaves a
// message to its group partner unreceived before a checkpoint: a clear ProtocolError); any-source (receives from any
// rank, MPI_ANY_SOURCE: see below; its own checksum); any-source-range (receives from any rank of a tag range: see
// below; its own checksum); reserved-tag (a send with Comm's own tag 32767: a clear UsageError); reorder (two messages
// to the next rank each step, tags 8 then MPI_TAG_UB, the second waited for first: held until the first is delivered;
// its own checksum); early-wait (rank 1 waits for rank 0's second message
// without a receive for the first: a clear ProtocolError); drift (ranks 0 and 1, slowed by
// --lag-ms each step, send ranks 2 and 3 one message a step, which they take --late steps later, and nothing
// else: the receivers' group runs up to --late steps, several checkpoints, ahead of the senders', so a rollback of
// every group to one version needs messages the receivers' newer commits would have released from the senders'
// logs; ranks 4 and up, as slow, exchange nothing: with REPRISE_LOG_BOUND their groups must be asked to checkpoint
// too). --bound (with REPRISE_LOG_BOUND): held (default) checks the log stayed near the bound and the runtime did
// not warn that it is too low; too-low checks that a rank's log stayed over it at 32 checks in a row, for which
// the runtime warns.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpu/backend.hpp"
#include "reprise/mpi.hpp"

namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Where the point-to-point messages live. Host: the vectors themselves. Device (--space device): a device buffer
// per use, on the backend Comm uses (CUDA memory on a GPU; host memory through the host twin,
// REPRISE_DEVICE_BACKEND=host-twin): a payload is copied to the device before it is sent and back to its vector
// after it arrived, so Comm sees only device pointers (a GPU rejects a host pointer said to be device memory).
class Buffers {
 public:
  Buffers(reprise::MemorySpace space, const reprise::Config& cfg, std::size_t bytes) : bytes_(bytes) {
    if (space != reprise::MemorySpace::Device) return;
    be_ = reprise::gpu::make_backend(cfg.device_backend, "reprise-mpi-comm-check --space device");
    stream_ = be_->create_stream(false);
  }
  /// The buffer to send `v` from (on the device: `name`'s buffer, holding a copy of v).
  void* out(const std::string& name, std::vector<std::uint64_t>& v) {
    if (!be_) return v.data();
    void* d = get(name);
    be_->copy_to_device(d, v.data(), v.size() * 8, *stream_);
    be_->synchronize(*stream_);
    return d;
  }
  /// The buffer to receive `v` into; back(name, v, bytes) copies the message that arrived in it into v.
  void* in(const std::string& name, std::vector<std::uint64_t>& v) { return be_ ? get(name) : v.data(); }
  void back(const std::string& name, std::vector<std::uint64_t>& v, std::size_t bytes = 0) {
    if (!be_) return;
    be_->copy_to_host(v.data(), get(name), bytes ? bytes : v.size() * 8, *stream_);
    be_->synchronize(*stream_);
  }

 private:
  void* get(const std::string& name) {
    auto& b = device_[name];
    if (!b.data()) b = be_->alloc_device(bytes_);
    return b.data();
  }
  std::size_t bytes_;
  std::unique_ptr<reprise::gpu::Backend> be_;
  std::unique_ptr<reprise::gpu::Stream> stream_;
  std::map<std::string, reprise::gpu::Buffer> device_;
};

int run(int argc, char** argv) {
  std::uint64_t steps = 30, every = 5;
  std::size_t words = 2048;  // 16 KiB per message: above the packing limit (header + payload datatype)
  std::string mode = "normal";
  std::uint64_t late_steps = 8, lag_ms = 20;  // drift mode
  int stall_rank = -1;                        // any-source mode: --stall
  std::uint64_t stall_step = 0, stall_ms = 0;
  // --space device: every point-to-point buffer is device memory (Buffers), so Comm stages it through pinned host
  // memory (D2H into the log entry or a staging buffer, H2D on delivery) or hands it to a CUDA-aware MPI; with
  // REPRISE_DEVICE_BACKEND=host-twin the "device" is host memory and the copies are the backend's host twins. The
  // checksum is the host run's.
  reprise::MemorySpace space = reprise::MemorySpace::Host;
  bool bound_too_low = false;
  // --within-budget 1: every rank's memory peak (rt.memory_json()) must stay within its budget plus one log segment
  // (REPRISE_MEMORY_BUDGET, issue: memory budget and commit path, item 1), or the check fails. --within-budget told:
  // the same, except for a rank that said its budget is too small (budget_told_bytes: the budget to raise to).
  bool within_budget = false, or_told = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps")
      steps = std::stoull(argv[i + 1]);
    else if (a == "--checkpoint-every")
      every = std::stoull(argv[i + 1]);
    else if (a == "--words")
      words = std::stoull(argv[i + 1]);
    else if (a == "--mode")
      mode = argv[i + 1];
    else if (a == "--late")
      late_steps = std::stoull(argv[i + 1]);
    else if (a == "--lag-ms")
      lag_ms = std::stoull(argv[i + 1]);
    else if (a == "--space")
      space = std::string(argv[i + 1]) == "device" ? reprise::MemorySpace::Device : reprise::MemorySpace::Host;
    else if (a == "--bound")
      bound_too_low = std::string(argv[i + 1]) == "too-low";
    else if (a == "--stall")
      std::sscanf(argv[i + 1], "%d:%" SCNu64 ":%" SCNu64, &stall_rank, &stall_step, &stall_ms);
    else if (a == "--within-budget")
      within_budget = std::string(argv[i + 1]) == "1" || std::string(argv[i + 1]) == "told",
      or_told = std::string(argv[i + 1]) == "told";
    else
      throw reprise::UsageError("unknown option " + a);
  }
  reprise::MpiRuntime rt(MPI_COMM_WORLD);
  reprise::Comm& c = rt.messages();
  const int me = c.rank(), n = c.size();
  std::vector<std::uint64_t> state(words);
  auto init = [&] {
    for (std::size_t i = 0; i < words; ++i) state[i] = mix(static_cast<std::uint64_t>(me) * 1000003 + i);
  };
  init();
  std::uint64_t step = 0;
  rt.protect("state", state.data(), state.size() * sizeof(std::uint64_t), reprise::MemorySpace::Host);
  rt.protect("step", &step);
  if (rt.restarted()) {  // a relaunch from REPRISE_DIR
    rt.restore();
    if (me == 0) std::printf("restarted from step %" PRIu64 "\n", step), std::fflush(stdout);
  }
  std::vector<std::uint64_t> in(words);
  Buffers buf(space, rt.config(), words * 8);
  std::uint64_t checksum = 0;
  auto stat = [&](const char* k) {
    const std::string js = c.stats_json();
    const auto at = js.find(std::string("\"") + k + "\":");
    return std::stoull(js.substr(at + std::strlen(k) + 3));
  };
  auto inter_messages = [&] { return stat("inter_messages"); };
  std::vector<std::uint64_t> inter_at_checkpoint;  // since this process started or rolled back
  int rollbacks = 0;
  reprise::Comm::Request late;  // late-receive mode: the message received two checkpoints after it was sent
  std::vector<std::uint64_t> late_out;
  auto fold = [&](int from) {
    for (std::size_t i = 0; i < words; ++i) state[i] = mix(state[i] ^ in[i] ^ static_cast<std::uint64_t>(from));
  };
  // drift mode: a sender's messages (std::deque: a buffer stays where it is while the send may use it), and the
  // requests a rollback left behind (forgotten, never waited for: the re-execution sends those messages again).
  const bool drift = mode == "drift";
  if (drift && n < 4) throw reprise::UsageError("--mode drift needs at least 4 ranks (two groups or more)");
  if ((mode == "any-source" || mode == "any-source-range") && n < 3)
    throw reprise::UsageError("--mode " + mode + " needs at least 3 ranks");
  const bool drift_sender = drift && me < 2, drift_receiver = drift && (me == 2 || me == 3);
  const int partner = drift_sender ? me + 2 : me - 2;
  std::deque<std::vector<std::uint64_t>> drift_out;
  std::vector<reprise::Comm::Request> drift_sends, forgotten;
  auto drift_receive = [&] {  // the message the partner sent `late_steps` steps ago
    c.recv(in.data(), words * 8, partner, 7);
    fold(partner);
  };
  for (;;) {
    try {
      while (step < steps) {
        rt.step(step);
        if (drift) {
          if (!drift_receiver) std::this_thread::sleep_for(std::chrono::milliseconds(lag_ms));
          if (drift_sender) {
            for (std::size_t i = 0; i < words; ++i) state[i] = mix(state[i] + step);
            drift_out.push_back(state);
            drift_sends.push_back(c.isend(drift_out.back().data(), words * 8, partner, 7));
          } else if (drift_receiver && step >= late_steps) {
            drift_receive();
          }
          if (me == 0) std::printf("rank 0 at step %" PRIu64 "\n", step), std::fflush(stdout);  // (relaunch.sh)
          if (++step % every == 0) {
            rt.checkpoint(step);
            inter_at_checkpoint.push_back(inter_messages());
          }
          continue;
        }
        const int next = (me + 1) % n, prev = (me + n - 1) % n;
        if (space == reprise::MemorySpace::Host) {
          c.sendrecv(state.data(), words * 8, next, 1, in.data(), words * 8, prev, 1);
        } else {
          reprise::Comm::Request r = c.irecv(buf.in("in", in), words * 8, prev, 1, space);
          reprise::Comm::Request s = c.isend(buf.out("state", state), words * 8, next, 1, space);
          c.wait(s);
          c.wait(r);
          buf.back("in", in);
        }
        fold(prev);
        {
          // Two large messages in flight on one channel with one tag, of different sizes: each receive must get
          // its own payload (headers and payloads are matched separately). The second is sent from host memory:
          // behind a staged device send that waits for its D2H copy, it must not be posted first.
          std::vector<std::uint64_t> a(words), half(words / 2), b(words, 0);
          for (std::size_t i = 0; i < half.size(); ++i) half[i] = mix(state[i] + 7);
          std::vector<reprise::Comm::Request> two;
          two.push_back(c.irecv(buf.in("a", a), words * 8, prev, 6, space));
          two.push_back(c.irecv(buf.in("b", b), words * 8, prev, 6, space));
          two.push_back(c.isend(buf.out("state", state), words * 8, next, 6, space));
          two.push_back(c.isend(half.data(), half.size() * 8, next, 6, reprise::MemorySpace::Host));
          const std::size_t got_a = c.wait(two[0]), got_b = c.wait(two[1]);
          c.waitall(two);
          buf.back("a", a, got_a);
          buf.back("b", b, got_b);  // (half as long: the rest of b stays 0)
          if (got_a != words * 8 || got_b != half.size() * 8)
            throw reprise::ProtocolError("two messages on one channel: got " + std::to_string(got_a) + " and " +
                                         std::to_string(got_b) + " bytes");
          for (std::size_t i = 0; i < words; ++i) in[i] = a[i] ^ (b[i] << 1);
          fold(prev);
        }
        if (mode == "reorder") {
          // Two messages to the next rank, tag 8 (small: packed behind its header) then the largest tag (large;
          // MPI_TAG_UB, above Comm's own 32767 where the library allows); the receiver waits for the large one
          // first: it arrives early and is held until tag 8 is delivered.
          std::vector<std::uint64_t> small(4), large(words), got_small(4), got_large(words);
          for (std::size_t i = 0; i < small.size(); ++i) small[i] = mix(state[i] + 8);
          for (std::size_t i = 0; i < words; ++i) large[i] = mix(state[i] + 9);
          const int top = c.tag_ub();
          reprise::Comm::Request r9 = c.irecv(got_large.data(), words * 8, prev, top);
          reprise::Comm::Request r8 = c.irecv(got_small.data(), small.size() * 8, prev, 8);
          reprise::Comm::Request s8 = c.isend(small.data(), small.size() * 8, next, 8);
          reprise::Comm::Request s9 = c.isend(large.data(), words * 8, next, top);
          c.wait(r9);
          c.wait(r8);
          c.wait(s8);
          c.wait(s9);
          for (std::size_t i = 0; i < words; ++i) in[i] = got_large[i] ^ got_small[i % got_small.size()];
          fold(prev);
        }
        if (mode == "ranges") {
          // Receives of a tag range (MPI_ANY_TAG under the interposition): the next rank sends tags 20 (small),
          // 21 (large) and 22 (small); this one posts a receive of 20..29, a receive of tag 22 (deferred behind the
          // first: it could match 22, and MPI matches in the order receives were posted), another of 20..29, and
          // waits for them last to first. They must get 20, 22 and 21, in the channel's order. A receive of tag 30,
          // which nobody sends, is cancelled.
          std::vector<std::uint64_t> x(4), y(words), z(4), got_x(words), got_y(words), got_z(4);
          for (std::size_t i = 0; i < x.size(); ++i) x[i] = mix(state[i] + 20), z[i] = mix(state[i] + 22);
          for (std::size_t i = 0; i < words; ++i) y[i] = mix(state[i] + 21);
          std::vector<std::byte> z_bytes;  // (of any size)
          reprise::Comm::Match mx, my, mz;
          reprise::Comm::Request rx = c.irecv_range(got_x.data(), words * 8, prev, 20, 29, mx);
          reprise::Comm::Request rz = c.irecv_any_size(z_bytes, prev, 22, 22, &mz);
          reprise::Comm::Request ry = c.irecv_range(got_y.data(), words * 8, prev, 20, 29, my);
          reprise::Comm::Request never = c.irecv(got_z.data(), 8, prev, 30);
          std::vector<reprise::Comm::Request> sends;
          sends.push_back(c.isend(x.data(), x.size() * 8, next, 20));
          sends.push_back(c.isend(y.data(), words * 8, next, 21));
          sends.push_back(c.isend(z.data(), z.size() * 8, next, 22));
          if (!c.cancel(never)) throw reprise::ProtocolError("a receive of a tag nobody sends was not cancelled");
          const std::size_t got_z_bytes = c.wait(rz);
          const std::size_t got_y_bytes = c.wait(ry), got_x_bytes = c.wait(rx);
          c.waitall(sends);
          if (mx.tag != 20 || my.tag != 21 || mz.tag != 22 || got_x_bytes != 32 || got_y_bytes != words * 8 ||
              got_z_bytes != 32 || z_bytes.size() != 32 || my.seq != mx.seq + 1 || mz.seq != my.seq + 1)
            throw reprise::ProtocolError("receives of a tag range got tags " + std::to_string(mx.tag) + ", " +
                                         std::to_string(my.tag) + ", " + std::to_string(mz.tag) + " (seq " +
                                         std::to_string(mx.seq) + ", " + std::to_string(my.seq) + ", " +
                                         std::to_string(mz.seq) + "), expected 20, 21, 22 in order");
          std::memcpy(got_z.data(), z_bytes.data(), 32);
          for (std::size_t i = 0; i < words; ++i) in[i] = got_y[i] ^ got_x[i % 4] ^ (got_z[i % 4] << 1);
          fold(prev);
        }
        if (mode == "early-wait" && step == 1 && n > 1) {
          // The receiver waits for the sender's second message without a receive posted for the first: refused.
          const std::uint64_t first = 1, second = 2;
          if (me == 0) {
            c.send(&first, 1, 1, 8);  // (typed: a count of elements)
            c.send(&second, 1, 1, 9);
          } else if (me == 1) {
            std::uint64_t got = 0;
            c.recv(&got, 1, 0, 9);
          }
        }
        if (mode == "range-unmatched" && step == 1 && n > 1) {
          // The same with a receive of a tag range that the first message is not in: refused, not a hang.
          const std::uint64_t first = 1, second = 2;
          if (me == 0) {
            c.send(&first, 1, 1, 8);
            c.send(&second, 1, 1, 20);
          } else if (me == 1) {
            std::uint64_t got = 0;
            reprise::Comm::Match match;
            reprise::Comm::Request r = c.irecv_range(&got, 8, 0, 20, 29, match);
            c.wait(r);
          }
        }
        // (late-receive: no all-pairs round while the late message is out: a channel's messages are received in
        // the order they were sent)
        const bool late_out_now = mode == "late-receive" && step >= 2 * every - 1 && step <= 3 * every + 2;
        if (step % 3 == 0 && !late_out_now) {
          std::vector<std::vector<std::uint64_t>> got(static_cast<std::size_t>(n), std::vector<std::uint64_t>(words));
          std::vector<reprise::Comm::Request> reqs;
          for (int q = 0; q < n; ++q)
            if (q != me)
              reqs.push_back(
                  c.irecv(buf.in("got" + std::to_string(q), got[static_cast<std::size_t>(q)]), words * 8, q, 2, space));
          void* all = buf.out("state", state);
          for (int q = 0; q < n; ++q)
            if (q != me) reqs.push_back(c.isend(all, words * 8, q, 2, space));
          c.waitall(reqs);
          for (int q = 0; q < n; ++q)
            if (q != me) buf.back("got" + std::to_string(q), got[static_cast<std::size_t>(q)]);
          for (int q = 0; q < n; ++q)
            if (q != me) {
              in = got[static_cast<std::size_t>(q)];
              fold(q);
            }
        }
        if (mode == "late-receive" && n > 2) {
          // A message in flight across checkpoints: sent before version 2*every, received after version 3*every.
          // Whoever rolls back to a version in between, its sender (or the sender's replacement) owes it again.
          if (step == 2 * every - 1) {
            late_out = state;
            late = c.isend(buf.out("late", late_out), words * 8, (me + 2) % n, 5, space);
          }
          if (step == 3 * every + 2) {
            c.recv(buf.in("in", in), words * 8, (me + n - 2) % n, 5, space);
            buf.back("in", in);
            fold((me + n - 2) % n);
            if (late.pending()) c.wait(late);  // (none when this rank rolled back past the send)
          }
        }
        if (mode == "any-source") {
          // Receives from any rank (MPI_ANY_SOURCE): the two ranks before this one send it a small message (tag
          // `t`) and a large one (`t + 1`); it posts two receives of each from any rank and waits for the large ones
          // first (each arrives before its sender's small one is delivered: held until a receive from any rank
          // takes that). The rank two before also sends two messages of tag `t + 2`: a receive from any rank, then
          // a receive named for that rank, posted behind it (deferred: MPI matches in the order receives were
          // posted), get the first and the second. A receive from any rank of `t + 3`, which nobody sends, is
          // cancelled. What arrived is folded in whatever order the sources came. The tags are the step's: a rank
          // may run steps ahead of this one (a ring's wait is only for the rank before), and a receive from any
          // rank of a tag every step used could take a later step's message. --stall R:S:MS: rank R sleeps MS ms
          // before its receives of step S: killed meanwhile, the rank two before it sent messages of step S that
          // it takes only after the recovery, on the communicators of the epoch before it (dropped as stale: the
          // replacement sends them again).
          const int prev2 = (me + n - 2) % n, next2 = (me + 2) % n, t = 1000 + 4 * static_cast<int>(step);
          if (me == stall_rank && step == stall_step) {
            std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
            stall_step = steps;  // (once: not again after a rollback)
          }
          std::vector<std::uint64_t> small(4), large(words), seven_a(4), seven_b(4);
          for (std::size_t i = 0; i < small.size(); ++i) small[i] = mix(state[i] + 3);
          for (std::size_t i = 0; i < words; ++i) large[i] = mix(state[i] + 4);
          seven_a = {1, mix(state[0] + 7), 0, 0};
          seven_b = {2, mix(state[1] + 7), 0, 0};
          std::vector<std::vector<std::uint64_t>> got_small(2, std::vector<std::uint64_t>(4)),
              got_large(2, std::vector<std::uint64_t>(words));
          std::vector<std::uint64_t> got_a(4), got_b(4), nothing(1);
          std::vector<reprise::Comm::Match> ms(2), ml(2);
          reprise::Comm::Match ma, mnever;
          std::vector<reprise::Comm::Request> rs, rl;
          for (int k = 0; k < 2; ++k) {
            rs.push_back(c.irecv_range(got_small[k].data(), 32, MPI_ANY_SOURCE, t, t, ms[k]));
            rl.push_back(c.irecv_range(got_large[k].data(), words * 8, MPI_ANY_SOURCE, t + 1, t + 1, ml[k]));
          }
          reprise::Comm::Request ra = c.irecv_range(got_a.data(), 32, MPI_ANY_SOURCE, t + 2, t + 2, ma);
          reprise::Comm::Request rb = c.irecv(got_b.data(), 32, prev2, t + 2);
          reprise::Comm::Request never = c.irecv_range(nothing.data(), 8, MPI_ANY_SOURCE, t + 3, t + 3, mnever);
          std::vector<reprise::Comm::Request> sends;
          for (int q : {next, next2}) {
            sends.push_back(c.isend(small.data(), 32, q, t));
            sends.push_back(c.isend(large.data(), words * 8, q, t + 1));
          }
          sends.push_back(c.isend(seven_a.data(), 32, next2, t + 2));
          sends.push_back(c.isend(seven_b.data(), 32, next2, t + 2));
          if (!c.cancel(never))
            throw reprise::ProtocolError("a receive from any rank nobody sends to was not cancelled");
          c.wait(rl[1]);
          c.wait(rl[0]);
          c.wait(rb);
          c.waitall(rs);
          c.wait(ra);
          c.waitall(sends);
          const bool two = ms[0].source != ms[1].source && ml[0].source != ml[1].source;
          for (int k = 0; k < 2; ++k)
            if (!two || (ms[k].source != prev && ms[k].source != prev2) ||
                (ml[k].source != prev && ml[k].source != prev2) || ms[k].tag != t || ml[k].tag != t + 1)
              throw reprise::ProtocolError("receives from any rank got sources " + std::to_string(ms[0].source) + ", " +
                                           std::to_string(ms[1].source) + " (small) and " +
                                           std::to_string(ml[0].source) + ", " + std::to_string(ml[1].source) +
                                           " (large), expected " + std::to_string(prev) + " and " +
                                           std::to_string(prev2));
          if (ma.source != prev2 || ma.tag != t + 2 || got_a[0] != 1 || got_b[0] != 2)
            throw reprise::ProtocolError("a receive from any rank and one behind it named for rank " +
                                         std::to_string(prev2) + " got messages " + std::to_string(got_a[0]) +
                                         " (from " + std::to_string(ma.source) + ") and " + std::to_string(got_b[0]) +
                                         ", expected the first and the second");
          // (in the sources' order, whichever receive got which)
          for (std::size_t i = 0; i < words; ++i) in[i] = got_a[1] ^ (got_b[1] << 1);
          for (int k = 0; k < 2; ++k) {
            const std::uint64_t w = ms[k].source == prev ? 3 : 5, v = ml[k].source == prev ? 7 : 11;
            for (std::size_t i = 0; i < words; ++i) in[i] += mix(got_small[k][i % 4] * w) + mix(got_large[k][i] * v);
          }
          fold(prev);
        }
        if (mode == "any-source-range") {
          // Receives from any rank of a tag range (MPI_ANY_SOURCE with MPI_ANY_TAG under the interposition). The
          // two ranks before this one each send it first a message of tag `u + 10`, outside the range, then
          // messages of the range `u .. u + 7`: the rank before `u + 1` (small) and `u + 3` (large), the one two
          // before `u + 2`. Three receives from any rank of the range are tested until each found its message:
          // each had to pass its sender's `u + 10` first, which no receive is posted for yet, so Comm kept them
          // (`taken_ahead`, two a step), as MPI would keep them unmatched; then named receives of `u + 10` get
          // them. A receive from any rank of `u + 13 .. u + 15`, which nobody sends, is cancelled. Messages of
          // other tags (the ring's and the all-pairs round's of later steps, Comm's own collectives) found by
          // those receives are kept and taken the same way. Folded in whatever order the senders came.
          const int prev2 = (me + n - 2) % n, next2 = (me + 2) % n, u = 2000 + 16 * static_cast<int>(step);
          std::vector<std::uint64_t> other(4), one(4), three(words), two(4);
          for (std::size_t i = 0; i < 4; ++i) other[i] = mix(state[i] + 10), one[i] = mix(state[i] + 11);
          for (std::size_t i = 0; i < 4; ++i) two[i] = mix(state[i] + 12);
          for (std::size_t i = 0; i < words; ++i) three[i] = mix(state[i] + 13);
          std::vector<std::vector<std::uint64_t>> got(3, std::vector<std::uint64_t>(words)), got_other(2);
          std::vector<reprise::Comm::Match> mr(3);
          reprise::Comm::Match mnever;
          std::vector<std::uint64_t> nothing(1);
          reprise::Comm::Request never = c.irecv_range(nothing.data(), 8, MPI_ANY_SOURCE, u + 13, u + 15, mnever);
          std::vector<reprise::Comm::Request> sends, rr;
          for (int k = 0; k < 3; ++k)
            rr.push_back(c.irecv_range(got[k].data(), words * 8, MPI_ANY_SOURCE, u, u + 7, mr[k]));
          for (int q : {next, next2}) sends.push_back(c.isend(other.data(), 32, q, u + 10));
          sends.push_back(c.isend(one.data(), 32, next, u + 1));
          sends.push_back(c.isend(three.data(), words * 8, next, u + 3));
          sends.push_back(c.isend(two.data(), 32, next2, u + 2));
          std::vector<bool> done(3);
          for (bool found = false; !found;) {  // (a wait would find the u + 10 messages not received: an error)
            found = true;
            for (int k = 0; k < 3; ++k) {
              if (!done[k]) done[k] = c.test(rr[k]);
              found = found && mr[k].tag >= 0;
            }
          }
          std::vector<reprise::Comm::Request> ro;
          for (int k = 0; k < 2; ++k) {
            got_other[k].resize(4);
            ro.push_back(c.irecv(got_other[k].data(), 32, k == 0 ? prev : prev2, u + 10));
          }
          for (int k = 0; k < 3; ++k)
            if (!done[k]) c.wait(rr[k]);
          c.waitall(ro);
          c.waitall(sends);
          if (!c.cancel(never))
            throw reprise::ProtocolError("a receive from any rank of a range nobody sends to was not cancelled");
          int first_of_prev = -1;
          bool right = true;
          for (int k = 0; k < 3; ++k) {
            const bool from_prev = mr[k].source == prev && (mr[k].tag == u + 1 || mr[k].tag == u + 3);
            right = right && (from_prev || (mr[k].source == prev2 && mr[k].tag == u + 2));
            if (from_prev && first_of_prev < 0) right = right && mr[k].tag == u + 1, first_of_prev = k;
          }
          if (!right || mr[0].tag + mr[1].tag + mr[2].tag != 3 * u + 6)
            throw reprise::ProtocolError(
                "receives from any rank of tags " + std::to_string(u) + ".." + std::to_string(u + 7) + " got (" +
                std::to_string(mr[0].source) + ", " + std::to_string(mr[0].tag) + "), (" +
                std::to_string(mr[1].source) + ", " + std::to_string(mr[1].tag) + "), (" +
                std::to_string(mr[2].source) + ", " + std::to_string(mr[2].tag) + "), expected (" +
                std::to_string(prev) + ", " + std::to_string(u + 1) + ") before (" + std::to_string(prev) + ", " +
                std::to_string(u + 3) + ") and (" + std::to_string(prev2) + ", " + std::to_string(u + 2) + ")");
          for (std::size_t i = 0; i < words; ++i) {
            in[i] = mix(got_other[0][i % 4] * 3) + mix(got_other[1][i % 4] * 5);
            for (int k = 0; k < 3; ++k) {
              const std::uint64_t w = static_cast<std::uint64_t>(mr[k].tag - u);
              in[i] += mix((w == 3 ? got[k][i] : got[k][i % 4]) * (7 + w));
            }
          }
          fold(prev);
        }
        if (mode == "reserved-tag" && step == 1) c.send(in.data(), 8, (me + 1) % n, 32767);       // Comm's own
        if (mode == "dirty-channel" && step == every - 1 && me == 0) c.send(in.data(), 8, 1, 4);  // never received
        ++step;
        if (step % every == 0) {
          rt.checkpoint(step);
          inter_at_checkpoint.push_back(inter_messages());
        }
      }
      if (drift_receiver)
        for (std::uint64_t t = steps > late_steps ? steps - late_steps : 0; t < steps; ++t) drift_receive();
      for (auto& r : drift_sends)
        if (r.pending()) c.wait(r);
      std::uint64_t local = 0;
      for (std::uint64_t w : state) local = mix(local ^ w);
      // Sum of per-rank digests through Comm's own allreduce (exact in int64 arithmetic modulo 2^64).
      checksum = static_cast<std::uint64_t>(c.allreduce(static_cast<std::int64_t>(local >> 1), reprise::Comm::Op::Sum));
      rt.finish();
      break;
    } catch (const reprise::Rollback& r) {
      ++rollbacks;
      inter_at_checkpoint.clear();
      for (auto& r : drift_sends) forgotten.push_back(std::move(r));
      drift_sends.clear();
      if (r.from_start()) {
        init();
        step = 0;
      } else {
        rt.restore();
      }
      if (me == 0) std::printf("rolled back to step %" PRIu64 "\n", step), std::fflush(stdout);
    }
  }
  if (me == 0) {
    std::printf("ranks %d steps %" PRIu64 " rollbacks %d\n", n, steps, rollbacks);
    std::printf("checksum 0x%016" PRIx64 "\n", checksum);
    std::printf("comm rank 0 %s\n", c.stats_json().c_str());
  }
  // Every rank's memory against its budget (bench/memory_budget.py reads these lines), each in one write.
  std::printf("memory rank %d %s\n", me, rt.memory_json().c_str());
  std::fflush(stdout);
  // GC: the log holds only the messages sent since the third-last checkpoint (versions commit one checkpoint
  // later, the views reach the senders at the next one; see `behind`); older ones were released.
  // A run that took no checkpoint (relaunched from its last version, or rolled back to it) has nothing to
  // collect: it says so instead.
  const std::size_t k = inter_at_checkpoint.size();
  // Where every group restarts from one version (REPRISE_ROLLBACK=all, or REPRISE_DIR), the views wait for the
  // job floor (rank 0 gathers the groups' commits and sends the floor back; it applies at the next checkpoint):
  // two checkpoints more. Drift: a receiver sends nothing, so logs nothing; a sender's messages are delivered
  // late_steps later, and the receivers take their last checkpoint that long before the end.
  const reprise::Config& cfg = rt.config();
  const std::size_t behind = (!cfg.group_rollback || !cfg.dir.empty() ? 6 : 4) + (drift ? 2 + late_steps / every : 0);
  int ok = k == 0 || stat("channel_checks") > 0;
  if (k >= behind && !(drift && !drift_sender)) {
    const bool collected = stat("log_entries_released") > 0 &&
                           stat("log_live_entries") <= inter_messages() - inter_at_checkpoint[k - behind];
    if (!collected)
      std::printf(
          "rank %d: log not collected: %llu entries live, %llu released; %llu inter-group messages sent, "
          "%llu of them before the checkpoint %zu back (of %zu)\n",
          me, static_cast<unsigned long long>(stat("log_live_entries")),
          static_cast<unsigned long long>(stat("log_entries_released")),
          static_cast<unsigned long long>(inter_messages()),
          static_cast<unsigned long long>(inter_at_checkpoint[k - behind]), behind, k);
    ok = ok && collected;
  }
  // Log bound (REPRISE_LOG_BOUND): the runtime forced checkpoints, and the log stayed near the bound (it is held
  // in 1 MiB segments; a group learns it was asked at its next step and its commit releases the log one
  // checkpoint later).
  if (space == reprise::MemorySpace::Device) ok = ok && stat("device_messages") > 0;
  if (mode == "reorder" && stat("held_early") == 0) {  // every step holds one message early
    std::printf("rank %d: --mode reorder, yet no message was held early\n", me);
    ok = 0;
  }
  // The runtime warns of a bound too low when a log stays over it at 32 checks in a row (each forcing a
  // checkpoint): never with --bound held, on some rank with --bound too-low.
  // (Comm's own: REPRISE_LOG_BOUND's, or the one REPRISE_MEMORY_BUDGET sets)
  const std::size_t bound = static_cast<std::size_t>(stat("log_bound_bytes"));
  int too_low = bound && stat("log_over_bound_streak_max") >= 32;
  if (bound) {
    const std::size_t segment = std::size_t{1} << 20;  // the log's unit of memory: held_bytes counts segments
    const bool held = stat("forced_checkpoints") > 0 &&
                      stat("log_max_held_bytes") <= 2 * std::max(bound, segment) + (2u << 20) &&
                      (bound_too_low || !too_low);
    if (!held)
      std::printf(
          "rank %d: log bound %zu: forced %llu, log held at most %llu, over the bound at %llu checks in a "
          "row\n",
          me, bound, static_cast<unsigned long long>(stat("forced_checkpoints")),
          static_cast<unsigned long long>(stat("log_max_held_bytes")),
          static_cast<unsigned long long>(stat("log_over_bound_streak_max")));
    ok = ok && held;
  }
  if (within_budget) {
    const auto mem = nlohmann::json::parse(rt.memory_json());
    const std::size_t peak = mem["peak_bytes"].get<std::size_t>(), budget = mem["budget_bytes"].get<std::size_t>();
    const std::size_t segment = static_cast<std::size_t>(stat("log_segment_bytes"));
    const std::size_t told = mem["budget_told_bytes"].get<std::size_t>();
    if (or_told && peak > budget + segment && told > budget) {
      std::printf(
          "rank %d: memory peak %zu bytes, over its budget of %zu bytes by more than one log segment, "
          "and it said to raise the budget to %zu MiB\n",
          me, peak, budget, told >> 20);
    } else if (peak > budget + segment) {
      std::printf("rank %d: memory peak %zu bytes, over its budget of %zu bytes by more than one log segment (%zu)\n",
                  me, peak, budget, segment);
      ok = 0;
    }
  }
  rt.check(MPI_Allreduce(MPI_IN_PLACE, &too_low, 1, MPI_INT, MPI_MAX, rt.comm()));
  if (bound_too_low) ok = ok && too_low;
  rt.check(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, rt.comm()));
  int none = k == 0;
  rt.check(MPI_Allreduce(MPI_IN_PLACE, &none, 1, MPI_INT, MPI_MIN, rt.comm()));
  if (me == 0)
    std::printf(!ok    ? "comm: log not collected\n"
                : none ? "comm ok: no checkpoint since the restart on any rank, no log to collect\n"
                       : "comm ok: logs garbage-collected on every rank\n");
  if (me == 0 && bound && ok)
    std::printf(bound_too_low ? "log bound too low: a rank's log stayed over it, as expected\n"
                              : "log bound held on every rank\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    // A usage or protocol error is a bug of the program, not a failure to recover from: stop the whole job
    // (otherwise the other ranks would see this one as failed and replace it, and the replacement would fail
    // the same way).
    std::fprintf(stderr, "reprise-mpi-comm-check: rank error: %s\n", e.what());
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
