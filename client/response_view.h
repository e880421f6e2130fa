// Reading a response through proto/response_view.proto (what chronobench does for every answer):
// a parameter's value from its InferParameter wire bytes, a parameter by key, and the timing.*
// parameters (docs/TIMING.md) in one pass over the entries.
#ifndef CHRONOSERVE_CLIENT_RESPONSE_VIEW_H_
#define CHRONOSERVE_CLIENT_RESPONSE_VIEW_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "common/timing.h"
#include "proto/response_view.pb.h"

namespace chronoserve::client {

// The value of one InferParameter (its oneof), read from its wire bytes without a message.
struct ParameterValue {
  enum class Kind { kNone, kBool, kInt64, kString, kDouble, kUint64 };
  Kind kind = Kind::kNone;  // kNone: no field set
  bool bool_value = false;
  int64_t int64_value = 0;
  uint64_t uint64_value = 0;
  double double_value = 0;
  absl::string_view string_value;  // into the bytes given
};
// nullopt when `wire` is not an InferParameter (malformed or truncated). As with the message, the
// last oneof field on the wire wins; unknown fields are skipped.
std::optional<ParameterValue> ParseParameterValue(absl::string_view wire);

// The int64 parameter `key`, or nullopt when absent, of another kind, or malformed. A key that
// appears twice: the last wins, as when the entries are read into a map.
std::optional<int64_t> FindInt64Parameter(
    const google::protobuf::RepeatedPtrField<view::ParameterEntry>& parameters, absl::string_view key);

// The timing.* parameters, as InferenceClient::DecodeTiming reads them from a ModelInferResponse;
// nullopt when there are none or one is mistyped.
std::optional<RequestTiming> DecodeTiming(const view::ModelInferResponseView& response);

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_RESPONSE_VIEW_H_
