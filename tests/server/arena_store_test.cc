#include "server/core/arena_store.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace chronoserve::server {
namespace {

TEST(ArenaStoreTest, FixedWaysStoreAsTheirCacheStoreAndAdaptiveBackToBackIsCached) {
  EXPECT_EQ(FixedStore(ArenaStore::kCached), CacheStore::kCached);
  EXPECT_EQ(FixedStore(ArenaStore::kStreaming), CacheStore::kStreaming);
  EXPECT_EQ(FixedStore(ArenaStore::kEvicted), CacheStore::kEvicted);
  EXPECT_EQ(FixedStore(ArenaStore::kAdaptive), CacheStore::kCached);
  // Each CacheStore has exactly one fixed way, named alike.
  for (CacheStore store : kCacheStores) {
    ArenaStore way = ArenaStore::kAdaptive;
    ASSERT_TRUE(ParseArenaStore(CacheStoreName(store), &way)) << CacheStoreName(store);
    EXPECT_NE(way, ArenaStore::kAdaptive);
    EXPECT_EQ(FixedStore(way), store) << CacheStoreName(store);
  }
}

TEST(ArenaStoreTest, AdaptiveStreamsOnlyTheFirstWriteAfterAnIdleSpell) {
  EXPECT_EQ(AdaptiveStoreFor(0), CacheStore::kCached) << "two requests at once";
  EXPECT_EQ(AdaptiveStoreFor(900'000), CacheStore::kCached) << "back to back, 0.9 ms apart";
  EXPECT_EQ(AdaptiveStoreFor(kAdaptiveIdleNs - 1), CacheStore::kCached);
  EXPECT_EQ(AdaptiveStoreFor(kAdaptiveIdleNs), CacheStore::kStreaming);
  EXPECT_EQ(AdaptiveStoreFor(1'000'000'000), CacheStore::kStreaming) << "after an idle second";
  // The runtime starts its last write far in the past: the very first write streams.
  EXPECT_EQ(AdaptiveStoreFor(std::numeric_limits<int64_t>::max()), CacheStore::kStreaming);
  EXPECT_EQ(kAdaptiveIdleNs, 5'000'000) << "what the docs say: 5 ms";
}

TEST(ArenaStoreTest, NamesRoundTripAndUnknownNamesAreRefused) {
  EXPECT_EQ(ArenaStoreNames(), (std::vector<std::string>{"cached", "streaming", "evicted", "adaptive"}));
  for (const std::string& name : ArenaStoreNames()) {
    ArenaStore parsed = name == "evicted" ? ArenaStore::kCached : ArenaStore::kEvicted;
    ASSERT_TRUE(ParseArenaStore(name, &parsed)) << name;
    EXPECT_EQ(ArenaStoreName(parsed), name);
  }
  ArenaStore parsed = ArenaStore::kCached;
  ASSERT_TRUE(ParseArenaStore("adaptive", &parsed));
  EXPECT_EQ(parsed, ArenaStore::kAdaptive);
  ASSERT_TRUE(ParseArenaStore("evicted", &parsed));
  EXPECT_EQ(parsed, ArenaStore::kEvicted);
  ArenaStore untouched = ArenaStore::kStreaming;
  for (const char* bad : {"auto", "", "Adaptive", "non-temporal"}) {
    EXPECT_FALSE(ParseArenaStore(bad, &untouched)) << bad;
  }
  EXPECT_EQ(untouched, ArenaStore::kStreaming);
}

}  // namespace
}  // namespace chronoserve::server
