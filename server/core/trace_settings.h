// TraceSettings: Triton's trace settings (its trace extension, the TraceSetting RPC) as the server's
// tracing applies them, server-wide or for one model. Settings are Triton's: a key with a list of
// string values. Implemented by telemetry (telemetry::TraceControl); the gRPC service reads and
// changes them through this interface, so it does not depend on telemetry. Thread-safe.
#ifndef CHRONOSERVE_SERVER_CORE_TRACE_SETTINGS_H_
#define CHRONOSERVE_SERVER_CORE_TRACE_SETTINGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace chronoserve::server {

// key -> values, e.g. {"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"100"}}.
using TraceSettingsMap = std::map<std::string, std::vector<std::string>>;

class TraceSettings {
 public:
  virtual ~TraceSettings() = default;
  // Applies `changes` to `model`'s settings ("" = the server-wide ones) and returns that model's
  // settings after them, every key. A key with no values clears the setting: a model's then
  // follows the server-wide one again; a server-wide one returns to its value at start. All or
  // nothing: INVALID_ARGUMENT (a key, value or count of values that is not one) or
  // FAILED_PRECONDITION (a change while the server has no trace collector) and nothing changes.
  // The caller checks that `model` is one the server has.
  virtual absl::StatusOr<TraceSettingsMap> Update(const std::string& model, const TraceSettingsMap& changes) = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_TRACE_SETTINGS_H_
