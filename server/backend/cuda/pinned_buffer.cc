#include "server/backend/cuda/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "server/backend/cuda/cuda_check.h"

namespace chronoserve::server::cuda {

PinnedBuffer::~PinnedBuffer() { Release(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      retired_(std::exchange(other.retired_, {})) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    retired_ = std::exchange(other.retired_, {});
  }
  return *this;
}

void PinnedBuffer::Release() {
  if (data_ != nullptr) cudaFreeHost(data_);
  for (char* old : retired_) cudaFreeHost(old);
  retired_.clear();
  data_ = nullptr;
  capacity_ = 0;
}

absl::Status PinnedBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return absl::OkStatus();
  // Grow geometrically so a slowly rising batch size does not reallocate every time.
  size_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
  void* ptr = nullptr;
  absl::Status status = CudaStatus(cudaHostAlloc(&ptr, want, cudaHostAllocDefault), "cudaHostAlloc");
  if (!status.ok()) return status;  // the old buffer stays, still valid
  // Not freed here: cudaFreeHost synchronises the whole device, which would stall every worker on
  // the GPU in the middle of a request. Freed with the buffer (at most 2x the final size in all).
  if (data_ != nullptr) retired_.push_back(data_);
  data_ = static_cast<char*>(ptr);
  capacity_ = want;
  return absl::OkStatus();
}

}  // namespace chronoserve::server::cuda
