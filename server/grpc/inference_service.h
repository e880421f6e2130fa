// InferenceService: the KServe v2 GRPCInferenceService (plus Triton's ModelStatistics) on gRPC's
// callback API. Handlers validate and enqueue and never block; a worker thread finishes each
// ModelInfer call (response parameters timing.*, the server-timing trailer, statistics).
// Owned by the Server; the registry and clock must outlive it.
#ifndef CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
#define CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>

#include "common/clock.h"
#include "proto/inference.grpc.pb.h"
#include "server/core/request_observer.h"
#include "server/scheduler/model_registry.h"

namespace chronoserve::server {

struct ServerInfo {
  std::string name = "chronoserve";
  std::string version;
};

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `observer` (may be null) sees every finished ModelInfer request; it must outlive the service.
  InferenceService(ModelRegistry* registry, const Clock* clock, ServerInfo info,
                   RequestObserver* observer = nullptr);

  // While draining for shutdown, ServerReady is false and ModelInfer answers UNAVAILABLE.
  void SetDraining() { draining_.store(true); }

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

 private:
  // A request for a known model refused before it was queued: statistics and the observer.
  void RefuseBeforeQueue(ModelRuntime& runtime, const InferRequest* request, int64_t received_ns,
                         const absl::Status& status, ModelStats::Failure reason);

  ModelRegistry* const registry_;
  const Clock* const clock_;
  const ServerInfo info_;
  RequestObserver* const observer_;
  std::atomic<bool> draining_{false};
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_INFERENCE_SERVICE_H_
