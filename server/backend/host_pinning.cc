#include "server/backend/host_pinning.h"

#include "common/log.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace chronoserve::server {

HostPinFunction MakeCudaHostPinner() {
#ifdef CHRONOSERVE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky-free error a missing driver leaves behind
    return nullptr;
  }
  return [](void* data, size_t bytes) -> std::shared_ptr<void> {
    const cudaError_t err = cudaHostRegister(data, bytes, cudaHostRegisterPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      CS_LOG(WARNING) << "cudaHostRegister of " << bytes << " bytes failed (" << cudaGetErrorName(err)
                      << "): this shared-memory region takes the staging copy";
      return nullptr;
    }
    return std::shared_ptr<void>(data, [](void* p) { cudaHostUnregister(p); });
  };
#else
  return nullptr;
#endif
}

}  // namespace chronoserve::server
