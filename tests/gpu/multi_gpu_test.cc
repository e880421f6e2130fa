// instance_group over several GPUs: KIND_GPU without `gpus` puts `count` workers on every visible
// GPU; each worker's model is resident on its own device and requests are served by all of them.
// Skips (saying so) on a machine with fewer than two GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

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
  std::set<int> worker_gpus;
  for (const auto& w : (*model)->workers()) worker_gpus.insert(w->instance().gpu());
  std::set<int> all;
  for (int g = 0; g < gpus; ++g) all.insert(g);
  EXPECT_EQ(worker_gpus, all) << "one worker per visible GPU";

  absl::Mutex mu;
  std::set<int64_t> served_on;
  int wrong = 0, failed = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto client = client::InferenceClient::Connect("127.0.0.1:" + std::to_string(server->port()));
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 25; ++i) {
        client::Tensor input{"INPUT__0", DataType::kFp32, {4, 4, 20, 20},
                             RandomTensorBytes(DataType::kFp32, 4 * 4 * 20 * 20, rng)};
        auto r = client->Infer("policy_net", {input});
        absl::MutexLock lock(&mu);
        if (!r.ok()) {
          ++failed;
          continue;
        }
        served_on.insert(r->timing->gpu);
        if (i % 5 == 0) {
          const auto want = testing::TorchReference(repo.path() + "/policy_net/1/model.pt", {input});
          for (size_t k = 0; k < want[0].size(); ++k) {
            float got;
            std::memcpy(&got, r->outputs[0].data.data() + 4 * k, 4);
            if (std::fabs(got - want[0][k]) > 5e-3) {
              ++wrong;
              break;
            }
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0) << "outputs equal the CPU reference on every GPU";
  std::set<int64_t> all64(all.begin(), all.end());
  EXPECT_EQ(served_on, all64) << "requests were served on every GPU";
}

}  // namespace
}  // namespace chronoserve
