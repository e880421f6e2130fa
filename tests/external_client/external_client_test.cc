// A KServe v2 client that nobody here wrote uses the server: tests/external_client/client.js
// (@grpc/grpc-js, the service discovered through gRPC server reflection) runs against the real
// server on 127.0.0.1 and checks health, metadata, an inference with timing, and an error code; and
// with the server in --model-control-mode explicit, an unload and a load (Triton's model control),
// one with Triton's 'config' parameter.
// Skipped when node or the npm packages are missing (`npm ci --prefix tests/external_client`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_split.h"
#include "tests/client/subprocess.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

// The absolute path of `node` on PATH, or "" (Subprocess execs without a PATH search).
std::string FindNode() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::string candidate = std::string(dir) + "/node";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

TEST(ExternalClientTest, NodeGrpcJsClientDiscoversTheServiceByReflectionAndInfers) {
  const std::string dir = CHRONOSERVE_EXTERNAL_CLIENT_DIR;
  const std::string node = FindNode();
  if (node.empty()) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(dir + "/node_modules/grpc-js-reflection-client")) {
    GTEST_SKIP() << "run `npm ci --prefix " << dir << "` first";
  }
  testing::TempDir repo("cs_external_client");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  for (const bool control : {false, true}) {
    SCOPED_TRACE(control ? "--model-control-mode explicit" : "--model-control-mode none");
    server::ServerOptions options = testing::TestServerOptions(repo.path());
    if (control) {
      options.model_control_mode = server::ModelControlMode::kExplicit;
      options.load_models = {"mlp"};
    }
    auto server = testing::StartServer(options);
    ASSERT_NE(server, nullptr);
    const std::string address = "127.0.0.1:" + std::to_string(server->port());
    std::vector<std::string> args = {node, dir + "/client.js", address, "mlp"};
    if (control) args.push_back("--model-control");
    auto run = testing::RunProgram(args, absl::Seconds(60));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->first, 0) << run->second;
    EXPECT_NE(run->second.find(" passed, 0 failed"), std::string::npos) << run->second;
    EXPECT_EQ(run->second.find("not ok"), std::string::npos) << run->second;
    if (control) {
      EXPECT_NE(run->second.find("ok - RepositoryModelLoad"), std::string::npos) << run->second;
      EXPECT_NE(run->second.find("ok - ModelConfig reports the config loaded"), std::string::npos) << run->second;
    }
    server->Shutdown();
  }
}

}  // namespace
}  // namespace chronoserve
