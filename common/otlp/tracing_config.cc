#include "common/otlp/tracing_config.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/otlp/otlp_file_exporter.h"

namespace chronoserve::otlp {
namespace {

std::string Get(const EnvLookup& env, const char* name) {
  std::optional<std::string> v = env(name);
  return v ? std::string(absl::StripAsciiWhitespace(*v)) : std::string();
}

// "http://host:4317/" -> host:4317 (plaintext); "https://..." -> TLS; "host:4317" -> TLS when
// `schemeless_tls`, plaintext otherwise. Sets *had_scheme when one of the two prefixes was given.
absl::Status ParseEndpoint(std::string endpoint, bool schemeless_tls, OtlpGrpcExporterOptions* out,
                           bool* had_scheme = nullptr) {
  absl::string_view e = endpoint;
  out->use_tls = schemeless_tls;
  const bool https = absl::ConsumePrefix(&e, "https://");
  const bool http = !https && absl::ConsumePrefix(&e, "http://");
  if (https || http) out->use_tls = https;
  if (had_scheme != nullptr) *had_scheme = https || http;
  while (absl::ConsumeSuffix(&e, "/")) {
  }
  const size_t colon = e.rfind(':');
  const absl::string_view host = colon == absl::string_view::npos ? e : e.substr(0, colon);
  const absl::string_view digits = colon == absl::string_view::npos ? "" : e.substr(colon + 1);
  int port = 0;
  // The port: 1-5 ASCII digits (SimpleAtoi alone takes a sign and spaces, which gRPC would not).
  const bool port_ok = !digits.empty() && digits.size() <= 5 &&
                       std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
                       absl::SimpleAtoi(digits, &port) && port > 0 && port <= 65535;
  // An IPv6 host is bracketed ([::1]:4317): unbracketed, gRPC reads "::1:4317" as an address alone.
  const bool bracketed = absl::StartsWith(host, "[") && absl::EndsWith(host, "]") && host.size() > 2;
  const bool host_ok = !host.empty() && (bracketed || host.find_first_of(":[]") == absl::string_view::npos);
  if (e.empty() || e.find('/') != absl::string_view::npos || !port_ok || !host_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OTLP endpoint '", endpoint,
        "' is not HOST:PORT (optionally http:// or https://; an IPv6 host in brackets, [::1]:4317; the port 1-65535)"));
  }
  out->endpoint = std::string(e);
  return absl::OkStatus();
}

// W3C Baggage percent-decoding ("%2C" -> ","); false on a '%' not followed by two hex digits.
bool PercentDecode(absl::string_view in, std::string* out) {
  auto hex = [](char c) { return absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10; };
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) || !absl::ascii_isxdigit(in[i + 2])) return false;
    out->push_back(static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2])));
    i += 2;
  }
  return true;
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;  // cut short
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// Adds key=value to `pairs`, in first-seen order; a key given again keeps its last value.
void KeepLast(std::string key, std::string value, std::vector<std::pair<std::string, std::string>>* pairs) {
  auto same = std::find_if(pairs->begin(), pairs->end(), [&](const auto& kv) { return kv.first == key; });
  if (same != pairs->end()) {
    same->second = std::move(value);
  } else {
    pairs->emplace_back(std::move(key), std::move(value));
  }
}

// The first of `names` that is set (not empty), with its name for messages.
struct EnvValue {
  const char* name = "";
  std::string value;
};
EnvValue FirstSet(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (std::string v = Get(env, name); !v.empty()) return {name, std::move(v)};
  }
  return {};
}

// OTEL_RESOURCE_ATTRIBUTES: key1=value1,key2=value2, keys and values percent-encoded (the spec
// requires ',' and '=' to be). A malformed value is discarded whole, as the spec asks, with a
// warning. A key given twice keeps its last value; service.name goes to resource->service_name.
void ParseResourceAttributes(const std::string& value, OtlpResource* resource, std::vector<std::string>* warnings) {
  std::string service_name = resource->service_name;
  std::vector<std::pair<std::string, std::string>> attributes;
  for (absl::string_view member : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    const size_t eq = member.find('=');
    std::string key, v;
    if (eq == absl::string_view::npos || !PercentDecode(absl::StripAsciiWhitespace(member.substr(0, eq)), &key) ||
        key.empty() || !PercentDecode(absl::StripAsciiWhitespace(member.substr(eq + 1)), &v)) {
      warnings->push_back(absl::StrCat("OTEL_RESOURCE_ATTRIBUTES='", value, "' ignored: '", member,
                                       "' is not key=value (percent-encoded)"));
      return;
    }
    // OTLP's strings are proto3 strings: one byte that is not UTF-8 makes a collector refuse every
    // export that carries the resource, so such a value is discarded whole like a malformed one.
    if (!IsUtf8(key) || !IsUtf8(v)) {
      warnings->push_back(absl::StrCat("OTEL_RESOURCE_ATTRIBUTES ignored: '", absl::CHexEscape(member),
                                       "' does not decode to UTF-8"));
      return;
    }
    if (key == "service.name") {
      service_name = std::move(v);
      continue;
    }
    KeepLast(std::move(key), std::move(v), &attributes);
  }
  resource->service_name = std::move(service_name);
  resource->attributes = std::move(attributes);
}

