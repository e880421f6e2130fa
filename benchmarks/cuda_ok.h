// CudaOk: for the CUDA benchmarks, whether a runtime call succeeded; when it did not, its error is
// printed to stderr in the server's wording (server/backend/cuda/cuda_check.h).
#ifndef CHRONOSERVE_BENCHMARKS_CUDA_OK_H_
#define CHRONOSERVE_BENCHMARKS_CUDA_OK_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "server/backend/cuda/cuda_check.h"

namespace chronoserve::bench {

inline bool CudaOk(cudaError_t error, const char* what) {
  const absl::Status status = server::cuda::CudaStatus(error, what);
  if (!status.ok()) std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  return status.ok();
}

}  // namespace chronoserve::bench

#endif  // CHRONOSERVE_BENCHMARKS_CUDA_OK_H_
