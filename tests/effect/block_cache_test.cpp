// The devices' shared block cache (osprey/gpu/block_cache.hpp): what is handed out again, what is
// held while a recorded graph may still write it, what goes back beyond the limit, and the live
// byte counts that a run's peak memory is read from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "osprey/gpu/block_cache.hpp"

namespace {

using osprey::BlockCache;

void* block(std::uintptr_t at) { return reinterpret_cast<void*>(at * 4096); }

TEST(BlockCache, AReleasedBlockComesBackForItsSizeOnly) {
  BlockCache cache;
  cache.add(block(1), 4096);
  EXPECT_EQ(cache.release(block(1)).first, BlockCache::Released::Cached);
  EXPECT_EQ(cache.cachedBytes(), 4096u);
  EXPECT_FALSE(cache.take(8192).has_value());
  const auto again = cache.take(4096);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, block(1));
  EXPECT_EQ(cache.cachedBytes(), 0u);
  EXPECT_FALSE(cache.take(4096).has_value()) << "one block was handed out twice";
}

TEST(BlockCache, UnknownBlocksAreLeftAlone) {
  BlockCache cache;
  EXPECT_EQ(cache.release(block(7)).first, BlockCache::Released::Unknown);
  EXPECT_EQ(cache.cachedBytes(), 0u);
}

TEST(BlockCache, BeyondTheLimitABlockGoesBack) {
  BlockCache cache(6000);
  cache.add(block(1), 4096);
  cache.add(block(2), 4096);
  EXPECT_EQ(cache.release(block(1)).first, BlockCache::Released::Cached);
  const auto [what, bytes] = cache.release(block(2));
  EXPECT_EQ(what, BlockCache::Released::GiveBack);
  EXPECT_EQ(bytes, 4096u);
  EXPECT_EQ(cache.cachedBytes(), 4096u);
}

TEST(BlockCache, HeldBlocksStayLiveUntilTheHoldEnds) {
  BlockCache cache;
  cache.add(block(1), 4096);
  cache.add(block(2), 8192);
  (void)cache.hold(true);
  EXPECT_EQ(cache.release(block(1)).first, BlockCache::Released::Held);
  EXPECT_FALSE(cache.take(4096).has_value()) << "a held block was handed out";
  EXPECT_EQ(cache.peakLiveBytes(), 12288u);
  std::vector<const void*> held = cache.hold(false);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0], block(1));
  EXPECT_EQ(cache.release(block(1)).first, BlockCache::Released::Cached);
  EXPECT_TRUE(cache.take(4096).has_value());
}

TEST(BlockCache, ThePeakIsTheMostLiveAtOnce) {
  BlockCache cache;
  cache.add(block(1), 4096);
  cache.add(block(2), 4096);
  (void)cache.release(block(1));
  (void)cache.release(block(2));
  EXPECT_EQ(cache.peakLiveBytes(), 8192u);
  cache.resetPeak();
  EXPECT_EQ(cache.peakLiveBytes(), 0u);
  (void)cache.take(4096);
  EXPECT_EQ(cache.peakLiveBytes(), 4096u);
}

TEST(BlockCache, DrainingEmptiesTheCache) {
  BlockCache cache;
  for (std::uintptr_t i = 1; i <= 3; ++i) cache.add(block(i), 4096 * i);
  for (std::uintptr_t i = 1; i <= 3; ++i) (void)cache.release(block(i));
  const auto idle = cache.drain();
  std::size_t blocks = 0;
  for (const auto& [bytes, list] : idle) blocks += list.size();
  EXPECT_EQ(blocks, 3u);
  EXPECT_EQ(cache.cachedBytes(), 0u);
  EXPECT_FALSE(cache.take(4096).has_value());
}

}  // namespace
