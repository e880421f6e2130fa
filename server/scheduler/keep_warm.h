// Keep-warm: while a worker is idle it re-runs its own model (smallest CUDA graph, or an eager
// forward on a resident dummy input) every `keep_warm_ms`, so the host launch path stays warm
// (../shared/TIMING.md lesson 4), until `keep_warm_horizon_ms` of idleness have passed. This file
// holds the config parsing and the schedule, both pure; the Worker runs it. Thread-safe (stateless).
//
//   config = KeepWarmConfigFromSpec(spec);    // parameters { key: "keep_warm_ms" ... }
//   due = NextKeepWarmNs(*config, idle_since_ns, last_run_ns);   // 0: nothing to run
#ifndef CHRONOSERVE_SERVER_SCHEDULER_KEEP_WARM_H_
#define CHRONOSERVE_SERVER_SCHEDULER_KEEP_WARM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/core/model_spec.h"

namespace chronoserve::server {

inline constexpr char kKeepWarmKey[] = "keep_warm_ms";
inline constexpr char kKeepWarmHorizonKey[] = "keep_warm_horizon_ms";
inline constexpr int64_t kDefaultKeepWarmHorizonMs = 60'000;

struct KeepWarmConfig {
  int64_t period_ns = 0;  // 0 = off (the default)
  int64_t horizon_ns = kDefaultKeepWarmHorizonMs * 1'000'000;
  bool enabled() const { return period_ns > 0; }
};

// parameters[keep_warm_ms] (integer >= 0; absent or 0 = off) and parameters[keep_warm_horizon_ms]
// (integer > 0, default 60000). INVALID_ARGUMENT names the model, the key and the value.
absl::StatusOr<KeepWarmConfig> KeepWarmConfigFromSpec(const ModelSpec& spec);

// When the next keep-warm run is due, on the worker's clock: `period` after the later of the
// worker becoming idle (`idle_since_ns`, the end of its last batch) and the start of its last
// keep-warm run, provided that is at most `horizon` into the idle spell. 0 = nothing is due:
// keep-warm is off, or it has lapsed for this idle spell.
int64_t NextKeepWarmNs(const KeepWarmConfig& config, int64_t idle_since_ns, int64_t last_run_ns);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_KEEP_WARM_H_
