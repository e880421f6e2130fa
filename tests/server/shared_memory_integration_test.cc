// Triton's system shared-memory extension end to end: the real server on 127.0.0.1, real gRPC,
// regions created by the client library in POSIX shared memory (tests/server/shm_test_util.h
// unregisters and unlinks every one). Outputs through shared memory must be byte-identical to the
// raw-contents path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "tests/server/shm_test_util.h"
#include "tests/server/shared_server_test.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using client::InferenceClient;
using client::SharedMemoryRef;
using client::Tensor;
using testing::RegisteredShm;

Tensor RandomInput(const std::string& name, std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor{name, DataType::kFp32, shape, RandomTensorBytes(DataType::kFp32, ElementCount(shape), rng)};
}

class SharedMemoryTest : public testing::SharedServerTest<SharedMemoryTest> {
 public:
  static constexpr char kRepoName[] = "cs_shm";
  static void WriteModels(const testing::TempDir& repo) {
    examples::ModelOptions policy;
    policy.max_batch_size = 8;
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", policy).ok());
    examples::ModelOptions small;
    small.max_batch_size = 4;
    ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", small).ok());
    ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub", small).ok());
  }

 protected:
  void TearDown() override {
    auto left = client_->SystemSharedMemoryStatus();
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_EQ(left->regions_size(), 0) << "every test unregisters its regions";
  }
  std::unique_ptr<RegisteredShm> Shm(const std::string& name, size_t bytes) {
    std::string error;
    auto shm = RegisteredShm::Create(client_.get(), name, bytes, &error);
    EXPECT_NE(shm, nullptr) << error;
    return shm;
  }
};

TEST_F(SharedMemoryTest, RegisterStatusUnregisterRoundTrip) {
  auto metadata = client_->ServerMetadata();
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(metadata->extensions(), ::testing::Contains("system_shared_memory"));

  auto a = client::SystemSharedMemory::Create(testing::UniqueShmKey("a"), 8192);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("a_low", (*a)->key(), 4096).ok());
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("a_high", (*a)->key(), 1000, 4096).ok());
  auto all = client_->SystemSharedMemoryStatus();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->regions_size(), 2);
  const auto& high = all->regions().at("a_high");
  EXPECT_EQ(high.name(), "a_high");
  EXPECT_EQ(high.key(), (*a)->key());
  EXPECT_EQ(high.offset(), 4096u);
  EXPECT_EQ(high.byte_size(), 1000u);
  auto one = client_->SystemSharedMemoryStatus("a_low");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->regions_size(), 1);
  EXPECT_EQ(one->regions().at("a_low").byte_size(), 4096u);
  EXPECT_EQ(client_->SystemSharedMemoryStatus("nope").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(client_->UnregisterSystemSharedMemory("a_low").ok());
  EXPECT_EQ(client_->SystemSharedMemoryStatus()->regions_size(), 1);
  EXPECT_TRUE(client_->UnregisterSystemSharedMemory("a_low").ok()) << "unknown names are not an error (Triton)";
  ASSERT_TRUE(client_->UnregisterSystemSharedMemory().ok()) << "empty name: all";
  EXPECT_EQ(client_->SystemSharedMemoryStatus()->regions_size(), 0);
}

TEST_F(SharedMemoryTest, InputsAndOutputsInSharedMemoryAreByteIdenticalToRaw) {
  const Tensor input = RandomInput("INPUT__0", {3, 4, 20, 20}, 31);
  auto raw = client_->Infer("policy_net", {input});
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_EQ(raw->outputs.size(), 3u);
  EXPECT_EQ(testing::OutputsMismatch(repo_->path() + "/policy_net/1/model.pt", {input}, raw->outputs), "");

  // Offsets inside both regions, so shared_memory_offset is exercised too.
  auto in = Shm("pn_in", 64 + input.data.size());
  auto out = Shm("pn_out", 3 * 8192);
  ASSERT_TRUE(in && out);
  in->Write(64, input.data);
  Tensor via_shm = input;
  via_shm.data.clear();
  via_shm.shared_memory = SharedMemoryRef{"pn_in", input.data.size(), 64};
  client::InferOptions options;
  options.outputs = {"OUTPUT__0", "OUTPUT__1", "OUTPUT__2"};
  for (int k = 0; k < 3; ++k) options.output_shared_memory[options.outputs[k]] = SharedMemoryRef{"pn_out", 8192, 8192u * k};
  const auto request = InferenceClient::BuildRequest("policy_net", {via_shm}, options);
  EXPECT_EQ(request.raw_input_contents_size(), 0) << "the input travels in shared memory only";

  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::ModelInferResponse response;
  const grpc::Status status = client_->stub()->ModelInfer(&ctx, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.outputs_size(), 3);
  ASSERT_EQ(response.raw_output_contents_size(), 3) << "one entry per output, as Triton: its clients index by position";
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(response.raw_output_contents(k).empty()) << "no output bytes in the message";
    const auto& o = response.outputs(k);
    EXPECT_EQ(o.datatype(), "FP32");
    EXPECT_THAT(o.shape(), ::testing::ElementsAreArray(raw->outputs[k].shape));
    EXPECT_EQ(o.parameters().at("shared_memory_region").string_param(), "pn_out");
    EXPECT_EQ(o.parameters().at("shared_memory_offset").int64_param(), 8192 * k);
    EXPECT_EQ(o.parameters().at("shared_memory_byte_size").int64_param(), 8192);
    EXPECT_EQ(out->Read(8192 * k, raw->outputs[k].data.size()), raw->outputs[k].data) << "byte-identical";
  }
  auto decoded = InferenceClient::DecodeResponse(response);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->outputs[2].shared_memory.has_value());
  EXPECT_EQ(decoded->outputs[2].shared_memory->offset, 16384u);
  ASSERT_TRUE(decoded->timing.has_value()) << "timing.* as for any request";
  EXPECT_TRUE(decoded->timing->IsConsistent());
}

