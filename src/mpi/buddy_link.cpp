// The buddy level over MPI: the owner ships each version to its buddy while the drain fills it (Stream), the
// buddy's progress thread receives and stores its wards' versions and acknowledges them.
#include "mpi/buddy_link.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <utility>

#include "core/format.hpp"
#include "core/thread_name.hpp"
#include "mpi/coordination.hpp"
#include "mpi/polled.hpp"
#include "mpi/version_wire.hpp"
#include "reprise/errors.hpp"

namespace reprise::mpi {

// A version streamed to the buddy while the drain fills it: the head at once, each piece (in order) as soon
// as it and every piece before it are in host memory, non-blocking so the drain goes on; the trailer with the
// checksum and the wait for the acknowledgement at finish().
class BuddyLink::Stream : public protocol::ShipStream {
 public:
  Stream(MpiCoordination& c, const core::Manifest& m, std::shared_ptr<const core::HostBytes> payload)
      : c_(c),
        m_(m),
        payload_(std::move(payload)),
        data_(c.data_),
        buddy_(c.layout_.buddy_of(c.rank_)),
        frontier_(payload_->size(), kPieceBytes),
        die_mid_(c.should_die(m.version, protocol::KillPoint::Drain)),
        head_(std::make_shared<const std::vector<std::byte>>(core::encode_head(m, 0))) {  // (checksum: in the trailer)
    if (c_.down_) {
      dead_ = true;
      return;
    }
    c_.buddy_.expect_ward();
    // The head is not waited for: larger than an eager message (the chunks' digests), it completes only once the
    // buddy's progress thread took it, and the pieces would wait for that round trip before being posted.
    guarded([&] {
      MPI_Request r = MPI_REQUEST_NULL;
      REPRISE_MPI_CHECK(
          MPI_Isend(head_->data(), static_cast<int>(head_->size()), MPI_BYTE, buddy_, kPutHead, data_, &r));
      requests_.push_back(r);
    });
  }
  ~Stream() override { abandon(); }

  void ready(std::size_t offset, std::size_t bytes) override {
    const std::size_t go = frontier_.add(offset, bytes);
    guarded([&] {
      post(go);
      while (!requests_.empty()) {  // progress for what is in flight; pieces complete in order
        int flag = 0;
        REPRISE_MPI_CHECK(MPI_Test(&requests_.front(), &flag, MPI_STATUS_IGNORE));
        if (!flag) break;
        requests_.pop_front();
      }
    });
  }

  void finish(std::uint64_t checksum) override {
    guarded([&] {
      post(frontier_.pieces());
      if (posted_ < frontier_.pieces())
        throw Error("version " + std::to_string(m_.version) + " was finished before its payload was whole");
      for (auto& r : requests_) REPRISE_MPI_CHECK(polled::wait(r));
      requests_.clear();
      if (die_mid_) c_.die("drain", m_.version);  // (a version without pieces)
      REPRISE_MPI_CHECK(polled::send(&checksum, 1, MPI_UINT64_T, buddy_, kPutPiece, data_));
      std::uint64_t v = 0;
      REPRISE_MPI_CHECK(polled::recv(&v, 1, MPI_UINT64_T, buddy_, kAck, c_.ack_, MPI_STATUS_IGNORE));
      if (v == kRefused) {  // damaged on the way: once more, whole
        std::fprintf(stderr, "reprise: rank %d: version %llu reached buddy rank %d damaged; sending it again\n",
                     c_.rank_, static_cast<unsigned long long>(m_.version), buddy_);
        send_version(data_, buddy_, kPutHead, kPutPiece, m_, *payload_, checksum);
        REPRISE_MPI_CHECK(polled::recv(&v, 1, MPI_UINT64_T, buddy_, kAck, c_.ack_, MPI_STATUS_IGNORE));
        if (v == kRefused)
          throw Error("rank " + std::to_string(c_.rank_) + "'s version " + std::to_string(m_.version) +
                      " reached its buddy rank " + std::to_string(buddy_) +
                      " damaged twice (its payload did not match its checksum there): the memory or the link "
                      "between ranks " +
                      std::to_string(c_.rank_) + " and " + std::to_string(buddy_) +
                      " corrupts data. The version is not committed; earlier committed versions are intact");
      }
      if (v != kRefused && (v & kOverBudget)) c_.buddy_over_budget_ = true;  // (from then on: one chain kept)
      acked_ = (v & ~kOverBudget) == m_.version;
    });
  }

  bool acknowledged() const override { return acked_; }
  std::size_t handed_on() const override { return handed_; }
  bool streams() const override { return true; }

