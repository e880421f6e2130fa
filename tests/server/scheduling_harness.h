// Scheduling test helpers: the real InferenceService on 127.0.0.1 (real gRPC, port picked by the
// OS) serving ModelRuntimes built directly from fake instances, a RequestObserver that lets a test
// wait for the server's own answer to a request (by id), and an asynchronous ModelInfer call that
// a test can cancel or wait for with a timeout. Everything here is owned by one test.
#ifndef CHRONOSERVE_TESTS_SERVER_SCHEDULING_HARNESS_H_
#define CHRONOSERVE_TESTS_SERVER_SCHEDULING_HARNESS_H_

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/core/request_observer.h"
#include "server/grpc/inference_service.h"
#include "server/grpc/model_infer_queues.h"
#include "server/grpc/server_channel.h"
#include "server/scheduler/model_registry.h"
#include "server/shared_memory/shared_memory_registry.h"
#include "tests/server/gated_instance.h"
#include "tests/server/test_client.h"

namespace chronoserve::testing {

// Records the final status of every finished request by id; tests wait for one with a timeout.
class RecordingObserver final : public server::RequestObserver {
 public:
  void OnRequestDone(const server::ModelSpec&, const server::InferRequest* request, const RequestTiming&,
                     const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    done_[request != nullptr ? request->id : std::string()] = status;
  }
  // The server's final status for `id`; nullopt if it did not finish within `timeout`.
  std::optional<absl::Status> WaitFor(const std::string& id, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto seen = [this, &id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_.count(id) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&seen), timeout)) return std::nullopt;
    return done_[id];
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::Status> done_ ABSL_GUARDED_BY(mu_);
};

// The KServe v2 service over real gRPC, composed like server::Server (shared memory allowed, its
// channel arguments) but with a test observer. `infer_threads`: 0 serves inference on gRPC's
// callback API, N > 0 on N ModelInferQueues threads (the asynchronous API), as --grpc-infer-threads
// does; `minimal_stack` as --grpc-minimal-stack.
class ServiceHarness {
 public:
  explicit ServiceHarness(server::StreamOptions stream_options = {}, int infer_threads = 0,
                          bool minimal_stack = false)
      : service_(&registry_, SteadyClock::Get(), server::ServerInfo{"chronoserve-test", "0"}, &observer_,
                 &shared_memory_, stream_options, infer_threads > 0) {
    grpc::ServerBuilder builder;
    server::ChooseHealthService(/*async_api=*/infer_threads > 0, &builder);  // as the server
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server::ConfigureServerChannel(minimal_stack, &builder);
    if (infer_threads > 0) queues_ = std::make_unique<server::ModelInferQueues>(&service_, &builder, infer_threads);
    server_ = builder.BuildAndStart();
    if (server_ != nullptr && queues_ != nullptr) queues_->Start();
    client_ = ConnectTestClient(address());
  }
  ~ServiceHarness() {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    registry_.StopAll();
    if (server_ != nullptr) server_->Wait();
    if (queues_ != nullptr) queues_->Stop();
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  server::ModelRegistry& registry() { return registry_; }
  server::SharedMemoryRegistry& shared_memory() { return shared_memory_; }
  RecordingObserver& observer() { return observer_; }
  server::InferDispatcher& dispatcher() { return service_.dispatcher(); }
  client::InferenceClient& client() { return *client_; }

 private:
  server::ModelRegistry registry_;
  RecordingObserver observer_;
  server::SharedMemoryRegistry shared_memory_;
  server::InferenceService service_;
  std::unique_ptr<server::ModelInferQueues> queues_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<client::InferenceClient> client_;
  int port_ = 0;
};

// A runtime of `workers` GatedInstances sharing `gate`, warmed and started (null on error).
inline std::shared_ptr<server::ModelRuntime> StartGatedModel(const server::ModelSpec& spec, int workers,
                                                             Gate* gate) {
  std::vector<std::unique_ptr<server::ModelInstance>> instances;
  for (int i = 0; i < workers; ++i) instances.push_back(std::make_unique<GatedInstance>(spec, i, gate));
  server::WarmupOptions warmup;
  warmup.runs_per_batch_size = 1;
  auto runtime = server::ModelRuntime::Create(spec, std::move(instances), warmup, SteadyClock::Get());
  if (!runtime.ok()) return nullptr;
  return std::shared_ptr<server::ModelRuntime>(*std::move(runtime));
}

// FP32 INPUT__0 of `items` x 4 random, never-zero values.
inline client::Tensor GatedInput(int64_t items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  std::string bytes(static_cast<size_t>(items) * 4 * sizeof(float), '\0');
  for (int64_t i = 0; i < items * 4; ++i) {
    const float v = (i % 2 == 0 ? 1.0f : -1.0f) * dist(rng);
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
  }
  return client::Tensor{"INPUT__0", DataType::kFp32, {items, 4}, std::move(bytes)};
}

// A ModelInferRequest for `model` with id `id` and the one input `input` (every output).
inline inference::ModelInferRequest GatedRequest(const std::string& model, const std::string& id,
                                                 const client::Tensor& input) {
  client::InferOptions options;
  options.id = id;
  return client::InferenceClient::BuildRequest(model, {input}, options);
}

// OUTPUT__k must be INPUT__0 * (k + 2), row for row (the GatedInstance's function).
inline void ExpectGatedOutputs(const client::InferResult& result, const client::Tensor& input) {
  ASSERT_EQ(result.outputs.size(), 2u) << result.id;
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(result.outputs[k].data.size(), input.data.size()) << result.id;
    EXPECT_THAT(result.outputs[k].shape, ::testing::ElementsAreArray(input.shape));
    for (size_t i = 0; i < input.data.size() / 4; ++i) {
      float x, y;
      std::memcpy(&x, input.data.data() + 4 * i, 4);
      std::memcpy(&y, result.outputs[k].data.data() + 4 * i, 4);
      ASSERT_EQ(y, x * static_cast<float>(k + 2)) << result.id << " output " << k << " element " << i;
    }
  }
}
inline void ExpectGatedOutputs(const inference::ModelInferResponse& response, const client::Tensor& input) {
  auto decoded = client::InferenceClient::DecodeResponse(response);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectGatedOutputs(*decoded, input);
}

