#include "server/scheduler/completion_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace chronoserve::server {
namespace {

// Every request of a batch is completed exactly once, with the batch's status, by the pool's
// threads (or inline), and Stop() waits for what was handed over.
void CompletesEveryRequestOnce(int threads) {
  CompletionPool pool(threads);
  absl::Mutex mu;
  std::multiset<std::string> done;
  std::set<std::thread::id> completers;
  absl::Notification all_done;
  constexpr int kRequests = 37;
  Batch batch;
  for (int i = 0; i < kRequests; ++i) {
    auto r = std::make_unique<InferRequest>();
    r->id = "r" + std::to_string(i);
    r->on_complete = [&](std::unique_ptr<InferRequest> req) {
      EXPECT_EQ(req->status.code(), absl::StatusCode::kDataLoss);
      absl::MutexLock lock(&mu);
      done.insert(req->id);
      completers.insert(std::this_thread::get_id());
      if (done.size() == kRequests) all_done.Notify();
    };
    batch.push_back(std::move(r));
  }
  pool.CompleteBatch(std::move(batch), absl::DataLossError("boom"));
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  pool.Stop();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(done.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(std::set<std::string>(done.begin(), done.end()).size(), static_cast<size_t>(kRequests));
  if (threads == 0) {
    EXPECT_EQ(completers, std::set<std::thread::id>{std::this_thread::get_id()});
  } else {
    EXPECT_EQ(completers.count(std::this_thread::get_id()), 0u) << "off the worker's thread";
    EXPECT_LE(completers.size(), static_cast<size_t>(threads));
  }
}

TEST(CompletionPoolTest, InlineWithoutThreads) { CompletesEveryRequestOnce(0); }
TEST(CompletionPoolTest, ParallelSlicesWithThreads) { CompletesEveryRequestOnce(3); }

TEST(CompletionPoolTest, StopDrainsHandedOverWork) {
  std::atomic<int> completed{0};
  {
    CompletionPool pool(2);
    for (int b = 0; b < 20; ++b) {
      Batch batch;
      for (int i = 0; i < 4; ++i) {
        auto r = std::make_unique<InferRequest>();
        r->on_complete = [&completed](std::unique_ptr<InferRequest>) { ++completed; };
        batch.push_back(std::move(r));
      }
      pool.CompleteBatch(std::move(batch), absl::OkStatus());
    }
    pool.Stop();
    pool.Stop();  // idempotent
  }
  EXPECT_EQ(completed.load(), 80);
}

}  // namespace
}  // namespace chronoserve::server
