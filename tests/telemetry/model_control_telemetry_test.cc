// Telemetry beside model control (--model-control-mode explicit), real server and real gRPC: a
// model loaded by RepositoryModelLoad gets its load and warm-up gauges and request series on
// /metrics (scraped over HTTP, read as text), per version across a reload to a new version and per
// version for a model serving two at once; its queue gauge follows the models loaded; and
// TraceSetting takes a model of the repository not loaded yet (in poll mode too, before a scan has
// found it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/telemetry/metrics_scrape.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using ::testing::HasSubstr;

grpc::Status TraceSettingOf(client::InferenceClient& c, const std::string& model) {
  grpc::ClientContext ctx;
  ctx.set_deadline(testing::TestDeadline());
  inference::TraceSettingRequest request;
  request.set_model_name(model);
  inference::TraceSettingResponse response;
  return c.stub()->TraceSetting(&ctx, request, &response);
}

// The example MLP "name" on the CPU.
void WriteCpuMlp(const std::string& repository, const std::string& name) {
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repository, name, o).ok());
}

// Telemetry without a GPU monitor; /metrics on a free port of 127.0.0.1 when `metrics`.
absl::StatusOr<std::unique_ptr<server::telemetry::Telemetry>> TestTelemetry(bool metrics) {
  server::telemetry::TelemetryOptions options;
  options.metrics.enabled = metrics;
  options.metrics.host = "127.0.0.1";
  options.metrics.port = 0;
  options.gpu.enabled = false;
  return server::telemetry::Telemetry::Create(options);
}

// A server on a repository whose telemetry serves /metrics on a free port (StartWithMetrics); the
// test shuts both down, the server first (as the members are destroyed when it fails early).
struct WithMetrics {
  std::unique_ptr<server::telemetry::Telemetry> telemetry;
  std::unique_ptr<server::Server> server;
  int metrics_port = 0;
};

void StartWithMetrics(const std::string& repository, server::ModelControlMode mode, WithMetrics* out) {
  auto telemetry = TestTelemetry(/*metrics=*/true);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  out->telemetry = *std::move(telemetry);
  server::ServerOptions options = testing::TestServerOptions(repository);
  options.model_control_mode = mode;
  options.telemetry = out->telemetry.get();
  out->server = testing::StartServer(options);
  ASSERT_NE(out->server, nullptr);
  out->metrics_port = out->telemetry->metrics_port();
  ASSERT_GT(out->metrics_port, 0);
}

TEST(ModelControlTelemetryTest, LoadedModelsGetTheirSeriesAndTraceSettingsTakeTheRepositorysModels) {
  testing::TempDir repo("cs_control_telemetry");
  WriteCpuMlp(repo.path(), "a");
  WithMetrics started;
  ASSERT_NO_FATAL_FAILURE(StartWithMetrics(repo.path(), server::ModelControlMode::kExplicit, &started));
  server::Server* server = started.server.get();
  const int port = started.metrics_port;
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));

  const grpc::Status not_loaded = TraceSettingOf(*c, "a");
  EXPECT_TRUE(not_loaded.ok()) << "a model of the repository, not loaded yet: " << not_loaded.error_message();
  const grpc::Status unknown = TraceSettingOf(*c, "nosuch");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);

  auto metrics = testing::ParseMetrics(testing::ScrapeMetrics(port));
  EXPECT_EQ(metrics.count(R"(chronoserve_model_load_duration_seconds{model="a",version="1"})"), 0u);
  ASSERT_TRUE(testing::LoadModel(c->stub(), "a").ok());
  std::mt19937_64 rng(3);
  const client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  ASSERT_TRUE(c->Infer("a", {input}).ok());
  metrics = testing::ParseMetrics(testing::ScrapeMetrics(port));
  EXPECT_EQ(metrics.count(R"(chronoserve_model_load_duration_seconds{model="a",version="1"})"), 1u);
  EXPECT_EQ(metrics.count(R"(chronoserve_model_warmup_duration_seconds{model="a",version="1"})"), 1u);
  bool queue_gauge = false;
  for (const auto& [series, value] : metrics) {
    queue_gauge = queue_gauge || (series.rfind("chronoserve_queue_depth{", 0) == 0 &&
                                  series.find(R"(model="a")") != std::string::npos);
  }
  EXPECT_TRUE(queue_gauge) << "the loaded model's queue is on /metrics";

  // Version 2 appears and is loaded: its own series; version 1's stay.
  ASSERT_TRUE(testing::CopyModelVersion(repo.path(), "a", 1, "a", 2));
  ASSERT_TRUE(testing::LoadModel(c->stub(), "a").ok());
  metrics = testing::ParseMetrics(testing::ScrapeMetrics(port));
  EXPECT_EQ(metrics.count(R"(chronoserve_model_load_duration_seconds{model="a",version="2"})"), 1u);
  EXPECT_EQ(metrics.count(R"(chronoserve_model_load_duration_seconds{model="a",version="1"})"), 1u);

  ASSERT_TRUE(testing::UnloadModel(c->stub(), "a").ok());
  metrics = testing::ParseMetrics(testing::ScrapeMetrics(port));
  for (const auto& [series, value] : metrics) {
    EXPECT_FALSE(series.rfind("chronoserve_queue_depth{", 0) == 0 && series.find(R"(model="a")") != std::string::npos)
        << "an unloaded model has no queue: " << series;
  }
  server->Shutdown();
  started.telemetry->Shutdown();
}

