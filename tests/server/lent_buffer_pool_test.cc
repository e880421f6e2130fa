// LentBufferPool: buffers are reused smallest-fit, lent within the limits and back in the pool when
// their owner is released (on another thread too), never freed while the pool lives, and all freed
// once both the pool's user and the last lent owner are gone.
#include "server/backend/lent_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace chronoserve::server {
namespace {

// Counts what the pool allocates and frees, with malloc underneath.
struct Counted {
  std::shared_ptr<int> allocated = std::make_shared<int>(0);
  std::shared_ptr<int> freed = std::make_shared<int>(0);
  std::shared_ptr<bool> fail = std::make_shared<bool>(false);

  LentBufferPool::Memory memory() const {
    return {[allocated = allocated, fail = fail](size_t bytes) -> absl::StatusOr<char*> {
              if (*fail) return absl::ResourceExhaustedError("no memory in this test");
              ++*allocated;
              return static_cast<char*>(std::malloc(bytes));
            },
            [freed = freed](char* data) {
              ++*freed;
              std::free(data);
            }};
  }
};

TEST(LentBufferPoolTest, TakeReusesTheSmallestFreeBufferThatFits) {
  Counted counted;
  auto pool = LentBufferPool::Create(counted.memory());
  auto small = pool->Take(100);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->capacity, 4096u) << "at least 4 KiB";
  auto large = pool->Take(100000);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(large->capacity, 150000u) << "room to grow: 1.5x";
  pool->Put(*small);
  pool->Put(*large);
  auto again = pool->Take(3000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data, small->data) << "the smallest that fits";
  auto big = pool->Take(5000);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->data, large->data);
  auto fresh = pool->Take(10);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->data, small->data);
  EXPECT_EQ(*counted.allocated, 3);
  EXPECT_EQ(pool->buffers(), 3u);
  EXPECT_EQ(*counted.freed, 0) << "nothing is freed while the pool lives";
  pool.reset();
  EXPECT_EQ(*counted.freed, 3) << "every buffer freed with the pool, held ones too";
}

TEST(LentBufferPoolTest, ALentBufferComesBackWhenItsOwnerIsReleasedOnAnotherThread) {
  Counted counted;
  auto pool = LentBufferPool::Create(counted.memory());
  auto buffer = pool->Take(8192);
  ASSERT_TRUE(buffer.ok());
  buffer->data[0] = 42;
  std::shared_ptr<const void> owner = pool->Lend(*buffer);
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner.get(), buffer->data);
  EXPECT_EQ(pool->lent(), 1);
  EXPECT_EQ(pool->lent_bytes(), buffer->capacity);
  std::shared_ptr<const void> copy = owner;  // two responses of one batch share it
  owner.reset();
  EXPECT_EQ(pool->lent(), 1) << "still viewed by the second";
  std::thread sender([held = std::move(copy)]() mutable { held.reset(); });
  sender.join();
  EXPECT_EQ(pool->lent(), 0);
  EXPECT_EQ(pool->lent_bytes(), 0u);
  auto reused = pool->Take(8000);
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(reused->data, buffer->data) << "back in the pool";
  EXPECT_EQ(*counted.allocated, 1);
}

