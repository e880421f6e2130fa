#include "server/telemetry/request_spans.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/text_excerpt.h"
#include "common/timing.h"

namespace chronoserve::server::telemetry {
namespace {

struct Interval {
  int64_t start_ns = 0;  // steady clock
  int64_t end_ns = 0;
};

// Attributes every span of the request carries: which model and which batch execution.
void AddBatchAttributes(const ModelSpec& spec, const RequestTiming& timing, const BatchTiming& batch,
                        std::vector<Attribute>* out) {
  out->push_back({"chronoserve.model.name", spec.name});
  out->push_back({"chronoserve.model.version", spec.version});
  if (batch.dequeued_ns <= 0) return;  // never executed
  // Requests that shared one execution share this id (worker + the instant it took the batch).
  out->push_back({"chronoserve.batch.id", absl::StrCat("w", batch.worker, "-", batch.dequeued_ns)});
  out->push_back({"chronoserve.batch.size", timing.batch_size});
  out->push_back({"chronoserve.worker", timing.worker});
  out->push_back({"chronoserve.gpu", timing.gpu});
  out->push_back({"chronoserve.cold", timing.cold});
  if (!batch.request_timing) {  // --request-timing off: the figures below were not measured
    out->push_back({"chronoserve.request_timing", false});
    return;
  }
  out->push_back({"chronoserve.sm_clock_mhz", timing.sm_clock_mhz});
  out->push_back({"chronoserve.idle_before_us", timing.idle_before_us});
  out->push_back({"chronoserve.device_timed", timing.device_timed});
}

class SpanMaker {
 public:
  SpanMaker(const RequestTraceIds& ids, int64_t wall_offset_ns, Interval server)
      : ids_(ids), offset_(wall_offset_ns), server_(server) {}

  SpanData Server(std::string name) const {
    SpanData span = Base(std::move(name), ids_.server_span_id, ids_.parent_span_id);
    // A parent span id came in a traceparent: the parent is remote. Without one there is no parent,
    // which is known not to be remote.
    if (!IsZero(ids_.parent_span_id)) span.flags |= otlp::kSpanFlagsContextIsRemote;
    span.kind = SpanKind::kServer;
    span.trace_state = ids_.trace_state;
    span.start_unix_ns = server_.start_ns + offset_;
    span.end_unix_ns = server_.end_ns + offset_;
    return span;
  }

  // A child inside the server span; clamped there.
  SpanData Child(std::string name, Interval at) {
    SpanData span = Base(std::move(name), ids_.child_span_ids.at(next_child_++), ids_.server_span_id);
    span.trace_state = ids_.trace_state;  // every span of the trace carries the caller's tracestate
    const int64_t start = std::clamp(at.start_ns, server_.start_ns, server_.end_ns);
    const int64_t end = std::clamp(at.end_ns, start, server_.end_ns);
    span.start_unix_ns = start + offset_;
    span.end_unix_ns = end + offset_;
    return span;
  }

 private:
  SpanData Base(std::string name, const SpanId& id, const SpanId& parent) const {
    SpanData span;
    span.trace_id = ids_.trace_id;
    span.span_id = id;
    span.parent_span_id = parent;
    span.flags = ids_.flags | otlp::kSpanFlagsContextHasIsRemote;  // we always know where the parent is
    span.name = std::move(name);
    return span;
  }

