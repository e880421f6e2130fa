// NvmlSampler: a GpuSampler over NVML, loaded at run time with dlopen("libnvidia-ml.so.1") so the
// server neither links nor needs NVML (no driver: Create fails and the monitor is disabled).
// CUDA ordinals are mapped to NVML devices through CUDA_VISIBLE_DEVICES (indices or GPU-UUIDs);
// without it, ordinal i is NVML index i, which holds when CUDA_DEVICE_ORDER=PCI_BUS_ID (the order
// NVML uses). Owned by the GpuMonitor; used from its thread only.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_NVML_SAMPLER_H_
#define CHRONOSERVE_SERVER_TELEMETRY_NVML_SAMPLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/telemetry/gpu_sampler.h"

namespace chronoserve::server::telemetry {

struct NvmlApi;  // the dlsym'd entry points (nvml_sampler.cc)

class NvmlSampler final : public GpuSampler {
 public:
  // Loads NVML from `library` and initialises it. NOT_FOUND when the library or a symbol is
  // missing, UNAVAILABLE when nvmlInit fails (no driver / no GPU).
  static absl::StatusOr<std::unique_ptr<NvmlSampler>> Create(const std::string& library = "libnvidia-ml.so.1");
  ~NvmlSampler() override;

  int DeviceCount() const override { return static_cast<int>(devices_.size()); }
  std::string Description() const override { return description_; }
  absl::StatusOr<GpuSample> Sample(int gpu) override;

 private:
  NvmlSampler(void* handle, std::unique_ptr<NvmlApi> api);
  absl::Status MapDevices();

  void* const handle_;
  const std::unique_ptr<NvmlApi> api_;
  std::vector<void*> devices_;  // nvmlDevice_t per CUDA ordinal
  std::string description_;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_NVML_SAMPLER_H_
