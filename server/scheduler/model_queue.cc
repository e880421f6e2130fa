#include "server/scheduler/model_queue.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace chronoserve::server {
namespace {
std::string Mib(uint64_t bytes) { return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20)); }
}  // namespace

uint64_t ModelQueue::HeldBytes(const InferRequest& request) {
  uint64_t bytes = 0;
  for (const InputTensor& in : request.inputs) {
    if (!in.shared_memory) bytes += in.byte_size;
  }
  return bytes;
}

ModelQueue::ModelQueue(std::string model, BatchPolicyConfig policy, QueuePolicySpec queue_policy,
                       const Clock* clock)
    : model_(std::move(model)),
      policy_(std::move(policy)),
      queue_policy_(queue_policy),
      clock_(clock) {}

ModelQueue::~ModelQueue() = default;

absl::Status ModelQueue::Enqueue(std::unique_ptr<InferRequest>& request) {
  const uint64_t bytes = HeldBytes(*request);  // before the lock the workers share
  Batch dropped;
  Drops drops{&dropped, {}};
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = EnqueueLocked(request, bytes, &drops);
  }
  if (!dropped.empty()) {
    // Requests already dead (cancelled, or past their deadline or queue timeout) that filled the
    // queue: answered here, as a worker's next scan would have, so they hold no live one out.
    SetDropStatuses(drops);
    for (auto& r : dropped) InferRequest::Complete(std::move(r), absl::OkStatus());
  }
  return status;
}

bool ModelQueue::FullLocked(uint64_t bytes) const {
  return (queue_policy_.max_queue_size > 0 && queue_.size() + delayed_.size() >= queue_policy_.max_queue_size) ||
         (queue_policy_.max_queue_bytes > 0 && queued_bytes_ + bytes > queue_policy_.max_queue_bytes);
}

absl::Status ModelQueue::EnqueueLocked(std::unique_ptr<InferRequest>& request, uint64_t bytes, Drops* drops) {
  if (closed_) {
    return absl::UnavailableError(absl::StrCat(model_, ": ", closed_why_, "; the request was not queued"));
  }
  if (queue_policy_.max_queue_bytes > 0 && bytes > queue_policy_.max_queue_bytes) {
    // Never fits, however empty the queue: not worth a retry (so said before any full-queue answer).
    return absl::InvalidArgumentError(absl::StrCat(
        model_, ": this request's inputs hold ", Mib(bytes), ", more than the model's queue may ever hold (",
        Mib(queue_policy_.max_queue_bytes), ", --max-queue-mib); send fewer items per request or raise the limit"));
  }
  // Full, but some of those waiting may be dead and not yet scanned for (the workers busy): the
  // scan a worker would make, when a cancellation was announced or a request's time may have come
  // (never under a steady overload of live requests, so a refusal stays cheap).
  if (FullLocked(bytes)) ScanAllIfDueLocked(clock_->NowNs(), drops);
  const size_t waiting = queue_.size() + delayed_.size();
  if (queue_policy_.max_queue_size > 0 && waiting >= queue_policy_.max_queue_size) {
    return absl::ResourceExhaustedError(absl::StrCat(model_, ": queue is full (",
                                                     waiting, waiting == 1 ? " request" : " requests",
                                                     " waiting, max_queue_size ",
                                                     queue_policy_.max_queue_size, ")"));
  }
  if (queue_policy_.max_queue_bytes > 0 && queued_bytes_ + bytes > queue_policy_.max_queue_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        model_, ": queue is full (", waiting, waiting == 1 ? " request waiting holds " : " requests waiting hold ",
        Mib(queued_bytes_),
        " of inputs; this request's ", Mib(bytes), " would pass the limit of ", Mib(queue_policy_.max_queue_bytes),
        ", --max-queue-mib)"));
  }
  queued_bytes_ += bytes;
  request->timeline.enqueued_ns = clock_->NowNs();
  next_expiry_ns_ = std::min(next_expiry_ns_, DueAt(*request, /*delayed=*/false));
  // Cancelled before it got here (the client gave up while the request was built; the transport's
  // Poke may have come, and been used up, before it was queued): announced as a Poke would, so the
  // reaper answers it and a full queue drops it, rather than waiting for a batch to reach it.
  if (request->IsCancelled()) cancel_pending_ = true;
  queue_.push_back(std::move(request));
  cv_.Signal();
  WakeReaperIfDueSoonerLocked();
  return absl::OkStatus();
}

