#include "client/chronobench/bench_flags.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "client/chronobench/request_factory.h"
#include "client/cuda_shared_memory.h"
#include "common/cli_integer.h"
#include "common/shape_flag.h"
#include "common/status_macros.h"

namespace chronoserve::client::bench {
namespace {

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kMaxItems = 1 << 30;          // samples per request
constexpr int64_t kMaxCount = 1'000'000'000'000;  // requests

}  // namespace

void AddBenchFlags(CLI::App* app, RawFlags* raw) {
  BenchOptions& o = raw->options;
  app->add_option("-m,--model", o.target.model, "Model name")->required();
  app->add_option("-x,--model-version", o.target.model_version, "Model version (default: the server's choice)");
  app->add_option("-u,--url", o.target.url, "Server HOST:PORT, or unix:PATH for a server started with --grpc-unix-socket PATH")->capture_default_str();
  app->add_option("--connections", o.target.connections, "Distinct gRPC channels (TCP connections) to spread requests over")
      ->capture_default_str()
      ->transform(IntegerIn(1, 1024));
  app->add_flag("--connection-affinity,!--no-connection-affinity", o.target.connection_affinity,
               "On by default: each worker thread sends on connections of its own (of W threads in use, thread t "
               "on t, t + W, ...; with fewer connections N than W, each thread on connection t mod N, shared); "
               "--no-connection-affinity: every thread round-robin over every connection");
  app->add_flag("--streaming", o.target.streaming,
               "Send requests on bidirectional ModelStreamInfer streams (one per worker thread and connection it sends on) "
               "instead of one unary call each");
  app->add_option("--timeout-ms", o.target.timeout_ms, "Per-request deadline in ms (0 = none)")
      ->capture_default_str()
      ->transform(IntegerIn(0, kDayMs));
  // A range's value through each(): `raw` records that the flag was given, an empty value included.
  auto range = [](std::optional<std::string>* field) {
    return [field](const std::string& value) { *field = value; };
  };
  app->add_option_function<std::string>("--concurrency-range", range(&raw->concurrency_range),
                                        "Closed loop: START:END:STEP requests in flight (default 1)");
  app->add_option_function<std::string>("--request-rate-range", range(&raw->request_rate_range),
                                        "Open loop: START:END:STEP requests/s, timed from each request's intended "
                                        "send time");
  app->add_option("--request-distribution", raw->request_distribution, "Open-loop send times: constant|poisson")
      ->capture_default_str();
  app->add_option_function<std::string>("--idle-gap-range", range(&raw->idle_gap_range),
                                        "Interval mode: START:END:STEP ms of idle time before each request (one "
                                        "at a time)");
  app->add_option("-b,--batch-size", raw->batch_size, "Samples per request (not with --batch-range)")
      ->capture_default_str()
      ->transform(IntegerIn(1, kMaxItems))
      ->each([raw](const std::string&) { raw->batch_size_given = true; });
  app->add_option_function<std::string>("--batch-range", range(&raw->batch_range),
                                        "Batch sweep: START:END:STEP samples per request");
  app->add_option("--threads", o.load.threads, "Client worker threads (0 = min(cores, 8))")
      ->capture_default_str()
      ->transform(IntegerIn(0, 1024));
  app->add_option("--max-send-poll-us", o.load.max_send_poll_us,
                  "Open loop and idle gap: the most a worker polls before a send time, after its waker's alarm "
                  "(the lead follows how late recent alarms came, from 20 us up to this); the polls take up to "
                  "this many us of CPU per send. 0 = never poll: sends are as late as the "
                  "alarm (schedule_lag shows it)")
      ->capture_default_str()
      ->transform(IntegerIn(0, 100000));
  app->add_option("--seed", o.load.seed, "Seed for random inputs, Poisson gaps and trace ids")
      ->capture_default_str()
      ->transform(IntegerIn(0, std::numeric_limits<int64_t>::max()));
  app->add_option("-p,--measurement-interval", o.measurement.interval_ms, "Window (trial) length in ms")
      ->capture_default_str()
      ->transform(IntegerIn(1, kDayMs));
  app->add_option("--measurement-request-count", o.measurement.window_min_requests,
                  "A window also lasts until this many requests finished")
      ->capture_default_str()
      ->transform(IntegerIn(0, kMaxCount));
  app->add_option("--warmup-requests", o.measurement.warmup_requests, "Requests discarded before each point")
      ->capture_default_str()
      ->transform(IntegerIn(0, kMaxCount));
  app->add_option("-s,--stability-percentage", o.measurement.stability_percentage,
                  "Last 3 windows must agree within this % (throughput and p50)")->capture_default_str();
  app->add_option("-r,--max-trials", o.measurement.max_trials, "Windows per point before giving up on stability (at least 3 for a point to be judged stable: "
                  "stability compares the last 3 windows)")
      ->capture_default_str()
      ->transform(IntegerIn(1, 1000000));
  app->add_option("--percentiles", raw->percentiles, "Percentiles to report")->capture_default_str();
  app->add_option("--shape", raw->shapes,
                  "NAME:d1,d2,...: an input's whole shape without the batch dim (dims the model fixes must "
                  "match; its -1 dims take these values); once per input");
  app->add_option("--input-data", o.input.input_data,
                  "random, or a JSON file {\"INPUT\": [one sample's values...]}")->capture_default_str();
  app->add_option("--shared-memory", raw->shared_memory,
                  "none, system (tensors through POSIX shared memory registered with the server) or cuda "
                  "(through this process's GPU memory, which the server opens by its CUDA IPC handle; builds "
                  "with CUDA only). Local servers only; the copies in and out are inside the timed interval")
      ->capture_default_str();
  app->add_option("--shared-memory-device", o.shared_memory.cuda_device,
                  "--shared-memory cuda: the GPU the regions are allocated on")
      ->capture_default_str()
      ->transform(IntegerIn(0, 1023));
  app->add_flag("--shared-memory-preload", o.shared_memory.preload,
                "With --shared-memory: write each region's inputs once, when it is made, and leave the outputs in "
                "it: no copies in or out per request, so e2e is what a client whose tensors already live in the "
                "regions sees (the outputs are not read back)");
  app->add_option("--output-shared-memory-size", o.shared_memory.output_byte_size,
                  "Bytes of shared memory per output tensor (default: from the model's output shapes and the "
                  "batch size; needed for variable-shaped outputs)")
      ->transform(IntegerIn(0, int64_t{1} << 40));
  // An empty path would write nothing, in silence.
  const CLI::Validator path_given(
      [](std::string& path) { return path.empty() ? std::string("a file path is needed") : std::string(); }, "");
  app->add_option("--json", o.output.json_path, "Write the report as JSON")->check(path_given);
  app->add_option("--csv", o.output.csv_path, "Write one CSV row per measured sweep point (status ok), then, when a "
                  "point failed and stopped the sweep, one row for it (status failed, no figures)")
      ->check(path_given);
  app->add_option("--html", o.output.html_path, "Write a self-contained HTML report with charts")->check(path_given);
  app->add_option("--traceparent-rate", o.trace.traceparent_rate,
                  "Fraction of requests sent with a W3C traceparent (0..1)")->capture_default_str();
  app->add_option("--otlp-endpoint", o.trace.otlp_endpoint, "OTLP/gRPC HOST:PORT: export a CLIENT span per traced request (parent of the server's span)");
  app->add_option("--trace-file", o.trace.trace_file,
                  "Append a CLIENT span per traced request to this file as OTLP/JSON lines, instead of sending "
                  "them to --otlp-endpoint (not with it)")
      ->check(path_given);
}

absl::StatusOr<BenchOptions> ResolveFlags(const RawFlags& raw) {
  BenchOptions o = raw.options;
  const int modes = raw.concurrency_range.has_value() + raw.request_rate_range.has_value() + raw.idle_gap_range.has_value();
  if (modes > 1) {
    return absl::InvalidArgumentError(
        "give one of --concurrency-range, --request-rate-range, --idle-gap-range");
  }
  if (raw.request_rate_range.has_value()) {
    o.load.mode = LoadMode::kRate;
    ASSIGN_OR_RETURN(o.load.rates, ParseRange("request-rate-range", *raw.request_rate_range));
  } else if (raw.idle_gap_range.has_value()) {
    o.load.mode = LoadMode::kIdleGap;
    ASSIGN_OR_RETURN(o.load.idle_gaps_ms, ParseRange("idle-gap-range", *raw.idle_gap_range));
  } else if (raw.concurrency_range.has_value()) {
    ASSIGN_OR_RETURN(o.load.concurrency, ParseIntRange("concurrency-range", *raw.concurrency_range));
  }
  if (raw.request_distribution == "constant") {
    o.load.distribution = Distribution::kConstant;
  } else if (raw.request_distribution == "poisson") {
    o.load.distribution = Distribution::kPoisson;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--request-distribution '", raw.request_distribution,
                                                   "': expected constant or poisson"));
  }
  if (o.load.distribution == Distribution::kPoisson && o.load.mode != LoadMode::kRate) {
    return absl::InvalidArgumentError(
        "--request-distribution poisson: only open loop (--request-rate-range) has send times to draw; closed "
        "loop sends on each completion and --idle-gap-range after its gap");
  }
  if (raw.batch_size < 1) return absl::InvalidArgumentError("-b/--batch-size must be >= 1");
  if (raw.batch_size_given && raw.batch_range.has_value()) {
    return absl::InvalidArgumentError("give -b/--batch-size or --batch-range, not both");
  }
  o.load.batch_sizes = {raw.batch_size};
  if (raw.batch_range.has_value()) {
    ASSIGN_OR_RETURN(o.load.batch_sizes, ParseIntRange("batch-range", *raw.batch_range, kMaxItems));
    o.load.batch_sweep = true;
  }
  if (raw.shared_memory == "none") {
    o.shared_memory.kind = SharedMemoryKind::kNone;
  } else if (raw.shared_memory == "system") {
    o.shared_memory.kind = SharedMemoryKind::kSystem;
  } else if (raw.shared_memory == "cuda") {
    if (!CudaSharedMemory::Available()) {
      return absl::FailedPreconditionError(
          "--shared-memory cuda: this chronobench was built without CUDA (against a LibTorch without it); use "
          "--shared-memory system, or build on a machine whose LibTorch has CUDA");
    }
    o.shared_memory.kind = SharedMemoryKind::kCuda;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--shared-memory '", raw.shared_memory,
                                                   "': expected none, system or cuda"));
  }
  if (o.input.input_data != "random") {
    ASSIGN_OR_RETURN(o.input.input_document, ReadInputDataFile(o.input.input_data));
  }
  ASSIGN_OR_RETURN(o.measurement.percentiles, ParsePercentiles(raw.percentiles));
  for (const auto& s : raw.shapes) RETURN_IF_ERROR(ParseShapeFlag(s, &o.input.shapes));
  RETURN_IF_ERROR(ValidateOptions(o));
  return o;
}

absl::StatusOr<BenchOptions> ParseBenchFlags(const std::vector<std::string>& args) {
  CLI::App app{"chronobench"};
  RawFlags raw;
  AddBenchFlags(&app, &raw);
  // CLI11 takes the arguments without argv[0], in reverse order.
  std::vector<std::string> reversed(args.rbegin(), args.rend() - (args.empty() ? 0 : 1));
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return absl::CancelledError(app.help());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return ResolveFlags(raw);
}

}  // namespace chronoserve::client::bench
