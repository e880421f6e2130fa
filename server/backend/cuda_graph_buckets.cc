#include "server/backend/cuda_graph_buckets.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chronoserve::server {

std::vector<int> DefaultGraphBuckets(int max_batch_size) {
  std::vector<int> buckets;
  for (int b = 1; b < max_batch_size; b *= 2) buckets.push_back(b);
  buckets.push_back(std::max(1, max_batch_size));
  return buckets;
}

absl::StatusOr<std::vector<int>> GraphBucketsFromSpec(const ModelSpec& spec) {
  auto it = spec.parameters.find(kGraphBatchSizesKey);
  if (it == spec.parameters.end()) {
    return spec.cuda_graphs ? DefaultGraphBuckets(spec.max_batch_size) : std::vector<int>{};
  }
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': parameter ",
                                                   kGraphBatchSizesKey, " = \"", it->second,
                                                   "\": ", why));
  };
  if (spec.max_batch_size == 0) {
    return error("the model does not batch (max_batch_size 0); its one shape is captured as is");
  }
  std::vector<int> buckets;
  for (absl::string_view part : absl::StrSplit(it->second, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size <= 0) {
      return error(absl::StrCat("'", part, "' is not a positive integer"));
    }
    if (size > spec.max_batch_size) {
      return error(absl::StrCat(size, " exceeds max_batch_size ", spec.max_batch_size));
    }
    buckets.push_back(size);
  }
  if (!spec.cuda_graphs) return std::vector<int>{};  // a valid setting, kept for when graphs are on
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return buckets;
}

bool HasStaticInputShapes(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.inputs) {
    for (int64_t d : t.dims) {
      if (d < 0) return false;
    }
  }
  return true;
}

int BucketFor(const std::vector<int>& buckets, int64_t items) {
  for (int b : buckets) {
    if (b >= items) return b;
  }
  return 0;
}

}  // namespace chronoserve::server
