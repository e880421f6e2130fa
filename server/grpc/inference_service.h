// InferenceService: the KServe v2 GRPCInferenceService (plus Triton's ModelConfig, ModelStatistics,
// system_shared_memory and ModelStreamInfer extensions) on gRPC's callback API, or with every RPC on
// the asynchronous API's completion queues (ModelInferQueues, built with async_inference:
// --grpc-infer-threads; the other RPCs' calls from ControlCalls). Handlers validate and enqueue
// (InferDispatcher) and never block; a worker thread finishes each ModelInfer call
// (response parameters timing.*, the server-timing trailer, statistics) or hands a streamed
// request's response to its stream (StreamInferReactor). A batch run without request timing
// (--request-timing off) gives its responses no timing. Owned by the Server; the registries and
// clock must outlive it.
#ifndef CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
#define CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>
#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/inference.grpc.pb.h"
#include "server/core/model_control.h"
#include "server/core/request_observer.h"
#include "server/core/trace_settings.h"
#include "server/grpc/infer_dispatcher.h"
#include "server/grpc/queued_call.h"
#include "server/grpc/stream_infer_reactor.h"
#include "server/scheduler/model_registry.h"
#include "server/shared_memory/shared_memory_registry.h"

namespace chronoserve::server {

struct ServerInfo {
  std::string name = "chronoserve";
  std::string version;
  // --request-timing: advertised as the "server_timing" extension in ServerMetadata only when on.
  bool request_timing = true;
};

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `observer` (may be null) sees every finished inference request, unary or streamed.
  // `shared_memory` (may be null: the extension is off, its RPCs answer FAILED_PRECONDITION) holds
  // the clients' regions. Both must outlive the service.
  // `async_inference`: every RPC is served on gRPC's asynchronous API by ModelInferQueues
  // (model_infer_queues.h), which then must be built with this service (it serves ControlCalls()
  // too); otherwise every RPC is on the callback API.
  InferenceService(ModelRegistry* registry, const Clock* clock, ServerInfo info,
                   RequestObserver* observer = nullptr, SharedMemoryRegistry* shared_memory = nullptr,
                   StreamOptions stream_options = {}, bool async_inference = false);

  // For ModelInferQueues (async_inference only): ask gRPC for the next ModelInfer or
  // ModelStreamInfer call on `cq`; `tag` comes back on `cq` when one has arrived (ok) or the server
  // is shutting down (not ok).
  // The messages are byte buffers: the queues read and write them themselves (infer_wire.h).
  void RequestModelInfer(grpc::ServerContext* ctx, grpc::ByteBuffer* request,
                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder,
                         grpc::ServerCompletionQueue* cq, void* tag);
  void RequestModelStreamInfer(grpc::ServerContext* ctx,
                               grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                               grpc::ServerCompletionQueue* cq, void* tag);
  // A stream session for the queues, not yet requested (QueuedCall::RequestFrom).
  QueuedCall* NewQueuedStream();
  // For ModelInferQueues (async_inference only): the calls of every other RPC of the service, one
  // factory per method, each call answered at once on the queue's thread.
  std::vector<QueuedCallFactory> ControlCalls();
  InferDispatcher& dispatcher() { return dispatcher_; }
  // The trace settings TraceSetting reads and changes (telemetry's); must outlive the service. Set
  // before the server starts; unset, TraceSetting answers FAILED_PRECONDITION.
  void SetTraceSettings(TraceSettings* settings) { trace_settings_ = settings; }
  // The model control RepositoryModelLoad / Unload go through (--model-control-mode explicit); must
  // outlive the service and answer every call before the gRPC server shuts down. Set before the
  // server starts; unset, both answer UNIMPLEMENTED saying how to turn it on.
  void SetModelControl(ModelControl* control) { model_control_ = control; }
  // Without a model control: why RepositoryModelLoad / Unload are refused (UNIMPLEMENTED), if not
  // for --model-control-mode none (the default). Set before the server starts.
  void SetNoModelControlReason(std::string why) { no_model_control_why_ = std::move(why); }
  // The model directories of the repository, listed when asked (explicit and poll modes, where a
  // model may be in the repository and not yet loaded): TraceSetting takes such a model's name.
  // Set before the server starts.
  void SetRepositoryModels(std::function<std::vector<std::string>()> list) { repository_models_ = std::move(list); }