// A model serving two versions at once (version_policy all): each version has its own load and
// warm-up gauges, request counters and queue gauge on /metrics.
TEST(ModelControlTelemetryTest, EachVersionServedHasItsOwnSeries) {
  testing::TempDir repo("cs_versions_telemetry");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.instance_kind = "KIND_CPU";
  o.extra_config = "version_policy { all { } }";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "m", o).ok());
  ASSERT_TRUE(testing::CopyModelVersion(repo.path(), "m", 1, "m", 2));
  WithMetrics started;
  ASSERT_NO_FATAL_FAILURE(StartWithMetrics(repo.path(), server::ModelControlMode::kNone, &started));
  server::Server* server = started.server.get();
  const int port = started.metrics_port;
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(8);
  const client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  client::InferOptions v1;
  v1.version = "1";
  ASSERT_TRUE(c->Infer("m", {input}, v1).ok());
  ASSERT_TRUE(c->Infer("m", {input}, v1).ok());
  ASSERT_TRUE(c->Infer("m", {input}).ok());  // the highest: version 2
  // A request is counted just after its response is sent, on the thread that sent it, so any of
  // them may trail the client (version 1's second behind version 2's, on another worker): scrape
  // until both versions' counts are in (10 s at most; the checks below then say what is short).
  const std::string v1_count = R"(chronoserve_requests_total{model="m",outcome="success",version="1"})";
  const std::string v2_count = R"(chronoserve_requests_total{model="m",outcome="success",version="2"})";
  std::map<std::string, double> metrics;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    metrics = testing::ParseMetrics(testing::ScrapeMetrics(port));
    if (metrics.count(v1_count) > 0 && metrics[v1_count] >= 2 && metrics.count(v2_count) > 0 &&
        metrics[v2_count] >= 1) {
      break;
    }
  }
  for (const std::string version : {"1", "2"}) {
    EXPECT_EQ(metrics.count(R"(chronoserve_model_load_duration_seconds{model="m",version=")" + version + "\"}"), 1u)
        << version;
    EXPECT_EQ(metrics.count(R"(chronoserve_model_warmup_duration_seconds{model="m",version=")" + version + "\"}"), 1u)
        << version;
  }
  auto requests = [&](const std::string& version) {
    auto it = metrics.find(R"(chronoserve_requests_total{model="m",outcome="success",version=")" + version + "\"}");
    return it == metrics.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(requests("1"), 2.0);
  EXPECT_EQ(requests("2"), 1.0);
  int queue_gauges = 0;
  for (const auto& [series, value] : metrics) {
    if (series.rfind("chronoserve_queue_depth{", 0) == 0 && series.find(R"(model="m")") != std::string::npos) ++queue_gauges;
  }
  EXPECT_EQ(queue_gauges, 2) << "one queue a version";
  server->Shutdown();
  started.telemetry->Shutdown();
}

// Poll mode: a model directory added to the repository is taken by TraceSetting before a scan has
// found it (here: no scan for an hour), so its settings can be made ready before it serves.
TEST(ModelControlTelemetryTest, InPollModeTraceSettingTakesADirectoryNoScanHasFoundYet) {
  testing::TempDir repo("cs_control_telemetry_poll");
  WriteCpuMlp(repo.path(), "a");
  auto telemetry = TestTelemetry(/*metrics=*/false);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kPoll;
  options.repository_poll_interval = absl::Hours(1);
  options.telemetry = telemetry->get();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  WriteCpuMlp(repo.path(), "late");
  const grpc::Status late = TraceSettingOf(*c, "late");
  EXPECT_TRUE(late.ok()) << late.error_message();
  EXPECT_EQ(TraceSettingOf(*c, "nosuch").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(testing::Answer(c->ModelReady("late")), "false") << "not found by a scan yet";
  server->Shutdown();
  (*telemetry)->Shutdown();
}

}  // namespace
}  // namespace chronoserve
