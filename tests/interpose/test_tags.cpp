// The interposition's tag layout (src/interpose/tags.hpp) for the MPI_TAG_UB of each kind of library: every
// context's tags, its collectives' included, inside the library's range and clear of Comm's own tag 32767; the
// context set's words.
#include <gtest/gtest.h>

#include "interpose/tags.hpp"

namespace {

using reprise::interpose::ContextSet;
using reprise::interpose::kMaxContexts;
using reprise::interpose::TagLayout;

// Every wire tag of every context is in 0..ub, none is 32767, and contexts do not overlap.
void expect_fits(const TagLayout& t, int ub) {
  ASSERT_GE(t.contexts, 8);
  for (int c = 0; c < t.contexts; ++c) {
    const long long first = t.wire(c, 0), last = t.collective(c);
    EXPECT_GE(first, 0);
    EXPECT_LE(last, ub) << "context " << c;
    EXPECT_FALSE(first <= 32767 && 32767 <= last) << "context " << c << " holds Comm's tag";
    if (c > 0) {
      EXPECT_EQ(first, t.collective(c - 1) + 1LL);
    }
  }
}

TEST(TagLayout, OpenMpiGivesMpiTagRangeAndManyCommunicators) {
  const int ub = 2147483647;  // Open MPI 5 (and 4)
  const TagLayout t = TagLayout::for_library(ub);
  EXPECT_EQ(t.tag_ub(), (1 << 20) - 2);
  EXPECT_EQ(t.contexts, kMaxContexts);
  expect_fits(t, ub);
}

TEST(TagLayout, SmallerLibraryKeepsMpisMinimumTagUb) {
  const int ub = (1 << 19) - 1;  // a library with 19 bits of tags
  const TagLayout t = TagLayout::for_library(ub);
  EXPECT_EQ(t.tag_ub(), 32767);  // the MPI standard's minimum
  EXPECT_EQ(t.contexts, 14);
  expect_fits(t, ub);
  const TagLayout wide = TagLayout::for_library(32767 + 64 * (1 << 20));  // just room for 64 wide contexts
  EXPECT_EQ(wide.tag_ub(), (1 << 20) - 2);
  EXPECT_EQ(wide.contexts, 64);
  expect_fits(wide, 32767 + 64 * (1 << 20));
}

TEST(TagLayout, MinimumLibraryFallsBackBelowCommsTag) {
  const TagLayout t = TagLayout::for_library(32767);
  EXPECT_EQ(t.base, 0);
  EXPECT_EQ(t.tag_ub(), 2046);
  EXPECT_EQ(t.contexts, 15);
  expect_fits(t, 32767);
}

TEST(ContextSet, AddRemoveAcrossWords) {
  ContextSet s = ContextSet::world();
  EXPECT_TRUE(s.has(0));
  s.add(63);
  s.add(64);
  s.add(kMaxContexts - 1);
  EXPECT_TRUE(s.has(63) && s.has(64) && s.has(kMaxContexts - 1));
  EXPECT_FALSE(s.has(65));
  s.remove(64);
  EXPECT_FALSE(s.has(64));
  ContextSet other;
  other.add(200);
  s |= other;
  EXPECT_TRUE(s.has(200) && s.has(63));
}

}  // namespace
