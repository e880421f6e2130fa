// SharedMemoryRegistry: the shared-memory regions clients registered by name (Triton's
// system_shared_memory and cuda_shared_memory extensions; one namespace for both kinds, as in
// Triton). Owned by the Server, handed to the InferenceService; any gRPC
// thread calls it. Regions are reference-counted: Find() returns a span that keeps its region
// mapped, so a region unregistered while a request uses it is unmapped only when that request is
// destroyed (then by RegionReleaser's thread when that is a worker's), and its name is free again
// at once.
//
//   registry.Register("in0", "/client_shm", 0, 1 << 20);         // shm_open + mmap
//   ASSIGN_OR_RETURN(SharedMemorySpan span, registry.Find("in0", 4096, 512));
//   request->regions.push_back({span.region, "model 'm' input 'x'"});  // the request pins the mapping
//   registry.Unregister("in0");                                   // the request still reads span.data
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/shared_memory/shared_memory_region.h"

namespace chronoserve::server {

// Bytes inside a registered region; holding it keeps the region mapped.
struct SharedMemorySpan {
  std::shared_ptr<const SharedMemoryRegion> region;
  char* data = nullptr;
  size_t byte_size = 0;
};

class SharedMemoryRegistry {
 public:
  // Both start RegionReleaser's thread (on the constructing thread: see RegionReleaser::Get).
  SharedMemoryRegistry();
  // Every region registered from now on is also page-locked by `pinner` (see HostMemoryPinner).
  explicit SharedMemoryRegistry(HostMemoryPinner pinner, DeviceMemoryOpener opener = nullptr);
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Maps [offset, offset + byte_size) of the POSIX object `key` under `name`. ALREADY_EXISTS when
  // the name is taken; otherwise SharedMemoryRegion::Map's errors.
  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size);
  // Opens a client's GPU memory from its CUDA IPC handle under `name`. FAILED_PRECONDITION when
  // the server has no GPU (no opener); ALREADY_EXISTS when the name is taken (by either kind);
  // INVALID_ARGUMENT for an empty name, a handle of the wrong size, byte_size 0; the opener's errors.
  absl::Status RegisterCuda(const std::string& name, const std::string& raw_handle, int64_t device_id,
                            uint64_t byte_size);
  // Whether RegisterCuda can succeed here (the server has a GPU).
  bool cuda_enabled() const { return static_cast<bool>(opener_); }
  // Forgets `name` if it is a region of `kind` (every region of that kind when empty). Unknown
  // names, and names of the other kind, are not an error, as in Triton. The mapping goes away once
  // no request holds it. A CUDA region is waited for: `closed` (if set) is called once its IPC
  // handle is closed (a request holds it until it is answered, or until its batch ends when its
  // client went away), so that the client's cudaFree after the answer never precedes the close,
  // which CUDA leaves undefined. Regions of that name (every name, for "") that an earlier
  // Unregister took out of service and whose handles are still open are waited for too, so a
  // second call, or one for every region, is answered no sooner than the first. `closed` runs on
  // the calling thread when nothing is open, else on a thread of its own (the caller goes on at
  // once), at most kCudaCloseWait later, with a warning in the log for a handle still open then.
  void Unregister(const std::string& name, SharedMemoryKind kind, std::function<void()> closed);
  // The same, waiting on the calling thread until `closed` would be called.
  void Unregister(const std::string& name, SharedMemoryKind kind = SharedMemoryKind::kSystem);
  static constexpr absl::Duration kCudaCloseWait = absl::Seconds(10);
  // The region of `kind` called `name` (NOT_FOUND if none, or if that name is of the other kind),
  // or every region of `kind` by name when `name` is empty.
  absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> Status(
      const std::string& name, SharedMemoryKind kind = SharedMemoryKind::kSystem) const;
  // [offset, offset + byte_size) of region `name` (either kind): NOT_FOUND when it is not registered,
  // INVALID_ARGUMENT when the range does not fit in it or the object no longer covers the region
  // (SharedMemoryRegion::CheckStillBacked; the message names region and sizes).
  absl::StatusOr<SharedMemorySpan> Find(const std::string& name, uint64_t offset, uint64_t byte_size) const;
  size_t size() const;

 private:
  absl::Status Insert(const std::string& name, std::unique_ptr<SharedMemoryRegion> region);

  const HostMemoryPinner pinner_;
  const DeviceMemoryOpener opener_;
  mutable absl::Mutex mu_;
  struct Registered {
    std::shared_ptr<const SharedMemoryRegion> region;
    std::shared_ptr<absl::Notification> closed;  // a CUDA region's: notified once its handle is closed
  };
  std::map<std::string, Registered> regions_ ABSL_GUARDED_BY(mu_);
  // CUDA regions unregistered whose handles may still be open, by name (those closed are dropped
  // as the next Unregister comes).
  std::vector<std::pair<std::string, std::shared_ptr<absl::Notification>>> closing_ ABSL_GUARDED_BY(mu_);
  // The Unregister calls waiting for handles to close, answered by one thread (started while any
  // waits), which the regions' closes wake; shared with them, so it outlives the registry.
  struct CloseWaiter;
  const std::shared_ptr<CloseWaiter> waiter_;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_
