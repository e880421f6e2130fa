// ModelQueue: the requests it drops instead of batching (a passed deadline, a client's
// cancellation, the queue policy's timeout with REJECT) and those DELAY moves behind fresh ones.
#include "server/scheduler/model_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tests/fakes/finishes_within.h"
#include "tests/server/model_queue_test_util.h"

namespace chronoserve::server {
namespace {
using ::chronoserve::testing::Dynamic;
using ::chronoserve::testing::kBatch;
using ::chronoserve::testing::Request;
using ::chronoserve::testing::RequestHolding;

// default_queue_policy with a timeout of `us` and REJECT (or DELAY).
QueuePolicySpec TimeoutAfter(uint64_t us, bool delay = false) {
  QueuePolicySpec qp;
  qp.default_timeout_microseconds = us;
  qp.timeout_action_delay = delay;
  return qp;
}

TEST(ModelQueueTest, ExpiredAndCancelledRequestsAreDroppedNotBatched) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, &clock);
  auto expired = Request();
  expired->deadline_ns = clock.NowNs() + 1000;
  auto cancelled = Request();
  auto live = Request();
  auto* cancel_flag = cancelled->cancelled.get();
  ASSERT_TRUE(queue.Enqueue(expired).ok());
  ASSERT_TRUE(queue.Enqueue(cancelled).ok());
  ASSERT_TRUE(queue.Enqueue(live).ok());
  cancel_flag->Set(clock.NowNs());
  clock.AdvanceNs(2000);
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(dropped[1]->status.code(), absl::StatusCode::kCancelled);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_FALSE(batch[0]->IsCancelled());
}

TEST(ModelQueueTest, PassedDeadlineIsDeadlineExceededEvenWhenGrpcAlsoCancelled) {
  // gRPC cancels a call whose deadline passed (OnCancel sets the flag): still DEADLINE_EXCEEDED.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, &clock);
  auto r = Request();
  r->deadline_ns = clock.NowNs() + 1000;
  auto* cancel_flag = r->cancelled.get();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  clock.AdvanceNs(1000);
  cancel_flag->Set(clock.NowNs());
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ModelQueueTest, CancelJustBeforeTheDeadlineIsTheDeadlinesButAnEarlierCancelIsTheClients) {
  // gRPC's deadline timer may fire a little before our copy of the deadline, and a client's gRPC
  // cancels at the client's copy, which ours trails by the call's way to the server: within a
  // quarter of the time the request had, 1 to 50 ms, a cancellation is the deadline's.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, &clock);
  const int64_t t0 = clock.NowNs();
  std::map<int64_t, CancelFlag*> flags;  // by deadline, which names each request below
  for (int64_t ahead_ms : {1, 300, 330, 4000}) {
    auto r = Request();
    r->deadline_ns = t0 + ahead_ms * 1'000'000;
    flags[r->deadline_ns] = r->cancelled.get();
    ASSERT_TRUE(queue.Enqueue(r).ok());
  }
  flags[t0 + 1'000'000]->Set(clock.NowNs());  // 1 ms early, of a 1 ms budget: slack 1 ms
  clock.AdvanceNs(270'000'000);
  for (int64_t ahead_ms : {300, 330, 4000}) flags[t0 + ahead_ms * 1'000'000]->Set(clock.NowNs());
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 4u);
  std::map<int64_t, absl::StatusCode> codes;  // by deadline
  for (const auto& r : dropped) codes[r->deadline_ns - t0] = r->status.code();
  EXPECT_EQ(codes[1'000'000], absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(codes[300'000'000], absl::StatusCode::kDeadlineExceeded) << "30 ms early of 300: within the 50 ms";
  EXPECT_EQ(codes[330'000'000], absl::StatusCode::kCancelled) << "60 ms early: beyond 50 ms, the client's";
  EXPECT_EQ(codes[4000'000'000], absl::StatusCode::kCancelled) << "3.7 s early: the client's";
}

// A deadline that is the `timeout` parameter's alone (the call has none): a cancellation near it is
// the client's, since no gRPC deadline could have caused it.
TEST(ModelQueueTest, ACancelNearATimeoutParametersDeadlineIsTheClients) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, &clock);
  auto r = Request();
  r->deadline_ns = clock.NowNs() + 4'000'000;  // timeout 4 ms
  r->call_deadline_ns = 0;                     // no gRPC deadline
  CancelFlag* flag = r->cancelled.get();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  clock.AdvanceNs(3'500'000);  // within a quarter of the 4 ms
  flag->Set(clock.NowNs());
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kCancelled) << dropped[0]->status;
}

