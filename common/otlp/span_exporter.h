// SpanExporter: sends a batch of finished spans somewhere. Called only from the
// BatchSpanProcessor's export thread (one call at a time); Shutdown() may come from another thread
// and must make a running Export return promptly.
#ifndef CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_
#define CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/otlp/span_data.h"

namespace chronoserve::otlp {

// What the receiver said about an export it answered: OTLP's partial success, i.e. how many of the
// spans it rejected (0: all accepted) and its explanation.
struct ExportResult {
  int64_t rejected_spans = 0;
  std::string error_message;
};

class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  // Sends `spans`, retrying as the implementation sees fit, giving up at `deadline`. OK when the
  // receiver answered, with the spans it rejected despite answering OK (the rest were accepted);
  // an error when it did not, and then all the spans are lost (the caller counts them).
  virtual absl::StatusOr<ExportResult> Export(const std::vector<SpanData>& spans, absl::Time deadline) = 0;
  // Cancels retries in progress; later Exports fail fast. Idempotent, thread-safe.
  virtual void Shutdown() = 0;
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_SPAN_EXPORTER_H_
