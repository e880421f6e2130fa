// The dynamic batching decision as a pure function of (queue snapshot, now, config), with the
// semantics of Triton's dynamic batcher (GetDynamicBatch):
//  - no preferred_batch_size means max_batch_size is the preferred size;
//  - before the oldest request has waited max_queue_delay, the longest prefix whose size is
//    preferred goes at once (or, when the next request would pass the largest preferred size, the
//    prefix before it);
//  - otherwise everything compatible goes at once when the delay has passed, when no delay is
//    configured or when the next request cannot join; else the batch waits for the delay;
//  - never more than max_batch_size items, never requests whose variable dims differ.
// Table-tested; no threads, no clock.
#ifndef CHRONOSERVE_SERVER_SCHEDULER_BATCH_POLICY_H_
#define CHRONOSERVE_SERVER_SCHEDULER_BATCH_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace chronoserve::server {

struct BatchPolicyConfig {
  int max_batch_size = 0;  // 0: the model does not batch; each request runs alone
  bool dynamic = false;    // dynamic_batching {} present
  std::vector<int> preferred_batch_sizes;  // ascending
  int64_t max_queue_delay_ns = 0;
};

// What the policy needs to know about one queued request, oldest first.
struct QueuedView {
  int64_t items = 1;               // batch dim of the request
  int64_t enqueued_ns = 0;
  const std::string* shape_key = nullptr;  // requests batch together only if keys are equal
  // The server's own (serving warm-up): at the head, it does not wait out max_queue_delay, which
  // would hold READY back by the delay for each warm-up request that cannot fill a batch.
  bool synthetic = false;
};

struct BatchDecision {
  enum class Action { kWait, kExecute };
  Action action = Action::kWait;
  size_t count = 0;        // kExecute: how many requests from the head form the batch
  int64_t wake_ns = 0;     // kWait: decide again at this time (0 = only when a request arrives)
};

// `draining`: the queue is closed and runs what it holds now, deciding as if every delay had passed:
// everything compatible goes (up to max_batch_size), past the preferred sizes, whatever the delay.
BatchDecision DecideBatch(const std::vector<QueuedView>& queue, int64_t now_ns,
                          const BatchPolicyConfig& config, bool draining = false);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SCHEDULER_BATCH_POLICY_H_
