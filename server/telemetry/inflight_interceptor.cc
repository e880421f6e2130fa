#include "server/telemetry/inflight_interceptor.h"

#include <cstring>

namespace chronoserve::server::telemetry {
namespace {

constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

class InflightInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit InflightInterceptor(std::atomic<int64_t>* counter) : counter_(counter) { counter_->fetch_add(1); }
  ~InflightInterceptor() override { counter_->fetch_sub(1); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }

 private:
  std::atomic<int64_t>* const counter_;
};

}  // namespace

grpc::experimental::Interceptor* InflightInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() == nullptr || std::strcmp(info->method(), kModelInfer) != 0) return nullptr;
  return new InflightInterceptor(counter_);  // gRPC deletes it when the call is done
}

}  // namespace chronoserve::server::telemetry
