// ModelQueue: taking batches, closing (draining or abandoning), the bounds on what it holds, and
// waking its workers. Dropping requests (deadlines, cancellation, queue policy): model_queue_drop_test.cc.
#include "server/scheduler/model_queue.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "tests/fakes/finishes_within.h"
#include "tests/server/model_queue_test_util.h"

namespace chronoserve::server {
namespace {
using ::chronoserve::testing::Dynamic;
using ::chronoserve::testing::kBatch;
using ::chronoserve::testing::Request;
using ::chronoserve::testing::RequestHolding;

constexpr ModelQueue::WaitResult kClosed = ModelQueue::WaitResult::kClosed;

TEST(ModelQueueTest, FullQueueRefusesWithResourceExhaustedAndKeepsOwnership) {
  QueuePolicySpec qp;
  qp.max_queue_size = 2;
  ModelQueue queue("model 'm'", Dynamic(8, 0), qp, SteadyClock::Get());
  auto a = Request(), b = Request(), c = Request();
  ASSERT_TRUE(queue.Enqueue(a).ok());
  ASSERT_TRUE(queue.Enqueue(b).ok());
  EXPECT_EQ(a, nullptr) << "ownership taken on OK";
  absl::Status full = queue.Enqueue(c);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("model 'm'"), absl::string_view::npos);
  EXPECT_NE(full.message().find("max_queue_size 2"), absl::string_view::npos);
  EXPECT_NE(c, nullptr) << "ownership kept on error";
  EXPECT_EQ(queue.size(), 2u);
}

TEST(ModelQueueTest, BatchesQueuedRequestsAndDrainsAfterClose) {
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, SteadyClock::Get());
  for (int i = 0; i < 3; ++i) {
    auto r = Request(2);
    ASSERT_TRUE(queue.Enqueue(r).ok());
  }
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 3u);
  EXPECT_TRUE(dropped.empty());
  auto late = Request();
  ASSERT_TRUE(queue.Enqueue(late).ok());
  queue.Close("version 3 was replaced by a reload");
  queue.Close("the server is shutting down");  // a second Close keeps the first's reason
  auto refused = Request();
  const absl::Status status = queue.Enqueue(refused);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(status.message()), "model 'm': version 3 was replaced by a reload; the request was not queued");
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch) << "queued work drains after Close";
  EXPECT_EQ(batch.size(), 1u);
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), kClosed);
}

TEST(ModelQueueTest, ClosedQueueDrainsWholeBatchesWithoutWaitingForTheDelay) {
  // Ten requests wait in a long batching window (max 4 items) when the queue closes: they leave
  // as batches of 4, 4 and 2 at once, not one request at a time and not after the window.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(4, 60'000'000'000), {}, &clock);
  for (int i = 0; i < 10; ++i) {
    auto r = Request();
    ASSERT_TRUE(queue.Enqueue(r).ok());
  }
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kBatch) << "full batch goes";
  EXPECT_EQ(batch.size(), 4u);
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kBatch) << "full batch goes";
  EXPECT_EQ(batch.size(), 4u);
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout) << "2 wait for the window";
  queue.Close();
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 2u) << "the partial batch leaves whole";
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), kClosed);
}

TEST(ModelQueueTest, ClosedQueueDrainsPastThePreferredSizeWithNoDelay) {
  // Preferred size 4, no batching delay: serving takes 4 at a time; once closed, the other 12 leave
  // as one batch (up to max_batch_size 32), not three of 4.
  BatchPolicyConfig policy = Dynamic(32, 0);
  policy.preferred_batch_sizes = {4};
  ModelQueue queue("model 'm'", policy, {}, SteadyClock::Get());
  for (int i = 0; i < 16; ++i) {
    auto r = Request();
    ASSERT_TRUE(queue.Enqueue(r).ok());
  }
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 4u) << "serving: the preferred size";
  batch.clear();
  queue.Close();
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 12u) << "draining: everything, in one batch";
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), kClosed);
}

TEST(ModelQueueTest, AbandonedQueueDropsEveryWaitingRequestUnavailableAndRefusesNewOnes) {
  // The server's exit timeout: requests still waiting (here in a long batch window) are answered
  // at once, on the closing thread, never batched: no worker (which may be busy with a batch) has to
  // come back for them before gRPC cancels their calls.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 60'000'000'000), {}, &clock);
  auto a = Request(), b = Request(2);
  std::vector<absl::Status> answers;
  for (auto* r : {&a, &b}) {
    (*r)->on_complete = [&answers](std::unique_ptr<InferRequest> done) { answers.push_back(done->status); };
    ASSERT_TRUE(queue.Enqueue(*r).ok());
  }
  EXPECT_EQ(queue.CloseAbandoningQueued("the server's exit timeout passed"), 2u);
  ASSERT_EQ(answers.size(), 2u) << "answered by the call itself";
  for (const absl::Status& status : answers) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(status.message(), "model 'm': the server's exit timeout passed; the request was not executed");
  }
  EXPECT_EQ(queue.size(), 0u);
  auto late = Request();
  EXPECT_EQ(queue.Enqueue(late).code(), absl::StatusCode::kUnavailable);
  Batch batch, dropped;
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), kClosed) << "closed and empty";
  EXPECT_TRUE(batch.empty());
  EXPECT_TRUE(dropped.empty());
}

