// CountingInstance: a real GPU instance behind a wrapper that counts its keep-warm runs and keeps
// the last failure, so a test can wait (with a timeout) for an idle worker to have replayed its model.
// CountingRuntime: a model runtime whose workers (one per listed GPU) run such instances.
#ifndef CHRONOSERVE_TESTS_GPU_COUNTING_INSTANCE_H_
#define CHRONOSERVE_TESTS_GPU_COUNTING_INSTANCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/backend/device_activity.h"
#include "server/backend/model_instance.h"
#include "server/backend/torch_backend.h"
#include "server/scheduler/model_runtime.h"

namespace chronoserve::testing {

// Forwards to a real GPU instance; counts keep-warm runs and their failures.
class CountingInstance final : public server::ModelInstance {
 public:
  explicit CountingInstance(std::unique_ptr<server::ModelInstance> inner) : inner_(std::move(inner)) {}
  absl::Status Execute(server::Batch& batch, server::BatchTiming* timing) override {
    return inner_->Execute(batch, timing);
  }
  absl::Status PrepareForServing() override { return inner_->PrepareForServing(); }
  absl::Status KeepWarm() override {
    absl::Status status = inner_->KeepWarm();
    absl::MutexLock lock(&mu_);
    ++runs_;
    if (!status.ok()) last_error_ = status;
    return status;
  }
  int gpu() const override { return inner_->gpu(); }
  std::string device_name() const override { return inner_->device_name(); }
  int WaitForRuns(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return runs_ >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
    return runs_;
  }
  absl::Status last_error() {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  std::unique_ptr<server::ModelInstance> inner_;
  absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

// A runtime of `spec` with one worker per GPU in `gpus`, each a real instance behind a
// CountingInstance (appended to `counters` in that order), scheduled by `clock` (the instances' own
// spans keep the steady clock). `devices` must outlive the runtime.
inline absl::StatusOr<std::unique_ptr<server::ModelRuntime>> CountingRuntime(
    const server::ModelSpec& spec, const std::vector<int>& gpus, server::DeviceActivityRegistry& devices,
    const Clock* clock, std::vector<CountingInstance*>* counters) {
  std::vector<std::unique_ptr<server::ModelInstance>> instances;
  for (int gpu : gpus) {
    server::InstanceOptions options;
    options.gpu = gpu;
    options.activity = devices.Get(gpu, SteadyClock::Now());
    auto real = server::CreateTorchInstance(spec, options);
    if (!real.ok()) return real.status();
    auto counting = std::make_unique<CountingInstance>(*std::move(real));
    counters->push_back(counting.get());
    instances.push_back(std::move(counting));
  }
  return server::ModelRuntime::Create(spec, std::move(instances), server::WarmupOptions{}, clock);
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_GPU_COUNTING_INSTANCE_H_
