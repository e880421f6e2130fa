// HostKeepWarm on its own, driven by a fake clock: one spinner per CPU, pinned and at SCHED_IDLE as
// /proc shows them, parked until a request arrives, spinning within the horizon, parked again
// after it, stepping aside from a CPU that real work keeps busy and while many requests are in
// flight, joined when destroyed; bad arguments and an unusable CPU are refused.
#include "server/core/host_keep_warm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/cpu_set.h"
#include "tests/server/proc_threads.h"

namespace chronoserve::server {
namespace {
using ::testing::HasSubstr;
using testing::CpusAllowedList;
using testing::StatField;
using testing::ThreadDirs;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr int kSchedIdle = 5;  // SCHED_IDLE in /proc/.../stat's policy field

TEST(HostKeepWarmTest, SpinsOnEveryCpuWithinTheHorizonAndParksAfterIt) {
  const std::vector<int> cpus = CurrentThreadCpus();
  ASSERT_FALSE(cpus.empty());
  const int n = static_cast<int>(cpus.size());
  FakeClock clock;
  auto warm = HostKeepWarm::Start(cpus, absl::Milliseconds(10), &clock);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ((*warm)->cpus(), cpus);
  for (int cpu : cpus) {
    const std::vector<std::string> tasks = ThreadDirs(absl::StrCat("cs-spin-", cpu));
    ASSERT_EQ(tasks.size(), 1u) << "one spinner for CPU " << cpu;
    EXPECT_EQ(CpusAllowedList(tasks[0]), std::to_string(cpu)) << "pinned to its CPU";
    EXPECT_EQ(StatField(tasks[0], 41), std::to_string(kSchedIdle)) << "at SCHED_IDLE";
  }
  EXPECT_EQ((*warm)->spinning(), 0) << "parked until the first request";

  (*warm)->Touch(clock.NowNs());
  ASSERT_TRUE((*warm)->WaitForSpinning(n, kWait)) << "every spinner spins after a request";
  clock.AdvanceNs(5'000'000);  // within the horizon
  (*warm)->Touch(clock.NowNs());
  clock.AdvanceNs(9'000'000);  // 14 ms after the first request, 9 ms after the second
  EXPECT_EQ((*warm)->spinning(), n) << "the second request moved the horizon";
  clock.AdvanceNs(2'000'000);
  ASSERT_TRUE((*warm)->WaitForSpinning(0, kWait)) << "parked once the horizon passed without a request";

  (*warm)->Touch(clock.NowNs());
  ASSERT_TRUE((*warm)->WaitForSpinning(n, kWait)) << "a request after the horizon wakes them again";
  warm->reset();
  for (int cpu : cpus) EXPECT_THAT(ThreadDirs(absl::StrCat("cs-spin-", cpu)), ::testing::IsEmpty()) << "joined";
}

TEST(HostKeepWarmTest, ManyTouchesFromManyThreadsKeepItSpinningAndStopJoins) {
  FakeClock clock;
  const std::vector<int> one = {CurrentThreadCpus().front()};
  auto warm = HostKeepWarm::Start(one, absl::Milliseconds(4), &clock);
  ASSERT_TRUE(warm.ok()) << warm.status();
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) (*warm)->Touch(clock.NowNs());
    });
  }
  for (auto& t : callers) t.join();
  ASSERT_TRUE((*warm)->WaitForSpinning(1, kWait));
  clock.AdvanceNs(5'000'000);
  ASSERT_TRUE((*warm)->WaitForSpinning(0, kWait));
  // While it parks and wakes, touches from several threads must never be lost.
  for (int round = 0; round < 50; ++round) {
    (*warm)->Touch(clock.NowNs());
    ASSERT_TRUE((*warm)->WaitForSpinning(1, kWait)) << "round " << round;
    clock.AdvanceNs(5'000'000);
    ASSERT_TRUE((*warm)->WaitForSpinning(0, kWait)) << "round " << round;
  }
}

TEST(HostKeepWarmTest, StepsAsideFromACpuThatRealWorkKeepsBusy) {
  FakeClock clock;
  const int cpu = CurrentThreadCpus().front();
  auto warm = HostKeepWarm::Start({cpu}, absl::Seconds(60), &clock);
  ASSERT_TRUE(warm.ok()) << warm.status();
  (*warm)->Touch(clock.NowNs());
  ASSERT_TRUE((*warm)->WaitForSpinning(1, kWait));
  // A thread at normal priority busy on the spinner's CPU: the spinner runs at most in the slices
  // the scheduler still hands it, sees the time it lost, and steps aside.
  std::thread busy([&] {
    ASSERT_TRUE(PinCurrentThread({cpu}).ok());
    const int64_t deadline = SteadyClock::Now() + absl::ToInt64Nanoseconds(kWait);
    while ((*warm)->busy_backoffs() == 0 && SteadyClock::Now() < deadline) {
    }
  });
  busy.join();
  EXPECT_GE((*warm)->busy_backoffs(), 1);
  EXPECT_EQ((*warm)->spinning(), 1) << "stepping aside is not parking: the horizon has not passed";
}

TEST(HostKeepWarmTest, StepsAsideWhileMoreThanTheLimitOfRequestsIsInFlight) {
  FakeClock clock;
  auto warm = HostKeepWarm::Start({CurrentThreadCpus().front()}, absl::Seconds(60), &clock);
  ASSERT_TRUE(warm.ok()) << warm.status();
  (*warm)->Touch(clock.NowNs());
  ASSERT_TRUE((*warm)->WaitForSpinning(1, kWait));
  (*warm)->SetInFlight(HostKeepWarm::kMaxInFlight);
  const int64_t before = (*warm)->busy_backoffs();
  (*warm)->SetInFlight(HostKeepWarm::kMaxInFlight + 1);
  const int64_t deadline = SteadyClock::Now() + absl::ToInt64Nanoseconds(kWait);
  while ((*warm)->busy_backoffs() == before && SteadyClock::Now() < deadline) {
  }
  EXPECT_GT((*warm)->busy_backoffs(), before) << "a busy server: the spinner steps aside";
  EXPECT_EQ((*warm)->spinning(), 1) << "stepping aside is not parking";
}

TEST(HostKeepWarmTest, RefusesNoCpusAHorizonThatIsNotPositiveAndAnUnusableCpu) {
  FakeClock clock;
  auto none = HostKeepWarm::Start({}, absl::Milliseconds(10), &clock);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  auto zero = HostKeepWarm::Start(CurrentThreadCpus(), absl::ZeroDuration(), &clock);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("--host-keep-warm-ms: the horizon must be positive"));
  if (CurrentThreadCpus().back() < 1023) {
    auto far = HostKeepWarm::Start({CurrentThreadCpus().front(), 1023}, absl::Milliseconds(10), &clock);
    ASSERT_FALSE(far.ok());
    EXPECT_THAT(std::string(far.status().message()),
                HasSubstr("--host-keep-warm-ms: the spinner of CPU 1023: pinning a thread to CPUs 1023 failed"));
    EXPECT_THAT(ThreadDirs(absl::StrCat("cs-spin-", CurrentThreadCpus().front())), ::testing::IsEmpty())
        << "the spinner that did start is stopped";
  }
}

}  // namespace
}  // namespace chronoserve::server
