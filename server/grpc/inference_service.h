// InferenceService: the KServe v2 GRPCInferenceService (plus Triton's ModelStatistics and
// system_shared_memory extensions) on gRPC's callback API. Handlers validate and enqueue and never
// block; a worker thread finishes each ModelInfer call (response parameters timing.*, the
// server-timing trailer, statistics). A batch run without request timing (--request-timing off)
// gives its responses neither. Owned by the Server; the registries and clock must outlive it.
#ifndef CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
#define CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/inference.grpc.pb.h"
#include "server/core/request_observer.h"
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
  // `observer` (may be null) sees every finished ModelInfer request. `shared_memory` (may be null:
  // the extension is off, its RPCs answer FAILED_PRECONDITION) holds the clients' regions. Both
  // must outlive the service.
  InferenceService(ModelRegistry* registry, const Clock* clock, ServerInfo info,
                   RequestObserver* observer = nullptr, SharedMemoryRegistry* shared_memory = nullptr);

  // While draining for shutdown, ServerReady is false and ModelInfer answers UNAVAILABLE.
  void SetDraining() { draining_.store(true); }
  // Blocks until every accepted ModelInfer call has been answered or `deadline` passes; returns
  // whether none is left. Lets the server keep answering (UNAVAILABLE, health NOT_SERVING) while
  // it drains, instead of gRPC cancelling calls that arrive during its own shutdown.
  bool WaitForAnswered(absl::Time deadline);

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
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
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

 private:
  // One accepted ModelInfer call was answered (or its enqueue refused).
  void Answered();
  // A request for a known model refused before it was queued: statistics and the observer.
  void RefuseBeforeQueue(ModelRuntime& runtime, const InferRequest* request, int64_t received_ns,
                         const absl::Status& status, ModelStats::Failure reason);

  ModelRegistry* const registry_;
  const Clock* const clock_;
  const ServerInfo info_;
  RequestObserver* const observer_;
  SharedMemoryRegistry* const shared_memory_;
  std::atomic<bool> draining_{false};
  absl::Mutex inflight_mu_;
  int64_t inflight_ ABSL_GUARDED_BY(inflight_mu_) = 0;  // accepted ModelInfer calls not yet answered
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
