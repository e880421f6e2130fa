#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace chronoserve {

bool TuneMallocForLargeMessages() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      (tunables != nullptr && (std::strstr(tunables, "mmap_threshold") != nullptr ||
                               std::strstr(tunables, "trim_threshold") != nullptr))) {
    return false;
  }
  // Either alone fixes half of it: a fixed mmap threshold also turns off glibc's dynamic one.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThreshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThreshold)) == 1;
}

}  // namespace chronoserve
