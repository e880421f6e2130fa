// The real server on 127.0.0.1, real gRPC, models generated in C++ (tools/example_models.h): one
// server with several models answers health, metadata, inference (checked against LibTorch),
// statistics and bad requests. Models that fail and starts that fail: failed_model_test.cc;
// --grpc-infer-threads: infer_threads_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "common/timing.h"
#include "server/backend/torch_backend.h"
#include "tests/server/shared_server_test.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;
using client::InferenceClient;
using client::Tensor;

class ServerIntegrationTest : public testing::SharedServerTest<ServerIntegrationTest> {
 public:
  static constexpr char kRepoName[] = "cs_integration";
  static void WriteModels(const testing::TempDir& repo) {
    examples::ModelOptions policy;
    policy.max_batch_size = 8;
    policy.max_queue_delay_us = 2000;
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", policy).ok());
    examples::ModelOptions mlp;
    mlp.max_batch_size = 16;
    mlp.instance_count = 2;
    mlp.instance_kind = "KIND_CPU";  // the timing test asserts two host-timed CPU workers, GPU or not
    ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
    examples::ModelOptions addsub;
    addsub.max_batch_size = 4;
    ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub", addsub).ok());
    examples::ModelOptions plain;
    plain.max_batch_size = 0;
    plain.dynamic_batching = false;
    ASSERT_TRUE(examples::WriteScaleModel(repo.path(), "scale_nobatch", DataType::kFp32, plain).ok());
    // As Triton: dynamic_batching on a model that does not batch keeps its queue policy and never
    // holds a request for the delay (a minute here).
    ASSERT_TRUE(examples::WriteScaleModel(repo.path(), "scale_nobatch_queued", DataType::kFp32, plain).ok());
    std::ofstream(repo.path() + "/scale_nobatch_queued/config.pbtxt", std::ios::app)
        << "dynamic_batching { max_queue_delay_microseconds: 60000000 default_queue_policy { max_queue_size: 4 } }\n";
    for (DataType t : kScaleTypes) {
      examples::ModelOptions o;
      o.max_batch_size = 4;
      ASSERT_TRUE(examples::WriteScaleModel(repo.path(), ScaleName(t), t, o).ok());
    }
  }

 protected:
  static std::string ScaleName(DataType t) {
    std::string name = DataTypeName(t);
    for (auto& c : name) c = static_cast<char>(std::tolower(c));
    return "scale_" + name;
  }

  static Tensor RandomInput(const std::string& name, DataType t, std::vector<int64_t> shape, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Tensor tensor{name, t, shape, RandomTensorBytes(t, ElementCount(shape), rng)};
    return tensor;
  }

  static std::string ModelPath(const std::string& model) { return repo_->path() + "/" + model + "/1/model.pt"; }

  static inline const DataType kScaleTypes[] = {
      DataType::kFp32, DataType::kFp64, DataType::kFp16, DataType::kBf16, DataType::kInt8,
      DataType::kInt16, DataType::kInt32, DataType::kInt64, DataType::kUint8, DataType::kBool};
};

void ExpectClose(const std::string& bytes, const std::vector<float>& want, float tol) {
  ASSERT_EQ(bytes.size(), want.size() * 4);
  for (size_t i = 0; i < want.size(); ++i) {
    float got;
    std::memcpy(&got, bytes.data() + i * 4, 4);
    ASSERT_NEAR(got, want[i], tol) << "element " << i;
  }
}

