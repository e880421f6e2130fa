// SharedMemoryRegistry: the system shared-memory regions clients registered by name (Triton's
// system_shared_memory extension). Owned by the Server, handed to the InferenceService; any gRPC
// thread calls it. Regions are reference-counted: Find() returns a span that keeps its region
// mapped, so a region unregistered while a request uses it is unmapped only when that request is
// destroyed, and its name is free again at once.
//
//   registry.Register("in0", "/client_shm", 0, 1 << 20);         // shm_open + mmap
//   ASSIGN_OR_RETURN(SharedMemorySpan span, registry.Find("in0", 4096, 512));
//   request->keep_alive.push_back(span.region);                   // the request pins the mapping
//   registry.Unregister("in0");                                   // the request still reads span.data
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
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
  SharedMemoryRegistry() = default;
  // Every region registered from now on is also page-locked by `pinner` (see HostMemoryPinner).
  explicit SharedMemoryRegistry(HostMemoryPinner pinner) : pinner_(std::move(pinner)) {}
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Maps [offset, offset + byte_size) of the POSIX object `key` under `name`. ALREADY_EXISTS when
  // the name is taken; otherwise SharedMemoryRegion::Map's errors.
  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size);
  // Forgets `name` (every region when empty). Unknown names are not an error, as in Triton. The
  // mapping goes away once no request holds it.
  void Unregister(const std::string& name);
  // The region called `name` (NOT_FOUND if none), or every region by name when `name` is empty.
  absl::StatusOr<std::vector<std::shared_ptr<const SharedMemoryRegion>>> Status(const std::string& name) const;
  // [offset, offset + byte_size) of region `name`: NOT_FOUND when it is not registered,
  // INVALID_ARGUMENT when the range does not fit in it or the object no longer covers the region
  // (SharedMemoryRegion::CheckStillBacked; the message names region and sizes).
  absl::StatusOr<SharedMemorySpan> Find(const std::string& name, uint64_t offset, uint64_t byte_size) const;
  size_t size() const;

 private:
  const HostMemoryPinner pinner_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGISTRY_H_
