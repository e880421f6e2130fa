// SpanData: one finished span as the exporter sends it (the OTLP Span fields chronoserve uses).
// Plain value type: built on a request thread (the server's RequestTracer, chronobench's workers),
// moved into the BatchSpanProcessor's queue, read by the export thread.
#ifndef CHRONOSERVE_COMMON_OTLP_SPAN_DATA_H_
#define CHRONOSERVE_COMMON_OTLP_SPAN_DATA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/traceparent.h"

namespace chronoserve::otlp {

enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };  // OTLP SpanKind values
enum class SpanStatus { kUnset = 0, kOk = 1, kError = 2 };  // OTLP Status.StatusCode values

// OTLP Span.flags bits above the W3C trace flags (SpanFlags in trace.proto): whether the span's
// parent is known to be local or remote (HAS_IS_REMOTE), and then whether it is remote (IS_REMOTE).
inline constexpr uint32_t kSpanFlagsContextHasIsRemote = 0x100;
inline constexpr uint32_t kSpanFlagsContextIsRemote = 0x200;

// Attribute keys are string literals (no allocation on the request path); values as OTLP AnyValue.
using AttributeValue = std::variant<int64_t, bool, double, std::string>;
struct Attribute {
  const char* key;
  AttributeValue value;
};

struct SpanData {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero: a root span
  std::string trace_state;  // normalized W3C tracestate (every span of a request's trace)
  uint32_t flags = 0;       // OTLP Span.flags: W3C trace flags in bits 0-7, kSpanFlags* in bits 8-9
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<Attribute> attributes;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_SPAN_DATA_H_
