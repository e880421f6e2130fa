// CapturingExporter: an otlp::SpanExporter for tests that keeps every span it is given (each export
// succeeds). The BatchSpanProcessor that owns it calls Export on its thread; spans() from any thread.
#ifndef CHRONOSERVE_TESTS_FAKES_CAPTURING_EXPORTER_H_
#define CHRONOSERVE_TESTS_FAKES_CAPTURING_EXPORTER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/otlp/span_exporter.h"

namespace chronoserve::testing {

class CapturingExporter final : public otlp::SpanExporter {
 public:
  absl::StatusOr<otlp::ExportResult> Export(const std::vector<otlp::SpanData>& spans, absl::Time) override {
    absl::MutexLock lock(&mu_);
    spans_.insert(spans_.end(), spans.begin(), spans.end());
    return otlp::ExportResult{};
  }
  void Shutdown() override {}
  std::vector<otlp::SpanData> spans() {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  absl::Mutex mu_;
  std::vector<otlp::SpanData> spans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_CAPTURING_EXPORTER_H_
