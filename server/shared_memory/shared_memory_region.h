// SharedMemoryRegion: one registered window [offset, offset + byte_size) of a POSIX shared-memory
// object (shm_open key), mapped read-write into the server; or (kind kCuda) a client's GPU memory
// opened from a CUDA IPC handle, whose data() is a device pointer. Immutable once mapped; unmapped
// (closed) by the destructor. The registry owns it through a shared_ptr and every request that reads or writes it
// holds another, so a region unregistered while requests use it stays mapped until they finish.
// Any thread may read its fields; callers coordinate writes to its bytes (one request per output).
#ifndef CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGION_H_
#define CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/request_region.h"
#include "server/shared_memory/mapping_watch.h"

namespace chronoserve::server {

// Page-locks host memory for direct DMA (cudaHostRegister on a GPU server). Returns a token whose
// destruction undoes it, or nullptr when the memory stays pageable (no GPU, or the call failed).
using HostMemoryPinner = std::function<std::shared_ptr<void>(void* data, size_t bytes)>;

// Opens a client's CUDA IPC handle (`raw_handle`: a cudaIpcMemHandle_t's bytes) for memory on GPU
// `device_id` of at least `byte_size` bytes: sets `*data` to the device pointer and returns a token
// whose destruction closes it (cudaIpcCloseMemHandle). Errors name what failed. Set only on a
// server with a GPU (backend/cuda_ipc.h).
using DeviceMemoryOpener = std::function<absl::StatusOr<std::shared_ptr<void>>(
    const std::string& raw_handle, int64_t device_id, uint64_t byte_size, char** data)>;

// Where a region's bytes are: a POSIX object mapped into the server, or a client's GPU memory.
enum class SharedMemoryKind { kSystem, kCuda };

class SharedMemoryRegion final : public RequestRegion {
 public:
  // Opens `key` with shm_open(O_RDWR) and maps the window. NOT_FOUND when the object does not
  // exist, INVALID_ARGUMENT when it is smaller than offset + byte_size or byte_size is 0, and the
  // errno text for any failing system call; every message names the region and the key.
  // With a `pinner`, the mapping is also page-locked (a failure to pin is not an error: the
  // region then takes the copying path).
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Map(const std::string& name,
                                                                 const std::string& key,
                                                                 uint64_t offset, uint64_t byte_size,
                                                                 const HostMemoryPinner& pinner = nullptr);
  // A client's GPU memory: `byte_size` bytes at device pointer `data` on GPU `device_id`, kept
  // open by `handle` (the opener's token).
  static std::unique_ptr<SharedMemoryRegion> Device(const std::string& name, int64_t device_id, uint64_t byte_size,
                                                    char* data, std::shared_ptr<void> handle);
  ~SharedMemoryRegion() override;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }
  SharedMemoryKind kind() const { return kind_; }
  // The GPU a kCuda region's memory is on; -1 for a system region.
  int64_t device_id() const { return device_id_; }
  // First byte of the window (not of the object); a device pointer for a kCuda region.
  char* data() const { return data_; }
  bool on_device() const { return kind_ == SharedMemoryKind::kCuda; }
  // Page-locked for the GPU: a worker may copy between it and the device without staging.
  bool host_pinned() const { return kind_ == SharedMemoryKind::kSystem && pin_ != nullptr; }
  // OK while the object still covers the window. A client that shrinks (ftruncate) the object
  // after registering it would make the server's next read or write of the lost pages fault
  // (SIGBUS), so every request checks this when it arrives and again when it finishes (one fstat);
  // INVALID_ARGUMENT names the region, the key and both sizes. A shrink between the two checks that
  // a copy runs into is caught by the region's MappingWatch instead of killing the server: the
  // window is then the server's own zero-filled memory for good, and this says so (unregister the
  // region and register it again).
  absl::Status CheckStillBacked() const override;

 private:
  SharedMemoryRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size, int fd,
                     void* mapping, size_t mapping_bytes, char* data);

  SharedMemoryKind kind_ = SharedMemoryKind::kSystem;
  int64_t device_id_ = -1;
  const std::string name_;
  const std::string key_;
  const uint64_t offset_;
  const uint64_t byte_size_;
  const int fd_;               // the object, kept open for CheckStillBacked; closed by the destructor (-1: kCuda)
  void* const mapping_;        // what mmap returned (page-aligned, may start before `offset`); null: kCuda
  const size_t mapping_bytes_;
  char* const data_;
  std::shared_ptr<void> pin_;  // released (unpinned) before the mapping goes; a kCuda region's IPC handle
  std::unique_ptr<MappingWatch> watch_;  // a kSystem region's mapping, watched for SIGBUS; ended before munmap
  mutable std::atomic<bool> lost_logged_{false};  // the loss is logged once (WARNING)
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_SHARED_MEMORY_SHARED_MEMORY_REGION_H_
