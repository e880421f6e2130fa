#include "server/server_flags.h"

#include <arpa/inet.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "common/cli_integer.h"
#include "server/grpc/log_settings_rpc.h"

namespace chronoserve::server {
namespace {

// --input-arena-store's words: auto, then each ArenaStore.
std::vector<std::string> ArenaStoreChoices() {
  std::vector<std::string> choices = {"auto"};
  for (std::string& name : ArenaStoreNames()) choices.push_back(std::move(name));
  return choices;
}

// --grpc-infer-threads: auto, or 0-64 parsed as it is used (base 10, no hex or octal).
std::string CheckInferThreads(const std::string& value) {
  int threads = 0;
  if (value == "auto" || (absl::SimpleAtoi(value, &threads) && threads >= 0 && threads <= 64)) return "";
  return "expected auto or a decimal number of threads from 0 to 64, got '" + value + "'";
}

// --input-arena-mib as a number of MiB from 0 to 65536 (std::stoll's syntax, nothing after it);
// nullopt for auto or anything else.
std::optional<int64_t> ArenaMib(const std::string& value) {
  try {
    size_t used = 0;
    const long long mib = std::stoll(value, &used);
    if (used == value.size() && mib >= 0 && mib <= 65536) return mib;
  } catch (...) {
  }
  return std::nullopt;
}

std::string CheckArenaMib(const std::string& value) {
  if (value == "auto" || ArenaMib(value).has_value()) return "";
  return "must be auto or a whole number of MiB from 0 to 65536, got '" + value + "'";
}

// An IPv6 address, with or without a zone (fe80::1%eth0).
bool IsIpv6Address(const std::string& text) {
  const std::string address_part = text.substr(0, text.find('%'));
  in6_addr address{};
  return inet_pton(AF_INET6, address_part.c_str(), &address) == 1;
}

// --host as the server binds it: an IPv4 address, a host name, or an IPv6 address with or without
// its brackets (stored without: the listeners add them). Anything else, a port above all (that is
// --grpc-port), fails here instead of as a listening port that cannot be opened.
absl::StatusOr<std::string> ListeningHost(const std::string& value) {
  std::string host = value;
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  const bool has_colon = host.find(':') != std::string::npos;
  const bool ipv6 = has_colon && IsIpv6Address(host);
  const bool name_chars = !host.empty() && host.find_first_of("[]/ \t") == std::string::npos;
  if (ipv6 || (!bracketed && !has_colon && name_chars)) return host;
  return absl::InvalidArgumentError(
      "--host: expected an IPv4 address, a host name or an IPv6 address (brackets optional), got '" + value +
      "'" + (has_colon && !ipv6 ? "; the port is --grpc-port" : ""));
}

void AddServingFlags(CLI::App* app, RawServerFlags* raw) {
  ServerOptions& options = raw->options;
  app->add_option("--model-repository", options.model_repository,
                  "Model repository in Triton's layout: DIR/<model>/config.pbtxt and DIR/<model>/<version>/model.pt")
      ->required();
  app->add_option("--model-control-mode", raw->model_control_mode,
                  "none: every model of the repository is loaded at start, and RepositoryModelLoad / Unload are "
                  "refused; explicit: only the --load-model models are loaded at start, then RepositoryModelLoad "
                  "loads or reloads a model (the loaded version serving until the new one is READY) and "
                  "RepositoryModelUnload unloads one (its queued requests run first); poll: every model is loaded "
                  "at start, then the repository is scanned every --repository-poll-secs: a model directory added "
                  "is loaded, one whose files changed reloaded, one removed unloaded")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "explicit", "poll"}));
  app->add_option("--model-load-thread-count", options.model_load_threads,
                  "Models loaded at once: at start (every mode), and under --model-control-mode explicit or poll the "
                  "loads and unloads of different models that may run at once (one model's run one after another, in "
                  "the order asked; one more thread only unloads, so an unload does not wait for slow loads of other "
                  "models)")
      ->capture_default_str()
      ->transform(IntegerIn(1, 64));
  app->add_option("--repository-poll-secs", raw->repository_poll_secs,
                  "With --model-control-mode poll: seconds between two scans of the repository")
      ->capture_default_str()
      ->transform(IntegerIn(1, 86400))
      ->each([raw](const std::string&) { raw->repository_poll_secs_given = true; });
  app->add_option("--load-model", options.load_models,
                  "With --model-control-mode explicit: a model to load at start (repeatable); '*' alone loads "
                  "every model of the repository");
  app->add_option("--grpc-port", options.grpc_port, "gRPC port (KServe v2, health, reflection); 0 picks a free one")
      ->capture_default_str()
      ->transform(IntegerIn(0, 65535));
  app->add_option("--host", options.host, "Address to listen on")->capture_default_str();
  app->add_option("--grpc-unix-socket", options.unix_socket,
                  "Also listen on this Unix domain socket path (clients on the same host dial unix:PATH); "
                  "removed at shutdown");
  app->add_option("--grpc-infer-threads", raw->infer_threads,
                  "Every KServe and health RPC (inference, readiness, metadata, statistics, shared memory) is "
                  "served by this many threads on completion queues of gRPC's asynchronous API of their own "
                  "(--grpc-threads-per-queue of them a queue); 0 serves them on gRPC's callback API (one completion queue shared by "
                  "all its threads) with gRPC's own health service. auto = half of the CPUs, 1 to 8 "
                  "[auto or 0 - 64]")
      ->capture_default_str()
      ->check(CheckInferThreads);
  app->add_option("--grpc-threads-per-queue", options.grpc_threads_per_queue,
                  "How many of --grpc-infer-threads poll each completion queue (the queues are the threads / "
                  "this, rounded up). 2 lets one busy stream's reads and writes proceed at once; 1 gives twice the "
                  "queues (docs/GPU_PERFORMANCE.md: more requests a second at high concurrency, slower at "
                  "concurrency 1, in one machine's runs)")
      ->capture_default_str()
      ->transform(IntegerIn(1, ModelInferQueues::kMaxThreadsPerQueue));
  app->add_option("--grpc-minimal-stack", options.grpc_minimal_stack,
                  "gRPC's minimal channel stack on the server: no compression or deadline filter on any call "
                  "(1-7 % more unary requests a second at concurrency 256 in our runs); compressed requests are "
                  "then refused with UNIMPLEMENTED, and a call past its deadline ends when its client cancels it")
      ->capture_default_str();
  app->add_option("--grpc-max-request-bytes", options.grpc_max_request_bytes,
                  "Largest request message accepted, in bytes (inference and model-control calls alike); larger "
                  "ones are refused with RESOURCE_EXHAUSTED before they are handled. 0: no limit but protobuf's 2 GiB "
                  "(as Triton)")
      ->capture_default_str()
      ->transform(IntegerIn(0, std::numeric_limits<int32_t>::max()));
  app->add_option("--log-verbose", raw->log_verbose, "Verbose logging level (0 = off)")
      ->capture_default_str()
      ->transform(IntegerIn(0, kMaxLogVerbosity));
  app->add_option("--log-info", raw->log_info, "Log INFO messages")->capture_default_str();
  app->add_option("--log-warning", raw->log_warning, "Log WARNING messages")->capture_default_str();
  app->add_option("--log-error", raw->log_error, "Log ERROR messages")->capture_default_str();
  app->add_option("--log-format", raw->log_format,
                  "Log line format: default (I1205 02:48:39.123456 file:line]) or ISO8601 "
                  "(2026-12-05T02:48:39Z I PID file:line]); LogSettings can change it and the levels while the server runs")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "ISO8601"}));
  app->add_option("--exit-timeout-secs", options.exit_timeout_secs,
                  "On SIGTERM/SIGINT, how long in-flight requests may take to finish")
      ->capture_default_str()
      ->transform(IntegerIn(0, 86400));
  app->add_option("--allow-shared-memory", options.allow_shared_memory,
                  "Serve Triton's system shared-memory extension and, on a GPU server, its CUDA shared-memory "
                  "extension (local, trusted clients only: the server maps any POSIX shared-memory object a "
                  "client names; warned about when --host is not a loopback address)")
      ->capture_default_str();
  app->add_option("--warmup-runs", options.warmup.runs_per_batch_size,
                  "Warm-up runs per worker and batch size before a model reports READY")
      ->capture_default_str()
      ->transform(IntegerIn(1, 1000000));
  app->add_option("--serving-warmup-requests", options.serving_warmup_requests,
                  "Before READY, requests per model and batch size (1, max) sent through the server's own "
                  "gRPC port, plus a stream of as many, so a client's first request finds the serving path "
                  "warm; counted in no statistics. 0 = off")
      ->capture_default_str()
      ->transform(IntegerIn(0, 1000000));
  app->add_option("--request-timing", raw->request_timing,
                  "Per-request timing: off = no CUDA span events or launch timer, no timing.* response "
                  "parameters and no server-timing trailer; statistics keep counts, queue and total")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
}

