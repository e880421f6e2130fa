// CUDA runtime error -> absl::Status, naming the call. Compiled only in CUDA builds.
#ifndef CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_
#define CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

}  // namespace chronoserve::server::cuda

#endif  // CHRONOSERVE_SERVER_BACKEND_CUDA_CUDA_CHECK_H_
