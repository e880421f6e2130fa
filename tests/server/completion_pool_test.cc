#include "server/scheduler/completion_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/fakes/finishes_within.h"

namespace chronoserve::server {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

void WithinTimeout(const char* what, const std::function<void()>& wait) {
  testing::FinishesWithin(what, kTimeout, wait);
}

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
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(kTimeout));
  WithinTimeout("Stop()", [&] { pool.Stop(); });
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
    WithinTimeout("Stop()", [&] { pool.Stop(); });
    WithinTimeout("a second Stop()", [&] { pool.Stop(); });  // idempotent
  }
  EXPECT_EQ(completed.load(), 80);
}

// Two workers hand over many batches of mixed sizes while the pool's threads are busy, idle or
// just woken: every request is completed exactly once and none waits for a wake-up that never
// comes (a lost wake-up would leave requests unanswered past the timeout).
TEST(CompletionPoolTest, NothingIsLostAcrossManyHandOvers) {
  constexpr int kWorkers = 2;
  constexpr int kBatchesPerWorker = 300;
  CompletionPool pool(3);
  std::atomic<int> completed{0};
  std::atomic<int> handed{0};
  absl::Notification all_done;
  std::atomic<bool> handing_done{false};
  std::atomic<bool> notified{false};
  auto notify_once = [&] {
    if (!notified.exchange(true)) all_done.Notify();
  };
  auto note = [&](std::unique_ptr<InferRequest>) {
    const int n = completed.fetch_add(1) + 1;
    if (handing_done.load() && n == handed.load()) notify_once();
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int b = 0; b < kBatchesPerWorker; ++b) {
        Batch batch;
        const int size = 2 + (b * 7 + w * 3) % 9;  // 2..10 requests
        for (int i = 0; i < size; ++i) {
          auto r = std::make_unique<InferRequest>();
          r->on_complete = note;
          batch.push_back(std::move(r));
        }
        handed.fetch_add(size);
        pool.CompleteBatch(std::move(batch), absl::OkStatus());
      }
    });
  }
  WithinTimeout("the handing threads' join", [&] {
    for (auto& t : workers) t.join();
  });
  handing_done.store(true);
  if (completed.load() == handed.load()) notify_once();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(kTimeout))
      << completed.load() << " of " << handed.load() << " requests completed";
  WithinTimeout("Stop()", [&] { pool.Stop(); });
  EXPECT_EQ(completed.load(), handed.load());
}

}  // namespace
}  // namespace chronoserve::server
