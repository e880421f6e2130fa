#include "server/telemetry/request_tracer.h"

#include <optional>

#include "absl/random/random.h"
#include "common/log.h"
#include "server/telemetry/request_spans.h"

namespace chronoserve::server::telemetry {
namespace {

absl::BitGen& Gen() {
  thread_local absl::BitGen gen;
  return gen;
}

template <typename Id>
Id RandomNonZeroId() {
  Id id{};
  do {
    for (size_t i = 0; i < id.size(); i += 8) {
      const uint64_t r = absl::Uniform<uint64_t>(Gen());
      for (size_t k = 0; k < 8 && i + k < id.size(); ++k) id[i + k] = static_cast<uint8_t>(r >> (8 * k));
    }
  } while (IsZero(id));
  return id;
}

}  // namespace

TraceId NewTraceId() { return RandomNonZeroId<TraceId>(); }
SpanId NewSpanId() { return RandomNonZeroId<SpanId>(); }

std::optional<TraceDecision> RequestTracer::DecideTrace(const ModelSpec& spec, const std::string& traceparent) {
  TraceDecision decision;
  if (!traceparent.empty()) {
    auto parsed = ParseTraceparent(traceparent);
    if (parsed.ok()) {
      decision.parent = *parsed;
    } else {
      CS_VLOG(2) << "ignoring traceparent (" << parsed.status().message() << "); new trace";
    }
  }
  const std::optional<TraceParent>& parent = decision.parent;
  decision.trace_id = parent ? parent->trace_id : NewTraceId();
  decision.traced = control_->ShouldTrace(spec.name, parent ? &*parent : nullptr, decision.trace_id);
  return decision;
}

void RequestTracer::OnRequestDone(const ModelSpec& spec, const InferRequest* request,
                                  const RequestTiming& timing, const absl::Status& status) {
  // A request refused before validation (no known model) has no request; one refused while being
  // validated has its receipt stamp and trace context; warm-up traffic is not a request.
  if (request == nullptr || request->synthetic || request->timeline.received_ns <= 0) return;
  const TraceDecision decision = request->trace ? *request->trace : *DecideTrace(spec, request->traceparent);
  if (!decision.traced) return;
  const std::optional<TraceParent>& parent = decision.parent;  // parsed once, at the decision
  RequestTraceIds ids;
  ids.trace_id = decision.trace_id;
  if (parent) {
    ids.parent_span_id = parent->parent_id;
    ids.flags = kTraceFlagSampled | (parent->flags & kTraceFlagRandom);
    if (!request->tracestate.empty()) {
      auto state = NormalizeTracestate(request->tracestate);
      if (state.ok()) ids.trace_state = *std::move(state);
    }
  }
  ids.server_span_id = NewSpanId();
  ids.child_span_ids.reserve(kMaxChildSpans);
  for (size_t i = 0; i < kMaxChildSpans; ++i) ids.child_span_ids.push_back(NewSpanId());
  // Steady -> wall offset taken now, at completion, so the spans sit where the request just ran.
  const int64_t offset = WallMinusSteadyNs(*steady_, wall_now_);
  processor_->OnEnd(BuildRequestSpans(spec, *request, timing, status, ids, offset));
}

}  // namespace chronoserve::server::telemetry
