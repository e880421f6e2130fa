// The real server, real gRPC: a model that fails to load or whose forward() throws fails alone,
// with its reason; a start that cannot succeed (no model repository, a port in use) says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;
using ::testing::Not;
using client::Tensor;

class FailedModelTest : public ::testing::Test {};

TEST_F(FailedModelTest, BrokenModelsFailAloneWithTheirReason) {
  testing::TempDir repo("cs_failed");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "good", o).ok());
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "gpu_only", o).ok());
  repo.WriteFile("gpu_only/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 16 }\ninstance_group { kind: KIND_GPU }\n");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "wrong_dims", o).ok());  // forward() gives [B,16]
  repo.WriteFile("wrong_dims/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\ninstance_group { kind: KIND_CPU }\n");
  // A variable dim the model needs at 64: the automatic warm-up's 1 fails it, and says how to mend it.
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "needs_64", o).ok());
  repo.WriteFile("needs_64/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: -1 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 16 }\ninstance_group { kind: KIND_CPU }\n");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "needs_64_warmed", o).ok());
  repo.WriteFile("needs_64_warmed/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: -1 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 16 }\ninstance_group { kind: KIND_CPU }\n"
                 "model_warmup { name: \"w\" batch_size: 1 inputs { key: \"INPUT__0\" value { dims: 64 random_data: true } } }\n");
  // A batching model whose forward() sums its batch into a scalar: named so, not "0 rows".
  repo.WriteFile("scalar/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 1 }\ninstance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/scalar/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/scalar/1/model.pt", "def forward(self, x):\n  return x.sum()\n"));
  // A tuple with a None in it: the element is named, not the whole result.
  repo.WriteFile("tuple_none/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__1\" data_type: TYPE_FP32 dims: 64 }\ninstance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/tuple_none/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/tuple_none/1/model.pt",
                                          "def forward(self, x):\n  return (x * 2.0, None)\n"));
  // A sparse output: named, with what to do, not LibTorch's words about is_contiguous.
  repo.WriteFile("sparse/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                 "output { name: \"SPARSE\" data_type: TYPE_FP32 dims: 64 }\ninstance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/sparse/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/sparse/1/model.pt",
                                          "def forward(self, x):\n  return (x * 2.0, x.to_sparse())\n"));
  // A file that is no TorchScript archive (e.g. a state_dict written with torch.save).
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "not_torchscript", o).ok());
  repo.WriteFile("not_torchscript/1/model.pt", "PK\x03\x04 not a whole archive");
  repo.WriteFile("broken/config.pbtxt", "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [64 }\n");
  repo.WriteFile("broken/1/model.pt", "not a model");
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ServerLive()), "true");
  EXPECT_EQ(testing::Answer(c->ServerReady()), "false") << "strict readiness: a model failed";
  EXPECT_EQ(testing::Answer(c->ModelReady("good")), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("broken")), "false");
  std::mt19937_64 rng(5);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  EXPECT_TRUE(c->Infer("good", {input}).ok());
  auto broken = c->Infer("broken", {input});
  ASSERT_EQ(broken.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("broken/config.pbtxt:2:"));
  // As Triton: NOT_FOUND without a version (no version to serve), UNAVAILABLE for a named one.
  auto broken_v1 = c->ModelMetadata("broken", "1");
  ASSERT_EQ(broken_v1.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(broken_v1.status().message()), HasSubstr("broken/config.pbtxt:2:"));
  if (server::CudaDeviceCount() == 0) {  // with a GPU visible the KIND_GPU model loads
    auto gpu = c->Infer("gpu_only", {input});
    ASSERT_EQ(gpu.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("KIND_GPU but no CUDA GPU is visible"));
  }
  auto wrong_dims = c->Infer("wrong_dims", {input});
  ASSERT_EQ(wrong_dims.status().code(), absl::StatusCode::kNotFound) << "its warm-up failed the load";
  EXPECT_THAT(std::string(wrong_dims.status().message()),
              HasSubstr("warm-up at batch size 1: model 'wrong_dims' worker 0 on cpu: output 'OUTPUT__0': produced "
                        "dims [16] after the batch dim, config declares [8]"));
  auto scalar = c->Infer("scalar", {input});
  ASSERT_EQ(scalar.status().code(), absl::StatusCode::kNotFound) << "its warm-up failed the load";
  EXPECT_THAT(std::string(scalar.status().message()),
              HasSubstr("output 'OUTPUT__0': produced a scalar (a 0-d tensor), expected 1 rows (the batch dim) of [1]"));
  auto tuple_none = c->Infer("tuple_none", {input});
  ASSERT_EQ(tuple_none.status().code(), absl::StatusCode::kNotFound) << "its warm-up failed the load";
  EXPECT_THAT(std::string(tuple_none.status().message()),
              HasSubstr("forward() returned a tuple whose element 1 (output 'OUTPUT__1') is None, not a tensor"));
  auto sparse = c->Infer("sparse", {input});
  ASSERT_EQ(sparse.status().code(), absl::StatusCode::kNotFound) << "its warm-up failed the load";
  EXPECT_THAT(std::string(sparse.status().message()),
              HasSubstr("model 'sparse' worker 0 on cpu: output 'SPARSE' (forward()'s output 1) is a Sparse tensor; "
                        "outputs must be dense (strided): return it .to_dense()"));
  auto needs_64 = c->Infer("needs_64", {input});
  ASSERT_EQ(needs_64.status().code(), absl::StatusCode::kNotFound) << "its warm-up failed the load";
  EXPECT_THAT(std::string(needs_64.status().message()),
              HasSubstr("warm-up at batch size 1 with the -1 dims of INPUT__0 as 1 (if the model needs other sizes, "
                        "add a model_warmup sample with dims it accepts): model 'needs_64' worker 0 on cpu: "));
  EXPECT_TRUE(c->Infer("needs_64_warmed", {input}).ok()) << "its sample gave the warm-up 64";
  auto not_torchscript = c->Infer("not_torchscript", {input});
  ASSERT_EQ(not_torchscript.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(not_torchscript.status().message()),
              HasSubstr("(not a whole TorchScript file: a truncated copy, a git-lfs pointer not pulled, or not TorchScript at "
                        "all; save the model with torch.jit.save"));
  server->Shutdown();
  EXPECT_FALSE(c->ServerLive().ok()) << "stopped";
}

