#include "protocol/capture_regions.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpu/align.hpp"
#include "reprise/errors.hpp"

namespace reprise::protocol {

namespace {
constexpr std::uint64_t kRegionMagic = 0x31474552474f4c50ull;  // "PLOGREG1"
constexpr std::size_t kRegionHeader = 64, kIndexEntry = 48;
// Payloads start on cache lines: copies in and out of the region stay aligned.
std::size_t align64(std::size_t n) {
  return gpu::align_up(n, gpu::kCacheLine);
}
}  // namespace

std::pair<void*, std::size_t> CounterRegion::locate(std::optional<std::size_t> bytes) {
  if (bytes) words_.assign((*bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t), 0);  // restore writes it
  return {words_.data(), bytes ? *bytes : this->bytes()};
}

namespace {
// A channel the region keeps: one with a count or a view (the rest read back as zeros).
bool kept(const Channel& ch) {
  return ch.sent || ch.delivered || ch.view.delivered || ch.view.sent;
}
}  // namespace

void CounterRegion::write(const Process& p) {
  std::size_t k = 0;
  for (const auto& [r, ch] : p.channels()) k += kept(ch) ? 1 : 0;
  const std::size_t need = 2 + 5 * k;
  if (need > words_.size()) words_.resize((std::max(need, words_.size() + words_.size() / 2) + 63) / 64 * 64);
  std::fill(words_.begin(), words_.end(), 0);
  words_[0] = p.phase();
  words_[1] = k;
  std::size_t at = 2;
  for (const auto& [r, ch] : p.channels()) {
    if (!kept(ch)) continue;
    for (std::uint64_t w : {static_cast<std::uint64_t>(r), ch.sent, ch.delivered, ch.view.delivered, ch.view.sent})
      words_[at++] = w;
  }
}

Capture CounterRegion::read() const {
  Capture c;
  const auto bad = [&](const std::string& what) {
    return CorruptCheckpointError("region 'reprise.channels'",
                                  what + " (region of " + std::to_string(bytes()) + " bytes)");
  };
  if (words_.size() < 2) throw bad("truncated");
  c.phase = words_[0];
  const std::uint64_t k = words_[1];
  if (k > (words_.size() - 2) / 5) throw bad(std::to_string(k) + " channels recorded: truncated or damaged");
  for (std::size_t i = 0, at = 2; i < k; ++i, at += 5) {
    if (words_[at] >= ranks_)
      throw bad("a channel with rank " + std::to_string(words_[at]) + " in a job of " + std::to_string(ranks_) +
                " ranks");
    c.channels[static_cast<int>(words_[at])] =
        Channel{words_[at + 1], words_[at + 2], View{words_[at + 3], words_[at + 4]}};
  }
  return c;
}

// The region as of one plan: where every live payload, the index and the orphan record are (a capture's), or the
// bytes of a restored region. Immutable once planned, except for the header and the index and orphan record, which
// the first fill lays out (once, on the background thread: work in the number of entries).
struct LogRegion::Layout {
  std::size_t size = 0, used = SIZE_MAX;
  std::size_t index = 0, ranks = 0;                   // where the index goes; the orphan record's job size
  std::vector<logging::Entry> entries;                // the capture's (they keep its segments)
  std::vector<std::size_t> offsets;                   // per entry
  OrphanRecord orphans;                               // the capture's
  std::shared_ptr<const std::vector<std::byte>> raw;  // a restored region (no capture)
  bool planned = false;                               // false: no plan yet, all zeros

  void fill(std::size_t offset, std::size_t n, std::byte* dst) const;

