#include "server/grpc/inference_service.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/timing.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/request_builder.h"
#include "server/repository/model_config_loader.h"

namespace chronoserve::server {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Owns nothing but the cancellation flag; gRPC deletes it via OnDone once the call is over.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(std::shared_ptr<std::atomic<bool>> cancelled, std::shared_ptr<ModelRuntime> model)
      : cancelled_(std::move(cancelled)), model_(std::move(model)) {}
  void OnCancel() override {
    cancelled_->store(true);
    model_->queue().Poke();
  }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::shared_ptr<ModelRuntime> model_;
};

void AddTimingParams(const RequestTiming& timing, inference::ModelInferResponse* response) {
  auto* params = response->mutable_parameters();
  for (const TimingParam& p : EncodeTimingParams(timing)) {
    inference::InferParameter& value = (*params)[p.key];
    switch (p.kind) {
      case TimingParam::Kind::kInt64: value.set_int64_param(p.int_value); break;
      case TimingParam::Kind::kBool: value.set_bool_param(p.bool_value); break;
      case TimingParam::Kind::kString: value.set_string_param(p.string_value); break;
    }
  }
}

ModelStats::Failure FailureKind(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled: return ModelStats::Failure::kCancelled;
    case absl::StatusCode::kDeadlineExceeded: return ModelStats::Failure::kDeadline;
    default: return ModelStats::Failure::kOther;
  }
}

absl::Status SharedMemoryDisabled() {
  return absl::FailedPreconditionError(
      "system shared memory is disabled on this server (started with --allow-shared-memory=false)");
}

void FillStatDuration(const Duration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

InferenceService::InferenceService(ModelRegistry* registry, const Clock* clock, ServerInfo info,
                                   RequestObserver* observer, SharedMemoryRegistry* shared_memory)
    : registry_(registry), clock_(clock), info_(std::move(info)), observer_(observer),
      shared_memory_(shared_memory) {}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* ctx,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  response->set_live(true);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* ctx,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  response->set_ready(!draining_.load() && registry_->AllReady());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  auto model = registry_->Find(request->name(), request->version());
  if (!model.ok() && model.status().code() == absl::StatusCode::kNotFound) {
    return FinishNow(ctx, model.status());
  }
  response->set_ready(model.ok() && !draining_.load());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  response->set_name(info_.name);
  response->set_version(info_.version);
  response->add_extensions("statistics");
  if (info_.request_timing) response->add_extensions("server_timing");
  if (shared_memory_ != nullptr) response->add_extensions("system_shared_memory");
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto model = registry_->Find(request->name(), request->version());
  if (!model.ok()) return FinishNow(ctx, model.status());
  const ModelSpec& spec = (*model)->spec();
  response->set_name(spec.name);
  response->add_versions(std::to_string(spec.version));
  response->set_platform(spec.platform);
  auto fill = [&spec](const TensorSpec& t, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(t.name);
    out->set_datatype(DataTypeName(t.dtype));
    if (spec.max_batch_size > 0) out->add_shape(-1);
    for (int64_t d : t.dims) out->add_shape(d);
  };
  for (const auto& t : spec.inputs) fill(t, response->add_inputs());
  for (const auto& t : spec.outputs) fill(t, response->add_outputs());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  const int64_t received_ns = clock_->NowNs();
  if (draining_.load()) {
    return FinishNow(ctx, absl::UnavailableError("the server is shutting down"));
  }
  if (absl::Status name_ok = ValidateModelName(request->model_name()); !name_ok.ok()) {
    return FinishNow(ctx, absl::InvalidArgumentError(name_ok.message()));
  }
  auto model = registry_->Find(request->model_name(), request->model_version());
  if (!model.ok()) return FinishNow(ctx, model.status());
  std::shared_ptr<ModelRuntime> runtime = *std::move(model);
  auto built = BuildInferRequest(runtime->spec(), *request, response, shared_memory_);
  if (!built.ok()) {
    RefuseBeforeQueue(*runtime, nullptr, received_ns, built.status(), ModelStats::Failure::kOther);
    return FinishNow(ctx, built.status());
  }
  std::unique_ptr<InferRequest> infer = *std::move(built);
  infer->timeline.received_ns = received_ns;
  const auto deadline = ctx->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const int64_t remaining_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     deadline - std::chrono::system_clock::now()).count();
    infer->deadline_ns = clock_->NowNs() + std::max<int64_t>(remaining_ns, 0);
  }
  const auto& metadata = ctx->client_metadata();
  if (auto it = metadata.find("traceparent"); it != metadata.end()) {
    infer->traceparent.assign(it->second.data(), it->second.size());
  }
  if (auto it = metadata.find("tracestate"); it != metadata.end()) {
    infer->tracestate.assign(it->second.data(), it->second.size());
  }
  infer->cancelled = std::make_shared<std::atomic<bool>>(false);
  auto* reactor = new InferReactor(infer->cancelled, runtime);
  ModelRuntime* rt = runtime.get();
  const Clock* clock = clock_;
  RequestObserver* observer = observer_;
  infer->on_complete = [this, ctx, response, reactor, rt, clock, observer](std::unique_ptr<InferRequest> r) {
    const RequestTiming& timing = r->timeline.Finalize(clock->NowNs());
    if (!r->status.ok()) {
      rt->stats().RecordFailure(timing.server_total_ns, FailureKind(r->status.code()));
      reactor->Finish(ToGrpcStatus(r->status));
      if (observer != nullptr) observer->OnRequestDone(rt->spec(), r.get(), timing, r->status);
      Answered();
      return;
    }
    for (size_t k = 0; k < r->outputs.size(); ++k) {
      auto* shape = response->mutable_outputs(static_cast<int>(k))->mutable_shape();
      shape->Assign(r->outputs[k].shape.begin(), r->outputs[k].shape.end());
    }
    // The batch says whether it was timed (--request-timing): untimed spans are never sent as zeros.
    const bool timed = r->timeline.batch().request_timing;
    if (timed) {
      AddTimingParams(timing, response);
      ctx->AddTrailingMetadata(std::string(kServerTimingKey), EncodeServerTiming(timing));
    }
    rt->stats().RecordSuccess(timing, r->batch_items, timed);
    reactor->Finish(grpc::Status::OK);
    // After Finish: telemetry never delays the response. `response` may be gone; `r` is not.
    if (observer != nullptr) observer->OnRequestDone(rt->spec(), r.get(), timing, r->status);
    Answered();
  };
  {
    absl::MutexLock lock(&inflight_mu_);
    ++inflight_;
  }
  // Built before Enqueue: once queued, a worker may finish the call and gRPC free `request`.
  std::string queued_log;
  if (LogVerbosity() >= 2) {
    queued_log = absl::StrCat("model '", request->model_name(), "': request '", request->id(), "' queued");
  }
  absl::Status enqueued = runtime->queue().Enqueue(infer);
  if (enqueued.ok()) {
    CS_VLOG(2) << queued_log;
  } else {
    // Not accepted: `infer` still owns the request; answer here.
    infer->on_complete = nullptr;
    Answered();
    reactor->Finish(ToGrpcStatus(enqueued));
    RefuseBeforeQueue(*runtime, infer.get(), received_ns, enqueued,
                      enqueued.code() == absl::StatusCode::kResourceExhausted
                          ? ModelStats::Failure::kRejected
                          : ModelStats::Failure::kOther);
  }
  return reactor;
}