TEST(ModelQueueTest, QueuedInputBytesAreBoundedAndReleasedAsRequestsLeave) {
  FakeClock clock;
  QueuePolicySpec qp;
  qp.max_queue_bytes = uint64_t{4} << 20;
  ModelQueue queue("model 'm'", Dynamic(8, 60'000'000'000), qp, &clock);  // a long window: nothing leaves by itself
  auto a = RequestHolding(2), b = RequestHolding(1.5), c = RequestHolding(1);
  auto in_shared_memory = RequestHolding(8, /*shared_memory=*/true);
  auto* a_cancelled = a->cancelled.get();
  ASSERT_TRUE(queue.Enqueue(a).ok());
  ASSERT_TRUE(queue.Enqueue(b).ok());
  const absl::Status refused = queue.Enqueue(c);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "model 'm': queue is full (2 requests waiting hold 3.5 MiB of inputs; this request's 1.0 MiB would pass "
            "the limit of 4.0 MiB, --max-queue-mib)");
  ASSERT_NE(c, nullptr) << "a refused request stays with its caller";
  EXPECT_TRUE(queue.Enqueue(in_shared_memory).ok()) << "bytes in a client's shared memory are not the server's";
  EXPECT_EQ(queue.queued_bytes(), uint64_t{7} << 19);

  a_cancelled->Set(clock.NowNs());  // a dropped request gives its bytes back
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kBatch);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(queue.queued_bytes(), uint64_t{3} << 19);
  EXPECT_TRUE(queue.Enqueue(c).ok()) << "room again: 1.5 + 1 MiB";

  queue.Close();  // batches taken give their bytes back; a closing queue drains
  size_t taken = 0;
  while (queue.TryNextBatch(&batch, &dropped) == kBatch) taken += batch.size();
  EXPECT_EQ(taken, 3u);
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

TEST(ModelQueueTest, WaitingWorkerWakesOnEnqueueAndOnClose) {
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, SteadyClock::Get());
  absl::Notification got_batch, finished;
  size_t batch_size = 0;
  std::thread worker([&] {
    Batch batch, dropped;
    while (queue.NextBatch(&batch, &dropped)) {
      batch_size = batch.size();
      got_batch.Notify();
    }
    finished.Notify();
  });
  // Were an ASSERT below to fail: close the queue (the worker's loop ends) and join, instead of
  // destroying a joinable std::thread (std::terminate).
  absl::Cleanup join_worker = [&] {
    queue.Close();
    testing::FinishesWithin("NextBatch after Close", absl::Seconds(10), [&] { worker.join(); });
  };
  auto r = Request();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  ASSERT_TRUE(got_batch.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(batch_size, 1u);
  queue.Close();
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(ModelQueueTest, DelayedBatchCollectsLaterArrivals) {
  // A 200 ms batching window: the first request waits it out, a second one arriving within it
  // joins, and the two leave together once the window has passed (a fake clock: no waits).
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 200'000'000), {}, &clock);
  auto a = Request(), b = Request();
  ASSERT_TRUE(queue.Enqueue(a).ok());
  Batch batch, dropped;
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout) << "a waits for the window";
  clock.AdvanceNs(150'000'000);
  ASSERT_TRUE(queue.Enqueue(b).ok());
  EXPECT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout) << "150 ms into 200";
  clock.AdvanceNs(60'000'000);
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch) << "a's window has passed";
  EXPECT_EQ(batch.size(), 2u) << "b, arrived within the window, joined a";
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(queue.size(), 0u);
}

TEST(ModelQueueTest, ARequestLargerThanTheWholeQueueLimitIsInvalidNotRetryable) {
  FakeClock clock;
  QueuePolicySpec qp;
  qp.max_queue_bytes = uint64_t{1} << 20;
  ModelQueue queue("model 'm'", Dynamic(8, 0), qp, &clock);
  qp.max_queue_size = 1;
  ModelQueue full("model 'm'", Dynamic(8, 0), qp, &clock);
  auto small = RequestHolding(0.5), huge = RequestHolding(2);
  ASSERT_TRUE(full.Enqueue(small).ok());
  // Said before the full queue's RESOURCE_EXHAUSTED: a retry could never succeed.
  EXPECT_EQ(full.Enqueue(huge).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status refused = queue.Enqueue(huge);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("more than the model's queue may ever hold (1.0 MiB, --max-queue-mib)"),
            absl::string_view::npos) << refused;
  EXPECT_NE(huge, nullptr);
}

}  // namespace
}  // namespace chronoserve::server
