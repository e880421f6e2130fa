// The real server on the GPU(s): models resident on every visible GPU (KIND_AUTO), CUDA-event spans, pinned staging, one
// stream per worker, READY only after warm-up, outputs equal to a CPU LibTorch reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <set>

#include "client/inference_client.h"
#include "client/system_shared_memory.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "server/core/synthetic_request.h"
#include "server/scheduler/model_runtime.h"
#include "server/repository/model_config_loader.h"
#include "tests/fakes/recording_instance.h"
#include "tests/gpu/load_on_gpu.h"
#include "tests/server/shared_server_test.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

Tensor RandomInput(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor{"INPUT__0", DataType::kFp32, shape, RandomTensorBytes(DataType::kFp32, ElementCount(shape), rng)};
}

class GpuServerTest : public testing::SharedServerTest<GpuServerTest, 2> {
 public:
  static constexpr char kRepoName[] = "cs_gpu";
  static void WriteModels(const testing::TempDir& repo) {
    examples::ModelOptions policy;
    policy.max_batch_size = 128;
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", policy).ok());
    examples::ModelOptions mlp;
    mlp.max_batch_size = 32;
    mlp.instance_count = 2;
    ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  }
};

TEST_F(GpuServerTest, ModelsAreResidentOnTheGpu) {
  auto model = server_->registry().Find("policy_net", "");
  ASSERT_TRUE(model.ok());
  ASSERT_FALSE((*model)->workers().empty()) << "a served model has workers to check";
  for (const auto& w : (*model)->workers()) {
    EXPECT_GE(w->instance().gpu(), 0);
    EXPECT_LT(w->instance().gpu(), server::CudaDeviceCount());
    EXPECT_EQ(w->instance().device_name(), "cuda:" + std::to_string(w->instance().gpu()));
  }
}

TEST_F(GpuServerTest, OutputsMatchTheCpuReference) {
  const Tensor input = RandomInput({128, 4, 20, 20}, 31);
  auto result = client_->Infer("policy_net", {input});
  ASSERT_TRUE(result.ok()) << result.status();
  const auto want = testing::TorchReference(repo_->path() + "/policy_net/1/model.pt", {input});
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(result->outputs[k].data.size(), want[k].size() * 4);
    double max_err = 0;
    for (size_t i = 0; i < want[k].size(); ++i) {
      float got;
      std::memcpy(&got, result->outputs[k].data.data() + 4 * i, 4);
      const double err = std::fabs(got - want[k][i]);
      if (!(err <= max_err)) max_err = err;  // not std::max: it would drop a NaN
    }
    // cuDNN may use TF32 for convolutions: compare with a TF32-sized tolerance.
    EXPECT_LT(max_err, 5e-3) << "output " << k;
  }
}

TEST_F(GpuServerTest, SpansAreCudaEventTimedAndConsistent) {
  for (int batch : {1, 128}) {
    const Tensor input = RandomInput({batch, 4, 20, 20}, 40 + batch);
    for (int i = 0; i < 100; ++i) {
      auto result = client_->Infer("policy_net", {input});
      ASSERT_TRUE(result.ok()) << result.status();
      const RequestTiming& t = *result->timing;
      ASSERT_TRUE(t.device_timed) << "timing.clock = cuda_event";
      ASSERT_GE(t.gpu, 0);
      ASSERT_LT(t.gpu, server::CudaDeviceCount());
      ASSERT_GT(t.h2d_ns, 0);
      ASSERT_GT(t.compute_ns, 0);
      ASSERT_GT(t.d2h_ns, 0);
      ASSERT_GT(t.launch_ns, 0);
      ASSERT_TRUE(t.IsConsistent()) << "GPU spans fit inside server_total";
      ASSERT_LE(t.server_total_ns, result->e2e_ns);
      ASSERT_EQ(t.batch_size, batch);
    }
  }
}

TEST_F(GpuServerTest, EachWorkerOwnsAStreamAndBothServe) {
  std::set<int64_t> workers;
  const Tensor input = RandomInput({4, 64}, 50);
  std::vector<std::thread> threads;
  absl::Mutex mu;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));
      for (int i = 0; i < 50; ++i) {
        auto r = c->Infer("mlp", {input});
        ASSERT_TRUE(r.ok()) << r.status();
        absl::MutexLock lock(&mu);
        workers.insert(r->timing->worker);
      }
    });
  }
  for (auto& th : threads) th.join();
  // KIND_AUTO with count 2 puts two workers on every visible GPU.
  EXPECT_GE(workers.size(), 2u) << "more than one worker served";
  for (int64_t w : workers) EXPECT_LT(w, 2 * server::CudaDeviceCount());
}

