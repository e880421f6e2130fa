// TelemetryServerTest: the real server on 127.0.0.1 with telemetry, shared by the suite's files
// (telemetry_server_tracing_test.cc, telemetry_server_metrics_test.cc). One server per test binary:
// SetUpTestSuite starts an OTLP receiver written by others (node), a Telemetry with a fake GPU and
// /metrics on a free port, and the server on a repository with `mlp` and `warm_mlp` (keep_warm_ms 5),
// both KIND_CPU. Tests speak real gRPC through `client_` and scrape /metrics over HTTP.
#ifndef CHRONOSERVE_TESTS_TELEMETRY_TELEMETRY_SERVER_FIXTURE_H_
#define CHRONOSERVE_TESTS_TELEMETRY_TELEMETRY_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "server/core/trace_settings.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/test_repository.h"
#include "tests/telemetry/metrics_scrape.h"
#include "tests/telemetry/otlp_test_receiver.h"

namespace chronoserve::testing {

inline constexpr size_t kSpansPerRequest = 9;  // server + admit, queue, input_stage, h2d, compute, d2h, output_stage,
                                               // handback

// The example MLP's input (INPUT__0, FP32 [1, 64]) of values drawn from `rng` in [-1, 1): never all zero.
client::Tensor RandomMlpInput(std::mt19937& rng);

// TraceSetting for `model` ("" = server-wide) with `changes` (30 s deadline); the answer, or the
// call's status as an absl::Status.
absl::StatusOr<inference::TraceSettingResponse> CallTraceSetting(client::InferenceClient& client,
                                                                const std::string& model,
                                                                const server::TraceSettingsMap& changes);
// The one value of `key` in an answer; "?" when the call failed or the key has not one value.
std::string SettingValue(const absl::StatusOr<inference::TraceSettingResponse>& answer, const std::string& key);

class TelemetryServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  static std::unique_ptr<server::Server> StartServer(server::telemetry::Telemetry* telemetry);

  void SetUp() override;

  // One MLP request with random (never all-zero) input and the given metadata.
  absl::StatusOr<client::InferResult> Infer(std::multimap<std::string, std::string> metadata, const std::string& id = "");

  static std::vector<ReceivedSpan> SpansOfTrace(const std::string& trace_id);

  // Waits (30 s at most) until trace `trace_id` has `n` spans.
  static bool WaitForTrace(const std::string& trace_id, size_t n);

  static inline TempDir* repo_ = nullptr;
  static inline OtlpTestReceiver* receiver_ = nullptr;
  static inline server::telemetry::Telemetry* telemetry_ = nullptr;
  static inline server::Server* server_ = nullptr;
  static inline absl::Time started_;  // before the server started
  std::unique_ptr<client::InferenceClient> client_;
  std::mt19937 rng_{20261122};
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_TELEMETRY_TELEMETRY_SERVER_FIXTURE_H_
