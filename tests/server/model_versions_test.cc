// A model serving several versions at once, on the real server through real gRPC: the version
// policy (`all`, `latest { num_versions: N }`, `specific`) picks them, a request that names a version
// runs on that version's weights, one that names none on the highest, and every RPC that reports on a
// model (ModelMetadata, ModelConfig, ModelReady, ModelStatistics, RepositoryIndex) answers per version.
// Under model control a reload replaces the whole set (the versions left out are freed), an unload
// takes every version out, and a version that fails to load leaves the others serving (a model none
// of whose versions loads fails, naming the first).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "absl/synchronization/mutex.h"
#include "tests/server/manager_under_test.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/start_barrier.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "server/model_manager.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using client::Tensor;

// Seeds of versions 1, 2 and 3's weights.
const std::map<int, uint64_t> kSeeds = {{1, 101}, {2, 202}, {3, 303}};

// Model "m" in `repository` with versions 1-3 (an MLP on the CPU, each version's weights from its
// seed) under `policy`, and "ref<N>": version N's weights alone, a model of one version, to check
// which version answered.
void WriteVersionedModel(const std::string& repository, const std::string& policy) {
  testing::TempDir scratch("cs_versions_scratch");
  for (const auto& [version, seed] : kSeeds) {
    examples::ModelOptions o;
    o.max_batch_size = 4;
    o.instance_kind = "KIND_CPU";
    o.seed = seed;
    const std::string ref = "ref" + std::to_string(version);
    ASSERT_TRUE(examples::WriteMlp(repository, ref, o).ok());
    if (version == 1) {
      o.extra_config = policy;
      ASSERT_TRUE(examples::WriteMlp(repository, "m", o).ok());
      continue;
    }
    ASSERT_TRUE(testing::CopyModelVersion(repository, ref, 1, "m", version));
  }
}

Tensor Input(uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
}

// OUTPUT__0's bytes from `model` at `version` ("" = the server's choice), or the error as text.
std::string Output(client::InferenceClient& c, const std::string& model, const std::string& version,
                   const Tensor& input) {
  client::InferOptions options;
  options.version = version;
  auto r = c.Infer(model, {input}, options);
  if (!r.ok()) return r.status().ToString();
  return r->outputs.at(0).data;
}

std::vector<std::string> MetadataVersions(client::InferenceClient& c, const std::string& model) {
  auto metadata = c.ModelMetadata(model);
  if (!metadata.ok()) return {metadata.status().ToString()};
  return {metadata->versions().begin(), metadata->versions().end()};
}

// ModelConfig's version_policy (at `version`) as protobuf text, or the error.
std::string ConfigPolicy(inference::GRPCInferenceService::Stub* stub, const std::string& model,
                         const std::string& version = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::ModelConfigRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelConfigResponse response;
  const grpc::Status status = stub->ModelConfig(&ctx, request, &response);
  if (!status.ok()) return status.error_message();
  return response.config().version_policy().ShortDebugString();
}

// "name:version:state" for each index entry of `model`.
std::vector<std::string> IndexOf(inference::GRPCInferenceService::Stub* stub, const std::string& model) {
  auto index = testing::RepositoryIndex(stub);
  if (!index.ok()) return {index.status().ToString()};
  std::vector<std::string> out;
  for (const auto& entry : index->models()) {
    if (entry.name() == model) out.push_back(entry.name() + ":" + entry.version() + ":" + entry.state());
  }
  return out;
}

class ModelVersionsTest : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<server::Server> Start(const std::string& repository) {
    server::ServerOptions options = testing::TestServerOptions(repository);
    options.grpc_infer_threads = GetParam();
    return testing::StartServer(options);
  }
  // Explicit model control on the test's gRPC API, with `load` loaded at start.
  std::unique_ptr<server::Server> StartExplicit(const std::string& repository, std::vector<std::string> load) {
    server::ServerOptions options = testing::TestServerOptions(repository);
    options.grpc_infer_threads = GetParam();
    options.model_control_mode = server::ModelControlMode::kExplicit;
    options.load_models = std::move(load);
    return testing::StartServer(options);
  }
};