// A model whose TorchScript cannot compile here (an operator this LibTorch lacks) fails its load
// alone, naming the model and the operator; the server and its other models go on (before, the
// compiler's torch::jit::ErrorReport, no c10::Error, escaped the load and aborted the server).
TEST_F(FailedModelTest, AModelWhoseCodeCannotCompileFailsAloneNamingTheOperator) {
  testing::TempDir repo("cs_vanished_op");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "good", o).ok());
  repo.WriteFile("vanished/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\ninstance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/vanished/1");
  ASSERT_TRUE(testing::WriteModelCallingAVanishedOperator(repo.path() + "/vanished/1/model.pt"));
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ModelReady("good")), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("vanished")), "false");
  std::mt19937_64 rng(7);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 8}, RandomTensorBytes(DataType::kFp32, 8, rng)};
  auto refused = c->Infer("vanished", {input});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model 'vanished': cannot load "));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("chronoserve_test::vanished"));
  EXPECT_THAT(std::string(refused.status().message()), Not(HasSubstr("\n"))) << "the compiler's page on one line";
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(": return ops.chronoserve_test.vanished(x))"))
      << "the line it could not compile";
  const Tensor good_input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  EXPECT_TRUE(c->Infer("good", {good_input}).ok());
  server->Shutdown();
}

