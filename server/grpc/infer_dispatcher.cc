#include "server/grpc/infer_dispatcher.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "server/grpc/model_lookup.h"
#include "server/grpc/request_builder.h"
#include "server/grpc/request_parameters.h"
#include "server/grpc/serving_warmup.h"

namespace chronoserve::server {
namespace {

ModelStats::Failure FailureKind(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled: return ModelStats::Failure::kCancelled;
    case absl::StatusCode::kDeadlineExceeded: return ModelStats::Failure::kDeadline;
    default: return ModelStats::Failure::kOther;
  }
}

// Farther than this a deadline or timeout is a "never" (and its sum with a time cannot overflow).
constexpr int64_t kNeverSecs = int64_t{100} * 365 * 86400;

}  // namespace

int64_t DeadlineWithTimeout(int64_t deadline_ns, int64_t received_ns, int64_t timeout_us) {
  if (timeout_us <= 0 || timeout_us >= kNeverSecs * 1'000'000) return deadline_ns;
  const int64_t timeout_at = received_ns + timeout_us * 1000;
  return deadline_ns == 0 ? timeout_at : std::min(deadline_ns, timeout_at);
}

void AddTimingParams(const RequestTiming& timing, inference::ModelInferResponse* response) {
  // Straight from the field table: no key or TimingParam is built per response.
  auto* params = response->mutable_parameters();
  for (const TimingParamField& field : TimingParamFields()) {
    inference::InferParameter& value = (*params)[field.key];
    switch (field.kind) {
      case TimingParam::Kind::kInt64: value.set_int64_param(timing.*field.int_member); break;
      case TimingParam::Kind::kBool: value.set_bool_param(timing.*field.bool_member); break;
      case TimingParam::Kind::kString: value.set_string_param(TimingClockValue(timing.*field.bool_member)); break;
    }
  }
}

void ClearKeepingTimingParams(inference::ModelInferResponse* response) {
  google::protobuf::Map<std::string, inference::InferParameter> kept;
  kept.swap(*response->mutable_parameters());
  response->Clear();
  for (const auto& [key, value] : kept) {
    // `kept` and its entries go
    if (!absl::StartsWith(key, kTimingParamPrefix) && key != kTritonFinalResponseParam) return;
  }
  kept.swap(*response->mutable_parameters());
}

void ClearKeepingTimingParams(inference::ModelStreamInferResponse* response) {
  response->clear_error_message();
  ClearKeepingTimingParams(response->mutable_infer_response());
}

InferDispatcher::InferDispatcher(ModelRegistry* registry, const Clock* clock, RequestObserver* observer,
                                 SharedMemoryRegistry* shared_memory)
    : registry_(registry),
      clock_(clock),
      observer_(observer),
      shared_memory_(shared_memory),
      serving_warmup_token_(NewServingWarmupToken()) {}

std::optional<int64_t> RemainingDeadlineNs(gpr_timespec deadline, gpr_timespec now) {
  if (gpr_time_cmp(deadline, gpr_inf_future(deadline.clock_type)) == 0) return std::nullopt;
  const gpr_timespec remaining = gpr_time_sub(deadline, now);
  if (remaining.tv_sec >= kNeverSecs) return std::nullopt;
  if (remaining.tv_sec < 0) return 0;
  return remaining.tv_sec * 1'000'000'000 + remaining.tv_nsec;
}

std::string JoinTracestate(const std::vector<absl::string_view>& headers) { return absl::StrJoin(headers, ","); }

CallInfo CallInfoOf(const grpc::ServerContextBase& ctx, const Clock* clock, const InferDispatcher& dispatcher) {
  CallInfo info;
  info.received_ns = clock->NowNs();
  const gpr_timespec deadline = gpr_convert_clock_type(ctx.raw_deadline(), GPR_CLOCK_MONOTONIC);
  if (std::optional<int64_t> remaining = RemainingDeadlineNs(deadline, gpr_now(GPR_CLOCK_MONOTONIC))) {
    info.deadline_ns = clock->NowNs() + *remaining;
  }
  const auto& metadata = ctx.client_metadata();
  // One traceparent header, or none counted: with two (a proxy added its own), W3C Trace Context
  // says the request starts a new trace, as with an invalid one (its tracestate goes too).
  if (auto [it, end] = metadata.equal_range("traceparent"); it != end && std::next(it) == end) {
    info.traceparent.assign(it->second.data(), it->second.size());
  }
  std::vector<absl::string_view> tracestate;
  for (auto [it, end] = metadata.equal_range("tracestate"); it != end; ++it) {
    tracestate.emplace_back(it->second.data(), it->second.size());
  }
  if (!tracestate.empty()) info.tracestate = JoinTracestate(tracestate);
  info.synthetic = dispatcher.IsServingWarmup(metadata);
  return info;
}

