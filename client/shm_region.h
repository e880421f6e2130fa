// ShmRegion: one region a client made for Triton's shared-memory extensions, either POSIX shared
// memory (SystemSharedMemory) or its own GPU memory (CudaSharedMemory, builds with CUDA), with the
// RPCs that register it with a server under a name and unregister it, and its bytes written and read
// from the host. chronobench's slots and bench_serve_latency's regions are these.
//
//   ASSIGN_OR_RETURN(auto region, ShmRegion::System("/my_inputs", 1 << 20));   // or ShmRegion::Cuda(0, ...)
//   RETURN_IF_ERROR(region->Write(0, bytes.data(), bytes.size()));
//   RETURN_IF_ERROR(region->Register(client.stub(), "inputs", absl::Now() + absl::Seconds(10)));
//   ... requests naming "inputs" ...
//   RETURN_IF_ERROR(region->Unregister(client.stub(), "inputs", absl::Now() + absl::Seconds(10)));
#ifndef CHRONOSERVE_CLIENT_SHM_REGION_H_
#define CHRONOSERVE_CLIENT_SHM_REGION_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client {

class ShmRegion {
 public:
  // A new POSIX shared-memory object `key` of `bytes` (SystemSharedMemory::Create's errors).
  static absl::StatusOr<std::unique_ptr<ShmRegion>> System(const std::string& key, size_t bytes);
  // `bytes` of GPU memory on `device_id` (CudaSharedMemory::Create's errors; FAILED_PRECONDITION
  // in a build without CUDA).
  static absl::StatusOr<std::unique_ptr<ShmRegion>> Cuda(int device_id, size_t bytes);

  virtual ~ShmRegion() = default;
  // Register...SharedMemory / Unregister...SharedMemory of the region's kind under `name`, each
  // call ending by `deadline`; the server's status.
  virtual absl::Status Register(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                                absl::Time deadline) const = 0;
  virtual absl::Status Unregister(inference::GRPCInferenceService::Stub* stub, const std::string& name,
                                  absl::Time deadline) const = 0;
  // Host bytes into the region at `offset`, or out of it; done when they return (an error only
  // from a CUDA copy, or OUT_OF_RANGE for a range past the region's end).
  virtual absl::Status Write(size_t offset, const char* src, size_t bytes) const = 0;
  virtual absl::Status Read(size_t offset, size_t bytes, char* dst) const = 0;
  virtual size_t byte_size() const = 0;
};

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_SHM_REGION_H_
