// RequestTracer: the tracing RequestObserver. When a request is received it joins the caller's W3C
// trace (or starts one) and asks the trace settings (TraceControl: trace_level, the sampler and its
// trace_rate, trace_count) whether to trace it (DecideTrace, on the handler's thread). When it has
// finished, a traced request's spans are built (request_spans.h) and handed to the
// BatchSpanProcessor, which never blocks (OnRequestDone, on the worker thread that finished it,
// after the response went to gRPC; a request with no decision taken is decided there). Owned by
// Telemetry; the processor must outlive it.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_REQUEST_TRACER_H_
#define CHRONOSERVE_SERVER_TELEMETRY_REQUEST_TRACER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "server/core/request_observer.h"
#include "common/otlp/batch_span_processor.h"
#include "server/telemetry/trace_control.h"

namespace chronoserve::server::telemetry {

using otlp::BatchSpanProcessor;

class RequestTracer final : public RequestObserver {
 public:
  using WallClockFn = int64_t (*)();
  // `steady` must be the clock the server stamps timelines with; `wall_now` gives Unix ns.
  // `control` (the server's trace settings) must outlive the tracer.
  RequestTracer(TraceControl* control, BatchSpanProcessor* processor, const Clock* steady = SteadyClock::Get(),
                WallClockFn wall_now = &WallNowNs)
      : control_(control), processor_(processor), steady_(steady), wall_now_(wall_now) {}

  std::optional<TraceDecision> DecideTrace(const ModelSpec& spec, const std::string& traceparent) override;
  void OnRequestDone(const ModelSpec& spec, const InferRequest* request, const RequestTiming& timing,
                     const absl::Status& status) override;

 private:
  TraceControl* const control_;
  BatchSpanProcessor* const processor_;
  const Clock* const steady_;
  const WallClockFn wall_now_;
};

// Random, non-zero ids (thread-local generator; no lock).
TraceId NewTraceId();
SpanId NewSpanId();

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_REQUEST_TRACER_H_