// A timeout variable's milliseconds: 0 is no limit, as the spec's Timeout type says.
absl::Duration TimeoutFromMs(int64_t ms) { return ms == 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms); }

// OTEL_BSP_* overrides of the batch processor defaults (milliseconds / counts). A value that is not
// an integer in range (the two durations ≥ 0, the two sizes > 0) keeps the default, with a warning
// (the spec's "warn and ignore"). A schedule delay of 0 exports spans as soon as they are queued;
// an export timeout of 0 is no limit.
void ApplyBspEnv(const EnvLookup& env, BatchSpanProcessorOptions* p, std::vector<std::string>* warnings) {
  struct Var {
    const char* name;
    int64_t least;
    std::function<void(int64_t)> set;
  } vars[] = {
      {"OTEL_BSP_SCHEDULE_DELAY", 0, [p](int64_t v) { p->schedule_delay = absl::Milliseconds(v); }},
      {"OTEL_BSP_EXPORT_TIMEOUT", 0, [p](int64_t v) { p->export_timeout = TimeoutFromMs(v); }},
      {"OTEL_BSP_MAX_QUEUE_SIZE", 1, [p](int64_t v) { p->max_queue_size = static_cast<size_t>(v); }},
      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, [p](int64_t v) { p->max_export_batch_size = static_cast<size_t>(v); }},
  };
  for (const Var& var : vars) {
    const std::string value = Get(env, var.name);
    if (value.empty()) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < var.least) {
      warnings->push_back(absl::StrCat(var.name, "='", value, "' is not ",
                                       var.least == 0 ? "an integer >= 0" : "a positive integer", "; using the default"));
      continue;
    }
    var.set(v);
  }
  p->max_export_batch_size = std::min(p->max_export_batch_size, p->max_queue_size);
}


// A gRPC metadata key: [0-9a-z_.-], not gRPC's own (grpc-*), not binary (-bin: values are bytes).
bool IsMetadataKey(absl::string_view key) {
  if (key.empty() || absl::StartsWith(key, "grpc-") || absl::EndsWith(key, "-bin")) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isdigit(c) || absl::ascii_islower(c) || c == '_' || c == '.' || c == '-';
  });
}

// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: key1=value1,key2=value2 as W3C Baggage writes it, values
// percent-decoded; keys lower-cased for gRPC metadata. Like OTEL_RESOURCE_ATTRIBUTES, a malformed
// value is discarded whole with a warning. A key given twice keeps its last value.
void ParseHeaders(const EnvValue& var, std::vector<std::pair<std::string, std::string>>* headers,
                  std::vector<std::string>* warnings) {
  std::vector<std::pair<std::string, std::string>> parsed;
  for (absl::string_view member : absl::StrSplit(var.value, ',', absl::SkipWhitespace())) {
    const size_t eq = member.find('=');
    std::string key, value;
    const bool ok = eq != absl::string_view::npos &&
                    PercentDecode(absl::StripAsciiWhitespace(member.substr(0, eq)), &key) &&
                    PercentDecode(absl::StripAsciiWhitespace(member.substr(eq + 1)), &value);
    key = absl::AsciiStrToLower(key);
    const bool printable =
        std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
    if (!ok || !IsMetadataKey(key) || !printable) {
      // Names the member by its key only: header values are often credentials.
      // A member without '=' is all value as far as anyone can tell: it is not shown at all.
      const std::string shown = eq == absl::string_view::npos
                                    ? std::string("(a member without '=')")
                                    : absl::StrCat("'", absl::StripAsciiWhitespace(member.substr(0, eq)), "=...'");
      warnings->push_back(absl::StrCat(var.name, " ignored whole: its member ", shown,
                                       " is not key=value with a gRPC metadata key (letters, digits, "
                                       "'-', '_', '.'; not grpc-* or *-bin) and a printable, percent-encoded "
                                       "value"));
      return;
    }
    KeepLast(std::move(key), std::move(value), &parsed);
  }
  *headers = std::move(parsed);
}