TEST_P(ModelVersionsTest, PolicyAllServesEveryVersionEachOnItsOwnWeights) {
  testing::TempDir repo("cs_versions_all");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  auto server = Start(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = Input(5);

  std::map<int, std::string> by_version;
  for (const auto& [version, seed] : kSeeds) {
    by_version[version] = Output(*c, "m", std::to_string(version), input);
    EXPECT_EQ(by_version[version], Output(*c, "ref" + std::to_string(version), "", input))
        << "version " << version << " answers with its own weights";
  }
  EXPECT_NE(by_version[1], by_version[2]);
  EXPECT_NE(by_version[2], by_version[3]);
  EXPECT_EQ(Output(*c, "m", "", input), by_version[3]) << "no version named: the highest";

  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "2", "3"));
  for (const std::string version : {"1", "2", "3"}) {
    EXPECT_EQ(testing::Answer(c->ModelReady("m", version)), "true") << version;
  }
  EXPECT_EQ(testing::Answer(c->ModelReady("m", "4")), "false");
  client::InferOptions options;
  options.version = "4";
  auto unknown = c->Infer("m", {input}, options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("model 'm' has no version '4' (serving versions 1, 2, 3)"));

  EXPECT_EQ(ConfigPolicy(c->stub(), "m", "2"), "all { }") << "the policy as configured, for any version";

  // With several versions served, an error names the one that answered; with one, none.
  Tensor wrong = input;
  wrong.shape = {1, 32};
  wrong.data.resize(32 * sizeof(float));
  EXPECT_THAT(Output(*c, "m", "2", wrong), HasSubstr("model 'm' version 2 input 'INPUT__0'"));
  EXPECT_THAT(Output(*c, "m", "", wrong), HasSubstr("model 'm' version 3 input 'INPUT__0'")) << "the highest answered";
  EXPECT_THAT(Output(*c, "ref2", "", wrong), HasSubstr("model 'ref2' input 'INPUT__0'"));

  // Statistics: one entry per version without a version named; each counted its own requests (two
  // for version 3: by number and unnamed; none for the refused version 4).
  auto stats = c->ModelStatistics("m");
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::map<std::string, uint64_t> counts;
  for (const auto& s : stats->model_stats()) {
    EXPECT_EQ(s.name(), "m");
    counts[s.version()] = s.inference_count();
  }
  EXPECT_EQ(counts, (std::map<std::string, uint64_t>{{"1", 1}, {"2", 1}, {"3", 2}}));

  EXPECT_THAT(IndexOf(c->stub(), "m"), ElementsAre("m:1:READY", "m:2:READY", "m:3:READY"));
  server->Shutdown();
}

TEST_P(ModelVersionsTest, LatestAndSpecificServeTheVersionsTheyName) {
  struct Row {
    std::string policy;
    std::vector<std::string> served;
    std::string refused;  // a version on disk the policy leaves out
    std::string answered;  // ModelConfig's version_policy: as configured (Triton's default when none)
  };
  const std::vector<Row> rows = {
      {"version_policy { latest { num_versions: 2 } }", {"2", "3"}, "1", "latest { num_versions: 2 }"},
      {"version_policy { specific { versions: [1, 3, 7] } }", {"1", "3"}, "2", "specific { versions: 1 versions: 3 versions: 7 }"},
      {"", {"3"}, "2", "latest { num_versions: 1 }"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.policy);
    testing::TempDir repo("cs_versions_policy");
    WriteVersionedModel(repo.path(), row.policy);
    auto server = Start(repo.path());
    ASSERT_NE(server, nullptr);
    auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
    const Tensor input = Input(9);
    EXPECT_EQ(MetadataVersions(*c, "m"), row.served);
    EXPECT_EQ(ConfigPolicy(c->stub(), "m"), row.answered);
    for (const std::string& version : row.served) {
      EXPECT_EQ(Output(*c, "m", version, input), Output(*c, "ref" + version, "", input)) << version;
    }
    EXPECT_THAT(Output(*c, "m", row.refused, input), HasSubstr("has no version '" + row.refused + "'"));
    server->Shutdown();
  }
}

