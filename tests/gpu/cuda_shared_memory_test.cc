// Triton's cuda_shared_memory extension on the real chronoserve binary (a separate process: CUDA
// IPC opens a handle only in a process other than the one that made it). This test process is the
// client: it allocates GPU memory, writes random inputs there, registers the memory by its IPC
// handle, and checks the outputs the server wrote into GPU memory against a CPU LibTorch reference.
// Also chronobench's --shared-memory cuda: its regions (client::CudaSharedMemory), its slots, and the
// binary under load.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/chronobench/shm_slot_pool.h"
#include "client/cuda_shared_memory.h"
#include "client/inference_client.h"
#include "common/status_macros.h"
#include "common/tensor_data.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::SharedMemoryRef;
using client::Tensor;
using ::testing::HasSubstr;

constexpr char kGraphsOn[] = "optimization { cuda { graphs: true } }\n";
constexpr int64_t kInputBytesPerItem = 4 * 20 * 20 * 4;
const std::vector<std::string> kOutputs = {"OUTPUT__0", "OUTPUT__1", "OUTPUT__2"};
const std::vector<size_t> kOutputBytesPerItem = {400 * 4, 4, 400 * 4};

// GPU memory of this process (client::CudaSharedMemory on GPU 0), freed at the end of the test;
// null, with the test failed, when it cannot be allocated.
std::unique_ptr<client::CudaSharedMemory> GpuMemory(size_t bytes) {
  auto memory = client::CudaSharedMemory::Create(0, bytes);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return memory.ok() ? std::move(*memory) : nullptr;
}

Tensor RandomInput(int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> shape = {batch, 4, 20, 20};
  return Tensor{"INPUT__0", DataType::kFp32, shape, RandomTensorBytes(DataType::kFp32, ElementCount(shape), rng)};
}

class CudaSharedMemoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto suite = testing::StartServerInNewDir(
        "cs_cuda_shm",
        [](const std::string& repository) -> absl::Status {
          examples::ModelOptions eager;
          eager.max_batch_size = 128;
          RETURN_IF_ERROR(examples::WritePolicyNet(repository, "policy_net", eager));
          examples::ModelOptions graphs = eager;
          graphs.extra_config = kGraphsOn;
          RETURN_IF_ERROR(examples::WritePolicyNet(repository, "policy_graphs", graphs));
          examples::ModelOptions batched = eager;  // requests wait up to 5 ms for others to batch with
          batched.max_queue_delay_us = 5000;
          RETURN_IF_ERROR(examples::WritePolicyNet(repository, "policy_batched", batched));
          examples::ModelOptions cpu = eager;
          cpu.instance_kind = "KIND_CPU";
          return examples::WritePolicyNet(repository, "policy_cpu", cpu);
        },
        {}, absl::Seconds(180));
    ASSERT_TRUE(suite.ok()) << suite.status();
    suite_ = suite->release();
    server_ = &suite_->server;
  }
  static void TearDownTestSuite() {
    delete suite_;
    suite_ = nullptr;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = InferenceClient::Connect(server_->url, std::chrono::seconds(60));
  }
  // Declared after a test's GPU memory: its regions are unregistered before their memory is freed.
  struct UnregisterAtEnd {
    InferenceClient* client;
    ~UnregisterAtEnd() { EXPECT_TRUE(client->UnregisterCudaSharedMemory("").ok()); }
  };
  std::string ModelPath(const std::string& model) const {
    return suite_->repository() + "/" + model + "/1/model.pt";
  }

  static inline testing::ServerInDir* suite_ = nullptr;
  static inline testing::TestServer* server_ = nullptr;  // suite_'s
  std::unique_ptr<InferenceClient> client_;
};

