// Telemetry on real hardware: NVML loaded at run time feeds each batch's sm_clock_mhz, which
// reaches the client in the response's timing.sm_clock_mhz; /metrics is served by a CUDA build (its
// static TLS once kept CivetWeb's threads from starting) with the batches' CUDA-event spans and
// NVML's gauges, scraped over HTTP and parsed as text.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/telemetry/metrics_scrape.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

// The example MLP (max_batch_size 8, KIND_AUTO: on the GPU) served with telemetry whose GPU monitor
// samples every 20 ms, /metrics on a free port of 127.0.0.1 when `metrics`. Members go in reverse:
// the server before its telemetry.
struct ServedMlp {
  testing::TempDir repo{"cs_gpu_telemetry"};
  std::unique_ptr<server::telemetry::Telemetry> telemetry;
  std::unique_ptr<server::Server> server;
};

void StartServedMlp(bool metrics, ServedMlp* out) {
  examples::ModelOptions o;
  o.max_batch_size = 8;
  ASSERT_TRUE(examples::WriteMlp(out->repo.path(), "mlp", o).ok());
  server::telemetry::TelemetryOptions t;
  t.metrics.enabled = metrics;
  t.metrics.host = "127.0.0.1";
  t.metrics.port = 0;
  t.gpu.period = absl::Milliseconds(20);
  auto telemetry = server::telemetry::Telemetry::Create(t);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  out->telemetry = *std::move(telemetry);
  server::ServerOptions options;
  options.model_repository = out->repo.path();
  options.grpc_port = 0;
  options.warmup.runs_per_batch_size = 1;
  options.telemetry = out->telemetry.get();
  auto server = server::Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  out->server = *std::move(server);
  ASSERT_TRUE(out->server->Start().ok());
}

TEST(GpuTelemetryTest, BatchesCarryTheSmClockSampledByNvml) {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) GTEST_SKIP() << "NVML is not installed here";
  dlclose(nvml);
  ServedMlp served;
  ASSERT_NO_FATAL_FAILURE(StartServedMlp(/*metrics=*/false, &served));
  ASSERT_NE(served.telemetry->gpu_clock(), nullptr) << "the NVML monitor started";
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(served.server->port()));
  std::mt19937_64 rng(9);
  const client::Tensor input{"INPUT__0", DataType::kFp32, {4, 64}, RandomTensorBytes(DataType::kFp32, 256, rng)};
  int64_t clock_mhz = 0;
  // The monitor samples every 20 ms; a bounded number of requests must see a sample.
  for (int i = 0; i < 2000 && clock_mhz == 0; ++i) {
    auto r = client->Infer("mlp", {input});
    ASSERT_TRUE(r.ok()) << r.status();
    clock_mhz = r->timing->sm_clock_mhz;
  }
  EXPECT_GT(clock_mhz, 100) << "timing.sm_clock_mhz from NVML";
  EXPECT_LT(clock_mhz, 5000);
  served.server->Shutdown();
}

TEST(GpuTelemetryTest, MetricsAreServedWithTheResponsesDeviceSpansAndNvmlGauges) {
  ServedMlp served;
  ASSERT_NO_FATAL_FAILURE(StartServedMlp(/*metrics=*/true, &served));
  const int metrics_port = served.telemetry->metrics_port();
  ASSERT_GT(metrics_port, 0) << "/metrics started on a CUDA build";
  const bool nvml = served.telemetry->gpu_clock() != nullptr;

  // One request at a time: each batch holds one request, so the responses' compute spans are the
  // batches' that the histogram observed (the serving warm-up's batches are not counted).
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(served.server->port()));
  std::mt19937_64 rng(11);
  constexpr int kRequests = 20;
  double compute_s = 0, h2d_s = 0, d2h_s = 0;
  for (int i = 0; i < kRequests; ++i) {
    const client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
    auto r = client->Infer("mlp", {input});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->timing.has_value());
    ASSERT_EQ(r->timing->gpu, 0) << "the model runs on the GPU";
    ASSERT_TRUE(r->timing->device_timed) << "spans from CUDA events";
    ASSERT_EQ(r->timing->batch_size, 1);
    compute_s += r->timing->compute_ns * 1e-9;
    h2d_s += r->timing->h2d_ns * 1e-9;
    d2h_s += r->timing->d2h_ns * 1e-9;
  }

  const std::string labels = R"({model="mlp",version="1"})";
  const std::string success = R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})";
  const std::string compute_count = "chronoserve_compute_duration_seconds_count" + labels;
  const std::string sm_clock = R"(chronoserve_gpu_sm_clock_hertz{gpu="0"})";
  // A request's metrics are recorded just after its response is sent, and the GPU monitor's first
  // sample may trail the start: scrape until both are in (10 s at most; the checks say what is not).
  std::map<std::string, double> m;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    m = testing::ParseMetrics(testing::ScrapeMetrics(metrics_port));
    if (m[success] >= kRequests && m[compute_count] >= kRequests && (!nvml || m.count(sm_clock) > 0)) break;
  }
  EXPECT_EQ(m[success], kRequests);
  EXPECT_EQ(m[compute_count], kRequests);
  EXPECT_EQ(m["chronoserve_batches_total" + labels], kRequests);
  // Each histogram's sum is the sum of the spans the responses carried (1 % and 1 us for the
  // text format's rounding).
  auto near = [](double metric, double responses) { return std::abs(metric - responses) <= 0.01 * responses + 1e-6; };
  const double compute_sum = m["chronoserve_compute_duration_seconds_sum" + labels];
  EXPECT_GT(compute_s, 0);
  EXPECT_TRUE(near(compute_sum, compute_s)) << compute_sum << " s in /metrics, " << compute_s << " s in the responses";
  const double h2d_sum = m["chronoserve_h2d_duration_seconds_sum" + labels];
  EXPECT_TRUE(near(h2d_sum, h2d_s)) << h2d_sum << " s in /metrics, " << h2d_s << " s in the responses";
  const double d2h_sum = m["chronoserve_d2h_duration_seconds_sum" + labels];
  EXPECT_TRUE(near(d2h_sum, d2h_s)) << d2h_sum << " s in /metrics, " << d2h_s << " s in the responses";
  if (nvml) {
    EXPECT_GT(m[sm_clock], 1e8) << "NVML's SM clock, in hertz";
    EXPECT_LT(m[sm_clock], 5e9);
    EXPECT_GT(m[R"(chronoserve_gpu_memory_used_bytes{gpu="0"})"], 0) << "the model's weights at least";
    EXPECT_GE(m[R"(chronoserve_gpu_memory_total_bytes{gpu="0"})"], m[R"(chronoserve_gpu_memory_used_bytes{gpu="0"})"]);
  }
  served.server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
