// LatencyRecorder: what one worker saw in one measurement window: a histogram per latency metric
// (client end-to-end, transport residual, and each server span from the response), the executed
// batch size, the open-loop schedule lag, and errors counted by gRPC status code. Each worker
// thread owns one per window; the TrialRunner merges them once the window is closed.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_LATENCY_RECORDER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_LATENCY_RECORDER_H_

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/histogram.h"
#include "common/timing.h"

namespace chronoserve::client::bench {

// Latency metrics, in nanoseconds. The order is the report's column order.
enum class Metric {
  kE2e,            // intended send (open loop) or actual send -> response received
  kE2eActualSend,  // actual send -> response received (differs from kE2e only in open loop)
  kTransport,      // actual-send e2e - server_total: network + (de)serialisation, per request
  kServerTotal,
  kQueue,
  kInputStage,
  kH2d,
  kCompute,
  kLaunch,
  kD2h,
  kOutputStage,
  // The rest of server_total, from servers that report admit and handback (recorded only then):
  kAdmit,      // received by the handler -> enqueued
  kHandback,   // response built -> timing finalised to answer
  kDeviceGap,  // server_total - every span above: inputs staged -> device work observed done, less h2d +
               // compute + d2h (enqueueing, waiting behind a batch ahead, noticing completion)
  kCount,
};
inline constexpr int kMetricCount = static_cast<int>(Metric::kCount);
const char* MetricName(Metric metric);  // "e2e", "e2e_actual_send", "transport", ...

// One finished request, as a worker observed it.
struct RequestRecord {
  int64_t intended_ns = 0;  // schedule time (open loop) or == sent_ns
  int64_t sent_ns = 0;
  int64_t done_ns = 0;
  int grpc_code = 0;        // 0 = OK; outside 0..16 counted as UNKNOWN
  bool traced = false;      // the request carried a traceparent
  std::optional<RequestTiming> timing;  // from the response's timing.* parameters
};

class LatencyRecorder {
 public:
  // Errors: e2e still recorded (a failed request took that long), spans not (there are none). A
  // request intended to be sent before measure_from_ns() is only counted in discarded(): false.
  bool Record(const RequestRecord& record);
  // From now on, records of requests whose intended send time is before `ns` (sent during the
  // warm-up, answered after it) are discarded, not measured. Default: none is.
  void DiscardSentBefore(int64_t ns) { measure_from_ns_ = ns; }
  int64_t measure_from_ns() const { return measure_from_ns_; }
  // Records discarded as sent before measure_from_ns(), and those of them answered OK.
  int64_t discarded() const { return discarded_; }
  int64_t discarded_successes() const { return discarded_successes_; }
  // Requests answered OK while this recorder recorded, discarded or not: what throughput counts (a
  // window's first answers, to requests sent before it, are the server's work in that window too).
  int64_t answered_ok() const { return successes_ + discarded_successes_; }
  // Allocates every histogram now (done by the controller before handing a fresh recorder over).
  void Allocate();
  // Adds `other`'s histograms and counts (discarded() too); measure_from_ns() stays this one's.
  absl::Status Merge(const LatencyRecorder& other);

  const Histogram& metric(Metric m) const { return metrics_[static_cast<int>(m)]; }
  const Histogram& batch_size() const { return batch_size_; }       // executed, from the server
  // Items per executed batch: the mean of batch_size() weighted by batch, not by response (a batch
  // of 16 one-item requests answers 16 of them). Each response's batch holds batch_size items, of
  // which the response's own are a share, so this is the harmonic mean of the responses' batch
  // sizes. 0 before any response said its batch size (batch_size_responses() == 0).
  double items_per_batch() const;
  // Responses that gave a batch size above 0 (those items_per_batch() is over).
  int64_t batch_size_responses() const;
  // Those responses by the batch size they gave (exact: the in-process reference replays the mix).
  const std::map<int64_t, int64_t>& responses_by_batch_size() const { return responses_by_batch_size_; }
  const Histogram& schedule_lag() const { return schedule_lag_; }   // sent - intended, ns
  const Histogram& idle_before() const { return idle_before_; }     // server's idle_before_us
  int64_t successes() const { return successes_; }
  int64_t errors() const { return errors_; }
  const std::map<int, int64_t>& errors_by_code() const { return errors_by_code_; }
  int64_t without_timing() const { return without_timing_; }
  // Requests (OK or not) that carried a traceparent.
  int64_t traced() const { return traced_; }
  // Responses whose spans break TIMING.md's invariants (negative span, stages > server_total, or
  // server_total > client e2e). Counted and reported; their spans are still recorded.
  int64_t timing_violations() const { return timing_violations_; }
  int64_t cold_batches() const { return cold_; }
  // Responses whose spans were timed on the device (CUDA events), and of those, the ones whose
  // batch was launch-bound (common/launch_bound.h) and, of these, forwards that were already CUDA
  // graph replays.
  int64_t device_timed() const { return device_timed_; }
  int64_t launch_bound() const { return launch_bound_; }
  int64_t launch_bound_graphs() const { return launch_bound_graphs_; }
  // Values the histograms clamped (common/histogram.h), summed over all of them: above a
  // histogram's range (recorded as its maximum) and below 0 (recorded as 0).
  int64_t saturated_values() const;
  int64_t negative_values() const;
  // Each histogram by its report name ("e2e", ..., "batch_size_executed", "schedule_lag",
  // "idle_before_us"), for naming the ones that clamped values.
  std::vector<std::pair<std::string, const Histogram*>> Histograms() const;

 private:
  void RecordTiming(const RequestTiming& t, int64_t e2e_actual_ns);

  std::array<Histogram, kMetricCount> metrics_;
  Histogram batch_size_;
  std::map<int64_t, int64_t> responses_by_batch_size_;  // items_per_batch() and the count derive from it
  Histogram schedule_lag_;
  Histogram idle_before_;
  int64_t successes_ = 0;
  int64_t errors_ = 0;
  std::map<int, int64_t> errors_by_code_;
  int64_t without_timing_ = 0;
  int64_t traced_ = 0;
  int64_t timing_violations_ = 0;
  int64_t cold_ = 0;
  int64_t device_timed_ = 0;
  int64_t launch_bound_ = 0;
  int64_t launch_bound_graphs_ = 0;
  int64_t measure_from_ns_ = std::numeric_limits<int64_t>::min();
  int64_t discarded_ = 0;
  int64_t discarded_successes_ = 0;
};

// chronobench's launch-bound flag (issue 6): when at least half of the device-timed responses came
// from launch-bound batches, a warning that gives their share and the p50 launch and compute, and
// suggests CUDA graphs (or, when the forwards already were graph replays, larger batches); nullopt
// otherwise, and always for host-timed (CPU) spans.
std::optional<std::string> LaunchBoundWarning(const LatencyRecorder& recorder);

// When a histogram clamped values: how many, in which metrics, and that their percentiles, mean
// and max are off by that much; nullopt when none was clamped.
std::optional<std::string> ClampedValuesWarning(const LatencyRecorder& recorder);

// "OK", "UNAVAILABLE", ... for a gRPC status code; "UNKNOWN_CODE" outside 0..16.
const char* GrpcCodeName(int code);
// `code` when it is a gRPC status code (0..16), UNKNOWN (2) otherwise: a server's error_code
// parameter or a status read off the wire is clamped before it is counted or cast to int.
int ValidGrpcCode(int64_t code);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_LATENCY_RECORDER_H_
