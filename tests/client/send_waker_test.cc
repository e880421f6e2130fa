// SendWaker on a real gRPC completion queue: its tag comes no earlier than the time asked for, an
// earlier time replaces a later one, one alarm at a time, a prompt stop; which wakes teach it its
// lead (only those the owner marks as having ended its wait, and only for the time last asked for);
// WakeLead's rule on given wake lateness.
#include "client/chronobench/send_waker.h"

#include <grpc/support/time.h>

#include <cstdint>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/client/cq_drain.h"

namespace chronoserve::client::bench {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kHourNs = int64_t{3600} * 1'000'000'000;

TEST(WakeLeadTest, NinetiethPercentileOfTheLastWakesPlusAMargin) {
  WakeLead lead;
  for (size_t i = 1; i < WakeLead::kMinSamples; ++i) lead.Add(40 * kUs);
  EXPECT_EQ(lead.ns(), WakeLead::kInitialNs) << "judged on too few wakes";
  lead.Add(40 * kUs);
  EXPECT_EQ(lead.ns(), 40 * kUs + WakeLead::kMarginNs);

  // Of 64, the 58th smallest (index 57) decides: 6 slow wakes do not move it, 7 do.
  WakeLead few_slow(1'000 * kUs);  // a cap above the slow wakes, so the rule shows
  for (size_t i = 0; i < WakeLead::kSamples - 6; ++i) few_slow.Add(30 * kUs + static_cast<int64_t>(i));
  for (int i = 0; i < 6; ++i) few_slow.Add(400 * kUs);
  EXPECT_EQ(few_slow.ns(), 30 * kUs + 57 + WakeLead::kMarginNs);
  few_slow.Add(400 * kUs);  // replaces the oldest (30 µs)
  EXPECT_EQ(few_slow.ns(), 400 * kUs + WakeLead::kMarginNs);

  // Only the last kSamples count, and the result stays in [kMinNs, the cap].
  for (size_t i = 0; i < WakeLead::kSamples; ++i) few_slow.Add(2 * kUs);
  EXPECT_EQ(few_slow.ns(), WakeLead::kMinNs);
  for (size_t i = 0; i < WakeLead::kSamples; ++i) few_slow.Add(7'000 * kUs);
  EXPECT_EQ(few_slow.ns(), 1'000 * kUs);
  for (size_t i = 0; i < WakeLead::kSamples; ++i) lead.Add(7'000 * kUs);
  EXPECT_EQ(lead.ns(), WakeLead::kMaxNs) << "the default cap";
}

class SendWakerTest : public ::testing::Test {
 protected:
  ~SendWakerTest() override {
    waker_.Stop();
    ShutDown();
  }

  // Once the waker is stopped: shuts the queue down and takes what was left on it; the count (a
  // failure, not a wait, when an alarm left pending holds it past 10 s).
  int ShutDown() {
    if (shut_down_) return 0;
    shut_down_ = true;
    return testing::ShutDownAndDrain(cq_);
  }

  // The next event within `timeout_ms`: its tag, or null on a timeout.
  void* Next(int64_t timeout_ms, bool* ok) {
    void* tag = nullptr;
    const gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    if (cq_.AsyncNext(&tag, ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return nullptr;
    return tag;
  }

  const Clock* clock_ = SteadyClock::Get();
  grpc::CompletionQueue cq_;
  SendWaker waker_{&cq_, clock_};
  bool shut_down_ = false;
};

// chronobench's --max-send-poll-us: the lead never passes the maximum given; 0 means no lead.
TEST(WakeLeadTest, StaysAtOrBelowTheMaximumGiven) {
  WakeLead none(0);
  EXPECT_EQ(none.ns(), 0);
  for (size_t i = 0; i < WakeLead::kSamples; ++i) none.Add(300 * kUs);
  EXPECT_EQ(none.ns(), 0) << "late wakes, but no polling was asked for";
  WakeLead capped(50 * kUs);
  EXPECT_EQ(capped.ns(), 50 * kUs) << "the initial lead, capped";
  for (size_t i = 0; i < WakeLead::kSamples; ++i) capped.Add(300 * kUs);
  EXPECT_EQ(capped.ns(), 50 * kUs);
  for (size_t i = 0; i < WakeLead::kSamples; ++i) capped.Add(2 * kUs);
  EXPECT_EQ(capped.ns(), WakeLead::kMinNs) << "below the cap, the usual rule";
  EXPECT_EQ(WakeLead(-5).ns(), 0) << "a negative cap is none";
  WakeLead tiny(5 * kUs);
  for (size_t i = 0; i < WakeLead::kSamples; ++i) tiny.Add(2 * kUs);
  EXPECT_EQ(tiny.ns(), 5 * kUs) << "a cap under the floor wins";
}

TEST_F(SendWakerTest, PutsItsTagOnTheQueueNoEarlierThanTheTime) {
  waker_.Start();
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE(i);
    const int64_t at_ns = clock_->NowNs() + 2'000 * kUs + i * 100 * kUs;
    waker_.WakeAt(at_ns);
    bool ok = false;
    void* tag = Next(10'000, &ok);
    const int64_t taken_ns = clock_->NowNs();
    ASSERT_EQ(tag, waker_.tag()) << "no wake within 10 s";
    EXPECT_TRUE(ok);
    EXPECT_GE(taken_ns, at_ns);
    EXPECT_TRUE(waker_.OnAlarm(taken_ns, /*sample=*/true)) << "came for the time asked for";
  }
  // Learnt from the wakes above, within its bounds.
  EXPECT_GE(waker_.LeadNs(), WakeLead::kMinNs);
  EXPECT_LE(waker_.LeadNs(), WakeLead::kMaxNs);
}

TEST_F(SendWakerTest, AnEarlierTimeReplacesALaterOne) {
  waker_.Start();
  waker_.WakeAt(clock_->NowNs() + kHourNs);
  const int64_t at_ns = clock_->NowNs() + 1'000 * kUs;
  waker_.WakeAt(at_ns);
  bool ok = false;
  ASSERT_EQ(Next(10'000, &ok), waker_.tag()) << "the waker slept on towards the hour";
  EXPECT_GE(clock_->NowNs(), at_ns);
}

TEST_F(SendWakerTest, SetsTheAlarmAgainOnlyOnceItsTagIsBack) {
  waker_.Start();
  waker_.WakeAt(clock_->NowNs() - 1);  // past: at once
  bool ok = false;
  ASSERT_EQ(Next(10'000, &ok), waker_.tag());
  waker_.WakeAt(clock_->NowNs() - 1);
  // Before OnAlarm the second time waits (a grpc::Alarm set twice would come back at once).
  EXPECT_EQ(Next(50, &ok), nullptr) << "the alarm was set again before its tag was handed back";
  waker_.OnAlarm(clock_->NowNs(), /*sample=*/false);
  EXPECT_EQ(Next(10'000, &ok), waker_.tag()) << "the time asked for was lost";
}

// The lateness each wake is taken with is given here (OnAlarm's taken_ns), so the lead it learns is
// exact: only the wakes marked as samples count.
TEST_F(SendWakerTest, LearnsOnlyFromWakesThatEndedTheOwnersWait) {
  waker_.Start();
  bool ok = false;
  for (size_t i = 0; i < WakeLead::kMinSamples; ++i) {
    const int64_t at_ns = clock_->NowNs() - 1;  // past: at once
    waker_.WakeAt(at_ns);
    ASSERT_EQ(Next(10'000, &ok), waker_.tag()) << i;
    // Taken by a poll after the owner's own work: 300 µs that are not the waker's.
    EXPECT_TRUE(waker_.OnAlarm(at_ns + 300 * kUs, /*sample=*/false));
  }
  EXPECT_EQ(waker_.LeadNs(), WakeLead::kInitialNs) << "learnt from wakes that did not end a wait";
  for (size_t i = 0; i < WakeLead::kMinSamples; ++i) {
    const int64_t at_ns = clock_->NowNs() - 1;
    waker_.WakeAt(at_ns);
    ASSERT_EQ(Next(10'000, &ok), waker_.tag()) << i;
    EXPECT_TRUE(waker_.OnAlarm(at_ns + 40 * kUs, /*sample=*/true));
  }
  EXPECT_EQ(waker_.LeadNs(), 40 * kUs + WakeLead::kMarginNs);
}

// An alarm for a time replaced before its tag was taken (the owner was busy, then asked for the
// next time and waited) says nothing of how late the waker is: it is not for the time asked for,
// and it teaches nothing, even when it is what ended the wait; the time asked for still comes.
TEST_F(SendWakerTest, AnAlarmForAReplacedTimeIsNotASample) {
  waker_.Start();
  bool ok = false;
  for (size_t i = 0; i < WakeLead::kMinSamples; ++i) {
    const int64_t stale_ns = clock_->NowNs() - 1;
    waker_.WakeAt(stale_ns);
    ASSERT_EQ(Next(10'000, &ok), waker_.tag()) << i;  // fired; left on the queue while "busy"
    const int64_t asked_ns = stale_ns + 1;  // past as well
    waker_.WakeAt(asked_ns);  // waits: the alarm's tag is not back yet
    EXPECT_FALSE(waker_.OnAlarm(stale_ns + 400 * kUs, /*sample=*/true)) << "taken as the time asked for";
    ASSERT_EQ(Next(10'000, &ok), waker_.tag()) << "the time asked for was lost";
    EXPECT_TRUE(waker_.OnAlarm(asked_ns + 30 * kUs, /*sample=*/true));
  }
  EXPECT_EQ(waker_.LeadNs(), 30 * kUs + WakeLead::kMarginNs) << "a stale alarm's lateness was learnt";
}

TEST_F(SendWakerTest, StopsPromptlyWithAWakeFarAhead) {
  waker_.Start();
  waker_.WakeAt(clock_->NowNs() + kHourNs);
  const int64_t start_ns = clock_->NowNs();
  waker_.Stop();
  EXPECT_LT(clock_->NowNs() - start_ns, 30'000'000'000) << "Stop waited for the wake (an hour ahead)";
  waker_.Stop();  // idempotent
  EXPECT_EQ(ShutDown(), 0) << "no alarm was set, so nothing was left on the queue";
}

TEST_F(SendWakerTest, ATagSetBeforeTheStopIsLeftForTheQueuesShutdown) {
  waker_.Start();
  waker_.WakeAt(clock_->NowNs() - 1);
  bool ok = false;
  ASSERT_EQ(Next(10'000, &ok), waker_.tag());
  waker_.OnAlarm(clock_->NowNs(), /*sample=*/false);
  waker_.WakeAt(clock_->NowNs() - 1);  // fires again unless the stop comes first
  waker_.Stop();
  EXPECT_LE(ShutDown(), 1);
}

}  // namespace
}  // namespace chronoserve::client::bench
