// A model parameter's comma-separated batch sizes ("1, 8,32"), as cuda_graph_batch_sizes and
// warmup_batch_sizes take them. Pure; the callers name the model and the key in their errors.
#ifndef CHRONOSERVE_SERVER_CORE_BATCH_SIZE_LIST_H_
#define CHRONOSERVE_SERVER_CORE_BATCH_SIZE_LIST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chronoserve::server {

// Each item a positive integer (blanks around it ignored) no larger than `max_items`; the result
// sorted, without repeats. The first bad item, in the list's order, is INVALID_ARGUMENT saying only
// what is wrong with it: "'abc' is not a positive integer" followed by `usage`, or the size
// followed by `beyond_max` (" exceeds max_batch_size 8").
absl::StatusOr<std::vector<int>> ParseBatchSizeList(absl::string_view list, int max_items,
                                                    absl::string_view beyond_max, absl::string_view usage = "");

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_BATCH_SIZE_LIST_H_
