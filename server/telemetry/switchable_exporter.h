// SwitchableExporter: the span exporter behind the server's BatchSpanProcessor when spans go to a
// file, or nowhere yet (tracing off at start). TraceSetting's trace_file names a file while the
// server runs: Replace() makes it the destination of every export from then on and shuts the one
// before down (its file is closed once its last export returns). Without a destination an export
// fails (the processor counts its spans as lost), which does not happen in practice: no request is
// traced before a trace_file is named.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_SWITCHABLE_EXPORTER_H_
#define CHRONOSERVE_SERVER_TELEMETRY_SWITCHABLE_EXPORTER_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/otlp/span_exporter.h"

namespace chronoserve::server::telemetry {

class SwitchableExporter final : public otlp::SpanExporter {
 public:
  explicit SwitchableExporter(std::unique_ptr<otlp::SpanExporter> initial = nullptr);

  // Sends to the destination current when the call starts (outside the lock: Replace does not wait
  // for it).
  absl::StatusOr<otlp::ExportResult> Export(const std::vector<otlp::SpanData>& spans, absl::Time deadline) override;
  // Shuts the current destination down; every later Export and Replace's destination too.
  void Shutdown() override;
  // `next` takes every export that starts from now on; the one before is shut down.
  void Replace(std::unique_ptr<otlp::SpanExporter> next);

 private:
  absl::Mutex mu_;
  std::shared_ptr<otlp::SpanExporter> current_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_SWITCHABLE_EXPORTER_H_
