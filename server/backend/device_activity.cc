#include "server/backend/device_activity.h"

#include <algorithm>

namespace chronoserve::server {

int64_t DeviceActivity::BeginWork(int64_t now_ns) {
  absl::MutexLock lock(&mu_);
  const int64_t idle_us = busy_ == 0 ? std::max<int64_t>(0, now_ns - idle_since_ns_) / 1000 : 0;
  ++busy_;
  return idle_us;
}

void DeviceActivity::EndWork(int64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (--busy_ == 0) idle_since_ns_ = now_ns;
}

DeviceActivity* DeviceActivityRegistry::Get(int gpu, int64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto& slot = devices_[gpu];
  if (!slot) slot = std::make_unique<DeviceActivity>(now_ns);
  return slot.get();
}

}  // namespace chronoserve::server
