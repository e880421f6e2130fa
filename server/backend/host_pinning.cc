#include "server/backend/host_pinning.h"

#include "common/log.h"

#include "absl/strings/str_cat.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
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

DeviceOpenFunction MakeCudaIpcOpener() {
#ifdef CHRONOSERVE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return nullptr;
  }
  return [devices](const std::string& raw_handle, int64_t device_id, uint64_t byte_size,
                   char** data) -> absl::StatusOr<std::shared_ptr<void>> {
    if (device_id < 0 || device_id >= devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_id ", device_id, " is not a GPU of this server (it sees ", devices, ")"));
    }
    cudaIpcMemHandle_t handle;
    if (raw_handle.size() != sizeof(handle)) {
      return absl::InvalidArgumentError(
          absl::StrCat("raw_handle holds ", raw_handle.size(), " bytes, a cudaIpcMemHandle_t has ", sizeof(handle)));
    }
    std::memcpy(&handle, raw_handle.data(), sizeof(handle));
    const int gpu = static_cast<int>(device_id);
    PinningGuard on_gpu(gpu);
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::InvalidArgumentError(absl::StrCat(
          "cudaIpcOpenMemHandle on GPU ", gpu, " failed (", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
          "); the handle must come from cudaIpcGetMemHandle in another process that still holds the memory"));
    }
    auto close = [gpu](void* p) {
      PinningGuard on_same_gpu(gpu);  // the token may die on any thread
      if (cudaIpcCloseMemHandle(p) != cudaSuccess) cudaGetLastError();
    };
    std::shared_ptr<void> token(ptr, close);
    // The handle names a whole allocation: its size bounds every copy into or out of the region.
    CUdeviceptr base = 0;
    size_t allocated = 0;
    if (cuMemGetAddressRange(&base, &allocated, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) {
      return absl::InvalidArgumentError("cuMemGetAddressRange of the opened memory failed");
    }
    const uint64_t usable = allocated - (reinterpret_cast<CUdeviceptr>(ptr) - base);
    if (byte_size > usable) {
      return absl::InvalidArgumentError(absl::StrCat("byte_size ", byte_size, " exceeds the ", usable,
                                                     " bytes of the GPU allocation the handle names"));
    }
    *data = static_cast<char*>(ptr);
    return token;
  };
#else
  return nullptr;
#endif
}

}  // namespace chronoserve::server
