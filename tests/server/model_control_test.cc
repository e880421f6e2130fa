// --model-control-mode explicit on the real server, through real gRPC, on both gRPC APIs: the
// --load-model models at start, RepositoryModelLoad loading, reloading (with no request lost while it
// swaps) and failing with the loaded version still serving, RepositoryModelUnload running the queued
// requests first, and the errors that name what was wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/fakes/finishes_within.h"
#include "common/remove_tree.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;
using client::Tensor;

// MLP "name" on the CPU (max_batch_size 4) with weights from `seed`.
void WriteCpuMlp(const std::string& repository, const std::string& name, uint64_t seed = 7) {
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  o.seed = seed;
  ASSERT_TRUE(examples::WriteMlp(repository, name, o).ok());
}

class ModelControlTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    repo_ = std::make_unique<testing::TempDir>("cs_control");
    WriteCpuMlp(repo_->path(), "a");
    WriteCpuMlp(repo_->path(), "b", 11);
  }

  // Explicit mode with `load` at start, on the test's gRPC API.
  std::unique_ptr<server::Server> Start(std::vector<std::string> load) {
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.grpc_infer_threads = GetParam();
    options.model_control_mode = server::ModelControlMode::kExplicit;
    options.load_models = std::move(load);
    return testing::StartServer(options);
  }

  Tensor Input(uint64_t seed) const {
    std::mt19937_64 rng(seed);
    return Tensor{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  }

  std::unique_ptr<testing::TempDir> repo_;
};

// Whether `runtime` is destroyed within `timeout`: the last call that used it drops it on a gRPC
// thread just after its answer went out, so a moment after the caller has it.
bool FreedWithin(const std::weak_ptr<server::ModelRuntime>& runtime, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!runtime.expired() && absl::Now() < deadline) std::this_thread::yield();
  return runtime.expired();
}

TEST_P(ModelControlTest, LoadsOnlyWhatItIsAskedAndListsTheRest) {
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("b")), "false");
  auto not_loaded = c->Infer("b", {Input(1)});
  ASSERT_EQ(not_loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(not_loaded.status().message(), HasSubstr("unknown model 'b': the model repository has it, but it is "
                                                       "not loaded"));
  EXPECT_THAT(not_loaded.status().message(), HasSubstr("RepositoryModelLoad loads it"));
  auto unknown = c->Infer("nowhere", {Input(1)});
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(), "unknown model 'nowhere'") << "a name the repository does not have either";
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->models_size(), 2) << "the repository's models never loaded are listed too";
  EXPECT_EQ(index->models(0).name(), "a");
  EXPECT_EQ(index->models(0).state(), "READY");
  EXPECT_EQ(index->models(1).name(), "b");
  EXPECT_EQ(index->models(1).state(), "") << "never loaded: no state, as Triton";
  EXPECT_EQ(index->models(1).version(), "");
  auto ready_only = testing::RepositoryIndex(c->stub(), /*ready=*/true);
  ASSERT_TRUE(ready_only.ok());
  ASSERT_EQ(ready_only->models_size(), 1);
  auto metadata = c->ServerMetadata();
  ASSERT_TRUE(metadata.ok());
  EXPECT_THAT(std::vector<std::string>(metadata->extensions().begin(), metadata->extensions().end()),
              ::testing::Contains("model_repository"));

  const int warmed_at_start = server->serving_warmup_report().sent;
  const grpc::Status loaded = testing::LoadModel(c->stub(), "b");
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  EXPECT_EQ(testing::Answer(c->ModelReady("b")), "true") << "READY when the load is answered";
  // Its serving path was warmed before the answer, as at start: 4 unary calls at batch 1, 4 at 4, a
  // stream of 4; counted in no statistics.
  EXPECT_EQ(server->serving_warmup_report().sent - warmed_at_start, 12);
  EXPECT_EQ(server->serving_warmup_report().failed, 0) << server->serving_warmup_report().first_error;
  auto stats = c->ModelStatistics("b");
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->model_stats_size(), 1);
  EXPECT_EQ(stats->model_stats(0).inference_count(), 0u) << "the warm-up is counted nowhere";
  auto inferred = c->Infer("b", {Input(2)});
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_EQ(inferred->outputs.at(0).shape, (std::vector<int64_t>{1, 16}));
  index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->models(1).state(), "READY");
  EXPECT_EQ(index->models(1).version(), "1");
  server->Shutdown();
}

