#include "protocol/capture_regions.hpp"

#include <algorithm>
#include <cstring>
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

std::pair<void*, std::size_t> LogRegion::locate(std::optional<std::size_t> bytes) {
  if (bytes) {
    bytes_.assign(*bytes, std::byte{0});  // restore() writes all of it
    size_ = *bytes;
    used_ = SIZE_MAX;
    compact_ = true;
  }
  return {bytes_.data(), bytes_.size()};
}

LogRegion::Plan LogRegion::plan(const Capture& c, std::size_t ranks) {
  settle();
  const std::vector<logging::Entry>& live = c.log.entries;
  // Released entries leave the map (their bytes stay, unchanged); new ones need room behind the others.
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
    offset_.clear();  // rewrite compactly from the start
    bump_ = kRegionHeader;
    compact_ = false;
    add = added();
  }
  const std::size_t need = bump_ + add + tail;
  // Room for growth (each change of size makes a full version): half as much again, in 64 KiB steps, and at least
  // twice the size it had. A region rewritten from the start that needs less than a quarter of its size shrinks to
  // half as much again as it needs (after a burst of messages the log is released, and every full version would
  // otherwise carry the burst's room, here and at the buddy). For a full version (fit_next) it takes that size when
  // it grows, or when that is at least a quarter smaller (not for less: a smaller region is new memory, a page fault
  // per 4 KiB on the checkpoint's background thread).
  constexpr std::size_t kStep = std::size_t{64} << 10;
  auto room = [&](std::size_t want) { return want <= kFirstSize ? kFirstSize : (want + kStep - 1) / kStep * kStep; };
  if (const std::size_t fitted = room(need + need / 2); fit && (need > size_ || 4 * fitted <= 3 * size_)) {
    size_ = fitted;
  } else if (need > size_) {
    size_ = room(std::max(need + need / 2, 2 * size_));
  } else if (all && need < size_ / 4) {
    size_ = std::min(size_, room(need + need / 2));
  }
  Pending w;
  w.capture = c;
  w.size = size_;
  w.ranks = ranks;
  const std::size_t from = bump_;
  for (const auto& e : live) {
    auto [it, fresh] = offset_.try_emplace({e.dest, e.seq}, bump_);
    if (fresh) bump_ += align64(e.bytes);
    w.offsets.push_back(it->second);
    w.fresh.push_back(fresh);
  }
  w.index = bump_;
  Plan p;
  p.bytes = size_;
  p.all = all;
  p.changed = {{0, kRegionHeader}, {from, bump_ + tail}};
  p.used = used_ = bump_ + tail;
  std::lock_guard<std::mutex> lock(mutex_);
  Pending& mine = pending_.emplace_back(std::move(w));
  p.write = [this, &mine] { return run(mine); };
  p.id = &mine;
  return p;
}

void LogRegion::abandon(const Plan& p) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Pending& w : pending_)
      if (&w == p.id) w.done = true;
  }
  compact_ = true;
  used_ = SIZE_MAX;
  settle();
}

LogRegion::Plan LogRegion::unchanged() {
  settle();
  Plan p;
  p.bytes = size_;
  p.used = used_;
  p.write = [this] { return bytes_.data(); };
  return p;
}

void LogRegion::write(const Capture& c, std::size_t ranks) {
  plan(c, ranks).write();
  settle();
}

void LogRegion::settle() {
  std::list<Pending> written;  // destroyed here, outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto at = it++;
    if (at->done) written.splice(written.end(), pending_, at);
  }
}

const std::byte* LogRegion::run(Pending& w) {
  if (w.size < bytes_.size())
    std::vector<std::byte>(w.size).swap(bytes_);  // shrunk (a rewrite from the start): its memory is returned
  else if (bytes_.size() != w.size)
    bytes_.resize(w.size, std::byte{0});
  std::byte* const base = bytes_.data();
  const std::vector<logging::Entry>& live = w.capture.log.entries;
  for (std::size_t i = 0; i < live.size(); ++i)
    if (w.fresh[i] && live[i].bytes) std::memcpy(base + w.offsets[i], live[i].data(), live[i].bytes);
  std::byte* p = base + w.index;
  auto put = [&p](std::uint64_t v) {
    std::memcpy(p, &v, 8);
    p += 8;
  };
  for (std::size_t i = 0; i < live.size(); ++i) {
    const logging::Entry& e = live[i];
    put(static_cast<std::uint64_t>(e.dest));
    put(e.seq);
    put(e.phase);
    put(static_cast<std::uint64_t>(static_cast<std::int64_t>(e.tag)));
    put(e.bytes);
    put(w.offsets[i]);
  }
  put(w.ranks);
  auto next = w.capture.orphan_record.begin();
  for (std::size_t q = 0; q < w.ranks; ++q) {
    if (next == w.capture.orphan_record.end() || next->first != static_cast<int>(q)) {
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
  const std::uint64_t end = static_cast<std::uint64_t>(p - base);
  const std::uint64_t header[6] = {
      kRegionMagic, w.index, live.size(), end, XXH3_64bits(base + w.index, end - w.index), 0};
  std::memcpy(base, header, sizeof header);
  std::lock_guard<std::mutex> lock(mutex_);
  w.done = true;
  return base;
}

void LogRegion::read(Capture& c, logging::MessageLog& log, std::size_t ranks) const {
  const std::byte* const base = bytes_.data();
  const std::size_t size = bytes_.size();
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
