// Batch pipelining on a real GPU: an instance with pipeline_depth 2 (the GPU default) launches
// batch i+1 (its H2D on the copy stream, beside batch i's forward) before it finishes batch i,
// alternating its two slots, exactly as a busy worker does. Every request's outputs must equal
// those of an instance of the same model that runs one batch at a time (pipeline_depth 1), for
// eager and CUDA-graph forwards, at varying batch sizes (graph padding included), and every span
// stays event-timed and non-negative. Then a served check: many clients at once, each answered
// with its own rows, their inputs read from the page-locked input arena. And both again with
// --request-timing off, where no span event marks the end of an overlapped batch's copies and the
// path's own `copied` event orders the forward after them: outputs exactly the CPU reference's.
// Also LaunchedDone, the question a pipelined worker asks of its batch in flight before it takes
// the next: answered without waiting, and without an error left behind for the next launch.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <thread>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/batch_pipeline.h"
#include "server/backend/device_activity.h"
#include "server/backend/torch_backend.h"
#include "server/core/arena_store.h"
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"
#include "tests/gpu/doubler_model.h"
#include "tests/gpu/load_on_gpu.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

constexpr int kMaxBatch = 16;

// One batch of `items` one-item requests with random inputs from `seed`, and its result slots.
struct Job {
  std::deque<std::vector<std::string>> outputs;  // per request, stable addresses
  server::Batch batch;
  server::BatchTiming timing;
};

std::unique_ptr<Job> MakeJob(const server::ModelSpec& spec, int items, uint64_t seed) {
  auto job = std::make_unique<Job>();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < items; ++i) {
    job->outputs.emplace_back();
    job->batch.push_back(server::MakeSyntheticRequest(spec, 1, &job->outputs.back(), rng));
  }
  return job;
}

// Largest |a - b| over two FP32 byte strings; infinity when their sizes differ.
double MaxError(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return HUGE_VAL;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i += 4) {
    float x, y;
    std::memcpy(&x, a.data() + i, 4);
    std::memcpy(&y, b.data() + i, 4);
    const double d = std::fabs(x - y);
    if (!(d <= worst)) worst = d;  // not std::max: it would drop a NaN
  }
  return worst;
}

class PipelineInstanceTest : public ::testing::TestWithParam<bool> {
 protected:
  // Loads the policy net (graphs on when the test's parameter says so) with `depth`, warmed at
  // every batch size and prepared for serving, as a worker does before READY.
  std::unique_ptr<server::ModelInstance> Load(const std::string& dir, const std::string& depth) {
    auto spec = server::LoadModelDirectory(dir);
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return nullptr;
    spec->parameters[server::kPipelineDepthKey] = depth;
    spec_ = *spec;
    server::InstanceOptions options;
    options.gpu = 0;
    options.activity = devices_.Get(0, SteadyClock::Now());
    auto instance = server::CreateTorchInstance(*spec, options);
    EXPECT_TRUE(instance.ok()) << instance.status();
    if (!instance.ok()) return nullptr;
    for (int items = 1; items <= kMaxBatch; ++items) {
      auto job = MakeJob(*spec, items, 1000 + items);
      EXPECT_TRUE((*instance)->Execute(job->batch, &job->timing).ok());
    }
    EXPECT_TRUE((*instance)->PrepareForServing().ok());
    return *std::move(instance);
  }

  // The policy net (graphs as the test's parameter says) written into `repo`, loaded twice: into
  // piped_ (pipeline_depth 2) and serial_ (1).
  void LoadPipedAndSerial(const testing::TempDir& repo) {
    examples::ModelOptions o;
    o.max_batch_size = kMaxBatch;
    if (GetParam()) o.extra_config = "optimization { cuda { graphs: true } }\n";
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
    piped_ = Load(repo.path() + "/policy", "2");
    serial_ = Load(repo.path() + "/policy", "1");
    ASSERT_NE(piped_, nullptr);
    ASSERT_NE(serial_, nullptr);
    ASSERT_EQ(piped_->pipeline_depth(), 2);
    ASSERT_EQ(serial_->pipeline_depth(), 1);
  }

