// Which batch sizes the warm-up before READY runs (after the config's model_warmup samples, each
// twice: TorchScript profiles the first run of a shape). By default every size from 1 to
// max_batch_size that will run eagerly, so that no batch the dynamic batcher forms meets a cold
// shape: on a worker that replays CUDA graphs, the buckets (capture runs each eagerly too) and the
// sizes above the largest; elsewhere every size. A model with a large max_batch_size and a slow
// forward() can name fewer in config.pbtxt, at the price of a slower first batch at each size left
// out:
//
//   parameters { key: "warmup_batch_sizes" value { string_value: "1,8,32,128" } }  # or "all", "none"
#ifndef CHRONOSERVE_SERVER_SCHEDULER_WARMUP_SIZES_H_
#define CHRONOSERVE_SERVER_SCHEDULER_WARMUP_SIZES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

inline constexpr char kWarmupBatchSizesKey[] = "warmup_batch_sizes";

// parameters[warmup_batch_sizes]: absent = the sizes that run eagerly: with `graph_buckets` (the
// instance's, ModelInstance::graph_buckets) those buckets and every size above the largest, else
// as "all"; "all" = 1..max_batch_size (1 for a model that does not batch); "none" = no size (only
// the model_warmup samples run, and on a GPU the CUDA-graph captures); otherwise a comma-separated
// list of sizes from 1 to max_batch_size (1 only for a model that does not batch). Sorted, without
// repeats. INVALID_ARGUMENT names the model, the key, the value and what is wrong with it.
absl::StatusOr<std::vector<int>> WarmupBatchSizesFromSpec(const ModelSpec& spec,
                                                          const std::vector<int>& graph_buckets = {});

// "1,2,4,8,16-128": sorted sizes with runs of three or more as ranges, for logs.
std::string FormatBatchSizes(const std::vector<int>& sizes);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_WARMUP_SIZES_H_
