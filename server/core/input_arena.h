// InputArena: a model's rings of host memory, one per model input, into which the gRPC thread that
// received a request copies that request's input bytes (while they are still in its cache). The
// requests of one batch then usually sit back to back in each ring, in the order they were
// received, so the worker hands each input's run of bytes to the device as it is: no gather copy on
// the worker, whose reads of bytes another core wrote were the served launch's largest extra cost
// (BENCHMARKS §17, §26). On a GPU the rings are page-locked, so the one host-to-device copy per
// input reads them in place.
//
// A request holds its regions through a Lease until it is destroyed (after its answer was handed to
// gRPC, so after the batch's copies have run). Regions are freed in any order; a ring's space comes
// back as its oldest regions are freed. Reserve never waits: when a ring has no contiguous room the
// request keeps its bytes where they are and the worker gathers them as before. So the arena bounds
// the memory it holds (inputs x capacity) and never refuses a request.
//
// Thread-safe: Reserve from gRPC threads, Lease destruction from whichever thread ends a request.
#ifndef CHRONOSERVE_SERVER_CORE_INPUT_ARENA_H_
#define CHRONOSERVE_SERVER_CORE_INPUT_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace chronoserve::server {

class InputArena : public std::enable_shared_from_this<InputArena> {
 public:
  // Host memory of `bytes` (page-locked where the caller says so), freed when the last copy goes.
  using Allocate = std::function<absl::StatusOr<std::shared_ptr<char>>(size_t bytes)>;

  // Ordinary (pageable) host memory of `bytes`: what a CPU instance gives the arena.
  static std::shared_ptr<char> OrdinaryMemory(size_t bytes) {
    return std::shared_ptr<char>(new char[bytes], std::default_delete<char[]>());
  }

  // `inputs` rings of `capacity` bytes each, from `allocate`. `pinned`: the memory is page-locked.
  static absl::StatusOr<std::shared_ptr<InputArena>> Create(int inputs, size_t capacity, bool pinned,
                                                            const Allocate& allocate);

  // One request's regions; frees them when destroyed (or Reset). Movable, not copyable.
  class Lease {
   public:
    Lease() = default;
    ~Lease() { Reset(); }
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return arena_ != nullptr; }
    void Reset();

   private:
    friend class InputArena;
    Lease(std::shared_ptr<InputArena> arena, uint64_t block) : arena_(std::move(arena)), block_(block) {}
    std::shared_ptr<InputArena> arena_;
    uint64_t block_ = 0;
  };

  // Reserves sizes[i] bytes in ring i for every input at once, all or none; on success out[i] is
  // the start of input i's region. A Lease that is not held: some ring had no contiguous room.
  // `sizes` and `out` have inputs() entries.
  Lease Reserve(const size_t* sizes, char** out);

  int inputs() const { return static_cast<int>(rings_.size()); }
  size_t capacity() const { return capacity_; }
  bool pinned() const { return pinned_; }
  // Regions reserved and not yet freed (for tests and diagnostics).
  size_t live_regions() const;

 private:
  struct Ring {
    std::shared_ptr<char> memory;
    size_t head = 0;       // where the next region starts
    bool wrapped = false;  // the newest regions start again below the oldest live one
  };
  // One request's region in one ring.
  struct Part {
    size_t offset = 0;
    bool starts_lap = false;  // this region wrapped its ring back to offset 0
  };
  struct Block {
    absl::InlinedVector<Part, 2> parts;  // one per ring
    bool freed = false;
  };

  InputArena(size_t capacity, bool pinned) : capacity_(capacity), pinned_(pinned) {}
  // Where `bytes` would start in ring `k`, or false when it has no contiguous room.
  bool Fit(int k, size_t bytes, Part* part) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Free(uint64_t block);

  const size_t capacity_;
  const bool pinned_;
  std::vector<Ring> rings_;  // memory set at Create; head/wrapped under mu_
  mutable absl::Mutex mu_;
  std::deque<Block> blocks_ ABSL_GUARDED_BY(mu_);  // live (and freed, not yet reclaimed), oldest first
  uint64_t front_block_ ABSL_GUARDED_BY(mu_) = 0;  // id of blocks_.front()
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace chronoserve::server

#endif  // CHRONOSERVE_SERVER_CORE_INPUT_ARENA_H_
