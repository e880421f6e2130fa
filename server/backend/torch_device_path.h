// DevicePath: what differs between running a TorchScript batch on the CPU and on a GPU — where
// staged input bytes live, how they reach the device, how outputs come back, and which clock times
// the spans. The CPU path is the same Execute() with host buffers and host timers; the CUDA path
// uses a stream of its own (created for it, never shared with another worker), pinned buffers and
// CUDA events (never a device-wide sync).
// Internal to the torch backend (includes LibTorch); owned by one TorchInstance, worker thread only.
//
// Slots: a path keeps kPathSlots sets of per-batch resources (host staging and landing buffers,
// device input buffers, span events, the tensors a copy still reads) so a pipelined worker can
// launch one batch while another is still on the device. SelectSlot() picks the set every other
// call acts on. A batch's H2D runs on the worker's stream, or on the path's copy stream when
// BeginInputs() is told another batch is still ahead on the worker's stream; InputsReady()
// then orders the worker's stream after the copy (an event, never a device-wide sync).
//
//   path.SelectSlot(slot);  path.BeginInputs(plan);  Mark(kBeforeH2D);
//   ToDevice(...) per input;  Mark(kAfterH2D);  InputsReady();  Mark(kBeforeCompute);
//   forward;  Mark(kAfterCompute);  ToHost(...) per output;  Mark(kAfterD2H);
//   ... later, same slot:  Wait();  SpanNs(...);  LendHost(...) per output sent from its buffer
#ifndef CHRONOSERVE_SERVER_BACKEND_TORCH_DEVICE_PATH_H_
#define CHRONOSERVE_SERVER_BACKEND_TORCH_DEVICE_PATH_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "server/backend/batch_pipeline.h"
#include "server/core/infer_request.h"

namespace chronoserve::server {

// Span boundaries recorded during one batch, in order. kBeforeH2D and kAfterH2D are recorded on the
// stream that copies the inputs (the copy stream when overlapping), the others on the worker's.
enum Marker { kBeforeH2D = 0, kAfterH2D, kBeforeCompute, kAfterCompute, kAfterD2H, kMarkerCount };

// Per-batch resource sets of a path: one per batch a pipelined worker may have in flight.
inline constexpr int kPathSlots = kMaxPipelineDepth;

// A run of an input's bytes: host memory (staging, the arena, a pinned region) or device memory (a
// client's CUDA shared-memory region). A batch's input is one run, or one run a request when its
// requests' inputs are in CUDA shared memory (copied back to back on the device).
struct BytePiece {
  const char* data = nullptr;
  size_t bytes = 0;
  int device = -1;  // the GPU `data` is on; -1: host memory
};

// One destination of DevicePath::CopyOutsInto: bytes [offset, offset + bytes) of an output, as it
// lies contiguous, into `dst`, memory the path did not allocate, on GPU `device` (-1: page-locked
// host memory), large enough for them. The bytes are whole rows along the output's first dim (the
// whole output for a model without a batch dimension); the caller reckoned them to check that they
// fit, so what is copied is what was checked. Bytes, not a view: a view is a tensor to make, about
// a microsecond each, per request and output of a batch.
struct RowsTarget {
  size_t offset = 0;
  size_t bytes = 0;
  char* dst = nullptr;
  int device = -1;
};

// `target`'s rows of `output`, as a view (the output itself when they are all of it).
inline at::Tensor TargetRows(const at::Tensor& output, const RowsTarget& target) {
  const size_t total = output.nbytes();
  if (target.offset == 0 && target.bytes == total) return output;
  const size_t row_bytes = total / static_cast<size_t>(output.size(0));  // a part: batched, so rows
  return output.narrow(0, static_cast<int64_t>(target.offset / row_bytes), static_cast<int64_t>(target.bytes / row_bytes));
}

// How a batch's inputs will reach the device (DevicePath::BeginInputs).
struct InputsPlan {
  // A batch launched earlier may still be running on the worker's stream: the copies go on the copy
  // stream (GPU) and can overlap it.
  bool behind_another = false;
  // The copies go to a CUDA graph's static inputs (ToDeviceInto), not to the slot's own device
  // buffers (ToDevice).
  bool into_graph = false;
  std::vector<size_t> bytes;  // per input
};

class DevicePath {
 public:
  virtual ~DevicePath() = default;
  virtual c10::Device device() const = 0;
  virtual bool device_timed() const = 0;
  // Whether page-locked host memory the path did not allocate (a pinned shared-memory region) may
  // be used directly as the source of ToDevice/ToDeviceInto and the destination of CopyOutInto. A GPU
  // path also takes device memory there (a client's CUDA shared memory: the copies are then
  // device-to-device, and still count as h2d and d2h).
  virtual bool direct_pinned_io() const = 0;

