// CudaEvent: an owned cudaEvent_t with timing enabled, recorded on a worker's stream. Durations are
// read with cudaEventElapsedTime only after the later event has completed. One owner (a worker's
// SpanMarkers); not thread-safe.
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_EVENT_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_EVENT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace chronoserve::server::cuda {

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Creates the event on the current device. Call once before Record.
  absl::Status Init();
  absl::Status Record(cudaStream_t stream);
  // Blocks the calling thread until the event has completed.
  absl::Status Synchronize();
  // Whether the caller may wait for the event now without blocking for long: true once it has
  // completed, and on an error (which Synchronize then reports); false while it is pending. Leaves
  // no error behind as the thread's last.
  bool Query();
  cudaEvent_t get() const { return event_; }

  // Nanoseconds from `start` to `end`; both recorded and `end` complete.
  static absl::StatusOr<int64_t> ElapsedNs(const CudaEvent& start, const CudaEvent& end);

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_EVENT_H_
