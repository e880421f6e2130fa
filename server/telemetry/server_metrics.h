// ServerMetrics: the request-path Prometheus metrics, as a RequestObserver: request counts by
// model/outcome, per-request latency histograms (seconds) for queue, server total and the host
// stages, per-execution histograms for h2d/compute/launch/d2h and batch size, and model load /
// warm-up durations. Metric names are listed in docs/TELEMETRY.md. What every request updates (the
// request counts and the histograms) is striped (striped_metrics.h) and exposed by this object as a
// Collectable of its own; the batch counter and the gauges live in the prometheus-cpp registry that
// Telemetry builds and hands in (no global registry).
// OnRequestDone runs on the threads that complete requests, many at once under load: a thread
// finds its model's metrics in a cache of its own, and a successful request then costs a few
// relaxed atomic adds in its own stripe and no lock (prometheus-cpp's histograms lock a mutex per
// observation).
#ifndef CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_
#define CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/core/request_observer.h"
#include "server/telemetry/striped_metrics.h"

namespace chronoserve::server::telemetry {

class ServerMetrics final : public RequestObserver, public prometheus::Collectable {
 public:
  explicit ServerMetrics(prometheus::Registry* registry);
  ~ServerMetrics() override;

  void OnRequestDone(const ModelSpec& spec, const InferRequest* request, const RequestTiming& timing,
                     const absl::Status& status) override;
  // A model became ready: `load_ns` < 0 when unknown.
  void RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns, int64_t warmup_ns);

  // The request counts and the histograms (the batch counter and the gauges are collected with the
  // registry).
  std::vector<prometheus::MetricFamily> Collect() const override;

  // "success" for OK, else the status code in lower case ("unavailable", "deadline_exceeded").
  static std::string OutcomeLabel(absl::StatusCode code);

 private:
  struct PerModel;
  // The model's metrics, made on first use; a thread's last answer is kept in a thread_local.
  PerModel& ModelMetrics(const ModelSpec& spec) ABSL_LOCKS_EXCLUDED(mu_);
  // The model's series (request outcome success, the histograms, the batch counters), made at 0 on
  // first use.
  PerModel& Series(const std::string& name, int64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t instance_;  // unique per ServerMetrics in this process

  const std::unique_ptr<StripedFamily<StripedCounter>> requests_;
  prometheus::Family<prometheus::Counter>& batches_;
  prometheus::Family<prometheus::Counter>& batches_in_place_;
  prometheus::Family<prometheus::Counter>& batches_outputs_lent_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> request_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> admit_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> queue_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> input_stage_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> output_stage_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> handback_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> h2d_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> compute_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> launch_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> d2h_duration_;
  const std::unique_ptr<StripedFamily<StripedHistogram>> batch_size_;
  prometheus::Family<prometheus::Gauge>& load_duration_;
  prometheus::Family<prometheus::Gauge>& warmup_duration_;

  // Guards models_ (entries are never removed, so a PerModel outlives every cache pointing at it)
  // and the making of the PerModel failure counters (they are read without it).
  absl::Mutex mu_;
  std::map<std::tuple<std::string, int64_t>, std::unique_ptr<PerModel>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_SERVER_METRICS_H_
