#include "tests/telemetry/otlp_json_file.h"

#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::testing {
namespace {

namespace collector = opentelemetry::proto::collector::trace::v1;
namespace common = opentelemetry::proto::common::v1;

bool IsLowerHex(const std::string& s, size_t size) {
  if (s.size() != size) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// `key` of `object`, when present, must be `hex_size` lower-case hex digits: replaced by its base64.
absl::Status HexIdToBase64(nlohmann::json& object, const char* key, size_t hex_size) {
  auto it = object.find(key);
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_string() || !IsLowerHex(it->get<std::string>(), hex_size)) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is ", it->dump(), ", not ", hex_size, " lower-case hex digits"));
  }
  *it = absl::Base64Escape(absl::HexStringToBytes(it->get<std::string>()));
  return absl::OkStatus();
}

absl::Status CheckSpan(nlohmann::json& span) {
  for (const char* snake : {"trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano"}) {
    if (span.contains(snake)) return absl::InvalidArgumentError(absl::StrCat("field ", snake, " is not lowerCamelCase"));
  }
  if (auto kind = span.find("kind"); kind != span.end() && !kind->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("kind is ", kind->dump(), ", not an integer"));
  }
  if (auto status = span.find("status"); status != span.end()) {
    if (auto code = status->find("code"); code != status->end() && !code->is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("status.code is ", code->dump(), ", not an integer"));
    }
  }
  if (absl::Status s = HexIdToBase64(span, "traceId", 32); !s.ok()) return s;
  if (absl::Status s = HexIdToBase64(span, "spanId", 16); !s.ok()) return s;
  return HexIdToBase64(span, "parentSpanId", 16);
}

absl::StatusOr<collector::ExportTraceServiceRequest> DecodeLine(const std::string& line) {
  nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return absl::InvalidArgumentError("not a JSON object");
  if (!json.contains("resourceSpans")) return absl::InvalidArgumentError("no resourceSpans");
  for (nlohmann::json& rs : json["resourceSpans"]) {
    for (nlohmann::json& ss : rs["scopeSpans"]) {
      for (nlohmann::json& span : ss["spans"]) {
        if (absl::Status s = CheckSpan(span); !s.ok()) return s;
      }
    }
  }
  collector::ExportTraceServiceRequest request;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json.dump(), &request);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("protobuf's JSON parser: ", parsed.ToString()));
  return request;
}

std::string ValueText(const common::AnyValue& v) {
  switch (v.value_case()) {
    case common::AnyValue::kStringValue: return v.string_value();
    case common::AnyValue::kBoolValue: return v.bool_value() ? "true" : "false";
    case common::AnyValue::kIntValue: return absl::StrCat(v.int_value());
    case common::AnyValue::kDoubleValue: return absl::StrCat(v.double_value());
    default: return "?";
  }
}

}  // namespace

absl::StatusOr<std::vector<collector::ExportTraceServiceRequest>> ReadOtlpJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::vector<collector::ExportTraceServiceRequest> requests;
  size_t from = 0;
  for (int line = 1; from < all.size(); ++line) {
    const size_t end = all.find('\n', from);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", line, " has no newline (cut short?)"));
    }
    auto request = DecodeLine(all.substr(from, end - from));
    if (!request.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", line, ": ", request.status().message()));
    }
    requests.push_back(*std::move(request));
    from = end + 1;
  }
  return requests;
}

std::vector<ReceivedSpan> SpansOf(const std::vector<collector::ExportTraceServiceRequest>& requests) {
  std::vector<ReceivedSpan> spans;
  for (const auto& request : requests) {
    for (const auto& rs : request.resource_spans()) {
      std::map<std::string, std::string> resource;
      for (const auto& kv : rs.resource().attributes()) resource[kv.key()] = ValueText(kv.value());
      for (const auto& ss : rs.scope_spans()) {
        for (const auto& s : ss.spans()) {
          ReceivedSpan out;
          out.trace_id = absl::BytesToHexString(s.trace_id());
          out.span_id = absl::BytesToHexString(s.span_id());
          out.parent_span_id = absl::BytesToHexString(s.parent_span_id());
          out.trace_state = s.trace_state();
          out.name = s.name();
          out.kind = s.kind();
          out.status = s.status().code();
          out.flags = s.flags();
          out.start_ns = static_cast<int64_t>(s.start_time_unix_nano());
          out.end_ns = static_cast<int64_t>(s.end_time_unix_nano());
          for (const auto& kv : s.attributes()) out.attributes[kv.key()] = ValueText(kv.value());
          out.resource = resource;
          out.scope = ss.scope().name();
          spans.push_back(std::move(out));
        }
      }
    }
  }
  return spans;
}

}  // namespace chronoserve::testing
