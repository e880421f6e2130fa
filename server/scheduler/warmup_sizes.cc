#include "server/scheduler/warmup_sizes.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/core/batch_size_list.h"

namespace chronoserve::server {

absl::StatusOr<std::vector<int>> WarmupBatchSizesFromSpec(const ModelSpec& spec,
                                                          const std::vector<int>& graph_buckets) {
  const int max_items = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
  std::vector<int> sizes;
  auto it = spec.parameters.find(kWarmupBatchSizesKey);
  if (it == spec.parameters.end() && !graph_buckets.empty()) {
    // A batch up to the largest bucket is padded to a bucket and replayed: no other size runs eagerly.
    for (int bucket : graph_buckets) {
      if (bucket >= 1 && bucket <= max_items) sizes.push_back(bucket);
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (int items = sizes.empty() ? 1 : sizes.back() + 1; items <= max_items; ++items) sizes.push_back(items);
    return sizes;
  }
  const std::string value =
      it == spec.parameters.end() ? "all" : absl::AsciiStrToLower(absl::StripAsciiWhitespace(it->second));
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

std::string FormatBatchSizes(const std::vector<int>& sizes) {
  std::string out;
  for (size_t i = 0; i < sizes.size();) {
    size_t end = i;  // the last of a run of consecutive sizes from i
    while (end + 1 < sizes.size() && sizes[end + 1] == sizes[end] + 1) ++end;
    if (!out.empty()) out.push_back(',');
    if (end - i >= 2) {
      absl::StrAppend(&out, sizes[i], "-", sizes[end]);
      i = end + 1;
    } else {
      absl::StrAppend(&out, sizes[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace chronoserve::server
