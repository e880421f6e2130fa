// The GPU monitor on real hardware: NVML loaded at run time feeds each batch's sm_clock_mhz, which
// reaches the client in the response's timing.sm_clock_mhz.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/server.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

TEST(GpuTelemetryTest, BatchesCarryTheSmClockSampledByNvml) {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) GTEST_SKIP() << "NVML is not installed here";
  dlclose(nvml);
  testing::TempDir repo("cs_gpu_telemetry");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", o).ok());
  server::telemetry::TelemetryOptions t;
  t.metrics.enabled = false;
  t.gpu.period = absl::Milliseconds(20);
  auto telemetry = server::telemetry::Telemetry::Create(t);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  server::ServerOptions options;
  options.model_repository = repo.path();
  options.grpc_port = 0;
  options.warmup.runs_per_batch_size = 1;
  options.telemetry = telemetry->get();
  auto server = server::Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  ASSERT_NE((*telemetry)->gpu_clock(), nullptr) << "the NVML monitor started";
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string((*server)->port()));
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
  (*server)->Shutdown();
}

}  // namespace
}  // namespace chronoserve
