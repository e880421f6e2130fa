#include "client/chronobench/latency_recorder.h"

#include <grpcpp/support/status_code_enum.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/batch_sizes.h"
#include "common/launch_bound.h"
#include "common/saturating.h"
#include "common/status_macros.h"

namespace chronoserve::client::bench {

const char* MetricName(Metric metric) {
  static constexpr const char* kNames[] = {
      "e2e", "e2e_actual_send", "transport", "server_total", "queue", "input_stage",
      "h2d", "compute",         "launch",    "d2h",          "output_stage", "admit", "handback", "device_gap"};
  static_assert(std::size(kNames) == kMetricCount);
  return kNames[static_cast<int>(metric)];
}

const char* GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {
      "OK",           "CANCELLED",       "UNKNOWN",          "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND",    "ALREADY_EXISTS",  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",     "UNIMPLEMENTED",    "INTERNAL",
      "UNAVAILABLE",  "DATA_LOSS",       "UNAUTHENTICATED"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) return "UNKNOWN_CODE";
  return kNames[code];
}

int ValidGrpcCode(int64_t code) {
  constexpr int64_t kLast = static_cast<int64_t>(grpc::StatusCode::UNAUTHENTICATED);
  return code >= 0 && code <= kLast ? static_cast<int>(code) : static_cast<int>(grpc::StatusCode::UNKNOWN);
}

void LatencyRecorder::Allocate() {
  for (auto& h : metrics_) h.Allocate();
  batch_size_.Allocate();
  schedule_lag_.Allocate();
  idle_before_.Allocate();
}

bool LatencyRecorder::Record(const RequestRecord& r) {
  if (r.intended_ns < measure_from_ns_) {
    ++discarded_;
    if (r.grpc_code == 0) ++discarded_successes_;
    return false;
  }
  const int64_t e2e_actual = r.done_ns - r.sent_ns;
  metrics_[static_cast<int>(Metric::kE2e)].Record(r.done_ns - r.intended_ns);
  metrics_[static_cast<int>(Metric::kE2eActualSend)].Record(e2e_actual);
  schedule_lag_.Record(r.sent_ns - r.intended_ns);
  if (r.traced) ++traced_;
  if (r.grpc_code != 0) {
    ++errors_;
    ++errors_by_code_[ValidGrpcCode(r.grpc_code)];
    return true;
  }
  ++successes_;
  if (!r.timing.has_value()) {
    ++without_timing_;
    return true;
  }
  RecordTiming(*r.timing, e2e_actual);
  return true;
}

void LatencyRecorder::RecordTiming(const RequestTiming& t, int64_t e2e_actual_ns) {
  auto rec = [this](Metric m, int64_t v) { metrics_[static_cast<int>(m)].Record(v); };
  // In 128 bits, clamped: server_total is the server's figure, whatever its value.
  const int64_t transport = ClampToInt64(static_cast<__int128>(e2e_actual_ns) - t.server_total_ns);
  if (!t.IsConsistent() || transport < 0) ++timing_violations_;
  rec(Metric::kTransport, transport);  // a negative residual is clamped to 0 and counted there too
  rec(Metric::kServerTotal, t.server_total_ns);
  rec(Metric::kQueue, t.queue_ns);
  rec(Metric::kInputStage, t.input_stage_ns);
  rec(Metric::kH2d, t.h2d_ns);
  rec(Metric::kCompute, t.compute_ns);
  rec(Metric::kLaunch, t.launch_ns);
  rec(Metric::kD2h, t.d2h_ns);
  rec(Metric::kOutputStage, t.output_stage_ns);
  if (t.admit_ns > 0) {  // a server that reports the rest of server_total (0 from older ones)
    rec(Metric::kAdmit, t.admit_ns);
    rec(Metric::kHandback, t.handback_ns);
    rec(Metric::kDeviceGap, t.device_gap_ns());
  }
  batch_size_.Record(t.batch_size);
  if (t.batch_size > 0) ++responses_by_batch_size_[t.batch_size];
  idle_before_.Record(t.idle_before_us);
  if (t.cold) ++cold_;
  if (t.device_timed) {
    ++device_timed_;
    if (IsLaunchBound(t.device_timed, t.launch_ns, t.compute_ns)) {
      ++launch_bound_;
      if (t.cuda_graph) ++launch_bound_graphs_;
    }
  }
}