void ModelQueue::WakeReaperIfDueSoonerLocked() {
  if (waiting_workers_ > 0) return;
  const int64_t due = cancel_pending_ ? 0 : next_expiry_ns_;
  if (due >= reaper_due_ns_) return;
  reaper_due_ns_ = due;  // no second signal before the reaper has slept again
  reaper_cv_.Signal();
}

void ModelQueue::SignalReaperIfDrainedLocked() {
  if (closed_ && EmptyLocked()) reaper_cv_.SignalAll();  // nothing more can come due: the reaper may end
}

bool ModelQueue::AwaitDueWhileWorkersBusy(Batch* dropped) {
  dropped->clear();
  Drops drops{dropped, {}};
  {
    absl::MutexLock lock(&mu_);
    while (true) {
      // A closed queue still holds requests while its workers drain it, every one of them busy:
      // what comes due meanwhile is answered then too. Empty and closed, nothing more can come.
      if (closed_ && EmptyLocked()) return false;
      const int64_t now = clock_->NowNs();
      if (waiting_workers_ == 0) {
        ScanAllIfDueLocked(now, &drops);
        if (!dropped->empty()) break;
      }
      // A waiting worker wakes by itself for what comes due; the reaper sleeps until woken.
      reaper_due_ns_ = waiting_workers_ > 0 ? kNever : next_expiry_ns_;
      if (reaper_due_ns_ == kNever) {
        reaper_cv_.Wait(&mu_);
      } else {
        reaper_cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(std::max<int64_t>(reaper_due_ns_ - now, 1000)));
      }
    }
    reaper_due_ns_ = kNever;  // awake: WakeReaperIfDueSoonerLocked need not signal until it sleeps
  }
  SetDropStatuses(drops);
  return true;
}

int64_t ModelQueue::TimeoutAt(const InferRequest& r) const {
  if (queue_policy_.default_timeout_microseconds == 0) return kNever;
  return r.timeline.enqueued_ns + static_cast<int64_t>(queue_policy_.default_timeout_microseconds) * 1000;
}

int64_t ModelQueue::DueAt(const InferRequest& r, bool delayed) const {
  const int64_t deadline = r.deadline_ns != 0 ? r.deadline_ns : kNever;
  return delayed ? deadline : std::min(deadline, TimeoutAt(r));
}

size_t ModelQueue::BatchReach() const {
  return policy_.dynamic && policy_.max_batch_size > 0 ? static_cast<size_t>(policy_.max_batch_size) + 1 : 1;
}

ModelQueue::Fate ModelQueue::Judge(const InferRequest& r, int64_t now_ns, bool delayed, int64_t* next_expiry,
                                   DropCause* cause) const {
  // A cancellation is the client's or the deadline's (InferRequest::CancellationCode), however late
  // a worker notices it; without one, the deadline has passed when now is past it.
  const absl::StatusCode cancelled = r.CancellationCode();
  if (cancelled == absl::StatusCode::kCancelled) {
    *cause = DropCause::kCancelled;
    return Fate::kDropped;
  }
  const bool deadline_passed =
      cancelled == absl::StatusCode::kDeadlineExceeded || (r.deadline_ns != 0 && now_ns >= r.deadline_ns);
  if (deadline_passed) {
    *cause = DropCause::kDeadlinePassed;
    return Fate::kDropped;
  }
  if (delayed || now_ns < TimeoutAt(r)) {
    *next_expiry = std::min(*next_expiry, DueAt(r, delayed));
    return Fate::kQueued;
  }
  if (queue_policy_.timeout_action_delay) {
    *next_expiry = std::min(*next_expiry, DueAt(r, /*delayed=*/true));
    return Fate::kDelayed;
  }
  *cause = DropCause::kQueueTimeout;
  return Fate::kDropped;
}

absl::Status ModelQueue::DropStatus(const InferRequest& r, DropCause cause) const {
  switch (cause) {
    case DropCause::kCancelled:
      return absl::CancelledError(
          absl::StrCat(model_, ": the client cancelled the request while it was queued"));
    case DropCause::kDeadlinePassed:
      return absl::DeadlineExceededError(absl::StrCat(
          model_, ": the deadline passed after ",
          std::max<int64_t>(0, r.deadline_ns - r.timeline.enqueued_ns) / 1000,
          " us in the queue; the request was not executed"));
    case DropCause::kQueueTimeout:
      return absl::DeadlineExceededError(absl::StrCat(
          model_, ": queued longer than default_queue_policy.default_timeout_microseconds ",
          queue_policy_.default_timeout_microseconds, " (timeout_action REJECT); the request was not executed"));
    case DropCause::kAbandoned:
      break;
  }
  return r.status;  // set when CloseAbandoningQueued dropped it
}

