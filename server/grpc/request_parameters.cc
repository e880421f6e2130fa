#include "server/grpc/request_parameters.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chronoserve::server {
namespace {

// What a parameter holds, for a message: "is a bool_param", or "has no value" (a map entry sent
// without one).
const char* ParameterGiven(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return "is a bool_param";
    case inference::InferParameter::kInt64Param: return "is an int64_param";
    case inference::InferParameter::kStringParam: return "is a string_param";
    case inference::InferParameter::kDoubleParam: return "is a double_param";
    case inference::InferParameter::kUint64Param: return "is a uint64_param";
    default: return "has no value";
  }
}

absl::Status BadParameter(const ModelSpec& spec, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(spec.Label(), ": request parameter '", key, "' ", what));
}

// A non-negative integer parameter given as int64_param or uint64_param (tritonclient sends
// "timeout" as int64 and "priority" as uint64).
absl::StatusOr<int64_t> NonNegativeInteger(const ModelSpec& spec, const std::string& key,
                                           const inference::InferParameter& p, const char* meaning) {
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    return p.int64_param();
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    return static_cast<int64_t>(std::min<uint64_t>(p.uint64_param(), std::numeric_limits<int64_t>::max()));
  }
  const std::string given = p.parameter_choice_case() == inference::InferParameter::kInt64Param
                                ? absl::StrCat("is ", p.int64_param())
                                : std::string(ParameterGiven(p));
  return BadParameter(spec, key, absl::StrCat(given, "; expected a non-negative int64_param or uint64_param (",
                                              meaning, ")"));
}

// Whether a sequence parameter asks for a sequence: a non-zero / non-empty sequence_id, a true flag.
absl::StatusOr<bool> AsksForSequence(const ModelSpec& spec, const std::string& key, const inference::InferParameter& p) {
  const auto type = p.parameter_choice_case();
  if (key == "sequence_id") {
    if (type == inference::InferParameter::kInt64Param) return p.int64_param() != 0;
    if (type == inference::InferParameter::kUint64Param) return p.uint64_param() != 0;
    if (type == inference::InferParameter::kStringParam) return !p.string_param().empty();
    return BadParameter(spec, key, absl::StrCat(ParameterGiven(p),
                                                "; expected int64_param, uint64_param or string_param (the correlation id)"));
  }
  if (type == inference::InferParameter::kBoolParam) return p.bool_param();
  return BadParameter(spec, key, absl::StrCat(ParameterGiven(p), "; expected bool_param"));
}

}  // namespace

absl::StatusOr<RequestParameters> ParseRequestParameters(const ModelSpec& spec,
                                                         const inference::ModelInferRequest& request) {
  RequestParameters out;
  for (const auto& [key, value] : request.parameters()) {
    if (key == "timeout") {
      ASSIGN_OR_RETURN(out.timeout_us, NonNegativeInteger(spec, key, value, "microseconds, 0 = none"));
    } else if (key == "priority") {
      // Triton maps a priority above the model's priority_levels (none here) to the default level.
      RETURN_IF_ERROR(NonNegativeInteger(spec, key, value, "1 = highest, 0 = default").status());
    } else if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end") {
      ASSIGN_OR_RETURN(bool sequence, AsksForSequence(spec, key, value));
      if (sequence) {
        return BadParameter(spec, key, "asks for a sequence, but the model is not a sequence model "
                                       "(chronoserve serves no sequence_batching); send no sequence parameters");
      }
    }
  }
  return out;
}

}  // namespace chronoserve::server
