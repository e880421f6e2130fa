#include "client/cuda_shared_memory.h"

#include "absl/strings/str_cat.h"
#include "client/region_range.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <cuda.h>  // CUcontext, CUresult: the driver's calls themselves are looked up at run time
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace chronoserve::client {

absl::Status CudaSharedMemory::CheckRange(const char* what, size_t offset, size_t bytes) const {
  if (RegionRangeFits(offset, bytes, byte_size_)) return absl::OkStatus();
  return RegionRangeError(absl::StrCat("CUDA shared memory on GPU ", device_id_), what, offset, bytes, byte_size_);
}

#ifdef CHRONOSERVE_WITH_CUDA
namespace {

// "what on GPU n: CUDA's message", clearing the runtime's last error.
absl::Status CudaError(cudaError_t err, int device_id, const std::string& what) {
  (void)cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, " on GPU ", device_id, ": ", cudaGetErrorString(err)));
}

// The two driver calls come from the driver library the runtime loads, looked up when first needed:
// linking libcuda would stop chronobench from starting on a host without the NVIDIA driver, where
// it runs with system shared memory.
struct ContextCalls {
  CUresult (*get)(CUcontext*) = nullptr;
  CUresult (*set)(CUcontext) = nullptr;
};

const ContextCalls& DriverContextCalls() {
  static const ContextCalls calls = [] {
    ContextCalls c;
    void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return c;
    c.get = reinterpret_cast<CUresult (*)(CUcontext*)>(::dlsym(driver, "cuCtxGetCurrent"));
    c.set = reinterpret_cast<CUresult (*)(CUcontext)>(::dlsym(driver, "cuCtxSetCurrent"));
    if (c.get == nullptr || c.set == nullptr) c = ContextCalls{};
    return c;
  }();
  return calls;
}

// Makes `device_id` current for the scope (cudaMalloc, cudaIpcGetMemHandle and cudaFree act on the
// current device), then gives the calling thread back the very context it had: none, on a thread
// that never used CUDA. Restoring the device number instead (cudaGetDevice says 0 on such a thread)
// would make GPU 0's primary context current, which since CUDA 12 creates it: a context on GPU 0 for
// a client whose regions are all on another GPU.
class DeviceScope {
 public:
  explicit DeviceScope(int device_id) : calls_(DriverContextCalls()) {
    // Before anything initialised the driver there is no context either.
    if (calls_.get != nullptr && calls_.get(&previous_) != CUDA_SUCCESS) previous_ = nullptr;
    status_ = cudaSetDevice(device_id);
  }
  ~DeviceScope() {
    CUcontext now = nullptr;
    if (calls_.get != nullptr && calls_.get(&now) == CUDA_SUCCESS && now != previous_) (void)calls_.set(previous_);
  }
  cudaError_t status() const { return status_; }

 private:
  const ContextCalls& calls_;  // none without a driver: cudaSetDevice fails then, and nothing is restored
  CUcontext previous_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace

bool CudaSharedMemory::Available() { return true; }

absl::StatusOr<std::unique_ptr<CudaSharedMemory>> CudaSharedMemory::Create(int device_id, size_t byte_size) {
  const std::string what = absl::StrCat("CUDA shared memory of ", byte_size, " bytes");
  if (byte_size == 0) return absl::InvalidArgumentError(what + ": size 0");
  int devices = 0;
  if (cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": no CUDA device here (", cudaGetErrorString(err), ")"));
  }
  if (device_id < 0 || device_id >= devices) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": GPU ", device_id, " does not exist (this machine has ",
                                                   devices, ")"));
  }
  DeviceScope scope(device_id);
  if (scope.status() != cudaSuccess) return CudaError(scope.status(), device_id, what + ": cudaSetDevice");
  void* data = nullptr;
  if (cudaError_t err = cudaMalloc(&data, byte_size); err != cudaSuccess) {
    absl::Status status = CudaError(err, device_id, what + ": cudaMalloc");
    if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(status.message());
    return status;
  }
  cudaIpcMemHandle_t handle;
  if (cudaError_t err = cudaIpcGetMemHandle(&handle, data); err != cudaSuccess) {
    (void)cudaFree(data);
    return CudaError(err, device_id, what + ": cudaIpcGetMemHandle");
  }
  return std::unique_ptr<CudaSharedMemory>(new CudaSharedMemory(
      device_id, byte_size, data, std::string(reinterpret_cast<const char*>(&handle), sizeof(handle))));
}