  // Makes this path's stream current on the calling thread for the returned object's lifetime.
  virtual std::shared_ptr<void> Enter() = 0;
  // Host memory of `bytes` for the model's InputArena: page-locked exactly when direct_pinned_io().
  virtual absl::StatusOr<std::shared_ptr<char>> AllocateHost(size_t bytes) const = 0;
  // The resource set (0 .. kPathSlots - 1) the calls below act on until the next SelectSlot.
  // A slot's buffers may be reused only after Wait() on the batch that last used it.
  virtual void SelectSlot(int slot) = 0;
  // Starts a batch's inputs as `plan` says. Call before Mark(kBeforeH2D): it does what must not
  // count in h2d (growing the slot's device buffers, which for the copy stream then orders it after
  // the worker's).
  virtual absl::Status BeginInputs(const InputsPlan& plan) = 0;
  // Host memory of at least `bytes` to gather input `input` into (pinned on GPU).
  virtual absl::StatusOr<char*> Staging(int input, size_t bytes) = 0;
  // A device tensor holding the staged bytes of input `input`, `pieces` back to back (async copies
  // into the slot's device buffer on GPU; on CPU a view of the one piece it takes), valid until the
  // slot is reused.
  virtual absl::StatusOr<at::Tensor> ToDevice(int input, absl::Span<const BytePiece> pieces,
                                              const std::vector<int64_t>& shape, c10::ScalarType type) = 0;
  // Copies the `bytes` staged bytes of input `input` (`pieces` back to back) into the start of the (contiguous) device tensor
  // `dst` and zeroes the rest of it: the static input of a CUDA graph, whose pad rows must hold no
  // stale data. On a GPU the pad rows are zeroed in InputsReady() (after kAfterH2D: in no span), and
  // when the inputs go on the copy stream, `dst` (read by the batch ahead) is filled there too, from
  // the slot's device buffer on the worker's stream.
  virtual absl::Status ToDeviceInto(int input, absl::Span<const BytePiece> pieces, size_t bytes,
                                    const at::Tensor& dst) = 0;
  // After the last input: work enqueued on the worker's stream from now on sees the inputs.
  virtual absl::Status InputsReady() = 0;
  // Host bytes of `tensor` (contiguous), valid after Wait() (async copy on GPU).
  virtual absl::StatusOr<const char*> ToHost(int output, const at::Tensor& tensor) = 0;
  // Copies output `tensor` (made contiguous) into `dst`, memory the path did not allocate: a
  // page-locked host region or (on a GPU) a client's device memory, >= tensor.nbytes(); valid after
  // Wait().
  virtual absl::Status CopyOutInto(int output, const at::Tensor& tensor, char* dst) = 0;
  // CopyOutInto for each target (several requests' rows of output `output`, `tensor`, each into its
  // own region). A GPU path copies those on its own GPU with one kernel launch instead of a copy call
  // each. `tensor` must live until Wait() (the backend keeps a batch's outputs until then).
  virtual absl::Status CopyOutsInto(int output, const at::Tensor& tensor, absl::Span<const RowsTarget> targets) {
    for (const RowsTarget& t : targets) {
      if (absl::Status s = CopyOutInto(output, TargetRows(tensor, t), t.dst); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // After Wait(): the `size` host bytes of output `output` that ToHost returned (`bytes`), lent for
  // a response to be sent from (OutputTensor::lend_to), so they need no copy into it. On a GPU the
  // slot's landing buffer itself is lent, and the slot lands its next batch in another; on the CPU,
  // whose outputs are the model's own tensors (which may view its inputs or state), a copy of them
  // in a buffer of the path's. Empty (no owner) when the path's lending bound is reached, `bytes`
  // is not the slot's landing buffer, or the path holds its stream (exact device timing): then copy
  // them as before.
  virtual LentBytes LendHost(int output, const char* bytes, size_t size) = 0;
  // Records `marker` where the stream now is. A GPU path may let kAfterH2D's event stand for
  // kBeforeCompute when nothing was enqueued between them (SpanNs reads it so).
  virtual absl::Status Mark(Marker marker) = 0;
  // Blocks until the work up to the last Mark(kAfterD2H) has completed.
  virtual absl::Status Wait() = 0;
  // Whether the work up to the last Mark(kAfterD2H) has completed, without waiting; also true on
  // an error, which Wait() then reports. The CPU's work is done when its calls return: true.
  virtual bool Done() = 0;
  // Blocks until everything enqueued on this path's streams so far has completed (events on the
  // streams, never a device-wide sync). For capture, keep-warm and failed launches, not the
  // request path's markers.
  virtual absl::Status Sync() = 0;
  // Nanoseconds between two recorded markers (after Wait()).
  virtual absl::StatusOr<int64_t> SpanNs(Marker from, Marker to) = 0;
  // The path's own stream (a cudaStream_t) on a GPU; null on the CPU. For tests and logs.
  virtual const void* native_stream() const { return nullptr; }

  // Exact device timing (exact_device_timing.h): whether this path can hold its stream.
  virtual bool can_hold_stream() const { return false; }
  // Work enqueued on the stream from now on starts only at ReleaseStream(). Use StreamHold.
  virtual absl::Status HoldStream() { return absl::UnimplementedError("this path cannot hold its stream"); }
  // Lets the stream run; true when it was held until now (false: the hold's watchdog released it
  // first, so the spans enqueued under it include host stalls).
  virtual bool ReleaseStream() { return false; }
};

// A stream hold for one batch: released by Release() or, on any early return or exception, by the
// destructor, so an error can never leave the stream held.
class StreamHold {
 public:
  explicit StreamHold(DevicePath* path) : path_(path) {}
  ~StreamHold() {
    if (held_) path_->ReleaseStream();
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  absl::Status Hold() {
    absl::Status status = path_->HoldStream();
    held_ = status.ok();
    return status;
  }
  bool held() const { return held_; }
  // See DevicePath::ReleaseStream; false when nothing was held.
  bool Release() {
    if (!held_) return false;
    held_ = false;
    return path_->ReleaseStream();
  }

 private:
  DevicePath* path_;
  bool held_ = false;
};

std::unique_ptr<DevicePath> MakeCpuPath(const Clock* clock);
// A path on CUDA device `gpu` with a stream of its own: created here (non-blocking, default
// priority, as LibTorch's pool streams are), destroyed with the path once its work is done, never
// shared (LibTorch's pool has 32 per device, handed out in turn). Fails without CUDA. With
// `exact_device_timing` it can hold its stream (cuda/stream_gate.h); FAILED_PRECONDITION when the
// device cannot.
absl::StatusOr<std::unique_ptr<DevicePath>> MakeCudaPath(int gpu, bool exact_device_timing = false);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_DEVICE_PATH_H_