// One ModelInfer call in flight on gRPC's callback client API; the test cancels or waits for it.
class PendingInfer {
 public:
  PendingInfer(inference::GRPCInferenceService::Stub* stub, const std::string& model, const std::string& id,
               const client::Tensor& input, std::optional<absl::Duration> deadline = std::nullopt)
      : PendingInfer(stub, GatedRequest(model, id, input), deadline) {}
  // Sends a request built by the test (e.g. one whose tensors are in shared memory).
  PendingInfer(inference::GRPCInferenceService::Stub* stub, inference::ModelInferRequest request,
               std::optional<absl::Duration> deadline = std::nullopt)
      : request_(std::move(request)) {
    if (deadline.has_value()) ctx_.set_deadline(absl::ToChronoTime(absl::Now() + *deadline));
    stub->async()->ModelInfer(&ctx_, &request_, &response_, [this](grpc::Status status) {
      absl::MutexLock lock(&mu_);
      status_ = std::move(status);
    });
  }
  ~PendingInfer() {
    ctx_.TryCancel();
    Wait(absl::Seconds(30));
  }
  void Cancel() { ctx_.TryCancel(); }
  bool done() const {
    absl::MutexLock lock(&mu_);
    return status_.has_value();
  }
  // The call's status; nullopt if it is still running after `timeout`.
  std::optional<grpc::Status> Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto finished = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return status_.has_value(); };
    mu_.AwaitWithTimeout(absl::Condition(&finished), timeout);
    return status_;
  }
  // Valid once Wait() returned OK.
  const inference::ModelInferResponse& response() const { return response_; }

 private:
  grpc::ClientContext ctx_;
  inference::ModelInferRequest request_;
  inference::ModelInferResponse response_;
  mutable absl::Mutex mu_;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

// Asks ServerReady until the server answers that it is draining (OK, ready false), for at most
// `timeout`; whether it did. A failed call is not taken for draining (a server that stopped
// answering must not pass for one that drains); the loop asks again until the timeout. Each try
// is a round trip: the window it waits out is the few instructions between NOT_SERVING and the
// draining flag in Server::Shutdown.
inline bool WaitUntilDraining(client::InferenceClient& c, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    auto ready = c.ServerReady();
    if (ready.ok() && !*ready) return true;
  }
  return false;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_SCHEDULING_HARNESS_H_