TEST_P(ModelControlTest, UnloadRefusesNewRequestsAndLoadServesAgain) {
  auto server = Start({"*"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ModelReady("b")), "true") << "'*' loads every model";
  const grpc::Status unloaded = testing::UnloadModel(c->stub(), "a", "unload_dependents");
  ASSERT_TRUE(unloaded.ok()) << unloaded.error_message();
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "false");
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true") << "an unloaded model does not count against READY";
  auto refused = c->Infer("a", {Input(3)});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model 'a' is unloaded"));
  auto named = c->ModelMetadata("a", "1");
  EXPECT_EQ(named.status().code(), absl::StatusCode::kUnavailable) << "a named version, as a failed model";
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->models(0).name(), "a");
  EXPECT_EQ(index->models(0).state(), "UNAVAILABLE");
  EXPECT_EQ(index->models(0).version(), "1");
  EXPECT_THAT(index->models(0).reason(), HasSubstr("unloaded"));
  EXPECT_TRUE(c->Infer("b", {Input(4)}).ok()) << "the other model serves on";

  EXPECT_TRUE(testing::UnloadModel(c->stub(), "a").ok()) << "unloading a model not loaded does nothing, as Triton";
  const grpc::Status unknown = testing::UnloadModel(c->stub(), "nosuch");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("has no model directory 'nosuch' (it has a, b)"));

  ASSERT_TRUE(testing::LoadModel(c->stub(), "a").ok());
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true");
  EXPECT_TRUE(c->Infer("a", {Input(5)}).ok());
  server->Shutdown();
}

// A repository that cannot be listed (gone for a moment: a network filesystem's hiccup) says nothing
// of a model's directory: a loaded model unloads and stays in the index, and a name the server does
// not know is answered with the listing's error, not OK.
TEST_P(ModelControlTest, AnUnloadWhileTheRepositoryCannotBeListed) {
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const std::string aside = repo_->path() + ".aside";
  std::filesystem::rename(repo_->path(), aside);
  absl::Cleanup back = [&] { std::filesystem::rename(aside, repo_->path()); };
  const grpc::Status unloaded = testing::UnloadModel(c->stub(), "a");
  EXPECT_TRUE(unloaded.ok()) << unloaded.error_message();
  const grpc::Status unknown = testing::UnloadModel(c->stub(), "nosuch");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
  EXPECT_THAT(unknown.error_message(), HasSubstr("cannot unload model 'nosuch': "));
  std::move(back).Invoke();
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_GE(index->models_size(), 1);
  EXPECT_EQ(index->models(0).name(), "a") << "the unloaded model stays listed";
  EXPECT_EQ(index->models(0).state(), "UNAVAILABLE");
  server->Shutdown();
}