TEST_F(CudaSharedMemoryTest, InputsAndOutputsInGpuMemoryMatchTheCpuReference) {
  auto meta = client_->ServerMetadata();
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_THAT(meta->extensions(), ::testing::Contains("cuda_shared_memory"));

  const auto in = GpuMemory(kInputBytesPerItem * 128 + 4096);
  const auto out = GpuMemory((400 * 4 * 2 + 4) * 128 + 4096);
  ASSERT_TRUE(in != nullptr && out != nullptr);
  UnregisterAtEnd unregister{client_.get()};
  ASSERT_TRUE(client_->RegisterCudaSharedMemory("cin", in->raw_handle(), 0, in->byte_size()).ok());
  ASSERT_TRUE(client_->RegisterCudaSharedMemory("cout", out->raw_handle(), 0, out->byte_size()).ok());
  auto status = client_->CudaSharedMemoryStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->regions_size(), 2);
  EXPECT_EQ(status->regions().at("cin").device_id(), 0u);
  EXPECT_EQ(status->regions().at("cin").byte_size(), in->byte_size());
  EXPECT_EQ(client_->SystemSharedMemoryStatus("cin").status().code(), absl::StatusCode::kNotFound)
      << "a CUDA region is not a system one";

  uint64_t seed = 100;
  for (const std::string model : {"policy_net", "policy_graphs"}) {
    for (int64_t batch : {1, 37, 128}) {
      SCOPED_TRACE(model + " batch " + std::to_string(batch));
      const Tensor input = RandomInput(batch, ++seed);
      const size_t in_offset = 256;  // not at the allocation's start
      ASSERT_TRUE(in->Write(in_offset, input.data.data(), input.data.size()).ok());
      ASSERT_TRUE(out->Fill(0x7f).ok());
      Tensor via_gpu = input;
      via_gpu.data.clear();
      via_gpu.shared_memory = SharedMemoryRef{"cin", input.data.size(), in_offset};
      client::InferOptions options;
      std::vector<size_t> offsets;
      size_t next = 512;
      for (size_t k = 0; k < kOutputs.size(); ++k) {
        const size_t bytes = kOutputBytesPerItem[k] * batch;
        options.output_shared_memory[kOutputs[k]] = SharedMemoryRef{"cout", bytes, next};
        offsets.push_back(next);
        next += bytes + 256;
      }
      auto result = client_->Infer(model, {via_gpu}, options);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_TRUE(result->timing.has_value());
      EXPECT_TRUE(result->timing->device_timed);
      EXPECT_GT(result->timing->h2d_ns, 0) << "the device-to-device copy of the input is the h2d span";
      EXPECT_GT(result->timing->d2h_ns, 0);
      EXPECT_TRUE(result->timing->IsConsistent());
      EXPECT_EQ(result->timing->batch_size, batch) << "one client, one request at a time";
      const auto want = testing::TorchReference(ModelPath(model), {input});
      ASSERT_EQ(want.size(), kOutputs.size());
      for (size_t k = 0; k < kOutputs.size(); ++k) {
        ASSERT_EQ(result->outputs[k].name, kOutputs[k]);
        EXPECT_TRUE(result->outputs[k].data.empty()) << "the bytes are in GPU memory, not the message";
        std::string got(kOutputBytesPerItem[k] * batch, '\0');
        ASSERT_TRUE(out->Read(offsets[k], got.size(), got.data()).ok());
        // cuDNN may use TF32 for convolutions: a TF32-sized tolerance.
        EXPECT_EQ(testing::ReferenceMismatch(got, want[k], 5e-3f), "") << kOutputs[k];
      }
    }
  }
}