void AddServerTimingTrailer(const absl::Status& status, const RequestTiming& timing, bool timed,
                            grpc::ServerContextBase* ctx) {
  if (status.ok() && timed) ctx->AddTrailingMetadata(std::string(kServerTimingKey), EncodeServerTiming(timing));
}

bool InferDispatcher::IsServingWarmup(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  auto it = metadata.find(kServingWarmupMetadataKey);
  return it != metadata.end() && it->second == serving_warmup_token_;
}

absl::StatusOr<BuiltRequest> InferDispatcher::Build(const inference::ModelInferRequest& request,
                                                    inference::ModelInferResponse* response, CallInfo info) {
  return Build(request, RawInputContents(request), response, std::move(info));
}

absl::StatusOr<BuiltRequest> InferDispatcher::Build(const inference::ModelInferRequest& request,
                                                    const RawInputContents& raw,
                                                    inference::ModelInferResponse* response, CallInfo info) {
  if (host_keep_warm_ != nullptr) host_keep_warm_->Touch(info.received_ns);
  if (draining_.load()) return absl::UnavailableError("the server is shutting down");
  BuiltRequest built;
  auto model = FindNamedModel(*registry_, request.model_name(), request.model_version(), &built.ticket);
  if (!model.ok()) return model.status();
  built.model = *std::move(model);
  // Before validation: a refused request's trace is decided as an accepted one's.
  std::optional<TraceDecision> trace;
  if (observer_ != nullptr && !info.synthetic) trace = observer_->DecideTrace(built.model->spec(), info.traceparent);
  auto infer = BuildInferRequest(built.model->spec(), request, raw, response, shared_memory_, info.lent_outputs);
  if (infer.ok()) {
    if (absl::Status on_cpu = RefuseGpuMemoryOnCpuInstances(built.model->spec(), **infer, built.model->has_cpu_instance());
        !on_cpu.ok()) {
      infer = on_cpu;
    }
  }
  // After the tensors: with shared memory off, a request naming a region is FAILED_PRECONDITION first.
  auto params = infer.ok() ? ParseRequestParameters(built.model->spec(), request)
                           : absl::StatusOr<RequestParameters>(infer.status());
  if (!params.ok()) {
    // What telemetry needs of a refused request (its server span, its duration), not the request.
    InferRequest refused;
    refused.id = request.id();
    refused.timeline.received_ns = info.received_ns;
    refused.traceparent = std::move(info.traceparent);
    refused.tracestate = std::move(info.tracestate);
    refused.trace = trace;
    refused.synthetic = info.synthetic;
    refused.streamed = info.streamed;
    RefuseBeforeQueue(*built.model, &refused, info.synthetic, info.received_ns, params.status(),
                      ModelStats::Failure::kOther);
    return params.status();
  }
  built.request = *std::move(infer);
  InferRequest& r = *built.request;
  r.timeline.received_ns = info.received_ns;
  r.deadline_ns = DeadlineWithTimeout(info.deadline_ns, info.received_ns, params->timeout_us);
  r.call_deadline_ns = info.deadline_ns;
  r.traceparent = std::move(info.traceparent);
  r.tracestate = std::move(info.tracestate);
  r.trace = trace;
  r.cancelled = info.cancelled != nullptr ? std::move(info.cancelled) : std::make_shared<CancelFlag>();
  r.synthetic = info.synthetic;
  r.streamed = info.streamed;
  built.model->StageInputs(r);  // on this thread, while the input bytes are in its cache
  return built;
}

