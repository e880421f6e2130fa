#include "server/grpc/inference_service.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/text_excerpt.h"
#include "common/timing.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/log_settings_rpc.h"
#include "server/grpc/model_config_rpc.h"
#include "server/grpc/model_control_params.h"
#include "server/grpc/model_lookup.h"
#include "server/grpc/unary_queued_call.h"

namespace chronoserve::server {
namespace {
// Whether a request's repository_name names `repository` (the --model-repository path): empty, or
// that path, with or without a trailing '/' or "." parts.
bool NamesRepository(const std::string& name, const std::string& repository) {
  if (name.empty()) return true;
  auto normal = [](const std::string& path) {
    std::string p = std::filesystem::path(path).lexically_normal().string();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  };
  return normal(name) == normal(repository);
}


grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Owns nothing but the cancellation flag; gRPC deletes it via OnDone once the call is over.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(std::shared_ptr<CancelFlag> cancelled, std::shared_ptr<ModelRuntime> model, const Clock* clock)
      : cancelled_(std::move(cancelled)), model_(std::move(model)), clock_(clock) {}
  void OnCancel() override {
    cancelled_->Set(clock_->NowNs());
    model_->queue().Poke();
  }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<CancelFlag> cancelled_;
  std::shared_ptr<ModelRuntime> model_;
  const Clock* const clock_;  // the dispatcher's: the request's deadline is on it
};

// Where a method is in the service's method table: gRPC's generated service registers the methods
// in the order of the proto's declaration, which is the descriptor's index.
int MethodIndex(const char* method) {
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      inference::GRPCInferenceService::service_full_name());
  return service->FindMethodByName(method)->index();
}

absl::Status SharedMemoryDisabled() {
  return absl::FailedPreconditionError(
      "shared memory (system and CUDA) is disabled on this server (started with --allow-shared-memory=false)");
}