// Whether every one of `runtimes` is destroyed within `timeout` (the last call that used one drops
// it on a gRPC thread just after its answer went out).
bool AllFreedWithin(const std::vector<std::weak_ptr<server::ModelRuntime>>& runtimes, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto all_expired = [&] {
    for (const auto& r : runtimes) {
      if (!r.expired()) return false;
    }
    return true;
  };
  while (!all_expired() && absl::Now() < deadline) std::this_thread::yield();
  return all_expired();
}

TEST_P(ModelVersionsTest, AReloadReplacesTheSetAndAnUnloadTakesEveryVersion) {
  testing::TempDir repo("cs_versions_control");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  auto server = StartExplicit(repo.path(), {"m", "ref1", "ref3"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = Input(13);
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "2", "3"));
  auto before = server->registry().FindVersions("m", "");
  ASSERT_TRUE(before.ok()) << before.status();
  std::vector<std::weak_ptr<server::ModelRuntime>> replaced(before->begin(), before->end());
  before = absl::NotFoundError("released");

  // The policy now names versions 1 and 3: version 2 leaves, versions 1 and 3 are loaded anew.
  std::string config;
  {
    std::ifstream in(fs::path(repo.path()) / "m" / "config.pbtxt");
    config.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = config.find("version_policy { all { } }");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, std::string("version_policy { all { } }").size(), "version_policy { specific { versions: [1, 3] } }");
  std::ofstream(fs::path(repo.path()) / "m" / "config.pbtxt") << config;
  const grpc::Status reloaded = testing::LoadModel(c->stub(), "m");
  ASSERT_TRUE(reloaded.ok()) << reloaded.error_message();
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "3"));
  EXPECT_EQ(Output(*c, "m", "1", input), Output(*c, "ref1", "", input));
  EXPECT_EQ(Output(*c, "m", "", input), Output(*c, "ref3", "", input));
  EXPECT_THAT(Output(*c, "m", "2", input), HasSubstr("has no version '2' (serving versions 1, 3)"));
  EXPECT_TRUE(AllFreedWithin(replaced, absl::Seconds(10))) << "the replaced versions are freed, not leaked";
  EXPECT_THAT(IndexOf(c->stub(), "m"), ElementsAre("m:1:READY", "m:3:READY"));

  auto loaded = server->registry().FindVersions("m", "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<std::weak_ptr<server::ModelRuntime>> unloaded(loaded->begin(), loaded->end());
  loaded = absl::NotFoundError("released");
  const grpc::Status unload = testing::UnloadModel(c->stub(), "m");
  ASSERT_TRUE(unload.ok()) << unload.error_message();
  for (const std::string version : {"", "1", "3"}) {
    EXPECT_THAT(Output(*c, "m", version, input), HasSubstr("model 'm' is unloaded")) << version;
  }
  EXPECT_TRUE(AllFreedWithin(unloaded, absl::Seconds(10))) << "every version is freed";
  EXPECT_THAT(IndexOf(c->stub(), "m"), ElementsAre("m:1:UNAVAILABLE", "m:3:UNAVAILABLE")) << "each version, as Triton";
  server->Shutdown();
}

