// Writing bytes that a device will read by DMA next (a request's input in the page-locked input
// arena, copied host→device by the worker). Bytes written by a thread whose core then
// idled reached an H100 about 5x slower (BENCHMARKS §70-§71, likely read out of that core's cache);
// these helpers leave them in memory instead.
#ifndef CHRONOSERVE_COMMON_CACHE_BYPASS_H_
#define CHRONOSERVE_COMMON_CACHE_BYPASS_H_

#include <cstddef>
#include <string>
#include <vector>

namespace chronoserve {

// How a copy into memory a device reads next is written.
enum class CacheStore {
  kCached,     // memcpy: the bytes stay in the writing core's cache
  kStreaming,  // non-temporal stores: the bytes go to memory past the caches (x86-64; memcpy elsewhere)
  kEvicted,    // memcpy, then each line written back and evicted (CLFLUSHOPT where the CPU has it)
};

// Every CacheStore, in the order above.
inline constexpr CacheStore kCacheStores[] = {CacheStore::kCached, CacheStore::kStreaming, CacheStore::kEvicted};

// Copies `n` bytes from `src` to `dst` (not overlapping) as `store` says; the stores are ordered
// (SFENCE) before it returns. Any alignment, any size.
void CopyForDevice(char* dst, const char* src, size_t n, CacheStore store);

// Writes back and evicts the cache lines that hold [p, p + n) (then SFENCE); nothing off x86-64.
void EvictFromCaches(const void* p, size_t n);

// "cached", "streaming" or "evicted".
const char* CacheStoreName(CacheStore store);

// CacheStoreName of each of kCacheStores (a command line's choices).
std::vector<std::string> CacheStoreNames();

// Parses CacheStoreName's words; false for anything else.
bool ParseCacheStore(const char* name, CacheStore* store);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_CACHE_BYPASS_H_
