// DeviceActivity: tracks when a device (one GPU, or the CPU) last had no work, so each batch can
// report `idle_before_us`. Shared by every worker on that device; thread-safe (one mutex, held for
// a few instructions). DeviceActivityRegistry owns one per device and is owned by the server.
#ifndef CHRONOSERVE_SERVER_BACKEND_DEVICE_ACTIVITY_H_
#define CHRONOSERVE_SERVER_BACKEND_DEVICE_ACTIVITY_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace chronoserve::server {

class DeviceActivity {
 public:
  explicit DeviceActivity(int64_t now_ns) : idle_since_ns_(now_ns) {}
  // Work starts at `now_ns`; returns how long (us) the device was idle before it, 0 if busy.
  int64_t BeginWork(int64_t now_ns);
  // Work that began with BeginWork ended at `now_ns`.
  void EndWork(int64_t now_ns);

 private:
  absl::Mutex mu_;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t idle_since_ns_ ABSL_GUARDED_BY(mu_);
};

class DeviceActivityRegistry {
 public:
  // The tracker for `gpu` (-1 = CPU), created on first use. The pointer lives as long as the registry.
  DeviceActivity* Get(int gpu, int64_t now_ns);

 private:
  absl::Mutex mu_;
  std::map<int, std::unique_ptr<DeviceActivity>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_DEVICE_ACTIVITY_H_
