// Command-line flags of chronobench (perf_analyzer / ghz style) and their translation into
// BenchOptions. Used by main's thread only.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_FLAGS_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "client/chronobench/bench_options.h"

namespace chronoserve::client::bench {

// The flags as typed, before range / shape parsing.
struct RawFlags {
  BenchOptions options;  // plain-valued flags land here directly
  // The ranges as typed; a range is given when its flag was on the command line, even with an empty
  // value (a script's unset variable), which its parse then refuses.
  std::optional<std::string> concurrency_range;
  std::optional<std::string> request_rate_range;
  std::string request_distribution = "constant";
  std::optional<std::string> idle_gap_range;
  int64_t batch_size = 1;
  bool batch_size_given = false;  // -b was on the command line (it may not go with --batch-range)
  std::optional<std::string> batch_range;
  std::string percentiles = "50,90,95,99,99.9";
  std::vector<std::string> shapes;
  std::string shared_memory = "none";
};

// Registers every flag on `app`, writing into `raw`.
void AddBenchFlags(CLI::App* app, RawFlags* raw);

// Parses the range / shape / percentile syntaxes and picks the load mode; INVALID_ARGUMENT with
// the flag's name on bad input.
absl::StatusOr<BenchOptions> ResolveFlags(const RawFlags& raw);

// Parses argv (argv[0] first; for tests); --help is reported as CANCELLED with the help text.
absl::StatusOr<BenchOptions> ParseBenchFlags(const std::vector<std::string>& args);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_FLAGS_H_
