#include "server/telemetry/telemetry.h"

#include <netdb.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/tcp_connect.h"
#include "common/otlp/batch_span_processor.h"
#include "common/otlp/otlp_file_exporter.h"
#include "server/telemetry/gpu_monitor.h"
#include "server/telemetry/live_state_collector.h"
#include "server/telemetry/nvml_sampler.h"
#include "server/telemetry/request_spans.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/thread_stack_floor.h"
#include "common/otlp/otlp_file_exporter.h"
#include "server/telemetry/trace_control.h"
#include "server/telemetry/server_metrics.h"
#include "server/telemetry/switchable_exporter.h"

namespace chronoserve::server::telemetry {

absl::StatusOr<std::unique_ptr<Telemetry>> Telemetry::Create(TelemetryOptions options) {
  if (options.metrics.enabled && (options.metrics.port < 0 || options.metrics.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-port ", options.metrics.port, " is not a port"));
  }
  if (options.gpu.period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("GPU monitor period must be positive");
  }
  std::unique_ptr<Telemetry> t(new Telemetry(std::move(options)));
  TracingConfig& tracing = t->options_.tracing;
  const bool to_collector = tracing.enabled && tracing.file.empty();
  if (!tracing.enabled && tracing.sdk_disabled) {
    // OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none: TraceSetting reads OFF and refuses changes.
    t->trace_control_ = std::make_unique<TraceControl>(*Sampler::Create("", ""), /*collector=*/false);
    return t;
  }
  const Sampler sampler = Sampler::FromEnvironment(tracing.sampler, tracing.sampler_arg,
                                                   tracing.enabled ? &tracing.warnings : &tracing.setting_warnings);
  tracing.sampler = sampler.Description();
  tracing.sampler_arg.clear();
  otlp::RequireQueueSize(1 + kMaxChildSpans, &tracing);  // a request's spans go in together
  std::unique_ptr<otlp::SpanExporter> exporter;
  TraceFileOpener open_file;
  if (to_collector) {
    absl::StatusOr<std::unique_ptr<otlp::SpanExporter>> collector = otlp::CreateSpanExporter(tracing);
    if (!collector.ok()) return collector.status();
    exporter = *std::move(collector);
  } else {
    // A file (--trace-file), or none until TraceSetting names one: trace_file may change at run time.
    std::unique_ptr<otlp::SpanExporter> file;
    if (tracing.enabled) {
      absl::StatusOr<std::unique_ptr<otlp::SpanExporter>> opened = otlp::CreateSpanExporter(tracing);
      if (!opened.ok()) return opened.status();
      file = *std::move(opened);
    }
    auto switchable = std::make_unique<SwitchableExporter>(std::move(file));
    t->switchable_ = switchable.get();
    exporter = std::move(switchable);
    open_file = [telemetry = t.get()](const std::string& path) { return telemetry->OpenTraceFile(path); };
  }
  t->processor_ = std::make_unique<BatchSpanProcessor>(std::move(exporter), tracing.processor);
  t->trace_control_ = std::make_unique<TraceControl>(sampler, /*collector=*/tracing.enabled, tracing.file,
                                                     std::move(open_file), t->options_.trace_file_dir);
  t->tracer_ = std::make_unique<RequestTracer>(t->trace_control_.get(), t->processor_.get());
  if (tracing.enabled) t->live_->SetSpanProcessor(t->processor_.get());
  t->spans_have_destination_.store(tracing.enabled, std::memory_order_release);
  return t;
}

Telemetry::Telemetry(TelemetryOptions options)
    : options_(std::move(options)),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(std::make_shared<ServerMetrics>(registry_.get())),
      live_(std::make_shared<LiveStateCollector>()) {}

Telemetry::~Telemetry() { Shutdown(absl::Now()); }

absl::Status Telemetry::Start() {
  {
    absl::MutexLock lock(&trace_file_mu_);
    if (started_ || shut_down_) return absl::OkStatus();
    started_ = true;
  }
  for (const std::string& warning : options_.tracing.warnings) CS_LOG(WARNING) << warning;
  if (processor_ != nullptr && options_.tracing.enabled) {
    processor_->Start();
    const TracingConfig& t = options_.tracing;
    const std::string where = !t.file.empty() ? absl::StrCat("OTLP/JSON lines appended to ", t.file)
                                              : absl::StrCat("OTLP/gRPC to ", t.exporter.endpoint,
                                                             t.exporter.use_tls ? " (TLS)" : "");
    CS_LOG(INFO) << "tracing: " << where << ", service.name=" << t.exporter.resource.service_name << ", sampler "
                 << t.sampler;
  }
  StartGpuMonitor();
  StartMetricsEndpoint();
  return absl::OkStatus();
}

void Telemetry::StartGpuMonitor() {
  if (!options_.gpu.enabled) return;
  std::shared_ptr<GpuSampler> sampler = options_.gpu.sampler_for_test;
  if (sampler == nullptr) {
    auto nvml = NvmlSampler::Create(options_.gpu.nvml_library);
    if (!nvml.ok()) {
      CS_LOG(INFO) << "GPU monitor disabled: " << nvml.status().message();
      return;
    }
    sampler = *std::move(nvml);
  }
  if (sampler->DeviceCount() == 0) {
    CS_LOG(INFO) << "GPU monitor disabled: " << sampler->Description() << " lists no GPU";
    return;
  }
  gpu_monitor_ = std::make_unique<GpuMonitor>(sampler, options_.gpu.period);
  gpu_monitor_->Start();
  live_->SetGpuMonitor(gpu_monitor_.get());
  CS_LOG(INFO) << "GPU monitor: " << sampler->Description() << ", every "
               << absl::FormatDuration(options_.gpu.period);
}

namespace {
// One connection to host:port, closed at once (a listener's poll wakes on it); errors ignored.
void Knock(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) ConnectWithin(*ai, 50);
  ::freeaddrinfo(found);
}
}  // namespace

void Telemetry::StopExposer() {
  if (exposer_ == nullptr) return;
  // CivetWeb's listening thread polls in steps of up to 2 s and looks at its stop flag between
  // them, so a stop would take that long (every exit, and a start that failed); a connection ends
  // the step. Knock until the stop is done (the first knocks may come before the flag is set).
  std::string host = UnbracketedHost(metrics_bound_host_);
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  std::atomic<bool> stopped{false};
  std::thread knocker([&stopped, host, port = metrics_port_] {
    while (!stopped.load(std::memory_order_acquire)) {
      Knock(host, port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true, std::memory_order_release);
  knocker.join();
}

std::vector<std::string> MetricsListenAddresses(const std::string& host, int port) {
  std::vector<std::string> addresses = {HostPort(host, port)};
  if (host == "::") addresses.push_back(absl::StrCat("0.0.0.0:", port));
  if (host == "::1") addresses.push_back(absl::StrCat("127.0.0.1:", port));
  return addresses;
}

void Telemetry::StartMetricsEndpoint() {
  if (!options_.metrics.enabled) return;
  const std::vector<std::string> addresses = MetricsListenAddresses(options_.metrics.host, options_.metrics.port);
  std::string failures;
  for (const std::string& address : addresses) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
      exposer_->RegisterCollectable(registry_);
      exposer_->RegisterCollectable(metrics_);
      exposer_->RegisterCollectable(live_);
      const std::vector<int> ports = exposer_->GetListeningPorts();
      metrics_port_ = ports.empty() ? 0 : ports.front();
      metrics_bound_host_ = address.substr(0, address.rfind(':'));
      const std::string where = absl::StrCat(metrics_bound_host_, ":", metrics_port_);
      if (failures.empty()) {
        CS_LOG(INFO) << "Prometheus metrics on http://" << where << "/metrics";
      } else {
        CS_LOG(WARNING) << "Prometheus metrics on http://" << where << "/metrics, the IPv4 twin of --host "
                        << options_.metrics.host << " (" << failures
                        << "; the CivetWeb that serves /metrics may lack IPv6, as Debian 12's does): gRPC listens on "
                           "the IPv6 address";
      }
      return;
    } catch (const std::exception& e) {
      exposer_.reset();  // never started: nothing to stop
      metrics_port_ = 0;
      metrics_bound_host_.clear();
      absl::StrAppend(&failures, failures.empty() ? "" : "; ", "cannot listen on ", address, ": ", e.what());
    }
  }
  // Metrics are not worth refusing inference for: serve without them, loudly.
  const bool ipv6 = options_.metrics.host.find(':') != std::string::npos;
  CS_LOG(ERROR) << "metrics endpoint disabled: " << failures
                << (ipv6 ? " (an IPv6 --host: the CivetWeb that serves /metrics may have no IPv6; --host :: or ::1 "
                           "falls back to IPv4, another IPv6 address cannot)"
                         : "")
                << " (this process's static TLS: " << StaticTlsBytes() << " bytes a thread)";
}

absl::Status Telemetry::OpenTraceFile(const std::string& path) {
  const TracingConfig& config = options_.tracing;
  // A file a client named: a regular file, no link, opened without blocking (not a pipe).
  absl::StatusOr<std::unique_ptr<otlp::OtlpFileExporter>> file =
      otlp::OtlpFileExporter::Create(path, config.exporter.resource, /*regular_only=*/true);
  if (!file.ok()) return file.status();
  absl::MutexLock lock(&trace_file_mu_);
  if (shut_down_) return absl::UnavailableError("the server is shutting down");
  processor_->Start();  // idempotent; Shutdown, which stops it, waits for this lock
  // Tracing off at start is on from now: the settings' problems found then matter now.
  for (const std::string& warning : std::exchange(options_.tracing.setting_warnings, {})) {
    CS_LOG(WARNING) << warning;
  }
  // The spans of requests finished before the change go to the file before; a collector-less
  // flush is a local write, bounded all the same.
  processor_->ForceFlush(absl::Now() + absl::Seconds(5));
  switchable_->Replace(*std::move(file));
  live_->SetSpanProcessor(processor_.get());
  spans_have_destination_.store(true, std::memory_order_release);
  CS_LOG(INFO) << "tracing: OTLP/JSON lines appended to " << path << " (TraceSetting trace_file), service.name="
               << config.exporter.resource.service_name << ", sampler " << config.sampler;
  return absl::OkStatus();
}

void Telemetry::Shutdown(absl::Time deadline) {
  {
    absl::MutexLock lock(&trace_file_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // /metrics first: the flush below may take until `deadline` (a collector down), and a server
  // started meanwhile on the same ports (a restart) would find the metrics port taken and serve
  // without /metrics for its whole life. With gRPC already closed there is nothing left to scrape.
  if (gpu_monitor_ != nullptr) gpu_monitor_->Stop();
  StopExposer();
  if (processor_ != nullptr) processor_->Shutdown(deadline);
  if (processor_ != nullptr && spans_have_destination_.load(std::memory_order_acquire)) {
    const SpanProcessorStats s = processor_->stats();
    CS_LOG(INFO) << "tracing stopped: " << s.exported << " span(s) exported, " << s.rejected
                 << " rejected by the collector, " << s.dropped << " dropped, " << s.export_failed
                 << " lost to failed exports";
  }
  live_->SetModelRegistry(nullptr);
  live_->SetInflightSource(nullptr);
}

std::optional<TraceDecision> Telemetry::DecideTrace(const ModelSpec& spec, const std::string& traceparent) {
  if (tracer_ == nullptr) return std::nullopt;
  // No destination yet (no trace_file named): not traced, at no cost (no trace id drawn, no lock).
  if (!spans_have_destination_.load(std::memory_order_acquire)) return TraceDecision{};
  return tracer_->DecideTrace(spec, traceparent);
}

void Telemetry::OnRequestDone(const ModelSpec& spec, const InferRequest* request, const RequestTiming& timing,
                              const absl::Status& status) {
  metrics_->OnRequestDone(spec, request, timing, status);
  if (tracer_ != nullptr && spans_have_destination_.load(std::memory_order_acquire)) {
    tracer_->OnRequestDone(spec, request, timing, status);
  }
}

void Telemetry::SetModelRegistry(ModelRegistry* registry) { live_->SetModelRegistry(registry); }

void Telemetry::RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns, int64_t warmup_ns) {
  metrics_->RecordModelLoad(model, version, load_ns, warmup_ns);
}

const GpuClockSource* Telemetry::gpu_clock() const { return gpu_monitor_.get(); }

TraceSettings* Telemetry::trace_settings() { return trace_control_.get(); }

void Telemetry::SetInflightSource(std::function<int64_t()> source) { live_->SetInflightSource(std::move(source)); }

}  // namespace chronoserve::server::telemetry
