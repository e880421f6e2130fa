#include "server/backend/exact_device_timing.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server {

absl::StatusOr<bool> ExactDeviceTimingFromSpec(const ModelSpec& spec) {
  auto it = spec.parameters.find(kExactDeviceTimingKey);
  if (it == spec.parameters.end()) return false;
  const std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(it->second));
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': parameter ", kExactDeviceTimingKey,
                                                 " = \"", it->second, "\": expected \"true\" or \"false\""));
}

bool HoldSchedule::ShouldHold(int graph_bucket, int64_t items, size_t input_bytes) {
  if (!enabled_) return false;
  const std::tuple<int, int64_t, size_t> shape{graph_bucket < 0 ? -1 : graph_bucket, items, input_bytes};
  auto it = runs_.find(shape);
  if (it == runs_.end()) {
    if (runs_.size() >= kMaxShapes) return false;
    it = runs_.emplace(shape, 0).first;
  }
  if (it->second >= kUnheldRuns) {
    last_held_ = shape;
    return true;
  }
  ++it->second;
  return false;
}

bool HoldSchedule::Broke() {
  if (auto it = runs_.find(last_held_); it != runs_.end()) it->second = 0;
  if (++breaks_ >= kMaxBreaks) enabled_ = false;
  return enabled_;
}

}  // namespace chronoserve::server
