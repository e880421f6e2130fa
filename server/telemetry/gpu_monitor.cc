#include "server/telemetry/gpu_monitor.h"

#include "common/log.h"
#include "common/thread_name.h"

namespace chronoserve::server::telemetry {

GpuMonitor::GpuMonitor(std::shared_ptr<GpuSampler> sampler, absl::Duration period)
    : sampler_(std::move(sampler)), period_(period), sm_clock_mhz_(sampler_->DeviceCount()) {
  for (auto& clock : sm_clock_mhz_) clock.store(0);
  last_.resize(sm_clock_mhz_.size());
}

GpuMonitor::~GpuMonitor() { Stop(); }

void GpuMonitor::Start() {
  SampleOnce();
  absl::MutexLock lock(&mu_);
  if (running_ || stop_) return;
  thread_ = std::thread([this] {
    SetCurrentThreadName("cs-gpu-monitor");
    Run();
  });
  mu_.Await(absl::Condition(&running_));
}

void GpuMonitor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t GpuMonitor::SmClockMhz(int gpu) const {
  if (gpu < 0 || gpu >= DeviceCount()) return 0;
  return sm_clock_mhz_[gpu].load(std::memory_order_relaxed);
}

std::optional<GpuSample> GpuMonitor::LastSample(int gpu) const {
  absl::MutexLock lock(&mu_);
  if (gpu < 0 || gpu >= static_cast<int>(last_.size())) return std::nullopt;
  return last_[gpu];
}

void GpuMonitor::SampleOnce() {
  for (int gpu = 0; gpu < DeviceCount(); ++gpu) {
    absl::StatusOr<GpuSample> sample = sampler_->Sample(gpu);
    absl::MutexLock lock(&mu_);
    if (!sample.ok()) {
      sm_clock_mhz_[gpu].store(0, std::memory_order_relaxed);
      last_[gpu].reset();
      if (!logged_error_) CS_LOG(WARNING) << "GPU monitor: " << sample.status().message();
      logged_error_ = true;
      continue;
    }
    sm_clock_mhz_[gpu].store(sample->sm_clock_mhz > 0 ? sample->sm_clock_mhz : 0, std::memory_order_relaxed);
    last_[gpu] = *sample;
  }
}

void GpuMonitor::Run() {
  absl::MutexLock lock(&mu_);
  running_ = true;
  // Sleep the period (or until Stop), sample without the lock, repeat.
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period_)) {
    mu_.Unlock();
    SampleOnce();
    mu_.Lock();
  }
}

}  // namespace chronoserve::server::telemetry