absl::Status InferDispatcher::Enqueue(BuiltRequest built, inference::ModelInferResponse* response,
                                      Respond respond) {
  ModelRuntime* model = built.model.get();
  std::unique_ptr<InferRequest>& infer = built.request;
  // The runtime outlives its queued requests (ModelRuntime::Stop drains the queue first).
  infer->on_complete = [this, model, response, respond = std::move(respond)](std::unique_ptr<InferRequest> r) {
    Complete(model, response, respond, std::move(r));
  };
  inflight_.fetch_add(1, std::memory_order_relaxed);
  if (host_keep_warm_ != nullptr) {
    absl::MutexLock lock(&inflight_mu_);  // the last store is the latest count
    host_keep_warm_->SetInFlight(inflight_.load(std::memory_order_relaxed));
  }
  // Built before Enqueue: once queued, a worker may answer the request at once.
  std::string queued_log;
  if (LogVerbosity() >= 2) {
    queued_log = absl::StrCat(model->spec().Label(), ": request '", infer->id, "' queued");
  }
  const int64_t received_ns = infer->timeline.received_ns;
  absl::Status enqueued = model->queue().Enqueue(infer);
  if (enqueued.ok()) {
    CS_VLOG(2) << queued_log;
    return enqueued;
  }
  // Not accepted: `infer` still owns the request.
  infer->on_complete = nullptr;
  Answered();
  // The queue closed because the server began draining after Build's check (a request of 819 KB
  // takes ~100 µs to build): like Build's own refusal, neither counted nor traced (TELEMETRY.md),
  // so a clean shutdown under load leaves no error spans, and answered as Build would have (the
  // queue may have closed for an unload before). A queue closed for the model's unload alone
  // still counts.
  if (enqueued.code() == absl::StatusCode::kUnavailable && draining_.load()) {
    return absl::UnavailableError("the server is shutting down");
  }
  RefuseBeforeQueue(*model, infer.get(), infer->synthetic, received_ns, enqueued,
                    enqueued.code() == absl::StatusCode::kResourceExhausted ? ModelStats::Failure::kRejected
                                                                           : ModelStats::Failure::kOther);
  return enqueued;
}

void InferDispatcher::Complete(ModelRuntime* model, inference::ModelInferResponse* response,
                               const Respond& respond, std::unique_ptr<InferRequest> r) {
  const RequestTiming& timing = r->timeline.Finalize(clock_->NowNs());
  // The batch says whether it was timed (--request-timing): untimed spans are never sent as zeros.
  const bool timed = r->timeline.batch().request_timing;
  if (r->status.ok()) {
    // Executed, but its caller went away meanwhile (cancelled, or its deadline passed while the batch
    // ran): the answer reaches nobody, so it is no success. Counted and traced as the status the
    // caller got (a cancellation after this point, while the answer is on its way, is not seen).
    if (const absl::StatusCode gone = r->CancellationCode(); gone != absl::StatusCode::kOk) {
      r->status = absl::Status(
          gone, absl::StrCat(model->spec().Label(), ": ",
                             gone == absl::StatusCode::kCancelled ? "the client cancelled the request"
                                                                  : "the request's deadline passed",
                             " while it executed; its answer was not delivered"));
    }
  }
  if (!r->status.ok()) {
    if (!r->synthetic) model->stats().RecordFailure(timing.server_total_ns, FailureKind(r->status.code()));
    respond(r->status, timing, timed);
  } else {
    for (size_t k = 0; k < r->outputs.size(); ++k) {
      auto* shape = response->mutable_outputs(static_cast<int>(k))->mutable_shape();
      shape->Assign(r->outputs[k].shape.begin(), r->outputs[k].shape.end());
    }
    if (timed) {
      AddTimingParams(timing, response);
    } else if (response->parameters_size() > 0) {
      response->mutable_parameters()->clear();  // a reused response's entries are never sent stale
    }
    if (!r->synthetic) model->stats().RecordSuccess(timing, r->batch_items, timed);
    respond(r->status, timing, timed);
  }
  // After the answer: telemetry never delays it. `response` may be gone; `r` is not.
  if (observer_ != nullptr) observer_->OnRequestDone(model->spec(), r.get(), timing, r->status);
  Answered();
}

void InferDispatcher::Answered() {
  const bool none_left = inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  if (!none_left && host_keep_warm_ == nullptr) return;
  // Under the mutex: a waiter checks the count and waits holding it, so this signal is not lost.
  absl::MutexLock lock(&inflight_mu_);
  if (host_keep_warm_ != nullptr) host_keep_warm_->SetInFlight(inflight_.load(std::memory_order_relaxed));
  if (none_left) answered_all_.SignalAll();
}

bool InferDispatcher::WaitForAnswered(absl::Time deadline) {
  absl::MutexLock lock(&inflight_mu_);
  while (inflight_.load(std::memory_order_acquire) != 0) {
    if (answered_all_.WaitWithDeadline(&inflight_mu_, deadline)) {
      return inflight_.load(std::memory_order_acquire) == 0;
    }
  }
  return true;
}

void InferDispatcher::RefuseBeforeQueue(ModelRuntime& model, const InferRequest* request, bool synthetic,
                                        int64_t received_ns, const absl::Status& status, ModelStats::Failure reason) {
  if (synthetic) return;  // the serving warm-up is counted nowhere
  RequestTiming timing;
  timing.server_total_ns = clock_->NowNs() - received_ns;
  model.stats().RecordFailure(timing.server_total_ns, reason);
  if (observer_ != nullptr) observer_->OnRequestDone(model.spec(), request, timing, status);
}

}  // namespace chronoserve::server