TEST_F(CudaSharedMemoryTest, ConcurrentRequestsEachGetTheirOwnRows) {
  constexpr int kThreads = 4;
  constexpr int kRequests = 12;
  constexpr int64_t kBatch = 8;
  const size_t slot = kInputBytesPerItem * kBatch;
  const auto in = GpuMemory(slot * kThreads);
  ASSERT_NE(in, nullptr);
  UnregisterAtEnd unregister{client_.get()};
  ASSERT_TRUE(client_->RegisterCudaSharedMemory("cin", in->raw_handle(), 0, in->byte_size()).ok());
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = InferenceClient::Connect(server_->url, std::chrono::seconds(60));
      for (int i = 0; i < kRequests && failures[t].empty(); ++i) {
        const Tensor input = RandomInput(kBatch, 1000 + t * 100 + i);
        if (absl::Status written = in->Write(t * slot, input.data.data(), slot); !written.ok()) {
          failures[t] = written.ToString();
          break;
        }
        Tensor via_gpu = input;
        via_gpu.data.clear();
        via_gpu.shared_memory = SharedMemoryRef{"cin", slot, t * slot};
        // Outputs in the message: a mix the server must keep apart from the GPU-memory input.
        const std::string model = i % 2 == 0 ? "policy_graphs" : "policy_net";
        auto result = client->Infer(model, {via_gpu});
        if (!result.ok()) {
          failures[t] = result.status().ToString();
          break;
        }
        std::vector<Tensor> outs = result->outputs;
        failures[t] = testing::OutputsMismatch(ModelPath(model), {input}, outs, 5e-3f);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// Requests whose tensors are all in GPU memory batch together: their inputs are gathered on the
// device, and each request's rows of every output land in its own region.
TEST_F(CudaSharedMemoryTest, RequestsInGpuMemoryBatchTogetherAndKeepTheirRows) {
  constexpr int kThreads = 8;
  constexpr int kRequests = 6;
  constexpr int64_t kBatch = 4;
  const size_t in_slot = kInputBytesPerItem * kBatch;
  size_t out_slot = 0;
  for (size_t bytes : kOutputBytesPerItem) out_slot += bytes * kBatch + 256;
  const auto in = GpuMemory(in_slot * kThreads);
  const auto out = GpuMemory(out_slot * kThreads);
  ASSERT_TRUE(in != nullptr && out != nullptr);
  ASSERT_TRUE(out->Fill(0x7f).ok());
  UnregisterAtEnd unregister{client_.get()};
  ASSERT_TRUE(client_->RegisterCudaSharedMemory("bin", in->raw_handle(), 0, in->byte_size()).ok());
  ASSERT_TRUE(client_->RegisterCudaSharedMemory("bout", out->raw_handle(), 0, out->byte_size()).ok());
  std::vector<std::string> failures(kThreads);
  std::vector<int64_t> largest_batch(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = InferenceClient::Connect(server_->url, std::chrono::seconds(60));
      for (int i = 0; i < kRequests && failures[t].empty(); ++i) {
        const Tensor input = RandomInput(kBatch, 5000 + t * 100 + i);
        if (absl::Status written = in->Write(t * in_slot, input.data.data(), in_slot); !written.ok()) {
          failures[t] = written.ToString();
          break;
        }
        Tensor via_gpu = input;
        via_gpu.data.clear();
        via_gpu.shared_memory = SharedMemoryRef{"bin", in_slot, t * in_slot};
        client::InferOptions options;
        std::vector<size_t> offsets;
        size_t next = t * out_slot;
        for (size_t k = 0; k < kOutputs.size(); ++k) {
          options.output_shared_memory[kOutputs[k]] = SharedMemoryRef{"bout", kOutputBytesPerItem[k] * kBatch, next};
          offsets.push_back(next);
          next += kOutputBytesPerItem[k] * kBatch + 256;
        }
        auto result = client->Infer("policy_batched", {via_gpu}, options);
        if (!result.ok()) {
          failures[t] = result.status().ToString();
          break;
        }
        if (result->timing.has_value()) largest_batch[t] = std::max(largest_batch[t], result->timing->batch_size);
        std::vector<Tensor> outs;
        for (size_t k = 0; k < kOutputs.size(); ++k) {
          Tensor o{kOutputs[k], DataType::kFp32, {kBatch, static_cast<int64_t>(kOutputBytesPerItem[k] / 4)}, {}};
          o.data.resize(kOutputBytesPerItem[k] * kBatch);
          if (absl::Status read = out->Read(offsets[k], o.data.size(), o.data.data()); !read.ok()) {
            failures[t] = read.ToString();
            break;
          }
          outs.push_back(std::move(o));
        }
        if (failures[t].empty()) failures[t] = testing::OutputsMismatch(ModelPath("policy_batched"), {input}, outs, 5e-3f);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_GT(*std::max_element(largest_batch.begin(), largest_batch.end()), kBatch)
      << "some requests ran in a batch with others (5 ms queue delay, 8 clients at once)";
}

TEST_F(CudaSharedMemoryTest, RefusalsNameTheRegionAndWhatWasExpected) {
  const auto mem = GpuMemory(1 << 20);
  ASSERT_NE(mem, nullptr);
  UnregisterAtEnd unregister{client_.get()};
  const std::string handle = mem->raw_handle();
  auto too_big = client_->RegisterCudaSharedMemory("big", handle, 0, mem->byte_size() * 4);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.message(), HasSubstr("'big'"));
  EXPECT_THAT(too_big.message(), HasSubstr("exceeds"));

  auto short_handle = client_->RegisterCudaSharedMemory("short", handle.substr(0, 10), 0, 1024);
  EXPECT_EQ(short_handle.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_handle.message(), HasSubstr("raw_handle holds 10 bytes"));

  std::string garbage(64, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(37 * i + 11);
  auto bogus = client_->RegisterCudaSharedMemory("bogus", garbage, 0, 1024);
  EXPECT_EQ(bogus.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bogus.message(), HasSubstr("cudaIpcOpenMemHandle"));

  auto no_gpu = client_->RegisterCudaSharedMemory("far", handle, 4096, 1024);
  EXPECT_EQ(no_gpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_gpu.message(), HasSubstr("device_id 4096"));

  ASSERT_TRUE(client_->RegisterCudaSharedMemory("mem", handle, 0, mem->byte_size()).ok());
  EXPECT_EQ(client_->RegisterCudaSharedMemory("mem", handle, 0, mem->byte_size()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client_->CudaSharedMemoryStatus("nope").status().code(), absl::StatusCode::kNotFound);

  // A byte size that is not the shape's, and a range past the region's end.
  const Tensor input = RandomInput(2, 7);
  ASSERT_TRUE(mem->Write(0, input.data.data(), input.data.size()).ok());
  Tensor wrong = input;
  wrong.data.clear();
  wrong.shared_memory = SharedMemoryRef{"mem", input.data.size() - 4, 0};
  auto bad_size = client_->Infer("policy_net", {wrong});
  EXPECT_EQ(bad_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_size.status().message(), HasSubstr("needs " + std::to_string(input.data.size())));
  wrong.shared_memory = SharedMemoryRef{"mem", input.data.size(), mem->byte_size() - 100};
  auto past_end = client_->Infer("policy_net", {wrong});
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past_end.status().message(), HasSubstr("does not fit"));

  // A model instance on the CPU cannot read GPU memory: refused by name, the server stays up.
  Tensor on_gpu = input;
  on_gpu.data.clear();
  on_gpu.shared_memory = SharedMemoryRef{"mem", input.data.size(), 0};
  auto cpu = client_->Infer("policy_cpu", {on_gpu});
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cpu.status().message(), HasSubstr("runs on the CPU"));
  auto fine = client_->Infer("policy_net", {on_gpu});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(testing::OutputsMismatch(ModelPath("policy_net"), {input}, fine->outputs, 5e-3f), "");

  // Unregistered: the name is gone, requests naming it are NOT_FOUND.
  ASSERT_TRUE(client_->UnregisterCudaSharedMemory("mem").ok());
  EXPECT_EQ(client_->Infer("policy_net", {on_gpu}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->CudaSharedMemoryStatus()->regions_size(), 0);
}


// client::CudaSharedMemory, the class chronobench and bench_serve_latency allocate their regions with.
TEST(CudaSharedMemoryClassTest, RoundTripsAndRefusesWhatItCannotDo) {
  ASSERT_TRUE(client::CudaSharedMemory::Available());
  auto gpu = client::CudaSharedMemory::Create(0, 4096);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->raw_handle().size(), sizeof(cudaIpcMemHandle_t));
  EXPECT_EQ((*gpu)->device_id(), 0);
  EXPECT_EQ((*gpu)->byte_size(), 4096u);
  std::mt19937_64 rng(7);
  const std::string bytes = RandomTensorBytes(DataType::kFp32, 256, rng);  // 1 KiB
  ASSERT_TRUE((*gpu)->Fill(0x5a).ok());
  ASSERT_TRUE((*gpu)->Write(1000, bytes.data(), bytes.size()).ok());
  std::string back(bytes.size() + 8, '\0');
  ASSERT_TRUE((*gpu)->Read(996, back.size(), back.data()).ok());
  EXPECT_EQ(back.substr(4, bytes.size()), bytes);
  EXPECT_EQ(back.substr(0, 4), std::string(4, '\x5a')) << "bytes before the write kept the fill";
  EXPECT_EQ(back.substr(4 + bytes.size()), std::string(4, '\x5a')) << "bytes after the write kept the fill";

  const absl::Status past = (*gpu)->Write(4000, bytes.data(), bytes.size());
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_THAT(std::string(past.message()), HasSubstr("past its 4096 bytes"));
  EXPECT_EQ((*gpu)->Read(4097, 0, back.data()).code(), absl::StatusCode::kOutOfRange);

  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  auto missing = client::CudaSharedMemory::Create(devices, 64);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("does not exist"));
  EXPECT_EQ(client::CudaSharedMemory::Create(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// A thread that had no CUDA context has none after using a region (on the last GPU: GPU 1 and up on
// a machine with several), so no context is made on GPU 0 for it; a thread that had one keeps that
// very context. The scope used to restore the device number, making GPU 0's context current.
TEST(CudaSharedMemoryClassTest, TheCallingThreadKeepsItsOwnContextOrNone) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);  // so that cuCtxGetCurrent answers on a thread with no context
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  const int last = devices - 1;
  std::mt19937_64 rng(11);
  const std::string bytes = RandomTensorBytes(DataType::kFp32, 64, rng);
  auto use_region = [&](int device, CUcontext* after) {
    auto gpu = client::CudaSharedMemory::Create(device, 4096);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE((*gpu)->Fill(0x11).ok());
    ASSERT_TRUE((*gpu)->Write(64, bytes.data(), bytes.size()).ok());
    std::string back(bytes.size(), '\0');
    ASSERT_TRUE((*gpu)->Read(64, back.size(), back.data()).ok());
    EXPECT_EQ(back, bytes);
    gpu->reset();
    ASSERT_EQ(cuCtxGetCurrent(after), CUDA_SUCCESS);
  };
  CUcontext fresh_after = reinterpret_cast<CUcontext>(1);
  std::thread([&] {  // a fresh thread: no current context
    CUcontext before = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(cuCtxGetCurrent(&before), CUDA_SUCCESS);
    ASSERT_EQ(before, nullptr) << "a fresh thread starts with no context";
    use_region(last, &fresh_after);
  }).join();
  EXPECT_EQ(fresh_after, nullptr) << "the region's scope left a context current on a thread that had none";

  CUcontext own = nullptr, kept = nullptr;
  std::thread([&] {  // a thread working on GPU 0 keeps GPU 0's context through a region on the last GPU
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    ASSERT_EQ(cuCtxGetCurrent(&own), CUDA_SUCCESS);
    ASSERT_NE(own, nullptr);
    use_region(last, &kept);
    int device = -1;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(device, 0);
  }).join();
  EXPECT_EQ(kept, own);
}

// chronobench's slots in GPU memory (--shared-memory cuda): each slot's request, its inputs copied in
// from the host and its outputs copied back out, gives the bytes the same request gives in the message.
TEST_F(CudaSharedMemoryTest, ChronobenchSlotsInGpuMemoryGiveTheMessagesOutputs) {
  auto meta = client_->ModelMetadata("policy_graphs");
  ASSERT_TRUE(meta.ok()) << meta.status();
  auto channel = grpc::CreateChannel(server_->url, grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  constexpr int64_t kBatch = 5;
  inference::ModelInferRequest request;
  request.set_model_name("policy_graphs");
  auto* in = request.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  for (int64_t d : {kBatch, int64_t{4}, int64_t{20}, int64_t{20}}) in->add_shape(d);
  std::mt19937_64 rng(31);
  *request.add_raw_input_contents() = RandomTensorBytes(DataType::kFp32, kBatch * 4 * 20 * 20, rng);

  auto layout = client::bench::PlanShmLayout(request, *meta, kBatch, /*batched=*/true, /*output_byte_size=*/0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  layout->kind = client::bench::SharedMemoryKind::kCuda;
  client::bench::ShmSlotPool pool(stub.get(), &request, &*layout, "cb_gpu_test");
  ASSERT_TRUE(pool.Grow(2).ok());
  auto listed = client_->CudaSharedMemoryStatus();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->regions_size(), 4) << "two slots, an input and an output region each";

  grpc::ClientContext message_ctx;
  message_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  inference::ModelInferResponse expected;
  ASSERT_TRUE(stub->ModelInfer(&message_ctx, request, &expected).ok());
  ASSERT_EQ(expected.raw_output_contents_size(), static_cast<int>(kOutputs.size()));

  std::vector<client::bench::ShmSlot*> slots = {pool.Acquire(), pool.Acquire()};
  for (client::bench::ShmSlot* slot : slots) {
    ASSERT_NE(slot, nullptr);
    ASSERT_TRUE(pool.CopyIn(*slot).ok());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    inference::ModelInferResponse response;
    const grpc::Status status = stub->ModelInfer(&ctx, slot->request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (const std::string& bytes : response.raw_output_contents()) {
      EXPECT_TRUE(bytes.empty()) << "outputs went to the region, not the message";
    }
    ASSERT_TRUE(pool.CopyOut(*slot, response.outputs()).ok());
    for (size_t k = 0; k < kOutputs.size(); ++k) {
      const auto& entry = layout->outputs[k];
      ASSERT_EQ(entry.name, expected.outputs(static_cast<int>(k)).name());
      const std::string& want = expected.raw_output_contents(static_cast<int>(k));
      EXPECT_EQ(slot->outputs.substr(entry.offset, want.size()), want) << entry.name;
    }
  }
  for (client::bench::ShmSlot* slot : slots) pool.Release(slot);
  ASSERT_TRUE(pool.UnregisterAll().ok());
  EXPECT_EQ(client_->CudaSharedMemoryStatus()->regions_size(), 0);
}

// The chronobench binary under load through GPU memory, with copies per request and preloaded: every
// request answered, none failed, and its regions unregistered when it exits.
class ChronobenchCudaTest : public CudaSharedMemoryTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ChronobenchCudaTest, BinaryLoadsThroughGpuMemory) {
  const bool preload = GetParam();
  const std::string json = suite_->dir.path() + (preload ? "/chronobench_cuda_pre.json" : "/chronobench_cuda.json");
  std::vector<std::string> argv = {CHRONOBENCH_BIN, "-m", "policy_batched", "-u", server_->url, "-b", "2",
                                   "--concurrency-range", "6", "-p", "300", "--max-trials", "3", "--warmup-requests",
                                   "20", "-s", "50", "--shared-memory", "cuda", "--json", json};
  if (preload) argv.push_back("--shared-memory-preload");
  auto run = testing::RunProgram(argv, absl::Seconds(120));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->first, 0) << run->second;
  std::ifstream file(json);
  const nlohmann::json report = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << json << " is not JSON";
  EXPECT_EQ(report["server"]["shared_memory"], "cuda");
  EXPECT_EQ(report["server"]["shared_memory_preload"], preload);
  ASSERT_EQ(report["runs"].size(), 1u);
  const nlohmann::json& point = report["runs"][0];
  EXPECT_GT(point["requests"].get<int64_t>(), 0) << point.dump();
  EXPECT_EQ(point["errors"], 0) << point.dump();
  EXPECT_GT(point["device_timed_responses"].get<int64_t>(), 0) << point.dump();
  EXPECT_EQ(client_->CudaSharedMemoryStatus()->regions_size(), 0) << "the binary unregistered its regions at exit";
}

INSTANTIATE_TEST_SUITE_P(CopiesAndPreloaded, ChronobenchCudaTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Preloaded" : "Copies"; });

}  // namespace
}  // namespace chronoserve
