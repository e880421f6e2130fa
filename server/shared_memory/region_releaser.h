// RegionReleaser: where a SharedMemoryRegion is destroyed. A request holds the regions its tensors
// are in until it completes (InferRequest::Complete, before its answer), on the worker or
// completion thread that finished it. When the client unregistered a region while that request was in flight, the request held the
// last reference, and its destruction would unmap the region there: munmap, and for a page-locked
// region cudaHostUnregister (milliseconds for a large region), on the thread the next batch waits
// for. From a latency-critical thread (common/thread_role.h) a system region goes to the releaser's
// own thread instead. Destroyed at once, on the calling thread: a region released from any other
// thread (a gRPC thread unregistering a region no request holds), and a CUDA region always (its
// cudaIpcCloseMemHandle must not trail the client's cudaFree, which may follow its last answer).
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/shared_memory/shared_memory_region.h"

namespace chronoserve::server {

class RegionReleaser {
 public:
  // The process's releaser, made (and its thread started) by the first call: call it first from an
  // ordinary thread (SharedMemoryRegistry's constructor does), since a thread inherits its
  // creator's CPU affinity and nice value, which a worker sets for itself. Never destroyed; the
  // server waits for it to go idle when it stops (WaitIdle).
  static RegionReleaser& Get();

  // Destroys `region` now, or, for a system region on a latency-critical thread, hands it to the
  // releaser's thread (or destroys it now if the hand-off fails for want of memory).
  void Release(const SharedMemoryRegion* region);
  // Regions the releaser's thread has destroyed so far.
  int64_t released_in_background() const;
  // Waits until that count reaches `count`, at most `timeout`; whether it did.
  bool WaitReleased(int64_t count, absl::Duration timeout) const;
  // Waits until nothing handed off is waiting or being destroyed (regions handed off meanwhile
  // included), at most `timeout`; whether that happened.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  RegionReleaser();
  void Run();

  mutable absl::Mutex mu_;
  std::deque<const SharedMemoryRegion*> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the thread is destroying one now
  int64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// `region` shared, its last reference handing it to RegionReleaser::Release, then calling
// `released` (if set): for a CUDA region, destroyed at once, its IPC handle is closed by then.
std::shared_ptr<const SharedMemoryRegion> ShareRegion(std::unique_ptr<SharedMemoryRegion> region,
                                                      std::function<void()> released = nullptr);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_
