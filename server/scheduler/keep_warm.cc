#include "server/scheduler/keep_warm.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server {
namespace {

// parameters[key] as milliseconds >= min_ms, or `fallback` when absent.
absl::StatusOr<int64_t> MillisParam(const ModelSpec& spec, const char* key, int64_t min_ms,
                                    int64_t fallback) {
  auto it = spec.parameters.find(key);
  if (it == spec.parameters.end()) return fallback;
  int64_t ms = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(it->second), &ms) || ms < min_ms ||
      ms > 86'400'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "': parameter ", key, " = \"", it->second,
        "\": expected whole milliseconds, ", min_ms, " to 86400000"));
  }
  return ms;
}

}  // namespace

absl::StatusOr<KeepWarmConfig> KeepWarmConfigFromSpec(const ModelSpec& spec) {
  auto period_ms = MillisParam(spec, kKeepWarmKey, 0, 0);
  if (!period_ms.ok()) return period_ms.status();
  auto horizon_ms = MillisParam(spec, kKeepWarmHorizonKey, 1, kDefaultKeepWarmHorizonMs);
  if (!horizon_ms.ok()) return horizon_ms.status();
  if (*period_ms > *horizon_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "': parameter ", kKeepWarmKey, " = ", *period_ms, " ms is longer than ",
        kKeepWarmHorizonKey, " = ", *horizon_ms, " ms, so keep-warm would never run; shorten the period or "
        "lengthen the horizon"));
  }
  KeepWarmConfig config;
  config.period_ns = *period_ms * 1'000'000;
  config.horizon_ns = *horizon_ms * 1'000'000;
  return config;
}

int64_t NextKeepWarmNs(const KeepWarmConfig& config, int64_t idle_since_ns, int64_t last_run_ns) {
  if (!config.enabled()) return 0;
  const int64_t due = std::max(idle_since_ns, last_run_ns) + config.period_ns;
  return due - idle_since_ns <= config.horizon_ns ? due : 0;
}

}  // namespace chronoserve::server
