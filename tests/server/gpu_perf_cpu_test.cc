// The GPU performance settings on the CPU (CI): a model asking for CUDA graphs and keep-warm loads
// and serves exactly as before (eager, timing.cuda_graph false); bad settings fail that model alone
// with a message naming the parameter; a real TorchInstance keeps warm with an eager forward;
// exact_device_timing is accepted and logged as having no effect (host timers). Every model here is
// KIND_CPU, so the suite means the same on a machine with a GPU (KIND_AUTO would go to it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;
using ::testing::HasSubstr;

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}
constexpr char kGraphsOn[] = "optimization { cuda { graphs: true } }\n";

TEST(GpuPerfOnCpuTest, GraphAndKeepWarmSettingsServeEagerOnTheCpu) {
  testing::TempDir repo("cs_gpuperf_cpu");
  examples::ModelOptions policy;
  policy.max_batch_size = 8;
  policy.instance_kind = "KIND_CPU";
  policy.extra_config = std::string(kGraphsOn) + Param("cuda_graph_batch_sizes", "1,4") +
                        Param("keep_warm_ms", "5") + Param("keep_warm_horizon_ms", "1000");
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", policy).ok());
  examples::ModelOptions bad_buckets;
  bad_buckets.max_batch_size = 4;
  bad_buckets.instance_kind = "KIND_CPU";
  bad_buckets.extra_config = std::string(kGraphsOn) + Param("cuda_graph_batch_sizes", "2,16");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "bad_buckets", bad_buckets).ok());
  examples::ModelOptions bad_keep_warm;
  bad_keep_warm.instance_kind = "KIND_CPU";
  bad_keep_warm.extra_config = Param("keep_warm_ms", "soon");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "bad_keep_warm", bad_keep_warm).ok());
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));

  std::mt19937_64 rng(11);
  const std::vector<int64_t> shape = {3, 4, 20, 20};
  const Tensor input{"INPUT__0", DataType::kFp32, shape,
                     RandomTensorBytes(DataType::kFp32, ElementCount(shape), rng)};
  auto result = c->Infer("policy_net", {input});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->timing.has_value());
  EXPECT_FALSE(result->timing->cuda_graph) << "no CUDA graphs on the CPU";
  EXPECT_FALSE(result->timing->device_timed);
  EXPECT_EQ(result->timing->batch_size, 3);
  const auto want = testing::TorchReference(repo.path() + "/policy_net/1/model.pt", {input});
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(result->outputs[k].data.size(), want[k].size() * sizeof(float));
    for (size_t i = 0; i < want[k].size(); ++i) {
      float got;
      std::memcpy(&got, result->outputs[k].data.data() + sizeof(float) * i, sizeof(float));
      ASSERT_NEAR(got, want[k][i], 1e-5) << "output " << k << " element " << i;
    }
  }

  const Tensor mlp_input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  auto buckets = c->Infer("bad_buckets", {mlp_input});
  ASSERT_EQ(buckets.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(buckets.status().message()), HasSubstr("cuda_graph_batch_sizes"));
  EXPECT_THAT(std::string(buckets.status().message()), HasSubstr("16 exceeds max_batch_size 4"));
  auto keep_warm = c->Infer("bad_keep_warm", {mlp_input});
  ASSERT_EQ(keep_warm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(keep_warm.status().message()), HasSubstr("keep_warm_ms"));
}

TEST(GpuPerfOnCpuTest, TorchInstanceKeepsWarmWithAnEagerForward) {
  testing::TempDir repo("cs_gpuperf_kw");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  o.extra_config = kGraphsOn;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy_net");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  server::InstanceOptions options;
  options.activity = devices.Get(-1, SteadyClock::Now());
  auto instance = server::CreateTorchInstance(*spec, options);
  ASSERT_TRUE(instance.ok()) << instance.status();
  ASSERT_TRUE((*instance)->PrepareForServing().ok()) << "graphs requested on the CPU: eager";
  for (int i = 0; i < 3; ++i) {
    absl::Status status = (*instance)->KeepWarm();
    ASSERT_TRUE(status.ok()) << status;
  }
  // Keep-warm's forwards leave the instance serving as before: eager, and right.
  std::mt19937_64 rng(5);
  std::vector<std::string> outputs;
  server::Batch batch;
  batch.push_back(server::MakeSyntheticRequest(*spec, 3, &outputs, rng));
  server::BatchTiming timing;
  absl::Status executed = (*instance)->Execute(batch, &timing);
  ASSERT_TRUE(executed.ok()) << executed;
  EXPECT_FALSE(timing.cuda_graph);
  const server::InputTensor& in = batch[0]->inputs[0];
  const Tensor input{"INPUT__0", DataType::kFp32, in.shape, std::string(in.data, in.byte_size)};
  const auto want = testing::TorchReference(repo.path() + "/policy_net/1/model.pt", {input});
  ASSERT_EQ(outputs.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(testing::ReferenceMismatch(outputs[k], want[k]), "") << "output " << k;
  }
}

TEST(GpuPerfOnCpuTest, ExactDeviceTimingIsAcceptedAndLoggedAsNoEffect) {
  testing::TempDir repo("cs_exact_cpu");
  examples::ModelOptions exact;
  exact.max_batch_size = 4;
  exact.instance_kind = "KIND_CPU";
  exact.extra_config = Param("exact_device_timing", "true");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp_exact", exact).ok());
  examples::ModelOptions bad;
  bad.instance_kind = "KIND_CPU";
  bad.extra_config = Param("exact_device_timing", "sometimes");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp_bad", bad).ok());
  ::testing::internal::CaptureStderr();
  auto server = testing::StartServer(repo.path());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(server, nullptr) << log;
  EXPECT_THAT(log, HasSubstr("model 'mlp_exact' worker 0: exact_device_timing has no effect on the CPU"));

  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(12);
  const Tensor input{"INPUT__0", DataType::kFp32, {2, 64}, RandomTensorBytes(DataType::kFp32, 128, rng)};
  auto result = c->Infer("mlp_exact", {input});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->timing.has_value());
  EXPECT_FALSE(result->timing->exact_device_timing) << "host timers on the CPU: nothing to hold";
  EXPECT_FALSE(result->timing->device_timed);
  EXPECT_TRUE(result->timing->IsConsistent());
  const auto want = testing::TorchReference(repo.path() + "/mlp_exact/1/model.pt", {input});
  ASSERT_EQ(result->outputs[0].data.size(), want[0].size() * sizeof(float));
  for (size_t i = 0; i < want[0].size(); ++i) {
    float got;
    std::memcpy(&got, result->outputs[0].data.data() + sizeof(float) * i, sizeof(float));
    ASSERT_NEAR(got, want[0][i], 1e-5) << "element " << i;
  }
  auto refused = c->Infer("mlp_bad", {input});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("exact_device_timing"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sometimes"));
}

}  // namespace
}  // namespace chronoserve
