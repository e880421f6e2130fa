// SystemSharedMemory: a POSIX shared-memory object this process creates (shm_open with
// O_CREAT|O_EXCL, ftruncate, mmap) to pass tensors to a server on the same machine through
// Triton's system_shared_memory extension (docs/SHARED_MEMORY.md). The destructor unmaps it and
// unlinks the key, so nothing is left in /dev/shm. The bytes are the caller's to coordinate: write
// an input before sending the request that reads it, read an output after its response arrived.
//
//   ASSIGN_OR_RETURN(auto shm, SystemSharedMemory::Create("/my_inputs", 1 << 20));
//   std::memcpy(shm->data(), bytes.data(), bytes.size());
//   RETURN_IF_ERROR(client.RegisterSystemSharedMemory("inputs", shm->key(), shm->byte_size()));
//   ... Infer with Tensor::shared_memory = {"inputs", bytes.size()} ...
//   RETURN_IF_ERROR(client.UnregisterSystemSharedMemory("inputs"));   // then `shm` may go
#ifndef CHRONOSERVE_CLIENT_SYSTEM_SHARED_MEMORY_H_
#define CHRONOSERVE_CLIENT_SYSTEM_SHARED_MEMORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace chronoserve::client {

class SystemSharedMemory {
 public:
  // Creates and maps a new object of `byte_size` (> 0) bytes, zero-filled, its pages allocated and
  // mapped up front (so no request pays their page faults). `key` is a POSIX
  // shared-memory name ("/name"; the leading '/' is added when missing). ALREADY_EXISTS when the
  // key is taken (never reuses another process's object); the errno text on other failures.
  static absl::StatusOr<std::unique_ptr<SystemSharedMemory>> Create(const std::string& key, size_t byte_size);
  ~SystemSharedMemory();
  SystemSharedMemory(const SystemSharedMemory&) = delete;
  SystemSharedMemory& operator=(const SystemSharedMemory&) = delete;

  // The name to register with the server (SystemSharedMemoryRegisterRequest.key).
  const std::string& key() const { return key_; }
  size_t byte_size() const { return byte_size_; }
  char* data() const { return data_; }

 private:
  SystemSharedMemory(std::string key, size_t byte_size, char* data)
      : key_(std::move(key)), byte_size_(byte_size), data_(data) {}

  const std::string key_;
  const size_t byte_size_;
  char* const data_;
};

}  // namespace chronoserve::client

#endif  // CHRONOSERVE_CLIENT_SYSTEM_SHARED_MEMORY_H_