void ModelQueue::SetDropStatuses(const Drops& drops) const {
  for (size_t i = 0; i < drops.requests->size(); ++i) {
    if (drops.causes[i] == DropCause::kAbandoned) continue;
    InferRequest& r = *(*drops.requests)[i];
    r.status = DropStatus(r, drops.causes[i]);
  }
}

void ModelQueue::DropLocked(std::unique_ptr<InferRequest>& r, DropCause cause, Drops* drops) {
  queued_bytes_ -= HeldBytes(*r);
  drops->requests->push_back(std::move(r));
  drops->causes.push_back(cause);
}

void ModelQueue::DropAllAbandonedLocked(const absl::Status& abandoned, Drops* drops) {
  for (auto* q : {&queue_, &delayed_}) {
    for (auto& r : *q) {
      r->status = abandoned;  // built once, by CloseAbandoningQueued: a copy, no formatting
      DropLocked(r, DropCause::kAbandoned, drops);
    }
    q->clear();
  }
  next_expiry_ns_ = kNever;
}

void ModelQueue::CompactLocked(std::deque<std::unique_ptr<InferRequest>>& q, bool delayed, int64_t now_ns,
                               Drops* drops, int64_t* next) {
  // Compacted in place, without building a second deque: the requests that stay slide forward over
  // those that left, in their order.
  auto kept_end = q.begin();
  for (auto& r : q) {
    DropCause cause = DropCause::kAbandoned;
    switch (Judge(*r, now_ns, delayed, next, &cause)) {
      case Fate::kDropped: DropLocked(r, cause, drops); break;
      case Fate::kDelayed:
        if (!delayed) {
          delayed_.push_back(std::move(r));
          break;
        }
        [[fallthrough]];  // already among the delayed: it keeps its place (never pushed into q)
      case Fate::kQueued:
        if (&*kept_end != &r) *kept_end = std::move(r);
        ++kept_end;
        break;
    }
  }
  q.erase(kept_end, q.end());
}

int64_t ModelQueue::ScanAllLocked(int64_t now_ns, Drops* drops) {
  // delayed_ goes first, so a request timing out now lines up behind the delayed ones (delayed_
  // never grows while it is compacted).
  int64_t next = kNever;
  CompactLocked(delayed_, /*delayed=*/true, now_ns, drops, &next);
  CompactLocked(queue_, /*delayed=*/false, now_ns, drops, &next);
  return next;
}

bool ModelQueue::ScanAllIfDueLocked(int64_t now_ns, Drops* drops) {
  if (!cancel_pending_ && now_ns < next_expiry_ns_) return false;
  next_expiry_ns_ = ScanAllLocked(now_ns, drops);
  cancel_pending_ = false;
  return true;
}

void ModelQueue::DropCancelledWithinReachLocked(int64_t now_ns, Drops* drops) {
  size_t live = 0;
  for (auto* q : {&queue_, &delayed_}) {
    for (auto it = q->begin(); it != q->end() && live < BatchReach();) {
      if ((*it)->IsCancelled()) {
        int64_t unused = kNever;
        DropCause cause = DropCause::kCancelled;
        Judge(**it, now_ns, q == &delayed_, &unused, &cause);  // cancelled: the client's or the deadline's
        DropLocked(*it, cause, drops);
        it = q->erase(it);
      } else {
        ++live;
        ++it;
      }
    }
  }
}

int64_t ModelQueue::DropDeadLocked(int64_t now_ns, Drops* drops) {
  if (!ScanAllIfDueLocked(now_ns, drops)) {
    // Nothing is due, and a cancellation Poke() has not announced yet matters only to requests the
    // next batch could take (the queue's first, then the delayed ones).
    DropCancelledWithinReachLocked(now_ns, drops);
  }
  return next_expiry_ns_ == kNever ? 0 : next_expiry_ns_;
}

bool ModelQueue::NextBatch(Batch* batch, Batch* dropped) {
  return Take(batch, dropped, /*idle_deadline_ns=*/0, /*block=*/true) == WaitResult::kBatch;
}

ModelQueue::WaitResult ModelQueue::NextBatchUntil(Batch* batch, Batch* dropped,
                                                  int64_t deadline_ns) {
  return Take(batch, dropped, deadline_ns, /*block=*/true);
}

ModelQueue::WaitResult ModelQueue::TryNextBatch(Batch* batch, Batch* dropped) {
  return Take(batch, dropped, /*idle_deadline_ns=*/0, /*block=*/false);
}