// Shared memory on a GPU server: the regions are page-locked at registration, so a one-request
// batch copies straight between the client's region and the device. Outputs must be the bytes
// the message path returns, at offsets that are not page-aligned, with graphs off (eager).
TEST_F(GpuServerTest, PinnedSharedMemoryRegionsGoStraightToAndFromTheDevice) {
  const std::string tag = std::to_string(::getpid());
  auto in = client::SystemSharedMemory::Create("/cs_gpu_in_" + tag, 1 << 20);
  auto out = client::SystemSharedMemory::Create("/cs_gpu_out_" + tag, 2 << 20);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("gpu_in", (*in)->key(), (*in)->byte_size()).ok());
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("gpu_out", (*out)->key(), (*out)->byte_size()).ok());
  for (int batch : {1, 37, 128}) {
    const Tensor input = RandomInput({batch, 4, 20, 20}, 70 + batch);
    auto raw = client_->Infer("policy_net", {input});
    ASSERT_TRUE(raw.ok()) << raw.status();
    const size_t in_offset = 96;  // not page-aligned on purpose
    std::memcpy((*in)->data() + in_offset, input.data.data(), input.data.size());
    Tensor via_shm = input;
    via_shm.data.clear();
    via_shm.shared_memory = client::SharedMemoryRef{"gpu_in", input.data.size(), in_offset};
    client::InferOptions options;
    options.outputs = {"OUTPUT__0", "OUTPUT__1", "OUTPUT__2"};
    const std::vector<size_t> sizes = {400 * 4 * 128, 4 * 128, 400 * 4 * 128};  // room for batch 128
    const std::vector<size_t> offsets = {32, 32 + sizes[0] + 64, 32 + sizes[0] + 64 + sizes[1] + 96};
    for (int k = 0; k < 3; ++k) {
      options.output_shared_memory[options.outputs[k]] = client::SharedMemoryRef{"gpu_out", sizes[k], offsets[k]};
    }
    std::memset((*out)->data(), 0x5a, (*out)->byte_size());  // stale bytes must be overwritten
    auto shm = client_->Infer("policy_net", {via_shm}, options);
    ASSERT_TRUE(shm.ok()) << shm.status();
    ASSERT_TRUE(shm->timing.has_value());
    EXPECT_TRUE(shm->timing->IsConsistent());
    for (int k = 0; k < 3; ++k) {
      const std::string& want = raw->outputs[k].data;
      ASSERT_EQ(std::memcmp((*out)->data() + offsets[k], want.data(), want.size()), 0)
          << "batch " << batch << " output " << k << " differs between shared memory and the message";
    }
  }
  EXPECT_TRUE(client_->UnregisterSystemSharedMemory("").ok());
}

// The batch sizes MODEL_DIR's one worker on GPU 0 ran before its runtime was READY; BUCKETS (when not
// null) gets the worker's CUDA-graph buckets.
std::set<int64_t> SizesRunBeforeReady(const std::string& model_dir, std::vector<int>* buckets = nullptr) {
  auto spec = server::LoadModelDirectory(model_dir);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return {};
  server::DeviceActivityRegistry devices;  // outlives the runtime (declared first)
  auto real = testing::LoadOnGpu0(*spec, devices);
  if (real == nullptr) return {};
  if (buckets != nullptr) *buckets = real->graph_buckets();
  auto recording = std::make_unique<testing::RecordingInstance>(*spec, std::move(real));
  auto* recorder = recording.get();
  std::vector<std::unique_ptr<server::ModelInstance>> instances;
  instances.push_back(std::move(recording));
  auto runtime = server::ModelRuntime::Create(*spec, std::move(instances), server::WarmupOptions{}, SteadyClock::Get());
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  EXPECT_TRUE((*runtime)->ready());
  std::set<int64_t> sizes;
  for (int64_t s : recorder->sizes()) sizes.insert(s);
  return sizes;
}

TEST(GpuWarmupTest, ReadyOnlyAfterEveryBatchSizeRanOnTheGpu) {
  testing::TempDir repo("cs_gpu_warm");
  examples::ModelOptions o;
  o.max_batch_size = 16;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  EXPECT_EQ(SizesRunBeforeReady(repo.path() + "/mlp").size(), 16u) << "every batch size 1..16 ran on the GPU before READY";
}