// A request queued in the model when the unload comes runs (at once: no batching window), then the
// unload is answered.
TEST_P(ModelControlTest, UnloadRunsTheQueuedRequestsFirst) {
  WriteCpuMlp(repo_->path(), "slow");  // a minute's batching window: the requests wait for a batch of 8
  repo_->WriteFile("slow/config.pbtxt",
                   "max_batch_size: 8\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 64 }\n"
                   "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 16 }\ninstance_group { kind: KIND_CPU }\n"
                   "dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 60000000 }\n");
  auto server = Start({"slow"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto runtime = server->registry().Find("slow", "");
  ASSERT_TRUE(runtime.ok());
  constexpr int kQueued = 3;
  std::vector<absl::Status> results(kQueued);
  std::vector<std::thread> callers;
  for (int i = 0; i < kQueued; ++i) {
    callers.emplace_back([&, i] { results[i] = c->Infer("slow", {Input(10 + i)}).status(); });
  }
  ASSERT_TRUE((*runtime)->queue().WaitForSize(kQueued, absl::Seconds(30))) << "the requests never queued";
  const absl::Time start = absl::Now();
  const grpc::Status unloaded = testing::UnloadModel(c->stub(), "slow");
  EXPECT_TRUE(unloaded.ok()) << unloaded.error_message();
  for (auto& t : callers) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "the queued requests waited out their batching window";
  for (int i = 0; i < kQueued; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
  EXPECT_EQ((*runtime)->queue().size(), 0u);
  const std::weak_ptr<server::ModelRuntime> unloaded_runtime = *runtime;
  runtime = absl::NotFoundError("released");
  EXPECT_TRUE(FreedWithin(unloaded_runtime, absl::Seconds(10))) << "an unloaded model is freed, not leaked";
  server->Shutdown();
}

// A reload while clients keep sending: the loaded version serves until the new one is READY, then
// the new one does; no request fails. The new version directory is the one served after it.
TEST_P(ModelControlTest, ReloadLosesNoRequestAndServesTheNewVersion) {
  testing::TempDir other("cs_control_v2");
  WriteCpuMlp(other.path(), "a", 99);
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = Input(6);
  auto before = c->Infer("a", {input});
  ASSERT_TRUE(before.ok()) << before.status();
  auto first = server->registry().Find("a", "");
  ASSERT_TRUE(first.ok());
  const std::weak_ptr<server::ModelRuntime> first_runtime = *first;
  first = absl::NotFoundError("released");

  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::atomic<int> failed{0};
  std::string first_failure;
  absl::Mutex failure_mu;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      auto own = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
      for (int i = 0; !stop.load(); ++i) {
        auto r = own->Infer("a", {Input(100 * t + i)});
        sent.fetch_add(1);
        if (!r.ok()) {
          failed.fetch_add(1);
          absl::MutexLock lock(&failure_mu);
          if (first_failure.empty()) first_failure = r.status().ToString();
        }
      }
    });
  }
  // Each reload waits until the clients have sent a few requests more, so requests arrive while
  // every reload swaps (a reload of this model takes milliseconds).
  constexpr int kReloads = 20;
  for (int reload = 0; reload < kReloads; ++reload) {
    const int floor = sent.load() + 8;
    const absl::Time wait_until = absl::Now() + absl::Seconds(60);
    while (sent.load() < floor && failed.load() == 0 && absl::Now() < wait_until) std::this_thread::yield();
    if (sent.load() < floor && failed.load() == 0) {
      ADD_FAILURE() << "the clients sent no 8 requests more within 60 s (reload " << reload << ")";
      break;  // the clients are still stopped and joined below
    }
    if (reload == kReloads - 1) {  // the last reload finds version 2
      std::filesystem::create_directories(std::filesystem::path(repo_->path()) / "a" / "2");
      std::filesystem::copy_file(std::filesystem::path(other.path()) / "a" / "1" / "model.pt",
                                 std::filesystem::path(repo_->path()) / "a" / "2" / "model.pt");
    }
    const grpc::Status reloaded = testing::LoadModel(c->stub(), "a");
    EXPECT_TRUE(reloaded.ok()) << reloaded.error_message();
  }
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GE(sent.load(), 8 * kReloads);
  EXPECT_EQ(failed.load(), 0) << "of " << sent.load() << "; first: " << first_failure;

  auto metadata = c->ModelMetadata("a");
  ASSERT_TRUE(metadata.ok());
  ASSERT_EQ(metadata->versions_size(), 1);
  EXPECT_EQ(metadata->versions(0), "2");
  auto after = c->Infer("a", {input});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->outputs.at(0).data, before->outputs.at(0).data) << "version 2 has other weights";
  EXPECT_TRUE(FreedWithin(first_runtime, absl::Seconds(10))) << "a replaced version is freed, not leaked";
  server->Shutdown();
}

