#include "server/backend/cuda/cuda_event.h"

#include <cmath>

#include "server/backend/cuda/cuda_check.h"

namespace chronoserve::server::cuda {

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

absl::Status CudaEvent::Init() {
  if (event_ != nullptr) return absl::OkStatus();
  return CudaStatus(cudaEventCreate(&event_), "cudaEventCreate");
}

absl::Status CudaEvent::Record(cudaStream_t stream) {
  return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord");
}

absl::Status CudaEvent::Synchronize() {
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

bool CudaEvent::Query() {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  // Whatever the query returned is also left as the thread's last error, where LibTorch's next
  // launch check would read it as that launch's failure: cleared. "Not ready" is the one answer
  // that means pending; on any other error the caller is told to wait now, and Synchronize
  // reports it (the same error: a failed event or a sticky context error) against its own batch.
  (void)cudaGetLastError();
  return err != cudaErrorNotReady;
}

absl::StatusOr<int64_t> CudaEvent::ElapsedNs(const CudaEvent& start, const CudaEvent& end) {
  float ms = 0;
  absl::Status status =
      CudaStatus(cudaEventElapsedTime(&ms, start.event_, end.event_), "cudaEventElapsedTime");
  if (!status.ok()) return status;
  return static_cast<int64_t>(std::llround(static_cast<double>(ms) * 1e6));
}

}  // namespace chronoserve::server::cuda