// A worker that replays CUDA graphs warms up only what runs eagerly: its buckets (the captures run
// them too) and the sizes above the largest; `warmup_batch_sizes: "all"` warms every size.
TEST(GpuWarmupTest, AGraphWorkerWarmsItsBucketsAndWhatLiesAboveThem) {
  for (const char* parameter : {"", "parameters { key: \"warmup_batch_sizes\" value { string_value: \"all\" } }\n"}) {
    SCOPED_TRACE(*parameter == '\0' ? "default" : "all");
    testing::TempDir repo("cs_gpu_warm_graphs");
    examples::ModelOptions o;
    o.max_batch_size = 16;
    o.extra_config = std::string("optimization { cuda { graphs: true } }\n"
                                 "parameters { key: \"cuda_graph_batch_sizes\" value { string_value: \"1,2,4,8\" } }\n") +
                     parameter;
    ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
    std::vector<int> buckets;
    const std::set<int64_t> sizes = SizesRunBeforeReady(repo.path() + "/mlp", &buckets);
    EXPECT_EQ(buckets, (std::vector<int>{1, 2, 4, 8}));
    if (*parameter == '\0') {
      EXPECT_EQ(sizes, (std::set<int64_t>{1, 2, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
          << "the buckets, then every size past the largest (those run eagerly)";
    } else {
      EXPECT_EQ(sizes.size(), 16u);
    }
  }
}

// LibTorch's stream pool hands out 32 streams per GPU in turn, so a 33rd worker would share the
// first one's. Every worker makes a stream of its own: 34 workers of one model on one GPU (as
// instance_group count 34 loads them) run on 34 streams, the first and the last serve right, and
// the streams go with their workers (the next ones are made and serve as well).
TEST(GpuStreamTest, EveryWorkerOnAGpuHasAStreamOfItsOwn) {
  testing::TempDir repo("cs_gpu_streams");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_GPU";
  ASSERT_TRUE(examples::WriteScaleModel(repo.path(), "scale", DataType::kFp32, o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/scale");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  auto load = [&](int worker) {
    server::InstanceOptions options;
    options.worker = worker;
    return testing::LoadOnGpu0(*spec, devices, options);
  };
  // A batch of 3 one-item requests: OUTPUT__0 must be exactly INPUT__0 * 2.
  auto serves_right = [&](server::ModelInstance& instance) -> std::string {
    std::mt19937_64 rng(61);
    std::deque<std::vector<std::string>> outputs;
    server::Batch batch;
    for (int i = 0; i < 3; ++i) {
      outputs.emplace_back();
      batch.push_back(server::MakeSyntheticRequest(*spec, 1, &outputs.back(), rng));
    }
    server::BatchTiming timing;
    if (absl::Status status = instance.Execute(batch, &timing); !status.ok()) return status.ToString();
    for (size_t r = 0; r < batch.size(); ++r) {
      const server::InputTensor& in = batch[r]->inputs[0];
      if (outputs[r].size() != 1 || outputs[r][0].size() != in.byte_size) return "output size";
      for (size_t k = 0; k < in.byte_size; k += 4) {
        float x, y;
        std::memcpy(&x, in.data + k, 4);
        std::memcpy(&y, outputs[r][0].data() + k, 4);
        if (y != x * 2.0f) return "request " + std::to_string(r) + ": not its input times 2";
      }
    }
    return {};
  };
  constexpr int kWorkers = 34;
  std::vector<std::unique_ptr<server::ModelInstance>> workers;
  std::set<const void*> streams;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(load(w));
    ASSERT_NE(workers.back(), nullptr);
    ASSERT_NE(workers.back()->native_stream(), nullptr);
    streams.insert(workers.back()->native_stream());
  }
  EXPECT_EQ(streams.size(), static_cast<size_t>(kWorkers)) << "no two workers share a stream";
  EXPECT_EQ(serves_right(*workers.front()), "");
  EXPECT_EQ(serves_right(*workers.back()), "");
  workers.clear();
  for (int w = 0; w < 2; ++w) {
    auto again = load(w);
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(serves_right(*again), "") << "a worker made after the others went, " << w;
  }
}

// forward() must return its outputs on the model's device: one that returns a CPU tensor on a GPU
// fails its load at warm-up, naming the model, output and both devices.
TEST(GpuOutputCheckTest, AnOutputOnTheWrongDeviceFailsTheLoadNamingIt) {
  testing::TempDir repo("cs_gpu_wrong_device");
  repo.WriteFile("to_cpu/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\ninstance_group { kind: KIND_GPU }\n");
  std::filesystem::create_directories(repo.path() + "/to_cpu/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/to_cpu/1/model.pt",
                                          "def forward(self, x):\n  return (x * 2.0).cpu()\n"));
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(testing::Answer(c->ModelReady("to_cpu")), "false");
  std::mt19937_64 rng(41);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 8}, RandomTensorBytes(DataType::kFp32, 8, rng)};
  auto r = c->Infer("to_cpu", {input});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("model 'to_cpu' worker 0 on cuda:0: output 'OUTPUT__0': produced on cpu, the "
                                  "model runs on cuda:0"));
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