void AddHostFlags(CLI::App* app, RawServerFlags* raw) {
  app->add_option("--host-policy", raw->host_policies,
                  "NAME,SETTING=VALUE[,...] (repeatable; Triton's form) for the workers of every instance "
                  "group whose host_policy is NAME, or by default those on GPU <id> for NAME gpu_<id> and on "
                  "the CPU for NAME cpu. cpu-cores=CPULIST pins them to those CPUs (e.g. gpu_0,cpu-cores=15), "
                  "so the thread feeding a GPU keeps a core of its own; nice=N (-20..19; below the server's own "
                  "value needs root or CAP_SYS_NICE) gives those threads that nice value, so other threads rarely preempt them "
                  "(e.g. gpu_0,nice=-10)");
  app->add_option("--host-keep-warm-ms", raw->options.host_keep_warm_ms,
                  "While a request arrived within this many ms, one thread per CPU the server may run on "
                  "spins at SCHED_IDLE priority so no CPU halts between requests (a halted CPU is slow to wake, "
                  "above all on a VM; any real thread preempts the spinner at once). Those CPUs show as busy. "
                  "0 = off")
      ->capture_default_str()
      ->transform(IntegerIn(0, 86400000));
  app->add_option("--input-arena-mib", raw->input_arena,
                  "Per model input, MiB of host memory (page-locked for a GPU) into which the thread that "
                  "received a request copies its inputs, so a batch's requests lie back to back and reach the "
                  "device in one copy with no gather on the worker. auto = room for 8 largest batches (4-64 MiB; "
                  "16 MiB with variable dims); 0 = off [auto or 0 - 65536]")
      ->capture_default_str()
      ->check(CheckArenaMib);
  app->add_option("--input-arena-store", raw->input_arena_store,
                  "How the receiving thread writes a request's inputs into the arena: cached (memcpy; the bytes "
                  "stay in its core's cache), streaming (non-temporal stores straight to memory), evicted "
                  "(memcpy, then each line flushed), adaptive (cached, but streaming for the first write after "
                  "the arena sat unwritten 5 ms or more). A GPU reads a page-locked arena by DMA: on an H100 "
                  "streaming made the served copy faster (p50 and far more p99) but the write slower by about "
                  "as much, so it pays for p99 and after idle spells, not back to back "
                  "(docs/GPU_PERFORMANCE.md). auto = cached [auto, cached, streaming, evicted, adaptive]")
      ->capture_default_str()
      ->check(CLI::IsMember(ArenaStoreChoices()));
  app->add_option("--max-queue-mib", raw->max_queue_mib,
                  "Per model, MiB of input bytes its queued requests may hold (tensors in client shared memory "
                  "not counted); a request that would pass it is answered RESOURCE_EXHAUSTED naming the model "
                  "and the limit, one whose inputs alone pass it INVALID_ARGUMENT. 0 = unbounded")
      ->capture_default_str()
      ->transform(IntegerIn(0, int64_t{1} << 30));
  app->add_option("--max-stream-unsent-mib", raw->max_stream_unsent_mib,
                  "Per ModelStreamInfer stream, MiB of outputs its answers may hold before they are written "
                  "(answered and waiting, plus in flight at the size the model's output shapes give, or with "
                  "variable output dims at the model's largest answer on the stream so far); at it the stream "
                  "stops reading until the client reads its answers, so a client that sends without reading "
                  "cannot grow the server's memory by much more than this. 0 = unbounded")
      ->capture_default_str()
      ->transform(IntegerIn(0, int64_t{1} << 30));
}

