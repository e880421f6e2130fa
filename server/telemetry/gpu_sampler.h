// GpuSampler: reads one GPU's clocks, power, utilisation, memory and temperature. The real one is
// NvmlSampler (nvml_sampler.h); tests use a fake. Called only from the GpuMonitor's thread.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_GPU_SAMPLER_H_
#define CHRONOSERVE_SERVER_TELEMETRY_GPU_SAMPLER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace chronoserve::server::telemetry {

// One reading. A field the driver could not read is -1.
struct GpuSample {
  int64_t sm_clock_mhz = -1;
  int64_t memory_clock_mhz = -1;
  int64_t power_mw = -1;
  int64_t utilization_gpu_pct = -1;     // % of NVML's own sampling window (set by the driver) a kernel ran
  int64_t utilization_memory_pct = -1;  // % of that window device memory was read or written
  int64_t memory_used_bytes = -1;
  int64_t memory_total_bytes = -1;
  int64_t temperature_c = -1;
};

class GpuSampler {
 public:
  virtual ~GpuSampler() = default;
  // GPUs this sampler can read, indexed like CUDA device ordinals (0..count-1).
  virtual int DeviceCount() const = 0;
  // "NVML 12.570 driver 570.86" etc., for the startup log.
  virtual std::string Description() const = 0;
  // Reads GPU `gpu`; an error when the whole device cannot be read.
  virtual absl::StatusOr<GpuSample> Sample(int gpu) = 0;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_GPU_SAMPLER_H_
