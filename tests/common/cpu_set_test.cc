// CPU lists (the kernel's cpulist syntax), pinning a thread to one, and a thread's nice value.
#include "common/cpu_set.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace chronoserve {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpuListTest, ParsesSinglesRangesAndBlanks) {
  struct Case {
    const char* text;
    std::vector<int> cpus;
    const char* formatted;
  };
  const Case cases[] = {
      {"3", {3}, "3"},
      {"0-3,8", {0, 1, 2, 3, 8}, "0-3,8"},
      {" 1 , 2 ", {1, 2}, "1-2"},
      {"8,0-2,1", {0, 1, 2, 8}, "0-2,8"},  // sorted, repeats dropped
      {"5-5", {5}, "5"},
      {"1023", {1023}, "1023"},
  };
  for (const Case& c : cases) {
    auto cpus = ParseCpuList(c.text);
    ASSERT_TRUE(cpus.ok()) << c.text << ": " << cpus.status();
    EXPECT_EQ(*cpus, c.cpus) << c.text;
    EXPECT_EQ(FormatCpuList(*cpus), c.formatted) << c.text;
  }
}

TEST(CpuListTest, RejectsBadListsNamingTheItem) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "empty CPU list"},
      {"  ", "empty CPU list"},
      {"1,,2", "empty item"},
      {"a", "'a' is not a CPU number"},
      {"-1", "'-1' is not a CPU number"},
      {"3-1", "'3-1': the range ends below its start"},
      {"0-x", "'0-x' is not a CPU number"},
      {"1024", "beyond the largest CPU number, 1023"},
      {"0-2000", "'0-2000': CPU 2000 is beyond"},
  };
  for (const Case& c : cases) {
    auto cpus = ParseCpuList(c.text);
    ASSERT_FALSE(cpus.ok()) << c.text;
    EXPECT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(cpus.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(CpuListTest, FormatsNothingAsEmpty) { EXPECT_EQ(FormatCpuList({}), ""); }

TEST(PinCurrentThreadTest, PinsOnlyTheCallingThread) {
  const std::vector<int> before = CurrentThreadCpus();
  ASSERT_FALSE(before.empty());
  const int target = before.back();  // a CPU this process may use
  std::vector<int> inside;
  int ran_on = -1;
  absl::Status pinned;
  std::thread t([&] {
    pinned = PinCurrentThread({target});
    inside = CurrentThreadCpus();
    ran_on = sched_getcpu();
  });
  t.join();
  ASSERT_TRUE(pinned.ok()) << pinned;
  EXPECT_THAT(inside, ElementsAre(target));
  EXPECT_EQ(ran_on, target);
  EXPECT_EQ(CurrentThreadCpus(), before) << "the calling thread's mask is its own";
}

TEST(PinCurrentThreadTest, FailsNamingCpusThatDoNotExist) {
  absl::Status pinned;
  std::thread t([&] { pinned = PinCurrentThread({1022, 1023}); });
  t.join();
  if (pinned.ok()) GTEST_SKIP() << "this machine has CPUs 1022-1023";
  EXPECT_EQ(pinned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pinned.message()), HasSubstr("CPUs 1022-1023"));
  EXPECT_FALSE(PinCurrentThread({}).ok());
}

TEST(ThreadNiceTest, SetsOnlyTheCallingThread) {
  const int before = CurrentThreadNice();
  const int target = std::min(before + 3, 19);  // lowering one's own priority needs no privilege
  absl::Status set;
  int inside = 100;
  std::thread t([&] {
    set = SetCurrentThreadNice(target);
    inside = CurrentThreadNice();
  });
  t.join();
  ASSERT_TRUE(set.ok()) << set;
  EXPECT_EQ(inside, target);
  EXPECT_EQ(CurrentThreadNice(), before) << "the calling thread's nice value is its own";
}

TEST(ThreadNiceTest, RefusesOutOfRangeAndSaysWhatRaisingNeeds) {
  EXPECT_EQ(SetCurrentThreadNice(-21).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetCurrentThreadNice(20).code(), absl::StatusCode::kInvalidArgument);
  absl::Status raised;
  int after = 100;
  std::thread t([&] {
    ASSERT_TRUE(SetCurrentThreadNice(19).ok());
    raised = SetCurrentThreadNice(-20);
    after = CurrentThreadNice();
  });
  t.join();
  if (raised.ok()) {  // root or CAP_SYS_NICE
    EXPECT_EQ(after, -20);
  } else {
    EXPECT_EQ(raised.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(raised.message()), HasSubstr("needs root or CAP_SYS_NICE"));
    EXPECT_EQ(after, 19) << "a refused change leaves the value as it was";
  }
}

}  // namespace
}  // namespace chronoserve
