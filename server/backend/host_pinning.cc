#include "server/backend/host_pinning.h"

#include "common/log.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <optional>
#endif

namespace chronoserve::server {

#ifdef CHRONOSERVE_WITH_CUDA
namespace {

// The GPU whose context pins and unpins a region: the first one a worker already uses (its primary
// context is active), so that a gRPC thread, whose current device is 0 until set, never makes a
// context (hundreds of MiB) on a GPU the server does not use. -1 while no GPU is in use: the
// thread's current device then does it, as before any worker existed.
int PinningDevice(int devices) {
  for (int d = 0; d < devices; ++d) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (cuDeviceGet(&device, d) == CUDA_SUCCESS &&
        cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active != 0) {
      return d;
    }
  }
  return -1;
}

// `gpu` current for its lifetime (nothing when -1 or when the switch fails); never throws.
class PinningGuard {
 public:
  explicit PinningGuard(int gpu) {
    if (gpu < 0) return;
    try {
      guard_.emplace(static_cast<c10::DeviceIndex>(gpu));
    } catch (const c10::Error&) {
      // The call below then runs on the thread's current device.
    }
  }

 private:
  std::optional<c10::cuda::CUDAGuard> guard_;
};

}  // namespace
#endif

HostPinFunction MakeCudaHostPinner() {
#ifdef CHRONOSERVE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky-free error a missing driver leaves behind
    return nullptr;
  }
  return [devices](void* data, size_t bytes) -> std::shared_ptr<void> {
    const int gpu = PinningDevice(devices);
    PinningGuard on_gpu(gpu);
    const cudaError_t err = cudaHostRegister(data, bytes, cudaHostRegisterPortable);
    if (err != cudaSuccess) {
      cudaGetLastError();
      CS_LOG(WARNING) << "cudaHostRegister of " << bytes << " bytes failed (" << cudaGetErrorName(err)
                      << "): this shared-memory region takes the staging copy";
      return nullptr;
    }
    return std::shared_ptr<void>(data, [gpu](void* p) {
      PinningGuard on_same_gpu(gpu);  // the token may die on any thread
      if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
    });
  };
#else
  return nullptr;
#endif
}

}  // namespace chronoserve::server
