// ModelQueue: one model's bounded request queue, shared by that model's workers, which pull
// batches from it as DecideBatch() allows. Requests whose deadline passed, whose client cancelled,
// or whose queue timeout expired are handed back as `dropped` (never batched) for the worker to
// answer. Thread-safe: the gRPC handlers call Enqueue, workers call NextBatch.
//
//   handler: RETURN_IF_ERROR(queue.Enqueue(request));       // owns `request` only on OK
//   worker:  while (queue.NextBatch(&batch, &dropped)) { run(batch); answer(dropped); }
//   idle work: switch (queue.NextBatchUntil(&batch, &dropped, due_ns)) { case kTimeout: ... }
#ifndef CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_
#define CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_

#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/core/infer_request.h"
#include "server/core/model_spec.h"
#include "server/scheduler/batch_policy.h"

namespace chronoserve::server {

class ModelQueue {
 public:
  ModelQueue(std::string model, BatchPolicyConfig policy, QueuePolicySpec queue_policy,
             const Clock* clock);
  ~ModelQueue();

  // Takes ownership of `request` only when it returns OK (then `request` is null).
  // RESOURCE_EXHAUSTED when max_queue_size requests are waiting, or when the request's input bytes
  // would take the queued requests' past max_queue_bytes; UNAVAILABLE once closed.
  absl::Status Enqueue(std::unique_ptr<InferRequest>& request);

  // The input bytes a request holds while queued (its message's or its own; not those in a
  // client's shared-memory region).
  static uint64_t HeldBytes(const InferRequest& request);
  // The queued requests' HeldBytes.
  uint64_t queued_bytes() const;

  // Blocks until a batch is due or requests were dropped; fills `batch` (possibly empty) and
  // `dropped` (each with its final status set). Returns false once the queue is closed and empty.
  bool NextBatch(Batch* batch, Batch* dropped);

  enum class WaitResult { kBatch, kTimeout, kClosed };
  // Like NextBatch, but gives up at `deadline_ns` (this queue's clock) while no request is queued:
  // kBatch = `batch` and/or `dropped` filled (as NextBatch returning true); kTimeout = the deadline
  // passed with the queue empty; kClosed = closed and empty. Requests waiting for a batch to form
  // are never abandoned for the deadline. Poke() makes a waiting worker re-read the clock.
  WaitResult NextBatchUntil(Batch* batch, Batch* dropped, int64_t deadline_ns);

  // Never waits: kBatch when a batch is due now or requests were dropped (as NextBatch), else
  // kTimeout (nothing due yet, including a batch that is still waiting out its queue delay) or
  // kClosed. A pipelined worker asks this while its previous batch is still on the device.
  WaitResult TryNextBatch(Batch* batch, Batch* dropped);

  // Stops accepting; waiting workers drain what is queued, then NextBatch returns false. Idempotent.
  void Close();
  // Close, and give up on every request still waiting: workers hand each back as `dropped` with
  // UNAVAILABLE ("model 'M': <reason>; the request was not executed"), never batched; a batch a
  // worker already took runs to its end. For the server's exit timeout.
  void CloseAbandoningQueued(const std::string& reason);

  // Wakes waiting workers so they re-check cancellations (called when a client cancels).
  void Poke();

  size_t size() const;

  // Blocks until at least `n` requests are waiting or `timeout` passes; returns whether they are.
  // Lets tests (and diagnostics) know a request was accepted without polling.
  bool WaitForSize(size_t n, absl::Duration timeout) const;

 private:
  // Moves expired or cancelled requests out of the queue; returns the earliest live deadline (0 = none).
  int64_t DropDeadLocked(int64_t now_ns, Batch* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t EffectiveDeadline(const InferRequest& r) const;
  // NextBatch with an optional deadline (0 = none) for an empty queue; `block` false: kTimeout
  // instead of any wait.
  WaitResult NextBatchLocked(Batch* batch, Batch* dropped, int64_t idle_deadline_ns, bool block = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string model_;
  const BatchPolicyConfig policy_;
  const QueuePolicySpec queue_policy_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::unique_ptr<InferRequest>> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status abandoned_ ABSL_GUARDED_BY(mu_);  // not OK: every queued request is dropped with it
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_
