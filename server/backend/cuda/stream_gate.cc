#include "server/backend/cuda/stream_gate.h"

#include <cuda.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "server/backend/cuda/cuda_check.h"

namespace chronoserve::server::cuda {
namespace {

absl::Status DriverStatus(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "";
  return absl::InternalError(absl::StrCat(what, " failed: ", name, " (", text, ")"));
}

// cudaEventQuery's "not ready" is no error, but the runtime keeps it as the thread's last error,
// where LibTorch's next launch check would find it: clear it.
cudaError_t QueryEvent(cudaEvent_t event) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaErrorNotReady) (void)cudaGetLastError();
  return state;
}

// Polls `event` until it completes or `timeout` passes (never blocks on a stream that may stay held).
absl::Status PollEvent(cudaEvent_t event, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const cudaError_t state = QueryEvent(event);
    if (state == cudaSuccess) return absl::OkStatus();
    if (state != cudaErrorNotReady) return CudaStatus(state, "cudaEventQuery");
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("event still pending");
    absl::SleepFor(absl::Microseconds(100));
  }
}

// The device address of pinned host memory. With unified addressing (every 64-bit process) it is
// the host address itself, which is the fallback should the runtime refuse the explicit mapping.
absl::StatusOr<uint64_t> DeviceAddress(void* host, int gpu) {
  void* device_pointer = nullptr;
  const cudaError_t mapped = cudaHostGetDevicePointer(&device_pointer, host, 0);
  if (mapped != cudaSuccess) {
    (void)cudaGetLastError();
    int unified = 0;
    if (cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, gpu) != cudaSuccess || unified == 0) {
      return CudaStatus(mapped, "cudaHostGetDevicePointer");
    }
    device_pointer = host;
  }
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(device_pointer));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamGate>> StreamGate::Create(int gpu, cudaStream_t stream,
                                                               absl::Duration watchdog) {
  std::unique_ptr<StreamGate> gate(new StreamGate(gpu, stream, watchdog));
  absl::Status status = gate->Init();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("exact device timing on GPU ", gpu, ": ", status.message()));
  }
  return gate;
}

absl::Status StreamGate::Init() {
  int can_map = 0;
  RETURN_IF_ERROR(CudaStatus(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, gpu_),
                             "cudaDeviceGetAttribute(cudaDevAttrCanMapHostMemory)"));
  if (can_map == 0) {
    return absl::FailedPreconditionError(
        "the device cannot map host memory (cudaDevAttrCanMapHostMemory = 0); the stream hold waits on a "
        "mapped host flag");
  }
  // The driver-API wait needs gpu_'s context current on whichever thread holds: pushed around it.
  RETURN_IF_ERROR(DriverStatus(cuDeviceGet(&device_, gpu_), "cuDeviceGet"));
  RETURN_IF_ERROR(DriverStatus(cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain"));
  context_retained_ = true;
  void* host = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&host, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
                             "cudaHostAlloc(mapped flag)"));
  flag_ = static_cast<uint32_t*>(host);
  *static_cast<volatile uint32_t*>(flag_) = 0;
  ASSIGN_OR_RETURN(device_flag_, DeviceAddress(host, gpu_));
  watchdog_thread_ = std::thread([this] {
    SetCurrentThreadName("cs-gate-watch");
    WatchdogLoop();
  });
  return Probe();
}

// One real hold: an event recorded behind it must stay pending while held and complete once released.
absl::Status StreamGate::Probe() {
  cudaEvent_t event = nullptr;
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  absl::Status status = Hold();
  if (status.ok()) {
    const cudaError_t recorded = cudaEventRecord(event, stream_);
    // Time for an unheld stream to pass the event, so that "still pending" means "held".
    if (recorded == cudaSuccess) absl::SleepFor(absl::Milliseconds(2));
    const cudaError_t while_held = recorded == cudaSuccess ? QueryEvent(event) : recorded;
    const bool released = Release();
    if (recorded != cudaSuccess) {
      status = CudaStatus(recorded, "cudaEventRecord");
    } else if (while_held == cudaSuccess) {
      status = absl::FailedPreconditionError(
          "the stream ran past cuStreamWaitValue32 before the release: stream memory operations do not hold "
          "on this device/driver");
    } else if (while_held != cudaErrorNotReady) {
      status = CudaStatus(while_held, "cudaEventQuery");
    } else if (!PollEvent(event, watchdog_).ok()) {
      // Opened by Release() or, when the host was held up past it, by the watchdog: either way the
      // flag was written, so a wait still blocking never saw it (and the destructor must not wait).
      stream_stuck_ = true;
      status = absl::FailedPreconditionError(absl::StrCat(
          "the device did not see the host's release within ", absl::FormatDuration(watchdog_),
          " (mapped host memory not visible to cuStreamWaitValue32); this stream stays blocked"));
    } else if (!released) {
      status = absl::FailedPreconditionError("the probe hold outlived the watchdog");
    }
  }
  cudaEventDestroy(event);
  return status;
}

StreamGate::~StreamGate() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (held_seq_ != released_seq_) Open(held_seq_);  // never leave the stream held
  }
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  // The stream's last wait may not have read the flag yet: let it pass before the memory goes. A
  // stream whose wait never saw the flag keeps it (4 bytes) rather than read freed memory.
  if (flag_ != nullptr && !stream_stuck_) {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFreeHost(flag_);
  }
  if (context_retained_) (void)cuDevicePrimaryCtxRelease(device_);
}

absl::Status StreamGate::Hold() {
  uint32_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    if (held_seq_ != released_seq_) {
      return absl::FailedPreconditionError("StreamGate::Hold: the previous hold was not released");
    }
    seq = held_seq_ + 1;
  }
  RETURN_IF_ERROR(DriverStatus(cuCtxPushCurrent(context_), "cuCtxPushCurrent"));
  const CUresult waited =
      cuStreamWaitValue32(stream_, static_cast<CUdeviceptr>(device_flag_), seq, CU_STREAM_WAIT_VALUE_GEQ);
  CUcontext popped = nullptr;
  const CUresult restored = cuCtxPopCurrent(&popped);
  if (waited != CUDA_SUCCESS) return DriverStatus(waited, "cuStreamWaitValue32");
  {
    absl::MutexLock lock(&mu_);  // armed: from here the watchdog guards the hold
    held_seq_ = seq;
    held_at_ = absl::Now();
  }
  if (restored != CUDA_SUCCESS) {
    Release();
    return DriverStatus(restored, "cuCtxPopCurrent");
  }
  return absl::OkStatus();
}

bool StreamGate::Release() {
  absl::MutexLock lock(&mu_);
  if (held_seq_ == released_seq_) return false;  // nothing held, or the watchdog got there first
  Open(held_seq_);
  return true;
}

int64_t StreamGate::watchdog_releases() const {
  absl::MutexLock lock(&mu_);
  return watchdog_releases_;
}

void StreamGate::Open(uint32_t seq) {
  // Everything the host wrote before the release is visible before the flag changes.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *static_cast<volatile uint32_t*>(flag_) = seq;
  released_seq_ = seq;
}

void StreamGate::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto held_or_stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || held_seq_ != released_seq_;
    };
    mu_.Await(absl::Condition(&held_or_stopping));
    if (stopping_) return;
    const uint32_t seq = held_seq_;
    auto over = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || released_seq_ == seq || held_seq_ != seq;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&over), held_at_ + watchdog_)) {
      Open(seq);
      ++watchdog_releases_;
    }
  }
}

}  // namespace chronoserve::server::cuda
