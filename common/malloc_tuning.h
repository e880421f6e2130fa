// Keeping large freed buffers in glibc's heap, for a process that moves tensors of hundreds of KiB
// through gRPC. glibc's malloc serves an allocation above its mmap threshold (128 KiB at start,
// raised by the sizes freed, up to 32 MiB) with a fresh mapping, and gives memory at the top of
// the heap back to the kernel above its trim threshold. gRPC allocates a fresh buffer for every
// read of a socket (up to megabytes once its read estimate has grown), so a client receiving a
// 400 KiB answer mapped, faulted in and unmapped its read buffers on every request: about 30 page
// faults a request on the development VM, where fixing both thresholds took them to 0.2 and the
// answer's e2e p50 from 770-880 to 610-710 us (docs/BENCHMARKS.md §43).
#ifndef CHRONOSERVE_COMMON_MALLOC_TUNING_H_
#define CHRONOSERVE_COMMON_MALLOC_TUNING_H_

#include <cstddef>

namespace chronoserve {

// The thresholds TuneMallocForLargeMessages sets: allocations up to kMallocMmapThreshold come from
// the heap, and up to kMallocTrimThreshold of free memory stays at its top.
inline constexpr size_t kMallocMmapThreshold = size_t{32} << 20;  // glibc's largest
inline constexpr size_t kMallocTrimThreshold = size_t{128} << 20;

// Sets glibc's mmap and trim thresholds (mallopt) unless the environment already chose them
// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, or glibc.malloc.* in GLIBC_TUNABLES), which is
// left as it is. Returns whether it set them. Call once, early in main(): a process-wide setting,
// not a library's to make for its host.
bool TuneMallocForLargeMessages();

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_MALLOC_TUNING_H_
