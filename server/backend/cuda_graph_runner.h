// CudaGraphRunner: one worker's CUDA graphs of a TorchScript forward, one per batch bucket, captured
// on the worker's stream after warm-up (../shared/ANCHORS.md: at::cuda::CUDAGraph capture_begin /
// capture_end on a non-default stream works for TorchScript from C++). Each graph owns static device
// inputs, into whose first rows a batch's staged bytes are copied (pad rows zeroed), and static
// outputs, which the caller slices to the real rows and copies out before the next replay. The
// graphs share one memory pool, which is safe because replays are sequential on one stream and each
// replay's outputs are read before the next. Owned by one TorchInstance (which must outlive it: the
// graphs read its weights in place); worker thread only. Captures only in CUDA builds.
//
//   runner = CudaGraphRunner::Capture(module, spec, binding, {1, 2, 4, 8}, path);
//   int g = runner->Find(items);                        // -1: no graph holds `items` rows -> eager
//   path.ToDeviceInto(staged, bytes, runner->inputs(g)[i]);  runner->Replay(g);
//   runner->outputs(g)[k].narrow(0, 0, items)           // the real rows
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_RUNNER_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_RUNNER_H_

#include <torch/script.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/torch_device_path.h"
#include "server/backend/torch_util.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

class CudaGraphRunner {
 public:
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  // Captures module.forward at every bucket (ascending, each >= 1) on `path`'s stream, after three
  // eager runs on the static inputs, arranged and read by `binding`. `spec`'s inputs must have
  // static dims (HasStaticInputShapes); inputs() and outputs() are in the config's order.
  // Errors name the model and the bucket; without CUDA, FAILED_PRECONDITION. May throw c10::Error.
  static absl::StatusOr<std::unique_ptr<CudaGraphRunner>> Capture(torch::jit::Module& module,
                                                                  const ModelSpec& spec,
                                                                  const TensorBinding& binding,
                                                                  const std::vector<int>& buckets,
                                                                  DevicePath& path);

  // Index of the smallest graph holding `items` rows, or -1.
  int Find(int64_t items) const;
  int size() const { return static_cast<int>(graphs_.size()); }
  int64_t bucket(int graph) const;
  // Static inputs, in the config's input order (the binding arranges them as forward() takes them):
  // [bucket, dims...] (or [dims...] without batching).
  const std::vector<torch::Tensor>& inputs(int graph) const;
  // Static outputs, in OUTPUT__0.. order, valid once the stream has passed the replay.
  const std::vector<torch::Tensor>& outputs(int graph) const;
  // Launches the graph on the current stream (the worker's). May throw c10::Error.
  void Replay(int graph);

 private:
  struct Graph;
  CudaGraphRunner();
  std::vector<std::unique_ptr<Graph>> graphs_;  // ascending bucket
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_GRAPH_RUNNER_H_