TEST_F(SharedMemoryTest, MixedInputAndOutputPlacement) {
  const Tensor a = RandomInput("INPUT__0", {2, 7}, 32);
  const Tensor b = RandomInput("INPUT__1", {2, 7}, 33);
  auto raw = client_->Infer("addsub", {a, b});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(testing::AddSubMismatch(a, b, raw->outputs), "");

  // INPUT__0 in shared memory, INPUT__1 in the message; OUTPUT__0 in the message, OUTPUT__1 in shm.
  auto in = Shm("mix_in", a.data.size());
  auto out = Shm("mix_out", 4096);
  ASSERT_TRUE(in && out);
  in->Write(0, a.data);
  Tensor a_shm = a;
  a_shm.data.clear();
  a_shm.shared_memory = SharedMemoryRef{"mix_in", a.data.size(), 0};
  client::InferOptions options;
  options.outputs = {"OUTPUT__0", "OUTPUT__1"};
  options.output_shared_memory["OUTPUT__1"] = SharedMemoryRef{"mix_out", 4096, 0};
  auto mixed = client_->Infer("addsub", {b, a_shm}, options);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->outputs.size(), 2u);
  EXPECT_FALSE(mixed->outputs[0].shared_memory.has_value());
  EXPECT_EQ(mixed->outputs[0].data, raw->outputs[0].data) << "the raw output after a shm input";
  ASSERT_TRUE(mixed->outputs[1].shared_memory.has_value());
  EXPECT_TRUE(mixed->outputs[1].data.empty());
  EXPECT_EQ(out->Read(0, raw->outputs[1].data.size()), raw->outputs[1].data);

  // And the other way round: input in the message, output in shared memory.
  const Tensor x = RandomInput("INPUT__0", {3, 64}, 34);
  auto mlp_raw = client_->Infer("mlp", {x});
  ASSERT_TRUE(mlp_raw.ok()) << mlp_raw.status();
  EXPECT_EQ(testing::OutputsMismatch(repo_->path() + "/mlp/1/model.pt", {x}, mlp_raw->outputs), "");
  client::InferOptions to_shm;
  to_shm.output_shared_memory["OUTPUT__0"] = SharedMemoryRef{"mix_out", 3 * 16 * 4, 100};
  auto mlp_shm = client_->Infer("mlp", {x}, to_shm);
  ASSERT_TRUE(mlp_shm.ok()) << mlp_shm.status();
  EXPECT_EQ(out->Read(100, mlp_raw->outputs[0].data.size()), mlp_raw->outputs[0].data);
}

TEST_F(SharedMemoryTest, VariableShapedOutputTooBigForItsRegionFailsAtTheBackend) {
  // addsub's output dims are variable, so only the backend knows the size: it fails this request.
  const Tensor a = RandomInput("INPUT__0", {2, 7}, 36);
  const Tensor b = RandomInput("INPUT__1", {2, 7}, 37);
  auto out = Shm("var_out", 4096);
  ASSERT_NE(out, nullptr);
  client::InferOptions options;
  options.output_shared_memory["OUTPUT__0"] = SharedMemoryRef{"var_out", 40, 0};
  auto r = client_->Infer("addsub", {a, b}, options);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::AllOf(HasSubstr("model 'addsub' output 'OUTPUT__0'"), HasSubstr("region 'var_out'"),
                               HasSubstr("needs 56 bytes, 40 available")));
  options.output_shared_memory["OUTPUT__0"] = SharedMemoryRef{"var_out", 56, 0};
  EXPECT_TRUE(client_->Infer("addsub", {a, b}, options).ok()) << "an exact fit is enough";
}

