// ModelQueue: one model's bounded request queue, shared by that model's workers, which pull
// batches from it as DecideBatch() allows. Requests whose deadline passed, whose client cancelled,
// or whose queue timeout expired with timeout_action REJECT are handed back as `dropped` (never
// batched) for the worker to answer; with DELAY a request whose timeout expired waits behind every
// request whose timeout has not (Triton's semantics): a batch takes the queue's requests first,
// then delayed ones. Thread-safe: the gRPC handlers call Enqueue, workers call NextBatch, and the
// model's reaper thread AwaitDueWhileWorkersBusy (what comes due while no worker waits).
//
// Taking a batch costs time in the batch's size, not the queue's: the policy sees only the
// requests that can join the next batch, and the whole queue is scanned for requests to drop only
// when one may be due (a deadline or queue timeout reached) or after Poke() (a client cancelled).
//
//   handler: RETURN_IF_ERROR(queue.Enqueue(request));       // owns `request` only on OK
//   worker:  while (queue.NextBatch(&batch, &dropped)) { run(batch); answer(dropped); }
//   idle work: switch (queue.NextBatchUntil(&batch, &dropped, due_ns)) { case kTimeout: ... }
#ifndef CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_
#define CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_

#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

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
  // `model`: how its errors name the model (ModelSpec::Label(): "model 'm'", with the version
  // when several are served).
  ModelQueue(std::string model, BatchPolicyConfig policy, QueuePolicySpec queue_policy,
             const Clock* clock);
  ~ModelQueue();

  // Takes ownership of `request` only when it returns OK (then `request` is null).
  // RESOURCE_EXHAUSTED when max_queue_size requests are waiting, or when the request's input bytes
  // would take the queued requests' past max_queue_bytes; UNAVAILABLE once closed. Before refusing,
  // a full queue drops the requests a worker's scan would (cancelled, past their deadline or queue
  // timeout) and answers them on this thread, so dead requests never hold a live one out.
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
  // A request that comes later is refused UNAVAILABLE, "model 'M': <why>; the request was not
  // queued" (the first Close's `why`).
  void Close(const std::string& why = "the model is shutting down");
  // Close, and give up on every request still waiting: each is answered here, on the caller's
  // thread, with UNAVAILABLE ("model 'M': <reason>; the request was not executed"), never batched,
  // without waiting for a worker that is busy with a batch (which runs to its end). For the
  // server's exit timeout: its answers must go out before gRPC cancels the calls.
  // Returns how many requests it answered.
  size_t CloseAbandoningQueued(const std::string& reason);

  // A client cancelled a request (its CancelFlag is set): the next batch taken first drops every
  // cancelled request, and waiting workers wake to do so (or, every worker busy, the reaper).
  void Poke();

  // For the queue's reaper thread (ModelRuntime's): a worker notices that a queued request's time
  // has come (its deadline, its queue timeout, its client's cancellation) only when it takes a
  // batch, so with every worker busy the request would be answered when a batch ends, not when its
  // time comes. This blocks while some worker waits on the queue or no request is due, then drops
  // the requests due into `dropped` (each with its final status set) for the caller to answer, and
  // returns true; false once the queue is closed and empty (a closed queue is drained by its workers,
  // and what comes due meanwhile is still answered on time).
  bool AwaitDueWhileWorkersBusy(Batch* dropped);

  size_t size() const;

  // Blocks until at least `n` requests are waiting or `timeout` passes; returns whether they are.
  // Lets tests (and diagnostics) know a request was accepted without polling.
  bool WaitForSize(size_t n, absl::Duration timeout) const;

 private:
  enum class Fate { kQueued, kDropped, kDelayed };
  // Why a request left the queue unexecuted. A scan records only this under mu_; the request's
  // status (naming the model and what happened) is built from it once mu_ is released.
  enum class DropCause : uint8_t { kAbandoned, kCancelled, kDeadlinePassed, kQueueTimeout };
  // The requests a scan dropped, and why each was (causes[i] is requests[i]'s).
  struct Drops {
    Batch* requests;
    std::vector<DropCause> causes;
  };
  int64_t TimeoutAt(const InferRequest& r) const;  // when its queue-policy timeout expires (kNever: none)
  // When `r` is next due to be judged: its deadline, or, while it is not `delayed`, its queue-policy
  // timeout, whichever comes first (kNever: neither). Enqueue and Judge both keep next_expiry_ns_ by it.
  int64_t DueAt(const InferRequest& r, bool delayed) const;
  // Requests the policy looks at: those that can join the next batch, and one more.
  size_t BatchReach() const;
  // What becomes of a queued request at `now_ns` (a dropped one's `cause` is set); `delayed`: it
  // is in delayed_ already. Updates `next_expiry` with the request's next due time if it stays.
  Fate Judge(const InferRequest& r, int64_t now_ns, bool delayed, int64_t* next_expiry, DropCause* cause) const;
  // The final status of a request dropped for `cause` other than kAbandoned (whose status
  // CloseAbandoningQueued set). Builds the message: call it without mu_.
  absl::Status DropStatus(const InferRequest& r, DropCause cause) const;
  // Gives each dropped request its final status, from its cause; without mu_.
  void SetDropStatuses(const Drops& drops) const ABSL_LOCKS_EXCLUDED(mu_);

  // Enqueue under mu_: a full queue is first rid of the requests a scan would drop (into `drops`).
  absl::Status EnqueueLocked(std::unique_ptr<InferRequest>& request, uint64_t bytes, Drops* drops)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a request holding `bytes` of inputs would pass max_queue_size or max_queue_bytes.
  bool FullLocked(uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Moves the requests to drop into `drops` (and DELAY's expired ones into delayed_): all of
  // them when one may be due, else only cancelled ones among those the next batch could take.
  // Returns when the next one may be due (0 = none).
  int64_t DropDeadLocked(int64_t now_ns, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every waiting request, with status `abandoned` (CloseAbandoningQueued). Then the steps of
  // DropDeadLocked: the full scan of both deques (returns the next due time, kNever = none); the
  // cancelled ones within BatchReach().
  void DropAllAbandonedLocked(const absl::Status& abandoned, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t ScanAllLocked(int64_t now_ns, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The full scan, when a cancellation was announced (Poke) or a request's time may have come;
  // false (nothing scanned) otherwise. Keeps next_expiry_ns_.
  bool ScanAllIfDueLocked(int64_t now_ns, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropCancelledWithinReachLocked(int64_t now_ns, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Judges each request of `q` (delayed_ when `delayed`), dropping or delaying those whose time
  // came and sliding the rest forward in order; lowers `next` to the next due time of those kept.
  void CompactLocked(std::deque<std::unique_ptr<InferRequest>>& q, bool delayed, int64_t now_ns, Drops* drops,
                     int64_t* next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `r` into `drops` for `cause`, giving back the bytes it held.
  void DropLocked(std::unique_ptr<InferRequest>& r, DropCause cause, Drops* drops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool EmptyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && delayed_.empty(); }
  // Wakes the reaper when no worker waits on the queue and a request is due before the reaper's
  // wake-up (or a cancellation was announced): it would otherwise sleep past it.
  void WakeReaperIfDueSoonerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the reaper to end once the queue is closed and empty.
  void SignalReaperIfDrainedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NextBatch, NextBatchUntil and TryNextBatch: takes mu_ for NextBatchLocked, then, released,
  // sets the dropped requests' statuses.
  WaitResult Take(Batch* batch, Batch* dropped, int64_t idle_deadline_ns, bool block) ABSL_LOCKS_EXCLUDED(mu_);
  // NextBatch with an optional deadline (0 = none) for an empty queue; `block` false: kTimeout
  // instead of any wait. Dropped requests leave without their status (see SetDropStatuses).
  WaitResult NextBatchLocked(Batch* batch, Drops* drops, int64_t idle_deadline_ns, bool block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  const std::string model_;
  const BatchPolicyConfig policy_;
  const QueuePolicySpec queue_policy_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::unique_ptr<InferRequest>> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<InferRequest>> delayed_ ABSL_GUARDED_BY(mu_);  // DELAY: timed out
  // No queued request is due before this (a deadline, or a queue timeout), so no scan is needed
  // before it; a lower bound, moved up by each full scan.
  int64_t next_expiry_ns_ ABSL_GUARDED_BY(mu_) = kNever;
  bool cancel_pending_ ABSL_GUARDED_BY(mu_) = false;  // Poke() since the last full scan
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string closed_why_ ABSL_GUARDED_BY(mu_);  // Close's `why`
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Workers waiting in NextBatch / NextBatchUntil: while one is, it notices what comes due itself.
  int waiting_workers_ ABSL_GUARDED_BY(mu_) = 0;
  // When the reaper next wakes by itself (kNever: only when woken); its own condition variable, so
  // that a request's arrival never wakes it in passing.
  int64_t reaper_due_ns_ ABSL_GUARDED_BY(mu_) = kNever;
  absl::CondVar reaper_cv_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_MODEL_QUEUE_H_
