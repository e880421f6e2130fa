// SharedServerTest: a suite whose tests share one in-process server (started once per process in
// SetUpTestSuite, 127.0.0.1) over a model repository the suite writes, each test with a client of
// its own whose every call carries a deadline.
//
// Derived (CRTP) provides `static constexpr char kRepoName[]` (the temporary directory's prefix)
// and `static void WriteModels(const TempDir& repo)`. A Derived SetUp calls this one first.
// kWarmupRuns: the warm-up runs each model instance makes before the server is READY.
#ifndef CHRONOSERVE_TESTS_SERVER_SHARED_SERVER_TEST_H_
#define CHRONOSERVE_TESTS_SERVER_SHARED_SERVER_TEST_H_

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "client/inference_client.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"

namespace chronoserve::testing {

template <typename Derived, int kWarmupRuns = 1>
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new TempDir(Derived::kRepoName);
    Derived::WriteModels(*repo_);
    if (HasFatalFailure()) return;  // a model not written: no server, every test fails in SetUp
    server_ = StartServer(repo_->path(), kWarmupRuns).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete repo_;
    repo_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the suite's server did not start";
    client_ = ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));
  }

  static inline TempDir* repo_ = nullptr;
  static inline server::Server* server_ = nullptr;
  std::unique_ptr<client::InferenceClient> client_;
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_SHARED_SERVER_TEST_H_
