#include "server/telemetry/server_metrics.h"

#include <array>
#include <atomic>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace chronoserve::server::telemetry {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

// 1 us .. 10 s, in nanoseconds: a CUDA graph's launch, a small d2h or an idle server's queue take
// a few microseconds, GPU stages of small models tens of them.
const std::vector<int64_t>& LatencyBucketsNs() {
  static const std::vector<int64_t> buckets = {
      1'000, 2'500, 5'000, 10'000, 25'000, 50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000,
      5'000'000, 10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000,
      5'000'000'000, 10'000'000'000};
  return buckets;
}

const std::vector<int64_t>& BatchSizeBuckets() {
  static const std::vector<int64_t> buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return buckets;
}

constexpr double kNsPerSecond = 1e9;

// absl::StatusCode's gRPC codes, 0 (OK) to 16 (UNAUTHENTICATED).
constexpr size_t kStatusCodes = 17;

double Seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerSecond; }

std::unique_ptr<StripedFamily<StripedHistogram>> Histograms(const std::string& name, const std::string& help,
                                                             const std::vector<int64_t>& bounds,
                                                             double units_per_exposed) {
  return std::make_unique<StripedFamily<StripedHistogram>>(
      name, help, [bounds, units_per_exposed] { return std::make_unique<StripedHistogram>(bounds, units_per_exposed); });
}

std::unique_ptr<StripedFamily<StripedHistogram>> Latency(const std::string& name, const std::string& help) {
  return Histograms(name, help, LatencyBucketsNs(), kNsPerSecond);
}

// Tells ServerMetrics instances apart in the threads' caches, where an address could be reused.
std::atomic<uint64_t> next_instance{1};

}  // namespace

struct ServerMetrics::PerModel {
  std::string name;
  int64_t version = 0;
  prometheus::Labels labels;
  StripedHistogram* request_duration;
  StripedHistogram* admit;
  StripedHistogram* queue;
  StripedHistogram* input_stage;
  StripedHistogram* output_stage;
  StripedHistogram* handback;
  StripedHistogram* h2d;
  StripedHistogram* compute;
  StripedHistogram* launch;
  StripedHistogram* d2h;
  StripedHistogram* batch_size;
  prometheus::Counter* batches;
  prometheus::Counter* batches_in_place;
  prometheus::Counter* batches_outputs_lent;
  StripedCounter* success;  // the outcome of nearly every request
  // By status code (absl::StatusCode 1-16), made on first use under mu_ and read without it.
  std::array<std::atomic<StripedCounter*>, kStatusCodes> failures{};
};

