// OTLP encoding: SpanData -> opentelemetry.proto ExportTraceServiceRequest, with the resource
// (service.name, ...) and instrumentation scope of this process. Pure functions; thread-safe.
#ifndef CHRONOSERVE_COMMON_OTLP_OTLP_ENCODER_H_
#define CHRONOSERVE_COMMON_OTLP_OTLP_ENCODER_H_

#include <string>
#include <utility>
#include <vector>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "common/otlp/span_data.h"

namespace chronoserve::otlp {

struct OtlpResource {
  std::string service_name = "chronoserve";
  std::string service_version;
  // Extra resource attributes (OTEL_RESOURCE_ATTRIBUTES, decoded), key -> value; a key that is
  // also built in (service.version, telemetry.sdk.*) replaces the built-in value.
  std::vector<std::pair<std::string, std::string>> attributes;
};

inline constexpr const char* kInstrumentationScope = "chronoserve";

opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest EncodeExportRequest(
    const OtlpResource& resource, const std::vector<SpanData>& spans);

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_OTLP_ENCODER_H_
