// Worker: one thread, one ModelInstance (on GPU: one CUDA stream). Pulls batches from its model's
// queue, executes them, and completes every request (the completion callback answers the client).
// Owned by the model's runtime; Warmup() runs on the caller's thread before Start().
//
//   Worker w(...); RETURN_IF_ERROR(w.Warmup(spec)); w.Start();   // ... serving ...
//   queue.Close(); w.Join();
#ifndef CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_
#define CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/clock.h"
#include "server/backend/model_instance.h"
#include "server/core/model_spec.h"
#include "server/core/model_stats.h"
#include "server/scheduler/model_queue.h"

namespace chronoserve::server {

struct WarmupOptions {
  int runs_per_batch_size = 2;  // TorchScript profiles the first run of a shape
};

class Worker {
 public:
  Worker(int index, std::unique_ptr<ModelInstance> instance, ModelQueue* queue, ModelStats* stats,
         const Clock* clock);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs the model on random inputs at every batch size it will serve (1..max_batch_size, or the
  // config's model_warmup samples) so no client pays for first-run costs. Before Start() only.
  absl::Status Warmup(const ModelSpec& spec, const WarmupOptions& options);

  // Starts the thread; returns once it runs.
  void Start();
  // Waits for the thread to finish; the queue must have been closed. Idempotent.
  void Join();

  int index() const { return index_; }
  const ModelInstance& instance() const { return *instance_; }

 private:
  void Loop();
  void RunBatch(Batch batch);

  const int index_;
  std::unique_ptr<ModelInstance> instance_;
  ModelQueue* const queue_;
  ModelStats* const stats_;
  const Clock* const clock_;
  bool served_any_ = false;  // worker thread only
  std::thread thread_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_WORKER_H_
