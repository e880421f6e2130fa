#include "server/scheduler/model_queue.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace chronoserve::server {
namespace {
constexpr int64_t kGrpcDeadlineSlackNs = 5'000'000;

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
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::UnavailableError(absl::StrCat("model '", model_, "' is shutting down"));
  }
  if (queue_policy_.max_queue_size > 0 && queue_.size() >= queue_policy_.max_queue_size) {
    return absl::ResourceExhaustedError(absl::StrCat("model '", model_, "': queue is full (",
                                                     queue_.size(), " requests waiting, max_queue_size ",
                                                     queue_policy_.max_queue_size, ")"));
  }
  if (queue_policy_.max_queue_bytes > 0 && queued_bytes_ + bytes > queue_policy_.max_queue_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", model_, "': queue is full (", queue_.size(), " requests waiting hold ", Mib(queued_bytes_),
        " of inputs; this request's ", Mib(bytes), " would pass the limit of ", Mib(queue_policy_.max_queue_bytes),
        ", --max-queue-mib)"));
  }
  queued_bytes_ += bytes;
  request->timeline.enqueued_ns = clock_->NowNs();
  queue_.push_back(std::move(request));
  cv_.Signal();
  return absl::OkStatus();
}

int64_t ModelQueue::EffectiveDeadline(const InferRequest& r) const {
  int64_t deadline = r.deadline_ns;
  if (queue_policy_.default_timeout_microseconds > 0 && !queue_policy_.timeout_action_delay) {
    const int64_t timeout =
        r.timeline.enqueued_ns + static_cast<int64_t>(queue_policy_.default_timeout_microseconds) * 1000;
    deadline = deadline == 0 ? timeout : std::min(deadline, timeout);
  }
  return deadline;
}

int64_t ModelQueue::DropDeadLocked(int64_t now_ns, Batch* dropped) {
  if (!abandoned_.ok()) {
    for (auto& r : queue_) {
      r->status = abandoned_;
      dropped->push_back(std::move(r));
    }
    queue_.clear();
    queued_bytes_ = 0;
    return 0;
  }
  int64_t earliest = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    InferRequest& r = **it;
    const int64_t deadline = EffectiveDeadline(r);
    // Deadline first: gRPC also cancels a call whose deadline passed, and that is not the
    // client's cancellation. Its timer (millisecond resolution, its own clock) can fire a little
    // before our steady-clock copy of the deadline, so a cancellation that close to the request's
    // deadline counts as the deadline's.
    const bool cancelled_at_deadline = r.IsCancelled() && r.deadline_ns != 0 &&
                                       now_ns >= r.deadline_ns - kGrpcDeadlineSlackNs;
    if ((deadline != 0 && now_ns >= deadline) || cancelled_at_deadline) {
      r.status = absl::DeadlineExceededError(absl::StrCat(
          "model '", model_, "': the deadline passed after ", (now_ns - r.timeline.enqueued_ns) / 1000,
          " us in the queue; the request was not executed"));
    } else if (r.IsCancelled()) {
      r.status = absl::CancelledError(absl::StrCat("model '", model_, "': the client cancelled the request while it was queued"));
    } else {
      if (deadline != 0) earliest = earliest == 0 ? deadline : std::min(earliest, deadline);
      ++it;
      continue;
    }
    queued_bytes_ -= HeldBytes(r);
    dropped->push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return earliest;
}

bool ModelQueue::NextBatch(Batch* batch, Batch* dropped) {
  batch->clear();
  dropped->clear();
  absl::MutexLock lock(&mu_);
  return NextBatchLocked(batch, dropped, /*idle_deadline_ns=*/0) == WaitResult::kBatch;
}

ModelQueue::WaitResult ModelQueue::NextBatchUntil(Batch* batch, Batch* dropped,
                                                  int64_t deadline_ns) {
  batch->clear();
  dropped->clear();
  absl::MutexLock lock(&mu_);
  return NextBatchLocked(batch, dropped, deadline_ns);
}

ModelQueue::WaitResult ModelQueue::TryNextBatch(Batch* batch, Batch* dropped) {
  batch->clear();
  dropped->clear();
  absl::MutexLock lock(&mu_);
  return NextBatchLocked(batch, dropped, /*idle_deadline_ns=*/0, /*block=*/false);
}

ModelQueue::WaitResult ModelQueue::NextBatchLocked(Batch* batch, Batch* dropped,
                                                   int64_t idle_deadline_ns, bool block) {
  while (true) {
    const int64_t now = clock_->NowNs();
    const int64_t earliest_deadline = DropDeadLocked(now, dropped);
    if (queue_.empty()) {
      if (!dropped->empty()) return WaitResult::kBatch;
      if (closed_) return WaitResult::kClosed;
      if (!block) return WaitResult::kTimeout;
      if (idle_deadline_ns == 0) {
        cv_.Wait(&mu_);
      } else if (now >= idle_deadline_ns) {
        return WaitResult::kTimeout;
      } else {
        cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(idle_deadline_ns - now));
      }
      continue;
    }
    std::vector<QueuedView> views;
    views.reserve(queue_.size());
    for (const auto& r : queue_) {
      views.push_back(QueuedView{r->batch_items, r->timeline.enqueued_ns, &r->shape_key()});
    }
    // A closed queue drains without waiting: deciding as if every delay had passed takes whole
    // batches (up to max_batch_size), not one request at a time.
    const int64_t decide_at = closed_ ? std::numeric_limits<int64_t>::max() : now;
    const BatchDecision decision = DecideBatch(views, decide_at, policy_);
    if (decision.action == BatchDecision::Action::kExecute || closed_) {
      const size_t count = std::max<size_t>(1, decision.count);
      for (size_t i = 0; i < count; ++i) {
        queued_bytes_ -= HeldBytes(*queue_.front());
        batch->push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (!queue_.empty()) cv_.Signal();  // another idle worker may take the rest
      return WaitResult::kBatch;
    }
    if (!dropped->empty()) return WaitResult::kBatch;
    if (!block) return WaitResult::kTimeout;
    int64_t wake = decision.wake_ns;
    if (earliest_deadline != 0) wake = wake == 0 ? earliest_deadline : std::min(wake, earliest_deadline);
    if (wake == 0) {
      cv_.Wait(&mu_);
    } else {
      cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(std::max<int64_t>(wake - now, 1000)));
    }
  }
}

void ModelQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

void ModelQueue::CloseAbandoningQueued(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  abandoned_ = absl::UnavailableError(absl::StrCat("model '", model_, "': ", reason, "; the request was not executed"));
  cv_.SignalAll();
}

void ModelQueue::Poke() {
  absl::MutexLock lock(&mu_);
  cv_.SignalAll();
}

size_t ModelQueue::size() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

uint64_t ModelQueue::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

bool ModelQueue::WaitForSize(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace chronoserve::server
