#include "server/scheduler/warmup_sizes.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/core/batch_size_list.h"

namespace chronoserve::server {

absl::StatusOr<std::vector<int>> WarmupBatchSizesFromSpec(const ModelSpec& spec) {
  const int max_items = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
  std::vector<int> sizes;
  auto it = spec.parameters.find(kWarmupBatchSizesKey);
  const std::string value = it == spec.parameters.end() ? "all" : absl::AsciiStrToLower(absl::StripAsciiWhitespace(it->second));
  if (value == "all") {
    for (int items = 1; items <= max_items; ++items) sizes.push_back(items);
    return sizes;
  }
  if (value == "none") return sizes;
  absl::StatusOr<std::vector<int>> listed = ParseBatchSizeList(
      value, max_items,
      spec.max_batch_size > 0 ? absl::StrCat(" exceeds max_batch_size ", spec.max_batch_size)
                              : std::string(": the model does not batch (max_batch_size 0), so 1 is its only size"),
      " (give sizes as \"1,8,32\", or \"all\" or \"none\")");
  if (!listed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': parameter ", kWarmupBatchSizesKey,
                                                   " = \"", it->second, "\": ", listed.status().message()));
  }
  return listed;
}

}  // namespace chronoserve::server
