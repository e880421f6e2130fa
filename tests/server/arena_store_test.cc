#include "server/core/arena_store.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace chronoserve::server {
namespace {

TEST(ArenaStoreTest, FixedWaysStoreEveryWriteAlike) {
  for (CacheStore way : kCacheStores) {
    const ArenaStore store{way, false};
    for (int64_t since : {int64_t{0}, int64_t{1000}, ArenaStore::kAdaptiveIdleNs, int64_t{60'000'000'000},
                          std::numeric_limits<int64_t>::max()}) {
      EXPECT_EQ(store.For(since), way) << CacheStoreName(way) << " " << since;
    }
  }
}

TEST(ArenaStoreTest, AdaptiveStreamsOnlyTheFirstWriteAfterAnIdleSpell) {
  const ArenaStore adaptive{CacheStore::kCached, true};
  EXPECT_EQ(adaptive.For(0), CacheStore::kCached) << "two requests at once";
  EXPECT_EQ(adaptive.For(900'000), CacheStore::kCached) << "back to back, 0.9 ms apart";
  EXPECT_EQ(adaptive.For(ArenaStore::kAdaptiveIdleNs - 1), CacheStore::kCached);
  EXPECT_EQ(adaptive.For(ArenaStore::kAdaptiveIdleNs), CacheStore::kStreaming);
  EXPECT_EQ(adaptive.For(1'000'000'000), CacheStore::kStreaming) << "after an idle second";
  // The runtime starts its last write far in the past: the very first write streams.
  EXPECT_EQ(adaptive.For(std::numeric_limits<int64_t>::max()), CacheStore::kStreaming);
  EXPECT_EQ(ArenaStore::kAdaptiveIdleNs, 5'000'000) << "what the docs say: 5 ms";
}

TEST(ArenaStoreTest, NamesRoundTripAndUnknownNamesAreRefused) {
  EXPECT_EQ(ArenaStoreNames(), (std::vector<std::string>{"cached", "streaming", "evicted", "adaptive"}));
  for (const std::string& name : ArenaStoreNames()) {
    ArenaStore parsed{CacheStore::kEvicted, name != "adaptive"};
    ASSERT_TRUE(ParseArenaStore(name, &parsed)) << name;
    EXPECT_EQ(ArenaStoreName(parsed), name);
  }
  ArenaStore parsed;
  ASSERT_TRUE(ParseArenaStore("adaptive", &parsed));
  EXPECT_EQ(parsed, (ArenaStore{CacheStore::kCached, true})) << "cached back to back";
  ASSERT_TRUE(ParseArenaStore("evicted", &parsed));
  EXPECT_EQ(parsed, (ArenaStore{CacheStore::kEvicted, false}));
  ArenaStore untouched{CacheStore::kStreaming, false};
  for (const char* bad : {"auto", "", "Adaptive", "non-temporal"}) {
    EXPECT_FALSE(ParseArenaStore(bad, &untouched)) << bad;
  }
  EXPECT_EQ(untouched, (ArenaStore{CacheStore::kStreaming, false}));
  EXPECT_EQ(ArenaStore{}, (ArenaStore{CacheStore::kCached, false})) << "a default-made one is auto's: cached";
}

}  // namespace
}  // namespace chronoserve::server
