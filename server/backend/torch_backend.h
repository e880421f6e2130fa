// The LibTorch (TorchScript) backend: loads `model.pt` onto a device and executes batches. This
// header carries no LibTorch types so that only torch_backend.cc pays for LibTorch's headers.
#ifndef CHRONOSERVE_SERVER_BACKEND_TORCH_BACKEND_H_
#define CHRONOSERVE_SERVER_BACKEND_TORCH_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/backend/device_activity.h"
#include "server/backend/model_instance.h"
#include "server/core/gpu_clock_source.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

struct InstanceOptions {
  int worker = 0;                        // index within the model, for timing.worker
  int gpu = -1;                          // CUDA device ordinal; -1 = CPU
  DeviceActivity* activity = nullptr;    // the device's idle tracker (not owned)
  const Clock* clock = SteadyClock::Get();
  // SM clock at batch start (the GPU monitor's last sample); null = not reported (0).
  const GpuClockSource* gpu_clock = nullptr;
  // --request-timing off: no span events (one event to wait for the batch on a GPU), no launch
  // timer, no idle tracking; BatchTiming::request_timing says so to the rest of the server.
  bool request_timing = true;
};

// Loads spec.model_path onto the device in `options` (a private copy per instance) and prepares
// its stream, staging and events. Errors name the model, file and reason.
absl::StatusOr<std::unique_ptr<ModelInstance>> CreateTorchInstance(const ModelSpec& spec,
                                                                   const InstanceOptions& options);

// Number of CUDA devices usable by this build (0 when LibTorch has no CUDA or none is present).
int CudaDeviceCount();

// "LibTorch 2.11.0 (CUDA)" / "LibTorch 1.13.0 (CPU)", for logs and ServerMetadata.
std::string TorchBuildDescription();

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_TORCH_BACKEND_H_
