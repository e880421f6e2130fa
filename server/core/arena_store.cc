#include "server/core/arena_store.h"

namespace chronoserve::server {

namespace {
constexpr char kAdaptive[] = "adaptive";
}  // namespace

std::string ArenaStoreName(const ArenaStore& store) {
  return store.adaptive ? kAdaptive : CacheStoreName(store.store);
}

std::vector<std::string> ArenaStoreNames() {
  std::vector<std::string> names = CacheStoreNames();
  names.emplace_back(kAdaptive);
  return names;
}

bool ParseArenaStore(const std::string& name, ArenaStore* store) {
  if (name == kAdaptive) {
    *store = ArenaStore{CacheStore::kCached, /*adaptive=*/true};
    return true;
  }
  CacheStore parsed;
  if (!ParseCacheStore(name.c_str(), &parsed)) return false;
  *store = ArenaStore{parsed, /*adaptive=*/false};
  return true;
}

}  // namespace chronoserve::server
