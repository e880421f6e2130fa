#include "server/scheduler/batch_policy.h"

#include <algorithm>

namespace chronoserve::server {
namespace {
BatchDecision Execute(size_t count) {
  BatchDecision d;
  d.action = BatchDecision::Action::kExecute;
  d.count = count;
  return d;
}
bool IsPreferred(const BatchPolicyConfig& config, int64_t items) {
  return std::find(config.preferred_batch_sizes.begin(), config.preferred_batch_sizes.end(),
                   items) != config.preferred_batch_sizes.end();
}
}  // namespace

BatchDecision DecideBatch(const std::vector<QueuedView>& queue, int64_t now_ns,
                          const BatchPolicyConfig& config) {
  if (queue.empty()) return BatchDecision{};
  if (!config.dynamic || config.max_batch_size <= 0) return Execute(1);

  // The compatible prefix: same shape key as the head, total items within max_batch_size.
  const std::string& head_key = *queue.front().shape_key;
  size_t count = 0;
  int64_t items = 0;
  size_t largest_preferred_count = 0;  // longest prefix whose size is a preferred batch size
  bool blocked = false;                // the next request cannot join this batch
  for (const QueuedView& q : queue) {
    if (*q.shape_key != head_key || items + q.items > config.max_batch_size) {
      blocked = true;
      break;
    }
    items += q.items;
    ++count;
    if (IsPreferred(config, items)) largest_preferred_count = count;
  }
  if (count == 0) return Execute(1);  // a single request larger than allowed: let the worker fail it

  // A batch that cannot grow, or is full or preferred, goes now.
  if (blocked || items == config.max_batch_size || IsPreferred(config, items)) {
    return Execute(count);
  }
  const int64_t deadline = queue.front().enqueued_ns + config.max_queue_delay_ns;
  if (now_ns >= deadline) {
    return Execute(largest_preferred_count > 0 ? largest_preferred_count : count);
  }
  BatchDecision wait;
  wait.wake_ns = deadline;
  return wait;
}

}  // namespace chronoserve::server
