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
}  // namespace

BatchDecision DecideBatch(const std::vector<QueuedView>& queue, int64_t now_ns,
                          const BatchPolicyConfig& config, bool draining) {
  if (queue.empty()) return BatchDecision{};
  if (!config.dynamic || config.max_batch_size <= 0) return Execute(1);

  // As Triton normalises the config: no preferred sizes means max_batch_size is the preferred one.
  const std::vector<int> only_max{config.max_batch_size};
  const std::vector<int>& preferred =
      config.preferred_batch_sizes.empty() ? only_max : config.preferred_batch_sizes;
  const int64_t max_preferred = *std::max_element(preferred.begin(), preferred.end());
  auto is_preferred = [&](int64_t items) {
    return std::find(preferred.begin(), preferred.end(), items) != preferred.end();
  };

  // Walk the compatible prefix (same shape key as the head, within max_batch_size), remembering
  // the longest prefix that may go before the delay: the last one whose size is preferred or, if
  // the batch would grow past every preferred size first, the one just before it does.
  const std::string& head_key = *queue.front().shape_key;
  size_t count = 0;
  int64_t items = 0;
  size_t send_early = 0;   // requests in that prefix; 0 = none
  bool blocked = false;    // the next request cannot join this batch
  // The batch's oldest request times the delay (as Triton, from the oldest in the pending batch):
  // a delayed request (timeout_action DELAY) comes after the fresh ones but was queued before them.
  int64_t oldest_ns = queue.front().enqueued_ns;
  for (const QueuedView& q : queue) {
    if (count == 0) {
      if (q.items > config.max_batch_size) return Execute(1);  // oversized: the worker fails it
    } else {
      if (items + q.items > max_preferred && send_early == 0) send_early = count;
      if (*q.shape_key != head_key || items + q.items > config.max_batch_size) {
        blocked = true;
        break;
      }
    }
    items += q.items;
    ++count;
    oldest_ns = std::min(oldest_ns, q.enqueued_ns);
    if (is_preferred(items)) send_early = count;
  }

  const int64_t deadline = oldest_ns + config.max_queue_delay_ns;
  const bool delay_passed =
      draining || queue.front().synthetic || (config.max_queue_delay_ns > 0 && now_ns >= deadline);
  // Before the delay a preferred (or can-grow-no-further) prefix goes at once; after it, or with
  // no delay configured, or when the batch cannot grow, everything compatible goes.
  if (send_early > 0 && !delay_passed) return Execute(send_early);
  if (blocked || items >= max_preferred || delay_passed || config.max_queue_delay_ns == 0) {
    return Execute(count);
  }
  BatchDecision wait;
  wait.wake_ns = deadline;
  return wait;
}

}  // namespace chronoserve::server
