// GpuClockSource: the latest SM clock of a GPU, as a background monitor last sampled it. Read by
// workers at batch start (BatchTiming::sm_clock_mhz), so implementations must be wait-free (an
// atomic load, never a driver call). Owned by whoever builds it (main's telemetry); must outlive
// the model instances that read it.
#ifndef CHRONOSERVE_SERVER_CORE_GPU_CLOCK_SOURCE_H_
#define CHRONOSERVE_SERVER_CORE_GPU_CLOCK_SOURCE_H_

#include <cstdint>

namespace chronoserve::server {

class GpuClockSource {
 public:
  virtual ~GpuClockSource() = default;
  // SM clock of CUDA device `gpu` in MHz at the last sample; 0 when unknown.
  virtual int64_t SmClockMhz(int gpu) const = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_GPU_CLOCK_SOURCE_H_