// A stream that used a model goes on across its reload, served by the new version, and does not
// keep the replaced one alive.
TEST_P(ModelControlTest, AStreamGoesOnAcrossAReloadWithoutHoldingTheOldVersion) {
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto stream = client::InferStream::Open(c->stub());
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(stream->Send(client::InferenceClient::BuildRequest("a", {Input(20)}, {.id = "before"})));
  auto first = stream->Next(absl::Seconds(30));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->message.error_message(), "");
  auto loaded = server->registry().Find("a", "");
  ASSERT_TRUE(loaded.ok());
  const std::weak_ptr<server::ModelRuntime> old_runtime = *loaded;
  loaded = absl::NotFoundError("released");
  ASSERT_TRUE(testing::LoadModel(c->stub(), "a").ok());
  EXPECT_TRUE(FreedWithin(old_runtime, absl::Seconds(10))) << "the open stream holds the replaced version";
  ASSERT_TRUE(stream->Send(client::InferenceClient::BuildRequest("a", {Input(21)}, {.id = "after"})));
  auto second = stream->Next(absl::Seconds(30));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->message.error_message(), "");
  EXPECT_EQ(second->message.infer_response().id(), "after");
  stream->CloseSend();
  auto finished = stream->Finish(absl::Seconds(30));
  ASSERT_TRUE(finished.has_value());
  EXPECT_TRUE(finished->ok()) << finished->error_message();
  server->Shutdown();
}

// A reload that fails leaves the loaded version serving; a first load that fails marks the model
// failed without taking the server out of READY.
TEST_P(ModelControlTest, AFailedLoadSaysWhyAndAFailedReloadKeepsTheLoadedVersion) {
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  repo_->WriteFile("a/config.pbtxt", "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [64 }\n");
  const grpc::Status reload = testing::LoadModel(c->stub(), "a");
  EXPECT_FALSE(reload.ok());
  EXPECT_THAT(reload.error_message(), HasSubstr("model 'a' not reloaded (the version loaded before goes on serving)"));
  EXPECT_THAT(reload.error_message(), HasSubstr("a/config.pbtxt:2:"));
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true");
  EXPECT_TRUE(c->Infer("a", {Input(7)}).ok());

  repo_->WriteFile("broken/config.pbtxt", "max_batch_size: 4\n");
  repo_->WriteFile("broken/1/model.pt", "not a model");
  const grpc::Status broken = testing::LoadModel(c->stub(), "broken");
  EXPECT_FALSE(broken.ok());
  EXPECT_THAT(broken.error_message(), HasSubstr("broken"));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true") << "the caller was told; the server serves on";
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->models_size(), 3);
  EXPECT_EQ(index->models(2).name(), "broken");
  EXPECT_EQ(index->models(2).state(), "UNAVAILABLE");
  EXPECT_THAT(index->models(2).reason(), HasSubstr("model 'broken' failed to load"));
  server->Shutdown();
}