TEST(LentBufferPoolTest, LendingStopsAtEitherLimitAndResumesAsBuffersComeBack) {
  Counted counted;
  LentBufferPool::Limits limits;
  limits.max_lent = 3;
  limits.max_lent_bytes = 40000;
  auto pool = LentBufferPool::Create(counted.memory(), limits);
  std::vector<std::shared_ptr<const void>> owners;
  for (int k = 0; k < 3; ++k) {
    auto buffer = pool->Take(4096);
    ASSERT_TRUE(buffer.ok());
    owners.push_back(pool->Lend(*buffer));
    ASSERT_NE(owners.back(), nullptr) << k;
  }
  auto fourth = pool->Take(4096);
  ASSERT_TRUE(fourth.ok());
  EXPECT_FALSE(pool->CanLend(fourth->capacity));
  EXPECT_EQ(pool->Lend(*fourth), nullptr) << "the count limit: the caller keeps its buffer and copies";
  owners.pop_back();
  EXPECT_TRUE(pool->CanLend(fourth->capacity));
  auto lent_fourth = pool->Lend(*fourth);
  EXPECT_NE(lent_fourth, nullptr);
  owners.clear();
  lent_fourth.reset();
  // The byte limit: 40000 bytes, one 30000-byte buffer (45000 with its room) is too many.
  auto wide = pool->Take(30000);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(pool->Lend(*wide), nullptr);
  pool->Put(*wide);
  EXPECT_EQ(pool->lent(), 0);
}

TEST(LentBufferPoolTest, LentBuffersOutliveThePoolsUserAndAreFreedWithTheLastOwner) {
  Counted counted;
  std::shared_ptr<const void> owner;
  {
    auto pool = LentBufferPool::Create(counted.memory());
    auto kept = pool->Take(64);
    auto lent = pool->Take(64);
    ASSERT_TRUE(kept.ok() && lent.ok());
    lent->data[0] = 7;
    owner = pool->Lend(*lent);
    ASSERT_NE(owner, nullptr);
    pool->Put(*kept);
  }
  EXPECT_EQ(*counted.freed, 0) << "a response still sends from a lent buffer";
  EXPECT_EQ(static_cast<const char*>(owner.get())[0], 7);
  owner.reset();
  EXPECT_EQ(*counted.freed, 2) << "the pool went with its last lent buffer";
}

TEST(LentBufferPoolTest, AFailedAllocationIsReportedAndTheRestStillWorks) {
  Counted counted;
  auto pool = LentBufferPool::Create(counted.memory());
  *counted.fail = true;
  auto none = pool->Take(100);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->Lend({}), nullptr) << "nothing to lend";
  *counted.fail = false;
  auto some = pool->Take(100);
  EXPECT_TRUE(some.ok());
  EXPECT_EQ(pool->buffers(), 1u);
}

TEST(LentBufferPoolTest, ManyThreadsReturningWhileTheWorkerTakesAndLendsLoseNoBuffer) {
  Counted counted;
  auto pool = LentBufferPool::Create(counted.memory());
  constexpr int kBatches = 2000;
  std::vector<std::thread> senders;
  std::vector<std::shared_ptr<const void>> batch_owners;
  int copied = 0;
  int lent = 0;
  for (int b = 0; b < kBatches; ++b) {
    auto buffer = pool->Take(5000 + (b % 7) * 100);
    ASSERT_TRUE(buffer.ok());
    std::shared_ptr<const void> owner = pool->Lend(*buffer);
    if (owner == nullptr) {
      pool->Put(*buffer);
      ++copied;
    } else {
      ++lent;
      batch_owners.push_back(std::move(owner));
    }
    ASSERT_LE(pool->lent(), 32) << "never more out at once than the limit";
    if (batch_owners.size() == 8) {  // eight responses sent at once from other threads
      senders.emplace_back([owners = std::move(batch_owners)]() mutable { owners.clear(); });
      batch_owners.clear();
    }
  }
  batch_owners.clear();
  for (auto& t : senders) t.join();
  EXPECT_EQ(pool->lent(), 0);
  EXPECT_EQ(pool->lent_bytes(), 0u);
  // Buffers made: at most what was ever lent at once plus one held, far fewer than the batches.
  EXPECT_LE(pool->buffers(), 33u);
  EXPECT_EQ(static_cast<int>(pool->buffers()), *counted.allocated);
  EXPECT_EQ(lent + copied, kBatches);
  EXPECT_GE(lent, 32) << "the first 32 batches find fewer than 32 out";
}

}  // namespace
}  // namespace chronoserve::server
