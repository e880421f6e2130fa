#include "server/backend/torch_device_path.h"

#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "server/backend/cuda/cuda_check.h"
#include "server/backend/cuda/cuda_event.h"
#include "server/backend/cuda/pinned_buffer.h"
#include "server/backend/cuda/stream_gate.h"
#endif

namespace chronoserve::server {
namespace {

// ---- CPU: host buffers, no copies, host clock ----
class CpuPath final : public DevicePath {
 public:
  explicit CpuPath(const Clock* clock) : clock_(clock) {}
  torch::Device device() const override { return torch::kCPU; }
  bool device_timed() const override { return false; }
  bool direct_pinned_io() const override { return false; }
  std::shared_ptr<void> Enter() override { return nullptr; }

  absl::StatusOr<char*> Staging(int input, size_t bytes) override {
    if (static_cast<size_t>(input) >= staging_.size()) staging_.resize(input + 1);
    auto& buf = staging_[input];
    if (buf.size() < bytes) buf.resize(bytes + bytes / 2 + 64);
    return buf.data();
  }
  absl::StatusOr<torch::Tensor> ToDevice(char* staged, const std::vector<int64_t>& shape,
                                         torch::ScalarType type) override {
    return torch::from_blob(staged, shape, torch::TensorOptions().dtype(type));
  }
  absl::Status ToDeviceInto(const char* staged, size_t bytes, const torch::Tensor& dst) override {
    if (bytes > dst.nbytes()) return absl::InternalError("staged input larger than its static tensor");
    char* out = static_cast<char*>(dst.data_ptr());
    std::memcpy(out, staged, bytes);
    std::memset(out + bytes, 0, dst.nbytes() - bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<const char*> ToHost(int output, const torch::Tensor& tensor) override {
    if (static_cast<size_t>(output) >= held_.size()) held_.resize(output + 1);
    held_[output] = tensor.contiguous();  // keeps the bytes alive until the next batch
    return static_cast<const char*>(held_[output].data_ptr());
  }
  absl::Status ToHostInto(int, const torch::Tensor& tensor, char* dst) override {
    std::memcpy(dst, tensor.data_ptr(), tensor.nbytes());
    return absl::OkStatus();
  }
  absl::Status Mark(Marker marker) override {
    stamps_[marker] = clock_->NowNs();
    return absl::OkStatus();
  }
  absl::Status Wait() override { return absl::OkStatus(); }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::StatusOr<int64_t> SpanNs(Marker from, Marker to) override {
    return stamps_[to] - stamps_[from];
  }

 private:
  const Clock* clock_;
  std::vector<std::vector<char>> staging_;
  std::vector<torch::Tensor> held_;
  std::array<int64_t, kMarkerCount> stamps_{};
};

#ifdef CHRONOSERVE_WITH_CUDA
// ---- CUDA: the worker's own stream, pinned staging, CUDA events ----
class CudaPath final : public DevicePath {
 public:
  CudaPath(int gpu, c10::cuda::CUDAStream stream) : gpu_(gpu), stream_(stream) {}

  absl::Status Init(bool exact_device_timing) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu_));
    for (auto& e : events_) RETURN_IF_ERROR(e.Init());
    RETURN_IF_ERROR(sync_event_.Init());
    if (!exact_device_timing) return absl::OkStatus();
    ASSIGN_OR_RETURN(gate_, cuda::StreamGate::Create(gpu_, stream_.stream(), kHoldWatchdog));
    return absl::OkStatus();
  }
  torch::Device device() const override {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu_));
  }
  bool device_timed() const override { return true; }
  bool direct_pinned_io() const override { return true; }
  std::shared_ptr<void> Enter() override {
    return std::make_shared<c10::cuda::CUDAStreamGuard>(stream_);
  }
  absl::StatusOr<char*> Staging(int input, size_t bytes) override {
    if (static_cast<size_t>(input) >= staging_.size()) staging_.resize(input + 1);
    RETURN_IF_ERROR(staging_[input].Reserve(bytes));
    return staging_[input].data();
  }
  absl::StatusOr<torch::Tensor> ToDevice(char* staged, const std::vector<int64_t>& shape,
                                         torch::ScalarType type) override {
    // Allocated by LibTorch's caching allocator on the current (this worker's) stream.
    torch::Tensor dst = torch::empty(shape, torch::TensorOptions().dtype(type).device(device()));
    RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(dst.data_ptr(), staged, dst.nbytes(), cudaMemcpyHostToDevice, stream_.stream()),
        "cudaMemcpyAsync(H2D)"));
    return dst;
  }
  absl::Status ToDeviceInto(const char* staged, size_t bytes, const torch::Tensor& dst) override {
    if (bytes > dst.nbytes()) return absl::InternalError("staged input larger than its static tensor");
    char* out = static_cast<char*>(dst.data_ptr());
    RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(out, staged, bytes, cudaMemcpyHostToDevice, stream_.stream()),
        "cudaMemcpyAsync(H2D into graph input)"));
    if (bytes == dst.nbytes()) return absl::OkStatus();
    return cuda::CudaStatus(cudaMemsetAsync(out + bytes, 0, dst.nbytes() - bytes, stream_.stream()),
                            "cudaMemsetAsync(graph input pad rows)");
  }
  absl::StatusOr<const char*> ToHost(int output, const torch::Tensor& tensor) override {
    torch::Tensor src = tensor.contiguous();
    if (static_cast<size_t>(output) >= landing_.size()) {
      landing_.resize(output + 1);
      held_.resize(output + 1);
    }
    held_[output] = src;  // the device tensor must live until the copy has run
    RETURN_IF_ERROR(landing_[output].Reserve(src.nbytes()));
    RETURN_IF_ERROR(cuda::CudaStatus(cudaMemcpyAsync(landing_[output].data(), src.data_ptr(),
                                                     src.nbytes(), cudaMemcpyDeviceToHost,
                                                     stream_.stream()),
                                     "cudaMemcpyAsync(D2H)"));
    return landing_[output].data();
  }
  absl::Status ToHostInto(int output, const torch::Tensor& tensor, char* dst) override {
    if (static_cast<size_t>(output) >= held_.size()) {
      landing_.resize(output + 1);
      held_.resize(output + 1);
    }
    held_[output] = tensor;  // the device tensor must live until the copy has run
    return cuda::CudaStatus(cudaMemcpyAsync(dst, tensor.data_ptr(), tensor.nbytes(), cudaMemcpyDeviceToHost,
                                            stream_.stream()),
                            "cudaMemcpyAsync(D2H into a pinned shared-memory region)");
  }
  absl::Status Mark(Marker marker) override { return events_[marker].Record(stream_.stream()); }
  absl::Status Wait() override { return events_[kAfterD2H].Synchronize(); }
  absl::Status Sync() override {
    RETURN_IF_ERROR(sync_event_.Record(stream_.stream()));
    return sync_event_.Synchronize();
  }
  absl::StatusOr<int64_t> SpanNs(Marker from, Marker to) override {
    return cuda::CudaEvent::ElapsedNs(events_[from], events_[to]);
  }
  bool can_hold_stream() const override { return gate_ != nullptr; }
  absl::Status HoldStream() override {
    if (gate_ == nullptr) return DevicePath::HoldStream();
    return gate_->Hold();
  }
  bool ReleaseStream() override { return gate_ != nullptr && gate_->Release(); }

 private:
  // Longest a hold may last before its watchdog releases it (a legitimate enqueue takes < 10 ms).
  // A held batch normally waits only for its own enqueue (µs to a few ms); longer means the host
  // is blocked behind the hold, which the watchdog then breaks.
  static constexpr absl::Duration kHoldWatchdog = absl::Milliseconds(250);

  int gpu_;
  c10::cuda::CUDAStream stream_;
  std::array<cuda::CudaEvent, kMarkerCount> events_;
  cuda::CudaEvent sync_event_;
  std::vector<cuda::PinnedBuffer> staging_;
  std::vector<cuda::PinnedBuffer> landing_;
  std::vector<torch::Tensor> held_;
  std::unique_ptr<cuda::StreamGate> gate_;  // exact device timing only
};
#endif

}  // namespace

std::unique_ptr<DevicePath> MakeCpuPath(const Clock* clock) {
  return std::make_unique<CpuPath>(clock);
}

absl::StatusOr<std::unique_ptr<DevicePath>> MakeCudaPath(int gpu, bool exact_device_timing) {
#ifdef CHRONOSERVE_WITH_CUDA
  auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                             static_cast<c10::DeviceIndex>(gpu));
  auto path = std::make_unique<CudaPath>(gpu, stream);
  RETURN_IF_ERROR(path->Init(exact_device_timing));
  return std::unique_ptr<DevicePath>(std::move(path));
#else
  (void)exact_device_timing;
  return absl::FailedPreconditionError(
      absl::StrCat("GPU ", gpu, " requested but this chronoserve build's LibTorch has no CUDA"));
#endif
}

}  // namespace chronoserve::server