 private:
  void lay_out() const;
  mutable std::once_flag laid_out_;
  mutable std::vector<std::byte> head_, tail_;  // the header; the index and orphan record (at `index`)
  mutable std::vector<std::size_t> order_;      // entries by offset
};

void LogRegion::Layout::lay_out() const {
  std::call_once(laid_out_, [this] {
    order_.resize(entries.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::sort(order_.begin(), order_.end(), [this](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
    auto put = [this](std::uint64_t v) {
      const auto* b = reinterpret_cast<const std::byte*>(&v);
      tail_.insert(tail_.end(), b, b + 8);
    };
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const logging::Entry& e = entries[i];
      put(static_cast<std::uint64_t>(e.dest));
      put(e.seq);
      put(e.phase);
      put(static_cast<std::uint64_t>(static_cast<std::int64_t>(e.tag)));
      put(e.bytes);
      put(offsets[i]);
    }
    put(ranks);
    auto next = orphans.begin();
    for (std::size_t q = 0; q < ranks; ++q) {
      if (next == orphans.end() || next->first != static_cast<int>(q)) {
        put(0);
        continue;
      }
      put(next->second.size());
      for (const auto& [seq, phase] : next->second) {
        put(seq);
        put(phase);
      }
      ++next;
    }
    const std::uint64_t header[6] = {
        kRegionMagic, index, entries.size(), index + tail_.size(), XXH3_64bits(tail_.data(), tail_.size()), 0};
    head_.assign(kRegionHeader, std::byte{0});
    std::memcpy(head_.data(), header, sizeof header);
  });
}

void LogRegion::Layout::fill(std::size_t offset, std::size_t n, std::byte* dst) const {
  const std::size_t end = offset + n;
  if (raw || !planned) {
    const std::size_t have = raw && offset < raw->size() ? std::min(end, raw->size()) - offset : 0;
    if (have) std::memcpy(dst, raw->data() + offset, have);
    std::memset(dst + have, 0, n - have);
    return;
  }
  lay_out();
  std::size_t at = offset;  // written up to here
  // The part of [from, from + bytes) inside the range, after zeros for the gap before it.
  const auto put = [&](std::size_t from, std::size_t bytes, const std::byte* src) {
    const std::size_t lo = std::max(from, at), hi = std::min(from + bytes, end);
    if (lo >= hi) return;
    std::memset(dst + (at - offset), 0, lo - at);
    std::memcpy(dst + (lo - offset), src + (lo - from), hi - lo);
    at = hi;
  };
  put(0, head_.size(), head_.data());
  // The first entry that ends after `offset` (entries are disjoint, in offset order).
  auto it = std::partition_point(order_.begin(), order_.end(),
                                 [&](std::size_t i) { return offsets[i] + entries[i].bytes <= offset; });
  for (; it != order_.end() && offsets[*it] < end; ++it) put(offsets[*it], entries[*it].bytes, entries[*it].data());
  put(index, tail_.size(), tail_.data());
  if (at < end) std::memset(dst + (at - offset), 0, end - at);
}

struct LogRegion::Dropped {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Layout>> layouts;
  void drop() {  // (the application's thread)
    std::vector<std::shared_ptr<const Layout>> gone;
    {
      std::lock_guard<std::mutex> lock(mutex);
      gone.swap(layouts);
    }
  }
};

LogRegion::LogRegion() : dropped_(std::make_shared<Dropped>()) {}

LogRegion::~LogRegion() {
  dropped_->drop();
}

// A plan's fill keeps its layout; when the last copy of the plan goes, the layout goes to `dropped_`, not away.
LogRegion::Plan LogRegion::plan_of(std::shared_ptr<const Layout> l) {
  struct Keep {
    Keep(std::shared_ptr<const Layout> l, std::shared_ptr<Dropped> d) : layout(std::move(l)), dropped(std::move(d)) {}
    Keep(const Keep&) = delete;
    Keep& operator=(const Keep&) = delete;
    std::shared_ptr<const Layout> layout;
    std::shared_ptr<Dropped> dropped;
    ~Keep() {
      std::lock_guard<std::mutex> lock(dropped->mutex);
      dropped->layouts.push_back(std::move(layout));
    }
  };
  Plan p;
  p.bytes = l->size;
  p.used = l->used;
  p.id = l.get();
  auto keep = std::make_shared<Keep>(std::move(l), dropped_);
  p.fill = [keep](std::size_t offset, std::size_t n, std::byte* dst) { keep->layout->fill(offset, n, dst); };
  return p;
}

std::pair<void*, std::size_t> LogRegion::locate(std::optional<std::size_t> bytes) {
  if (bytes) {
    restored_ = std::make_shared<std::vector<std::byte>>(*bytes, std::byte{0});  // restore() writes all of it
    size_ = *bytes;
    compact_ = true;
    auto l = std::make_shared<Layout>();
    l->size = size_;
    l->raw = restored_;
    last_ = std::move(l);
    before_last_.reset();
  } else if (!restored_ || restored_->size() != size_) {
    restored_ = std::make_shared<std::vector<std::byte>>(size_);
    if (last_) last_->fill(0, size_, restored_->data());
  }
  return {restored_->data(), restored_->size()};
}

LogRegion::Plan LogRegion::plan(const Capture& c, std::size_t ranks) {
  dropped_->drop();
  restored_.reset();  // (a layout made from it keeps it while a plan references that)
  const std::vector<logging::Entry>& live = c.log.entries;
  // Released entries leave the map (their holes stay); new ones need room behind the others.
  std::set<std::pair<int, std::uint64_t>> keys;
  for (const auto& e : live) keys.insert({e.dest, e.seq});
  for (auto it = offset_.begin(); it != offset_.end();) it = keys.count(it->first) ? std::next(it) : offset_.erase(it);
  std::size_t tail = 8;  // index and orphan record
  tail += 8 * ranks;     // an entry count per rank (the format predates the sparse record)
  for (const auto& [q, r] : c.orphan_record) tail += 16 * r.size();
  tail += kIndexEntry * live.size();
  auto added = [&] {
    std::size_t n = 0;
    for (const auto& e : live)
      if (!offset_.count({e.dest, e.seq})) n += align64(e.bytes);
    return n;
  };
  std::size_t add = added();
  const bool fit = std::exchange(fit_, false);
  const bool all = compact_ || bump_ + add + tail > size_;
  if (all) {
    offset_.clear();  // lay out compactly from the start
    bump_ = kRegionHeader;
    compact_ = false;
    add = added();
  }
  const std::size_t need = bump_ + add + tail;
  // Room for growth (each change of size makes a full version): half as much again, in 64 KiB steps, and at least
  // twice the size it had. A region laid out from the start that needs less than a quarter of its size shrinks to
  // half as much again as it needs (after a burst of messages the log is released, and every full version would
  // otherwise carry the burst's room, here and at the buddy). For a full version (fit_next) it takes that size when
  // it grows, or when that is at least a quarter smaller.
  constexpr std::size_t kStep = std::size_t{64} << 10;
  auto room = [&](std::size_t want) { return want <= kFirstSize ? kFirstSize : (want + kStep - 1) / kStep * kStep; };
  if (const std::size_t fitted = room(need + need / 2); fit && (need > size_ || 4 * fitted <= 3 * size_)) {
    size_ = fitted;
  } else if (need > size_) {
    size_ = room(std::max(need + need / 2, 2 * size_));
  } else if (all && need < size_ / 4) {
    size_ = std::min(size_, room(need + need / 2));
  }
  auto l = std::make_shared<Layout>();
  l->size = size_;
  l->ranks = ranks;
  l->entries = live;
  l->orphans = c.orphan_record;
  l->planned = true;
  const std::size_t from = bump_;
  for (const auto& e : live) {
    auto [it, fresh] = offset_.try_emplace({e.dest, e.seq}, bump_);
    if (fresh) bump_ += align64(e.bytes);
    l->offsets.push_back(it->second);
  }
  l->index = bump_;
  l->used = bump_ + tail;
  before_last_ = std::exchange(last_, l);
  Plan p = plan_of(std::move(l));
  p.all = all;
  p.changed = {{0, kRegionHeader}, {from, bump_ + tail}};
  return p;
}

void LogRegion::abandon(const Plan& p) {
  if (last_ && p.id == last_.get()) {
    last_ = std::move(before_last_);
    before_last_.reset();
    if (last_) size_ = last_->size;
  }
  compact_ = true;
}

std::size_t LogRegion::held_bytes() const {
  std::size_t n = restored_ ? restored_->size() : 0;
  for (const auto* l : {last_.get(), before_last_.get()})  // (one of them at most, after a restore)
    if (l && l->raw && l->raw != restored_) n += l->raw->size();
  return n;
}

LogRegion::Plan LogRegion::unchanged() {
  dropped_->drop();
  std::shared_ptr<Layout> blank;
  if (!last_) {
    blank = std::make_shared<Layout>();
    blank->size = size_;
  }
  Plan p = plan_of(last_ ? last_ : std::move(blank));
  p.id = nullptr;
  return p;
}

void LogRegion::read(Capture& c, logging::MessageLog& log, std::size_t ranks) const {
  const std::byte* const base = restored_ ? restored_->data() : nullptr;
  const std::size_t size = restored_ ? restored_->size() : 0;
  auto corrupt = [&](const std::string& what) {
    return CorruptCheckpointError("region 'reprise.log'", what + " (region of " + std::to_string(size) + " bytes)");
  };
  std::uint64_t h[6] = {};
  if (size < kRegionHeader) throw corrupt("truncated header");
  std::memcpy(h, base, sizeof h);
  if (h[0] != kRegionMagic) throw corrupt("not a message log region (bad magic)");
  const std::uint64_t index = h[1], count = h[2], end = h[3];
  if (index < kRegionHeader || end > size || index > end || (end - index) / kIndexEntry < count)
    throw corrupt("index out of bounds");
  if (XXH3_64bits(base + index, end - index) != h[4]) throw corrupt("index checksum mismatch");
  std::size_t at = index;
  auto get = [&]() {
    if (end - at < 8) throw corrupt("truncated index");
    std::uint64_t v = 0;
    std::memcpy(&v, base + at, 8);
    at += 8;
    return v;
  };
  c.log.entries.clear();
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto dest = static_cast<int>(get());
    const std::uint64_t seq = get(), phase = get();
    const auto tag = static_cast<std::int32_t>(static_cast<std::int64_t>(get()));
    const std::uint64_t bytes = get(), offset = get();
    if (offset < kRegionHeader || offset > index || bytes > index - offset)
      throw corrupt("entry " + std::to_string(i) + " outside the payload area");
    c.log.entries.push_back(log.copy_in(dest, seq, phase, tag, base + offset, static_cast<std::size_t>(bytes)));
  }
  const std::uint64_t want = get();
  if (ranks != want)
    throw corrupt("an orphan record for " + std::to_string(want) + " ranks in a job of " + std::to_string(ranks) +
                  " (a version of another job?)");
  c.orphan_record.clear();
  for (std::size_t q = 0; q < ranks; ++q) {
    const std::uint64_t k = get();
    if (k > (end - at) / 16) throw corrupt("an orphan record of " + std::to_string(k) + " entries does not fit");
    if (k == 0) continue;
    auto& r = c.orphan_record[static_cast<int>(q)];
    for (std::uint64_t i = 0; i < k; ++i) {
      const std::uint64_t seq = get();
      r.emplace_back(seq, get());
    }
  }
}

}  // namespace reprise::protocol
