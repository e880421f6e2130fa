#include "server/scheduler/worker.h"

#include <algorithm>
#include <random>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/cpu_set.h"
#include "common/launch_bound.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "common/thread_role.h"
#include "server/core/synthetic_request.h"
#include "server/scheduler/warmup_sizes.h"

namespace chronoserve::server {

const char* WorkerPhaseName(WorkerPhase phase) {
  switch (phase) {
    case WorkerPhase::kWait: return "wait";
    case WorkerPhase::kTake: return "take";
    case WorkerPhase::kExecute: return "execute";
    case WorkerPhase::kGather: return "gather";
    case WorkerPhase::kLaunch: return "launch";
    case WorkerPhase::kFinish: return "finish";
    case WorkerPhase::kComplete: return "complete";
    case WorkerPhase::kKeepWarm: return "keep_warm";
  }
  return "?";
}

bool IsLaunchBound(const BatchTiming& timing) {
  return chronoserve::IsLaunchBound(timing.device_timed, timing.launch_ns, timing.compute_ns);
}

Worker::Worker(int index, std::unique_ptr<ModelInstance> instance, ModelQueue* queue,
               ModelStats* stats, const Clock* clock, CompletionPool* completions)
    : index_(index),
      instance_(std::move(instance)),
      queue_(queue),
      stats_(stats),
      completions_(completions),
      clock_(clock) {}

Worker::~Worker() { Join(); }

namespace {
// One synthetic request as a batch. The loader bounds its bytes; a host out of memory still fails
// the model's load, not the server.
absl::StatusOr<Batch> SyntheticBatch(const ModelSpec& spec, int items, std::vector<std::string>* outputs,
                                     std::mt19937_64& rng, const std::map<std::string, std::vector<int64_t>>& dims) {
  Batch batch;
  try {
    batch.push_back(MakeSyntheticRequest(spec, items, outputs, rng, dims));
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot build its inputs: ", e.what()));
  }
  return batch;
}

// A warm-up batch that could not be built: the instance never saw it, so the worker names the
// context the instance's own errors begin with.
absl::Status WithWorkerContext(const absl::Status& status, const std::string& model, int index,
                               const std::string& device) {
  return absl::Status(status.code(),
                      absl::StrCat(model, " worker ", index, " on ", device, ": ", status.message()));
}
}  // namespace

absl::Status Worker::Warmup(const ModelSpec& spec, const WarmupOptions& options) {
  model_ = spec.Label();
  ASSIGN_OR_RETURN(keep_warm_, KeepWarmConfigFromSpec(spec));
  std::mt19937_64 rng(0x5eed + index_);
  // A config's warm-up may ask for 2^31 runs: a shutdown must not wait for them.
  auto stopped = [&options]() -> absl::Status {
    if (options.stop == nullptr || !options.stop->load(std::memory_order_relaxed)) return absl::OkStatus();
    // UNAVAILABLE, as a model skipped at shutdown: not a failed model (which answers NOT_FOUND).
    return absl::UnavailableError("warm-up stopped: the server is shutting down");
  };
  for (const WarmupSpec& w : spec.warmups) {
    for (int i = 0; i < w.count; ++i) {
      RETURN_IF_ERROR(stopped());
      RETURN_IF_ERROR(WarmupRun(spec, w.batch_size, w.input_dims, rng));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<int> sizes, WarmupBatchSizesFromSpec(spec, instance_->graph_buckets()));
  warmup_sizes_ = sizes;
  for (int items : sizes) {
    for (int i = 0; i < options.runs_per_batch_size; ++i) {
      RETURN_IF_ERROR(stopped());
      RETURN_IF_ERROR(WarmupRun(spec, items, spec.SyntheticDims(), rng));
    }
  }
  if (instance_->pipeline_depth() > 1 && options.runs_per_batch_size > 0 && !sizes.empty()) {
    RETURN_IF_ERROR(WarmupPipelinedPair(spec, sizes.back(), rng));
  }
  if (absl::Status status = instance_->PrepareForServing(); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("preparing to serve: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status Worker::WarmupRun(const ModelSpec& spec, int items,
                               const std::map<std::string, std::vector<int64_t>>& dims, std::mt19937_64& rng) {
  std::vector<std::string> outputs;
  absl::StatusOr<Batch> batch = SyntheticBatch(spec, items, &outputs, rng, dims);
  absl::Status status =
      batch.ok() ? absl::OkStatus() : WithWorkerContext(batch.status(), model_, index_, instance_->device_name());
  if (status.ok()) {
    BatchTiming timing;
    StampDequeued(&timing);
    status = instance_->Execute(*batch, &timing);
  }
  if (status.ok()) return status;
  // A model that wants a size of its own for a variable dim fails here first: say how to give it one.
  // At batch size 1 only: a failure at a larger size (out of memory) is no matter of dims.
  std::vector<std::string> filled;
  for (const TensorSpec& input : items == 1 ? spec.inputs : std::vector<TensorSpec>{}) {
    if (dims.count(input.name) == 0 && absl::c_linear_search(input.dims, int64_t{-1})) filled.push_back(input.name);
  }
  std::string hint;
  if (!filled.empty()) {
    hint = absl::StrCat(" with the -1 dims of ", absl::StrJoin(filled, ", "),
                        " as 1 (if the model needs other sizes, add a model_warmup sample with dims it accepts)");
  }
  return absl::Status(status.code(), absl::StrCat("warm-up at batch size ", items, hint, ": ", status.message()));
}

absl::Status Worker::WarmupPipelinedPair(const ModelSpec& spec, int items, std::mt19937_64& rng) {
  std::vector<std::string> outputs[2];
  Batch batches[2];
  BatchTiming timings[2];
  absl::Status status;
  int launched = 0;
  for (int slot = 0; slot < 2 && status.ok(); ++slot) {
    absl::StatusOr<Batch> batch = SyntheticBatch(spec, items, &outputs[slot], rng, spec.SyntheticDims());
    if (!batch.ok()) {
      status = WithWorkerContext(batch.status(), model_, index_, instance_->device_name());
      break;
    }
    batches[slot] = *std::move(batch);
    StampDequeued(&timings[slot]);
    status = instance_->Launch(batches[slot], &timings[slot], slot);
    if (status.ok()) ++launched;
  }
  for (int slot = 0; slot < launched; ++slot) {
    absl::Status finished = instance_->Finish(batches[slot], &timings[slot], slot);
    if (status.ok()) status = finished;
  }
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("pipelined warm-up at batch size ", items, ": ",
                                                  status.message()));
}

absl::Status Worker::Start(const HostPolicy& policy) {
  // Stamped here, not on the thread, so a test's FakeClock cannot move before the idle spell starts.
  idle_since_ns_ = clock_->NowNs();
  absl::Notification running;
  absl::Status placed;
  thread_ = std::thread([this, &running, &placed, &policy] {
    SetCurrentThreadName("cs-worker");
    MarkThreadLatencyCritical();  // a region a request held to the end is unmapped elsewhere
    if (!policy.cpu_cores.empty()) placed = PinCurrentThread(policy.cpu_cores);
    if (placed.ok() && policy.nice.has_value()) placed = SetCurrentThreadNice(*policy.nice);
    const bool serve = placed.ok();
    running.Notify();  // `placed`, `policy` and `running` are not touched after this
    if (serve) Loop();
  });
  running.WaitForNotification();
  if (!placed.ok()) {
    thread_.join();  // it serves nothing: gone before the load's failure is reported
    return absl::Status(placed.code(), absl::StrCat(model_, " worker ", index_, ": ", placed.message()));
  }
  if (!policy.cpu_cores.empty()) {
    CS_LOG(INFO) << model_ << " worker " << index_ << " pinned to CPU(s) "
                 << FormatCpuList(policy.cpu_cores);
  }
  if (policy.nice.has_value()) {
    CS_LOG(INFO) << model_ << " worker " << index_ << " runs at nice " << *policy.nice;
  }
  return absl::OkStatus();
}

void Worker::Join() {
  if (!thread_.joinable()) return;
  thread_.join();
  CS_LOG(INFO) << model_ << " worker " << index_ << " time by phase: " << PhaseSummary() << "; "
               << batches() << " batches";
}

void Worker::Loop() {
  const bool pipelined = instance_->pipeline_depth() > 1;
  std::optional<InFlight> in_flight;  // pipelined only: the batch on the device
  Batch batch;
  Batch dropped;
  while (true) {
    const int64_t asked_ns = in_flight ? clock_->NowNs() : 0;  // WaitForBatch accounts its own time
    // A batch in flight whose device work is already done is finished before the next is taken:
    // its answer then does not wait for the host to launch the batch behind it, and the next batch
    // (with whatever arrived meanwhile) is launched on an idle stream.
    if (in_flight && instance_->LaunchedDone(in_flight->slot)) {
      idle_since_ns_ = FinishBatch(*std::move(in_flight), asked_ns);
      in_flight.reset();
      continue;
    }
    // With a batch in flight never wait for requests: finish it instead when nothing is due.
    const ModelQueue::WaitResult result =
        in_flight ? queue_->TryNextBatch(&batch, &dropped) : WaitForBatch(&batch, &dropped);
    const int64_t returned_ns = in_flight ? Account(WorkerPhase::kTake, asked_ns) : 0;
    if (result != ModelQueue::WaitResult::kBatch) {
      if (in_flight) {
        idle_since_ns_ = FinishBatch(*std::move(in_flight));
        in_flight.reset();
        continue;
      }
      return;  // closed, nothing in flight
    }
    // The batch's queue span ends here, when the worker has it: answering the requests dropped
    // with it (below) is the worker's time before it stages the batch's inputs, not queueing.
    const int64_t dequeued_ns = in_flight ? returned_ns : clock_->NowNs();
    int64_t busy_from_ns = dequeued_ns;
    if (!dropped.empty()) {
      // Each keeps its own status. Handed to the completion pool like a finished batch, so a burst
      // of expired requests delays the batch taken with them as little as it can. A request
      // answered inline (one dropped, or no pool threads) delays the batch by its answer; that time
      // is in neither the batch's queue span nor its input_stage (BatchTiming::stage_from_ns).
      if (completions_ != nullptr) {
        completions_->CompleteBatch(std::move(dropped), absl::OkStatus());
      } else {
        for (auto& r : dropped) InferRequest::Complete(std::move(r), absl::OkStatus());
      }
      dropped.clear();
      busy_from_ns = Account(WorkerPhase::kComplete, dequeued_ns);
    }
    if (!batch.empty()) {
      keep_warm_lapsed_ = false;
      const Taken stamps{dequeued_ns, busy_from_ns};
      if (!pipelined) {
        idle_since_ns_ = RunBatch(std::move(batch), stamps);
      } else if (std::optional<InFlight> launched = LaunchBatch(std::move(batch), in_flight, stamps)) {
        if (in_flight) idle_since_ns_ = FinishBatch(*std::move(in_flight));
        in_flight = std::move(launched);
      } else if (!in_flight) {
        // A failed launch alone ends the idle spell, as a run would: else the next batch read as
        // cold and keep-warm, timed from the spell before, lapsed at once in the next.
        idle_since_ns_ = clock_->NowNs();
      }
    }
    batch.clear();
  }
}

ModelQueue::WaitResult Worker::WaitForBatch(Batch* batch, Batch* dropped) {
  while (true) {
    const int64_t due_ns =
        keep_warm_lapsed_ ? 0 : NextKeepWarmNs(keep_warm_, idle_since_ns_, last_keep_warm_ns_);
    const int64_t start_ns = clock_->NowNs();
    // Never longer than kWaitAccountingSliceNs without adding to phase_ns, so a scrape of an idle
    // worker sees its wait grow (not a busy worker, then all the idle time at once).
    const int64_t slice_end_ns = start_ns + kWaitAccountingSliceNs;
    const bool keep_warm_due = due_ns != 0 && due_ns <= slice_end_ns;
    const ModelQueue::WaitResult result =
        queue_->NextBatchUntil(batch, dropped, keep_warm_due ? due_ns : slice_end_ns);
    const int64_t woke_ns = Account(WorkerPhase::kWait, start_ns);
    if (result != ModelQueue::WaitResult::kTimeout) return result;
    if (!keep_warm_due) continue;
    RunKeepWarm();
    Account(WorkerPhase::kKeepWarm, woke_ns);
  }
}

void Worker::RunKeepWarm() {
  const int64_t now = clock_->NowNs();
  if (now - idle_since_ns_ > keep_warm_.horizon_ns) {
    keep_warm_lapsed_ = true;  // woke too late for this idle spell: stop until the next batch
    return;
  }
  last_keep_warm_ns_ = now;  // the schedule counts periods from run start to run start
  absl::Status status = instance_->KeepWarm();
  if (status.ok()) {
    keep_warm_runs_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  CS_LOG(WARNING) << "keep-warm turned off: " << status.message();  // the message names the model
  keep_warm_ = KeepWarmConfig{};
}

std::string Worker::PhaseSummary() const {
  std::string out;
  for (int p = 0; p < kWorkerPhaseCount; ++p) {
    const auto phase = static_cast<WorkerPhase>(p);
    absl::StrAppend(&out, p == 0 ? "" : ", ", WorkerPhaseName(phase), " ",
                    absl::StrFormat("%.6f", static_cast<double>(phase_ns(phase)) * 1e-9), " s");
  }
  return out;
}

int64_t Worker::Account(WorkerPhase phase, int64_t since_ns) {
  const int64_t now = clock_->NowNs();
  Account(phase, since_ns, now);
  return now;
}

void Worker::Account(WorkerPhase phase, int64_t since_ns, int64_t until_ns) {
  phase_ns_[static_cast<int>(phase)].fetch_add(until_ns - since_ns, std::memory_order_relaxed);
}

void Worker::NoteLaunchBound(const BatchTiming& timing) {
  const bool bound = IsLaunchBound(timing);
  last_launch_bound_.store(bound, std::memory_order_relaxed);
  if (!bound) return;
  if (launch_bound_batches_.fetch_add(1, std::memory_order_relaxed) == 0) {
    CS_LOG(INFO) << model_ << " worker " << index_ << " is launch-bound: launch "
                 << timing.launch_ns / 1000 << " us of compute " << timing.compute_ns / 1000
                 << " us at batch size " << timing.batch_size
                 << (timing.cuda_graph ? " (CUDA graph)"
                                       : "; consider optimization { cuda { graphs: true } }");
  }
}

void Worker::StampDequeued(BatchTiming* timing, int64_t dequeued_ns) const {
  timing->dequeued_ns = dequeued_ns > 0 ? dequeued_ns : clock_->NowNs();
  timing->worker = index_;
}

void Worker::BeginBatch(BatchTiming* timing, bool behind_another, const Taken& taken) {
  StampDequeued(timing, taken.dequeued_ns);
  // Answering requests dropped with the batch came first: input_stage begins after it.
  if (taken.busy_from_ns > timing->dequeued_ns) timing->stage_from_ns = taken.busy_from_ns;
  // Cold: the first batch, or one that arrives after keep-warm's horizon ended the idle spell. A
  // batch launched behind one still on the device follows no idle spell, although idle_since_ns_
  // is only moved on once that one finishes.
  timing->cold = !served_any_ || (keep_warm_.enabled() && !behind_another &&
                                  timing->dequeued_ns - idle_since_ns_ > keep_warm_.horizon_ns);
  served_any_ = true;
}

int64_t Worker::RunBatch(Batch batch, Taken taken) {
  BatchTiming timing;
  BeginBatch(&timing, /*behind_another=*/false, taken);
  absl::Status status = instance_->Execute(batch, &timing);
  // Stamped before the completions, which may let another thread (or a test) move on.
  const int64_t done_ns = Account(WorkerPhase::kExecute, taken.busy_from_ns);
  EndBatch(std::move(batch), timing, status);
  return done_ns;
}

std::optional<Worker::InFlight> Worker::LaunchBatch(Batch batch, const std::optional<InFlight>& in_flight,
                                                   Taken taken) {
  InFlight flight{std::move(batch), BatchTiming{}, in_flight ? 1 - in_flight->slot : 0};
  BeginBatch(&flight.timing, /*behind_another=*/in_flight.has_value(), taken);
  absl::Status status = instance_->Launch(flight.batch, &flight.timing, flight.slot);
  // The instance stamps staged_ns once the inputs are gathered; a launch that failed before may not.
  const int64_t staged_ns = flight.timing.staged_ns;
  const bool gathered = staged_ns >= taken.busy_from_ns;
  if (gathered) Account(WorkerPhase::kGather, taken.busy_from_ns, staged_ns);
  Account(WorkerPhase::kLaunch, gathered ? staged_ns : taken.busy_from_ns);
  if (status.ok()) return flight;
  EndBatch(std::move(flight.batch), flight.timing, status);
  return std::nullopt;
}

int64_t Worker::FinishBatch(InFlight flight, std::optional<int64_t> start_ns) {
  const int64_t from_ns = start_ns.has_value() ? *start_ns : clock_->NowNs();
  absl::Status status = instance_->Finish(flight.batch, &flight.timing, flight.slot);
  const int64_t done_ns = Account(WorkerPhase::kFinish, from_ns);
  EndBatch(std::move(flight.batch), flight.timing, status);
  return done_ns;
}

void Worker::EndBatch(Batch batch, const BatchTiming& timing, const absl::Status& status) {
  const int64_t start_ns = clock_->NowNs();
  // The server's own serving warm-up is counted nowhere; a batch it shares with a client's request
  // is counted whole, in the metrics through its first request that a client sent.
  const auto first_sent = std::find_if(batch.begin(), batch.end(), [](const auto& r) { return !r->synthetic; });
  const bool counted = first_sent != batch.end();
  if (!counted) {
    if (!status.ok()) CS_LOG(ERROR) << status.message();
  } else if (status.ok() && !timing.request_timing) {
    stats_->RecordUntimedExecution();
  } else if (status.ok()) {
    const int64_t last_output = batch.back()->timeline.output_done_ns;
    stats_->RecordExecution(timing.batch_size,
                            (timing.staged_ns - timing.stage_start_ns()) + timing.h2d_ns,
                            timing.compute_ns,
                            timing.d2h_ns + (last_output - timing.gpu_done_ns));
    NoteLaunchBound(timing);
  } else {
    CS_LOG(ERROR) << status.message();
  }
  // A batch that failed after its device work was seen done (a scatter that threw part-way) has no
  // trustworthy spans: it must not read as completed (Timeline::batch_completed) to metrics and traces.
  BatchTiming recorded = timing;
  if (!status.ok()) recorded.gpu_done_ns = 0;
  for (auto it = batch.begin(); it != batch.end(); ++it) (*it)->timeline.SetBatch(recorded, it == first_sent);
  batches_.fetch_add(1, std::memory_order_relaxed);
  // Every request of a failed batch gets its error, whose cause may be another request's values: say so.
  absl::Status answer = status;
  if (!status.ok() && batch.size() > 1) {  // counted only on this path, not for every batch
    int64_t items = 0;
    for (const auto& r : batch) items += r->batch_items;
    answer = absl::Status(status.code(), absl::StrCat(status.message(), " (the whole batch failed: ", batch.size(),
                                                      " requests, ", items, " items)"));
  }
  if (completions_ != nullptr) {
    completions_->CompleteBatch(std::move(batch), answer);
  } else {
    for (auto& r : batch) InferRequest::Complete(std::move(r), answer);
  }
  Account(WorkerPhase::kComplete, start_ns);
}

}  // namespace chronoserve::server
