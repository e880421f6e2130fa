// ClientTracer: exports one CLIENT span per traced request (--otlp-endpoint, or --trace-file), so
// the server's `ModelInfer` span, whose parent is the traceparent's parent-id, hangs under a span
// that shows what the client saw. Built by main and handed to the Benchmark; Record() is called from
// the load worker threads and never blocks (the shared BatchSpanProcessor drops and counts when its
// queue is full); Shutdown() from main flushes, bounded by a deadline.
//
//   auto tracer = ClientTracer::Create(options.trace, otlp::ProcessEnv());  // null: not tracing
//   ... workers: tracer->Record(span);
//   (*tracer)->Shutdown(absl::Now() + absl::Seconds(5));
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_CLIENT_TRACER_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_CLIENT_TRACER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chronobench/bench_options.h"
#include "common/otlp/batch_span_processor.h"
#include "common/otlp/tracing_config.h"
#include "common/traceparent.h"

namespace chronoserve::client::bench {

inline constexpr const char* kClientServiceName = "chronobench";

// One traced request as the worker saw it; ids are those its traceparent carried.
struct ClientSpan {
  TraceId trace_id{};
  SpanId span_id{};  // the traceparent's parent-id: the server span's parent
  uint8_t flags = 0;
  std::string model;
  int64_t batch_size = 0;
  int64_t start_unix_ns = 0;  // request sent
  int64_t end_unix_ns = 0;    // response (or error) received
  int grpc_code = 0;
  bool streamed = false;  // sent on a ModelStreamInfer stream, not as a unary ModelInfer
};

class ClientTracer {
 public:
  // Null when no endpoint (--otlp-endpoint, or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) and no
  // --trace-file is configured, or tracing is disabled (OTEL_SDK_DISABLED); INVALID_ARGUMENT for a
  // malformed endpoint, both flags, or a trace file that cannot be opened.
  // Otherwise the export thread is running on return. Service name: chronobench or OTEL_SERVICE_NAME.
  static absl::StatusOr<std::unique_ptr<ClientTracer>> Create(const TraceOptions& options,
                                                              const otlp::EnvLookup& env);
  ~ClientTracer();
  ClientTracer(const ClientTracer&) = delete;
  ClientTracer& operator=(const ClientTracer&) = delete;

  // Queues the span for export; any thread, never blocks. False when dropped (queue full).
  bool Record(const ClientSpan& span);
  // Exports what is queued (bounded by `deadline`) and stops the export thread. Idempotent.
  void Shutdown(absl::Time deadline);
  otlp::SpanProcessorStats stats() const { return processor_->stats(); }
  // Where the spans go: the collector's HOST:PORT, or "file PATH".
  const std::string& destination() const { return destination_; }

 private:
  ClientTracer(std::unique_ptr<otlp::BatchSpanProcessor> processor, std::string destination)
      : processor_(std::move(processor)), destination_(std::move(destination)) {}

  std::unique_ptr<otlp::BatchSpanProcessor> processor_;
  const std::string destination_;
};

// The span Record() exports: kind CLIENT, named `ModelInfer <model>`.
otlp::SpanData MakeClientSpanData(const ClientSpan& span);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_CLIENT_TRACER_H_
