#include "server/core/model_stats.h"

#include "common/clock.h"

namespace chronoserve::server {

void ModelStats::Add(Field count, int64_t value_ns) {
  per_request_.Add(count, 1);
  if (value_ns > 0) per_request_.Add(count + 1, static_cast<uint64_t>(value_ns));
}

Duration ModelStats::Load(Field count) const {
  Duration d;
  d.count = per_request_.Sum(count);
  d.ns = per_request_.Sum(count + 1);
  return d;
}

void ModelStats::RecordSuccess(const RequestTiming& t, int64_t items, bool request_timing) {
  // Stored only when it moves forward (once a millisecond): every thread reads the line, few write
  // it, and a thread that read the clock earlier never stores an older value over a later one.
  const uint64_t now_ms = static_cast<uint64_t>(WallNowNs() / 1000000);
  uint64_t seen = last_inference_ms_.load(std::memory_order_relaxed);
  while (seen < now_ms && !last_inference_ms_.compare_exchange_weak(seen, now_ms, std::memory_order_relaxed)) {
  }
  per_request_.Add(kInferenceItems, static_cast<uint64_t>(items));
  Add(kSuccessCount, t.server_total_ns);
  Add(kQueueCount, t.queue_ns);
  if (!request_timing) return;
  Add(kInputCount, t.input_stage_ns + t.h2d_ns);
  Add(kInferCount, t.compute_ns);
  Add(kOutputCount, t.d2h_ns + t.output_stage_ns);
}

void ModelStats::RecordFailure(int64_t server_total_ns, Failure reason) {
  absl::MutexLock lock(&mu_);
  rest_.fail.Add(server_total_ns);
  switch (reason) {
    case Failure::kCancelled: ++rest_.cancelled; break;
    case Failure::kDeadline: ++rest_.deadline_exceeded; break;
    case Failure::kRejected: ++rest_.rejected; break;
    case Failure::kOther: break;
  }
}

void ModelStats::RecordExecution(int64_t batch_size, int64_t compute_input_ns,
                                 int64_t compute_infer_ns, int64_t compute_output_ns) {
  absl::MutexLock lock(&mu_);
  ++rest_.execution_count;
  BatchSizeStats& b = rest_.by_batch_size[batch_size];
  b.compute_input.Add(compute_input_ns);
  b.compute_infer.Add(compute_infer_ns);
  b.compute_output.Add(compute_output_ns);
}

void ModelStats::RecordUntimedExecution() {
  absl::MutexLock lock(&mu_);
  ++rest_.execution_count;
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  ModelStatsSnapshot s;
  {
    absl::MutexLock lock(&mu_);
    s = rest_;
  }
  s.last_inference_ms = last_inference_ms_.load(std::memory_order_relaxed);
  s.inference_count = per_request_.Sum(kInferenceItems);
  s.success = Load(kSuccessCount);
  s.queue = Load(kQueueCount);
  s.compute_input = Load(kInputCount);
  s.compute_infer = Load(kInferCount);
  s.compute_output = Load(kOutputCount);
  return s;
}

}  // namespace chronoserve::server