ModelQueue::WaitResult ModelQueue::Take(Batch* batch, Batch* dropped, int64_t idle_deadline_ns, bool block) {
  batch->clear();
  dropped->clear();
  Drops drops{dropped, {}};
  WaitResult result;
  {
    absl::MutexLock lock(&mu_);
    result = NextBatchLocked(batch, &drops, idle_deadline_ns, block);
  }
  SetDropStatuses(drops);  // the messages are built here, the lock released: workers wait on it
  return result;
}

ModelQueue::WaitResult ModelQueue::NextBatchLocked(Batch* batch, Drops* drops,
                                                   int64_t idle_deadline_ns, bool block) {
  while (true) {
    const int64_t now = clock_->NowNs();
    const int64_t earliest_deadline = DropDeadLocked(now, drops);
    if (EmptyLocked()) {
      SignalReaperIfDrainedLocked();
      if (!drops->requests->empty()) return WaitResult::kBatch;
      if (closed_) return WaitResult::kClosed;
      if (!block) return WaitResult::kTimeout;
      if (idle_deadline_ns != 0 && now >= idle_deadline_ns) return WaitResult::kTimeout;
      ++waiting_workers_;
      if (idle_deadline_ns == 0) {
        cv_.Wait(&mu_);
      } else {
        cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(idle_deadline_ns - now));
      }
      --waiting_workers_;
      continue;
    }
    // Only the requests that can join the next batch: at most max_batch_size, and one more to see
    // that it cannot; the queue's first, then (as Triton's policy queue) the delayed ones.
    std::vector<QueuedView> views;
    views.reserve(std::min(queue_.size() + delayed_.size(), BatchReach()));
    for (const auto* q : {&queue_, &delayed_}) {
      for (const auto& r : *q) {
        if (views.size() == BatchReach()) break;
        views.push_back(QueuedView{r->batch_items, r->timeline.enqueued_ns, &r->shape_key(), r->synthetic});
      }
    }
    // A closed queue drains without waiting: deciding as if every delay had passed takes whole
    // batches (up to max_batch_size), not one request or one preferred size at a time.
    const BatchDecision decision = DecideBatch(views, now, policy_, /*draining=*/closed_);
    if (decision.action == BatchDecision::Action::kExecute || closed_) {
      const size_t count = std::max<size_t>(1, decision.count);
      for (size_t i = 0; i < count; ++i) {
        std::deque<std::unique_ptr<InferRequest>>& source = queue_.empty() ? delayed_ : queue_;
        queued_bytes_ -= HeldBytes(*source.front());
        batch->push_back(std::move(source.front()));
        source.pop_front();
      }
      if (!EmptyLocked()) cv_.Signal();  // another idle worker may take the rest
      WakeReaperIfDueSoonerLocked();       // this worker is busy now: what stays queued is the reaper's
      SignalReaperIfDrainedLocked();
      return WaitResult::kBatch;
    }
    if (!drops->requests->empty()) {
      SignalReaperIfDrainedLocked();
      return WaitResult::kBatch;
    }
    if (!block) return WaitResult::kTimeout;
    int64_t wake = decision.wake_ns;
    if (earliest_deadline != 0) wake = wake == 0 ? earliest_deadline : std::min(wake, earliest_deadline);
    ++waiting_workers_;
    if (wake == 0) {
      cv_.Wait(&mu_);
    } else {
      cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(std::max<int64_t>(wake - now, 1000)));
    }
    --waiting_workers_;
  }
}

void ModelQueue::Close(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!closed_) closed_why_ = why;
  closed_ = true;
  cv_.SignalAll();
  reaper_cv_.SignalAll();
}

size_t ModelQueue::CloseAbandoningQueued(const std::string& reason) {
  const absl::Status abandoned =
      absl::UnavailableError(absl::StrCat(model_, ": ", reason, "; the request was not executed"));
  Batch dropped;
  Drops drops{&dropped, {}};
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) closed_why_ = reason;
    closed_ = true;  // nothing joins the queue it empties
    DropAllAbandonedLocked(abandoned, &drops);
    cv_.SignalAll();
    reaper_cv_.SignalAll();
  }
  const size_t answered = dropped.size();
  for (auto& r : dropped) InferRequest::Complete(std::move(r), absl::OkStatus());
  return answered;
}

void ModelQueue::Poke() {
  absl::MutexLock lock(&mu_);
  cancel_pending_ = true;
  cv_.SignalAll();
  WakeReaperIfDueSoonerLocked();
}

size_t ModelQueue::size() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + delayed_.size();
}

uint64_t ModelQueue::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

bool ModelQueue::WaitForSize(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.size() + delayed_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace chronoserve::server
