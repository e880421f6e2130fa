#include "server/telemetry/switchable_exporter.h"

#include <utility>

namespace chronoserve::server::telemetry {

SwitchableExporter::SwitchableExporter(std::unique_ptr<otlp::SpanExporter> initial) : current_(std::move(initial)) {}

absl::StatusOr<otlp::ExportResult> SwitchableExporter::Export(const std::vector<otlp::SpanData>& spans,
                                                              absl::Time deadline) {
  std::shared_ptr<otlp::SpanExporter> destination;
  {
    absl::MutexLock lock(&mu_);
    destination = current_;
  }
  if (destination == nullptr) {
    return absl::FailedPreconditionError("no trace destination: no trace_file has been named");
  }
  return destination->Export(spans, deadline);
}

void SwitchableExporter::Shutdown() {
  std::shared_ptr<otlp::SpanExporter> destination;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    destination = current_;
  }
  if (destination != nullptr) destination->Shutdown();
}

void SwitchableExporter::Replace(std::unique_ptr<otlp::SpanExporter> next) {
  std::shared_ptr<otlp::SpanExporter> previous;
  std::shared_ptr<otlp::SpanExporter> incoming(std::move(next));
  bool shut_down = false;
  {
    absl::MutexLock lock(&mu_);
    previous = std::exchange(current_, incoming);
    shut_down = shut_down_;
  }
  if (previous != nullptr) previous->Shutdown();
  if (shut_down && incoming != nullptr) incoming->Shutdown();
}

}  // namespace chronoserve::server::telemetry