absl::Status LatencyRecorder::Merge(const LatencyRecorder& o) {
  for (int i = 0; i < kMetricCount; ++i) RETURN_IF_ERROR(metrics_[i].Add(o.metrics_[i]));
  RETURN_IF_ERROR(batch_size_.Add(o.batch_size_));
  for (const auto& [size, n] : o.responses_by_batch_size_) responses_by_batch_size_[size] += n;
  RETURN_IF_ERROR(schedule_lag_.Add(o.schedule_lag_));
  RETURN_IF_ERROR(idle_before_.Add(o.idle_before_));
  successes_ += o.successes_;
  errors_ += o.errors_;
  for (const auto& [code, n] : o.errors_by_code_) errors_by_code_[code] += n;
  without_timing_ += o.without_timing_;
  traced_ += o.traced_;
  timing_violations_ += o.timing_violations_;
  cold_ += o.cold_;
  device_timed_ += o.device_timed_;
  launch_bound_ += o.launch_bound_;
  launch_bound_graphs_ += o.launch_bound_graphs_;
  discarded_ += o.discarded_;
  discarded_successes_ += o.discarded_successes_;
  return absl::OkStatus();
}

double LatencyRecorder::items_per_batch() const { return ItemsPerBatch(responses_by_batch_size_); }

int64_t LatencyRecorder::batch_size_responses() const {
  int64_t responses = 0;
  for (const auto& [size, n] : responses_by_batch_size_) responses += n;
  return responses;
}

std::vector<std::pair<std::string, const Histogram*>> LatencyRecorder::Histograms() const {
  std::vector<std::pair<std::string, const Histogram*>> all;
  for (int m = 0; m < kMetricCount; ++m) all.emplace_back(MetricName(static_cast<Metric>(m)), &metrics_[m]);
  all.emplace_back("batch_size_executed", &batch_size_);
  all.emplace_back("schedule_lag", &schedule_lag_);
  all.emplace_back("idle_before_us", &idle_before_);
  return all;
}

int64_t LatencyRecorder::saturated_values() const {
  int64_t n = 0;
  for (const auto& [name, h] : Histograms()) n += h->saturated();
  return n;
}

int64_t LatencyRecorder::negative_values() const {
  int64_t n = 0;
  for (const auto& [name, h] : Histograms()) n += h->negative();
  return n;
}

std::optional<std::string> ClampedValuesWarning(const LatencyRecorder& r) {
  if (r.saturated_values() == 0 && r.negative_values() == 0) return std::nullopt;
  std::string saturated;
  std::string negative;
  for (const auto& [name, h] : r.Histograms()) {
    if (h->saturated() > 0) absl::StrAppend(&saturated, saturated.empty() ? "" : ", ", name, " ", h->saturated());
    if (h->negative() > 0) absl::StrAppend(&negative, negative.empty() ? "" : ", ", name, " ", h->negative());
  }
  std::string out = "histogram values clamped:";
  if (!saturated.empty()) {
    absl::StrAppend(&out, " ", r.saturated_values(), " above the range recorded as its maximum (", saturated,
                    "; percentiles, mean and max understate them)");
  }
  if (!negative.empty()) {
    absl::StrAppend(&out, saturated.empty() ? " " : "; ", r.negative_values(), " negative recorded as 0 (", negative,
                    ")");
  }
  return out;
}

std::optional<std::string> LaunchBoundWarning(const LatencyRecorder& r) {
  if (r.device_timed() == 0 || 2 * r.launch_bound() < r.device_timed()) return std::nullopt;
  const bool graphs = 2 * r.launch_bound_graphs() >= r.launch_bound();
  return absl::StrFormat(
      "launch-bound: in %.0f%% of the device-timed responses the batch's host launch took at least 80%% of its "
      "GPU compute (p50 launch %.0f us, compute %.0f us), so the GPU waited for the host to enqueue kernels; %s",
      100.0 * static_cast<double>(r.launch_bound()) / static_cast<double>(r.device_timed()),
      r.metric(Metric::kLaunch).ValueAtPercentile(50) / 1e3, r.metric(Metric::kCompute).ValueAtPercentile(50) / 1e3,
      graphs ? "the forwards already were CUDA graph replays: larger batches spread each launch over more items"
             : "consider CUDA graphs (optimization { cuda { graphs: true } } in the model's config.pbtxt)");
}

}  // namespace chronoserve::client::bench