TEST_F(SharedMemoryTest, DisabledServerRefusesRegionsAndSaysWhy) {
  server::ServerOptions options;
  options.model_repository = repo_->path();
  options.grpc_port = 0;
  options.warmup.runs_per_batch_size = 1;
  options.allow_shared_memory = false;
  auto server = server::Server::Create(options);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string((*server)->port()));
  auto metadata = c->ServerMetadata();
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(metadata->extensions(), ::testing::Not(::testing::Contains("system_shared_memory")));
  auto shm = client::SystemSharedMemory::Create(testing::UniqueShmKey("off"), 4096);
  ASSERT_TRUE(shm.ok());
  absl::Status refused = c->RegisterSystemSharedMemory("r", (*shm)->key(), 4096);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--allow-shared-memory=false"));
  Tensor x = RandomInput("INPUT__0", {1, 64}, 35);
  x.data.clear();
  x.shared_memory = SharedMemoryRef{"r", 256, 0};
  auto infer = c->Infer("mlp", {x});
  EXPECT_EQ(infer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(infer.status().message()), HasSubstr("model 'mlp' input 'INPUT__0'"));
  // Refused as disabled before anything else is checked: a byte size that does not fit the shape
  // (64 FP32 need 256), or an output region, is not answered INVALID_ARGUMENT.
  x.shared_memory = SharedMemoryRef{"r", 4, 0};
  auto wrong_size = c->Infer("mlp", {x});
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kFailedPrecondition) << wrong_size.status();
  client::InferOptions to_region;
  to_region.output_shared_memory["OUTPUT__0"] = SharedMemoryRef{"out", 4, 0};
  auto output = c->Infer("mlp", {RandomInput("INPUT__0", {1, 64}, 36)}, to_region);
  EXPECT_EQ(output.status().code(), absl::StatusCode::kFailedPrecondition) << output.status();
  EXPECT_THAT(std::string(output.status().message()), HasSubstr("model 'mlp' output 'OUTPUT__0'"));
  // CUDA shared memory is off with it.
  absl::Status cuda = c->RegisterCudaSharedMemory("g", std::string(64, 'h'), 0, 4096);
  EXPECT_EQ(cuda.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(cuda.message()), HasSubstr("--allow-shared-memory=false"));
  EXPECT_EQ(c->CudaSharedMemoryStatus().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->UnregisterCudaSharedMemory().code(), absl::StatusCode::kFailedPrecondition);
  (*server)->Shutdown();
}

// Triton's cuda_shared_memory RPCs on a server without a GPU (the GPU suite's
// cuda_shared_memory_test serves them on one): not listed, Register says why, Status lists nothing,
// Unregister of nothing is fine, and the system regions are not affected.
TEST_F(SharedMemoryTest, CudaSharedMemoryOnAServerWithoutAGpuIsRefusedClearly) {
  if (server::CudaDeviceCount() > 0) GTEST_SKIP() << "this server has a GPU (tests/gpu covers it)";
  auto metadata = client_->ServerMetadata();
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(metadata->extensions(), ::testing::Contains("system_shared_memory"));
  EXPECT_THAT(metadata->extensions(), ::testing::Not(::testing::Contains("cuda_shared_memory")));
  std::string handle(64, '\0');
  for (size_t i = 0; i < handle.size(); ++i) handle[i] = static_cast<char>(i * 7 + 1);
  absl::Status refused = client_->RegisterCudaSharedMemory("gpu_in", handle, 0, 1 << 20);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), ::testing::AllOf(HasSubstr("'gpu_in'"), HasSubstr("no GPU")));
  auto status = client_->CudaSharedMemoryStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->regions_size(), 0);
  EXPECT_EQ(client_->CudaSharedMemoryStatus("gpu_in").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->UnregisterCudaSharedMemory("gpu_in").ok());
  EXPECT_TRUE(client_->UnregisterCudaSharedMemory().ok());
  // A request naming the region that was never registered: NOT_FOUND, naming tensor and region.
  Tensor x = RandomInput("INPUT__0", {1, 64}, 37);
  x.data.clear();
  x.shared_memory = SharedMemoryRef{"gpu_in", 256, 0};
  auto infer = client_->Infer("mlp", {x});
  EXPECT_EQ(infer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(infer.status().message()),
              ::testing::AllOf(HasSubstr("model 'mlp' input 'INPUT__0'"), HasSubstr("'gpu_in'")));
  // A system region of the same name is unaffected by the CUDA calls.
  auto shm = Shm("gpu_in", 4096);
  ASSERT_NE(shm, nullptr);
  EXPECT_TRUE(client_->UnregisterCudaSharedMemory("").ok());
  auto system = client_->SystemSharedMemoryStatus("gpu_in");
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_EQ(system->regions_size(), 1);
}

}  // namespace
}  // namespace chronoserve