  // While draining for shutdown, ServerReady is false and ModelInfer answers UNAVAILABLE. A stream
  // with nothing in flight ends at once (UNAVAILABLE); a busy one stops reading (only a read already
  // under way gets an error response), writes its accepted requests' responses, then ends with
  // UNAVAILABLE (OK if the client had half-closed). docs/STREAMING.md, "Graceful shutdown".
  void SetDraining();
  // While warming up (the server's serving warm-up, serving_warmup.h, before READY), ServerReady and
  // ModelReady answer false; inference is served as usual.
  void SetWarmingUp(bool warming_up) { warming_up_.store(warming_up); }
  // The token that marks the server's own serving warm-up requests.
  const std::string& serving_warmup_token() const { return dispatcher_.serving_warmup_token(); }
  // Blocks until every accepted inference request (unary or streamed) has been answered or
  // `deadline` passes; returns whether none is left. Lets the server keep answering (UNAVAILABLE,
  // health NOT_SERVING) while it drains, instead of gRPC cancelling calls that arrive during its
  // own shutdown.
  bool WaitForAnswered(absl::Time deadline) { return dispatcher_.WaitForAnswered(deadline); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  // Triton's ModelConfig: the served configuration (model_config_rpc.h).
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  // Triton's bidirectional streaming inference: every message is handled as a ModelInfer request;
  // responses (ModelStreamInferResponse, errors included) come back as they complete.
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
      inference::SystemSharedMemoryStatusResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
      inference::SystemSharedMemoryRegisterResponse* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
      inference::SystemSharedMemoryUnregisterResponse* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest* request,
      inference::CudaSharedMemoryStatusResponse* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest* request,
      inference::CudaSharedMemoryRegisterResponse* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest* request,
      inference::CudaSharedMemoryUnregisterResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const inference::RepositoryModelLoadRequest* request,
                                                inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                  const inference::RepositoryModelUnloadRequest* request,
                                                  inference::RepositoryModelUnloadResponse* response) override;
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx, const inference::LogSettingsRequest* request,
                                        inference::LogSettingsResponse* response) override;
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx, const inference::TraceSettingRequest* request,
                                         inference::TraceSettingResponse* response) override;

 private:
  // The answers of the RPCs that are not inference, on either API.
  absl::Status AnswerServerLive(const inference::ServerLiveRequest& request, inference::ServerLiveResponse* response);
  absl::Status AnswerServerReady(const inference::ServerReadyRequest& request, inference::ServerReadyResponse* response);
  absl::Status AnswerModelReady(const inference::ModelReadyRequest& request, inference::ModelReadyResponse* response);
  absl::Status AnswerServerMetadata(const inference::ServerMetadataRequest& request,
                                    inference::ServerMetadataResponse* response);
  absl::Status AnswerModelMetadata(const inference::ModelMetadataRequest& request,
                                   inference::ModelMetadataResponse* response);
  absl::Status AnswerModelConfig(const inference::ModelConfigRequest& request, inference::ModelConfigResponse* response);
  absl::Status AnswerModelStatistics(const inference::ModelStatisticsRequest& request,
                                     inference::ModelStatisticsResponse* response);
  absl::Status AnswerSystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                              inference::SystemSharedMemoryStatusResponse* response);
  absl::Status AnswerSystemSharedMemoryRegister(const inference::SystemSharedMemoryRegisterRequest& request,
                                                inference::SystemSharedMemoryRegisterResponse* response);
  absl::Status AnswerSystemSharedMemoryUnregister(const inference::SystemSharedMemoryUnregisterRequest& request,
                                                  inference::SystemSharedMemoryUnregisterResponse* response);
  absl::Status AnswerCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& request,
                                            inference::CudaSharedMemoryStatusResponse* response);
  absl::Status AnswerCudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& request,
                                              inference::CudaSharedMemoryRegisterResponse* response);
  // Answered through `done` once the regions' IPC handles are closed (SharedMemoryRegistry::Unregister).
  void AnswerCudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest& request,
                                        inference::CudaSharedMemoryUnregisterResponse* response,
                                        ModelControl::Done done);
  // Triton's repository index: every model, its served version and state (READY, LOADING while it
  // loads or the server warms up, UNAVAILABLE with the load's error), `ready` keeping READY ones.
  absl::Status AnswerRepositoryIndex(const inference::RepositoryIndexRequest& request,
                                     inference::RepositoryIndexResponse* response);
  // Through the model control, answered through `done` (once, maybe on another thread); without one,
  // UNIMPLEMENTED saying why. A request the control cannot take is refused at once: INVALID_ARGUMENT
  // for a parameter it does not take or of the wrong type (a load's "config" and "file:" overrides
  // are taken, with file paths kept under the model's directory: CheckModelControlParameters),
  // NOT_FOUND for a repository_name that is not the repository, UNAVAILABLE while draining.
  void AnswerRepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                 inference::RepositoryModelLoadResponse* response, ModelControl::Done done);
  void AnswerRepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                                   inference::RepositoryModelUnloadResponse* response, ModelControl::Done done);
  // Why a load or unload (`what`) of `model` cannot go to the model control; OK when it can.
  absl::Status CheckModelControl(const char* what, const std::string& model, const std::string& repository,
                                 const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params,
                                 bool unload) const;
  absl::Status AnswerLogSettings(const inference::LogSettingsRequest& request, inference::LogSettingsResponse* response);
  absl::Status AnswerTraceSetting(const inference::TraceSettingRequest& request,
                                  inference::TraceSettingResponse* response);
  template <typename Request, typename Response>
  using AnswerFn = absl::Status (InferenceService::*)(const Request&, Response*);
  // The factory of `method`'s calls on the asynchronous API, answered by `answer`.
  template <typename Request, typename Response>
  QueuedCallFactory QueuedUnary(const char* method, AnswerFn<Request, Response> answer);
  template <typename Request, typename Response>
  using LaterAnswerFn = void (InferenceService::*)(const Request&, Response*, ModelControl::Done);
  // The same for a method answered later (model control).
  template <typename Request, typename Response>
  QueuedCallFactory QueuedLaterUnary(const char* method, LaterAnswerFn<Request, Response> answer);

  ModelRegistry* const registry_;
  const Clock* const clock_;
  const ServerInfo info_;
  SharedMemoryRegistry* const shared_memory_;
  TraceSettings* trace_settings_ = nullptr;
  ModelControl* model_control_ = nullptr;
  std::function<std::vector<std::string>()> repository_models_;  // empty: none but the registry's
  std::string no_model_control_why_;  // empty: mode none's reason
  const StreamOptions stream_options_;
  const int model_infer_method_;         // ModelInfer's index among the service's methods
  const int model_stream_infer_method_;  // ModelStreamInfer's
  InferDispatcher dispatcher_;
  std::atomic<bool> warming_up_{false};
  StreamRegistry streams_;  // after dispatcher_: streams use it until their OnDone
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
