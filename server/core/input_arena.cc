#include "server/core/input_arena.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chronoserve::server {

absl::StatusOr<std::shared_ptr<InputArena>> InputArena::Create(int inputs, size_t capacity, bool pinned,
                                                               const Allocate& allocate) {
  if (inputs <= 0 || capacity == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input arena: needs at least one input and some bytes (", inputs, " inputs, ", capacity,
                     " bytes)"));
  }
  std::shared_ptr<InputArena> arena(new InputArena(capacity, pinned));
  arena->rings_.resize(inputs);
  for (Ring& ring : arena->rings_) {
    absl::StatusOr<std::shared_ptr<char>> memory = allocate(capacity);
    if (!memory.ok()) return memory.status();
    if (*memory == nullptr) return absl::ResourceExhaustedError(absl::StrCat("input arena: no ", capacity, " bytes"));
    ring.memory = *std::move(memory);
  }
  return arena;
}

InputArena::Lease::Lease(Lease&& other) noexcept
    : arena_(std::move(other.arena_)), block_(other.block_) {}  // `other` is left not held

InputArena::Lease& InputArena::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Reset();
    arena_ = std::move(other.arena_);  // `other` is left not held
    block_ = other.block_;
  }
  return *this;
}

void InputArena::Lease::Reset() {
  if (arena_ == nullptr) return;
  arena_->Free(block_);
  arena_ = nullptr;
}

bool InputArena::Fit(int k, size_t bytes, Part* part) const {
  const Ring& ring = rings_[k];
  if (blocks_.empty()) {
    if (bytes > capacity_) return false;
    *part = Part{0, false};
    return true;
  }
  const size_t tail = blocks_.front().parts[k].offset;  // the oldest region still held (or not reclaimed)
  if (ring.wrapped) {  // free: [head, tail)
    if (tail - ring.head < bytes) return false;
    *part = Part{ring.head, false};
    return true;
  }
  // Free: [head, capacity) and [0, tail).
  if (capacity_ - ring.head >= bytes) {
    *part = Part{ring.head, false};
    return true;
  }
  if (bytes > tail) return false;
  *part = Part{0, true};
  return true;
}

InputArena::Lease InputArena::Reserve(const size_t* sizes, char** out) {
  Block block;
  block.parts.resize(rings_.size());
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    for (size_t k = 0; k < rings_.size(); ++k) {
      if (!Fit(static_cast<int>(k), sizes[k], &block.parts[k])) return Lease();
    }
    for (size_t k = 0; k < rings_.size(); ++k) {
      Ring& ring = rings_[k];
      ring.head = block.parts[k].offset + sizes[k];
      if (block.parts[k].starts_lap) ring.wrapped = true;
      out[k] = ring.memory.get() + block.parts[k].offset;
    }
    id = front_block_ + blocks_.size();
    blocks_.push_back(std::move(block));
    ++live_;
  }
  return Lease(shared_from_this(), id);
}

void InputArena::Free(uint64_t id) {
  absl::MutexLock lock(&mu_);
  blocks_[id - front_block_].freed = true;
  --live_;
  while (!blocks_.empty() && blocks_.front().freed) {
    blocks_.pop_front();
    ++front_block_;
    if (blocks_.empty()) {
      for (Ring& ring : rings_) {  // all free: start again at 0
        ring.head = 0;
        ring.wrapped = false;
      }
      break;
    }
    // The oldest region left is the one that wrapped its ring: nothing is held above it any more.
    for (size_t k = 0; k < rings_.size(); ++k) {
      if (blocks_.front().parts[k].starts_lap) rings_[k].wrapped = false;
    }
  }
}

size_t InputArena::live_regions() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

}  // namespace chronoserve::server