// A forward() that throws fails only its batch: INTERNAL, with the model, worker and device named
// once before TorchScript's own message (on one line), whether the model raised or an operator in it failed (the
// interpreter rethrows that as std::runtime_error); the next request is answered.
TEST_F(FailedModelTest, AForwardThatThrowsFailsItsRequestNamingTheModelOnce) {
  testing::TempDir repo("cs_throws");
  repo.WriteFile("throws/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\ninstance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/throws/1");
  // The warm-up's random values lie in [-1, 1): only the request below makes it throw.
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/throws/1/model.pt",
                                          "def forward(self, x):\n"
                                          "  assert bool(x[0, 0] < 100.0), 'first value out of range'\n"
                                          "  if bool(x[0, 1] > 100.0):\n"
                                          "    return torch.matmul(x, torch.ones([3, 3]))\n"
                                          "  return x * 2.0\n"));
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  ASSERT_EQ(testing::Answer(c->ModelReady("throws")), "true");
  std::mt19937_64 rng(51);
  Tensor input{"INPUT__0", DataType::kFp32, {1, 8}, RandomTensorBytes(DataType::kFp32, 8, rng)};
  Tensor bad = input;
  const float big = 1000.0f;
  std::memcpy(bad.data.data(), &big, sizeof big);
  auto failed = c->Infer("throws", {bad});
  ASSERT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  const std::string message(failed.status().message());
  EXPECT_THAT(message, HasSubstr("model 'throws' worker 0 on cpu: TorchScript error: "));
  EXPECT_THAT(message, HasSubstr("first value out of range"));
  EXPECT_EQ(message.find("model 'throws'"), message.rfind("model 'throws'")) << "named once: " << message;
  // The interpreter's page (two tracebacks with context) as one line: the error, then where in the
  // model's own source.
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  EXPECT_THAT(message, HasSubstr("TorchScript error: RuntimeError: AssertionError: first value out of range (in forward, "
                                 "\"<string>\" line 2: assert bool(x[0, 0] < 100.0), 'first value out of range')"));
  Tensor bad_operator = input;
  std::memcpy(bad_operator.data.data() + sizeof big, &big, sizeof big);  // x[0, 1]: a matmul of wrong shapes
  auto operator_failed = c->Infer("throws", {bad_operator});
  ASSERT_EQ(operator_failed.status().code(), absl::StatusCode::kInternal);
  const std::string operator_message(operator_failed.status().message());
  EXPECT_THAT(operator_message, HasSubstr("model 'throws' worker 0 on cpu: TorchScript error: "));
  EXPECT_THAT(operator_message, HasSubstr("TorchScript error: RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                                          "(1x8 and 3x3) (in forward, \"<string>\" line 4: "
                                          "return torch.matmul(x, torch.ones([3, 3])))"));
  auto ok = c->Infer("throws", {input});
  ASSERT_TRUE(ok.ok()) << ok.status();
  float first = 0;
  std::memcpy(&first, ok->outputs.at(0).data.data(), sizeof first);
  float sent = 0;
  std::memcpy(&sent, input.data.data(), sizeof sent);
  EXPECT_EQ(first, sent * 2.0f);
  server->Shutdown();
}

// parameters { warmup_batch_sizes } on the real backend: a model that names two sizes is READY
// and serves the sizes it did not warm; one that names a size past max_batch_size fails its load
// alone, naming the model, the key and the value.
TEST_F(FailedModelTest, WarmupBatchSizesServesEverySizeAndABadOneFailsItsModelAlone) {
  testing::TempDir repo("cs_warmup_sizes");
  examples::ModelOptions o;
  o.max_batch_size = 16;
  o.instance_kind = "KIND_CPU";
  o.extra_config = "parameters { key: \"warmup_batch_sizes\" value { string_value: \"1,16\" } }\n";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "few", o).ok());
  o.extra_config = "parameters { key: \"warmup_batch_sizes\" value { string_value: \"1,17\" } }\n";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "past", o).ok());
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ModelReady("few")), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("past")), "false");
  std::mt19937_64 rng(17);
  const Tensor input{"INPUT__0", DataType::kFp32, {5, 64}, RandomTensorBytes(DataType::kFp32, 5 * 64, rng)};
  auto answer = c->Infer("few", {input});
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->outputs.size(), 1u);
  EXPECT_EQ(answer->outputs[0].shape, (std::vector<int64_t>{5, 16})) << "a batch size the warm-up left out";
  auto refused = c->Infer("past", {input});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("model 'past': parameter warmup_batch_sizes = \"1,17\": 17 exceeds max_batch_size 16"));
  server->Shutdown();
}

TEST(ServerStartTest, AModelRepositoryThatIsNotADirectoryIsRefusedBeforeAnyPortOpens) {
  testing::TempDir dir("cs_no_repo");
  std::ofstream(dir.path() + "/file") << "not a repository";
  for (const std::string& path : {dir.path() + "/missing", dir.path() + "/file"}) {
    auto refused = server::Server::Create(testing::TestServerOptions(path));
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("--model-repository '" + path + "' is not a directory"));
  }
}