TEST(ModelQueueTest, QueuePolicyTimeoutRejects) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), TimeoutAfter(5), &clock);
  auto r = Request();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  clock.AdvanceNs(6000);
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_TRUE(batch.empty());
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(dropped[0]->status.message(),
            "model 'm': queued longer than default_queue_policy.default_timeout_microseconds 5 (timeout_action "
            "REJECT); the request was not executed");
}

TEST(ModelQueueTest, EveryWayToTakeABatchReturnsDroppedRequestsWithTheirFinalStatus) {
  // The queue builds a dropped request's message after releasing its lock, but before NextBatch,
  // NextBatchUntil or TryNextBatch returns: the worker answers what it gets back as it is.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), TimeoutAfter(5), &clock);
  auto enqueue_three_doomed = [&] {
    auto cancelled = Request(), expired = Request(), timed_out = Request();
    cancelled->cancelled->Set(clock.NowNs());
    expired->deadline_ns = clock.NowNs() + 1000;
    ASSERT_TRUE(queue.Enqueue(cancelled).ok());
    ASSERT_TRUE(queue.Enqueue(expired).ok());
    ASSERT_TRUE(queue.Enqueue(timed_out).ok());
    clock.AdvanceNs(6000);
  };
  const std::vector<std::pair<absl::StatusCode, std::string>> expected = {
      {absl::StatusCode::kCancelled, "model 'm': the client cancelled the request while it was queued"},
      {absl::StatusCode::kDeadlineExceeded,
       "model 'm': the deadline passed after 1 us in the queue; the request was not executed"},
      {absl::StatusCode::kDeadlineExceeded,
       "model 'm': queued longer than default_queue_policy.default_timeout_microseconds 5 (timeout_action "
       "REJECT); the request was not executed"}};
  auto statuses = [](const Batch& dropped) {
    std::vector<std::pair<absl::StatusCode, std::string>> got;
    for (const auto& r : dropped) got.emplace_back(r->status.code(), std::string(r->status.message()));
    return got;
  };
  Batch batch, dropped;
  enqueue_three_doomed();
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(statuses(dropped), expected) << "TryNextBatch";
  // Both return at once (requests were dropped); were one to block, FinishesWithin fails the test.
  enqueue_three_doomed();
  ModelQueue::WaitResult until = ModelQueue::WaitResult::kTimeout;
  testing::FinishesWithin("NextBatchUntil with dropped requests", absl::Seconds(10), [&] {
    until = queue.NextBatchUntil(&batch, &dropped, clock.NowNs() + 1'000'000);
  });
  ASSERT_EQ(until, kBatch);
  EXPECT_EQ(statuses(dropped), expected) << "NextBatchUntil";
  enqueue_three_doomed();
  bool taken = false;
  testing::FinishesWithin("NextBatch with dropped requests", absl::Seconds(10),
                          [&] { taken = queue.NextBatch(&batch, &dropped); });
  ASSERT_TRUE(taken);
  EXPECT_EQ(statuses(dropped), expected) << "NextBatch";
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

TEST(ModelQueueTest, AnEarlyCancellationStaysTheClientsHoweverLateTheWorkerLooks) {
  // Cancelled at +10 ms, deadline at +100 ms, noticed at +210 ms (the worker was busy).
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), {}, &clock);
  auto r = Request();
  r->deadline_ns = clock.NowNs() + 100'000'000;
  auto* flag = r->cancelled.get();
  ASSERT_TRUE(queue.Enqueue(r).ok());
  clock.AdvanceNs(10'000'000);
  flag->Set(clock.NowNs());
  queue.Poke();
  clock.AdvanceNs(200'000'000);
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kCancelled) << dropped[0]->status;
}

TEST(ModelQueueTest, ACancellationDeepInTheQueueIsDroppedOncePoked) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(2, 0), {}, &clock);
  std::vector<CancelFlag*> flags;
  for (int i = 0; i < 6; ++i) {
    auto r = Request();
    flags.push_back(r->cancelled.get());
    ASSERT_TRUE(queue.Enqueue(r).ok());
  }
  flags[5]->Set(clock.NowNs());  // beyond the next batch's reach (2 + 1)
  queue.Poke();                  // as the transport does after setting it
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 2u);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(queue.size(), 3u);
}

