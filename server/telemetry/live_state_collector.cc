#include "server/telemetry/live_state_collector.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chronoserve::server::telemetry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void AddGauge(MetricFamily* f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f->metric.push_back(std::move(m));
}

void AddCounter(MetricFamily* f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f->metric.push_back(std::move(m));
}

}  // namespace

void LiveStateCollector::SetModelRegistry(ModelRegistry* registry) {
  absl::MutexLock lock(&mu_);
  registry_ = registry;
}
void LiveStateCollector::SetInflightSource(std::function<int64_t()> source) {
  absl::MutexLock lock(&mu_);
  inflight_ = std::move(source);
}
void LiveStateCollector::SetGpuMonitor(const GpuMonitor* monitor) {
  absl::MutexLock lock(&mu_);
  gpu_monitor_ = monitor;
}
void LiveStateCollector::SetSpanProcessor(const BatchSpanProcessor* processor) {
  absl::MutexLock lock(&mu_);
  processor_ = processor;
}

std::vector<MetricFamily> LiveStateCollector::Collect() const {
  std::vector<MetricFamily> out;
  absl::ReaderMutexLock lock(&mu_);
  MetricFamily inflight = Family("chronoserve_inflight_requests",
                                 "Inference requests accepted and not yet answered", MetricType::Gauge);
  AddGauge(&inflight, {}, inflight_ ? static_cast<double>(inflight_()) : 0.0);
  out.push_back(std::move(inflight));
  CollectQueues(&out);
  CollectWorkers(&out);
  CollectGpus(&out);
  CollectTracing(&out);
  return out;
}

void LiveStateCollector::CollectQueues(std::vector<MetricFamily>* out) const {
  if (registry_ == nullptr) return;
  MetricFamily depth = Family("chronoserve_queue_depth", "Requests waiting in the model's queue",
                              MetricType::Gauge);
  for (const auto& runtime : registry_->Ready()) {
    AddGauge(&depth, {{"model", runtime->spec().name}, {"version", absl::StrCat(runtime->spec().version)}},
             static_cast<double>(runtime->queue().size()));
  }
  out->push_back(std::move(depth));
}

void LiveStateCollector::CollectWorkers(std::vector<MetricFamily>* out) const {
  if (registry_ == nullptr) return;
  MetricFamily seconds = Family("chronoserve_worker_seconds_total",
                                "Worker thread time by phase: wait (for requests) or busy (take, execute, gather, "
                                "launch, finish, complete, keep_warm); together the phases cover the thread's wall time",
                                MetricType::Counter);
  MetricFamily batches = Family("chronoserve_worker_batches_total",
                                "Batches the worker ran, whatever their outcome (with request timing on or off); "
                                "chronoserve_worker_seconds_total over it is the worker's time per batch by phase",
                                MetricType::Counter);
  MetricFamily keep_warm = Family("chronoserve_keep_warm_runs_total",
                                  "Keep-warm runs of the model while its worker was idle", MetricType::Counter);
  MetricFamily bound = Family("chronoserve_launch_bound_batches_total",
                              "Served batches whose host launch took >= 80% of their device compute",
                              MetricType::Counter);
  MetricFamily bound_now = Family("chronoserve_worker_launch_bound",
                                  "1 when the worker's last served batch was launch-bound (consider CUDA graphs)",
                                  MetricType::Gauge);
  for (const auto& runtime : registry_->Ready()) {
    const std::string model = runtime->spec().name;
    const std::string version = absl::StrCat(runtime->spec().version);
    for (const auto& worker : runtime->workers()) {
      const std::string index = absl::StrCat(worker->index());
      for (int p = 0; p < kWorkerPhaseCount; ++p) {
        const auto phase = static_cast<WorkerPhase>(p);
        AddCounter(&seconds,
                   {{"model", model}, {"phase", WorkerPhaseName(phase)}, {"version", version}, {"worker", index}},
                   static_cast<double>(worker->phase_ns(phase)) * 1e-9);
      }
      const std::vector<ClientMetric::Label> labels = {{"model", model}, {"version", version}, {"worker", index}};
      AddCounter(&batches, labels, static_cast<double>(worker->batches()));
      AddCounter(&keep_warm, labels, static_cast<double>(worker->keep_warm_runs()));
      AddCounter(&bound, labels, static_cast<double>(worker->launch_bound_batches()));
      AddGauge(&bound_now, labels, worker->last_batch_launch_bound() ? 1.0 : 0.0);
    }
  }
  out->push_back(std::move(seconds));
  out->push_back(std::move(batches));
  out->push_back(std::move(keep_warm));
  out->push_back(std::move(bound));
  out->push_back(std::move(bound_now));
}