TEST_P(ModelControlTest, RequestsItCannotTakeAreRefusedSayingWhy) {
  auto server = Start({});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true") << "no model asked for, none failed";
  const grpc::Status empty = testing::LoadModel(c->stub(), "");
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status outside = testing::LoadModel(c->stub(), "..");
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outside.error_message(), HasSubstr("not a single path component"));
  const grpc::Status slash = testing::LoadModel(c->stub(), "a/../b");
  EXPECT_EQ(slash.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status missing = testing::LoadModel(c->stub(), "nosuch");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.error_message(), HasSubstr("has no model directory 'nosuch' (it has a, b)"));
  const grpc::Status file = testing::LoadModel(c->stub(), "a", "file:1/model.pt");
  EXPECT_EQ(file.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(file.error_message(), HasSubstr("parameter 'file:1/model.pt' takes a bytes_param (the file's contents)"));
  const grpc::Status other = testing::LoadModel(c->stub(), "a", "weights");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(other.error_message(),
              HasSubstr("parameter 'weights' is not supported (a load takes 'config' and 'file:<path>' model files)"));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::TestDeadline());
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("a");
    (*request.mutable_parameters())["config"].set_bool_param(true);
    inference::RepositoryModelLoadResponse response;
    const grpc::Status not_string = c->stub()->RepositoryModelLoad(&ctx, request, &response);
    EXPECT_EQ(not_string.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(not_string.error_message(), HasSubstr("parameter 'config' takes a string_param"));
  }
  const grpc::Status repository = testing::LoadModel(c->stub(), "a", "", "elsewhere");
  EXPECT_EQ(repository.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(repository.error_message(), HasSubstr("no repository named 'elsewhere'"));
  EXPECT_TRUE(testing::LoadModel(c->stub(), "a", "", repo_->path()).ok()) << "the repository's own path names it";
  EXPECT_TRUE(testing::LoadModel(c->stub(), "a", "", repo_->path() + "/").ok()) << "with a trailing '/' too";
  grpc::ClientContext index_ctx;
  index_ctx.set_deadline(testing::TestDeadline());
  inference::RepositoryIndexRequest index_request;
  index_request.set_repository_name("elsewhere");
  inference::RepositoryIndexResponse index_response;
  EXPECT_EQ(c->stub()->RepositoryIndex(&index_ctx, index_request, &index_response).error_code(),
            grpc::StatusCode::NOT_FOUND) << "the index names the same repositories as load and unload";
  const grpc::Status nul = testing::LoadModel(c->stub(), std::string("a\0b", 3));
  EXPECT_EQ(nul.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(nul.error_message(), HasSubstr("holds a NUL byte"));
  const grpc::Status unload_param = testing::UnloadModel(c->stub(), "a", "force");
  EXPECT_EQ(unload_param.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unload_param.error_message(), HasSubstr("parameter 'force' is not supported"));
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true") << "a refused unload changes nothing";
  server->Shutdown();
}

// Triton's "config" load parameter: the model configuration as JSON serves this load in place of
// config.pbtxt (ModelConfig reports it, requests are checked against it); a load without it reads
// config.pbtxt again; a bad one is refused naming what is wrong, and the version loaded goes on.
TEST_P(ModelControlTest, ALoadsConfigServesInPlaceOfConfigPbtxt) {
  auto server = Start({"a"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto max_batch = [&]() -> int64_t {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::TestDeadline());
    inference::ModelConfigRequest request;
    request.set_name("a");
    inference::ModelConfigResponse response;
    const grpc::Status status = c->stub()->ModelConfig(&ctx, request, &response);
    return status.ok() ? response.config().max_batch_size() : -1;
  };
  auto infer = [&](int64_t batch) {
    std::mt19937_64 rng(static_cast<uint64_t>(batch) + 3);
    return c->Infer("a", {Tensor{"INPUT__0", DataType::kFp32, {batch, 64},
                                 RandomTensorBytes(DataType::kFp32, static_cast<size_t>(64 * batch), rng)}});
  };
  ASSERT_EQ(max_batch(), 4);
  const std::string io = R"("input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [64]}],
                            "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [16]}],
                            "instance_group": [{"kind": "KIND_CPU"}])";
  const grpc::Status loaded = testing::LoadModelWithConfig(c->stub(), "a", "{\"max_batch_size\": 2, " + io + "}");
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  EXPECT_EQ(max_batch(), 2);
  EXPECT_TRUE(infer(2).ok());
  const auto too_big = infer(3);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr("exceeds max_batch_size 2"));

  const grpc::Status typo = testing::LoadModelWithConfig(c->stub(), "a", "{\"max_batch\": 8, " + io + "}");
  EXPECT_EQ(typo.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(typo.error_message(), HasSubstr("model 'a' not reloaded (the version loaded before goes on serving)"));
  EXPECT_THAT(typo.error_message(), HasSubstr("RepositoryModelLoad's 'config': unknown field 'max_batch' in ModelConfig"));
  const grpc::Status not_json = testing::LoadModelWithConfig(c->stub(), "a", "max_batch_size: 8");
  EXPECT_EQ(not_json.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(not_json.error_message(), HasSubstr("not a model configuration in JSON"));
  EXPECT_EQ(max_batch(), 2) << "the loaded version serves on";

  ASSERT_TRUE(testing::LoadModel(c->stub(), "a").ok());
  EXPECT_EQ(max_batch(), 4) << "a load without 'config' reads config.pbtxt again";
  EXPECT_TRUE(infer(3).ok());
  server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Apis, ModelControlTest, ::testing::Values(0, 2), testing::InferApiName);

// Flags the start refuses: --load-model without explicit mode, '*' beside another name, a bad name.
TEST(ModelControlOptionsTest, TheStartRefusesLoadModelsItCannotServe) {
  testing::TempDir repo("cs_control_opts");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.load_models = {"a"};
  auto none = server::Server::Create(options);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("needs --model-control-mode explicit"));
  options.model_control_mode = server::ModelControlMode::kPoll;
  auto poll = server::Server::Create(options);
  ASSERT_FALSE(poll.ok());
  EXPECT_THAT(std::string(poll.status().message()), HasSubstr("needs --model-control-mode explicit"));
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.load_models = {"*", "a"};
  auto star = server::Server::Create(options);
  ASSERT_FALSE(star.ok());
  EXPECT_THAT(std::string(star.status().message()), HasSubstr("must be the only --load-model"));
  options.load_models = {"../a"};
  auto bad = server::Server::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not a single path component"));
}

