// LiveCalls (queued_call.h): the count of calls alive on ModelInferQueues' completion queues that
// Stop() waits to reach zero before it shuts the queues down.
#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "server/grpc/queued_call.h"

namespace chronoserve::server {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

TEST(LiveCallsTest, AwaitNoneReturnsOnceTheLastCallIsRemovedAndTimesOutWhileOneLives) {
  LiveCalls live;
  EXPECT_TRUE(live.AwaitNone(absl::ZeroDuration())) << "none yet";
  live.Add();
  live.Add();
  EXPECT_EQ(live.count(), 2);
  EXPECT_FALSE(live.AwaitNone(absl::Milliseconds(5))) << "two calls alive: the wait times out";
  live.Remove();
  EXPECT_FALSE(live.AwaitNone(absl::ZeroDuration())) << "one left";

  absl::Notification waiting;
  std::thread last([&] {
    waiting.WaitForNotification();
    live.Remove();  // the last call ends on another thread, as on a queue's thread
  });
  waiting.Notify();
  EXPECT_TRUE(live.AwaitNone(kWait));
  EXPECT_EQ(live.count(), 0);
  last.join();
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
