// Narrowing a 128-bit sum back to int64, saturating: for arithmetic on figures another process sent
// (a client's reading of a server's timing), where no value may wrap a 64-bit sum.
#ifndef CHRONOSERVE_COMMON_SATURATING_H_
#define CHRONOSERVE_COMMON_SATURATING_H_

#include <cstdint>
#include <limits>

namespace chronoserve {

inline int64_t ClampToInt64(__int128 value) {
  if (value > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (value < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_SATURATING_H_
