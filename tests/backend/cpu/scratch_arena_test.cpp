// The scratch arena both backends use: rewinds reuse memory, a pass's chunks fold into
// one of its peak, and the same takes give the same addresses pass after pass.
#include "backend/scratch_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace zinc {
namespace {

struct CountingChunks {
  static constexpr size_t kAlign = 64;
  std::vector<size_t>* sizes;  // every chunk allocated, in order
  int* live;
  int* folds;
  void* allocate(size_t bytes) {
    sizes->push_back(bytes);
    ++*live;
    return std::aligned_alloc(kAlign, bytes);
  }
  void release(void* p) {
    --*live;
    std::free(p);
  }
  size_t chunk_size(size_t need, size_t /*last*/) const { return need > 1024 ? need : 1024; }
  void before_fold() { ++*folds; }
};

struct ArenaTest : ::testing::Test {
  std::vector<size_t> sizes;
  int live = 0, folds = 0;
  ScratchArena<CountingChunks> arena{CountingChunks{&sizes, &live, &folds}};
  uintptr_t at(void* p) { return reinterpret_cast<uintptr_t>(p); }
};

TEST_F(ArenaTest, RewindReusesWhatFollowsTheMark) {
  void* a = arena.take(100);  // 128 with the alignment
  const ScratchMark m = arena.mark();
  void* b = arena.take(200);
  EXPECT_EQ(at(b), at(a) + 128);
  arena.rewind(m);
  EXPECT_EQ(arena.take(64), b);
  EXPECT_EQ(sizes.size(), 1u);
}

TEST_F(ArenaTest, ChunksAheadOfARewindAreUsedAgain) {
  const ScratchMark start = arena.mark();
  arena.take(1000);
  void* second = arena.take(1000);  // does not fit beside the first: a new chunk
  ASSERT_EQ(sizes.size(), 2u);
  arena.rewind(start);
  arena.take(1000);
  EXPECT_EQ(arena.take(1000), second);
  EXPECT_EQ(sizes.size(), 2u);
}

TEST_F(ArenaTest, ResetFoldsThePassIntoOneChunkOfItsPeak) {
  for (int layer = 0; layer < 3; ++layer) {  // 3 layers of 1536 bytes, each given back
    const ScratchMark m = arena.mark();
    arena.take(1000);
    arena.take(512);
    arena.rewind(m);
  }
  std::vector<uintptr_t> first;
  EXPECT_TRUE(arena.reset());
  EXPECT_EQ(folds, 1);
  EXPECT_EQ(live, 1);
  EXPECT_EQ(arena.held_bytes(), 1024u + 512u);  // the peak, not 3 layers' worth
  // The same pass again: one chunk, the same addresses, nothing moves.
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<uintptr_t> got;
    for (int layer = 0; layer < 3; ++layer) {
      const ScratchMark m = arena.mark();
      got.push_back(at(arena.take(1000)));
      got.push_back(at(arena.take(512)));
      arena.rewind(m);
    }
    if (pass == 0) first = got;
    else EXPECT_EQ(got, first);
    EXPECT_EQ(got[0], got[2]);  // each layer at the same place
    EXPECT_FALSE(arena.reset());
  }
  EXPECT_EQ(sizes.size(), 3u);
}

}  // namespace
}  // namespace zinc
