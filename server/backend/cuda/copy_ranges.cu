#include "server/backend/cuda/copy_ranges.h"

#include <algorithm>
#include <cstdint>

namespace chronoserve::server::cuda {
namespace {

constexpr int kThreads = 256;
// Blocks a range at most: each thread copies a word a pass, so a range of up to kThreads *
// kMaxBlocks words (1 MiB of 16-byte words, 64 KiB of bytes) is copied in one pass; larger ones loop.
constexpr size_t kMaxBlocks = 256;

struct RangeBatch {
  CopyRange ranges[kMaxCopyRanges];
};
static_assert(sizeof(RangeBatch) <= 4000, "the kernel's argument must stay under 4 KiB");

// Range blockIdx.y, in words of W where both ends are aligned to W; the bytes past the last whole
// word one by one.
template <typename W>
__device__ void CopyWords(char* dst, const char* src, size_t bytes) {
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t words = bytes / sizeof(W);
  W* to = reinterpret_cast<W*>(dst);
  const W* from = reinterpret_cast<const W*>(src);
  for (size_t i = first; i < words; i += stride) to[i] = from[i];
  for (size_t i = words * sizeof(W) + first; i < bytes; i += stride) dst[i] = src[i];
}

__global__ void CopyRangesKernel(RangeBatch batch) {
  const CopyRange range = batch.ranges[blockIdx.y];
  char* dst = static_cast<char*>(range.dst);
  const char* src = static_cast<const char*>(range.src);
  const uintptr_t ends = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  if ((ends & 15) == 0) {
    CopyWords<uint4>(dst, src, range.bytes);
  } else if ((ends & 7) == 0) {
    CopyWords<uint2>(dst, src, range.bytes);
  } else if ((ends & 3) == 0) {
    CopyWords<uint32_t>(dst, src, range.bytes);
  } else {
    CopyWords<unsigned char>(dst, src, range.bytes);
  }
}

}  // namespace

cudaError_t CopyRangesAsync(const CopyRange* ranges, size_t count, cudaStream_t stream) {
  for (size_t done = 0; done < count; done += kMaxCopyRanges) {
    const size_t n = std::min(kMaxCopyRanges, count - done);
    RangeBatch batch{};  // the entries past `n` are never read, but are copied: initialised
    size_t largest = 0;
    for (size_t i = 0; i < n; ++i) {
      batch.ranges[i] = ranges[done + i];
      largest = std::max(largest, ranges[done + i].bytes);
    }
    const size_t per_block = static_cast<size_t>(kThreads) * 16;
    const size_t blocks = std::clamp<size_t>((largest + per_block - 1) / per_block, 1, kMaxBlocks);
    void* args[] = {&batch};
    const cudaError_t err =
        cudaLaunchKernel(reinterpret_cast<const void*>(&CopyRangesKernel),
                         dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n)), dim3(kThreads), args, 0, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t LoadCopyRangesKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&CopyRangesKernel));
}

}  // namespace chronoserve::server::cuda
