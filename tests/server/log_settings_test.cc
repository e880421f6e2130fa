// Triton's LogSettings RPC on the real server, real gRPC, on both gRPC APIs: it reads and changes
// the running server's log settings (this process's: the server runs in it), refuses a bad one with
// INVALID_ARGUMENT, and ServerMetadata lists the "logging" extension. TraceSetting reaches its
// handler on both APIs (its effect on spans: tests/telemetry/telemetry_server_tracing_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/log.h"
#include "tests/common/log_defaults.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;

class LogSettingsTest : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { testing::RestoreLogDefaults(); }
};

grpc::Status CallLogSettings(inference::GRPCInferenceService::Stub* stub, const inference::LogSettingsRequest& request,
                             inference::LogSettingsResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  return stub->LogSettings(&ctx, request, response);
}

TEST_P(LogSettingsTest, ReadsAndChangesTheRunningServersLogging) {
  testing::TempDir repo("cs_logset");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = GetParam();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto metadata = c->ServerMetadata();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_THAT(metadata->extensions(), ::testing::Contains("logging"));

  inference::LogSettingsResponse read;
  grpc::Status status = CallLogSettings(c->stub(), {}, &read);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(read.settings().size(), 6u);
  EXPECT_EQ(read.settings().at("log_verbose_level").uint32_param(), 0u);
  EXPECT_EQ(read.settings().at("log_format").string_param(), "default");

  inference::LogSettingsRequest change;
  (*change.mutable_settings())["log_verbose_level"].set_uint32_param(1);
  (*change.mutable_settings())["log_format"].set_string_param("ISO8601");
  inference::LogSettingsResponse changed;
  status = CallLogSettings(c->stub(), change, &changed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(changed.settings().at("log_verbose_level").uint32_param(), 1u);
  EXPECT_EQ(changed.settings().at("log_format").string_param(), "ISO8601");
  EXPECT_EQ(LogVerbosity(), 1) << "the server's own logging changed";
  EXPECT_EQ(GetLogFormat(), LogFormat::kIso8601);

  inference::LogSettingsRequest bad;
  (*bad.mutable_settings())["log_verbose_level"].set_uint32_param(0);
  (*bad.mutable_settings())["log_errors"].set_bool_param(false);
  inference::LogSettingsResponse refused;
  status = CallLogSettings(c->stub(), bad, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown log setting 'log_errors'"));
  EXPECT_EQ(LogVerbosity(), 1) << "a refused request changes nothing";

  // TraceSetting is served on this API too; a server built without telemetry has no trace settings.
  grpc::ClientContext trace_ctx;
  trace_ctx.set_deadline(testing::TestDeadline());
  inference::TraceSettingResponse trace;
  status = c->stub()->TraceSetting(&trace_ctx, {}, &trace);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("this server has no telemetry, so no trace settings"));
  EXPECT_EQ(testing::Answer(c->ModelReady("mlp")), "true");
  server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Api, LogSettingsTest, ::testing::Values(0, 2), testing::InferApiName);

}  // namespace
}  // namespace chronoserve
