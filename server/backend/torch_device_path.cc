#include "server/backend/torch_device_path.h"

#include <torch/types.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "server/backend/lent_buffer_pool.h"
#include "server/core/input_arena.h"

#ifdef CHRONOSERVE_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "server/backend/cuda/copy_ranges.h"
#include "server/backend/cuda/cuda_check.h"
#include "server/backend/cuda/cuda_event.h"
#include "server/backend/cuda/pinned_buffer.h"
#include "server/backend/cuda/stream_gate.h"
#endif

namespace chronoserve::server {
namespace {

// `size` bytes copied into a buffer of `pool` and lent; empty when the pool lends no more.
LentBytes LendCopy(LentBufferPool& pool, const char* bytes, size_t size) {
  if (!pool.CanLend(size)) return {};
  absl::StatusOr<LentBufferPool::Buffer> buffer = pool.Take(size);
  if (!buffer.ok()) return {};
  if (size > 0) std::memcpy(buffer->data, bytes, size);
  std::shared_ptr<const void> owner = pool.Lend(*buffer);
  if (owner == nullptr) {
    pool.Put(*buffer);
    return {};
  }
  return LentBytes{std::move(owner), buffer->data, size};
}

// ---- CPU: host buffers, no copies, host clock ----
class CpuPath final : public DevicePath {
 public:
  explicit CpuPath(const Clock* clock)
      : clock_(clock),
        lend_pool_(LentBufferPool::Create({[](size_t bytes) -> absl::StatusOr<char*> {
                                             void* data = std::malloc(bytes);
                                             if (data == nullptr) return absl::ResourceExhaustedError("malloc");
                                             return static_cast<char*>(data);
                                           },
                                           [](char* data) { std::free(data); }})) {}
  torch::Device device() const override { return torch::kCPU; }
  bool device_timed() const override { return false; }
  bool direct_pinned_io() const override { return false; }
  std::shared_ptr<void> Enter() override { return nullptr; }
  absl::StatusOr<std::shared_ptr<char>> AllocateHost(size_t bytes) const override {
    return InputArena::OrdinaryMemory(bytes);
  }
  void SelectSlot(int slot) override { slot_ = &slots_[slot]; }
  absl::Status BeginInputs(const InputsPlan&) override { return absl::OkStatus(); }

  absl::StatusOr<char*> Staging(int input, size_t bytes) override {
    auto& staging = slot_->staging;
    if (static_cast<size_t>(input) >= staging.size()) staging.resize(input + 1);
    auto& buf = staging[input];
    if (buf.size() < bytes) buf.resize(bytes + bytes / 2 + 64);
    return buf.data();
  }
  absl::StatusOr<torch::Tensor> ToDevice(int, absl::Span<const BytePiece> pieces, const std::vector<int64_t>& shape,
                                         torch::ScalarType type) override {
    // Host inputs are gathered into one piece on the CPU (only CUDA shared memory comes in several).
    if (pieces.size() != 1) return absl::InternalError("the CPU path takes an input as one piece");
    return torch::from_blob(const_cast<char*>(pieces[0].data), shape, torch::TensorOptions().dtype(type));
  }
  absl::Status ToDeviceInto(int, absl::Span<const BytePiece> pieces, size_t bytes, const torch::Tensor& dst) override {
    if (bytes > dst.nbytes()) return absl::InternalError("staged input larger than its static tensor");
    char* out = static_cast<char*>(dst.data_ptr());
    size_t offset = 0;
    for (const BytePiece& piece : pieces) {
      std::memcpy(out + offset, piece.data, piece.bytes);
      offset += piece.bytes;
    }
    std::memset(out + bytes, 0, dst.nbytes() - bytes);
    return absl::OkStatus();
  }
  absl::Status InputsReady() override { return absl::OkStatus(); }
  absl::StatusOr<const char*> ToHost(int output, const torch::Tensor& tensor) override {
    auto& held = slot_->held;
    if (static_cast<size_t>(output) >= held.size()) held.resize(output + 1);
    held[output] = tensor.contiguous();  // keeps the bytes alive until the slot's next batch
    return static_cast<const char*>(held[output].data_ptr());
  }
  absl::Status CopyOutInto(int, const torch::Tensor& tensor, char* dst) override {
    std::memcpy(dst, tensor.data_ptr(), tensor.nbytes());
    return absl::OkStatus();
  }
  LentBytes LendHost(int, const char* bytes, size_t size) override { return LendCopy(*lend_pool_, bytes, size); }
  absl::Status Mark(Marker marker) override {
    slot_->stamps[marker] = clock_->NowNs();
    return absl::OkStatus();
  }
  absl::Status Wait() override { return absl::OkStatus(); }
  bool Done() override { return true; }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::StatusOr<int64_t> SpanNs(Marker from, Marker to) override {
    return slot_->stamps[to] - slot_->stamps[from];
  }

