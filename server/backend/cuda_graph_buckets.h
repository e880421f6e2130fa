// CUDA-graph batch buckets: which batch sizes a model's graphs are captured at, and which captured
// size serves a batch (the batch is padded up to it). Pure functions of the config, no LibTorch, so
// CPU tests cover them; the GPU path (CudaGraphRunner) uses them. Thread-safe (stateless).
//
//   buckets = GraphBucketsFromSpec(spec);        // {1, 2, 4, 8, 16} for max_batch_size 16
//   BucketFor(*buckets, 3) == 4;                 // 3 real rows + 1 pad row, then sliced back
//   BucketFor(*buckets, 17) == 0;                // not captured: eager
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_BUCKETS_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_BUCKETS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

// Config key: comma-separated batch sizes, e.g. "1,8,64,128" (each 1..max_batch_size).
inline constexpr char kGraphBatchSizesKey[] = "cuda_graph_batch_sizes";

// Powers of two below max_batch_size, then max_batch_size itself: 1, 2, 4, ..., max.
// {1} for a model that does not batch (max_batch_size 0): its one fixed shape.
std::vector<int> DefaultGraphBuckets(int max_batch_size);

// The buckets for `spec`, ascending and distinct: empty when optimization.cuda.graphs is off;
// parameters[cuda_graph_batch_sizes] when given, else DefaultGraphBuckets. INVALID_ARGUMENT names
// the model, the key and the bad value (not a positive integer, above max_batch_size, or given for
// a model with max_batch_size 0), with graphs on or off: a bad setting is never loaded silently.
absl::StatusOr<std::vector<int>> GraphBucketsFromSpec(const ModelSpec& spec);

// Whether every input has fixed per-item dims (no -1): only then is a graph captured; a model with
// variable dims runs eager.
bool HasStaticInputShapes(const ModelSpec& spec);

// The smallest bucket >= items, or 0 when items exceeds every bucket (or there are none).
int BucketFor(const std::vector<int>& buckets, int64_t items);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_BUCKETS_H_
