#include "server/shared_memory/region_releaser.h"

#include <new>

#include "common/thread_name.h"
#include "common/thread_role.h"

namespace chronoserve::server {

RegionReleaser& RegionReleaser::Get() {
  static RegionReleaser* const releaser = new RegionReleaser();  // never destroyed (see the header)
  return *releaser;
}

RegionReleaser::RegionReleaser() : thread_([this] { Run(); }) {}

void RegionReleaser::Release(const SharedMemoryRegion* region) {
  if (region == nullptr) return;
  if (region->on_device() || !IsThreadLatencyCritical()) {
    delete region;
    return;
  }
  bool queued = false;
  try {
    absl::MutexLock lock(&mu_);
    queue_.push_back(region);
    queued = true;
  } catch (const std::bad_alloc&) {
    // Destroyed here after all: slower for this batch, but never lost (and a shared_ptr's deleter
    // must not throw).
  }
  if (!queued) delete region;
}

void RegionReleaser::Run() {
  SetCurrentThreadName("cs-shm-release");
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](std::deque<const SharedMemoryRegion*>* queue) { return !queue->empty(); }, &queue_));
    const SharedMemoryRegion* region = queue_.front();
    queue_.pop_front();
    busy_ = true;
    mu_.Unlock();
    delete region;  // munmap, and cudaHostUnregister when page-locked: off the serving threads
    mu_.Lock();
    busy_ = false;
    ++released_;
  }
}

int64_t RegionReleaser::released_in_background() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

bool RegionReleaser::WaitReleased(int64_t count, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, count]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return released_ >= count; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool RegionReleaser::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.empty() && !busy_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

std::shared_ptr<const SharedMemoryRegion> ShareRegion(std::unique_ptr<SharedMemoryRegion> region,
                                                      std::function<void()> released) {
  return std::shared_ptr<const SharedMemoryRegion>(region.release(),
                                                   [released = std::move(released)](const SharedMemoryRegion* r) {
                                                     RegionReleaser::Get().Release(r);
                                                     if (released) released();
                                                   });
}

}  // namespace chronoserve::server
