// RegionReleaser: where a SharedMemoryRegion is destroyed. A request holds the regions its tensors
// are in until it is destroyed, after its answer, on the worker or completion thread that finished
// it. When the client unregistered a region while that request was in flight, the request held the
// last reference, and its destruction would unmap the region there: munmap, and for a page-locked
// region cudaHostUnregister (milliseconds for a large region) or for a CUDA region
// cudaIpcCloseMemHandle, on the thread the next batch waits for. From a latency-critical thread
// (common/thread_role.h) the region goes to the releaser's own thread instead; from any other
// thread (a gRPC thread unregistering a region no request holds) it is destroyed at once, so an
// unregistered region is gone when the RPC answers.
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/shared_memory/shared_memory_region.h"

namespace chronoserve::server {

class RegionReleaser {
 public:
  // The process's releaser. Never destroyed: its thread starts at the first hand-off and lives as
  // long as the process (what is still queued at exit goes with the process).
  static RegionReleaser& Get();

  // Destroys `region` now, or, on a latency-critical thread, hands it to the releaser's thread.
  void Release(const SharedMemoryRegion* region);
  // Regions the releaser's thread has destroyed so far.
  int64_t released_in_background() const;
  // Waits until every region handed off so far is destroyed, at most `timeout`; whether they are.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  RegionReleaser() = default;
  void Run();

  mutable absl::Mutex mu_;
  std::deque<const SharedMemoryRegion*> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the thread is destroying one now
  int64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<std::thread> thread_ ABSL_GUARDED_BY(mu_);
};

// `region` shared, its last reference handing it to RegionReleaser::Release.
std::shared_ptr<const SharedMemoryRegion> ShareRegion(std::unique_ptr<SharedMemoryRegion> region);

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_REGION_RELEASER_H_
