// Model control on a real GPU (--model-control-mode explicit): reloads of a CUDA-graph model while
// clients keep sending (the new version captures its graphs on its own workers' streams while the
// old version replays its own), every answer matching the reference taken before, each replaced
// version freed, then an unload and a load that serves the same outputs again; two versions of a
// CUDA-graph model served at once, each with its own weights; and the start's CUDA-graph models
// loaded at once (--model-load-thread-count), each capturing its graphs beside the others.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "server/scheduler/model_runtime.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/start_barrier.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::Tensor;

Tensor PolicyRows(int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor{"INPUT__0", DataType::kFp32, {rows, 4, 20, 20}, RandomTensorBytes(DataType::kFp32, rows * 4 * 20 * 20, rng)};
}

// Largest |a - b| over every output element (HUGE_VAL when the outputs differ in count or size).
double MaxError(const client::InferResult& a, const client::InferResult& b) {
  if (a.outputs.size() != b.outputs.size()) return HUGE_VAL;
  double worst = 0;
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    const std::string& x = a.outputs[k].data;
    const std::string& y = b.outputs[k].data;
    if (x.size() != y.size()) return HUGE_VAL;
    for (size_t i = 0; i + 4 <= x.size(); i += 4) {
      float p, q;
      std::memcpy(&p, x.data() + i, 4);
      std::memcpy(&q, y.data() + i, 4);
      const double d = std::fabs(p - q);
      if (!(d <= worst)) worst = d;  // not std::max: it would drop a NaN
    }
  }
  return worst;
}

TEST(GpuModelControlTest, ReloadsWhileServingKeepTheOutputsAndFreeTheOldVersion) {
  if (server::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU";
  testing::TempDir repo("cs_gpu_control");
  examples::ModelOptions o;
  o.max_batch_size = 16;
  o.instance_count = 2;
  o.instance_kind = "KIND_GPU";
  o.extra_config = "optimization { cuda { graphs: true } }\n";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.load_models = {"policy"};
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);

  constexpr int kClients = 4;
  std::vector<Tensor> inputs;
  std::vector<client::InferResult> references;
  for (int t = 0; t < kClients; ++t) {
    inputs.push_back(PolicyRows(1 + t, 40 + t));
    auto reference = c->Infer("policy", {inputs.back()});
    ASSERT_TRUE(reference.ok()) << reference.status();
    references.push_back(*std::move(reference));
  }
  std::weak_ptr<server::ModelRuntime> first;
  {
    auto loaded = server->registry().Find("policy", "");
    ASSERT_TRUE(loaded.ok());
    first = *loaded;
  }

  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::atomic<int> failed{0};
  std::atomic<int> mismatched{0};
  absl::Mutex mu;
  std::string first_problem;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto own = testing::ConnectTestClient(address);
      while (!stop.load()) {
        auto r = own->Infer("policy", {inputs[t]});
        sent.fetch_add(1);
        std::string problem;
        if (!r.ok()) {
          failed.fetch_add(1);
          problem = r.status().ToString();
        } else if (const double error = MaxError(*r, references[t]); !(error <= 1e-3)) {
          mismatched.fetch_add(1);
          problem = "output off by " + std::to_string(error);
        }
        if (!problem.empty()) {
          absl::MutexLock lock(&mu);
          if (first_problem.empty()) first_problem = problem;
        }
      }
    });
  }
  constexpr int kReloads = 5;
  for (int reload = 0; reload < kReloads; ++reload) {
    const int floor = sent.load() + 16;  // requests in flight across every swap
    const absl::Time wait_until = absl::Now() + absl::Seconds(60);
    while (sent.load() < floor && failed.load() == 0 && absl::Now() < wait_until) std::this_thread::yield();
    if (sent.load() < floor && failed.load() == 0) {
      ADD_FAILURE() << "the clients sent no 16 requests more within 60 s (reload " << reload << ")";
      break;  // the clients are still stopped and joined below
    }
    const grpc::Status reloaded = testing::LoadModel(c->stub(), "policy");
    EXPECT_TRUE(reloaded.ok()) << reloaded.error_message();
  }
  stop = true;
  for (auto& thread : clients) thread.join();
  EXPECT_GE(sent.load(), 16 * kReloads);
  EXPECT_EQ(failed.load(), 0) << "of " << sent.load() << "; first: " << first_problem;
  EXPECT_EQ(mismatched.load(), 0) << "of " << sent.load() << "; first: " << first_problem;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!first.expired() && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(first.expired()) << "a replaced version (its GPU memory) is freed, not leaked";

  const grpc::Status unloaded = testing::UnloadModel(c->stub(), "policy");
  ASSERT_TRUE(unloaded.ok()) << unloaded.error_message();
  EXPECT_EQ(testing::Answer(c->ModelReady("policy")), "false");
  const grpc::Status loaded = testing::LoadModel(c->stub(), "policy");
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  auto again = c->Infer("policy", {inputs[0]});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_LE(MaxError(*again, references[0]), 1e-3);
  server->Shutdown();
}

