#include "server/backend/cuda/copy_ranges.h"

#include <algorithm>
#include <cstdint>

namespace chronoserve::server::cuda {
namespace {

constexpr int kThreads = 256;
// Blocks a range at most: each thread copies a word a pass, so a range of up to kThreads *
// kMaxBlocks words (1 MiB of 16-byte words, 64 KiB of bytes) is copied in one pass; larger ones loop.
constexpr size_t kMaxBlocks = 256;

// A launch's ranges, in its argument. The argument is copied whole at each launch, so a launch
// takes the smallest of these that holds its ranges: a batch of a few requests does not carry 3 KiB.
template <size_t N>
struct RangeBatch {
  CopyRange ranges[N];
};
constexpr size_t kSmallBatch = 8;
constexpr size_t kMediumBatch = 32;
static_assert(kSmallBatch < kMediumBatch && kMediumBatch < kMaxCopyRanges);
static_assert(sizeof(RangeBatch<kMaxCopyRanges>) <= 4000, "the kernel's argument must stay under 4 KiB");

// One range (the block row blockIdx.y's) in words of W. `dst` and `src` are equally far from a
// multiple of W, so once the bytes before `dst`'s first aligned word are copied one by one, both
// are aligned; the bytes past the last whole word go one by one too.
template <typename W>
__device__ void CopyAlignedAlike(char* dst, const char* src, size_t bytes) {
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t misaligned = reinterpret_cast<uintptr_t>(dst) % sizeof(W);
  const size_t to_aligned = misaligned == 0 ? 0 : sizeof(W) - misaligned;
  const size_t head = to_aligned < bytes ? to_aligned : bytes;
  for (size_t i = first; i < head; i += stride) dst[i] = src[i];
  const size_t words = (bytes - head) / sizeof(W);
  W* to = reinterpret_cast<W*>(dst + head);
  const W* from = reinterpret_cast<const W*>(src + head);
  for (size_t i = first; i < words; i += stride) to[i] = from[i];
  for (size_t i = head + words * sizeof(W) + first; i < bytes; i += stride) dst[i] = src[i];
}

template <size_t N>
__global__ void CopyRangesKernel(RangeBatch<N> batch) {
  const CopyRange range = batch.ranges[blockIdx.y];
  char* dst = static_cast<char*>(range.dst);
  const char* src = static_cast<const char*>(range.src);
  // The widest word both ends can be aligned to together: their low bits must agree.
  const uintptr_t skew = reinterpret_cast<uintptr_t>(dst) ^ reinterpret_cast<uintptr_t>(src);
  if ((skew & 15) == 0) {
    CopyAlignedAlike<uint4>(dst, src, range.bytes);
  } else if ((skew & 7) == 0) {
    CopyAlignedAlike<uint2>(dst, src, range.bytes);
  } else if ((skew & 3) == 0) {
    CopyAlignedAlike<uint32_t>(dst, src, range.bytes);
  } else if ((skew & 1) == 0) {
    CopyAlignedAlike<uint16_t>(dst, src, range.bytes);
  } else {
    CopyAlignedAlike<unsigned char>(dst, src, range.bytes);
  }
}

template <size_t N>
cudaError_t Launch(const CopyRange* ranges, size_t n, cudaStream_t stream) {
  RangeBatch<N> batch{};  // the entries past `n` are never read, but are copied: initialised
  size_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    batch.ranges[i] = ranges[i];
    largest = std::max(largest, ranges[i].bytes);
  }
  const size_t per_block = static_cast<size_t>(kThreads) * 16;
  const size_t blocks = std::clamp<size_t>((largest + per_block - 1) / per_block, 1, kMaxBlocks);
  void* args[] = {&batch};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&CopyRangesKernel<N>),
                          dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(n)), dim3(kThreads), args, 0,
                          stream);
}

template <size_t N>
cudaError_t Load() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&CopyRangesKernel<N>));
}

}  // namespace

cudaError_t CopyRangesAsync(const CopyRange* ranges, size_t count, cudaStream_t stream) {
  for (size_t done = 0; done < count; done += kMaxCopyRanges) {
    const size_t n = std::min(kMaxCopyRanges, count - done);
    const cudaError_t err = n <= kSmallBatch    ? Launch<kSmallBatch>(ranges + done, n, stream)
                            : n <= kMediumBatch ? Launch<kMediumBatch>(ranges + done, n, stream)
                                                : Launch<kMaxCopyRanges>(ranges + done, n, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t LoadCopyRangesKernel() {
  for (cudaError_t err : {Load<kSmallBatch>(), Load<kMediumBatch>(), Load<kMaxCopyRanges>()}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace chronoserve::server::cuda
