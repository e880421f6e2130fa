// BenchReport: everything one chronobench run measured, in the shape the writers need (console
// table, JSON, CSV, HTML). Built by Benchmark::Run on the main thread, then read-only.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_REPORT_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/chronobench/bench_options.h"
#include "client/chronobench/trial_runner.h"
#include "nlohmann/json.hpp"

namespace chronoserve::client::bench {

// The sweep point that failed, ending the sweep early (the points before it are kept).
struct FailedPoint {
  std::string label;    // PointSpec::Label()
  std::string message;  // the failure's message
  // The point itself: the CSV's row gives its load and batch size (unset: only the sweep's mode).
  std::optional<PointSpec> spec;
  // The failure's kind, as absl names it ("DEADLINE_EXCEEDED": a server that stopped answering, or
  // a point that measured nothing with requests left unanswered; "UNAVAILABLE": every request
  // refused...). Empty: not known.
  std::string code;
  // What the point's workers left when it ended (PointResult's fields of the same names); unset when
  // it failed before any load ran.
  std::optional<int64_t> unanswered_at_end;
  std::optional<int64_t> unsent_at_end;
};

struct BenchReport {
  std::string url;
  std::string model;
  nlohmann::json server;      // ServerMetadata: name, version, extensions
  nlohmann::json model_info;  // ModelMetadata + the shapes sent
  std::vector<double> percentiles;
  LoadMode mode = LoadMode::kConcurrency;
  Distribution distribution = Distribution::kConstant;
  bool batch_sweep = false;
  std::vector<PointResult> points;
  // Batch sweep: the point after which items/s rises by no more than 5%; nullopt if it kept rising.
  std::optional<size_t> saturation_index;
  int64_t started_unix_ms = 0;
  std::optional<FailedPoint> failed_point;  // set: the sweep stopped there; `points` are those before
};

// The first index i whose next step raises items/s by no more than min_gain (items_per_s[i + 1] -
// items_per_s[i] <= items_per_s[i] * min_gain): past it, more batching stopped paying. nullopt when
// throughput rose by more than min_gain at every step.
std::optional<size_t> SaturationIndex(const std::vector<double>& items_per_s, double min_gain = 0.05);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_REPORT_H_
