#include "server/scheduler/warmup_sizes.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': parameter ", kWarmupBatchSizesKey,
                                                   " = \"", it->second, "\": ", why));
  };
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return error(absl::StrCat("'", part, "' is not a positive integer (give sizes as \"1,8,32\", or \"all\" or \"none\")"));
    }
    if (size > max_items) {
      return error(spec.max_batch_size > 0
                       ? absl::StrCat(size, " exceeds max_batch_size ", spec.max_batch_size)
                       : absl::StrCat(size, ": the model does not batch (max_batch_size 0), so 1 is its only size"));
    }
    sizes.push_back(size);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace chronoserve::server
