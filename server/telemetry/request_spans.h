// BuildRequestSpans: turns one finished request into its OTLP spans — a SERVER span named
// "ModelInfer <model>" ("ModelStreamInfer <model>" for a message of a stream; the caller's child
// when a valid traceparent came in) and INTERNAL children
// queue, input_stage, h2d, compute, d2h, output_stage, as ../shared/TIMING.md defines them.
// Host spans come straight from the steady-clock stamps; GPU spans (event deltas) are laid out
// backwards from the moment the host observed the device work done (BatchTiming::gpu_done_ns):
// d2h ends there, compute ends where d2h starts, h2d ends BatchTiming::h2d_end_to_done_ns before
// d2h's end where that was measured (a GPU instance with request timing: its inputs copied behind
// another batch, or a graph's pad rows zeroed before compute), otherwise where compute starts. Every child is clamped inside the server span; GPU spans carry their exact measured
// length as an attribute. The server span's status is ERROR only for the gRPC codes OpenTelemetry
// counts as server errors; every span carries the caller's tracestate and the trace flags of `ids`,
// with OTLP's is-remote bits: the server span's parent is remote (the caller's) when there is one,
// the children's is local.
// Pure function; called by RequestTracer on the worker thread that finished the request.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_REQUEST_SPANS_H_
#define CHRONOSERVE_SERVER_TELEMETRY_REQUEST_SPANS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/timing.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "common/otlp/span_data.h"

namespace chronoserve::server::telemetry {

using otlp::Attribute;
using otlp::SpanData;
using otlp::SpanKind;
using otlp::SpanStatus;

// W3C Trace Context Level 2: the trace id's rightmost 7 bytes are random. Carried from the caller.
inline constexpr uint8_t kTraceFlagRandom = 0x02;

// The trace identity of one request's spans.
struct RequestTraceIds {
  TraceId trace_id{};
  SpanId parent_span_id{};          // the caller's span; zero when we started the trace
  std::string trace_state;          // normalized caller tracestate
  uint8_t flags = kTraceFlagSampled;  // W3C trace flags: sampled, and the caller's random bit
  SpanId server_span_id{};
  std::vector<SpanId> child_span_ids;  // at least kMaxChildSpans ids
};

// The most of a request's id its server span carries (chronoserve.request.id), cut at a character.
inline constexpr size_t kMaxRequestIdAttributeBytes = 256;
// A server span's status message, an error's text: at most this many bytes (as the client's own
// status message, grpc_status.h), cut where a UTF-8 character begins. A TorchScript error repeated on
// every request of a batch must not take an export past a collector's receive limit.
inline constexpr size_t kMaxSpanStatusMessageBytes = 1024;

inline constexpr size_t kMaxChildSpans = 8;  // admit, queue, input_stage, h2d, compute, d2h, output_stage, handback

// `wall_offset_ns` converts the request's steady-clock stamps to Unix time (wall = steady + offset).
std::vector<SpanData> BuildRequestSpans(const ModelSpec& spec, const InferRequest& request,
                                        const RequestTiming& timing, const absl::Status& status,
                                        const RequestTraceIds& ids, int64_t wall_offset_ns);

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_REQUEST_SPANS_H_
