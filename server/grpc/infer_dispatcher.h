// InferDispatcher: the one path of a ModelInferRequest through the server, shared by the unary
// ModelInfer and the streaming ModelStreamInfer. Build() refuses while draining, validates the
// request against its model and builds the InferRequest; Enqueue() queues it; when a worker has
// finished it, the dispatcher finalises the timing, fills the response (output shapes, timing.*
// parameters), records statistics, hands the answer to the transport's Respond callback, then
// tells the observer. It also keeps the count of accepted requests not yet answered, which graceful
// shutdown waits on. Owned by the InferenceService; thread-safe (gRPC threads call Build/Enqueue,
// workers complete).
//
//   auto built = dispatcher.Build(request, response, info);     // error: answer it now
//   ... transport bookkeeping with built->model ...
//   absl::Status s = dispatcher.Enqueue(*std::move(built), response, respond);  // OK: respond runs once
#ifndef CHRONOSERVE_SERVER_GRPC_INFER_DISPATCHER_H_
#define CHRONOSERVE_SERVER_GRPC_INFER_DISPATCHER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <map>
#include <optional>
#include <vector>

#include <grpc/support/time.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/string_ref.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/timing.h"
#include "proto/inference.pb.h"
#include "server/core/host_keep_warm.h"
#include "server/core/infer_request.h"
#include "server/core/request_observer.h"
#include "server/grpc/request_builder.h"
#include "server/scheduler/model_registry.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

// What the transport knows about one request besides its message.
struct CallInfo {
  int64_t received_ns = 0;  // steady clock: the whole message was in the handler's hands
  int64_t deadline_ns = 0;  // steady clock; 0 = none
  std::string traceparent;  // W3C trace context (raw, unvalidated)
  std::string tracestate;
  std::shared_ptr<CancelFlag> cancelled;  // set by the transport when the client goes away
  bool synthetic = false;   // the server's own serving warm-up (serving_warmup.h): counted nowhere
  bool streamed = false;    // a message of a ModelStreamInfer stream, not a unary ModelInfer call
  // Where the backend may lend the response's output bytes instead of copying them into it, when
  // the transport sends bytes it does not own (infer_wire.h); null: every output is copied. Entry k
  // is raw_output_contents k. Owned by the transport and, like the response, valid until Respond
  // returns.
  std::vector<LentBytes>* lent_outputs = nullptr;
};

// A request that passed validation, not yet queued.
struct BuiltRequest {
  std::shared_ptr<ModelRuntime> model;
  std::unique_ptr<InferRequest> request;
  // Held from the lookup until Enqueue has queued or refused the request (after `model`: released
  // first).
  AdmissionTicket ticket;
};

class InferDispatcher {
 public:
  // Hands a finished request's answer to the transport, exactly once, on a worker or completion
  // thread. OK: `response` holds the outputs and, when `timed` (the batch ran with request timing;
  // --request-timing off: never), the timing.* parameters; otherwise `status` is the request's
  // error. `timing` is final. Must not block; the response may be released once it returns.
  using Respond = std::function<void(const absl::Status& status, const RequestTiming& timing, bool timed)>;

  // `observer` and `shared_memory` may be null; everything must outlive the dispatcher.
  InferDispatcher(ModelRegistry* registry, const Clock* clock, RequestObserver* observer,
                  SharedMemoryRegistry* shared_memory);

  // UNAVAILABLE while draining; otherwise the model's error (NOT_FOUND, INVALID_ARGUMENT naming the
  // model, the tensor or request parameter and what was expected). A refusal for a known model is
  // counted (statistics, observer). The request's deadline is the earlier of the call's and its
  // "timeout" parameter's (ParseRequestParameters). The built request holds views into `request`
  // and writes into `response`: both must outlive it (until Respond returns).
  absl::StatusOr<BuiltRequest> Build(const inference::ModelInferRequest& request,
                                     inference::ModelInferResponse* response, CallInfo info);
  // The same for a request whose raw_input_contents were read apart from it (infer_wire.h): `raw`.
  absl::StatusOr<BuiltRequest> Build(const inference::ModelInferRequest& request, const RawInputContents& raw,
                                     inference::ModelInferResponse* response, CallInfo info);

  // Queues `built`. OK: the request counts as in flight and `respond` will be called exactly once.
  // Otherwise (queue full: RESOURCE_EXHAUSTED; model stopping: UNAVAILABLE) the refusal was counted,
  // unless the server is draining (UNAVAILABLE, counted nowhere, as in Build), and `respond` is
  // never called: answer with the returned error.
  absl::Status Enqueue(BuiltRequest built, inference::ModelInferResponse* response, Respond respond);

