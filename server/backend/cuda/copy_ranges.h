// CopyRangesAsync: many small device-to-device copies in one kernel launch. A batch whose requests'
// tensors are in CUDA shared memory (each request's own region, mapped from the client by IPC
// handle) has one copy a request and tensor; a cudaMemcpyAsync each cost the host about 9 us (the
// driver looks the IPC pointer up), and LibTorch's multi-tensor copy about 2 us a tensor to wrap and
// dispatch (BENCHMARKS §47, §49). Here the ranges go to the kernel as its argument: one launch for
// up to kMaxCopyRanges of them. Compiled only in CUDA builds (nvcc); no LibTorch.
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_COPY_RANGES_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_COPY_RANGES_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace chronoserve::server::cuda {

// `bytes` from `src` to `dst`, both device memory the current device can address (its own, or
// another process's mapped into it). Ranges of one call must not overlap.
struct CopyRange {
  void* dst;
  const void* src;
  size_t bytes;
};

// Ranges per launch: they travel in the kernel's argument, which stays under the 4 KiB every
// device and driver accept.
inline constexpr size_t kMaxCopyRanges = 128;

// Enqueues every range's copy on `stream`, which must belong to the current device: one launch per
// kMaxCopyRanges ranges. Returns the launch's error (cudaSuccess when `count` is 0).
cudaError_t CopyRangesAsync(const CopyRange* ranges, size_t count, cudaStream_t stream);

// Loads the kernel, in each of its launch sizes, into the current device's context. CUDA otherwise
// loads it at its first launch, and that launch waits for the stream it is made on: on a stream
// held by exact device timing's gate, until the hold ends. Call once per device, before any hold.
cudaError_t LoadCopyRangesKernel();

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_COPY_RANGES_H_
