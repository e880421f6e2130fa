// Page-locking memory the server did not allocate (a client's shared-memory mapping) so a GPU
// worker can DMA straight between it and the device, skipping its pinned staging copy. No CUDA
// types here: the function is empty on CPU builds and on machines without a GPU.
#ifndef CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_
#define CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace chronoserve::server {

// pin(data, bytes) page-locks [data, data + bytes) for every GPU (cudaHostRegister, portable) and
// returns a token that unpins when destroyed, or nullptr (logged) when the call fails. Any thread:
// both calls run with a GPU current that a worker already uses, never creating a context elsewhere.
using HostPinFunction = std::function<std::shared_ptr<void>(void* data, size_t bytes)>;

// The CUDA pinner when this build has CUDA and a GPU is visible; otherwise an empty function.
HostPinFunction MakeCudaHostPinner();

// open(raw_handle, device_id, byte_size, &data) opens a client's GPU memory from the bytes of its
// cudaIpcMemHandle_t (cudaIpcOpenMemHandle on GPU `device_id`), checks that the allocation holds at
// least `byte_size` bytes, sets `data` to its device pointer and returns a token that closes it when
// destroyed (on any thread). INVALID_ARGUMENT for a GPU that does not exist, a handle CUDA refuses
// (e.g. one made in this process, or already closed) or an allocation smaller than byte_size.
// The signature of SharedMemoryRegistry's DeviceMemoryOpener.
using DeviceOpenFunction = std::function<absl::StatusOr<std::shared_ptr<void>>(
    const std::string& raw_handle, int64_t device_id, uint64_t byte_size, char** data)>;

// The CUDA IPC opener when this build has CUDA and a GPU is visible; otherwise an empty function.
DeviceOpenFunction MakeCudaIpcOpener();

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_