void AddTelemetryFlags(CLI::App* app, RawServerFlags* raw) {
  app->add_option("--otlp-endpoint", raw->otlp_endpoint,
                  "OTLP/gRPC trace collector HOST:PORT (else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then "
                  "OTEL_EXPORTER_OTLP_ENDPOINT; none: no tracing)");
  app->add_option("--trace-file", raw->trace_file,
                  "Append every span to this file as OTLP/JSON lines (one ExportTraceServiceRequest a line, "
                  "readable offline and by the OpenTelemetry collector's otlpjsonfile receiver), instead of "
                  "sending them to a collector; not with --otlp-endpoint")
      ->check(CLI::Validator(
          [](std::string& path) { return path.empty() ? std::string("a file path is needed") : std::string(); }, ""));
  app->add_option("--trace-file-dir", raw->telemetry.trace_file_dir,
                  "Let TraceSetting's trace_file name a file (a plain name, no '/') in this directory, created "
                  "there as a regular file: the way to start tracing, or move the spans to a new file, at run "
                  "time. Without it trace_file is read only (a path a client named could be any file on the "
                  "server's disk)")
      ->check(CLI::ExistingDirectory);
  app->add_option("--metrics-port", raw->telemetry.metrics.port, "Prometheus /metrics port (on --host); 0 picks a free one")
      ->capture_default_str()
      ->transform(IntegerIn(0, 65535));
  app->add_option("--allow-metrics", raw->telemetry.metrics.enabled, "Serve Prometheus metrics")->capture_default_str();
  app->add_option("--gpu-monitor-interval-ms", raw->gpu_monitor_interval_ms,
                  "NVML sampling period for GPU gauges and each batch's sm_clock_mhz; 0 disables")
      ->capture_default_str()
      ->transform(IntegerIn(0, 3600000));
}

}  // namespace

