#include "common/cache_bypass.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace chronoserve {
namespace {

std::vector<char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

// Every store copies exactly the bytes asked for, whatever the alignment and size, and touches
// nothing either side.
TEST(CacheBypassTest, EveryStoreCopiesExactlyTheBytesAtAnyAlignment) {
  const std::vector<char> src = RandomBytes(5000, 7);
  for (CacheStore store : kCacheStores) {
    for (size_t dst_offset : {0, 1, 15, 16, 63, 64}) {
      for (size_t src_offset : {0, 3}) {
        for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 1000, 4096}) {
          std::vector<char> dst(5200, '\x5a');
          CopyForDevice(dst.data() + dst_offset, src.data() + src_offset, n, store);
          const std::string where = std::string(CacheStoreName(store)) + " dst+" + std::to_string(dst_offset) +
                                    " src+" + std::to_string(src_offset) + " n=" + std::to_string(n);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[dst_offset + i], src[src_offset + i]) << where << " byte " << i;
          for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], '\x5a') << where << " before, byte " << i;
          for (size_t i = dst_offset + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], '\x5a') << where << " after, byte " << i;
        }
      }
    }
  }
}

// Evicting lines changes no byte, including lines shared with bytes outside the range.
TEST(CacheBypassTest, EvictingLeavesTheBytesAsTheyWere) {
  std::vector<char> bytes = RandomBytes(3000, 11);
  const std::vector<char> before = bytes;
  EvictFromCaches(bytes.data() + 5, 2000);
  EvictFromCaches(bytes.data(), 0);
  EXPECT_EQ(bytes, before);
}

TEST(CacheBypassTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (CacheStore store : kCacheStores) {
    CacheStore parsed = store == CacheStore::kCached ? CacheStore::kEvicted : CacheStore::kCached;
    ASSERT_TRUE(ParseCacheStore(CacheStoreName(store), &parsed)) << CacheStoreName(store);
    EXPECT_EQ(parsed, store);
  }
  CacheStore untouched = CacheStore::kStreaming;
  EXPECT_FALSE(ParseCacheStore("non-temporal", &untouched));
  EXPECT_FALSE(ParseCacheStore("", &untouched));
  EXPECT_EQ(untouched, CacheStore::kStreaming);
  EXPECT_EQ(CacheStoreNames(), (std::vector<std::string>{"cached", "streaming", "evicted"}));
}

}  // namespace
}  // namespace chronoserve
