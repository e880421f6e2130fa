// StartMlpTarget: the real chronoserve serving the example mlp from a fresh test directory, and one
// batch-1 request for it built by chronobench's RequestFactory; the set-up of the tests that drive
// LoadWorker or RunPoint directly.
#ifndef CHRONOSERVE_TESTS_CLIENT_MLP_TARGET_H_
#define CHRONOSERVE_TESTS_CLIENT_MLP_TARGET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/inference.pb.h"
#include "tests/client/test_server.h"

namespace chronoserve::testing {

struct MlpTarget {
  std::unique_ptr<TestDir> dir;  // the repository; removed after the server (declared first) stops
  TestServer server;
  inference::ModelInferRequest request;  // model "mlp", one item of random inputs from `seed`
};

absl::StatusOr<MlpTarget> StartMlpTarget(const std::string& dir_prefix, uint64_t seed);

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_MLP_TARGET_H_
