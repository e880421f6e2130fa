// EventWaiter's counts of how the waits before a send time ended: its SendWaker's alarm, or the
// queue's millisecond-rounded deadline (mostly the alarm while the waker runs, never once it is gone).
// The open-loop LoadWorker tests judge a whole worker by it.
#include "client/chronobench/event_waiter.h"

#include <grpc/support/time.h>
#include <grpcpp/alarm.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/client/cq_drain.h"

namespace chronoserve::client::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

class EventWaiterTest : public ::testing::Test {
 protected:
  ~EventWaiterTest() override {
    waiter_.StopWaker();
    testing::ShutDownAndDrain(cq_);  // fails, rather than waits, on an alarm left pending
  }

  // Waits for a send 20 ms ahead (20 polls of a lead at most, then the send's own poll): the
  // waiter's event, or nullopt when the send time came with none. Fails if it took 10 s.
  std::optional<EventWaiter::Event> WaitForASend() {
    const int64_t send_ns = clock_->NowNs() + 20 * kMs;
    std::optional<EventWaiter::Event> event;
    for (int turn = 0; turn < 1000 && clock_->NowNs() < send_ns + 10'000 * kMs; ++turn) {
      event = waiter_.Next({send_ns, /*send=*/true});
      if (!event.has_value() || !waiter_.IsWake(event->tag)) return event;
      waiter_.OnWake(*event);  // the lead before the send time has begun: poll for the rest
    }
    ADD_FAILURE() << "the send time never came";
    return std::nullopt;
  }

  const Clock* clock_ = SteadyClock::Get();
  grpc::CompletionQueue cq_;
  std::atomic<bool> stop_{false};
  EventWaiter waiter_{&cq_, clock_, &stop_};
};

TEST_F(EventWaiterTest, TheWakersAlarmEndsTheWaitsBeforeSendTimes) {
  waiter_.StartWaker();
  constexpr int kSends = 20;  // a starved waker may lose a few; not all twenty
  for (int i = 0; i < kSends; ++i) {
    SCOPED_TRACE(i);
    const std::optional<EventWaiter::Event> event = WaitForASend();
    EXPECT_FALSE(event.has_value()) << "an event that is not the waker's";
  }
  // One blocking wait a send. A waker starved past a send time loses to the deadline; its alarm,
  // taken at the next send's wait, ends that wait at once without counting as woken (the next test),
  // and that send waits again: one wait more for each such loss, no more.
  EXPECT_GE(waiter_.SendWaits(), kSends);
  EXPECT_LE(waiter_.SendWaits(), kSends + waiter_.SendWaitsPastDeadline()) << "one blocking wait a send";
  // Nothing else ends them here. The alarm comes a lead (at most 100 µs) before the send time, the
  // deadline up to a millisecond after it: only a waker starved past the send time loses, and not
  // every time.
  EXPECT_EQ(waiter_.SendWaitsWoken() + waiter_.SendWaitsPastDeadline(), kSends);
  EXPECT_GE(waiter_.SendWaitsWoken(), 1);
}

// An alarm for an earlier send time that comes after that send (here: another event ended its wait,
// and the alarm was taken only at the next one) ends the next wait at once. It is not the waker
// keeping that time: it is not counted as woken; the alarm for the new time is.
TEST_F(EventWaiterTest, ALateAlarmForAnEarlierSendIsNotCountedAsWoken) {
  waiter_.StartWaker();
  grpc::Alarm other;
  int other_tag = 0;
  other.Set(&cq_, gpr_now(GPR_CLOCK_MONOTONIC), &other_tag);  // due now: ends the first wait
  // 50 ms ahead: gRPC's timer thread fires the alarm due now long before the waker's for this send
  // time, also on a loaded machine (2 ms was not always enough under a parallel ctest).
  const int64_t first_send_ns = clock_->NowNs() + 50 * kMs;
  const std::optional<EventWaiter::Event> first = waiter_.Next({first_send_ns, /*send=*/true});
  ASSERT_TRUE(first.has_value());
  if (first->tag != &other_tag) {
    GTEST_SKIP() << "gRPC's timer thread did not fire an alarm due now within 50 ms";
  }
  // The first send time passes unwatched: its alarm goes on the queue, not taken. The time itself is
  // what is waited for (bounded: 55 ms).
  while (clock_->NowNs() < first_send_ns + 5 * kMs) {
  }
  const int64_t second_send_ns = clock_->NowNs() + 50 * kMs;
  const std::optional<EventWaiter::Event> stale = waiter_.Next({second_send_ns, /*send=*/true});
  ASSERT_TRUE(stale.has_value());
  ASSERT_TRUE(waiter_.IsWake(stale->tag));
  if (stale->received_ns >= second_send_ns - 10 * kMs) {
    GTEST_SKIP() << "the waker's thread did not run for the first send time within 5 ms of it";
  }
  waiter_.OnWake(*stale);
  EXPECT_EQ(waiter_.SendWaitsWoken(), 0) << "the first send's late alarm was counted as the second's";
  // The second send time's own wait, ended by its alarm (or, the waker starved, its deadline).
  std::optional<EventWaiter::Event> event;
  for (int turn = 0; turn < 1000 && clock_->NowNs() < second_send_ns + 10'000 * kMs; ++turn) {
    event = waiter_.Next({second_send_ns, /*send=*/true});
    if (!event.has_value() || !waiter_.IsWake(event->tag)) break;
    waiter_.OnWake(*event);
  }
  EXPECT_FALSE(event.has_value()) << "an event that is not the waker's";
  EXPECT_EQ(waiter_.SendWaits(), 3) << "the first wait, the one the late alarm ended, the second's own";
  EXPECT_EQ(waiter_.SendWaitsWoken() + waiter_.SendWaitsPastDeadline(), 1);
}

// The waker's thread gone (as if starved for good): every wait before a send time ends at the
// queue's deadline, and each is counted.
TEST_F(EventWaiterTest, AWaitThatNoAlarmEndedIsCountedAsPastItsDeadline) {
  waiter_.StartWaker();
  waiter_.StopWaker();
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const int64_t send_ns = clock_->NowNs() + 20 * kMs;
    EXPECT_FALSE(WaitForASend().has_value());
    EXPECT_GE(clock_->NowNs(), send_ns) << "the wait ended before the send time";
  }
  EXPECT_EQ(waiter_.SendWaits(), 3);
  EXPECT_EQ(waiter_.SendWaitsWoken(), 0);
  EXPECT_EQ(waiter_.SendWaitsPastDeadline(), 3);
}

}  // namespace
}  // namespace chronoserve::client::bench
