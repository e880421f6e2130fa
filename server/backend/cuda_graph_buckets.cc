#include "server/backend/cuda_graph_buckets.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/core/batch_size_list.h"

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
  absl::StatusOr<std::vector<int>> buckets =
      ParseBatchSizeList(it->second, spec.max_batch_size, absl::StrCat(" exceeds max_batch_size ", spec.max_batch_size));
  if (!buckets.ok()) return error(std::string(buckets.status().message()));
  if (!spec.cuda_graphs) return std::vector<int>{};  // a valid setting, kept for when graphs are on
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