  server::DeviceActivityRegistry devices_;
  server::ModelSpec spec_;
  std::unique_ptr<server::ModelInstance> piped_;
  std::unique_ptr<server::ModelInstance> serial_;
};

TEST_P(PipelineInstanceTest, PipelinedBatchesEqualOneAtATime) {
  const bool graphs = GetParam();
  testing::TempDir repo("cs_gpu_pipeline");
  ASSERT_NO_FATAL_FAILURE(LoadPipedAndSerial(repo));
  server::ModelInstance* piped = piped_.get();
  server::ModelInstance* serial = serial_.get();

  const int sizes[] = {16, 1, 7, 16, 3, 12, 5, 16, 2, 9, 16, 16, 4, 11};
  std::vector<std::unique_ptr<Job>> jobs;
  for (int round = 0; round < 3; ++round) {
    for (int items : sizes) jobs.push_back(MakeJob(spec_, items, 17 * jobs.size() + 5));
  }
  // The busy worker's order: launch i, then finish i - 1 (its slot is free again for i + 1).
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i]->timing.dequeued_ns = SteadyClock::Now();
    ASSERT_TRUE(piped->Launch(jobs[i]->batch, &jobs[i]->timing, static_cast<int>(i % 2)).ok()) << "batch " << i;
    if (i > 0) {
      ASSERT_TRUE(piped->Finish(jobs[i - 1]->batch, &jobs[i - 1]->timing, static_cast<int>((i - 1) % 2)).ok())
          << "batch " << i - 1;
    }
  }
  ASSERT_TRUE(piped->Finish(jobs.back()->batch, &jobs.back()->timing, static_cast<int>((jobs.size() - 1) % 2)).ok());

  for (size_t i = 0; i < jobs.size(); ++i) {
    auto reference = MakeJob(spec_, static_cast<int>(jobs[i]->batch.size()), 17 * i + 5);  // same inputs
    ASSERT_TRUE(serial->Execute(reference->batch, &reference->timing).ok());
    // One at a time, the copies on the worker's stream: eager, or a graph batch that fills its
    // bucket (powers of two), enqueues nothing between its copies and its forward, so compute starts
    // where h2d ended (one event stands for both); a padded graph batch zeroes its pad rows between.
    const server::BatchTiming& one = reference->timing;
    const int64_t n = one.batch_size;
    if (!graphs || (n & (n - 1)) == 0) {
      EXPECT_NEAR(one.h2d_end_to_done_ns, one.compute_ns + one.d2h_ns, 3000) << "batch " << i << ", " << n << " items";
    } else {
      EXPECT_GE(one.h2d_end_to_done_ns + 3000, one.compute_ns + one.d2h_ns) << "batch " << i << ", " << n << " items";
    }
    const server::BatchTiming& t = jobs[i]->timing;
    EXPECT_TRUE(t.device_timed);
    EXPECT_EQ(t.batch_size, static_cast<int64_t>(jobs[i]->batch.size()));
    EXPECT_EQ(t.cuda_graph, graphs) << "every size up to max_batch_size has a bucket";
    EXPECT_GE(t.h2d_ns, 0);
    EXPECT_GT(t.compute_ns, 0);
    EXPECT_GE(t.d2h_ns, 0);
    EXPECT_GE(t.gpu_done_ns, t.staged_ns);
    for (size_t r = 0; r < jobs[i]->outputs.size(); ++r) {
      ASSERT_EQ(jobs[i]->outputs[r].size(), 3u);
      for (int k = 0; k < 3; ++k) {
        EXPECT_LE(MaxError(jobs[i]->outputs[r][k], reference->outputs[r][k]), 1e-4)
            << "batch " << i << " (" << jobs[i]->batch.size() << " items), request " << r << ", output " << k;
      }
    }
  }
}

