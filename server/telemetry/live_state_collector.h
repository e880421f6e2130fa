// LiveStateCollector: Prometheus gauges read at scrape time rather than on the request path —
// queue depth per model, ModelInfer calls in flight, each worker's time by phase, keep-warm runs and
// launch-bound batches, the GPU monitor's last sample, and the trace pipeline's counters (spans
// exported / dropped / failed). Registered with the metrics endpoint by
// Telemetry, which owns it; Collect() runs on the HTTP exposer's threads.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_LIVE_STATE_COLLECTOR_H_
#define CHRONOSERVE_SERVER_TELEMETRY_LIVE_STATE_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/scheduler/model_registry.h"
#include "common/otlp/batch_span_processor.h"
#include "server/telemetry/gpu_monitor.h"

namespace chronoserve::server::telemetry {

using otlp::BatchSpanProcessor;
using otlp::SpanProcessorStats;

class LiveStateCollector final : public prometheus::Collectable {
 public:
  // Sources may be set later (or never); each must outlive this collector or be reset to null.
  void SetModelRegistry(ModelRegistry* registry);
  void SetGpuMonitor(const GpuMonitor* monitor);
  void SetSpanProcessor(const BatchSpanProcessor* processor);

  // The inference requests in flight, read at scrape time (the dispatcher's count of accepted
  // requests not yet answered); null = none reported (the gauge reads 0).
  void SetInflightSource(std::function<int64_t()> source);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void CollectQueues(std::vector<prometheus::MetricFamily>* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CollectWorkers(std::vector<prometheus::MetricFamily>* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CollectGpus(std::vector<prometheus::MetricFamily>* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CollectTracing(std::vector<prometheus::MetricFamily>* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::function<int64_t()> inflight_ ABSL_GUARDED_BY(mu_);
  ModelRegistry* registry_ ABSL_GUARDED_BY(mu_) = nullptr;
  const GpuMonitor* gpu_monitor_ ABSL_GUARDED_BY(mu_) = nullptr;
  const BatchSpanProcessor* processor_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_LIVE_STATE_COLLECTOR_H_
