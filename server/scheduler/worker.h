// Worker: one thread, one ModelInstance (on GPU: one CUDA stream). Pulls batches from its model's
// queue, executes them, and completes every request (the completion callback answers the client).
// Owned by the model's runtime; Warmup() runs on the caller's thread before Start(). While idle it
// may keep its model warm (parameters keep_warm_ms / keep_warm_horizon_ms; see keep_warm.h), and it
// counts launch-bound batches (host launch >= 80% of the device-timed compute). With an instance
// that pipelines (pipeline_depth() 2, a GPU instance) it launches the next due batch before it
// finishes the one on the device; it never waits for requests while a batch is in flight.
//
//   Worker w(...); RETURN_IF_ERROR(w.Warmup(spec)); RETURN_IF_ERROR(w.Start());   // ... serving ...
//   queue.Close(); w.Join();
#ifndef CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_
#define CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "server/backend/model_instance.h"
#include "server/core/host_policy.h"
#include "server/core/model_spec.h"
#include "server/core/model_stats.h"
#include "server/scheduler/completion_pool.h"
#include "server/scheduler/keep_warm.h"
#include "server/scheduler/model_queue.h"

namespace chronoserve::server {

// Where a worker thread's time goes (chronoserve_worker_seconds_total): waiting for requests,
// or busy with one of the others. Together they cover the thread's wall time since Start(), but for
// the few instructions between two phases.
enum class WorkerPhase {
  kWait,      // blocked until a batch is due (taking it included)
  kTake,      // taking a due batch without blocking (pipelined, a batch on the device)
  kExecute,   // one batch start to end: gather, copies, forward, device wait, scatter (not pipelined)
  kGather,    // pipelined: gather a batch's request inputs into the staging buffers
  kLaunch,    // pipelined: enqueue a gathered batch's copies and forward (and its events)
  kFinish,    // pipelined: wait for a launched batch's device work, read its spans, scatter outputs
  kComplete,  // statistics, per-request timing, and handing the requests to be answered
  kKeepWarm,  // keep-warm runs while idle
};
inline constexpr int kWorkerPhaseCount = 8;
// "wait", "take", "execute", "gather", "launch", "finish", "complete", "keep_warm".
const char* WorkerPhaseName(WorkerPhase phase);

// common/launch_bound.h's rule for a batch: launch >= 80% of compute on a device-timed (CUDA-event)
// batch; the host, not the GPU, sets the pace, and CUDA graphs would help.
bool IsLaunchBound(const BatchTiming& timing);

struct WarmupOptions {
  int runs_per_batch_size = 2;  // TorchScript profiles the first run of a shape
  // When set (by a shutdown signal during loading), the warm-up stops before its next run and
  // fails CANCELLED. Null = never. Not owned; outlives the warm-up.
  const std::atomic<bool>* stop = nullptr;
};

class Worker {
 public:
  // The longest an idle worker waits for requests before adding that wait to phase_ns(kWait).
  static constexpr int64_t kWaitAccountingSliceNs = 1'000'000'000;

