#include "server/core/arena_store.h"

namespace chronoserve::server {

namespace {

constexpr char kAdaptive[] = "adaptive";

constexpr ArenaStore kFixedWays[] = {ArenaStore::kCached, ArenaStore::kStreaming, ArenaStore::kEvicted};

}  // namespace

CacheStore FixedStore(ArenaStore way) {
  switch (way) {
    case ArenaStore::kStreaming:
      return CacheStore::kStreaming;
    case ArenaStore::kEvicted:
      return CacheStore::kEvicted;
    case ArenaStore::kCached:
    case ArenaStore::kAdaptive:
      break;
  }
  return CacheStore::kCached;
}

std::string ArenaStoreName(ArenaStore way) {
  return way == ArenaStore::kAdaptive ? kAdaptive : CacheStoreName(FixedStore(way));
}

std::vector<std::string> ArenaStoreNames() {
  std::vector<std::string> names = CacheStoreNames();
  names.emplace_back(kAdaptive);
  return names;
}

bool ParseArenaStore(const std::string& name, ArenaStore* way) {
  if (name == kAdaptive) {
    *way = ArenaStore::kAdaptive;
    return true;
  }
  CacheStore parsed;
  if (!ParseCacheStore(name.c_str(), &parsed)) return false;
  for (ArenaStore fixed : kFixedWays) {
    if (FixedStore(fixed) == parsed) {
      *way = fixed;
      return true;
    }
  }
  return false;  // a CacheStore without a fixed way: none, kFixedWays lists each
}

}  // namespace chronoserve::server