 private:
  template <class F>
  void guarded(F&& f) {
    if (dead_) return;
    try {
      f();
    } catch (const PeerFailure&) {
      dead_ = true;
      if (data_ == c_.data_) c_.link_down("buddy ship");  // old news when a repair replaced the communicator
      abandon();
    }
  }
  void post(std::size_t upto) {
    for (; posted_ < upto; ++posted_) {
      const std::size_t n = frontier_.piece_bytes(posted_);
      MPI_Request r = MPI_REQUEST_NULL;
      REPRISE_MPI_CHECK(MPI_Isend(payload_->data() + frontier_.piece_offset(posted_), static_cast<int>(n), MPI_BYTE,
                                  buddy_, kPutPiece, data_, &r));
      requests_.push_back(r);
      handed_ += n;
      if (die_mid_) {  // drain: die once part of the version reached the buddy
        REPRISE_MPI_CHECK(polled::wait(requests_.back()));
        c_.die("drain", m_.version);
      }
    }
  }
  // After a failure: sends still in flight on the revoked communicator complete with an error; one that does
  // not keeps the head and the payload alive for good (MPI may still read them).
  void abandon() {
    bool pending = false;
    for (auto& r : requests_) {
      for (int i = 0; i < 20000 && r != MPI_REQUEST_NULL; ++i) {
        int flag = 0;
        if (MPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) r = MPI_REQUEST_NULL;
      }
      pending = pending || r != MPI_REQUEST_NULL;
    }
    requests_.clear();
    if (!pending) return;
    static std::mutex m;
    static std::vector<std::shared_ptr<const void>> kept;
    std::lock_guard<std::mutex> lock(m);
    kept.push_back(payload_);
    kept.push_back(head_);
  }

  MpiCoordination& c_;
  core::Manifest m_;
  std::shared_ptr<const core::HostBytes> payload_;
  MPI_Comm data_;
  int buddy_;
  core::PieceFrontier frontier_;
  bool die_mid_;
  std::shared_ptr<const std::vector<std::byte>> head_;  // (sent without waiting: kept as the payload is)
  bool dead_ = false, acked_ = false;
  std::size_t posted_ = 0, handed_ = 0;
  std::deque<MPI_Request> requests_;  // the head and the pieces in flight, oldest first
};

// The owner side of the buddy link (background thread).
class BuddyLink::Link : public protocol::Shipper {
 public:
  explicit Link(MpiCoordination& c) : c_(c) {}
  // A whole version: streamed with every byte ready (the payload outlives the call; not owned here).
  bool ship(const core::Manifest& m, const core::HostBytes& payload, std::uint64_t checksum) override {
    Stream st(c_, m, std::shared_ptr<const core::HostBytes>(std::shared_ptr<void>(), &payload));
    st.ready(0, payload.size());
    st.finish(checksum);
    return st.acknowledged();
  }
  std::unique_ptr<protocol::ShipStream> stream(const core::Manifest& m,
                                               std::shared_ptr<const core::HostBytes> payload) override {
    return std::make_unique<Stream>(c_, m, std::move(payload));
  }
  void release(std::uint64_t version) override {
    if (c_.down_) return;
    try {
      const int buddy = c_.layout_.buddy_of(c_.rank_);
      const MPI_Comm data = c_.data_;
      try {
        REPRISE_MPI_CHECK(polled::send(&version, 1, MPI_UINT64_T, buddy, kRelease, data));
      } catch (const PeerFailure&) {
        if (data == c_.data_) c_.link_down("buddy release");
      }
    } catch (const PeerFailure&) {
    }
  }