// A --load-model the repository lacks fails that model (NOT_FOUND, naming what the repository has)
// and keeps the server from READY, as any model it was started with that did not load.
TEST(ModelControlOptionsTest, AMissingLoadModelFailsLikeAModelThatDidNotLoad) {
  testing::TempDir repo("cs_control_missing");
  WriteCpuMlp(repo.path(), "a");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.load_models = {"a", "nosuch"};
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "false");
  auto missing = c->Infer("nosuch", {client::Tensor{"INPUT__0", DataType::kFp32, {1, 64}, std::string(256, '\1')}});
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("has no model directory 'nosuch' (it has a)"));
  // Unloading the model that failed takes it out of the count: the server is READY again.
  ASSERT_TRUE(testing::UnloadModel(c->stub(), "nosuch").ok());
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true");
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->models_size(), 1) << "a model with no directory leaves the index once unloaded";
  EXPECT_EQ(index->models(0).name(), "a");
  EXPECT_EQ(testing::UnloadModel(c->stub(), "nosuch").error_code(), grpc::StatusCode::NOT_FOUND) << "and is then unknown";
  server->Shutdown();
}

// --model-control-mode poll: the repository scanned every 50 ms; a model directory added is loaded,
// a new version directory is served after its reload, a config broken by a change leaves the loaded
// version serving, and a directory removed unloads its model. Explicit loads are refused.
TEST(ModelControlPollTest, ScansLoadWhatIsAddedReloadWhatChangedAndUnloadWhatIsGone) {
  testing::TempDir repo("cs_control_poll");
  WriteCpuMlp(repo.path(), "a");
  WriteCpuMlp(repo.path(), "b", 11);
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kPoll;
  options.repository_poll_interval = absl::Milliseconds(50);
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true");
  EXPECT_EQ(testing::Answer(c->ModelReady("b")), "true");
  const grpc::Status refused = testing::LoadModel(c->stub(), "a");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--model-control-mode poll"));
  // A change is seen by the second scan to finish after it: the first may have begun before it.
  auto two_more_scans = [&] {
    return server->AwaitRepositoryPolls(server->repository_polls() + 2, absl::Seconds(60));
  };
  ASSERT_TRUE(two_more_scans()) << "the repository is scanned";
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "true") << "nothing changed: nothing reloaded";

  WriteCpuMlp(repo.path(), "c", 13);
  ASSERT_TRUE(two_more_scans());
  EXPECT_EQ(testing::Answer(c->ModelReady("c")), "true") << "a directory added is loaded";
  std::mt19937_64 rng(8);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  EXPECT_TRUE(c->Infer("c", {input}).ok());

  std::filesystem::create_directories(std::filesystem::path(repo.path()) / "a" / "2");
  std::filesystem::copy_file(std::filesystem::path(repo.path()) / "a" / "1" / "model.pt",
                             std::filesystem::path(repo.path()) / "a" / "2" / "model.pt");
  ASSERT_TRUE(two_more_scans());
  auto metadata = c->ModelMetadata("a");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  ASSERT_EQ(metadata->versions_size(), 1);
  EXPECT_EQ(metadata->versions(0), "2") << "a new version directory is served after its reload";

  repo.WriteFile("b/config.pbtxt", "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [64 }\n");
  ASSERT_TRUE(two_more_scans());
  EXPECT_EQ(testing::Answer(c->ModelReady("b")), "true") << "a failed reload keeps the loaded version";
  EXPECT_TRUE(c->Infer("b", {input}).ok());

  RemoveTree((std::filesystem::path(repo.path()) / "a").string());
  ASSERT_TRUE(two_more_scans());
  EXPECT_EQ(testing::Answer(c->ModelReady("a")), "false") << "a directory removed is unloaded";
  auto gone = c->Infer("a", {input});
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok());
  for (const auto& model : index->models()) EXPECT_NE(model.name(), "a") << "and leaves the index";
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true");
  server->Shutdown();
}

