// InflightInterceptorFactory: a gRPC server interceptor that counts inference requests in flight
// into LiveStateCollector::inflight(): each ModelInfer call from the moment gRPC creates it to its
// destruction, and each ModelStreamInfer message from its read to its response's send. gRPC owns
// each interceptor (one per call, on gRPC's threads); the factory is owned by the grpc::Server.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_INFLIGHT_INTERCEPTOR_H_
#define CHRONOSERVE_SERVER_TELEMETRY_INFLIGHT_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <atomic>
#include <cstdint>

namespace chronoserve::server::telemetry {

class InflightInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `counter` must outlive the grpc::Server.
  explicit InflightInterceptorFactory(std::atomic<int64_t>* counter) : counter_(counter) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::atomic<int64_t>* const counter_;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_INFLIGHT_INTERCEPTOR_H_