  // Every request's arrival (Build) touches `warm` (--host-keep-warm-ms; null = none), and it is
  // told the count of requests in flight. Set before the first call and cleared after the last one.
  void set_host_keep_warm(HostKeepWarm* warm) { host_keep_warm_ = warm; }
  // From now on Build answers UNAVAILABLE ("the server is shutting down").
  void SetDraining() { draining_.store(true); }
  // The per-process token that marks the server's own serving warm-up requests (serving_warmup.h):
  // a call whose kServingWarmupMetadataKey metadata equals it is synthetic.
  const std::string& serving_warmup_token() const { return serving_warmup_token_; }
  // Whether a call's client metadata carries this server's serving warm-up mark.
  bool IsServingWarmup(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  bool draining() const { return draining_.load(); }
  // Accepted requests not yet answered (the in-flight gauge reads it).
  int64_t inflight() const { return inflight_.load(std::memory_order_relaxed); }
  // Blocks until every accepted request has been answered or `deadline` passes; whether none is left.
  bool WaitForAnswered(absl::Time deadline);

  ModelRegistry* registry() const { return registry_; }
  const Clock* clock() const { return clock_; }

 private:
  // The worker's completion of one request (the InferRequest's on_complete).
  void Complete(ModelRuntime* model, inference::ModelInferResponse* response, const Respond& respond,
                std::unique_ptr<InferRequest> request);
  // A request for a known model refused before it was queued: statistics and the observer (none for
  // a synthetic one). `request` is the built request, or, refused while validated, one holding only
  // its id, receipt stamp, trace context and transport. Runs before the caller answers the error
  // (Build and Enqueue return it), unlike Complete's observer call, which follows the answer.
  void RefuseBeforeQueue(ModelRuntime& model, const InferRequest* request, bool synthetic, int64_t received_ns,
                         const absl::Status& status, ModelStats::Failure reason);
  void Answered();

  ModelRegistry* const registry_;
  const Clock* const clock_;
  RequestObserver* const observer_;
  SharedMemoryRegistry* const shared_memory_;
  const std::string serving_warmup_token_;
  HostKeepWarm* host_keep_warm_ = nullptr;
  std::atomic<bool> draining_{false};
  // Accepted requests not yet answered: an atomic, since every request changes it twice. The mutex
  // serves WaitForAnswered (signalled when the count reaches 0) and keeps host keep-warm's view of
  // the count in order.
  std::atomic<int64_t> inflight_{0};
  absl::Mutex inflight_mu_;
  absl::CondVar answered_all_;
};

// What a call's context says, on either of gRPC's APIs: received now, its deadline (steady clock),
// trace context and serving warm-up mark from its metadata. The caller sets `cancelled`.
CallInfo CallInfoOf(const grpc::ServerContextBase& ctx, const Clock* clock, const InferDispatcher& dispatcher);

// Nanoseconds from `now` until the call's `deadline` (the same gRPC clock), 0 when it has passed;
// nullopt when there is none (infinite, or farther than 100 years: a "never").
// From gRPC's timespec, never system_clock nanoseconds, which overflow past the year 2262.
std::optional<int64_t> RemainingDeadlineNs(gpr_timespec deadline, gpr_timespec now);

// A request's deadline (steady clock, 0 = none) given the call's `deadline_ns` and the request's
// "timeout" parameter (microseconds from `received_ns`, 0 = none): the earlier of the two.
int64_t DeadlineWithTimeout(int64_t deadline_ns, int64_t received_ns, int64_t timeout_us);

// W3C trace context: several tracestate headers are one list, joined with commas.
std::string JoinTracestate(const std::vector<absl::string_view>& headers);

// A unary call's server-timing trailer (docs/TIMING.md): only for an answered request whose batch
// ran with request timing (Respond's `timed`). Before the call is finished.
void AddServerTimingTrailer(const absl::Status& status, const RequestTiming& timing, bool timed,
                            grpc::ServerContextBase* ctx);

// The timing.* response parameters (docs/TIMING.md) of `timing`.
void AddTimingParams(const RequestTiming& timing, inference::ModelInferResponse* response);

// The bool parameter every streamed response carries, true: its request's last response (Triton's
// name; a model that is not decoupled answers each request once).
inline constexpr char kTritonFinalResponseParam[] = "triton_final_response";

// Clears a response for its next request, but keeps its map entries when they are all timing.*
// parameters or triton_final_response: the next successful response overwrites every one of them
// (AddTimingParams; a stream sets the flag on each response) and an
// error response clears the message first (a unary error sends no message at all), so no stale
// value is ever sent, and a busy server allocates and frees no map node per response (17 per
// response otherwise; benchmarks/timing_encoding.cc measures it). A map holding anything else (an
// error's error_code) is cleared with the rest. For a stream slot's response and for the unary
// responses of ResponsePool.
void ClearKeepingTimingParams(inference::ModelInferResponse* response);
void ClearKeepingTimingParams(inference::ModelStreamInferResponse* response);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_INFER_DISPATCHER_H_