// Triton's RepositoryIndex lists every model with its served version and state, a failed one with
// its load error and the version it tried when its config read; `ready` keeps the READY ones. In
// --model-control-mode none (the default), load and unload are refused saying how to turn model
// control on. On both gRPC APIs.
TEST_F(FailedModelTest, RepositoryIndexListsEveryModelAndLoadSaysWhyItIsNotServed) {
  testing::TempDir repo("cs_index");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "good", o).ok());
  repo.WriteFile("broken/config.pbtxt", "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [64 }\n");
  repo.WriteFile("broken/1/model.pt", "not a model");
  // A config that reads, a model file that does not: the index names the version the load tried.
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "bad_file", o).ok());
  repo.WriteFile("bad_file/1/model.pt", "not a model either");
  for (int threads : {0, 2}) {
    SCOPED_TRACE(threads == 0 ? "callback API" : "asynchronous API");
    server::ServerOptions options = testing::TestServerOptions(repo.path());
    options.grpc_infer_threads = threads;
    auto server = testing::StartServer(options);
    ASSERT_NE(server, nullptr);
    auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
    const auto all = testing::RepositoryIndex(c->stub());
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->models_size(), 3);
    EXPECT_EQ(all->models(0).name(), "bad_file");
    EXPECT_EQ(all->models(0).version(), "1");
    EXPECT_EQ(all->models(0).state(), "UNAVAILABLE");
    EXPECT_THAT(all->models(0).reason(), HasSubstr("model 'bad_file' failed to load: "));
    EXPECT_EQ(all->models(1).name(), "broken");
    EXPECT_EQ(all->models(1).version(), "") << "its config does not read: no version known";
    EXPECT_EQ(all->models(1).state(), "UNAVAILABLE");
    EXPECT_THAT(all->models(1).reason(), HasSubstr("model 'broken' failed to load: "));
    EXPECT_THAT(all->models(1).reason(), HasSubstr("broken/config.pbtxt:2:"));
    EXPECT_EQ(all->models(2).name(), "good");
    EXPECT_EQ(all->models(2).version(), "1");
    EXPECT_EQ(all->models(2).state(), "READY");
    EXPECT_EQ(all->models(2).reason(), "");
    const auto ready = testing::RepositoryIndex(c->stub(), /*ready=*/true);
    ASSERT_TRUE(ready.ok()) << ready.status();
    ASSERT_EQ(ready->models_size(), 1);
    EXPECT_EQ(ready->models(0).name(), "good");

    grpc::ClientContext load_ctx;
    load_ctx.set_deadline(testing::TestDeadline());
    inference::RepositoryModelLoadRequest load;
    load.set_model_name("good");
    inference::RepositoryModelLoadResponse loaded;
    const grpc::Status load_status = c->stub()->RepositoryModelLoad(&load_ctx, load, &loaded);
    EXPECT_EQ(load_status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(load_status.error_message(),
                HasSubstr("cannot load model 'good': this server runs with --model-control-mode none (the default)"));
    EXPECT_THAT(load_status.error_message(), HasSubstr("start it with --model-control-mode explicit"));
    grpc::ClientContext unload_ctx;
    unload_ctx.set_deadline(testing::TestDeadline());
    inference::RepositoryModelUnloadRequest unload;
    unload.set_model_name("good");
    inference::RepositoryModelUnloadResponse unloaded;
    const grpc::Status unload_status = c->stub()->RepositoryModelUnload(&unload_ctx, unload, &unloaded);
    EXPECT_EQ(unload_status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(unload_status.error_message(), HasSubstr("cannot unload model 'good'"));
    EXPECT_EQ(testing::Answer(c->ModelReady("good")), "true") << "and the model still serves";
    server->Shutdown();
  }
}

// A second server on a port in use fails to start, naming the address (gRPC would otherwise set
// SO_REUSEPORT and let both share the port's connections).
TEST_F(FailedModelTest, APortInUseFailsTheStartNamingTheAddress) {
  testing::TempDir repo("cs_port");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  auto first = testing::StartServer(repo.path());
  ASSERT_NE(first, nullptr);
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_port = first->port();
  auto second = server::Server::Create(options);
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::Status started = (*second)->Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_THAT(std::string(started.message()),
              HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(first->port()) +
                        ": Address already in use (another process listens there)"));
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(first->port()));
  EXPECT_EQ(testing::Answer(c->ServerLive()), "true") << "the first server still serves";
  first->Shutdown();
}

}  // namespace
}  // namespace chronoserve
