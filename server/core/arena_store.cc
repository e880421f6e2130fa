#include "server/core/arena_store.h"

namespace chronoserve::server {

namespace {

// Every way, in the order a command line lists them: each CacheStore's, then adaptive.
constexpr ArenaStore kWays[] = {ArenaStore::kCached, ArenaStore::kStreaming, ArenaStore::kEvicted,
                                ArenaStore::kAdaptive};

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
  return way == ArenaStore::kAdaptive ? "adaptive" : CacheStoreName(FixedStore(way));
}

std::vector<std::string> ArenaStoreNames() {
  std::vector<std::string> names;
  for (ArenaStore way : kWays) names.push_back(ArenaStoreName(way));
  return names;
}

bool ParseArenaStore(const std::string& name, ArenaStore* way) {
  for (ArenaStore candidate : kWays) {
    if (ArenaStoreName(candidate) == name) {
      *way = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace chronoserve::server