CudaSharedMemory::~CudaSharedMemory() {
  DeviceScope scope(device_id_);
  (void)cudaFree(data_);
  (void)cudaGetLastError();
}

absl::Status CudaSharedMemory::Write(size_t offset, const void* src, size_t bytes) const {
  if (absl::Status range = CheckRange("a write", offset, bytes); !range.ok()) return range;
  const std::string what = absl::StrCat("copying ", bytes, " bytes into CUDA shared memory");
  DeviceScope scope(device_id_);
  if (scope.status() != cudaSuccess) return CudaError(scope.status(), device_id_, what + ": cudaSetDevice");
  if (cudaError_t err = cudaMemcpy(static_cast<char*>(data_) + offset, src, bytes, cudaMemcpyHostToDevice);
      err != cudaSuccess) {
    return CudaError(err, device_id_, what);
  }
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the DMA has put them
  // in the region; the server reads the region from its own context, ordered after nothing of ours.
  if (cudaError_t err = cudaStreamSynchronize(0); err != cudaSuccess) {
    return CudaError(err, device_id_, what + ": cudaStreamSynchronize");
  }
  return absl::OkStatus();
}

absl::Status CudaSharedMemory::Read(size_t offset, size_t bytes, void* dst) const {
  if (absl::Status range = CheckRange("a read", offset, bytes); !range.ok()) return range;
  const std::string what = absl::StrCat("copying ", bytes, " bytes out of CUDA shared memory");
  DeviceScope scope(device_id_);  // as Write: the thread keeps its own context (or none) after it
  if (scope.status() != cudaSuccess) return CudaError(scope.status(), device_id_, what + ": cudaSetDevice");
  if (cudaError_t err = cudaMemcpy(dst, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost);
      err != cudaSuccess) {
    return CudaError(err, device_id_, what);
  }
  return absl::OkStatus();
}

absl::Status CudaSharedMemory::Fill(int value) const {
  DeviceScope scope(device_id_);  // cudaMemset and the synchronize below act on the current device
  if (scope.status() != cudaSuccess) return CudaError(scope.status(), device_id_, "filling CUDA shared memory: cudaSetDevice");
  if (cudaError_t err = cudaMemset(data_, value, byte_size_); err != cudaSuccess) {
    return CudaError(err, device_id_, "filling CUDA shared memory");
  }
  if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
    return CudaError(err, device_id_, "filling CUDA shared memory");
  }
  return absl::OkStatus();
}

#else

bool CudaSharedMemory::Available() { return false; }

absl::StatusOr<std::unique_ptr<CudaSharedMemory>> CudaSharedMemory::Create(int device_id, size_t byte_size) {
  return absl::FailedPreconditionError(absl::StrCat(
      "CUDA shared memory (GPU ", device_id, ", ", byte_size,
      " bytes) needs a build with CUDA: this one was built against a LibTorch without it; use system shared memory"));
}

CudaSharedMemory::~CudaSharedMemory() = default;

// Unreachable: no object exists without CUDA (Create refuses).
absl::Status CudaSharedMemory::Write(size_t, const void*, size_t) const {
  return absl::FailedPreconditionError("CUDA shared memory needs a build with CUDA");
}

absl::Status CudaSharedMemory::Read(size_t, size_t, void*) const {
  return absl::FailedPreconditionError("CUDA shared memory needs a build with CUDA");
}

absl::Status CudaSharedMemory::Fill(int) const {
  return absl::FailedPreconditionError("CUDA shared memory needs a build with CUDA");
}

#endif

}  // namespace chronoserve::client
