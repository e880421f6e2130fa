// InferRequest: one validated inference request on its way queue -> batch -> worker -> completion.
// It moves by std::unique_ptr and is owned by exactly one stage at a time. Input bytes are views on
// the received gRPC message (which outlives the request), on `owned_data` for typed contents, on
// the model's InputArena (`arena_lease`), or on a client's shared-memory region that `regions`
// holds mapped; outputs are written by the backend straight into strings the response owns, lent
// to the transport (LentBytes: the backend's own buffer, sent from where it is), or into a
// shared-memory region (a raw destination). Once the response is handed to gRPC, input and output
// bytes are no longer valid (observers read metadata only).
//
// Input bytes that arrived split over several of gRPC's received slices are held as `pieces` with
// `data` null, until ModelRuntime::StageInputs gathers them on the receiving thread (into the
// arena, else into bytes the tensor owns): one copy, where parsing them into a message and then
// staging them took two.
//
// Flow: the gRPC handler builds it and enqueues it; a worker fills `outputs` and the timeline; the
// worker then calls Complete() (or the queue does, for one it drops unrun: dead when a full queue
// is scanned, abandoned at the exit timeout), which moves the request into `on_complete` (the gRPC
// layer's responder), exactly once.
#ifndef CHRONOSERVE_SERVER_CORE_INFER_REQUEST_H_
#define CHRONOSERVE_SERVER_CORE_INFER_REQUEST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/cache_bypass.h"
#include "server/core/model_spec.h"
#include "common/dtype.h"
#include "common/traceparent.h"
#include "server/core/input_arena.h"
#include "server/core/request_region.h"
#include "server/core/timeline.h"

namespace chronoserve::server {

// Set by the transport when the client goes away (it cancelled, or gRPC ended the call at its
// deadline), with the time it happened on the dispatcher's clock (the one the request's deadline is
// on: the steady clock when serving), so the queue can tell a client's cancellation from a passed
// deadline however late a worker notices it. Set once; thread-safe.
class CancelFlag {
 public:
  void Set(int64_t now_ns) {
    int64_t unset = 0;
    at_ns_.compare_exchange_strong(unset, now_ns > 0 ? now_ns : 1);
  }
  bool IsSet() const { return at_ns_.load(std::memory_order_acquire) != 0; }
  int64_t at_ns() const { return at_ns_.load(std::memory_order_acquire); }  // 0 = not set

 private:
  std::atomic<int64_t> at_ns_{0};
};

struct InputTensor {
  int index = -1;  // position in ModelSpec::inputs (= forward() argument)
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;  // full shape, batch dim first when the model batches
  const char* data = nullptr;  // row-major bytes; null while they are `pieces`
  size_t byte_size = 0;
  // The bytes in order, when they arrived in several pieces and are not gathered yet (then `data` is
  // null); views on what `InferRequest::received_bytes` holds.
  std::vector<absl::string_view> pieces;
  // The bytes when the tensor owns them (typed contents converted, synthetic requests), set by
  // Own(). On the heap so that `data` stays valid when the tensor moves: a short string keeps its
  // bytes inside itself, and they would move without `data`.
  std::unique_ptr<const std::string> owned_data;
  bool host_pinned = false;  // `data` is page-locked (a pinned region or arena): DMA-able
  bool shared_memory = false;  // `data` is in a client's shared-memory region
  absl::string_view region;    // that region's name (the region, in `regions`, owns it); errors quote it
  // >= 0: `data` is a device pointer on this GPU (a client's CUDA shared-memory region), never read
  // on the host. Such a request batches only with requests that have the same inputs on the device
  // (its shape key says which), and only a GPU worker can run it.
  int device_id = -1;
  bool on_device() const { return device_id >= 0; }
  bool in_arena = false;       // `data` is the request's region of its model's InputArena