void InferenceService::Answered() {
  absl::MutexLock lock(&inflight_mu_);
  --inflight_;
}

bool InferenceService::WaitForAnswered(absl::Time deadline) {
  absl::MutexLock lock(&inflight_mu_);
  auto none = [this]() ABSL_SHARED_LOCKS_REQUIRED(inflight_mu_) { return inflight_ == 0; };
  return inflight_mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

void InferenceService::RefuseBeforeQueue(ModelRuntime& runtime, const InferRequest* request,
                                         int64_t received_ns, const absl::Status& status,
                                         ModelStats::Failure reason) {
  RequestTiming timing;
  timing.server_total_ns = clock_->NowNs() - received_ns;
  runtime.stats().RecordFailure(timing.server_total_ns, reason);
  if (observer_ != nullptr) observer_->OnRequestDone(runtime.spec(), request, timing, status);
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(
    grpc::CallbackServerContext* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  std::vector<std::shared_ptr<ModelRuntime>> models;
  if (request->name().empty()) {
    models = registry_->Ready();
  } else {
    auto model = registry_->Find(request->name(), request->version());
    if (!model.ok()) return FinishNow(ctx, model.status());
    models.push_back(*model);
  }
  for (const auto& m : models) {
    const ModelStatsSnapshot s = m->stats().Snapshot();
    auto* out = response->add_model_stats();
    out->set_name(m->spec().name);
    out->set_version(std::to_string(m->spec().version));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(s.execution_count);
    auto* is = out->mutable_inference_stats();
    FillStatDuration(s.success, is->mutable_success());
    FillStatDuration(s.fail, is->mutable_fail());
    FillStatDuration(s.queue, is->mutable_queue());
    FillStatDuration(s.compute_input, is->mutable_compute_input());
    FillStatDuration(s.compute_infer, is->mutable_compute_infer());
    FillStatDuration(s.compute_output, is->mutable_compute_output());
    for (const auto& [size, b] : s.by_batch_size) {
      auto* bs = out->add_batch_stats();
      bs->set_batch_size(static_cast<uint64_t>(size));
      FillStatDuration(b.compute_input, bs->mutable_compute_input());
      FillStatDuration(b.compute_infer, bs->mutable_compute_infer());
      FillStatDuration(b.compute_output, bs->mutable_compute_output());
    }
  }
  return FinishNow(ctx, absl::OkStatus());
}

// ---- system_shared_memory: quick registry calls (shm_open + mmap at most), answered inline ----

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  if (shared_memory_ == nullptr) return FinishNow(ctx, SharedMemoryDisabled());
  auto regions = shared_memory_->Status(request->name());
  if (!regions.ok()) return FinishNow(ctx, regions.status());
  for (const auto& region : *regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_key(region->key());
    out.set_offset(region->offset());
    out.set_byte_size(region->byte_size());
  }
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  if (shared_memory_ == nullptr) return FinishNow(ctx, SharedMemoryDisabled());
  absl::Status status =
      shared_memory_->Register(request->name(), request->key(), request->offset(), request->byte_size());
  if (status.ok()) {
    CS_VLOG(1) << "shared-memory region '" << request->name() << "' registered: key '" << request->key()
               << "', offset " << request->offset() << ", " << request->byte_size() << " bytes";
  }
  return FinishNow(ctx, status);
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  if (shared_memory_ == nullptr) return FinishNow(ctx, SharedMemoryDisabled());
  shared_memory_->Unregister(request->name());
  return FinishNow(ctx, absl::OkStatus());
}

}  // namespace chronoserve::server
