#include "common/otlp/otlp_encoder.h"

namespace chronoserve::otlp {
namespace {

namespace common = opentelemetry::proto::common::v1;
namespace trace = opentelemetry::proto::trace::v1;

void SetValue(const AttributeValue& value, common::AnyValue* out) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    out->set_int_value(*i);
  } else if (const auto* b = std::get_if<bool>(&value)) {
    out->set_bool_value(*b);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out->set_double_value(*d);
  } else {
    out->set_string_value(std::get<std::string>(value));
  }
}

// Sets `key` to `value`, replacing the value of an earlier `key`: OTLP wants a resource's keys unique.
void SetString(const std::string& key, const std::string& value,
               google::protobuf::RepeatedPtrField<common::KeyValue>* out) {
  for (common::KeyValue& kv : *out) {
    if (kv.key() == key) {
      kv.mutable_value()->set_string_value(value);
      return;
    }
  }
  common::KeyValue* kv = out->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

template <typename Id>
std::string Bytes(const Id& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), id.size());
}

void EncodeSpan(const SpanData& span, trace::Span* out) {
  out->set_trace_id(Bytes(span.trace_id));
  out->set_span_id(Bytes(span.span_id));
  if (!IsZero(span.parent_span_id)) out->set_parent_span_id(Bytes(span.parent_span_id));
  if (!span.trace_state.empty()) out->set_trace_state(span.trace_state);
  out->set_flags(span.flags);
  out->set_name(span.name);
  out->set_kind(static_cast<trace::Span::SpanKind>(span.kind));
  out->set_start_time_unix_nano(static_cast<uint64_t>(span.start_unix_ns));
  out->set_end_time_unix_nano(static_cast<uint64_t>(span.end_unix_ns));
  for (const Attribute& a : span.attributes) {
    common::KeyValue* kv = out->add_attributes();
    kv->set_key(a.key);
    SetValue(a.value, kv->mutable_value());
  }
  if (span.status != SpanStatus::kUnset) {
    out->mutable_status()->set_code(static_cast<trace::Status::StatusCode>(span.status));
    out->mutable_status()->set_message(span.status_message);
  }
}

}  // namespace

opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest EncodeExportRequest(
    const OtlpResource& resource, const std::vector<SpanData>& spans) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  trace::ResourceSpans* rs = request.add_resource_spans();
  auto* attributes = rs->mutable_resource()->mutable_attributes();
  SetString("service.name", resource.service_name, attributes);
  if (!resource.service_version.empty()) SetString("service.version", resource.service_version, attributes);
  SetString("telemetry.sdk.name", "chronoserve", attributes);
  SetString("telemetry.sdk.language", "cpp", attributes);
  // The user's (OTEL_RESOURCE_ATTRIBUTES) override the built-in ones, e.g. service.version.
  for (const auto& [key, value] : resource.attributes) {
    if (key != "service.name") SetString(key, value, attributes);
  }
  trace::ScopeSpans* scope_spans = rs->add_scope_spans();
  scope_spans->mutable_scope()->set_name(kInstrumentationScope);
  scope_spans->mutable_scope()->set_version(resource.service_version);
  scope_spans->mutable_spans()->Reserve(static_cast<int>(spans.size()));
  for (const SpanData& span : spans) EncodeSpan(span, scope_spans->add_spans());
  return request;
}

}  // namespace chronoserve::otlp
