// HealthService: grpc.health.v1.Health (Check and Watch, doc/health-checking.md of gRPC) on gRPC's
// asynchronous API, its calls served on ModelInferQueues' completion queues (Calls()). It takes the
// place of gRPC's default health service when inference is on the asynchronous API: gRPC 1.51's
// default one is a callback-API service, and one callback method is enough to start the process's
// shared callback queue, whose cores / 2 threads ("nexting_thread") poll every connection beside
// the server's own queues (unary_queued_call.h). The Server sets statuses through the same interface
// as gRPC's (grpc::HealthCheckServiceInterface), so either serves.
//
// Semantics, as gRPC's default service: the overall service "" is always known; a name is known once
// a status was set for it. Check answers a known name's status, NOT_FOUND for an unknown one. Watch
// sends the name's status at once (SERVICE_UNKNOWN while unknown) and then every change, until the
// client cancels. Unlike gRPC's, the overall status starts NOT_SERVING (the server sets it once its
// models are loaded), and Shutdown() also ends every Watch, after its NOT_SERVING, with UNAVAILABLE,
// so that no watcher holds grpc::Server::Shutdown up to its deadline. After Shutdown() every status
// is NOT_SERVING and stays so.
//
//   ChooseHealthService(true, &builder) (server_channel.h);  HealthService health;  builder.RegisterService(health.service());
//   for (auto& calls : health.Calls()) queues.AddCalls(calls);
//   health.SetServingStatus(true);  ...  health.Shutdown();  server->Shutdown(deadline);
#ifndef CHRONOSERVE_SERVER_GRPC_HEALTH_SERVICE_H_
#define CHRONOSERVE_SERVER_GRPC_HEALTH_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/health.grpc.pb.h"
#include "server/grpc/queued_call.h"

namespace chronoserve::server {

class HealthService final : public grpc::HealthCheckServiceInterface {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService();
  ~HealthService() override;
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // The gRPC service to register with the builder (every method asynchronous).
  grpc::Service* service() { return &service_; }
  // Check's and Watch's calls, for ModelInferQueues::AddCalls.
  std::vector<QueuedCallFactory> Calls();

  void SetServingStatus(const std::string& service_name, bool serving) override;
  // Every known name, "" included.
  void SetServingStatus(bool serving) override;
  void Shutdown() override;

  // Check's answer (also for tests).
  absl::Status Check(const grpc::health::v1::HealthCheckRequest& request,
                     grpc::health::v1::HealthCheckResponse* response);

 private:
  class WatchCall;

  // A Watch call that arrived: sent `name`'s status now and on every change (EndWatches ends it).
  void AddWatch(const std::string& name, WatchCall* call);
  void RemoveWatch(const std::string& name, WatchCall* call);
  ServingStatus StatusLocked(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetLocked(const std::string& name, ServingStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every known name, "" included.
  void SetAllLocked(ServingStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::health::v1::Health::AsyncService service_;
  absl::Mutex mu_;
  std::map<std::string, ServingStatus> statuses_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<WatchCall*>> watches_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_GRPC_HEALTH_SERVICE_H_
