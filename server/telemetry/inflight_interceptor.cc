#include "server/telemetry/inflight_interceptor.h"

#include <cstring>

namespace chronoserve::server::telemetry {
namespace {

constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";
constexpr const char* kModelStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer";

class InflightInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit InflightInterceptor(std::atomic<int64_t>* counter) : counter_(counter) { counter_->fetch_add(1); }
  ~InflightInterceptor() override { counter_->fetch_sub(1); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }

 private:
  std::atomic<int64_t>* const counter_;
};

// A ModelStreamInfer call: every message read is a request in flight until its response (one per
// request, errors included) is sent; what the stream never answered (it was cancelled or ended)
// leaves the count with the call. Hooks for reads and writes may run on different threads.
class StreamInflightInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit StreamInflightInterceptor(std::atomic<int64_t>* counter) : counter_(counter) {}
  ~StreamInflightInterceptor() override { counter_->fetch_sub(open_.load()); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() != nullptr) {
      open_.fetch_add(1);
      counter_->fetch_add(1);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE) && open_.load() > 0) {
      open_.fetch_sub(1);
      counter_->fetch_sub(1);
    }
    methods->Proceed();
  }

 private:
  std::atomic<int64_t>* const counter_;
  std::atomic<int64_t> open_{0};  // this stream's requests read and not yet answered
};

}  // namespace

grpc::experimental::Interceptor* InflightInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() == nullptr) return nullptr;
  // gRPC deletes the interceptor when the call is done.
  if (std::strcmp(info->method(), kModelInfer) == 0) return new InflightInterceptor(counter_);
  if (std::strcmp(info->method(), kModelStreamInfer) == 0) return new StreamInflightInterceptor(counter_);
  return nullptr;
}

}  // namespace chronoserve::server::telemetry
