// TelemetryServerTest's suite set-up and helpers: see telemetry_server_fixture.h.
#include "tests/telemetry/telemetry_server_fixture.h"

#include <chrono>
#include <utility>

#include "server/telemetry/gpu_sampler.h"
#include "tests/server/test_client.h"
#include "tools/example_models.h"

namespace chronoserve::testing {
namespace {

using client::InferenceClient;
using server::telemetry::Telemetry;
using server::telemetry::TelemetryOptions;

// One GPU that reads 1980 MHz: the GPU gauges without a GPU.
class FakeGpu final : public server::telemetry::GpuSampler {
 public:
  int DeviceCount() const override { return 1; }
  std::string Description() const override { return "fake GPU"; }
  absl::StatusOr<server::telemetry::GpuSample> Sample(int) override {
    server::telemetry::GpuSample s;
    s.sm_clock_mhz = 1980;
    s.power_mw = 250000;
    s.memory_used_bytes = 1 << 30;
    return s;
  }
};

}  // namespace

void TelemetryServerTest::SetUpTestSuite() {
  repo_ = new TempDir("cs_telemetry");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  mlp.max_queue_delay_us = 1000;
  // The metrics test asserts what a CPU worker does (no pipelining, nothing launch-bound): KIND_CPU
  // keeps that true on a machine where a GPU is visible.
  mlp.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo_->path(), "mlp", mlp).ok());
  examples::ModelOptions warm = mlp;  // keep-warm every 5 ms while idle, for its metric
  warm.extra_config = "parameters { key: \"keep_warm_ms\" value { string_value: \"5\" } }\n";
  ASSERT_TRUE(examples::WriteMlp(repo_->path(), "warm_mlp", warm).ok());
  started_ = absl::Now();
  auto receiver = OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  receiver_ = receiver->release();

  TelemetryOptions options;
  options.tracing.enabled = true;
  options.tracing.exporter.endpoint = receiver_->endpoint();
  options.tracing.exporter.resource.service_name = "chronoserve-test";
  options.tracing.processor.schedule_delay = absl::Milliseconds(20);
  options.metrics.host = "127.0.0.1";
  options.metrics.port = 0;
  options.gpu.sampler_for_test = std::make_shared<FakeGpu>();
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  telemetry_ = telemetry->release();
  server_ = StartServer(telemetry_).release();
  ASSERT_NE(server_, nullptr);
  ASSERT_GT(telemetry_->metrics_port(), 0);
}

void TelemetryServerTest::TearDownTestSuite() {
  delete server_;  // flushes telemetry last
  delete telemetry_;
  delete receiver_;
  delete repo_;
}

std::unique_ptr<server::Server> TelemetryServerTest::StartServer(Telemetry* telemetry) {
  server::ServerOptions options;
  options.model_repository = repo_->path();
  options.grpc_port = 0;
  options.exit_timeout_secs = 10;
  options.warmup.runs_per_batch_size = 1;
  options.telemetry = telemetry;
  auto server = server::Server::Create(options);
  if (!server.ok() || !(*server)->Start().ok()) return nullptr;
  return *std::move(server);
}

void TelemetryServerTest::SetUp() {
  ASSERT_NE(server_, nullptr);
  client_ = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server_->port()));  // every call bounded
}

client::Tensor RandomMlpInput(std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(64);
  for (float& v : values) v = dist(rng);
  return client::Tensor{"INPUT__0", DataType::kFp32, {1, 64},
                        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
}

absl::StatusOr<inference::TraceSettingResponse> CallTraceSetting(client::InferenceClient& client,
                                                                const std::string& model,
                                                                const server::TraceSettingsMap& changes) {
  inference::TraceSettingRequest request;
  request.set_model_name(model);
  for (const auto& [key, values] : changes) {
    auto& value = (*request.mutable_settings())[key];
    for (const std::string& v : values) value.add_value(v);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::TraceSettingResponse response;
  const grpc::Status status = client.stub()->TraceSetting(&ctx, request, &response);
  if (!status.ok()) return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  return response;
}

std::string SettingValue(const absl::StatusOr<inference::TraceSettingResponse>& answer, const std::string& key) {
  if (!answer.ok() || answer->settings().count(key) == 0 || answer->settings().at(key).value_size() != 1) return "?";
  return answer->settings().at(key).value(0);
}

absl::StatusOr<client::InferResult> TelemetryServerTest::Infer(std::multimap<std::string, std::string> metadata,
                                                              const std::string& id) {
  const client::Tensor input = RandomMlpInput(rng_);
  client::InferOptions options;
  options.id = id;
  options.metadata = std::move(metadata);
  options.timeout = std::chrono::milliseconds(30000);
  return client_->Infer("mlp", {input}, options);
}

std::vector<ReceivedSpan> TelemetryServerTest::SpansOfTrace(const std::string& trace_id) {
  std::vector<ReceivedSpan> out;
  for (const ReceivedSpan& s : receiver_->spans()) {
    if (s.trace_id == trace_id) out.push_back(s);
  }
  return out;
}

bool TelemetryServerTest::WaitForTrace(const std::string& trace_id, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    // Count in one snapshot, then wait for anything newer than that snapshot.
    const std::vector<ReceivedSpan> all = receiver_->spans();
    size_t have = 0;
    for (const ReceivedSpan& s : all) have += s.trace_id == trace_id ? 1 : 0;
    if (have >= n) return true;
    if (!receiver_->WaitForSpans(all.size() + 1, deadline - absl::Now())) return false;
  }
}

}  // namespace chronoserve::testing