  const RequestTraceIds& ids_;
  const int64_t offset_;
  const Interval server_;
  size_t next_child_ = 0;
};

// OpenTelemetry's gRPC conventions for SERVER spans: only these codes are the server's errors; the
// others (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, CANCELLED, ...) are the caller's and leave
// the span status unset (rpc.grpc.status_code still tells them apart).
bool IsServerError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

// The RPC that carried the request: one message of a stream, or a unary call.
const char* RpcMethod(const InferRequest& request) { return request.streamed ? "ModelStreamInfer" : "ModelInfer"; }

// The first `max_bytes` of `text`, cut where a UTF-8 character begins. A request may carry an id of
// any length, and an error's text may be long; one of megabytes would take an export batch past a
// collector's receive limit (4 MiB by default) and lose every span in it.
std::string CutAtCharacter(absl::string_view text, size_t max_bytes) {
  return std::string(text.substr(0, Utf8PrefixLength(std::string_view(text.data(), text.size()), max_bytes)));
}

void AddServerAttributes(const InferRequest& request, const absl::Status& status, SpanData* span) {
  span->attributes.push_back({"rpc.system", std::string("grpc")});
  span->attributes.push_back({"rpc.service", std::string("inference.GRPCInferenceService")});
  span->attributes.push_back({"rpc.method", std::string(RpcMethod(request))});
  span->attributes.push_back({"rpc.grpc.status_code", static_cast<int64_t>(status.code())});
  if (!request.id.empty()) {
    span->attributes.push_back({"chronoserve.request.id", CutAtCharacter(request.id, kMaxRequestIdAttributeBytes)});
  }
  span->attributes.push_back({"chronoserve.request.items", request.batch_items});
  if (IsServerError(status.code())) {
    span->status = SpanStatus::kError;
    span->status_message = CutAtCharacter(status.message(), kMaxSpanStatusMessageBytes);
  }
}

// h2d, compute, d2h: event deltas laid backwards from the observed completion. Where measured (a GPU
// instance with request timing), h2d ends h2d_end_to_done_ns before the batch's last event: earlier
// than compute started when its inputs were copied behind another batch or pad rows were zeroed.
void AddDeviceSpans(const RequestTiming& timing, const BatchTiming& batch,
                    const std::vector<Attribute>& common, SpanMaker* maker, std::vector<SpanData>* out) {
  const int64_t d2h_end = batch.gpu_done_ns;
  const int64_t compute_end = d2h_end - timing.d2h_ns;
  const int64_t compute_start = compute_end - timing.compute_ns;
  // Compute waited for the copy, so h2d never ends after compute starts (event rounding aside).
  const int64_t h2d_end = batch.h2d_end_to_done_ns > 0
                              ? std::min(d2h_end - batch.h2d_end_to_done_ns, compute_start)
                              : compute_start;
  const struct {
    const char* name;
    Interval at;
    int64_t duration_ns;
  } device[] = {{"h2d", {h2d_end - timing.h2d_ns, h2d_end}, timing.h2d_ns},
                {"compute", {compute_start, compute_end}, timing.compute_ns},
                {"d2h", {compute_end, d2h_end}, timing.d2h_ns}};
  for (const auto& d : device) {
    SpanData span = maker->Child(d.name, d.at);
    span.attributes = common;
    span.attributes.push_back({"chronoserve.duration_ns", d.duration_ns});
    span.attributes.push_back({"chronoserve.clock", std::string(TimingClockValue(timing.device_timed))});
    if (std::string_view(d.name) == "compute") span.attributes.push_back({"chronoserve.launch_ns", timing.launch_ns});
    out->push_back(std::move(span));
  }
}

}  // namespace

std::vector<SpanData> BuildRequestSpans(const ModelSpec& spec, const InferRequest& request,
                                        const RequestTiming& timing, const absl::Status& status,
                                        const RequestTraceIds& ids, int64_t wall_offset_ns) {
  const Timeline& t = request.timeline;
  const BatchTiming& batch = t.batch();
  const Interval server{t.received_ns, t.received_ns + timing.server_total_ns};
  std::vector<Attribute> common;
  AddBatchAttributes(spec, timing, batch, &common);

  SpanMaker maker(ids, wall_offset_ns, server);
  std::vector<SpanData> spans;
  spans.reserve(1 + kMaxChildSpans);
  spans.push_back(maker.Server(absl::StrCat(RpcMethod(request), " ", spec.name)));
  spans.back().attributes = common;
  AddServerAttributes(request, status, &spans.back());

  auto host_child = [&](const char* name, int64_t start_ns, int64_t end_ns) {
    if (start_ns <= 0 || end_ns <= 0) return;  // stage not reached
    spans.push_back(maker.Child(name, {start_ns, end_ns}));
    spans.back().attributes = common;
  };
  host_child("admit", t.received_ns, t.enqueued_ns);
  host_child("queue", t.enqueued_ns, batch.dequeued_ns);
  host_child("input_stage", batch.stage_start_ns(), batch.staged_ns);
  if (t.batch_completed() && batch.request_timing) AddDeviceSpans(timing, batch, common, &maker, &spans);
  host_child("output_stage", batch.gpu_done_ns, t.output_done_ns);
  if (t.batch_completed()) host_child("handback", t.output_done_ns, server.end_ns);
  return spans;
}

}  // namespace chronoserve::server::telemetry
