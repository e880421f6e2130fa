#include "server/scheduler/batch_policy.h"

#include <gtest/gtest.h>

namespace chronoserve::server {
namespace {

const std::string kA = "[4,20,20];";
const std::string kB = "[4,7];";

struct Row {
  const char* name;
  BatchPolicyConfig config;
  std::vector<QueuedView> queue;
  int64_t now_ns;
  BatchDecision::Action action;
  size_t count;
  int64_t wake_ns;
};

BatchPolicyConfig Dynamic(int max, int64_t delay_ns, std::vector<int> preferred = {}) {
  BatchPolicyConfig c;
  c.max_batch_size = max;
  c.dynamic = true;
  c.max_queue_delay_ns = delay_ns;
  c.preferred_batch_sizes = std::move(preferred);
  return c;
}

BatchPolicyConfig NoBatcher(int max) {
  BatchPolicyConfig c;
  c.max_batch_size = max;
  return c;
}

QueuedView Q(int64_t items, int64_t enqueued_ns, const std::string& key = kA) {
  return QueuedView{items, enqueued_ns, &key};
}

using A = BatchDecision::Action;

TEST(BatchPolicyTest, Table) {
  const Row rows[] = {
      {"empty queue waits for arrivals", Dynamic(8, 0), {}, 100, A::kWait, 0, 0},
      {"no dynamic batcher: one request at a time", NoBatcher(8), {Q(1, 0), Q(1, 0)}, 100, A::kExecute, 1, 0},
      {"max_batch_size 0: one request", Dynamic(0, 0), {Q(1, 0), Q(1, 0)}, 100, A::kExecute, 1, 0},
      {"max_batch_size 0: one request at once, whatever the delay", Dynamic(0, 1000), {Q(1, 0), Q(1, 1)}, 2, A::kExecute, 1, 0},
      {"zero delay takes everything available", Dynamic(8, 0), {Q(1, 0), Q(2, 5), Q(1, 9)}, 10, A::kExecute, 3, 0},
      {"never exceeds max_batch_size", Dynamic(4, 0), {Q(2, 0), Q(1, 0), Q(2, 0)}, 10, A::kExecute, 2, 0},
      {"full batch goes at once despite delay", Dynamic(4, 1000), {Q(2, 0), Q(2, 1)}, 2, A::kExecute, 2, 0},
      {"partial batch waits until oldest + delay", Dynamic(8, 1000), {Q(1, 100), Q(1, 200)}, 300, A::kWait, 0, 1100},
      {"partial batch goes when the delay has passed", Dynamic(8, 1000), {Q(1, 100), Q(1, 200)}, 1100, A::kExecute, 2, 0},
      {"different variable dims are never merged", Dynamic(8, 1000), {Q(1, 0, kA), Q(1, 1, kB), Q(1, 2, kA)}, 5, A::kExecute, 1, 0},
      {"head of another shape starts its own batch", Dynamic(8, 0), {Q(1, 0, kB), Q(2, 1, kB), Q(1, 2, kA)}, 5, A::kExecute, 2, 0},
      {"preferred size reached goes before the delay", Dynamic(8, 1000, {2, 4}), {Q(1, 0), Q(1, 1)}, 2, A::kExecute, 2, 0},
      {"a preferred prefix goes at once, the rest stays", Dynamic(8, 1000, {2, 4}), {Q(1, 0), Q(1, 1), Q(1, 2)}, 3, A::kExecute, 2, 0},
      {"the longest preferred prefix goes at once", Dynamic(16, 5000, {4, 8}), {Q(1, 0), Q(1, 1), Q(1, 2), Q(1, 3), Q(1, 4), Q(1, 5)}, 6, A::kExecute, 4, 0},
      {"no preferred prefix yet: waits for the delay", Dynamic(16, 5000, {4, 8}), {Q(1, 0), Q(1, 1)}, 6, A::kWait, 0, 5000},
      {"a full batch past the largest preferred size: the preferred prefix", Dynamic(8, 1000, {4}), {Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0)}, 2, A::kExecute, 4, 0},
      {"zero delay: the preferred prefix, not everything", Dynamic(16, 0, {4}), {Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0), Q(1, 0)}, 2, A::kExecute, 4, 0},
      {"cannot grow to a preferred size: the prefix before it passes the largest", Dynamic(16, 1000, {4}), {Q(3, 0), Q(3, 1)}, 2, A::kExecute, 1, 0},
      {"blocked by another shape: the preferred prefix", Dynamic(8, 1000, {2}), {Q(1, 0), Q(1, 1), Q(1, 2), Q(1, 3, kB)}, 4, A::kExecute, 2, 0},
      {"blocked by another shape, nothing preferred: the batch goes", Dynamic(8, 1000, {4}), {Q(1, 0), Q(1, 1), Q(1, 2, kB)}, 4, A::kExecute, 2, 0},
      {"after the delay: everything, past the preferred sizes", Dynamic(8, 1000, {2, 4}), {Q(1, 0), Q(1, 1), Q(1, 2)}, 1000, A::kExecute, 3, 0},
      {"after the delay: up to max_batch_size", Dynamic(8, 1000, {2}), {Q(3, 0), Q(3, 1), Q(3, 2)}, 1000, A::kExecute, 2, 0},
      {"no preferred sizes: a full batch is the preferred one", Dynamic(4, 1000), {Q(1, 0), Q(1, 1), Q(1, 2), Q(1, 3), Q(1, 4)}, 5, A::kExecute, 4, 0},
      {"after the delay, no preferred prefix: everything", Dynamic(8, 1000, {4}), {Q(1, 0), Q(1, 1), Q(1, 2)}, 1000, A::kExecute, 3, 0},
      {"an oversized request is handed on alone", Dynamic(4, 1000), {Q(9, 0), Q(1, 1)}, 2, A::kExecute, 1, 0},
      // timeout_action DELAY: delayed requests come after the fresh ones, but queued earlier. The
      // delay runs from the batch's oldest request, not from the fresh head.
      {"a delayed request older than the fresh head: the delay runs from it", Dynamic(8, 100), {Q(1, 190), Q(1, 0)}, 210, A::kExecute, 2, 0},
      {"a delayed request older than the fresh head: waits until it + delay", Dynamic(8, 100), {Q(1, 190), Q(1, 50)}, 120, A::kWait, 0, 150},
  };
  for (const Row& row : rows) {
    const BatchDecision d = DecideBatch(row.queue, row.now_ns, row.config);
    EXPECT_EQ(d.action, row.action) << row.name;
    if (row.action == A::kExecute) EXPECT_EQ(d.count, row.count) << row.name;
    if (row.action == A::kWait) EXPECT_EQ(d.wake_ns, row.wake_ns) << row.name;
  }
}

