// chronoserve: flags only; everything else lives in Server.
#include <algorithm>
#include <csignal>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"

#include "common/cli_integer.h"
#include "common/log.h"
#include "common/otlp/tracing_config.h"
#include "server/backend/torch_backend.h"
#include "server/server.h"
#include "server/shutdown_signals.h"
#include "tools/profile/profile_command.h"
#include "server/telemetry/telemetry.h"

int main(int argc, char** argv) {
  // `chronoserve profile MODEL_DIR ...`: the offline profiler (no gRPC), see docs/GPU_PERFORMANCE.md.
  if (argc > 1 && std::string(argv[1]) == "profile") {
    return chronoserve::profile::RunProfileCommand(argc - 1, argv + 1);
  }
  // Debian's abseil is built without NDEBUG, so every absl::Mutex::Lock also feeds the global
  // deadlock-cycle graph (GraphCycles: ~7% of the server's CPU at 8k requests/s in a perf
  // profile). A production server does not pay for a debugging aid; the tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the shutdown signals before any library starts a thread (tracing's gRPC channel does, in
  // Telemetry::Create): threads inherit the mask, so SIGTERM/SIGINT reach only the watcher's
  // sigwait, and one that arrives during model loading or the drain is never the default action on
  // another thread (an immediate exit with nothing drained).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  chronoserve::server::ServerOptions options;
  int log_verbose = 0;
  CLI::App app{"chronoserve: a KServe v2 gRPC inference server for TorchScript models that reports "
               "where every microsecond of a request went. Offline profiling of one model: "
               "`chronoserve profile MODEL_DIR --help`"};
  app.set_version_flag("--version", std::string("chronoserve ") + chronoserve::server::kChronoserveVersion + " with " +
                                        chronoserve::server::TorchBuildDescription());
  app.add_option("--model-repository", options.model_repository,
                 "Model repository in Triton's layout: DIR/<model>/config.pbtxt and DIR/<model>/<version>/model.pt")
      ->required();
  app.add_option("--grpc-port", options.grpc_port, "gRPC port (KServe v2, health, reflection); 0 picks a free one")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 65535));
  app.add_option("--host", options.host, "Address to listen on")->capture_default_str();
  app.add_option("--grpc-unix-socket", options.unix_socket,
                 "Also listen on this Unix domain socket path (clients on the same host dial unix:PATH); "
                 "removed at shutdown");
  std::string infer_threads = "auto";
  app.add_option("--grpc-infer-threads", infer_threads,
                 "ModelInfer and ModelStreamInfer are served by this many threads on completion queues of "
                 "gRPC's asynchronous API of their own (two threads a queue); 0 serves them on gRPC's callback "
                 "API with the other RPCs (one completion queue shared by all its threads). auto = half of "
                 "the CPUs, 1 to 8 [auto or 0 - 64]")
      ->capture_default_str()
      ->check([](const std::string& value) -> std::string {
        int threads = 0;  // parsed as it is used below: base 10, no hex or octal
        if (value == "auto" || (absl::SimpleAtoi(value, &threads) && threads >= 0 && threads <= 64)) return "";
        return "expected auto or a decimal number of threads from 0 to 64, got '" + value + "'";
      });
  app.add_option("--grpc-minimal-stack", options.grpc_minimal_stack,
                 "gRPC's minimal channel stack on the server: no compression or deadline filter on any call "
                 "(1-7 % more unary requests a second at concurrency 256 in our runs); compressed requests are "
                 "then refused with UNIMPLEMENTED, and a call past its deadline ends when its client cancels it")
      ->capture_default_str();
  app.add_option("--log-verbose", log_verbose, "Verbose logging level (0 = off)")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 10));
  app.add_option("--exit-timeout-secs", options.exit_timeout_secs,
                 "On SIGTERM/SIGINT, how long in-flight requests may take to finish")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 86400));
  app.add_option("--allow-shared-memory", options.allow_shared_memory,
                 "Serve Triton's system shared-memory extension (local, trusted clients only: the server "
                 "maps any POSIX shared-memory object a client names)")
      ->capture_default_str();
  app.add_option("--warmup-runs", options.warmup.runs_per_batch_size,
                 "Warm-up runs per worker and batch size before a model reports READY")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(1, 1000000));
  app.add_option("--serving-warmup-requests", options.serving_warmup_requests,
                 "Before READY, requests per model and batch size (1, max) sent through the server's own "
                 "gRPC port, plus a stream of as many, so a client's first request finds the serving path "
                 "warm; counted in no statistics. 0 = off")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 1000000));
  std::string request_timing = "on";
  app.add_option("--request-timing", request_timing,
                 "Per-request timing: off = no CUDA span events or launch timer, no timing.* response "
                 "parameters and no server-timing trailer; statistics keep counts, queue and total")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  std::vector<std::string> host_policies;
  app.add_option("--host-policy", host_policies,
                 "NAME,SETTING=VALUE[,...] (repeatable; Triton's form) for the workers of every instance "
                 "group whose host_policy is NAME, or by default those on GPU <id> for NAME gpu_<id> and on "
                 "the CPU for NAME cpu. cpu-cores=CPULIST pins them to those CPUs (e.g. gpu_0,cpu-cores=15), "
                 "so the thread feeding a GPU keeps a core of its own; nice=N (-20..19, below 0 needs root "
                 "or CAP_SYS_NICE) gives those threads that nice value, so other threads rarely preempt them "
                 "(e.g. gpu_0,nice=-10)");
  app.add_option("--host-keep-warm-ms", options.host_keep_warm_ms,
                 "While a request arrived within this many ms, one thread per CPU the server may run on "
                 "spins at SCHED_IDLE priority so no CPU halts between requests (a halted CPU is slow to wake, "
                 "above all on a VM; any real thread preempts the spinner at once). Those CPUs show as busy. "
                 "0 = off")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 86400000));
  std::string input_arena = "auto";
  app.add_option("--input-arena-mib", input_arena,
                 "Per model input, MiB of host memory (page-locked for a GPU) into which the thread that "
                 "received a request copies its inputs, so a batch's requests lie back to back and reach the "
                 "device in one copy with no gather on the worker. auto = room for 8 largest batches (4-64 MiB; "
                 "16 MiB with variable dims); 0 = off [auto or 0 - 65536]")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        try {
          size_t used = 0;
          const long long mib = std::stoll(v, &used);
          if (used == v.size() && mib >= 0 && mib <= 65536) return "";
        } catch (...) {
        }
        return "must be auto or a whole number of MiB from 0 to 65536";
      });
  uint64_t max_queue_mib = options.max_queue_bytes >> 20;
  app.add_option("--max-queue-mib", max_queue_mib,
                 "Per model, MiB of input bytes its queued requests may hold (tensors in client shared memory "
                 "not counted); a request that would pass it is answered RESOURCE_EXHAUSTED naming the model "
                 "and the limit. 0 = unbounded")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, int64_t{1} << 30));
  namespace telemetry = chronoserve::server::telemetry;
  telemetry::TelemetryOptions telemetry_options;
  std::string otlp_endpoint;
  int gpu_monitor_interval_ms = 100;
  app.add_option("--otlp-endpoint", otlp_endpoint,
                 "OTLP/gRPC trace collector HOST:PORT (else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT; none: no tracing)");
  app.add_option("--metrics-port", telemetry_options.metrics.port,
                 "Prometheus /metrics port (on --host); 0 picks a free one")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 65535));
  app.add_option("--allow-metrics", telemetry_options.metrics.enabled, "Serve Prometheus metrics")
      ->capture_default_str();
  app.add_option("--gpu-monitor-interval-ms", gpu_monitor_interval_ms,
                 "NVML sampling period for GPU gauges and each batch's sm_clock_mhz; 0 disables")
      ->capture_default_str()
      ->transform(chronoserve::IntegerIn(0, 3600000));
  // --help and --version exit 0; a bad flag exits 2, as every other start-up error of a flag does.
  if (std::optional<int> code = chronoserve::ParseFlags(app, argc, argv)) return *code;
  chronoserve::SetLogVerbosity(log_verbose);
  options.request_timing = request_timing == "on";
  options.input_arena_bytes = input_arena == "auto" ? -1 : std::stoll(input_arena) << 20;
  options.max_queue_bytes = max_queue_mib << 20;
  int explicit_threads = 0;
  options.grpc_infer_threads = infer_threads == "auto" || !absl::SimpleAtoi(infer_threads, &explicit_threads)
                                   ? chronoserve::server::kAutoInferThreads
                                   : explicit_threads;
  auto parsed_policies = chronoserve::server::ParseHostPolicies(host_policies);
  if (!parsed_policies.ok()) {
    CS_LOG(ERROR) << parsed_policies.status().message();
    return 2;
  }
  options.host_policies = *std::move(parsed_policies);

  auto tracing = chronoserve::otlp::ResolveTracingConfig(otlp_endpoint, chronoserve::server::kChronoserveVersion,
                                                        chronoserve::otlp::ProcessEnv());
  if (!tracing.ok()) {
    CS_LOG(ERROR) << tracing.status().message();
    return 2;
  }
  telemetry_options.tracing = *std::move(tracing);
  telemetry_options.metrics.host = options.host;
  telemetry_options.gpu.enabled = gpu_monitor_interval_ms > 0;
  telemetry_options.gpu.period = absl::Milliseconds(std::max(gpu_monitor_interval_ms, 1));
  auto telemetry_or = telemetry::Telemetry::Create(std::move(telemetry_options));
  if (!telemetry_or.ok()) {
    CS_LOG(ERROR) << telemetry_or.status().message();
    return 2;
  }
  std::unique_ptr<telemetry::Telemetry> telemetry_owner = *std::move(telemetry_or);
  options.telemetry = telemetry_owner.get();

  auto* shutdown_signals = chronoserve::server::ShutdownSignals::Watch(signals);
  auto server = chronoserve::server::Server::Create(options);
  if (!server.ok()) {
    CS_LOG(ERROR) << server.status().message();
    return 2;
  }
  shutdown_signals->SetServer(server->get());
  if (absl::Status s = (*server)->Start(); !s.ok()) {
    shutdown_signals->SetServer(nullptr);
    CS_LOG(ERROR) << s.message();
    return 1;
  }
  shutdown_signals->WaitForFirst();
  (*server)->Shutdown();
  shutdown_signals->SetServer(nullptr);
  return 0;
}
