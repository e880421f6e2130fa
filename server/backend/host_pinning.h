// Page-locking memory the server did not allocate (a client's shared-memory mapping) so a GPU
// worker can DMA straight between it and the device, skipping its pinned staging copy. No CUDA
// types here: the function is empty on CPU builds and on machines without a GPU.
#ifndef CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_
#define CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_

#include <cstddef>
#include <functional>
#include <memory>

namespace chronoserve::server {

// pin(data, bytes) page-locks [data, data + bytes) for every GPU (cudaHostRegister, portable) and
// returns a token that unpins when destroyed, or nullptr (logged) when the call fails. Any thread:
// both calls run with a GPU current that a worker already uses, never creating a context elsewhere.
using HostPinFunction = std::function<std::shared_ptr<void>(void* data, size_t bytes)>;

// The CUDA pinner when this build has CUDA and a GPU is visible; otherwise an empty function.
HostPinFunction MakeCudaHostPinner();

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_HOST_PINNING_H_