void AddServerFlags(CLI::App* app, RawServerFlags* raw) {
  AddServingFlags(app, raw);
  AddHostFlags(app, raw);
  AddTelemetryFlags(app, raw);
}

absl::StatusOr<ServerFlags> ResolveServerFlags(RawServerFlags raw, const otlp::EnvLookup& env) {
  ServerFlags flags;
  flags.log_verbose = raw.log_verbose;
  flags.log_info = raw.log_info;
  flags.log_warning = raw.log_warning;
  flags.log_error = raw.log_error;
  ParseLogFormat(raw.log_format, &flags.log_format);  // checked at parse
  flags.options = std::move(raw.options);
  ServerOptions& options = flags.options;
  absl::StatusOr<std::string> host = ListeningHost(options.host);
  if (!host.ok()) return host.status();
  options.host = *std::move(host);
  options.request_timing = raw.request_timing == "on";
  options.model_control_mode = raw.model_control_mode == "explicit" ? ModelControlMode::kExplicit
                                : raw.model_control_mode == "poll"   ? ModelControlMode::kPoll
                                                                     : ModelControlMode::kNone;  // checked at parse
  options.repository_poll_interval = absl::Seconds(raw.repository_poll_secs);
  // As --load-model outside explicit mode (Server::Create): a flag that would do nothing is refused.
  if (raw.repository_poll_secs_given && options.model_control_mode != ModelControlMode::kPoll) {
    return absl::InvalidArgumentError("--repository-poll-secs needs --model-control-mode poll");
  }
  const std::optional<int64_t> arena_mib = ArenaMib(raw.input_arena);  // checked at parse: else auto
  options.input_arena_bytes = arena_mib.has_value() ? *arena_mib << 20 : -1;
  ArenaStore store = ArenaStore::kCached;
  if (ParseArenaStore(raw.input_arena_store, &store)) options.input_arena_store = store;  // else auto
  options.max_queue_bytes = raw.max_queue_mib << 20;
  options.max_stream_unsent_bytes = raw.max_stream_unsent_mib << 20;
  int threads = 0;
  options.grpc_infer_threads = absl::SimpleAtoi(raw.infer_threads, &threads) ? threads : kAutoInferThreads;
  absl::StatusOr<HostPolicies> policies = ParseHostPolicies(raw.host_policies);
  if (!policies.ok()) return policies.status();
  options.host_policies = *std::move(policies);

  absl::StatusOr<otlp::TracingConfig> tracing =
      otlp::ResolveTracingConfig(raw.otlp_endpoint, kChronoserveVersion, env, "chronoserve", raw.trace_file);
  if (!tracing.ok()) return tracing.status();
  flags.telemetry = std::move(raw.telemetry);
  flags.telemetry.tracing = *std::move(tracing);
  flags.telemetry.metrics.host = options.host;
  flags.telemetry.gpu.enabled = raw.gpu_monitor_interval_ms > 0;
  flags.telemetry.gpu.period = absl::Milliseconds(std::max(raw.gpu_monitor_interval_ms, 1));
  return flags;
}

void ApplyLogFlags(const ServerFlags& flags) {
  SetLogVerbosity(flags.log_verbose);
  SetLogLevelEnabled(LogLevel::kInfo, flags.log_info);
  SetLogLevelEnabled(LogLevel::kWarning, flags.log_warning);
  SetLogLevelEnabled(LogLevel::kError, flags.log_error);
  SetLogFormat(flags.log_format);
}

}  // namespace chronoserve::server
