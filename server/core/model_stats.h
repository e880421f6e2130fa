// ModelStats: cumulative per-model statistics in Triton's shape (counts + nanoseconds per stage,
// per executed batch size). Written by the threads that complete requests (many at once under
// load), read by the gRPC ModelStatistics handler. A successful request adds to striped counters
// (common/striped_counters.h) and takes no lock; failures and executed batches (once per batch) take a mutex. A snapshot
// taken while requests complete may show one request's figures in some fields and not yet in
// others; once they have completed, it is exact.
#ifndef CHRONOSERVE_SERVER_CORE_MODEL_STATS_H_
#define CHRONOSERVE_SERVER_CORE_MODEL_STATS_H_

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/striped_counters.h"
#include "common/timing.h"

namespace chronoserve::server {

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(int64_t value_ns) {
    ++count;
    ns += value_ns > 0 ? static_cast<uint64_t>(value_ns) : 0;
  }
};

struct BatchSizeStats {
  Duration compute_input;   // input_stage + h2d
  Duration compute_infer;   // compute
  Duration compute_output;  // d2h + output_stage
};

struct ModelStatsSnapshot {
  uint64_t last_inference_ms = 0;  // wall clock, ms since the epoch
  uint64_t inference_count = 0;    // successful items
  uint64_t execution_count = 0;    // executed batches
  Duration success;                // per request, server_total
  Duration fail;
  Duration queue;
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
  uint64_t cancelled = 0;          // answered CANCELLED: before execution, or executed for a caller gone
  uint64_t deadline_exceeded = 0;  // answered DEADLINE_EXCEEDED: the same for a deadline passed
  uint64_t rejected = 0;           // refused at enqueue (queue full)
  std::map<int64_t, BatchSizeStats> by_batch_size;
};

class ModelStats {
 public:
  // One successful request (its finalized timing). Without `request_timing` (--request-timing off)
  // only the count, server_total and queue are recorded: compute_input / compute_infer /
  // compute_output need the device spans, and a partial figure would read as a whole one.
  void RecordSuccess(const RequestTiming& timing, int64_t items, bool request_timing);
  // One failed request; `reason` counters are bumped for cancel / deadline / rejection.
  enum class Failure { kOther, kCancelled, kDeadline, kRejected };
  void RecordFailure(int64_t server_total_ns, Failure reason);
  // One executed batch (called once per batch, from the worker).
  void RecordExecution(int64_t batch_size, int64_t compute_input_ns, int64_t compute_infer_ns,
                       int64_t compute_output_ns);
  // One executed batch without request timing: counted, no per-batch-size durations.
  void RecordUntimedExecution();

  ModelStatsSnapshot Snapshot() const;

 private:
  // The per-request figures, each a count and a sum of nanoseconds (or items).
  enum Field : size_t {
    kSuccessCount, kSuccessNs, kQueueCount, kQueueNs, kInputCount, kInputNs, kInferCount, kInferNs,
    kOutputCount, kOutputNs, kInferenceItems, kFieldCount
  };
  void Add(Field count, int64_t value_ns);  // count + 1, value_ns (clamped at 0) into the next field
  Duration Load(Field count) const;

  StripedCounters per_request_{kFieldCount};
  std::atomic<uint64_t> last_inference_ms_{0};
  // Failures and executions: the snapshot's other fields.
  mutable absl::Mutex mu_;
  ModelStatsSnapshot rest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_MODEL_STATS_H_
