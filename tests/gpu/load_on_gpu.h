// LoadOnGpu0: a real Torch instance of a model on GPU 0, for the GPU suites that test one worker
// without a server. The activity registry is the caller's and must outlive the instance (declare it
// first).
#ifndef CHRONOSERVE_TESTS_GPU_LOAD_ON_GPU_H_
#define CHRONOSERVE_TESTS_GPU_LOAD_ON_GPU_H_

#include <gtest/gtest.h>

#include <memory>

#include "common/clock.h"
#include "server/backend/device_activity.h"
#include "server/backend/model_instance.h"
#include "server/backend/torch_backend.h"

namespace chronoserve::testing {

// OPTIONS' gpu and activity are set here; the rest (worker, request_timing, ...) is the caller's.
// A failed load fails the test, with its status, and gives null.
inline std::unique_ptr<server::ModelInstance> LoadOnGpu0(const server::ModelSpec& spec,
                                                         server::DeviceActivityRegistry& devices,
                                                         server::InstanceOptions options = {}) {
  options.gpu = 0;
  options.activity = devices.Get(0, SteadyClock::Now());
  auto instance = server::CreateTorchInstance(spec, options);
  EXPECT_TRUE(instance.ok()) << "worker " << options.worker << ": " << instance.status();
  return instance.ok() ? *std::move(instance) : nullptr;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_GPU_LOAD_ON_GPU_H_