// A closed queue's drain decides as if every delay had passed: everything compatible goes, up to
// max_batch_size, past the preferred sizes, with a delay configured or none (with none, 32 queued
// requests and a preferred size of 4 once drained as eight batches of 4).
TEST(BatchPolicyTest, DrainingTakesEverythingCompatibleUpToMaxBatchSize) {
  const std::vector<QueuedView> queue(40, Q(1, 0));
  for (int64_t delay_ns : {int64_t{0}, int64_t{1000}}) {
    SCOPED_TRACE(delay_ns);
    const BatchPolicyConfig preferred = Dynamic(32, delay_ns, {4});
    EXPECT_EQ(DecideBatch(queue, 1, preferred).count, 4u) << "serving: the preferred prefix";
    const BatchDecision drained = DecideBatch(queue, 1, preferred, /*draining=*/true);
    EXPECT_EQ(drained.action, A::kExecute);
    EXPECT_EQ(drained.count, 32u);
  }
  const std::vector<QueuedView> mixed = {Q(1, 0), Q(2, 1), Q(1, 2, kB)};
  const BatchDecision drained = DecideBatch(mixed, 3, Dynamic(8, 1000, {2}), /*draining=*/true);
  EXPECT_EQ(drained.action, A::kExecute);
  EXPECT_EQ(drained.count, 2u) << "never past a request of another shape";
}

// The serving warm-up's requests (synthetic) do not wait out the delay when they head the queue: each
// of them would otherwise hold READY back by max_queue_delay. A real request at the head still waits.
TEST(BatchPolicyTest, ASyntheticHeadGoesWithoutWaitingOutTheDelay) {
  const BatchPolicyConfig long_window = Dynamic(8, 2'000'000'000);
  QueuedView warmup = Q(1, 0);
  warmup.synthetic = true;
  const BatchDecision now = DecideBatch({warmup}, 1, long_window);
  EXPECT_EQ(now.action, A::kExecute);
  EXPECT_EQ(now.count, 1u);
  const BatchDecision with_real = DecideBatch({warmup, Q(2, 1), Q(1, 2, kB)}, 3, long_window);
  EXPECT_EQ(with_real.action, A::kExecute);
  EXPECT_EQ(with_real.count, 2u) << "what is compatible goes with it";
  const BatchDecision real_head = DecideBatch({Q(1, 0), warmup}, 1, long_window);
  EXPECT_EQ(real_head.action, A::kWait);
  EXPECT_EQ(real_head.wake_ns, 2'000'000'000);
}

}  // namespace
}  // namespace chronoserve::server