TEST_F(ServerIntegrationTest, HealthAndMetadata) {
  EXPECT_EQ(testing::Answer(client_->ServerLive()), "true");
  EXPECT_EQ(testing::Answer(client_->ServerReady()), "true");
  EXPECT_EQ(testing::Answer(client_->ModelReady("policy_net")), "true");
  EXPECT_EQ(testing::Answer(client_->ModelReady("policy_net", "1")), "true");
  // As Triton: an unknown model or version is not ready (answered OK, false), not an error, so
  // tritonclient's is_model_ready() returns False instead of raising.
  EXPECT_EQ(testing::Answer(client_->ModelReady("policy_net", "2")), "false");
  EXPECT_EQ(testing::Answer(client_->ModelReady("nope")), "false");
  // A version that is no integer >= 0 is a bad request on ModelReady too, not a model that is not ready.
  // A version of 4 KiB: cut short in the message, so that what was expected survives gRPC's 1 KiB cut.
  const std::string long_version = "v" + std::string(4096, '9');
  for (const std::string& version : {std::string("abc"), std::string("-1"), long_version}) {
    const auto unknown = client_->ModelReady("nope", version);
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << "even for an unknown model, as Triton";
    const auto ready = client_->ModelReady("policy_net", version);
    EXPECT_EQ(ready.status().code(), absl::StatusCode::kInvalidArgument) << version << ": " << testing::Answer(ready);
    EXPECT_THAT(std::string(ready.status().message()), HasSubstr("is not an integral value >= 0")) << version;
  }
  // Read as a decimal integer, as Triton's std::stol reads it: "01" and "+1" name version 1.
  for (const char* version : {"01", "+1"}) {
    EXPECT_EQ(testing::Answer(client_->ModelReady("policy_net", version)), "true") << version;
  }
  auto server = client_->ServerMetadata();
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(server->name(), "chronoserve");
  EXPECT_FALSE(server->version().empty());
  for (const char* extension : {"model_configuration", "schedule_policy", "parameters", "statistics", "logging"}) {
    EXPECT_THAT(server->extensions(), ::testing::Contains(extension)) << "Triton's name for what is served";
  }
  auto meta = client_->ModelMetadata("policy_net");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->platform(), "pytorch_libtorch");
  EXPECT_THAT(meta->versions(), ::testing::ElementsAre("1"));
  ASSERT_EQ(meta->inputs_size(), 1);
  EXPECT_EQ(meta->inputs(0).name(), "INPUT__0");
  EXPECT_EQ(meta->inputs(0).datatype(), "FP32");
  EXPECT_THAT(meta->inputs(0).shape(), ::testing::ElementsAre(-1, 4, 20, 20));
  ASSERT_EQ(meta->outputs_size(), 3);
  EXPECT_THAT(meta->outputs(1).shape(), ::testing::ElementsAre(-1, 1));
  auto plain = client_->ModelMetadata("scale_nobatch");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(plain->inputs(0).shape(), ::testing::ElementsAre(3)) << "no batch dim";
  EXPECT_EQ(client_->ModelMetadata("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerIntegrationTest, PolicyNetMatchesLibTorchReference) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {3, 4, 20, 20}, 11);
  client::InferOptions options;
  options.id = "policy-42";
  auto result = client_->Infer("policy_net", {input}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->id, "policy-42");
  const auto want = testing::TorchReference(ModelPath("policy_net"), {input});
  ASSERT_EQ(result->outputs.size(), 3u);
  EXPECT_EQ(result->outputs[0].name, "OUTPUT__0");
  EXPECT_THAT(result->outputs[0].shape, ::testing::ElementsAre(3, 400));
  EXPECT_THAT(result->outputs[1].shape, ::testing::ElementsAre(3, 1));
  for (int k = 0; k < 3; ++k) ExpectClose(result->outputs[k].data, want[k], 1e-4f);
}

TEST_F(ServerIntegrationTest, RequestedOutputsAreFilteredAndOrdered) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {1, 4, 20, 20}, 12);
  client::InferOptions options;
  options.outputs = {"OUTPUT__2", "OUTPUT__1"};
  auto result = client_->Infer("policy_net", {input}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_EQ(result->outputs[0].name, "OUTPUT__2");
  EXPECT_EQ(result->outputs[1].name, "OUTPUT__1");
  const auto want = testing::TorchReference(ModelPath("policy_net"), {input});
  ExpectClose(result->outputs[0].data, want[2], 1e-4f);
  ExpectClose(result->outputs[1].data, want[1], 1e-4f);
}

TEST_F(ServerIntegrationTest, TypedContentsGiveTheSameResultAsRaw) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {2, 64}, 13);
  client::InferOptions typed;
  typed.typed_contents = true;
  auto a = client_->Infer("mlp", {input});
  auto b = client_->Infer("mlp", {input}, typed);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->outputs[0].data, b->outputs[0].data);
  ExpectClose(a->outputs[0].data, testing::TorchReference(ModelPath("mlp"), {input})[0], 1e-4f);
}

