// Triton's "file:<path>" load parameters on the real server, through real gRPC: a model whose files
// (with its "config") come in RepositoryModelLoad serves without a directory in the repository,
// answers as the same files loaded from one do, is listed and unloaded like any other, and leaves no
// file behind; a reload from files replaces the repository's version; what cannot be loaded is
// refused naming the parameter and why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;
using client::Tensor;

// The example MLP's configuration as Triton's JSON, max_batch_size 4, on the CPU.
constexpr char kMlpConfigJson[] = R"({"max_batch_size": 4,
    "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [64]}],
    "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [16]}],
    "instance_group": [{"kind": "KIND_CPU"}]})";

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// RepositoryModelLoad of `model` with `params`: name -> (bytes or string parameter, value).
grpc::Status Load(inference::GRPCInferenceService::Stub* stub, const std::string& model,
                  const std::map<std::string, std::pair<bool, std::string>>& params) {
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(model);
  for (const auto& [key, value] : params) {
    if (value.first) {
      (*request.mutable_parameters())[key].set_bytes_param(value.second);
    } else {
      (*request.mutable_parameters())[key].set_string_param(value.second);
    }
  }
  inference::RepositoryModelLoadResponse response;
  return stub->RepositoryModelLoad(&ctx, request, &response);
}

class ModelControlFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = std::make_unique<testing::TempDir>("cs_control_files");
    examples::ModelOptions o;
    o.max_batch_size = 4;
    o.instance_kind = "KIND_CPU";
    o.seed = 7;
    ASSERT_TRUE(examples::WriteMlp(repo_->path(), "a", o).ok());
    // Other weights, outside the repository: the files a client sends.
    elsewhere_ = std::make_unique<testing::TempDir>("cs_control_files_sent");
    o.seed = 23;
    ASSERT_TRUE(examples::WriteMlp(elsewhere_->path(), "sent", o).ok());
    model_pt_ = ReadBytes(elsewhere_->path() + "/sent/1/model.pt");
    ASSERT_GT(model_pt_.size(), 1000u);
    // The server writes the files it is sent under $TMPDIR: a directory of the test's own, to
    // see that nothing is left there.
    tmp_ = std::make_unique<testing::TempDir>("cs_control_files_tmp");
    const char* old = ::getenv("TMPDIR");
    if (old != nullptr) old_tmpdir_ = old;
    ::setenv("TMPDIR", tmp_->path().c_str(), 1);
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.model_control_mode = server::ModelControlMode::kExplicit;
    server_ = testing::StartServer(options);
    ASSERT_NE(server_, nullptr);
    client_ = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    if (old_tmpdir_.has_value()) {
      ::setenv("TMPDIR", old_tmpdir_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

  absl::StatusOr<client::InferResult> Infer(const std::string& model) {
    std::mt19937_64 rng(99);
    return client_->Infer(model, {Tensor{"INPUT__0", DataType::kFp32, {2, 64}, RandomTensorBytes(DataType::kFp32, 128, rng)}});
  }
  size_t LeftInTmp() const {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(tmp_->path()),
                                             std::filesystem::directory_iterator()));
  }

  std::unique_ptr<testing::TempDir> repo_, elsewhere_, tmp_;
  std::optional<std::string> old_tmpdir_;
  std::string model_pt_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<client::InferenceClient> client_;
};

TEST_F(ModelControlFilesTest, AModelSentInTheLoadServesWithoutADirectoryAndLeavesNoFileBehind) {
  const grpc::Status loaded =
      Load(client_->stub(), "sent", {{"config", {false, kMlpConfigJson}}, {"file:1/model.pt", {true, model_pt_}}});
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  EXPECT_EQ(testing::Answer(client_->ModelReady("sent")), "true");
  EXPECT_EQ(LeftInTmp(), 0u) << "the files sent are removed once the model is loaded";
  auto sent = Infer("sent");
  ASSERT_TRUE(sent.ok()) << sent.status();

  // The same file, loaded from a directory with the same configuration: the same answer, to the bit.
  std::filesystem::create_directories(repo_->path() + "/from_dir/1");
  std::filesystem::copy_file(elsewhere_->path() + "/sent/1/model.pt", repo_->path() + "/from_dir/1/model.pt");
  ASSERT_TRUE(testing::LoadModelWithConfig(client_->stub(), "from_dir", kMlpConfigJson).ok());
  auto from_dir = Infer("from_dir");
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  ASSERT_EQ(sent->outputs.size(), 1u);
  ASSERT_EQ(from_dir->outputs.size(), 1u);
  EXPECT_EQ(sent->outputs[0].data, from_dir->outputs[0].data);
  auto a = Infer("a");
  EXPECT_FALSE(a.ok()) << "'a' is not loaded";

  auto index = testing::RepositoryIndex(client_->stub());
  ASSERT_TRUE(index.ok()) << index.status();
  bool listed = false;
  for (const auto& m : index->models()) listed |= m.name() == "sent" && m.state() == "READY";
  EXPECT_TRUE(listed) << index->DebugString();

  ASSERT_TRUE(testing::UnloadModel(client_->stub(), "sent").ok());
  EXPECT_EQ(testing::Answer(client_->ModelReady("sent")), "false");
  index = testing::RepositoryIndex(client_->stub());
  ASSERT_TRUE(index.ok()) << index.status();
  for (const auto& m : index->models()) EXPECT_NE(m.name(), "sent") << "no directory holds it: it leaves the index";
  const grpc::Status again = testing::LoadModel(client_->stub(), "sent");
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND) << "without its files, the repository has no 'sent'";
}