// As Triton, a version that fails to load leaves the others serving: lookups naming it answer
// UNAVAILABLE with its error, the index lists it, and (a model the server started with) the server
// is not READY. Only a model none of whose versions loads fails whole, naming the first version.
TEST_P(ModelVersionsTest, AVersionThatFailsLeavesTheOthersServing) {
  testing::TempDir repo("cs_versions_fail");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  std::ofstream(fs::path(repo.path()) / "m" / "2" / "model.pt") << "not TorchScript";
  // "none": two versions, neither TorchScript.
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  o.extra_config = "version_policy { all { } }";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "none", o).ok());
  fs::create_directories(fs::path(repo.path()) / "none" / "2");
  std::ofstream(fs::path(repo.path()) / "none" / "1" / "model.pt") << "not TorchScript either";
  std::ofstream(fs::path(repo.path()) / "none" / "2" / "model.pt") << "nor this";
  // "gap": version 2's directory holds no model file.
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "gap", o).ok());
  fs::create_directories(fs::path(repo.path()) / "gap" / "2");
  // "warm": version 2 loads but its forward fails at the warm-up, in the worker.
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "warm", o).ok());
  fs::create_directories(fs::path(repo.path()) / "warm" / "2");
  ASSERT_TRUE(testing::WriteScriptedModel((fs::path(repo.path()) / "warm" / "2" / "model.pt").string(),
                                          "def forward(self, x):\n"
                                          "  assert x.size(1) == 3, 'wants 3 columns'\n"
                                          "  return x[:, :16]\n"));
  auto server = Start(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "false") << "strict readiness: a version failed";
  const Tensor input = Input(17);
  EXPECT_EQ(Output(*c, "m", "1", input), Output(*c, "ref1", "", input));
  EXPECT_EQ(Output(*c, "m", "", input), Output(*c, "ref3", "", input)) << "the highest version that serves";
  const std::string v2 = Output(*c, "m", "2", input);
  EXPECT_THAT(v2, HasSubstr("UNAVAILABLE: model 'm' version 2 failed to load: model 'm': cannot load"));
  EXPECT_EQ(testing::Answer(c->ModelReady("m", "2")), "false");
  EXPECT_EQ(testing::Answer(c->ModelReady("m", "1")), "true");
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "3")) << "the versions that serve";
  EXPECT_EQ(ConfigPolicy(c->stub(), "m"), "all { }") << "as configured, though version 2 failed";
  EXPECT_THAT(IndexOf(c->stub(), "m"), ElementsAre("m:1:READY", "m:2:UNAVAILABLE", "m:3:READY"));

  EXPECT_EQ(Output(*c, "gap", "", input).size(), 16u * sizeof(float)) << "version 1 serves";
  EXPECT_THAT(Output(*c, "gap", "2", input),
              HasSubstr("UNAVAILABLE: model 'gap' version 2 failed to load: model 'gap': model file"))
      << "the version named once";
  // The worker's own error inside names the model alone: the version is named in front, once.
  const std::string warm = Output(*c, "warm", "2", input);
  EXPECT_THAT(warm, HasSubstr("UNAVAILABLE: model 'warm' version 2 failed to load: "));
  EXPECT_THAT(warm, HasSubstr("model 'warm' worker 0 on cpu: "));
  EXPECT_THAT(warm, HasSubstr("wants 3 columns"));
  EXPECT_THAT(warm, ::testing::Not(HasSubstr("model 'warm' version 2 worker"))) << "the version named once";

  const std::string none = Output(*c, "none", "", input);
  EXPECT_THAT(none, HasSubstr("NOT_FOUND: model 'none' failed to load: version 1 (of the versions its version "
                              "policy serves: 1, 2): model 'none': cannot load"));
  // A named version of it answers with that version's own error, not version 1's.
  EXPECT_THAT(Output(*c, "none", "2", input),
              HasSubstr("UNAVAILABLE: model 'none' version 2 failed to load: model 'none': cannot load"))
      << "no version of a failed model serves";
  EXPECT_THAT(Output(*c, "none", "2", input), HasSubstr("/none/2/")) << "version 2's file, not version 1's";
  EXPECT_THAT(Output(*c, "none", "1", input), HasSubstr("model 'none' version 1 failed to load"));
  EXPECT_THAT(Output(*c, "none", "7", input), HasSubstr("UNAVAILABLE: model 'none' failed to load: version 1"))
      << "a version the load never tried: the model's error";
  // The index lists each version the failed load tried, with its own error.
  auto index = testing::RepositoryIndex(c->stub());
  ASSERT_TRUE(index.ok()) << index.status();
  std::vector<std::string> none_entries;
  for (const auto& entry : index->models()) {
    if (entry.name() != "none") continue;
    none_entries.push_back(entry.version() + ":" + entry.state());
    EXPECT_THAT(entry.reason(), HasSubstr("model 'none' version " + entry.version() + " failed to load: model 'none': cannot load"));
  }
  EXPECT_THAT(none_entries, ElementsAre("1:UNAVAILABLE", "2:UNAVAILABLE"));
  server->Shutdown();
}

