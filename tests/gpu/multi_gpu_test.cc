// instance_group over several GPUs: KIND_GPU without `gpus` puts `count` workers on every visible
// GPU; each worker's model is resident on its own device and requests are served by all of them,
// eager or from CUDA graphs captured per worker, unary or streamed; an idle worker's keep-warm
// replays its own model on its own GPU. The first test skips (saying so) on a machine with fewer
// than two GPUs; the others then check the same on GPU 0 alone, and the spread with two or more.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "server/repository/model_config_loader.h"
#include "server/scheduler/model_runtime.h"
#include "tests/gpu/counting_instance.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

// 0 .. gpus - 1.
std::set<int64_t> EveryGpu(int gpus) {
  std::set<int64_t> all;
  for (int g = 0; g < gpus; ++g) all.insert(g);
  return all;
}

TEST(MultiGpuTest, InstanceGroupSpreadsWorkersOverEveryGpu) {
  const int gpus = server::CudaDeviceCount();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, " << gpus << " visible";
  testing::TempDir repo("cs_multi_gpu");
  examples::ModelOptions o;
  o.max_batch_size = 32;
  o.instance_kind = "KIND_GPU";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", o).ok());
  auto server = testing::StartServer(repo.path(), 1);
  ASSERT_NE(server, nullptr);
  auto model = server->registry().Find("policy_net", "");
  ASSERT_TRUE(model.ok()) << model.status();
  std::set<int64_t> worker_gpus;
  for (const auto& w : (*model)->workers()) worker_gpus.insert(w->instance().gpu());
  EXPECT_EQ(worker_gpus, EveryGpu(gpus)) << "one worker per visible GPU";

  absl::Mutex mu;
  std::set<int64_t> served_on;
  int wrong = 0, failed = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 25; ++i) {
        client::Tensor input{"INPUT__0", DataType::kFp32, {4, 4, 20, 20},
                             RandomTensorBytes(DataType::kFp32, 4 * 4 * 20 * 20, rng)};
        auto r = client->Infer("policy_net", {input});
        absl::MutexLock lock(&mu);
        if (!r.ok()) {
          ++failed;
          break;  // one deadline per thread at most
        }
        served_on.insert(r->timing->gpu);
        if (i % 5 == 0) {
          const auto want = testing::TorchReference(repo.path() + "/policy_net/1/model.pt", {input});
          if (!testing::ReferenceMismatch(r->outputs[0].data, want[0], 5e-3f).empty()) ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0) << "outputs equal the CPU reference on every GPU";
  EXPECT_EQ(served_on, EveryGpu(gpus)) << "requests were served on every GPU";
}