void LiveStateCollector::CollectGpus(std::vector<MetricFamily>* out) const {
  if (gpu_monitor_ == nullptr) return;
  struct Gauge {
    const char* name;
    const char* help;
    std::function<int64_t(const GpuSample&)> field;
    double scale;
  };
  const Gauge gauges[] = {
      {"chronoserve_gpu_sm_clock_hertz", "SM clock", [](const GpuSample& s) { return s.sm_clock_mhz; }, 1e6},
      {"chronoserve_gpu_memory_clock_hertz", "Memory clock",
       [](const GpuSample& s) { return s.memory_clock_mhz; }, 1e6},
      {"chronoserve_gpu_power_watts", "Power draw", [](const GpuSample& s) { return s.power_mw; }, 1e-3},
      {"chronoserve_gpu_utilization_ratio", "Fraction of NVML's own sampling window (1/6 s to 1 s, set by the driver) in which a kernel was running",
       [](const GpuSample& s) { return s.utilization_gpu_pct; }, 1e-2},
      {"chronoserve_gpu_memory_utilization_ratio",
       "Fraction of NVML's own sampling window (1/6 s to 1 s, set by the driver) in which device memory was read or written",
       [](const GpuSample& s) { return s.utilization_memory_pct; }, 1e-2},
      {"chronoserve_gpu_memory_used_bytes", "Device memory in use",
       [](const GpuSample& s) { return s.memory_used_bytes; }, 1.0},
      {"chronoserve_gpu_memory_total_bytes", "Device memory installed",
       [](const GpuSample& s) { return s.memory_total_bytes; }, 1.0},
      {"chronoserve_gpu_temperature_celsius", "GPU core temperature",
       [](const GpuSample& s) { return s.temperature_c; }, 1.0},
  };
  std::vector<std::optional<GpuSample>> samples;
  for (int gpu = 0; gpu < gpu_monitor_->DeviceCount(); ++gpu) samples.push_back(gpu_monitor_->LastSample(gpu));
  for (const Gauge& g : gauges) {
    MetricFamily f = Family(g.name, g.help, MetricType::Gauge);
    for (size_t gpu = 0; gpu < samples.size(); ++gpu) {
      if (!samples[gpu] || g.field(*samples[gpu]) < 0) continue;  // unreadable: absent, not 0
      AddGauge(&f, {{"gpu", absl::StrCat(gpu)}}, static_cast<double>(g.field(*samples[gpu])) * g.scale);
    }
    out->push_back(std::move(f));
  }
}

void LiveStateCollector::CollectTracing(std::vector<MetricFamily>* out) const {
  if (processor_ == nullptr) return;
  const SpanProcessorStats stats = processor_->stats();
  const struct {
    const char* name;
    const char* help;
    uint64_t value;
  } counters[] = {
      {"chronoserve_trace_spans_exported_total", "Spans the OTLP collector accepted", stats.exported},
      {"chronoserve_trace_spans_rejected_total",
       "Spans the OTLP collector answered for but rejected (partial success)", stats.rejected},
      {"chronoserve_trace_spans_dropped_total", "Spans dropped: the export queue was full, or they were still queued or offered at shutdown",
       stats.dropped},
      {"chronoserve_trace_spans_failed_total", "Spans lost in exports that failed after retries",
       stats.export_failed},
  };
  for (const auto& c : counters) {
    MetricFamily f = Family(c.name, c.help, MetricType::Counter);
    AddCounter(&f, {}, static_cast<double>(c.value));
    out->push_back(std::move(f));
  }
}

}  // namespace chronoserve::server::telemetry