TEST_F(ServerIntegrationTest, EveryDatatypeRoundTrips) {
  for (DataType t : kScaleTypes) {
    SCOPED_TRACE(DataTypeName(t));
    const Tensor input = RandomInput("INPUT__0", t, {2, 3}, 14);
    auto result = client_->Infer(ScaleName(t), {input});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->outputs[0].dtype, t);
    EXPECT_THAT(result->outputs[0].shape, ::testing::ElementsAre(2, 3));
    for (int i = 0; i < 6; ++i) {
      const double x = ElementAsDouble(t, input.data.data(), i);
      const double y = ElementAsDouble(t, result->outputs[0].data.data(), i);
      const double want = t == DataType::kBool ? (x == 0 ? 1 : 0) : 2 * x;
      EXPECT_NEAR(y, want, std::fabs(want) * 0.01 + 1e-6) << "element " << i;
    }
    if (t != DataType::kFp16 && t != DataType::kBf16) {
      client::InferOptions typed;
      typed.typed_contents = true;
      auto typed_result = client_->Infer(ScaleName(t), {input}, typed);
      ASSERT_TRUE(typed_result.ok()) << typed_result.status();
      EXPECT_EQ(typed_result->outputs[0].data, result->outputs[0].data);
    }
  }
}

TEST_F(ServerIntegrationTest, TwoInputsWithVariableDims) {
  const Tensor a = RandomInput("INPUT__0", DataType::kFp32, {2, 5}, 15);
  const Tensor b = RandomInput("INPUT__1", DataType::kFp32, {2, 5}, 16);
  auto result = client_->Infer("addsub", {b, a});  // order on the wire does not matter
  ASSERT_TRUE(result.ok()) << result.status();
  const auto want = testing::TorchReference(ModelPath("addsub"), {a, b});
  EXPECT_THAT(result->outputs[1].shape, ::testing::ElementsAre(2, 5));
  ExpectClose(result->outputs[0].data, want[0], 1e-6f);
  ExpectClose(result->outputs[1].data, want[1], 1e-6f);
  const Tensor c = RandomInput("INPUT__0", DataType::kFp32, {1, 9}, 17);
  const Tensor d = RandomInput("INPUT__1", DataType::kFp32, {1, 9}, 18);
  auto longer = client_->Infer("addsub", {c, d});
  ASSERT_TRUE(longer.ok()) << longer.status();
  EXPECT_THAT(longer->outputs[0].shape, ::testing::ElementsAre(1, 9));
  EXPECT_EQ(testing::AddSubMismatch(c, d, longer->outputs), "");
}

TEST_F(ServerIntegrationTest, NonBatchingModelUsesTheFullShape) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {3}, 19);
  auto result = client_->Infer("scale_nobatch", {input});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->outputs[0].shape, ::testing::ElementsAre(3));
  EXPECT_EQ(result->timing->batch_size, 1);
  EXPECT_EQ(testing::OutputsMismatch(ModelPath("scale_nobatch"), {input}, result->outputs), "");
}

TEST_F(ServerIntegrationTest, NonBatchingModelWithDynamicBatchingRunsEachRequestAtOnce) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {3}, 23);
  auto result = client_->Infer("scale_nobatch_queued", {input});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->timing.has_value());
  EXPECT_EQ(result->timing->batch_size, 1);
  EXPECT_LT(result->timing->queue_ns, 30'000'000'000) << "not held for the minute of max_queue_delay";
  EXPECT_EQ(testing::OutputsMismatch(ModelPath("scale_nobatch_queued"), {input}, result->outputs), "");
}