// A model of the repository reloaded from files sent serves them; a load without files reads its
// directory again. A file that is no model fails the reload and the version loaded serves on.
TEST_F(ModelControlFilesTest, FilesSentReplaceTheRepositorysUntilALoadWithoutThem) {
  ASSERT_TRUE(testing::LoadModel(client_->stub(), "a").ok());
  auto before = Infer("a");
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(Load(client_->stub(), "a", {{"config", {false, kMlpConfigJson}}, {"file:1/model.pt", {true, model_pt_}}}).ok());
  auto replaced = Infer("a");
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_NE(replaced->outputs[0].data, before->outputs[0].data) << "the weights sent answer";

  const grpc::Status garbage = Load(client_->stub(), "a", {{"config", {false, kMlpConfigJson}},
                                                            {"file:1/model.pt", {true, "not a TorchScript archive"}}});
  EXPECT_FALSE(garbage.ok());
  EXPECT_THAT(garbage.error_message(), HasSubstr("model 'a' not reloaded (the version loaded before goes on serving)"));
  auto still = Infer("a");
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->outputs[0].data, replaced->outputs[0].data);
  EXPECT_EQ(LeftInTmp(), 0u) << "a failed load removes its files too";

  ASSERT_TRUE(testing::LoadModel(client_->stub(), "a").ok());
  auto back = Infer("a");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->outputs[0].data, before->outputs[0].data) << "a load without files reads the directory again";
}

TEST_F(ModelControlFilesTest, FilesThatCannotBeLoadedAreRefusedNamingTheParameter) {
  struct Row {
    std::map<std::string, std::pair<bool, std::string>> params;
    std::string message;
  };
  const std::vector<Row> rows = {
      {{{"file:1/model.pt", {true, model_pt_}}},
       "parameter 'file:1/model.pt' needs 'config' beside it: model files sent in the request are loaded with the "
       "configuration sent with them"},
      {{{"config", {false, kMlpConfigJson}}, {"file:1/model.pt", {false, "text"}}},
       "parameter 'file:1/model.pt' takes a bytes_param (the file's contents)"},
      {{{"config", {false, kMlpConfigJson}}, {"file:../1/model.pt", {true, model_pt_}}},
       "parameter 'file:../1/model.pt': model file path '../1/model.pt' has a '.' or '..' component"},
      {{{"config", {false, kMlpConfigJson}}, {"file:/etc/model.pt", {true, model_pt_}}},
       "model file path '/etc/model.pt' is absolute"},
      {{{"config", {false, kMlpConfigJson}}, {"file:", {true, model_pt_}}}, "model file path '' is empty"},
      {{{"config", {false, kMlpConfigJson}}, {"file:1//model.pt", {true, model_pt_}}}, "has an empty component"},
      {{{"config", {false, kMlpConfigJson}}, {"file:1\\model.pt", {true, model_pt_}}}, "holds a backslash"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.message);
    const grpc::Status refused = Load(client_->stub(), "sent", row.params);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused.error_message(), HasSubstr("cannot load model 'sent': " ));
    EXPECT_THAT(refused.error_message(), HasSubstr(row.message));
  }
  // A file where another needs its directory: refused when written, naming it.
  const grpc::Status clash = Load(client_->stub(), "sent", {{"config", {false, kMlpConfigJson}},
                                                            {"file:1", {true, "x"}},
                                                            {"file:1/model.pt", {true, model_pt_}}});
  EXPECT_EQ(clash.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(clash.error_message(), HasSubstr("file '1/model.pt' cannot be written"));
  // No version directory among the files: the load fails as a directory without one does.
  const grpc::Status no_version =
      Load(client_->stub(), "sent", {{"config", {false, kMlpConfigJson}}, {"file:model.pt", {true, model_pt_}}});
  EXPECT_FALSE(no_version.ok());
  EXPECT_THAT(no_version.error_message(), HasSubstr("model 'sent' not loaded"));
  EXPECT_THAT(no_version.error_message(), HasSubstr("(e.g. file:1/model.pt)")) << "paths as the request names them";
  EXPECT_THAT(no_version.error_message(), ::testing::Not(HasSubstr("chronoserve-load-")));
  EXPECT_EQ(LeftInTmp(), 0u);
  EXPECT_EQ(testing::Answer(client_->ModelReady("sent")), "false");
}

}  // namespace
}  // namespace chronoserve
