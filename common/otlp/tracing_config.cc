#include "common/otlp/tracing_config.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chronoserve::otlp {
namespace {

std::string Get(const EnvLookup& env, const char* name) {
  std::optional<std::string> v = env(name);
  return v ? std::string(absl::StripAsciiWhitespace(*v)) : std::string();
}

// "http://host:4317/" -> host:4317 (plaintext); "https://..." -> TLS; "host:4317" -> plaintext.
absl::Status ParseEndpoint(std::string endpoint, OtlpGrpcExporterOptions* out) {
  absl::string_view e = endpoint;
  out->use_tls = false;
  if (absl::ConsumePrefix(&e, "https://")) {
    out->use_tls = true;
  } else {
    absl::ConsumePrefix(&e, "http://");
  }
  while (absl::ConsumeSuffix(&e, "/")) {
  }
  const size_t colon = e.rfind(':');
  int port = 0;
  if (e.empty() || e.find('/') != absl::string_view::npos || colon == absl::string_view::npos ||
      colon == 0 || !absl::SimpleAtoi(e.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("OTLP endpoint '", endpoint,
                                                   "' is not HOST:PORT (optionally http:// or https://)"));
  }
  out->endpoint = std::string(e);
  return absl::OkStatus();
}

// OTEL_RESOURCE_ATTRIBUTES: key1=value1,key2=value2 (values may be percent-encoded; kept as given).
void ParseResourceAttributes(const std::string& value, OtlpResource* resource) {
  for (absl::string_view member : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    const size_t eq = member.find('=');
    if (eq == absl::string_view::npos) continue;
    std::string key(absl::StripAsciiWhitespace(member.substr(0, eq)));
    std::string v(absl::StripAsciiWhitespace(member.substr(eq + 1)));
    if (key == "service.name") {
      resource->service_name = v;
    } else if (!key.empty()) {
      resource->attributes.emplace_back(std::move(key), std::move(v));
    }
  }
}

// OTEL_BSP_* overrides of the batch processor defaults (milliseconds / counts).
absl::Status ApplyBspEnv(const EnvLookup& env, BatchSpanProcessorOptions* p) {
  struct Var {
    const char* name;
    std::function<void(int64_t)> set;
  } vars[] = {
      {"OTEL_BSP_SCHEDULE_DELAY", [p](int64_t v) { p->schedule_delay = absl::Milliseconds(v); }},
      {"OTEL_BSP_EXPORT_TIMEOUT", [p](int64_t v) { p->export_timeout = absl::Milliseconds(v); }},
      {"OTEL_BSP_MAX_QUEUE_SIZE", [p](int64_t v) { p->max_queue_size = static_cast<size_t>(v); }},
      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", [p](int64_t v) { p->max_export_batch_size = static_cast<size_t>(v); }},
  };
  for (const Var& var : vars) {
    const std::string value = Get(env, var.name);
    if (value.empty()) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(var.name, "='", value, "' is not a positive integer"));
    }
    var.set(v);
  }
  p->max_export_batch_size = std::min(p->max_export_batch_size, p->max_queue_size);
  return absl::OkStatus();
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<TracingConfig> ResolveTracingConfig(const std::string& flag_endpoint,
                                                   const std::string& service_version, const EnvLookup& env,
                                                   const std::string& service_name) {
  TracingConfig config;
  config.exporter.resource.service_name = service_name;
  config.exporter.resource.service_version = service_version;
  ParseResourceAttributes(Get(env, "OTEL_RESOURCE_ATTRIBUTES"), &config.exporter.resource);
  if (std::string name = Get(env, "OTEL_SERVICE_NAME"); !name.empty()) {
    config.exporter.resource.service_name = name;
  }
  if (std::string s = Get(env, "OTEL_TRACES_SAMPLER"); !s.empty()) config.sampler = s;
  config.sampler_arg = Get(env, "OTEL_TRACES_SAMPLER_ARG");
  if (absl::Status s = ApplyBspEnv(env, &config.processor); !s.ok()) return s;

  std::string endpoint = flag_endpoint;
  if (endpoint.empty()) endpoint = Get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (endpoint.empty()) endpoint = Get(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  const bool disabled = absl::AsciiStrToLower(Get(env, "OTEL_SDK_DISABLED")) == "true" ||
                        absl::AsciiStrToLower(Get(env, "OTEL_TRACES_EXPORTER")) == "none";
  if (endpoint.empty() || disabled) return config;
  if (absl::Status s = ParseEndpoint(endpoint, &config.exporter); !s.ok()) return s;
  config.enabled = true;
  return config;
}

}  // namespace chronoserve::otlp