 private:
  struct Slot {
    std::vector<std::vector<char>> staging;
    std::vector<torch::Tensor> held;
    std::array<int64_t, kMarkerCount> stamps{};
  };
  const Clock* clock_;
  std::array<Slot, kPathSlots> slots_;
  Slot* slot_ = &slots_[0];
  const std::shared_ptr<LentBufferPool> lend_pool_;  // copies of outputs, lent to responses
};

#ifdef CHRONOSERVE_WITH_CUDA
// Makes `gpu` current for its lifetime, then restores the thread's device: for the landing pool's
// and the input arena's allocations and frees, which may run on a gRPC or completion thread (the
// last lent buffer or lease back). Through LibTorch's guard, whose restore makes no device current
// that has no CUDA context yet: a plain cudaSetDevice back to a thread's default device 0 would
// create a context there (hundreds of MiB) on a server that uses only GPU 1. No exceptions.
class DeviceScope {
 public:
  explicit DeviceScope(int gpu) {
    try {
      guard_.emplace(static_cast<c10::DeviceIndex>(gpu));
    } catch (const c10::Error&) {
      // The call in scope then runs on the thread's current device.
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  std::optional<c10::cuda::CUDAGuard> guard_;
};

// ---- CUDA: the worker's own stream (and a copy stream), pinned staging, CUDA events ----
class CudaPath final : public DevicePath {
 public:
  // Owns `stream`, made on `gpu` for this path alone; LibTorch runs on it through an external-stream
  // handle.
  CudaPath(int gpu, cudaStream_t stream)
      : gpu_(gpu),
        own_stream_(stream),
        stream_(c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(gpu))) {}
  // The owner (TorchInstance) has destroyed its graphs and tensors by now. The gate's last wait,
  // then all work on both streams, completes before the slots' buffers and the streams go.
  ~CudaPath() override {
    try {
      teardown_device_.emplace(static_cast<c10::DeviceIndex>(gpu_));
    } catch (const c10::Error&) {
      // The streams and events carry their device; go on without it.
    }
    gate_.reset();  // releases a hold still in place, waits for the stream to pass its wait
    if (copy_stream_ != nullptr) (void)cudaStreamSynchronize(copy_stream_);
    if (!stream_blocked_) (void)cudaStreamSynchronize(own_stream_);
    for (Slot& slot : slots_) {
      slot.device_in.clear();
      slot.held.clear();
      if (landing_pool_ != nullptr) {
        for (const LentBufferPool::Buffer& landing : slot.landing) landing_pool_->Put(landing);
      }
      slot.landing.clear();
    }
    if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
    (void)cudaStreamDestroy(own_stream_);
    (void)cudaGetLastError();
  }

  absl::Status Init(bool exact_device_timing) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu_));
    landing_pool_ = LentBufferPool::Create({[gpu = gpu_](size_t bytes) -> absl::StatusOr<char*> {
                                              DeviceScope scope(gpu);
                                              void* ptr = nullptr;
                                              RETURN_IF_ERROR(cuda::CudaStatus(
                                                  cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault),
                                                  "cudaHostAlloc(output landing)"));
                                              return static_cast<char*>(ptr);
                                            },
                                            [gpu = gpu_](char* data) {
                                              DeviceScope scope(gpu);
                                              (void)cudaFreeHost(data);
                                            }});
    for (Slot& slot : slots_) {
      for (auto& e : slot.events) RETURN_IF_ERROR(e.Init());
      RETURN_IF_ERROR(slot.copied.Init());
    }
    RETURN_IF_ERROR(sync_event_.Init());
    RETURN_IF_ERROR(allocated_.Init());
    // Loaded now, not at its first launch: CUDA loads a kernel lazily, and that first launch waits
    // for the stream, which exact device timing holds until the batch is enqueued (the batch would
    // then stall until the gate's watchdog broke the hold).
    RETURN_IF_ERROR(cuda::CudaStatus(cuda::LoadCopyRangesKernel(), "loading the copy kernel"));
    if (!exact_device_timing) return absl::OkStatus();
    auto gate = cuda::StreamGate::Create(gpu_, stream_.stream(), kHoldWatchdog);
    if (!gate.ok()) {
      // A failed gate has let the stream pass its probe, unless the device never saw the probe's
      // release: then the stream stays blocked for good and the destructor must not wait for it
      // (the load fails with the gate's message instead of hanging).
      stream_blocked_ = cudaStreamQuery(own_stream_) == cudaErrorNotReady;
      return gate.status();
    }
    gate_ = *std::move(gate);
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
  absl::StatusOr<std::shared_ptr<char>> AllocateHost(size_t bytes) const override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu_));
    void* ptr = nullptr;
    RETURN_IF_ERROR(cuda::CudaStatus(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable), "cudaHostAlloc(input arena)"));
    return std::shared_ptr<char>(static_cast<char*>(ptr), [gpu = gpu_](char* p) {
      DeviceScope scope(gpu);  // the last lease may go on any thread
      (void)cudaFreeHost(p);
    });
  }
  void SelectSlot(int slot) override { slot_ = &slots_[slot]; }
  absl::Status BeginInputs(const InputsPlan& plan) override {
    slot_->moves.clear();
    after_h2d_marked_ = false;
    slot_->compute_starts_at_h2d_end = false;
    overlap_ = plan.behind_another;
    if (overlap_ && copy_stream_ == nullptr) {
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu_));
      RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                                       "cudaStreamCreateWithFlags(copy stream)"));
    }
    // Copied straight into a graph's static inputs: no device buffer of the slot's is used.
    if (plan.into_graph && !overlap_) return absl::OkStatus();
    // Every other input's copy lands in the slot's device buffer: grown here, before kBeforeH2D is
    // recorded, so neither the allocation nor (on the copy stream) the wait for the batch ahead is in
    // this batch's h2d.
    for (size_t i = 0; i < plan.bytes.size(); ++i) {
      RETURN_IF_ERROR(DeviceInput(static_cast<int>(i), plan.bytes[i]).status());
    }
    return absl::OkStatus();
  }
  absl::StatusOr<char*> Staging(int input, size_t bytes) override {
    auto& staging = slot_->staging;
    if (static_cast<size_t>(input) >= staging.size()) staging.resize(input + 1);
    if (staging[input].capacity() < bytes) {
      // Called before Enter(): with the worker's GPU current, cudaHostAlloc never makes a context
      // on another device (device 0, the default of a thread that has none).
      c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu_));
      RETURN_IF_ERROR(staging[input].Reserve(bytes));
    }
    return staging[input].data();
  }
  absl::StatusOr<torch::Tensor> ToDevice(int input, absl::Span<const BytePiece> pieces, const std::vector<int64_t>& shape,
                                         torch::ScalarType type) override {
    const size_t bytes = static_cast<size_t>(ElementCount(shape)) * c10::elementSize(type);
    ASSIGN_OR_RETURN(torch::Tensor buffer, DeviceInput(input, bytes));
    RETURN_IF_ERROR(CopyPieces(static_cast<char*>(buffer.data_ptr()), pieces, bytes, input_stream(), "cudaMemcpyAsync(H2D)"));
    return buffer.narrow(0, 0, static_cast<int64_t>(bytes)).view(type).view(shape);
  }
  absl::Status ToDeviceInto(int input, absl::Span<const BytePiece> pieces, size_t bytes, const torch::Tensor& dst) override {
    if (bytes > dst.nbytes()) return absl::InternalError("staged input larger than its static tensor");
    if (!overlap_) {
      RETURN_IF_ERROR(CopyPieces(static_cast<char*>(dst.data_ptr()), pieces, bytes, stream_.stream(),
                                 "cudaMemcpyAsync(H2D into graph input)"));
      if (bytes < dst.nbytes()) slot_->moves.push_back(Move{dst.data_ptr(), nullptr, bytes, dst.nbytes()});
      return absl::OkStatus();
    }
    // The batch ahead may still read `dst`: copy beside it into the slot's own buffer now, and
    // into `dst` on the worker's stream (after that batch) in InputsReady().
    ASSIGN_OR_RETURN(torch::Tensor buffer, DeviceInput(input, bytes));
    RETURN_IF_ERROR(CopyPieces(static_cast<char*>(buffer.data_ptr()), pieces, bytes, copy_stream_,
                               "cudaMemcpyAsync(H2D on the copy stream)"));
    slot_->moves.push_back(Move{dst.data_ptr(), buffer.data_ptr(), bytes, dst.nbytes()});
    return absl::OkStatus();
  }
  absl::Status InputsReady() override {
    if (overlap_) {
      // With request timing the h2d span's end event already marks the copies; otherwise record one.
      cuda::CudaEvent* copied = &slot_->events[kAfterH2D];
      if (!after_h2d_marked_) {
        copied = &slot_->copied;
        RETURN_IF_ERROR(copied->Record(copy_stream_));
      }
      RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamWaitEvent(stream_.stream(), copied->get(), 0),
                                       "cudaStreamWaitEvent(inputs copied)"));
    }
    // With nothing enqueued below between kAfterH2D and the forward (no wait for the copy stream, no
    // graph-input moves or pad zeroing), compute starts where the copies ended and kAfterH2D's event
    // serves as kBeforeCompute too: one timed record fewer, about a microsecond of the host's time,
    // most of it the driver's locking (BENCHMARKS §37).
    slot_->compute_starts_at_h2d_end = after_h2d_marked_ && !overlap_ && slot_->moves.empty();
    // Graph inputs, on the worker's stream between kAfterH2D and kBeforeCompute (in neither span,
    // overlapped or not): rows copied beside the batch ahead move into place; pad rows are zeroed.
    for (const Move& m : slot_->moves) RETURN_IF_ERROR(CompleteStatic(m));
    slot_->moves.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<const char*> ToHost(int output, const torch::Tensor& tensor) override {
    torch::Tensor src = tensor.contiguous();
    Slot& slot = *slot_;
    if (static_cast<size_t>(output) >= slot.landing.size()) slot.landing.resize(output + 1);
    Hold(output, src);  // the device tensor must live until the copy has run
    LentBufferPool::Buffer& landing = slot.landing[output];
    if (landing.capacity < src.nbytes()) {
      // None yet (or lent with the last batch's response), or too small: one from the pool, whose
      // buffers are back once gRPC has sent the responses that borrowed them.
      landing_pool_->Put(std::exchange(landing, {}));
      ASSIGN_OR_RETURN(landing, landing_pool_->Take(src.nbytes()));
    }
    RETURN_IF_ERROR(cuda::CudaStatus(
        cudaMemcpyAsync(landing.data, src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToHost, stream_.stream()),
        "cudaMemcpyAsync(D2H)"));
    return landing.data;
  }
  absl::Status CopyOutInto(int output, const torch::Tensor& tensor, char* dst) override {
    torch::Tensor src = tensor.contiguous();
    Hold(output, src);  // the device tensor must live until the copy has run
    // cudaMemcpyDefault: `dst` is a pinned region on the host or a client's GPU memory (CUDA IPC).
    return cuda::CudaStatus(cudaMemcpyAsync(dst, src.data_ptr(), src.nbytes(), cudaMemcpyDefault, stream_.stream()),
                            "cudaMemcpyAsync(output into a shared-memory region)");
  }
  absl::Status CopyOutsInto(int output, const torch::Tensor& tensor, absl::Span<const RowsTarget> targets) override {
    // The output is on this GPU (CheckForwardOutputs); contiguous, its rows are byte ranges.
    bool together = tensor.is_contiguous();
    for (const RowsTarget& t : targets) together = together && t.device == gpu_;
    if (!together) return DevicePath::CopyOutsInto(output, tensor, targets);
    // Requests' rows, each into its own region on this GPU: one kernel for them all, its ranges the
    // targets' bytes (no view made). The backend keeps the output until the batch is finished.
    const char* base = static_cast<const char*>(tensor.data_ptr());
    std::vector<cuda::CopyRange>& ranges = slot_->ranges;
    ranges.clear();
    for (const RowsTarget& t : targets) ranges.push_back(cuda::CopyRange{t.dst, base + t.offset, t.bytes});
    return CopyRanges(ranges, stream_.stream(), "copying outputs into CUDA shared-memory regions");
  }
  LentBytes LendHost(int output, const char* bytes, size_t size) override {
    Slot& slot = *slot_;
    // Not with exact device timing: the slot's next batch might then allocate a landing buffer
    // while its stream is held, and cudaHostAlloc can block the host behind the hold.
    if (gate_ != nullptr || static_cast<size_t>(output) >= slot.landing.size() || bytes == nullptr ||
        slot.landing[output].data != bytes) {
      return {};
    }
    std::shared_ptr<const void> owner = landing_pool_->Lend(slot.landing[output]);
    if (owner == nullptr) return {};
    slot.landing[output] = {};  // the slot's next batch lands in another buffer
    return LentBytes{std::move(owner), bytes, size};
  }
  absl::Status Mark(Marker marker) override {
    // kAfterH2D's event stands for kBeforeCompute where InputsReady() enqueued nothing between.
    if (marker == kBeforeCompute && slot_->compute_starts_at_h2d_end) return absl::OkStatus();
    const bool input_span = marker == kBeforeH2D || marker == kAfterH2D;
    RETURN_IF_ERROR(slot_->events[marker].Record(input_span ? input_stream() : stream_.stream()));
    if (marker == kAfterH2D) after_h2d_marked_ = true;
    return absl::OkStatus();
  }
  absl::Status Wait() override { return slot_->events[kAfterD2H].Synchronize(); }
  bool Done() override { return slot_->events[kAfterD2H].Query(); }
  const void* native_stream() const override { return own_stream_; }
  absl::Status Sync() override {
    if (copy_stream_ != nullptr) {
      RETURN_IF_ERROR(sync_event_.Record(copy_stream_));
      RETURN_IF_ERROR(sync_event_.Synchronize());
    }
    RETURN_IF_ERROR(sync_event_.Record(stream_.stream()));
    return sync_event_.Synchronize();
  }
  absl::StatusOr<int64_t> SpanNs(Marker from, Marker to) override {
    return cuda::CudaEvent::ElapsedNs(Event(from), Event(to));
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

  // A graph input InputsReady() completes: `bytes` rows moved in from the slot's device buffer
  // `src` (inputs copied beside the batch ahead; null when they were copied into `dst` directly),
  // then the rest of its `dst_bytes` zeroed.
  struct Move {
    void* dst;
    const void* src;
    size_t bytes;
    size_t dst_bytes;
  };
  struct Slot {
    std::array<cuda::CudaEvent, kMarkerCount> events;
    bool compute_starts_at_h2d_end = false;  // kBeforeCompute not recorded: kAfterH2D's event is it
    cuda::CudaEvent copied;  // on the copy stream when kAfterH2D was not recorded (timing off)
    std::vector<cuda::PinnedBuffer> staging;
    std::vector<LentBufferPool::Buffer> landing;  // from landing_pool_; empty once lent
    std::vector<torch::Tensor> device_in;  // bytes; grown to the largest batch during warm-up
    std::vector<torch::Tensor> held;
    std::vector<Move> moves;
    std::vector<cuda::CopyRange> ranges;  // CopyRanges' argument, kept for its capacity
  };

  cudaStream_t input_stream() const { return overlap_ ? copy_stream_ : stream_.stream(); }

  // The slot's event for `marker` (kBeforeCompute's may be kAfterH2D's: Mark).
  const cuda::CudaEvent& Event(Marker marker) const {
    if (marker == kBeforeCompute && slot_->compute_starts_at_h2d_end) return slot_->events[kAfterH2D];
    return slot_->events[marker];
  }

  // `pieces` back to back into `dst` on `stream` (cudaMemcpyDefault: host memory, pinned or not, or a
  // client's GPU memory); they must hold exactly `bytes`. Pieces all on this GPU (requests' inputs in
  // CUDA shared memory) go in one copy kernel: a cudaMemcpyAsync from a client's IPC memory cost the
  // host about 9 us a call (BENCHMARKS §47), and a batch of 12 such requests takes 4 copies each.
  absl::Status CopyPieces(char* dst, absl::Span<const BytePiece> pieces, size_t bytes, cudaStream_t stream,
                          const char* what) {
    size_t total = 0;
    bool together = true;
    for (const BytePiece& piece : pieces) {
      total += piece.bytes;
      together = together && piece.device == gpu_;
    }
    if (total != bytes) return absl::InternalError(absl::StrCat(what, ": pieces hold ", total, " of ", bytes, " bytes"));
    size_t offset = 0;
    if (together) {
      std::vector<cuda::CopyRange>& ranges = slot_->ranges;
      ranges.clear();
      for (const BytePiece& piece : pieces) {
        ranges.push_back(cuda::CopyRange{dst + offset, piece.data, piece.bytes});
        offset += piece.bytes;
      }
      return CopyRanges(ranges, stream, "copying inputs out of CUDA shared-memory regions");
    }
    for (const BytePiece& piece : pieces) {
      RETURN_IF_ERROR(cuda::CudaStatus(cudaMemcpyAsync(dst + offset, piece.data, piece.bytes, cudaMemcpyDefault, stream), what));
      offset += piece.bytes;
    }
    return absl::OkStatus();
  }

  // `ranges` copied on `stream` by cuda::CopyRangesAsync, with this path's GPU current (the kernel
  // runs on the current device); `what` names the copies in an error.
  absl::Status CopyRanges(const std::vector<cuda::CopyRange>& ranges, cudaStream_t stream, const char* what) const {
    c10::cuda::CUDAGuard on_gpu(static_cast<c10::DeviceIndex>(gpu_));
    const cudaError_t err = cuda::CopyRangesAsync(ranges.data(), ranges.size(), stream);
    if (err == cudaSuccess) return absl::OkStatus();
    return cuda::CudaStatus(err, absl::StrCat(what, " (", ranges.size(), " of them, up to ", cuda::kMaxCopyRanges,
                                              " a kernel launch)").c_str());
  }

  // The slot's device buffer for input `input`, at least `bytes` long. Growing it is safe: the
  // slot's previous batch has been waited for, so no copy or kernel still uses the old buffer. A
  // new buffer comes from LibTorch's caching allocator for the worker's stream, which may hand back
  // memory the batch ahead freed on the host while its kernels still use it: safe for work on that
  // stream, so before the copy stream writes it, the copy stream waits for the worker's stream
  // (BeginInputs grows them, so that wait and the allocation precede kBeforeH2D).
  absl::StatusOr<torch::Tensor> DeviceInput(int input, size_t bytes) {
    auto& buffers = slot_->device_in;
    if (static_cast<size_t>(input) >= buffers.size()) buffers.resize(input + 1);
    torch::Tensor& buffer = buffers[input];
    if (!buffer.defined() || static_cast<size_t>(buffer.numel()) < bytes) {
      buffer = torch::empty({static_cast<int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(device()));
      if (overlap_) {
        RETURN_IF_ERROR(allocated_.Record(stream_.stream()));
        RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamWaitEvent(copy_stream_, allocated_.get(), 0),
                                         "cudaStreamWaitEvent(new input buffer)"));
      }
    }
    return buffer;
  }

  // `m`'s rows moved into place (when they were copied beside it) and its pad rows zeroed, on the
  // worker's stream.
  absl::Status CompleteStatic(const Move& m) {
    char* out = static_cast<char*>(m.dst);
    if (m.src != nullptr) {
      RETURN_IF_ERROR(cuda::CudaStatus(
          cudaMemcpyAsync(out, m.src, m.bytes, cudaMemcpyDeviceToDevice, stream_.stream()),
          "cudaMemcpyAsync(into graph input)"));
    }
    if (m.bytes == m.dst_bytes) return absl::OkStatus();
    return cuda::CudaStatus(cudaMemsetAsync(out + m.bytes, 0, m.dst_bytes - m.bytes, stream_.stream()),
                            "cudaMemsetAsync(graph input pad rows)");
  }

  void Hold(int output, const torch::Tensor& tensor) {
    auto& held = slot_->held;
    if (static_cast<size_t>(output) >= held.size()) held.resize(output + 1);
    held[output] = tensor;
  }

  // First member, so destroyed last: the worker's GPU stays current while the destructor and then
  // the other members (events, pinned buffers) release their CUDA resources, so no context is made
  // on another device (the default of a thread that has none is device 0).
  std::optional<c10::cuda::CUDAGuard> teardown_device_;
  int gpu_;
  cudaStream_t own_stream_;       // this path's alone; destroyed with it
  bool stream_blocked_ = false;   // a failed exact-timing probe left own_stream_ waiting for good
  c10::cuda::CUDAStream stream_;  // own_stream_, as LibTorch sees it
  cudaStream_t copy_stream_ = nullptr;  // made on the first overlapped batch
  bool overlap_ = false;                // this batch's inputs go on the copy stream
  bool after_h2d_marked_ = false;       // this batch recorded kAfterH2D (after its last copy)
  // Before the slots: their landing buffers go back to it when the path is destroyed. Lent ones keep
  // it alive until gRPC has sent them.
  std::shared_ptr<LentBufferPool> landing_pool_;
  std::array<Slot, kPathSlots> slots_;
  Slot* slot_ = &slots_[0];
  cuda::CudaEvent sync_event_;
  cuda::CudaEvent allocated_;  // on the worker's stream when an overlapped batch grew a buffer
  std::unique_ptr<cuda::StreamGate> gate_;  // exact device timing only
};
#endif

}  // namespace

std::unique_ptr<DevicePath> MakeCpuPath(const Clock* clock) {
  return std::make_unique<CpuPath>(clock);
}

absl::StatusOr<std::unique_ptr<DevicePath>> MakeCudaPath(int gpu, bool exact_device_timing) {
#ifdef CHRONOSERVE_WITH_CUDA
  cudaStream_t stream = nullptr;
  {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(gpu));
    // Non-blocking at the default priority: LibTorch's (low-priority) pool streams' flags.
    RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                     "cudaStreamCreateWithFlags(worker stream)"));
  }
  auto path = std::make_unique<CudaPath>(gpu, stream);  // owns the stream from here
  RETURN_IF_ERROR(path->Init(exact_device_timing));
  return std::unique_ptr<DevicePath>(std::move(path));
#else
  (void)exact_device_timing;
  return absl::FailedPreconditionError(
      absl::StrCat("GPU ", gpu, " requested but this chronoserve build's LibTorch has no CUDA"));
#endif
}

}  // namespace chronoserve::server
