// CUDA runtime error -> absl::Status, naming the call. Compiled only in CUDA builds.
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server::cuda {

// A failed call's error also stays behind as the calling thread's last error, where LibTorch's next
// launch check (cudaGetLastError after a kernel) would report it against a healthy batch ("CUDA
// error: out of memory" after a failed cudaHostAlloc): it is cleared here, as the error is returned.
// A sticky error (one that corrupts the context) persists regardless and fails the next call too.
inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, " failed: ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_
