// ServerMetrics: the request-path Prometheus metrics (prometheus-cpp), as a RequestObserver:
// request counts by model/outcome, per-request latency histograms (seconds) for queue, server
// total and the host stages, per-execution histograms for h2d/compute/launch/d2h and batch size,
// and model load / warm-up durations. Metric names are listed in docs/TELEMETRY.md. The registry
// is built by Telemetry and handed in (no global registry). OnRequestDone runs on worker threads:
// metric handles are cached per model, so a request costs one short mutex hold and a few atomics.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_
#define CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/core/request_observer.h"

namespace chronoserve::server::telemetry {

class ServerMetrics final : public RequestObserver {
 public:
  explicit ServerMetrics(prometheus::Registry* registry);
  ~ServerMetrics() override;

  void OnRequestDone(const ModelSpec& spec, const InferRequest* request, const RequestTiming& timing,
                     const absl::Status& status) override;
  // A model became ready: `load_ns` < 0 when unknown.
  void RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns, int64_t warmup_ns);

  // "success" for OK, else the status code in lower case ("unavailable", "deadline_exceeded").
  static std::string OutcomeLabel(absl::StatusCode code);

 private:
  struct PerModel;
  PerModel& ModelMetrics(const ModelSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True the first time a (model, worker) batch is seen: its requests complete one after another
  // on that worker, so a new dequeue stamp means a new execution.
  bool IsNewBatch(PerModel& model, const BatchTiming& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& batches_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& input_stage_duration_;
  prometheus::Family<prometheus::Histogram>& output_stage_duration_;
  prometheus::Family<prometheus::Histogram>& h2d_duration_;
  prometheus::Family<prometheus::Histogram>& compute_duration_;
  prometheus::Family<prometheus::Histogram>& launch_duration_;
  prometheus::Family<prometheus::Histogram>& d2h_duration_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Gauge>& load_duration_;
  prometheus::Family<prometheus::Gauge>& warmup_duration_;

  absl::Mutex mu_;
  std::map<std::tuple<std::string, int64_t>, std::unique_ptr<PerModel>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_
