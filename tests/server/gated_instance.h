// GatedInstance: a fake ModelInstance for scheduling tests that need to hold a worker inside
// Execute() deterministically (no sleeps). Computes OUTPUT__k = INPUT__0 * (k + 2) for FP32 so
// every request's rows can be checked, and logs which request ids each worker executed.
//
//   Gate gate;                                     // shared by a model's instances
//   gate.Arm();                                    // the next client batch will block...
//   send A; ASSERT_TRUE(gate.WaitHeld(timeout));   // ...and it has: a worker is parked on A
//   ... queue B, C; check what the server answers while the worker is held ...
//   gate.Release();
//
// Warm-up (synthetic) batches never block and are not logged. Thread-safe: each instance is
// called from its worker thread; the test thread arms, waits and releases.
#ifndef CHRONOSERVE_TESTS_SERVER_GATED_INSTANCE_H_
#define CHRONOSERVE_TESTS_SERVER_GATED_INSTANCE_H_

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"

namespace chronoserve::testing {

class Gate {
 public:
  // The next client batch (any worker) parks in Execute until Release().
  void Arm() {
    absl::MutexLock lock(&mu_);
    armed_ = true;
    released_ = false;
    held_worker_ = -1;
  }
  // Opens the gate (idempotent); a parked batch continues.
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  // Waits until a batch is parked; false on timeout.
  bool WaitHeld(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto held = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return held_worker_ >= 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
  }
  int held_worker() const {
    absl::MutexLock lock(&mu_);
    return held_worker_;
  }
  // Waits until the transport has marked the parked batch's first request cancelled (its client
  // cancelled it, or its deadline passed); false on timeout or when no batch is parked. Polled: the
  // flag is an atomic that no lock guards.
  bool WaitHeldCancelled(absl::Duration timeout) {
    std::shared_ptr<server::CancelFlag> flag;
    {
      absl::MutexLock lock(&mu_);
      flag = held_cancelled_;
    }
    if (flag == nullptr) return false;
    const absl::Time deadline = absl::Now() + timeout;
    while (!flag->IsSet()) {
      if (absl::Now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  // Every client request id executed so far, with the worker that ran it.
  std::vector<std::pair<std::string, int>> executed() const {
    absl::MutexLock lock(&mu_);
    return executed_;
  }
  bool Executed(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    for (const auto& e : executed_) {
      if (e.first == id) return true;
    }
    return false;
  }

  // Called by GatedInstance on its worker thread. Parks when armed; a parked batch that is never
  // released gives up after 60 s so a failing test cannot hang the suite.
  void OnExecute(const server::Batch& batch, int worker) {
    absl::MutexLock lock(&mu_);
    for (const auto& r : batch) executed_.emplace_back(r->id, worker);
    if (!armed_) return;
    armed_ = false;
    held_worker_ = worker;
    held_cancelled_ = batch.empty() ? nullptr : batch.front()->cancelled;
    auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return released_; };
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Seconds(60));
  }

 private:
  mutable absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int held_worker_ ABSL_GUARDED_BY(mu_) = -1;
  std::shared_ptr<server::CancelFlag> held_cancelled_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, int>> executed_ ABSL_GUARDED_BY(mu_);
};

class GatedInstance final : public server::ModelInstance {
 public:
  // `spec`: FP32 INPUT__0, FP32 outputs of the same per-item shape. `gate` must outlive it.
  GatedInstance(const server::ModelSpec& spec, int worker, Gate* gate)
      : spec_(spec), worker_(worker), gate_(gate) {}

  absl::Status Execute(server::Batch& batch, server::BatchTiming* timing) override {
    const bool synthetic = !batch.empty() && batch.front()->synthetic;
    if (!synthetic) gate_->OnExecute(batch, worker_);
    int64_t items = 0;
    for (const auto& r : batch) items += r->batch_items;
    timing->batch_size = items;
    timing->staged_ns = SteadyClock::Now();
    timing->compute_ns = 1;
    timing->gpu_done_ns = SteadyClock::Now();
    for (auto& r : batch) {
      const server::InputTensor& in = r->inputs.front();
      const size_t n = in.byte_size / sizeof(float);
      std::string bytes(in.byte_size, '\0');
      for (auto& out : r->outputs) {
        out.shape = in.shape;
        const float scale = static_cast<float>(out.index + 2);
        for (size_t i = 0; i < n; ++i) {
          float x;
          std::memcpy(&x, in.data + i * sizeof(float), sizeof(float));
          x *= scale;
          std::memcpy(bytes.data() + i * sizeof(float), &x, sizeof(float));
        }
        // Into the response or a shared-memory region, as the real backend does.
        absl::Status written = server::WriteOutputBytes(spec_, spec_.outputs[out.index].name, bytes.data(),
                                                        bytes.size(), out);
        if (!written.ok() && r->status.ok()) r->status = std::move(written);
      }
      r->timeline.output_done_ns = SteadyClock::Now();
    }
    return absl::OkStatus();
  }
  int gpu() const override { return -1; }
  std::string device_name() const override { return "gated-fake"; }

 private:
  const server::ModelSpec spec_;
  const int worker_;
  Gate* const gate_;
};

// A model served by GatedInstances: FP32 INPUT__0 [4] -> OUTPUT__0 = 2x, OUTPUT__1 = 3x.
inline server::ModelSpec GatedSpec(const std::string& name, int max_batch_size, uint64_t max_queue_delay_us,
                                   uint32_t max_queue_size = 0) {
  server::ModelSpec spec;
  spec.name = name;
  spec.platform = "pytorch_libtorch";
  spec.max_batch_size = max_batch_size;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {4}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {4}}, {"OUTPUT__1", DataType::kFp32, {4}}};
  server::InstanceGroupSpec group;
  group.kind = server::InstanceKind::kCpu;
  spec.instance_groups = {group};
  spec.dynamic_batching.enabled = true;
  spec.dynamic_batching.max_queue_delay_us = max_queue_delay_us;
  spec.dynamic_batching.queue_policy.max_queue_size = max_queue_size;
  return spec;
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_GATED_INSTANCE_H_