TEST_F(ServerIntegrationTest, TimingInvariantsHoldOverManyRequests) {
  const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {2, 64}, 20);
  for (int i = 0; i < 200; ++i) {
    auto result = client_->Infer("mlp", {input});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->timing.has_value()) << "response carries timing.* parameters";
    const RequestTiming& t = *result->timing;
    ASSERT_TRUE(t.IsConsistent()) << "every span >= 0 and the parts <= server_total (request " << i << ")";
    ASSERT_GT(t.server_total_ns, 0);
    ASSERT_GT(t.compute_ns, 0);
    ASSERT_GT(t.admit_ns, 0) << "the request was read, validated and queued";
    ASSERT_GE(t.handback_ns, 0);
    // Host stamps in order: admit + queue + input_stage + (staged -> done) + output_stage +
    // handback is server_total, and the device spans fit inside staged -> done.
    ASSERT_GE(t.device_gap_ns(), 0) << "h2d + compute + d2h within inputs staged -> observed done";
    ASSERT_LE(t.server_total_ns, result->e2e_ns) << "server_total <= client end-to-end";
    ASSERT_GE(t.batch_size, 2);
    ASSERT_GE(t.worker, 0);
    ASSERT_LT(t.worker, 2) << "mlp has two workers";
    ASSERT_EQ(t.gpu, -1);
    ASSERT_FALSE(t.device_timed) << "host-timed on the CPU, and said to be";
    auto trailer = ParseServerTiming(result->server_timing);
    ASSERT_TRUE(trailer.ok()) << result->server_timing;
    ASSERT_EQ(trailer->front().name, "admit");
    ASSERT_EQ(trailer->back().name, "total");
    ASSERT_NEAR(trailer->back().dur_ms, t.server_total_ns / 1e6, 0.0006);
  }
}

TEST_F(ServerIntegrationTest, ConcurrentRequestsAreBatchedAndEachGetsItsOwnRows) {
  constexpr int kThreads = 12;
  constexpr int kPerThread = 10;
  std::atomic<int> batched{0}, failures{0};
  std::vector<std::string> first_failure(kThreads);  // per thread: no lock
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));
      for (int i = 0; i < kPerThread; ++i) {
        const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {1, 4, 20, 20}, 1000 + t * 100 + i);
        auto result = client->Infer("policy_net", {input});
        if (!result.ok()) {  // one deadline per thread at most
          ++failures;
          first_failure[t] = result.status().ToString();
          break;
        }
        if (result->timing->batch_size > 1) ++batched;
        // Every element of every output, so rows of another request in any of them show.
        const std::string mismatch = testing::OutputsMismatch(ModelPath("policy_net"), {input}, result->outputs);
        if (!mismatch.empty()) {
          ++failures;
          if (first_failure[t].empty()) first_failure[t] = "request " + std::to_string(i) + ": " + mismatch;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << ::testing::PrintToString(first_failure);
  EXPECT_GT(batched.load(), 0) << "the dynamic batcher merged concurrent requests";
}

