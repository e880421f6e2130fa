#include "server/scheduler/worker.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tensor_data.h"

namespace chronoserve::server {
namespace {

// A request of `items` random items (shape from the spec; -1 dims from `dims_override` or 1).
std::unique_ptr<InferRequest> SyntheticRequest(
    const ModelSpec& spec, int items, const std::map<std::string, std::vector<int64_t>>& dims_override,
    std::vector<std::string>* output_scratch, std::mt19937_64& rng) {
  auto r = std::make_unique<InferRequest>();
  r->synthetic = true;
  r->batch_items = spec.max_batch_size > 0 ? items : 1;
  std::string key;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorSpec& t = spec.inputs[i];
    std::vector<int64_t> dims = t.dims;
    auto it = dims_override.find(t.name);
    if (it != dims_override.end() && it->second.size() == dims.size()) dims = it->second;
    for (auto& d : dims) d = d < 0 ? 1 : d;
    InputTensor in;
    in.index = static_cast<int>(i);
    in.dtype = t.dtype;
    in.shape = dims;
    if (spec.max_batch_size > 0) in.shape.insert(in.shape.begin(), items);
    in.owned_data = RandomTensorBytes(t.dtype, ElementCount(in.shape), rng);
    in.data = in.owned_data.data();
    in.byte_size = in.owned_data.size();
    absl::StrAppend(&key, ShapeString(dims), ";");
    r->inputs.push_back(std::move(in));
  }
  r->set_shape_key(key);
  output_scratch->resize(spec.outputs.size());
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    OutputTensor out;
    out.index = static_cast<int>(k);
    out.data = &(*output_scratch)[k];
    r->outputs.push_back(std::move(out));
  }
  return r;
}

}  // namespace

Worker::Worker(int index, std::unique_ptr<ModelInstance> instance, ModelQueue* queue,
               ModelStats* stats, const Clock* clock)
    : index_(index), instance_(std::move(instance)), queue_(queue), stats_(stats), clock_(clock) {}

Worker::~Worker() { Join(); }

absl::Status Worker::Warmup(const ModelSpec& spec, const WarmupOptions& options) {
  std::mt19937_64 rng(0x5eed + index_);
  std::vector<std::string> scratch;
  auto run = [&](int items, const std::map<std::string, std::vector<int64_t>>& dims) -> absl::Status {
    Batch batch;
    batch.push_back(SyntheticRequest(spec, items, dims, &scratch, rng));
    BatchTiming timing;
    timing.worker = index_;
    timing.dequeued_ns = clock_->NowNs();
    absl::Status status = instance_->Execute(batch, &timing);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("warm-up at batch size ", items, " on ",
                                                      instance_->device_name(), ": ", status.message()));
    }
    return absl::OkStatus();
  };
  for (const WarmupSpec& w : spec.warmups) {
    for (int i = 0; i < w.count; ++i) RETURN_IF_ERROR(run(w.batch_size, w.input_dims));
  }
  const int max_items = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
  for (int items = 1; items <= max_items; ++items) {
    for (int i = 0; i < options.runs_per_batch_size; ++i) RETURN_IF_ERROR(run(items, {}));
  }
  return absl::OkStatus();
}

void Worker::Start() {
  absl::Notification running;
  thread_ = std::thread([this, &running] {
    running.Notify();
    Loop();
  });
  running.WaitForNotification();
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Loop() {
  Batch batch;
  Batch dropped;
  while (queue_->NextBatch(&batch, &dropped)) {
    for (auto& r : dropped) {
      absl::Status status = r->status;
      InferRequest::Complete(std::move(r), std::move(status));
    }
    dropped.clear();
    if (!batch.empty()) RunBatch(std::move(batch));
    batch.clear();
  }
}

void Worker::RunBatch(Batch batch) {
  BatchTiming timing;
  timing.dequeued_ns = clock_->NowNs();
  timing.worker = index_;
  timing.cold = !served_any_;
  served_any_ = true;
  absl::Status status = instance_->Execute(batch, &timing);
  if (status.ok()) {
    const int64_t last_output = batch.back()->timeline.output_done_ns;
    stats_->RecordExecution(timing.batch_size,
                            (timing.staged_ns - timing.dequeued_ns) + timing.h2d_ns,
                            timing.compute_ns,
                            timing.d2h_ns + (last_output - timing.gpu_done_ns));
  } else {
    CS_LOG(ERROR) << status.message();
  }
  for (auto& r : batch) {
    r->timeline.SetBatch(timing);
    InferRequest::Complete(std::move(r), status);
  }
}

}  // namespace chronoserve::server
