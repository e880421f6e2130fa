// StartTestServer: the real chronoserve binary on 127.0.0.1 (port 0, read from its log), READY,
// serving a repository the test wrote; for the client tests that stop or disturb their own server.
// The Subprocess terminates it when destroyed.
#ifndef CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_
#define CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/client/subprocess.h"

namespace chronoserve::testing {

struct TestServer {
  std::unique_ptr<Subprocess> process;
  std::string url;  // HOST:PORT
};

// A fresh directory under the test's temporary directory; "" on failure.
std::string MakeTestDir(const std::string& prefix);

// Starts chronoserve on `repository` with `extra_flags`, and waits (60 s at most) until it is READY.
absl::StatusOr<TestServer> StartTestServer(const std::string& repository,
                                           const std::vector<std::string>& extra_flags = {});

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_TEST_SERVER_H_
