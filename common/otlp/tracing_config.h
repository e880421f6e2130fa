// TracingConfig: where and how spans are exported, from the --otlp-endpoint flag and the standard
// OpenTelemetry environment variables (flag > OTEL_EXPORTER_OTLP_TRACES_ENDPOINT >
// OTEL_EXPORTER_OTLP_ENDPOINT; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL > OTEL_EXPORTER_OTLP_PROTOCOL;
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS and _TIMEOUT, the traces-specific one winning; OTEL_SERVICE_NAME;
// OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER and _ARG; OTEL_BSP_*; OTEL_SDK_DISABLED /
// OTEL_TRACES_EXPORTER=none; OTEL_EXPORTER_OTLP_(TRACES_)INSECURE for an endpoint without a scheme).
// _CERTIFICATE, _CLIENT_KEY and _CLIENT_CERTIFICATE are not implemented: each one set is named in a
// warning. Resolved once in main.
#ifndef CHRONOSERVE_COMMON_OTLP_TRACING_CONFIG_H_
#define CHRONOSERVE_COMMON_OTLP_TRACING_CONFIG_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/otlp/batch_span_processor.h"
#include "common/otlp/otlp_grpc_exporter.h"

namespace chronoserve::otlp {

struct TracingConfig {
  bool enabled = false;             // an endpoint or a trace file was given and tracing is not disabled
  bool sdk_disabled = false;        // OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: no tracing, not even later
  OtlpGrpcExporterOptions exporter;  // endpoint as HOST:PORT, TLS, resource (the resource serves `file` too)
  // --trace-file: spans are written there as OTLP/JSON lines (OtlpFileExporter), in place of the
  // collector; "" = they go to exporter.endpoint.
  std::string file;
  std::string sampler = "parentbased_always_on";
  std::string sampler_arg;
  BatchSpanProcessorOptions processor;
  // Environment settings that could not be used and were ignored (a malformed
  // OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_*HEADERS, *TIMEOUT or OTEL_BSP_* value; a TLS
  // variable; a non-gRPC protocol or unusable endpoint, which turns tracing off; and, added by
  // Telemetry::Create, an OTEL_TRACES_SAMPLER or _ARG that names no sampler or ratio, or a queue too
  // small for one request's spans): optional telemetry never keeps the server from starting.
  // Telemetry::Start logs each as a warning.
  std::vector<std::string> warnings;
  // The same kind of problems when tracing is off at start (no destination yet; not disabled):
  // logged when it is turned on later (TraceSetting's trace_file), when they start to matter.
  std::vector<std::string> setting_warnings;
};

// Reads an environment variable; tests pass a map instead of the process environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup ProcessEnv();

// `flag_endpoint` is --otlp-endpoint ("" = not given). Endpoints may be HOST:PORT,
// http://HOST:PORT (plaintext) or https://HOST:PORT (TLS). INVALID_ARGUMENT only for a malformed
// flag; problems in the environment become `warnings` (see TracingConfig). Only OTLP/gRPC is
// implemented: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL other than "grpc" leaves tracing off.
// `service_name` is the resource's service.name unless OTEL_SERVICE_NAME (or service.name in
// OTEL_RESOURCE_ATTRIBUTES) overrides it. `flag_file` is --trace-file ("" = not given): spans go to
// that file instead (`file`); given with `flag_endpoint` it is INVALID_ARGUMENT, and an endpoint in
// the environment is then ignored with a warning. OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none
// turn it off as they turn off an endpoint.
absl::StatusOr<TracingConfig> ResolveTracingConfig(const std::string& flag_endpoint,
                                                   const std::string& service_version, const EnvLookup& env,
                                                   const std::string& service_name = "chronoserve",
                                                   const std::string& flag_file = "");

// Raises config->processor.max_queue_size to `min_spans`, the most spans one request hands the
// processor at once (they are queued all or nothing, so a smaller queue would drop every such
// request), with a warning naming OTEL_BSP_MAX_QUEUE_SIZE, its value and the minimum.
void RequireQueueSize(size_t min_spans, TracingConfig* config);

// The exporter `config` names: its `file` (OtlpFileExporter) when set, else its collector
// (OtlpGrpcExporter). The exporter's error (an unopenable file, an empty endpoint) otherwise.
absl::StatusOr<std::unique_ptr<SpanExporter>> CreateSpanExporter(const TracingConfig& config);

}  // namespace chronoserve::otlp

#endif  // CHRONOSERVE_COMMON_OTLP_TRACING_CONFIG_H_
