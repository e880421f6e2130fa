#include "server/backend/cuda_graph_runner.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/backend/torch_batch_io.h"
#include "server/backend/torch_util.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/version.h>

#include <utility>

// LibTorch versions whose CUDAGraph routes capture allocations through endAllocateToPool /
// releasePool and the host allocator's end_allocate_to_pool / release_pool (checked on 2.11).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#include <ATen/core/CachingHostAllocator.h>
#define CHRONOSERVE_ENDS_ABANDONED_CAPTURES 1
#endif
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

void BeginCapture(at::cuda::CUDAGraph& graph, PoolId pool) {
#if TORCH_VERSION_MAJOR >= 2
  // Thread-local: other workers' threads may keep serving (allocating, synchronising events)
  // while this one captures; only this thread's unsafe calls would invalidate the capture.
  graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
#else
  graph.capture_begin(pool);
#endif
}

// Cleans up after a capture_begin() or capture_end() that threw; never throws. capture_end() calls
// cudaStreamEndCapture first, and throws there when forward() invalidated the capture (what a
// synchronising forward() does), before it stops the caching allocators routing the capturing
// stream's allocations to `pool` (endAllocateToPool) and without marking the capture ended, so the
// graph's reset() never releases the capture's use of the pool. Here the stream leaves capture mode
// if it has not, then each allocator stops routing to `pool` and drops this capture's use of it;
// an allocator that capture_end (or a failed capture_begin) never left routing refuses with a
// c10::Error, and then the graph's reset() does the release. (A capture_end that failed between
// the two, on "Invalid capture.", leaves one use of the pool: its memory stays reserved.)
void AbandonCapture(cudaStream_t stream, c10::DeviceIndex device, PoolId pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
  }
  (void)cudaGetLastError();  // the capture's errors are reported; LibTorch's next check must not see them
#ifdef CHRONOSERVE_ENDS_ABANDONED_CAPTURES
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
    c10::cuda::CUDACachingAllocator::releasePool(device, pool);
  } catch (const c10::Error&) {
    // Not routing to `pool` (capture_end got past that): nothing to end here.
  }
  try {
    at::HostAllocator* host = at::getHostAllocator(at::kCUDA);
    host->end_allocate_to_pool(pool);
    host->release_pool(pool);
  } catch (const c10::Error&) {
    // As above, or this LibTorch's capture does not route pinned host allocations.
  }
#else
  (void)device;
  (void)pool;
#endif
}

// Ends the capture begun on `graph`; a capture that cannot end is abandoned (AbandonCapture).
absl::Status EndCapture(at::cuda::CUDAGraph& graph, cudaStream_t stream, c10::DeviceIndex device, PoolId pool) {
  std::string error;
  try {
    graph.capture_end();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  AbandonCapture(stream, device, pool);
  return absl::FailedPreconditionError(error);
}

// forward() on `inputs` captured into `graph` on the current stream (the worker's). Whatever
// forward() throws (the TorchScript interpreter rethrows an operator's failure, e.g. a synchronising
// .item() under capture, as std::runtime_error, not c10::Error), the capture is ended, so neither
// the stream nor the caching allocator is left capturing; forward()'s error is the one returned.
absl::StatusOr<std::vector<torch::Tensor>> CaptureForward(torch::jit::Module& module, const TensorBinding& binding,
                                                         const std::vector<torch::Tensor>& inputs,
                                                         at::cuda::CUDAGraph& graph, c10::DeviceIndex device,
                                                         PoolId pool) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  try {
    BeginCapture(graph, pool);
  } catch (const c10::Error& e) {
    AbandonCapture(stream, device, pool);
    return absl::FailedPreconditionError(e.what_without_backtrace());
  }
  absl::StatusOr<torch::jit::IValue> forward = RunForward(module, binding.Arrange(inputs));
  // Inside the capture: a strided output's copy into contiguous memory is part of every replay.
  absl::StatusOr<std::vector<torch::Tensor>> outputs =
      forward.ok() ? binding.Outputs(*forward) : absl::StatusOr<std::vector<torch::Tensor>>(forward.status());
  const absl::Status ended = EndCapture(graph, stream, device, pool);
  RETURN_IF_ERROR(outputs.status());
  RETURN_IF_ERROR(ended);
  return outputs;
}

}  // namespace
#endif

absl::StatusOr<std::unique_ptr<CudaGraphRunner>> CudaGraphRunner::Capture(
    torch::jit::Module& module, const ModelSpec& spec, const TensorBinding& binding,
    const std::vector<int>& buckets, DevicePath& path) {
#ifndef CHRONOSERVE_WITH_CUDA
  (void)module;
  (void)spec;
  (void)binding;
  (void)buckets;
  (void)path;
  return absl::FailedPreconditionError("CUDA graphs need a CUDA build of LibTorch");
#else
  std::unique_ptr<CudaGraphRunner> runner(new CudaGraphRunner());
  c10::InferenceMode inference_mode;  // the mode the request path runs in: same executor plan
  std::shared_ptr<void> on_stream = path.Enter();
  const c10::DeviceIndex device = path.device().index();
  // One memory pool for all the graphs, named up front so a failed capture can end its use of it.
  // Largest first: the smaller graphs then reuse its blocks.
  const PoolId pool = at::cuda::graph_pool_handle();
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
    // Its outputs are bound as a replay's will be: a forward() whose outputs do not fit the config
    // fails here, named so, not as a capture that failed (whose hint would point at .item()).
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<torch::jit::IValue> eager = RunForward(module, binding.Arrange(g->inputs));
      absl::Status bound = eager.ok() ? binding.Outputs(*eager).status() : eager.status();
      if (!bound.ok()) {
        return absl::Status(bound.code(), absl::StrCat("eager run at batch size ", g->bucket,
                                                       " before its CUDA graph capture: ", bound.message()));
      }
    }
    RETURN_IF_ERROR(path.Sync());
    absl::StatusOr<std::vector<torch::Tensor>> result =
        CaptureForward(module, binding, g->inputs, g->graph, device, pool);
    if (!result.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUDA graph capture at batch size ", g->bucket, " failed: ", result.status().message(),
          " (a forward() that synchronises with the host, e.g. with .item(), cannot be captured: remove "
          "optimization { cuda { graphs: true } } to run it eager)"));
    }
    g->outputs = *std::move(result);
    // As every eager batch is checked (count, dtype, rows, dims, device), naming the output: with
    // warmup_batch_sizes "none" the captures are the only runs before READY.
    if (absl::Status checked = CheckForwardOutputs(spec, g->outputs, g->bucket, path.device()); !checked.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the graph captured at batch size ", g->bucket, ": ", checked.message()));
    }
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
