// How the interposition lays out the program's tags on its communicators among Comm's (the library's) tags, and
// the set of contexts (communicators) in use that the ranks of a new communicator agree on. No MPI here.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace reprise::interpose {

/// The most contexts (communicators of the program alive at once, MPI_COMM_WORLD's included) a layout gives.
inline constexpr int kMaxContexts = 1024;

/// How the program's tags on its communicators map to Comm's tags: context c's tag t is `base + c * per_context +
/// t`, the last of its range is its collectives'. Laid out at MPI_Init from the library's MPI_TAG_UB, which MPI
/// gives every process alike, around Comm's own tag 32767: with Open MPI's 2^31 - 1, 2^20 tags for each of
/// kMaxContexts contexts (the program's MPI_TAG_UB 1048574); with less, the MPI minimum of 32767 for as many
/// contexts as fit (at least 8); with the minimum itself, 2046 for 15 contexts below Comm's tag.
struct TagLayout {
  int base = 0;
  int per_context = 2048;
  int contexts = 15;
  int tag_ub() const { return per_context - 2; }  ///< the program's MPI_TAG_UB
  int wire(int context, int tag) const { return base + context * per_context + tag; }
  int collective(int context) const { return wire(context, per_context - 1); }
  /// Whether Comm's tag `wire` is one of the program's point-to-point tags (of some context), not a collective's.
  bool program_tag(int wire) const {
    const long long at = static_cast<long long>(wire) - base;
    return at >= 0 && at < static_cast<long long>(contexts) * per_context && at % per_context != per_context - 1;
  }
  /// The layout for a library whose MPI_TAG_UB is `library_tag_ub` (at least 32767).
  static TagLayout for_library(int library_tag_ub);
};

/// Contexts in use, one bit each: what the members of a new communicator reduce (MPI_BOR over its words) to agree on
/// one free at all of them. kMaxContexts / 8 bytes, whatever the job's size.
struct ContextSet {
  static constexpr std::size_t kWords = kMaxContexts / 64;
  std::array<std::uint64_t, kWords> words{};
  void add(int c) { words[static_cast<std::size_t>(c) / 64] |= std::uint64_t{1} << (c % 64); }
  void remove(int c) { words[static_cast<std::size_t>(c) / 64] &= ~(std::uint64_t{1} << (c % 64)); }
  bool has(int c) const { return (words[static_cast<std::size_t>(c) / 64] >> (c % 64) & 1u) != 0; }
  ContextSet& operator|=(const ContextSet& o) {
    for (std::size_t i = 0; i < kWords; ++i) words[i] |= o.words[i];
    return *this;
  }
  static ContextSet world() {
    ContextSet s;
    s.add(0);
    return s;
  }
};

inline TagLayout TagLayout::for_library(int library_tag_ub) {
  constexpr int kComms = 32767;  // Comm's own tag (its collectives)
  TagLayout t;                   // the MPI minimum: 15 contexts of 2048 tags below it
  const long long above = static_cast<long long>(library_tag_ub) - kComms;  // tags kComms + 1 ..
  // Wide ranges first, while they leave room for enough communicators.
  for (const auto& [per_context, at_least] : {std::pair{1 << 20, 64}, std::pair{32769, 8}}) {
    const long long fit = above / per_context;
    if (fit < at_least) continue;
    t.base = kComms + 1;
    t.per_context = per_context;
    t.contexts = static_cast<int>(std::min<long long>(fit, kMaxContexts));
    break;
  }
  return t;
}

}  // namespace reprise::interpose