  // Takes `bytes` as the tensor's own and points `data` / `byte_size` at them.
  void Own(std::string bytes) {
    owned_data = std::make_unique<const std::string>(std::move(bytes));
    data = owned_data->data();
    byte_size = owned_data->size();
    pieces.clear();
  }
  // Copies the tensor's `byte_size` bytes (from `data` or its pieces) to `dst`, written as `store`
  // says (common/cache_bypass.h: the input arena's --input-arena-store).
  void CopyTo(char* dst, CacheStore store = CacheStore::kCached) const;
};

// Output bytes the backend lends the transport instead of copying them into the response: a view of
// `size` bytes at `data`, valid while `owner` lives (the transport keeps it until gRPC has sent them).
struct LentBytes {
  std::shared_ptr<const void> owner;
  const char* data = nullptr;
  size_t size = 0;
};

// The smallest output a backend lends (OutputTensor::lend_to); smaller ones are copied. The same as
// wire::MessageWriter::kOwnSliceBytes: a smaller entry is copied beside the message's tags anyway.
inline constexpr size_t kMinLentOutputBytes = 4096;

struct OutputTensor {
  int index = -1;              // position in ModelSpec::outputs
  std::vector<int64_t> shape;  // set by the backend
  std::string* data = nullptr;  // destination bytes, owned by the response; set by the backend
  // Set with `data` when the transport can send bytes it does not own: the backend may lend it the
  // output's bytes here (at least kMinLentOutputBytes) and leave `data` empty. Owned by the transport
  // like `data`.
  LentBytes* lend_to = nullptr;
  // Or a raw destination of fixed capacity (a client's shared-memory region, named `raw_name` in
  // errors), used when `data` is null. Neither set: the output is computed and dropped.
  char* raw = nullptr;
  size_t raw_capacity = 0;
  std::string raw_name;
  bool raw_pinned = false;  // `raw` is page-locked: the backend may copy device -> `raw` directly
  // >= 0: `raw` is a device pointer on this GPU (a CUDA shared-memory region): only the backend's
  // device copy may write it, never the host (WriteOutputBytes refuses).
  int raw_device_id = -1;
  bool raw_on_device() const { return raw_device_id >= 0; }
};

// INVALID_ARGUMENT naming the model, the output, the raw destination, the bytes needed and the bytes
// available when `bytes` do not fit `out`'s raw destination; OK otherwise (or when it has none).
// The model is named by spec.Label(), made only for an error: these run for every output of every
// request.
absl::Status CheckOutputFits(const ModelSpec& spec, const std::string& output_name, size_t bytes,
                             const OutputTensor& out);

// Writes `bytes` of output `out` to its destination. INVALID_ARGUMENT naming the model, the output,
// the raw destination, the bytes needed and the bytes available when a raw destination is too small;
// FAILED_PRECONDITION when the destination is device memory the backend did not copy into.
absl::Status WriteOutputBytes(const ModelSpec& spec, const std::string& output_name,
                              const char* src, size_t bytes, OutputTensor& out);

// Telemetry's decision for one request: whether it is traced, and the trace it joins or starts.
struct TraceDecision {
  bool traced = false;
  TraceId trace_id{};
  std::optional<TraceParent> parent;  // the caller's context, when its traceparent was valid
};

class InferRequest {
 public:
  using Completion = std::function<void(std::unique_ptr<InferRequest>)>;

  std::string id;                     // client's request id, echoed
  int64_t batch_items = 1;            // items along dim 0 (1 when the model does not batch)
  std::vector<InputTensor> inputs;    // one per model input, sorted by index
  std::vector<OutputTensor> outputs;  // the outputs to return, in response order
  int64_t deadline_ns = 0;            // steady clock; 0 = none
  // The gRPC call's own deadline, the only one a cancellation can come from (the `timeout`
  // parameter's is the server's alone): 0 = none; -1 = not told apart, deadline_ns then.
  int64_t call_deadline_ns = -1;
  std::shared_ptr<CancelFlag> cancelled;  // set by the transport when the client goes away
  std::string traceparent;  // W3C trace context from the request metadata (raw, unvalidated)
  std::string tracestate;
  // Whether telemetry traces it, decided when it was received (RequestObserver::DecideTrace), so a
  // trace setting changed after that never reaches it; unset: decided when it finishes.
  std::optional<TraceDecision> trace;
  Timeline timeline;
  absl::Status status;  // final status, set before Complete()
  Completion on_complete;
  bool synthetic = false;  // warm-up traffic: never counted in statistics
  bool streamed = false;   // arrived on a ModelStreamInfer stream (its server span says so)
  // A region the request's tensors read or write, and which of them do (e.g. "model 'm' output 'y'"),
  // named in front of the region's error when it fails Complete()'s check.
  struct HeldRegion {
    std::shared_ptr<const RequestRegion> region;
    std::string users;
  };
  // What the input views and raw output destinations point into (shared-memory regions): held
  // until Complete(), before the request is answered, so unregistering a region never unmaps bytes
  // still in use; and checked by Complete(), which fails a request whose region the client shrank
  // meanwhile.
  std::vector<HeldRegion> regions;
  // The regions of the model's InputArena that the inputs marked in_arena point into.
  InputArena::Lease arena_lease;
  // What inputs whose bytes came in the message point into (gRPC's received slices), when they were
  // read apart from it: dropped once the inputs are staged into the arena, so a queued request holds
  // its bytes once.
  std::shared_ptr<const void> received_bytes;

  // Key under which requests may share a batch: the per-item shapes of every input.
  const std::string& shape_key() const { return shape_key_; }
  void set_shape_key(std::string key) { shape_key_ = std::move(key); }

  bool IsCancelled() const { return cancelled != nullptr && cancelled->IsSet(); }
  // Why the request's call went away: kOk while it has not; kDeadlineExceeded when the cancellation
  // came near the call's deadline (call_deadline_ns) (gRPC ends a call whose deadline passed, by timers that run a
  // little ahead of our copy of it, and the client's gRPC at the client's own copy, which ours
  // trails by the call's way to the server: the last quarter of the request's time, 1-50 ms, counts
  // as the deadline's); kCancelled otherwise (the client's own cancellation, or a stream it ended).
  absl::StatusCode CancellationCode() const;

  // Hands the request to its completion callback with `status`, or with the request's own error
  // when `status` is OK and the backend already failed this request alone (`status` field), or
  // with a region's error when one of `regions` no longer shares the client's memory (its bytes
  // read or written may not be the client's). Once.
  static void Complete(std::unique_ptr<InferRequest> request, absl::Status status);

 private:
  std::string shape_key_;
};

using Batch = std::vector<std::unique_ptr<InferRequest>>;

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_INFER_REQUEST_H_
