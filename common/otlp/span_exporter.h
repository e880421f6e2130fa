// SpanExporter: sends a batch of finished spans somewhere. Called only from the
// BatchSpanProcessor's export thread (one call at a time); Shutdown() may come from another thread
// and must make a running Export return promptly.
#ifndef CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_
#define CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/otlp/span_data.h"

namespace chronoserve::otlp {

class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  // Sends `spans`, retrying as the implementation sees fit, giving up at `deadline`. OK when the
  // receiver accepted them; otherwise the spans are lost (the caller counts them).
  virtual absl::Status Export(const std::vector<SpanData>& spans, absl::Time deadline) = 0;
  // Cancels retries in progress; later Exports fail fast. Idempotent, thread-safe.
  virtual void Shutdown() = 0;
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_
