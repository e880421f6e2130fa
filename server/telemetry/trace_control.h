// TraceControl: the server's trace settings (server/core/trace_settings.h) over the OpenTelemetry
// sampler it started with, and the decision each finished request's trace takes from them. Triton's
// keys: trace_level (OFF or TIMESTAMPS), trace_rate (one new trace in N; 0 = none), trace_count
// (traces left to record; -1 = no limit), trace_file (where the spans are written; "" when they go
// to a collector) and, read only, trace_mode (opentelemetry) and log_frequency ("0": one file).
// Server-wide settings, and per model the ones set for it (the others follow the server-wide ones).
// A caller's sampled traceparent is followed as the start sampler says (the parentbased_* samplers)
// whatever trace_rate is; trace_level OFF and a trace_count run out stop those too. ShouldTrace
// runs on worker threads (a reader lock and, while a trace_count is set, an atomic step); Update on
// RPC threads.
//
// trace_file can be changed while the server runs when its spans go to a file or nowhere (no
// collector at start): the opener makes the new file the destination (the spans of requests
// finished before the change are written to the old one first) before the rest of the request is
// applied. A server started without a destination thus starts tracing once a request names a
// trace_file and trace_level TIMESTAMPS.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_
#define CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_

#include <atomic>
#include <functional>
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

// Makes `path` the file the spans are written to from now on, in place of the one before (if any);
// an error names the path and why it cannot be written.
using TraceFileOpener = std::function<absl::Status(const std::string& path)>;

class TraceControl final : public TraceSettings {
 public:
  // `collector`: the server exports traces (an OTLP endpoint or a trace file is set). `trace_file`:
  // the file the spans are written to (--trace-file), "" when they go to a collector or nowhere.
  // `open_file`: set when trace_file may change (the spans go to a file, or nowhere yet).
  // `file_dir` (--trace-file-dir): where a file a client names is created; "" = a client names no
  // file (trace_file is read only), since any path it named would be any file on the server's disk.
  // A name must be a plain file name in it ("spans-2.jsonl"; no '/'), and reads back as the whole
  // path. Without a destination every trace setting reads OFF, and Update refuses changes
  // (FAILED_PRECONDITION) unless it names a trace_file (and an opener and a directory are set).
  TraceControl(Sampler sampler, bool collector, std::string trace_file = "", TraceFileOpener open_file = nullptr,
               std::string file_dir = "");

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

  const bool start_on_;        // a destination at start: trace_level's start value is TIMESTAMPS
  const TraceFileOpener open_file_;
  const std::string file_dir_;
  const Sampler start_sampler_;
  absl::Mutex file_mu_;  // one trace_file change at a time (taken before mu_, never inside it)
  mutable absl::Mutex mu_;
  bool exporting_ ABSL_GUARDED_BY(mu_);  // spans have a destination
  std::string trace_file_ ABSL_GUARDED_BY(mu_);
  Settings global_ ABSL_GUARDED_BY(mu_);  // every field set
  std::map<std::string, Settings> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_TRACE_CONTROL_H_
