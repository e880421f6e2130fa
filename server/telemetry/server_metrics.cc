#include "server/telemetry/server_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server::telemetry {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// 10 us .. 10 s: GPU stages of small models sit at tens of microseconds.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries buckets = {
      1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
      2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
  return buckets;
}

const Histogram::BucketBoundaries& BatchSizeBuckets() {
  static const Histogram::BucketBoundaries buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return buckets;
}

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

prometheus::Family<Histogram>& Latency(prometheus::Registry* r, const std::string& name, const std::string& help) {
  return BuildHistogram().Name(name).Help(help).Register(*r);
}

}  // namespace

struct ServerMetrics::PerModel {
  prometheus::Labels labels;
  Histogram* request_duration;
  Histogram* queue;
  Histogram* input_stage;
  Histogram* output_stage;
  Histogram* h2d;
  Histogram* compute;
  Histogram* launch;
  Histogram* d2h;
  Histogram* batch_size;
  prometheus::Counter* batches;
  std::map<std::string, prometheus::Counter*> outcomes;  // by outcome label
  std::map<int64_t, int64_t> last_dequeue_by_worker;
};

ServerMetrics::ServerMetrics(prometheus::Registry* r)
    : requests_(BuildCounter().Name("chronoserve_requests_total")
                    .Help("ModelInfer requests completed, by model, version and outcome "
                          "(success or the gRPC status code in lower case)")
                    .Register(*r)),
      batches_(BuildCounter().Name("chronoserve_batches_total")
                   .Help("Batches executed (one model forward each), by model and version")
                   .Register(*r)),
      request_duration_(Latency(r, "chronoserve_request_duration_seconds",
                                "Server time per request: received by the handler -> response handed to gRPC")),
      queue_duration_(Latency(r, "chronoserve_queue_duration_seconds",
                              "Per request: enqueued -> taken by a worker in a batch")),
      input_stage_duration_(Latency(r, "chronoserve_input_stage_duration_seconds",
                                    "Per request: batch taken -> inputs gathered into staging")),
      output_stage_duration_(Latency(r, "chronoserve_output_stage_duration_seconds",
                                     "Per request: device work observed done -> response built")),
      h2d_duration_(Latency(r, "chronoserve_h2d_duration_seconds",
                            "Per batch: host->device input copy (CUDA events; host clock on CPU)")),
      compute_duration_(Latency(r, "chronoserve_compute_duration_seconds",
                                "Per batch: the model's forward on the device (CUDA events; host clock on CPU)")),
      launch_duration_(Latency(r, "chronoserve_launch_duration_seconds",
                               "Per batch: host time spent enqueueing the forward")),
      d2h_duration_(Latency(r, "chronoserve_d2h_duration_seconds",
                            "Per batch: device->host output copy (CUDA events; host clock on CPU)")),
      batch_size_(BuildHistogram().Name("chronoserve_batch_size")
                      .Help("Items per executed batch")
                      .Register(*r)),
      load_duration_(BuildGauge().Name("chronoserve_model_load_duration_seconds")
                         .Help("Time to load the model onto its devices (all instances)")
                         .Register(*r)),
      warmup_duration_(BuildGauge().Name("chronoserve_model_warmup_duration_seconds")
                           .Help("Time spent warming the model (every worker, every batch size) before READY")
                           .Register(*r)) {}

ServerMetrics::~ServerMetrics() = default;

std::string ServerMetrics::OutcomeLabel(absl::StatusCode code) {
  if (code == absl::StatusCode::kOk) return "success";
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

ServerMetrics::PerModel& ServerMetrics::ModelMetrics(const ModelSpec& spec) {
  auto& slot = models_[{spec.name, spec.version}];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<PerModel>();
  PerModel& m = *slot;
  m.labels = {{"model", spec.name}, {"version", absl::StrCat(spec.version)}};
  m.request_duration = &request_duration_.Add(m.labels, LatencyBuckets());
  m.queue = &queue_duration_.Add(m.labels, LatencyBuckets());
  m.input_stage = &input_stage_duration_.Add(m.labels, LatencyBuckets());
  m.output_stage = &output_stage_duration_.Add(m.labels, LatencyBuckets());
  m.h2d = &h2d_duration_.Add(m.labels, LatencyBuckets());
  m.compute = &compute_duration_.Add(m.labels, LatencyBuckets());
  m.launch = &launch_duration_.Add(m.labels, LatencyBuckets());
  m.d2h = &d2h_duration_.Add(m.labels, LatencyBuckets());
  m.batch_size = &batch_size_.Add(m.labels, BatchSizeBuckets());
  m.batches = &batches_.Add(m.labels);
  return m;
}

bool ServerMetrics::IsNewBatch(PerModel& model, const BatchTiming& batch) {
  if (batch.dequeued_ns <= 0) return false;  // never executed
  int64_t& last = model.last_dequeue_by_worker[batch.worker];
  if (last == batch.dequeued_ns) return false;
  last = batch.dequeued_ns;
  return true;
}

void ServerMetrics::OnRequestDone(const ModelSpec& spec, const InferRequest* request,
                                  const RequestTiming& timing, const absl::Status& status) {
  if (request != nullptr && request->synthetic) return;
  absl::MutexLock lock(&mu_);
  PerModel& m = ModelMetrics(spec);
  const std::string outcome = OutcomeLabel(status.code());
  prometheus::Counter*& counter = m.outcomes[outcome];
  if (counter == nullptr) {
    prometheus::Labels labels = m.labels;
    labels["outcome"] = outcome;
    counter = &requests_.Add(labels);
  }
  counter->Increment();
  if (request == nullptr) return;  // refused before it was queued: counted, nothing measured
  m.request_duration->Observe(Seconds(timing.server_total_ns));
  const BatchTiming& batch = request->timeline.batch();
  if (batch.dequeued_ns <= 0) return;
  m.queue->Observe(Seconds(timing.queue_ns));
  m.input_stage->Observe(Seconds(timing.input_stage_ns));
  if (batch.gpu_done_ns > 0) m.output_stage->Observe(Seconds(timing.output_stage_ns));
  if (batch.gpu_done_ns <= 0 || !IsNewBatch(m, batch)) return;
  m.batches->Increment();
  m.batch_size->Observe(static_cast<double>(timing.batch_size));
  if (!batch.request_timing) return;  // --request-timing off: the device spans were not measured
  m.h2d->Observe(Seconds(timing.h2d_ns));
  m.compute->Observe(Seconds(timing.compute_ns));
  m.launch->Observe(Seconds(timing.launch_ns));
  m.d2h->Observe(Seconds(timing.d2h_ns));
}

void ServerMetrics::RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns,
                                    int64_t warmup_ns) {
  const prometheus::Labels labels = {{"model", model}, {"version", absl::StrCat(version)}};
  if (load_ns >= 0) load_duration_.Add(labels).Set(Seconds(load_ns));
  warmup_duration_.Add(labels).Set(Seconds(warmup_ns));
}

}  // namespace chronoserve::server::telemetry
