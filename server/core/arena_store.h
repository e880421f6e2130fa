// How the thread that received a request writes its inputs into the model's InputArena
// (--input-arena-store). A GPU reads a page-locked arena by DMA: bytes still in the writing core's
// cache reached an H100 slower than bytes in memory (BENCHMARKS §70-§72), while writing past the
// caches costs the receiving thread more. `adaptive` takes each where it paid on the H100 (§72
// calls 1-2): cached stores while requests come back to back, streaming stores for the first write
// after the arena sat unwritten for a while. It showed no gain over cached stores on six servers
// where the slow state did not occur (§72 calls 3-4); where it does, its gain is not measured.
#ifndef CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_
#define CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/cache_bypass.h"

namespace chronoserve::server {

// The three fixed ways store every write alike; kAdaptive chooses per write (AdaptiveStoreFor).
enum class ArenaStore { kCached, kStreaming, kEvicted, kAdaptive };

// An adaptive arena streams a write that comes this long or longer after its last one.
inline constexpr int64_t kAdaptiveIdleNs = 5'000'000;  // 5 ms

// How a fixed way stores every write; for kAdaptive, how it stores a write back to back (cached).
CacheStore FixedStore(ArenaStore way);

// How an adaptive arena stores a write `since_last_write_ns` after its previous one (any large
// value when there was none yet: the first write is after an idle spell).
inline CacheStore AdaptiveStoreFor(int64_t since_last_write_ns) {
  return since_last_write_ns >= kAdaptiveIdleNs ? CacheStore::kStreaming : CacheStore::kCached;
}

// "cached", "streaming", "evicted" or "adaptive".
std::string ArenaStoreName(ArenaStore way);

// Every ArenaStoreName (a command line's choices): each CacheStore's, then "adaptive".
std::vector<std::string> ArenaStoreNames();

// Parses ArenaStoreName's words; false (and `way` untouched) for anything else.
bool ParseArenaStore(const std::string& name, ArenaStore* way);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_ARENA_STORE_H_