// The exporter's own OTEL_EXPORTER_OTLP_* settings besides endpoint and protocol: headers and
// timeout (the traces-specific variable wins, whole), and the TLS settings this exporter does not
// implement, each named in a warning.
void ApplyExporterEnv(const EnvLookup& env, OtlpGrpcExporterOptions* exporter, std::vector<std::string>* warnings) {
  if (const EnvValue headers = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"});
      !headers.value.empty()) {
    ParseHeaders(headers, &exporter->headers, warnings);
  }
  if (const EnvValue timeout = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"});
      !timeout.value.empty()) {
    int64_t ms = 0;
    if (absl::SimpleAtoi(timeout.value, &ms) && ms >= 0) {
      exporter->timeout = TimeoutFromMs(ms);
    } else {
      warnings->push_back(absl::StrCat(timeout.name, "='", timeout.value, "' is not an integer >= 0 (ms; 0 is no "
                                       "limit); using ", absl::ToInt64Milliseconds(exporter->timeout), " ms"));
    }
  }
  for (const char* name : {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE",
                           "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                           "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"}) {
    if (const std::string value = Get(env, name); !value.empty()) {
      warnings->push_back(absl::StrCat(name, "='", value,
                                       "' is ignored: chronoserve's OTLP exporter has no certificate settings. "
                                       "Its TLS uses the system's root certificates and no client certificate"));
    }
  }
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
                                                   const std::string& service_name,
                                                   const std::string& flag_file) {
  TracingConfig config;
  config.exporter.resource.service_name = service_name;
  config.exporter.resource.service_version = service_version;
  // Complaints about settings matter only when spans are sent: kept until tracing is known to be on.
  std::vector<std::string> setting_warnings;
  ParseResourceAttributes(Get(env, "OTEL_RESOURCE_ATTRIBUTES"), &config.exporter.resource, &setting_warnings);
  if (std::string name = Get(env, "OTEL_SERVICE_NAME"); !name.empty()) {
    if (IsUtf8(name)) {
      config.exporter.resource.service_name = name;
    } else {
      setting_warnings.push_back(absl::StrCat("OTEL_SERVICE_NAME='", absl::CHexEscape(name),
                                              "' is not UTF-8; using '", config.exporter.resource.service_name, "'"));
    }
  }
  if (std::string s = Get(env, "OTEL_TRACES_SAMPLER"); !s.empty()) config.sampler = s;
  config.sampler_arg = Get(env, "OTEL_TRACES_SAMPLER_ARG");
  ApplyBspEnv(env, &config.processor, &setting_warnings);
  ApplyExporterEnv(env, &config.exporter, &setting_warnings);

  const std::string exporters = absl::AsciiStrToLower(Get(env, "OTEL_TRACES_EXPORTER"));
  const std::string sdk_disabled = absl::AsciiStrToLower(Get(env, "OTEL_SDK_DISABLED"));
  if (!sdk_disabled.empty() && sdk_disabled != "true" && sdk_disabled != "false") {
    // The spec's Boolean: anything but true is false, with a warning.
    setting_warnings.push_back(
        absl::StrCat("OTEL_SDK_DISABLED='", Get(env, "OTEL_SDK_DISABLED"), "' is not true or false; read as false"));
  }
  const bool disabled = sdk_disabled == "true" || exporters == "none";
  config.sdk_disabled = disabled;
  const EnvValue insecure = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE"});
  if (!flag_file.empty()) {
    if (!flag_endpoint.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--trace-file '", flag_file, "' and --otlp-endpoint '",
                                                     flag_endpoint, "' both name where spans go; give one"));
    }
    if (disabled) return config;
    const EnvValue endpoint = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"});
    if (!endpoint.value.empty()) {
      setting_warnings.push_back(absl::StrCat(endpoint.name, "='", endpoint.value, "' is ignored: --trace-file '",
                                              flag_file, "' takes the spans"));
    }
    config.file = flag_file;
    config.enabled = true;
    config.warnings = std::move(setting_warnings);
    return config;
  }
  if (!flag_endpoint.empty()) {
    // Typed by the user for OTLP/gRPC: a malformed one is an error, even with tracing disabled; the
    // protocol and INSECURE variables do not apply (HOST:PORT is plaintext, as Jaeger's and the
    // collector's are by default).
    if (absl::Status s = ParseEndpoint(flag_endpoint, /*schemeless_tls=*/false, &config.exporter); !s.ok()) return s;
    if (disabled) return config;
    if (!insecure.value.empty()) {
      setting_warnings.push_back(absl::StrCat(insecure.name, "='", insecure.value,
                                              "' has no effect on --otlp-endpoint, which is plaintext unless "
                                              "it starts with https://"));
    }
    config.enabled = true;
    config.warnings = std::move(setting_warnings);
    return config;
  }
  const EnvValue endpoint = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"});
  if (disabled) return config;
  // Off at start, `why` (if any) saying so; the settings' problems are kept, for tracing turned on
  // later (TraceSetting's trace_file).
  auto off = [&config, &setting_warnings](std::string why) {
    if (!why.empty()) config.warnings.push_back(std::move(why));
    config.setting_warnings = std::move(setting_warnings);
    return config;
  };
  if (endpoint.value.empty()) return off("");
  // OTEL_TRACES_EXPORTER lists the exporters wanted (default otlp): an environment that asks for
  // others only (console, zipkin) did not ask for OTLP.
  if (!exporters.empty()) {
    bool otlp = false;
    for (absl::string_view e : absl::StrSplit(exporters, ',', absl::SkipWhitespace())) {
      otlp |= absl::StripAsciiWhitespace(e) == "otlp";
    }
    if (!otlp) {
      return off(absl::StrCat("tracing is off: OTEL_TRACES_EXPORTER='", Get(env, "OTEL_TRACES_EXPORTER"),
                              "' does not list otlp, the only exporter chronoserve has (or give "
                              "--otlp-endpoint HOST:PORT)"));
    }
  }
  // The environment may be set up for another exporter (http/protobuf on 4318 is the spec's default):
  // tracing is optional, so it goes off with a warning rather than keeping the server from starting.
  const EnvValue protocol = FirstSet(env, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"});
  if (!protocol.value.empty() && absl::AsciiStrToLower(protocol.value) != "grpc") {
    return off(absl::StrCat("tracing is off: ", protocol.name, "='", protocol.value,
                            "', but chronoserve exports traces over OTLP/gRPC only (protocol "
                            "'grpc'; or give --otlp-endpoint HOST:PORT)"));
  }
  // The spec's OTEL_EXPORTER_OTLP_[TRACES_]INSECURE: for an endpoint without http:// or https://,
  // TLS unless it is "true".
  bool schemeless_tls = true;
  if (const std::string v = absl::AsciiStrToLower(insecure.value); v == "true") {
    schemeless_tls = false;
  } else if (!v.empty() && v != "false") {
    setting_warnings.push_back(absl::StrCat(insecure.name, "='", insecure.value,
                                            "' is not true or false; using false (TLS)"));
  }
  bool had_scheme = false;
  if (absl::Status s = ParseEndpoint(endpoint.value, schemeless_tls, &config.exporter, &had_scheme); !s.ok()) {
    return off(absl::StrCat("tracing is off: ", endpoint.name, "='", endpoint.value,
                            "' is not an OTLP/gRPC endpoint (HOST:PORT, optionally http:// or "
                            "https://, no path)"));
  }
  if (had_scheme && !insecure.value.empty()) {
    setting_warnings.push_back(absl::StrCat(insecure.name, "='", insecure.value, "' has no effect: ", endpoint.name,
                                            " names its scheme, which says whether TLS is used"));
  }
  config.enabled = true;
  config.warnings = std::move(setting_warnings);
  return config;
}

absl::StatusOr<std::unique_ptr<SpanExporter>> CreateSpanExporter(const TracingConfig& config) {
  if (!config.file.empty()) return OtlpFileExporter::Create(config.file, config.exporter.resource);
  return OtlpGrpcExporter::Create(config.exporter);
}

void RequireQueueSize(size_t min_spans, TracingConfig* config) {
  BatchSpanProcessorOptions& p = config->processor;
  if (p.max_queue_size >= min_spans) return;
  std::vector<std::string>& warnings = config->enabled ? config->warnings : config->setting_warnings;
  warnings.push_back(absl::StrCat("OTEL_BSP_MAX_QUEUE_SIZE=", p.max_queue_size,
                                  " cannot hold the spans of one request (up to ", min_spans,
                                  ", queued together or not at all); using ", min_spans));
  // An export batch that the small queue had capped (ApplyBspEnv) grows with it: one request's
  // spans then go out in one export, not a few at a time.
  if (p.max_export_batch_size >= p.max_queue_size) p.max_export_batch_size = min_spans;
  p.max_queue_size = min_spans;
}

}  // namespace chronoserve::otlp
