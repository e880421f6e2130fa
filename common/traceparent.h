// W3C Trace Context (https://www.w3.org/TR/trace-context/): parsing and formatting of the
// `traceparent` and `tracestate` headers, carried in gRPC metadata. Shared by the server (which
// joins the caller's trace) and chronobench (which starts traces). Pure functions; thread-safe.
//
//   auto parent = ParseTraceparent(metadata["traceparent"]);   // invalid -> start a new trace
//   if (parent.ok()) span.trace_id = parent->trace_id;
#ifndef CHRONOSERVE_COMMON_TRACEPARENT_H_
#define CHRONOSERVE_COMMON_TRACEPARENT_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chronoserve {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

inline constexpr uint8_t kTraceFlagSampled = 0x01;

// A parsed traceparent: the caller's trace and its span (our parent).
struct TraceParent {
  uint8_t version = 0;
  TraceId trace_id{};
  SpanId parent_id{};
  uint8_t flags = 0;
  bool sampled() const { return (flags & kTraceFlagSampled) != 0; }
};

// Parses a traceparent value by the spec's rules: lower-case hex only; version ff is invalid;
// version 00 is exactly 55 characters; a higher version may carry more fields after a '-', which
// are ignored; all-zero trace-id or parent-id is invalid. Surrounding spaces/tabs are trimmed.
// INVALID_ARGUMENT (saying why) for anything else: the caller then starts a new trace.
absl::StatusOr<TraceParent> ParseTraceparent(absl::string_view header);

// "00-<trace-id>-<span-id>-<flags>" (version 00, lower-case hex).
std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags);

// Validates a tracestate value: comma-separated list-members `key=value` (empty members and
// optional whitespace allowed), at most 32 members, keys unique and of the spec's grammar (simple
// or `tenant@system`), values of printable ASCII without ',' and '=' and not ending in a space.
// Returns the members joined by ',' without whitespace and empty members; INVALID_ARGUMENT when
// any rule is broken (the spec says to discard the whole header then).
absl::StatusOr<std::string> NormalizeTracestate(absl::string_view header);

// Lower-case hex of an id; all-zero checks.
std::string ToHex(const TraceId& id);
std::string ToHex(const SpanId& id);
bool IsZero(const TraceId& id);
bool IsZero(const SpanId& id);

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_TRACEPARENT_H_
