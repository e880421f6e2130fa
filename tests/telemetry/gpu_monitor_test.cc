// GpuMonitor with a fake sampler (no GPU here): the SM clock source, last samples, the thread,
// unreadable devices, and NVML missing.
#include "server/telemetry/gpu_monitor.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "server/telemetry/nvml_sampler.h"

namespace chronoserve::server::telemetry {
namespace {

class FakeGpuSampler final : public GpuSampler {
 public:
  int DeviceCount() const override { return 2; }
  std::string Description() const override { return "fake GPUs"; }
  absl::StatusOr<GpuSample> Sample(int gpu) override {
    absl::MutexLock lock(&mu_);
    if (gpu == 0) ++gpu0_samples_;
    if (gpu == 1 && gpu1_broken_) return absl::UnavailableError("GPU is lost");
    GpuSample s;
    s.sm_clock_mhz = sm_clock_mhz_ + gpu;
    s.memory_clock_mhz = 2619;
    s.power_mw = 123456;
    s.utilization_gpu_pct = 37;
    s.memory_used_bytes = int64_t{5} << 30;
    s.memory_total_bytes = int64_t{80} << 30;
    s.temperature_c = 41;
    return s;
  }
  // Sets what later samples read; returns how many times GPU 0 was sampled before.
  int64_t Set(int64_t sm_clock_mhz, bool gpu1_broken) {
    absl::MutexLock lock(&mu_);
    sm_clock_mhz_ = sm_clock_mhz;
    gpu1_broken_ = gpu1_broken;
    return gpu0_samples_;
  }
  // Waits until GPU 0 has been sampled `n` times in all; false on timeout.
  bool WaitForGpu0Samples(int64_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return gpu0_samples_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }

 private:
  absl::Mutex mu_;
  int64_t gpu0_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sm_clock_mhz_ = 345;
  bool gpu1_broken_ = false;
};

TEST(GpuMonitorTest, SampleOnceFeedsTheClockSource) {
  auto fake = std::make_shared<FakeGpuSampler>();
  GpuMonitor monitor(fake, absl::Hours(1));
  EXPECT_EQ(monitor.SmClockMhz(0), 0);  // nothing sampled yet
  monitor.SampleOnce();
  EXPECT_EQ(monitor.SmClockMhz(0), 345);
  EXPECT_EQ(monitor.SmClockMhz(1), 346);
  EXPECT_EQ(monitor.SmClockMhz(7), 0);
  EXPECT_EQ(monitor.SmClockMhz(-1), 0);
  ASSERT_TRUE(monitor.LastSample(0).has_value());
  EXPECT_EQ(monitor.LastSample(0)->power_mw, 123456);
}

TEST(GpuMonitorTest, UnreadableDeviceReportsUnknown) {
  auto fake = std::make_shared<FakeGpuSampler>();
  GpuMonitor monitor(fake, absl::Hours(1));
  monitor.SampleOnce();
  fake->Set(1980, /*gpu1_broken=*/true);
  monitor.SampleOnce();
  EXPECT_EQ(monitor.SmClockMhz(0), 1980);
  EXPECT_EQ(monitor.SmClockMhz(1), 0);  // unknown, not the stale value
  EXPECT_FALSE(monitor.LastSample(1).has_value());
}

TEST(GpuMonitorTest, ThreadKeepsSampling) {
  auto fake = std::make_shared<FakeGpuSampler>();
  GpuMonitor monitor(fake, absl::Milliseconds(1));
  monitor.Start();  // takes the first sample before returning
  EXPECT_EQ(monitor.SmClockMhz(0), 345);
  const int64_t before = fake->Set(1980, false);
  // The first sample after Set reads 1980; once the one after it has begun, that round has stored it.
  ASSERT_TRUE(fake->WaitForGpu0Samples(before + 2, absl::Seconds(10))) << "the monitor thread did not sample within 10 s";
  EXPECT_EQ(monitor.SmClockMhz(0), 1980);
  monitor.Stop();
  monitor.Stop();  // idempotent
}

TEST(NvmlSamplerTest, MissingLibraryIsNotFound) {
  auto nvml = NvmlSampler::Create("libchronoserve-no-such-nvml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace chronoserve::server::telemetry