void FillStatDuration(const Duration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

InferenceService::InferenceService(ModelRegistry* registry, const Clock* clock, ServerInfo info,
                                   RequestObserver* observer, SharedMemoryRegistry* shared_memory,
                                   StreamOptions stream_options, bool async_inference)
    : registry_(registry), clock_(clock), info_(std::move(info)), shared_memory_(shared_memory),
      stream_options_(stream_options), model_infer_method_(MethodIndex("ModelInfer")),
      model_stream_infer_method_(MethodIndex("ModelStreamInfer")),
      dispatcher_(registry, clock, observer, shared_memory) {
  if (!async_inference) return;
  // Every method on the asynchronous API (ModelInferQueues serves them all): gRPC registers a
  // method without a handler as asynchronous; marking a callback method async keeps its handler,
  // so drop that first.
  const int methods = google::protobuf::DescriptorPool::generated_pool()
                          ->FindServiceByName(inference::GRPCInferenceService::service_full_name())
                          ->method_count();
  for (int method = 0; method < methods; ++method) {
    MarkMethodCallback(method, nullptr);
    MarkMethodAsync(method);
  }
}

void InferenceService::RequestModelStreamInfer(grpc::ServerContext* ctx,
                                               grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                                               grpc::ServerCompletionQueue* cq, void* tag) {
  RequestAsyncBidiStreaming(model_stream_infer_method_, ctx, stream, cq, cq, tag);
}

QueuedCall* InferenceService::NewQueuedStream() {
  return new StreamInferReactor<AsyncBidiCall>(&dispatcher_, &streams_, stream_options_, this);
}

void InferenceService::RequestModelInfer(grpc::ServerContext* ctx, grpc::ByteBuffer* request,
                                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder,
                                         grpc::ServerCompletionQueue* cq, void* tag) {
  RequestAsyncUnary(model_infer_method_, ctx, request, responder, cq, cq, tag);
}

// ---- The RPCs that are not inference: each answered at once by its Answer function, on the
// callback API (the overrides) or on ModelInferQueues' queues (ControlCalls) ----

absl::Status InferenceService::AnswerServerLive(const inference::ServerLiveRequest&,
                                                inference::ServerLiveResponse* response) {
  response->set_live(true);
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerServerReady(const inference::ServerReadyRequest&,
                                                 inference::ServerReadyResponse* response) {
  response->set_ready(!warming_up_.load() && !dispatcher_.draining() && registry_->AllReady());
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerModelReady(const inference::ModelReadyRequest& request,
                                                inference::ModelReadyResponse* response) {
  auto model = registry_->Find(request.name(), request.version());
  // As Triton (InferenceServer::ModelIsReady): a model loading, failed to load, unknown or without
  // that version is not ready, answered OK; only a version that is no integer >= 0 is a bad request.
  if (!model.ok() && model.status().code() == absl::StatusCode::kInvalidArgument) return model.status();
  response->set_ready(model.ok() && !warming_up_.load() && !dispatcher_.draining());
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerServerMetadata(const inference::ServerMetadataRequest&,
                                                    inference::ServerMetadataResponse* response) {
  response->set_name(info_.name);
  response->set_version(info_.version);
  // As Triton names them: ModelConfig (model_configuration), the queue policy's timeouts and
  // priorities (schedule_policy), request and response parameters (parameters), ModelStatistics.
  response->add_extensions("model_configuration");
  response->add_extensions("schedule_policy");
  response->add_extensions("parameters");
  response->add_extensions("statistics");
  response->add_extensions("logging");
  if (model_control_ != nullptr) {
    response->add_extensions("model_repository");
    response->add_extensions("model_repository(unload_dependents)");
  }
  if (trace_settings_ != nullptr) response->add_extensions("trace");
  if (info_.request_timing) response->add_extensions("server_timing");
  if (shared_memory_ != nullptr) response->add_extensions("system_shared_memory");
  if (shared_memory_ != nullptr && shared_memory_->cuda_enabled()) response->add_extensions("cuda_shared_memory");
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerModelMetadata(const inference::ModelMetadataRequest& request,
                                                   inference::ModelMetadataResponse* response) {
  auto model = FindNamedModel(*registry_, request.name(), request.version());
  if (!model.ok()) return model.status();
  const ModelSpec& spec = (*model)->spec();
  response->set_name(spec.name);
  // Every version that serves, as Triton lists them (not one whose load failed).
  std::vector<int64_t> versions = registry_->ServedVersions(spec.name);
  if (versions.empty()) versions.push_back(spec.version);  // unloaded since the lookup
  for (int64_t v : versions) response->add_versions(std::to_string(v));
  response->set_platform(spec.platform);
  auto fill = [&spec](const TensorSpec& t, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(t.name);
    out->set_datatype(DataTypeName(t.dtype));
    if (spec.max_batch_size > 0) out->add_shape(-1);
    for (int64_t d : t.dims) out->add_shape(d);
  };
  for (const auto& t : spec.inputs) fill(t, response->add_inputs());
  for (const auto& t : spec.outputs) fill(t, response->add_outputs());
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerModelConfig(const inference::ModelConfigRequest& request,
                                                 inference::ModelConfigResponse* response) {
  return server::AnswerModelConfig(*registry_, request, response);
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  CallInfo info = CallInfoOf(*ctx, clock_, dispatcher_);
  info.cancelled = std::make_shared<CancelFlag>();
  auto built = dispatcher_.Build(*request, response, std::move(info));
  if (!built.ok()) return FinishNow(ctx, built.status());
  auto* reactor = new InferReactor(built->request->cancelled, built->model, clock_);
  absl::Status enqueued = dispatcher_.Enqueue(
      *std::move(built), response, [ctx, reactor](const absl::Status& status, const RequestTiming& timing, bool timed) {
        AddServerTimingTrailer(status, timing, timed, ctx);
        reactor->Finish(ToGrpcStatus(status));
      });
  if (!enqueued.ok()) reactor->Finish(ToGrpcStatus(enqueued));
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  auto* stream = new StreamInferReactor<CallbackBidiCall>(&dispatcher_, &streams_, stream_options_);
  stream->Begin(*ctx);
  return stream;
}

void InferenceService::SetDraining() {
  dispatcher_.SetDraining();
  streams_.DrainAll();
}

absl::Status InferenceService::AnswerModelStatistics(const inference::ModelStatisticsRequest& request,
                                                     inference::ModelStatisticsResponse* response) {
  std::vector<std::shared_ptr<ModelRuntime>> models;
  if (request.name().empty()) {
    // Every model's; a version that is no number is still a bad request, as Triton checks it first.
    if (absl::Status checked = CheckVersion("", request.version(), nullptr); !checked.ok()) return checked;
    models = registry_->Ready();
  } else {
    // No version named: every version served, as Triton answers.
    auto versions = FindNamedVersions(*registry_, request.name(), request.version());
    if (!versions.ok()) return versions.status();
    models = *std::move(versions);
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
  return absl::OkStatus();
}

// ---- system_shared_memory: registry calls, answered inline. Register maps every page of the
// region (MAP_POPULATE) and on a GPU page-locks it, so it holds the thread that answers it (a
// callback thread, or one of a completion queue's two, whose streams then have the other alone)
// for time in proportion to the region's size: a set-up call, made before the requests that use
// the region ----

absl::Status InferenceService::AnswerSystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                                              inference::SystemSharedMemoryStatusResponse* response) {
  if (shared_memory_ == nullptr) return SharedMemoryDisabled();
  auto regions = shared_memory_->Status(request.name());
  if (!regions.ok()) return regions.status();
  for (const auto& region : *regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_key(region->key());
    out.set_offset(region->offset());
    out.set_byte_size(region->byte_size());
  }
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerSystemSharedMemoryRegister(
    const inference::SystemSharedMemoryRegisterRequest& request, inference::SystemSharedMemoryRegisterResponse*) {
  if (shared_memory_ == nullptr) return SharedMemoryDisabled();
  absl::Status status = shared_memory_->Register(request.name(), request.key(), request.offset(), request.byte_size());
  if (status.ok()) {
    CS_VLOG(1) << "shared-memory region '" << request.name() << "' registered: key '" << request.key()
               << "', offset " << request.offset() << ", " << request.byte_size() << " bytes";
  }
  return status;
}

absl::Status InferenceService::AnswerSystemSharedMemoryUnregister(
    const inference::SystemSharedMemoryUnregisterRequest& request, inference::SystemSharedMemoryUnregisterResponse*) {
  if (shared_memory_ == nullptr) return SharedMemoryDisabled();
  shared_memory_->Unregister(request.name());
  return absl::OkStatus();
}

// ---- cuda_shared_memory: a client's GPU memory opened from its CUDA IPC handle (a GPU server only;
// elsewhere Register is FAILED_PRECONDITION and Status lists nothing). Same namespace as the system
// regions ----

absl::Status InferenceService::AnswerCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& request,
                                                            inference::CudaSharedMemoryStatusResponse* response) {
  if (shared_memory_ == nullptr) return SharedMemoryDisabled();
  auto regions = shared_memory_->Status(request.name(), SharedMemoryKind::kCuda);
  if (!regions.ok()) return regions.status();
  for (const auto& region : *regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_device_id(static_cast<uint64_t>(region->device_id()));
    out.set_byte_size(region->byte_size());
  }
  return absl::OkStatus();
}

absl::Status InferenceService::AnswerCudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& request,
                                                              inference::CudaSharedMemoryRegisterResponse*) {
  if (shared_memory_ == nullptr) return SharedMemoryDisabled();
  absl::Status status =
      shared_memory_->RegisterCuda(request.name(), request.raw_handle(), request.device_id(), request.byte_size());
  if (status.ok()) {
    CS_VLOG(1) << "CUDA shared-memory region '" << request.name() << "' registered: GPU " << request.device_id()
               << ", " << request.byte_size() << " bytes";
  }
  return status;
}

void InferenceService::AnswerCudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest& request,
                                                        inference::CudaSharedMemoryUnregisterResponse*,
                                                        ModelControl::Done done) {
  if (shared_memory_ == nullptr) return done(SharedMemoryDisabled());
  // Answered once the regions' IPC handles are closed, from the thread that waits for a held one:
  // the gRPC thread goes back to its queue meanwhile.
  shared_memory_->Unregister(request.name(), SharedMemoryKind::kCuda,
                             [done = std::move(done)] { done(absl::OkStatus()); });
}

absl::Status InferenceService::AnswerRepositoryIndex(const inference::RepositoryIndexRequest& request,
                                                     inference::RepositoryIndexResponse* response) {
  // READY as ModelReady reads it: not while the server warms its serving path up, nor while it drains.
  if (model_control_ != nullptr && !NamesRepository(request.repository_name(), model_control_->Repository())) {
    return absl::NotFoundError(absl::StrCat("no repository named '", Excerpt(request.repository_name()),
                                            "' (this server's is '", model_control_->Repository(),
                                            "'; an empty name means it)"));
  }
  const bool warming_up = warming_up_.load();
  const bool draining = dispatcher_.draining();
  std::vector<ModelRegistry::IndexEntry> entries = registry_->Index();
  std::set<std::string> never_loaded;
  if (model_control_ != nullptr && !request.ready()) {
    // As Triton in explicit mode: the repository's models never loaded are listed too, with no
    // state or version.
    std::set<std::string> known;
    for (const auto& entry : entries) known.insert(entry.name);
    for (const std::string& name : model_control_->RepositoryModels()) {
      if (known.count(name) > 0) continue;
      never_loaded.insert(name);
      entries.push_back(ModelRegistry::IndexEntry{name});
    }
    // Stable: a model's versions stay in the registry's ascending order.
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  }
  for (const ModelRegistry::IndexEntry& entry : entries) {
    if (never_loaded.count(entry.name) > 0) {
      response->add_models()->set_name(entry.name);
      continue;
    }
    using State = ModelRegistry::IndexEntry::State;
    State state = entry.state;
    std::string reason = entry.reason;
    if (state == State::kReady && draining) {
      state = State::kUnavailable;
      reason = "the server is shutting down";
    } else if (state == State::kReady && warming_up) {
      state = State::kLoading;
      reason = "the server is warming up its serving path before READY";
    }
    if (request.ready() && state != State::kReady) continue;
    auto* model = response->add_models();
    model->set_name(entry.name);
    if (entry.version > 0) model->set_version(absl::StrCat(entry.version));
    model->set_state(state == State::kReady ? "READY" : state == State::kLoading ? "LOADING" : "UNAVAILABLE");
    model->set_reason(reason);
  }
  return absl::OkStatus();
}

namespace {
absl::Status NoModelControl(const char* what, const std::string& model, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat(
      "cannot ", what, " model '", Excerpt(model), "': ",
      why.empty() ? "this server runs with --model-control-mode none (the default), which reads the model repository "
                    "once, at start"
                  : why,
      "; start it with --model-control-mode explicit to load and unload models by request"));
}
}  // namespace

absl::Status InferenceService::CheckModelControl(
    const char* what, const std::string& model, const std::string& repository,
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params, bool unload) const {
  if (model_control_ == nullptr) return NoModelControl(what, model, no_model_control_why_);
  RETURN_IF_ERROR(CheckModelControlParameters(what, model, params, unload));
  if (!NamesRepository(repository, model_control_->Repository())) {
    return absl::NotFoundError(absl::StrCat("cannot ", what, " model '", Excerpt(model), "': no repository named '",
                                            Excerpt(repository), "' (this server's is '", model_control_->Repository(),
                                            "'; an empty name means it)"));
  }
  if (dispatcher_.draining()) {
    return absl::UnavailableError(absl::StrCat("cannot ", what, " model '", Excerpt(model), "': the server is shutting down"));
  }
  return absl::OkStatus();
}

void InferenceService::AnswerRepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                                 inference::RepositoryModelLoadResponse*, ModelControl::Done done) {
  if (absl::Status refused = CheckModelControl("load", request.model_name(), request.repository_name(),
                                               request.parameters(), /*unload=*/false);
      !refused.ok()) {
    return done(refused);
  }
  model_control_->Load(request.model_name(), LoadOverridesFrom(request.parameters()), std::move(done));
}

void InferenceService::AnswerRepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                                                   inference::RepositoryModelUnloadResponse*, ModelControl::Done done) {
  if (absl::Status refused = CheckModelControl("unload", request.model_name(), request.repository_name(),
                                               request.parameters(), /*unload=*/true);
      !refused.ok()) {
    return done(refused);
  }
  model_control_->Unload(request.model_name(), std::move(done));
}

absl::Status InferenceService::AnswerLogSettings(const inference::LogSettingsRequest& request,
                                                 inference::LogSettingsResponse* response) {
  return server::AnswerLogSettings(request, response);
}

absl::Status InferenceService::AnswerTraceSetting(const inference::TraceSettingRequest& request,
                                                  inference::TraceSettingResponse* response) {
  if (trace_settings_ == nullptr) {
    return absl::FailedPreconditionError("this server has no telemetry, so no trace settings");
  }
  const std::string& model = request.model_name();
  if (!model.empty()) {
    bool known = registry_->Knows(model);
    if (!known && repository_models_) {  // a model of the repository not loaded yet
      for (const std::string& name : repository_models_()) known = known || name == model;
    }
    if (!known) {
      return absl::NotFoundError(absl::StrCat("no trace settings for model '", Excerpt(model),
                                              "': the model repository has no such model"));
    }
  }
  TraceSettingsMap changes;
  for (const auto& [key, value] : request.settings()) {
    changes[key] = std::vector<std::string>(value.value().begin(), value.value().end());
  }
  absl::StatusOr<TraceSettingsMap> settings = trace_settings_->Update(model, changes);
  if (!settings.ok()) return settings.status();
  if (!changes.empty()) {
    CS_LOG(INFO) << "TraceSetting: " << (model.empty() ? std::string("server-wide") : "model '" + model + "'")
                 << " trace_level " << settings->at("trace_level")[0] << ", trace_rate " << settings->at("trace_rate")[0]
                 << ", trace_count " << settings->at("trace_count")[0] << ", trace_file '"
                 << settings->at("trace_file")[0] << "'";
  }
  for (const auto& [key, values] : *settings) {
    auto& out = (*response->mutable_settings())[key];
    for (const std::string& v : values) out.add_value(v);
  }
  return absl::OkStatus();
}

// The callback API's handlers of those RPCs (--grpc-infer-threads 0).
#define CHRONOSERVE_CALLBACK_UNARY(Method)                                                                   \
  grpc::ServerUnaryReactor* InferenceService::Method(grpc::CallbackServerContext* ctx,                      \
                                                     const inference::Method##Request* request,             \
                                                     inference::Method##Response* response) {               \
    return FinishNow(ctx, Answer##Method(*request, response));                                             \
  }
CHRONOSERVE_CALLBACK_UNARY(ServerLive)
CHRONOSERVE_CALLBACK_UNARY(ServerReady)
CHRONOSERVE_CALLBACK_UNARY(ModelReady)
CHRONOSERVE_CALLBACK_UNARY(ServerMetadata)
CHRONOSERVE_CALLBACK_UNARY(ModelMetadata)
CHRONOSERVE_CALLBACK_UNARY(ModelConfig)
CHRONOSERVE_CALLBACK_UNARY(ModelStatistics)
CHRONOSERVE_CALLBACK_UNARY(SystemSharedMemoryStatus)
CHRONOSERVE_CALLBACK_UNARY(SystemSharedMemoryRegister)
CHRONOSERVE_CALLBACK_UNARY(SystemSharedMemoryUnregister)
CHRONOSERVE_CALLBACK_UNARY(CudaSharedMemoryStatus)
CHRONOSERVE_CALLBACK_UNARY(CudaSharedMemoryRegister)
CHRONOSERVE_CALLBACK_UNARY(RepositoryIndex)
CHRONOSERVE_CALLBACK_UNARY(LogSettings)
CHRONOSERVE_CALLBACK_UNARY(TraceSetting)
#undef CHRONOSERVE_CALLBACK_UNARY

// Model control's, answered when the load or unload is done (on the controller's thread), and a CUDA
// region's unregister, answered once its IPC handle is closed.
#define CHRONOSERVE_CALLBACK_LATER_UNARY(Method)                                                             \
  grpc::ServerUnaryReactor* InferenceService::Method(grpc::CallbackServerContext* ctx,                      \
                                                     const inference::Method##Request* request,             \
                                                     inference::Method##Response* response) {               \
    auto* reactor = ctx->DefaultReactor();                                                                   \
    Answer##Method(*request, response, [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); }); \
    return reactor;                                                                                          \
  }
CHRONOSERVE_CALLBACK_LATER_UNARY(RepositoryModelLoad)
CHRONOSERVE_CALLBACK_LATER_UNARY(RepositoryModelUnload)
CHRONOSERVE_CALLBACK_LATER_UNARY(CudaSharedMemoryUnregister)
#undef CHRONOSERVE_CALLBACK_LATER_UNARY

template <typename Request, typename Response>
QueuedCallFactory InferenceService::QueuedUnary(const char* method,
                                                            AnswerFn<Request, Response> answer) {
  const int index = MethodIndex(method);
  return UnaryQueuedCall<Request, Response>::Factory(
      [this, index](grpc::ServerContext* ctx, Request* request, grpc::ServerAsyncResponseWriter<Response>* responder,
                    grpc::ServerCompletionQueue* cq, void* tag) {
        RequestAsyncUnary(index, ctx, request, responder, cq, cq, tag);
      },
      [this, answer](const Request& request, Response* response) { return (this->*answer)(request, response); });
}

template <typename Request, typename Response>
QueuedCallFactory InferenceService::QueuedLaterUnary(const char* method, LaterAnswerFn<Request, Response> answer) {
  const int index = MethodIndex(method);
  return UnaryQueuedCall<Request, Response>::LaterFactory(
      [this, index](grpc::ServerContext* ctx, Request* request, grpc::ServerAsyncResponseWriter<Response>* responder,
                    grpc::ServerCompletionQueue* cq, void* tag) {
        RequestAsyncUnary(index, ctx, request, responder, cq, cq, tag);
      },
      [this, answer](const Request& request, Response* response, ModelControl::Done done) {
        (this->*answer)(request, response, std::move(done));
      });
}

std::vector<QueuedCallFactory> InferenceService::ControlCalls() {
  return {QueuedUnary("ServerLive", &InferenceService::AnswerServerLive),
          QueuedUnary("ServerReady", &InferenceService::AnswerServerReady),
          QueuedUnary("ModelReady", &InferenceService::AnswerModelReady),
          QueuedUnary("ServerMetadata", &InferenceService::AnswerServerMetadata),
          QueuedUnary("ModelMetadata", &InferenceService::AnswerModelMetadata),
          QueuedUnary("ModelConfig", &InferenceService::AnswerModelConfig),
          QueuedUnary("ModelStatistics", &InferenceService::AnswerModelStatistics),
          QueuedUnary("SystemSharedMemoryStatus", &InferenceService::AnswerSystemSharedMemoryStatus),
          QueuedUnary("SystemSharedMemoryRegister", &InferenceService::AnswerSystemSharedMemoryRegister),
          QueuedUnary("SystemSharedMemoryUnregister", &InferenceService::AnswerSystemSharedMemoryUnregister),
          QueuedUnary("CudaSharedMemoryStatus", &InferenceService::AnswerCudaSharedMemoryStatus),
          QueuedUnary("CudaSharedMemoryRegister", &InferenceService::AnswerCudaSharedMemoryRegister),
          QueuedLaterUnary("CudaSharedMemoryUnregister", &InferenceService::AnswerCudaSharedMemoryUnregister),
          QueuedUnary("RepositoryIndex", &InferenceService::AnswerRepositoryIndex),
          QueuedLaterUnary("RepositoryModelLoad", &InferenceService::AnswerRepositoryModelLoad),
          QueuedLaterUnary("RepositoryModelUnload", &InferenceService::AnswerRepositoryModelUnload),
          QueuedUnary("LogSettings", &InferenceService::AnswerLogSettings),
          QueuedUnary("TraceSetting", &InferenceService::AnswerTraceSetting)};
}

}  // namespace chronoserve::server