ServerMetrics::ServerMetrics(prometheus::Registry* r)
    : instance_(next_instance.fetch_add(1)),
      requests_(std::make_unique<StripedFamily<StripedCounter>>(
          "chronoserve_requests_total",
          "ModelInfer requests completed, by model, version and outcome (success or the gRPC status code in "
          "lower case)",
          [] { return std::make_unique<StripedCounter>(); })),
      batches_(BuildCounter().Name("chronoserve_batches_total")
                   .Help("Batches executed (one model forward each), by model and version")
                   .Register(*r)),
      batches_in_place_(BuildCounter().Name("chronoserve_batches_inputs_in_place_total")
                            .Help("Batches whose every input went to the device from where the receiving threads "
                                  "had put it (the model's input arena; --input-arena-mib), with no gather on the "
                                  "worker, by model and version")
                            .Register(*r)),
      batches_outputs_lent_(BuildCounter().Name("chronoserve_batches_outputs_lent_total")
                                .Help("Batches with at least one output sent to its responses from the worker's own "
                                      "buffer (on a GPU the page-locked buffer it landed in), not copied into them, "
                                      "by model and version")
                                .Register(*r)),
      request_duration_(Latency("chronoserve_request_duration_seconds",
                                "Server time per request: received by the handler -> response handed to gRPC")),
      admit_duration_(Latency("chronoserve_admit_duration_seconds",
                              "Per request: received by the handler -> enqueued (the message read, validated, its "
                              "inputs copied into the model's input arena)")),
      queue_duration_(Latency("chronoserve_queue_duration_seconds",
                              "Per request: enqueued -> taken by a worker in a batch")),
      input_stage_duration_(Latency("chronoserve_input_stage_duration_seconds",
                                    "Per request: batch taken -> inputs gathered into staging")),
      output_stage_duration_(Latency("chronoserve_output_stage_duration_seconds",
                                     "Per request: device work observed done -> response built")),
      handback_duration_(Latency("chronoserve_handback_duration_seconds",
                                 "Per request: response built -> its timing finalised to be handed to gRPC (the "
                                 "answer's way back to the thread that sends it)")),
      h2d_duration_(Latency("chronoserve_h2d_duration_seconds",
                            "Per batch: host->device input copy (CUDA events; host clock on CPU)")),
      compute_duration_(Latency("chronoserve_compute_duration_seconds",
                                "Per batch: the model's forward on the device (CUDA events; host clock on CPU)")),
      launch_duration_(Latency("chronoserve_launch_duration_seconds",
                               "Per batch: host time spent enqueueing the forward")),
      d2h_duration_(Latency("chronoserve_d2h_duration_seconds",
                            "Per batch: device->host output copy (CUDA events; host clock on CPU)")),
      batch_size_(Histograms("chronoserve_batch_size", "Items per executed batch", BatchSizeBuckets(), 1.0)),
      load_duration_(BuildGauge().Name("chronoserve_model_load_duration_seconds")
                         .Help("Time to load the model onto its devices (all instances)")
                         .Register(*r)),
      warmup_duration_(BuildGauge().Name("chronoserve_model_warmup_duration_seconds")
                           .Help("Time spent warming the model (every worker, every warm-up batch size) before READY")
                           .Register(*r)) {}

ServerMetrics::~ServerMetrics() = default;