// Under model control a first load serves the versions that loaded and answers which did not; a
// reload with a version that fails keeps every version loaded before, as any failed reload; once the
// file is mended a reload serves them all.
TEST_P(ModelVersionsTest, UnderModelControlALoadInPartSaysSoAndAFailedReloadKeepsTheSet) {
  testing::TempDir repo("cs_versions_fail_control");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  const fs::path v2 = fs::path(repo.path()) / "m" / "2" / "model.pt";
  const fs::path v2_saved = fs::path(repo.path()) / "v2_model.pt";
  fs::copy_file(v2, v2_saved);
  std::ofstream(v2) << "not TorchScript";
  auto server = StartExplicit(repo.path(), {"ref1", "ref2", "ref3"});
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  const Tensor input = Input(19);

  const grpc::Status in_part = testing::LoadModel(c->stub(), "m");
  EXPECT_EQ(in_part.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << in_part.error_message();
  EXPECT_THAT(in_part.error_message(), HasSubstr("model 'm' loaded in part: version(s) 1, 3 serve; version 2: "
                                                 "model 'm': cannot load"));
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "3"));
  EXPECT_EQ(Output(*c, "m", "3", input), Output(*c, "ref3", "", input));
  EXPECT_EQ(testing::Answer(c->ServerReady()), "true") << "a load asked for fails only for its caller";

  // Version 3's file breaks too: the reload fails and versions 1 and 3 go on serving.
  const fs::path v3 = fs::path(repo.path()) / "m" / "3" / "model.pt";
  const fs::path v3_saved = fs::path(repo.path()) / "v3_model.pt";
  fs::copy_file(v3, v3_saved);
  std::ofstream(v3) << "broken too";
  const grpc::Status failed_reload = testing::LoadModel(c->stub(), "m");
  EXPECT_FALSE(failed_reload.ok());
  EXPECT_THAT(failed_reload.error_message(),
              HasSubstr("model 'm' not reloaded (the version loaded before goes on serving): version 2: "));
  EXPECT_EQ(Output(*c, "m", "3", input), Output(*c, "ref3", "", input));
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "3"));

  // Both files mended: every version serves, and none is listed as failed.
  fs::copy_file(v2_saved, v2, fs::copy_options::overwrite_existing);
  fs::copy_file(v3_saved, v3, fs::copy_options::overwrite_existing);
  const grpc::Status mended = testing::LoadModel(c->stub(), "m");
  ASSERT_TRUE(mended.ok()) << mended.error_message();
  EXPECT_THAT(MetadataVersions(*c, "m"), ElementsAre("1", "2", "3"));
  EXPECT_EQ(Output(*c, "m", "2", input), Output(*c, "ref2", "", input));
  EXPECT_THAT(IndexOf(c->stub(), "m"), ElementsAre("m:1:READY", "m:2:READY", "m:3:READY"));
  server->Shutdown();
}

// A load stopped (an unload of the model, the server's shutdown) reads no further version: with the
// stop already set, the lowest version's warm-up stops, no other version starts, the load fails whole
// naming the lowest, and no runtime is left behind. The same with the versions loading one after
// another (1 thread) and side by side (3).
class ModelVersionsLoadTest : public ::testing::TestWithParam<int> {};

