// LiveCalls (queued_call.h): the count of calls alive on ModelInferQueues' completion queues that
// Stop() waits to reach zero before it shuts the queues down.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/grpc/queued_call.h"
#include "tests/server/proc_threads.h"

namespace chronoserve::server {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// Whether the thread `tid` of this process is asleep ("S" in /proc) within `timeout`: polled, no
// sleep. A thread that does nothing but wait on a mutex condition sleeps only in that wait.
bool SleepsWithin(pid_t tid, absl::Duration timeout) {
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  const absl::Time deadline = absl::Now() + timeout;
  while (testing::StatField(task, 3) != "S") {
    if (absl::Now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(LiveCallsTest, AwaitNoneReturnsOnceTheLastCallIsRemovedAndTimesOutWhileOneLives) {
  LiveCalls live;
  EXPECT_TRUE(live.AwaitNone(absl::ZeroDuration())) << "none yet";
  live.Add();
  live.Add();
  EXPECT_EQ(live.count(), 2);
  EXPECT_FALSE(live.AwaitNone(absl::Milliseconds(5))) << "two calls alive: the wait times out";
  live.Remove();
  EXPECT_FALSE(live.AwaitNone(absl::ZeroDuration())) << "one left";

  // The waiter is asleep in AwaitNone (its only wait) before the last call ends, so the Remove()
  // must wake it: the path Stop() takes, not a count already at zero.
  std::atomic<pid_t> waiter_tid{0};
  bool none = false;
  absl::Notification returned;
  std::thread waiter([&] {
    waiter_tid = static_cast<pid_t>(syscall(SYS_gettid));
    none = live.AwaitNone(kWait);
    returned.Notify();
  });
  absl::Cleanup join_waiter = [&] { waiter.join(); };  // AwaitNone returns by kWait in any case
  const absl::Time deadline = absl::Now() + kWait;
  while (waiter_tid.load() == 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_NE(waiter_tid.load(), 0) << "the waiter thread never ran";
  EXPECT_TRUE(SleepsWithin(waiter_tid.load(), kWait)) << "the waiter never blocked in AwaitNone";
  EXPECT_FALSE(returned.HasBeenNotified()) << "AwaitNone returned while a call lived";
  live.Remove();  // the last call ends on another thread, as on a queue's thread
  ASSERT_TRUE(returned.WaitForNotificationWithTimeout(kWait)) << "Remove() did not wake AwaitNone";
  EXPECT_TRUE(none);
  EXPECT_EQ(live.count(), 0);
}

// A call counts itself out when it is destroyed, after its own members (its gRPC state) are gone.
TEST(LiveCallsTest, AQueuedCallIsCountedOutWhenDestroyed) {
  class NoCall final : public QueuedCall {
   public:
    void RequestFrom(grpc::ServerCompletionQueue*) override {}
    void Proceed(Event, bool) override {}
  };
  LiveCalls live;
  auto* call = new NoCall;
  call->live = &live;
  live.Add();
  EXPECT_EQ(live.count(), 1);
  delete call;
  EXPECT_EQ(live.count(), 0);
  NoCall uncounted;  // no owner counting: destroyed without touching any count
}

}  // namespace
}  // namespace chronoserve::server
