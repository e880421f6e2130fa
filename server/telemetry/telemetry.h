// Telemetry: everything the server reports besides responses — OTLP traces (RequestTracer ->
// BatchSpanProcessor -> OtlpGrpcExporter), Prometheus metrics on --metrics-port (ServerMetrics +
// LiveStateCollector behind prometheus-cpp's exposer) and the NVML GPU monitor. Built by main
// from flags and OTEL_* variables and handed to the Server (ServerOptions::telemetry), which calls
// Start before loading models and Shutdown last. It is the service's RequestObserver: OnRequestDone
// runs on worker threads and never blocks.
//
//   auto telemetry = Telemetry::Create(options);   // validates; no threads yet
//   server_options.telemetry = telemetry->get();   // Server: Start() ... Shutdown(deadline)
#ifndef CHRONOSERVE_SERVER_TELEMETRY_TELEMETRY_H_
#define CHRONOSERVE_SERVER_TELEMETRY_TELEMETRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/gpu_clock_source.h"
#include "server/core/request_observer.h"
#include "server/core/trace_settings.h"
#include "server/scheduler/model_registry.h"
#include "common/otlp/tracing_config.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace chronoserve::server::telemetry {

using otlp::BatchSpanProcessor;
using otlp::OtlpGrpcExporter;
using otlp::SpanProcessorStats;
using otlp::TracingConfig;

class GpuMonitor;
class GpuSampler;
class LiveStateCollector;
class RequestTracer;
class TraceControl;
class ServerMetrics;
class SwitchableExporter;

struct MetricsOptions {
  bool enabled = true;
  std::string host = "0.0.0.0";
  int port = 8002;  // 0 picks a free port (tests)
};

struct GpuMonitorOptions {
  bool enabled = true;
  absl::Duration period = absl::Milliseconds(100);
  std::string nvml_library = "libnvidia-ml.so.1";
  // Tests inject a fake; when null, NVML is loaded at Start.
  std::shared_ptr<GpuSampler> sampler_for_test;
};

struct TelemetryOptions {
  TracingConfig tracing;
  MetricsOptions metrics;
  GpuMonitorOptions gpu;
  absl::Duration flush_timeout = absl::Seconds(5);  // how long shutdown may spend exporting spans
  // --trace-file-dir: the directory in which TraceSetting's trace_file may name a file (a plain
  // name; a regular file, no link); "" = clients name no trace file.
  std::string trace_file_dir;
};

// The addresses /metrics tries on `host`, in order: the host itself ("[h]:port" for an IPv6 one),
// then, for the IPv6 wildcard `::` or loopback `::1`, their IPv4 twins (0.0.0.0, 127.0.0.1): the
// CivetWeb that serves /metrics may be built without IPv6, as Debian 12's is.
std::vector<std::string> MetricsListenAddresses(const std::string& host, int port);

class Telemetry final : public RequestObserver {
 public:
  static absl::StatusOr<std::unique_ptr<Telemetry>> Create(TelemetryOptions options);
  ~Telemetry() override;

  // Starts the export thread, the GPU monitor (NVML missing: logged, disabled) and the metrics
  // endpoint (cannot bind: logged error, the server keeps serving). Idempotent.
  absl::Status Start();
  // Stops the monitor and the metrics endpoint, then flushes queued spans (bounded by `deadline`).
  // Idempotent.
  void Shutdown(absl::Time deadline);
  // Shutdown with the configured flush_timeout.
  void Shutdown() { Shutdown(absl::Now() + options_.flush_timeout); }

  std::optional<TraceDecision> DecideTrace(const ModelSpec& spec, const std::string& traceparent) override;
  void OnRequestDone(const ModelSpec& spec, const InferRequest* request, const RequestTiming& timing,
                     const absl::Status& status) override;

  // Queue-depth gauges read this registry at scrape time; it must outlive Shutdown (or be reset).
  void SetModelRegistry(ModelRegistry* registry);
  void RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns, int64_t warmup_ns);
  // The monitor's SM clock for BatchTiming::sm_clock_mhz; null when no GPU monitor runs.
  const GpuClockSource* gpu_clock() const;
  // The chronoserve_inflight_requests gauge reads `source` at scrape time; it must stay callable
  // until Shutdown (or be reset). Counted by the server itself, not by a gRPC interceptor: any
  // server interceptor costs every operation of every call an extra trip through its completion
  // queue (docs/BENCHMARKS.md §33).
  void SetInflightSource(std::function<int64_t()> source);

  int metrics_port() const { return metrics_port_; }  // 0 when not serving
  // The tracing settings in use: `sampler` as resolved (e.g. "parentbased_traceidratio{0.1}"), and
  // the `warnings` Start logs.
  const TracingConfig& tracing() const { return options_.tracing; }
  const BatchSpanProcessor* span_processor() const { return processor_.get(); }
  // Triton's trace settings (the TraceSetting RPC); OFF and fixed without a trace collector.
  TraceSettings* trace_settings();

 private:
  explicit Telemetry(TelemetryOptions options);
  void StartGpuMonitor();
  void StartMetricsEndpoint();
  // Stops /metrics without waiting out CivetWeb's 2 s poll step.
  void StopExposer();
  // TraceSetting's trace_file: the spans go to `path` from now on (opened before anything changes;
  // the export thread started if it was not). An error names the path.
  absl::Status OpenTraceFile(const std::string& path);

  TelemetryOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ServerMetrics> metrics_;  // shared: the exposer holds it as a Collectable
  std::shared_ptr<LiveStateCollector> live_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<BatchSpanProcessor> processor_;  // null only when OTEL_SDK_DISABLED turned tracing off
  SwitchableExporter* switchable_ = nullptr;  // processor_'s exporter when spans go to a file or nowhere yet
  std::atomic<bool> spans_have_destination_{false};  // a collector or a file: requests may be traced
  std::unique_ptr<TraceControl> trace_control_;
  std::unique_ptr<RequestTracer> tracer_;  // uses trace_control_
  std::unique_ptr<GpuMonitor> gpu_monitor_;
  int metrics_port_ = 0;
  std::string metrics_bound_host_;  // the host part of the address /metrics bound (for StopExposer)
  absl::Mutex trace_file_mu_;  // Start and OpenTraceFile against Shutdown
  bool started_ ABSL_GUARDED_BY(trace_file_mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(trace_file_mu_) = false;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_TELEMETRY_H_