// --grpc-threads-per-queue 1: three completion queues with a thread each serve concurrent clients,
// every answer its own rows, with the timing invariants.
TEST_F(ServerIntegrationTest, OneThreadPerCompletionQueueServesConcurrentClients) {
  server::ServerOptions options = testing::TestServerOptions(repo_->path());
  options.grpc_infer_threads = 3;
  options.grpc_threads_per_queue = 1;
  std::unique_ptr<server::Server> server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  constexpr int kThreads = 6;
  std::atomic<int> failures{0};
  std::vector<std::string> first_failure(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
      for (int i = 0; i < 5; ++i) {
        const Tensor input = RandomInput("INPUT__0", DataType::kFp32, {1, 4, 20, 20}, 5000 + t * 100 + i);
        auto result = client->Infer("policy_net", {input});
        std::string problem;
        if (!result.ok()) {
          problem = result.status().ToString();
        } else if (!result->timing.has_value() || !result->timing->IsConsistent() || result->timing->admit_ns <= 0) {
          problem = "timing missing or inconsistent";
        } else {
          problem = testing::OutputsMismatch(ModelPath("policy_net"), {input}, result->outputs);
        }
        if (!problem.empty()) {  // per thread: no lock; this thread stops at its first
          ++failures;
          first_failure[t] = "request " + std::to_string(i) + ": " + problem;
          break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << ::testing::PrintToString(first_failure);
  server->Shutdown();
}

TEST_F(ServerIntegrationTest, StatisticsCountRequestsAndBatches) {
  auto before = client_->ModelStatistics("scale_int32");
  ASSERT_TRUE(before.ok()) << before.status();
  const auto& b = before->model_stats(0);
  const Tensor input = RandomInput("INPUT__0", DataType::kInt32, {3, 3}, 21);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client_->Infer("scale_int32", {input}).ok());
  Tensor bad = input;
  bad.shape = {3, 4};
  EXPECT_FALSE(client_->Infer("scale_int32", {bad}).ok());
  auto after = client_->ModelStatistics("scale_int32");
  ASSERT_TRUE(after.ok());
  const auto& a = after->model_stats(0);
  EXPECT_EQ(a.name(), "scale_int32");
  EXPECT_EQ(a.version(), "1");
  EXPECT_EQ(a.inference_count() - b.inference_count(), 15u) << "items: 5 requests x batch 3";
  EXPECT_EQ(a.execution_count() - b.execution_count(), 5u);
  EXPECT_EQ(a.inference_stats().success().count() - b.inference_stats().success().count(), 5u);
  EXPECT_EQ(a.inference_stats().fail().count() - b.inference_stats().fail().count(), 1u);
  EXPECT_GT(a.inference_stats().compute_infer().ns(), b.inference_stats().compute_infer().ns());
  EXPECT_GT(a.last_inference(), 0u);
  bool saw_batch3 = false;
  for (const auto& bs : a.batch_stats()) saw_batch3 |= bs.batch_size() == 3 && bs.compute_infer().count() >= 5;
  EXPECT_TRUE(saw_batch3);
  auto all = client_->ModelStatistics("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->model_stats_size(), 5 + static_cast<int>(std::size(kScaleTypes)));
  EXPECT_EQ(client_->ModelStatistics("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerIntegrationTest, BadRequestsGetTheRightCodes) {
  const Tensor good = RandomInput("INPUT__0", DataType::kFp32, {1, 64}, 22);
  auto code = [&](const std::string& model, std::vector<Tensor> inputs) {
    auto r = client_->Infer(model, inputs);
    return r.ok() ? absl::StatusCode::kOk : r.status().code();
  };
  EXPECT_EQ(code("nope", {good}), absl::StatusCode::kNotFound);
  EXPECT_EQ(code("../mlp", {good}), absl::StatusCode::kInvalidArgument);
  // Every RPC that names a model checks the name alike: malformed is INVALID_ARGUMENT, unknown NOT_FOUND
  // (ModelConfig: model_config_rpc_test.cc).
  for (const std::string& bad : {std::string("../mlp"), std::string("a/b"), std::string(256, 'm')}) {
    EXPECT_EQ(client_->ModelMetadata(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(client_->ModelStatistics(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(client_->ModelMetadata("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ModelStatistics("").status().code(), absl::StatusCode::kOk) << "every model";
  // Every model's, with a version that is no number: still a bad request, as Triton checks the
  // version before the name; one that is a number changes nothing (every model's, as Triton).
  for (const auto& [version, want] : {std::pair{"abc", grpc::StatusCode::INVALID_ARGUMENT}, {"-1", grpc::StatusCode::INVALID_ARGUMENT},
                                      {"7", grpc::StatusCode::OK}}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelStatisticsRequest request;
    request.set_version(version);
    inference::ModelStatisticsResponse response;
    const grpc::Status status = client_->stub()->ModelStatistics(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), want) << version << ": " << status.error_message();
    if (want != grpc::StatusCode::OK) {
      EXPECT_EQ(status.error_message(), std::string("version '") + version + "' is not an integral value >= 0");
    }
  }
  Tensor wrong_type = good;
  wrong_type.dtype = DataType::kFp64;
  wrong_type.data += wrong_type.data;
  EXPECT_EQ(code("mlp", {wrong_type}), absl::StatusCode::kInvalidArgument);
  Tensor too_big = RandomInput("INPUT__0", DataType::kFp32, {17, 64}, 23);
  auto r = client_->Infer("mlp", {too_big});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("model 'mlp' input 'INPUT__0': batch size 17 exceeds max_batch_size 16"));
  Tensor unknown = good;
  unknown.name = "x";
  EXPECT_EQ(code("mlp", {unknown}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("mlp", {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("mlp", {good, good}), absl::StatusCode::kInvalidArgument);
  client::InferOptions version;
  auto req = InferenceClient::BuildRequest("mlp", {good}, version);
  req.set_model_version("7");
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::ModelInferResponse response;
  EXPECT_EQ(client_->stub()->ModelInfer(&ctx, req, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace chronoserve
