// ConnectTestClient: a client::InferenceClient for tests whose every call carries a deadline.
// InferenceClient's own default timeout covers its calls, not raw stubs or streams, so a server
// that never answers would hang the test, or the thread a test joins. Here the channel's default service
// config gives every method (unary calls and ModelStreamInfer streams alike) a timeout; a shorter
// deadline of the call's own (InferOptions::timeout, ClientContext::set_deadline) still wins.
// Raw stubs built on this client's stub() inherit it too.
#ifndef CHRONOSERVE_TESTS_SERVER_TEST_CLIENT_H_
#define CHRONOSERVE_TESTS_SERVER_TEST_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/inference_client.h"

namespace chronoserve::testing {

// The deadline every test call gets unless it sets a shorter one.
inline constexpr absl::Duration kTestCallTimeout = absl::Seconds(60);

// As client::InferenceClient::Connect (same channel arguments), plus a `timeout` on every call.
inline std::unique_ptr<client::InferenceClient> ConnectTestClient(const std::string& address,
                                                                  absl::Duration timeout = kTestCallTimeout) {
  grpc::ChannelArguments args = client::ClientChannelArguments();
  // A method config whose name is {} applies to every method of every service; the timeout is a
  // proto3 JSON Duration ("60.000s"). The channel argument is the default service config;
  // resolution is disabled so that no resolver's config replaces it.
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  args.SetServiceConfigJSON(
      absl::StrFormat(R"({"methodConfig":[{"name":[{}],"timeout":"%d.%03ds"}]})", ms / 1000, ms % 1000));
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  return std::make_unique<client::InferenceClient>(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// A deadline for a raw ClientContext: ctx.set_deadline(TestDeadline()).
inline std::chrono::system_clock::time_point TestDeadline(absl::Duration timeout = kTestCallTimeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

// Triton's RepositoryIndex through `stub`, every model or (`ready`) the READY ones; the call's error
// as a status.
inline absl::StatusOr<inference::RepositoryIndexResponse> RepositoryIndex(inference::GRPCInferenceService::Stub* stub,
                                                                          bool ready = false) {
  grpc::ClientContext ctx;
  ctx.set_deadline(TestDeadline());
  inference::RepositoryIndexRequest request;
  request.set_ready(ready);
  inference::RepositoryIndexResponse response;
  const grpc::Status status = stub->RepositoryIndex(&ctx, request, &response);
  if (!status.ok()) return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  return response;
}

// A health answer (ServerLive, ServerReady, ModelReady) as "true", "false" or the call's error, so
// that EXPECT_EQ(Answer(c->ServerLive()), "true") checks the call succeeded before reading it.
inline std::string Answer(const absl::StatusOr<bool>& answer) {
  if (!answer.ok()) return answer.status().ToString();
  return *answer ? "true" : "false";
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_TEST_CLIENT_H_
