// TracingConfig: where and how spans are exported, from the --otlp-endpoint flag and the standard
// OpenTelemetry environment variables (flag > OTEL_EXPORTER_OTLP_TRACES_ENDPOINT >
// OTEL_EXPORTER_OTLP_ENDPOINT; OTEL_SERVICE_NAME; OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER and
// _ARG; OTEL_BSP_*; OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none). Resolved once in main.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_TRACING_CONFIG_H_
#define CHRONOSERVE_SERVER_TELEMETRY_TRACING_CONFIG_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/telemetry/batch_span_processor.h"
#include "server/telemetry/otlp_grpc_exporter.h"

namespace chronoserve::server::telemetry {

struct TracingConfig {
  bool enabled = false;             // an endpoint was given and tracing is not disabled
  OtlpGrpcExporterOptions exporter;  // endpoint as HOST:PORT, TLS, resource
  std::string sampler = "parentbased_always_on";
  std::string sampler_arg;
  BatchSpanProcessorOptions processor;
};

// Reads an environment variable; tests pass a map instead of the process environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup ProcessEnv();

// `flag_endpoint` is --otlp-endpoint ("" = not given). Endpoints may be HOST:PORT,
// http://HOST:PORT (plaintext) or https://HOST:PORT (TLS). INVALID_ARGUMENT for malformed values.
absl::StatusOr<TracingConfig> ResolveTracingConfig(const std::string& flag_endpoint,
                                                   const std::string& service_version, const EnvLookup& env);

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_TRACING_CONFIG_H_
