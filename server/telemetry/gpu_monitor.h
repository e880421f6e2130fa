// GpuMonitor: samples every GPU through a GpuSampler on its own thread at a fixed period and keeps
// the last reading: the SM clock per GPU in an atomic (read wait-free by workers at batch start, as
// the GpuClockSource), the full sample under a mutex (read by the metrics scrape). Owned by
// Telemetry; Start() returns once the thread has taken the first sample; Stop() is idempotent.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_GPU_MONITOR_H_
#define CHRONOSERVE_SERVER_TELEMETRY_GPU_MONITOR_H_

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/core/gpu_clock_source.h"
#include "server/telemetry/gpu_sampler.h"

namespace chronoserve::server::telemetry {

class GpuMonitor final : public GpuClockSource {
 public:
  GpuMonitor(std::shared_ptr<GpuSampler> sampler, absl::Duration period);
  ~GpuMonitor() override;

  // Takes the first sample, then starts the sampling thread. Returns once it runs.
  void Start();
  // Stops and joins the thread. Idempotent.
  void Stop();

  int DeviceCount() const { return static_cast<int>(sm_clock_mhz_.size()); }
  // Wait-free; 0 before the first sample, for an unknown GPU, or when the clock was unreadable.
  int64_t SmClockMhz(int gpu) const override;
  // The last full reading of `gpu`, if any.
  std::optional<GpuSample> LastSample(int gpu) const;

  // One round over every GPU (the thread's body; tests call it directly without Start).
  void SampleOnce();

 private:
  void Run();

  const std::shared_ptr<GpuSampler> sampler_;
  const absl::Duration period_;
  std::vector<std::atomic<int64_t>> sm_clock_mhz_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::vector<std::optional<GpuSample>> last_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool logged_error_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_GPU_MONITOR_H_