// A model directory that came after the start and that no one loaded: a request for it says so,
// and how it would be loaded, in each mode that can leave one unloaded (explicit: above).
TEST(ModelControlModesTest, AModelDirectoryNotLoadedYetIsNamedSo) {
  for (const auto mode : {server::ModelControlMode::kNone, server::ModelControlMode::kPoll}) {
    const bool poll = mode == server::ModelControlMode::kPoll;
    SCOPED_TRACE(poll ? "poll" : "none");
    testing::TempDir repo("cs_control_late");
    WriteCpuMlp(repo.path(), "a");
    server::ServerOptions options = testing::TestServerOptions(repo.path());
    options.model_control_mode = mode;
    options.repository_poll_interval = absl::Hours(1);  // no scan comes while the test runs
    auto server = testing::StartServer(options);
    ASSERT_NE(server, nullptr);
    WriteCpuMlp(repo.path(), "late", 5);
    repo.WriteFile(".hidden/config.pbtxt", "max_batch_size: 4\n");
    auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
    std::mt19937_64 rng(4);
    const Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
    ASSERT_TRUE(c->Infer("a", {input}).ok());
    auto late = c->Infer("late", {input});
    ASSERT_EQ(late.status().code(), absl::StatusCode::kNotFound);
    if (poll) {
      EXPECT_THAT(late.status().message(), HasSubstr("unknown model 'late': its directory is in the model repository, "
                                                     "but no scan has loaded it yet"));
      EXPECT_THAT(late.status().message(), HasSubstr("every 1h"));
    } else {
      EXPECT_THAT(late.status().message(), HasSubstr("unknown model 'late': its directory is in the model repository, "
                                                     "but came after the server's start"));
      EXPECT_THAT(late.status().message(), HasSubstr("--model-control-mode poll or explicit"));
    }
    auto metadata = c->ModelMetadata("late");
    EXPECT_EQ(metadata.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(metadata.status().message(), late.status().message()) << "every RPC that names a model says the same";
    auto hidden = c->Infer(".hidden", {input});
    EXPECT_EQ(hidden.status().message(), "unknown model '.hidden'") << "a hidden directory is no model's";
    server->Shutdown();
  }
}

// Shutdown while a load warms up: the load stops at its next warm-up run and is answered
// UNAVAILABLE (worth retrying elsewhere), and Shutdown returns.
TEST(ModelControlShutdownTest, ShutdownAnswersTheLoadInProgressUnavailable) {
  testing::TempDir repo("cs_control_stop");
  WriteCpuMlp(repo.path(), "a");
  server::ServerOptions options = testing::TestServerOptions(repo.path(), /*warmup_runs=*/100000000);
  options.model_control_mode = server::ModelControlMode::kExplicit;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  grpc::Status loaded;
  std::thread loader([&] { loaded = testing::LoadModel(c->stub(), "a"); });
  // The warm-up of 10^8 runs per batch size would take hours: the load is LOADING until stopped.
  bool loading = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30); !loading && absl::Now() < deadline;) {
    auto index = testing::RepositoryIndex(c->stub());
    ASSERT_TRUE(index.ok()) << index.status();
    loading = index->models_size() == 1 && index->models(0).state() == "LOADING";
    if (!loading) std::this_thread::yield();
  }
  ASSERT_TRUE(loading) << "the load never began";
  testing::FinishesWithin("Shutdown during a load", absl::Seconds(60), [&] { server->Shutdown(); });
  loader.join();
  EXPECT_EQ(loaded.error_code(), grpc::StatusCode::UNAVAILABLE) << loaded.error_message();
  EXPECT_THAT(loaded.error_message(), HasSubstr("model 'a' not loaded: the server is shutting down"));
}

}  // namespace
}  // namespace chronoserve
