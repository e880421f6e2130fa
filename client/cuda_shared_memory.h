// CudaSharedMemory: GPU memory this process allocates (cudaMalloc) to pass tensors to a server on
// the same machine through Triton's cuda_shared_memory extension (docs/SHARED_MEMORY.md): the server
// opens it by its CUDA IPC handle and copies inputs from it and outputs into it on the device. The
// destructor frees it. As with SystemSharedMemory the bytes are the caller's to coordinate: write an
// input before sending the request that reads it, read an output after its response arrived.
// Write and Read are synchronous copies (cudaMemcpy) between this host memory and the region.
// Each call works on the region's GPU and then leaves the calling thread with the CUDA context it had
// before (none, on a thread that never used CUDA), so a region on GPU 1 makes no context on GPU 0.
//
// Only in builds whose LibTorch has CUDA (CHRONOSERVE_WITH_CUDA): elsewhere Create() answers
// FAILED_PRECONDITION and Available() is false, so a CPU-only client says so instead of failing later.
//
//   ASSIGN_OR_RETURN(auto gpu, CudaSharedMemory::Create(0, 1 << 20));
//   RETURN_IF_ERROR(gpu->Write(0, bytes.data(), bytes.size()));
//   RETURN_IF_ERROR(client.RegisterCudaSharedMemory("inputs", gpu->raw_handle(), gpu->device_id(), gpu->byte_size()));
//   ... Infer with Tensor::shared_memory = {"inputs", bytes.size()} ...
//   RETURN_IF_ERROR(client.UnregisterCudaSharedMemory("inputs"));   // then `gpu` may go
#ifndef CHRONOSERVE_CLIENT_CUDA_SHARED_MEMORY_H_
#define CHRONOSERVE_CLIENT_CUDA_SHARED_MEMORY_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chronoserve::client {

class CudaSharedMemory {
 public:
  // True when this build can allocate CUDA shared memory (it links the CUDA runtime).
  static bool Available();
  // Allocates `byte_size` (> 0) bytes on GPU `device_id` and takes their IPC handle. Errors name
  // the device and size and give CUDA's message (no such device, out of memory).
  static absl::StatusOr<std::unique_ptr<CudaSharedMemory>> Create(int device_id, size_t byte_size);
  ~CudaSharedMemory();
  CudaSharedMemory(const CudaSharedMemory&) = delete;
  CudaSharedMemory& operator=(const CudaSharedMemory&) = delete;

  // The 64-byte cudaIpcMemHandle_t, for CudaSharedMemoryRegisterRequest.raw_handle.
  const std::string& raw_handle() const { return raw_handle_; }
  int device_id() const { return device_id_; }
  size_t byte_size() const { return byte_size_; }

  // `bytes` bytes from host `src` to the region at `offset`, or from the region to host `dst`;
  // both return when the copy is done: the bytes are in the region (Write synchronizes the copy,
  // which from pageable memory may return once staged) or in `dst`. OUT_OF_RANGE past the end; CUDA's message on failure.
  absl::Status Write(size_t offset, const void* src, size_t bytes) const;
  absl::Status Read(size_t offset, size_t bytes, void* dst) const;
  // Every byte set to `value` (so a test can tell a stale region from a written one).
  absl::Status Fill(int value) const;

 private:
  CudaSharedMemory(int device_id, size_t byte_size, void* data, std::string raw_handle)
      : device_id_(device_id), byte_size_(byte_size), data_(data), raw_handle_(std::move(raw_handle)) {}
  absl::Status CheckRange(const char* what, size_t offset, size_t bytes) const;

  const int device_id_;
  const size_t byte_size_;
  void* const data_;
  const std::string raw_handle_;
};

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_CUDA_SHARED_MEMORY_H_