std::string ServerMetrics::OutcomeLabel(absl::StatusCode code) {
  if (code == absl::StatusCode::kOk) return "success";
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

ServerMetrics::PerModel& ServerMetrics::ModelMetrics(const ModelSpec& spec) {
  // One entry per thread: a completing thread finishes request after request of the same model.
  struct Cached {
    uint64_t instance = 0;
    const ModelSpec* spec = nullptr;
    PerModel* model = nullptr;
  };
  thread_local Cached cached;
  if (cached.instance == instance_ && cached.spec == &spec && cached.model->version == spec.version &&
      cached.model->name == spec.name) {
    return *cached.model;
  }
  PerModel& m = Series(spec.name, spec.version);
  cached = Cached{instance_, &spec, &m};
  return m;
}

ServerMetrics::PerModel& ServerMetrics::Series(const std::string& name, int64_t version) {
  absl::MutexLock lock(&mu_);
  auto& slot = models_[{name, version}];
  if (slot == nullptr) {
    slot = std::make_unique<PerModel>();
    PerModel& m = *slot;
    m.name = name;
    m.version = version;
    m.labels = {{"model", name}, {"version", absl::StrCat(version)}};
    m.request_duration = &request_duration_->Add(m.labels);
    m.admit = &admit_duration_->Add(m.labels);
    m.queue = &queue_duration_->Add(m.labels);
    m.input_stage = &input_stage_duration_->Add(m.labels);
    m.output_stage = &output_stage_duration_->Add(m.labels);
    m.handback = &handback_duration_->Add(m.labels);
    m.h2d = &h2d_duration_->Add(m.labels);
    m.compute = &compute_duration_->Add(m.labels);
    m.launch = &launch_duration_->Add(m.labels);
    m.d2h = &d2h_duration_->Add(m.labels);
    m.batch_size = &batch_size_->Add(m.labels);
    m.batches = &batches_.Add(m.labels);
    m.batches_in_place = &batches_in_place_.Add(m.labels);
    m.batches_outputs_lent = &batches_outputs_lent_.Add(m.labels);
    prometheus::Labels labels = m.labels;
    labels["outcome"] = OutcomeLabel(absl::StatusCode::kOk);
    m.success = &requests_->Add(labels);
  }
  return *slot;
}

void ServerMetrics::OnRequestDone(const ModelSpec& spec, const InferRequest* request,
                                  const RequestTiming& timing, const absl::Status& status) {
  if (request != nullptr && request->synthetic) return;
  PerModel& m = ModelMetrics(spec);
  if (status.ok()) {
    m.success->Increment();
  } else {
    // A code outside gRPC's counts as unknown.
    const int raw = static_cast<int>(status.code());
    const int code = raw > 0 && raw < static_cast<int>(kStatusCodes) ? raw : static_cast<int>(absl::StatusCode::kUnknown);
    std::atomic<StripedCounter*>& slot = m.failures[static_cast<size_t>(code)];
    StripedCounter* counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      absl::MutexLock lock(&mu_);  // the first failure of its kind for the model
      counter = slot.load(std::memory_order_relaxed);
      if (counter == nullptr) {
        prometheus::Labels labels = m.labels;
        labels["outcome"] = OutcomeLabel(static_cast<absl::StatusCode>(code));
        counter = &requests_->Add(labels);
        slot.store(counter, std::memory_order_release);
      }
    }
    counter->Increment();
  }
  if (request == nullptr) return;  // no request to measure: counted only
  m.request_duration->Observe(timing.server_total_ns);
  const Timeline& t = request->timeline;
  const BatchTiming& batch = t.batch();
  // A stage is observed only when both of its stamps were set: a batch that failed part-way
  // (inputs not gathered, device work or the scatter not finished) feeds no zero into a histogram,
  // and the metrics show the stages the trace shows (request_spans.cc leaves such spans out too).
  auto reached = [](int64_t start_ns, int64_t end_ns) { return start_ns > 0 && end_ns > 0; };
  if (reached(t.received_ns, t.enqueued_ns)) m.admit->Observe(timing.admit_ns);
  if (reached(t.enqueued_ns, batch.dequeued_ns)) m.queue->Observe(timing.queue_ns);
  if (reached(batch.stage_start_ns(), batch.staged_ns)) m.input_stage->Observe(timing.input_stage_ns);
  if (t.batch_completed()) {
    m.output_stage->Observe(timing.output_stage_ns);
    m.handback->Observe(timing.handback_ns);
  }
  // One request per executed batch carries the batch's figures (the worker marks it), and only
  // for a batch that succeeded: its device work was observed done and its outputs were scattered
  // (every request of a failed batch misses the scatter; a request that failed alone in a batch
  // that succeeded, e.g. an output too large for its shared-memory region, has it).
  if (!t.batch_completed() || !t.counts_batch()) return;
  m.batches->Increment();
  if (batch.inputs_in_place) m.batches_in_place->Increment();
  if (batch.outputs_lent) m.batches_outputs_lent->Increment();
  m.batch_size->Observe(timing.batch_size);
  if (!batch.request_timing) return;  // --request-timing off: the device spans were not measured
  m.h2d->Observe(timing.h2d_ns);
  m.compute->Observe(timing.compute_ns);
  m.launch->Observe(timing.launch_ns);
  m.d2h->Observe(timing.d2h_ns);
}

std::vector<prometheus::MetricFamily> ServerMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> families = {requests_->Collect()};
  for (const auto* family : {&request_duration_, &admit_duration_, &queue_duration_, &input_stage_duration_,
                             &output_stage_duration_, &handback_duration_, &h2d_duration_, &compute_duration_,
                             &launch_duration_, &d2h_duration_, &batch_size_}) {
    families.push_back((*family)->Collect());
  }
  return families;
}

void ServerMetrics::RecordModelLoad(const std::string& model, int64_t version, int64_t load_ns,
                                    int64_t warmup_ns) {
  // The model's request series exist from its load, at 0: rate() and increase() then see its first
  // requests, and a dashboard shows 0 rather than no data.
  Series(model, version);
  const prometheus::Labels labels = {{"model", model}, {"version", absl::StrCat(version)}};
  if (load_ns >= 0) load_duration_.Add(labels).Set(Seconds(load_ns));
  warmup_duration_.Add(labels).Set(Seconds(warmup_ns));
}

}  // namespace chronoserve::server::telemetry