TEST_P(ModelVersionsLoadTest, AStoppedLoadReadsNoFurtherVersion) {
  testing::TempDir repo("cs_versions_stop");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  testing::ManagerUnderTest t;
  std::vector<int64_t> started;  // the versions whose load started
  absl::Mutex mu;
  server::ModelLoadOptions options;
  options.threads = GetParam();
  options.load_started = [&](const std::string&, int64_t v) {
    absl::MutexLock lock(&mu);
    started.push_back(v);
  };
  auto manager = t.Make(options);
  std::atomic<bool> stop{true};
  std::map<int64_t, absl::Status> tried;
  auto built = manager->BuildRuntimes((fs::path(repo.path()) / "m").string(), &tried, nullptr, &stop);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("version 1 (of the versions its version policy serves: 1, 2, 3): warm-up stopped"));
  ASSERT_EQ(tried.size(), 3u) << "every version the load was to serve";
  EXPECT_THAT(std::string(tried.at(1).message()), HasSubstr("warm-up stopped"));
  EXPECT_THAT(std::string(tried.at(3).message()), HasSubstr("before its files were read"));
  EXPECT_THAT(started, ElementsAre(1)) << "versions 2 and 3 are not read";
  stop = false;
  built = manager->BuildRuntimes((fs::path(repo.path()) / "m").string(), &tried, nullptr, &stop);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->runtimes.size(), 3u);
  EXPECT_TRUE(built->failed.empty());
  for (size_t i = 0; i < built->runtimes.size(); ++i) {
    EXPECT_EQ(built->runtimes[i]->spec().version, static_cast<int64_t>(i + 1));
  }
  for (auto& runtime : built->runtimes) runtime->Stop();
}

// With 3 threads a model's three versions load at once (each load waits, as it starts, until all
// three have started), each on its own weights; with a version's file gone, the other two still load.
TEST(ModelVersionsParallelLoadTest, TheVersionsLoadSideBySideAndOneThatFailsLeavesTheOthers) {
  testing::TempDir repo("cs_versions_parallel");
  WriteVersionedModel(repo.path(), "version_policy { all { } }");
  testing::ManagerUnderTest t;
  testing::StartBarrier barrier(3);
  server::ModelLoadOptions options;
  options.threads = 3;
  options.load_started = barrier.Hook();
  std::map<int64_t, absl::Status> tried;
  auto manager = t.Make(options);
  auto built = manager->BuildRuntimes((fs::path(repo.path()) / "m").string(), &tried);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_THAT(barrier.alone(), ::testing::IsEmpty()) << "versions that never saw the other two start";
  ASSERT_EQ(built->runtimes.size(), 3u);
  for (size_t i = 0; i < built->runtimes.size(); ++i) {
    EXPECT_EQ(built->runtimes[i]->spec().version, static_cast<int64_t>(i + 1));
    EXPECT_EQ(built->runtimes[i]->spec().model_path, (fs::path(repo.path()) / "m" / std::to_string(i + 1) / "model.pt").string());
  }
  for (auto& runtime : built->runtimes) runtime->Stop();

  fs::remove(fs::path(repo.path()) / "m" / "2" / "model.pt");
  server::ModelLoadOptions plain;
  plain.threads = 3;
  auto second = t.Make(plain);
  built = second->BuildRuntimes((fs::path(repo.path()) / "m").string(), &tried);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->runtimes.size(), 2u);
  EXPECT_EQ(built->runtimes[0]->spec().version, 1);
  EXPECT_EQ(built->runtimes[1]->spec().version, 3);
  ASSERT_EQ(built->failed.count(2), 1u);
  for (auto& runtime : built->runtimes) runtime->Stop();
}

INSTANTIATE_TEST_SUITE_P(OneAndThreeThreads, ModelVersionsLoadTest, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "Threads"; });

INSTANTIATE_TEST_SUITE_P(BothApis, ModelVersionsTest, ::testing::Values(0, 2), testing::InferApiName);

}  // namespace
}  // namespace chronoserve