// A request already cancelled when it is queued, with no Poke after it (the client gave up while
// the request was built): a full queue still drops it for a live one.
TEST(ModelQueueTest, ARequestCancelledBeforeItWasQueuedMakesRoomWithoutAPoke) {
  FakeClock clock;
  QueuePolicySpec qp;
  qp.max_queue_size = 2;
  ModelQueue queue("model 'm'", Dynamic(2, 0), qp, &clock);
  std::vector<absl::StatusCode> answered;
  auto answer = [&answered](std::unique_ptr<InferRequest> r) { answered.push_back(r->status.code()); };
  auto live = Request();
  auto cancelled = Request();
  cancelled->cancelled->Set(clock.NowNs());
  for (auto* r : {&live, &cancelled}) {
    (*r)->on_complete = answer;
    ASSERT_TRUE(queue.Enqueue(*r).ok());
  }
  auto fresh = Request();
  ASSERT_TRUE(queue.Enqueue(fresh).ok()) << "the cancelled one made room";
  EXPECT_EQ(answered, (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled}));
  EXPECT_EQ(queue.size(), 2u);
}

// ... and with every worker busy (none waiting for a batch), the reaper answers it at once.
TEST(ModelQueueTest, TheReaperAnswersARequestCancelledBeforeItWasQueued) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(4, 0), {}, &clock);
  auto cancelled = Request();
  cancelled->cancelled->Set(clock.NowNs());
  ASSERT_TRUE(queue.Enqueue(cancelled).ok());
  Batch dropped;
  bool open = false;
  testing::FinishesWithin("the reaper's wait", absl::Seconds(10),
                          [&] { open = queue.AwaitDueWhileWorkersBusy(&dropped); });
  EXPECT_TRUE(open);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(queue.size(), 0u);
}

// A full queue whose requests died while the workers were busy (cancelled, or past a deadline)
// takes a new one: it drops them first, answered on the enqueuing thread with their own statuses.
TEST(ModelQueueTest, AFullQueueOfDeadRequestsTakesALiveOne) {
  FakeClock clock;
  QueuePolicySpec qp;
  qp.max_queue_size = 3;
  ModelQueue queue("model 'm'", Dynamic(2, 0), qp, &clock);
  std::vector<absl::StatusCode> answered;
  auto answer = [&answered](std::unique_ptr<InferRequest> r) { answered.push_back(r->status.code()); };
  auto live = Request();
  auto cancelled = Request();
  auto expiring = Request();
  expiring->deadline_ns = clock.NowNs() + 1000;
  CancelFlag* flag = cancelled->cancelled.get();
  for (auto* r : {&live, &cancelled, &expiring}) {
    (*r)->on_complete = answer;
    ASSERT_TRUE(queue.Enqueue(*r).ok());
  }
  auto refused = Request();
  EXPECT_EQ(queue.Enqueue(refused).code(), absl::StatusCode::kResourceExhausted) << "three live: full";
  EXPECT_TRUE(answered.empty());

  flag->Set(clock.NowNs());
  queue.Poke();  // as the transport does after setting it
  auto fresh = Request();
  ASSERT_TRUE(queue.Enqueue(fresh).ok()) << "the cancelled one made room";
  EXPECT_EQ(answered, (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled}));

  clock.AdvanceNs(2000);  // the deadline passed, with nothing announced
  auto another = Request();
  ASSERT_TRUE(queue.Enqueue(another).ok()) << "the expired one made room";
  EXPECT_EQ(answered, (std::vector<absl::StatusCode>{absl::StatusCode::kCancelled, absl::StatusCode::kDeadlineExceeded}));
  EXPECT_EQ(queue.size(), 3u);
  auto over = Request();
  EXPECT_EQ(queue.Enqueue(over).code(), absl::StatusCode::kResourceExhausted) << "three live again";

  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_EQ(batch.size(), 2u);
  EXPECT_TRUE(dropped.empty()) << "the dead were answered already, once";
}

TEST(ModelQueueTest, QueuePolicyDelayMovesTheRequestBehindFreshOnes) {
  // DELAY (Triton): a request past its timeout waits behind every request still within it.
  FakeClock clock;
  ModelQueue delaying("model 'm'", Dynamic(1, 0), TimeoutAfter(100, /*delay=*/true), &clock);
  Batch batch, dropped;
  auto old_request = Request(1, "old"), fresh = Request(1, "fresh"), fresher = Request(1, "fresher");
  ASSERT_TRUE(delaying.Enqueue(old_request).ok());
  clock.AdvanceNs(150'000);  // `old` timed out
  ASSERT_TRUE(delaying.Enqueue(fresh).ok());
  ASSERT_TRUE(delaying.Enqueue(fresher).ok());
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(delaying.TryNextBatch(&batch, &dropped), kBatch);
    EXPECT_TRUE(dropped.empty()) << "DELAY never drops";
    ASSERT_EQ(batch.size(), 1u);
    order.push_back(batch[0]->shape_key());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"fresh", "fresher", "old"}));
  EXPECT_EQ(delaying.size(), 0u);
}