// LaunchedDone asks the slot's last event without waiting: false while the device is still busy
// ahead of the batch (matrix products queued on the instance's own stream first, a few hundred ms),
// true once the batch is done, false for a slot with nothing in flight. Its "not ready" leaves no
// error behind: the next launch (LibTorch checks the thread's last CUDA error after its kernels)
// still succeeds, and both batches' outputs equal one-at-a-time runs of the same inputs.
TEST_P(PipelineInstanceTest, LaunchedDoneAnswersWithoutWaiting) {
  testing::TempDir repo("cs_gpu_pipeline_done");
  ASSERT_NO_FATAL_FAILURE(LoadPipedAndSerial(repo));
  server::ModelInstance* piped = piped_.get();
  server::ModelInstance* serial = serial_.get();
  EXPECT_FALSE(piped->LaunchedDone(0)) << "nothing launched";
  auto a = MakeJob(spec_, kMaxBatch, 41);
  auto b = MakeJob(spec_, 5, 43);
  {
    auto* raw = static_cast<cudaStream_t>(const_cast<void*>(piped->native_stream()));
    c10::cuda::CUDAStreamGuard on_stream(c10::cuda::getStreamFromExternal(raw, 0));
    torch::Tensor m = torch::rand({4096, 4096}, torch::TensorOptions().device(torch::kCUDA, 0)) / 4096;
    for (int i = 0; i < 100; ++i) m = torch::mm(m, m);  // about 2 ms each on an H100 or H200
  }
  a->timing.dequeued_ns = SteadyClock::Now();
  ASSERT_TRUE(piped->Launch(a->batch, &a->timing, 0).ok());
  EXPECT_FALSE(piped->LaunchedDone(0)) << "the products ahead of the batch were still running";
  EXPECT_FALSE(piped->LaunchedDone(1)) << "nothing launched into slot 1";
  b->timing.dequeued_ns = SteadyClock::Now();
  absl::Status launched = piped->Launch(b->batch, &b->timing, 1);
  ASSERT_TRUE(launched.ok()) << "a launch after a not-ready answer: " << launched;
  const auto done_within = [&](int slot) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!piped->LaunchedDone(slot)) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::yield();
    }
    return true;
  };
  ASSERT_TRUE(done_within(0)) << "slot 0's batch never read as done";
  ASSERT_TRUE(piped->Finish(a->batch, &a->timing, 0).ok());
  EXPECT_FALSE(piped->LaunchedDone(0)) << "finished: nothing in flight";
  ASSERT_TRUE(done_within(1)) << "slot 1's batch never read as done";
  ASSERT_TRUE(piped->Finish(b->batch, &b->timing, 1).ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  for (const auto& [job, seed] : {std::pair{a.get(), 41}, std::pair{b.get(), 43}}) {
    auto reference = MakeJob(spec_, static_cast<int>(job->batch.size()), seed);  // same inputs
    ASSERT_TRUE(serial->Execute(reference->batch, &reference->timing).ok());
    EXPECT_GT(job->timing.compute_ns, 0);
    for (size_t r = 0; r < job->outputs.size(); ++r) {
      ASSERT_EQ(job->outputs[r].size(), 3u);
      for (int k = 0; k < 3; ++k) {
        EXPECT_LE(MaxError(job->outputs[r][k], reference->outputs[r][k]), 1e-4)
            << job->batch.size() << " items, request " << r << ", output " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EagerAndGraphs, PipelineInstanceTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Graphs" : "Eager"; });

// Served: 8 clients at once on one pipelined worker, every answer its own rows (CPU reference).
TEST(PipelineServerTest, ConcurrentClientsEachGetTheirOwnRows) {
  testing::TempDir repo("cs_gpu_pipeline_served");
  examples::ModelOptions o;
  o.max_batch_size = kMaxBatch;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  auto server = testing::StartServer(repo.path(), 1);
  ASSERT_NE(server, nullptr);
  // The receiving threads copy inputs into the model's input arena: page-locked on a GPU, so a
  // batch's one copy per input reads it where it lies.
  auto runtime = server->registry().Find("policy", "");
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_NE((*runtime)->input_arena(), nullptr);
  EXPECT_TRUE((*runtime)->input_arena()->pinned());
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  constexpr int kClients = 8;
  constexpr int kRequests = 40;
  std::vector<std::string> failures(kClients);
  std::vector<int> batched(kClients, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = testing::ConnectTestClient(address);
      std::mt19937_64 rng(900 + c);
      for (int i = 0; i < kRequests && failures[c].empty(); ++i) {
        const int rows = 1 + (c + i) % 3;
        client::Tensor input{"INPUT__0", DataType::kFp32, {rows, 4, 20, 20},
                             RandomTensorBytes(DataType::kFp32, rows * 1600, rng)};
        auto result = client->Infer("policy", {input});
        if (!result.ok()) {
          failures[c] = std::string(result.status().message());
          break;
        }
        if (result->timing && result->timing->batch_size > rows) ++batched[c];
        if (i % 8 != 0) continue;  // the CPU reference is slow: check every 8th answer
        const auto want = testing::TorchReference(repo.path() + "/policy/1/model.pt", {input});
        for (size_t k = 0; k < want.size(); ++k) {
          std::vector<float> got(result->outputs[k].data.size() / 4);
          std::memcpy(got.data(), result->outputs[k].data.data(), got.size() * 4);
          if (got.size() != want[k].size()) {
            failures[c] = "output size";
            break;
          }
          for (size_t j = 0; j < got.size(); ++j) {
            if (!(std::fabs(got[j] - want[k][j]) <= 5e-3f)) {  // cuDNN may use TF32 (as GpuServerTest)
              failures[c] = "client " + std::to_string(c) + " request " + std::to_string(i) + " output " +
                            std::to_string(k) + " differs from the CPU reference";
              break;
            }
          }
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  int total_batched = 0;
  for (int n : batched) total_batched += n;
  std::printf("pipelined worker: %d of %d answers came from batches of several requests\n", total_batched,
              kClients * kRequests);
  testing::BackgroundShutdown stopper(server, absl::Seconds(30));
  ASSERT_TRUE(stopper.WaitDone(absl::Seconds(30))) << "Shutdown did not return within 30 s";
  EXPECT_EQ((*runtime)->input_arena()->live_regions(), 0u) << "every request gave its arena regions back";
}

// The doubler (doubler_model.h) at up to kMaxBatch rows.
std::string WriteDoubler(const testing::TempDir& repo, bool graphs) {
  return testing::WriteDoubler(repo, graphs, kMaxBatch);
}

// In process, with request timing off: batch i+1 is launched (its copies on the copy stream) before
// batch i is finished, at varying sizes (graph padding included); every request's output is the CPU
// reference's, exactly.
class PipelineTimingOffTest : public ::testing::TestWithParam<bool> {};

TEST_P(PipelineTimingOffTest, OverlappedBatchesEqualTheCpuReferenceExactly) {
  const bool graphs = GetParam();
  testing::TempDir repo("cs_gpu_pipeline_timing_off");
  const std::string dir = WriteDoubler(repo, graphs);
  auto spec = server::LoadModelDirectory(dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  server::InstanceOptions options;
  options.request_timing = false;
  std::unique_ptr<server::ModelInstance> instance = testing::LoadOnGpu0(*spec, devices, options);
  ASSERT_NE(instance, nullptr);
  ASSERT_EQ(instance->pipeline_depth(), 2);
  for (int items = 1; items <= kMaxBatch; ++items) {
    auto job = MakeJob(*spec, items, 2000 + items);
    ASSERT_TRUE(instance->Execute(job->batch, &job->timing).ok()) << "warm-up, " << items;
  }
  ASSERT_TRUE(instance->PrepareForServing().ok());

  const int sizes[] = {16, 1, 7, 16, 3, 12, 5, 16, 2, 9, 16, 16, 4, 11};
  std::vector<std::unique_ptr<Job>> jobs;
  for (int round = 0; round < 3; ++round) {
    for (int items : sizes) jobs.push_back(MakeJob(*spec, items, 31 * jobs.size() + 7));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(instance->Launch(jobs[i]->batch, &jobs[i]->timing, static_cast<int>(i % 2)).ok()) << "batch " << i;
    if (i > 0) {
      ASSERT_TRUE(instance->Finish(jobs[i - 1]->batch, &jobs[i - 1]->timing, static_cast<int>((i - 1) % 2)).ok())
          << "batch " << i - 1;
    }
  }
  ASSERT_TRUE(
      instance->Finish(jobs.back()->batch, &jobs.back()->timing, static_cast<int>((jobs.size() - 1) % 2)).ok());

  const std::string model_path = dir + "/1/model.pt";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const server::BatchTiming& t = jobs[i]->timing;
    EXPECT_FALSE(t.request_timing);
    EXPECT_EQ(t.cuda_graph, graphs) << "every size up to max_batch_size has a bucket";
    for (size_t r = 0; r < jobs[i]->outputs.size(); ++r) {
      const server::InputTensor& in = jobs[i]->batch[r]->inputs[0];
      const auto want = testing::TorchReference(
          model_path, {client::Tensor{"INPUT__0", DataType::kFp32, in.shape, std::string(in.data, in.byte_size)}});
      ASSERT_EQ(want.size(), 1u);
      ASSERT_EQ(jobs[i]->outputs[r].size(), 1u);
      EXPECT_EQ(testing::ReferenceMismatch(jobs[i]->outputs[r][0], want[0], 0.0f), "")
          << "batch " << i << " (" << jobs[i]->batch.size() << " items), request " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EagerAndGraphs, PipelineTimingOffTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Graphs" : "Eager"; });

// A launch that fails while the other slot's batch is in flight (the model raises for 3 rows, on the
// host, after that batch's inputs went to the device): the failed slot is freed, the batch ahead
// still finishes with its own outputs, and both slots launch and finish again afterwards, eager and
// with timing on or off. Every output is checked against the CPU reference exactly (x * 2).
class PipelineFailedLaunchTest : public ::testing::TestWithParam<bool> {};

TEST_P(PipelineFailedLaunchTest, TheBatchAheadFinishesAndBothSlotsServeAgain) {
  testing::TempDir repo("cs_gpu_pipeline_failed_launch");
  const std::string dir = WriteDoubler(repo, /*graphs=*/false);  // its config; the model replaced below
  const std::string model_path = dir + "/1/model.pt";
  ASSERT_TRUE(testing::WriteScriptedModel(model_path,
                                          "def forward(self, x):\n"
                                          "  assert x.size(0) != 3, 'three rows are refused'\n"
                                          "  return x * 2.0\n"));
  auto spec = server::LoadModelDirectory(dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  server::InstanceOptions options;
  options.request_timing = GetParam();
  std::unique_ptr<server::ModelInstance> instance = testing::LoadOnGpu0(*spec, devices, options);
  ASSERT_NE(instance, nullptr);
  ASSERT_EQ(instance->pipeline_depth(), 2);
  for (int items : {1, 2, 5, 16}) {
    auto job = MakeJob(*spec, items, 3000 + items);
    ASSERT_TRUE(instance->Execute(job->batch, &job->timing).ok()) << "warm-up, " << items;
  }
  ASSERT_TRUE(instance->PrepareForServing().ok());

  auto expect_doubled = [&](const Job& job, const std::string& what) {
    for (size_t r = 0; r < job.outputs.size(); ++r) {
      const server::InputTensor& in = job.batch[r]->inputs[0];
      const auto want = testing::TorchReference(
          model_path, {client::Tensor{"INPUT__0", DataType::kFp32, in.shape, std::string(in.data, in.byte_size)}});
      ASSERT_EQ(want.size(), 1u);
      ASSERT_EQ(job.outputs[r].size(), 1u) << what;
      EXPECT_EQ(testing::ReferenceMismatch(job.outputs[r][0], want[0], 0.0f), "") << what << ", request " << r;
    }
  };
  auto ahead = MakeJob(*spec, 16, 41);
  auto refused = MakeJob(*spec, 3, 42);
  ASSERT_TRUE(instance->Launch(ahead->batch, &ahead->timing, 0).ok());
  const absl::Status failed = instance->Launch(refused->batch, &refused->timing, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.message()), ::testing::HasSubstr("three rows are refused"));
  EXPECT_FALSE(instance->LaunchedDone(1)) << "the failed slot holds nothing in flight";
  const absl::Status finished = instance->Finish(ahead->batch, &ahead->timing, 0);
  ASSERT_TRUE(finished.ok()) << finished;
  ASSERT_NO_FATAL_FAILURE(expect_doubled(*ahead, "the batch ahead of the failed launch"));

  // Both slots again, overlapped: slot 1 first this time, then slot 0 behind it.
  auto next = MakeJob(*spec, 5, 43);
  auto behind = MakeJob(*spec, 16, 44);
  ASSERT_TRUE(instance->Launch(next->batch, &next->timing, 1).ok());
  ASSERT_TRUE(instance->Launch(behind->batch, &behind->timing, 0).ok());
  ASSERT_TRUE(instance->Finish(next->batch, &next->timing, 1).ok());
  ASSERT_TRUE(instance->Finish(behind->batch, &behind->timing, 0).ok());
  ASSERT_NO_FATAL_FAILURE(expect_doubled(*next, "slot 1 after its failed launch"));
  ASSERT_NO_FATAL_FAILURE(expect_doubled(*behind, "slot 0 after the failed launch"));
}

INSTANTIATE_TEST_SUITE_P(TimingOnAndOff, PipelineFailedLaunchTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "TimingOn" : "TimingOff"; });

// Six clients at once on one pipelined worker serving the doubler with CUDA graphs, 30 requests
// each of 1-3 rows; every answer must be exactly the CPU reference's for its own rows.
// Shuts the server down.
void ExpectConcurrentClientsGetExactlyTheCpuReference(server::Server& server, const std::string& dir) {
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  constexpr int kClients = 6;
  constexpr int kRequests = 30;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = testing::ConnectTestClient(address);
      std::mt19937_64 rng(700 + c);
      for (int i = 0; i < kRequests && failures[c].empty(); ++i) {
        const int rows = 1 + (c + i) % 3;
        client::Tensor input{"INPUT__0", DataType::kFp32, {rows, 1024},
                             RandomTensorBytes(DataType::kFp32, rows * 1024, rng)};
        auto result = client->Infer("doubler_graphs", {input});
        if (!result.ok()) {
          failures[c] = std::string(result.status().message());
          break;
        }
        const auto want = testing::TorchReference(dir + "/1/model.pt", {input});
        const std::string mismatch = result->outputs.size() != 1
                                         ? "output count"
                                         : testing::ReferenceMismatch(result->outputs[0].data, want[0], 0.0f);
        if (!mismatch.empty()) failures[c] = "request " + std::to_string(i) + ": " + mismatch;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  server.Shutdown();
}

// Served with --request-timing off.
TEST(PipelineServerTest, TimingOffConcurrentClientsGetExactlyTheCpuReference) {
  testing::TempDir repo("cs_gpu_pipeline_timing_off_served");
  const std::string dir = WriteDoubler(repo, /*graphs=*/true);
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.request_timing = false;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  ExpectConcurrentClientsGetExactlyTheCpuReference(*server, dir);
}

// --input-arena-store other than cached: the receiving threads write the page-locked arena with
// non-temporal stores (streaming; adaptive's first write after an idle spell, so at least the
// first) or flush it after the write (evicted); the device must read every byte as written.
class ArenaStoreGpuTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ArenaStoreGpuTest, PageLockedArenaWrittenThisWayGivesExactlyTheCpuReference) {
  testing::TempDir repo("cs_gpu_arena_store");
  const std::string dir = WriteDoubler(repo, /*graphs=*/true);
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  server::ArenaStore store = server::ArenaStore::kCached;
  ASSERT_TRUE(server::ParseArenaStore(GetParam(), &store));
  options.input_arena_store = store;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto runtime = server->registry().Find("doubler_graphs", "");
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_NE((*runtime)->input_arena(), nullptr);
  EXPECT_TRUE((*runtime)->input_arena()->pinned());
  EXPECT_EQ((*runtime)->arena_store(), store);
  ExpectConcurrentClientsGetExactlyTheCpuReference(*server, dir);
  EXPECT_EQ((*runtime)->input_arena()->live_regions(), 0u) << "every request gave its arena regions back";
}

INSTANTIATE_TEST_SUITE_P(Stores, ArenaStoreGpuTest, ::testing::Values("streaming", "evicted", "adaptive"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace chronoserve
