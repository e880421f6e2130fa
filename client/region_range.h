// The range check of a client's shared-memory region (system or CUDA): `bytes` at `offset` must lie
// inside its `size` bytes, without the sum wrapping. The error is built only when it fails, since
// the regions' reads and writes are on chronobench's per-request path.
#ifndef CHRONOSERVE_CLIENT_REGION_RANGE_H_
#define CHRONOSERVE_CLIENT_REGION_RANGE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace chronoserve::client {

inline bool RegionRangeFits(size_t offset, size_t bytes, size_t size) { return offset <= size && bytes <= size - offset; }

// OUT_OF_RANGE: "<region>: <what> of B bytes at offset O is past its S bytes".
inline absl::Status RegionRangeError(absl::string_view region, absl::string_view what, size_t offset, size_t bytes,
                                     size_t size) {
  return absl::OutOfRangeError(
      absl::StrCat(region, ": ", what, " of ", bytes, " bytes at offset ", offset, " is past its ", size, " bytes"));
}

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_REGION_RANGE_H_