TEST(ModelQueueTest, DelayedRequestsStillHonourTheirDeadlineAndBatchTogether) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), TimeoutAfter(100, /*delay=*/true), &clock);
  auto a = Request(), b = Request(), doomed = Request();
  doomed->deadline_ns = clock.NowNs() + 1'000'000;
  ASSERT_TRUE(queue.Enqueue(a).ok());
  ASSERT_TRUE(queue.Enqueue(doomed).ok());
  ASSERT_TRUE(queue.Enqueue(b).ok());
  clock.AdvanceNs(2'000'000);  // all three timed out; `doomed` also passed its deadline
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(batch.size(), 2u) << "delayed requests batch with each other";
}

TEST(ModelQueueTest, ABatchTakesFreshRequestsFirstThenDelayedOnes) {
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 0), TimeoutAfter(100, /*delay=*/true), &clock);
  auto old_request = Request(1, "[3];"), fresh = Request(1, "[3];");
  old_request->id = "old";
  fresh->id = "fresh";
  ASSERT_TRUE(queue.Enqueue(old_request).ok());
  clock.AdvanceNs(150'000);  // `old` timed out
  ASSERT_TRUE(queue.Enqueue(fresh).ok());
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  ASSERT_EQ(batch.size(), 2u) << "one batch across both, as Triton's policy queue";
  EXPECT_EQ(batch[0]->id, "fresh");
  EXPECT_EQ(batch[1]->id, "old");
}

TEST(ModelQueueTest, AFullScanKeepsTheRestInOrderAndGivesBackTheDroppedBytes) {
  // DELAY after 100 us, and a batching window so long that only a scan or Close moves a request.
  FakeClock clock;
  ModelQueue queue("model 'm'", Dynamic(8, 60'000'000'000), TimeoutAfter(100, /*delay=*/true), &clock);
  const int64_t start = clock.NowNs();
  std::map<std::string, CancelFlag*> flags;
  auto enqueue = [&](const std::string& id, double mib, int64_t deadline_ns) {
    auto r = RequestHolding(mib);
    r->id = id;
    r->deadline_ns = deadline_ns;
    flags[id] = r->cancelled.get();
    ASSERT_TRUE(queue.Enqueue(r).ok()) << id;
  };
  enqueue("a", 1, 0);
  enqueue("b", 0.5, start + 1'000'000);
  enqueue("c", 0.25, 0);
  clock.AdvanceNs(150'000);  // a, b and c time out: a scan moves them behind the queue
  Batch batch, dropped;
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), ModelQueue::WaitResult::kTimeout);
  enqueue("d", 2, start + 1'000'000);
  enqueue("e", 0.125, 0);
  enqueue("f", 0.75, 0);
  clock.AdvanceNs(1'000'000);
  enqueue("g", 1.5, 0);
  enqueue("h", 0.375, start + 5'000'000);
  flags["a"]->Set(clock.NowNs());  // the delayed front leaves: c slides forward over a and b
  flags["f"]->Set(clock.NowNs());
  queue.Poke();
  clock.AdvanceNs(50'000);  // b's and d's deadlines passed; e timed out; g and h still within theirs
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  EXPECT_TRUE(batch.empty()) << "the window is still open";
  std::vector<std::pair<std::string, absl::StatusCode>> answered;
  for (const auto& r : dropped) answered.emplace_back(r->id, r->status.code());
  EXPECT_EQ(answered, (std::vector<std::pair<std::string, absl::StatusCode>>{
                          {"a", absl::StatusCode::kCancelled}, {"b", absl::StatusCode::kDeadlineExceeded},
                          {"d", absl::StatusCode::kDeadlineExceeded}, {"f", absl::StatusCode::kCancelled}}));
  EXPECT_EQ(queue.size(), 4u);
  EXPECT_EQ(queue.queued_bytes(), uint64_t{9} << 18) << "c + e + g + h: 0.25 + 0.125 + 1.5 + 0.375 MiB";

  queue.Close();
  ASSERT_EQ(queue.TryNextBatch(&batch, &dropped), kBatch);
  std::vector<std::string> order;
  for (const auto& r : batch) order.push_back(r->id);
  EXPECT_EQ(order, (std::vector<std::string>{"g", "h", "c", "e"})) << "the queue's in order, then the delayed in order";
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

}  // namespace
}  // namespace chronoserve::server
