#include "common/cache_bypass.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#include <immintrin.h>
#endif

namespace chronoserve {
namespace {

constexpr size_t kLine = 64;

#if defined(__x86_64__)
// Non-temporal copy: 64-byte blocks of 16-byte streaming stores, the unaligned ends with memcpy
// (then evicted).
void StreamCopy(char* dst, const char* src, size_t n) {
  char* const start = dst;
  const size_t head = std::min(n, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  for (; n >= 64; n -= 64, src += 64, dst += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  std::memcpy(dst, src, n);  // the ends (under 16 and 64 bytes) went through the cache: evict their lines
  _mm_sfence();
  if (head > 0) _mm_clflush(start);  // under 16 bytes, ending 16-aligned: one line
  if (n > 0) {
    // Under 64 bytes from a 16-aligned address: one line or two.
    _mm_clflush(dst);
    if ((reinterpret_cast<uintptr_t>(dst) >> 6) != (reinterpret_cast<uintptr_t>(dst + n - 1) >> 6)) {
      _mm_clflush(dst + n - 1);
    }
  }
}

bool HasClflushopt() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (b & (1u << 23)) != 0;
  }();
  return has;
}

__attribute__((target("clflushopt"))) void EvictOpt(uintptr_t first, uintptr_t end) {
  for (uintptr_t line = first; line < end; line += kLine) _mm_clflushopt(reinterpret_cast<void*>(line));
}

void EvictPlain(uintptr_t first, uintptr_t end) {
  for (uintptr_t line = first; line < end; line += kLine) _mm_clflush(reinterpret_cast<void*>(line));
}
#endif

}  // namespace

void EvictFromCaches(const void* p, size_t n) {
#if defined(__x86_64__)
  if (n == 0) return;
  const auto first = reinterpret_cast<uintptr_t>(p) & ~(kLine - 1);
  const auto end = reinterpret_cast<uintptr_t>(p) + n;
  if (HasClflushopt()) {
    EvictOpt(first, end);
  } else {
    EvictPlain(first, end);
  }
  _mm_sfence();
#else
  (void)p;
  (void)n;
#endif
}

void CopyForDevice(char* dst, const char* src, size_t n, CacheStore store) {
  switch (store) {
    case CacheStore::kStreaming:
#if defined(__x86_64__)
      StreamCopy(dst, src, n);
      return;
#else
      break;
#endif
    case CacheStore::kEvicted:
      if (n > 0) std::memcpy(dst, src, n);
      EvictFromCaches(dst, n);
      return;
    case CacheStore::kCached:
      break;
  }
  if (n > 0) std::memcpy(dst, src, n);
}

const char* CacheStoreName(CacheStore store) {
  switch (store) {
    case CacheStore::kCached:
      return "cached";
    case CacheStore::kStreaming:
      return "streaming";
    case CacheStore::kEvicted:
      return "evicted";
  }
  return "cached";
}

std::vector<std::string> CacheStoreNames() {
  std::vector<std::string> names;
  for (CacheStore s : kCacheStores) names.emplace_back(CacheStoreName(s));
  return names;
}

bool ParseCacheStore(const char* name, CacheStore* store) {
  for (CacheStore s : kCacheStores) {
    if (std::strcmp(name, CacheStoreName(s)) == 0) {
      *store = s;
      return true;
    }
  }
  return false;
}

}  // namespace chronoserve
