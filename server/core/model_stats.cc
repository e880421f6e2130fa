#include "server/core/model_stats.h"

#include "common/clock.h"

namespace chronoserve::server {

void ModelStats::RecordSuccess(const RequestTiming& t, int64_t items, bool request_timing) {
  absl::MutexLock lock(&mu_);
  stats_.last_inference_ms = static_cast<uint64_t>(WallNowNs() / 1000000);
  stats_.inference_count += static_cast<uint64_t>(items);
  stats_.success.Add(t.server_total_ns);
  stats_.queue.Add(t.queue_ns);
  if (!request_timing) return;
  stats_.compute_input.Add(t.input_stage_ns + t.h2d_ns);
  stats_.compute_infer.Add(t.compute_ns);
  stats_.compute_output.Add(t.d2h_ns + t.output_stage_ns);
}

void ModelStats::RecordFailure(int64_t server_total_ns, Failure reason) {
  absl::MutexLock lock(&mu_);
  stats_.fail.Add(server_total_ns);
  switch (reason) {
    case Failure::kCancelled: ++stats_.cancelled; break;
    case Failure::kDeadline: ++stats_.deadline_exceeded; break;
    case Failure::kRejected: ++stats_.rejected; break;
    case Failure::kOther: break;
  }
}

void ModelStats::RecordExecution(int64_t batch_size, int64_t compute_input_ns,
                                 int64_t compute_infer_ns, int64_t compute_output_ns) {
  absl::MutexLock lock(&mu_);
  ++stats_.execution_count;
  BatchSizeStats& b = stats_.by_batch_size[batch_size];
  b.compute_input.Add(compute_input_ns);
  b.compute_infer.Add(compute_infer_ns);
  b.compute_output.Add(compute_output_ns);
}

void ModelStats::RecordUntimedExecution() {
  absl::MutexLock lock(&mu_);
  ++stats_.execution_count;
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace chronoserve::server
