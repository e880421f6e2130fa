// StartTestServer: the real chronoserve binary on 127.0.0.1 (port 0, read from its log), READY,
// serving a repository the test wrote; for the tests that need the binary itself (its flags, its
// signals, its log). The Subprocess terminates it when destroyed.
#ifndef CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_
#define CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/client/subprocess.h"

namespace chronoserve::testing {

struct TestServer {
  std::unique_ptr<Subprocess> process;
  std::string url;  // HOST:PORT as logged: 127.0.0.1:PORT unless --host
};

// A fresh directory under the test's temporary directory, removed with everything in it when the
// TestDir is destroyed (destroy the servers that use it first). Movable, not copyable.
class TestDir {
 public:
  static absl::StatusOr<TestDir> Create(const std::string& prefix);
  TestDir(TestDir&& other) noexcept;
  TestDir& operator=(TestDir&& other) noexcept;
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  ~TestDir();

  const std::string& path() const { return path_; }

 private:
  explicit TestDir(std::string path) : path_(std::move(path)) {}
  void Remove();

  std::string path_;  // empty once moved from
};

// Starts chronoserve on `repository` with `extra_flags` (after --warmup-runs 1 --allow-metrics false
// --gpu-monitor-interval-ms 0) and `env` ("NAME=value" entries, Subprocess::Start's), and waits
// (`ready_timeout` at most) until it is READY.
absl::StatusOr<TestServer> StartTestServer(const std::string& repository,
                                           const std::vector<std::string>& extra_flags = {},
                                           absl::Duration ready_timeout = absl::Seconds(60),
                                           const std::vector<std::string>& env = {});

// A suite's server and the directory its repository is in: the server stops before the directory
// goes (members are destroyed in reverse order). For SetUpTestSuite, with StartServerInNewDir.
struct ServerInDir {
  TestDir dir;
  TestServer server;
  std::string repository() const { return dir.path() + "/models"; }
};

// A new TestDir (`prefix`), a repository that `write_models` writes into DIR/models, and
// chronoserve serving it (StartTestServer with `extra_flags` and `ready_timeout`). The first error
// of the three, with what failed.
absl::StatusOr<std::unique_ptr<ServerInDir>> StartServerInNewDir(
    const std::string& prefix, const std::function<absl::Status(const std::string& repository)>& write_models,
    const std::vector<std::string>& extra_flags = {}, absl::Duration ready_timeout = absl::Seconds(60));

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_
