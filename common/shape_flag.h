// ParseShapeFlag: perf_analyzer's `--shape NAME:d1,d2,...` (an input's dims without the batch dim),
// as chronobench and `chronoserve profile` take it.
//
//   std::map<std::string, std::vector<int64_t>> shapes;
//   RETURN_IF_ERROR(ParseShapeFlag("INPUT__0:3,224,224", &shapes));
#ifndef CHRONOSERVE_COMMON_SHAPE_FLAG_H_
#define CHRONOSERVE_COMMON_SHAPE_FLAG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

// Parses one `--shape NAME:d1,d2,...` into `shapes` (the last colon splits, so a name may hold
// colons). INVALID_ARGUMENT quoting the flag when it is not NAME:positive,integers, or when NAME
// already has a shape in `shapes` (a second --shape for one input is a mistake, not an override).
absl::Status ParseShapeFlag(absl::string_view text, std::map<std::string, std::vector<int64_t>>* shapes);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_SHAPE_FLAG_H_