  // `completions` (may be null: complete inline) answers finished requests off this thread.
  Worker(int index, std::unique_ptr<ModelInstance> instance, ModelQueue* queue, ModelStats* stats,
         const Clock* clock, CompletionPool* completions = nullptr);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs the model on random inputs at every batch size it will serve (1..max_batch_size, or the
  // config's model_warmup samples) so no client pays for first-run costs, then lets the instance
  // prepare for serving (CUDA graph capture) and adopts the spec's keep-warm settings (an invalid
  // setting is INVALID_ARGUMENT). Before Start() only.
  absl::Status Warmup(const ModelSpec& spec, const WarmupOptions& options);

  // Starts the thread, pinned to the policy's CPUs and at its nice value where it sets them
  // (--host-policy); returns once it runs. When the thread cannot be pinned or given that nice value
  // it ends at once and the error (naming the model, worker and what was refused) is returned;
  // Join() still applies.
  absl::Status Start(const HostPolicy& policy = {});
  // Waits for the thread to finish, then logs its time by phase and its batches; the queue must have
  // been closed.
  // Idempotent.
  void Join();

  int index() const { return index_; }
  // The batch sizes its warm-up ran (warmup_sizes.h), sorted; set by Warmup.
  const std::vector<int>& warmup_sizes() const { return warmup_sizes_; }
  const ModelInstance& instance() const { return *instance_; }

  // Batches the thread took from its queue and ended since Start(), whatever their outcome: the
  // server's serving warm-up included, as in phase_ns; the model's warm-up runs (before Start),
  // keep-warm runs and requests dropped without a batch not. With phase_ns, the time per batch
  // (for metrics; any thread).
  int64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // Keep-warm runs completed since Start() (for metrics; any thread).
  int64_t keep_warm_runs() const { return keep_warm_runs_.load(std::memory_order_relaxed); }
  // Served batches flagged by IsLaunchBound (for metrics; any thread).
  int64_t launch_bound_batches() const {
    return launch_bound_batches_.load(std::memory_order_relaxed);
  }
  // Whether the last served batch was launch-bound (for metrics; any thread).
  bool last_batch_launch_bound() const { return last_launch_bound_.load(std::memory_order_relaxed); }
  // The thread's time in `phase` since Start(), ns (for metrics; any thread). An idle worker adds
  // its wait at least every kWaitAccountingSliceNs; the other phases are added as they end.
  int64_t phase_ns(WorkerPhase phase) const {
    return phase_ns_[static_cast<int>(phase)].load(std::memory_order_relaxed);
  }

 private:
  // A launched batch of a pipelining instance, until Finish.
  struct InFlight {
    Batch batch;
    BatchTiming timing;
    int slot = 0;
  };

  // When the worker took a batch from the queue (its dequeue stamp) and when its own work on it
  // began (later when requests dropped with it were answered first).
  struct Taken {
    int64_t dequeued_ns = 0;
    int64_t busy_from_ns = 0;
  };

  void Loop();
  // Blocks for the next batch, running keep-warm while idle; kTimeout is never returned.
  ModelQueue::WaitResult WaitForBatch(Batch* batch, Batch* dropped);
  // Returns when its device work ended (before the requests were completed).
  int64_t RunBatch(Batch batch, Taken taken);
  // Pipelined: launches `batch` into the slot `in_flight` does not use. On failure the batch is
  // answered with the error and nullopt is returned.
  std::optional<InFlight> LaunchBatch(Batch batch, const std::optional<InFlight>& in_flight, Taken taken);
  // Pipelined: waits for a launched batch and completes it; returns when its device work ended.
  // `start_ns`: when the worker turned to it (its finish phase), now when not given.
  int64_t FinishBatch(InFlight flight, std::optional<int64_t> start_ns = std::nullopt);
  // Common to both: the batch's stamps before the instance runs it.
  void BeginBatch(BatchTiming* timing, bool behind_another, const Taken& taken);
  // Stamps the batch's dequeue time (`dequeued_ns`, or now) and this worker's index.
  void StampDequeued(BatchTiming* timing, int64_t dequeued_ns = 0) const;
  // Common to both: statistics, per-request timing, then the completions.
  void EndBatch(Batch batch, const BatchTiming& timing, const absl::Status& status);
  void RunKeepWarm();
  // Warm-up: one synthetic batch of `items` run to completion (slot 0).
  absl::Status WarmupRun(const ModelSpec& spec, int items, const std::map<std::string, std::vector<int64_t>>& dims,
                         std::mt19937_64& rng);
  // Warm-up of a pipelined worker's second slot and copy stream, first used under load: two
  // batches of `items`, the second launched behind the first as a busy worker does, so they (and
  // that slot's buffers, at their largest) exist before READY.
  absl::Status WarmupPipelinedPair(const ModelSpec& spec, int items, std::mt19937_64& rng);
  void NoteLaunchBound(const BatchTiming& timing);
  // "wait 1.234 s, take 0.010 s, ..." over every phase.
  std::string PhaseSummary() const;
  // Adds the time from `since_ns` to now to `phase`; returns now.
  int64_t Account(WorkerPhase phase, int64_t since_ns);
  // Adds [since_ns, until_ns) to `phase`.
  void Account(WorkerPhase phase, int64_t since_ns, int64_t until_ns);

  const int index_;
  std::unique_ptr<ModelInstance> instance_;
  ModelQueue* const queue_;
  ModelStats* const stats_;
  CompletionPool* const completions_;
  const Clock* const clock_;
  std::string model_;           // the spec's Label(), for errors and logs; set by Warmup
  KeepWarmConfig keep_warm_;    // set by Warmup; turned off on the worker thread if a run fails
  // Worker thread only (set by Start before the thread runs):
  bool served_any_ = false;
  bool keep_warm_lapsed_ = false;  // keep-warm is done for this idle spell
  int64_t idle_since_ns_ = 0;      // end of the last batch (or Start)
  int64_t last_keep_warm_ns_ = 0;  // start of the last keep-warm run
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> keep_warm_runs_{0};
  std::vector<int> warmup_sizes_;
  std::atomic<int64_t> launch_bound_batches_{0};
  std::atomic<bool> last_launch_bound_{false};
  std::array<std::atomic<int64_t>, kWorkerPhaseCount> phase_ns_{};
  std::thread thread_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_
