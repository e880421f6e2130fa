#include "client/response_view.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <array>
#include <cstring>

namespace chronoserve::client {

using google::protobuf::internal::WireFormatLite;

std::optional<ParameterValue> ParseParameterValue(absl::string_view wire) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  ParameterValue value;
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {  // the end, or bytes that are no tag
      return in.CurrentPosition() == static_cast<int>(wire.size()) ? std::optional<ParameterValue>(value) : std::nullopt;
    }
    const int field = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const auto type = WireFormatLite::GetTagWireType(tag);
    uint64_t varint = 0;
    switch (field) {
      case 1:  // bool_param
      case 2:  // int64_param
      case 5:  // uint64_param
        if (type != WireFormatLite::WIRETYPE_VARINT || !in.ReadVarint64(&varint)) return std::nullopt;
        if (field == 1) {
          value = ParameterValue{ParameterValue::Kind::kBool};
          value.bool_value = varint != 0;
        } else if (field == 2) {
          value = ParameterValue{ParameterValue::Kind::kInt64};
          value.int64_value = static_cast<int64_t>(varint);
        } else {
          value = ParameterValue{ParameterValue::Kind::kUint64};
          value.uint64_value = varint;
        }
        break;
      case 3: {  // string_param
        uint32_t size = 0;
        if (type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED || !in.ReadVarint32(&size)) return std::nullopt;
        const int at = in.CurrentPosition();
        if (!in.Skip(static_cast<int>(size))) return std::nullopt;
        value = ParameterValue{ParameterValue::Kind::kString};
        value.string_value = wire.substr(static_cast<size_t>(at), size);
        break;
      }
      case 4: {  // double_param
        uint64_t bits = 0;
        if (type != WireFormatLite::WIRETYPE_FIXED64 || !in.ReadLittleEndian64(&bits)) return std::nullopt;
        value = ParameterValue{ParameterValue::Kind::kDouble};
        std::memcpy(&value.double_value, &bits, sizeof(bits));
        break;
      }
      default:
        if (!WireFormatLite::SkipField(&in, tag)) return std::nullopt;
        break;
    }
  }
}

std::optional<int64_t> FindInt64Parameter(
    const google::protobuf::RepeatedPtrField<view::ParameterEntry>& parameters, absl::string_view key) {
  std::optional<int64_t> found;
  for (const view::ParameterEntry& entry : parameters) {
    if (entry.key() != key) continue;
    auto value = ParseParameterValue(entry.value());
    found = value.has_value() && value->kind == ParameterValue::Kind::kInt64 ? std::optional<int64_t>(value->int64_value)
                                                                               : std::nullopt;
  }
  return found;
}

std::optional<RequestTiming> DecodeTiming(const view::ModelInferResponseView& response) {
  constexpr size_t kMaxFields = 32;
  if (TimingParamFields().size() > kMaxFields) return std::nullopt;  // never: 17 fields
  std::array<std::optional<ParameterValue>, kMaxFields> by_field{};
  for (const view::ParameterEntry& entry : response.parameters()) {
    const int field = TimingParamFieldIndex(entry.key());
    if (field < 0) continue;
    by_field[static_cast<size_t>(field)] = ParseParameterValue(entry.value());  // a repeated key: the last wins
    if (!by_field[static_cast<size_t>(field)].has_value()) return std::nullopt;  // malformed bytes
  }
  auto timing = DecodeTimingParamsByField([&by_field](size_t field) -> std::optional<TimingParam> {
    const std::optional<ParameterValue>& value = by_field[field];
    if (!value.has_value()) return std::nullopt;
    TimingParam p;
    switch (value->kind) {
      case ParameterValue::Kind::kInt64: p.int_value = value->int64_value; break;
      case ParameterValue::Kind::kBool: p.kind = TimingParam::Kind::kBool; p.bool_value = value->bool_value; break;
      case ParameterValue::Kind::kString:
        p.kind = TimingParam::Kind::kString;
        p.string_value.assign(value->string_value.data(), value->string_value.size());
        break;
      default: p.kind = TimingParam::Kind::kString; break;
    }
    return p;
  });
  if (!timing.ok()) return std::nullopt;
  return *timing;
}

}  // namespace chronoserve::client
