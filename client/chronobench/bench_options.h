// BenchOptions: what one chronobench invocation measures, grouped per concern (target, load,
// measurement, inputs, outputs, tracing), plus the parsers for the range / shape / percentile flag
// syntaxes. Plain values: built once by ParseBenchFlags on the main thread, then read-only.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_OPTIONS_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_OPTIONS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace chronoserve::client::bench {

// How load is offered at one sweep point.
enum class LoadMode {
  kConcurrency,  // closed loop: N requests always in flight
  kRate,         // open loop: requests sent at scheduled times, whatever the responses do
  kIdleGap,      // one request at a time, each after an idle gap
};
enum class Distribution { kConstant, kPoisson };

const char* LoadModeName(LoadMode mode);  // "concurrency", "rate", "idle_gap"

struct TargetOptions {
  std::string url = "localhost:8001";
  std::string model;
  std::string model_version;
  int connections = 1;       // distinct gRPC channels (each its own TCP connection)
  bool streaming = false;    // ModelStreamInfer: one bidi stream per worker and channel it uses (--streaming)
  // --connection-affinity (default) / --no-connection-affinity: each worker sends on its own channels
  // only, or round-robin over all (load_worker.h, ChannelForSend). With threads sharing every
  // connection, gRPC 1.51's executor threads took about 2 cores of chronobench's CPU
  // (docs/CHRONOBENCH.md).
  bool connection_affinity = true;
  int64_t timeout_ms = 60'000;  // per-request deadline; 0 = none
};

struct LoadOptions {
  LoadMode mode = LoadMode::kConcurrency;
  std::vector<int64_t> concurrency = {1};
  std::vector<double> rates;          // requests/s (open loop)
  Distribution distribution = Distribution::kConstant;
  std::vector<double> idle_gaps_ms;
  std::vector<int64_t> batch_sizes = {1};
  bool batch_sweep = false;           // --batch-range given: one point per batch size
  int threads = 0;                    // worker threads; 0 = min(hardware threads, 8)
  uint64_t seed = 1;
  // --max-send-poll-us: the most a worker polls its queue before a send time (open loop, idle gap):
  // the SendWaker's lead is kept at or below it. 0 = never poll (sends as late as the wake).
  int64_t max_send_poll_us = 100;
};

struct MeasurementOptions {
  int64_t interval_ms = 5000;         // one window (trial)
  int64_t window_min_requests = 0;    // a window also waits for this many completions
  int64_t warmup_requests = 20;       // per sweep point, discarded
  double stability_percentage = 10;   // last 3 windows within this % in throughput and p50
  int max_trials = 10;
  std::vector<double> percentiles = {50, 90, 95, 99, 99.9};
};

struct InputOptions {
  std::map<std::string, std::vector<int64_t>> shapes;  // --shape NAME:d1,d2 (without batch dim)
  std::string input_data = "random";                   // "random" or a JSON file
  // input_data's file as ParseBenchFlags parsed it (read once); null: RequestFactory reads the file.
  std::shared_ptr<const nlohmann::json> input_document;
};

struct OutputOptions {
  std::string json_path;
  std::string csv_path;
  std::string html_path;
  bool progress = false;  // a progress line (only when stderr is a terminal)
};

// How tensors travel (perf_analyzer's --shared-memory / --output-shared-memory-size).
// kSystem: POSIX shared memory; kCuda: this process's GPU memory, by CUDA IPC handle (builds with
// CUDA only). Either way one region pair per in-flight slot.
enum class SharedMemoryKind { kNone, kSystem, kCuda };
struct SharedMemoryOptions {
  SharedMemoryKind kind = SharedMemoryKind::kNone;
  int cuda_device = 0;           // kCuda: the GPU the regions are allocated on
  // Each slot's inputs written once, when it is made, and outputs left in its region: no copies per
  // request, so e2e is what a client whose tensors already live in the regions sees.
  bool preload = false;
  int64_t output_byte_size = 0;  // per output tensor; 0 = from the model's output shapes x batch size
};

struct TraceOptions {
  double traceparent_rate = 0;  // fraction of requests that carry a W3C traceparent
  std::string otlp_endpoint;    // OTLP/gRPC HOST:PORT for client spans of traced requests; "" = none
  std::string trace_file;       // or a file they are appended to as OTLP/JSON lines; "" = none
};

struct BenchOptions {
  TargetOptions target;
  LoadOptions load;
  MeasurementOptions measurement;
  InputOptions input;
  OutputOptions output;
  TraceOptions trace;
  SharedMemoryOptions shared_memory;
};

// "START", "START:END" (step 1) or "START:END:STEP"; INVALID_ARGUMENT names the flag on errors.
absl::StatusOr<std::vector<double>> ParseRange(absl::string_view flag, absl::string_view text);
// As ParseRange, each value an integer from 1 to `max` (at most 2^31 - 1, the default).
absl::StatusOr<std::vector<int64_t>> ParseIntRange(absl::string_view flag, absl::string_view text,
                                                   int64_t max = std::numeric_limits<int32_t>::max());
// "50,90,99.9": each in (0, 100].
absl::StatusOr<std::vector<double>> ParsePercentiles(absl::string_view text);
// "p50", "p99_9": the JSON key of a percentile.
std::string PercentileKey(double percentile);
// `value` with 15 significant digits: every decimal of up to 15 digits reads back as itself and an
// integer prints as one ("1000003", where %g's 6 digits gave "1e+06" for it and for 1000000). For
// rates and idle gaps in labels and CSV fields.
std::string ExactNumber(double value);
// "none", "system" or "cuda": the --shared-memory value, and the word reports use.
const char* SharedMemoryKindName(SharedMemoryKind kind);

// The most bytes a request's input tensors may take together: protobuf serialises no message of
// 2 GiB or more, so a larger request could never be sent.
inline constexpr int64_t kMaxRequestBytes = std::numeric_limits<int32_t>::max();

// The open-loop rates and idle gaps ValidateOptions accepts.
inline constexpr double kMinRatePerS = 1e-3;
inline constexpr double kMaxRatePerS = 1e9;
inline constexpr double kMaxIdleGapMs = 86'400'000;  // a day

// Cross-flag checks (one load mode, batch sweep only in closed loop, rates and idle gaps in range, no
// --shape with more elements than a request can carry, ...).
absl::Status ValidateOptions(const BenchOptions& options);

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_BENCH_OPTIONS_H_
