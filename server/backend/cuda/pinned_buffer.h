// PinnedBuffer: page-locked host memory (cudaHostAlloc) that grows on demand, used for a worker's
// input staging and output landing so that H2D/D2H copies are true async DMA (~3x faster than
// pageable; TIMING.md lesson 3). One owner; not thread-safe.
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_PINNED_BUFFER_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_PINNED_BUFFER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"

namespace chronoserve::server::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;

  // Ensures capacity() >= bytes; contents are not preserved when it grows. The smaller buffers it
  // outgrew are kept until this one is destroyed: freeing page-locked memory synchronises the
  // device, which must not happen on a request's path (TIMING.md lesson 7).
  absl::Status Reserve(size_t bytes);
  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void Release();
  char* data_ = nullptr;
  size_t capacity_ = 0;
  std::vector<char*> retired_;  // outgrown, freed by Release()
};

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_PINNED_BUFFER_H_