// Two versions of a CUDA-graph model served at once on one GPU (version_policy all): each version's
// workers capture and replay their own graphs with their own weights, so each answers as a model of
// that version's weights alone does, and a request naming no version gets the highest.
TEST(GpuModelControlTest, TwoVersionsOnOneGpuEachAnswerWithTheirOwnWeights) {
  if (server::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU";
  testing::TempDir repo("cs_gpu_versions");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.instance_kind = "KIND_GPU";
  o.extra_config = "optimization { cuda { graphs: true } }\n";
  o.seed = 51;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "ref1", o).ok());
  o.seed = 52;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "ref2", o).ok());
  o.seed = 51;
  o.extra_config += "version_policy { all { } }\n";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  ASSERT_TRUE(testing::CopyModelVersion(repo.path(), "ref2", 1, "policy", 2));
  auto server = testing::StartServer(testing::TestServerOptions(repo.path()));
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  for (int rows : {1, 3, 8}) {
    const Tensor input = PolicyRows(rows, 60 + rows);
    std::vector<client::InferResult> by_version;
    for (const std::string version : {"1", "2"}) {
      client::InferOptions options;
      options.version = version;
      auto served = c->Infer("policy", {input}, options);
      ASSERT_TRUE(served.ok()) << served.status();
      auto reference = c->Infer("ref" + version, {input});
      ASSERT_TRUE(reference.ok()) << reference.status();
      EXPECT_LE(MaxError(*served, *reference), 1e-5) << "version " << version << ", " << rows << " rows";
      by_version.push_back(*std::move(served));
    }
    EXPECT_GT(MaxError(by_version[0], by_version[1]), 1e-3) << "the versions have other weights";
    auto unnamed = c->Infer("policy", {input});
    ASSERT_TRUE(unnamed.ok()) << unnamed.status();
    EXPECT_LE(MaxError(*unnamed, by_version[1]), 1e-5) << "no version named: the highest";
  }
  auto versions = server->registry().FindVersions("policy", "");
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_EQ(versions->size(), 2u);
  for (const auto& runtime : *versions) {
    for (const auto& worker : runtime->workers()) {
      EXPECT_EQ(worker->instance().device_name(), "cuda:0");
      EXPECT_FALSE(worker->instance().graph_buckets().empty()) << "version " << runtime->spec().version;
    }
  }
  server->Shutdown();
}

// The start loads four CUDA-graph models on one GPU at once (each load waits, as it starts, until
// all four have started): their workers warm up and capture their graphs side by side (thread-local
// capture: one thread's capture is not broken by another's allocations), and each model then
// answers every bucket as LibTorch computes its own file's outputs on the CPU.
TEST(GpuStartTest, GraphModelsLoadedAtOnceEachCaptureAndAnswerWithTheirOwnWeights) {
  if (server::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU";
  testing::TempDir repo("cs_gpu_parallel_start");
  const std::vector<std::string> names = {"p1", "p2", "p3", "p4"};
  for (size_t i = 0; i < names.size(); ++i) {
    examples::ModelOptions o;
    o.max_batch_size = 8;
    o.instance_kind = "KIND_GPU";
    o.extra_config = "optimization { cuda { graphs: true } }\n";
    o.seed = 71 + i;
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), names[i], o).ok());
  }
  testing::StartBarrier barrier(4);
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_load_threads = 4;
  options.start_load_started = barrier.Hook();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(barrier.alone(), ::testing::IsEmpty()) << "loads that never saw the other three start";
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  for (const std::string& name : names) {
    auto runtime = server->registry().Find(name, "");
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    for (const auto& worker : (*runtime)->workers()) {
      EXPECT_EQ(worker->instance().device_name(), "cuda:0");
      EXPECT_FALSE(worker->instance().graph_buckets().empty()) << name << " captured no graph";
    }
    for (int rows : {1, 3, 8}) {
      const Tensor input = PolicyRows(rows, 80 + rows);
      auto served = c->Infer(name, {input});
      ASSERT_TRUE(served.ok()) << name << ": " << served.status();
      // cuDNN may use TF32 for convolutions: a TF32-sized tolerance.
      EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/" + name + "/1/model.pt", {input}, served->outputs, 5e-3f), "")
          << name << ", " << rows << " rows";
    }
  }
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
