#include "server/backend/lent_buffer_pool.h"

#include <algorithm>
#include <utility>

namespace chronoserve::server {

std::shared_ptr<LentBufferPool> LentBufferPool::Create(Memory memory, Limits limits) {
  return std::shared_ptr<LentBufferPool>(new LentBufferPool(std::move(memory), limits));
}

LentBufferPool::~LentBufferPool() {
  for (char* data : all_) memory_.free(data);
}

absl::StatusOr<LentBufferPool::Buffer> LentBufferPool::Take(size_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != free_.end()) {
      Buffer buffer = *best;
      *best = free_.back();
      free_.pop_back();
      return buffer;
    }
  }
  // Allocated outside the lock: cudaHostAlloc takes a while, and the returns of lent buffers on
  // gRPC's threads must not wait for it.
  const size_t capacity = std::max<size_t>(4096, bytes + bytes / 2);
  absl::StatusOr<char*> data = memory_.allocate(capacity);
  if (!data.ok()) return data.status();
  absl::MutexLock lock(&mu_);
  all_.push_back(*data);
  return Buffer{*data, capacity};
}

void LentBufferPool::Put(Buffer buffer) {
  if (buffer.data == nullptr) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(buffer);
}

bool LentBufferPool::CanLend(size_t bytes) const {
  absl::MutexLock lock(&mu_);
  return CanLendLocked(bytes);
}

bool LentBufferPool::CanLendLocked(size_t bytes) const {
  return lent_ < limits_.max_lent && lent_bytes_ + bytes <= limits_.max_lent_bytes;
}

std::shared_ptr<const void> LentBufferPool::Lend(Buffer buffer) {
  if (buffer.data == nullptr) return nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!CanLendLocked(buffer.capacity)) return nullptr;
    ++lent_;
    lent_bytes_ += buffer.capacity;
  }
  // The owner holds the pool: it returns the buffer even when the pool's user is gone by then.
  return std::shared_ptr<const void>(buffer.data,
                                     [pool = shared_from_this(), buffer](const void*) { pool->Return(buffer); });
}

void LentBufferPool::Return(Buffer buffer) {
  absl::MutexLock lock(&mu_);
  --lent_;
  lent_bytes_ -= buffer.capacity;
  free_.push_back(buffer);
}

int LentBufferPool::lent() const {
  absl::MutexLock lock(&mu_);
  return lent_;
}

size_t LentBufferPool::lent_bytes() const {
  absl::MutexLock lock(&mu_);
  return lent_bytes_;
}

size_t LentBufferPool::buffers() const {
  absl::MutexLock lock(&mu_);
  return all_.size();
}

}  // namespace chronoserve::server
