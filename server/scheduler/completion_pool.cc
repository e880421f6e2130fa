#include "server/scheduler/completion_pool.h"

#include <algorithm>
#include <memory>

#include "common/thread_name.h"
#include "common/thread_role.h"

namespace chronoserve::server {

CompletionPool::CompletionPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      SetCurrentThreadName("cs-completion");
      MarkThreadLatencyCritical();
      Loop();
    });
  }
}

CompletionPool::~CompletionPool() { Stop(); }

int CompletionPool::DefaultThreads() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return cores <= 2 ? 0 : std::clamp(cores / 4, 1, 4);
}

void CompletionPool::CompleteBatch(Batch batch, const absl::Status& status) {
  if (threads_.empty() || batch.size() == 1) {
    for (auto& r : batch) InferRequest::Complete(std::move(r), status);
    return;
  }
  const size_t slices = std::min(threads_.size(), batch.size());
  const size_t per_slice = (batch.size() + slices - 1) / slices;
  absl::MutexLock lock(&mu_);
  for (size_t begin = 0; begin < batch.size(); begin += per_slice) {
    auto slice = std::make_shared<Batch>();
    const size_t end = std::min(batch.size(), begin + per_slice);
    for (size_t i = begin; i < end; ++i) slice->push_back(std::move(batch[i]));
    tasks_.push_back([slice, status] {
      for (auto& r : *slice) InferRequest::Complete(std::move(r), status);
    });
  }
  cv_.SignalAll();
}

void CompletionPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (tasks_.empty() && !stopping_) cv_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void CompletionPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace chronoserve::server
