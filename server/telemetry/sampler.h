// Sampler: decides whether a new server span is recorded, by the OpenTelemetry SDK's rules
// (OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG): always_on, always_off, traceidratio and their
// parentbased_* forms, which follow the caller's sampled flag when a valid traceparent came in.
// Immutable after Create; called from worker threads.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_SAMPLER_H_
#define CHRONOSERVE_SERVER_TELEMETRY_SAMPLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/traceparent.h"

namespace chronoserve::server::telemetry {

class Sampler {
 public:
  // `name` as OTEL_TRACES_SAMPLER ("" = parentbased_always_on, the SDK default); `arg` as
  // OTEL_TRACES_SAMPLER_ARG (the ratio for *traceidratio, "" = 1.0). INVALID_ARGUMENT otherwise.
  static absl::StatusOr<Sampler> Create(const std::string& name, const std::string& arg);
  // The same from the environment, where the SDK rules say a bad value is logged and ignored: a
  // ratio that is not one acts as unset (1.0), a name that is not a sampler as unset (the default).
  // Each such value adds a line to `warnings`.
  static Sampler FromEnvironment(const std::string& name, const std::string& arg, std::vector<std::string>* warnings);

  // `parent` is the caller's context or null for a new trace; `trace_id` the span's trace.
  bool ShouldSample(const TraceParent* parent, const TraceId& trace_id) const;
  // "parentbased_traceidratio{0.25}" etc., for the startup log.
  std::string Description() const;

  // Triton's trace_rate: one new trace in N. WithRootRate keeps whether the sampler follows a
  // caller's sampled flag and starts traces of its own by N: 1 = always_on, 0 = always_off (no new
  // trace), else traceidratio 1/N. RootRate reads it back: always_on 1, always_off 0, a ratio r
  // the nearest whole 1/r (0 for r = 0).
  Sampler WithRootRate(int64_t n) const;
  int64_t RootRate() const;

 private:
  enum class Root { kAlwaysOn, kAlwaysOff, kRatio };
  Sampler(Root root, bool parent_based, double ratio)
      : root_(root), parent_based_(parent_based), ratio_(ratio) {}

  bool RootDecision(const TraceId& trace_id) const;

  Root root_;
  bool parent_based_;
  double ratio_;
};

// TraceIdRatioBased's parts, as OpenTelemetry specifies them (trace/sdk.md, 56 bits of
// randomness): R, the trace id's 7 rightmost bytes, and the rejection threshold T for a ratio in
// [0, 1] (2^56 for 0, which nothing reaches; 0 for 1). A trace is sampled when R >= T.
uint64_t TraceRandomness(const TraceId& trace_id);
uint64_t RejectionThreshold(double ratio);

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_SAMPLER_H_