TEST(MultiGpuTest, GraphWorkersOnEveryGpuAnswerStreamedRequestsExactly) {
  const int gpus = server::CudaDeviceCount();
  ASSERT_GE(gpus, 1);
  testing::TempDir repo("cs_multi_gpu_graphs");
  examples::ModelOptions o;
  o.max_batch_size = 16;
  o.instance_kind = "KIND_GPU";
  o.instance_count = 2;
  o.extra_config = "optimization { cuda { graphs: true } }\n";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_graph", o).ok());
  auto server = testing::StartServer(repo.path(), 1);
  ASSERT_NE(server, nullptr);
  auto model = server->registry().Find("policy_graph", "");
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<int, int> workers_on;
  for (const auto& w : (*model)->workers()) ++workers_on[w->instance().gpu()];
  for (int g = 0; g < gpus; ++g) EXPECT_EQ(workers_on[g], 2) << "two workers, each with its own graphs, on GPU " << g;

  // Several streams at once, requests of 1-8 rows, so batches form from several requests and
  // several streams on every worker.
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  constexpr int kStreams = 4, kPerStream = 24;
  std::vector<std::unique_ptr<client::InferStream>> streams;
  for (int s = 0; s < kStreams; ++s) streams.push_back(client::InferStream::Open(client->stub()));
  std::map<std::string, client::Tensor> inputs;
  std::mt19937_64 rng(2026);
  for (int i = 0; i < kPerStream; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      const std::string id = "s" + std::to_string(s) + "r" + std::to_string(i);
      const int64_t rows = 1 + static_cast<int64_t>(rng() % 8);
      inputs[id] = client::Tensor{"INPUT__0", DataType::kFp32, {rows, 4, 20, 20},
                                  RandomTensorBytes(DataType::kFp32, rows * 4 * 20 * 20, rng)};
      ASSERT_TRUE(streams[s]->Send(client::InferenceClient::BuildRequest("policy_graph", {inputs[id]}, {.id = id})));
    }
  }
  for (auto& stream : streams) stream->CloseSend();

  const std::string model_path = repo.path() + "/policy_graph/1/model.pt";
  std::set<int64_t> served_on;
  std::set<std::string> answered;
  for (int s = 0; s < kStreams; ++s) {
    for (int i = 0; i < kPerStream; ++i) {
      std::optional<client::StreamAnswer> answer = streams[s]->Next(absl::Seconds(60));
      ASSERT_TRUE(answer.has_value()) << "stream " << s << ", response " << i;
      auto result = client::InferStream::Decode(answer->message);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_EQ(inputs.count(result->id), 1u) << "unknown id '" << result->id << "'";
      EXPECT_TRUE(answered.insert(result->id).second) << "answered twice: " << result->id;
      ASSERT_TRUE(result->timing.has_value());
      EXPECT_TRUE(result->timing->cuda_graph) << result->id << " ran from a captured graph";
      served_on.insert(result->timing->gpu);
      const auto want = testing::TorchReference(model_path, {inputs[result->id]});
      ASSERT_EQ(result->outputs.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(testing::ReferenceMismatch(result->outputs[k].data, want[k], 5e-3f), "")
            << result->id << " OUTPUT__" << k << " on GPU " << result->timing->gpu;
      }
    }
    const auto status = streams[s]->Finish(absl::Seconds(60));
    ASSERT_TRUE(status.has_value()) << "stream " << s << " ends after its half-close";
    EXPECT_TRUE(status->ok()) << status->error_message();
  }
  EXPECT_EQ(answered.size(), inputs.size());
  EXPECT_EQ(served_on, EveryGpu(gpus)) << "requests were served on every GPU";
}

// Keep-warm with one worker per GPU: each idle worker replays its own model (its graph, or the
// eager forward) on its own device, and none of the runs fails.
class MultiGpuKeepWarmTest : public ::testing::TestWithParam<bool> {};

TEST_P(MultiGpuKeepWarmTest, EveryGpusIdleWorkerReplaysItsOwnModel) {
  const int gpus = server::CudaDeviceCount();
  ASSERT_GE(gpus, 1);
  testing::TempDir repo("cs_multi_gpu_keep_warm");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = std::string(GetParam() ? "optimization { cuda { graphs: true } }\n" : "") +
                   "parameters { key: \"keep_warm_ms\" value { string_value: \"10\" } }\n";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  FakeClock clock;  // the workers' schedule
  std::vector<int> every_gpu;
  for (int g = 0; g < gpus; ++g) every_gpu.push_back(g);
  std::vector<testing::CountingInstance*> counters;
  auto runtime = testing::CountingRuntime(*spec, every_gpu, devices, &clock, &counters);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  for (int n = 1; n <= 3; ++n) {
    clock.AdvanceNs(10'000'000);
    (*runtime)->queue().Poke();
    for (int g = 0; g < gpus; ++g) ASSERT_EQ(counters[g]->WaitForRuns(n), n) << "GPU " << g << ", run " << n;
  }
  (*runtime)->Stop();
  for (int g = 0; g < gpus; ++g) {
    EXPECT_TRUE(counters[g]->last_error().ok()) << "GPU " << g << ": " << counters[g]->last_error();
    EXPECT_EQ((*runtime)->workers()[g]->instance().gpu(), g);
    EXPECT_EQ((*runtime)->workers()[g]->keep_warm_runs(), 3) << "GPU " << g;
  }
}

INSTANTIATE_TEST_SUITE_P(GraphAndEager, MultiGpuKeepWarmTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Graph" : "Eager"; });

}  // namespace
}  // namespace chronoserve
