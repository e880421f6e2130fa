// TraceControl: the server's trace settings (server/core/trace_settings.h) over the OpenTelemetry
// sampler it started with, and the decision each finished request's trace takes from them. Triton's
// keys: trace_level (OFF or TIMESTAMPS), trace_rate (one new trace in N; 0 = none), trace_count
// (traces left to record; -1 = no limit), and, read only, trace_mode (opentelemetry), trace_file
// (--trace-file's path, "" when spans go to a collector) and log_frequency ("0": one file).
// Server-wide settings, and per model the ones set for it (the others follow the server-wide ones). A caller's sampled traceparent is followed as the start sampler
// says (the parentbased_* samplers) whatever trace_rate is; trace_level OFF and a trace_count run
// out stop those too. ShouldTrace runs on worker threads (a reader lock and, while a trace_count is
// set, an atomic step); Update on RPC threads.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_
#define CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/core/trace_settings.h"
#include "server/telemetry/sampler.h"

namespace chronoserve::server::telemetry {

class TraceControl final : public TraceSettings {
 public:
  // `collector`: the server exports traces (an OTLP endpoint or a trace file is set). Without one
  // every trace setting reads OFF and Update refuses changes (FAILED_PRECONDITION). `trace_file`: the
  // file the spans are written to (--trace-file), "" when they go to a collector.
  TraceControl(Sampler sampler, bool collector, std::string trace_file = "");

  // Whether a finished request of `model` is traced; `parent` is the caller's context or null.
  // Counts the trace against the trace_count that applies.
  bool ShouldTrace(const std::string& model, const TraceParent* parent, const TraceId& trace_id);

  absl::StatusOr<TraceSettingsMap> Update(const std::string& model, const TraceSettingsMap& changes) override;

 private:
  // Traces left to record; -1 = no limit. Taken under the reader lock, replaced under the writer's.
  using Remaining = std::unique_ptr<std::atomic<int64_t>>;
  struct Settings {
    std::optional<bool> on;
    std::optional<Sampler> sampler;
    Remaining remaining;  // null: not set
  };
  // What applies to a model: its own settings where set, else the server-wide ones.
  struct Effective {
    bool on;
    const Sampler* sampler;
    std::atomic<int64_t>* remaining;
  };

  Effective EffectiveFor(const std::string& model) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  TraceSettingsMap Describe(const std::string& model) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static bool TakeOne(std::atomic<int64_t>* remaining);

  const bool collector_;
  const std::string trace_file_;
  const Sampler start_sampler_;
  mutable absl::Mutex mu_;
  Settings global_ ABSL_GUARDED_BY(mu_);  // every field set
  std::map<std::string, Settings> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_
