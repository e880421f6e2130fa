// common/for_each_on_threads: every index called once, on the threads asked for, and the calls go
// on with fewer threads (the caller's alone at worst) when the system cannot start a helper. The
// failing system is a ThreadStarter that throws what std::thread throws.
#include "common/for_each_on_threads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace chronoserve {
namespace {
using ::testing::HasSubstr;

// Calls per index, and the threads that made them.
struct Record {
  explicit Record(size_t count) : calls(count) {}
  void Called(size_t i) {
    calls[i].fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    order.push_back(i);
  }
  std::vector<std::atomic<int>> calls;
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<size_t> order;
};

void ExpectEachCalledOnce(const Record& record) {
  for (size_t i = 0; i < record.calls.size(); ++i) EXPECT_EQ(record.calls[i].load(), 1) << "index " << i;
}

// Starts the first `working` helpers, then fails as std::thread does when the process is out of
// threads (EAGAIN).
ThreadStarter FailingAfter(int working, std::atomic<int>* tries) {
  return [working, tries](std::function<void()> body) {
    if (tries->fetch_add(1) >= working) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "thread creation");
    }
    return std::thread(std::move(body));
  };
}

TEST(ForEachOnThreadsTest, CallsEveryIndexOnceOnTheThreadsAskedFor) {
  constexpr size_t kCount = 200;
  Record record(kCount);
  ForEachOnThreadsOptions options;
  options.threads = 4;
  options.thread_name = "cs-test-help";
  options.what = "the test";
  const std::thread::id caller = std::this_thread::get_id();
  const int ran = ForEachOnThreads(kCount, options, [&](size_t i) {
    if (std::this_thread::get_id() != caller) {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof(name));
      EXPECT_EQ(std::string(name), "cs-test-help") << "a helper's name";
    }
    record.Called(i);
  });
  EXPECT_EQ(ran, 4);
  ExpectEachCalledOnce(record);
  EXPECT_LE(record.threads.size(), 4u);
  EXPECT_EQ(record.order.size(), kCount);
}

TEST(ForEachOnThreadsTest, NeverStartsMoreThreadsThanCallsOrNoneForNoCalls) {
  Record record(3);
  ForEachOnThreadsOptions options;
  options.threads = 16;
  EXPECT_EQ(ForEachOnThreads(3, options, [&](size_t i) { record.Called(i); }), 3);
  ExpectEachCalledOnce(record);

  int calls = 0;
  EXPECT_EQ(ForEachOnThreads(0, options, [&](size_t) { ++calls; }), 0);
  EXPECT_EQ(calls, 0);

  options.threads = 0;  // taken as 1: the caller's
  Record one(5);
  EXPECT_EQ(ForEachOnThreads(5, options, [&](size_t i) { one.Called(i); }), 1);
  EXPECT_EQ(one.order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

// One ForEachOnThreads over `count` calls with `threads` asked for, on a system that starts only
// `working` helpers: what ran, how many starts were tried and what was logged.
struct FailingRun {
  FailingRun(size_t count, int threads, int working, const std::string& what) : record(count) {
    ForEachOnThreadsOptions options;
    options.threads = threads;
    options.what = what;
    options.start = FailingAfter(working, &tries);
    ::testing::internal::CaptureStderr();
    ran = ForEachOnThreads(count, options, [this](size_t i) { record.Called(i); });
    log = ::testing::internal::GetCapturedStderr();
  }
  Record record;
  std::atomic<int> tries{0};
  int ran = 0;
  std::string log;
};

TEST(ForEachOnThreadsTest, AHelperThatCannotStartLeavesTheWorkToTheThreadsRunning) {
  FailingRun run(/*count=*/64, /*threads=*/4, /*working=*/1, "loading 64 models");
  EXPECT_EQ(run.ran, 2);
  EXPECT_EQ(run.tries.load(), 2) << "no more starts are tried after the first that fails";
  ExpectEachCalledOnce(run.record);
  EXPECT_LE(run.record.threads.size(), 2u);
  EXPECT_THAT(run.log, HasSubstr("could not start helper thread 2 of 3 for loading 64 models"));
  EXPECT_THAT(run.log, HasSubstr("going on with 2 threads"));
}

TEST(ForEachOnThreadsTest, WithNoHelperTheCallerMakesEveryCallInOrder) {
  FailingRun run(/*count=*/10, /*threads=*/8, /*working=*/0, "loading 10 versions of model 'mlp'");
  EXPECT_EQ(run.ran, 1);
  ExpectEachCalledOnce(run.record);
  EXPECT_EQ(run.record.threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
  EXPECT_EQ(run.record.order, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_THAT(run.log, HasSubstr("could not start helper thread 1 of 7 for loading 10 versions of model 'mlp'"));
  EXPECT_THAT(run.log, HasSubstr("going on with 1 thread"));
}

}  // namespace
}  // namespace chronoserve
