// Batch pipelining on a GPU worker: how many batches one worker may have in flight. With 2 (the
// default on a GPU) the worker launches the next due batch before it waits for the one on the
// device, so host work (gathering inputs, launching, scattering outputs) overlaps device work and
// the next batch's host-to-device copy runs on a copy stream beside the current forward. With 1
// every batch runs start to finish before the next is taken. The CPU always runs 1 (its forward is
// the host's own work). This file holds what needs neither LibTorch nor CUDA: the config parameter.
//
//   parameters { key: "pipeline_depth" value { string_value: "1" } }   # default "2" on a GPU
#ifndef CHRONOSERVE_SERVER_BACKEND_BATCH_PIPELINE_H_
#define CHRONOSERVE_SERVER_BACKEND_BATCH_PIPELINE_H_

#include "absl/status/statusor.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

inline constexpr char kPipelineDepthKey[] = "pipeline_depth";
inline constexpr int kMaxPipelineDepth = 2;

// parameters[pipeline_depth]: "1" or "2" (surrounding blanks ignored); absent = 2. Anything else
// is INVALID_ARGUMENT naming the model, the key and the value.
absl::StatusOr<int> PipelineDepthFromSpec(const ModelSpec& spec);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_BATCH_PIPELINE_H_
