// LentBufferPool: the host buffers a worker's outputs land in (page-locked on a GPU), lent to the
// transport once a batch has landed, so that a response goes to gRPC from the buffer itself and
// not from a copy of it (OutputTensor::lend_to). A lent buffer comes back to the pool when its
// owner is released, on whatever thread gRPC drops the last slice viewing it; the worker then lands
// a later batch in it.
//
// The pool never frees a buffer while it lives: freeing page-locked memory synchronises the device
// (TIMING.md lesson 7), which must not happen on a request's path. A buffer that grew too small
// stays in the pool for smaller outputs. Lending is bounded (Limits): past the bound the caller
// keeps its buffer and copies, as without a pool, so a slow client cannot pin unbounded memory.
//
// Thread-safe. Hold it by the std::shared_ptr Create returns: lent owners keep the pool alive, so
// it is destroyed (and its buffers freed, with Memory::free) after both its user and the last
// response sent from it are gone.
#ifndef CHRONOSERVE_SERVER_BACKEND_LENT_BUFFER_POOL_H_
#define CHRONOSERVE_SERVER_BACKEND_LENT_BUFFER_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace chronoserve::server {

class LentBufferPool : public std::enable_shared_from_this<LentBufferPool> {
 public:
  struct Buffer {
    char* data = nullptr;
    size_t capacity = 0;
  };
  // How the pool's buffers are made and freed (cudaHostAlloc / cudaFreeHost on a GPU).
  struct Memory {
    std::function<absl::StatusOr<char*>(size_t bytes)> allocate;
    std::function<void(char*)> free;
  };
  // What may be lent at once; beyond either bound Lend refuses.
  struct Limits {
    int max_lent = 32;
    size_t max_lent_bytes = size_t{64} << 20;
  };

  static std::shared_ptr<LentBufferPool> Create(Memory memory, Limits limits);
  static std::shared_ptr<LentBufferPool> Create(Memory memory) { return Create(std::move(memory), Limits()); }
  ~LentBufferPool();  // frees every buffer: all are back by then
  LentBufferPool(const LentBufferPool&) = delete;
  LentBufferPool& operator=(const LentBufferPool&) = delete;

  // A buffer of at least `bytes` (> 0): the smallest free one that fits, else a new one with room
  // to grow (1.5x, at least 4 KiB). The caller holds it until Put or Lend.
  absl::StatusOr<Buffer> Take(size_t bytes);
  // Gives a buffer taken and not lent back.
  void Put(Buffer buffer);
  // Whether Lend would take `bytes` more now.
  bool CanLend(size_t bytes) const;
  // Lends `buffer` (taken from this pool): the owner returned puts it back when released, from any
  // thread. Null when the limits are reached: the caller still holds the buffer.
  std::shared_ptr<const void> Lend(Buffer buffer);

  // For tests and logs.
  int lent() const;
  size_t lent_bytes() const;
  size_t buffers() const;  // every buffer the pool has made, free, held or lent

 private:
  LentBufferPool(Memory memory, Limits limits) : memory_(std::move(memory)), limits_(limits) {}
  bool CanLendLocked(size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Return(Buffer buffer);

  const Memory memory_;
  const Limits limits_;
  mutable absl::Mutex mu_;
  std::vector<Buffer> free_ ABSL_GUARDED_BY(mu_);
  std::vector<char*> all_ ABSL_GUARDED_BY(mu_);
  int lent_ ABSL_GUARDED_BY(mu_) = 0;
  size_t lent_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_BACKEND_LENT_BUFFER_POOL_H_
