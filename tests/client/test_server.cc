#include "tests/client/test_server.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/remove_tree.h"

namespace chronoserve::testing {

absl::StatusOr<TestDir> TestDir::Create(const std::string& prefix) {
  std::string tmpl = ::testing::TempDir() + prefix + "_XXXXXX";
  std::string path = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  if (path.empty()) return absl::InternalError(absl::StrCat("cannot make a test directory ", prefix, "_XXXXXX"));
  return TestDir(std::move(path));
}

TestDir::TestDir(TestDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}

TestDir& TestDir::operator=(TestDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, "");
  }
  return *this;
}

TestDir::~TestDir() { Remove(); }

void TestDir::Remove() {
  if (path_.empty()) return;
  if (!RemoveTree(path_)) ADD_FAILURE() << "cannot remove the test directory " << path_;
  path_.clear();
}

absl::StatusOr<TestServer> StartTestServer(const std::string& repository,
                                           const std::vector<std::string>& extra_flags, absl::Duration ready_timeout,
                                           const std::vector<std::string>& env) {
  std::vector<std::string> argv = {CHRONOSERVE_BIN, "--model-repository", repository, "--grpc-port", "0",
                                   "--warmup-runs", "1", "--allow-metrics", "false", "--gpu-monitor-interval-ms", "0"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  auto process = Subprocess::Start(argv, env);
  if (!process.ok()) return process.status();
  if (absl::Status ready = (*process)->WaitForOutput("server READY", ready_timeout); !ready.ok()) return ready;
  const std::string log = (*process)->output();
  const std::string marker = "gRPC listening on ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return absl::InternalError(absl::StrCat("no '", marker, "' in the log:\n", log));
  const size_t from = at + marker.size();
  return TestServer{*std::move(process), log.substr(from, log.find(' ', from) - from)};
}

absl::StatusOr<std::unique_ptr<ServerInDir>> StartServerInNewDir(
    const std::string& prefix, const std::function<absl::Status(const std::string& repository)>& write_models,
    const std::vector<std::string>& extra_flags, absl::Duration ready_timeout) {
  absl::StatusOr<TestDir> dir = TestDir::Create(prefix);
  if (!dir.ok()) return dir.status();
  const std::string repository = dir->path() + "/models";
  if (absl::Status written = write_models(repository); !written.ok()) {
    return absl::Status(written.code(), absl::StrCat("writing the models into ", repository, ": ", written.message()));
  }
  absl::StatusOr<TestServer> server = StartTestServer(repository, extra_flags, ready_timeout);
  if (!server.ok()) return server.status();
  return std::unique_ptr<ServerInDir>(new ServerInDir{*std::move(dir), *std::move(server)});
}

}  // namespace chronoserve::testing