 private:
  MpiCoordination& c_;
};

// The store of this rank's versions: its own (memory or files) and, through the link, its buddy's copy.
std::unique_ptr<protocol::BuddyStore> BuddyLink::make_store(std::unique_ptr<core::VersionStore> local) {
  if (job_.layout_.has_buddies())
    shipper_ = std::make_shared<Link>(job_);
  else
    shipper_ = std::make_shared<protocol::FilesOnly>();  // one node, files only
  return std::make_unique<protocol::BuddyStore>(std::move(local), shipper_);
}

void BuddyLink::start() {
  stop_ = false;
  progress_ = core::named_thread("reprise-buddy", [this] { progress_loop(); });
}

void BuddyLink::stop() {
  stop_ = true;
  hurry();
  if (progress_.joinable()) progress_.join();
}

core::VersionStore& BuddyLink::ward_store(int ward) {
  std::lock_guard<std::mutex> lock(wards_mutex_);
  auto& s = wards_[ward];
  if (!s) s = core::make_memory_store();
  return *s;
}

void BuddyLink::hurry() {
  {
    std::lock_guard<std::mutex> lock(poll_mutex_);
    poll_soon_ = true;
  }
  poll_cv_.notify_one();
}

void BuddyLink::expect_ward() {
  {
    std::lock_guard<std::mutex> lock(poll_mutex_);
    poll_soon_ = true;
    fast_window_ = true;
  }
  poll_cv_.notify_one();
}

void BuddyLink::progress_loop() {
  auto poll = kPollMin;
  auto fast_until = std::chrono::steady_clock::time_point{};
  for (;;) try {
      while (!stop_) {
        int flag = 0;
        MPI_Status st;
        REPRISE_MPI_CHECK(probe_any_source(job_.data_, MPI_ANY_TAG, &flag, &st));
        if (!flag) {
          std::unique_lock<std::mutex> lock(poll_mutex_);
          if (poll_cv_.wait_for(lock, poll, [this] { return poll_soon_; })) {
            poll_soon_ = false;
            poll = kPollMin;
            if (std::exchange(fast_window_, false)) fast_until = std::chrono::steady_clock::now() + kFastWindow;
          } else if (std::chrono::steady_clock::now() < fast_until) {
            poll = kPollMin;  // a ward's version is due: noticed at most kPollMin late
          } else {
            poll = std::min(poll * 2, kPollMax);
          }
          continue;
        }
        poll = kPollMin;
        const int src = st.MPI_SOURCE;
        if (st.MPI_TAG == kRelease) {
          std::uint64_t v = 0;
          REPRISE_MPI_CHECK(polled::recv(&v, 1, MPI_UINT64_T, src, kRelease, job_.data_, MPI_STATUS_IGNORE));
          ward_store(src).release(v);
        } else if (st.MPI_TAG == kFloorReport) {
          job_.commit_.on_floor_report(src);
        } else if (st.MPI_TAG == kFloor) {
          std::uint64_t floor[2] = {0, 0};  // {floor, mark}
          REPRISE_MPI_CHECK(polled::recv(floor, 2, MPI_UINT64_T, src, kFloor, job_.data_, MPI_STATUS_IGNORE));
          job_.commit_.on_floor(floor[0], floor[1]);
        } else if (st.MPI_TAG == kPutHead) {
          fast_until = {};  // it came
          bool reused = false, passed_over = false;
          ReceiveCheck check;
          check.verify = true;
          check.damage = [&](const core::Manifest& m) { return corrupt_due(src, m.version); };
          struct Arrived {  // (also when the receive throws)
            std::atomic<std::size_t>& bytes;
            ~Arrived() { bytes = 0; }
          } arrived{arriving_};
          Received r =
              recv_version(job_.data_, src, kPutHead, kPutPiece, "version shipped by rank " + std::to_string(src),
                           ward_pool_, &reused, &passed_over, check, &arriving_);
          ++(reused ? reused_ : fresh_);
          if (passed_over) ++passed_over_;
          const std::uint64_t v = r.manifest.version;
          // Verified before it is acknowledged (checked chunk by chunk as it came): a damaged copy is refused (the
          // owner sends it once more).
          if (!r.damage.empty()) {
            std::fprintf(stderr, "reprise: rank %d: version %llu from rank %d arrived damaged (%s): refused\n",
                         job_.rank_, static_cast<unsigned long long>(v), src, r.damage.c_str());
            REPRISE_MPI_CHECK(polled::send(&kRefused, 1, MPI_UINT64_T, src, kAck, job_.ack_));
            continue;
          }
          const std::size_t bytes = r.payload->size();
          const bool full = r.manifest.kind == core::VersionKind::Full;
          const std::uint32_t chain_index = r.manifest.chain_index;
          // Over half the budget the copy holds only its own pages, as the owner's stored version does (the
          // runtime's release_unused): the buffer it came into may have served a larger version.
          if (job_.over_half_budget_with_wards(memory_bytes())) r.payload->release_unused();
          {
            core::VersionStore& store = ward_store(src);
            std::lock_guard<std::mutex> lock(wards_mutex_);  // (counted once: in the store, not as arriving)
            store.put(r.manifest, std::move(r.payload), r.checksum);
            arriving_ = 0;
          }
          // Over the memory budget, its wards' copies included: the owner is told (it keeps one chain, so these
          // copies shrink as it releases the others), and the receive buffers kept for reuse go.
          const bool over = job_.over_budget_with_wards(memory_bytes());
          const std::uint64_t ack = over ? v | kOverBudget : v;
          REPRISE_MPI_CHECK(polled::send(&ack, 1, MPI_UINT64_T, src, kAck, job_.ack_));
          // After the acknowledgement (the owner's commit does not wait for it): the buffer the ward's next
          // version will need, touched now rather than page by page as it arrives (the owner's runtime does the
          // same for its own versions; without it a full version after a chain of small ones, 256 MiB, was
          // received into fresh memory: 1.3 s to commit instead of 0.2 s on the 2-core VM). Over the budget: fewer
          // kept instead.
          auto& [last_full, last_diff] = ward_sizes_[src];
          (full ? last_full : last_diff) = bytes;
          const std::size_t next = chain_index + 1 >= job_.cfg_.full_every ? last_full : last_diff;
          if (over) {
            fit_budget();
          } else if (next > 0) {  // (not made without room in the budget: BufferPool::NewMemory)
            try {
              ward_pool_->prepare(next);
            } catch (const std::bad_alloc&) {  // received into fresh memory then
            }
          }
        } else {
          // A piece without its head cannot happen on a FIFO channel; drop it loudly.
          std::fprintf(stderr, "reprise: rank %d: unexpected message tag %d from rank %d\n", job_.rank_, st.MPI_TAG,
                       src);
          char sink;
          REPRISE_MPI_CHECK(polled::recv(&sink, 0, MPI_BYTE, src, st.MPI_TAG, job_.data_, MPI_STATUS_IGNORE));
        }
      }
      return;
    } catch (const PeerFailure& f) {
      if (job_.spurious(f.rc) && !stop_) continue;  // a spurious wake-up of a blocking call: go on polling
      if (job_.trace_)
        std::fprintf(stderr, "reprise: rank %d: progress thread: %s (epoch %u)\n", job_.rank_, mpi_error(f.rc).c_str(),
                     job_.recovery_.epoch());
      job_.link_down("progress thread");
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprise: rank %d: buddy progress thread stopped: %s\n", job_.rank_, e.what());
      job_.link_down("progress thread error");
      return;
    }
}

// REPRISE_CORRUPT_SHIPPED=OWNER:VERSION[:TIMES] (tests): this rank, OWNER's buddy, flips a byte of the first TIMES
// (default 1) copies of that version it receives, as a faulty link would.
bool BuddyLink::corrupt_due(int owner, std::uint64_t version) {
  static const char* spec = std::getenv("REPRISE_CORRUPT_SHIPPED");
  if (!spec) return false;
  int o = -1, times = 1;
  unsigned long long v = 0;
  if (std::sscanf(spec, "%d:%llu:%d", &o, &v, &times) < 2 || o != owner || v != version) return false;
  return corrupted_++ < times;
}

void BuddyLink::for_each_ward(const std::function<void(int, core::VersionStore&)>& f) {
  std::lock_guard<std::mutex> lock(wards_mutex_);
  for (auto& [ward, store] : wards_) f(ward, *store);
}

std::size_t BuddyLink::copies_bytes() {
  std::lock_guard<std::mutex> lock(wards_mutex_);
  std::size_t n = arriving_;
  for (auto& [ward, store] : wards_) n += store->memory_bytes();
  return n;
}

BuddyLink::BuddyLink(MpiCoordination& job) : job_(job) {
  ward_pool_->on_new_memory([this](std::size_t bytes, bool head_start) { return job_.make_room(bytes, head_start); },
                            [this](std::size_t bytes) { job_.memory_counted(bytes); });
}

std::size_t BuddyLink::shed(std::size_t bytes) {
  const std::size_t held = ward_pool_->held_bytes();
  if (held == 0 || bytes == 0) return 0;
  ward_pool_->trim(held > bytes ? held - bytes : 0);
  const std::size_t left = ward_pool_->held_bytes();
  return held > left ? held - left : 0;
}

std::size_t BuddyLink::memory_bytes() {
  return ward_pool_->held_bytes() + copies_bytes();
}

// The receive buffers kept for the wards' next versions, trimmed to what the budget leaves beside the copies: the
// next version is then received into new memory (a page fault per 4 KiB on the progress thread).
void BuddyLink::fit_budget() {
  const std::size_t copies = copies_bytes();
  const std::size_t room = job_.room_for_wards(), keep = room > copies ? room - copies : 0;
  // (Also when make_room() gave every kept buffer up already: released copies would fill the pool again.)
  ward_pool_->limit(keep);
  if (!std::exchange(trim_warned_, true))
    std::fprintf(stderr,
                 "reprise: rank %d: warning: the buffers kept to receive its wards' versions were limited to %zu MiB "
                 "by its memory budget (REPRISE_MEMORY_BUDGET), which its copies of their versions count against, "
                 "for the rest of the run: their next versions are received into new memory; raise "
                 "REPRISE_MEMORY_BUDGET\n",
                 job_.rank_, (keep + (std::size_t{1} << 19)) >> 20);
}

void BuddyLink::drop_wards() {
  std::lock_guard<std::mutex> lock(wards_mutex_);
  wards_.clear();
}

nlohmann::json BuddyLink::json() {
  nlohmann::json wards = nlohmann::json::object();
  for_each_ward([&](int ward, core::VersionStore& s) { wards[std::to_string(ward)] = s.list(); });
  return {{"wards", wards},
          {"receive_buffers",
           {{"fresh", fresh_.load()},
            {"reused", reused_.load()},
            {"fresh_while_pool_kept", passed_over_.load()},
            {"pooled_bytes", ward_pool_->held_bytes()}}}};
}

}  // namespace reprise::mpi
