// RecordingInstance: a ModelInstance decorator for tests. Records the batch size of every Execute
// call, and the BatchTiming (with the worker index the Worker stamped on it) of every client batch
// (not warm-up) that executed OK; delegates to a real instance when given one, otherwise (a fake)
// it fills each requested output with the right number of bytes and host-clock spans. Called by one
// worker thread; the accessors may be called from any thread.
#ifndef CHRONOSERVE_TESTS_FAKES_RECORDING_INSTANCE_H_
#define CHRONOSERVE_TESTS_FAKES_RECORDING_INSTANCE_H_

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"
#include "server/core/timeline.h"

namespace chronoserve::testing {

class RecordingInstance final : public server::ModelInstance {
 public:
  RecordingInstance(const server::ModelSpec& spec, std::unique_ptr<server::ModelInstance> inner)
      : spec_(spec), inner_(std::move(inner)) {}

  absl::Status Execute(server::Batch& batch, server::BatchTiming* timing) override {
    int64_t items = 0;
    for (const auto& r : batch) items += r->batch_items;
    {
      absl::MutexLock lock(&mu_);
      sizes_.push_back(items);
      shape_keys_.push_back(batch.empty() ? "" : batch.front()->shape_key());
    }
    const bool synthetic = !batch.empty() && batch.front()->synthetic;
    absl::Status status = inner_ != nullptr ? inner_->Execute(batch, timing) : FakeExecute(batch, items, timing);
    if (status.ok() && !synthetic) {
      absl::MutexLock lock(&mu_);
      served_.push_back(*timing);
    }
    return status;
  }
  int gpu() const override { return inner_ ? inner_->gpu() : -1; }
  std::vector<int> graph_buckets() const override { return inner_ ? inner_->graph_buckets() : graph_buckets_; }
  // What a fake (no inner instance) says it will replay as CUDA graphs.
  void set_graph_buckets(std::vector<int> buckets) { graph_buckets_ = std::move(buckets); }
  std::string device_name() const override { return inner_ ? inner_->device_name() : "fake"; }

  // Batch sizes of every Execute call, warm-up included, in order.
  std::vector<int64_t> sizes() const {
    absl::MutexLock lock(&mu_);
    return sizes_;
  }
  // The per-item shapes (InferRequest::shape_key) of every Execute call's first request, in order.
  std::vector<std::string> shape_keys() const {
    absl::MutexLock lock(&mu_);
    return shape_keys_;
  }
  // Timings of the client batches that executed OK, in order (timing.worker = the worker's index).
  std::vector<server::BatchTiming> served() const {
    absl::MutexLock lock(&mu_);
    return served_;
  }

 private:
  absl::Status FakeExecute(server::Batch& batch, int64_t items, server::BatchTiming* timing) {
    const int64_t now = SteadyClock::Now();
    timing->batch_size = items;
    timing->staged_ns = now;
    timing->gpu_done_ns = now;
    for (auto& r : batch) {
      for (auto& out : r->outputs) {
        const auto& t = spec_.outputs[out.index];
        out.shape = t.dims;
        if (spec_.max_batch_size > 0) out.shape.insert(out.shape.begin(), r->batch_items);
        if (out.data != nullptr) out.data->assign(ElementCount(out.shape) * DataTypeByteSize(t.dtype), '\x01');
      }
      r->timeline.output_done_ns = SteadyClock::Now();
    }
    return absl::OkStatus();
  }

  const server::ModelSpec spec_;
  std::unique_ptr<server::ModelInstance> inner_;
  std::vector<int> graph_buckets_;
  mutable absl::Mutex mu_;
  std::vector<int64_t> sizes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> shape_keys_ ABSL_GUARDED_BY(mu_);
  std::vector<server::BatchTiming> served_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_RECORDING_INSTANCE_H_
