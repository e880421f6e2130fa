// How the thread that received a request writes its inputs into the model's InputArena
// (--input-arena-store). A GPU reads a page-locked arena by DMA: bytes still in the writing core's
// cache reached an H100 slower than bytes in memory (BENCHMARKS §70-§72), while writing past the
// caches costs the receiving thread more. `adaptive` takes each where it paid on the H100 (§72
// calls 1-2): cached stores while requests come back to back, streaming stores for the first write
// after the arena sat unwritten for a while. Its own gain is not measured yet (§72 calls 3-4).
#ifndef CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_
#define CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/cache_bypass.h"

namespace chronoserve::server {

struct ArenaStore {
  // How every write is stored; with `adaptive`, how a write that follows another within
  // kAdaptiveIdleNs is stored.
  CacheStore store = CacheStore::kCached;
  // Streaming stores for a write that comes kAdaptiveIdleNs or more after the arena's last one.
  bool adaptive = false;

  static constexpr int64_t kAdaptiveIdleNs = 5'000'000;  // 5 ms

  // The store for a write `since_last_write_ns` after the arena's previous one (any value when
  // there was none yet: the first write is after an idle spell).
  CacheStore For(int64_t since_last_write_ns) const {
    return adaptive && since_last_write_ns >= kAdaptiveIdleNs ? CacheStore::kStreaming : store;
  }

  bool operator==(const ArenaStore& other) const { return store == other.store && adaptive == other.adaptive; }
  bool operator!=(const ArenaStore& other) const { return !(*this == other); }
};

// "cached", "streaming", "evicted" or "adaptive".
std::string ArenaStoreName(const ArenaStore& store);

// Every ArenaStoreName (a command line's choices): each CacheStore's, then "adaptive".
std::vector<std::string> ArenaStoreNames();

// Parses ArenaStoreName's words; false (and `store` untouched) for anything else.
bool ParseArenaStore(const std::string& name, ArenaStore* store);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_
