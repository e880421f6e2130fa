#include "server/backend/cuda_graph_runner.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/backend/torch_util.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <torch/version.h>

#include <utility>
#endif

namespace chronoserve::server {

struct CudaGraphRunner::Graph {
#ifdef CHRONOSERVE_WITH_CUDA
  at::cuda::CUDAGraph graph;  // first: destroyed last, after the tensors in its pool
#endif
  int64_t bucket = 0;
  std::vector<torch::Tensor> inputs;
  std::vector<torch::Tensor> outputs;
};

CudaGraphRunner::CudaGraphRunner() = default;
CudaGraphRunner::~CudaGraphRunner() = default;

int CudaGraphRunner::Find(int64_t items) const {
  for (size_t g = 0; g < graphs_.size(); ++g) {
    if (graphs_[g]->bucket >= items) return static_cast<int>(g);
  }
  return -1;
}

int64_t CudaGraphRunner::bucket(int graph) const { return graphs_[graph]->bucket; }

const std::vector<torch::Tensor>& CudaGraphRunner::inputs(int graph) const {
  return graphs_[graph]->inputs;
}

const std::vector<torch::Tensor>& CudaGraphRunner::outputs(int graph) const {
  return graphs_[graph]->outputs;
}

#ifdef CHRONOSERVE_WITH_CUDA
namespace {

// MempoolId_t has moved between LibTorch versions; take it from the API we call.
using PoolId = decltype(std::declval<at::cuda::CUDAGraph&>().pool());

std::vector<torch::jit::IValue> Args(const std::vector<torch::Tensor>& inputs) {
  return std::vector<torch::jit::IValue>(inputs.begin(), inputs.end());
}

void BeginCapture(at::cuda::CUDAGraph& graph, std::optional<PoolId> pool) {
  const PoolId id = pool.value_or(PoolId{0, 0});
#if TORCH_VERSION_MAJOR >= 2
  // Thread-local: other workers' threads may keep serving (allocating, synchronising events)
  // while this one captures; only this thread's unsafe calls would invalidate the capture.
  graph.capture_begin(id, cudaStreamCaptureModeThreadLocal);
#else
  graph.capture_begin(id);
#endif
}

// forward() captured into `g.graph`; ends the capture even when forward throws, so the stream is
// never left capturing.
absl::StatusOr<torch::jit::IValue> CaptureForward(torch::jit::Module& module,
                                                  const std::vector<torch::Tensor>& inputs,
                                                  at::cuda::CUDAGraph& graph,
                                                  std::optional<PoolId> pool) {
  BeginCapture(graph, pool);
  torch::jit::IValue result;
  try {
    result = module.forward(Args(inputs));
  } catch (const c10::Error& e) {
    try {
      graph.capture_end();
    } catch (const c10::Error&) {
      // The capture was invalidated; capture_end has still ended it on the stream.
    }
    return absl::FailedPreconditionError(e.what_without_backtrace());
  }
  graph.capture_end();
  return result;
}

}  // namespace
#endif

absl::StatusOr<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::Capture(
    torch::jit::Module& module, const ModelSpec& spec, const std::vector<int>& buckets,
    DevicePath& path) {
#ifndef CHRONOSERVE_WITH_CUDA
  (void)module;
  (void)spec;
  (void)buckets;
  (void)path;
  return absl::FailedPreconditionError("CUDA graphs need a CUDA build of LibTorch");
#else
  std::unique_ptr<CudaGraphRunner> runner(new CudaGraphRunner());
  c10::InferenceMode inference_mode;  // the mode the request path runs in: same executor plan
  std::shared_ptr<void> on_stream = path.Enter();
  std::optional<PoolId> pool;
  // Largest first: the smaller graphs then reuse its pool's blocks.
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    auto g = std::make_unique<Graph>();
    g->bucket = *it;
    for (const TensorSpec& t : spec.inputs) {
      ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(t.dtype));
      std::vector<int64_t> shape = t.dims;
      if (spec.max_batch_size > 0) shape.insert(shape.begin(), g->bucket);
      g->inputs.push_back(torch::zeros(shape, torch::TensorOptions().dtype(type).device(path.device())));
    }
    // Eager runs at this exact shape first: the TorchScript executor settles its plan (and any
    // fuser compiles) and lazily initialised libraries allocate, outside the capture.
    for (int i = 0; i < 3; ++i) module.forward(Args(g->inputs));
    RETURN_IF_ERROR(path.Sync());
    absl::StatusOr<torch::jit::IValue> result = CaptureForward(module, g->inputs, g->graph, pool);
    if (!result.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUDA graph capture at batch size ", g->bucket, " failed: ",
          result.status().message(), " (remove optimization { cuda { graphs: true } } to run eager)"));
    }
    ASSIGN_OR_RETURN(g->outputs, FlattenOutputs(*result));
    for (const torch::Tensor& out : g->outputs) {
      if (spec.max_batch_size > 0 && (out.dim() == 0 || out.size(0) != g->bucket)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "an output of the graph captured at batch size ", g->bucket,
            " does not have that many rows"));
      }
    }
    pool = g->graph.pool();
    g->graph.replay();  // the first launch uploads the graph: pay it here, not on a request
    RETURN_IF_ERROR(path.Sync());
    runner->graphs_.insert(runner->graphs_.begin(), std::move(g));
  }
  return runner;
#endif
}

void CudaGraphRunner::Replay(int graph) {
#ifdef CHRONOSERVE_WITH_CUDA
  graphs_[graph]->graph.replay();
#else
  (void)graph;
#endif
}

}  // namespace chronoserve::server
